//! Lanes: the hot calls checked all at once, then committed.
//!
//! A lane evaluates every rule of its ordinary call as a yes/no (it runs
//! the call's own check: `rule::check`, `rule::check_recv` or
//! `rule::check_srq_recv`), and changes nothing until all of them hold
//! and the transport has taken the work. When any rule fails, or the
//! transport cannot take the work the quick way, the lane answers `false`
//! and its caller runs the ordinary call, which checks again in its own
//! order and returns the exact `DAT_RETURN`. So a lane needs no error
//! values, and every error stays the ordinary call's. A lane may be
//! narrower than its call (one segment, a segment that is not empty),
//! never wider: it never takes what the ordinary call refuses.
//!
//! A lane looks each object up once: the caller gives the EP's slot and
//! judges the generation it finds there (`matches_generation`), so a C handle, whose
//! value encodes its generation, is checked against the slot without a
//! second look-up. `matches_generation` must accept only the generation the caller's
//! handle names: it is the lane's handle check.

use core::slice;

use super::rule::{check, check_recv, check_srq_recv, commit_one, Checked};
use super::Request;
use crate::backend::{Backend, RequestOp, Sge};
use crate::object::ep::Ep;
use crate::object::ia::Ia;
use crate::object::lmr::Lmr;
use crate::provider::Provider;
use crate::slab::{Slab, SlotsOf};
use crate::storage::Storage;
use crate::types::{CompletionFlags, LmrTriplet};

impl<B: Backend, S: Storage> Provider<B, S> {
    /// The lane of dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT)
    /// and dat_ep_post_rdma_read(3DAT) (`op` says which) of one segment
    /// that is not empty, on the EP living in slot `ep` if `matches_generation`
    /// accepts its generation. `true`: posted, exactly as the ordinary
    /// call would have; `false`: nothing changed, and the ordinary call
    /// decides.
    #[inline(always)]
    pub fn lane_request(
        &mut self,
        ep: u32,
        matches_generation: impl FnOnce(u32) -> bool,
        seg: &LmrTriplet,
        cookie: u64,
        op: RequestOp,
        flags: CompletionFlags,
    ) -> bool {
        let Provider { eps, lmrs, ias, backend, .. } = self;
        let Some((generation, ep)) = eps.live_mut(ep) else { return false };
        matches_generation(generation)
            && request_lane(
                ep,
                lmrs,
                ias,
                &Request { iov: slice::from_ref(seg), cookie, op, flags },
                #[inline(always)]
                |qp, sge| backend.post_one(qp, op, sge, cookie, flags),
            )
    }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// The lane of dat_ep_post_recv(3DAT) of one segment that is not
    /// empty, on the EP living in slot `ep` if `matches_generation` accepts its
    /// generation; as [`Provider::lane_request`]. "The operation is valid
    /// for all states of the Endpoint": a receive of a Disconnected EP is
    /// posted, and the transport flushes it, as the ordinary call does.
    #[inline(always)]
    pub fn lane_recv(
        &mut self,
        ep: u32,
        matches_generation: impl FnOnce(u32) -> bool,
        seg: &LmrTriplet,
        cookie: u64,
        flags: CompletionFlags,
    ) -> bool {
        let Provider { eps, lmrs, backend, .. } = self;
        let Some((generation, ep)) = eps.live_mut(ep) else { return false };
        if !matches_generation(generation) {
            return false;
        }
        let Ok(Checked { sges: Some(sge), .. }) =
            check_recv::<_, _, Option<Sge>>(ep, lmrs, slice::from_ref(seg), flags)
        else {
            return false;
        };
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
    /// empty, on the SRQ living in slot `srq` if `matches_generation` accepts its
    /// generation; as [`Provider::lane_request`]. The call "is valid in
    /// every SRQ state", so the rules are `rule::check_srq_recv`'s: one
    /// segment within the limit, the segment through its LMR of the SRQ's
    /// PZ with local write, room.
    #[inline(always)]
    pub fn lane_srq_recv(
        &mut self,
        srq: u32,
        matches_generation: impl FnOnce(u32) -> bool,
        seg: &LmrTriplet,
        cookie: u64,
    ) -> bool {
        let Provider { srqs, lmrs, backend, .. } = self;
        let Some((generation, s)) = srqs.live_mut(srq) else { return false };
        if !matches_generation(generation) {
            return false;
        }
        let Ok(Checked { sges: Some(sge), .. }) = check_srq_recv::<_, _, Option<Sge>>(s, lmrs, slice::from_ref(seg))
        else {
            return false;
        };
        if !backend.srq_post_recv_one(&mut s.srq, sge, cookie) {
            return false;
        }
        s.outstanding += 1;
        true
    }
}

/// A request post of one segment on `ep`, judged by [`check`]; then
/// `post` offers it to the transport's lane ([`commit_one`]). Changes
/// nothing unless every rule holds, the EP does not count, and the
/// transport took it; a refusal is the ordinary call's to explain.
#[inline(always)]
pub(crate) fn request_lane<B: Backend, L: SlotsOf<Lmr<B>>, I: SlotsOf<Ia<B>>>(
    ep: &mut Ep<B>,
    lmrs: &Slab<Lmr<B>, L>,
    ias: &Slab<Ia<B>, I>,
    request: &Request<'_>,
    post: impl FnOnce(&mut B::Qp, Sge) -> bool,
) -> bool {
    let Ok(checked) = check::<_, _, _, Option<Sge>>(ep, lmrs, ias, request) else { return false };
    let Some(sge) = checked.sges else { return false };
    commit_one(ep, sge, post)
}
