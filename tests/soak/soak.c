/*
 * The soak: `soak IA SECONDS [WINDOW]` drives one thread-safe IA named
 * IA (opened with dat_ia_openv(…, DAT_TRUE)) from several threads at once
 * for SECONDS, and checks that nothing drifts. Written against
 * <dat2/udat.h> alone: `cargo xtask soak` links it with libudat.a on the
 * software HCA and with libdat2 (udat's plug-in) on rxe.
 *
 * The threads, each with objects of its own:
 *   traffic (2)  a connected pair; RDMA writes posted and reaped, every
 *                completion checked: a success, in order, exactly once
 *   churn        PZ, LMR, DTO EVD and EP created and freed, over and over
 *   connect      a pair connected through a PSP, writes, a graceful
 *                disconnect seen by both sides, the pair freed
 *   abrupt       an IA of its own opened, a pair connected with writes in
 *                flight, the IA closed abruptly
 *   overrun      an IA of its own whose DTO EVD holds fewer completions
 *                than its Endpoints post: the provider reports
 *                DAT_ASYNC_ERROR_EVD_OVERFLOW, no completion arrives
 *                twice, and the IA closes
 *
 * Every WINDOW seconds (10 by default) the main thread prints each
 * thread's cycles, the resident set and the open descriptors, and looks
 * at the IA's async EVD, which must stay silent. At the end it checks
 * that the figures stayed flat: each thread at least a third as fast over
 * the last third of the run as over the first, the descriptors within
 * FD_SLACK of the first window's, the resident set within RSS_CEILING of
 * it and, in a run of half an hour or more, within RSS_SLACK over the
 * last third. Any failure prints one line and exits 1.
 */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dat2/udat.h>

#define SIZE 4096
/* Writes a traffic thread keeps in flight, and its EVD's length. */
#define DEPTH 16
/* Writes a connect or abrupt cycle posts. */
#define BURST 4
/* The overrun thread's EVD length, and the writes it posts. */
#define SMALL_QLEN 1
#define OVERRUN_POSTS 96
#define PATIENCE_S 60
/* What the resident set may grow by in any run: the slots and handle
 * words the churned kinds write once each (docs/c-abi.md, "Resident
 * memory under churn": capacity times slot size plus 16 MiB a kind). */
#define RSS_CEILING (256L << 20)
/* A run of at least FLAT_RUN_S has reached those bounds by its last
 * third, where the resident set may then grow by RSS_SLACK at most. */
#define FLAT_RUN_S 1800
#define RSS_SLACK (4L << 20)
#define FD_SLACK 8
#define MAX_WINDOWS 4096

enum worker { TRAFFIC0, TRAFFIC1, CHURN, CONNECT, ABRUPT, OVERRUN, WORKERS };
static const char *const NAMES[WORKERS] = { "traffic", "traffic", "churn", "connect", "abrupt", "overrun" };
/* A connection qualifier per thread that connects. */
static const DAT_CONN_QUAL QUALS[WORKERS] = { 5101, 5102, 0, 5104, 5105, 5106 };

static char *ia_name;
static DAT_IA_HANDLE ia;
static DAT_IA_ADDRESS_PTR ia_address;
static atomic_int stop;
static atomic_long cycles[WORKERS];

static void fail(const char *who, const char *what, DAT_RETURN ret)
{
	const char *major = "?", *minor = "?";

	dat_strerror(ret, &major, &minor);
	fprintf(stderr, "soak: %s: %s: %s %s (0x%x)\n", who, what, major, minor, ret);
	exit(1);
}

static void check(DAT_RETURN ret, const char *who, const char *what)
{
	if (ret != DAT_SUCCESS)
		fail(who, what, ret);
}

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The next event of `evd`, which must be `want`; polled, yielding while
 * the EVD is empty. */
static DAT_EVENT next_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, const char *who, const char *what)
{
	DAT_EVENT event;
	double deadline = seconds() + PATIENCE_S;

	while (seconds() < deadline) {
		DAT_RETURN ret = dat_evd_dequeue(evd, &event);

		if (DAT_GET_TYPE(ret) == DAT_QUEUE_EMPTY) {
			sched_yield();
			continue;
		}
		check(ret, who, what);
		if (event.event_number != want) {
			fprintf(stderr, "soak: %s: %s: event 0x%x, expected 0x%x\n", who, what, event.event_number,
				want);
			exit(1);
		}
		return event;
	}
	fprintf(stderr, "soak: %s: %s: nothing in %d s\n", who, what, PATIENCE_S);
	exit(1);
}

