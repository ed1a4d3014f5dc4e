//! Lanes: the hot posts checked all at once, then committed.
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
//! The doors' lanes ([`Door::lane_request`](super::door::Door::lane_request)
//! and its kin) find the object and judge its generation; these judge
//! and commit the post on the object found.

use core::slice;

use super::rule::{check, check_recv, check_srq_recv, commit_admitted, Checked};
use super::Request;
use crate::backend::{Backend, Sge};
use crate::object::ep::Ep;
use crate::object::ia::Ia;
use crate::object::lmr::Lmr;
use crate::object::srq::Srq;
use crate::slab::{Slab, SlotsOf};
use crate::types::{CompletionFlags, LmrTriplet};

/// A request post of one segment on `ep`, judged by [`check`]; then
/// `post` offers it to the transport's lane ([`commit_admitted`]). Changes
/// nothing unless every rule holds, the EP does not count, and the
/// transport took it; a refusal is the ordinary call's to explain.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn request_lane<B: Backend, L: SlotsOf<Lmr<B>>, I: SlotsOf<Ia<B>>>(
    ep: &mut Ep<B>,
    lmrs: &Slab<Lmr<B>, L>,
    ias: &Slab<Ia<B>, I>,
    request: &Request<'_>,
    post: impl FnOnce(&mut B::Qp, Sge) -> bool,
) -> bool {
    let Ok(checked) = check::<_, _, _, Option<Sge>>(ep, lmrs, ias, request) else { return false };
    let Some(sge) = checked.sges else { return false };
    // SAFETY: a lane's check admits only what the EP's post mask admits
    // (`Gathered::LANE`), and nothing changed the EP since.
    unsafe { commit_admitted(ep, |qp| post(qp, sge)) }
}

/// A receive of the one segment `seg` on `ep`, judged by [`check_recv`];
/// then `post` offers it to the transport's lane. Changes nothing unless
/// every rule holds and the transport took it.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn recv_lane<B: Backend, L: SlotsOf<Lmr<B>>>(
    ep: &mut Ep<B>,
    lmrs: &Slab<Lmr<B>, L>,
    seg: &LmrTriplet,
    flags: CompletionFlags,
    post: impl FnOnce(&mut B::Qp, Sge) -> bool,
) -> bool {
    let Ok(Checked { sges: Some(sge), .. }) = check_recv::<_, _, Option<Sge>>(ep, lmrs, slice::from_ref(seg), flags)
    else {
        return false;
    };
    // SAFETY: as in `request_lane`: `check_recv` of a lane admitted the
    // receive by the EP's post mask.
    let qp = unsafe { ep.qp_admitted() };
    if !post(qp, sge) {
        return false;
    }
    ep.recv_room.take();
    true
}

/// A receive of the one segment `seg` on the SRQ `s`, judged by
/// [`check_srq_recv`]; then `post` offers it to the transport's lane.
/// Changes nothing unless every rule holds and the transport took it.
#[inline(always)]
pub(crate) fn srq_recv_lane<B: Backend, L: SlotsOf<Lmr<B>>>(
    s: &mut Srq<B>,
    lmrs: &Slab<Lmr<B>, L>,
    seg: &LmrTriplet,
    post: impl FnOnce(&mut B::Srq, Sge) -> bool,
) -> bool {
    let Ok(Checked { sges: Some(sge), .. }) = check_srq_recv::<_, _, Option<Sge>>(s, lmrs, slice::from_ref(seg)) else {
        return false;
    };
    if !post(&mut s.srq, sge) {
        return false;
    }
    s.outstanding += 1;
    true
}
