//! Protection Zones: dat_pz_create(3DAT), dat_pz_query(3DAT),
//! dat_pz_free(3DAT).

use udat_core::handle::{IaHandle, Kind, PzHandle};

use super::{with, Arg};
use crate::sys::*;
use crate::transport::Transport;

/// dat_pz_create(3DAT).
pub(crate) unsafe fn pz_create<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    pz_out: Arg<2, *mut DAT_PZ_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let slot = pz_out.out()?;
            let pz = cx.state.core.pz_create(IaHandle::from_raw(raw))?;
            *slot = cx.state.ptr(pz);
            Ok(())
        })
    }
}

/// dat_pz_free(3DAT).
pub(crate) unsafe fn pz_free<B: Transport>(pz: Arg<1, DAT_PZ_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `pz`'s provider word.
    unsafe { with::<B>(pz, Kind::Pz, |cx, raw| cx.state.core.pz_free(PzHandle::from_raw(raw))) }
}

/// dat_pz_query(3DAT).
pub(crate) unsafe fn pz_query<B: Transport>(
    pz: Arg<1, DAT_PZ_HANDLE>,
    m: Arg<2, DAT_PZ_PARAM_MASK>,
    param: Arg<3, *mut DAT_PZ_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `pz`'s provider word.
    unsafe {
        with::<B>(pz, Kind::Pz, |cx, raw| {
            let slot = param.out()?;
            let p = cx.state.core.pz_query(PzHandle::from_raw(raw), m.0)?;
            slot.ia_handle = (cx.instance.ia_out)(cx.state.ptr(p.ia));
            Ok(())
        })
    }
}
