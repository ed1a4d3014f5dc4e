//! The state of an Event Dispatcher and its own rules; the DAT calls on it are in
//! `crate::call::evd`.
//!
//! Every change of the EVD's state is a method here, named for what
//! happened: an event arrives or is taken, a stream attaches, a lane hold
//! is taken, a waiter comes. Each keeps what the dequeue's lane reads
//! (`direct`, `lane`) current itself. The provider says what happened and
//! acts on the answer (the CNO to trigger, the overflow to report); it
//! never writes the EVD's state.

use core::num::NonZeroU64;

use crate::backend::Cqs;
use crate::event::{Event, EventPool, EventQueue, EventSlot};
use crate::handle::{CnoHandle, EvdHandle, IaHandle, RawHandle};
use crate::slab::{Slab, SlotsOf};
use crate::store::Store;
use crate::types::{CompletionFlags, EvdFlags};

/// `DAT_TIMEOUT_INFINITE`.
pub const TIMEOUT_INFINITE: u32 = u32::MAX;

/// How the DTO streams feeding an EVD notify (`DAT_EVD_STATE_CONFIG_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotifyMode {
    /// Every completion notifies; waiters may use thresholds.
    Threshold,
    /// `DAT_COMPLETION_UNSIGNALLED_FLAG`: the poster decides.
    Unsignalled,
    /// `DAT_COMPLETION_SOLICITED_WAIT_FLAG`: the remote sender decides.
    Solicited,
}

impl NotifyMode {
    pub(crate) fn of(flags: CompletionFlags) -> NotifyMode {
        if flags.contains(CompletionFlags::UNSIGNALLED) {
            NotifyMode::Unsignalled
        } else if flags.contains(CompletionFlags::SOLICITED_WAIT) {
            NotifyMode::Solicited
        } else {
            NotifyMode::Threshold
        }
    }

    /// Whether streams of the two modes may feed one EVD ([`DtoStreams`]).
    pub(crate) fn shares_with(self, other: NotifyMode) -> bool {
        (self == NotifyMode::Solicited) == (other == NotifyMode::Solicited)
    }
}

/// The DTO streams feeding an EVD, counted by how each notifies.
///
/// Threshold and unsignalled streams share an EVD: whether a completion
/// notifies is a property of its own work request on every transport
/// (the send queue's signalling on InfiniBand), so each stream keeps its
/// own flags. A solicited-wait stream needs the CQ armed for solicited
/// completions only, which no other stream's completions could then wake:
/// it shares only with solicited-wait streams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DtoStreams {
    threshold: u32,
    unsignalled: u32,
    solicited: u32,
}

impl DtoStreams {
    fn count_of(&mut self, mode: NotifyMode) -> &mut u32 {
        match mode {
            NotifyMode::Threshold => &mut self.threshold,
            NotifyMode::Unsignalled => &mut self.unsignalled,
            NotifyMode::Solicited => &mut self.solicited,
        }
    }

    pub(crate) fn add(&mut self, mode: NotifyMode) {
        *self.count_of(mode) += 1;
    }

    pub(crate) fn remove(&mut self, mode: NotifyMode) {
        let n = self.count_of(mode);
        *n = n.saturating_sub(1);
    }

    /// Whether a stream of `mode` may join these.
    pub(crate) fn admit(&self, mode: NotifyMode) -> bool {
        [
            (NotifyMode::Threshold, self.threshold),
            (NotifyMode::Unsignalled, self.unsignalled),
            (NotifyMode::Solicited, self.solicited),
        ]
        .into_iter()
        .all(|(m, n)| n == 0 || m.shares_with(mode))
    }

    /// Whether a solicited-wait stream feeds the EVD.
    pub(crate) fn solicited(&self) -> bool {
        self.solicited != 0
    }

    /// Whether the consumer controls notification for some stream
    /// (unsignalled or solicited-wait): dat_evd_wait(3DAT)'s threshold
    /// must then be 1.
    pub(crate) fn consumer_controlled(&self) -> bool {
        self.unsignalled + self.solicited != 0
    }

