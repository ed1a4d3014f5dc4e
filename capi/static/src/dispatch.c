/*
 * The consumer entry points of <dat2/udat.h> for libudat.a: each
 * dispatches through the provider table its first handle points at, as
 * libdat2 does, with the header's own redirection macros. A first handle
 * that no provider of this process handed out (null, garbage, misaligned)
 * is refused before anything is read through it. The IA handle of
 * libudat.a is the provider's own, so no handle table stands in between.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#define NOT_ISSUED (DAT_CLASS_ERROR | DAT_INVALID_HANDLE)

/* capi/src/handles.rs, `Spaces`: where the handle spaces of this process
 * start, and how many bytes of them are readable. */
struct udat_spaces {
	uintptr_t base;
	uintptr_t extent;
};

extern const struct udat_spaces *const udat_handle_spaces;

/* Whether a provider of this process handed out `handle`: an aligned word
 * of a readable handle space that holds a provider word. Inline, so that
 * a dispatch stays a jump into the provider (handles.rs: issued). */
static inline int udat_handle_issued(DAT_HANDLE handle)
{
	uintptr_t extent = __atomic_load_n(&udat_handle_spaces->extent, __ATOMIC_ACQUIRE);
	uintptr_t off = (uintptr_t)handle - __atomic_load_n(&udat_handle_spaces->base, __ATOMIC_RELAXED);

	return off < extent && (off & (sizeof(uintptr_t) - 1)) == 0 &&
	       __atomic_load_n((const uintptr_t *)handle, __ATOMIC_RELAXED) != 0;
}

DAT_RETURN DAT_API dat_cno_create(DAT_IA_HANDLE a0, DAT_OS_WAIT_PROXY_AGENT a1, DAT_CNO_HANDLE * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_CNO_CREATE(a0, a1, a2);
}

DAT_RETURN DAT_API dat_cno_free(DAT_CNO_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_CNO_FREE(a0);
}

DAT_RETURN DAT_API dat_cno_modify_agent(DAT_CNO_HANDLE a0, DAT_OS_WAIT_PROXY_AGENT a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_CNO_MODIFY_AGENT(a0, a1);
}

DAT_RETURN DAT_API dat_cno_query(DAT_CNO_HANDLE a0, DAT_CNO_PARAM_MASK a1, DAT_CNO_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_CNO_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_cno_wait(DAT_CNO_HANDLE a0, DAT_TIMEOUT a1, DAT_EVD_HANDLE * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_CNO_WAIT(a0, a1, a2);
}

DAT_RETURN DAT_API dat_cr_accept(DAT_CR_HANDLE a0, DAT_EP_HANDLE a1, DAT_COUNT a2, const DAT_PVOID a3)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_CR_ACCEPT(a0, a1, a2, a3);
}

DAT_RETURN DAT_API dat_cr_handoff(DAT_CR_HANDLE a0, DAT_CONN_QUAL a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_CR_HANDOFF(a0, a1);
}

DAT_RETURN DAT_API dat_cr_query(DAT_CR_HANDLE a0, DAT_CR_PARAM_MASK a1, DAT_CR_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_CR_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_cr_reject(DAT_CR_HANDLE a0, DAT_COUNT a1, const DAT_PVOID a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_CR_REJECT(a0, a1, a2);
}

DAT_RETURN DAT_API dat_ep_connect(DAT_EP_HANDLE a0, DAT_IA_ADDRESS_PTR a1, DAT_CONN_QUAL a2, DAT_TIMEOUT a3, DAT_COUNT a4, const DAT_PVOID a5, DAT_QOS a6, DAT_CONNECT_FLAGS a7)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_CONNECT(a0, a1, a2, a3, a4, a5, a6, a7);
}

DAT_RETURN DAT_API dat_ep_create(DAT_IA_HANDLE a0, DAT_PZ_HANDLE a1, DAT_EVD_HANDLE a2, DAT_EVD_HANDLE a3, DAT_EVD_HANDLE a4, const DAT_EP_ATTR * a5, DAT_EP_HANDLE * a6)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_CREATE(a0, a1, a2, a3, a4, a5, a6);
}

