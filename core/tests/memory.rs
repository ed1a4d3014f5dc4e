//! dat_pz_create/free/query(3DAT), dat_lmr_create/free/query(3DAT),
//! dat_lmr_sync_rdma_read/write(3DAT), dat_rmr_create/bind/free/query(3DAT).
mod common;
use common::*;
use udat_core::types::*;
use udat_core::*;
use udat_testkit::mock::MOCK_IA_NAME;

#[test]
fn dat_pz_create_stale_ia_is_invalid_handle() {
    let mut fx = Fx::new();
    let ia = fx.ia;
    fx.p.ia_close(ia, CloseFlags::Abrupt).unwrap();
    let e = fx.p.pz_create(ia).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandleIa));
}

#[test]
fn dat_pz_free_refused_while_lmr_uses_it() {
    let mut fx = Fx::new();
    let e = fx.p.pz_free(fx.pz).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStatePzInUse));
    fx.p.lmr_free(fx.lmr.lmr).unwrap();
    fx.p.pz_free(fx.pz).unwrap();
}

#[test]
fn dat_pz_free_refused_while_ep_rmr_or_srq_uses_it() {
    let mut fx = Fx::new();
    let pz = fx.p.pz_create(fx.ia).unwrap();
    let ep = fx.p.ep_create(fx.ia, pz, EvdHandle::NULL, EvdHandle::NULL, EvdHandle::NULL, None).unwrap();
    let rmr = fx.p.rmr_create(pz).unwrap();
    let srq = fx.p.srq_create(fx.ia, pz, &SrqAttr { max_recv_dtos: 4, max_recv_iov: 1, low_watermark: 0 }).unwrap();
    assert_eq!(ty(fx.p.pz_free(pz)), ErrorType::InvalidState);
    fx.p.ep_free(ep).unwrap();
    assert_eq!(ty(fx.p.pz_free(pz)), ErrorType::InvalidState);
    fx.p.rmr_free(rmr).unwrap();
    assert_eq!(ty(fx.p.pz_free(pz)), ErrorType::InvalidState);
    fx.p.srq_free(srq).unwrap();
    fx.p.pz_free(pz).unwrap();
    // "Use of the handle of the destroyed Protection Zone in any subsequent
    // operation except for dat_pz_free() fails."
    assert_eq!(ty(fx.p.pz_query(pz, PZ_FIELD_ALL)), ErrorType::InvalidHandle);
    assert_eq!(ty(fx.p.pz_free(pz)), ErrorType::InvalidHandle);
}

#[test]
fn dat_pz_query_mask_outside_all_is_invalid_parameter() {
    let fx = Fx::new();
    assert_eq!(fx.p.pz_query(fx.pz, PZ_FIELD_ALL).unwrap().ia, fx.ia);
    assert_eq!(ty(fx.p.pz_query(fx.pz, 0x2)), ErrorType::InvalidParameter);
}

#[test]
fn dat_lmr_create_no_rmr_context_without_remote_privileges() {
    let mut fx = Fx::new();
    let local =
        fx.p.mock_lmr_create(
            fx.ia,
            MemType::Virtual { address: 0x5000, length: 64 },
            fx.pz,
            MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE,
        )
        .unwrap();
    assert_eq!(local.rmr_context, None);
    assert!(fx.lmr.rmr_context.is_some());
    let remote = fx.lmr_of_64(0x5000, fx.pz, MemPriv::REMOTE_WRITE);
    assert!(remote.rmr_context.is_some());
}

#[test]
fn dat_lmr_create_reports_registered_region() {
    let fx = Fx::new();
    assert_eq!((fx.lmr.registered_address, fx.lmr.registered_size), (BUF, BUF_LEN));
    let q = fx.p.lmr_query(fx.lmr.lmr, LMR_FIELD_ALL).unwrap();
    assert_eq!(q.lmr_context, fx.lmr.lmr_context);
    assert_eq!(q.pz, fx.pz);
    assert_eq!(q.mem_privileges, MemPriv::ALL);
}

