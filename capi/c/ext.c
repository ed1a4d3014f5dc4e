/*
 * The provider table's handle_extendedop_func: read the arguments of the
 * dat_ib_post_* and dat_ib_ud_* macros, of dat_ib_open_query and of the
 * counters calls from the va_list and hand them to the provider behind the handle (for
 * the open query, the provider registered under the name the handle is).
 */
#include "ext.h"

/* capi/src/entry/query.rs's open query, installed before any provider is registered. */
static udat_open_query_fn open_query;

void udat_ext_set_open_query(udat_open_query_fn f)
{
	__atomic_store_n(&open_query, f, __ATOMIC_RELEASE);
}

/*
 * dat_ib_open_query, whose handle is the provider's name (libdat2 and
 * libudat.a's dat_extension_op read it first), and dat_ib_close_query,
 * which closes the IA it opened abruptly, as OFA's provider does.
 */
static DAT_RETURN query(DAT_HANDLE handle, DAT_IB_OP op, va_list args)
{
	if (op == DAT_IB_CLOSE_QUERY_OP) {
		if (handle == DAT_HANDLE_NULL)
			return DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA;
		return DAT_HANDLE_TO_PROVIDER(handle)->ia_close_func(handle, DAT_CLOSE_ABRUPT_FLAG);
	}
	DAT_IA_HANDLE *ia = va_arg(args, DAT_IA_HANDLE *);
	DAT_IA_ATTR_MASK ia_mask = va_arg(args, DAT_IA_ATTR_MASK);
	DAT_IA_ATTR *ia_attr = va_arg(args, DAT_IA_ATTR *);
	DAT_PROVIDER_ATTR_MASK provider_mask = va_arg(args, DAT_PROVIDER_ATTR_MASK);
	DAT_PROVIDER_ATTR *provider_attr = va_arg(args, DAT_PROVIDER_ATTR *);

	udat_open_query_fn f = __atomic_load_n(&open_query, __ATOMIC_ACQUIRE);

	if (f == NULL)
		return DAT_PROVIDER_NOT_FOUND;
	return f((const char *)handle, ia, ia_mask, ia_attr, provider_mask, provider_attr);
}

/* The counters calls, read as their macros pass them. */
static DAT_RETURN counters(DAT_HANDLE handle, DAT_IB_OP op, va_list args)
{
	udat_ext_counters c = { .op = op };

	if (op == DAT_QUERY_COUNTERS_OP || op == DAT_PRINT_COUNTERS_OP) {
		c.counter = va_arg(args, int);
		if (op == DAT_QUERY_COUNTERS_OP)
			c.out = va_arg(args, DAT_UINT64 *);
		c.reset = va_arg(args, int);
	} else {
		c.type = va_arg(args, int);
	}
	if (handle == DAT_HANDLE_NULL)
		return DAT_INVALID_HANDLE;
	return (*(const udat_provider_head *const *)handle)->counters(handle, &c);
}

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
	case DAT_IB_OPEN_QUERY_OP:
	case DAT_IB_CLOSE_QUERY_OP:
		return query(handle, (DAT_IB_OP)op, args);
	case DAT_QUERY_COUNTERS_OP:
	case DAT_PRINT_COUNTERS_OP:
	case DAT_IB_START_COUNTERS_OP:
	case DAT_IB_STOP_COUNTERS_OP:
		return counters(handle, (DAT_IB_OP)op, args);
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
		/* Collectives are not offered. */
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