DAT_RETURN DAT_API dat_ep_create_with_srq(DAT_IA_HANDLE a0, DAT_PZ_HANDLE a1, DAT_EVD_HANDLE a2, DAT_EVD_HANDLE a3, DAT_EVD_HANDLE a4, DAT_SRQ_HANDLE a5, const DAT_EP_ATTR * a6, DAT_EP_HANDLE * a7)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_CREATE_WITH_SRQ(a0, a1, a2, a3, a4, a5, a6, a7);
}

DAT_RETURN DAT_API dat_ep_disconnect(DAT_EP_HANDLE a0, DAT_CLOSE_FLAGS a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_DISCONNECT(a0, a1);
}

DAT_RETURN DAT_API dat_ep_dup_connect(DAT_EP_HANDLE a0, DAT_EP_HANDLE a1, DAT_TIMEOUT a2, DAT_COUNT a3, const DAT_PVOID a4, DAT_QOS a5)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_DUP_CONNECT(a0, a1, a2, a3, a4, a5);
}

DAT_RETURN DAT_API dat_ep_free(DAT_EP_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_FREE(a0);
}

DAT_RETURN DAT_API dat_ep_get_status(DAT_EP_HANDLE a0, DAT_EP_STATE * a1, DAT_BOOLEAN * a2, DAT_BOOLEAN * a3)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_GET_STATUS(a0, a1, a2, a3);
}

DAT_RETURN DAT_API dat_ep_modify(DAT_EP_HANDLE a0, DAT_EP_PARAM_MASK a1, const DAT_EP_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_MODIFY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_ep_post_rdma_read(DAT_EP_HANDLE a0, DAT_COUNT a1, DAT_LMR_TRIPLET * a2, DAT_DTO_COOKIE a3, const DAT_RMR_TRIPLET * a4, DAT_COMPLETION_FLAGS a5)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_POST_RDMA_READ(a0, a1, a2, a3, a4, a5);
}

DAT_RETURN DAT_API dat_ep_post_rdma_write(DAT_EP_HANDLE a0, DAT_COUNT a1, DAT_LMR_TRIPLET * a2, DAT_DTO_COOKIE a3, const DAT_RMR_TRIPLET * a4, DAT_COMPLETION_FLAGS a5)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_POST_RDMA_WRITE(a0, a1, a2, a3, a4, a5);
}

DAT_RETURN DAT_API dat_ep_post_recv(DAT_EP_HANDLE a0, DAT_COUNT a1, DAT_LMR_TRIPLET * a2, DAT_DTO_COOKIE a3, DAT_COMPLETION_FLAGS a4)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_POST_RECV(a0, a1, a2, a3, a4);
}

DAT_RETURN DAT_API dat_ep_post_send(DAT_EP_HANDLE a0, DAT_COUNT a1, DAT_LMR_TRIPLET * a2, DAT_DTO_COOKIE a3, DAT_COMPLETION_FLAGS a4)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_POST_SEND(a0, a1, a2, a3, a4);
}

