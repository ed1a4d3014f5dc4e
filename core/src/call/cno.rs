//! Consumer Notification Object (CNO): dat_cno_create(3DAT),
//! dat_cno_free(3DAT), dat_cno_query(3DAT), dat_cno_modify_agent(3DAT),
//! dat_cno_wait(3DAT), and DAT 2.0's `dat_cno_fd_create` and
//! `dat_cno_trigger`.
//!
//! A CNO can carry a [`Signal`]: a way for the layer above to learn of a
//! trigger without a call, which the C ABI and the Rust API turn into a
//! file descriptor for an event loop. DAT 2.0 gives those two calls only
//! as prototypes in `<dat2/udat.h>` (none of the 73 man pages describes
//! them), so the rules here are udat's:
//! - the signal is raised when the CNO is triggered and no trigger is
//!   pending, and cleared when [`Provider::cno_trigger`] takes the
//!   trigger: one raise per trigger taken, however many events arrive;
//! - an EVD tied to a CNO (at `dat_evd_create` or `dat_evd_modify_cno`)
//!   or enabled while events are queued on it triggers the CNO at once,
//!   so an event loop never sleeps on events it could dequeue;
//! - an EVD tied to another CNO leaves a trigger it already made on the
//!   old one (dat_evd_modify_cno(3DAT): "the Consumer must be prepared to
//!   collect a notification event on the EVD's old CNO as well").

use crate::backend::{Backend, Wake};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{CnoHandle, EvdHandle, IaHandle};
use crate::object::cno::{Cno, ProxyAgent, Signal};
use crate::object::evd::{EvdCqs, TIMEOUT_INFINITE};
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;

/// Rounds of arming and pulling one `dat_cno_trigger` makes at most: a
/// full EVD leaves completions behind, which a transport reports as
/// activity every round.
const ARM_ROUNDS: usize = 4;

/// `DAT_CNO_FIELD_ALL`.
pub const CNO_FIELD_ALL: u32 = 0x4;

/// `DAT_CNO_PARAM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnoParam {
    /// The IA the CNO belongs to.
    pub ia: IaHandle,
    /// The OS wait proxy agent, if one is set (dat_cno_modify_agent(3DAT)).
    pub agent: Option<ProxyAgent>,
}

/// A `dat_cno_wait` in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnoWait {
    cno: CnoHandle,
    deadline_us: Option<u64>,
}

/// One step of a CNO wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CnoStep {
    /// Unblocked: a hint of which EVD notified, or null when the IA or
    /// every tied EVD went away.
    Woken(EvdHandle),
    /// Nothing yet: block at most this long.
    Pending {
        /// Microseconds left; `None`: no limit.
        timeout_us: Option<u64>,
    },
}

