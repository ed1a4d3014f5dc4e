//! The state of a Protection Zone and its own rules; the DAT calls on it are in
//! `crate::call::pz`.

use crate::backend::Backend;
use crate::handle::IaHandle;

pub(crate) struct Pz<B: Backend> {
    pub(crate) ia: IaHandle,
    pub(crate) pd: B::Pd,
    /// EPs, LMRs, RMRs and SRQs in this zone.
    pub(crate) refs: u32,
    pub(crate) context: u64,
    /// The zone's stamp since it last lost an LMR
    /// ([`new_stamp`](crate::provider::new_stamp)): segments checked
    /// against its LMRs under another stamp are checked again (see
    /// `poster`).
    pub(crate) stamp: u64,
}

impl<B: Backend> Pz<B> {
    /// One of the zone's objects is gone.
    pub(crate) fn release(&mut self) {
        self.refs = self.refs.saturating_sub(1);
    }
}
