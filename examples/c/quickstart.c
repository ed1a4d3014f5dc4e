/*
 * udat's C quick start: one IA, two Endpoints connected to each other
 * through a Public Service Point, a send into a posted receive, an RDMA
 * write, and a clean teardown. Built against libudat.a, it needs no
 * libdat2 and no dat.conf.
 *
 *   cc examples/c/quickstart.c $(pkg-config --cflags --libs --static udat) -o quickstart
 *   ./quickstart                      # the software HCA: udat-softhca-mlx5_soft0
 *   ./quickstart udat-verbs-rxe0      # a verbs device
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dat2/udat.h>

#define CONN_QUAL 4000
#define SIZE 4096
#define TIMEOUT (5 * 1000 * 1000) /* µs */

static void check(DAT_RETURN ret, const char *what)
{
	const char *major = "?", *minor = "?";

	if (ret == DAT_SUCCESS)
		return;
	dat_strerror(ret, &major, &minor);
	fprintf(stderr, "quickstart: %s: %s %s\n", what, major, minor);
	exit(1);
}

/* Wait for the next event on `evd`, which must be `want`. */
static DAT_EVENT next(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, const char *what)
{
	DAT_EVENT event;
	DAT_COUNT more;

	check(dat_evd_wait(evd, TIMEOUT, 1, &event, &more), what);
	if (event.event_number != want) {
		fprintf(stderr, "quickstart: %s: event 0x%x\n", what, event.event_number);
		exit(1);
	}
	if (want == DAT_DTO_COMPLETION_EVENT &&
	    event.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
		fprintf(stderr, "quickstart: %s: DTO status %d\n", what,
			event.event_data.dto_completion_event_data.status);
		exit(1);
	}
	return event;
}

int main(int argc, char **argv)
{
	char *name = argc > 1 ? argv[1] : "udat-softhca-mlx5_soft0";
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, cr_evd, conn_evd, client_dto, server_dto;
	DAT_IA_ATTR attr;
	DAT_PZ_HANDLE pz;
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lmr_context;
	DAT_RMR_CONTEXT rmr_context;
	DAT_VLEN registered_size;
	DAT_VADDR registered_address;
	DAT_REGION_DESCRIPTION region;
	DAT_EP_HANDLE client, server;
	DAT_PSP_HANDLE psp;
	DAT_EVENT event;
	DAT_LMR_TRIPLET local;
	DAT_RMR_TRIPLET remote;
	DAT_DTO_COOKIE cookie;
	char *buf = calloc(2, SIZE); /* the client's half, then the server's */
	char *mine = buf, *theirs = buf + SIZE;

	check(dat_ia_open(name, 8, &async, &ia), "dat_ia_open");
	check(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL), "dat_ia_query");
	check(dat_pz_create(ia, &pz), "dat_pz_create");

	/* One registration covers both halves; it grants remote access too. */
	region.for_va = buf;
	check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, 2 * SIZE, pz, DAT_MEM_PRIV_ALL_FLAG,
			     DAT_VA_TYPE_VA, &lmr, &lmr_context, &rmr_context, &registered_size,
			     &registered_address),
	      "dat_lmr_create");

	check(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), "dat_evd_create CR");
	check(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd),
	      "dat_evd_create CONNECTION");
	check(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &client_dto), "dat_evd_create DTO");
	check(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &server_dto), "dat_evd_create DTO");
	check(dat_ep_create(ia, pz, client_dto, client_dto, conn_evd, NULL, &client), "dat_ep_create");
	check(dat_ep_create(ia, pz, server_dto, server_dto, conn_evd, NULL, &server), "dat_ep_create");

	/* The server listens, the client connects to the IA's own address. */
	check(dat_psp_create(ia, CONN_QUAL, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create");
	check(dat_ep_connect(client, attr.ia_address_ptr, CONN_QUAL, TIMEOUT, 0, NULL, DAT_QOS_BEST_EFFORT,
			     DAT_CONNECT_DEFAULT_FLAG),
	      "dat_ep_connect");
	event = next(cr_evd, DAT_CONNECTION_REQUEST_EVENT, "connection request");
	check(dat_cr_accept(event.event_data.cr_arrival_event_data.cr_handle, server, 0, NULL), "dat_cr_accept");
	next(conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, "established");
	next(conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED, "established");

	/* A send into a receive the server posted. */
	local.lmr_context = lmr_context;
	local.virtual_address = (DAT_VADDR)(uintptr_t)theirs;
	local.segment_length = SIZE;
	cookie.as_64 = 1;
	check(dat_ep_post_recv(server, 1, &local, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
	strcpy(mine, "hello, udat");
	local.virtual_address = (DAT_VADDR)(uintptr_t)mine;
	local.segment_length = sizeof "hello, udat";
	cookie.as_64 = 2;
	check(dat_ep_post_send(client, 1, &local, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
	next(client_dto, DAT_DTO_COMPLETION_EVENT, "send");
	event = next(server_dto, DAT_DTO_COMPLETION_EVENT, "receive");
	printf("received %u bytes: \"%s\" (cookie %lu)\n",
	       (unsigned)event.event_data.dto_completion_event_data.transfered_length, theirs,
	       (unsigned long)event.event_data.dto_completion_event_data.user_cookie.as_64);

	/* An RDMA write of the client's half into the server's. */
	memset(mine, 'w', SIZE);
	local.segment_length = SIZE;
	remote.rmr_context = rmr_context;
	remote.virtual_address = (DAT_VADDR)(uintptr_t)theirs;
	remote.segment_length = SIZE;
	cookie.as_64 = 3;
	check(dat_ep_post_rdma_write(client, 1, &local, cookie, &remote, DAT_COMPLETION_DEFAULT_FLAG),
	      "dat_ep_post_rdma_write");
	event = next(client_dto, DAT_DTO_COMPLETION_EVENT, "RDMA write");
	if (memcmp(mine, theirs, SIZE) != 0) {
		fprintf(stderr, "quickstart: the RDMA write did not land\n");
		return 1;
	}
	printf("RDMA write of %u bytes: done (cookie %lu)\n",
	       (unsigned)event.event_data.dto_completion_event_data.transfered_length,
	       (unsigned long)event.event_data.dto_completion_event_data.user_cookie.as_64);

	check(dat_ep_disconnect(client, DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect");
	next(conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, "disconnected");
	next(conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED, "disconnected");

	check(dat_ep_free(client), "dat_ep_free");
	check(dat_ep_free(server), "dat_ep_free");
	check(dat_psp_free(psp), "dat_psp_free");
	check(dat_evd_free(client_dto), "dat_evd_free");
	check(dat_evd_free(server_dto), "dat_evd_free");
	check(dat_evd_free(conn_evd), "dat_evd_free");
	check(dat_evd_free(cr_evd), "dat_evd_free");
	check(dat_lmr_free(lmr), "dat_lmr_free");
	check(dat_pz_free(pz), "dat_pz_free");
	check(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close");
	free(buf);
	printf("quickstart on %s: ok\n", name);
	return 0;
}