#[test]
fn dat_lmr_create_bad_privileges_or_length_is_invalid_parameter() {
    let mut fx = Fx::new();
    let region = MemType::Virtual { address: 0x5000, length: 64 };
    assert_eq!(ty(fx.p.mock_lmr_create(fx.ia, region, fx.pz, MemPriv(0x4))), ErrorType::InvalidParameter);
    let empty = MemType::Virtual { address: 0x5000, length: 0 };
    assert_eq!(ty(fx.p.mock_lmr_create(fx.ia, empty, fx.pz, MemPriv::ALL)), ErrorType::InvalidParameter);
    let wraps = MemType::Virtual { address: u64::MAX - 4, length: 64 };
    assert_eq!(ty(fx.p.mock_lmr_create(fx.ia, wraps, fx.pz, MemPriv::ALL)), ErrorType::InvalidParameter);
    assert_eq!(fx.p.backend().live_mrs, 1);
}

/// With every LMR slot taken, dat_lmr_create is refused with
/// `DAT_INSUFFICIENT_RESOURCES` (`DAT_RESOURCE_MEMORY_REGION`) before the
/// region is registered; a free makes room again.
#[test]
fn dat_lmr_create_with_every_slot_taken_registers_nothing() {
    let mut fx = Fx::new();
    let region = MemType::Virtual { address: 0x5000, length: 64 };
    let mut made = Vec::new();
    let full = loop {
        match fx.p.mock_lmr_create(fx.ia, region, fx.pz, MemPriv::ALL) {
            Ok(lmr) => made.push(lmr),
            Err(e) => break e,
        }
        assert!(made.len() < 1024, "the LMR table never fills");
    };
    assert_eq!((full.error_type(), full.subtype()), (ErrorType::InsufficientResources, Subtype::ResourceMemoryRegion));
    let registrations = fx.p.backend().registrations;
    let again = fx.p.mock_lmr_create(fx.ia, region, fx.pz, MemPriv::ALL).unwrap_err();
    assert_eq!(again.error_type(), ErrorType::InsufficientResources);
    assert_eq!(fx.p.backend().registrations, registrations);
    assert_eq!(fx.p.backend().live_mrs, made.len() as u32 + 1);
    fx.p.lmr_free(made[0].lmr).unwrap();
    fx.p.mock_lmr_create(fx.ia, region, fx.pz, MemPriv::ALL).unwrap();
}

#[test]
fn dat_lmr_create_pz_of_another_ia_is_invalid_handle() {
    let mut fx = Fx::new();
    let (ia2, _) = fx.p.ia_open(udat_testkit::mock::MOCK_IA_NAME, AsyncEvd::Exists).unwrap();
    let region = MemType::Virtual { address: 0x5000, length: 64 };
    assert_eq!(ty(fx.p.mock_lmr_create(ia2, region, fx.pz, MemPriv::ALL)), ErrorType::InvalidHandle);
}

#[test]
fn dat_lmr_create_over_an_lmr_takes_its_region() {
    let mut fx = Fx::new();
    let pz2 = fx.p.pz_create(fx.ia).unwrap();
    let over = fx.p.mock_lmr_create(fx.ia, MemType::Lmr(fx.lmr.lmr), pz2, MemPriv::LOCAL_READ).unwrap();
    assert_eq!((over.registered_address, over.registered_size), (BUF, BUF_LEN));
    assert_ne!(over.lmr_context, fx.lmr.lmr_context);
}

#[test]
fn dat_lmr_free_refused_while_rmr_bound() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 64), MemPriv::REMOTE_WRITE, ep, 5, CompletionFlags::DEFAULT).unwrap();
    let e = fx.p.lmr_free(fx.lmr.lmr).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateLmrInUse));
    fx.p.rmr_free(rmr).unwrap();
    fx.p.lmr_free(fx.lmr.lmr).unwrap();
    assert_eq!(fx.p.backend().live_mrs, 0);
}

