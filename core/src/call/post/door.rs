//! One door for every post: the posts are written once, over a type
//! parameter that says how the caller holds the provider.
//!
//! [`Door`] is implemented twice:
//! - by [`Provider`] itself, which a caller holds to itself (`&mut`);
//! - by [`Locked`], a provider shared among threads, where each post
//!   takes the lock of the Endpoint (or SRQ) it names, on the word of the
//!   object's slot, as it finds the object ([`crate::shared`]).
//!
//! The two differ only in how an object is reached and how work is
//! handed to the transport and its counters (a [`Hand`]); the rules
//! (`rule::check`, `rule::check_recv`, `rule::check_srq_recv`), the
//! lanes and the ordinary posts are the trait's own methods, written
//! once for both.
//!
//! Each hot call has a lane and an ordinary post. The lane
//! ([`Door::lane_request`], [`Door::lane_recv`], [`Door::lane_srq_recv`])
//! takes the object's slot and judges its generation through the
//! caller's `matches_generation`, so that a C handle, whose value
//! encodes its generation, is checked against the slot without a second
//! look-up. It answers yes or no and changes nothing unless every rule
//! holds and the transport took the work (see the `lane` module). The
//! ordinary post ([`Door::ep_post_request`], [`Door::ep_post_recv`],
//! [`Door::srq_post_recv`]) runs the lane first for one segment, and
//! otherwise, or where the lane declined, checks every rule in the
//! pages' order and returns the exact `DAT_RETURN`.
#![allow(unsafe_code)]

use core::num::NonZeroU64;
use core::slice;

use super::lane::{recv_lane, request_lane, srq_recv_lane};
use super::recv::{recv_checked, srq_recv_checked};
use super::request::post_named;
use super::rule::{checked_post, Refusal};
use super::shared::SlotLock;
use super::{PostOp, Request};
use crate::backend::{Backend, RequestOp, SendWr, Sge, UdDest};
use crate::counts::{self, CountTable, SlotCounts};
use crate::error::{DatError, DatResult, Subtype};
use crate::handle::{EpHandle, Named, RawHandle, SrqHandle};
use crate::object::ah::Ah;
use crate::object::ep::Ep;
use crate::object::ia::Ia;
use crate::object::lmr::Lmr;
use crate::object::rmr::Rmr;
use crate::object::srq::Srq;
use crate::provider::Provider;
use crate::slab::Slab;
use crate::storage::Storage;
use crate::types::{CompletionFlags, LmrTriplet};

mod sealed {
    pub trait Sealed {}
}

/// The EP counters of a provider in storage `S`.
type EpCounts<S> = CountTable<{ counts::ep::COUNT }, <S as Storage>::Slots<SlotCounts<{ counts::ep::COUNT }>>>;

/// An EP a door reached, with its generation, the parts of its provider
/// a post reads and the way its work reaches the transport.
#[doc(hidden)]
pub struct At<'p, B: Backend, S: Storage, H> {
    pub(crate) generation: u32,
    pub(crate) object: &'p mut Ep<B>,
    pub(crate) lmrs: &'p Slab<Lmr<B>, S::Slots<Lmr<B>>>,
    pub(crate) ias: &'p Slab<Ia<B>, S::Slots<Ia<B>>>,
    /// For a UD send, its peer's address handle.
    pub(crate) ahs: &'p Slab<Ah<B>, S::Slots<Ah<B>>>,
    /// For a read into memory named by an RMR context.
    pub(crate) rmrs: &'p Slab<Rmr<B>, S::Slots<Rmr<B>>>,
    pub(crate) hand: H,
}

/// [`At`] for an SRQ.
#[doc(hidden)]
pub struct SrqAt<'p, B: Backend, S: Storage, H> {
    pub(crate) generation: u32,
    pub(crate) object: &'p mut Srq<B>,
    pub(crate) lmrs: &'p Slab<Lmr<B>, S::Slots<Lmr<B>>>,
    pub(crate) hand: H,
}

impl<B: Backend, S: Storage, H> core::fmt::Debug for At<'_, B, S, H> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("At").field("generation", &self.generation).finish_non_exhaustive()
    }
}

