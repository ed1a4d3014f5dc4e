//! Service points and connection requests, DAT 2.0's Common Service
//! Points among them.

use std::ptr;

use udat_core::handle::{CrHandle, CspHandle, EpHandle, EvdHandle, IaHandle, Kind, PspHandle, RspHandle};
use udat_core::types::PspFlags;
use udat_core::{Comm, DatError, ErrorType};

use super::arg::private_data;
use super::ep::address_in;
use super::{with, Arg};
use crate::instance::{invalid, Addr};
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
            let psp = cx.st.core.psp_create(IaHandle::from_raw(raw), conn_qual.0, evd, flags)?;
            *slot = cx.st.ptr(psp);
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
            let (psp, q) = cx.st.core.psp_create_any(IaHandle::from_raw(raw), evd, flags)?;
            *qual = q;
            *slot = cx.st.ptr(psp);
            Ok(())
        })
    }
}

/// dat_psp_free(3DAT).
pub(crate) unsafe fn psp_free<B: Transport>(psp: Arg<1, DAT_PSP_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `psp`'s provider word.
    unsafe { with::<B>(psp, Kind::Psp, |cx, raw| cx.st.core.psp_free(PspHandle::from_raw(raw))) }
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
            let p = cx.st.core.psp_query(PspHandle::from_raw(raw), m.0)?;
            slot.ia_handle = (cx.inst.ia_out)(cx.st.ptr(p.ia));
            slot.conn_qual = p.conn_qual;
            slot.evd_handle = cx.st.ptr(p.evd);
            slot.psp_flags = p.flags as DAT_PSP_FLAGS;
            Ok(())
        })
    }
}

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
            let rsp = cx.st.core.rsp_create(IaHandle::from_raw(raw), conn_qual.0, ep, evd)?;
            *slot = cx.st.ptr(rsp);
            Ok(())
        })
    }
}

/// dat_rsp_free(3DAT).
pub(crate) unsafe fn rsp_free<B: Transport>(rsp: Arg<1, DAT_RSP_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `rsp`'s provider word.
    unsafe { with::<B>(rsp, Kind::Rsp, |cx, raw| cx.st.core.rsp_free(RspHandle::from_raw(raw))) }
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
            let p = cx.st.core.rsp_query(RspHandle::from_raw(raw), m.0)?;
            slot.ia_handle = (cx.inst.ia_out)(cx.st.ptr(p.ia));
            slot.conn_qual = p.conn_qual;
            slot.evd_handle = cx.st.ptr(p.evd);
            slot.ep_handle = cx.st.ptr(p.ep);
            Ok(())
        })
    }
}

/// dat_cr_query(3DAT). The address and private data stay valid until the
/// CR is accepted or rejected.
pub(crate) unsafe fn cr_query<B: Transport>(
    cr: Arg<1, DAT_CR_HANDLE>,
    m: Arg<2, DAT_CR_PARAM_MASK>,
    param: Arg<3, *mut DAT_CR_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `cr`'s provider word.
    unsafe {
        with::<B>(cr, Kind::Cr, |cx, raw| {
            let slot = param.out()?;
            let h = CrHandle::from_raw(raw);
            let p = cx.st.core.cr_query(h, m.0)?;
            let data = cx.st.core.cr_private_data(h)?;
            slot.private_data = if data.is_empty() { ptr::null_mut() } else { data.as_ptr() as DAT_PVOID };
            let addr = &mut cx.st.cr_addr[raw.index() as usize];
            *addr = Addr(p.remote_ia_address);
            slot.remote_ia_address_ptr = ptr::addr_of_mut!(*addr).cast();
            slot.remote_port_qual = p.remote_port_qual;
            slot.private_data_size = p.private_data_size as DAT_COUNT;
            slot.local_ep_handle = cx.st.ptr(p.local_ep);
            Ok(())
        })
    }
}

/// dat_cr_accept(3DAT).
pub(crate) unsafe fn cr_accept<B: Transport>(
    cr: Arg<1, DAT_CR_HANDLE>,
    ep: Arg<2, DAT_EP_HANDLE>,
    pd_size: Arg<3, DAT_COUNT>,
    pd: Arg<4, DAT_PVOID>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `cr`'s provider word.
    unsafe {
        with::<B>(cr, Kind::Cr, |cx, raw| {
            let ep = EpHandle::from_raw(cx.raw_or_null(ep, Kind::Ep)?);
            let data = private_data(pd_size, pd)?;
            cx.st.core.cr_accept(CrHandle::from_raw(raw), ep, data)
        })
    }
}

