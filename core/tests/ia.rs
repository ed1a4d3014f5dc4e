//! dat_ia_open(3DAT), dat_ia_close(3DAT), dat_ia_query(3DAT),
//! dat_get_handle_type(3DAT), dat_set/get_consumer_context(3DAT),
//! dat_strerror(3DAT), and handle checking across all objects.
mod common;
use common::*;
use udat_core::types::*;
use udat_core::*;
use udat_testkit::mock::MOCK_IA_NAME;

#[test]
fn dat_ia_open_unknown_name_is_provider_not_found() {
    let mut p = provider();
    assert_eq!(ty(p.ia_open(b"nosuch", AsyncEvd::Create { min_qlen: 4 })), ErrorType::ProviderNotFound);
    assert_eq!(p.backend().live_ias, 0);
}

#[test]
fn dat_ia_open_empty_or_overlong_name_is_invalid_parameter() {
    let mut p = provider();
    assert_eq!(ty(p.ia_open(b"", AsyncEvd::Create { min_qlen: 4 })), ErrorType::InvalidParameter);
    let long = [b'x'; MAX_IA_NAME + 1];
    assert_eq!(ty(p.ia_open(&long, AsyncEvd::Create { min_qlen: 4 })), ErrorType::InvalidParameter);
}

#[test]
fn dat_ia_open_creates_async_evd_of_at_least_min_qlen() {
    let mut p = provider();
    let (ia, evd) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 5 }).unwrap();
    let param = p.evd_query(evd, EVD_FIELD_ALL).unwrap();
    assert!(param.evd_qlen >= 5);
    assert!(param.evd_flags.contains(EvdFlags::ASYNC));
    assert_eq!(param.ia, ia);
    // "The Asynchronous Event Dispatcher (async_evd_handle) is created with
    // no CNO."
    assert!(param.cno.is_null());
    assert_eq!(p.ia_query(ia).unwrap().0, AsyncEvdRef::Handle(evd));
}

#[test]
fn dat_ia_open_consumer_async_evd_must_be_a_live_async_evd() {
    let mut fx = Fx::new();
    let stale = fx.p.evd_create(fx.ia, 4, CnoHandle::NULL, EvdFlags::ASYNC).unwrap();
    fx.p.evd_free(stale).unwrap();
    let e = fx.p.ia_open(MOCK_IA_NAME, AsyncEvd::Use(stale)).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandleEvdAsync));
    assert_eq!(ty(fx.p.ia_open(MOCK_IA_NAME, AsyncEvd::Use(fx.dto_evd))), ErrorType::InvalidHandle);
    let (ia2, evd) = fx.p.ia_open(MOCK_IA_NAME, AsyncEvd::Use(fx.async_evd)).unwrap();
    assert_eq!(evd, fx.async_evd);
    // "If async_evd_handle was passed in by the Consumer at dat_ia_open(),
    // this handle is not destroyed."
    fx.p.ia_close(ia2, CloseFlags::Graceful).unwrap();
    assert!(fx.p.evd_query(fx.async_evd, 0).is_ok());
}

#[test]
fn dat_ia_open_async_exists_queries_out_of_scope() {
    let mut p = provider();
    let (ia, evd) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Exists).unwrap();
    assert!(evd.is_null());
    assert_eq!(p.ia_query(ia).unwrap().0, AsyncEvdRef::OutOfScope);
}

#[test]
fn dat_ia_open_zero_async_qlen_is_invalid_parameter() {
    let mut p = provider();
    assert_eq!(ty(p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 0 })), ErrorType::InvalidParameter);
}

