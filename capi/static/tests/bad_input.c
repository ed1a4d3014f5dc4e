/*
 * Bad input against libudat.a, each case in a forked child so that a
 * crash is a failure of that case alone: garbage, misaligned, wrong-kind
 * and stale handles, first and secondary arguments, which must be
 * DAT_INVALID_HANDLE; unterminated names, impossible lengths and
 * misaligned arrays, which must be DAT_INVALID_PARAMETER; unknown provider
 * names, which must register nothing. The provider stays usable.
 *
 *   bad_input udat-softhca-mlx5_soft0 [CASE]
 *
 * With a case number, that case alone runs, in the process itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

/* A stale handle stays refused through this many create/free cycles. */
#define CYCLES 1000000

static char *provider;

static DAT_IA_HANDLE open_ia(DAT_EVD_HANDLE *async)
{
	DAT_IA_HANDLE ia;
	DAT_RETURN ret = dat_ia_open(provider, 8, async, &ia);

	if (ret != DAT_SUCCESS) {
		fprintf(stderr, "bad_input: cannot open %s: 0x%x\n", provider, ret);
		exit(2);
	}
	return ia;
}

static int invalid_parameter(DAT_RETURN ret, const char *what)
{
	if (DAT_GET_TYPE(ret) == DAT_INVALID_PARAMETER)
		return 1;
	fprintf(stderr, "bad_input: %s: 0x%x, not DAT_INVALID_PARAMETER\n", what, ret);
	return 0;
}

static int invalid(DAT_RETURN ret, const char *what)
{
	if (DAT_GET_TYPE(ret) == DAT_INVALID_HANDLE)
		return 1;
	fprintf(stderr, "bad_input: %s: 0x%x, not DAT_INVALID_HANDLE\n", what, ret);
	return 0;
}

/* The provider still works: a PZ comes and goes. */
static int usable(DAT_IA_HANDLE ia)
{
	DAT_PZ_HANDLE pz;

	return dat_pz_create(ia, &pz) == DAT_SUCCESS && dat_pz_free(pz) == DAT_SUCCESS;
}

/* An address that is mapped nowhere. */
static void *unmapped(void)
{
	void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	munmap(p, 4096);
	return p;
}

static int first_argument_garbage(void)
{
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
	DAT_IA_HANDLE ia = open_ia(&async);
	DAT_PZ_HANDLE pz;
	void *zeroed = calloc(1, 256), *filled = malloc(256);
	DAT_EVENT event;
	int ok = 1;

	memset(filled, 0x41, 256);
	if (dat_pz_create(ia, &pz) != DAT_SUCCESS)
		return 0;
	ok &= invalid(dat_pz_free(unmapped()), "pz_free(unmapped)");
	ok &= invalid(dat_pz_free((DAT_PZ_HANDLE)(uintptr_t)8), "pz_free(8)");
	ok &= invalid(dat_pz_free(zeroed), "pz_free(zeroed memory)");
	ok &= invalid(dat_pz_free(filled), "pz_free(0x41 memory)");
	for (size_t by = 1; by < sizeof(void *); by++)
		ok &= invalid(dat_pz_free((char *)pz + by), "pz_free(misaligned)");
	ok &= invalid(dat_pz_free((char *)pz - ((uintptr_t)1 << 32)), "pz_free(below the handle spaces)");
	ok &= invalid(dat_pz_free((char *)pz + 4), "pz_free(middle of a handle)");
	ok &= invalid(dat_pz_free((char *)pz + sizeof(void *)), "pz_free(a handle word never handed out)");
	ok &= invalid(dat_evd_dequeue(filled, &event), "evd_dequeue(0x41 memory)");
	ok &= invalid(dat_ia_close(unmapped(), DAT_CLOSE_ABRUPT_FLAG), "ia_close(unmapped)");
	ok &= invalid(dat_ep_free(pz), "ep_free(a PZ)");
	ok &= dat_pz_free(pz) == DAT_SUCCESS && usable(ia);
	return ok;
}

