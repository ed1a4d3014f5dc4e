//! Event Dispatcher (EVD): dat_evd_create, dat_evd_free(3DAT),
//! dat_evd_query(3DAT), dat_evd_resize(3DAT), dat_evd_post_se(3DAT),
//! dat_evd_dequeue(3DAT), dat_evd_wait(3DAT), dat_evd_enable(3DAT),
//! dat_evd_disable(3DAT), dat_evd_set_unwaitable(3DAT),
//! dat_evd_clear_unwaitable(3DAT), dat_evd_modify_cno(3DAT).
//!
//! Before you edit: dat_evd_wait(3DAT) holds most of the rules (one
//! waiter, thresholds, unwaitable, abort), and dat_ep_create(3DAT)'s USAGE
//! section the rules for merging completion streams on one EVD.

mod dequeue;

pub use dequeue::Passed;

use crate::backend::{Backend, Completion, Wake};
use crate::counts;
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::event::{Event, EventData, EventNumber};
use crate::handle::{CnoHandle, EvdHandle, IaHandle};
use crate::object::ep::EpQps;
use crate::object::evd::{Evd, EvdCqs, NotifyMode, TIMEOUT_INFINITE};
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;
use crate::types::EvdFlags;

/// `DAT_EVD_FIELD_ALL`.
pub const EVD_FIELD_ALL: u32 = 0x1f;

/// How often a dequeue that finds nothing looks at its IA's connection
/// events where the transport cannot tell whether one waits
/// ([`crate::backend::Backend::cm_waiting`]): the bound on how long
/// a peer's disconnect stays unseen by a consumer that only dequeues its
/// DTO EVD, on a clock that may lag a scheduler tick
/// ([`crate::backend::Backend::coarse_now_us`]).
pub const CM_LOOK_US: u64 = 1_000;

/// The longest a wait on an EVD fed by other IAs' EPs sleeps between
/// polls of their transports.
const FOREIGN_SLICE_US: u64 = 10_000;

/// `DAT_EVD_STATE` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvdState(pub u32);

impl EvdState {
    /// `DAT_EVD_STATE_ENABLED`: events notify the CNO (dat_evd_enable(3DAT)).
    pub const ENABLED: u32 = 0x01;
    /// `DAT_EVD_STATE_DISABLED`: events do not notify (dat_evd_disable(3DAT)).
    pub const DISABLED: u32 = 0x02;
    /// `DAT_EVD_STATE_WAITABLE`: dat_evd_wait(3DAT) may block on it.
    pub const WAITABLE: u32 = 0x04;
    /// `DAT_EVD_STATE_UNWAITABLE`: dat_evd_wait(3DAT) is refused
    /// (dat_evd_set_unwaitable(3DAT)).
    pub const UNWAITABLE: u32 = 0x08;
    /// `DAT_EVD_STATE_CONFIG_NOTIFY`: every event notifies.
    pub const CONFIG_NOTIFY: u32 = 0x10;
    /// `DAT_EVD_STATE_CONFIG_SOLICITED`: only solicited events notify.
    pub const CONFIG_SOLICITED: u32 = 0x20;
    /// `DAT_EVD_STATE_CONFIG_THRESHOLD`: notification waits for a
    /// threshold of events.
    pub const CONFIG_THRESHOLD: u32 = 0x30;
}

/// `DAT_EVD_PARAM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvdParam {
    /// The IA the EVD belongs to.
    pub ia: IaHandle,
    /// Events the queue holds.
    pub evd_qlen: u32,
    /// The `DAT_EVD_STATE` bits.
    pub evd_state: EvdState,
    /// The CNO the EVD notifies; null if none.
    pub cno: CnoHandle,
    /// The event streams that may feed the EVD.
    pub evd_flags: EvdFlags,
}

/// A `dat_evd_wait` in progress (see [`Provider::evd_wait_begin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvdWait {
    evd: EvdHandle,
    threshold: u32,
    deadline_us: Option<u64>,
}