    /// The configuration `dat_evd_query` reports: solicited-wait if such
    /// streams feed the EVD, else unsignalled if any stream is, else
    /// threshold (also with no stream at all).
    pub(crate) fn config(&self) -> NotifyMode {
        if self.solicited != 0 {
            NotifyMode::Solicited
        } else if self.unsignalled != 0 {
            NotifyMode::Unsignalled
        } else {
            NotifyMode::Threshold
        }
    }
}

/// What became of an event that arrived on an EVD ([`Evd::arrive`]).
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// Queued; the CNO its arrival triggers, if any.
    Queued(Option<CnoHandle>),
    /// The queue was full: the event is lost.
    Overflowed,
}

/// An Event Dispatcher; `C` is its CQ (the backend's), if DTO or bind
/// completions feed it.
pub(crate) struct Evd<C> {
    pub(crate) ia: IaHandle,
    pub(crate) flags: EvdFlags,
    queue: EventQueue,
    /// Set once, by [`Evd::set_cq`], which keeps `lane` current: an open
    /// lane says the EVD has its CQ ([`Evd::lane_cq`]).
    cq: Option<C>,
    /// Changed only through [`Evd::tie`], which keeps `direct` current.
    cno: CnoHandle,
    /// [`Evd::takes_direct`], kept for the dequeue's lane: its flags never
    /// change, and its CNO only through [`Evd::tie`].
    direct: bool,
    /// [`Evd::lane_opens`], kept so that the dequeue's lane reads one byte:
    /// every method that changes `direct`, `waiter`, `lane_holds` or the
    /// queue's emptiness ends with [`Evd::refresh_lane`].
    lane: bool,
    /// Holds the EPs it takes DTO completions of have on its lane
    /// ([`Provider::ep_hold_lane`](crate::Provider::ep_hold_lane)).
    lane_holds: u32,
    enabled: bool,
    waitable: bool,
    /// A `dat_evd_wait` holds the EVD's one waiter place.
    waiter: bool,
    /// Event streams feeding this EVD (EP streams, service points, an IA's
    /// async stream): `dat_evd_free` is refused while any remains.
    streams: u32,
    /// DTO streams feeding it, by notification mode.
    dto: DtoStreams,
    /// Connection-request and connection streams feeding it.
    other_streams: u32,
    /// Connection streams of EPs on other IAs: while any remains, a fill
    /// pulls connection events from every IA, and a wait blocks in slices
    /// because it sleeps on its own IA's transport only.
    foreign_streams: u32,
    /// The transport reported the CQ in error (`device_error`): reported
    /// once, however often the transport repeats it (soft-RoCE raises a
    /// CQ error for every completion it loses).
    cq_failed: bool,
    pub(crate) context: u64,
    /// Whether its counters count (`crate::call::counters`). While they do,
    /// `direct` is false, so that the ordinary dequeue, which counts,
    /// serves the EVD.
    counting: bool,
    /// Its own handle, set once it has its slot
    /// ([`Provider::evd_create`](crate::Provider::evd_create)): a dequeue
    /// compares a completion's stream with it, read where it compares,
    /// rather than keep the slot's generation and index in registers
    /// across the CQ's look.
    pub(crate) handle: EvdHandle,
    /// What the layer above calls this EVD (the C ABI: its handle), kept
    /// so that a dequeue's lane knows the EVD it is handed by one compare
    /// ([`Provider::evd_name`](crate::Provider::evd_name)); 0 when none
    /// was given. Set through [`Evd::set_name`].
    name: u64,
    /// `name` while the lane is open, 0 while it is shut: a lane handed the
    /// EVD's name knows the EVD and its lane open by one compare
    /// ([`Evd::lane_cq_named`]). Kept by [`Evd::refresh_lane`].
    lane_name: u64,
}

