//! The state of an Interface Adapter and its own rules; the DAT calls on it are in
//! `crate::call::ia`.

use crate::backend::Backend;
use crate::counts::Counts;
use crate::handle::EvdHandle;
use crate::slab::Members;
use crate::types::IaAttr;

/// Longest IA name kept (`DAT_NAME_MAX_LENGTH` is 256 with the NUL).
pub const MAX_IA_NAME: usize = 255;

pub(crate) struct Ia<B: Backend> {
    pub(crate) dev: B::Ia,
    pub(crate) attr: IaAttr,
    pub(crate) async_evd: EvdHandle,
    pub(crate) owns_async_evd: bool,
    pub(crate) out_of_scope: bool,
    pub(crate) name: crate::store::FixedVec<u8, MAX_IA_NAME>,
    pub(crate) context: u64,
    /// When a dequeue that finds nothing next looks at the connection
    /// events (backend clock, µs).
    pub(crate) cm_look_us: u64,
    /// The objects created on it.
    pub(crate) owned: Owned,
    /// `DAT_IA_COUNTERS`, and whether the IA and its EPs and EVDs count.
    pub(crate) counts: Counts<{ crate::counts::ia::COUNT }>,
    pub(crate) counting: bool,
}

impl<B: Backend> Ia<B> {
    /// Whether, at `now` (the backend's clock, µs), a dequeue that finds
    /// nothing is to look at the IA's connection events.
    #[inline(always)]
    pub(crate) fn cm_look_is_due(&self, now: u64) -> bool {
        now >= self.cm_look_us
    }
}

/// The objects of one IA, one list per kind.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Owned {
    pub(crate) pzs: Members,
    pub(crate) lmrs: Members,
    pub(crate) rmrs: Members,
    pub(crate) evds: Members,
    pub(crate) cnos: Members,
    pub(crate) eps: Members,
    pub(crate) psps: Members,
    pub(crate) rsps: Members,
    pub(crate) crs: Members,
    pub(crate) srqs: Members,
}

impl Owned {
    /// Objects of every kind.
    pub(crate) fn len(&self) -> usize {
        [self.pzs, self.lmrs, self.rmrs, self.evds, self.cnos, self.eps, self.psps, self.rsps, self.crs, self.srqs]
            .iter()
            .map(Members::len)
            .sum()
    }
}