impl<B: Backend, S: Storage, H> core::fmt::Debug for SrqAt<'_, B, S, H> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SrqAt").field("generation", &self.generation).finish_non_exhaustive()
    }
}

/// How a door hands work to the transport, and a counting EP's posts to
/// its counters.
#[doc(hidden)]
pub trait Hand<B: Backend> {
    /// [`Backend::post_one`].
    fn post_one(&mut self, qp: &mut B::Qp, op: RequestOp, sge: Sge, cookie: u64, flags: CompletionFlags) -> bool;
    /// [`Backend::post_send`].
    fn post_send(&mut self, qp: &mut B::Qp, wr: &SendWr<'_>) -> DatResult<()>;
    /// [`Backend::post_send_ud`].
    fn post_send_ud(&mut self, qp: &mut B::Qp, ah: &B::Ah, dest: UdDest, wr: &SendWr<'_>) -> DatResult<()>;
    /// [`Backend::post_recv_one`].
    fn post_recv_one(&mut self, qp: &mut B::Qp, sge: Sge, cookie: u64) -> bool;
    /// [`Backend::post_recv`].
    fn post_recv(&mut self, qp: &mut B::Qp, sges: &[Sge], cookie: u64) -> DatResult<()>;
    /// [`Backend::srq_post_recv_one`].
    fn srq_post_recv_one(&mut self, srq: &mut B::Srq, sge: Sge, cookie: u64) -> bool;
    /// [`Backend::srq_post_recv`].
    fn srq_post_recv(&mut self, srq: &mut B::Srq, sges: &[Sge], cookie: u64) -> DatResult<()>;
    /// The request `wr` posted on the counting EP `ep`.
    fn posted(&mut self, ep: RawHandle, wr: &SendWr<'_>);
    /// A receive of `bytes` posted on the counting EP `ep`.
    fn posted_recv(&mut self, ep: RawHandle, bytes: u64);
}

/// Marks the way it is on as the unlikely one: a handle judged where the
/// Rust API vouches for its EP while its IA is open, so that the vouched
/// way falls through.
#[cold]
#[inline]
fn judging() {}

/// How a post holds its provider: the one type parameter of every post
/// ([`Provider`] to itself, or [`Locked`]). Sealed: the core implements
/// it, for those two.
pub trait Door<B: Backend, S: Storage>: sealed::Sealed {
    #[doc(hidden)]
    type Hand<'h>: Hand<B>
    where
        Self: 'h;

    /// The EP living in slot `slot`, and the rest of what a post reads.
    #[doc(hidden)]
    fn ep_at(&mut self, slot: u32) -> Option<At<'_, B, S, Self::Hand<'_>>>;

    /// The EP living in the slot `word` names ([`Slab::slot_of`]: a C
    /// handle's byte offset) if it is named `name` ([`Provider::ep_name`]),
    /// that slot, and the rest of what a post reads: a lane's look-up.
    #[doc(hidden)]
    fn ep_called(&mut self, word: usize, name: NonZeroU64) -> Option<At<'_, B, S, Self::Hand<'_>>>;

    /// The EP `h` names, which its caller vouches lives ([`Named`]):
    /// the provider to itself takes the slot as it is; a locked one still
    /// takes the EP's lock, and judges the handle as it does any.
    ///
    /// # Safety
    /// As [`Named::vouched`]: the EP `h` names lives, with `h`'s generation.
    #[doc(hidden)]
    unsafe fn ep_vouched(&mut self, h: RawHandle) -> Option<At<'_, B, S, Self::Hand<'_>>>;

    /// The SRQ living in slot `slot`, and the rest of what a post reads.
    #[doc(hidden)]
    fn srq_at(&mut self, slot: u32) -> Option<SrqAt<'_, B, S, Self::Hand<'_>>>;

    /// The live EP `h` names, of `h`'s generation ([`Door::ep_at`]); a
    /// stale or garbage handle is `DAT_INVALID_HANDLE_EP`. For the cold
    /// posts; the hot ones judge the handle in place.
    #[doc(hidden)]
    #[inline(always)]
    fn ep_named(&mut self, h: EpHandle) -> Result<At<'_, B, S, Self::Hand<'_>>, DatError> {
        let raw = h.raw();
        self.ep_at(raw.index()).filter(|at| at.generation == raw.generation()).ok_or(Refusal::NoEp.error())
    }

    /// The lane of dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT),
    /// dat_ep_post_rdma_read(3DAT) and the IB extension's requests (`op`
    /// says which) of one segment that is not empty, on the EP living in
    /// the slot `ep` names ([`Slab::slot_of`]: a C handle's byte offset)
    /// if it is named `name` ([`Provider::ep_name`]). `true`: posted,
    /// exactly as the ordinary call would have; `false`: nothing changed,
    /// and the ordinary call decides.
    ///
    /// `op` is read only once the slot holds the EP (through a [`Locked`]
    /// door, once the EP is held); `None` declines, as for a remote
    /// pointer the ordinary call refuses. A caller whose operation sits
    /// behind a pointer (the C ABI's remote triplet) reads it there, so
    /// that the remote buffer's three words are not kept in registers, or
    /// spilled, across the look-up and the lock.
    #[inline(always)]
    fn lane_request(
        &mut self,
        ep: usize,
        name: NonZeroU64,
        seg: &LmrTriplet,
        cookie: u64,
        op: impl FnOnce() -> Option<RequestOp>,
        flags: CompletionFlags,
    ) -> bool {
        let Some(At { object: ep, lmrs, ias, mut hand, .. }) = self.ep_called(ep, name) else {
            return false;
        };
        let Some(op) = op() else { return false };
        request_lane(
            ep,
            lmrs,
            ias,
            &Request { iov: slice::from_ref(seg), op, flags },
            #[inline(always)]
            |qp, sge| hand.post_one(qp, op, sge, cookie, flags),
        )
    }

    /// Every request post: dat_ep_post_send(3DAT),
    /// dat_ep_post_rdma_write(3DAT), dat_ep_post_rdma_read(3DAT), DAT
    /// 2.0's send with invalidate and read into an RMR, and the IB
    /// extension's requests, UD's send among them, as `op` says: every
    /// rule of the page, and the exact error. A post of one segment runs
    /// its lane first ([`Door::lane_request`]: the one check, and the
    /// transport's lane, in registers); any other post, and a refusal's
    /// explanation, are `rule::checked_post`'s, out of line, as are the
    /// requests whose other side is named another way ([`PostOp`]).
    #[inline(always)]
    fn ep_post_request(
        &mut self,
        h: impl Into<Named<EpHandle>>,
        iov: &[LmrTriplet],
        cookie: u64,
        op: impl Into<PostOp>,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let named = h.into();
        let h = named.handle();
        let op = match op.into() {
            PostOp::Connected(op) => op,
            other => return post_named(self, h, iov, cookie, other, flags),
        };
        // The handle judged in place, not through `ep_named`, whose `Result`
        // of the whole `At` costs the Rust API's post 9 to 14 instructions;
        // a vouched one not judged at all.
        let raw = h.raw();
        let at = if named.is_vouched() {
            // SAFETY: the caller vouched that the EP lives (`Named::vouched`).
            unsafe { self.ep_vouched(raw) }
        } else {
            judging();
            self.ep_at(raw.index()).filter(|at| at.generation == raw.generation())
        };
        let Some(At { object: ep, lmrs, ias, mut hand, .. }) = at else {
            return Err(Refusal::NoEp.error());
        };
        // The lane reads the segment where it judges it, from the caller's
        // memory: a copy made first went to the stack and was read back
        // from there (6 instructions a post on the Rust API's write). One
        // the lane declines goes out of line as a copy: the caller's memory
        // handed to a function the compiler cannot see into would make it
        // assume that memory changed, and reload what it held in registers
        // across a run of posts.
        let declined;
        let iov = match iov {
            [seg] => {
                let one = Request { iov: slice::from_ref(seg), op, flags };
                if request_lane(
                    ep,
                    lmrs,
                    ias,
                    &one,
                    #[inline(always)]
                    |qp, sge| hand.post_one(qp, op, sge, cookie, flags),
                ) {
                    return Ok(());
                }
                declined = *seg;
                slice::from_ref(&declined)
            }
            _ => iov,
        };
        checked_post(ep, h.0, lmrs, ias, iov, (cookie, op, flags), hand)
    }

    /// The lane of dat_ep_post_recv(3DAT) of one segment that is not
    /// empty, on the EP living in the slot `ep` names if it is named
    /// `name`; as [`Door::lane_request`]. "The operation is valid for all
    /// states of the Endpoint": a receive of a Disconnected EP is posted,
    /// and the transport flushes it, as the ordinary call does.
    #[inline(always)]
    fn lane_recv(
        &mut self,
        ep: usize,
        name: NonZeroU64,
        seg: &LmrTriplet,
        cookie: u64,
        flags: CompletionFlags,
    ) -> bool {
        let Some(At { object: ep, lmrs, mut hand, .. }) = self.ep_called(ep, name) else {
            return false;
        };
        recv_lane(
            ep,
            lmrs,
            seg,
            flags,
            #[inline(always)]
            |qp, sge| hand.post_recv_one(qp, sge, cookie),
        )
    }

    /// dat_ep_post_recv(3DAT): "The operation is valid for all states of
    /// the Endpoint"; in Disconnected the receive is flushed at once. A
    /// receive of one segment tries its lane first ([`Door::lane_recv`]).
    /// An EP that receives from an SRQ takes no receives of its own
    /// (dat_ep_create_with_srq(3DAT)).
    #[inline(always)]
    fn ep_post_recv(&mut self, h: EpHandle, iov: &[LmrTriplet], cookie: u64, flags: CompletionFlags) -> DatResult<()> {
        let raw = h.raw();
        let Some(At { generation, object: ep, lmrs, mut hand, .. }) = self.ep_at(raw.index()) else {
            return Err(Refusal::NoEp.error());
        };
        if generation != raw.generation() {
            return Err(Refusal::NoEp.error());
        }
        if let [seg] = iov {
            if recv_lane(ep, lmrs, seg, flags, |qp, sge| hand.post_recv_one(qp, sge, cookie)) {
                return Ok(());
            }
        }
        recv_checked(ep, h.0, lmrs, iov, flags, cookie, hand)
    }

    /// The lane of dat_srq_post_recv(3DAT) of one segment that is not
    /// empty, on the SRQ living in slot `srq` if `matches_generation`
    /// accepts its generation; as [`Door::lane_request`]. The call "is
    /// valid in every SRQ state", so the rules are
    /// `rule::check_srq_recv`'s: one segment within the limit, the segment
    /// through its LMR of the SRQ's PZ with local write, room.
    #[inline(always)]
    fn lane_srq_recv(
        &mut self,
        srq: u32,
        matches_generation: impl FnOnce(u32) -> bool,
        seg: &LmrTriplet,
        cookie: u64,
    ) -> bool {
        let Some(SrqAt { generation, object: s, lmrs, mut hand }) = self.srq_at(srq) else { return false };
        matches_generation(generation)
            && srq_recv_lane(
                s,
                lmrs,
                seg,
                #[inline(always)]
                |srq, sge| hand.srq_post_recv_one(srq, sge, cookie),
            )
    }

    /// dat_srq_post_recv(3DAT): valid in every SRQ state. A receive of one
    /// segment tries its lane first ([`Door::lane_srq_recv`]).
    #[inline(always)]
    fn srq_post_recv(&mut self, h: SrqHandle, iov: &[LmrTriplet], cookie: u64) -> DatResult<()> {
        let raw = h.raw();
        let Some(SrqAt { generation, object: s, lmrs, mut hand }) = self.srq_at(raw.index()) else {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleSrq));
        };
        if generation != raw.generation() {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleSrq));
        }
        if let [seg] = iov {
            if srq_recv_lane(s, lmrs, seg, |srq, sge| hand.srq_post_recv_one(srq, sge, cookie)) {
                return Ok(());
            }
        }
        srq_recv_checked(s, lmrs, iov, cookie, hand)
    }
}

