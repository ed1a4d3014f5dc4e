//! The state of a Consumer Notification Object and its own rules; the DAT calls on it are in
//! `crate::call::cno`.

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
    pub(crate) agent: Option<ProxyAgent>,
    /// A trigger the agent has not been told of yet.
    pub(crate) agent_call: Option<(ProxyAgent, EvdHandle)>,
    /// EVDs tied to this CNO.
    pub(crate) evd_refs: u32,
    pub(crate) waiters: u32,
    /// The EVD of the first notification not yet taken by a waiter.
    pub(crate) triggered: EvdHandle,
    /// Every tied EVD was freed while a thread waited.
    pub(crate) orphaned: bool,
    pub(crate) context: u64,
    pub(crate) signal: Option<Signal>,
    /// The signal was raised and the trigger not yet taken.
    pub(crate) raised: bool,
}

impl Cno {
    /// Raise the signal, unless it is up.
    pub(crate) fn raise(&mut self) {
        if let Some(s) = self.signal.filter(|_| !self.raised) {
            self.raised = true;
            (s.raise)(s.arg);
        }
    }

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
}
