//! Local Memory Regions: dat_lmr_create(3DAT), dat_lmr_query(3DAT),
//! dat_lmr_free(3DAT), dat_lmr_sync_rdma_read(3DAT),
//! dat_lmr_sync_rdma_write(3DAT).

use std::ptr;

use udat_core::handle::{IaHandle, Kind, LmrHandle, PzHandle};
use udat_core::types::{MemPriv, MemType};
use udat_core::{DatError, ErrorType};

use super::arg::triplets;
use super::{with, Arg};
use crate::sys::*;
use crate::transport::Transport;

/// dat_lmr_create(3DAT): virtual memory, another LMR's region, or shared
/// virtual memory named by a 40-byte cookie (`Provider::lmr_create`).
/// `DAT_SHARED_MEMORY` is laid out as `<dat2/udat.h>` has it, the address
/// first, then the pointer to the consumer's cookie (the page lists them
/// the other way round); a null cookie pointer is `DAT_INVALID_ARG3`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn lmr_create<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    mem_type: Arg<2, DAT_MEM_TYPE>,
    region: Arg<3, DAT_REGION_DESCRIPTION>,
    length: Arg<4, DAT_VLEN>,
    pz: Arg<5, DAT_PZ_HANDLE>,
    privileges: Arg<6, DAT_MEM_PRIV_FLAGS>,
    va_type: Arg<7, DAT_VA_TYPE>,
    lmr_out: Arg<8, *mut DAT_LMR_HANDLE>,
    lmr_context: Arg<9, *mut DAT_LMR_CONTEXT>,
    rmr_context: Arg<10, *mut DAT_RMR_CONTEXT>,
    registered_length: Arg<11, *mut DAT_VLEN>,
    registered_address: Arg<12, *mut DAT_VADDR>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word; the region union is read
    // as the member `mem_type` names; out-pointers other than the handle
    // may be null.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            // Zero-based virtual addresses are not offered
            // (DAT_IA_ATTR.zb_supported is false).
            if va_type.0 != DAT_VA_TYPE_VA {
                return Err(DatError::of(ErrorType::ModelNotSupported));
            }
            let mem = match mem_type.0 {
                DAT_MEM_TYPE_VIRTUAL => MemType::Virtual { address: region.0.for_va as u64, length: length.0 },
                DAT_MEM_TYPE_LMR => MemType::Lmr(LmrHandle::from_raw(cx.raw(region.0.for_lmr_handle, Kind::Lmr)?)),
                DAT_MEM_TYPE_SHARED_VIRTUAL => {
                    let shared = region.0.for_shared_memory;
                    let cookie = Arg::<3, *const [libc::c_char; 40]>(shared.shared_memory_id.cast_const()).input()?;
                    MemType::SharedVirtual {
                        cookie: cookie.map(|c| c as u8),
                        address: shared.virtual_address as u64,
                        length: length.0,
                    }
                }
                _ => return Err(DatError::of(ErrorType::ModelNotSupported)),
            };
            let pz = PzHandle::from_raw(cx.raw(pz, Kind::Pz)?);
            // Every out-pointer is checked before the region is registered.
            let slot = lmr_out.out()?;
            let lmr_context = lmr_context.out_or_null()?;
            let rmr_context = rmr_context.out_or_null()?;
            let registered_length = registered_length.out_or_null()?;
            let registered_address = registered_address.out_or_null()?;
            // SAFETY: `lmr_create`, under the block's `unsafe`, holds
            // because the C caller answers for the region, as
            // dat_lmr_create(3DAT) says: "The specified buffer must have
            // been previously allocated and pinned by the uDAPL Consumer",
            // so "neither the hardware nor the Consumer ever has to deal
            // with it not being there"; and the DTOs' pages add "A Consumer
            // must not modify the local_iov or its content until the DTO is
            // completed" (dat_ep_post_recv(3DAT)).
            let made = cx.state.core.lmr_create(IaHandle::from_raw(raw), mem, pz, MemPriv(privileges.0))?;
            *slot = cx.state.ptr(made.lmr);
            if let Some(p) = lmr_context {
                *p = made.lmr_context;
            }
            if let Some(p) = rmr_context {
                *p = made.rmr_context.unwrap_or(0);
            }
            if let Some(p) = registered_length {
                *p = made.registered_size;
            }
            if let Some(p) = registered_address {
                *p = made.registered_address;
            }
            Ok(())
        })
    }
}

