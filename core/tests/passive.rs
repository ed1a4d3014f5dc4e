//! The passive side: dat_psp_create(3DAT), dat_psp_create_any(3DAT),
//! dat_psp_free(3DAT), dat_psp_query(3DAT), dat_rsp_create(3DAT),
//! dat_rsp_free(3DAT), dat_rsp_query(3DAT), dat_cr_query(3DAT),
//! dat_cr_accept(3DAT), dat_cr_reject(3DAT), dat_cr_handoff(3DAT).
mod common;
use common::*;
use udat_core::backend::ConnOutcome;
use udat_core::types::*;
use udat_core::*;

#[test]
fn dat_psp_create_delivers_connection_requests_with_private_data() {
    let mut fx = Fx::new();
    let psp = fx.p.psp_create(fx.ia, 15828, fx.cr_evd, PspFlags::Consumer).unwrap();
    fx.p.backend_mut().incoming(15828, b"0123456789").unwrap();
    let ev = fx.p.evd_dequeue(fx.cr_evd).unwrap();
    assert_eq!(ev.number, EventNumber::ConnectionRequest);
    let EventData::CrArrival { psp: from, conn_qual, cr } = ev.data else { panic!("{ev:?}") };
    assert_eq!((from, conn_qual), (psp, 15828));
    let q = fx.p.cr_query(cr, CR_FIELD_ALL).unwrap();
    assert_eq!((q.private_data_size, q.remote_port_qual, q.local_ep), (10, 15828, EpHandle::NULL));
    assert_eq!(fx.p.cr_private_data(cr), Ok(&b"0123456789"[..]));
    assert_eq!(ty(fx.p.cr_query(cr, 0x20)), ErrorType::InvalidParameter);
}

#[test]
fn dat_psp_create_evd_without_cr_flag_is_invalid_handle() {
    let mut fx = Fx::new();
    let e = fx.p.psp_create(fx.ia, 1, fx.conn_evd, PspFlags::Consumer).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandleEvdCr));
}

#[test]
fn dat_psp_create_conn_qual_in_use() {
    let mut fx = Fx::new();
    fx.p.psp_create(fx.ia, 77, fx.cr_evd, PspFlags::Consumer).unwrap();
    assert_eq!(ty(fx.p.psp_create(fx.ia, 77, fx.cr_evd, PspFlags::Consumer)), ErrorType::ConnQualInUse);
    let ep = fx.ep();
    assert_eq!(ty(fx.p.rsp_create(fx.ia, 77, ep, fx.cr_evd)), ErrorType::ConnQualInUse);
    assert_eq!(fx.state(ep), EpState::Unconnected);
}

#[test]
fn dat_psp_create_flag_values_other_than_consumer_or_provider_are_refused() {
    assert_eq!(PspFlags::from_raw(0), Some(PspFlags::Consumer));
    assert_eq!(PspFlags::from_raw(1), Some(PspFlags::Provider));
    assert_eq!(PspFlags::from_raw(2), None);
}

#[test]
fn dat_psp_create_any_picks_a_free_qualifier() {
    let mut fx = Fx::new();
    let (a, qa) = fx.p.psp_create_any(fx.ia, fx.cr_evd, PspFlags::Consumer).unwrap();
    let (b, qb) = fx.p.psp_create_any(fx.ia, fx.cr_evd, PspFlags::Consumer).unwrap();
    assert_ne!(qa, qb);
    assert!(ANY_CONN_QUAL.contains(&qa) && ANY_CONN_QUAL.contains(&qb));
    assert_eq!(fx.p.psp_query(a, PSP_FIELD_ALL).unwrap().conn_qual, qa);
    assert_eq!(fx.p.psp_query(b, PSP_FIELD_ALL).unwrap().conn_qual, qb);
}

#[test]
fn dat_psp_query_reports_its_parameters() {
    let mut fx = Fx::new();
    let psp = fx.p.psp_create(fx.ia, 5, fx.cr_evd, PspFlags::Provider).unwrap();
    assert_eq!(
        fx.p.psp_query(psp, PSP_FIELD_ALL),
        Ok(PspParam { ia: fx.ia, conn_qual: 5, evd: fx.cr_evd, flags: PspFlags::Provider })
    );
    assert_eq!(ty(fx.p.psp_query(psp, 0x10)), ErrorType::InvalidParameter);
}

