//! The state of an Interface Adapter and its own rules; the DAT calls on it are in
//! `crate::ia`.

use crate::backend::Backend;
use crate::counts::Counts;
use crate::handle::EvdHandle;
use crate::types::IaAttr;

/// Longest IA name kept (`DAT_NAME_MAX_LENGTH` is 256 with the NUL).
pub const MAX_IA_NAME: usize = 255;

pub(crate) struct Ia<B: Backend> {
    pub(crate) dev: B::Ia,
    pub(crate) attr: IaAttr,
    pub(crate) async_evd: EvdHandle,
    pub(crate) owns_async_evd: bool,
    pub(crate) out_of_scope: bool,
    pub(crate) name: crate::FixedVec<u8, MAX_IA_NAME>,
    pub(crate) context: u64,
    /// When a dequeue that finds nothing next looks at the connection
    /// events (backend clock, µs).
    pub(crate) cm_look_us: u64,
    /// The objects created on it.
    pub(crate) owned: crate::object::owned::Owned,
    /// `DAT_IA_COUNTERS`, and whether the IA and its EPs and EVDs count.
    pub(crate) counts: Counts<{ crate::counts::ia::COUNT }>,
    pub(crate) counting: bool,
}
