//! The state of a Local Memory Region and its own rules; the DAT calls on it are in
//! `crate::call::lmr`.

use crate::backend::Backend;
use crate::handle::{IaHandle, LmrHandle, PzHandle};
use crate::slab::{Slab, SlotsOf};
use crate::types::{Access, MemPriv, MemType};

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
    /// The PZ's bits if the region grants local read, else [`NO_PZ`]; and
    /// the same for local write ([`Lmr::pz_granting`]).
    pub(crate) pz_grants: [u64; 2],
}

/// A word no PZ handle is (its slot index is past any slab's): what
/// [`Lmr::pz_granting`] answers for a privilege the region lacks.
const NO_PZ: u64 = u32::MAX as u64;

/// [`Lmr::pz_grants`] of a region of `pz` with `privileges`, in the
/// order of [`Access`].
pub(crate) fn pz_grants(pz: PzHandle, privileges: MemPriv) -> [u64; 2] {
    let grant = |access: Access| if privileges.contains(access.privilege()) { pz.0.to_bits() } else { NO_PZ };
    [grant(Access::Read), grant(Access::Write)]
}

/// The live LMR of `lmrs` whose context this is.
#[inline(always)]
pub(crate) fn by_context<B: Backend, L: SlotsOf<Lmr<B>>>(
    lmrs: &Slab<Lmr<B>, L>,
    lmr_context: u32,
) -> Option<(LmrHandle, &Lmr<B>)> {
    let (raw, lmr) = lmrs.keyed_live_at(lmr_context)?;
    (lmr.lmr_context == lmr_context).then_some((LmrHandle(raw), lmr))
}

impl<B: Backend> Lmr<B> {
    /// The region's PZ if it grants what `access` needs, as a handle's
    /// bits, or a word no PZ handle is: a post's PZ and privilege rules
    /// (the DTO pages' `DAT_PROTECTION_VIOLATION` and
    /// `DAT_PRIVILEGES_VIOLATION`) in one compare with the EP's PZ.
    #[inline(always)]
    pub(crate) fn pz_granting(&self, access: Access) -> u64 {
        self.pz_grants[access as usize]
    }

    /// Whether `[address, address + length)` lies inside the region.
    /// (`Provider::lmr_create` keeps `self.address + self.length` from
    /// overflowing, so an address below the region is an offset past its
    /// length.)
    #[inline(always)]
    pub(crate) fn contains(&self, address: u64, length: u64) -> bool {
        let offset = address.wrapping_sub(self.address);
        offset.checked_add(length).is_some_and(|end| end <= self.length)
    }
}
