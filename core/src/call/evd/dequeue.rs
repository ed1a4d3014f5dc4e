//! The hot half of dat_evd_dequeue(3DAT): what a dequeue settles without
//! the EVD's queue, through an exclusive provider (its lane) and through a
//! shared one.
//!
//! Both take only what the ordinary dequeue would hand straight to its
//! caller: a successful DTO completion that the CQ holds next, of an EVD
//! with nothing queued before it, no waiter, no CNO, no hold on its lane
//! ([`Provider::ep_hold_lane`]) and only DTO completions feeding it, for
//! an Endpoint that completes to it. Anything
//! else they leave untouched, and the ordinary dequeue
//! ([`Provider::evd_dequeue`]) decides.
#![allow(unsafe_code)]

use core::num::NonZeroU64;

use crate::backend::{Backend, Completion, CqHead, HoldsQp, Shared, Untaken};
use crate::error::{DatError, DatResult, Subtype};
use crate::event::{Event, EventData, EventNumber};
use crate::handle::{EpHandle, EvdHandle, IaHandle, Named, RawHandle};
use crate::object::ep::{Ep, Settle};
use crate::provider::Provider;
use crate::shared::SlotLock;
use crate::slab::word_of;
use crate::storage::Storage;

/// Why a dequeue's lane took nothing ([`Provider::lane_dequeue_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passed {
    /// The ordinary dequeue would return `DAT_QUEUE_EMPTY` and change
    /// nothing: the lane is open (nothing queued, no waiter), the CQ
    /// holds nothing ([`Untaken::Empty`]), and no look at the IA's
    /// connection events is due (the ordinary dequeue of an empty EVD
    /// takes one once in a while).
    Empty,
    /// The ordinary dequeue decides.
    Ordinary,
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// The lane of dat_evd_dequeue(3DAT) on the EVD `evd` names (judged,
    /// or vouched for: [`Named`]): the successful DTO completion
    /// its CQ holds next, when nothing is queued on the EVD before it and
    /// the ordinary dequeue would hand it straight to the caller (no
    /// waiter, nothing but DTO completions feed the EVD, no CNO). Where it
    /// takes nothing, nothing changed, and [`Passed`] says whether the
    /// EVD is empty or the ordinary dequeue decides.
    #[inline(always)]
    pub fn lane_dequeue(&mut self, evd: impl Into<Named<EvdHandle>>) -> Result<Event, Passed> {
        self.lane_dequeue_with(evd, |evd, c, _| Event {
            number: EventNumber::DtoCompletion,
            evd,
            data: EventData::Dto {
                ep: EpHandle(RawHandle::from_bits(c.tag)),
                cookie: c.cookie,
                status: c.status,
                transferred_length: c.transferred_length,
                op: c.op,
                imm: c.imm,
            },
        })
    }

    /// [`Provider::lane_dequeue`] that hands what it settled to `event`
    /// instead of making an [`Event`] of it: the EVD, the completion
    /// (its `tag` is the EP's handle) and the EP's name
    /// ([`Provider::ep_name`]), from which a layer above writes its own
    /// event straight away.
    #[inline(always)]
    pub fn lane_dequeue_with<R>(
        &mut self,
        evd: impl Into<Named<EvdHandle>>,
        event: impl FnOnce(EvdHandle, &Completion, u64) -> R,
    ) -> Result<R, Passed> {
        let evd = evd.into();
        let raw = evd.handle().raw();
        let vouched = evd.is_vouched();
        let at = if vouched { raw.index() as usize } else { word_of(raw.index()) };
        // SAFETY: a vouched EVD lives, with its handle's generation: the
        // promise of `Named::vouched`.
        let taken = unsafe {
            self.lane_dequeue_at::<false, R>(
                at,
                vouched,
                None,
                |slot, generation, _| slot == raw.index() && generation == raw.generation(),
                event,
            )
        };
        match taken {
            Ok(taken) => Ok(taken),
            Err(Untaken::Empty) => Err(self.lane_dequeue_empty_out_of_line(raw.index())),
            Err(Untaken::Declined) => Err(Passed::Ordinary),
        }
    }

    /// [`Provider::lane_dequeue_with`] up to the CQ: where the CQ holds
    /// nothing it answers [`Untaken::Empty`] and leaves the look at the
    /// IA's connection events to [`Provider::lane_dequeue_empty`], out of
    /// line. So a caller can make every way but a taken completion a jump
    /// to code of its own, and the lane calls nothing.
    /// [`Untaken::Declined`] is [`Passed::Ordinary`].
    /// The EVD is the one living in the slot `evd` names
    /// ([`Slab::slot_of`](crate::slab::Slab::slot_of): a C handle's byte
    /// offset) if its name ([`Provider::evd_name`]) is `name`, or else if
    /// `accept` takes that slot, its generation and its name. A completion
    /// of an EP with no name ([`Provider::ep_name`]) is declined: `event`
    /// is handed the EP's name, never 0.
    #[inline(always)]
    pub fn lane_dequeue_cq<R>(
        &mut self,
        evd: usize,
        name: NonZeroU64,
        accept: impl FnOnce(u32, u32, u64) -> bool,
        event: impl FnOnce(EvdHandle, &Completion, u64) -> R,
    ) -> Result<R, Untaken> {
        // SAFETY: nothing is vouched for; `accept` judges the EVD.
        unsafe { self.lane_dequeue_at::<true, R>(evd, false, Some(name), accept, event) }
    }

    /// [`Provider::lane_dequeue_cq`] on the EVD in slot `evd`, taken as
    /// it is, if `vouched`; or else on the one in the slot the word `evd`
    /// names ([`word_of`]), judged by `accept`; if `NAMED`, a completion
    /// of an EP with no name ([`Provider::ep_name`]) is declined, so that
    /// `event` is handed a name, never 0.
    ///
    /// # Safety
    /// If `vouched`, slot `evd` holds an EVD.
    #[inline(always)]
    unsafe fn lane_dequeue_at<const NAMED: bool, R>(
        &mut self,
        evd: usize,
        vouched: bool,
        name: Option<NonZeroU64>,
        accept: impl FnOnce(u32, u32, u64) -> bool,
        event: impl FnOnce(EvdHandle, &Completion, u64) -> R,
    ) -> Result<R, Untaken> {
        let Provider { evds, eps, backend, .. } = self;
        // The handle read where the stream is compared, not kept across
        // the CQ's look.
        let open = if vouched {
            // SAFETY: the caller's promise.
            let (generation, e) = unsafe { evds.vouched_mut(evd as u32) };
            debug_assert_eq!(e.handle.raw(), RawHandle::from_bits(u64::from(generation) << 32 | evd as u64));
            e.lane_cq()
        } else {
            let Some((slot, generation, e)) = evds.named_live_mut(evd) else { return Err(Untaken::Declined) };
            debug_assert_eq!(e.handle.raw(), RawHandle::from_bits(u64::from(generation) << 32 | u64::from(slot)));
            e.lane_cq_named(name, |e| accept(slot, generation, e.name()))
        };
        let Some((evd, cq)) = open else { return Err(Untaken::Declined) };
        let (c, Completing { settle, recv, .. }) = backend.cq_lane(
            cq,
            #[inline(always)]
            |head: CqHead| {
                let raw = RawHandle::from_bits(head.tag);
                let ep = if head.is_live() {
                    // SAFETY: the QP of the tag lives (`CqHead::of_live_qp`),
                    // and the core tags a QP with the handle of the EP
                    // that holds it until it destroys it
                    // (`Backend::qp_create`): that EP lives, of the tag's
                    // generation.
                    let (generation, ep) = unsafe { eps.vouched_mut(raw.index()) };
                    debug_assert_eq!(generation, raw.generation(), "a live QP's EP is of its tag's generation");
                    ep
                } else {
                    eps.get_mut(raw)?
                };
                Completing::of(ep, head, *evd, ()).filter(|c| !NAMED || c.settle.name != 0)
            },
        )?;
        // What `Provider::complete_to` counts for a completion it hands
        // to the dequeue.
        let name = settle.name;
        settle.dto(recv, c.retired);
        Ok(event(*evd, &c, name))
    }

    /// What a dequeue's lane answers for the EVD in slot `evd`, whose CQ
    /// [`Provider::lane_dequeue_cq`] found empty: [`Passed::Empty`]
    /// unless its IA's connection events are to be looked at, which the
    /// ordinary dequeue does: when one waits, where the transport can tell
    /// ([`Backend::cm_waiting`]), or else when a look is due by the clock.
    /// Inlined: its callers are out of line already (the C ABI's
    /// `dequeue_empty`, and [`Provider::lane_dequeue_with`]'s own).
    #[inline(always)]
    pub fn lane_dequeue_empty(&mut self, evd: u32) -> Passed {
        let Some((_, e)) = self.evds.live_at(evd) else { return Passed::Ordinary };
        let Some(i) = self.ias.get(e.ia.0) else { return Passed::Ordinary };
        let look = match self.backend.cm_waiting(&i.dev) {
            Some(waiting) => waiting,
            None => i.cm_look_is_due(self.backend.coarse_now_us()),
        };
        if look {
            Passed::Ordinary
        } else {
            Passed::Empty
        }
    }

    /// [`Provider::lane_dequeue_empty`] out of line, so that a lane that
    /// takes a completion keeps nothing for the asking.
    #[cold]
    #[inline(never)]
    fn lane_dequeue_empty_out_of_line(&mut self, evd: u32) -> Passed {
        self.lane_dequeue_empty(evd)
    }
}

