//! The Endpoint calls: create, query, modify, connect, disconnect, post,
//! free.

use std::mem::ManuallyDrop;
use std::ptr;

use udat_core::backend::{QpType, RequestOp};
use udat_core::handle::{EpHandle, EvdHandle, IaHandle, Kind, PzHandle, SrqHandle};
use udat_core::types::{CloseFlags, CompletionFlags, ConnectFlags, EpAttr, IaAddress, LmrTriplet, Qos, RmrTriplet};
use udat_core::{DatError, DatResult, Door, EpChanges, ErrorType, PostOp};

use super::arg::{iov, lane_segment, private_data};
use super::{shared_on, with, Arg, Entered, LaneHandle};
use crate::capacity::Heap;
use crate::instance::{invalid, Addr, Instance, State};
use crate::lock::{Exclusive, LaneLock};
use crate::sys::*;
use crate::transport::Transport;

// `DAT_EP_FIELD_*` of <dat2/dat.h> (macros, so not in the bindings).
const FIELD_PZ: u64 = 0x80;
const FIELD_RECV_EVD: u64 = 0x100;
const FIELD_REQUEST_EVD: u64 = 0x200;
const FIELD_CONNECT_EVD: u64 = 0x400;
const FIELD_ATTR_ALL: u64 = 0x7fff_f000;

/// The service a `DAT_EP_ATTR` names: the reliable connected one, or the
/// IB extension's `DAT_IB_SERVICE_TYPE_UD`; `invalid` for any other.
pub(crate) fn service_in(a: &DAT_EP_ATTR, invalid: DatError) -> DatResult<QpType> {
    match a.service_type {
        DAT_SERVICE_TYPE_RC => Ok(QpType::Rc),
        t if t == DAT_IB_SERVICE_TYPE_UD as DAT_SERVICE_TYPE => Ok(QpType::Ud),
        _ => Err(invalid),
    }
}

/// A `DAT_EP_ATTR` of the service `service` as the core takes it;
/// `invalid` is the error for a value out of range or another service
/// (the argument that holds the attributes).
pub(crate) fn attr_in(a: &DAT_EP_ATTR, service: QpType, invalid: DatError) -> DatResult<EpAttr> {
    if service_in(a, invalid)? != service {
        return Err(invalid);
    }
    let count = |c: DAT_COUNT| u32::try_from(c).map_err(|_| invalid);
    Ok(EpAttr {
        max_message_size: a.max_message_size,
        max_rdma_size: a.max_rdma_size,
        qos: Qos(a.qos),
        recv_completion_flags: CompletionFlags(a.recv_completion_flags),
        request_completion_flags: CompletionFlags(a.request_completion_flags),
        max_recv_dtos: count(a.max_recv_dtos)?,
        max_request_dtos: count(a.max_request_dtos)?,
        max_recv_iov: count(a.max_recv_iov)?,
        max_request_iov: count(a.max_request_iov)?,
        max_rdma_read_in: count(a.max_rdma_read_in)?,
        max_rdma_read_out: count(a.max_rdma_read_out)?,
    })
}

fn int(v: u32) -> DAT_COUNT {
    v.min(i32::MAX as u32) as DAT_COUNT
}

