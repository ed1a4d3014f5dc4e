//! Lanes: the hot calls checked all at once, then committed.
//!
//! A lane evaluates every rule of its ordinary call as a yes/no, and
//! changes nothing until all of them hold and the transport has taken the
//! work. When any rule fails, or the transport cannot take the work the
//! quick way, the lane answers `false` and its caller runs the ordinary
//! call, which checks again in its own order and returns the exact
//! `DAT_RETURN`. So a lane needs no error values, and every error stays
//! the ordinary call's. A lane may be narrower than its call (one segment,
//! a segment that is not empty), never wider: it never takes what the
//! ordinary call refuses.
//!
//! A lane looks each object up once: the caller gives the EP's slot and
//! judges the generation it finds there (`selects`), so a C handle, whose
//! value encodes its generation, is checked against the slot without a
//! second look-up. `selects` must accept only the generation the caller's
//! handle names: it is the lane's handle check.

use crate::backend::{Backend, RequestOp, Sge};
use crate::handle::PzHandle;
use crate::object::ep::{Ep, Hot};
use crate::object::lmr::{by_context, Lmr};
use crate::provider::Provider;
use crate::slab::{Slab, SlotsOf};
use crate::storage::Storage;
use crate::types::{CompletionFlags, LmrTriplet, MemPriv};

impl<B: Backend, S: Storage> Provider<B, S> {
    /// The lane of dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT)
    /// and dat_ep_post_rdma_read(3DAT) (`op` says which) of one segment
    /// that is not empty, on the EP living in slot `ep` if `selects`
    /// accepts its generation. `true`: posted, exactly as the ordinary
    /// call would have; `false`: nothing changed, and the ordinary call
    /// decides.
    #[inline(always)]
    pub fn lane_request(
        &mut self,
        ep: u32,
        selects: impl FnOnce(u32) -> bool,
        seg: &LmrTriplet,
        cookie: u64,
        op: RequestOp,
        flags: CompletionFlags,
    ) -> bool {
        let Provider { eps, lmrs, backend, .. } = self;
        let Some((generation, ep)) = eps.live_mut(ep) else { return false };
        selects(generation)
            && request_lane(
                ep,
                lmrs,
                seg,
                op,
                flags,
                #[inline(always)]
                |qp, sge| backend.post_one(qp, op, sge, cookie, flags),
            )
    }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// The lane of dat_ep_post_recv(3DAT) of one segment that is not
    /// empty, on the EP living in slot `ep` if `selects` accepts its
    /// generation; as [`Provider::lane_request`]. "The operation is valid
    /// for all states of the Endpoint": a receive of a Disconnected EP is
    /// posted, and the transport flushes it, as the ordinary call does.
    #[inline(always)]
    pub fn lane_recv(
        &mut self,
        ep: u32,
        selects: impl FnOnce(u32) -> bool,
        seg: &LmrTriplet,
        cookie: u64,
        flags: CompletionFlags,
    ) -> bool {
        let Provider { eps, lmrs, backend, .. } = self;
        let Some((generation, ep)) = eps.live_mut(ep) else { return false };
        debug_assert!(ep.hot_is_current());
        // `recv::recv_checked`'s rules: the flags, one segment within the
        // limit, no SRQ, a QP (all in `hot.recv`), the segment through its
        // LMR, room.
        let ready = admits(ep.hot.recv, flags) && ep.recv_outstanding < ep.attr().max_recv_dtos;
        if !selects(generation) || !ready {
            return false;
        }
        let Some(sge) = segment(lmrs, ep, seg, MemPriv::LOCAL_WRITE) else { return false };
        let Some(qp) = ep.qp_mut() else { return false };
        if !backend.post_recv_one(qp, sge, cookie) {
            return false;
        }
        ep.recv_outstanding += 1;
        true
    }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// The lane of dat_srq_post_recv(3DAT) of one segment that is not
    /// empty, on the SRQ living in slot `srq` if `selects` accepts its
    /// generation; as [`Provider::lane_request`]. The call "is valid in
    /// every SRQ state", so the rules are `recv::srq_recv_checked`'s: one
    /// segment within the limit, the segment through its LMR of the SRQ's
    /// PZ with local write, room.
    #[inline(always)]
    pub fn lane_srq_recv(
        &mut self,
        srq: u32,
        selects: impl FnOnce(u32) -> bool,
        seg: &LmrTriplet,
        cookie: u64,
    ) -> bool {
        let Provider { srqs, lmrs, backend, .. } = self;
        let Some((generation, s)) = srqs.live_mut(srq) else { return false };
        if !selects(generation) || s.attr.max_recv_iov == 0 || s.outstanding >= s.attr.max_recv_dtos {
            return false;
        }
        let Some(sge) = translated(lmrs, s.pz, seg, MemPriv::LOCAL_WRITE) else { return false };
        if !backend.srq_post_recv_one(&mut s.srq, sge, cookie) {
            return false;
        }
        s.outstanding += 1;
        true
    }
}

