/*
 * The IB extension's posts (<dat2/dat_ib_extensions.h>) as udat's
 * extended-op slot reads them from the va_list of dat_extension_op, the
 * one part of the provider ABI that Rust cannot take.
 */
#ifndef UDAT_EXT_H
#define UDAT_EXT_H

#include <stdarg.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <dat2/dat_ib_extensions.h>

/* One extended post, its arguments in the order of the dat_ib_post_* macros. */
typedef struct udat_ext_post {
	DAT_IB_OP op;
	DAT_COUNT segments;
	const DAT_LMR_TRIPLET *local;
	DAT_DTO_COOKIE cookie;
	const DAT_RMR_TRIPLET *remote;
	DAT_UINT64 compare_add; /* compare (compare-and-swap), or add */
	DAT_UINT64 swap;
	DAT_UINT32 immediate;
	DAT_COMPLETION_FLAGS flags;
	const DAT_IB_ADDR_HANDLE *ah; /* UD send and AH free */
	DAT_CONTEXT cm; /* UD CM free */
} udat_ext_post;

typedef DAT_RETURN (*udat_ext_fn)(DAT_HANDLE handle, const udat_ext_post *post);

/*
 * The head of every udat provider: the table libdat2 dispatches through
 * (a handle's first word points at it), then the provider's entry for
 * extended posts.
 */
typedef struct udat_provider_head {
	DAT_PROVIDER table;
	udat_ext_fn post;
} udat_provider_head;

DAT_RETURN udat_extendedop(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args);

#endif
