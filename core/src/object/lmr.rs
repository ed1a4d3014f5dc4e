//! The state of a Local Memory Region and its own rules; the DAT calls on it are in
//! `crate::call::lmr`.

use crate::backend::Backend;
use crate::handle::{IaHandle, LmrHandle, PzHandle};
use crate::slab::{Slab, SlotsOf};
use crate::types::{MemPriv, MemType};

pub(crate) struct Lmr<B: Backend> {
    pub(crate) ia: IaHandle,
    pub(crate) pz: PzHandle,
    pub(crate) mem_type: MemType,
    pub(crate) privileges: MemPriv,
    pub(crate) address: u64,
    pub(crate) length: u64,
    pub(crate) mr: B::Mr,
    pub(crate) lkey: u32,
    pub(crate) lmr_context: u32,
    pub(crate) rmr_context: Option<u32>,
    /// RMRs bound to this LMR.
    pub(crate) rmr_refs: u32,
    pub(crate) context: u64,
}

/// The live LMR of `lmrs` whose context this is.
#[inline(always)]
pub(crate) fn by_context<B: Backend, L: SlotsOf<Lmr<B>>>(
    lmrs: &Slab<Lmr<B>, L>,
    lmr_context: u32,
) -> Option<(LmrHandle, &Lmr<B>)> {
    let (raw, lmr) = lmrs.live_at(lmrs.key_slot(lmr_context))?;
    (lmr.lmr_context == lmr_context).then_some((LmrHandle(raw), lmr))
}

impl<B: Backend> Lmr<B> {
    /// Whether `[address, address + length)` lies inside the region.
    /// (`Provider::lmr_create` keeps `self.address + self.length` from
    /// overflowing, so an address below the region is an offset past its
    /// length.)
    #[inline(always)]
    pub(crate) fn contains(&self, address: u64, length: u64) -> bool {
        let offset = address.wrapping_sub(self.address);
        offset <= self.length && length <= self.length - offset
    }
}
