/*
 * A DAT consumer in C, written against <dat2/udat.h> alone: one IA
 * connects an Endpoint to another of its own through a Public Service
 * Point, sends a message, RDMA-writes and RDMA-reads a buffer, uses the
 * IB extension (an RDMA write with immediate data, compare-and-swap,
 * fetch-and-add through dat_extension_op), and disconnects. Linked statically against libudat.a it needs no libdat2
 * and no dat.conf:
 *
 *   cc loopback.c $(pkg-config --cflags --static --libs udat) -o loopback
 *   ./loopback udat-softhca-mlx5_soft0
 *
 * Any provider name works: udat-verbs-rxe0 runs it over soft-RoCE.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

#define CONN_QUAL 4242
#define SIZE 4096
#define TIMEOUT (5 * 1000 * 1000)	/* µs */

static void check(DAT_RETURN ret, const char *what)
{
	const char *major = "?", *minor = "?";

	if (ret == DAT_SUCCESS)
		return;
	dat_strerror(ret, &major, &minor);
	fprintf(stderr, "loopback: %s: %s %s (0x%x)\n", what, major, minor, ret);
	exit(1);
}

static DAT_EVENT wait_for(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, const char *what)
{
	DAT_EVENT event;
	DAT_COUNT nmore;

	check(dat_evd_wait(evd, TIMEOUT, 1, &event, &nmore), what);
	if (event.event_number != want) {
		fprintf(stderr, "loopback: %s: event 0x%x, expected 0x%x\n", what,
			event.event_number, want);
		exit(1);
	}
	if ((event.event_number == DAT_DTO_COMPLETION_EVENT ||
	     event.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT) &&
	    event.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
		fprintf(stderr, "loopback: %s: DTO status %d\n", what,
			event.event_data.dto_completion_event_data.status);
		exit(1);
	}
	return event;
}

/* An IB extension completion of the given type. */
static DAT_IB_EXTENSION_EVENT_DATA wait_ext(DAT_EVD_HANDLE evd, DAT_IB_EXT_TYPE type, const char *what)
{
	DAT_EVENT event = wait_for(evd, (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT, what);
	DAT_IB_EXTENSION_EVENT_DATA ext;

	memcpy(&ext, event.event_extension_data, sizeof ext);
	if (ext.type != type || ext.status != DAT_OP_SUCCESS) {
		fprintf(stderr, "loopback: %s: extension type %d status %d, expected %d\n", what,
			ext.type, ext.status, type);
		exit(1);
	}
	return ext;
}

struct side {
	DAT_EP_HANDLE ep;
	DAT_EVD_HANDLE dto, conn;
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lmr_context;
	DAT_RMR_CONTEXT rmr_context;
	char *buf;
};

static void side_init(struct side *s, DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz)
{
	DAT_REGION_DESCRIPTION region;
	DAT_VLEN len;
	DAT_VADDR addr;

	s->buf = calloc(1, SIZE);
	check(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &s->dto), "dat_evd_create DTO");
	check(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &s->conn),
	      "dat_evd_create CONNECTION");
	check(dat_ep_create(ia, pz, s->dto, s->dto, s->conn, NULL, &s->ep), "dat_ep_create");
	region.for_va = s->buf;
	check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, SIZE, pz, DAT_MEM_PRIV_ALL_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC,
			     DAT_VA_TYPE_VA, &s->lmr, &s->lmr_context, &s->rmr_context, &len, &addr),
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