#[test]
fn dat_ia_close_graceful_refused_while_objects_remain() {
    let mut p = provider();
    let (ia, _) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 4 }).unwrap();
    let pz = p.pz_create(ia).unwrap();
    let e = p.ia_close(ia, CloseFlags::Graceful).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateIaInUse));
    // The IA and the PZ are intact.
    assert!(p.pz_query(pz, PZ_FIELD_ALL).is_ok());
    p.pz_free(pz).unwrap();
    // "Because the Consumer did not create async EVD explicitly, the
    // Consumer does not need to destroy it for graceful close to succeed."
    p.ia_close(ia, CloseFlags::Graceful).unwrap();
    assert_eq!(p.backend().live_ias, 0);
}

#[test]
fn dat_ia_close_abrupt_destroys_everything_without_leaks() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 64)], 1, CompletionFlags::DEFAULT).unwrap();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 128), MemPriv::REMOTE_READ, ep, 2, CompletionFlags::DEFAULT).unwrap();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    fx.p.evd_modify_cno(fx.dto_evd, cno).unwrap();
    let (psp, _cr) = fx.request(7, PspFlags::Provider);
    let rsp_ep = fx.ep();
    let rsp = fx.p.rsp_create(fx.ia, 8, rsp_ep, fx.cr_evd).unwrap();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &SrqAttr { max_recv_dtos: 4, max_recv_iov: 1, low_watermark: 0 }).unwrap();
    fx.p.ia_close(fx.ia, CloseFlags::Abrupt).unwrap();
    let b = fx.p.backend();
    assert_eq!((b.live_ias, b.live_pds, b.live_mrs, b.live_mws), (0, 0, 0, 0));
    assert_eq!((b.live_qps(), b.live_cqs()), (0, 0));
    assert_eq!(b.listeners().count(), 0);
    for h in [
        AnyHandle::from(ep),
        rmr.into(),
        cno.into(),
        psp.into(),
        rsp.into(),
        srq.into(),
        fx.ia.into(),
        fx.pz.into(),
        fx.lmr.lmr.into(),
        fx.async_evd.into(),
    ] {
        assert!(!fx.p.is_live(h), "{h:?} survived");
    }
}

/// An IA's close finds its own objects, however they interleave in the
/// slabs with another IA's and whatever slots churn has moved them to:
/// graceful close counts exactly them, abrupt close frees exactly them.
#[test]
fn dat_ia_close_frees_its_own_objects_and_leaves_another_ias_alone() {
    let mut p = provider();
    let (a, _) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 4 }).unwrap();
    let (b, _) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 4 }).unwrap();
    let (mut kept, mut of_a) = (Vec::new(), Vec::new());
    // Every PZ slot used once, so that the PZs below take freed slots.
    for _ in 0..32 {
        let pz = p.pz_create(a).unwrap();
        p.pz_free(pz).unwrap();
    }
    // 28 of the 32 slots of a kind, with the two async EVDs.
    for turn in 0..14u64 {
        // Churn moves the next objects onto slots freed from either IA.
        let (ia, other) = if turn % 2 == 0 { (a, b) } else { (b, a) };
        let pz = p.pz_create(ia).unwrap();
        let gone = p.pz_create(other).unwrap();
        let evd = p.evd_create(ia, 4, CnoHandle::NULL, EvdFlags::DTO).unwrap();
        p.pz_free(gone).unwrap();
        if ia == b {
            kept.extend([AnyHandle::from(pz), evd.into()]);
        } else {
            of_a.push((pz, evd));
        }
    }
    for (n, (pz, evd)) in of_a.iter().enumerate() {
        for left in [2, 1] {
            let e = p.ia_close(a, CloseFlags::Graceful).unwrap_err();
            assert_eq!(e.subtype(), Subtype::InvalidStateIaInUse, "A's pair {n}, {left} left");
            if left == 2 {
                p.evd_free(*evd).unwrap();
            } else {
                p.pz_free(*pz).unwrap();
            }
        }
    }
    let b_pz = p.pz_create(b).unwrap();
    p.ia_close(a, CloseFlags::Graceful).unwrap();
    assert!(kept.iter().all(|h| p.is_live(*h)), "B lost an object to A's close");
    p.ia_close(b, CloseFlags::Abrupt).unwrap();
    assert!(!kept.iter().any(|h| p.is_live(*h)) && !p.is_live(b_pz.into()));
    assert_eq!((p.backend().live_ias, p.backend().live_pds, p.backend().live_cqs()), (0, 0, 0));
}