/// dat_cr_reject(3DAT).
pub(crate) unsafe fn cr_reject<B: Transport>(
    cr: Arg<1, DAT_CR_HANDLE>,
    pd_size: Arg<2, DAT_COUNT>,
    pd: Arg<3, DAT_PVOID>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `cr`'s provider word.
    unsafe {
        with::<B>(cr, Kind::Cr, |cx, raw| {
            let data = private_data(pd_size, pd)?;
            cx.st.core.cr_reject(CrHandle::from_raw(raw), data)
        })
    }
}

/// dat_cr_handoff(3DAT).
pub(crate) unsafe fn cr_handoff<B: Transport>(
    cr: Arg<1, DAT_CR_HANDLE>,
    conn_qual: Arg<2, DAT_CONN_QUAL>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `cr`'s provider word.
    unsafe { with::<B>(cr, Kind::Cr, |cx, raw| cx.st.core.cr_handoff(CrHandle::from_raw(raw), conn_qual.0)) }
}

/// A CSP's C handle is a PSP's (CSPs live among the PSPs): a handle that
/// names no PSP is reported as naming no CSP.
fn as_csp(ret: DAT_RETURN) -> DAT_RETURN {
    if ret == invalid(Kind::Psp).to_raw() {
        invalid(Kind::Csp).to_raw()
    } else {
        ret
    }
}

/// dat_csp_create of `<dat2/dat.h>` (DAT 2.0): listen on a socket address,
/// its port included (`Provider::csp_create`).
pub(crate) unsafe fn csp_create<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    comm: Arg<2, *mut DAT_COMM>,
    address: Arg<3, DAT_IA_ADDRESS_PTR>,
    evd: Arg<4, DAT_EVD_HANDLE>,
    csp_out: Arg<5, *mut DAT_CSP_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word; the communicator and the
    // address are the consumer's, read as `input` and `address_in` say.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let c = comm.input()?;
            let address = address_in(address)?;
            let evd = EvdHandle::from_raw(cx.raw(evd, Kind::Evd)?);
            let slot = csp_out.out()?;
            let comm = Comm { domain: c.domain, socket_type: c.type_, protocol: c.protocol };
            let csp = cx.st.core.csp_create(IaHandle::from_raw(raw), &comm, &address, evd)?;
            *slot = cx.st.ptr(csp);
            Ok(())
        })
    }
}

/// dat_csp_query of `<dat2/dat.h>` (DAT 2.0). The communicator and the
/// address are kept in the provider, at the CSP's slot, until the next
/// query of a CSP there.
pub(crate) unsafe fn csp_query<B: Transport>(
    csp: Arg<1, DAT_CSP_HANDLE>,
    m: Arg<2, DAT_CSP_PARAM_MASK>,
    param: Arg<3, *mut DAT_CSP_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `csp`'s provider word.
    as_csp(unsafe {
        with::<B>(csp, Kind::Psp, |cx, raw| {
            let slot = param.out()?;
            let p = cx.st.core.csp_query(CspHandle::from_raw(raw), m.0)?;
            let kept = cx.st.csp_param.get_mut(raw.index() as usize).ok_or(DatError::of(ErrorType::InternalError))?;
            let comm = DAT_COMM { domain: p.comm.domain, type_: p.comm.socket_type, protocol: p.comm.protocol };
            *kept = (Addr(p.address), comm);
            let (address, comm) = (ptr::addr_of_mut!(kept.0).cast(), ptr::addr_of_mut!(kept.1));
            slot.ia_handle = (cx.inst.ia_out)(cx.st.ptr(p.ia));
            slot.comm = comm;
            slot.address_ptr = address;
            slot.evd_handle = cx.st.ptr(p.evd);
            Ok(())
        })
    })
}

/// dat_csp_free of `<dat2/dat.h>` (DAT 2.0).
pub(crate) unsafe fn csp_free<B: Transport>(csp: Arg<1, DAT_CSP_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `csp`'s provider word.
    as_csp(unsafe { with::<B>(csp, Kind::Psp, |cx, raw| cx.st.core.csp_free(CspHandle::from_raw(raw))) })
}
