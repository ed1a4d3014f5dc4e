/*
 * The IB extension's posts (<dat2/dat_ib_extensions.h>) as udat's
 * extended-op slot reads them from the va_list of dat_extension_op, the
 * one part of the provider ABI that Rust cannot take.
 */
#ifndef UDAT_EXT_H
#define UDAT_EXT_H

#include <stdarg.h>
#include <netinet/in.h>
#include <poll.h>
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

/* One counters call, its arguments as the dat_ib_*_counter(s) macros give them. */
typedef struct udat_ext_counters {
	DAT_IB_OP op;
	int counter; /* query, print: the counter, or its kind's *_ALL_COUNTERS */
	DAT_UINT64 *out; /* query */
	int reset; /* query, print */
	int type; /* start, stop: a DAT_IA_COUNTER_TYPE */
} udat_ext_counters;

typedef DAT_RETURN (*udat_ext_counters_fn)(DAT_HANDLE handle, const udat_ext_counters *counters);

/*
 * The head of every udat provider: the table libdat2 dispatches through
 * (a handle's first word points at it), then the provider's entries for
 * extended posts and for counters.
 */
/*
 * A dat_evd_wait between its steps (c/wait.c): the provider's part of the
 * wait, and what the thread sleeps on until the next step. The thread
 * sleeps in C, so that a cancellation, which unwinds the thread's stack,
 * finds no frame of the provider's there.
 */
enum { UDAT_WAIT_FDS = 4 };
enum { UDAT_WOKE_TIMEOUT, UDAT_WOKE_ACTIVITY, UDAT_WOKE_INTERRUPTED };

typedef struct udat_wait {
	DAT_UINT64 state[4]; /* the provider's; begun says whether it holds a wait */
	int begun;
	int block; /* the step asks the thread to sleep on fds, then step again */
	int woke; /* what the sleep ended by: UDAT_WOKE_* */
	int timeout_ms;
	int nfds;
	struct pollfd fds[UDAT_WAIT_FDS];
} udat_wait;

typedef DAT_RETURN (*udat_wait_fn)(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT *event,
				   DAT_COUNT *nmore, udat_wait *wait);
typedef void (*udat_wait_abandon_fn)(DAT_EVD_HANDLE evd, udat_wait *wait);

typedef struct udat_provider_head {
	DAT_PROVIDER table;
	udat_ext_fn post;
	udat_ext_counters_fn counters;
	udat_wait_fn evd_wait;
	udat_wait_abandon_fn evd_wait_abandon;
} udat_provider_head;

DAT_RETURN udat_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT *event,
			 DAT_COUNT *nmore);

DAT_RETURN udat_extendedop(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args);

/* dat_ib_open_query of the provider registered as `name` (capi/src/entry/query.rs). */
typedef DAT_RETURN (*udat_open_query_fn)(const char *name, DAT_IA_HANDLE *ia, DAT_IA_ATTR_MASK ia_mask,
					 DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR_MASK provider_mask,
					 DAT_PROVIDER_ATTR *provider_attr);

void udat_ext_set_open_query(udat_open_query_fn f);

#endif
