//! The state of a Consumer Notification Object and its own rules; the DAT calls on it are in
//! `crate::call::cno`.
//!
//! Every change of the CNO's state is a method here, named for what
//! happened (an EVD is tied or untied, an arrival triggers it, a waiter
//! begins, wakes or gives up); the provider never writes its fields.

use crate::handle::{EvdHandle, IaHandle};

/// `DAT_OS_WAIT_PROXY_AGENT`: a function and its instance data, opaque to
/// the core. The C ABI calls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxyAgent {
    /// The argument the function is called with.
    pub instance_data: u64,
    /// The function's address.
    pub function: u64,
}

/// How a CNO tells the layer above that it was triggered, without a call:
/// `raise(arg)` when a trigger arrives and none is pending, `clear(arg)`
/// when [`Provider::cno_trigger`](crate::Provider::cno_trigger) takes it. The C ABI and the Rust API
/// make these an eventfd's write and read.
#[derive(Clone, Copy, Debug)]
pub struct Signal {
    /// Called when a trigger arrives and none is pending.
    pub raise: fn(u64),
    /// Called when the pending trigger is taken.
    pub clear: fn(u64),
    /// The argument of both.
    pub arg: u64,
}

pub(crate) struct Cno {
    pub(crate) ia: IaHandle,
    agent: Option<ProxyAgent>,
    /// A trigger the agent has not been told of yet.
    agent_call: Option<(ProxyAgent, EvdHandle)>,
    /// EVDs tied to this CNO.
    evd_refs: u32,
    waiters: u32,
    /// The EVD of the first notification not yet taken by a waiter.
    triggered: EvdHandle,
    /// Every tied EVD was freed while a thread waited.
    orphaned: bool,
    pub(crate) context: u64,
    signal: Option<Signal>,
    /// The signal was raised and the trigger not yet taken.
    raised: bool,
}

impl Cno {
    /// A new CNO of `ia` with the proxy agent `agent`, if any: no EVD tied
    /// to it, no waiter, no signal, not triggered.
    pub(crate) fn new(ia: IaHandle, agent: Option<ProxyAgent>) -> Cno {
        Cno {
            ia,
            agent,
            agent_call: None,
            evd_refs: 0,
            waiters: 0,
            triggered: EvdHandle::NULL,
            orphaned: false,
            context: 0,
            signal: None,
            raised: false,
        }
    }

    pub(crate) fn agent(&self) -> Option<ProxyAgent> {
        self.agent
    }

    /// dat_cno_modify_agent(3DAT): the proxy agent is replaced, or removed.
    pub(crate) fn set_agent(&mut self, agent: Option<ProxyAgent>) {
        self.agent = agent;
    }

    /// The proxy-agent call a trigger owes, once.
    pub(crate) fn take_agent_call(&mut self) -> Option<(ProxyAgent, EvdHandle)> {
        self.agent_call.take()
    }

    /// dat_cno_free(3DAT): "A CNO cannot be deleted while it is referenced
    /// by an Event Dispatcher or while a thread is blocked on it."
    pub(crate) fn in_use(&self) -> bool {
        self.evd_refs != 0 || self.waiters != 0
    }

    /// An EVD is tied to it.
    pub(crate) fn tie(&mut self) {
        self.evd_refs += 1;
    }

    /// An EVD is tied to it no more (freed or tied elsewhere).
    pub(crate) fn untie(&mut self) {
        self.evd_refs = self.evd_refs.saturating_sub(1);
        // dat_cno_wait(3DAT): waiters "are unblocked with the NULL handle
        // ... when all EVDs the CNO is associated with are freed".
        if self.evd_refs == 0 && self.waiters != 0 {
            self.orphaned = true;
        }
    }

    /// It gets `signal` in place of the one it had (or none); a trigger
    /// already pending raises the new one at once.
    pub(crate) fn set_signal(&mut self, signal: Option<Signal>) {
        if let Some(old) = self.signal.filter(|_| self.raised) {
            (old.clear)(old.arg);
        }
        self.signal = signal;
        self.raised = false;
        if !self.triggered.is_null() {
            self.raise();
        }
    }

