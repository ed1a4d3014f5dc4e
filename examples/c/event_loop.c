/*
 * A DAT consumer driven by an epoll loop instead of a blocked thread: every
 * EVD feeds one CNO made by dat_cno_fd_create, and the loop sleeps in
 * epoll_wait on its descriptor. Four Endpoints of one IA connect to four of
 * its own through a Public Service Point; each client sends a message and
 * RDMA-writes a buffer into its server; once every pair is through, a
 * timerfd in the same epoll set waits a second, then the clients
 * disconnect and each server sees its peer go. The loop counts every
 * event, every wake-up and the CPU time it used:
 *
 *   cc event_loop.c $(pkg-config --cflags --static --libs udat) -o event_loop
 *   ./event_loop udat-softhca-mlx5_soft0
 *
 * On each wake-up it calls dat_cno_trigger once and then dequeues every EVD
 * the CNO has: dat_cno_wait(3DAT) makes the EVD a trigger names "only a
 * hint" and the consumer "responsible for ensuring that all EVDs feeding
 * this CNO are polled". It fails if an event is lost or comes twice, if the
 * loop wakes with nothing to do more often than it has events, if no
 * wake-up comes for five seconds, or if it used as much CPU as time: a loop
 * that polled would spend the idle second spinning.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <dat2/udat.h>

#define PAIRS 4
#define CONN_QUAL 4343
#define SIZE 4096
#define TIMEOUT (5 * 1000 * 1000)	/* µs */
#define IDLE_MS 5000

static void check(DAT_RETURN ret, const char *what)
{
	const char *major = "?", *minor = "?";

	if (ret == DAT_SUCCESS)
		return;
	dat_strerror(ret, &major, &minor);
	fprintf(stderr, "event_loop: %s: %s %s (0x%x)\n", what, major, minor, ret);
	exit(1);
}

static void fail(const char *what, int i)
{
	fprintf(stderr, "event_loop: pair %d: %s\n", i, what);
	exit(1);
}

struct side {
	DAT_EP_HANDLE ep;
	DAT_EVD_HANDLE dto, conn;
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lmr_context;
	DAT_RMR_CONTEXT rmr_context;
	char *buf;
	/* What has happened to it. */
	int established, sent, written, received, disconnected;
};

static struct side client[PAIRS], server[PAIRS];
static DAT_IA_HANDLE ia;
static DAT_PZ_HANDLE pz;
static DAT_CNO_HANDLE cno;
static DAT_EVD_HANDLE cr_evd;
static int accepted, events;

static void side_init(struct side *s)
{
	DAT_REGION_DESCRIPTION region;
	DAT_VLEN len;
	DAT_VADDR addr;

	s->buf = calloc(1, SIZE);
	check(dat_evd_create(ia, 8, cno, DAT_EVD_DTO_FLAG, &s->dto), "dat_evd_create DTO");
	check(dat_evd_create(ia, 4, cno, DAT_EVD_CONNECTION_FLAG, &s->conn), "dat_evd_create CONNECTION");
	check(dat_ep_create(ia, pz, s->dto, s->dto, s->conn, NULL, &s->ep), "dat_ep_create");
	region.for_va = s->buf;
	check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, SIZE, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
			     &s->lmr, &s->lmr_context, &s->rmr_context, &len, &addr),
	      "dat_lmr_create");
}

static void side_free(struct side *s)
{
	check(dat_ep_free(s->ep), "dat_ep_free");
	check(dat_lmr_free(s->lmr), "dat_lmr_free");
	check(dat_evd_free(s->dto), "dat_evd_free DTO");
	check(dat_evd_free(s->conn), "dat_evd_free CONNECTION");
	free(s->buf);
}

static DAT_LMR_TRIPLET local(struct side *s, DAT_VLEN len)
{
	DAT_LMR_TRIPLET iov = { .lmr_context = s->lmr_context, .virtual_address = (uintptr_t)s->buf,
				.segment_length = len };
	return iov;
}

/* A client is connected: send its number, then write its buffer into its
 * server's. */
