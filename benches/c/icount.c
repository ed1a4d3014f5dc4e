/*
 * Instruction counts of the C ABI, for callgrind: `icount [-P IA] [-t] [-w]
 * OP K [N]` opens the IA named IA (by default udat-softhca-mlx5_soft0, udat's
 * mlx5 data path on the software HCA), thread-safe with -t (dat_ia_open
 * asks for a provider that need not be: <dat2/udat_config.h> defines
 * DAT_THREADSAFE as DAT_FALSE), connects Endpoints of it to each other in
 * pairs through a PSP, then does OP K times. Written against
 * <dat2/udat.h> alone, so it builds against udat's libudat.a or against
 * libdat2 (-ldat2), which loads the provider dat.conf names IA.
 *
 * `cargo xtask icount` links it with libudat.a and collects only inside
 * the DAT call OP measures (--toggle-collect), less the software HCA's doorbell
 * registers (the software HCA executes the WQEs there, which a ConnectX
 * does in hardware); `cargo xtask icount-rxe` links it with libdat2 and
 * counts the 4 KiB posts and dequeue_one through udat's plug-in and OFA's
 * provider on rxe. Both take the difference of two runs with different K,
 * so that what the setup collects (it calls dat_evd_dequeue too) cancels.
 *
 * -w is for a device that completes after the post returns, as rxe does:
 * connection events are waited for with dat_evd_wait, so that the setup
 * makes no empty dat_evd_dequeue calls (their number would vary from run
 * to run), and each completion dequeue_one counts is given WAIT_MS to
 * arrive first, so that the counted call finds it.
 *
 * OP, and the call each iteration counts:
 *   write_4k         dat_ep_post_rdma_write, one 4 KiB segment, signalled
 *   write_64_inline  the same, 64 bytes (carried inline)
 *   read_4k          dat_ep_post_rdma_read, one 4 KiB segment, signalled
 *   send_64_inline   dat_ep_post_send, 64 bytes, the peer's receive posted
 *   send_4k          the same, 4 KiB (gathered, not inline)
 *   recv             dat_ep_post_recv of the 4 KiB receive send_4k consumes
 *   dequeue_one      dat_evd_dequeue of one completion, the only one waiting
 *   dequeue_batch16  dat_evd_dequeue, 16 completions waiting (K a multiple of 16)
 *   dequeue_empty    dat_evd_dequeue of a DTO EVD with nothing waiting, as a
 *                    consumer that polls for its next completion calls it
 *                    (DAT_QUEUE_EMPTY); the provider's own looks at connection
 *                    events, if it takes any, are counted with it
 *   write_4k_eps     write_4k on N Endpoints (N/2 connected pairs, N LMRs),
 *                    each post on the next Endpoint, round robin
 *   lmr_create       dat_lmr_create of 4 KiB, DAT_MEM_PRIV_ALL_FLAG, each
 *                    LMR freed at once (uncounted), as a consumer that
 *                    registers each message's buffer does
 *   lmr_free         the same pairs, dat_lmr_free counted
 *
 * Completions are reaped between posts (uncounted) so that no EVD and no
 * Endpoint holds more than REAP. Exit status 3: the provider could not
 * create that many objects (DAT_INSUFFICIENT_RESOURCES).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <netinet/in.h>
#include <dat2/udat.h>

/* The IA opened unless -P names another. */
#define DEFAULT_IA "udat-softhca-mlx5_soft0"
#define CONN_QUAL 4243
#define SIZE 4096
/* Completions an EVD and an Endpoint hold at most: the EVD queue length
 * and within the provider's default max_request_dtos and max_recv_dtos. */
#define REAP 16
/* Endpoints sharing one DTO EVD. */
#define EPS_PER_EVD 256
/* Seconds of empty dequeues before a wanted event counts as lost. */
#define PATIENCE 120
#define EXIT_RESOURCES 3
/* Milliseconds -w gives a completion to arrive before the counted
 * dequeue: a wide margin, as the counted call fails if it finds none. */