static int secondary_argument_garbage(void)
{
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
	DAT_IA_HANDLE ia = open_ia(&async);
	DAT_EP_HANDLE ep;
	DAT_PZ_HANDLE pz;
	int ok = 1;

	if (dat_pz_create(ia, &pz) != DAT_SUCCESS)
		return 0;
	ok &= invalid(dat_ep_create(ia, unmapped(), NULL, NULL, NULL, NULL, &ep), "ep_create(pz unmapped)");
	ok &= invalid(dat_ep_create(ia, (char *)pz + 2, NULL, NULL, NULL, NULL, &ep),
		      "ep_create(pz misaligned)");
	ok &= invalid(dat_ep_create(ia, ia, NULL, NULL, NULL, NULL, &ep), "ep_create(pz an IA)");
	ok &= dat_pz_free(pz) == DAT_SUCCESS && usable(ia);
	return ok;
}

/* A freed PZ's handle, kept while another PZ is made and freed over and
 * over, is refused every time, and never frees the new one. */
static int stale_handle_stays_dead(void)
{
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
	DAT_IA_HANDLE ia = open_ia(&async);
	DAT_PZ_HANDLE stale, pz;

	if (dat_pz_create(ia, &stale) != DAT_SUCCESS || dat_pz_free(stale) != DAT_SUCCESS)
		return 0;
	for (long i = 0; i < CYCLES; i++) {
		if (dat_pz_create(ia, &pz) != DAT_SUCCESS)
			return 0;
		if (!invalid(dat_pz_free(stale), "pz_free(stale)")) {
			fprintf(stderr, "bad_input: stale handle accepted after %ld cycles\n", i);
			return 0;
		}
		if (dat_pz_free(pz) != DAT_SUCCESS)
			return 0;
	}
	return 1;
}

/* A PZ handle of a closed IA frees nothing of another IA. */
static int stale_handle_of_a_closed_ia(void)
{
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
	DAT_IA_HANDLE ia = open_ia(&async), other;
	DAT_PZ_HANDLE stale, pz;

	if (dat_pz_create(ia, &stale) != DAT_SUCCESS || dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG) != DAT_SUCCESS)
		return 0;
	async = DAT_HANDLE_NULL;
	other = open_ia(&async);
	for (int i = 0; i < 10000; i++) {
		if (dat_pz_create(other, &pz) != DAT_SUCCESS)
			return 0;
		if (!invalid(dat_pz_free(stale), "pz_free(stale, closed IA)"))
			return 0;
		if (dat_pz_free(pz) != DAT_SUCCESS)
			return 0;
	}
	return invalid(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), "ia_close(closed IA)") && usable(other);
}

/* A name whose bytes run into a page that cannot be read, with no NUL. */
static int unterminated_name(void)
{
	static const char name[] = "udat-softhca-mlx5_soft0";
	long page = sysconf(_SC_PAGESIZE);
	char *two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *at = two + page - (sizeof(name) - 1);
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
	DAT_IA_HANDLE ia;

	memcpy(at, name, sizeof(name) - 1);
	mprotect(two + page, page, PROT_NONE);
	if (!invalid_parameter(dat_ia_open(at, 8, &async, &ia), "ia_open(unterminated name)"))
		return 0;
	open_ia(&async);
	return 1;
}

/* EP attributes handed in at an odd address are read as they are. */
static int misaligned_attributes_are_read(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep)
{
	static char buf[sizeof(DAT_EP_ATTR) + 8];
	DAT_EP_PARAM param;
	DAT_EP_HANDLE other;

	if (dat_ep_query(ep, DAT_EP_FIELD_ALL, &param) != DAT_SUCCESS)
		return 0;
	memcpy(buf + 1, &param.ep_attr, sizeof(param.ep_attr));
	if (dat_ep_create(ia, pz, evd, evd, evd, (DAT_EP_ATTR *)(buf + 1), &other) != DAT_SUCCESS) {
		fprintf(stderr, "bad_input: ep_create(misaligned attributes) failed\n");
		return 0;
	}
	return dat_ep_free(other) == DAT_SUCCESS;
}

/* Lengths and arrays the consumer gets wrong, refused before a byte of
 * them is read. */