/* Objects of one connected pair: Endpoint 0 connects, 1 accepts. */
struct pair {
	const char *who;
	DAT_IA_HANDLE ia;
	DAT_PZ_HANDLE pz;
	DAT_EVD_HANDLE dto, conn, cr;
	DAT_PSP_HANDLE psp;
	DAT_EP_HANDLE ep[2];
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lmr_context;
	DAT_RMR_CONTEXT rmr_context;
	char *buf;
	uint64_t posted, completed;
};

/* The pair's objects on `on`, connected through a PSP on `qual`, its DTO
 * EVD `qlen` long; with `requests`, each Endpoint takes that many
 * requests outstanding (dat_ep_modify before the connection). */
static void pair_open(struct pair *p, const char *who, DAT_IA_HANDLE on, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual,
		      DAT_COUNT qlen, DAT_COUNT requests)
{
	DAT_REGION_DESCRIPTION region;
	DAT_VLEN len;
	DAT_VADDR va;
	DAT_EVENT event;

	memset(p, 0, sizeof *p);
	p->who = who;
	p->ia = on;
	p->buf = calloc(1, 2 * SIZE);
	check(dat_pz_create(on, &p->pz), who, "dat_pz_create");
	check(dat_evd_create(on, qlen, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &p->dto), who, "dat_evd_create DTO");
	check(dat_evd_create(on, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &p->conn), who,
	      "dat_evd_create CONNECTION");
	check(dat_evd_create(on, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &p->cr), who, "dat_evd_create CR");
	check(dat_psp_create(on, qual, p->cr, DAT_PSP_CONSUMER_FLAG, &p->psp), who, "dat_psp_create");
	for (int i = 0; i < 2; i++) {
		check(dat_ep_create(on, p->pz, p->dto, p->dto, p->conn, NULL, &p->ep[i]), who, "dat_ep_create");
		if (requests) {
			DAT_EP_PARAM param;

			check(dat_ep_query(p->ep[i], DAT_EP_FIELD_ALL, &param), who, "dat_ep_query");
			param.ep_attr.max_request_dtos = requests;
			check(dat_ep_modify(p->ep[i], DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS, &param), who,
			      "dat_ep_modify");
		}
	}
	region.for_va = p->buf;
	check(dat_lmr_create(on, DAT_MEM_TYPE_VIRTUAL, region, 2 * SIZE, p->pz, DAT_MEM_PRIV_ALL_FLAG,
			     DAT_VA_TYPE_VA, &p->lmr, &p->lmr_context, &p->rmr_context, &len, &va),
	      who, "dat_lmr_create");
	check(dat_ep_connect(p->ep[0], addr, qual, DAT_TIMEOUT_INFINITE, 0, NULL, DAT_QOS_BEST_EFFORT,
			     DAT_CONNECT_DEFAULT_FLAG),
	      who, "dat_ep_connect");
	event = next_event(p->cr, DAT_CONNECTION_REQUEST_EVENT, who, "connection request");
	check(dat_cr_accept(event.event_data.cr_arrival_event_data.cr_handle, p->ep[1], 0, NULL), who,
	      "dat_cr_accept");
	next_event(p->conn, DAT_CONNECTION_EVENT_ESTABLISHED, who, "established");
	next_event(p->conn, DAT_CONNECTION_EVENT_ESTABLISHED, who, "established");
}

/* Free what `pair_open` made, in the order the pages allow. */
static void pair_free(struct pair *p)
{
	const char *who = p->who;

	for (int i = 0; i < 2; i++)
		check(dat_ep_free(p->ep[i]), who, "dat_ep_free");
	check(dat_lmr_free(p->lmr), who, "dat_lmr_free");
	check(dat_psp_free(p->psp), who, "dat_psp_free");
	check(dat_evd_free(p->cr), who, "dat_evd_free CR");
	check(dat_evd_free(p->conn), who, "dat_evd_free CONNECTION");
	check(dat_evd_free(p->dto), who, "dat_evd_free DTO");
	check(dat_pz_free(p->pz), who, "dat_pz_free");
	free(p->buf);
}

/* One 4 KiB write from Endpoint 0 into the second half of the buffer,
 * its cookie the number of writes posted before it. */