/// `seg`, not empty, translated through its LMR in `lmrs` for `ep`, if
/// `lmr::translate` would: a live context, the EP's PZ, inside the
/// region, with the privilege `need`.
#[inline(always)]
fn segment<B: Backend, L: SlotsOf<Lmr<B>>>(
    lmrs: &Slab<Lmr<B>, L>,
    ep: &Ep<B>,
    seg: &LmrTriplet,
    need: MemPriv,
) -> Option<Sge> {
    translated(lmrs, ep.pz, seg, need)
}

/// `seg`, not empty, translated through its LMR in `lmrs` for a post on
/// `pz`, if `lmr::translate` would.
#[inline(always)]
fn translated<B: Backend, L: SlotsOf<Lmr<B>>>(
    lmrs: &Slab<Lmr<B>, L>,
    pz: PzHandle,
    seg: &LmrTriplet,
    need: MemPriv,
) -> Option<Sge> {
    let (_, lmr) = by_context(lmrs, seg.lmr_context)?;
    let length = seg.segment_length;
    let fits = length != 0
        && lmr.pz.0.to_bits() == pz.0.to_bits()
        && lmr.contains(seg.virtual_address, u64::from(length))
        && lmr.privileges.contains(need);
    fits.then_some(Sge { addr: seg.virtual_address, length, lkey: lmr.lkey })
}

/// The rules of a request post of one segment on `ep`, its LMR found in
/// `lmrs`; then `post` offers it to the transport's lane. Changes nothing
/// unless all hold and the transport took it.
#[inline(always)]
pub(crate) fn request_lane<B: Backend, L: SlotsOf<Lmr<B>>>(
    ep: &mut Ep<B>,
    lmrs: &Slab<Lmr<B>, L>,
    seg: &LmrTriplet,
    op: RequestOp,
    flags: CompletionFlags,
    post: impl FnOnce(&mut B::Qp, Sge) -> bool,
) -> bool {
    if !request_ready(ep, &op, flags) {
        return false;
    }
    let need = if matches!(op, RequestOp::RdmaRead { .. }) { MemPriv::LOCAL_WRITE } else { MemPriv::LOCAL_READ };
    let Some(sge) = segment(lmrs, ep, seg, need) else { return false };
    if !length_fits(ep, &op, sge.length) {
        return false;
    }
    let Some(qp) = ep.qp_mut() else { return false };
    if !post(qp, sge) {
        return false;
    }
    ep.request_outstanding += 1;
    true
}

/// The rules of a request post that do not look at its segment
/// (`request::post_checked`'s): the flags the call and the EP admit, one
/// segment within the EP's limit, a state that posts ("valid for the
/// Endpoint in the DAT_EP_STATE_CONNECTED and DAT_EP_STATE_DISCONNECTED
/// states") and a QP (all in the EP's hot masks), and room among the
/// outstanding requests.
#[inline(always)]
fn request_ready<B: Backend>(ep: &Ep<B>, op: &RequestOp, flags: CompletionFlags) -> bool {
    debug_assert!(ep.hot_is_current());
    let reject = match op {
        RequestOp::Send => ep.hot.send,
        RequestOp::RdmaWrite { .. } | RequestOp::RdmaRead { .. } | RequestOp::RdmaWriteImm { .. } => ep.hot.rdma,
        _ => return false,
    };
    admits(reject, flags) && ep.request_outstanding < ep.attr().max_request_dtos
}

/// Whether an EP whose hot mask for the call is `reject` takes a post
/// with `flags` ([`Hot`]).
#[inline(always)]
fn admits(reject: u64, flags: CompletionFlags) -> bool {
    (u64::from(flags.0) | Hot::READY) & reject == 0
}

/// The length rules of a request of `length` bytes: a send within the
/// message size; a write (with immediate data or without) into a remote
/// buffer that holds it, a read whose remote buffer fits the local one,
/// each within the RDMA size (dat_ep_post_rdma_write(3DAT),
/// dat_ep_post_rdma_read(3DAT)). The atomics have no lane: their rules
/// look at the IA and the remote address.
#[inline(always)]
fn length_fits<B: Backend>(ep: &Ep<B>, op: &RequestOp, length: u32) -> bool {
    match op {
        RequestOp::Send => length <= ep.attr().max_message_size,
        RequestOp::RdmaWrite { remote } | RequestOp::RdmaWriteImm { remote, .. } => {
            length <= remote.segment_length && length <= ep.attr().max_rdma_size
        }
        RequestOp::RdmaRead { remote } => remote.segment_length <= length && length <= ep.attr().max_rdma_size,
        _ => false,
    }
}