/// The hand of a provider held to itself.
#[doc(hidden)]
pub struct Owned<'p, B: Backend, S: Storage> {
    backend: &'p mut B,
    ep_counts: &'p mut EpCounts<S>,
}

impl<B: Backend, S: Storage> core::fmt::Debug for Owned<'_, B, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Owned").finish_non_exhaustive()
    }
}

impl<B: Backend, S: Storage> Owned<'_, B, S> {
    /// The hand of `backend` and `ep_counts`, the Rust API's poster's.
    pub(crate) fn new<'p>(backend: &'p mut B, ep_counts: &'p mut EpCounts<S>) -> Owned<'p, B, S> {
        Owned { backend, ep_counts }
    }

    /// The transport's form of a request kept ([`Backend::keep_one`]).
    pub(crate) fn keep_one(&self, qp: &B::Qp, op: RequestOp, sge: Sge, flags: CompletionFlags) -> Option<B::Kept> {
        self.backend.keep_one(qp, op, sge, flags)
    }

    /// The lane of a request kept built ([`Backend::post_kept`]).
    #[inline(always)]
    pub(crate) fn post_kept(&mut self, qp: &mut B::Qp, kept: &B::Kept, cookie: u64) -> bool {
        self.backend.post_kept(qp, kept, cookie)
    }

    /// This hand again, for one call that takes a hand by value.
    #[inline(always)]
    pub(crate) fn reborrow(&mut self) -> Owned<'_, B, S> {
        Owned { backend: self.backend, ep_counts: self.ep_counts }
    }
}