static void start(int i)
{
	DAT_LMR_TRIPLET iov = local(&client[i], 16);
	DAT_RMR_TRIPLET rmr = { .rmr_context = server[i].rmr_context,
				.virtual_address = (uintptr_t)server[i].buf + SIZE / 2, .segment_length = SIZE / 2 };
	DAT_DTO_COOKIE cookie;

	snprintf(client[i].buf, 16, "client %d", i);
	cookie.as_64 = 1;
	check(dat_ep_post_send(client[i].ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
	memset(client[i].buf + SIZE / 2, 'a' + i, SIZE / 2);
	iov = local(&client[i], SIZE / 2);
	iov.virtual_address += SIZE / 2;
	cookie.as_64 = 2;
	check(dat_ep_post_rdma_write(client[i].ep, 1, &iov, cookie, &rmr, DAT_COMPLETION_DEFAULT_FLAG),
	      "dat_ep_post_rdma_write");
}

/* The idle second before the hang-ups. */
static int timer = -1, armed;

/* Every pair's DTOs completed: the clients hang up after the idle second. */
static void maybe_hang_up(void)
{
	struct itimerspec in_a_second = { .it_value = { .tv_sec = 1 } };

	for (int i = 0; i < PAIRS; i++)
		if (!client[i].sent || !client[i].written || !server[i].received)
			return;
	if (!armed++ && timerfd_settime(timer, 0, &in_a_second, NULL) != 0) {
		perror("event_loop: timerfd_settime");
		exit(1);
	}
}

static void hang_up(void)
{
	for (int i = 0; i < PAIRS; i++)
		check(dat_ep_disconnect(client[i].ep, DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect");
}

static void on_connection(struct side *s, int i, const DAT_EVENT *e)
{
	switch (e->event_number) {
	case DAT_CONNECTION_EVENT_ESTABLISHED:
		if (s->established++)
			fail("established twice", i);
		if (s == &client[i])
			start(i);
		break;
	case DAT_CONNECTION_EVENT_DISCONNECTED:
		if (s->disconnected++)
			fail("disconnected twice", i);
		break;
	default:
		fprintf(stderr, "event_loop: pair %d: connection event 0x%x\n", i, e->event_number);
		exit(1);
	}
}

static void on_dto(struct side *s, int i, const DAT_EVENT *e)
{
	const DAT_DTO_COMPLETION_EVENT_DATA *d = &e->event_data.dto_completion_event_data;

	if (e->event_number != DAT_DTO_COMPLETION_EVENT || d->status != DAT_DTO_SUCCESS)
		fail("a DTO failed", i);
	if (s == &server[i]) {
		char want[16];

		snprintf(want, sizeof want, "client %d", i);
		if (server[i].received++ || strcmp(server[i].buf, want))
			fail("the message did not arrive once", i);
	} else if (d->user_cookie.as_64 == 1) {
		if (s->sent++)
			fail("send completed twice", i);
	} else if (d->user_cookie.as_64 == 2) {
		if (s->written++)
			fail("RDMA write completed twice", i);
		for (int b = SIZE / 2; b < SIZE; b++)
			if (server[i].buf[b] != 'a' + i)
				fail("the RDMA write did not land", i);
	}
	maybe_hang_up();
}

/* A client's request names its pair in its private data: requests need
 * not arrive in the order of the connects. */
static void on_request(const DAT_EVENT *e)
{
	DAT_CR_HANDLE cr = e->event_data.cr_arrival_event_data.cr_handle;
	DAT_CR_PARAM param;
	DAT_LMR_TRIPLET iov;
	DAT_DTO_COOKIE cookie = { .as_64 = 3 };
	int i = -1;

	if (e->event_number != DAT_CONNECTION_REQUEST_EVENT)
		fail("an unexpected event on the CR EVD", i);
	check(dat_cr_query(cr, DAT_CR_FIELD_ALL, &param), "dat_cr_query");
	if (param.private_data_size >= 1)
		i = *(const unsigned char *)param.private_data;
	if (i < 0 || i >= PAIRS || accepted++ >= PAIRS)
		fail("an unexpected connection request", i);
	iov = local(&server[i], 16);
	check(dat_ep_post_recv(server[i].ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
	check(dat_cr_accept(cr, server[i].ep, 0, NULL), "dat_cr_accept");
}

/* Take every event of `evd`; returns how many. */
static int drain(DAT_EVD_HANDLE evd)
{
	DAT_EVENT e;
	int n = 0;

	for (;;) {
		DAT_RETURN ret = dat_evd_dequeue(evd, &e);

		if (DAT_GET_TYPE(ret) == DAT_QUEUE_EMPTY)
			return n;
		check(ret, "dat_evd_dequeue");
		n++;
		if (evd == cr_evd) {
			on_request(&e);
			continue;
		}
		for (int i = 0; i < PAIRS; i++) {
			if (evd == client[i].conn)
				on_connection(&client[i], i, &e);
			else if (evd == server[i].conn)
				on_connection(&server[i], i, &e);
			else if (evd == client[i].dto)
				on_dto(&client[i], i, &e);
			else if (evd == server[i].dto)
				on_dto(&server[i], i, &e);
		}
	}
}

static int done(void)
{
	for (int i = 0; i < PAIRS; i++)
		if (!client[i].disconnected || !server[i].disconnected)
			return 0;
	return 1;
}

static double seconds(struct timeval t)
{
	return t.tv_sec + t.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	char default_name[] = "udat-softhca-mlx5_soft0";
	char *name = argc > 1 ? argv[1] : default_name;
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, which;
	DAT_IA_ATTR attr;
	DAT_PSP_HANDLE psp;
	DAT_FD fd;
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = -1 };
	struct timespec t0, t1;
	struct rusage r0, r1;
	int epoll, wakeups = 0, idle = 0;
	double cpu, wall;

	check(dat_ia_open(name, 8, &async, &ia), "dat_ia_open");
	check(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL), "dat_ia_query");
	check(dat_pz_create(ia, &pz), "dat_pz_create");
	check(dat_cno_fd_create(ia, &fd, &cno), "dat_cno_fd_create");
	epoll = epoll_create1(0);
	timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	ev.data.fd = fd;
	if (epoll < 0 || timer < 0 || epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev) != 0) {
		perror("event_loop: epoll");
		return 1;
	}
	ev.data.fd = timer;
	if (epoll_ctl(epoll, EPOLL_CTL_ADD, timer, &ev) != 0) {
		perror("event_loop: epoll");
		return 1;
	}
	check(dat_evd_create(ia, PAIRS, cno, DAT_EVD_CR_FLAG, &cr_evd), "dat_evd_create CR");
	check(dat_psp_create(ia, CONN_QUAL, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create");
	for (int i = 0; i < PAIRS; i++) {
		side_init(&client[i]);
		side_init(&server[i]);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	getrusage(RUSAGE_SELF, &r0);
	for (int i = 0; i < PAIRS; i++) {
		unsigned char pair = i;

		check(dat_ep_connect(client[i].ep, attr.ia_address_ptr, CONN_QUAL, TIMEOUT, 1, &pair,
				     DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
		      "dat_ep_connect");
	}

	while (!done()) {
		int n = epoll_wait(epoll, &ev, 1, IDLE_MS), got = 0;
		DAT_RETURN ret;

		if (n == 0) {
			fprintf(stderr, "event_loop: no wake-up for %d ms with work outstanding\n", IDLE_MS);
			return 1;
		}
		if (n < 0) {
			perror("event_loop: epoll_wait");
			return 1;
		}
		if (ev.data.fd == timer) {
			uint64_t expiries;

			if (read(timer, &expiries, sizeof expiries) != sizeof expiries) {
				perror("event_loop: timerfd");
				return 1;
			}
			hang_up();
			continue;
		}
		wakeups++;
		ret = dat_cno_trigger(cno, &which);
		if (DAT_GET_TYPE(ret) != DAT_QUEUE_EMPTY)
			check(ret, "dat_cno_trigger");
		got += drain(cr_evd);
		for (int i = 0; i < PAIRS; i++)
			got += drain(client[i].conn) + drain(server[i].conn) + drain(client[i].dto) +
			       drain(server[i].dto);
		events += got;
		idle += got == 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	getrusage(RUSAGE_SELF, &r1);

	/* Per pair: 2 established, 2 disconnected, send, write and receive
	 * completions; and the request. */
	if (events != PAIRS * 8) {
		fprintf(stderr, "event_loop: %d events, expected %d\n", events, PAIRS * 8);
		return 1;
	}
	if (idle > events) {
		fprintf(stderr, "event_loop: %d of %d wake-ups found nothing\n", idle, wakeups);
		return 1;
	}
	cpu = seconds(r1.ru_utime) - seconds(r0.ru_utime) + seconds(r1.ru_stime) - seconds(r0.ru_stime);
	wall = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (cpu > wall / 2) {
		fprintf(stderr, "event_loop: %.3f s of CPU in %.3f s: the loop did not sleep\n", cpu, wall);
		return 1;
	}
	printf("event_loop on %s: %d events, %d wake-ups of the CNO (%d with nothing to do) in %.3f s, "
	       "one idle second included; CPU %.3f s\n",
	       name, events, wakeups, idle, wall, cpu);

	check(dat_psp_free(psp), "dat_psp_free");
	for (int i = 0; i < PAIRS; i++) {
		side_free(&client[i]);
		side_free(&server[i]);
	}
	check(dat_evd_free(cr_evd), "dat_evd_free CR");
	check(dat_cno_free(cno), "dat_cno_free");
	check(dat_pz_free(pz), "dat_pz_free");
	check(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close");
	close(timer);
	close(epoll);
	return 0;
}
