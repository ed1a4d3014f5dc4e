//! Shared receive queues.

use udat_core::handle::{IaHandle, Kind, PzHandle, SrqHandle};
use udat_core::types::SrqAttr;

use super::{count, iov, out, with};
use crate::instance::Transport;
use crate::sys::*;

/// dat_srq_create(3DAT).
pub unsafe extern "C" fn srq_create<B: Transport>(
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    attr: *mut DAT_SRQ_ATTR,
    srq_out: *mut DAT_SRQ_HANDLE,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let pz = PzHandle::from_raw(cx.raw(pz, Kind::Pz)?);
            let a = super::input(attr, 3)?;
            let attr = SrqAttr {
                max_recv_dtos: count(a.max_recv_dtos, 3)?,
                max_recv_iov: count(a.max_recv_iov, 3)?,
                low_watermark: count(a.low_watermark, 3)?,
            };
            let slot = out(srq_out, 4)?;
            let srq = cx.st.core.srq_create(IaHandle::from_raw(raw), pz, &attr)?;
            *slot = cx.st.ptr(srq);
            Ok(())
        })
    }
}

/// dat_srq_free(3DAT).
pub unsafe extern "C" fn srq_free<B: Transport>(srq: DAT_SRQ_HANDLE) -> DAT_RETURN {
    // SAFETY: dispatched on `srq`'s provider word.
    unsafe { with::<B>(srq, Kind::Srq, |cx, raw| cx.st.core.srq_free(SrqHandle::from_raw(raw))) }
}

/// dat_srq_post_recv(3DAT).
pub unsafe extern "C" fn srq_post_recv<B: Transport>(
    srq: DAT_SRQ_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
) -> DAT_RETURN {
    // SAFETY: dispatched on `srq`'s provider word; a cookie is 64 bits.
    unsafe {
        with::<B>(srq, Kind::Srq, |cx, raw| {
            cx.st.core.srq_post_recv(SrqHandle::from_raw(raw), iov(segs, n, 2)?, cookie.as_64)
        })
    }
}

/// dat_srq_query(3DAT).
pub unsafe extern "C" fn srq_query<B: Transport>(
    srq: DAT_SRQ_HANDLE,
    m: DAT_SRQ_PARAM_MASK,
    param: *mut DAT_SRQ_PARAM,
) -> DAT_RETURN {
    // SAFETY: dispatched on `srq`'s provider word.
    unsafe {
        with::<B>(srq, Kind::Srq, |cx, raw| {
            let slot = out(param, 3)?;
            let p = cx.st.core.srq_query(SrqHandle::from_raw(raw), m)?;
            let int = |v: u32| v.min(i32::MAX as u32) as DAT_COUNT;
            slot.ia_handle = (cx.inst.ia_out)(cx.st.ptr(p.ia));
            slot.srq_state = DAT_SRQ_STATE_OPERATIONAL;
            slot.pz_handle = cx.st.ptr(p.pz);
            slot.max_recv_dtos = int(p.max_recv_dtos);
            slot.max_recv_iov = int(p.max_recv_iov);
            slot.low_watermark = int(p.low_watermark);
            slot.available_dto_count = int(p.available_dto_count);
            slot.outstanding_dto_count = int(p.outstanding_dto_count);
            Ok(())
        })
    }
}

/// dat_srq_resize(3DAT).
pub unsafe extern "C" fn srq_resize<B: Transport>(srq: DAT_SRQ_HANDLE, max: DAT_COUNT) -> DAT_RETURN {
    // SAFETY: dispatched on `srq`'s provider word.
    unsafe { with::<B>(srq, Kind::Srq, |cx, raw| cx.st.core.srq_resize(SrqHandle::from_raw(raw), count(max, 2)?)) }
}

/// dat_srq_set_lw(3DAT).
pub unsafe extern "C" fn srq_set_lw<B: Transport>(srq: DAT_SRQ_HANDLE, lw: DAT_COUNT) -> DAT_RETURN {
    // SAFETY: dispatched on `srq`'s provider word.
    unsafe { with::<B>(srq, Kind::Srq, |cx, raw| cx.st.core.srq_set_lw(SrqHandle::from_raw(raw), count(lw, 2)?)) }
}
