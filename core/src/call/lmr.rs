//! Local Memory Region (LMR): dat_lmr_create(3DAT), dat_lmr_free(3DAT),
//! dat_lmr_query(3DAT), dat_lmr_sync_rdma_read(3DAT),
//! dat_lmr_sync_rdma_write(3DAT).
//!
//! The `lmr_context` the consumer puts in its triplets comes from a 32-bit
//! sequence, one value per registration, and names the LMR's slot in its
//! low bits (as many as the capacity needs): a registration takes the next
//! value whose slot is free. So a DTO finds its LMR in O(1), and a freed
//! LMR's context is refused until the sequence has gone round, 2^32
//! registrations later, however many slots there are.

use crate::backend::{Backend, Control};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{IaHandle, LmrHandle, PzHandle};
use crate::object::lmr::{by_context, Lmr};
use crate::provider::Provider;
use crate::signature::{signature, Parameter};
use crate::slab::{Slab, SlotsOf};
use crate::storage::Storage;
use crate::types::{LmrTriplet, MemPriv, MemType};

/// `DAT_LMR_FIELD_ALL`.
pub const LMR_FIELD_ALL: u32 = 0x7ff;

/// What `dat_lmr_create` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LmrCreated {
    /// The new LMR.
    pub lmr: LmrHandle,
    /// The context local segments name the LMR by ([`LmrTriplet`]).
    pub lmr_context: u32,
    /// `None` unless remote privileges were asked for (dat_lmr_create(3DAT):
    /// "If mem_privileges does not specify remote Read and Write privileges,
    /// rmr_context is not generated and NULL is returned").
    pub rmr_context: Option<u32>,
    /// Bytes the registration covers, perhaps more than asked for.
    pub registered_size: u64,
    /// The first byte the registration covers.
    pub registered_address: u64,
}

/// `DAT_LMR_PARAM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LmrParam {
    /// The IA the LMR belongs to.
    pub ia: IaHandle,
    /// The memory registered, as dat_lmr_create(3DAT) was given it.
    pub mem_type: MemType,
    /// The LMR's PZ.
    pub pz: PzHandle,
    /// The privileges granted.
    pub mem_privileges: MemPriv,
    /// The context local segments name the LMR by.
    pub lmr_context: u32,
    /// The context a peer names the LMR by; `None` without remote
    /// privileges.
    pub rmr_context: Option<u32>,
    /// Bytes the registration covers.
    pub registered_size: u64,
    /// The first byte the registration covers.
    pub registered_address: u64,
}

