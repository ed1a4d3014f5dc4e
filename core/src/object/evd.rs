//! The state of an Event Dispatcher and its own rules; the DAT calls on it are in
//! `crate::call::evd`.

use crate::backend::Backend;
use crate::event::EventQueue;
use crate::handle::{CnoHandle, IaHandle};
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

pub(crate) struct Evd<B: Backend> {
    pub(crate) ia: IaHandle,
    pub(crate) flags: EvdFlags,
    pub(crate) queue: EventQueue,
    pub(crate) cq: Option<B::Cq>,
    /// Written only through [`Evd::tie`], which keeps `direct` current.
    pub(crate) cno: CnoHandle,
    /// [`Evd::takes_direct`], kept for the dequeue's lane: its flags never
    /// change, and its CNO only through [`Evd::tie`].
    pub(crate) direct: bool,
    /// [`Evd::lane_opens`], kept so that the dequeue's lane reads one byte:
    /// every change of `direct`, `waiter` or the queue's emptiness is
    /// followed by [`Evd::refresh_lane`].
    pub(crate) lane: bool,
    /// Holds the EPs it takes DTO completions of have on its lane
    /// ([`Provider::ep_hold_lane`](crate::Provider::ep_hold_lane)).
    pub(crate) lane_holds: u32,
    pub(crate) enabled: bool,
    pub(crate) waitable: bool,
    /// A `dat_evd_wait` holds the EVD's one waiter place; written only
    /// through [`Evd::set_waiter`].
    pub(crate) waiter: bool,
    /// Event streams feeding this EVD (EP streams, service points, an IA's
    /// async stream): `dat_evd_free` is refused while any remains.
    pub(crate) streams: u32,
    /// DTO streams feeding it, by notification mode.
    pub(crate) dto: DtoStreams,
    /// Connection-request and connection streams feeding it.
    pub(crate) other_streams: u32,
    /// Connection streams of EPs on other IAs: while any remains, a fill
    /// pulls connection events from every IA, and a wait blocks in slices
    /// because it sleeps on its own IA's transport only.
    pub(crate) foreign_streams: u32,
    pub(crate) overflowed: bool,
    /// The transport reported the CQ in error (`device_error`): reported
    /// once, however often the transport repeats it (soft-RoCE raises a
    /// CQ error for every completion it loses).
    pub(crate) cq_failed: bool,
    pub(crate) context: u64,
    /// Whether its counters count (`crate::call::counters`). While they do,
    /// `direct` is false, so that the ordinary dequeue, which counts,
    /// serves the EVD.
    pub(crate) counting: bool,
}

impl<B: Backend> Evd<B> {
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
    pub(crate) fn lane_direct(&self) -> bool {
        self.takes_direct() && !self.counting
    }

    /// Whether a dequeue may take its lane: the EVD [takes DTO completions
    /// direct](Evd::takes_direct), no waiter and no EP holds it, and no
    /// event is queued before its CQ's next completion.
    pub(crate) fn lane_opens(&self) -> bool {
        self.direct && !self.waiter && self.lane_holds == 0 && self.queue.is_empty()
    }

    /// Bring `lane` up to date after a change of what it depends on.
    #[inline(always)]
    pub(crate) fn refresh_lane(&mut self) {
        self.lane = self.lane_opens();
    }

    /// Take (`true`) or give up the waiter place.
    pub(crate) fn set_waiter(&mut self, waiter: bool) {
        self.waiter = waiter;
        self.refresh_lane();
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