    /// Raise the signal, unless it is up.
    fn raise(&mut self) {
        if let Some(s) = self.signal.filter(|_| !self.raised) {
            self.raised = true;
            (s.raise)(s.arg);
        }
    }

    /// An event's arrival on `evd` triggers it.
    pub(crate) fn trigger(&mut self, evd: EvdHandle) {
        if self.triggered.is_null() {
            self.triggered = evd;
        }
        self.raise();
        // dat_cno_create(3DAT): "After it is invoked, it is no longer
        // associated with the CNO."
        if let Some(agent) = self.agent.take() {
            self.agent_call = Some((agent, evd));
        }
    }

    /// `dat_cno_trigger` takes the pending trigger, if any, and clears the
    /// signal: the EVD that triggered it.
    pub(crate) fn take_trigger(&mut self) -> Option<EvdHandle> {
        if let Some(s) = self.signal.filter(|_| self.raised) {
            self.raised = false;
            (s.clear)(s.arg);
        }
        let evd = core::mem::replace(&mut self.triggered, EvdHandle::NULL);
        (!evd.is_null()).then_some(evd)
    }

    /// A `dat_cno_wait` begins.
    pub(crate) fn begin_wait(&mut self) {
        self.waiters += 1;
    }

    /// A waiter looks: unblocked, with the EVD that triggered the CNO or a
    /// null EVD when every tied EVD was freed, it waits no more.
    pub(crate) fn wake(&mut self) -> Option<EvdHandle> {
        if !self.orphaned && self.triggered.is_null() {
            return None;
        }
        let evd = core::mem::replace(&mut self.triggered, EvdHandle::NULL);
        self.waiters = self.waiters.saturating_sub(1);
        if self.waiters == 0 {
            self.orphaned = false;
        }
        Some(evd)
    }

    /// A waiter's timeout passed without a notification.
    pub(crate) fn time_out(&mut self) {
        self.waiters = self.waiters.saturating_sub(1);
    }

    /// A waiter gives up its place (a signal interrupted it, say).
    pub(crate) fn end_wait(&mut self) {
        self.waiters = self.waiters.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::RawHandle;

    fn evd(index: u64) -> EvdHandle {
        EvdHandle::from_raw(RawHandle::from_bits(1 << 32 | index))
    }

    #[test]
    fn a_waiter_wakes_with_the_first_evd_that_triggered_the_cno() {
        let mut c = Cno::new(IaHandle::NULL, None);
        c.tie();
        c.begin_wait();
        assert_eq!(c.wake(), None);
        c.trigger(evd(1));
        c.trigger(evd(2));
        assert_eq!(c.wake(), Some(evd(1)));
        assert!(c.in_use());
        c.untie();
        assert!(!c.in_use());
        // Taken: nothing is pending for the next one.
        assert_eq!(c.take_trigger(), None);
    }

    #[test]
    fn freeing_every_tied_evd_wakes_the_waiters_with_a_null_evd() {
        let mut c = Cno::new(IaHandle::NULL, None);
        c.tie();
        c.begin_wait();
        c.begin_wait();
        c.untie();
        assert_eq!(c.wake(), Some(EvdHandle::NULL));
        assert_eq!(c.wake(), Some(EvdHandle::NULL));
        assert!(!c.in_use());
        // The last waiter gone, a new one waits for a trigger again.
        c.begin_wait();
        assert_eq!(c.wake(), None);
    }

    #[test]
    fn a_trigger_calls_the_proxy_agent_once() {
        let agent = ProxyAgent { instance_data: 7, function: 0x1000 };
        let mut c = Cno::new(IaHandle::NULL, Some(agent));
        c.trigger(evd(3));
        assert_eq!(c.agent(), None);
        assert_eq!(c.take_agent_call(), Some((agent, evd(3))));
        assert_eq!(c.take_agent_call(), None);
        assert_eq!(c.take_trigger(), Some(evd(3)));
    }
}