/// The core's attributes of an EP of `service` as a `DAT_EP_ATTR`.
pub(crate) fn attr_out(a: &EpAttr, service: QpType) -> DAT_EP_ATTR {
    DAT_EP_ATTR {
        service_type: match service {
            QpType::Rc => DAT_SERVICE_TYPE_RC,
            QpType::Ud => DAT_IB_SERVICE_TYPE_UD as DAT_SERVICE_TYPE,
        },
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
pub(crate) fn address_in<const N: u8>(p: Arg<N, DAT_IA_ADDRESS_PTR>) -> DatResult<IaAddress> {
    if p.0.is_null() {
        return Err(p.invalid());
    }
    let p = p.0;
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

/// The remote triplet of an RDMA post.
///
/// # Safety
/// A non-null `r` points at a readable triplet.
pub(crate) unsafe fn remote<const N: u8>(r: Arg<N, *const DAT_RMR_TRIPLET>) -> DatResult<RmrTriplet> {
    // SAFETY: by the contract.
    let r = unsafe { r.input() }?;
    Ok(RmrTriplet { virtual_address: r.virtual_address, segment_length: r.segment_length, rmr_context: r.rmr_context })
}

struct EvdArgs {
    recv: EvdHandle,
    request: EvdHandle,
    connect: EvdHandle,
}

fn evds<B: Transport>(
    cx: &Entered<B>,
    recv: Arg<3, DAT_EVD_HANDLE>,
    request: Arg<4, DAT_EVD_HANDLE>,
    connect: Arg<5, DAT_EVD_HANDLE>,
) -> DatResult<EvdArgs> {
    Ok(EvdArgs {
        recv: EvdHandle::from_raw(cx.raw_or_null(recv, Kind::Evd)?),
        request: EvdHandle::from_raw(cx.raw_or_null(request, Kind::Evd)?),
        connect: EvdHandle::from_raw(cx.raw_or_null(connect, Kind::Evd)?),
    })
}

/// dat_ep_create(3DAT).
pub(crate) unsafe fn ep_create<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    pz: Arg<2, DAT_PZ_HANDLE>,
    recv_evd: Arg<3, DAT_EVD_HANDLE>,
    request_evd: Arg<4, DAT_EVD_HANDLE>,
    connect_evd: Arg<5, DAT_EVD_HANDLE>,
    attr: Arg<6, *const DAT_EP_ATTR>,
    ep_out: Arg<7, *mut DAT_EP_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let pz = PzHandle::from_raw(cx.raw(pz, Kind::Pz)?);
            let e = evds(cx, recv_evd, request_evd, connect_evd)?;
            let (attr, service) = match attr.input_or_null()? {
                Some(a) => {
                    let service = service_in(&a, attr.invalid())?;
                    (Some(attr_in(&a, service, attr.invalid())?), service)
                }
                None => (None, QpType::Rc),
            };
            let slot = ep_out.out()?;
            let (ia, core) = (IaHandle::from_raw(raw), &mut cx.state.core);
            let ep = match service {
                QpType::Rc => core.ep_create(ia, pz, e.recv, e.request, e.connect, attr.as_ref())?,
                QpType::Ud => core.ep_create_ud(ia, pz, (e.recv, e.request, e.connect), attr.as_ref())?,
            };
            *slot = named(cx, ep)?;
            Ok(())
        })
    }
}

/// dat_ep_create_with_srq(3DAT).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ep_create_with_srq<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    pz: Arg<2, DAT_PZ_HANDLE>,
    recv_evd: Arg<3, DAT_EVD_HANDLE>,
    request_evd: Arg<4, DAT_EVD_HANDLE>,
    connect_evd: Arg<5, DAT_EVD_HANDLE>,
    srq: Arg<6, DAT_SRQ_HANDLE>,
    attr: Arg<7, *const DAT_EP_ATTR>,
    ep_out: Arg<8, *mut DAT_EP_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let pz = PzHandle::from_raw(cx.raw(pz, Kind::Pz)?);
            let e = evds(cx, recv_evd, request_evd, connect_evd)?;
            let srq = SrqHandle::from_raw(cx.raw(srq, Kind::Srq)?);
            let attr = attr_in(&attr.input()?, QpType::Rc, attr.invalid())?;
            let slot = ep_out.out()?;
            let ep = cx.state.core.ep_create_with_srq(
                IaHandle::from_raw(raw),
                pz,
                e.recv,
                e.request,
                e.connect,
                srq,
                &attr,
            )?;
            *slot = named(cx, ep)?;
            Ok(())
        })
    }
}

/// The C handle of the new EP `ep`, which the EP keeps for the events
/// of its completions (`udat_core::Provider::ep_name`).
fn named<B: Transport>(cx: &mut Entered<B>, ep: EpHandle) -> DatResult<DAT_EP_HANDLE> {
    let h = cx.state.ptr(ep);
    cx.state.core.ep_name(ep, h as usize as u64)?;
    Ok(h)
}