impl<B: Backend, S: Storage> Hand<B> for Owned<'_, B, S> {
    #[inline(always)]
    fn post_one(&mut self, qp: &mut B::Qp, op: RequestOp, sge: Sge, cookie: u64, flags: CompletionFlags) -> bool {
        self.backend.post_one(qp, op, sge, cookie, flags)
    }

    #[inline(always)]
    fn post_send(&mut self, qp: &mut B::Qp, wr: &SendWr<'_>) -> DatResult<()> {
        self.backend.post_send(qp, wr)
    }

    fn post_send_ud(&mut self, qp: &mut B::Qp, ah: &B::Ah, dest: UdDest, wr: &SendWr<'_>) -> DatResult<()> {
        self.backend.post_send_ud(qp, ah, dest, wr)
    }

    #[inline(always)]
    fn post_recv_one(&mut self, qp: &mut B::Qp, sge: Sge, cookie: u64) -> bool {
        self.backend.post_recv_one(qp, sge, cookie)
    }

    #[inline(always)]
    fn post_recv(&mut self, qp: &mut B::Qp, sges: &[Sge], cookie: u64) -> DatResult<()> {
        self.backend.post_recv(qp, sges, cookie)
    }

    #[inline(always)]
    fn srq_post_recv_one(&mut self, srq: &mut B::Srq, sge: Sge, cookie: u64) -> bool {
        self.backend.srq_post_recv_one(srq, sge, cookie)
    }

    #[inline(always)]
    fn srq_post_recv(&mut self, srq: &mut B::Srq, sges: &[Sge], cookie: u64) -> DatResult<()> {
        self.backend.srq_post_recv(srq, sges, cookie)
    }

    #[inline(always)]
    fn posted(&mut self, ep: RawHandle, wr: &SendWr<'_>) {
        self.ep_counts.posted(ep, wr);
    }

    #[inline(always)]
    fn posted_recv(&mut self, ep: RawHandle, bytes: u64) {
        self.ep_counts.posted_recv(ep, bytes);
    }
}

