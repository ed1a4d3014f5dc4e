//! Public Service Points: dat_psp_create(3DAT), dat_psp_create_any(3DAT),
//! dat_psp_query(3DAT), dat_psp_free(3DAT).

use udat_core::handle::{EvdHandle, IaHandle, Kind, PspHandle};
use udat_core::types::PspFlags;

use super::{with, Arg};
use crate::sys::*;
use crate::transport::Transport;

/// dat_psp_create(3DAT).
pub(crate) unsafe fn psp_create<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    conn_qual: Arg<2, DAT_CONN_QUAL>,
    evd: Arg<3, DAT_EVD_HANDLE>,
    flags: Arg<4, DAT_PSP_FLAGS>,
    psp_out: Arg<5, *mut DAT_PSP_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let evd = EvdHandle::from_raw(cx.raw(evd, Kind::Evd)?);
            let flags = PspFlags::from_raw(flags.0).ok_or(flags.invalid())?;
            let slot = psp_out.out()?;
            let psp = cx.state.core.psp_create(IaHandle::from_raw(raw), conn_qual.0, evd, flags)?;
            *slot = cx.state.ptr(psp);
            Ok(())
        })
    }
}

/// dat_psp_create_any(3DAT).
pub(crate) unsafe fn psp_create_any<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    conn_qual: Arg<2, *mut DAT_CONN_QUAL>,
    evd: Arg<3, DAT_EVD_HANDLE>,
    flags: Arg<4, DAT_PSP_FLAGS>,
    psp_out: Arg<5, *mut DAT_PSP_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let qual = conn_qual.out()?;
            let evd = EvdHandle::from_raw(cx.raw(evd, Kind::Evd)?);
            let flags = PspFlags::from_raw(flags.0).ok_or(flags.invalid())?;
            let slot = psp_out.out()?;
            let (psp, q) = cx.state.core.psp_create_any(IaHandle::from_raw(raw), evd, flags)?;
            *qual = q;
            *slot = cx.state.ptr(psp);
            Ok(())
        })
    }
}

/// dat_psp_free(3DAT).
pub(crate) unsafe fn psp_free<B: Transport>(psp: Arg<1, DAT_PSP_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `psp`'s provider word.
    unsafe { with::<B>(psp, Kind::Psp, |cx, raw| cx.state.core.psp_free(PspHandle::from_raw(raw))) }
}

/// dat_psp_query(3DAT).
pub(crate) unsafe fn psp_query<B: Transport>(
    psp: Arg<1, DAT_PSP_HANDLE>,
    m: Arg<2, DAT_PSP_PARAM_MASK>,
    param: Arg<3, *mut DAT_PSP_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `psp`'s provider word.
    unsafe {
        with::<B>(psp, Kind::Psp, |cx, raw| {
            let slot = param.out()?;
            let p = cx.state.core.psp_query(PspHandle::from_raw(raw), m.0)?;
            slot.ia_handle = (cx.instance.ia_out)(cx.state.ptr(p.ia));
            slot.conn_qual = p.conn_qual;
            slot.evd_handle = cx.state.ptr(p.evd);
            slot.psp_flags = p.flags as DAT_PSP_FLAGS;
            Ok(())
        })
    }
}