static int impossible_lengths_and_misaligned_arrays(void)
{
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, evd;
	DAT_IA_HANDLE ia = open_ia(&async);
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(1) };
	DAT_LMR_TRIPLET triplets[2];
	DAT_DTO_COOKIE cookie = { .as_64 = 1 };
	DAT_EP_HANDLE ep;
	DAT_PZ_HANDLE pz;
	char data[16] = { 0 };
	int ok = 1;

	if (dat_pz_create(ia, &pz) != DAT_SUCCESS ||
	    dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG, &evd) != DAT_SUCCESS ||
	    dat_ep_create(ia, pz, evd, evd, evd, NULL, &ep) != DAT_SUCCESS)
		return 0;
	ok &= invalid_parameter(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&peer, 1, DAT_TIMEOUT_INFINITE, 0x7fffffff,
					       data, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
				"ep_connect(INT_MAX bytes of private data)");
	ok &= invalid_parameter(dat_ep_post_send(ep, 1, (DAT_LMR_TRIPLET *)((char *)triplets + 4), cookie,
						 DAT_COMPLETION_DEFAULT_FLAG),
				"ep_post_send(misaligned segments)");
	ok &= invalid_parameter(dat_ep_post_recv(ep, 0x7fffffff, triplets, cookie, DAT_COMPLETION_DEFAULT_FLAG),
				"ep_post_recv(INT_MAX segments)");
	ok &= invalid_parameter(dat_ep_post_send(ep, 1, triplets, cookie, DAT_COMPLETION_EVD_THRESHOLD_FLAG),
				"ep_post_send(bad flags)");
	ok &= dat_ep_post_send(ep, 1, triplets, cookie, DAT_COMPLETION_EVD_THRESHOLD_FLAG) ==
	      (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG5);
	ok &= misaligned_attributes_are_read(ia, pz, evd, ep);
	ok &= dat_ep_free(ep) == DAT_SUCCESS && usable(ia);
	return ok;
}

/* The DAT 2.0 calls libudat.a exports (libdat2 exports none of them):
 * garbage, wrong-kind and stale handles are DAT_INVALID_HANDLE, a null
 * triplet or cookie DAT_INVALID_PARAMETER; each works on live objects. */
