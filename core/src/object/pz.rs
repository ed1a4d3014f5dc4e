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
}
