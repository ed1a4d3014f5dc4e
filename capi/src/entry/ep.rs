//! The Endpoint calls: create, query, modify, connect, disconnect, post,
//! free.

use std::ptr;

use udat_core::handle::{EpHandle, EvdHandle, IaHandle, Kind, PzHandle, SrqHandle};
use udat_core::types::{CloseFlags, CompletionFlags, ConnectFlags, EpAttr, IaAddress, LmrTriplet, Qos, RmrTriplet};
use udat_core::{DatError, DatResult, EpChanges, ErrorType};

use super::{bytes, count, input, iov, out, with, Cx};
use crate::instance::{Addr, Core, Transport};
use crate::sys::*;

// `DAT_EP_FIELD_*` of <dat2/dat.h> (macros, so not in the bindings).
const FIELD_PZ: u64 = 0x80;
const FIELD_RECV_EVD: u64 = 0x100;
const FIELD_REQUEST_EVD: u64 = 0x200;
const FIELD_CONNECT_EVD: u64 = 0x400;
const FIELD_ATTR_ALL: u64 = 0x7fff_f000;

/// A `DAT_EP_ATTR` as the core takes it (argument `n` for errors). Only the
/// reliable connected service exists.
pub(crate) fn attr_in(a: &DAT_EP_ATTR, n: u8) -> DatResult<EpAttr> {
    if a.service_type != DAT_SERVICE_TYPE_RC {
        return Err(DatError::invalid_arg(n));
    }
    Ok(EpAttr {
        max_message_size: a.max_message_size,
        max_rdma_size: a.max_rdma_size,
        qos: Qos(a.qos),
        recv_completion_flags: CompletionFlags(a.recv_completion_flags),
        request_completion_flags: CompletionFlags(a.request_completion_flags),
        max_recv_dtos: count(a.max_recv_dtos, n)?,
        max_request_dtos: count(a.max_request_dtos, n)?,
        max_recv_iov: count(a.max_recv_iov, n)?,
        max_request_iov: count(a.max_request_iov, n)?,
        max_rdma_read_in: count(a.max_rdma_read_in, n)?,
        max_rdma_read_out: count(a.max_rdma_read_out, n)?,
    })
}

fn int(v: u32) -> DAT_COUNT {
    v.min(i32::MAX as u32) as DAT_COUNT
}

/// The core's attributes as a `DAT_EP_ATTR`.
pub(crate) fn attr_out(a: &EpAttr) -> DAT_EP_ATTR {
    DAT_EP_ATTR {
        service_type: DAT_SERVICE_TYPE_RC,
        max_message_size: a.max_message_size,
        max_rdma_size: a.max_rdma_size,
        qos: a.qos.0,
        recv_completion_flags: a.recv_completion_flags.0,
        request_completion_flags: a.request_completion_flags.0,
        max_recv_dtos: int(a.max_recv_dtos),
        max_request_dtos: int(a.max_request_dtos),
        max_recv_iov: int(a.max_recv_iov),
        max_request_iov: int(a.max_request_iov),
        max_rdma_read_in: int(a.max_rdma_read_in),
        max_rdma_read_out: int(a.max_rdma_read_out),
        srq_soft_hw: 0,
        max_rdma_read_iov: int(a.max_request_iov),
        max_rdma_write_iov: int(a.max_request_iov),
        ep_transport_specific_count: 0,
        ep_transport_specific: ptr::null_mut(),
        ep_provider_specific_count: 0,
        ep_provider_specific: ptr::null_mut(),
    }
}

/// A socket address the consumer passed: `sockaddr_in` or `sockaddr_in6`,
/// read no further than its family's size.
pub(crate) fn address_in(p: *const DAT_SOCK_ADDR, n: u8) -> DatResult<IaAddress> {
    if p.is_null() {
        return Err(DatError::invalid_arg(n));
    }
    // SAFETY: a non-null address starts with its family.
    let family = unsafe { ptr::addr_of!((*p).sa_family).read() };
    let len = match i32::from(family) {
        libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
        _ => return Err(DatError::of(ErrorType::InvalidAddress)),
    };
    let mut a = IaAddress::default();
    // SAFETY: a socket address of this family is `len` bytes long, and
    // `len` fits the 28 bytes of an IaAddress.
    unsafe { ptr::copy_nonoverlapping(p.cast::<u8>(), a.bytes.as_mut_ptr(), len) };
    Ok(a)
}