/// dat_ep_query(3DAT). The address pointers stay valid until the next
/// query of the same EP or its free.
pub(crate) unsafe fn ep_query<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    _mask: Arg<2, DAT_EP_PARAM_MASK>,
    param: Arg<3, *mut DAT_EP_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let slot = param.out()?;
            let p = cx.state.core.ep_query(EpHandle::from_raw(raw))?;
            let addrs = &mut cx.state.ep_addr[raw.index() as usize];
            *addrs = (Addr(p.local_ia_address), Addr(p.remote_ia_address));
            let (local, remote) = (ptr::addr_of_mut!(addrs.0).cast(), ptr::addr_of_mut!(addrs.1).cast());
            slot.ia_handle = (cx.instance.ia_out)(cx.state.ptr(p.ia));
            slot.ep_state = p.state as DAT_EP_STATE;
            slot.comm = std::mem::zeroed();
            slot.local_ia_address_ptr = local;
            slot.local_port_qual = 0;
            slot.remote_ia_address_ptr = remote;
            slot.remote_port_qual = p.remote_port_qual;
            slot.pz_handle = cx.state.ptr(p.pz);
            slot.recv_evd_handle = cx.state.ptr(p.recv_evd);
            slot.request_evd_handle = cx.state.ptr(p.request_evd);
            slot.connect_evd_handle = cx.state.ptr(p.connect_evd);
            slot.srq_handle = cx.state.ptr(p.srq);
            let ud = cx.state.core.ep_is_ud(EpHandle::from_raw(raw))?;
            slot.ep_attr = attr_out(&p.attr, if ud { QpType::Ud } else { QpType::Rc });
            Ok(())
        })
    }
}

/// dat_ep_modify(3DAT): the handles and attributes the mask names.
pub(crate) unsafe fn ep_modify<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    mask: Arg<2, DAT_EP_PARAM_MASK>,
    param: Arg<3, *const DAT_EP_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let p = &param.input()?;
            let mask = mask.0;
            let service = if cx.state.core.ep_is_ud(EpHandle::from_raw(raw))? { QpType::Ud } else { QpType::Rc };
            let evd = |cx: &Entered<B>, set: bool, h| -> DatResult<Option<EvdHandle>> {
                Ok(if set { Some(EvdHandle::from_raw(cx.raw_or_null(h, Kind::Evd)?)) } else { None })
            };
            let changes = EpChanges {
                pz: if mask & FIELD_PZ != 0 { Some(PzHandle::from_raw(cx.raw(p.pz_handle, Kind::Pz)?)) } else { None },
                recv_evd: evd(cx, mask & FIELD_RECV_EVD != 0, p.recv_evd_handle)?,
                request_evd: evd(cx, mask & FIELD_REQUEST_EVD != 0, p.request_evd_handle)?,
                connect_evd: evd(cx, mask & FIELD_CONNECT_EVD != 0, p.connect_evd_handle)?,
                attr: if mask & FIELD_ATTR_ALL != 0 {
                    Some(attr_in(&p.ep_attr, service, param.invalid())?)
                } else {
                    None
                },
            };
            cx.state.core.ep_modify(EpHandle::from_raw(raw), &changes)
        })
    }
}

/// dat_ep_connect(3DAT).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ep_connect<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    remote_addr: Arg<2, DAT_IA_ADDRESS_PTR>,
    conn_qual: Arg<3, DAT_CONN_QUAL>,
    timeout: Arg<4, DAT_TIMEOUT>,
    pd_size: Arg<5, DAT_COUNT>,
    pd: Arg<6, DAT_PVOID>,
    qos: Arg<7, DAT_QOS>,
    flags: Arg<8, DAT_CONNECT_FLAGS>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let addr = address_in(remote_addr)?;
            let data = private_data(pd_size, pd)?;
            cx.state.core.ep_connect(
                EpHandle::from_raw(raw),
                &addr,
                conn_qual.0,
                timeout.0,
                data,
                Qos(qos.0),
                ConnectFlags(flags.0),
            )
        })
    }
}

/// dat_ep_dup_connect(3DAT).
pub(crate) unsafe fn ep_dup_connect<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    dup: Arg<2, DAT_EP_HANDLE>,
    timeout: Arg<3, DAT_TIMEOUT>,
    pd_size: Arg<4, DAT_COUNT>,
    pd: Arg<5, DAT_PVOID>,
    qos: Arg<6, DAT_QOS>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let dup = EpHandle::from_raw(cx.raw(dup, Kind::Ep)?);
            let data = private_data(pd_size, pd)?;
            cx.state.core.ep_dup_connect(EpHandle::from_raw(raw), dup, timeout.0, data, Qos(qos.0))
        })
    }
}

/// dat_ep_disconnect(3DAT).
pub(crate) unsafe fn ep_disconnect<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    flags: Arg<2, DAT_CLOSE_FLAGS>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let flags = CloseFlags::from_raw(flags.0).ok_or(flags.invalid())?;
            cx.state.core.ep_disconnect(EpHandle::from_raw(raw), flags)
        })
    }
}