#define WAIT_MS 20

struct ep {
	DAT_EP_HANDLE handle;
	int evd;		/* index into rig.evds */
	int peer;		/* index into rig.eps */
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lmr_context;
	DAT_RMR_CONTEXT rmr_context;
};

struct rig {
	DAT_IA_HANDLE ia;
	DAT_PZ_HANDLE pz;
	DAT_EVD_HANDLE cr_evd, conn_evd;
	DAT_PSP_HANDLE psp;
	int nevds, neps;
	DAT_EVD_HANDLE *evds;
	int *pending;		/* per EVD: completions not yet dequeued */
	struct ep *eps;
	char *buf;		/* source in the first half, target in the second */
	int wait;		/* -w: the device completes after the post returns */
};

static void check(DAT_RETURN ret, const char *what)
{
	const char *major = "?", *minor = "?";

	if (ret == DAT_SUCCESS)
		return;
	dat_strerror(ret, &major, &minor);
	fprintf(stderr, "icount: %s: %s %s (0x%x)\n", what, major, minor, ret);
	exit(1);
}

/* Object creation: running out of objects is an answer, not a failure. */
static void create(DAT_RETURN ret, const char *what, int made, int wanted)
{
	if (DAT_GET_TYPE(ret) == DAT_INSUFFICIENT_RESOURCES) {
		fprintf(stderr, "icount: insufficient resources: %s after %d of %d\n", what, made, wanted);
		exit(EXIT_RESOURCES);
	}
	check(ret, what);
}

static time_t now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static void expect(const DAT_EVENT *event, DAT_EVENT_NUMBER want, const char *what)
{
	if (event->event_number != want) {
		fprintf(stderr, "icount: %s: event 0x%x, expected 0x%x\n", what, event->event_number, want);
		exit(1);
	}
}

/* The next event of `evd`, polled for: dat_evd_wait would arm CQs and
 * ring the software HCA's doorbell registers outside the counted calls. An empty
 * EVD yields the processor, so that a provider's own threads (a
 * connection manager's, say) run even where threads take turns, as under
 * valgrind. */
static DAT_EVENT next_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, const char *what)
{
	DAT_EVENT event;
	DAT_RETURN ret;
	time_t deadline = now() + PATIENCE;

	do {
		ret = dat_evd_dequeue(evd, &event);
		if (DAT_GET_TYPE(ret) == DAT_QUEUE_EMPTY) {
			sched_yield();
			continue;
		}
		check(ret, what);
		expect(&event, want, what);
		return event;
	} while (now() < deadline);
	fprintf(stderr, "icount: %s: no event in %d s\n", what, PATIENCE);
	exit(1);
}

/* A connection event of `evd`: with -w, waited for without a call to
 * dat_evd_dequeue, which dequeue_one counts. */
static DAT_EVENT conn_event(const struct rig *r, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, const char *what)
{
	DAT_EVENT event;
	DAT_COUNT nmore;

	if (!r->wait)
		return next_event(evd, want, what);
	check(dat_evd_wait(evd, PATIENCE * 1000000, 1, &event, &nmore), what);
	expect(&event, want, what);
	return event;
}

static void dto_ok(const DAT_EVENT *event, const char *what)
{
	if (event->event_number != DAT_DTO_COMPLETION_EVENT ||
	    event->event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
		fprintf(stderr, "icount: %s: event 0x%x status %d\n", what, event->event_number,
			event->event_data.dto_completion_event_data.status);
		exit(1);
	}
}

static void make_evds(struct rig *r)
{
	r->nevds = (r->neps + EPS_PER_EVD - 1) / EPS_PER_EVD;
	r->evds = calloc(r->nevds, sizeof *r->evds);
	r->pending = calloc(r->nevds, sizeof *r->pending);
	for (int i = 0; i < r->nevds; i++)
		create(dat_evd_create(r->ia, REAP, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &r->evds[i]),
		       "dat_evd_create DTO", i, r->nevds);
}