#[test]
fn dat_ia_close_abrupt_aborts_an_evd_waiter() {
    let mut fx = Fx::new();
    let wait = fx.p.evd_wait_begin(fx.dto_evd, TIMEOUT_INFINITE, 1).unwrap();
    fx.p.ia_close(fx.ia, CloseFlags::Abrupt).unwrap();
    // "All direct waiters on all EVDs are also unblocked and return with
    // DAT_ABORT."
    assert_eq!(ty(fx.p.evd_wait_poll(&wait)), ErrorType::Abort);
}

#[test]
fn dat_ia_close_abrupt_wakes_cno_waiters_with_null() {
    let mut fx = Fx::new();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    fx.p.evd_modify_cno(fx.dto_evd, cno).unwrap();
    let wait = fx.p.cno_wait_begin(cno, TIMEOUT_INFINITE).unwrap();
    fx.p.ia_close(fx.ia, CloseFlags::Abrupt).unwrap();
    assert_eq!(fx.p.cno_wait_poll(&wait), Ok(CnoStep::Woken(EvdHandle::NULL)));
}

#[test]
fn dat_ia_close_flags_other_than_abrupt_or_graceful_are_refused() {
    // The C ABI maps an unknown flag value to DAT_INVALID_PARAMETER through
    // this decoder.
    assert_eq!(CloseFlags::from_raw(0), Some(CloseFlags::Abrupt));
    assert_eq!(CloseFlags::from_raw(1), Some(CloseFlags::Graceful));
    assert_eq!(CloseFlags::from_raw(2), None);
}

#[test]
fn dat_ia_close_stale_handle_is_invalid_handle() {
    let mut p = provider();
    let (ia, _) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 4 }).unwrap();
    p.ia_close(ia, CloseFlags::Abrupt).unwrap();
    assert_eq!(ty(p.ia_close(ia, CloseFlags::Abrupt)), ErrorType::InvalidHandle);
    assert_eq!(ty(p.ia_query(ia)), ErrorType::InvalidHandle);
}

#[test]
fn dat_ia_query_reports_limits_within_the_cores_capacity() {
    let fx = Fx::new();
    let (_, attr) = fx.p.ia_query(fx.ia).unwrap();
    assert!(attr.max_eps <= 32 && attr.max_evds <= 32 && attr.max_pzs <= 32);
    assert!(attr.max_evd_qlen <= 512);
    assert!(attr.max_private_data_size >= 64);
    assert_eq!(fx.p.ia_name(fx.ia).unwrap(), MOCK_IA_NAME);
}

#[test]
fn dat_get_handle_type_names_every_kind() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let (psp, cr) = fx.request(9, PspFlags::Consumer);
    for (h, kind) in [
        (AnyHandle::from(fx.ia), Kind::Ia),
        (fx.pz.into(), Kind::Pz),
        (fx.lmr.lmr.into(), Kind::Lmr),
        (rmr.into(), Kind::Rmr),
        (fx.dto_evd.into(), Kind::Evd),
        (cno.into(), Kind::Cno),
        (ep.into(), Kind::Ep),
        (psp.into(), Kind::Psp),
        (cr.into(), Kind::Cr),
    ] {
        assert_eq!(fx.p.get_handle_type(h), Ok(kind));
    }
}

#[test]
fn dat_get_handle_type_refuses_stale_and_null_handles() {
    let mut fx = Fx::new();
    let pz = fx.p.pz_create(fx.ia).unwrap();
    fx.p.pz_free(pz).unwrap();
    assert_eq!(ty(fx.p.get_handle_type(pz.into())), ErrorType::InvalidHandle);
    assert_eq!(ty(fx.p.get_handle_type(PzHandle::NULL.into())), ErrorType::InvalidHandle);
}