int main(int argc, char **argv)
{
	char default_name[] = "udat-softhca-mlx5_soft0";
	char *name = argc > 1 ? argv[1] : default_name;
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, cr_evd;
	DAT_IA_ATTR ia_attr;
	DAT_PZ_HANDLE pz;
	DAT_PSP_HANDLE psp;
	DAT_CR_PARAM cr_param;
	DAT_EVENT event;
	struct side client, server;
	DAT_LMR_TRIPLET iov;
	DAT_RMR_TRIPLET rmr;
	DAT_DTO_COOKIE cookie;
	char hello[] = "hello, udat";

	check(dat_ia_open(name, 8, &async, &ia), "dat_ia_open");
	check(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &ia_attr, 0, NULL), "dat_ia_query");
	check(dat_pz_create(ia, &pz), "dat_pz_create");
	check(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), "dat_evd_create CR");
	check(dat_psp_create(ia, CONN_QUAL, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create");
	side_init(&client, ia, pz);
	side_init(&server, ia, pz);

	/* The server's receive is posted before the connection exists. */
	iov.virtual_address = (DAT_VADDR)(uintptr_t)server.buf;
	iov.segment_length = SIZE;
	iov.lmr_context = server.lmr_context;
	cookie.as_64 = 1;
	check(dat_ep_post_recv(server.ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");

	check(dat_ep_connect(client.ep, ia_attr.ia_address_ptr, CONN_QUAL, TIMEOUT, sizeof hello, hello,
			     DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG), "dat_ep_connect");
	event = wait_for(cr_evd, DAT_CONNECTION_REQUEST_EVENT, "connection request");
	check(dat_cr_query(event.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &cr_param),
	      "dat_cr_query");
	if (cr_param.private_data_size < (DAT_COUNT)sizeof hello ||
	    memcmp(cr_param.private_data, hello, sizeof hello) != 0) {
		fprintf(stderr, "loopback: the private data did not arrive\n");
		return 1;
	}
	check(dat_cr_accept(event.event_data.cr_arrival_event_data.cr_handle, server.ep, 0, NULL),
	      "dat_cr_accept");
	wait_for(server.conn, DAT_CONNECTION_EVENT_ESTABLISHED, "server established");
	wait_for(client.conn, DAT_CONNECTION_EVENT_ESTABLISHED, "client established");

	/* Send. */
	strcpy(client.buf, "ping");
	iov.virtual_address = (DAT_VADDR)(uintptr_t)client.buf;
	iov.segment_length = 5;
	iov.lmr_context = client.lmr_context;
	cookie.as_64 = 2;
	check(dat_ep_post_send(client.ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
	wait_for(client.dto, DAT_DTO_COMPLETION_EVENT, "send completion");
	event = wait_for(server.dto, DAT_DTO_COMPLETION_EVENT, "receive completion");
	if (event.event_data.dto_completion_event_data.transfered_length != 5 || strcmp(server.buf, "ping")) {
		fprintf(stderr, "loopback: the message did not arrive\n");
		return 1;
	}

	/* RDMA write from the client into the server's buffer. */
	memset(client.buf, 'w', SIZE);
	iov.segment_length = SIZE;
	rmr.virtual_address = (DAT_VADDR)(uintptr_t)server.buf;
	rmr.segment_length = SIZE;
	rmr.rmr_context = server.rmr_context;
	cookie.as_64 = 3;
	check(dat_ep_post_rdma_write(client.ep, 1, &iov, cookie, &rmr, DAT_COMPLETION_DEFAULT_FLAG),
	      "dat_ep_post_rdma_write");
	wait_for(client.dto, DAT_DTO_COMPLETION_EVENT, "RDMA write completion");

	/* RDMA read it back into a cleared client buffer. */
	memset(client.buf, 0, SIZE);
	cookie.as_64 = 4;
	check(dat_ep_post_rdma_read(client.ep, 1, &iov, cookie, &rmr, DAT_COMPLETION_DEFAULT_FLAG),
	      "dat_ep_post_rdma_read");
	wait_for(client.dto, DAT_DTO_COMPLETION_EVENT, "RDMA read completion");
	for (int i = 0; i < SIZE; i++) {
		if (client.buf[i] != 'w') {
			fprintf(stderr, "loopback: byte %d read back as 0x%02x\n", i, client.buf[i]);
			return 1;
		}
	}

	/* The IB extension: an RDMA write whose immediate data reaches the
	 * server with the receive it consumes... */
	if (ia_attr.extension_supported != DAT_EXTENSION_IB) {
		fprintf(stderr, "loopback: %s offers no IB extension\n", name);
		return 1;
	}
	iov.virtual_address = (DAT_VADDR)(uintptr_t)server.buf;
	iov.lmr_context = server.lmr_context;
	iov.segment_length = 8;
	cookie.as_64 = 5;
	check(dat_ep_post_recv(server.ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
	strcpy(client.buf, "immediate");
	iov.virtual_address = (DAT_VADDR)(uintptr_t)client.buf;
	iov.lmr_context = client.lmr_context;
	iov.segment_length = 16;
	cookie.as_64 = 6;
	check(dat_ib_post_rdma_write_immed(client.ep, 1, &iov, cookie, &rmr, 0x1234, DAT_COMPLETION_DEFAULT_FLAG),
	      "dat_ib_post_rdma_write_immed");
	wait_ext(client.dto, DAT_IB_RDMA_WRITE_IMMED, "RDMA write with immediate completion");
	if (wait_ext(server.dto, DAT_IB_RDMA_WRITE_IMMED_DATA, "immediate data").val.immed.data != 0x1234 ||
	    strcmp(server.buf, "immediate")) {
		fprintf(stderr, "loopback: the write with immediate data did not arrive\n");
		return 1;
	}

	/* ...then compare-and-swap and fetch-and-add on the server's first
	 * 8 bytes, the old value landing in the client's. */
	uint64_t *target = (uint64_t *)server.buf, *old = (uint64_t *)client.buf;
	*target = 7;
	iov.segment_length = 8;
	rmr.segment_length = 8;
	cookie.as_64 = 7;
	check(dat_ib_post_cmp_and_swap(client.ep, 7, 9, &iov, cookie, &rmr, DAT_COMPLETION_DEFAULT_FLAG),
	      "dat_ib_post_cmp_and_swap");
	wait_ext(client.dto, DAT_IB_CMP_AND_SWAP, "compare-and-swap completion");
	if (*old != 7 || *target != 9) {
		fprintf(stderr, "loopback: compare-and-swap: old %lu, now %lu\n", (unsigned long)*old,
			(unsigned long)*target);
		return 1;
	}
	cookie.as_64 = 8;
	check(dat_ib_post_fetch_and_add(client.ep, 1, &iov, cookie, &rmr, DAT_COMPLETION_DEFAULT_FLAG),
	      "dat_ib_post_fetch_and_add");
	wait_ext(client.dto, DAT_IB_FETCH_AND_ADD, "fetch-and-add completion");
	if (*old != 9 || *target != 10) {
		fprintf(stderr, "loopback: fetch-and-add: old %lu, now %lu\n", (unsigned long)*old,
			(unsigned long)*target);
		return 1;
	}

	check(dat_ep_disconnect(client.ep, DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect");
	wait_for(client.conn, DAT_CONNECTION_EVENT_DISCONNECTED, "client disconnected");
	wait_for(server.conn, DAT_CONNECTION_EVENT_DISCONNECTED, "server disconnected");

	side_free(&client);
	side_free(&server);
	check(dat_psp_free(psp), "dat_psp_free");
	check(dat_evd_free(cr_evd), "dat_evd_free CR");
	check(dat_pz_free(pz), "dat_pz_free");
	check(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close");
	printf("loopback on %s: connect, send, RDMA write, RDMA read, write with immediate, compare-and-swap, fetch-and-add, disconnect: ok\n", name);
	return 0;
}