/* Endpoint `i` with an LMR of its own over the whole buffer. */
static void make_ep(struct rig *r, int i)
{
	struct ep *e = &r->eps[i];
	DAT_REGION_DESCRIPTION region;
	DAT_VLEN len;
	DAT_VADDR addr;

	e->evd = i % r->nevds;
	e->peer = i ^ 1;
	create(dat_ep_create(r->ia, r->pz, r->evds[e->evd], r->evds[e->evd], r->conn_evd, NULL, &e->handle),
	       "dat_ep_create", i, r->neps);
	region.for_va = r->buf;
	create(dat_lmr_create(r->ia, DAT_MEM_TYPE_VIRTUAL, region, 2 * SIZE, r->pz, DAT_MEM_PRIV_ALL_FLAG,
			      DAT_VA_TYPE_VA, &e->lmr, &e->lmr_context, &e->rmr_context, &len, &addr),
	       "dat_lmr_create", i, r->neps);
}

/* Endpoint `i` connects to the PSP, which hands the request to `i + 1`. */
static void connect_pair(struct rig *r, int i, DAT_IA_ADDRESS_PTR addr)
{
	DAT_EVENT event;

	check(dat_ep_connect(r->eps[i].handle, addr, CONN_QUAL, DAT_TIMEOUT_INFINITE, 0, NULL, DAT_QOS_BEST_EFFORT,
			     DAT_CONNECT_DEFAULT_FLAG), "dat_ep_connect");
	event = conn_event(r, r->cr_evd, DAT_CONNECTION_REQUEST_EVENT, "connection request");
	check(dat_cr_accept(event.event_data.cr_arrival_event_data.cr_handle, r->eps[i + 1].handle, 0, NULL),
	      "dat_cr_accept");
	conn_event(r, r->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, "established");
	conn_event(r, r->conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, "established");
}

/* `neps` Endpoints (even), connected in pairs 0-1, 2-3, ... */
static void rig_init(struct rig *r, char *ia_name, int neps, int thread_safe, int wait)
{
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
	DAT_IA_ATTR ia_attr;

	memset(r, 0, sizeof *r);
	r->neps = neps;
	r->wait = wait;
	r->buf = calloc(1, 2 * SIZE);
	r->eps = calloc(neps, sizeof *r->eps);
	check(dat_ia_openv(ia_name, 8, &async, &r->ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR,
			   thread_safe ? DAT_TRUE : DAT_FALSE),
	      "dat_ia_open");
	check(dat_ia_query(r->ia, NULL, DAT_IA_FIELD_ALL, &ia_attr, 0, NULL), "dat_ia_query");
	check(dat_pz_create(r->ia, &r->pz), "dat_pz_create");
	check(dat_evd_create(r->ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &r->cr_evd), "dat_evd_create CR");
	check(dat_evd_create(r->ia, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &r->conn_evd),
	      "dat_evd_create CONNECTION");
	check(dat_psp_create(r->ia, CONN_QUAL, r->cr_evd, DAT_PSP_CONSUMER_FLAG, &r->psp), "dat_psp_create");
	make_evds(r);
	for (int i = 0; i < neps; i++)
		make_ep(r, i);
	for (int i = 0; i < neps; i += 2)
		connect_pair(r, i, ia_attr.ia_address_ptr);
}

/* Dequeue every completion waiting on EVD `g` (uncounted). */
static void reap(struct rig *r, int g)
{
	DAT_EVENT event;

	for (; r->pending[g] > 0; r->pending[g]--) {
		event = next_event(r->evds[g], DAT_DTO_COMPLETION_EVENT, "reap");
		dto_ok(&event, "reap");
	}
}

/* A completion is due on Endpoint `i`'s EVD. */
static void due(struct rig *r, int i)
{
	int g = r->eps[i].evd;

	if (++r->pending[g] == REAP)
		reap(r, g);
}

static DAT_LMR_TRIPLET segment(const struct ep *e, const char *at, DAT_VLEN len)
{
	DAT_LMR_TRIPLET iov = { .virtual_address = (DAT_VADDR)(uintptr_t)at, .segment_length = len,
				.lmr_context = e->lmr_context };
	return iov;
}