impl EvdWait {
    /// The EVD waited on.
    pub fn evd(&self) -> EvdHandle {
        self.evd
    }
}

/// One step of a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStep {
    /// An event, and how many remain queued (`nmore`).
    Ready {
        /// The event, taken off the queue.
        event: Event,
        /// Events still queued.
        nmore: u32,
    },
    /// Below the threshold: block at most this long, then poll again.
    Pending {
        /// Microseconds left; `None`: no limit.
        timeout_us: Option<u64>,
    },
    /// `DAT_TIMEOUT_EXPIRED`, with `nmore`.
    TimedOut {
        /// Events queued, fewer than the threshold.
        nmore: u32,
    },
}

signature! {
    /// dat_evd_create's parameters (`<dat2/udat.h>`; the pages have none).
    pub(crate) enum EvdCreate { IaHandle, EvdMinQlen, CnoHandle, EvdFlags, EvdHandle }

    /// dat_evd_query(3DAT)'s parameters.
    pub(crate) enum EvdQuery { EvdHandle, EvdParamMask, EvdParam }

    /// dat_evd_resize(3DAT)'s parameters.
    pub(crate) enum EvdResize { EvdHandle, EvdMinQlen }

    /// dat_evd_post_se(3DAT)'s parameters.
    pub(crate) enum EvdPostSe { EvdHandle, Event }

    /// dat_evd_wait(3DAT)'s parameters, named for the C call
    /// ([`EvdWait`] is a wait under way).
    pub(crate) enum DatEvdWait { EvdHandle, Timeout, Threshold, Event, Nmore }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_evd_create: an EVD of `min_qlen` events fed by the streams in
    /// `flags`, tied to `cno` (or none).
    pub fn evd_create(
        &mut self,
        ia_h: IaHandle,
        min_qlen: u32,
        cno: CnoHandle,
        flags: EvdFlags,
    ) -> DatResult<EvdHandle> {
        let ia = self.ia(ia_h)?;
        if min_qlen == 0 || min_qlen > ia.attr.max_evd_qlen {
            return Err(DatError::invalid(EvdCreate::EvdMinQlen));
        }
        if flags.0 == 0 || !flags.is_valid() {
            return Err(DatError::invalid(EvdCreate::EvdFlags));
        }
        if !cno.is_null() && self.cno(cno)?.ia != ia_h {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleCno));
        }
        let queue = self.events.open(min_qlen).ok_or(DatError::of(ErrorType::InsufficientResources))?;
        let evd = Evd::new(ia_h, flags, queue, cno);
        // The slot comes first: the CQ's errors name the EVD by its handle.
        let raw = match crate::object::owned::insert(&mut self.ias, &mut self.evds, evd) {
            Ok(raw) => raw,
            Err(mut evd) => {
                evd.close(&mut self.events);
                return Err(DatError::new(ErrorType::InsufficientResources, Subtype::ResourceTevd));
            }
        };
        if let Some(e) = self.evds.get_mut(raw) {
            e.handle = EvdHandle(raw);
        }
        if flags.intersects(EvdFlags::DTO | EvdFlags::RMR_BIND) {
            let Provider { ias, evds, backend, events, .. } = self;
            let made = match ias.get_mut(ia_h.0) {
                Some(ia) => backend.cq_create(&mut ia.dev, min_qlen, raw.to_bits()),
                None => Err(DatError::invalid_handle(Subtype::InvalidHandleIa)),
            };
            match (made, evds.get_mut(raw)) {
                (Ok(cq), Some(e)) => e.set_cq(cq),
                // The slot was filled just above.
                (Ok(cq), None) => backend.cq_destroy(cq),
                (Err(err), _) => {
                    if let Some(mut e) = crate::object::owned::remove(ias, evds, raw) {
                        e.close(events);
                    }
                    return Err(err);
                }
            }
        }
        if let Some(c) = self.cnos.get_mut(cno.0) {
            c.tie();
        }
        Ok(EvdHandle(raw))
    }

    /// Name `evd` by `name`, what the layer above calls it (the C ABI: its
    /// handle), so that a dequeue's lane knows the EVD it is handed by
    /// one compare ([`Provider::lane_dequeue_cq`]).
    pub fn evd_name(&mut self, evd: EvdHandle, name: u64) -> DatResult<()> {
        self.evd_mut(evd)?.set_name(name);
        Ok(())
    }

    /// dat_evd_free(3DAT): refused while event streams feed the EVD. A
    /// thread waiting on it gets `DAT_ABORT`.
    pub fn evd_free(&mut self, evd: EvdHandle) -> DatResult<()> {
        if self.evd(evd)?.fed() {
            return Err(DatError::invalid_state(Subtype::InvalidStateEvdInUse));
        }
        self.evd_destroy(evd);
        Ok(())
    }

    pub(crate) fn evd_destroy(&mut self, evd: EvdHandle) {
        let Some(mut e) = crate::object::owned::remove(&mut self.ias, &mut self.evds, evd.0) else { return };
        e.close(&mut self.events);
        let cno = e.cno();
        if let Some(cq) = e.into_cq() {
            self.backend.cq_destroy(cq);
        }
        self.cno_untie(cno);
    }

    /// dat_evd_query(3DAT).
    pub fn evd_query(&self, evd: EvdHandle, mask: u32) -> DatResult<EvdParam> {
        let e = self.evd(evd)?;
        if mask & !EVD_FIELD_ALL != 0 {
            return Err(DatError::invalid(EvdQuery::EvdParamMask));
        }
        let mut state = if e.enabled() { EvdState::ENABLED } else { EvdState::DISABLED };
        state |= if e.waitable() { EvdState::WAITABLE } else { EvdState::UNWAITABLE };
        state |= match e.dto().config() {
            NotifyMode::Threshold => EvdState::CONFIG_THRESHOLD,
            NotifyMode::Unsignalled => EvdState::CONFIG_NOTIFY,
            NotifyMode::Solicited => EvdState::CONFIG_SOLICITED,
        };
        Ok(EvdParam {
            ia: e.ia,
            evd_qlen: e.queue().capacity(),
            evd_state: EvdState(state),
            cno: e.cno(),
            evd_flags: e.flags,
        })
    }

    /// Events queued on `evd` now (what `nmore` snapshots).
    pub fn evd_count(&self, evd: EvdHandle) -> DatResult<u32> {
        Ok(self.evd(evd)?.queue().len())
    }

    /// dat_evd_resize(3DAT): "If the number of entries on the event queue
    /// is larger then the requested evd_min_qlen, the operation can return
    /// DAT_INVALID_STATE and not change an instance of Event Dispatcher."
    pub fn evd_resize(&mut self, evd: EvdHandle, min_qlen: u32) -> DatResult<()> {
        let e = self.evd(evd)?;
        let max = self.ia(e.ia).map(|ia| ia.attr.max_evd_qlen).unwrap_or(0);
        if min_qlen == 0 || min_qlen > max {
            return Err(DatError::invalid(EvdResize::EvdMinQlen));
        }
        if min_qlen < e.queue().len() {
            return Err(DatError::invalid_state(Subtype::NoSubtype));
        }
        let Provider { evds, events, backend, .. } = self;
        let e = evds.get_mut(evd.0).ok_or(DatError::invalid_handle(Subtype::NoSubtype))?;
        let capacity = e.queue().capacity();
        if !e.resize(events, min_qlen) {
            return Err(DatError::of(ErrorType::InsufficientResources));
        }
        if let Some(cq) = e.cq_mut() {
            if let Err(err) = backend.cq_resize(cq, min_qlen) {
                let restored = e.resize(events, capacity);
                debug_assert!(restored);
                return Err(err);
            }
        }
        Ok(())
    }

    /// dat_evd_post_se(3DAT): queue a software event. "If the event queue is
    /// full, the operation is completed unsuccessfully and returns
    /// DAT_QUEUE_FULL. The event is not queued."
    pub fn evd_post_se(&mut self, evd: EvdHandle, pointer: u64) -> DatResult<()> {
        let e = self.evd(evd)?;
        if !e.flags.contains(EvdFlags::SOFTWARE) {
            return Err(DatError::invalid(EvdPostSe::Event));
        }
        if e.queue().room() == 0 {
            return Err(DatError::of(ErrorType::QueueFull));
        }
        self.deliver(evd, EventNumber::Software, EventData::Software { pointer }, true);
        Ok(())
    }

    /// dat_evd_dequeue(3DAT): the oldest event, or `DAT_QUEUE_EMPTY`.
    ///
    /// A dequeue that finds nothing looks at the IA's connection events
    /// when one waits, where the transport can tell
    /// ([`Backend::cm_waiting`]), and otherwise at most once per
    /// [`CM_LOOK_US`]: a peer's disconnect is what flushes the EP's posted
    /// DTOs, and a consumer whose data thread only dequeues its DTO EVD
    /// must still see them complete. A dequeue that returns an event
    /// never looks.
    ///
    /// Inlined into its callers (the C ABI's entry point among them), as
    /// the routing of a completion is into it: the direct path of a DTO
    /// EVD then runs without a call or an event copied through memory.
    #[inline]
    pub fn evd_dequeue(&mut self, evd: EvdHandle) -> DatResult<Event> {
        match self.lane_dequeue(evd) {
            Ok(event) => Ok(event),
            Err(Passed::Empty) => Err(DatError::of(ErrorType::QueueEmpty)),
            Err(Passed::Ordinary) => self.evd_dequeue_ordinary(evd),
        }
    }

    /// dat_evd_dequeue(3DAT) without its lane: every rule of the page, and
    /// the exact error, for any caller. One that has just tried the lane
    /// itself ([`Provider::lane_dequeue`]) and been refused goes on here;
    /// so does one that keeps the lane inlined into its own hot path.
    pub fn evd_dequeue_ordinary(&mut self, evd: EvdHandle) -> DatResult<Event> {
        self.dequeue(evd, true)
    }

    /// The ordinary dequeue; an EVD that counts, when `count`, goes
    /// through [`Provider::dequeue_counted`].
    #[inline(always)]
    fn dequeue(&mut self, evd: EvdHandle, count: bool) -> DatResult<Event> {
        let Provider { evds, eps, backend, .. } = self;
        let e = evds.get_mut(evd.0).ok_or(DatError::invalid_handle(Subtype::NoSubtype))?;
        // "There is already a waiter on the EVD": DAT_INVALID_STATE.
        if e.waiter() {
            return Err(DatError::invalid_state(Subtype::InvalidStateEvdWaiter));
        }
        let ia = e.ia;
        // An EVD that only completions feed, with nothing queued and no CNO
        // to notify, takes the next completion straight from its CQ: the
        // event goes to the caller without passing through the queue. Its
        // `direct` byte says so, except that an EVD that counts has it
        // clear: its dequeue comes back here through `dequeue_counted`
        // (`count` false), which asks the EVD's rule itself.
        let direct = if count { e.direct() } else { e.takes_direct() };
        if e.queue().is_empty() && direct {
            let Some(cq) = e.cq_mut() else { return Err(DatError::of(ErrorType::QueueEmpty)) };
            // On the stack, not in the provider: the completion then stays
            // in registers on its way to the event.
            let mut c = Completion::EMPTY;
            if backend.cq_poll(cq, &mut EpQps(eps), core::slice::from_mut(&mut c)) == 0 {
                if !self.cm_look_due(ia) {
                    return Err(DatError::of(ErrorType::QueueEmpty));
                }
                self.pump_cm(ia);
            } else {
                if let Some(event) = self.complete_to(&c, evd) {
                    return Ok(event);
                }
            }
        } else if count && e.counting() {
            return self.dequeue_counted(evd);
        }
        self.fill(ia, evd, 1, false);
        if let Some(event) = self.pop(evd) {
            return Ok(event);
        }
        if self.cm_look_due(ia) {
            self.pump_cm(ia);
            self.pump_cq(evd);
        }
        self.pop(evd).ok_or(DatError::of(ErrorType::QueueEmpty))
    }

    /// The ordinary dequeue of an EVD that counts: `DCNT_EVD_DEQUEUE`,
    /// then `_FOUND` or `_NOT_FOUND`; one that found the queue empty and
    /// so polled the CQ is `_POLL` too, and `_POLL_FOUND` if that gave an
    /// event.
    #[cold]
    #[inline(never)]
    fn dequeue_counted(&mut self, evd: EvdHandle) -> DatResult<Event> {
        let polls = self.evds.get(evd.0).is_some_and(|e| e.queue().is_empty() && e.cq().is_some());
        let r = self.dequeue(evd, false);
        if let Some(counts) = self.evd_counts.of(evd.0) {
            let found = r.is_ok();
            let mut bump = |c: counts::evd::Counter| counts.bump(c as usize);
            bump(counts::evd::Counter::DEQUEUE);
            bump(if found { counts::evd::Counter::DEQUEUE_FOUND } else { counts::evd::Counter::DEQUEUE_NOT_FOUND });
            if polls {
                bump(counts::evd::Counter::DEQUEUE_POLL);
                if found {
                    bump(counts::evd::Counter::DEQUEUE_POLL_FOUND);
                }
            }
        }
        r
    }

    fn pop(&mut self, evd: EvdHandle) -> Option<Event> {
        let Provider { evds, events, .. } = self;
        let e = evds.get_mut(evd.0)?;
        e.take(events)
    }

    /// Whether a dequeue that found nothing is to look at `ia`'s connection
    /// events now: whether one waits, where the transport can tell
    /// ([`Backend::cm_waiting`]); else whether a look is due, and if so,
    /// the next is due [`CM_LOOK_US`] later.
    fn cm_look_due(&mut self, ia: IaHandle) -> bool {
        let Provider { ias, backend, .. } = self;
        let Some(i) = ias.get_mut(ia.0) else { return false };
        if let Some(waiting) = backend.cm_waiting(&i.dev) {
            return waiting;
        }
        let now = backend.coarse_now_us();
        if !i.cm_look_is_due(now) {
            return false;
        }
        i.cm_look_us = now.saturating_add(CM_LOOK_US);
        true
    }

    /// Start a `dat_evd_wait`: check its arguments and take the EVD's one
    /// waiter place. Drive it with [`Provider::evd_wait_poll`]; a
    /// multithreaded caller blocks between polls without holding the
    /// provider.
    pub fn evd_wait_begin(&mut self, evd: EvdHandle, timeout_us: u32, threshold: u32) -> DatResult<EvdWait> {
        let e = self.evd(evd)?;
        if !e.waitable() {
            return Err(DatError::invalid_state(Subtype::InvalidStateEvdUnwaitable));
        }
        if e.waiter() {
            return Err(DatError::invalid_state(Subtype::InvalidStateEvdWaiter));
        }
        // "If the value of the threshold is larger than the Event Dispatcher
        // queue length ... If a non-positive value is specified ...
        // DAT_INVALID_PARAMETER."
        if threshold == 0 || threshold > e.queue().capacity() {
            return Err(DatError::invalid(DatEvdWait::Threshold));
        }
        // "... configured for a Consumer-controlled event Notification ...
        // the threshold value must be 1 ... DAT_INVALID_STATE."
        // Each stream answers for itself: one unsignalled or solicited-wait
        // stream among threshold ones is enough.
        if threshold != 1 && e.dto().consumer_controlled() {
            return Err(DatError::invalid_state(Subtype::InvalidStateEvdConfigThreshold));
        }
        let deadline_us =
            (timeout_us != TIMEOUT_INFINITE).then(|| self.backend.now_us().saturating_add(u64::from(timeout_us)));
        if let Ok(e) = self.evd_mut(evd) {
            e.set_waiter(true);
        }
        self.count_evd(evd, counts::evd::Counter::WAIT);
        Ok(EvdWait { evd, threshold, deadline_us })
    }

    /// One step of a wait begun with [`Provider::evd_wait_begin`]. Every
    /// outcome but `Pending` ends the wait.
    pub fn evd_wait_poll(&mut self, wait: &EvdWait) -> DatResult<WaitStep> {
        // "DAT_ABORT: The operation was aborted because IA was closed or EVD
        // was destroyed."
        let e = self.evd(wait.evd).map_err(|_| DatError::of(ErrorType::Abort))?;
        if !e.waitable() {
            self.evd_wait_end(wait);
            return Err(DatError::invalid_state(Subtype::InvalidStateEvdUnwaitable));
        }
        let ia = e.ia;
        self.fill(ia, wait.evd, wait.threshold, true);
        let now = self.backend.now_us();
        let Provider { evds, events, .. } = self;
        let e = evds.get_mut(wait.evd.0).ok_or(DatError::of(ErrorType::Abort))?;
        if e.queue().len() >= wait.threshold {
            let event = e.take(events).ok_or(DatError::of(ErrorType::InternalError))?;
            e.set_waiter(false);
            return Ok(WaitStep::Ready { event, nmore: e.queue().len() });
        }
        match wait.deadline_us {
            Some(deadline) if now >= deadline => {
                e.set_waiter(false);
                Ok(WaitStep::TimedOut { nmore: e.queue().len() })
            }
            deadline => Ok(WaitStep::Pending { timeout_us: deadline.map(|d| d - now) }),
        }
    }

    /// Give up a wait's place (a signal interrupted it, say).
    pub fn evd_wait_end(&mut self, wait: &EvdWait) {
        if let Ok(e) = self.evd_mut(wait.evd) {
            e.set_waiter(false);
        }
    }

    /// dat_evd_wait(3DAT), blocking in the backend between polls. Returns
    /// the event and `nmore`; `DAT_TIMEOUT_EXPIRED` when the timeout passes
    /// below the threshold ([`Provider::evd_count`] gives `nmore` then).
    pub fn evd_wait(&mut self, evd: EvdHandle, timeout_us: u32, threshold: u32) -> DatResult<(Event, u32)> {
        let wait = self.evd_wait_begin(evd, timeout_us, threshold)?;
        loop {
            match self.evd_wait_poll(&wait)? {
                WaitStep::Ready { event, nmore } => return Ok((event, nmore)),
                WaitStep::TimedOut { .. } => return Err(DatError::of(ErrorType::TimeoutExpired)),
                WaitStep::Pending { mut timeout_us } => {
                    let e = self.evd(evd)?;
                    let ia = e.ia;
                    if e.fed_from_afar() {
                        timeout_us = Some(timeout_us.map_or(FOREIGN_SLICE_US, |t| t.min(FOREIGN_SLICE_US)));
                    }
                    let Provider { ias, evds, backend, .. } = self;
                    let Some(dev) = ias.get_mut(ia.0).map(|i| &mut i.dev) else {
                        return Err(DatError::of(ErrorType::Abort));
                    };
                    let woke = backend.block(dev, &mut EvdCqs::all(evds), timeout_us);
                    self.count_evd(evd, counts::evd::Counter::WAIT_BLOCKED);
                    match woke {
                        Wake::Interrupted => {
                            self.evd_wait_end(&wait);
                            return Err(DatError::of(ErrorType::InterruptedCall));
                        }
                        Wake::Activity => self.count_evd(evd, counts::evd::Counter::WAIT_NOTIFY),
                        Wake::Timeout => {}
                    }
                }
            }
        }
    }

    /// Pull from the backend only when `evd` holds fewer than `want`
    /// events. What is queued precedes anything the transport still holds
    /// for the same stream, so a queue that can serve the caller needs no
    /// poll: the events a batched CQ poll brought in are dequeued at the
    /// cost of a pop.
    ///
    /// Connection events are pulled first for an EVD they feed. An EVD fed
    /// only by DTO and bind completions pulls them only when a wait would
    /// otherwise block: asking the transport for connection events can
    /// cost a system call, which a completion found in the CQ never should.
    fn fill(&mut self, ia: IaHandle, evd: EvdHandle, want: u32, waiting: bool) {
        let Some(e) = self.evds.get(evd.0) else { return };
        if e.queue().len() >= want {
            return;
        }
        let cm_fed = e.flags.intersects(EvdFlags::CONNECTION | EvdFlags::CR | EvdFlags::ASYNC);
        if e.fed_from_afar() {
            let mut at = 0;
            while let Some(other) = self.ias.find_from(at, |_| true) {
                at = other.index() + 1;
                self.pump_cm(IaHandle(other));
            }
        } else if cm_fed {
            self.pump_cm(ia);
        }
        self.pump_cq(evd);
        if !cm_fed && waiting && self.evds.get(evd.0).is_some_and(|e| e.queue().len() < want) {
            self.pump_cm(ia);
            self.pump_cq(evd);
        }
    }

    /// dat_evd_enable(3DAT).
    pub fn evd_enable(&mut self, evd: EvdHandle) -> DatResult<()> {
        self.evd_mut(evd)?.enable();
        self.cno_catch_up(evd);
        Ok(())
    }

    /// dat_evd_disable(3DAT): arrivals no longer trigger the CNO.
    pub fn evd_disable(&mut self, evd: EvdHandle) -> DatResult<()> {
        self.evd_mut(evd)?.disable();
        Ok(())
    }

    /// dat_evd_set_unwaitable(3DAT): waits fail with `DAT_INVALID_STATE`,
    /// including one already blocked.
    pub fn evd_set_unwaitable(&mut self, evd: EvdHandle) -> DatResult<()> {
        self.evd_mut(evd)?.set_waitable(false);
        Ok(())
    }

    /// dat_evd_clear_unwaitable(3DAT).
    pub fn evd_clear_unwaitable(&mut self, evd: EvdHandle) -> DatResult<()> {
        self.evd_mut(evd)?.set_waitable(true);
        Ok(())
    }

    /// dat_evd_modify_cno(3DAT): tie the EVD to `cno`, or to none.
    pub fn evd_modify_cno(&mut self, evd: EvdHandle, cno: CnoHandle) -> DatResult<()> {
        let ia = self.evd(evd)?.ia;
        if !cno.is_null() && self.cno(cno)?.ia != ia {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleCno));
        }
        let old = self.evd_mut(evd)?.tie(cno);
        if let Ok(c) = self.cno_mut(cno) {
            c.tie();
        }
        self.cno_untie(old);
        self.cno_catch_up(evd);
        Ok(())
    }

    /// `evd` must be a live EVD of `ia` that takes the `stream` events;
    /// otherwise `DAT_INVALID_HANDLE` with subtype `which`.
    pub(crate) fn evd_for(&self, ia: IaHandle, evd: EvdHandle, stream: EvdFlags, which: Subtype) -> DatResult<()> {
        match self.evds.get(evd.0) {
            Some(e) if e.ia == ia && e.flags.contains(stream) => Ok(()),
            _ => Err(DatError::invalid_handle(which)),
        }
    }
}