signature! {
    /// dat_lmr_create(3DAT)'s parameters.
    pub(crate) enum LmrCreate {
        IaHandle, MemType, RegionDescription, Length, PzHandle, MemPrivileges, LmrHandle, LmrContext, RmrContext,
        RegisteredSize, RegisteredAddress,
    }

    /// dat_lmr_query(3DAT)'s parameters.
    pub(crate) enum LmrQuery { LmrHandle, LmrParamMask, LmrParam }

    /// dat_lmr_sync_rdma_read(3DAT)'s parameters.
    pub(crate) enum LmrSyncRdmaRead { IaHandle, LocalSegments, NumSegments }

    /// dat_lmr_sync_rdma_write(3DAT)'s parameters.
    pub(crate) enum LmrSyncRdmaWrite { IaHandle, LocalSegments, NumSegments }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_lmr_create(3DAT): register memory in `pz`.
    ///
    /// # Safety
    ///
    /// A registration lets the transport read and write the memory it
    /// names, through this IA's posts and, with remote privileges, through
    /// a peer's RDMA, with no further check that Rust's rules hold there.
    /// For [`MemType::Virtual`] and [`MemType::SharedVirtual`] the caller
    /// guarantees that, from this call until the LMR is freed (by
    /// [`Provider::lmr_free`] or the IA's close) or the provider is dropped:
    /// - `address..address + length` is memory of this process that stays
    ///   allocated and mapped;
    /// - the program makes no reference to a byte of it that a DTO or a
    ///   peer may write while the reference lives, nor reads such a byte
    ///   through a reference while a DTO that writes it is outstanding
    ///   (its completion event ends it).
    ///
    /// [`MemType::Lmr`] registers memory already registered, under the
    /// same contract, which its first registration's caller took on.
    #[allow(unsafe_code)]
    pub unsafe fn lmr_create(
        &mut self,
        ia_h: IaHandle,
        mem_type: MemType,
        pz_h: PzHandle,
        privileges: MemPriv,
    ) -> DatResult<LmrCreated> {
        let ia = self.ia(ia_h)?;
        let max_block = ia.attr.max_lmr_block_size;
        let max_va = ia.attr.max_lmr_virtual_address;
        if !privileges.is_valid() {
            return Err(DatError::invalid(LmrCreate::MemPrivileges));
        }
        // A transport that reads every region locally grants the privilege
        // whether asked or not, and the LMR reports what it has.
        let privileges = if ia.attr.local_read_implied { privileges | MemPriv::LOCAL_READ } else { privileges };
        let (address, length) = match mem_type {
            MemType::Virtual { address, length } | MemType::SharedVirtual { address, length, .. } => (address, length),
            MemType::Lmr(h) => {
                let base = self.lmr(h)?;
                if base.ia != ia_h {
                    return Err(DatError::invalid_handle(Subtype::InvalidHandleLmr));
                }
                (base.address, base.length)
            }
        };
        let end = address.checked_add(length).ok_or(DatError::invalid(LmrCreate::RegionDescription))?;
        if length == 0 || length > max_block || end - 1 > max_va {
            return Err(DatError::invalid(LmrCreate::Length));
        }
        if let MemType::SharedVirtual { cookie, .. } = mem_type {
            self.shared_region_fits(ia_h, &cookie, length)?;
        }
        let Provider { ias, pzs, lmrs, lmr_sequence, backend, .. } = self;
        let pz =
            pzs.get_mut(pz_h.0).filter(|p| p.ia == ia_h).ok_or(DatError::invalid_handle(Subtype::InvalidHandlePz))?;
        // The context, and so the slot, is chosen before the registration:
        // a full table registers nothing, and the record is built once, in
        // its slot.
        let Some(lmr_context) = next_lmr_context(lmrs, lmr_sequence) else {
            return Err(DatError::new(ErrorType::InsufficientResources, Subtype::ResourceMemoryRegion));
        };
        let reg = backend.control().mr_register(&pz.pd, address, length, privileges)?;
        // `Lmr::contains` relies on the registered range not wrapping.
        if reg.address.checked_add(reg.length).is_none() {
            backend.control().mr_deregister(reg.mr);
            return Err(DatError::of(ErrorType::InternalError));
        }
        let remote = privileges.intersects(MemPriv(MemPriv::REMOTE.0 | MemPriv::REMOTE_ATOMIC.0));
        let rmr_context = remote.then_some(reg.rkey);
        let (registered_address, registered_size) = (reg.address, reg.length);
        let slot = lmrs.key_slot(lmr_context);
        let made = crate::object::owned::insert_at(
            ias,
            lmrs,
            ia_h,
            slot,
            reg.mr,
            #[inline(always)]
            |mr| Lmr {
                ia: ia_h,
                pz: pz_h,
                mem_type,
                privileges,
                address: reg.address,
                length: reg.length,
                mr,
                lkey: reg.lkey,
                lmr_context,
                rmr_context,
                rmr_refs: 0,
                context: 0,
                pz_grants: crate::object::lmr::pz_grants(pz_h, privileges),
            },
        );
        match made {
            Ok(raw) => {
                pz.refs += 1;
                Ok(LmrCreated { lmr: LmrHandle(raw), lmr_context, rmr_context, registered_size, registered_address })
            }
            Err(mr) => {
                backend.control().mr_deregister(mr);
                Err(DatError::new(ErrorType::InsufficientResources, Subtype::ResourceMemoryRegion))
            }
        }
    }

    /// dat_lmr_create(3DAT), `DAT_MEM_TYPE_SHARED_VIRTUAL`: "All DAT
    /// Consumers of the same uDAPL Provider specify the same Consumer
    /// cookie to indicate who is sharing the shared memory region", and
    /// "The Provider must check the entire 40 bytes and shall not
    /// interpret it as a null-terminated string". So one cookie names one
    /// region of the IA: an LMR of a cookie an LMR of the IA already has
    /// must be of that region's length (`DAT_INVALID_PARAMETER` on the
    /// length otherwise). Its address may differ, as a platform may map
    /// the region at more than one address.
    fn shared_region_fits(&self, ia: IaHandle, cookie: &[u8; 40], length: u64) -> DatResult<()> {
        let shares =
            |l: &Lmr<B>| l.ia == ia && matches!(&l.mem_type, MemType::SharedVirtual { cookie: c, .. } if c == cookie);
        match self.lmrs.find_from(0, shares).and_then(|h| self.lmrs.get(h)) {
            Some(Lmr { mem_type: MemType::SharedVirtual { length: region, .. }, .. }) if *region != length => {
                Err(DatError::invalid(LmrCreate::Length))
            }
            _ => Ok(()),
        }
    }

    /// dat_lmr_free(3DAT): "The LMR cannot be destroyed if it is in use by
    /// an RMR."
    pub fn lmr_free(&mut self, lmr: LmrHandle) -> DatResult<()> {
        if self.lmr(lmr)?.rmr_refs != 0 {
            return Err(DatError::invalid_state(Subtype::InvalidStateLmrInUse));
        }
        self.lmr_destroy(lmr);
        Ok(())
    }

    pub(crate) fn lmr_destroy(&mut self, lmr: LmrHandle) {
        if let Some(lmr) = crate::object::owned::remove(&mut self.ias, &mut self.lmrs, lmr.0) {
            self.backend.control().mr_deregister(lmr.mr);
            if let Some(pz) = self.pzs.get_mut(lmr.pz.0) {
                pz.release();
                // Segments of the zone may name the LMR: they are checked
                // again.
                pz.stamp = crate::provider::new_stamp();
            }
        }
    }

    /// dat_lmr_query(3DAT).
    pub fn lmr_query(&self, lmr: LmrHandle, mask: u32) -> DatResult<LmrParam> {
        let l = self.lmr(lmr)?;
        if mask & !LMR_FIELD_ALL != 0 {
            return Err(DatError::invalid(LmrQuery::LmrParamMask));
        }
        Ok(LmrParam {
            ia: l.ia,
            mem_type: l.mem_type,
            pz: l.pz,
            mem_privileges: l.privileges,
            lmr_context: l.lmr_context,
            rmr_context: l.rmr_context,
            registered_size: l.length,
            registered_address: l.address,
        })
    }

    /// The live LMR whose context this is.
    pub(crate) fn lmr_by_context(&self, lmr_context: u32) -> Option<(LmrHandle, &Lmr<B>)> {
        by_context(&self.lmrs, lmr_context)
    }

    /// dat_lmr_sync_rdma_read(3DAT). This platform's memory is coherent
    /// with the adapter, so nothing needs flushing; the segments are still
    /// checked as the page requires.
    pub fn lmr_sync_rdma_read(&self, ia: IaHandle, segments: &[LmrTriplet]) -> DatResult<()> {
        self.lmr_sync(ia, segments, LmrSyncRdmaRead::LocalSegments)
    }

    /// dat_lmr_sync_rdma_write(3DAT); see [`Provider::lmr_sync_rdma_read`].
    pub fn lmr_sync_rdma_write(&self, ia: IaHandle, segments: &[LmrTriplet]) -> DatResult<()> {
        self.lmr_sync(ia, segments, LmrSyncRdmaWrite::LocalSegments)
    }

    /// The rules of both syncs; `local_segments` is the call's.
    fn lmr_sync(&self, ia: IaHandle, segments: &[LmrTriplet], local_segments: impl Parameter) -> DatResult<()> {
        self.ia(ia)?;
        // "the address range for a local segment fell outside the boundaries
        // of the corresponding Local Memory Region or the LMR handle was
        // invalid": DAT_INVALID_PARAMETER.
        for seg in segments {
            let (_, lmr) = self.lmr_by_context(seg.lmr_context).ok_or(DatError::invalid(local_segments))?;
            if lmr.ia != ia || !lmr.contains(seg.virtual_address, u64::from(seg.segment_length)) {
                return Err(DatError::invalid(local_segments));
            }
        }
        Ok(())
    }
}

/// The next value of the context `sequence` whose slot of `lmrs` is free;
/// `None` when every slot is taken. Zero is never a context.
#[inline]
fn next_lmr_context<B: Backend, L: SlotsOf<Lmr<B>>>(lmrs: &Slab<Lmr<B>, L>, sequence: &mut u32) -> Option<u32> {
    let capacity = lmrs.capacity();
    if lmrs.len() >= capacity as usize {
        return None;
    }
    loop {
        *sequence = sequence.wrapping_add(1);
        let context = *sequence;
        let slot = lmrs.key_slot(context);
        if context != 0 && slot < capacity && lmrs.generation(slot).is_none() {
            return Some(context);
        }
    }
}
