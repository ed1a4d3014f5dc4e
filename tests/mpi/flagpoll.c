/*
 * flagpoll: does an RDMA Write's last word tell a reader polling memory
 * that the whole write has landed?
 *
 * MVAPICH2's RDMA fast path assumes it does. The sender writes
 * [message | length] into a ring slot of the receiver with one RDMA Write;
 * the receiver spins on the 4-byte length at the end of the slot and, once
 * it reads non-zero, parses the message that ends there. Neither the
 * InfiniBand architecture nor DAT promises the order (or the atomicity) in
 * which a responder places a write's bytes: DAT makes a write's data
 * visible to the peer only through a later message, or after
 * dat_lmr_sync_rdma_write(3DAT) once the write has completed.
 *
 * This program does what the fast path does, over raw verbs and rdma_cm,
 * with no DAT provider and no MPI in between: one thread writes
 * [SIZE bytes of a pattern | SIZE as a 32-bit word] to the end of a
 * buffer, the other (on another CPU) spins on that word, and each time it
 * reads non-zero it checks the word and the body against what the writer
 * wrote. A word read non-zero but not SIZE was caught half placed (torn);
 * a right word over a body still holding the previous pattern was placed
 * before the body (early).
 *
 * Usage: flagpoll ADDR COUNT SIZE...   (ADDR: the RDMA device's IPv4
 * address; both ends are in this process, connected through it)
 * Prints, for each SIZE, one line:
 *   flagpoll SIZE B: COUNT writes, T torn (...), E early
 * and exits 0 once every write has been checked.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_SIZE (64 * 1024)
#define PORT 18515

static void die(const char *what)
{
	fprintf(stderr, "flagpoll: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* The next event on `ch`, which must be `want`; acknowledged. */