/// dat_lmr_free(3DAT).
pub(crate) unsafe fn lmr_free<B: Transport>(lmr: Arg<1, DAT_LMR_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `lmr`'s provider word.
    unsafe { with::<B>(lmr, Kind::Lmr, |cx, raw| cx.state.core.lmr_free(LmrHandle::from_raw(raw))) }
}

/// dat_lmr_query(3DAT).
pub(crate) unsafe fn lmr_query<B: Transport>(
    lmr: Arg<1, DAT_LMR_HANDLE>,
    m: Arg<2, DAT_LMR_PARAM_MASK>,
    param: Arg<3, *mut DAT_LMR_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `lmr`'s provider word.
    unsafe {
        with::<B>(lmr, Kind::Lmr, |cx, raw| {
            let slot = param.out()?;
            let p = cx.state.core.lmr_query(LmrHandle::from_raw(raw), m.0)?;
            slot.ia_handle = (cx.instance.ia_out)(cx.state.ptr(p.ia));
            match p.mem_type {
                MemType::Virtual { address, length } => {
                    slot.mem_type = DAT_MEM_TYPE_VIRTUAL;
                    slot.region_desc.for_va = address as DAT_PVOID;
                    slot.length = length;
                }
                MemType::Lmr(h) => {
                    slot.mem_type = DAT_MEM_TYPE_LMR;
                    slot.region_desc.for_lmr_handle = cx.state.ptr(h);
                    slot.length = p.registered_size;
                }
                MemType::SharedVirtual { address, length, .. } => {
                    // The cookie is the consumer's array, which udat does
                    // not keep: its pointer is reported as null.
                    slot.mem_type = DAT_MEM_TYPE_SHARED_VIRTUAL;
                    slot.region_desc.for_shared_memory =
                        DAT_SHARED_MEMORY { virtual_address: address as DAT_PVOID, shared_memory_id: ptr::null_mut() };
                    slot.length = length;
                }
            }
            slot.pz_handle = cx.state.ptr(p.pz);
            slot.mem_priv = p.mem_privileges.0;
            slot.va_type = DAT_VA_TYPE_VA;
            slot.lmr_context = p.lmr_context;
            slot.rmr_context = p.rmr_context.unwrap_or(0);
            slot.registered_size = p.registered_size;
            slot.registered_address = p.registered_address;
            Ok(())
        })
    }
}

/// The two syncs, whose array comes before its count.
///
/// # Safety
/// As the DAT calls'.
unsafe fn sync<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    segs: Arg<2, *const DAT_LMR_TRIPLET>,
    n: Arg<3, DAT_VLEN>,
    read: bool,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let len = i32::try_from(n.0).map_err(|_| n.invalid())?;
            // The consumer's array holds `len` triplets (`triplets`' contract).
            let segs = triplets(segs, len as usize)?;
            let ia = IaHandle::from_raw(raw);
            if read {
                cx.state.core.lmr_sync_rdma_read(ia, segs)
            } else {
                cx.state.core.lmr_sync_rdma_write(ia, segs)
            }
        })
    }
}

/// dat_lmr_sync_rdma_read(3DAT).
pub(crate) unsafe fn lmr_sync_rdma_read<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    segs: Arg<2, *const DAT_LMR_TRIPLET>,
    n: Arg<3, DAT_VLEN>,
) -> DAT_RETURN {
    // SAFETY: the call's contract, forwarded.
    unsafe { sync::<B>(ia, segs, n, true) }
}

/// dat_lmr_sync_rdma_write(3DAT).
pub(crate) unsafe fn lmr_sync_rdma_write<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    segs: Arg<2, *const DAT_LMR_TRIPLET>,
    n: Arg<3, DAT_VLEN>,
) -> DAT_RETURN {
    // SAFETY: the call's contract, forwarded.
    unsafe { sync::<B>(ia, segs, n, false) }
}