/// What a post of an Endpoint asks besides its handle and its segments:
/// one value, which the post's lane and its ordinary call both read. Each
/// call has its own type, so that the value holds only what its call
/// passed, and nothing of it is tested at run time.
trait Post: Copy {
    /// The post's lane on the EP `ep` names, of the one segment `seg`,
    /// through `door`: `true` if it took the post.
    ///
    /// # Safety
    /// A remote pointer the value holds is null or points at a readable
    /// triplet (the call's contract).
    unsafe fn lane<B: Transport>(self, door: &mut impl Door<B, Heap>, ep: LaneHandle<'_>, seg: &LmrTriplet) -> bool;

    /// The ordinary call on `ep` with the segments `iov`, through `door`:
    /// every rule, and the exact error.
    ///
    /// # Safety
    /// As [`Post::lane`].
    unsafe fn ordinary<B: Transport>(
        self,
        door: &mut impl Door<B, Heap>,
        ep: EpHandle,
        iov: &[LmrTriplet],
    ) -> DatResult<()>;

    /// The ordinary call, where the lane did not take the post, out of
    /// line and entered anew ([`ordinary_post`]), shared if `SHARES`: a
    /// jump with the C arguments of the call, which the post's registers
    /// still hold.
    ///
    /// # Safety
    /// As for [`post`].
    unsafe fn not_taken<B: Transport, const SHARES: bool>(
        self,
        ep: Arg<1, DAT_EP_HANDLE>,
        n: Arg<2, DAT_COUNT>,
        segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    ) -> DAT_RETURN;
}

/// A request's operation as the consumer passed it, its remote buffer
/// still behind its pointer.
trait Operation: Copy {
    /// The operation, its remote buffer read, or the pointer's refusal.
    ///
    /// # Safety
    /// A non-null remote pointer points at a readable triplet.
    unsafe fn read(self) -> DatResult<RequestOp>;
}

/// dat_ep_post_send(3DAT)'s operation.
#[derive(Clone, Copy)]
struct Send;

/// dat_ep_post_rdma_write(3DAT)'s operation, into the remote buffer.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct RdmaWrite(Arg<5, *const DAT_RMR_TRIPLET>);

/// dat_ep_post_rdma_read(3DAT)'s operation, from the remote buffer.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct RdmaRead(Arg<5, *const DAT_RMR_TRIPLET>);

impl Operation for Send {
    #[inline(always)]
    unsafe fn read(self) -> DatResult<RequestOp> {
        Ok(RequestOp::Send)
    }
}

impl Operation for RdmaWrite {
    #[inline(always)]
    unsafe fn read(self) -> DatResult<RequestOp> {
        // SAFETY: by the contract.
        Ok(RequestOp::RdmaWrite { remote: unsafe { remote(self.0) }? })
    }
}

impl Operation for RdmaRead {
    #[inline(always)]
    unsafe fn read(self) -> DatResult<RequestOp> {
        // SAFETY: by the contract.
        Ok(RequestOp::RdmaRead { remote: unsafe { remote(self.0) }? })
    }
}

/// A request: dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT) or
/// dat_ep_post_rdma_read(3DAT), as `op` says.
#[derive(Clone, Copy)]
struct Request<O> {
    cookie: u64,
    flags: CompletionFlags,
    op: O,
}

/// dat_ep_post_recv(3DAT).
#[derive(Clone, Copy)]
struct Recv {
    cookie: u64,
    flags: CompletionFlags,
}

impl<O: Operation> Post for Request<O> {
    #[inline(always)]
    unsafe fn lane<B: Transport>(self, door: &mut impl Door<B, Heap>, ep: LaneHandle<'_>, seg: &LmrTriplet) -> bool {
        let Request { cookie, flags, op } = self;
        // An EP is named by its handle (`ep_create`, `cr_query`).
        let Some(name) = ep.name() else { return false };
        door.lane_request(
            ep.word(),
            name,
            seg,
            cookie,
            // Read where the lane needs it, once the EP is found (and, if
            // shared, held): read before the look-up, the remote buffer's
            // three words were kept across the shard and the EP's lock, and
            // spilled. A pointer the ordinary call refuses is the ordinary
            // call's.
            #[inline(always)]
            // SAFETY: by the contract.
            || unsafe { op.read() }.ok(),
            flags,
        )
    }