impl<B: Backend, S: Storage> sealed::Sealed for Provider<B, S> {}

impl<B: Backend, S: Storage> Door<B, S> for Provider<B, S> {
    type Hand<'h>
        = Owned<'h, B, S>
    where
        Self: 'h;

    #[inline(always)]
    fn ep_at(&mut self, slot: u32) -> Option<At<'_, B, S, Owned<'_, B, S>>> {
        let Provider { eps, lmrs, ias, ahs, rmrs, backend, ep_counts, .. } = self;
        let (generation, object) = eps.live_mut(slot)?;
        Some(At { generation, object, lmrs, ias, ahs, rmrs, hand: Owned { backend, ep_counts } })
    }

    #[inline(always)]
    fn ep_called(&mut self, word: usize, name: NonZeroU64) -> Option<At<'_, B, S, Owned<'_, B, S>>> {
        let Provider { eps, lmrs, ias, ahs, rmrs, backend, ep_counts, .. } = self;
        let (_, generation, object) = eps.called_mut(word, name)?;
        Some(At { generation, object, lmrs, ias, ahs, rmrs, hand: Owned { backend, ep_counts } })
    }

    #[inline(always)]
    unsafe fn ep_vouched(&mut self, h: RawHandle) -> Option<At<'_, B, S, Owned<'_, B, S>>> {
        let Provider { eps, lmrs, ias, ahs, rmrs, backend, ep_counts, .. } = self;
        // SAFETY: the caller's promise: slot `h.index` holds the EP.
        let (generation, object) = unsafe { eps.vouched_mut(h.index()) };
        debug_assert_eq!(generation, h.generation(), "a vouched EP is of its handle's generation");
        Some(At { generation, object, lmrs, ias, ahs, rmrs, hand: Owned { backend, ep_counts } })
    }

