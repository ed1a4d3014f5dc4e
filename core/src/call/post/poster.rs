//! The fast path of the Rust API: local segments checked once against
//! their LMRs ([`Segments`]), and an endpoint checked once for a run of
//! posts ([`Poster`]), so that a post pays only for what can change
//! between posts — its flags, the lengths against the remote buffer, the
//! outstanding count — and the transport.
//!
//! The rules are the ones of dat_ep_post_send(3DAT),
//! dat_ep_post_rdma_write(3DAT) and dat_ep_post_rdma_read(3DAT), checked
//! at the moment each fact is fixed:
//! - the segments' LMR contexts, PZ, ranges and privileges when
//!   [`Provider::segments`] builds them; a post uses them as they are only
//!   while the EP's PZ is theirs and none of its LMRs has been freed since
//!   (one stamp says both), and otherwise checks them again exactly as
//!   [`Door::ep_post_request`](super::door::Door::ep_post_request) does,
//!   so every error is the same;
//! - the EP's handle and state when [`Provider::poster`] borrows it: while
//!   the borrow lasts the provider makes no progress (that takes `&mut`),
//!   so no connection event can move the EP's state.

use super::door::{Hand, Owned};
use super::rule::segments;
use super::rule::{admitted, checked_post, commit, commit_admitted, fits, kind, room, Checked, PostSend, Sges};
use crate::backend::{Backend, RequestOp, Sge, MAX_SGE};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{EpHandle, PzHandle};
use crate::object::ep::Ep;
use crate::object::ia::Ia;
use crate::object::lmr::Lmr;
use crate::provider::Provider;
use crate::slab::Slab;
use crate::storage::Storage;
use crate::store::FixedVec;
use crate::types::{CompletionFlags, EpState, LmrTriplet, RmrTriplet};

pub use crate::types::Access;

/// Local segments checked against their LMRs, with the keys the transport
/// needs; see [`Provider::segments`].
#[derive(Clone, Debug)]
pub struct Segments {
    iov: FixedVec<LmrTriplet, MAX_SGE>,
    checked: Checked<FixedVec<Sge, MAX_SGE>>,
    /// The segment a lane posts, when `iov` is one triplet that is not
    /// empty: then the EP's limit of segments holds whatever it is.
    lane: Option<Sge>,
    /// The stamp their PZ had when they were checked (0 for a PZ that
    /// does not live, which no PZ has), and what they were checked for:
    /// [`stamped`].
    stamp: u64,
}

/// `stamp`, an even one (`provider::new_stamp`), with the bit of `access`:
/// one word that says both.
#[inline(always)]
fn stamped(stamp: u64, access: Access) -> u64 {
    debug_assert_eq!(stamp & 1, 0, "a stamp is even");
    stamp | access as u64
}

impl Segments {
    /// Bytes the segments cover.
    pub fn len(&self) -> u64 {
        self.checked.total
    }

    /// Whether they cover none.
    pub fn is_empty(&self) -> bool {
        self.checked.total == 0
    }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// Check `iov` once against its LMRs, for posts on EPs of `pz` that
    /// use it as `access` says. The errors are the posts' own: a context
    /// that names no live LMR, or an LMR of another PZ, is
    /// `DAT_PROTECTION_VIOLATION`; a range outside the LMR
    /// `DAT_INVALID_PARAMETER`; a missing privilege
    /// `DAT_PRIVILEGES_VIOLATION`; more segments than a request may have
    /// `DAT_INVALID_PARAMETER` for the count.
    pub fn segments(&self, pz: PzHandle, iov: &[LmrTriplet], access: Access) -> DatResult<Segments> {
        let kept = FixedVec::from_slice(iov).map_err(|_| DatError::invalid(PostSend::NumSegments))?;
        let (sges, total) = segments::<B, _, FixedVec<Sge, MAX_SGE>>(&self.lmrs, pz, iov, access)?;
        let checked = Checked { sges, total };
        let lane = if iov.len() == 1 { checked.sges.one() } else { None };
        let stamp = self.pzs.get(pz.0).map_or(0, |p| p.stamp);
        Ok(Segments { iov: kept, checked, lane, stamp: stamped(stamp, access) })
    }

    /// Borrow `ep` for a run of posts: its handle and state are checked
    /// here, once ("The operation is valid for the Endpoint in the
    /// DAT_EP_STATE_CONNECTED and DAT_EP_STATE_DISCONNECTED states"). The
    /// poster holds the EP itself, and the other parts of the provider a
    /// post reads, so a post looks nothing up again.
    pub fn poster(&mut self, ep: EpHandle) -> DatResult<Poster<'_, B, S>> {
        let Provider { eps, lmrs, ias, pzs, backend, ep_counts, .. } = self;
        let e = eps.get_mut(ep.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        if !matches!(e.state(), EpState::Connected | EpState::Disconnected) {
            return Err(DatError::invalid_state(e.state_subtype()));
        }
        if e.qp().is_none() {
            return Err(DatError::invalid_state(Subtype::InvalidStateEpNotready));
        }
        // An EP holds its PZ (a reference of the zone's), so it lives.
        let stamp = pzs.get(e.pz.0).ok_or(DatError::of(ErrorType::InternalError))?.stamp;
        let found = Found { h: ep, ep: e, lmrs, ias, hand: Owned::new(backend, ep_counts) };
        Ok(Poster { found, stamp })
    }
}