impl<C> Evd<C> {
    /// A new EVD of `ia` with the event queue `queue`, enabled and
    /// waitable, tied to `cno` (or to none), with no CQ yet and nothing
    /// feeding it.
    pub(crate) fn new(ia: IaHandle, flags: EvdFlags, queue: EventQueue, cno: CnoHandle) -> Evd<C> {
        let mut evd = Evd {
            ia,
            flags,
            queue,
            cq: None,
            cno,
            direct: false,
            lane: false,
            lane_holds: 0,
            enabled: true,
            waitable: true,
            waiter: false,
            streams: 0,
            dto: DtoStreams::default(),
            other_streams: 0,
            foreign_streams: 0,
            cq_failed: false,
            context: 0,
            counting: false,
            handle: EvdHandle::NULL,
            name: 0,
            lane_name: 0,
        };
        evd.tie(cno);
        evd
    }

    /// Its event queue, to read.
    pub(crate) fn queue(&self) -> &EventQueue {
        &self.queue
    }

    /// The CNO it is tied to (null: none).
    pub(crate) fn cno(&self) -> CnoHandle {
        self.cno
    }

    /// Whether the dequeue's lane is open ([`Evd::lane_opens`]).
    #[inline(always)]
    pub(crate) fn lane(&self) -> bool {
        debug_assert_eq!(self.direct, self.lane_direct());
        debug_assert_eq!(self.lane, self.lane_opens());
        self.lane
    }

    /// The EVD's handle and its CQ, if the dequeue's lane is open
    /// ([`Evd::lane`]): an open lane holds a CQ, so this tests the lane's
    /// byte alone.
    #[inline(always)]
    pub(crate) fn lane_cq(&mut self) -> Option<(&EvdHandle, &mut C)> {
        self.lane_cq_named(None, |_| true)
    }