pub(crate) fn remote(r: *const DAT_RMR_TRIPLET, n: u8) -> DatResult<RmrTriplet> {
    if r.is_null() {
        return Err(DatError::invalid_arg(n));
    }
    // SAFETY: a non-null triplet pointer from C points at a triplet; it is
    // read unaligned, which costs nothing here and asks nothing of it.
    let r = unsafe { r.read_unaligned() };
    Ok(RmrTriplet { virtual_address: r.virtual_address, segment_length: r.segment_length, rmr_context: r.rmr_context })
}

struct EvdArgs {
    recv: EvdHandle,
    request: EvdHandle,
    connect: EvdHandle,
}

fn evds<B: Transport>(
    cx: &Cx<B>,
    recv: DAT_EVD_HANDLE,
    request: DAT_EVD_HANDLE,
    connect: DAT_EVD_HANDLE,
) -> DatResult<EvdArgs> {
    Ok(EvdArgs {
        recv: EvdHandle::from_raw(cx.raw_or_null(recv, Kind::Evd)?),
        request: EvdHandle::from_raw(cx.raw_or_null(request, Kind::Evd)?),
        connect: EvdHandle::from_raw(cx.raw_or_null(connect, Kind::Evd)?),
    })
}

/// dat_ep_create(3DAT).
pub unsafe extern "C" fn ep_create<B: Transport>(
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    recv_evd: DAT_EVD_HANDLE,
    request_evd: DAT_EVD_HANDLE,
    connect_evd: DAT_EVD_HANDLE,
    attr: *const DAT_EP_ATTR,
    ep_out: *mut DAT_EP_HANDLE,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let pz = PzHandle::from_raw(cx.raw(pz, Kind::Pz)?);
            let e = evds(cx, recv_evd, request_evd, connect_evd)?;
            let attr = if attr.is_null() { None } else { Some(attr_in(&input(attr, 6)?, 6)?) };
            let slot = out(ep_out, 7)?;
            let ep = cx.st.core.ep_create(IaHandle::from_raw(raw), pz, e.recv, e.request, e.connect, attr.as_ref())?;
            *slot = cx.st.ptr(ep);
            Ok(())
        })
    }
}

/// dat_ep_create_with_srq(3DAT).
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ep_create_with_srq<B: Transport>(
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    recv_evd: DAT_EVD_HANDLE,
    request_evd: DAT_EVD_HANDLE,
    connect_evd: DAT_EVD_HANDLE,
    srq: DAT_SRQ_HANDLE,
    attr: *const DAT_EP_ATTR,
    ep_out: *mut DAT_EP_HANDLE,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let pz = PzHandle::from_raw(cx.raw(pz, Kind::Pz)?);
            let e = evds(cx, recv_evd, request_evd, connect_evd)?;
            let srq = SrqHandle::from_raw(cx.raw(srq, Kind::Srq)?);
            let attr = attr_in(&input(attr, 7)?, 7)?;
            let slot = out(ep_out, 8)?;
            let ep =
                cx.st.core.ep_create_with_srq(IaHandle::from_raw(raw), pz, e.recv, e.request, e.connect, srq, &attr)?;
            *slot = cx.st.ptr(ep);
            Ok(())
        })
    }
}

/// dat_ep_query(3DAT). The address pointers stay valid until the next
/// query of the same EP or its free.
pub unsafe extern "C" fn ep_query<B: Transport>(
    ep: DAT_EP_HANDLE,
    _mask: DAT_EP_PARAM_MASK,
    param: *mut DAT_EP_PARAM,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let slot = out(param, 3)?;
            let p = cx.st.core.ep_query(EpHandle::from_raw(raw))?;
            let addrs = &mut cx.st.ep_addr[raw.index() as usize];
            *addrs = (Addr(p.local_ia_address), Addr(p.remote_ia_address));
            let (local, remote) = (ptr::addr_of_mut!(addrs.0).cast(), ptr::addr_of_mut!(addrs.1).cast());
            slot.ia_handle = (cx.inst.ia_out)(cx.st.ptr(p.ia));
            slot.ep_state = p.state as DAT_EP_STATE;
            slot.comm = std::mem::zeroed();
            slot.local_ia_address_ptr = local;
            slot.local_port_qual = 0;
            slot.remote_ia_address_ptr = remote;
            slot.remote_port_qual = p.remote_port_qual;
            slot.pz_handle = cx.st.ptr(p.pz);
            slot.recv_evd_handle = cx.st.ptr(p.recv_evd);
            slot.request_evd_handle = cx.st.ptr(p.request_evd);
            slot.connect_evd_handle = cx.st.ptr(p.connect_evd);
            slot.srq_handle = cx.st.ptr(p.srq);
            slot.ep_attr = attr_out(&p.attr);
            Ok(())
        })
    }
}