    #[inline(always)]
    unsafe fn ordinary<B: Transport>(
        self,
        door: &mut impl Door<B, Heap>,
        ep: EpHandle,
        iov: &[LmrTriplet],
    ) -> DatResult<()> {
        let Request { cookie, flags, op } = self;
        // SAFETY: by the contract.
        let op = unsafe { op.read() }?;
        door.ep_post_request(ep, iov, cookie, op, flags)
    }

    #[inline(always)]
    unsafe fn not_taken<B: Transport, const SHARES: bool>(
        self,
        ep: Arg<1, DAT_EP_HANDLE>,
        n: Arg<2, DAT_COUNT>,
        segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    ) -> DAT_RETURN {
        // SAFETY: forwarded contract.
        unsafe { request_not_taken::<B, SHARES, O>(ep, n, segs, self.cookie, self.op, self.flags.0) }
    }
}

/// [`Post::not_taken`] of a request, its value in the registers of the
/// C call's arguments, in their order (a send's operation has none): the
/// jump moves little. `extern "C"`, never called from C, as it must be
/// known not to unwind for a call from the C entry point to be a jump.
///
/// # Safety
/// As for [`post`].
#[cold]
#[inline(never)]
unsafe extern "C" fn request_not_taken<B: Transport, const SHARES: bool, O: Operation>(
    ep: Arg<1, DAT_EP_HANDLE>,
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    cookie: u64,
    op: O,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    // SAFETY: forwarded contract.
    unsafe { ordinary_post::<B, SHARES, _>(ep, n, segs, Request { cookie, flags: CompletionFlags(flags), op }) }
}

impl Post for Recv {
    #[inline(always)]
    unsafe fn lane<B: Transport>(self, door: &mut impl Door<B, Heap>, ep: LaneHandle<'_>, seg: &LmrTriplet) -> bool {
        let Some(name) = ep.name() else { return false };
        door.lane_recv(ep.word(), name, seg, self.cookie, self.flags)
    }

    #[inline(always)]
    unsafe fn ordinary<B: Transport>(
        self,
        door: &mut impl Door<B, Heap>,
        ep: EpHandle,
        iov: &[LmrTriplet],
    ) -> DatResult<()> {
        door.ep_post_recv(ep, iov, self.cookie, self.flags)
    }

    #[inline(always)]
    unsafe fn not_taken<B: Transport, const SHARES: bool>(
        self,
        ep: Arg<1, DAT_EP_HANDLE>,
        n: Arg<2, DAT_COUNT>,
        segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    ) -> DAT_RETURN {
        // SAFETY: forwarded contract.
        unsafe { recv_not_taken::<B, SHARES>(ep, n, segs, self.cookie, self.flags.0) }
    }
}

/// [`Post::not_taken`] of a receive, as [`request_not_taken`].
///
/// # Safety
/// As for [`post`].
#[cold]
#[inline(never)]
unsafe extern "C" fn recv_not_taken<B: Transport, const SHARES: bool>(
    ep: Arg<1, DAT_EP_HANDLE>,
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    cookie: u64,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    // SAFETY: forwarded contract.
    unsafe { ordinary_post::<B, SHARES, _>(ep, n, segs, Recv { cookie, flags: CompletionFlags(flags) }) }
}

/// The ordinary post, entered as every call enters it: the judge of every
/// error. Of a provider that shares (`SHARES`), with the state shared and
/// the EP locked, as [`post`] says.
///
/// # Safety
/// As for [`post`].
#[inline(always)]
unsafe fn ordinary_post<B: Transport, const SHARES: bool, P: Post>(
    ep: Arg<1, DAT_EP_HANDLE>,
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    post: P,
) -> DAT_RETURN {
    if SHARES {
        let h = ep.0;
        if h.is_null() {
            return invalid(Kind::Ep).to_raw();
        }
        // SAFETY: a non-null handle dispatched to this transport; the
        // provider shares (`SHARES`, its own table's), and the call
        // changes only the EP, whose lock the door takes, with no `&mut`
        // to the state (the contract of `shared_on`), which is
        // `Provider::locked`'s; the rest by the call's contract.
        return unsafe {
            let instance = Instance::<B>::of(h);
            shared_on(instance, h, Kind::Ep, |core, raw| {
                post.ordinary(&mut core.locked(instance.call_lock()), EpHandle::from_raw(raw), iov(n, segs)?)
            })
        };
    }
    // SAFETY: the contract.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| post.ordinary(&mut cx.state.core, EpHandle::from_raw(raw), iov(n, segs)?))
    }
}