#[test]
fn dat_lmr_free_then_local_use_is_protection_violation() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let seg = fx.seg(0, 16);
    fx.p.lmr_free(fx.lmr.lmr).unwrap();
    // "Any DTO operation that uses the destroyed LMR after the
    // dat_lmr_free() is completed shall fail and report a protection
    // violation."
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[seg], 1, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::ProtectionViolation
    );
    assert_eq!(ty(fx.p.ep_post_recv(ep, &[seg], 1, CompletionFlags::DEFAULT)), ErrorType::ProtectionViolation);
    assert_eq!(ty(fx.p.lmr_query(fx.lmr.lmr, 0)), ErrorType::InvalidHandle);
    // A new LMR in the same slot does not revive the old context.
    let again =
        fx.p.mock_lmr_create(fx.ia, MemType::Virtual { address: BUF, length: BUF_LEN }, fx.pz, MemPriv::ALL).unwrap();
    assert_ne!(again.lmr_context, seg.lmr_context);
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[seg], 1, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::ProtectionViolation
    );
}

/// An `lmr_context` comes from a 32-bit sequence, not from the slot's
/// generation: with 4 slots, a freed context stays refused through 300,000
/// re-registrations (a 16-bit generation beside the slot index repeated
/// after 4 × 65,536).
#[test]
fn a_freed_lmr_context_stays_refused_through_many_registrations() {
    let mut p: Box<Provider<udat_testkit::mock::MockBackend, Inline<4, 64>>> =
        Box::new(Provider::new(udat_testkit::mock::MockBackend::new()));
    let (ia, _) = p.ia_open(udat_testkit::mock::MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 8 }).unwrap();
    let pz = p.pz_create(ia).unwrap();
    let region = MemType::Virtual { address: BUF, length: BUF_LEN };
    let first = p.mock_lmr_create(ia, region, pz, MemPriv::ALL).unwrap();
    p.lmr_free(first.lmr).unwrap();
    let stale = LmrTriplet { virtual_address: BUF, segment_length: 8, lmr_context: first.lmr_context };
    // Under Miri, which interprets every step, a few cycles show the rule.
    let cycles = if cfg!(miri) { 300 } else { 300_000 };
    for cycle in 0..cycles {
        let lmr = p.mock_lmr_create(ia, region, pz, MemPriv::ALL).unwrap();
        assert_ne!(lmr.lmr_context, first.lmr_context, "cycle {cycle}");
        p.lmr_free(lmr.lmr).unwrap();
    }
    let held = p.mock_lmr_create(ia, region, pz, MemPriv::ALL).unwrap();
    assert_eq!(ty(p.lmr_sync_rdma_read(ia, &[stale])), ErrorType::InvalidParameter);
    let live = LmrTriplet { lmr_context: held.lmr_context, ..stale };
    p.lmr_sync_rdma_read(ia, &[live]).unwrap();
}

#[test]
fn dat_lmr_query_mask_outside_all_is_invalid_parameter() {
    let fx = Fx::new();
    assert_eq!(ty(fx.p.lmr_query(fx.lmr.lmr, 0x800)), ErrorType::InvalidParameter);
}

#[test]
fn dat_lmr_sync_rdma_read_checks_segments() {
    let fx = Fx::new();
    fx.p.lmr_sync_rdma_read(fx.ia, &[fx.seg(0, 64), fx.seg(4000, 96)]).unwrap();
    assert_eq!(ty(fx.p.lmr_sync_rdma_read(fx.ia, &[fx.seg(4000, 97)])), ErrorType::InvalidParameter);
    let bogus = LmrTriplet { lmr_context: 0xdead_0001, ..fx.seg(0, 8) };
    assert_eq!(ty(fx.p.lmr_sync_rdma_read(fx.ia, &[bogus])), ErrorType::InvalidParameter);
    assert_eq!(ty(fx.p.lmr_sync_rdma_read(IaHandle::NULL, &[])), ErrorType::InvalidHandle);
}

#[test]
fn dat_lmr_sync_rdma_write_checks_segments() {
    let fx = Fx::new();
    fx.p.lmr_sync_rdma_write(fx.ia, &[fx.seg(0, BUF_LEN as u32)]).unwrap();
    let before = LmrTriplet { virtual_address: BUF - 1, ..fx.seg(0, 8) };
    assert_eq!(ty(fx.p.lmr_sync_rdma_write(fx.ia, &[before])), ErrorType::InvalidParameter);
}