#[test]
fn dat_set_consumer_context_replaces_and_get_returns_it() {
    let mut fx = Fx::new();
    let h = AnyHandle::from(fx.pz);
    assert_eq!(fx.p.get_consumer_context(h), Ok(0));
    fx.p.set_consumer_context(h, 42).unwrap();
    fx.p.set_consumer_context(h, 43).unwrap();
    assert_eq!(fx.p.get_consumer_context(h), Ok(43));
    // Every kind keeps its own.
    fx.p.set_consumer_context(fx.ia.into(), 7).unwrap();
    assert_eq!(fx.p.get_consumer_context(h), Ok(43));
}

#[test]
fn dat_get_consumer_context_stale_handle_is_invalid_handle() {
    let mut fx = Fx::new();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    fx.p.cno_free(cno).unwrap();
    assert_eq!(ty(fx.p.get_consumer_context(cno.into())), ErrorType::InvalidHandle);
    assert_eq!(ty(fx.p.set_consumer_context(cno.into(), 1)), ErrorType::InvalidHandle);
}

#[test]
fn wrong_kind_handle_is_invalid_handle() {
    let fx = Fx::new();
    // The PZ's slot index and generation presented as a CNO: no live CNO
    // has them.
    let wrong = AnyHandle { kind: Kind::Cno, raw: fx.pz.raw() };
    assert_eq!(ty(fx.p.get_handle_type(wrong)), ErrorType::InvalidHandle);
    assert_eq!(ty(fx.p.cno_query(CnoHandle::from_raw(fx.pz.raw()), 0)), ErrorType::InvalidHandle);
    // A handle means nothing to another provider instance with no objects.
    let mut other = provider();
    assert_eq!(ty(other.pz_create(fx.ia)), ErrorType::InvalidHandle);
}

#[test]
fn stale_handle_refused_after_its_slot_is_reused() {
    let mut fx = Fx::new();
    let old = fx.p.cno_create(fx.ia, None).unwrap();
    fx.p.cno_free(old).unwrap();
    // Fill the CNO slab so the old slot is certainly reused.
    let mut fresh = Vec::new();
    while let Ok(c) = fx.p.cno_create(fx.ia, None) {
        fresh.push(c);
    }
    assert!(fresh.iter().any(|c| c.raw().index() == old.raw().index()));
    assert_eq!(ty(fx.p.cno_free(old)), ErrorType::InvalidHandle);
    assert_eq!(fx.p.cno_free(fresh[0]), Ok(()));
}

#[test]
fn capacity_exhaustion_is_insufficient_resources_and_harms_nothing() {
    let mut fx = Fx::new();
    let mut pzs = Vec::new();
    let err = loop {
        match fx.p.pz_create(fx.ia) {
            Ok(pz) => pzs.push(pz),
            Err(e) => break e,
        }
    };
    assert_eq!(err.error_type(), ErrorType::InsufficientResources);
    assert_eq!(fx.p.backend().live_pds as usize, pzs.len() + 1);
    for pz in pzs {
        fx.p.pz_free(pz).unwrap();
    }
    assert!(fx.p.pz_query(fx.pz, 0).is_ok());
}

#[test]
fn dat_strerror_gives_type_and_subtype_names() {
    let raw = DatError::invalid_state(Subtype::InvalidStateEpConnected).to_raw();
    assert_eq!(raw, 0x8000_0000 | 0x0007_0000 | 51);
    assert_eq!(udat_core::error::strerror(raw), Ok(("DAT_INVALID_STATE", "DAT_INVALID_STATE_EP_CONNECTED")));
    assert_eq!(ty(udat_core::error::strerror(0x0123_0000)), ErrorType::InvalidParameter);
}