/// A post of an Endpoint: its lane first, given the one segment of a post
/// of one, and the ordinary call only if the lane did not take the post.
///
/// A provider that shares its state among threads (`SHARES`, which its
/// own table's slot carries) posts with the state shared and only the EP
/// locked, through [`Provider::locked`](udat_core::Provider::locked)
/// ([`udat_core::shared`]); any other holds its state to itself. Both
/// are the same [`Door`], so the checks and their errors are the same
/// either way.
///
/// # Safety
/// `ep` is null or a handle this transport's table was dispatched for;
/// `segs` is null or holds `n` triplets, and a remote pointer `post`
/// holds is null or points at a readable triplet (the call's contract).
#[inline(always)]
unsafe fn post<B: Transport, const SHARES: bool, P: Post>(
    ep: Arg<1, DAT_EP_HANDLE>,
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    post: P,
) -> DAT_RETURN {
    let h = ep.0;
    if h.is_null() {
        return invalid(Kind::Ep).to_raw();
    }
    // SAFETY: a non-null handle dispatched to this transport.
    let instance = unsafe { Instance::<B>::of(h) };
    debug_assert_eq!(instance.shares, SHARES, "the slot of the instance's own table");
    if SHARES {
        // As below, with the state shared and only the EP locked: every
        // way out of the lane but the success is a jump. A poisoned
        // provider lets no sharer in, and a poisoned EP lock no holder
        // (`crate::lock`): the ordinary call then refuses.
        // SAFETY: the call's contract.
        let Some(seg) = (unsafe { lane_segment(n, segs) }) else {
            // SAFETY: the call's contract.
            return unsafe { post.not_taken::<B, true>(ep, n, segs) };
        };
        // SAFETY: the provider shares (`SHARES`, its own table's), so its
        // lock is `Threads::Sharing`'s; the lane changes only the EP, whose
        // lock the door takes.
        let Some(state) = (unsafe { instance.state.share() }) else {
            // SAFETY: the call's contract.
            return unsafe { post.not_taken::<B, true>(ep, n, segs) };
        };
        let named = LaneHandle::new(h, &state.handles, Kind::Ep);
        // SAFETY: the call's contract.
        let taken = unsafe { post.lane(&mut state.core.locked(LaneLock), named, seg) };
        // Let go before the jump, which enters anew.
        drop(state);
        if taken {
            return DAT_SUCCESS;
        }
        // SAFETY: the call's contract.
        return unsafe { post.not_taken::<B, true>(ep, n, segs) };
    }
    // Every way out of the lane but the success is a jump to the ordinary
    // call with the C arguments ([`Post::not_taken`]), which enters anew:
    // nothing is kept for it (an ordinary call made here would keep the
    // arguments in memory, stored on every post). A post of other than one
    // good segment goes before the word is taken, so that past it the
    // count is known and need not be kept.
    // SAFETY: the call's contract.
    let Some(seg) = (unsafe { lane_segment(n, segs) }) else {
        // SAFETY: the call's contract.
        return unsafe { post.not_taken::<B, false>(ep, n, segs) };
    };
    // SAFETY: a provider that does not share (`SHARES`, its own table's)
    // has the lock of one word (`Instance::new`).
    let Some(state) = (unsafe { instance.state.try_take_word() }) else {
        // SAFETY: the call's contract.
        return unsafe { post.not_taken::<B, false>(ep, n, segs) };
    };
    // Not dropped if the lane panics: it has no panic, and one could not
    // unwind out of this `extern "C"` call but would abort the process.
    // A guard to drop would cost its address stored on every post.
    let mut state = ManuallyDrop::new(state);
    let State { core, handles, .. } = &mut **state;
    // The lane reads the segment where it judges it, as the shared lane
    // does: a copy made here would need registers the C arguments hold,
    // and be spilled.
    let named = LaneHandle::new(h, handles, Kind::Ep);
    // SAFETY: the call's contract.
    let taken = unsafe { post.lane(core, named, seg) };
    // Let go before the jump: a lane that did not take the post wrote
    // nothing, so the ordinary call finds the state as the lane found it.
    // SAFETY: the lock is the word (above).
    unsafe { Exclusive::leave_word(ManuallyDrop::into_inner(state)) };
    if taken {
        return DAT_SUCCESS;
    }
    // SAFETY: the call's contract.
    unsafe { post.not_taken::<B, false>(ep, n, segs) }
}

