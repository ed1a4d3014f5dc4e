//! The exclusive door of a request: dat_ep_post_send(3DAT),
//! dat_ep_post_rdma_write(3DAT), dat_ep_post_rdma_read(3DAT), and the IB
//! extension's requests (`<dat2/dat_ib_extensions.h>`): RDMA write with
//! immediate data, compare-and-swap and fetch-and-add.
//!
//! One look-up of the EP, the state and flag rules, one O(1) LMR look-up
//! per segment, then the backend. No allocation, no division, no dynamic
//! dispatch.
//!
//! The extension's requests follow the rules of the DTOs they extend
//! (dat_ep_post_rdma_write(3DAT) for the write; an atomic is a one-segment
//! request whose result lands in local memory, so its segment needs local
//! write as a read's does) and complete on the request EVD with their own
//! [`DtoOp`]. A peer's write with immediate data consumes one of its
//! receives, which completes as [`DtoOp::ReceiveImm`] with the data in
//! the event.

use super::{flags_arg, Request, REQUEST_FLAGS, SEND_FLAGS};
use crate::backend::{Backend, RequestOp, SendWr};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::EpHandle;
use crate::object::ep::Ep;
use crate::object::ia::Ia;
use crate::object::lmr::{gather, Lmr};
use crate::object::rmr::Rmr;
use crate::object::rmr::RmrScope;
use crate::provider::Provider;
use crate::slab::{Slab, SlotsOf};
use crate::storage::Storage;
#[cfg(doc)]
use crate::types::DtoOp;
use crate::types::{CompletionFlags, EpState, LmrTriplet, MemPriv, RmrTriplet};
use crate::FixedVec;

/// The operand of an atomic.
const ATOMIC_BYTES: u64 = 8;

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_ep_post_send(3DAT). Each request post of one segment tries its
    /// lane first ([`Provider::lane_request`]); the ordinary checks decide the rest.
    pub fn ep_post_send(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.lane_or_post(ep, iov, cookie, RequestOp::Send, flags)
    }

    /// dat_ep_post_send_with_invalidate of `<dat2/dat.h>` (DAT 2.0): a
    /// send with the rules of dat_ep_post_send(3DAT) that also
    /// invalidates the peer's `rmr_context` (an RMR the peer created with
    /// dat_rmr_create_for_ep and bound to its end of the connection). The
    /// receive it consumes completes as `DAT_DTO_RECEIVE_WITH_INVALIDATE`
    /// carrying the context. With `invalidate` false it is
    /// dat_ep_post_send(3DAT) and `rmr_context` is not looked at.
    pub fn ep_post_send_with_invalidate(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
        invalidate: bool,
        rmr_context: u32,
    ) -> DatResult<()> {
        if !invalidate {
            return self.ep_post_send(ep, iov, cookie, flags);
        }
        self.post_request(ep, iov, cookie, RequestOp::SendInvalidate { rkey: rmr_context }, flags, SEND_FLAGS)
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

    /// dat_ep_post_rdma_read_to_rmr of `<dat2/dat.h>` (DAT 2.0): `remote`
    /// into the local memory that `local` names by an RMR context rather
    /// than an LMR triplet. The target is memory this IA exposes for
    /// remote writes: a bound RMR of the EP's IA (of `DAT_RMR_SCOPE_EP`,
    /// one the EP bound), or an LMR registered with remote write. The
    /// read lands in the LMR under it, so the rules are
    /// dat_ep_post_rdma_read(3DAT)'s on that one segment, and: a context
    /// that names none of these is `DAT_PROTECTION_VIOLATION` (as a freed
    /// LMR's is, dat_lmr_free(3DAT)); memory it does not let a peer write
    /// is `DAT_PRIVILEGES_VIOLATION`; a range outside it is
    /// `DAT_INVALID_PARAMETER`.
    pub fn ep_post_rdma_read_to_rmr(
        &mut self,
        ep: EpHandle,
        local: &RmrTriplet,
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let target = self.rmr_target(ep, local)?;
        let op = RequestOp::RdmaRead { remote: *remote };
        self.post_request(ep, core::slice::from_ref(&target), cookie, op, flags, REQUEST_FLAGS)
    }

    /// The LMR segment under `local`, an RMR triplet of `ep`'s IA.
    fn rmr_target(&self, ep_h: EpHandle, local: &RmrTriplet) -> DatResult<LmrTriplet> {
        let ep = self.ep(ep_h)?;
        let (ia, context, len) = (ep.ia, local.rmr_context, u64::from(local.segment_length));
        let segment = |lmr_context| LmrTriplet {
            virtual_address: local.virtual_address,
            segment_length: local.segment_length,
            lmr_context,
        };
        // "When 0 is specified for segment_length then the other two
        // elements ... are irrelevant" (dat_ep_post_rdma_read(3DAT)).
        if len == 0 {
            return Ok(segment(0));
        }
        let bound = |r: &Rmr<B>| r.ia == ia && r.binding.is_some_and(|b| b.rmr_context == context);
        if let Some(b) =
            self.rmrs.find_from(0, bound).and_then(|h| self.rmrs.get(h)).and_then(|r| r.binding.map(|b| (r.scope, b)))
        {
            let (scope, b) = b;
            if scope == RmrScope::Ep && b.ep != ep_h {
                return Err(DatError::of(ErrorType::ProtectionViolation));
            }
            if !b.privileges.contains(MemPriv::REMOTE_WRITE) {
                return Err(DatError::of(ErrorType::PrivilegesViolation));
            }
            let offset = local.virtual_address.wrapping_sub(b.triplet.virtual_address);
            let window = u64::from(b.triplet.segment_length);
            if offset > window || len > window - offset {
                return Err(DatError::invalid_arg(2));
            }
            return Ok(segment(b.triplet.lmr_context));
        }
        let registered = |l: &Lmr<B>| l.ia == ia && l.rmr_context == Some(context);
        let lmr = self.lmrs.find_from(0, registered).and_then(|h| self.lmrs.get(h));
        let lmr = lmr.ok_or(DatError::of(ErrorType::ProtectionViolation))?;
        if !lmr.privileges.contains(MemPriv::REMOTE_WRITE) {
            return Err(DatError::of(ErrorType::PrivilegesViolation));
        }
        if !lmr.contains(local.virtual_address, len) {
            return Err(DatError::invalid_arg(2));
        }
        Ok(segment(lmr.lmr_context))
    }

    /// A request through its lane if it has one segment ([`super::lane`]),
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
        let Provider { eps, lmrs, ias, backend, ep_tallies, .. } = self;
        let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        let request = Request { iov, cookie, op, flags, allowed };
        post_checked(
            ep,
            lmrs,
            ias,
            request,
            #[inline(always)]
            |qp, wr| backend.post_send(qp, wr),
            #[cold]
            #[inline(never)]
            |wr| ep_tallies.posted(h.0, &wr.op, u64::from(wr.length)),
        )
    }

    /// `dat_ib_post_rdma_write_immed`: `iov` into `remote`, then `imm` to
    /// the peer with the receive it consumes. A post of one segment tries
    /// the write's lane first ([`Provider::lane_request`]).
    pub fn ep_post_rdma_write_imm(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        remote: &RmrTriplet,
        imm: u32,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.lane_or_post(ep, iov, cookie, RequestOp::RdmaWriteImm { remote: *remote, imm }, flags)
    }

    /// `dat_ib_post_cmp_and_swap`: if the 8 bytes at `remote` equal
    /// `compare`, they become `swap`; their old value lands in `local`
    /// (8 bytes, local write). The arguments are the macro's, in its order.
    #[allow(clippy::too_many_arguments)]
    pub fn ep_post_compare_swap(
        &mut self,
        ep: EpHandle,
        compare: u64,
        swap: u64,
        local: &LmrTriplet,
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let op = RequestOp::CompareSwap { remote: *remote, compare, swap };
        self.post_request(ep, core::slice::from_ref(local), cookie, op, flags, REQUEST_FLAGS)
    }

    /// `dat_ib_post_fetch_and_add`: the 8 bytes at `remote` grow by `add`;
    /// their old value lands in `local` (8 bytes, local write).
    pub fn ep_post_fetch_add(
        &mut self,
        ep: EpHandle,
        add: u64,
        local: &LmrTriplet,
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let op = RequestOp::FetchAdd { remote: *remote, add };
        self.post_request(ep, core::slice::from_ref(local), cookie, op, flags, REQUEST_FLAGS)
    }
}