DAT_RETURN DAT_API dat_ep_query(DAT_EP_HANDLE a0, DAT_EP_PARAM_MASK a1, DAT_EP_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_ep_recv_query(DAT_EP_HANDLE a0, DAT_COUNT * a1, DAT_COUNT * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_RECV_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_ep_reset(DAT_EP_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_RESET(a0);
}

DAT_RETURN DAT_API dat_ep_set_watermark(DAT_EP_HANDLE a0, DAT_COUNT a1, DAT_COUNT a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EP_SET_WATERMARK(a0, a1, a2);
}

DAT_RETURN DAT_API dat_evd_clear_unwaitable(DAT_EVD_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_CLEAR_UNWAITABLE(a0);
}

DAT_RETURN DAT_API dat_evd_create(DAT_IA_HANDLE a0, DAT_COUNT a1, DAT_CNO_HANDLE a2, DAT_EVD_FLAGS a3, DAT_EVD_HANDLE * a4)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_CREATE(a0, a1, a2, a3, a4);
}

DAT_RETURN DAT_API dat_evd_dequeue(DAT_EVD_HANDLE a0, DAT_EVENT * a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_DEQUEUE(a0, a1);
}

DAT_RETURN DAT_API dat_evd_disable(DAT_EVD_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_DISABLE(a0);
}

DAT_RETURN DAT_API dat_evd_enable(DAT_EVD_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_ENABLE(a0);
}

DAT_RETURN DAT_API dat_evd_free(DAT_EVD_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_FREE(a0);
}

DAT_RETURN DAT_API dat_evd_modify_cno(DAT_EVD_HANDLE a0, DAT_CNO_HANDLE a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_MODIFY_CNO(a0, a1);
}

DAT_RETURN DAT_API dat_evd_post_se(DAT_EVD_HANDLE a0, const DAT_EVENT * a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_POST_SE(a0, a1);
}

DAT_RETURN DAT_API dat_evd_query(DAT_EVD_HANDLE a0, DAT_EVD_PARAM_MASK a1, DAT_EVD_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_evd_resize(DAT_EVD_HANDLE a0, DAT_COUNT a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_RESIZE(a0, a1);
}

DAT_RETURN DAT_API dat_evd_set_unwaitable(DAT_EVD_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_SET_UNWAITABLE(a0);
}

DAT_RETURN DAT_API dat_evd_wait(DAT_EVD_HANDLE a0, DAT_TIMEOUT a1, DAT_COUNT a2, DAT_EVENT * a3, DAT_COUNT * a4)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_EVD_WAIT(a0, a1, a2, a3, a4);
}

DAT_RETURN DAT_API dat_get_consumer_context(DAT_HANDLE a0, DAT_CONTEXT * a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_GET_CONSUMER_CONTEXT(a0, a1);
}

DAT_RETURN DAT_API dat_get_handle_type(DAT_HANDLE a0, DAT_HANDLE_TYPE * a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_GET_HANDLE_TYPE(a0, a1);
}

DAT_RETURN DAT_API dat_ia_query(DAT_IA_HANDLE a0, DAT_EVD_HANDLE * a1, DAT_IA_ATTR_MASK a2, DAT_IA_ATTR * a3, DAT_PROVIDER_ATTR_MASK a4, DAT_PROVIDER_ATTR * a5)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_IA_QUERY(a0, a1, a2, a3, a4, a5);
}

DAT_RETURN DAT_API dat_lmr_create(DAT_IA_HANDLE a0, DAT_MEM_TYPE a1, DAT_REGION_DESCRIPTION a2, DAT_VLEN a3, DAT_PZ_HANDLE a4, DAT_MEM_PRIV_FLAGS a5, DAT_VA_TYPE a6, DAT_LMR_HANDLE * a7, DAT_LMR_CONTEXT * a8, DAT_RMR_CONTEXT * a9, DAT_VLEN * a10, DAT_VADDR * a11)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_LMR_CREATE(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11);
}

DAT_RETURN DAT_API dat_lmr_free(DAT_LMR_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_LMR_FREE(a0);
}

DAT_RETURN DAT_API dat_lmr_query(DAT_LMR_HANDLE a0, DAT_LMR_PARAM_MASK a1, DAT_LMR_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_LMR_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_lmr_sync_rdma_read(DAT_IA_HANDLE a0, const DAT_LMR_TRIPLET * a1, DAT_VLEN a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_LMR_SYNC_RDMA_READ(a0, a1, a2);
}

DAT_RETURN DAT_API dat_lmr_sync_rdma_write(DAT_IA_HANDLE a0, const DAT_LMR_TRIPLET * a1, DAT_VLEN a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_LMR_SYNC_RDMA_WRITE(a0, a1, a2);
}

DAT_RETURN DAT_API dat_psp_create(DAT_IA_HANDLE a0, DAT_CONN_QUAL a1, DAT_EVD_HANDLE a2, DAT_PSP_FLAGS a3, DAT_PSP_HANDLE * a4)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_PSP_CREATE(a0, a1, a2, a3, a4);
}

DAT_RETURN DAT_API dat_psp_create_any(DAT_IA_HANDLE a0, DAT_CONN_QUAL * a1, DAT_EVD_HANDLE a2, DAT_PSP_FLAGS a3, DAT_PSP_HANDLE * a4)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_PSP_CREATE_ANY(a0, a1, a2, a3, a4);
}