/// dat_ep_post_send(3DAT).
#[inline(always)]
pub(crate) unsafe fn ep_post_send<B: Transport, const SHARES: bool>(
    ep: Arg<1, DAT_EP_HANDLE>,
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    cookie: Arg<4, DAT_DTO_COOKIE>,
    flags: Arg<5, DAT_COMPLETION_FLAGS>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; a cookie is 64 bits.
    unsafe {
        let (cookie, flags) = (cookie.0.as_64, CompletionFlags(flags.0));
        post::<B, SHARES, _>(ep, n, segs, Request { cookie, flags, op: Send })
    }
}

/// dat_ep_post_recv(3DAT).
#[inline(always)]
pub(crate) unsafe fn ep_post_recv<B: Transport, const SHARES: bool>(
    ep: Arg<1, DAT_EP_HANDLE>,
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    cookie: Arg<4, DAT_DTO_COOKIE>,
    flags: Arg<5, DAT_COMPLETION_FLAGS>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; a cookie is 64 bits.
    unsafe {
        let (cookie, flags) = (cookie.0.as_64, CompletionFlags(flags.0));
        post::<B, SHARES, _>(ep, n, segs, Recv { cookie, flags })
    }
}

/// dat_ep_post_rdma_read(3DAT).
#[inline(always)]
pub(crate) unsafe fn ep_post_rdma_read<B: Transport, const SHARES: bool>(
    ep: Arg<1, DAT_EP_HANDLE>,
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    cookie: Arg<4, DAT_DTO_COOKIE>,
    rmr: Arg<5, *const DAT_RMR_TRIPLET>,
    flags: Arg<6, DAT_COMPLETION_FLAGS>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; a cookie is 64 bits.
    unsafe {
        let (cookie, flags) = (cookie.0.as_64, CompletionFlags(flags.0));
        post::<B, SHARES, _>(ep, n, segs, Request { cookie, flags, op: RdmaRead(rmr) })
    }
}

/// dat_ep_post_rdma_write(3DAT).
#[inline(always)]
pub(crate) unsafe fn ep_post_rdma_write<B: Transport, const SHARES: bool>(
    ep: Arg<1, DAT_EP_HANDLE>,
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    cookie: Arg<4, DAT_DTO_COOKIE>,
    rmr: Arg<5, *const DAT_RMR_TRIPLET>,
    flags: Arg<6, DAT_COMPLETION_FLAGS>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; a cookie is 64 bits.
    unsafe {
        let (cookie, flags) = (cookie.0.as_64, CompletionFlags(flags.0));
        post::<B, SHARES, _>(ep, n, segs, Request { cookie, flags, op: RdmaWrite(rmr) })
    }
}

/// dat_ep_get_status(3DAT).
pub(crate) unsafe fn ep_get_status<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    state: Arg<2, *mut DAT_EP_STATE>,
    recv_idle: Arg<3, *mut DAT_BOOLEAN>,
    request_idle: Arg<4, *mut DAT_BOOLEAN>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; out-pointers may be null.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let (s, recv, request) = cx.state.core.ep_get_status(EpHandle::from_raw(raw))?;
            let b = |v: bool| if v { DAT_TRUE } else { DAT_FALSE };
            // Any of the three may be null: the page lists no error but the
            // handle's, and OFA's dtestx asks for the idle flags alone.
            if let Some(p) = state.out_or_null()? {
                *p = s as DAT_EP_STATE;
            }
            if let Some(p) = recv_idle.out_or_null()? {
                *p = b(recv);
            }
            if let Some(p) = request_idle.out_or_null()? {
                *p = b(request);
            }
            Ok(())
        })
    }
}