/// The rules of dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT) and
/// dat_ep_post_rdma_read(3DAT) (and the IB extension's requests) for a
/// post on `ep`, its segments translated through `lmrs`; then `post` hands
/// the work request to the transport, and an EP that counts hands it to
/// `counted` with its bytes. The same code checks a
/// post through an exclusive provider and through a shared one.
#[inline(always)]
pub(crate) fn post_checked<B: Backend, L: SlotsOf<Lmr<B>>, I: SlotsOf<Ia<B>>>(
    ep: &mut Ep<B>,
    lmrs: &Slab<Lmr<B>, L>,
    ias: &Slab<Ia<B>, I>,
    request: Request<'_>,
    post: impl FnOnce(&mut B::Qp, &SendWr<'_>) -> DatResult<()>,
    counted: impl FnOnce(&SendWr<'_>),
) -> DatResult<()> {
    let Request { iov, cookie, op, flags, allowed } = request;
    if flags.0 & !allowed != 0 || !ep.unsignalled_allowed(flags, false) {
        return Err(DatError::invalid_arg(flags_arg(&op)));
    }
    if iov.len() > ep.attr().max_request_iov as usize {
        return Err(DatError::invalid_arg(2));
    }
    // "The operation is valid for the Endpoint in the
    // DAT_EP_STATE_CONNECTED and DAT_EP_STATE_DISCONNECTED states."
    if !matches!(ep.state(), EpState::Connected | EpState::Disconnected) {
        return Err(DatError::invalid_state(ep.state_subtype()));
    }
    // A UD EP sends datagrams to the peers its address handles name
    // (`dat_ib_post_send_ud`); the connected operations are not of its
    // transport.
    if ep.ud {
        return Err(DatError::of(ErrorType::ModelNotSupported));
    }
    let need = match op {
        RequestOp::RdmaRead { .. } | RequestOp::CompareSwap { .. } | RequestOp::FetchAdd { .. } => MemPriv::LOCAL_WRITE,
        _ => MemPriv::LOCAL_READ,
    };
    let mut sges = FixedVec::new();
    let total = gather(lmrs, ep.pz, iov, need, &mut sges)?;
    match op {
        RequestOp::Send | RequestOp::SendInvalidate { .. } if total > u64::from(ep.attr().max_message_size) => {
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
            if total > u64::from(ep.attr().max_rdma_size) =>
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
    if ep.request_outstanding >= ep.attr().max_request_dtos {
        return Err(DatError::of(ErrorType::InsufficientResources));
    }
    let qp = ep.qp_mut().ok_or(DatError::invalid_state(Subtype::InvalidStateEpNotready))?;
    let wr = SendWr { op, sges: &sges, length: total as u32, cookie, flags };
    post(qp, &wr)?;
    ep.request_outstanding += 1;
    if ep.counting {
        counted(&wr);
    }
    Ok(())
}