    /// [`Evd::lane_cq`] for a lane handed `name` and told to take the EVD
    /// only if `judged` accepts it: where `name` is the EVD's name and its
    /// lane is open, one compare (`lane_name`), with no judgment; else the
    /// judgment, then the lane's byte.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub(crate) fn lane_cq_named(
        &mut self,
        name: Option<NonZeroU64>,
        judged: impl FnOnce(&Self) -> bool,
    ) -> Option<(&EvdHandle, &mut C)> {
        let named = name.is_some_and(|name| name.get() == self.lane_name);
        debug_assert!(!named || (self.lane() && self.name == self.lane_name));
        if !(named || judged(self) && self.lane()) {
            return None;
        }
        // SAFETY: the lane is open: `lane`, or `lane_name` equal to a name
        // that is not 0, which it is only while `lane` holds
        // (`refresh_lane`). `lane` is `lane_opens()` as last refreshed,
        // which is false without a CQ; `cq` is set only by `set_cq`, which
        // refreshes `lane`, and never taken while the EVD lives.
        Some((&self.handle, unsafe { self.cq.as_mut().unwrap_unchecked() }))
    }

    /// What the layer above calls it ([`Provider::evd_name`](crate::Provider::evd_name)).
    #[inline(always)]
    pub(crate) fn name(&self) -> u64 {
        self.name
    }

    /// Name it `name`.
    pub(crate) fn set_name(&mut self, name: u64) {
        self.name = name;
        self.refresh_lane();
    }

    /// The CQ that DTO or bind completions feed it through, if any.
    #[inline(always)]
    pub(crate) fn cq(&self) -> Option<&C> {
        self.cq.as_ref()
    }

    /// [`Evd::cq`], mutably.
    #[inline(always)]
    pub(crate) fn cq_mut(&mut self) -> Option<&mut C> {
        self.cq.as_mut()
    }

    /// The EVD's CQ, made once it has its slot.
    pub(crate) fn set_cq(&mut self, cq: C) {
        debug_assert!(self.cq.is_none());
        self.cq = Some(cq);
        self.refresh_lane();
    }

    /// The CQ, as the EVD goes away.
    pub(crate) fn into_cq(self) -> Option<C> {
        self.cq
    }

    /// Whether the ordinary dequeue may take its CQ's next completion
    /// straight to the caller: [`Evd::takes_direct`], unless the EVD counts.
    #[inline(always)]
    pub(crate) fn direct(&self) -> bool {
        self.direct
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    pub(crate) fn waitable(&self) -> bool {
        self.waitable
    }

    /// Whether a `dat_evd_wait` holds the waiter place.
    pub(crate) fn waiter(&self) -> bool {
        self.waiter
    }

    pub(crate) fn counting(&self) -> bool {
        self.counting
    }

    /// Whether any event stream feeds it.
    pub(crate) fn fed(&self) -> bool {
        self.streams != 0
    }

    /// The DTO streams feeding it.
    pub(crate) fn dto(&self) -> DtoStreams {
        self.dto
    }

    /// Whether a connection-request or connection stream feeds it.
    pub(crate) fn fed_by_cm(&self) -> bool {
        self.other_streams != 0
    }

    /// Whether a connection stream of an EP of another IA feeds it.
    pub(crate) fn fed_from_afar(&self) -> bool {
        self.foreign_streams != 0
    }

    /// Whether a dequeue may hand the next completion of its CQ straight to
    /// the caller: nothing but DTO and bind completions feed it, and no CNO
    /// waits to hear of an event's arrival. (Connection streams, a foreign
    /// IA's among them, feed only an EVD with the connection flag.)
    pub(crate) fn takes_direct(&self) -> bool {
        !self.flags.intersects(EvdFlags::CONNECTION | EvdFlags::CR | EvdFlags::ASYNC | EvdFlags::SOFTWARE)
            && self.cno.is_null()
    }

    /// What `direct` is kept at: [`Evd::takes_direct`], unless the EVD
    /// counts.
    fn lane_direct(&self) -> bool {
        self.takes_direct() && !self.counting
    }

    /// Whether a dequeue may take its lane: the EVD [takes DTO completions
    /// direct](Evd::takes_direct), no waiter and no EP holds it, and no
    /// event is queued before its CQ's next completion.
    fn lane_opens(&self) -> bool {
        self.direct && !self.waiter && self.lane_holds == 0 && self.queue.is_empty() && self.cq.is_some()
    }

    /// Bring `lane` up to date after a change of what it depends on.
    #[inline(always)]
    fn refresh_lane(&mut self) {
        self.lane = self.lane_opens();
        self.lane_name = if self.lane { self.name } else { 0 };
    }

    /// The CNO an event queued now triggers, if any.
    fn cno_to_trigger(&self) -> Option<CnoHandle> {
        // dat_evd_wait(3DAT): "The CNO associated with the evd_handle() is
        // not triggered upon event arrival if there is a Consumer blocked
        // on dat_evd_wait() on this Event Dispatcher." dat_cno_wait(3DAT):
        // "An Event Dispatcher that is disabled or in the "Waited" state
        // does not deliver notifications."
        (self.enabled && !self.waiter && !self.cno.is_null()).then_some(self.cno)
    }

    /// `event` arrives: queued at the tail, unless the queue is full.
    /// `notifies` is false for an event whose arrival must not wake anyone
    /// (a completion its poster asked not to be notified of).
    pub(crate) fn arrive<S: Store<EventSlot>>(
        &mut self,
        pool: &mut EventPool<S>,
        event: Event,
        notifies: bool,
    ) -> Arrival {
        if pool.push(&mut self.queue, event).is_err() {
            return Arrival::Overflowed;
        }
        self.refresh_lane();
        Arrival::Queued(if notifies { self.cno_to_trigger() } else { None })
    }

    /// The oldest queued event is taken, if there is one.
    pub(crate) fn take<S: Store<EventSlot>>(&mut self, pool: &mut EventPool<S>) -> Option<Event> {
        let event = pool.pop(&mut self.queue);
        self.refresh_lane();
        event
    }

    /// The EVD goes away: its queued events are dropped and its queue's
    /// reservation given back.
    pub(crate) fn close<S: Store<EventSlot>>(&mut self, pool: &mut EventPool<S>) {
        pool.close(&mut self.queue);
        self.refresh_lane();
    }

    /// The queue's reservation becomes `capacity` events, not below those
    /// queued; `false` (nothing changed) when the pool cannot.
    pub(crate) fn resize<S: Store<EventSlot>>(&mut self, pool: &mut EventPool<S>, capacity: u32) -> bool {
        pool.resize(&mut self.queue, capacity)
    }

    /// The CNO its queued events trigger now that it was tied to its CNO or
    /// enabled, if any (see `crate::call::cno`).
    pub(crate) fn catch_up(&self) -> Option<CnoHandle> {
        self.cno_to_trigger().filter(|_| !self.queue.is_empty())
    }

    /// dat_evd_enable(3DAT): arrivals may trigger the CNO again. "If the
    /// Event Dispatcher is already enabled, this operation is no-op."
    pub(crate) fn enable(&mut self) {
        self.enabled = true;
    }

    /// dat_evd_disable(3DAT): arrivals no longer trigger the CNO.
    pub(crate) fn disable(&mut self) {
        self.enabled = false;
    }

    /// dat_evd_clear_unwaitable(3DAT) (`true`) or
    /// dat_evd_set_unwaitable(3DAT) (`false`).
    pub(crate) fn set_waitable(&mut self, waitable: bool) {
        self.waitable = waitable;
    }

    /// Take (`true`) or give up the waiter place.
    pub(crate) fn set_waiter(&mut self, waiter: bool) {
        self.waiter = waiter;
        self.refresh_lane();
    }

    /// `n` more holds of EPs shut its lane.
    pub(crate) fn hold_lane(&mut self, n: u32) {
        self.lane_holds += n;
        self.refresh_lane();
    }

    /// `n` holds of EPs end.
    pub(crate) fn release_lane(&mut self, n: u32) {
        self.lane_holds = self.lane_holds.saturating_sub(n);
        self.refresh_lane();
    }

    /// A DTO stream of `mode` starts feeding it, with the `holds` its EP
    /// has on the lane of the stream's EVD.
    pub(crate) fn attach_dto(&mut self, mode: NotifyMode, holds: u32) {
        self.streams += 1;
        self.dto.add(mode);
        self.hold_lane(holds);
    }

    /// A DTO stream of `mode` stops feeding it, and its `holds` go.
    pub(crate) fn detach_dto(&mut self, mode: NotifyMode, holds: u32) {
        self.streams = self.streams.saturating_sub(1);
        self.dto.remove(mode);
        self.release_lane(holds);
    }

    /// A connection-request or connection stream starts feeding it, of an
    /// EP of another IA if `foreign`. Only a connection or CR EVD takes
    /// such a stream, and it never takes the direct path: `direct` stays.
    pub(crate) fn attach_cm(&mut self, foreign: bool) {
        self.streams += 1;
        self.other_streams += 1;
        if foreign {
            self.foreign_streams += 1;
        }
    }

    /// A stream of [`Evd::attach_cm`] stops feeding it.
    pub(crate) fn detach_cm(&mut self, foreign: bool) {
        self.streams = self.streams.saturating_sub(1);
        self.other_streams = self.other_streams.saturating_sub(1);
        if foreign {
            self.foreign_streams = self.foreign_streams.saturating_sub(1);
        }
    }

    /// An IA's async stream starts feeding it.
    pub(crate) fn attach_async(&mut self) {
        self.streams += 1;
    }

    /// An IA's async stream stops feeding it.
    pub(crate) fn detach_async(&mut self) {
        self.streams = self.streams.saturating_sub(1);
    }

    /// The transport reported its CQ in error: `true` the first time only.
    pub(crate) fn cq_fails(&mut self) -> bool {
        !core::mem::replace(&mut self.cq_failed, true)
    }

    /// Tie the EVD to `cno` (or to none); the CNO it was tied to.
    pub(crate) fn tie(&mut self, cno: CnoHandle) -> CnoHandle {
        let old = core::mem::replace(&mut self.cno, cno);
        self.direct = self.lane_direct();
        self.refresh_lane();
        old
    }

    /// Start or stop counting; `direct` follows.
    pub(crate) fn set_counting(&mut self, on: bool) {
        self.counting = on;
        self.direct = self.lane_direct();
        self.refresh_lane();
    }
}