macro_rules! ep_call {
    ($(#[$doc:meta])* $name:ident => $method:ident) => {
        $(#[$doc])*
        pub(crate) unsafe fn $name<B: Transport>(ep: Arg<1, DAT_EP_HANDLE>) -> DAT_RETURN {
            // SAFETY: dispatched on `ep`'s provider word.
            unsafe { with::<B>(ep, Kind::Ep, |cx, raw| cx.state.core.$method(EpHandle::from_raw(raw))) }
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
pub(crate) unsafe fn ep_reset<B: Transport>(ep: Arg<1, DAT_EP_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let ep = EpHandle::from_raw(raw);
            let start = std::time::Instant::now();
            while cx.state.core.ep_reset_would_wait(ep)? && start.elapsed() < FLUSH_WAIT {
                Exclusive::unlocked(&mut cx.state, || std::thread::sleep(std::time::Duration::from_millis(1)));
            }
            cx.state.core.ep_reset(ep)
        })
    }
}

/// dat_ep_recv_query(3DAT).
pub(crate) unsafe fn ep_recv_query<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    nbufs: Arg<2, *mut DAT_COUNT>,
    span: Arg<3, *mut DAT_COUNT>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; out-pointers may be null.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let (n, s) = cx.state.core.ep_recv_query(EpHandle::from_raw(raw))?;
            if let Some(p) = nbufs.out_or_null()? {
                *p = int(n);
            }
            if let Some(p) = span.out_or_null()? {
                *p = int(s);
            }
            Ok(())
        })
    }
}

/// dat_ep_set_watermark(3DAT).
pub(crate) unsafe fn ep_set_watermark<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    soft: Arg<2, DAT_COUNT>,
    hard: Arg<3, DAT_COUNT>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            cx.state.core.ep_set_watermark(EpHandle::from_raw(raw), soft.count()?, hard.count()?)
        })
    }
}

/// dat_ep_post_send_with_invalidate of `<dat2/dat.h>` (DAT 2.0): a send
/// that invalidates the peer's `rmr_context` (`invalidate_flag`
/// `DAT_TRUE`), or a plain send (`DAT_FALSE`); any other flag value is
/// `DAT_INVALID_ARG6`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ep_post_send_with_invalidate<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    cookie: Arg<4, DAT_DTO_COOKIE>,
    flags: Arg<5, DAT_COMPLETION_FLAGS>,
    invalidate: Arg<6, DAT_BOOLEAN>,
    rmr_context: Arg<7, DAT_RMR_CONTEXT>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; a cookie is 64 bits; the
    // consumer's triplets (`iov`'s contract).
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let invalidate = match invalidate.0 {
                DAT_TRUE => true,
                DAT_FALSE => false,
                _ => return Err(invalidate.invalid()),
            };
            let local = iov(n, segs)?;
            let (cookie, flags) = (cookie.0.as_64, CompletionFlags(flags.0));
            cx.state.core.ep_post_request(
                EpHandle::from_raw(raw),
                local,
                cookie,
                if invalidate { RequestOp::SendInvalidate { rkey: rmr_context.0 } } else { RequestOp::Send },
                flags,
            )
        })
    }
}

/// dat_ep_post_rdma_read_to_rmr of `<dat2/dat.h>` (DAT 2.0): the local
/// target is named by an RMR context (`udat_core::PostOp::RdmaReadToRmr`).
pub(crate) unsafe fn ep_post_rdma_read_to_rmr<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    local: Arg<2, *const DAT_RMR_TRIPLET>,
    cookie: Arg<3, DAT_DTO_COOKIE>,
    rmr: Arg<4, *const DAT_RMR_TRIPLET>,
    flags: Arg<5, DAT_COMPLETION_FLAGS>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; a cookie is 64 bits;
    // `remote` refuses a null triplet and reads a misaligned one as it is.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let (local, remote) = (remote(local)?, remote(rmr)?);
            let (cookie, flags) = (cookie.0.as_64, CompletionFlags(flags.0));
            cx.state.core.ep_post_request(
                EpHandle::from_raw(raw),
                &[],
                cookie,
                PostOp::RdmaReadToRmr { local, remote },
                flags,
            )
        })
    }
}

/// dat_ep_common_connect of `<dat2/dat.h>` (DAT 2.0): connect to the port
/// the socket address carries (`Provider::ep_common_connect`).
pub(crate) unsafe fn ep_common_connect<B: Transport>(
    ep: Arg<1, DAT_EP_HANDLE>,
    remote_addr: Arg<2, DAT_IA_ADDRESS_PTR>,
    timeout: Arg<3, DAT_TIMEOUT>,
    pd_size: Arg<4, DAT_COUNT>,
    pd: Arg<5, DAT_PVOID>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ep`'s provider word; the address and the
    // private data are the consumer's, read as `address_in` and
    // `private_data` say.
    unsafe {
        with::<B>(ep, Kind::Ep, |cx, raw| {
            let addr = address_in(remote_addr)?;
            let data = private_data(pd_size, pd)?;
            cx.state.core.ep_common_connect(EpHandle::from_raw(raw), &addr, timeout.0, data)
        })
    }
}