static DAT_RETURN pair_write(struct pair *p)
{
	DAT_LMR_TRIPLET iov = { .virtual_address = (DAT_VADDR)(uintptr_t)p->buf, .segment_length = SIZE,
				.lmr_context = p->lmr_context };
	DAT_RMR_TRIPLET rmr = { .rmr_context = p->rmr_context, .segment_length = SIZE,
				.virtual_address = (DAT_VADDR)(uintptr_t)(p->buf + SIZE) };
	DAT_DTO_COOKIE cookie = { .as_64 = p->posted };
	DAT_RETURN ret = dat_ep_post_rdma_write(p->ep[0], 1, &iov, cookie, &rmr, DAT_COMPLETION_DEFAULT_FLAG);

	if (ret == DAT_SUCCESS)
		p->posted++;
	return ret;
}

/* The next completion of the pair: a success, of the oldest write not yet
 * completed. A reliable connection completes its writes in order, so a
 * cookie out of order is one lost or one delivered twice. */
static void pair_reap(struct pair *p)
{
	DAT_EVENT e = next_event(p->dto, DAT_DTO_COMPLETION_EVENT, p->who, "write completion");
	DAT_DTO_COMPLETION_EVENT_DATA *d = &e.event_data.dto_completion_event_data;

	if (d->status != DAT_DTO_SUCCESS || d->user_cookie.as_64 != p->completed || d->ep_handle != p->ep[0]) {
		fprintf(stderr, "soak: %s: completion %llu status %d, expected %llu\n", p->who,
			(unsigned long long)d->user_cookie.as_64, d->status, (unsigned long long)p->completed);
		exit(1);
	}
	p->completed++;
}

/* Disconnect gracefully from Endpoint 0 and hear it on both sides. */
static void pair_disconnect(struct pair *p)
{
	check(dat_ep_disconnect(p->ep[0], DAT_CLOSE_GRACEFUL_FLAG), p->who, "dat_ep_disconnect");
	next_event(p->conn, DAT_CONNECTION_EVENT_DISCONNECTED, p->who, "disconnected");
	next_event(p->conn, DAT_CONNECTION_EVENT_DISCONNECTED, p->who, "disconnected");
}

static void *traffic(void *arg)
{
	enum worker w = (enum worker)(intptr_t)arg;
	struct pair p;

	pair_open(&p, NAMES[w], ia, ia_address, QUALS[w], DEPTH, 0);
	while (!atomic_load(&stop)) {
		while (p.posted - p.completed < DEPTH)
			check(pair_write(&p), p.who, "dat_ep_post_rdma_write");
		pair_reap(&p);
		atomic_fetch_add(&cycles[w], 1);
	}
	while (p.completed < p.posted)
		pair_reap(&p);
	pair_disconnect(&p);
	pair_free(&p);
	return NULL;
}

static void *churn(void *arg)
{
	const char *who = NAMES[CHURN];
	char *buf = calloc(1, SIZE);
	DAT_REGION_DESCRIPTION region = { .for_va = buf };

	(void)arg;
	while (!atomic_load(&stop)) {
		DAT_PZ_HANDLE pz;
		DAT_LMR_HANDLE lmr;
		DAT_LMR_CONTEXT lctx;
		DAT_RMR_CONTEXT rctx;
		DAT_VLEN len;
		DAT_VADDR va;
		DAT_EVD_HANDLE evd;
		DAT_EP_HANDLE ep;

		check(dat_pz_create(ia, &pz), who, "dat_pz_create");
		check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, SIZE, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
				     &lmr, &lctx, &rctx, &len, &va),
		      who, "dat_lmr_create");
		check(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd), who, "dat_evd_create");
		check(dat_ep_create(ia, pz, evd, evd, DAT_HANDLE_NULL, NULL, &ep), who, "dat_ep_create");
		check(dat_ep_free(ep), who, "dat_ep_free");
		check(dat_evd_free(evd), who, "dat_evd_free");
		check(dat_lmr_free(lmr), who, "dat_lmr_free");
		check(dat_pz_free(pz), who, "dat_pz_free");
		atomic_fetch_add(&cycles[CHURN], 1);
	}
	free(buf);
	return NULL;
}