static struct rdma_cm_id *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event");
	if (ev->event != want) {
		fprintf(stderr, "flagpoll: got %s, wanted %s\n", rdma_event_str(ev->event), rdma_event_str(want));
		exit(2);
	}
	struct rdma_cm_id *id = ev->id;
	rdma_ack_cm_event(ev);
	return id;
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	/* A single-CPU machine cannot separate the two; run anyway. */
	(void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* What the two threads share. */
struct shared {
	unsigned char *dst; /* the receiver's buffer, written by RDMA */
	volatile uint32_t consumed; /* writes the poller has checked */
	uint32_t size;
	uint32_t count;
	uint32_t torn, early;
	uint32_t torn_example;
};

/* The pattern of write `i`: never 0, so a fresh buffer reads as stale. */
static unsigned char pattern(uint32_t i)
{
	return (unsigned char)(1 + i % 251);
}

static void *poller(void *arg)
{
	struct shared *s = arg;
	pin(1);
	volatile uint32_t *flag = (volatile uint32_t *)(s->dst + BUF_SIZE - 4);
	volatile unsigned char *body = s->dst + BUF_SIZE - 4 - s->size;
	for (uint32_t i = 0; i < s->count; i++) {
		uint32_t seen;
		while ((seen = *flag) == 0)
			;
		if (seen != s->size) {
			if (s->torn++ == 0)
				s->torn_example = seen;
		} else {
			for (uint32_t b = 0; b < s->size; b++)
				if (body[b] != pattern(i)) {
					s->early++;
					break;
				}
		}
		/* Let the rest land before the slot is reused. */
		while (*flag != s->size || body[0] != pattern(i) || body[s->size - 1] != pattern(i))
			;
		*flag = 0;
		__atomic_store_n(&s->consumed, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: flagpoll ADDR COUNT SIZE...\n");
		return 2;
	}
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
		fprintf(stderr, "flagpoll: %s is no IPv4 address\n", argv[1]);
		return 2;
	}
	uint32_t count = (uint32_t)strtoul(argv[2], NULL, 10);

	struct rdma_event_channel *sch = rdma_create_event_channel(), *cch = rdma_create_event_channel();
	struct rdma_cm_id *listener, *client;
	if (!sch || !cch)
		die("rdma_create_event_channel");
	if (rdma_create_id(sch, &listener, NULL, RDMA_PS_TCP) || rdma_create_id(cch, &client, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_bind_addr(listener, (struct sockaddr *)&addr) || rdma_listen(listener, 1))
		die("listen");
	if (rdma_resolve_addr(client, NULL, (struct sockaddr *)&addr, 2000))
		die("rdma_resolve_addr");
	expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED);
	if (rdma_resolve_route(client, 2000))
		die("rdma_resolve_route");
	expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED);

	struct ibv_pd *pd = ibv_alloc_pd(client->verbs);
	struct ibv_cq *cq = ibv_create_cq(client->verbs, 16, NULL, NULL, 0);
	struct ibv_cq *scq = ibv_create_cq(client->verbs, 16, NULL, NULL, 0);
	if (!pd || !cq || !scq)
		die("pd/cq");
	struct ibv_qp_init_attr qpa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (rdma_create_qp(client, pd, &qpa))
		die("rdma_create_qp (client)");
	struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7 };
	if (rdma_connect(client, &param))
		die("rdma_connect");
	struct rdma_cm_id *server = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	qpa.send_cq = scq;
	qpa.recv_cq = scq;
	if (rdma_create_qp(server, pd, &qpa))
		die("rdma_create_qp (server)");
	if (rdma_accept(server, &param))
		die("rdma_accept");
	/* The active side's event first: librdmacm sends the RTU from it. */
	expect(cch, RDMA_CM_EVENT_ESTABLISHED);
	expect(sch, RDMA_CM_EVENT_ESTABLISHED);

	unsigned char *src = aligned_alloc(4096, BUF_SIZE), *dst = aligned_alloc(4096, BUF_SIZE);
	if (!src || !dst)
		die("aligned_alloc");
	memset(dst, 0, BUF_SIZE);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_mr *smr = ibv_reg_mr(pd, src, BUF_SIZE, access), *dmr = ibv_reg_mr(pd, dst, BUF_SIZE, access);
	if (!smr || !dmr)
		die("ibv_reg_mr");

	pin(0);
	for (int a = 3; a < argc; a++) {
		uint32_t size = (uint32_t)strtoul(argv[a], NULL, 10);
		if (size == 0 || size > BUF_SIZE - 4) {
			fprintf(stderr, "flagpoll: size %s is out of range\n", argv[a]);
			return 2;
		}
		struct shared s = { .dst = dst, .size = size, .count = count };
		memset(dst, 0, BUF_SIZE);
		pthread_t t;
		if (pthread_create(&t, NULL, poller, &s))
			die("pthread_create");
		unsigned char *msg = src + BUF_SIZE - 4 - size;
		for (uint32_t i = 0; i < count; i++) {
			memset(msg, pattern(i), size);
			memcpy(msg + size, &size, 4);
			struct ibv_sge sge = { .addr = (uintptr_t)msg, .length = size + 4, .lkey = smr->lkey };
			struct ibv_send_wr wr = {
				.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { .remote_addr = (uintptr_t)(dst + BUF_SIZE - 4 - size), .rkey = dmr->rkey },
			}, *bad;
			if (ibv_post_send(client->qp, &wr, &bad))
				die("ibv_post_send");
			struct ibv_wc wc;
			int n;
			while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
				;
			if (n < 0 || wc.status != IBV_WC_SUCCESS) {
				fprintf(stderr, "flagpoll: write %u: %s\n", i, n < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
				return 1;
			}
			while (__atomic_load_n(&s.consumed, __ATOMIC_ACQUIRE) != i + 1)
				;
		}
		pthread_join(t, NULL);
		printf("flagpoll %u B: %u writes, %u torn", size, count, s.torn);
		if (s.torn)
			printf(" (first read 0x%x for 0x%x)", s.torn_example, size);
		printf(", %u early\n", s.early);
	}
	fflush(stdout);
	rdma_disconnect(client);
	return 0;
}