static int dat20_calls(void)
{
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, evd;
	DAT_IA_HANDLE ia = open_ia(&async);
	static char cookie[DAT_LMR_COOKIE_SIZE] = "shm", mem[8192];
	DAT_REGION_DESCRIPTION region = { .for_shared_memory = { .virtual_address = mem, .shared_memory_id = NULL } };
	DAT_RMR_TRIPLET local = { 0 }, remote = { 0 };
	DAT_DTO_COOKIE dto = { .as_64 = 1 };
	DAT_LMR_CONTEXT lmr_context;
	DAT_RMR_CONTEXT rmr_context;
	DAT_VLEN size;
	DAT_VADDR addr;
	DAT_LMR_HANDLE lmr, same;
	DAT_RMR_HANDLE rmr;
	DAT_CSP_HANDLE csp;
	DAT_EP_HANDLE ep;
	DAT_PZ_HANDLE pz;
	int ok = 1;

	if (dat_pz_create(ia, &pz) != DAT_SUCCESS ||
	    dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG, &evd) != DAT_SUCCESS ||
	    dat_ep_create(ia, pz, evd, evd, evd, NULL, &ep) != DAT_SUCCESS)
		return 0;
	ok &= invalid(dat_rmr_create_for_ep(unmapped(), &rmr), "rmr_create_for_ep(unmapped)");
	ok &= invalid(dat_rmr_create_for_ep(ep, &rmr), "rmr_create_for_ep(an EP)");
	ok &= dat_rmr_create_for_ep(pz, &rmr) == DAT_SUCCESS && dat_rmr_free(rmr) == DAT_SUCCESS;
	ok &= invalid(dat_rmr_free(rmr), "rmr_free(stale)");
	ok &= invalid(dat_ep_post_send_with_invalidate(pz, 0, NULL, dto, DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE, 1),
		      "ep_post_send_with_invalidate(a PZ)");
	ok &= dat_ep_post_send_with_invalidate(ep, 0, NULL, dto, DAT_COMPLETION_DEFAULT_FLAG, 2, 1) ==
	      (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG6);
	ok &= DAT_GET_TYPE(dat_ep_post_send_with_invalidate(ep, 0, NULL, dto, DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE,
							    1)) == DAT_INVALID_STATE;
	ok &= invalid(dat_ep_post_rdma_read_to_rmr(unmapped(), &local, dto, &remote, DAT_COMPLETION_DEFAULT_FLAG),
		      "ep_post_rdma_read_to_rmr(unmapped)");
	ok &= dat_ep_post_rdma_read_to_rmr(ep, NULL, dto, &remote, DAT_COMPLETION_DEFAULT_FLAG) ==
	      (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG2);
	ok &= invalid_parameter(dat_lmr_create(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, region, sizeof(mem), pz,
					       DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &lmr_context,
					       &rmr_context, &size, &addr),
				"lmr_create(shared, no cookie)");
	region.for_shared_memory.shared_memory_id = &cookie;
	ok &= dat_lmr_create(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, region, sizeof(mem), pz, DAT_MEM_PRIV_ALL_FLAG,
			     DAT_VA_TYPE_VA, &lmr, &lmr_context, &rmr_context, &size, &addr) == DAT_SUCCESS;
	ok &= dat_lmr_create(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, region, sizeof(mem) / 2, pz, DAT_MEM_PRIV_ALL_FLAG,
			     DAT_VA_TYPE_VA, &same, &lmr_context, &rmr_context, &size, &addr) ==
	      (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG4);
	ok &= dat_lmr_free(lmr) == DAT_SUCCESS;
	ok &= invalid(dat_csp_free(unmapped()), "csp_free(unmapped)");
	ok &= invalid(dat_csp_free(pz), "csp_free(a PZ)");
	ok &= invalid(dat_csp_query(ep, DAT_CSP_FIELD_ALL, NULL), "csp_query(an EP)");
	ok &= invalid(dat_csp_create(unmapped(), NULL, NULL, evd, &csp), "csp_create(unmapped)");
	ok &= dat_csp_create(ia, NULL, NULL, evd, &csp) == (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG2);
	ok &= invalid(dat_ep_common_connect(pz, NULL, DAT_TIMEOUT_INFINITE, 0, NULL), "ep_common_connect(a PZ)");
	ok &= dat_ep_common_connect(ep, NULL, DAT_TIMEOUT_INFINITE, 0, NULL) ==
	      (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG2);
	ok &= dat_ep_free(ep) == DAT_SUCCESS && usable(ia);
	return ok;
}

/*
 * The IB extension's UD calls through dat_extension_op: a garbage EP is
 * DAT_INVALID_HANDLE; a null or unknown address handle, or a CM context
 * that names no connection, is DAT_INVALID_PARAMETER of its argument.
 */