static void *connect_cycles(void *arg)
{
	struct pair p;

	(void)arg;
	while (!atomic_load(&stop)) {
		pair_open(&p, NAMES[CONNECT], ia, ia_address, QUALS[CONNECT], DEPTH, 0);
		for (int i = 0; i < BURST; i++)
			check(pair_write(&p), p.who, "dat_ep_post_rdma_write");
		while (p.completed < p.posted)
			pair_reap(&p);
		pair_disconnect(&p);
		pair_free(&p);
		atomic_fetch_add(&cycles[CONNECT], 1);
	}
	return NULL;
}

/* An IA of worker `w`'s own, with a pair connected on it (as
 * `pair_open`); its async EVD in `async`. */
static DAT_IA_HANDLE open_own(enum worker w, struct pair *p, DAT_COUNT qlen, DAT_COUNT requests,
			      DAT_EVD_HANDLE *async)
{
	const char *who = NAMES[w];
	DAT_IA_HANDLE own;
	DAT_IA_ATTR attr;

	*async = DAT_HANDLE_NULL;
	check(dat_ia_openv(ia_name, 8, async, &own, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_TRUE), who,
	      "dat_ia_open");
	check(dat_ia_query(own, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL), who, "dat_ia_query");
	pair_open(p, who, own, attr.ia_address_ptr, QUALS[w], qlen, requests);
	return own;
}

/* Close worker `w`'s IA abruptly: everything goes with it, writes in
 * flight too. One cycle. */
static void close_own(enum worker w, struct pair *p, DAT_IA_HANDLE own)
{
	check(dat_ia_close(own, DAT_CLOSE_ABRUPT_FLAG), NAMES[w], "dat_ia_close abrupt");
	free(p->buf);
	atomic_fetch_add(&cycles[w], 1);
}

static void *abrupt(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		DAT_EVD_HANDLE async;
		struct pair p;
		DAT_IA_HANDLE own = open_own(ABRUPT, &p, DEPTH, 0, &async);

		for (int i = 0; i < BURST; i++)
			check(pair_write(&p), p.who, "dat_ep_post_rdma_write");
		close_own(ABRUPT, &p, own);
	}
	return NULL;
}

static void *overrun(void *arg)
{
	const char *who = NAMES[OVERRUN];

	(void)arg;
	while (!atomic_load(&stop)) {
		DAT_EVD_HANDLE async;
		struct pair p;
		DAT_IA_HANDLE own = open_own(OVERRUN, &p, SMALL_QLEN, OVERRUN_POSTS, &async);
		DAT_EVENT e;
		int overflowed = 0;
		uint64_t seen = 0;
		double deadline;

		/* Posts until the provider refuses one or enough are out; none
		 * reaped, so the CQ behind the EVD overruns. */
		while (p.posted < OVERRUN_POSTS && pair_write(&p) == DAT_SUCCESS)
			;
		deadline = seconds() + PATIENCE_S;
		while (!overflowed && seconds() < deadline) {
			DAT_RETURN ret = dat_evd_dequeue(async, &e);

			if (ret == DAT_SUCCESS && e.event_number == DAT_ASYNC_ERROR_EVD_OVERFLOW)
				overflowed = 1;
			else
				sched_yield();
			/* Completions that arrive meanwhile: each at most once, in
			 * order, whatever their status. */
			while (dat_evd_dequeue(p.dto, &e) == DAT_SUCCESS) {
				uint64_t c = e.event_data.dto_completion_event_data.user_cookie.as_64;

				if (e.event_number == DAT_DTO_COMPLETION_EVENT && (c < seen || c >= p.posted)) {
					fprintf(stderr, "soak: %s: completion %llu after %llu of %llu\n", who,
						(unsigned long long)c, (unsigned long long)seen,
						(unsigned long long)p.posted);
					exit(1);
				}
				if (e.event_number == DAT_DTO_COMPLETION_EVENT)
					seen = c + 1;
			}
		}
		if (!overflowed) {
			fprintf(stderr, "soak: %s: %llu writes to an EVD of %d: no DAT_ASYNC_ERROR_EVD_OVERFLOW\n",
				who, (unsigned long long)p.posted, SMALL_QLEN);
			exit(1);
		}
		close_own(OVERRUN, &p, own);
	}
	return NULL;
}

static long rss_bytes(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * sysconf(_SC_PAGESIZE);
}

static int fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

struct window {
	long cycles[WORKERS];
	long rss;
	int fds;
};