    #[inline(always)]
    fn srq_at(&mut self, slot: u32) -> Option<SrqAt<'_, B, S, Owned<'_, B, S>>> {
        let Provider { srqs, lmrs, backend, ep_counts, .. } = self;
        let (generation, object) = srqs.live_mut(slot)?;
        Some(SrqAt { generation, object, lmrs, hand: Owned { backend, ep_counts } })
    }
}

/// A provider shared among threads, for posts on different Endpoints
/// and SRQs at once ([`crate::shared`]); made by [`Provider::locked`].
/// Each post takes the lock of the Endpoint (or SRQ) it names through
/// `L`, on the word of the object's slot, and holds it to the end.
pub struct Locked<'p, B: Backend, S: Storage, L> {
    provider: &'p Provider<B, S>,
    lock: L,
}

impl<B: Backend, S: Storage, L> core::fmt::Debug for Locked<'_, B, S, L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Locked").finish_non_exhaustive()
    }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// This provider as a [`Door`] for posts from several threads at once,
    /// each holding the lock of the Endpoint (of the SRQ, for
    /// dat_srq_post_recv) whose slot it names, taken through `lock`.
    ///
    /// # Safety
    /// While the door lives, no `&mut` to the provider exists, and every
    /// other access to an Endpoint or SRQ takes its lock through a
    /// [`SlotLock`] that agrees with `lock` ([`crate::shared`]).
    #[inline(always)]
    pub unsafe fn locked<L: SlotLock>(&self, lock: L) -> Locked<'_, B, S, L> {
        Locked { provider: self, lock }
    }
}

/// The hand of a provider shared among threads.
#[doc(hidden)]
pub struct LockedHand<'p, B: Backend, S: Storage, G> {
    backend: &'p B,
    ep_counts: &'p EpCounts<S>,
    /// The lock of the object posted on, held while the hand lives.
    _held: G,
}

impl<B: Backend, S: Storage, G> core::fmt::Debug for LockedHand<'_, B, S, G> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LockedHand").finish_non_exhaustive()
    }
}

impl<B: Backend, S: Storage, G> Hand<B> for LockedHand<'_, B, S, G> {
    #[inline(always)]
    fn post_one(&mut self, qp: &mut B::Qp, op: RequestOp, sge: Sge, cookie: u64, flags: CompletionFlags) -> bool {
        // SAFETY: `qp` is the locked EP's; no `&mut` to the backend exists
        // (the contract of `Provider::locked`).
        unsafe { self.backend.post_one_shared(qp, op, sge, cookie, flags) }
    }

    #[inline(always)]
    fn post_send(&mut self, qp: &mut B::Qp, wr: &SendWr<'_>) -> DatResult<()> {
        // SAFETY: as in `post_one`.
        unsafe { self.backend.post_send_shared(qp, wr) }
    }

    fn post_send_ud(&mut self, qp: &mut B::Qp, ah: &B::Ah, dest: UdDest, wr: &SendWr<'_>) -> DatResult<()> {
        // SAFETY: as in `post_one`.
        unsafe { self.backend.post_send_ud_shared(qp, ah, dest, wr) }
    }

    #[inline(always)]
    fn post_recv_one(&mut self, qp: &mut B::Qp, sge: Sge, cookie: u64) -> bool {
        // SAFETY: as in `post_one`.
        unsafe { self.backend.post_recv_one_shared(qp, sge, cookie) }
    }

    #[inline(always)]
    fn post_recv(&mut self, qp: &mut B::Qp, sges: &[Sge], cookie: u64) -> DatResult<()> {
        // SAFETY: as in `post_one`.
        unsafe { self.backend.post_recv_shared(qp, sges, cookie) }
    }

    #[inline(always)]
    fn srq_post_recv_one(&mut self, srq: &mut B::Srq, sge: Sge, cookie: u64) -> bool {
        // SAFETY: `srq` is the locked SRQ's; no `&mut` to the backend
        // exists (the contract of `Provider::locked`).
        unsafe { self.backend.srq_post_recv_one_shared(srq, sge, cookie) }
    }

    #[inline(always)]
    fn srq_post_recv(&mut self, srq: &mut B::Srq, sges: &[Sge], cookie: u64) -> DatResult<()> {
        // SAFETY: `srq` is the locked SRQ's; no `&mut` to the backend
        // exists (the contract of `Provider::locked`).
        unsafe { self.backend.srq_post_recv_shared(srq, sges, cookie) }
    }

    #[inline(always)]
    fn posted(&mut self, ep: RawHandle, wr: &SendWr<'_>) {
        // SAFETY: the EP's lock is held, which its counters' every other
        // use takes too.
        unsafe { self.ep_counts.posted_shared(ep, wr) }
    }

    #[inline(always)]
    fn posted_recv(&mut self, ep: RawHandle, bytes: u64) {
        // SAFETY: as in `posted`.
        unsafe { self.ep_counts.posted_recv_shared(ep, bytes) }
    }
}

