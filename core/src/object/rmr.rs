//! The state of a Remote Memory Region and its own rules; the DAT calls on it are in
//! `crate::call::rmr`.

use crate::backend::Backend;
use crate::handle::{EpHandle, IaHandle, LmrHandle, PzHandle};
use crate::types::{LmrTriplet, MemPriv};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Binding {
    /// The Endpoint the bind went through.
    pub(crate) ep: EpHandle,
    pub(crate) lmr: LmrHandle,
    pub(crate) triplet: LmrTriplet,
    pub(crate) privileges: MemPriv,
    pub(crate) rmr_context: u32,
}

pub(crate) struct Rmr<B: Backend> {
    pub(crate) ia: IaHandle,
    pub(crate) pz: PzHandle,
    pub(crate) scope: RmrScope,
    pub(crate) mw: B::Mw,
    pub(crate) binding: Option<Binding>,
    /// The binds posted and not yet completed, for their events' cookies.
    pub(crate) in_flight: InFlight,
    pub(crate) context: u64,
}

/// `DAT_RMR_SCOPE`: what an RMR's binding is tied to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmrScope {
    /// `DAT_RMR_SCOPE_PZ`: any Endpoint of the PZ reaches it
    /// (dat_rmr_create(3DAT)).
    Pz,
    /// `DAT_RMR_SCOPE_EP`: bound to one Endpoint at a time
    /// (dat_rmr_create_for_ep).
    Ep,
}

/// Binds of one RMR in flight at once, over all Endpoints; one more is
/// refused with `DAT_INSUFFICIENT_RESOURCES`.
pub const BINDS_IN_FLIGHT: usize = 8;

/// A bind posted and not yet completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Posted {
    ep: EpHandle,
    cookie: u64,
    /// Whether a successful completion reports it (no
    /// `DAT_COMPLETION_SUPPRESS_FLAG`).
    reported: bool,
}

/// An RMR's binds in flight, oldest first. "The user_cookie is returned to
/// the Consumer in the rmr_bind Completion event for this operation"
/// (dat_rmr_bind(3DAT)), and an RMR may be bound again, through the same
/// Endpoint or another, before an earlier bind completes. One Endpoint's
/// binds complete in the order it posted them, so a completion names the
/// Endpoint and this finds the bind.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    posted: [Option<Posted>; BINDS_IN_FLIGHT],
}

impl InFlight {
    /// Whether one more bind may be posted: fewer than
    /// `BINDS_IN_FLIGHT` are in flight through Endpoints `live` still
    /// holds (a freed Endpoint's binds never complete, and are dropped).
    pub(crate) fn room(&mut self, live: impl Fn(EpHandle) -> bool) -> bool {
        for p in self.posted.iter_mut() {
            if p.is_some_and(|p| !live(p.ep)) {
                *p = None;
            }
        }
        self.compact();
        self.posted.iter().any(Option::is_none)
    }

    /// Record a bind `ep` posted, after [`room`](Self::room) said yes.
    pub(crate) fn record(&mut self, ep: EpHandle, cookie: u64, reported: bool) {
        if let Some(free) = self.posted.iter_mut().find(|p| p.is_none()) {
            *free = Some(Posted { ep, cookie, reported });
        }
    }

    /// The cookie of a bind completion from `ep`. A success completes the
    /// oldest bind of `ep` that reports one, and with it the suppressed
    /// binds of `ep` before it (they completed silently); a failure or a
    /// flush completes the oldest bind of `ep`. A suppressed bind leaves
    /// no trace when it succeeds, so until a later success of `ep` clears
    /// it, a failure of a newer bind on the same RMR and Endpoint is taken
    /// for it and reports its cookie.
    #[cold]
    pub(crate) fn complete(&mut self, ep: EpHandle, success: bool) -> Option<u64> {
        let mut cookie = None;
        for p in self.posted.iter_mut() {
            let Some(posted) = *p else { continue };
            if posted.ep != ep {
                continue;
            }
            *p = None;
            if !success || posted.reported {
                cookie = Some(posted.cookie);
                break;
            }
        }
        self.compact();
        cookie
    }

    /// Close the gaps, keeping the order.
    fn compact(&mut self) {
        let mut to = 0;
        for from in 0..BINDS_IN_FLIGHT {
            if let Some(p) = self.posted[from].take() {
                self.posted[to] = Some(p);
                to += 1;
            }
        }
    }
}
