/*
 * The provider table's evd_wait_func. POSIX makes a blocking wait a
 * cancellation point, and consumers cancel threads blocked in dat_evd_wait
 * (MVAPICH2 cancels its connection server thread at MPI_Finalize). A
 * cancellation unwinds the thread's stack, which a frame of the provider's
 * Rust cannot be unwound through: so the provider steps the wait with
 * cancellation disabled, and the thread sleeps here, in C, between the
 * steps, where the consumer's cancellation state holds. A cancelled wait
 * gives up its EVD's waiter place on the way out.
 */
#include <errno.h>
#include <pthread.h>
#include "ext.h"

struct abandoned {
	const udat_provider_head *provider;
	DAT_EVD_HANDLE evd;
	udat_wait *wait;
};

static void abandon(void *arg)
{
	const struct abandoned *a = arg;

	a->provider->evd_wait_abandon(a->evd, a->wait);
}

DAT_RETURN udat_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT *event,
			 DAT_COUNT *nmore)
{
	udat_wait wait = { .begun = 0 };
	struct abandoned a = { .evd = evd, .wait = &wait };
	DAT_RETURN ret;
	int state, n, err;

	if (evd == DAT_HANDLE_NULL)
		return DAT_INVALID_HANDLE;
	a.provider = *(const udat_provider_head *const *)evd;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
	for (;;) {
		wait.block = 0;
		ret = a.provider->evd_wait(evd, timeout, threshold, event, nmore, &wait);
		if (ret != DAT_SUCCESS || !wait.block)
			break;
		pthread_cleanup_push(abandon, &a);
		pthread_setcancelstate(state, NULL);
		n = poll(wait.fds, (nfds_t)wait.nfds, wait.timeout_ms);
		err = errno;
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		pthread_cleanup_pop(0);
		wait.woke = n > 0 ? UDAT_WOKE_ACTIVITY : n < 0 && err == EINTR ? UDAT_WOKE_INTERRUPTED : UDAT_WOKE_TIMEOUT;
	}
	pthread_setcancelstate(state, NULL);
	return ret;
}
