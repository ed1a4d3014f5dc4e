//! Connection requests: dat_cr_query(3DAT), dat_cr_accept(3DAT),
//! dat_cr_reject(3DAT), dat_cr_handoff(3DAT).

use std::ptr;

use udat_core::handle::{CrHandle, EpHandle, Kind};

use super::arg::private_data;
use super::{with, Arg};
use crate::instance::Addr;
use crate::sys::*;
use crate::transport::Transport;

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
            let p = cx.state.core.cr_query(h, m.0)?;
            let data = cx.state.core.cr_private_data(h)?;
            slot.private_data = if data.is_empty() { ptr::null_mut() } else { data.as_ptr() as DAT_PVOID };
            let addr = &mut cx.state.cr_addr[raw.index() as usize];
            *addr = Addr(p.remote_ia_address);
            slot.remote_ia_address_ptr = ptr::addr_of_mut!(*addr).cast();
            slot.remote_port_qual = p.remote_port_qual;
            slot.private_data_size = p.private_data_size as DAT_COUNT;
            slot.local_ep_handle = cx.state.ptr(p.local_ep);
            // The EP a `DAT_PSP_PROVIDER` PSP made is named here, where its
            // consumer learns its handle: the lanes take the completions
            // of a named EP alone (`udat_core::Provider::lane_dequeue_cq`).
            // One its consumer has freed since is no longer there to name
            // (`ep_name` refuses its handle), and the query answers as
            // before.
            if !p.local_ep.is_null() {
                let _ = cx.state.core.ep_name(p.local_ep, slot.local_ep_handle as usize as u64);
            }
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
            cx.state.core.cr_accept(CrHandle::from_raw(raw), ep, data)
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
            cx.state.core.cr_reject(CrHandle::from_raw(raw), data)
        })
    }
}

/// dat_cr_handoff(3DAT).
pub(crate) unsafe fn cr_handoff<B: Transport>(
    cr: Arg<1, DAT_CR_HANDLE>,
    conn_qual: Arg<2, DAT_CONN_QUAL>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `cr`'s provider word.
    unsafe { with::<B>(cr, Kind::Cr, |cx, raw| cx.state.core.cr_handoff(CrHandle::from_raw(raw), conn_qual.0)) }
}
