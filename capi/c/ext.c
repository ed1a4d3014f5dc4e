/*
 * The provider table's handle_extendedop_func: read the arguments of the
 * dat_ib_post_* and dat_ib_ud_* macros from the va_list and hand them to
 * the provider behind the handle.
 */
#include "ext.h"

static DAT_RETURN dispatch(DAT_HANDLE handle, const udat_ext_post *p)
{
	if (handle == DAT_HANDLE_NULL)
		return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
	return (*(const udat_provider_head *const *)handle)->post(handle, p);
}

DAT_RETURN udat_extendedop(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
	udat_ext_post p = { .op = (DAT_IB_OP)op };

	/* What leads, by operation; then the local buffer, the cookie and
	 * the remote buffer; the write's immediate data; the flags. */
	switch ((DAT_IB_OP)op) {
	case DAT_IB_RDMA_WRITE_IMMED_OP:
		p.segments = va_arg(args, DAT_COUNT);
		break;
	case DAT_IB_CMP_AND_SWAP_OP:
		p.compare_add = va_arg(args, DAT_UINT64);
		p.swap = va_arg(args, DAT_UINT64);
		p.segments = 1;
		break;
	case DAT_IB_FETCH_AND_ADD_OP:
		p.compare_add = va_arg(args, DAT_UINT64);
		p.segments = 1;
		break;
	case DAT_IB_UD_SEND_OP:
		p.segments = va_arg(args, DAT_COUNT);
		p.local = va_arg(args, DAT_LMR_TRIPLET *);
		p.ah = va_arg(args, DAT_IB_ADDR_HANDLE *);
		p.cookie = va_arg(args, DAT_DTO_COOKIE);
		p.flags = va_arg(args, DAT_COMPLETION_FLAGS);
		return dispatch(handle, &p);
	case DAT_IB_UD_CM_FREE_OP:
		p.cm = va_arg(args, DAT_CONTEXT);
		return dispatch(handle, &p);
	case DAT_IB_UD_AH_FREE_OP:
		p.ah = va_arg(args, DAT_IB_ADDR_HANDLE *);
		return dispatch(handle, &p);
	default:
		/* Counters and collectives are not offered. */
		return DAT_NOT_IMPLEMENTED;
	}
	p.local = va_arg(args, DAT_LMR_TRIPLET *);
	p.cookie = va_arg(args, DAT_DTO_COOKIE);
	p.remote = va_arg(args, DAT_RMR_TRIPLET *);
	if (p.op == DAT_IB_RDMA_WRITE_IMMED_OP)
		p.immediate = va_arg(args, DAT_UINT32);
	p.flags = va_arg(args, DAT_COMPLETION_FLAGS);
	return dispatch(handle, &p);
}