#[test]
fn dat_rmr_create_stale_pz_is_invalid_handle() {
    let mut fx = Fx::new();
    let pz = fx.p.pz_create(fx.ia).unwrap();
    fx.p.pz_free(pz).unwrap();
    assert_eq!(ty(fx.p.rmr_create(pz)), ErrorType::InvalidHandle);
}

#[test]
fn dat_rmr_bind_returns_context_and_completes_on_request_evd() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let ctx =
        fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(64, 128), MemPriv::REMOTE_READ, ep, 77, CompletionFlags::DEFAULT)
            .unwrap();
    let q = fx.p.rmr_query(rmr, RMR_FIELD_ALL).unwrap();
    assert_eq!(q.rmr_context, Some(ctx));
    assert_eq!(q.lmr_triplet, Some(fx.seg(64, 128)));
    assert!(fx.p.backend_mut().complete_send(ep, DtoStatus::Success));
    let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert_eq!(ev.number, EventNumber::RmrBindCompletion);
    assert_eq!(ev.data, EventData::RmrBind { rmr, cookie: 77, status: DtoStatus::Success });
}

/// "The user_cookie is returned to the Consumer in the rmr_bind Completion
/// event for this operation" (dat_rmr_bind(3DAT)), even when the RMR is
/// bound again before an earlier bind completes; a suppressed bind that
/// succeeds reports nothing.
#[test]
fn every_bind_in_flight_completes_with_its_own_cookie() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let read = MemPriv::REMOTE_READ;
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 64), read, ep, 1, CompletionFlags::DEFAULT).unwrap();
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(64, 64), read, ep, 2, CompletionFlags::SUPPRESS).unwrap();
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(128, 64), read, ep, 3, CompletionFlags::DEFAULT).unwrap();
    for _ in 0..3 {
        assert!(fx.p.backend_mut().complete_send(ep, DtoStatus::Success));
    }
    for cookie in [1, 3] {
        let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
        assert_eq!(ev.data, EventData::RmrBind { rmr, cookie, status: DtoStatus::Success });
    }
    assert_eq!(ty(fx.p.evd_dequeue(fx.dto_evd)), ErrorType::QueueEmpty);
}

/// Past `BINDS_IN_FLIGHT` binds of one RMR in flight, one more is
/// refused with DAT_INSUFFICIENT_RESOURCES, and posts nothing, until one
/// completes.
#[test]
fn binds_of_one_rmr_in_flight_are_bounded() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let read = MemPriv::REMOTE_READ;
    for cookie in 0..BINDS_IN_FLIGHT as u64 {
        fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 64), read, ep, cookie, CompletionFlags::DEFAULT).unwrap();
    }
    let refused = fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 64), read, ep, 99, CompletionFlags::DEFAULT);
    assert_eq!(ty(refused), ErrorType::InsufficientResources);
    assert!(fx.p.backend_mut().complete_send(ep, DtoStatus::Success));
    let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert_eq!(ev.data, EventData::RmrBind { rmr, cookie: 0, status: DtoStatus::Success });
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 64), read, ep, 100, CompletionFlags::DEFAULT).unwrap();
}

#[test]
fn dat_rmr_bind_outside_lmr_is_invalid_parameter() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let r = fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(4000, 200), MemPriv::REMOTE_READ, ep, 0, CompletionFlags::DEFAULT);
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    assert_eq!(fx.p.rmr_query(rmr, 0).unwrap().rmr_context, None);
}

#[test]
fn dat_rmr_bind_remote_write_needs_local_write_on_lmr() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let ro =
        fx.p.mock_lmr_create(fx.ia, MemType::Virtual { address: 0x7000, length: 256 }, fx.pz, MemPriv::LOCAL_READ)
            .unwrap();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let t = LmrTriplet { virtual_address: 0x7000, segment_length: 64, lmr_context: ro.lmr_context };
    let r = fx.p.rmr_bind(rmr, ro.lmr, &t, MemPriv::REMOTE_WRITE, ep, 0, CompletionFlags::DEFAULT);
    assert_eq!(ty(r), ErrorType::PrivilegesViolation);
    fx.p.rmr_bind(rmr, ro.lmr, &t, MemPriv::REMOTE_READ, ep, 0, CompletionFlags::DEFAULT).unwrap();
}