/// What a dequeue holds of the EP a CQE is for while the CQ takes it: its
/// QP, its accounts, whether the CQE completes a receive, and (shared)
/// the EP's lock.
struct Completing<'e, B: Backend, L> {
    qp: &'e mut B::Qp,
    settle: Settle<'e>,
    recv: bool,
    /// Held until the completion is settled and its event written.
    lock: L,
}

impl<'e, B: Backend, L> Completing<'e, B, L> {
    /// `ep`'s halves for the CQE `head` shows, if `ep` has a QP (which
    /// the EP of a live QP has: [`CqHead::of_live_qp`]) and
    /// `Provider::complete_to` would hand the successful completion that
    /// is no window bind's (what a CQ's lane takes, [`CqHead`]) to a
    /// dequeue of `evd` as a DTO event and change nothing else: of the
    /// stream `evd` takes, and for a receive one the EP settles alone
    /// ([`Ep::recv_direct`]: not an SRQ's, whose count is the SRQ's, nor
    /// one that may have invalidated a window).
    #[inline(always)]
    fn of(ep: &'e mut Ep<B>, head: CqHead, evd: EvdHandle, lock: L) -> Option<Self> {
        let (stream, alone) = ep.dto_stream(head.recv);
        // A live QP's CQE is of the CQ its EP's EVD of that stream had
        // when the QP was made (`CqHead::of_live_qp`); each EVD has a CQ
        // of its own, and an EP changes its EVDs only with its QP
        // (`Provider::ep_modify`): the stream is `evd`'s.
        debug_assert!(!head.is_live() || stream == evd, "a live QP's CQE is of its EP's EVD");
        if !alone || !(head.is_live() || stream == evd) {
            return None;
        }
        let (qp, settle) = ep.completing();
        let qp = if head.is_live() {
            debug_assert!(qp.is_some(), "the EP of a live QP holds it");
            // SAFETY: the QP of the tag lives (`CqHead::of_live_qp`), and
            // the EP the core tagged it with holds it until it destroys it
            // (`Backend::qp_create`).
            unsafe { qp.unwrap_unchecked() }
        } else {
            qp?
        };
        Some(Completing { qp, settle, recv: head.recv, lock })
    }
}

