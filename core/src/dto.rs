//! Data transfer operations: dat_ep_post_send(3DAT), dat_ep_post_recv(3DAT),
//! dat_ep_post_rdma_read(3DAT), dat_ep_post_rdma_write(3DAT).
//!
//! The hot path: one look-up of the EP, the state and flag rules, one O(1)
//! LMR look-up per segment, then the backend. No allocation, no division, no
//! dynamic dispatch.

use crate::backend::{Backend, RequestOp, SendWr};
use crate::ep::Ep;
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::EpHandle;
use crate::ia::Ia;
use crate::lmr::{gather, Lmr};
use crate::provider::Provider;
use crate::slab::{Slab, SlotsOf};
use crate::storage::Storage;
use crate::types::{CompletionFlags, EpState, LmrTriplet, MemPriv, RmrTriplet};
use crate::FixedVec;

pub(crate) const REQUEST_FLAGS: u32 =
    CompletionFlags::SUPPRESS.0 | CompletionFlags::UNSIGNALLED.0 | CompletionFlags::BARRIER_FENCE.0;
pub(crate) const SEND_FLAGS: u32 = REQUEST_FLAGS | CompletionFlags::SOLICITED_WAIT.0;
/// The operand of an atomic.
const ATOMIC_BYTES: u64 = 8;

/// The position of the completion flags among the call's arguments:
/// dat_ep_post_send(3DAT) has no remote buffer, the IB extension's
/// immediate write and compare-and-swap have one more operand.
pub(crate) const fn flags_arg(op: &RequestOp) -> u8 {
    match op {
        RequestOp::Send => 5,
        RequestOp::RdmaWrite { .. } | RequestOp::RdmaRead { .. } | RequestOp::FetchAdd { .. } => 6,
        RequestOp::RdmaWriteImm { .. } | RequestOp::CompareSwap { .. } => 7,
    }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_ep_post_send(3DAT). Each request post of one segment tries its
    /// lane first (the core's `lane` module); the ordinary checks decide the rest.
    pub fn ep_post_send(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.lane_or_post(ep, iov, cookie, RequestOp::Send, flags)
    }

    /// dat_ep_post_rdma_write(3DAT): `iov` into `remote`.
    pub fn ep_post_rdma_write(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.lane_or_post(ep, iov, cookie, RequestOp::RdmaWrite { remote: *remote }, flags)
    }

    /// dat_ep_post_rdma_read(3DAT): `remote` into `iov`.
    pub fn ep_post_rdma_read(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.lane_or_post(ep, iov, cookie, RequestOp::RdmaRead { remote: *remote }, flags)
    }

    /// A request through its lane if it has one segment ([`crate::lane`]),
    /// else, or if the lane does not take it, the ordinary post.
    #[inline(always)]
    fn lane_or_post(
        &mut self,
        h: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        op: RequestOp,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let raw = h.raw();
        if let [seg] = iov {
            if self.lane_request(raw.index(), |g| g == raw.generation(), seg, cookie, op, flags) {
                return Ok(());
            }
        }
        self.ep_post_request_ordinary(h, iov, cookie, op, flags)
    }

    /// dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT) or
    /// dat_ep_post_rdma_read(3DAT) (`op` says which) without its lane, for
    /// a caller that has just tried the lane itself
    /// ([`Provider::lane_request`]): every rule of the page, and the exact
    /// error.
    #[inline(always)]
    pub fn ep_post_request_ordinary(
        &mut self,
        h: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        op: RequestOp,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let allowed = if matches!(op, RequestOp::Send) { SEND_FLAGS } else { REQUEST_FLAGS };
        self.post_request(h, iov, cookie, op, flags, allowed)
    }

    /// Inlined into each entry point: the request's kind is then a
    /// constant, so the checks of the other kinds fold away, and the
    /// request, the segments and the flags need not be passed through the
    /// stack. It took 66 instructions off a C ABI
    /// RDMA write post and 78 off the Rust API's send over the null
    /// backend (`cargo xtask icount`).
    #[inline(always)]
    pub(crate) fn post_request(
        &mut self,
        h: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        op: RequestOp,
        flags: CompletionFlags,
        allowed: u32,
    ) -> DatResult<()> {
        // One look-up of the EP; the LMRs, the IA and the backend are other
        // fields of the provider.
        let Provider { eps, lmrs, ias, backend, .. } = self;
        let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        let request = Request { iov, cookie, op, flags, allowed };
        post_checked(
            ep,
            lmrs,
            ias,
            request,
            #[inline(always)]
            |qp, wr| backend.post_send(qp, wr),
        )
    }

    /// dat_ep_post_recv(3DAT): "The operation is valid for all states of the
    /// Endpoint"; in Disconnected the receive is flushed at once. A receive
    /// of one segment tries its lane first (the core's `lane` module). An EP that
    /// receives from an SRQ takes no receives of its own
    /// (dat_ep_create_with_srq(3DAT)).
    pub fn ep_post_recv(
        &mut self,
        h: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let raw = h.raw();
        if let [seg] = iov {
            if self.lane_recv(raw.index(), |g| g == raw.generation(), seg, cookie, flags) {
                return Ok(());
            }
        }
        self.ep_post_recv_ordinary(h, iov, cookie, flags)
    }

    /// dat_ep_post_recv(3DAT) without its lane, for a caller that has just
    /// tried the lane itself ([`Provider::lane_recv`]): every rule of the
    /// page, and the exact error.
    pub fn ep_post_recv_ordinary(
        &mut self,
        h: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let Provider { eps, lmrs, backend, .. } = self;
        let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        recv_checked(ep, lmrs, iov, flags, |qp, sges| backend.post_recv(qp, sges, cookie))
    }
}