/// dat_ep_modify(3DAT): the handles and attributes the mask names.
pub unsafe extern "C" fn ep_modify<B: Transport>(
    ep: DAT_EP_HANDLE,
    mask: DAT_EP_PARAM_MASK,
    param: *const DAT_EP_PARAM,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let p = &input(param, 3)?;
            let evd = |cx: &Cx<B>, set: bool, h| -> DatResult<Option<EvdHandle>> {
                Ok(if set { Some(EvdHandle::from_raw(cx.raw_or_null(h, Kind::Evd)?)) } else { None })
            };
            let changes = EpChanges {
                pz: if mask & FIELD_PZ != 0 { Some(PzHandle::from_raw(cx.raw(p.pz_handle, Kind::Pz)?)) } else { None },
                recv_evd: evd(cx, mask & FIELD_RECV_EVD != 0, p.recv_evd_handle)?,
                request_evd: evd(cx, mask & FIELD_REQUEST_EVD != 0, p.request_evd_handle)?,
                connect_evd: evd(cx, mask & FIELD_CONNECT_EVD != 0, p.connect_evd_handle)?,
                attr: if mask & FIELD_ATTR_ALL != 0 { Some(attr_in(&p.ep_attr, 3)?) } else { None },
            };
            cx.st.core.ep_modify(EpHandle::from_raw(raw), &changes)
        })
    }
}

/// dat_ep_connect(3DAT).
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ep_connect<B: Transport>(
    ep: DAT_EP_HANDLE,
    remote_addr: DAT_IA_ADDRESS_PTR,
    conn_qual: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    pd_size: DAT_COUNT,
    pd: DAT_PVOID,
    qos: DAT_QOS,
    flags: DAT_CONNECT_FLAGS,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let addr = address_in(remote_addr, 2)?;
            let data = bytes(pd, pd_size, 5)?;
            cx.st.core.ep_connect(
                EpHandle::from_raw(raw),
                &addr,
                conn_qual,
                timeout,
                data,
                Qos(qos),
                ConnectFlags(flags),
            )
        })
    }
}

/// dat_ep_dup_connect(3DAT).
pub unsafe extern "C" fn ep_dup_connect<B: Transport>(
    ep: DAT_EP_HANDLE,
    dup: DAT_EP_HANDLE,
    timeout: DAT_TIMEOUT,
    pd_size: DAT_COUNT,
    pd: DAT_PVOID,
    qos: DAT_QOS,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let dup = EpHandle::from_raw(cx.raw(dup, Kind::Ep)?);
            let data = bytes(pd, pd_size, 4)?;
            cx.st.core.ep_dup_connect(EpHandle::from_raw(raw), dup, timeout, data, Qos(qos))
        })
    }
}

/// dat_ep_disconnect(3DAT).
pub unsafe extern "C" fn ep_disconnect<B: Transport>(ep: DAT_EP_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let flags = CloseFlags::from_raw(flags).ok_or(DatError::invalid_arg(2))?;
            cx.st.core.ep_disconnect(EpHandle::from_raw(raw), flags)
        })
    }
}

/// The posts of an Endpoint share their first arguments; `f` is the core
/// call.
unsafe fn post<B: Transport>(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: *const DAT_LMR_TRIPLET,
    f: impl FnOnce(&mut Core<B>, EpHandle, &[LmrTriplet]) -> DatResult<()>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe { with::<B>(ep, Kind::Ep, |cx, raw| f(&mut cx.st.core, EpHandle::from_raw(raw), iov(segs, n, 2)?)) }
}

/// dat_ep_post_send(3DAT).
pub unsafe extern "C" fn ep_post_send<B: Transport>(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; a cookie is 64 bits.
    unsafe { post::<B>(ep, n, segs, |core, ep, iov| core.ep_post_send(ep, iov, cookie.as_64, CompletionFlags(flags))) }
}

