/*
 * A thread cancelled while it blocks in dat_evd_wait, as MVAPICH2 cancels
 * its connection server thread at MPI_Finalize (asynchronous cancellation)
 * and as a deferred cancellation finds it in its wait: the thread ends,
 * the EVD's waiter place is free again, and the objects free and the IA
 * closes gracefully.
 *
 *   cancel udat-softhca-mlx5_soft0
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <dat2/udat.h>

static int checks, failed;

static void check(int ok, const char *what)
{
	checks++;
	if (!ok) {
		failed++;
		printf("cancel: FAILED: %s\n", what);
	}
}

struct waiter {
	DAT_EVD_HANDLE evd;
	int type;
};

static void *wait_forever(void *arg)
{
	const struct waiter *w = arg;
	DAT_EVENT event;
	DAT_COUNT nmore;

	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	pthread_setcanceltype(w->type, NULL);
	for (;;)
		dat_evd_wait(w->evd, DAT_TIMEOUT_INFINITE, 1, &event, &nmore);
	return NULL;
}

int main(int argc, char **argv)
{
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, creq;
	DAT_PZ_HANDLE pz;
	DAT_PSP_HANDLE psp;
	DAT_EVENT event;
	DAT_COUNT nmore;
	const int types[] = { PTHREAD_CANCEL_ASYNCHRONOUS, PTHREAD_CANCEL_DEFERRED };

	if (argc != 2) {
		fprintf(stderr, "usage: cancel PROVIDER\n");
		return 2;
	}
	check(dat_ia_open(argv[1], 8, &async, &ia) == DAT_SUCCESS, "dat_ia_open");
	check(dat_pz_create(ia, &pz) == DAT_SUCCESS, "dat_pz_create");
	check(dat_evd_create(ia, 256, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &creq) == DAT_SUCCESS, "dat_evd_create");
	check(dat_psp_create(ia, 1024 + getpid(), creq, DAT_PSP_CONSUMER_FLAG, &psp) == DAT_SUCCESS,
	      "dat_psp_create");
	for (unsigned i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct waiter w = { .evd = creq, .type = types[i] };
		pthread_t thread;
		void *result = NULL;
		const char *type = types[i] == PTHREAD_CANCEL_ASYNCHRONOUS ? "asynchronous" : "deferred";
		char what[96];

		check(pthread_create(&thread, NULL, wait_forever, &w) == 0, "pthread_create");
		usleep(200 * 1000);
		snprintf(what, sizeof(what), "%s: pthread_cancel", type);
		check(pthread_cancel(thread) == 0, what);
		/* The thread never returns: joined, it was cancelled. (Its exit
		 * value is PTHREAD_CANCELED, except that glibc 2.36 leaves it
		 * unset when the cancellation is acted on as the thread gives
		 * its cancellation state back between two steps of the wait.) */
		int joined = pthread_join(thread, &result);
		snprintf(what, sizeof(what), "%s: the thread ends (join %d)", type, joined);
		check(joined == 0, what);
		/* The cancelled wait gave the EVD's one waiter place up. */
		snprintf(what, sizeof(what), "%s: the EVD takes a waiter again", type);
		check(DAT_GET_TYPE(dat_evd_wait(creq, 0, 1, &event, &nmore)) == DAT_TIMEOUT_EXPIRED, what);
	}
	check(dat_psp_free(psp) == DAT_SUCCESS, "dat_psp_free");
	check(dat_evd_free(creq) == DAT_SUCCESS, "dat_evd_free");
	check(dat_pz_free(pz) == DAT_SUCCESS, "dat_pz_free");
	check(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG) == DAT_SUCCESS, "dat_ia_close graceful");
	printf("cancel: %d checks, %d failed\n", checks, failed);
	return failed != 0;
}