/* `len` bytes of the second half of the LMR of `e`'s peer. */
static DAT_RMR_TRIPLET remote(const struct rig *r, const struct ep *e, DAT_VLEN len)
{
	DAT_RMR_TRIPLET rmr = { .rmr_context = r->eps[e->peer].rmr_context, .segment_length = len,
				.virtual_address = (DAT_VADDR)(uintptr_t)(r->buf + SIZE) };
	return rmr;
}

/* One RDMA write of `len` bytes from Endpoint `i` into its peer's LMR,
 * its completion left for the caller. */
static void rdma_write(struct rig *r, int i, DAT_VLEN len, uint64_t n)
{
	struct ep *e = &r->eps[i];
	DAT_LMR_TRIPLET iov = segment(e, r->buf, len);
	DAT_RMR_TRIPLET rmr = remote(r, e, len);
	DAT_DTO_COOKIE cookie = { .as_64 = n };

	check(dat_ep_post_rdma_write(e->handle, 1, &iov, cookie, &rmr, DAT_COMPLETION_DEFAULT_FLAG),
	      "dat_ep_post_rdma_write");
}

static void post_write(struct rig *r, int i, DAT_VLEN len, uint64_t n)
{
	rdma_write(r, i, len, n);
	due(r, i);
}

/* One RDMA read of 4 KiB from Endpoint `i`'s peer's LMR into the first
 * half of its own. */
static void post_read(struct rig *r, int i, uint64_t n)
{
	struct ep *e = &r->eps[i];
	DAT_LMR_TRIPLET iov = segment(e, r->buf, SIZE);
	DAT_RMR_TRIPLET rmr = remote(r, e, SIZE);
	DAT_DTO_COOKIE cookie = { .as_64 = n };

	check(dat_ep_post_rdma_read(e->handle, 1, &iov, cookie, &rmr, DAT_COMPLETION_DEFAULT_FLAG),
	      "dat_ep_post_rdma_read");
	due(r, i);
}

/* One send of `len` bytes from Endpoint `i`, its peer's receive of as
 * many posted first. */