#[test]
fn dat_rmr_bind_local_privileges_are_invalid_parameter() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let r = fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 8), MemPriv::LOCAL_READ, ep, 0, CompletionFlags::DEFAULT);
    assert_eq!(ty(r), ErrorType::InvalidParameter);
}

#[test]
fn dat_rmr_bind_pz_mismatch_is_protection_violation() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let pz2 = fx.p.pz_create(fx.ia).unwrap();
    let rmr = fx.p.rmr_create(pz2).unwrap();
    let r = fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 8), MemPriv::REMOTE_READ, ep, 0, CompletionFlags::DEFAULT);
    assert_eq!(ty(r), ErrorType::ProtectionViolation);
}

#[test]
fn dat_rmr_bind_only_in_connected_or_disconnected() {
    let mut fx = Fx::new();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let ep = fx.ep();
    let r = fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 8), MemPriv::REMOTE_READ, ep, 0, CompletionFlags::DEFAULT);
    let e = r.unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateEpUnconnected));
    // "If the operation returns successfully for the Endpoint in
    // DAT_EP_STATE_DISCONNECTED state, the posted RMR Bind is immediately
    // flushed to request_evd_handle."
    let gone = fx.ep_disconnected();
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 8), MemPriv::REMOTE_READ, gone, 3, CompletionFlags::DEFAULT).unwrap();
    let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert_eq!(ev.data, EventData::RmrBind { rmr, cookie: 3, status: DtoStatus::Flushed });
    // A failed bind leaves the RMR unbound, and its LMR free.
    assert_eq!(fx.p.rmr_query(rmr, 0).unwrap().rmr_context, None);
    fx.p.rmr_free(rmr).unwrap();
    fx.p.lmr_free(fx.lmr.lmr).unwrap();
}

#[test]
fn dat_rmr_bind_unsignalled_needs_unsignalled_ep() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let r = fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 8), MemPriv::REMOTE_READ, ep, 0, CompletionFlags::UNSIGNALLED);
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    let r = fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 8), MemPriv::REMOTE_READ, ep, 0, CompletionFlags::SOLICITED_WAIT);
    assert_eq!(ty(r), ErrorType::InvalidParameter);
}

#[test]
fn dat_rmr_bind_zero_length_unbinds() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 8), MemPriv::REMOTE_READ, ep, 0, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(ty(fx.p.lmr_free(fx.lmr.lmr)), ErrorType::InvalidState);
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 0), MemPriv::REMOTE_READ, ep, 0, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(fx.p.rmr_query(rmr, 0).unwrap().lmr_triplet, None);
    fx.p.lmr_free(fx.lmr.lmr).unwrap();
}