/// The CQs of a slab's EVDs ([`Cqs`]): every one, or only those of two
/// EVDs (an EP's streams, which may be one EVD).
pub(crate) struct EvdCqs<'a, C, S: SlotsOf<Evd<C>>> {
    evds: &'a mut Slab<Evd<C>, S>,
    only: Option<[EvdHandle; 2]>,
}

impl<'a, C, S: SlotsOf<Evd<C>>> EvdCqs<'a, C, S> {
    /// Every CQ of `evds`.
    pub(crate) fn all(evds: &'a mut Slab<Evd<C>, S>) -> Self {
        EvdCqs { evds, only: None }
    }

    /// The CQs of `of` that are still there.
    pub(crate) fn of(evds: &'a mut Slab<Evd<C>, S>, of: [EvdHandle; 2]) -> Self {
        EvdCqs { evds, only: Some(of) }
    }
}

impl<C, S: SlotsOf<Evd<C>>> Cqs<C> for EvdCqs<'_, C, S> {
    fn each(&mut self, mut f: impl FnMut(&mut C)) {
        let evds = &mut *self.evds;
        let mut visit = |evds: &mut Slab<Evd<C>, S>, h: RawHandle| {
            if let Some(cq) = evds.get_mut(h).and_then(|e| e.cq_mut()) {
                f(cq);
            }
        };
        match self.only {
            Some([a, b]) => {
                visit(evds, a.0);
                if b != a {
                    visit(evds, b.0);
                }
            }
            None => {
                let mut from = 0;
                while let Some(h) = evds.find_from(from, |e| e.cq().is_some()) {
                    from = h.index() + 1;
                    visit(evds, h);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventData, EventNumber};
    use crate::handle::{EvdHandle, RawHandle};

    const CNO: CnoHandle = CnoHandle::from_raw(RawHandle::from_bits(1 << 32 | 3));

    fn sw(pointer: u64) -> Event {
        Event { number: EventNumber::Software, evd: EvdHandle::NULL, data: EventData::Software { pointer } }
    }

    fn pool() -> EventPool<[EventSlot; 8]> {
        EventPool::new([EventSlot::VACANT; 8])
    }

    /// An EVD of `flags` with room for `qlen` events, tied to `cno`.
    fn evd(pool: &mut EventPool<[EventSlot; 8]>, flags: EvdFlags, qlen: u32, cno: CnoHandle) -> Evd<()> {
        Evd::new(IaHandle::NULL, flags, pool.open(qlen).unwrap(), cno)
    }

    #[test]
    fn an_arrival_triggers_the_cno_only_while_enabled_and_no_one_waits() {
        let mut pool = pool();
        let mut e = evd(&mut pool, EvdFlags::SOFTWARE, 8, CNO);
        assert_eq!(e.arrive(&mut pool, sw(1), true), Arrival::Queued(Some(CNO)));
        // A completion its poster asked not to be notified of.
        assert_eq!(e.arrive(&mut pool, sw(2), false), Arrival::Queued(None));
        e.disable();
        assert_eq!(e.arrive(&mut pool, sw(3), true), Arrival::Queued(None));
        e.enable();
        e.set_waiter(true);
        assert_eq!(e.arrive(&mut pool, sw(4), true), Arrival::Queued(None));
        e.set_waiter(false);
        assert_eq!(e.arrive(&mut pool, sw(5), true), Arrival::Queued(Some(CNO)));
        assert_eq!(e.queue().len(), 5);
        // Untied, nothing is triggered.
        assert_eq!(e.tie(CnoHandle::NULL), CNO);
        assert_eq!(e.arrive(&mut pool, sw(6), true), Arrival::Queued(None));
        for pointer in 1..=6 {
            assert_eq!(e.take(&mut pool), Some(sw(pointer)));
        }
        assert_eq!(e.take(&mut pool), None);
    }

    #[test]
    fn queued_events_trigger_the_cno_once_the_evd_is_enabled_again() {
        let mut pool = pool();
        let mut e = evd(&mut pool, EvdFlags::SOFTWARE, 4, CNO);
        assert_eq!(e.catch_up(), None);
        e.disable();
        assert_eq!(e.arrive(&mut pool, sw(1), true), Arrival::Queued(None));
        assert_eq!(e.catch_up(), None);
        e.enable();
        assert_eq!(e.catch_up(), Some(CNO));
        e.set_waiter(true);
        assert_eq!(e.catch_up(), None);
    }

    #[test]
    fn a_full_queue_overflows_and_loses_the_event() {
        let mut pool = pool();
        let mut e = evd(&mut pool, EvdFlags::SOFTWARE, 2, CNO);
        assert_eq!(e.arrive(&mut pool, sw(1), true), Arrival::Queued(Some(CNO)));
        assert_eq!(e.arrive(&mut pool, sw(2), true), Arrival::Queued(Some(CNO)));
        assert_eq!(e.arrive(&mut pool, sw(3), true), Arrival::Overflowed);
        assert_eq!(e.queue().len(), 2);
        assert_eq!(e.take(&mut pool), Some(sw(1)));
        assert_eq!(e.arrive(&mut pool, sw(4), true), Arrival::Queued(Some(CNO)));
        assert_eq!(e.take(&mut pool), Some(sw(2)));
        assert_eq!(e.take(&mut pool), Some(sw(4)));
        assert_eq!(e.take(&mut pool), None);
    }

    #[test]
    fn a_waiter_a_lane_hold_or_a_queued_event_closes_the_lane_until_it_ends() {
        let mut pool = pool();
        let mut e = evd(&mut pool, EvdFlags::DTO, 4, CnoHandle::NULL);
        // No lane before the CQ: the lane's CQ is taken without a test.
        assert!(e.direct() && !e.lane() && e.lane_cq().is_none());
        e.set_cq(());
        assert!(e.lane() && e.lane_cq().is_some());
        e.set_waiter(true);
        assert!(!e.lane());
        e.set_waiter(false);
        assert!(e.lane());
        e.hold_lane(2);
        assert!(!e.lane());
        e.release_lane(1);
        assert!(!e.lane());
        e.release_lane(1);
        assert!(e.lane());
        // A stream brings its EP's holds, and takes them away with it.
        e.attach_dto(NotifyMode::Threshold, 1);
        assert!(e.fed() && !e.lane());
        e.detach_dto(NotifyMode::Threshold, 1);
        assert!(!e.fed() && e.lane());
        // An event queued comes before the CQ's next completion.
        assert_eq!(e.arrive(&mut pool, sw(1), true), Arrival::Queued(None));
        assert!(!e.lane());
        assert_eq!(e.take(&mut pool), Some(sw(1)));
        assert!(e.lane());
    }

    #[test]
    fn counting_or_a_cno_closes_direct_and_the_lane() {
        let mut pool = pool();
        let mut e = evd(&mut pool, EvdFlags::DTO, 4, CnoHandle::NULL);
        e.set_cq(());
        e.set_counting(true);
        assert!(!e.direct() && !e.lane());
        // The EVD's own rule still holds: the counted dequeue asks it.
        assert!(e.takes_direct());
        e.set_counting(false);
        assert!(e.direct() && e.lane());
        assert_eq!(e.tie(CNO), CnoHandle::NULL);
        assert!(!e.takes_direct() && !e.direct() && !e.lane());
        assert_eq!(e.tie(CnoHandle::NULL), CNO);
        assert!(e.direct() && e.lane());
        // An EVD that connection events feed never takes the direct path.
        let c = evd(&mut pool, EvdFlags::CONNECTION, 2, CnoHandle::NULL);
        assert!(!c.direct() && !c.lane());
    }

    #[test]
    fn a_foreign_connection_stream_is_counted_until_it_detaches() {
        let mut pool = pool();
        let mut e = evd(&mut pool, EvdFlags::CONNECTION, 2, CnoHandle::NULL);
        e.attach_cm(false);
        assert!(e.fed() && e.fed_by_cm() && !e.fed_from_afar());
        e.attach_cm(true);
        assert!(e.fed_from_afar());
        e.detach_cm(true);
        assert!(!e.fed_from_afar() && e.fed_by_cm());
        e.detach_cm(false);
        assert!(!e.fed() && !e.fed_by_cm());
    }

    #[test]
    fn a_cq_fails_once() {
        let mut pool = pool();
        let mut e = evd(&mut pool, EvdFlags::DTO, 2, CnoHandle::NULL);
        assert!(e.cq_fails());
        assert!(!e.cq_fails());
    }
}
