//! Reserved Service Points: dat_rsp_create(3DAT), dat_rsp_query(3DAT),
//! dat_rsp_free(3DAT).

use udat_core::handle::{EpHandle, EvdHandle, IaHandle, Kind, RspHandle};

use super::{with, Arg};
use crate::sys::*;
use crate::transport::Transport;

/// dat_rsp_create(3DAT).
pub(crate) unsafe fn rsp_create<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    conn_qual: Arg<2, DAT_CONN_QUAL>,
    ep: Arg<3, DAT_EP_HANDLE>,
    evd: Arg<4, DAT_EVD_HANDLE>,
    rsp_out: Arg<5, *mut DAT_RSP_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let ep = EpHandle::from_raw(cx.raw(ep, Kind::Ep)?);
            let evd = EvdHandle::from_raw(cx.raw(evd, Kind::Evd)?);
            let slot = rsp_out.out()?;
            let rsp = cx.state.core.rsp_create(IaHandle::from_raw(raw), conn_qual.0, ep, evd)?;
            *slot = cx.state.ptr(rsp);
            Ok(())
        })
    }
}

/// dat_rsp_free(3DAT).
pub(crate) unsafe fn rsp_free<B: Transport>(rsp: Arg<1, DAT_RSP_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `rsp`'s provider word.
    unsafe { with::<B>(rsp, Kind::Rsp, |cx, raw| cx.state.core.rsp_free(RspHandle::from_raw(raw))) }
}

/// dat_rsp_query(3DAT).
pub(crate) unsafe fn rsp_query<B: Transport>(
    rsp: Arg<1, DAT_RSP_HANDLE>,
    m: Arg<2, DAT_RSP_PARAM_MASK>,
    param: Arg<3, *mut DAT_RSP_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `rsp`'s provider word.
    unsafe {
        with::<B>(rsp, Kind::Rsp, |cx, raw| {
            let slot = param.out()?;
            let p = cx.state.core.rsp_query(RspHandle::from_raw(raw), m.0)?;
            slot.ia_handle = (cx.instance.ia_out)(cx.state.ptr(p.ia));
            slot.conn_qual = p.conn_qual;
            slot.evd_handle = cx.state.ptr(p.evd);
            slot.ep_handle = cx.state.ptr(p.ep);
            Ok(())
        })
    }
}