int main(int argc, char **argv)
{
	static struct window windows[MAX_WINDOWS];
	void *(*bodies[WORKERS])(void *) = { traffic, traffic, churn, connect_cycles, abrupt, overrun };
	pthread_t threads[WORKERS];
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
	DAT_IA_ATTR attr;
	double total, window, start;
	int n = 0, failed = 0;
	long last[WORKERS] = { 0 };

	if (argc < 3) {
		fprintf(stderr, "usage: soak IA SECONDS [WINDOW]\n");
		return 2;
	}
	ia_name = argv[1];
	total = atof(argv[2]);
	window = argc > 3 ? atof(argv[3]) : 10;
	if (total < 2 * window || total / window >= MAX_WINDOWS) {
		fprintf(stderr, "soak: SECONDS must hold at least two windows of %g s\n", window);
		return 2;
	}
	check(dat_ia_openv(ia_name, 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_TRUE), "main",
	      "dat_ia_open");
	check(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL), "main", "dat_ia_query");
	ia_address = attr.ia_address_ptr;
	for (int w = 0; w < WORKERS; w++)
		if (pthread_create(&threads[w], NULL, bodies[w], (void *)(intptr_t)w))
			fail("main", "pthread_create", DAT_INTERNAL_ERROR);
	printf("soak: %s, %g s in windows of %g s\n", ia_name, total, window);
	printf("%8s %9s %9s %9s %9s %9s %9s %9s %5s\n", "seconds", "traffic", "traffic", "churn", "connect", "abrupt",
	       "overrun", "rss KiB", "fds");
	start = seconds();
	while (seconds() - start + window <= total + 1e-9) {
		struct timespec nap = { .tv_sec = (time_t)window, .tv_nsec = (long)((window - (time_t)window) * 1e9) };
		struct window *s = &windows[n];
		DAT_EVENT e;

		nanosleep(&nap, NULL);
		for (int w = 0; w < WORKERS; w++) {
			long now = atomic_load(&cycles[w]);

			s->cycles[w] = now - last[w];
			last[w] = now;
		}
		s->rss = rss_bytes();
		s->fds = fds();
		printf("%8.0f", seconds() - start);
		for (int w = 0; w < WORKERS; w++)
			printf(" %9ld", s->cycles[w]);
		printf(" %9ld %5d\n", s->rss >> 10, s->fds);
		fflush(stdout);
		if (dat_evd_dequeue(async, &e) == DAT_SUCCESS) {
			fprintf(stderr, "soak: the IA's async EVD heard event 0x%x\n", e.event_number);
			failed = 1;
		}
		n++;
	}
	atomic_store(&stop, 1);
	for (int w = 0; w < WORKERS; w++)
		pthread_join(threads[w], NULL);
	check(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "main", "dat_ia_close");

	/* Flat: after the first window (start-up), each thread's mean over
	 * the last third of the windows at least a third of its mean over the
	 * first third (a leak slows a thread down steadily; the scheduler's
	 * noise between windows does not add up), and every thread made
	 * progress. */
	int k = (n - 1) / 3 > 0 ? (n - 1) / 3 : 1;

	for (int w = 0; w < WORKERS; w++) {
		long early = 0, late = 0;

		for (int i = 1; i < 1 + k; i++)
			early += windows[i].cycles[w];
		for (int i = n - k; i < n; i++)
			late += windows[i].cycles[w];
		if (late == 0 || 3 * late < early) {
			fprintf(stderr, "soak: %s: %ld cycles in the first %d windows, %ld in the last %d\n", NAMES[w],
				early, k, late, k);
			failed = 1;
		}
	}
	for (int i = 1; i < n; i++) {
		if (windows[i].rss > windows[0].rss + RSS_CEILING || windows[i].fds > windows[0].fds + FD_SLACK) {
			fprintf(stderr, "soak: window %d: rss %ld KiB, %d fds; the first: %ld KiB, %d fds\n", i,
				windows[i].rss >> 10, windows[i].fds, windows[0].rss >> 10, windows[0].fds);
			failed = 1;
			break;
		}
	}
	if (total >= FLAT_RUN_S && windows[n - 1].rss > windows[n - k - 1].rss + RSS_SLACK) {
		fprintf(stderr, "soak: the resident set grew from %ld KiB to %ld KiB over the last %d windows\n",
			windows[n - k - 1].rss >> 10, windows[n - 1].rss >> 10, k);
		failed = 1;
	}
	if (failed)
		return 1;
	printf("soak: ok: %d windows, every completion once and in order, flat\n", n);
	return 0;
}