/// The rules of dat_ep_post_recv(3DAT) for a receive on `ep`, its segments
/// translated through `lmrs`; then `post` hands it to the transport. The
/// same code checks a receive through an exclusive provider and through a
/// shared one.
#[inline(always)]
pub(crate) fn recv_checked<B: Backend, L: SlotsOf<Lmr<B>>>(
    ep: &mut Ep<B>,
    lmrs: &Slab<Lmr<B>, L>,
    iov: &[LmrTriplet],
    flags: CompletionFlags,
    post: impl FnOnce(&mut B::Qp, &[crate::backend::Sge]) -> DatResult<()>,
) -> DatResult<()> {
    if flags.0 & !CompletionFlags::UNSIGNALLED.0 != 0 || !ep.unsignalled_allowed(flags, true) {
        return Err(DatError::invalid_arg(5));
    }
    if iov.len() > ep.attr.max_recv_iov as usize {
        return Err(DatError::invalid_arg(2));
    }
    if !ep.srq.is_null() {
        return Err(DatError::invalid_state(Subtype::InvalidStateEpNotready));
    }
    let mut sges = FixedVec::new();
    gather(lmrs, ep.pz, iov, MemPriv::LOCAL_WRITE, &mut sges)?;
    if ep.recv_outstanding >= ep.attr.max_recv_dtos {
        return Err(DatError::of(ErrorType::InsufficientResources));
    }
    let qp = ep.qp.as_mut().ok_or(DatError::invalid_state(Subtype::InvalidStateEpNotready))?;
    post(qp, &sges)?;
    ep.recv_outstanding += 1;
    Ok(())
}

/// A request post as the consumer made it.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) iov: &'a [LmrTriplet],
    pub(crate) cookie: u64,
    pub(crate) op: RequestOp,
    pub(crate) flags: CompletionFlags,
    /// The completion flags the call admits.
    pub(crate) allowed: u32,
}

/// The rules of dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT) and
/// dat_ep_post_rdma_read(3DAT) (and the IB extension's requests) for a
/// post on `ep`, its segments translated through `lmrs`; then `post` hands
/// the work request to the transport. The same code checks a
/// post through an exclusive provider and through a shared one.
#[inline(always)]
pub(crate) fn post_checked<B: Backend, L: SlotsOf<Lmr<B>>, I: SlotsOf<Ia<B>>>(
    ep: &mut Ep<B>,
    lmrs: &Slab<Lmr<B>, L>,
    ias: &Slab<Ia<B>, I>,
    request: Request<'_>,
    post: impl FnOnce(&mut B::Qp, &SendWr<'_>) -> DatResult<()>,
) -> DatResult<()> {
    let Request { iov, cookie, op, flags, allowed } = request;
    if flags.0 & !allowed != 0 || !ep.unsignalled_allowed(flags, false) {
        return Err(DatError::invalid_arg(flags_arg(&op)));
    }
    if iov.len() > ep.attr.max_request_iov as usize {
        return Err(DatError::invalid_arg(2));
    }
    // "The operation is valid for the Endpoint in the
    // DAT_EP_STATE_CONNECTED and DAT_EP_STATE_DISCONNECTED states."
    if !matches!(ep.state, EpState::Connected | EpState::Disconnected) {
        return Err(DatError::invalid_state(ep.state_subtype()));
    }
    let need = match op {
        RequestOp::RdmaRead { .. } | RequestOp::CompareSwap { .. } | RequestOp::FetchAdd { .. } => MemPriv::LOCAL_WRITE,
        _ => MemPriv::LOCAL_READ,
    };
    let mut sges = FixedVec::new();
    let total = gather(lmrs, ep.pz, iov, need, &mut sges)?;
    match op {
        RequestOp::Send if total > u64::from(ep.attr.max_message_size) => {
            return Err(DatError::invalid_arg(3));
        }
        // "The size of the remote buffer is too small for the data of
        // the local buffer" (write); "The size of the local buffer is
        // too small for the data of the remote buffer" (read).
        RequestOp::RdmaWrite { remote } | RequestOp::RdmaWriteImm { remote, .. }
            if total > u64::from(remote.segment_length) =>
        {
            return Err(DatError::of(ErrorType::LengthError));
        }
        RequestOp::RdmaRead { remote } if u64::from(remote.segment_length) > total => {
            return Err(DatError::of(ErrorType::LengthError));
        }
        RequestOp::RdmaWrite { .. } | RequestOp::RdmaWriteImm { .. } | RequestOp::RdmaRead { .. }
            if total > u64::from(ep.attr.max_rdma_size) =>
        {
            return Err(DatError::invalid_arg(3));
        }
        RequestOp::CompareSwap { remote, .. } | RequestOp::FetchAdd { remote, .. } => {
            let ia = ias.get(ep.ia.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleIa))?;
            if !ia.attr.atomics {
                return Err(DatError::of(ErrorType::NotImplemented));
            }
            // An atomic works on 8 naturally aligned bytes; the old
            // value lands in 8 local ones.
            if total != ATOMIC_BYTES || remote.segment_length < ATOMIC_BYTES as u32 {
                return Err(DatError::of(ErrorType::LengthError));
            }
            if remote.virtual_address % ATOMIC_BYTES != 0 {
                return Err(DatError::of(ErrorType::InvalidParameter));
            }
        }
        _ => {}
    }
    if ep.request_outstanding >= ep.attr.max_request_dtos {
        return Err(DatError::of(ErrorType::InsufficientResources));
    }
    let qp = ep.qp.as_mut().ok_or(DatError::invalid_state(Subtype::InvalidStateEpNotready))?;
    let wr = SendWr { op, sges: &sges, length: total as u32, cookie, flags };
    post(qp, &wr)?;
    ep.request_outstanding += 1;
    Ok(())
}