static int ud_calls(void)
{
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, evd;
	DAT_IA_HANDLE ia = open_ia(&async);
	DAT_EP_ATTR attr = { .service_type = (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD, .max_recv_dtos = 4,
			     .max_request_dtos = 4, .max_recv_iov = 1, .max_request_iov = 1 };
	DAT_IB_ADDR_HANDLE unknown = { .ah = (struct ibv_ah *)(uintptr_t)0x5151, .qpn = 1 };
	DAT_LMR_TRIPLET iov = { 0 };
	DAT_DTO_COOKIE dto = { .as_64 = 1 };
	DAT_CONTEXT cm = { .as_64 = 0xdead };
	DAT_EP_HANDLE ep;
	DAT_PZ_HANDLE pz;
	int ok = 1;

	if (dat_pz_create(ia, &pz) != DAT_SUCCESS ||
	    dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG, &evd) != DAT_SUCCESS ||
	    dat_ep_create(ia, pz, evd, evd, evd, &attr, &ep) != DAT_SUCCESS)
		return 0;
	ok &= invalid(dat_ib_post_send_ud(unmapped(), 1, &iov, &unknown, dto, DAT_COMPLETION_DEFAULT_FLAG),
		      "ib_post_send_ud(unmapped)");
	ok &= invalid(dat_ib_post_send_ud(pz, 1, &iov, &unknown, dto, DAT_COMPLETION_DEFAULT_FLAG),
		      "ib_post_send_ud(a PZ)");
	ok &= dat_ib_post_send_ud(ep, 1, &iov, NULL, dto, DAT_COMPLETION_DEFAULT_FLAG) ==
	      (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG5);
	ok &= invalid(dat_ib_ud_ah_free(unmapped(), &unknown), "ib_ud_ah_free(unmapped)");
	ok &= dat_ib_ud_ah_free(ep, NULL) == (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
	ok &= dat_ib_ud_ah_free(ep, &unknown) == (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
	ok &= dat_ib_ud_cm_free(ep, cm) == (DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
	ok &= dat_ep_free(ep) == DAT_SUCCESS && usable(ia);
	return ok;
}

/* Resident memory, in pages. */
/*
 * Anonymous resident memory, in pages: what a provider's heap would take.
 * The whole resident set also counts the library's code as it is paged
 * in, by fault-around in blocks the page cache decides, which moved it by
 * up to 80 pages between runs of the same binary.
 */
static long resident(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "RssAnon: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb < 0 ? -1 : kb / 4;
}

/* Names the static registry could parse but whose device does not exist
 * register nothing and cost nothing. */
static int unknown_names_register_nothing(void)
{
	long before = 0;

	for (int i = 0; i < 500; i++) {
		char name[64];
		DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
		DAT_IA_HANDLE ia;
		DAT_RETURN ret;

		/* The first call brings in the code the others run. */
		if (i == 1)
			before = resident();
		snprintf(name, sizeof(name), "udat-softhca-nosuch%d", i);
		ret = dat_ia_open(name, 8, &async, &ia);
		if (DAT_GET_TYPE(ret) != DAT_PROVIDER_NOT_FOUND) {
			fprintf(stderr, "bad_input: ia_open(%s): 0x%x\n", name, ret);
			return 0;
		}
	}
	/* Before, each name cost a provider: 200 MB for the 500. */
	if (resident() - before > 64) {
		fprintf(stderr, "bad_input: 500 unknown names grew RSS by %ld pages\n", resident() - before);
		return 0;
	}
	return 1;
}

static const struct {
	const char *name;
	int (*run)(void);
} cases[] = {
	{ "a garbage first argument", first_argument_garbage },
	{ "a garbage secondary argument", secondary_argument_garbage },
	{ "a stale handle through 1,000,000 create/free cycles", stale_handle_stays_dead },
	{ "a stale handle of a closed IA", stale_handle_of_a_closed_ia },
	{ "an IA name with no NUL before an unreadable page", unterminated_name },
	{ "impossible lengths and misaligned arrays", impossible_lengths_and_misaligned_arrays },
	{ "500 unknown provider names", unknown_names_register_nothing },
	{ "the DAT 2.0 calls", dat20_calls },
	{ "the IB extension's UD calls", ud_calls },
};

int main(int argc, char **argv)
{
	int failed = 0;

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: bad_input PROVIDER [CASE]\n");
		return 2;
	}
	provider = argv[1];
	if (argc == 3) {
		size_t i = strtoul(argv[2], NULL, 10);

		return i < sizeof(cases) / sizeof(cases[0]) && cases[i].run() ? 0 : 1;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int status;
		pid_t pid;

		fflush(stdout);
		pid = fork();

		if (pid == 0)
			_exit(cases[i].run() ? 0 : 1);
		waitpid(pid, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("bad_input: ok: %s\n", cases[i].name);
		} else {
			failed++;
			if (WIFSIGNALED(status))
				printf("bad_input: FAILED: %s: signal %d\n", cases[i].name, WTERMSIG(status));
			else
				printf("bad_input: FAILED: %s\n", cases[i].name);
		}
	}
	printf("bad_input: %zu cases, %d failed\n", sizeof(cases) / sizeof(cases[0]), failed);
	return failed != 0;
}