DAT_RETURN DAT_API dat_psp_free(DAT_PSP_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_PSP_FREE(a0);
}

DAT_RETURN DAT_API dat_psp_query(DAT_PSP_HANDLE a0, DAT_PSP_PARAM_MASK a1, DAT_PSP_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_PSP_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_pz_create(DAT_IA_HANDLE a0, DAT_PZ_HANDLE * a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_PZ_CREATE(a0, a1);
}

DAT_RETURN DAT_API dat_pz_free(DAT_PZ_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_PZ_FREE(a0);
}

DAT_RETURN DAT_API dat_pz_query(DAT_PZ_HANDLE a0, DAT_PZ_PARAM_MASK a1, DAT_PZ_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_PZ_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_rmr_bind(DAT_RMR_HANDLE a0, DAT_LMR_HANDLE a1, const DAT_LMR_TRIPLET * a2, DAT_MEM_PRIV_FLAGS a3, DAT_VA_TYPE a4, DAT_EP_HANDLE a5, DAT_RMR_COOKIE a6, DAT_COMPLETION_FLAGS a7, DAT_RMR_CONTEXT * a8)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_RMR_BIND(a0, a1, a2, a3, a4, a5, a6, a7, a8);
}

DAT_RETURN DAT_API dat_rmr_create(DAT_PZ_HANDLE a0, DAT_RMR_HANDLE * a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_RMR_CREATE(a0, a1);
}

DAT_RETURN DAT_API dat_rmr_free(DAT_RMR_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_RMR_FREE(a0);
}

DAT_RETURN DAT_API dat_rmr_query(DAT_RMR_HANDLE a0, DAT_RMR_PARAM_MASK a1, DAT_RMR_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_RMR_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_rsp_create(DAT_IA_HANDLE a0, DAT_CONN_QUAL a1, DAT_EP_HANDLE a2, DAT_EVD_HANDLE a3, DAT_RSP_HANDLE * a4)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_RSP_CREATE(a0, a1, a2, a3, a4);
}

DAT_RETURN DAT_API dat_rsp_free(DAT_RSP_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_RSP_FREE(a0);
}

DAT_RETURN DAT_API dat_rsp_query(DAT_RSP_HANDLE a0, DAT_RSP_PARAM_MASK a1, DAT_RSP_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_RSP_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_set_consumer_context(DAT_HANDLE a0, DAT_CONTEXT a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_SET_CONSUMER_CONTEXT(a0, a1);
}

DAT_RETURN DAT_API dat_srq_create(DAT_IA_HANDLE a0, DAT_PZ_HANDLE a1, DAT_SRQ_ATTR * a2, DAT_SRQ_HANDLE * a3)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_SRQ_CREATE(a0, a1, a2, a3);
}

DAT_RETURN DAT_API dat_srq_free(DAT_SRQ_HANDLE a0)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_SRQ_FREE(a0);
}

DAT_RETURN DAT_API dat_srq_post_recv(DAT_SRQ_HANDLE a0, DAT_COUNT a1, DAT_LMR_TRIPLET * a2, DAT_DTO_COOKIE a3)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_SRQ_POST_RECV(a0, a1, a2, a3);
}

DAT_RETURN DAT_API dat_srq_query(DAT_SRQ_HANDLE a0, DAT_SRQ_PARAM_MASK a1, DAT_SRQ_PARAM * a2)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_SRQ_QUERY(a0, a1, a2);
}

DAT_RETURN DAT_API dat_srq_resize(DAT_SRQ_HANDLE a0, DAT_COUNT a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_SRQ_RESIZE(a0, a1);
}

DAT_RETURN DAT_API dat_srq_set_lw(DAT_SRQ_HANDLE a0, DAT_COUNT a1)
{
	if (!udat_handle_issued(a0))
		return NOT_ISSUED;
	return DAT_SRQ_SET_LW(a0, a1);
}

DAT_RETURN DAT_API dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, ...)
{
	DAT_RETURN ret;
	va_list args;

	if (!udat_handle_issued(handle))
		return NOT_ISSUED;
	va_start(args, op);
	ret = DAT_HANDLE_EXTENDEDOP(handle, op, args);
	va_end(args);
	return ret;
}