impl<B: Backend, L> HoldsQp<B::Qp> for Completing<'_, B, L> {
    #[inline(always)]
    fn qp(&mut self) -> &mut B::Qp {
        self.qp
    }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// [`Provider::evd_dequeue`] through a shared provider, for what it can
    /// settle alone (see the module and [`crate::shared`]), on the EVD
    /// living in the slot the word `evd` names if its name is `name`, or
    /// else if `accept` accepts that slot, its generation and its name (as
    /// [`Provider::lane_dequeue_cq`]). It takes the EVD's lock through `lock`,
    /// then the lock of the Endpoint whose completion it settles (EVD, then
    /// Endpoint: a post takes no EVD lock); where `lock` refuses one, the
    /// call is for the exclusive path. What it settled goes to `event`, as
    /// [`Provider::lane_dequeue_cq`] hands it over (a name, never 0), while
    /// both locks are held. An EVD whose CQ holds nothing is
    /// [`Shared::Empty`] unless its IA's connection events are to be looked
    /// at, which the exclusive dequeue does ([`Shared::Look`]): when one
    /// waits, where the transport can tell ([`Backend::cm_waiting`]), or
    /// else when `look_due`, given the IA's slot, says a look is due by the
    /// caller's clock. `look_due` is asked only there, so a call that
    /// settles nothing for another reason ([`Shared::NeedsExclusive`], a
    /// lock refused among them) leaves the clock's turn to the next.
    ///
    /// # Safety
    /// No `&mut` to the provider exists while this runs, and every other
    /// access to an EVD or Endpoint takes its lock through a [`SlotLock`]
    /// that agrees with `lock` (see [`crate::shared`]).
    #[inline(always)]
    pub unsafe fn evd_dequeue_shared<L: SlotLock, R>(
        &self,
        evd: usize,
        name: NonZeroU64,
        accept: impl FnOnce(u32, u32, u64) -> bool,
        lock: &L,
        event: impl FnOnce(EvdHandle, &Completion, u64) -> R,
        look_due: impl FnOnce(u32) -> bool,
    ) -> Shared<R> {
        // SAFETY: the EVD's lock is taken before it is read (the caller's
        // promise covers the rest).
        let taken = unsafe { self.evds.named_live_locked(evd, |word| lock.take(word)) };
        let Some((_evd_held, slot, generation, e)) = taken else { return Shared::NeedsExclusive };
        debug_assert_eq!(e.handle, EvdHandle(RawHandle::from_bits(u64::from(generation) << 32 | u64::from(slot))));
        // As in `lane_dequeue_cq`.
        let Some((evd, cq)) = e.lane_cq_named(Some(name), |e| accept(slot, generation, e.name())) else {
            return Shared::NeedsExclusive;
        };
        // SAFETY: the CQ is the locked EVD's; the closure takes the lock
        // of the EP of the QP the CQE names before anything is taken, and
        // reads the EP only once it holds it; the slot of a QP the
        // transport vouches lives (`CqHead::of_live_qp`) holds that EP,
        // since the core tags a QP with the EP that holds it until it
        // destroys it, and nothing is freed while the provider is shared.
        let taken = unsafe {
            self.backend.cq_take_shared(
                cq,
                #[inline(always)]
                |head: CqHead| {
                    let raw = RawHandle::from_bits(head.tag);
                    let (held, ep) = if head.is_live() {
                        // The EP of a live QP lives, as in `lane_dequeue_at`,
                        // and no `&mut` to the provider (which a free needs)
                        // exists while this runs.
                        let (held, generation, ep) = self.eps.vouched_locked(raw.index(), |word| lock.take(word))?;
                        debug_assert_eq!(generation, raw.generation(), "a live QP's EP is of its tag's generation");
                        (held, ep)
                    } else {
                        self.eps.get_locked(raw, |word| lock.take(word))?
                    };
                    // A completion for another EVD is queued there, an
                    // SRQ's receives are counted on the SRQ, and a receive
                    // may invalidate a window of the EP: all exclusive
                    // work (`Ep::recv_direct`). So is one of an EP with no
                    // name, as in `lane_dequeue_cq`.
                    Completing::of(ep, head, *evd, held).filter(|c| c.settle.name != 0)
                },
            )
        };
        let (c, Completing { settle, recv, lock: _held, .. }) = match taken {
            Ok(taken) => taken,
            Err(Untaken::Empty) => return self.empty_shared(e.ia, look_due),
            Err(Untaken::Declined) => return Shared::NeedsExclusive,
        };
        let name = settle.name;
        settle.dto(recv, c.retired);
        Shared::Done(event(*evd, &c, name))
    }

    /// What a shared dequeue answers for an EVD of `ia` whose CQ it found
    /// empty (see [`Provider::evd_dequeue_shared`]). The IA is read, never
    /// changed: only an exclusive call changes it.
    #[cold]
    #[inline(never)]
    fn empty_shared<R>(&self, ia: IaHandle, look_due: impl FnOnce(u32) -> bool) -> Shared<R> {
        let Some(i) = self.ias.get(ia.0) else { return Shared::NeedsExclusive };
        let look = match self.backend.cm_waiting(&i.dev) {
            Some(waiting) => waiting,
            None => look_due(ia.0.index()),
        };
        if look {
            Shared::Look
        } else {
            Shared::Empty
        }
    }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// Shut the dequeue lane of the EVD of `ep`'s receive stream (`recv`)
    /// or request stream, until [`Provider::ep_release_lane`]: every
    /// completion that EVD gives then comes through the ordinary dequeue.
    /// For a layer above the core that must see some completions of the
    /// EP itself; it holds the lane from a post to that post's completion.
    /// The hold moves with the stream when dat_ep_modify(3DAT) gives it
    /// another EVD, and ends when the EP is freed.
    pub fn ep_hold_lane(&mut self, ep: EpHandle, recv: bool) -> DatResult<()> {
        let e = self.eps.get_mut(ep.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        let evd = if recv {
            e.lane_holds.recv += 1;
            e.recv_evd
        } else {
            e.lane_holds.request += 1;
            e.request_evd
        };
        if let Some(e) = self.evds.get_mut(evd.0) {
            e.hold_lane(1);
        }
        Ok(())
    }

    /// End one hold of [`Provider::ep_hold_lane`]; none of a freed EP.
    pub fn ep_release_lane(&mut self, ep: EpHandle, recv: bool) {
        let Some(e) = self.eps.get_mut(ep.0) else { return };
        let (held, evd) =
            if recv { (&mut e.lane_holds.recv, e.recv_evd) } else { (&mut e.lane_holds.request, e.request_evd) };
        if *held == 0 {
            return;
        }
        *held -= 1;
        if let Some(e) = self.evds.get_mut(evd.0) {
            e.release_lane(1);
        }
    }
}
