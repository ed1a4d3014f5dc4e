//! The fast path of the Rust API: local segments checked once against
//! their LMRs ([`Segments`]), an endpoint checked once for a run of posts
//! ([`Poster`]), and requests kept for its posts ([`Kept`]), so that a
//! post pays only for what can change between posts — the cookie and the
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
//!   so no connection event can move the EP's state;
//! - the request's flags and its lengths against the remote buffer and
//!   the EP's limits when [`Poster::keep`] keeps it for a poster, which
//!   then has the transport build it once: its posts test the room alone.
//!   A request kept by another poster, or that the rules or the
//!   transport did not let the poster build, is judged at each post.

use super::door::{Hand, Owned};
use super::rule::segments;
use super::rule::{admitted, checked_post, commit, commit_admitted, fits, kind, room, Checked, PostSend, Sges};
use crate::backend::{Backend, RequestOp, Sge, MAX_SGE};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{EpHandle, PzHandle};
use crate::object::ep::Ep;
use crate::object::ia::Ia;
use crate::object::lmr::Lmr;
use crate::provider::{new_stamp, Provider};
use crate::slab::Slab;
use crate::storage::Storage;
use crate::store::FixedVec;
use crate::types::{CompletionFlags, EpState, LmrTriplet};

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
        Ok(Poster { found, stamp, token: new_stamp() })
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
    /// This poster's, and no other's ([`new_stamp`]): what a request it
    /// kept built bears ([`Kept`]).
    token: u64,
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
    /// Keep a request of `segs` to post again and again: dat_ep_post_send(3DAT),
    /// dat_ep_post_rdma_write(3DAT), dat_ep_post_rdma_read(3DAT) or one of
    /// the IB extension's, as `op` says, with the segments checked for
    /// what `op` does with them ([`Access::Write`] where the HCA writes
    /// them: a read's or an atomic's; [`Access::Read`] otherwise).
    ///
    /// Nothing is posted and nothing refused here: [`Poster::post`] of
    /// the kept request does what a post of `segs`, `op` and `flags`
    /// would, with every error of the pages. What keeping saves is the
    /// work: where every rule but the room holds now, on one segment,
    /// and the transport builds the request ([`Backend::keep_one`]), the
    /// request is kept built for this poster, whose posts then test only
    /// the room before they hand it over (while the poster lives nothing
    /// else reaches the provider, so none of the rules judged here can
    /// change).
    pub fn keep(&self, segs: &Segments, op: RequestOp, flags: CompletionFlags) -> Kept<B> {
        let (token, built) = match self.build(segs, &op, flags) {
            Some(built) => (self.token, built),
            None => (0, B::Kept::default()),
        };
        Kept { segs: segs.clone(), op, flags, token, built }
    }

    /// The transport's form of a request that every rule but the room
    /// admits now, on one segment, if the transport builds it.
    fn build(&self, segs: &Segments, op: &RequestOp, flags: CompletionFlags) -> Option<B::Kept> {
        let kind = kind(op);
        let sge = segs.lane?;
        let Found { ep, ias, hand, .. } = &self.found;
        let fresh = segs.stamp == stamped(self.stamp, kind.need);
        if !fresh || !admitted(ep, kind, flags, 1).ok()? || fits(ep, ias, op, kind.length, segs.checked.total).is_err()
        {
            return None;
        }
        hand.keep_one(ep.qp()?, *op, sge, flags)
    }

    /// Post `kept` with `cookie`, as [`Poster::keep`] says: a request kept
    /// built by this poster is handed to the transport once the EP has
    /// room for it; any other, and one the transport declines now, is
    /// posted as its segments, operation and flags say, through every
    /// rule. In line only for the transport's hot kind
    /// ([`Backend::keeps_hot`]); the others through one call.
    #[inline(always)]
    pub fn post(&mut self, kept: &Kept<B>, cookie: u64) -> DatResult<()> {
        if kept.token == self.token && B::keeps_hot(&kept.built) {
            return self.post_built(kept, cookie);
        }
        self.post_other(kept, cookie)
    }

    /// [`Poster::post`] of a request this poster kept built.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn post_built(&mut self, kept: &Kept<B>, cookie: u64) -> DatResult<()> {
        debug_assert_eq!(kept.token, self.token);
        let Found { ep, hand, .. } = &mut self.found;
        room(ep)?;
        // SAFETY: the request was kept built by this poster, so its post
        // mask admitted it (`build`), and nothing has changed the EP
        // since: while the poster lives nothing else reaches the provider.
        if unsafe { commit_admitted(ep, |qp| hand.post_kept(qp, &kept.built, cookie)) } {
            return Ok(());
        }
        self.post_judged(kept, cookie)
    }

    /// [`Poster::post`] of a request that is not of the transport's hot
    /// kind, or not kept built by this poster (any request, over a
    /// transport that keeps none).
    #[inline(never)]
    fn post_other(&mut self, kept: &Kept<B>, cookie: u64) -> DatResult<()> {
        if kept.token == self.token {
            return self.post_built(kept, cookie);
        }
        self.post_judged(kept, cookie)
    }

    /// The post of `kept` as its segments, operation and flags say: the
    /// lane and every rule. For a request not kept built by this poster,
    /// or over a transport that keeps none, and for one the transport's
    /// kept lane declined (a doorbell or a fence owed, a full ring).
    #[inline(never)]
    fn post_judged(&mut self, kept: &Kept<B>, cookie: u64) -> DatResult<()> {
        let op = kept.op;
        self.post_as(&kept.segs, kind(&op).need, move || op, cookie, kept.flags)
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
                #[inline(always)]
                |qp| hand.post_one(qp, op, sge, cookie, flags),
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

/// A request kept to post again and again: [`Poster::keep`].
pub struct Kept<B: Backend> {
    segs: Segments,
    op: RequestOp,
    flags: CompletionFlags,
    /// The token of the poster that kept it built, or 0 (no poster's)
    /// where `built` is the default.
    token: u64,
    built: B::Kept,
}

impl<B: Backend> Clone for Kept<B> {
    fn clone(&self) -> Self {
        Kept { segs: self.segs.clone(), op: self.op, flags: self.flags, token: self.token, built: self.built.clone() }
    }
}

impl<B: Backend> core::fmt::Debug for Kept<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Kept")
            .field("op", &self.op)
            .field("flags", &self.flags)
            .field("built", &(self.token != 0))
            .finish_non_exhaustive()
    }
}