#[test]
fn dat_psp_free_stops_listening_but_keeps_delivered_requests() {
    let mut fx = Fx::new();
    let (psp, cr) = fx.request(5, PspFlags::Consumer);
    fx.p.psp_free(psp).unwrap();
    assert_eq!(fx.p.backend().listeners().count(), 0);
    // "Any incoming Connection Requests for the Connection Qualifier on the
    // destroyed Service Point ... are automatically rejected".
    assert_eq!(fx.p.backend_mut().incoming(5, b""), None);
    // "This operation shall have no effect on previously generated
    // Connection Requested Events."
    assert!(fx.p.cr_query(cr, 0).is_ok());
    assert_eq!(ty(fx.p.psp_free(psp)), ErrorType::InvalidHandle);
}

#[test]
fn full_psp_evd_refuses_further_requests() {
    let mut fx = Fx::new();
    let one = fx.p.evd_create(fx.ia, 1, CnoHandle::NULL, EvdFlags::CR).unwrap();
    fx.p.psp_create(fx.ia, 5, one, PspFlags::Consumer).unwrap();
    let first = fx.p.backend_mut().incoming(5, b"").unwrap();
    let second = fx.p.backend_mut().incoming(5, b"").unwrap();
    assert!(fx.p.evd_dequeue(one).is_ok());
    // "The size of the event queue for the Event Dispatcher controls the
    // size of the backlog": the second request found it full.
    assert_eq!(fx.p.backend().rejected.as_slice(), [second]);
    assert_ne!(first, second);
}

#[test]
fn dat_cr_accept_on_an_unconnected_ep_completes_the_connection() {
    let mut fx = Fx::new();
    let (_, cr) = fx.request(5, PspFlags::Consumer);
    let ep = fx.ep();
    fx.p.cr_accept(cr, ep, b"pong").unwrap();
    assert_eq!(fx.state(ep), EpState::CompletionPending);
    assert_eq!(fx.p.backend().accepted[0].1.as_slice(), b"pong");
    // "This operation, if successful, also destroys the Connection Request
    // instance."
    assert_eq!(ty(fx.p.cr_query(cr, 0)), ErrorType::InvalidHandle);
    fx.p.backend_mut().conn_event(ep, ConnOutcome::Established, b"");
    let ev = fx.p.evd_dequeue(fx.conn_evd).unwrap();
    // "For the Passive side, DAT_CONNECTION_EVENT_ESTABLISHED event
    // private_data is not defined and private_data_size returns zero."
    assert_eq!(ev.data, EventData::Connection { ep, private_data_size: 0 });
    assert_eq!(fx.state(ep), EpState::Connected);
}

#[test]
fn dat_cr_accept_failure_leaves_cr_and_ep_untouched() {
    let mut fx = Fx::new();
    let (_, cr) = fx.request(5, PspFlags::Consumer);
    let busy = fx.ep_connecting();
    assert_eq!(ty(fx.p.cr_accept(cr, busy, b"")), ErrorType::InvalidState);
    assert_eq!(ty(fx.p.cr_accept(cr, EpHandle::NULL, b"")), ErrorType::InvalidHandle);
    let ep = fx.ep();
    let big = [0u8; 197];
    assert_eq!(ty(fx.p.cr_accept(cr, ep, &big)), ErrorType::InvalidParameter);
    assert!(fx.p.cr_query(cr, 0).is_ok());
    assert_eq!(fx.state(ep), EpState::Unconnected);
    assert_eq!(fx.state(busy), EpState::ActiveConnectionPending);
    fx.p.cr_accept(cr, ep, b"").unwrap();
}

#[test]
fn dat_cr_accept_error_ends_in_disconnected_and_flushes_receives() {
    let mut fx = Fx::new();
    let (_, cr) = fx.request(5, PspFlags::Consumer);
    let ep = fx.ep();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 9, CompletionFlags::DEFAULT).unwrap();
    fx.p.cr_accept(cr, ep, b"").unwrap();
    fx.p.backend_mut().conn_event(ep, ConnOutcome::AcceptError, b"");
    assert_eq!(fx.p.evd_dequeue(fx.conn_evd).unwrap().number, EventNumber::ConnectionAcceptCompletionError);
    assert_eq!(fx.state(ep), EpState::Disconnected);
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(9, DtoStatus::Flushed)]);
}