/// The EP a poster borrowed, with the parts of its provider a post reads.
struct Found<'p, B: Backend, S: Storage> {
    h: EpHandle,
    ep: &'p mut Ep<B>,
    lmrs: &'p Slab<Lmr<B>, S::Slots<Lmr<B>>>,
    ias: &'p Slab<Ia<B>, S::Slots<Ia<B>>>,
    hand: Owned<'p, B, S>,
}

/// An EP borrowed for posting; see [`Provider::poster`]. While it lives
/// nothing else reaches the provider, so the EP stays where it is and in
/// its state, and no LMR is freed: the stamp it keeps stays current.
pub struct Poster<'p, B: Backend, S: Storage> {
    found: Found<'p, B, S>,
    /// The stamp of the EP's PZ: [`Segments`] checked in another zone,
    /// by another provider, or before an LMR of the zone was freed, bear
    /// another, and are checked again.
    stamp: u64,
}

impl<B: Backend, S: Storage> core::fmt::Debug for Poster<'_, B, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Poster").field("ep", &self.found.h).finish_non_exhaustive()
    }
}

impl<B: Backend, S: Storage> Poster<'_, B, S> {
    /// A request of `segs`: dat_ep_post_send(3DAT),
    /// dat_ep_post_rdma_write(3DAT), dat_ep_post_rdma_read(3DAT) or one of
    /// the IB extension's, as `op` says, with the segments checked for
    /// what `op` does with them ([`Access::Write`] where the HCA writes
    /// them: a read's or an atomic's; [`Access::Read`] otherwise).
    #[inline(always)]
    pub fn post(&mut self, segs: &Segments, cookie: u64, op: RequestOp, flags: CompletionFlags) -> DatResult<()> {
        self.post_as(segs, kind(&op).need, move || op, cookie, flags)
    }

    /// dat_ep_post_rdma_write(3DAT) of `segs` into the peer's `remote`:
    /// [`Poster::post`] of [`RequestOp::RdmaWrite`], the remote buffer read
    /// where the post uses it.
    #[inline(always)]
    pub fn rdma_write(
        &mut self,
        segs: &Segments,
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.post_as(segs, Access::Read, || RequestOp::RdmaWrite { remote: *remote }, cookie, flags)
    }

    /// The full post of segments whose check is stale: out of the fast
    /// path's way.
    #[inline(never)]
    fn post_afresh(&mut self, iov: &[LmrTriplet], cookie: u64, op: RequestOp, flags: CompletionFlags) -> DatResult<()> {
        let Found { h, ep, lmrs, ias, hand } = &mut self.found;
        checked_post(ep, h.0, lmrs, ias, iov, (cookie, op, flags), hand.reborrow())
    }

    /// The rules of `rule::check` that [`Provider::segments`] did not
    /// judge, in its order, then the transport's lane.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn post_as(
        &mut self,
        segs: &Segments,
        access: Access,
        op_of: impl Fn() -> RequestOp,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let fresh = segs.stamp == stamped(self.stamp, access);
        if !fresh {
            // Something changed since the check: the full post, which
            // checks everything and says what is wrong.
            return self.post_afresh(&segs.iov, cookie, op_of(), flags);
        }
        // Each cold path makes its own: handed the one the lane reads, the
        // operation would be kept on the stack and read back from there.
        let Some(sge) = segs.lane else { return self.several(segs, op_of(), cookie, flags) };
        let op = op_of();
        let Found { ep, ias, hand, .. } = &mut self.found;
        let kind = kind(&op);
        // One segment: within any limit a mask that admits holds.
        if !admitted(ep, kind, flags, 1)? {
            // The EP's rules hold, but its post mask does not take the post
            // (it counts, or has no QP): out of the lane's way.
            return self.commit(segs, op_of(), cookie, flags);
        }
        fits(ep, ias, &op, kind.length, segs.checked.total)?;
        room(ep)?;
        // SAFETY: `admitted` took the post above, and nothing changed the
        // EP since.
        if unsafe {
            commit_admitted(
                ep,
                sge,
                #[inline(always)]
                |qp, sge| hand.post_one(qp, op, sge, cookie, flags),
            )
        } {
            return Ok(());
        }
        self.commit(segs, op_of(), cookie, flags)
    }

    /// A post of segments that are not one segment a lane posts (several,
    /// or an empty one): judged by the EP's rules, then as any post the
    /// lane does not take.
    #[cold]
    #[inline(never)]
    fn several(&mut self, segs: &Segments, op: RequestOp, cookie: u64, flags: CompletionFlags) -> DatResult<()> {
        admitted(self.found.ep, kind(&op), flags, segs.iov.len())?;
        self.commit(segs, op, cookie, flags)
    }

    /// A post the lane does not take: not of one segment, on an EP that
    /// counts or has no QP, or one the transport's lane declined. Judged
    /// by the rules that follow the EP's own (the lengths, the room, in
    /// `rule::check`'s order) and handed over as a work request
    /// (`rule::commit`), out of the lane's way.
    #[cold]
    #[inline(never)]
    fn commit(&mut self, segs: &Segments, op: RequestOp, cookie: u64, flags: CompletionFlags) -> DatResult<()> {
        let Found { h, ep, ias, hand, .. } = &mut self.found;
        fits(ep, ias, &op, kind(&op).length, segs.checked.total)?;
        room(ep)?;
        commit(ep, h.0, &segs.checked.sges, segs.checked.total, (cookie, op, flags), hand)
    }
}