/// dat_ep_post_recv(3DAT).
pub unsafe extern "C" fn ep_post_recv<B: Transport>(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; a cookie is 64 bits.
    unsafe { post::<B>(ep, n, segs, |core, ep, iov| core.ep_post_recv(ep, iov, cookie.as_64, CompletionFlags(flags))) }
}

/// dat_ep_post_rdma_read(3DAT).
pub unsafe extern "C" fn ep_post_rdma_read<B: Transport>(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    rmr: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; a cookie is 64 bits.
    unsafe {
        post::<B>(ep, n, segs, |core, ep, iov| {
            core.ep_post_rdma_read(ep, iov, cookie.as_64, &remote(rmr, 5)?, CompletionFlags(flags))
        })
    }
}

/// dat_ep_post_rdma_write(3DAT).
pub unsafe extern "C" fn ep_post_rdma_write<B: Transport>(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    rmr: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; a cookie is 64 bits.
    unsafe {
        post::<B>(ep, n, segs, |core, ep, iov| {
            core.ep_post_rdma_write(ep, iov, cookie.as_64, &remote(rmr, 5)?, CompletionFlags(flags))
        })
    }
}

/// dat_ep_get_status(3DAT).
pub unsafe extern "C" fn ep_get_status<B: Transport>(
    ep: DAT_EP_HANDLE,
    state: *mut DAT_EP_STATE,
    recv_idle: *mut DAT_BOOLEAN,
    request_idle: *mut DAT_BOOLEAN,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; out-pointers may be null.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let (s, recv, request) = cx.st.core.ep_get_status(EpHandle::from_raw(raw))?;
            let b = |v: bool| if v { DAT_TRUE } else { DAT_FALSE };
            *out(state, 2)? = s as DAT_EP_STATE;
            if let Some(p) = recv_idle.as_mut() {
                *p = b(recv);
            }
            if let Some(p) = request_idle.as_mut() {
                *p = b(request);
            }
            Ok(())
        })
    }
}

macro_rules! ep_call {
    ($(#[$doc:meta])* $name:ident => $method:ident) => {
        $(#[$doc])*
        pub unsafe extern "C" fn $name<B: Transport>(ep: DAT_EP_HANDLE) -> DAT_RETURN {
            // SAFETY: dispatched on `ep`'s provider word.
            unsafe { with::<B>(ep, Kind::Ep, |cx, raw| cx.st.core.$method(EpHandle::from_raw(raw))) }
        }
    };
}

ep_call!(/// dat_ep_free(3DAT).
    ep_free => ep_free);
/// How long `dat_ep_reset` waits for the transport's flushes, outside
/// the lock, before it resets anyway.
const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// dat_ep_reset(3DAT). A transport that still owes the EP's flushes gets
/// them awaited here, in 1 ms sleeps without the lock, rather than inside
/// the reset under it.
pub unsafe extern "C" fn ep_reset<B: Transport>(ep: DAT_EP_HANDLE) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let ep = EpHandle::from_raw(raw);
            let start = std::time::Instant::now();
            while cx.st.core.ep_reset_would_wait(ep)? && start.elapsed() < FLUSH_WAIT {
                parking_lot::MutexGuard::unlocked(&mut cx.st, || {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                });
            }
            cx.st.core.ep_reset(ep)
        })
    }
}

/// dat_ep_recv_query(3DAT).
pub unsafe extern "C" fn ep_recv_query<B: Transport>(
    ep: DAT_EP_HANDLE,
    nbufs: *mut DAT_COUNT,
    span: *mut DAT_COUNT,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; out-pointers may be null.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let (n, s) = cx.st.core.ep_recv_query(EpHandle::from_raw(raw))?;
            if let Some(p) = nbufs.as_mut() {
                *p = int(n);
            }
            if let Some(p) = span.as_mut() {
                *p = int(s);
            }
            Ok(())
        })
    }
}

/// dat_ep_set_watermark(3DAT).
pub unsafe extern "C" fn ep_set_watermark<B: Transport>(
    ep: DAT_EP_HANDLE,
    soft: DAT_COUNT,
    hard: DAT_COUNT,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            cx.st.core.ep_set_watermark(EpHandle::from_raw(raw), count(soft, 2)?, count(hard, 3)?)
        })
    }
}