#[test]
fn dat_cr_reject_destroys_the_request() {
    let mut fx = Fx::new();
    let (_, cr) = fx.request(5, PspFlags::Consumer);
    fx.p.cr_reject(cr, &[]).unwrap();
    assert_eq!(fx.p.backend().rejected.len(), 1);
    assert_eq!(ty(fx.p.cr_reject(cr, &[])), ErrorType::InvalidHandle);
    assert_eq!(ty(fx.p.cr_accept(cr, EpHandle::NULL, b"")), ErrorType::InvalidHandle);
}

#[test]
fn dat_cr_reject_refuses_oversized_private_data_and_keeps_the_request() {
    let mut fx = Fx::new();
    let (_, cr) = fx.request(5, PspFlags::Consumer);
    assert_eq!(ty(fx.p.cr_reject(cr, &[0; 197])), ErrorType::InvalidParameter);
    assert!(fx.p.backend().rejected.is_empty());
    fx.p.cr_reject(cr, b"no").unwrap();
    assert_eq!(fx.p.backend().rejected.len(), 1);
}

#[test]
fn dat_psp_create_provider_gives_a_tentative_ep() {
    let mut fx = Fx::new();
    let (_, cr) = fx.request(5, PspFlags::Provider);
    let ep = fx.p.cr_query(cr, CR_FIELD_ALL).unwrap().local_ep;
    assert_eq!(fx.state(ep), EpState::TentativeConnectionPending);
    // "All Endpoints created by the Provider have DAT_HANDLE_NULL for the
    // Protection Zone and all Event Dispatchers."
    let q = fx.p.ep_query(ep).unwrap();
    assert!(q.pz.is_null() && q.recv_evd.is_null() && q.connect_evd.is_null());
    // dat_ep_free(3DAT): not in Tentative Connection Pending.
    assert_eq!(ty(fx.p.ep_free(ep)), ErrorType::InvalidState);
    assert_eq!(ty(fx.p.ep_disconnect(ep, CloseFlags::Abrupt)), ErrorType::InvalidState);
    // Accepting needs a PZ first: modify it (allowed when Tentative).
    assert_eq!(ty(fx.p.cr_accept(cr, EpHandle::NULL, b"")), ErrorType::InvalidState);
    let ch = EpChanges {
        pz: Some(fx.pz),
        recv_evd: Some(fx.dto_evd),
        request_evd: Some(fx.dto_evd),
        connect_evd: Some(fx.conn_evd),
        attr: None,
    };
    fx.p.ep_modify(ep, &ch).unwrap();
    // A different EP than the request's own is refused.
    let other = fx.ep();
    assert_eq!(ty(fx.p.cr_accept(cr, other, b"")), ErrorType::InvalidParameter);
    fx.p.cr_accept(cr, ep, b"").unwrap();
    assert_eq!(fx.state(ep), EpState::CompletionPending);
}

#[test]
fn dat_cr_reject_returns_a_provider_ep_to_the_provider() {
    let mut fx = Fx::new();
    let (_, cr) = fx.request(5, PspFlags::Provider);
    let ep = fx.p.cr_query(cr, 0).unwrap().local_ep;
    fx.p.cr_reject(cr, &[]).unwrap();
    assert_eq!(ty(fx.p.ep_query(ep)), ErrorType::InvalidHandle);
}

#[test]
fn dat_rsp_create_reserves_the_ep_for_one_request() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let rsp = fx.p.rsp_create(fx.ia, 6, ep, fx.cr_evd).unwrap();
    assert_eq!(fx.state(ep), EpState::Reserved);
    assert_eq!(fx.p.rsp_query(rsp, RSP_FIELD_ALL), Ok(RspParam { ia: fx.ia, conn_qual: 6, evd: fx.cr_evd, ep }));
    // Not freeable, not connectable while reserved.
    assert_eq!(ty(fx.p.ep_free(ep)), ErrorType::InvalidState);
    fx.p.backend_mut().incoming(6, b"r").unwrap();
    let ev = fx.p.evd_dequeue(fx.cr_evd).unwrap();
    let EventData::CrArrival { psp, cr, conn_qual } = ev.data else { panic!("{ev:?}") };
    // The RSP is gone once it produced its request.
    assert!(psp.is_null());
    assert_eq!(conn_qual, 6);
    assert_eq!(ty(fx.p.rsp_query(rsp, 0)), ErrorType::InvalidHandle);
    assert_eq!(fx.p.backend_mut().incoming(6, b""), None);
    assert_eq!(fx.state(ep), EpState::PassiveConnectionPending);
    assert_eq!(ty(fx.p.ep_free(ep)), ErrorType::InvalidState);
    assert_eq!(fx.p.cr_query(cr, 0).unwrap().local_ep, ep);
    fx.p.cr_accept(cr, EpHandle::NULL, b"").unwrap();
    assert_eq!(fx.state(ep), EpState::CompletionPending);
}