/// DAT 2.0's `lmr_handle`: a bind names the live LMR of this IA whose
/// context the triplet carries. A freed LMR's handle beside a live LMR's
/// triplet, another LMR's triplet, or another IA's LMR is refused and binds
/// nothing; an unbind may pass no LMR.
#[test]
fn dat_rmr_bind_names_the_live_lmr_of_its_triplet() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let read = MemPriv::REMOTE_READ;
    let seg = fx.seg(0, 8);
    let bind =
        |fx: &mut Fx, lmr: LmrHandle, t: &LmrTriplet| fx.p.rmr_bind(rmr, lmr, t, read, ep, 0, CompletionFlags::DEFAULT);
    let subtype = |r: DatResult<u32>| r.map_err(|e| (e.error_type(), e.subtype()));
    let freed =
        fx.p.mock_lmr_create(fx.ia, MemType::Virtual { address: 0x9000, length: 256 }, fx.pz, MemPriv::ALL).unwrap();
    fx.p.lmr_free(freed.lmr).unwrap();
    let handle = Err((ErrorType::InvalidHandle, Subtype::InvalidHandleLmr));
    assert_eq!(subtype(bind(&mut fx, freed.lmr, &seg)), handle, "a freed LMR's handle");
    assert_eq!(subtype(bind(&mut fx, LmrHandle::NULL, &seg)), handle, "no LMR");
    let other =
        fx.p.mock_lmr_create(fx.ia, MemType::Virtual { address: 0xa000, length: 256 }, fx.pz, MemPriv::ALL).unwrap();
    assert_eq!(ty(bind(&mut fx, other.lmr, &seg)), ErrorType::InvalidParameter, "another LMR's triplet");
    let (ia2, _) = fx.p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 4 }).unwrap();
    let pz2 = fx.p.pz_create(ia2).unwrap();
    let far = fx.p.mock_lmr_create(ia2, MemType::Virtual { address: 0xb000, length: 256 }, pz2, MemPriv::ALL).unwrap();
    assert_eq!(subtype(bind(&mut fx, far.lmr, &seg)), handle, "another IA's LMR");
    assert_eq!(fx.p.rmr_query(rmr, 0).unwrap().lmr_triplet, None, "nothing bound");
    let lmr = fx.lmr.lmr;
    bind(&mut fx, lmr, &seg).unwrap();
    let unbind = LmrTriplet { lmr_context: 0, virtual_address: 0, segment_length: 0 };
    assert_eq!(subtype(bind(&mut fx, freed.lmr, &unbind)), handle, "an unbind's stale LMR");
    bind(&mut fx, LmrHandle::NULL, &unbind).unwrap();
    assert_eq!(fx.p.rmr_query(rmr, 0).unwrap().lmr_triplet, None);
}

#[test]
fn dat_rmr_free_unbinds_a_bound_rmr() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 8), MemPriv::REMOTE_READ, ep, 0, CompletionFlags::DEFAULT).unwrap();
    fx.p.rmr_free(rmr).unwrap();
    assert_eq!(fx.p.backend().live_mws, 0);
    fx.p.lmr_free(fx.lmr.lmr).unwrap();
    assert_eq!(ty(fx.p.rmr_query(rmr, 0)), ErrorType::InvalidHandle);
}

#[test]
fn dat_rmr_query_unbound_has_no_binding_fields() {
    let mut fx = Fx::new();
    let rmr = fx.p.rmr_create(fx.pz).unwrap();
    let q = fx.p.rmr_query(rmr, RMR_FIELD_ALL).unwrap();
    assert_eq!((q.lmr_triplet, q.mem_privileges, q.rmr_context), (None, None, None));
    assert_eq!((q.ia, q.pz), (fx.ia, fx.pz));
    assert_eq!(ty(fx.p.rmr_query(rmr, 0x80)), ErrorType::InvalidParameter);
}

#[test]
fn dat_lmr_create_on_a_transport_that_reads_every_region_has_local_read() {
    // InfiniBand and RoCE: ibv_reg_mr(3) always enables local read.
    let mut mock = udat_testkit::mock::MockBackend::new();
    mock.attr.local_read_implied = true;
    let mut p: Box<P> = udat_testkit::boxed(mock, Inline);
    let (ia, _) = p.ia_open(udat_testkit::mock::MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 8 }).unwrap();
    let pz = p.pz_create(ia).unwrap();
    let wo = p.mock_lmr_create(ia, MemType::Virtual { address: BUF, length: 64 }, pz, MemPriv::LOCAL_WRITE).unwrap();
    assert_eq!(p.lmr_query(wo.lmr, LMR_FIELD_ALL).unwrap().mem_privileges, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
    // Where the transport does not, the LMR has what was asked.
    let mut fx = Fx::new();
    let wo = fx.lmr_of_64(BUF, fx.pz, MemPriv::LOCAL_WRITE);
    assert_eq!(fx.p.lmr_query(wo.lmr, LMR_FIELD_ALL).unwrap().mem_privileges, MemPriv::LOCAL_WRITE);
}