/// What a [`Locked`] door hands a post of the EP `object`, found at
/// `generation` with its lock `held`.
#[inline(always)]
fn locked_at<'h, B: Backend, S: Storage, G>(
    p: &'h Provider<B, S>,
    held: G,
    generation: u32,
    object: &'h mut Ep<B>,
) -> At<'h, B, S, LockedHand<'h, B, S, G>> {
    let hand = LockedHand { backend: &p.backend, ep_counts: &p.ep_counts, _held: held };
    At { generation, object, lmrs: &p.lmrs, ias: &p.ias, ahs: &p.ahs, rmrs: &p.rmrs, hand }
}

impl<B: Backend, S: Storage, L> sealed::Sealed for Locked<'_, B, S, L> {}

impl<'p, B: Backend, S: Storage, L: SlotLock> Door<B, S> for Locked<'p, B, S, L> {
    type Hand<'h>
        = LockedHand<'h, B, S, L::Guard<'h>>
    where
        Self: 'h;

    #[inline(always)]
    fn ep_at(&mut self, slot: u32) -> Option<At<'_, B, S, Self::Hand<'_>>> {
        let (p, lock) = (self.provider, &self.lock);
        // SAFETY: the EP's lock is taken on its slot's word before the EP
        // is read, through the lock every other access to it takes, and no
        // `&mut` to the provider exists (the contract of `Provider::locked`).
        let (held, generation, object) = unsafe { p.eps.live_locked(slot, |word| lock.take(word)) }?;
        Some(locked_at(p, held, generation, object))
    }

    #[inline(always)]
    fn ep_called(&mut self, word: usize, name: NonZeroU64) -> Option<At<'_, B, S, Self::Hand<'_>>> {
        let (p, lock) = (self.provider, &self.lock);
        // SAFETY: as in `ep_at`.
        let (held, _, generation, object) = unsafe { p.eps.called_locked(word, name, |word| lock.take(word)) }?;
        Some(locked_at(p, held, generation, object))
    }

    #[inline(always)]
    unsafe fn ep_vouched(&mut self, h: RawHandle) -> Option<At<'_, B, S, Self::Hand<'_>>> {
        self.ep_at(h.index()).filter(|at| at.generation == h.generation())
    }

    #[inline(always)]
    fn srq_at(&mut self, slot: u32) -> Option<SrqAt<'_, B, S, Self::Hand<'_>>> {
        let (p, lock) = (self.provider, &self.lock);
        // SAFETY: as in `ep_at`, for the SRQ's lock.
        let (held, generation, object) = unsafe { p.srqs.live_locked(slot, |word| lock.take(word)) }?;
        let hand = LockedHand { backend: &p.backend, ep_counts: &p.ep_counts, _held: held };
        Some(SrqAt { generation, object, lmrs: &p.lmrs, hand })
    }
}
