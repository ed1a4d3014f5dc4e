//! Common Service Points (DAT 2.0): dat_csp_create, dat_csp_query,
//! dat_csp_free.

use std::ptr;

use udat_core::handle::{CspHandle, EvdHandle, IaHandle, Kind};
use udat_core::{Comm, DatError, ErrorType};

use super::ep::address_in;
use super::{with, Arg};
use crate::instance::{invalid, Addr};
use crate::sys::*;
use crate::transport::Transport;

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
            let csp = cx.state.core.csp_create(IaHandle::from_raw(raw), &comm, &address, evd)?;
            *slot = cx.state.ptr(csp);
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
            let p = cx.state.core.csp_query(CspHandle::from_raw(raw), m.0)?;
            let kept =
                cx.state.csp_param.get_mut(raw.index() as usize).ok_or(DatError::of(ErrorType::InternalError))?;
            let comm = DAT_COMM { domain: p.comm.domain, type_: p.comm.socket_type, protocol: p.comm.protocol };
            *kept = (Addr(p.address), comm);
            let (address, comm) = (ptr::addr_of_mut!(kept.0).cast(), ptr::addr_of_mut!(kept.1));
            slot.ia_handle = (cx.instance.ia_out)(cx.state.ptr(p.ia));
            slot.comm = comm;
            slot.address_ptr = address;
            slot.evd_handle = cx.state.ptr(p.evd);
            Ok(())
        })
    })
}

/// dat_csp_free of `<dat2/dat.h>` (DAT 2.0).
pub(crate) unsafe fn csp_free<B: Transport>(csp: Arg<1, DAT_CSP_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `csp`'s provider word.
    as_csp(unsafe { with::<B>(csp, Kind::Psp, |cx, raw| cx.state.core.csp_free(CspHandle::from_raw(raw))) })
}
