//! Remote Memory Regions: dat_rmr_create(3DAT), dat_rmr_query(3DAT),
//! dat_rmr_bind(3DAT), dat_rmr_free(3DAT), and DAT 2.0's
//! dat_rmr_create_for_ep.

use udat_core::handle::{EpHandle, Kind, LmrHandle, PzHandle, RmrHandle};
use udat_core::types::{CompletionFlags, LmrTriplet, MemPriv};
use udat_core::{DatError, DatResult, ErrorType, RmrScope};

use super::{with, Arg};
use crate::instance::Core;
use crate::sys::*;
use crate::transport::Transport;

/// dat_rmr_create(3DAT).
pub(crate) unsafe fn rmr_create<B: Transport>(
    pz: Arg<1, DAT_PZ_HANDLE>,
    rmr_out: Arg<2, *mut DAT_RMR_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: the caller's contract is the DAT call's.
    unsafe { create::<B>(pz, rmr_out, Core::rmr_create) }
}

/// dat_rmr_create_for_ep of `<dat2/dat.h>` (DAT 2.0): an RMR of
/// `DAT_RMR_SCOPE_EP` (`Provider::rmr_create_for_ep`).
pub(crate) unsafe fn rmr_create_for_ep<B: Transport>(
    pz: Arg<1, DAT_PZ_HANDLE>,
    rmr_out: Arg<2, *mut DAT_RMR_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: the caller's contract is the DAT call's.
    unsafe { create::<B>(pz, rmr_out, Core::rmr_create_for_ep) }
}

/// An RMR of `pz` made by `make`, its handle written to `rmr_out`.
///
/// # Safety
/// As the DAT call's: `pz` is a handle and `rmr_out` a pointer the
/// consumer passed.
unsafe fn create<B: Transport>(
    pz: Arg<1, DAT_PZ_HANDLE>,
    rmr_out: Arg<2, *mut DAT_RMR_HANDLE>,
    make: fn(&mut Core<B>, PzHandle) -> DatResult<RmrHandle>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `pz`'s provider word.
    unsafe {
        with::<B>(pz, Kind::Pz, |cx, raw| {
            let slot = rmr_out.out()?;
            let rmr = make(&mut cx.state.core, PzHandle::from_raw(raw))?;
            *slot = cx.state.ptr(rmr);
            Ok(())
        })
    }
}

/// dat_rmr_free(3DAT).
pub(crate) unsafe fn rmr_free<B: Transport>(rmr: Arg<1, DAT_RMR_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `rmr`'s provider word.
    unsafe { with::<B>(rmr, Kind::Rmr, |cx, raw| cx.state.core.rmr_free(RmrHandle::from_raw(raw))) }
}

/// dat_rmr_query(3DAT).
pub(crate) unsafe fn rmr_query<B: Transport>(
    rmr: Arg<1, DAT_RMR_HANDLE>,
    m: Arg<2, DAT_RMR_PARAM_MASK>,
    param: Arg<3, *mut DAT_RMR_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `rmr`'s provider word.
    unsafe {
        with::<B>(rmr, Kind::Rmr, |cx, raw| {
            let slot = param.out()?;
            let p = cx.state.core.rmr_query(RmrHandle::from_raw(raw), m.0)?;
            let t = p.lmr_triplet.unwrap_or_default();
            slot.ia_handle = (cx.instance.ia_out)(cx.state.ptr(p.ia));
            slot.pz_handle = cx.state.ptr(p.pz);
            slot.lmr_triplet = DAT_LMR_TRIPLET {
                virtual_address: t.virtual_address,
                segment_length: t.segment_length,
                lmr_context: t.lmr_context,
            };
            slot.mem_priv = p.mem_privileges.map_or(0, |m| m.0);
            slot.rmr_context = p.rmr_context.unwrap_or(0);
            slot.rmr_scope = match p.scope {
                RmrScope::Pz => DAT_RMR_SCOPE_PZ,
                RmrScope::Ep => DAT_RMR_SCOPE_EP,
            };
            slot.va_type = DAT_VA_TYPE_VA;
            Ok(())
        })
    }
}

/// dat_rmr_bind(3DAT), with DAT 2.0's LMR handle, which must name the LMR
/// of the triplet's context (`Provider::rmr_bind`).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rmr_bind<B: Transport>(
    rmr: Arg<1, DAT_RMR_HANDLE>,
    lmr: Arg<2, DAT_LMR_HANDLE>,
    triplet: Arg<3, *const DAT_LMR_TRIPLET>,
    privileges: Arg<4, DAT_MEM_PRIV_FLAGS>,
    va_type: Arg<5, DAT_VA_TYPE>,
    ep: Arg<6, DAT_EP_HANDLE>,
    cookie: Arg<7, DAT_RMR_COOKIE>,
    flags: Arg<8, DAT_COMPLETION_FLAGS>,
    context_out: Arg<9, *mut DAT_RMR_CONTEXT>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `rmr`'s provider word; a cookie is 64 bits.
    unsafe {
        with::<B>(rmr, Kind::Rmr, |cx, raw| {
            if va_type.0 != DAT_VA_TYPE_VA {
                return Err(DatError::of(ErrorType::ModelNotSupported));
            }
            let t = triplet.input()?;
            let t = LmrTriplet {
                virtual_address: t.virtual_address,
                segment_length: t.segment_length,
                lmr_context: t.lmr_context,
            };
            let ep = EpHandle::from_raw(cx.raw_or_null(ep, Kind::Ep)?);
            let lmr = LmrHandle::from_raw(cx.raw_or_null(lmr, Kind::Lmr)?);
            let ctx = cx.state.core.rmr_bind(
                RmrHandle::from_raw(raw),
                lmr,
                &t,
                MemPriv(privileges.0),
                ep,
                cookie.0.as_64,
                CompletionFlags(flags.0),
            )?;
            if let Some(p) = context_out.out_or_null()? {
                *p = ctx;
            }
            Ok(())
        })
    }
}