#[test]
fn dat_rsp_create_ep_not_unconnected_is_invalid_state() {
    let mut fx = Fx::new();
    let ep = fx.ep_connecting();
    assert_eq!(ty(fx.p.rsp_create(fx.ia, 6, ep, fx.cr_evd)), ErrorType::InvalidState);
}

#[test]
fn dat_rsp_create_null_ep_gets_a_provider_ep() {
    let mut fx = Fx::new();
    let rsp = fx.p.rsp_create(fx.ia, 6, EpHandle::NULL, fx.cr_evd).unwrap();
    let ep = fx.p.rsp_query(rsp, 0).unwrap().ep;
    assert_eq!(fx.state(ep), EpState::Reserved);
    fx.p.rsp_free(rsp).unwrap();
    assert_eq!(ty(fx.p.ep_query(ep)), ErrorType::InvalidHandle);
}

#[test]
fn dat_rsp_free_returns_the_ep_to_unconnected() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let rsp = fx.p.rsp_create(fx.ia, 6, ep, fx.cr_evd).unwrap();
    fx.p.rsp_free(rsp).unwrap();
    assert_eq!(fx.state(ep), EpState::Unconnected);
    assert_eq!(fx.p.backend().listeners().count(), 0);
    fx.p.ep_free(ep).unwrap();
    fx.p.evd_free(fx.cr_evd).unwrap();
}

#[test]
fn dat_cr_reject_returns_an_rsp_ep_to_unconnected() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    fx.p.rsp_create(fx.ia, 6, ep, fx.cr_evd).unwrap();
    fx.p.backend_mut().incoming(6, b"").unwrap();
    let EventData::CrArrival { cr, .. } = fx.p.evd_dequeue(fx.cr_evd).unwrap().data else { panic!() };
    fx.p.cr_reject(cr, &[]).unwrap();
    assert_eq!(fx.state(ep), EpState::Unconnected);
    fx.p.ep_free(ep).unwrap();
}

#[test]
fn dat_cr_handoff_moves_the_request_to_another_psp() {
    let mut fx = Fx::new();
    let (_, cr) = fx.request(5, PspFlags::Consumer);
    let other_evd = fx.p.evd_create(fx.ia, 4, CnoHandle::NULL, EvdFlags::CR).unwrap();
    let target = fx.p.psp_create(fx.ia, 50, other_evd, PspFlags::Consumer).unwrap();
    assert_eq!(ty(fx.p.cr_handoff(cr, 51)), ErrorType::InvalidParameter);
    fx.p.cr_handoff(cr, 50).unwrap();
    assert_eq!(ty(fx.p.cr_query(cr, 0)), ErrorType::InvalidHandle);
    let ev = fx.p.evd_dequeue(other_evd).unwrap();
    let EventData::CrArrival { psp, conn_qual, cr: moved } = ev.data else { panic!("{ev:?}") };
    assert_eq!((psp, conn_qual), (target, 50));
    assert_eq!(fx.p.cr_private_data(moved), Ok(&b"ping"[..]));
}

#[test]
fn dat_cr_query_reports_the_remote_side() {
    let mut fx = Fx::new();
    let (_, cr) = fx.request(5, PspFlags::Consumer);
    let q = fx.p.cr_query(cr, CR_FIELD_ALL).unwrap();
    // The mock's peer is 192.0.2.2, port 15828.
    assert_eq!(&q.remote_ia_address.bytes[4..8], &[192, 0, 2, 2]);
    assert_eq!((q.remote_port_qual, q.private_data_size), (15828, 4));
    assert_eq!(ty(fx.p.cr_query(CrHandle::NULL, 0)), ErrorType::InvalidHandle);
}

#[test]
fn dat_rsp_query_mask_outside_all_is_invalid_parameter() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let rsp = fx.p.rsp_create(fx.ia, 6, ep, fx.cr_evd).unwrap();
    assert_eq!(ty(fx.p.rsp_query(rsp, 0x10)), ErrorType::InvalidParameter);
    assert_eq!(fx.p.rsp_query(rsp, RSP_FIELD_ALL).unwrap().ep, ep);
}
