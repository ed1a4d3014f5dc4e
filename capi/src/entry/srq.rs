//! Shared receive queues.

use udat_core::handle::{IaHandle, Kind, PzHandle, SrqHandle};
use udat_core::types::SrqAttr;
use udat_core::Door;

use super::arg::{iov, lane_segment};
use super::{lane_or, shared_lane_or, with, Arg, Entered, LaneHandle};
use crate::instance::{invalid, Core, Instance};
use crate::lock::LaneLock;
use crate::sys::*;
use crate::transport::Transport;

/// dat_srq_create(3DAT).
pub(crate) unsafe fn srq_create<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    pz: Arg<2, DAT_PZ_HANDLE>,
    attr: Arg<3, *mut DAT_SRQ_ATTR>,
    srq_out: Arg<4, *mut DAT_SRQ_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let pz = PzHandle::from_raw(cx.raw(pz, Kind::Pz)?);
            let a = attr.input()?;
            let wanted = SrqAttr {
                max_recv_dtos: attr.field_count(a.max_recv_dtos)?,
                max_recv_iov: attr.field_count(a.max_recv_iov)?,
                low_watermark: attr.field_count(a.low_watermark)?,
            };
            let slot = srq_out.out()?;
            let srq = cx.state.core.srq_create(IaHandle::from_raw(raw), pz, &wanted)?;
            *slot = cx.state.ptr(srq);
            Ok(())
        })
    }
}

/// dat_srq_free(3DAT).
pub(crate) unsafe fn srq_free<B: Transport>(srq: Arg<1, DAT_SRQ_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `srq`'s provider word.
    unsafe { with::<B>(srq, Kind::Srq, |cx, raw| cx.state.core.srq_free(SrqHandle::from_raw(raw))) }
}

/// dat_srq_post_recv(3DAT). A post of one segment tries its lane first
/// ([`Door::lane_srq_recv`]). A provider that shares its state among
/// threads posts with the state shared and only the SRQ locked, through
/// [`Provider::locked`](udat_core::Provider::locked)
/// ([`udat_core::shared`]), the same [`Door`]: the checks and their
/// errors are the same either way.
#[inline(always)]
pub(crate) unsafe fn srq_post_recv<B: Transport, const SHARES: bool>(
    srq: Arg<1, DAT_SRQ_HANDLE>,
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
    cookie: Arg<4, DAT_DTO_COOKIE>,
) -> DAT_RETURN {
    let h = srq.0;
    if h.is_null() {
        return invalid(Kind::Srq).to_raw();
    }
    // SAFETY: a non-null handle dispatched to this transport; a cookie is
    // 64 bits.
    let (instance, cookie) = unsafe { (Instance::<B>::of(h), cookie.0.as_64) };
    debug_assert_eq!(instance.shares, SHARES, "the slot of the instance's own table");
    if !SHARES {
        let lane = move |core: &mut Core<B>, srq: LaneHandle<'_>| {
            // SAFETY: `segs` is null or holds `n` triplets (the call's
            // contract).
            let seg = unsafe { lane_segment(n, segs) }.copied();
            seg.is_some_and(|seg| {
                core.lane_srq_recv(srq.index(), |g| srq.matches_generation(srq.index(), g), &seg, cookie)
            })
        };
        let ordinary = move |cx: &mut Entered<B>, raw| {
            // SAFETY: as above.
            cx.state.core.srq_post_recv(SrqHandle::from_raw(raw), unsafe { iov(n, segs) }?, cookie)
        };
        // SAFETY: the provider does not share (`SHARES`, its own table's).
        return unsafe { lane_or(instance, h, Kind::Srq, lane, ordinary) };
    }
    // SAFETY: the provider shares (`SHARES`), and each closure changes only
    // the SRQ, whose lock the door takes, with no `&mut` to the state
    // (`shared_lane_or`'s contract), which is `Provider::locked`'s; `segs`
    // is null or holds `n` triplets.
    unsafe {
        shared_lane_or(
            instance,
            h,
            Kind::Srq,
            #[inline(always)]
            move |core, srq| {
                let seg = lane_segment(n, segs);
                seg.is_some_and(|seg| {
                    core.locked(LaneLock).lane_srq_recv(
                        srq.index(),
                        |g| srq.matches_generation(srq.index(), g),
                        seg,
                        cookie,
                    )
                })
            },
            |core, raw| {
                core.locked(instance.call_lock()).srq_post_recv(SrqHandle::from_raw(raw), iov(n, segs)?, cookie)
            },
        )
    }
}

/// dat_srq_query(3DAT).
pub(crate) unsafe fn srq_query<B: Transport>(
    srq: Arg<1, DAT_SRQ_HANDLE>,
    m: Arg<2, DAT_SRQ_PARAM_MASK>,
    param: Arg<3, *mut DAT_SRQ_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `srq`'s provider word.
    unsafe {
        with::<B>(srq, Kind::Srq, |cx, raw| {
            let slot = param.out()?;
            let p = cx.state.core.srq_query(SrqHandle::from_raw(raw), m.0)?;
            let int = |v: u32| v.min(i32::MAX as u32) as DAT_COUNT;
            slot.ia_handle = (cx.instance.ia_out)(cx.state.ptr(p.ia));
            slot.srq_state = DAT_SRQ_STATE_OPERATIONAL;
            slot.pz_handle = cx.state.ptr(p.pz);
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
pub(crate) unsafe fn srq_resize<B: Transport>(srq: Arg<1, DAT_SRQ_HANDLE>, max: Arg<2, DAT_COUNT>) -> DAT_RETURN {
    // SAFETY: dispatched on `srq`'s provider word.
    unsafe { with::<B>(srq, Kind::Srq, |cx, raw| cx.state.core.srq_resize(SrqHandle::from_raw(raw), max.count()?)) }
}

/// dat_srq_set_lw(3DAT).
pub(crate) unsafe fn srq_set_lw<B: Transport>(srq: Arg<1, DAT_SRQ_HANDLE>, lw: Arg<2, DAT_COUNT>) -> DAT_RETURN {
    // SAFETY: dispatched on `srq`'s provider word.
    unsafe { with::<B>(srq, Kind::Srq, |cx, raw| cx.state.core.srq_set_lw(SrqHandle::from_raw(raw), lw.count()?)) }
}