signature! {
    /// dat_cno_query(3DAT)'s parameters.
    pub(crate) enum CnoQuery { CnoHandle, CnoParamMask, CnoParam }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_cno_create(3DAT).
    pub fn cno_create(&mut self, ia: IaHandle, agent: Option<ProxyAgent>) -> DatResult<CnoHandle> {
        self.ia(ia)?;
        crate::object::owned::insert(&mut self.ias, &mut self.cnos, Cno::new(ia, agent))
            .map(CnoHandle)
            .map_err(|_| DatError::of(ErrorType::InsufficientResources))
    }

    /// dat_cno_free(3DAT): "A CNO cannot be deleted while it is referenced
    /// by an Event Dispatcher or while a thread is blocked on it."
    pub fn cno_free(&mut self, cno: CnoHandle) -> DatResult<()> {
        if self.cno(cno)?.in_use() {
            return Err(DatError::invalid_state(Subtype::InvalidStateCnoInUse));
        }
        self.cno_destroy(cno);
        Ok(())
    }

    pub(crate) fn cno_destroy(&mut self, cno: CnoHandle) {
        crate::object::owned::remove(&mut self.ias, &mut self.cnos, cno.0);
    }

    /// One EVD less is tied to `cno`.
    pub(crate) fn cno_untie(&mut self, cno: CnoHandle) {
        if let Some(c) = self.cnos.get_mut(cno.0) {
            c.untie();
        }
    }

    /// dat_cno_query(3DAT).
    pub fn cno_query(&self, cno: CnoHandle, mask: u32) -> DatResult<CnoParam> {
        let c = self.cno(cno)?;
        if mask & !0x7 != 0 {
            return Err(DatError::invalid(CnoQuery::CnoParamMask));
        }
        Ok(CnoParam { ia: c.ia, agent: c.agent() })
    }

    /// dat_cno_modify_agent(3DAT): replace the proxy agent, or remove it.
    pub fn cno_modify_agent(&mut self, cno: CnoHandle, agent: Option<ProxyAgent>) -> DatResult<()> {
        self.cno_mut(cno)?.set_agent(agent);
        Ok(())
    }

    /// The proxy-agent call a trigger owes, once (the C ABI makes it).
    pub fn cno_take_agent_call(&mut self, cno: CnoHandle) -> DatResult<Option<(ProxyAgent, EvdHandle)>> {
        Ok(self.cno_mut(cno)?.take_agent_call())
    }

    /// Give `cno` a [`Signal`] (or take it away): the core half of
    /// `dat_cno_fd_create`. A trigger already pending raises it at once.
    pub fn cno_signal(&mut self, cno: CnoHandle, signal: Option<Signal>) -> DatResult<()> {
        self.cno_mut(cno)?.set_signal(signal);
        Ok(())
    }

    /// `dat_cno_trigger`: which EVD triggered `cno`, without blocking.
    /// The transport is pulled for the EVDs tied to the CNO and armed, as
    /// a wait would; the trigger found is taken (the signal cleared) and
    /// its EVD returned. `DAT_QUEUE_EMPTY` when nothing triggered it, as
    /// dat_cno_wait(3DAT) says of a wait that times out; a null EVD when
    /// every EVD tied to it was freed while a trigger was pending.
    pub fn cno_trigger(&mut self, cno: CnoHandle) -> DatResult<EvdHandle> {
        let ia = self.cno(cno)?.ia;
        // Arm, then pull, until the transport reports nothing more: a
        // completion after the last pull raises the transport's
        // notification. Every EVD of the IA is pulled, not only this
        // CNO's: the notifications are the IA's, and one taken here for
        // another CNO's EVD must reach that CNO as its own trigger.
        for _ in 0..ARM_ROUNDS {
            let Provider { ias, evds, backend, .. } = self;
            let Some(i) = ias.get_mut(ia.0) else { break };
            let wake = backend.block(&mut i.dev, &mut EvdCqs::all(evds), Some(0));
            self.pump_cm(ia);
            let mut next = self.evds.first_member(&self.owned(ia).evds);
            while let Some(evd) = next {
                next = self.evds.next_member(evd);
                if self.evds.get(evd).is_some_and(|e| e.cq().is_some()) {
                    self.pump_cq(EvdHandle(evd));
                }
            }
            if wake != Wake::Activity {
                break;
            }
        }
        self.cno_mut(cno)?.take_trigger().ok_or(DatError::of(ErrorType::QueueEmpty))
    }

    /// An EVD just tied to `cno`, or just enabled: events already queued
    /// on it trigger the CNO (see the module documentation).
    pub(crate) fn cno_catch_up(&mut self, evd: EvdHandle) {
        let Some(e) = self.evds.get(evd.0) else { return };
        let cno = e.catch_up();
        self.cno_triggered(cno, evd);
    }

    /// Start a `dat_cno_wait`.
    pub fn cno_wait_begin(&mut self, cno: CnoHandle, timeout_us: u32) -> DatResult<CnoWait> {
        self.cno(cno)?;
        let deadline_us =
            (timeout_us != TIMEOUT_INFINITE).then(|| self.backend.now_us().saturating_add(u64::from(timeout_us)));
        self.cno_mut(cno)?.begin_wait();
        Ok(CnoWait { cno, deadline_us })
    }

    /// One step of a CNO wait. `Woken` and errors end it.
    pub fn cno_wait_poll(&mut self, wait: &CnoWait) -> DatResult<CnoStep> {
        // The IA was closed: the CNO is gone, its waiters see a null EVD.
        let Ok(c) = self.cno(wait.cno) else { return Ok(CnoStep::Woken(EvdHandle::NULL)) };
        let ia = c.ia;
        // A CNO's EVDs are of its IA (dat_evd_create(3DAT)).
        let mut next = self.evds.first_member(&self.owned(ia).evds);
        while let Some(evd) = next {
            next = self.evds.next_member(evd);
            if self.evds.get(evd).is_some_and(|e| e.cno() == wait.cno) {
                self.progress(ia, Some(EvdHandle(evd)));
            }
        }
        let now = self.backend.now_us();
        let c = self.cno_mut(wait.cno)?;
        if let Some(evd) = c.wake() {
            return Ok(CnoStep::Woken(evd));
        }
        match wait.deadline_us {
            // "DAT_QUEUE_EMPTY: The operation timed out without a
            // notification."
            Some(deadline) if now >= deadline => {
                c.time_out();
                Err(DatError::of(ErrorType::QueueEmpty))
            }
            deadline => Ok(CnoStep::Pending { timeout_us: deadline.map(|d| d - now) }),
        }
    }

    /// Give up a wait's place (a signal interrupted it, say).
    pub fn cno_wait_end(&mut self, wait: &CnoWait) {
        if let Ok(c) = self.cno_mut(wait.cno) {
            c.end_wait();
        }
    }

    /// dat_cno_wait(3DAT), blocking in the backend between polls.
    pub fn cno_wait(&mut self, cno: CnoHandle, timeout_us: u32) -> DatResult<EvdHandle> {
        let wait = self.cno_wait_begin(cno, timeout_us)?;
        loop {
            match self.cno_wait_poll(&wait)? {
                CnoStep::Woken(evd) => return Ok(evd),
                CnoStep::Pending { timeout_us } => {
                    let ia = self.cno(cno)?.ia;
                    let Provider { ias, evds, backend, .. } = self;
                    let Some(dev) = ias.get_mut(ia.0).map(|i| &mut i.dev) else {
                        return Ok(EvdHandle::NULL);
                    };
                    if backend.block(dev, &mut EvdCqs::all(evds), timeout_us) == Wake::Interrupted {
                        self.cno_wait_end(&wait);
                        return Err(DatError::of(ErrorType::InterruptedCall));
                    }
                }
            }
        }
    }
}
