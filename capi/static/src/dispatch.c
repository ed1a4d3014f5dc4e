/*
 * The consumer entry points of <dat2/udat.h> for libudat.a: each
 * dispatches through the provider table its first handle points at, as
 * libdat2 does. A first handle that no provider of this process handed
 * out (null, garbage, misaligned) is refused before anything is read
 * through it. The IA handle of libudat.a is the provider's own, so no
 * handle table stands in between.
 *
 * The functions themselves are generated from capi/entries.list, the one
 * list of the provider table's slots (consumer_calls.inc).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>

/* capi/src/handles.rs, `Spaces`: where the handle spaces of this process
 * start, and how many bytes of them are readable. */
struct udat_spaces {
	uintptr_t base;
	uintptr_t extent;
};

extern const struct udat_spaces *const udat_handle_spaces;

/* Whether a provider of this process handed out `handle`: an aligned word
 * of a readable handle space that holds a provider word. Inline, so that
 * a dispatch stays a jump into the provider (handles.rs: issued). */
static inline int udat_handle_issued(DAT_HANDLE handle)
{
	uintptr_t extent = __atomic_load_n(&udat_handle_spaces->extent, __ATOMIC_ACQUIRE);
	uintptr_t off = (uintptr_t)handle - __atomic_load_n(&udat_handle_spaces->base, __ATOMIC_RELAXED);

	return off < extent && (off & (sizeof(uintptr_t) - 1)) == 0 &&
	       __atomic_load_n((const uintptr_t *)handle, __ATOMIC_RELAXED) != 0;
}

#include "consumer_calls.inc"