static void post_send(struct rig *r, int i, DAT_VLEN len, uint64_t n)
{
	struct ep *e = &r->eps[i], *peer = &r->eps[e->peer];
	DAT_LMR_TRIPLET recv = segment(peer, r->buf + SIZE, len), send = segment(e, r->buf, len);
	DAT_DTO_COOKIE cookie = { .as_64 = n };

	check(dat_ep_post_recv(peer->handle, 1, &recv, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
	check(dat_ep_post_send(e->handle, 1, &send, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
	due(r, e->peer);
	due(r, i);
}

/* With -w, time for the completions of the posts just made to arrive. */
static void settle(const struct rig *r)
{
	struct timespec wait = { .tv_nsec = WAIT_MS * 1000000L };

	if (r->wait)
		nanosleep(&wait, NULL);
}

/* `k` completions: `batch` inline writes posted on Endpoint 0 (on the
 * software HCA, executed inside the post), then each completion taken
 * with the counted call, which must find it. */
static void dequeue(struct rig *r, long k, int batch)
{
	DAT_EVD_HANDLE evd = r->evds[r->eps[0].evd];
	DAT_EVENT event;

	for (long n = 0; n < k; n += batch) {
		for (int j = 0; j < batch; j++)
			rdma_write(r, 0, 64, n + j);
		settle(r);
		for (int j = 0; j < batch; j++) {
			check(dat_evd_dequeue(evd, &event), "dat_evd_dequeue");
			dto_ok(&event, "dat_evd_dequeue");
		}
	}
}

/* `k` dequeues of an empty DTO EVD, each of which must find it empty. */
static void dequeue_empty(struct rig *r, long k)
{
	DAT_EVD_HANDLE evd = r->evds[r->eps[0].evd];
	DAT_EVENT event;

	for (long n = 0; n < k; n++) {
		DAT_RETURN ret = dat_evd_dequeue(evd, &event);

		if (DAT_GET_TYPE(ret) != DAT_QUEUE_EMPTY) {
			fprintf(stderr, "icount: dat_evd_dequeue of an empty EVD: 0x%x\n", ret);
			exit(1);
		}
	}
}

/* `k` registrations of the rig's first 4 KiB, each released at once. */
static void register_4k(struct rig *r, long k)
{
	DAT_REGION_DESCRIPTION region = { .for_va = r->buf };
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lmr_context;
	DAT_RMR_CONTEXT rmr_context;
	DAT_VLEN len;
	DAT_VADDR addr;

	for (long n = 0; n < k; n++) {
		check(dat_lmr_create(r->ia, DAT_MEM_TYPE_VIRTUAL, region, SIZE, r->pz, DAT_MEM_PRIV_ALL_FLAG,
				     DAT_VA_TYPE_VA, &lmr, &lmr_context, &rmr_context, &len, &addr),
		      "dat_lmr_create");
		check(dat_lmr_free(lmr), "dat_lmr_free");
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: icount [-P IA] [-t] [-w] write_4k|write_64_inline|read_4k|send_64_inline|send_4k|recv|"
			"dequeue_one|dequeue_batch16|dequeue_empty|lmr_create|lmr_free K\n"
			"       icount [-P IA] [-t] [-w] write_4k_eps K N\n");
	return 2;
}

/* Run `op` `k` times on a rig of `neps` Endpoints; 0 when `op` is known. */
static int run(struct rig *r, const char *op, long k, int neps)
{
	if (!strcmp(op, "dequeue_one"))
		dequeue(r, k, 1);
	else if (!strcmp(op, "dequeue_batch16") && k % 16 == 0)
		dequeue(r, k, 16);
	else if (!strcmp(op, "dequeue_empty"))
		dequeue_empty(r, k);
	else if (!strcmp(op, "write_4k_eps"))
		for (long n = 0; n < k; n++)
			post_write(r, n % neps, SIZE, n);
	else if (!strcmp(op, "write_4k"))
		for (long n = 0; n < k; n++)
			post_write(r, 0, SIZE, n);
	else if (!strcmp(op, "write_64_inline"))
		for (long n = 0; n < k; n++)
			post_write(r, 0, 64, n);
	else if (!strcmp(op, "read_4k"))
		for (long n = 0; n < k; n++)
			post_read(r, 0, n);
	else if (!strcmp(op, "send_64_inline"))
		for (long n = 0; n < k; n++)
			post_send(r, 0, 64, n);
	else if (!strcmp(op, "send_4k") || !strcmp(op, "recv"))
		for (long n = 0; n < k; n++)
			post_send(r, 0, SIZE, n);
	else if (!strcmp(op, "lmr_create") || !strcmp(op, "lmr_free"))
		register_4k(r, k);
	else
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct rig r;
	char *ia_name = DEFAULT_IA;
	int eps, neps, thread_safe = 0, wait = 0;
	long k;

	if (argc > 2 && !strcmp(argv[1], "-P")) {
		ia_name = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (argc > 1 && !strcmp(argv[1], "-t")) {
		thread_safe = 1;
		argc -= 1;
		argv += 1;
	}
	if (argc > 1 && !strcmp(argv[1], "-w")) {
		wait = 1;
		argc -= 1;
		argv += 1;
	}
	eps = argc == 4 && !strcmp(argv[1], "write_4k_eps");
	k = argc > 2 ? atol(argv[2]) : 0;
	neps = eps ? atoi(argv[3]) : 2;
	if (argc != 3 + eps || k <= 0 || neps < 2 || neps % 2 != 0)
		return usage();
	rig_init(&r, ia_name, neps, thread_safe, wait);
	if (run(&r, argv[1], k, neps) != 0)
		return usage();
	printf("icount: %s x %ld on %d Endpoints of %s: ok\n", argv[1], k, neps, ia_name);
	return 0;
}
