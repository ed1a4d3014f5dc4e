//! The Endpoint state machine: dat_ep_create(3DAT),
//! dat_ep_create_with_srq(3DAT), dat_ep_connect(3DAT),
//! dat_ep_dup_connect(3DAT), dat_ep_disconnect(3DAT), dat_ep_reset(3DAT),
//! dat_ep_free(3DAT), dat_ep_modify(3DAT), dat_ep_query(3DAT),
//! dat_ep_get_status(3DAT), dat_ep_recv_query(3DAT),
//! dat_ep_set_watermark(3DAT). Grouped by the state a test starts in.
mod common;
use common::*;
use udat_core::backend::ConnOutcome;
use udat_core::slab::word_of;
use udat_core::types::*;
use udat_core::*;

fn connect(fx: &mut Fx, ep: EpHandle) -> DatResult<()> {
    fx.p.ep_connect(ep, &IaAddress::default(), 1, 1000, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT)
}

// ---- creation -------------------------------------------------------------

#[test]
fn dat_ep_create_starts_unconnected_with_provider_defaults() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    assert_eq!(fx.p.ep_get_status(ep), Ok((EpState::Unconnected, true, true)));
    let q = fx.p.ep_query(ep).unwrap();
    assert_eq!(q.attr, fx.attr());
    assert_eq!((q.pz, q.recv_evd, q.request_evd, q.connect_evd), (fx.pz, fx.dto_evd, fx.dto_evd, fx.conn_evd));
    assert!(q.srq.is_null());
}

#[test]
fn dat_ep_create_evd_without_the_stream_flag_is_invalid_handle() {
    let mut fx = Fx::new();
    let e = fx.p.ep_create(fx.ia, fx.pz, fx.conn_evd, EvdHandle::NULL, EvdHandle::NULL, None).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandleEvdRecv));
    let e = fx.p.ep_create(fx.ia, fx.pz, EvdHandle::NULL, EvdHandle::NULL, fx.dto_evd, None).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandleEvdConn));
    let e = fx.p.ep_create(fx.ia, PzHandle::NULL, EvdHandle::NULL, EvdHandle::NULL, EvdHandle::NULL, None).unwrap_err();
    assert_eq!(e.error_type(), ErrorType::InvalidHandle);
}

#[test]
fn dat_ep_create_connect_evd_may_be_of_another_ia_and_gets_its_events() {
    let mut fx = Fx::new();
    // The fixture's IA is the first the mock opened; this is the second.
    let (ia2, _) = fx.p.ia_open(udat_testkit::mock::MOCK_IA_NAME, AsyncEvd::Exists).unwrap();
    let pz2 = fx.p.pz_create(ia2).unwrap();
    let dto2 = fx.p.evd_create(ia2, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    // DTO EVDs must share the EP's IA: their CQs belong to its device.
    let e = fx.p.ep_create(ia2, pz2, fx.dto_evd, dto2, fx.conn_evd, None).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandleEvdRecv));
    let ep = fx.p.ep_create(ia2, pz2, dto2, dto2, fx.conn_evd, None).unwrap();
    assert_eq!(ty(fx.p.evd_free(fx.conn_evd)), ErrorType::InvalidState);
    connect(&mut fx, ep).unwrap();
    // The event comes on the second IA's channel only; a dequeue on the
    // first IA's EVD finds it there.
    fx.p.backend_mut().conn_event_on(2, ep, ConnOutcome::Established, b"");
    assert_eq!(fx.p.evd_dequeue(fx.conn_evd).map(|e| e.number), Ok(EventNumber::ConnectionEstablished));
    assert_eq!(fx.state(ep), EpState::Connected);
    fx.p.ep_disconnect(ep, CloseFlags::Abrupt).unwrap();
    fx.p.ep_free(ep).unwrap();
    fx.drain(fx.conn_evd);
    fx.p.evd_free(fx.conn_evd).unwrap();
}

#[test]
fn dat_ep_create_attributes_beyond_the_device_are_invalid_parameter() {
    let mut fx = Fx::new();
    let mut attr = fx.attr();
    attr.max_request_iov = 1000;
    assert_eq!(
        ty(fx.p.ep_create(fx.ia, fx.pz, fx.dto_evd, fx.dto_evd, fx.conn_evd, Some(&attr))),
        ErrorType::InvalidParameter
    );
    let mut attr = fx.attr();
    attr.request_completion_flags = CompletionFlags::SOLICITED_WAIT;
    assert_eq!(
        ty(fx.p.ep_create(fx.ia, fx.pz, fx.dto_evd, fx.dto_evd, fx.conn_evd, Some(&attr))),
        ErrorType::InvalidParameter
    );
    let mut attr = fx.attr();
    attr.qos = Qos::LOW_LATENCY;
    assert_eq!(
        ty(fx.p.ep_create(fx.ia, fx.pz, fx.dto_evd, fx.dto_evd, fx.conn_evd, Some(&attr))),
        ErrorType::ModelNotSupported
    );
    assert_eq!(fx.p.backend().live_qps(), 0);
}

#[test]
fn dat_ep_create_threshold_and_unsignalled_streams_share_an_evd_each_by_its_flags() {
    // MVAPICH2's Endpoints (rdma_udapl_priv.c): one EVD for both streams,
    // receives signalled, requests unsignalled. The page forbids the mix;
    // OFA's providers and udat accept it (docs/conformance.md).
    let mut fx = Fx::new();
    let _signalled = fx.ep();
    let mut attr = fx.attr();
    attr.request_completion_flags = CompletionFlags::UNSIGNALLED;
    let ep = fx.p.ep_create(fx.ia, fx.pz, fx.dto_evd, fx.dto_evd, fx.conn_evd, Some(&attr)).unwrap();
    let config = |fx: &Fx| fx.p.evd_query(fx.dto_evd, EVD_FIELD_ALL).unwrap().evd_state.0 & 0x30;
    assert_eq!(config(&fx), EvdState::CONFIG_NOTIFY);
    fx.establish(ep);
    // Each stream keeps its own post rules: requests may be unsignalled,
    // receives may not.
    let seg = [fx.seg(0, 8)];
    assert_eq!(ty(fx.p.ep_post_recv(ep, &seg, 1, CompletionFlags::UNSIGNALLED)), ErrorType::InvalidParameter);
    fx.p.ep_post_recv(ep, &seg, 2, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_request(ep, &seg, 3, RequestOp::Send, CompletionFlags::UNSIGNALLED).unwrap();
    fx.p.ep_post_request(ep, &seg, 4, RequestOp::RdmaWrite { remote: fx.remote(8) }, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_request(ep, &seg, 5, RequestOp::Send, CompletionFlags::SUPPRESS).unwrap();
    for _ in 0..3 {
        fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    }
    fx.p.backend_mut().complete_recv(ep, 8);
    let mut got = dtos(&fx.drain(fx.dto_evd));
    got.sort_by_key(|&(cookie, _)| cookie);
    assert_eq!(got, [(2, DtoStatus::Success), (3, DtoStatus::Success), (4, DtoStatus::Success)]);
    // dat_evd_wait(3DAT): one unsignalled stream among signalled ones
    // makes the threshold 1.
    assert_eq!(ty(fx.p.evd_wait_begin(fx.dto_evd, 10, 2)), ErrorType::InvalidState);
    let w = fx.p.evd_wait_begin(fx.dto_evd, 10, 1).unwrap();
    fx.p.evd_wait_end(&w);
    // Freed, the EP takes its streams away one by one: only signalled
    // streams remain, and thresholds are free again.
    fx.p.ep_free(ep).unwrap();
    fx.drain(fx.dto_evd);
    assert_eq!(config(&fx), EvdState::CONFIG_THRESHOLD);
    let w = fx.p.evd_wait_begin(fx.dto_evd, 10, 2).unwrap();
    fx.p.evd_wait_end(&w);
}

#[test]
fn dat_ep_create_solicited_wait_streams_share_an_evd_with_solicited_wait_streams_only() {
    let mut fx = Fx::new();
    let mut solicited = fx.attr();
    solicited.recv_completion_flags = CompletionFlags::SOLICITED_WAIT;
    // Its own request stream is another mode.
    let own = fx.p.evd_create(fx.ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let r = fx.p.ep_create(fx.ia, fx.pz, own, own, fx.conn_evd, Some(&solicited));
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    // Nor does it join an EVD a signalled or an unsignalled stream feeds.
    let _signalled = fx.ep();
    let r = fx.p.ep_create(fx.ia, fx.pz, fx.dto_evd, own, fx.conn_evd, Some(&solicited));
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    let mut unsignalled = fx.attr();
    unsignalled.request_completion_flags = CompletionFlags::UNSIGNALLED;
    fx.p.ep_create(fx.ia, fx.pz, EvdHandle::NULL, own, fx.conn_evd, Some(&unsignalled)).unwrap();
    let r = fx.p.ep_create(fx.ia, fx.pz, own, EvdHandle::NULL, fx.conn_evd, Some(&solicited));
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    // Solicited-wait receive streams share one EVD, and no other DTO
    // stream joins them.
    let quiet = fx.p.evd_create(fx.ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    for _ in 0..2 {
        fx.p.ep_create(fx.ia, fx.pz, quiet, own, fx.conn_evd, Some(&solicited)).unwrap();
    }
    let r = fx.p.ep_create(fx.ia, fx.pz, quiet, own, fx.conn_evd, None);
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    let r = fx.p.ep_create(fx.ia, fx.pz, own, quiet, fx.conn_evd, Some(&unsignalled));
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    let q = fx.p.evd_query(quiet, EVD_FIELD_ALL).unwrap();
    assert_eq!(q.evd_state.0 & 0x30, EvdState::CONFIG_SOLICITED);
}

#[test]
fn dat_ep_create_solicited_wait_recv_evd_takes_no_other_streams() {
    let mut fx = Fx::new();
    let shared = fx.p.evd_create(fx.ia, 8, CnoHandle::NULL, EvdFlags::DTO | EvdFlags::CONNECTION).unwrap();
    let mut attr = fx.attr();
    attr.recv_completion_flags = CompletionFlags::SOLICITED_WAIT;
    let r = fx.p.ep_create(fx.ia, fx.pz, shared, EvdHandle::NULL, shared, Some(&attr));
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    // `ep_attributes` is dat_ep_create's sixth argument.
    assert_eq!(r.unwrap_err().subtype(), Subtype::InvalidArg6);
    fx.p.ep_create(fx.ia, fx.pz, shared, EvdHandle::NULL, EvdHandle::NULL, Some(&attr)).unwrap();
}

#[test]
fn dat_ep_create_with_srq_refuses_ep_attributes_as_its_seventh_argument() {
    let mut fx = Fx::new();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &SrqAttr { max_recv_dtos: 4, max_recv_iov: 1, low_watermark: 0 }).unwrap();
    let mut bad = fx.attr();
    bad.max_request_iov = 999;
    let r = fx.p.ep_create_with_srq(fx.ia, fx.pz, fx.dto_evd, fx.dto_evd, fx.conn_evd, srq, &bad);
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    assert_eq!(r.unwrap_err().subtype(), Subtype::InvalidArg7);
    // So is a conflict of its completion flags with the EVDs'.
    let shared = fx.p.evd_create(fx.ia, 8, CnoHandle::NULL, EvdFlags::DTO | EvdFlags::CONNECTION).unwrap();
    let mut solicited = fx.attr();
    solicited.recv_completion_flags = CompletionFlags::SOLICITED_WAIT;
    let r = fx.p.ep_create_with_srq(fx.ia, fx.pz, shared, EvdHandle::NULL, shared, srq, &solicited);
    assert_eq!(r.unwrap_err().subtype(), Subtype::InvalidArg7);
}

#[test]
fn dat_ep_create_with_srq_pz_must_match_srq() {
    let mut fx = Fx::new();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &SrqAttr { max_recv_dtos: 4, max_recv_iov: 1, low_watermark: 0 }).unwrap();
    let pz2 = fx.p.pz_create(fx.ia).unwrap();
    let attr = fx.attr();
    let r = fx.p.ep_create_with_srq(fx.ia, pz2, fx.dto_evd, fx.dto_evd, fx.conn_evd, srq, &attr);
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    let ep = fx.p.ep_create_with_srq(fx.ia, fx.pz, fx.dto_evd, fx.dto_evd, fx.conn_evd, srq, &attr).unwrap();
    assert_eq!(fx.p.ep_query(ep).unwrap().srq, srq);
    // "Receive buffers cannot be posted to the created Endpoint."
    assert_eq!(ty(fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 1, CompletionFlags::DEFAULT)), ErrorType::InvalidState);
}

// ---- Unconnected ----------------------------------------------------------

#[test]
fn dat_ep_connect_moves_to_active_connection_pending() {
    let mut fx = Fx::new();
    let ep = fx.ep_connecting();
    assert_eq!(fx.state(ep), EpState::ActiveConnectionPending);
    assert_eq!(fx.p.backend().last_connect.as_ref().map(|(q, d)| (*q, d.as_slice())), Some((1000, &b"hello"[..])));
}

#[test]
fn dat_ep_connect_parameter_checks() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let a = IaAddress::default();
    // "Values must be positive."
    assert_eq!(
        ty(fx.p.ep_connect(ep, &a, 1, 0, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT)),
        ErrorType::InvalidParameter
    );
    let big = [0u8; 197];
    assert_eq!(
        ty(fx.p.ep_connect(ep, &a, 1, 10, &big, Qos::BEST_EFFORT, ConnectFlags::DEFAULT)),
        ErrorType::InvalidParameter
    );
    assert_eq!(ty(fx.p.ep_connect(ep, &a, 1, 10, b"", Qos::BEST_EFFORT, ConnectFlags(4))), ErrorType::InvalidParameter);
    assert_eq!(
        ty(fx.p.ep_connect(ep, &a, 1, 10, b"", Qos::PREMIUM, ConnectFlags::DEFAULT)),
        ErrorType::ModelNotSupported
    );
    assert_eq!(
        ty(fx.p.ep_connect(ep, &a, 1, 10, b"", Qos::BEST_EFFORT, ConnectFlags::MULTIPATH_REQUIRED)),
        ErrorType::ModelNotSupported
    );
    assert_eq!(fx.state(ep), EpState::Unconnected);
}

#[test]
fn dat_ep_connect_outside_unconnected_is_invalid_state() {
    let mut fx = Fx::new();
    let pending = fx.ep_connecting();
    assert_eq!(ty(connect(&mut fx, pending)), ErrorType::InvalidState);
    let up = fx.ep_connected();
    let e = connect(&mut fx, up).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateEpConnected));
    let down = fx.ep_disconnected();
    assert_eq!(ty(connect(&mut fx, down)), ErrorType::InvalidState);
}

#[test]
fn dat_ep_disconnect_in_unconnected_is_invalid_state() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    assert_eq!(ty(fx.p.ep_disconnect(ep, CloseFlags::Abrupt)), ErrorType::InvalidState);
    assert_eq!(ty(fx.p.ep_disconnect(ep, CloseFlags::Graceful)), ErrorType::InvalidState);
}

#[test]
fn dat_ep_reset_in_unconnected_is_a_noop_keeping_receives() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 1, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_reset(ep).unwrap();
    assert_eq!(fx.p.backend().pending_recvs(ep), 1);
    assert_eq!(fx.p.ep_get_status(ep), Ok((EpState::Unconnected, false, true)));
}

#[test]
fn dat_ep_free_in_unconnected_flushes_posted_receives() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    for c in 1..=3 {
        fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], c, CompletionFlags::DEFAULT).unwrap();
    }
    fx.p.ep_free(ep).unwrap();
    let got = dtos(&fx.drain(fx.dto_evd));
    assert_eq!(got, [(1, DtoStatus::Flushed), (2, DtoStatus::Flushed), (3, DtoStatus::Flushed)]);
    assert_eq!(fx.p.backend().live_qps(), 0);
    assert_eq!(ty(fx.p.ep_query(ep)), ErrorType::InvalidHandle);
    assert_eq!(ty(fx.p.ep_free(ep)), ErrorType::InvalidHandle);
}

#[test]
fn an_ep_whose_qp_could_not_be_rebuilt_refuses_a_receive_on_both_paths() {
    // dat_ep_modify(3DAT) rebuilds the QP to a new shape; a transport
    // that cannot make the new one leaves the EP without a QP. A receive,
    // which an Unconnected EP takes, is then refused, by the lane (which
    // takes the QP its post mask vouches for) and by the ordinary call.
    let mut fx = Fx::new();
    let ep = fx.ep();
    let evd2 = fx.p.evd_create(fx.ia, 4, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    fx.p.backend_mut().refuse_qps = true;
    let ch = EpChanges { recv_evd: Some(evd2), ..EpChanges::default() };
    assert_eq!(ty(fx.p.ep_modify(ep, &ch)), ErrorType::InsufficientResources);
    let (raw, seg, name) = (ep.raw(), fx.seg(0, 8), fx.name(ep));
    assert!(!fx.p.lane_recv(word_of(raw.index()), name, &seg, 1, CompletionFlags::DEFAULT));
    assert_eq!(ty(fx.p.ep_post_recv(ep, &[seg], 1, CompletionFlags::DEFAULT)), ErrorType::InvalidState);
    // A QP made again takes the receive.
    fx.p.backend_mut().refuse_qps = false;
    fx.p.ep_modify(ep, &EpChanges::default()).unwrap();
    fx.p.ep_post_recv(ep, &[seg], 2, CompletionFlags::DEFAULT).unwrap();
}

#[test]
fn dat_ep_modify_in_unconnected_changes_evds_pz_and_attributes() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let pz2 = fx.p.pz_create(fx.ia).unwrap();
    let evd2 = fx.p.evd_create(fx.ia, 4, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let mut attr = fx.attr();
    attr.max_request_dtos = 2;
    let ch = EpChanges { pz: Some(pz2), recv_evd: Some(evd2), attr: Some(attr), ..EpChanges::default() };
    fx.p.ep_modify(ep, &ch).unwrap();
    let q = fx.p.ep_query(ep).unwrap();
    assert_eq!((q.pz, q.recv_evd, q.request_evd, q.attr.max_request_dtos), (pz2, evd2, fx.dto_evd, 2));
    // The ties moved with them.
    fx.p.lmr_free(fx.lmr.lmr).unwrap();
    fx.p.pz_free(fx.pz).unwrap();
    assert_eq!(ty(fx.p.pz_free(pz2)), ErrorType::InvalidState);
    assert_eq!(ty(fx.p.evd_free(evd2)), ErrorType::InvalidState);
    assert_eq!(fx.p.backend().live_qps(), 1);
}

#[test]
fn dat_ep_modify_bad_attribute_changes_nothing() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let mut attr = fx.attr();
    attr.max_recv_iov = 999;
    let evd2 = fx.p.evd_create(fx.ia, 4, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let ch = EpChanges { recv_evd: Some(evd2), attr: Some(attr), ..EpChanges::default() };
    assert_eq!(ty(fx.p.ep_modify(ep, &ch)), ErrorType::InvalidParameter);
    assert_eq!(fx.p.ep_query(ep).unwrap().recv_evd, fx.dto_evd);
    fx.p.evd_free(evd2).unwrap();
    let wrong = EpChanges { connect_evd: Some(fx.dto_evd), ..EpChanges::default() };
    assert_eq!(ty(fx.p.ep_modify(ep, &wrong)), ErrorType::InvalidHandle);
    assert_eq!(ty(fx.p.evd_free(fx.conn_evd)), ErrorType::InvalidState);
}

#[test]
fn dat_ep_modify_recv_completion_flags_only_before_receives_are_posted() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 1, CompletionFlags::DEFAULT).unwrap();
    let mut attr = fx.attr();
    attr.recv_completion_flags = CompletionFlags::EVD_THRESHOLD;
    assert_eq!(
        ty(fx.p.ep_modify(ep, &EpChanges { attr: Some(attr), ..EpChanges::default() })),
        ErrorType::InvalidState
    );
}

#[test]
fn dat_ep_modify_moves_each_stream_with_its_own_completion_flags() {
    let mut fx = Fx::new();
    let mut attr = fx.attr();
    attr.request_completion_flags = CompletionFlags::UNSIGNALLED;
    let ep = fx.ep_with(Some(&attr));
    assert_eq!(ty(fx.p.evd_wait_begin(fx.dto_evd, 10, 2)), ErrorType::InvalidState);
    attr.request_completion_flags = CompletionFlags::DEFAULT;
    fx.p.ep_modify(ep, &EpChanges { attr: Some(attr), ..EpChanges::default() }).unwrap();
    let w = fx.p.evd_wait_begin(fx.dto_evd, 10, 2).unwrap();
    fx.p.evd_wait_end(&w);
    // A solicited-wait receive stream cannot share the EVD with its own
    // request stream; the refusal leaves the streams as they were.
    attr.recv_completion_flags = CompletionFlags::SOLICITED_WAIT;
    let r = fx.p.ep_modify(ep, &EpChanges { attr: Some(attr), ..EpChanges::default() });
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    // dat_ep_modify has three arguments; `ep_param` is the third.
    assert_eq!(r.unwrap_err().subtype(), Subtype::InvalidArg3);
    let w = fx.p.evd_wait_begin(fx.dto_evd, 10, 2).unwrap();
    fx.p.evd_wait_end(&w);
    assert_eq!(fx.p.ep_query(ep).unwrap().attr.recv_completion_flags, CompletionFlags::DEFAULT);
}

#[test]
fn dat_ep_get_status_reports_idle_sides() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(fx.p.ep_get_status(ep), Ok((EpState::Connected, true, false)));
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    fx.drain(fx.dto_evd);
    assert_eq!(fx.p.ep_get_status(ep), Ok((EpState::Connected, true, true)));
}

#[test]
fn dat_ep_recv_query_counts_posted_receives() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 1, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_recv(ep, &[fx.seg(8, 8)], 2, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(fx.p.ep_recv_query(ep), Ok((2, 2)));
}

#[test]
fn dat_ep_set_watermark_is_model_not_supported() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    assert_eq!(ty(fx.p.ep_set_watermark(ep, 1, 2)), ErrorType::ModelNotSupported);
    assert_eq!(ty(fx.p.ep_set_watermark(EpHandle::NULL, 1, 2)), ErrorType::InvalidHandle);
}

// ---- Active Connection Pending ---------------------------------------------

#[test]
fn dat_ep_connect_established_carries_peer_private_data() {
    let mut fx = Fx::new();
    let ep = fx.ep_connecting();
    fx.p.backend_mut().conn_event(ep, ConnOutcome::Established, b"welcome");
    let ev = fx.p.evd_dequeue(fx.conn_evd).unwrap();
    assert_eq!(ev.number, EventNumber::ConnectionEstablished);
    assert_eq!(ev.data, EventData::Connection { ep, private_data_size: 7 });
    assert_eq!(fx.p.ep_private_data(ep), Ok(&b"welcome"[..]));
    assert_eq!(fx.state(ep), EpState::Connected);
}

#[test]
fn dat_ep_connect_failures_end_in_disconnected_with_their_event() {
    for (outcome, number) in [
        (ConnOutcome::PeerRejected, EventNumber::ConnectionPeerRejected),
        (ConnOutcome::NonPeerRejected, EventNumber::ConnectionNonPeerRejected),
        (ConnOutcome::Unreachable, EventNumber::ConnectionUnreachable),
        (ConnOutcome::TimedOut, EventNumber::ConnectionTimedOut),
    ] {
        let mut fx = Fx::new();
        let ep = fx.ep();
        fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 5, CompletionFlags::DEFAULT).unwrap();
        fx.connect(ep);
        fx.p.backend_mut().conn_event(ep, outcome, b"");
        assert_eq!(fx.p.evd_dequeue(fx.conn_evd).unwrap().number, number);
        assert_eq!(fx.state(ep), EpState::Disconnected);
        // Preposted receives are flushed.
        assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(5, DtoStatus::Flushed)]);
    }
}

#[test]
fn dat_ep_connect_peer_rejected_carries_the_rejecting_peers_private_data() {
    let mut fx = Fx::new();
    let ep = fx.ep_connecting();
    fx.p.backend_mut().conn_event(ep, ConnOutcome::PeerRejected, b"busy");
    let ev = fx.p.evd_dequeue(fx.conn_evd).unwrap();
    assert_eq!(ev.number, EventNumber::ConnectionPeerRejected);
    assert_eq!(ev.data, EventData::Connection { ep, private_data_size: 4 });
    assert_eq!(fx.p.ep_private_data(ep), Ok(&b"busy"[..]));
    fx.p.ep_reset(ep).unwrap();
    assert_eq!(fx.p.ep_private_data(ep), Ok(&b""[..]));
}

#[test]
fn dat_ep_disconnect_during_active_connection_pending_aborts() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 5, CompletionFlags::DEFAULT).unwrap();
    fx.connect(ep);
    fx.p.ep_disconnect(ep, CloseFlags::Graceful).unwrap();
    assert_eq!(fx.state(ep), EpState::Disconnected);
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(5, DtoStatus::Flushed)]);
    // A late ESTABLISHED for the aborted attempt changes nothing.
    fx.p.backend_mut().conn_event(ep, ConnOutcome::Established, b"");
    let evs: Vec<_> = fx.drain(fx.conn_evd).iter().map(|e| e.number).collect();
    assert_eq!(evs, [EventNumber::ConnectionDisconnected]);
    assert_eq!(fx.state(ep), EpState::Disconnected);
}

#[test]
fn dat_ep_free_during_active_connection_pending_aborts_it() {
    let mut fx = Fx::new();
    let ep = fx.ep_connecting();
    fx.p.ep_free(ep).unwrap();
    fx.p.backend_mut().conn_event(ep, ConnOutcome::Established, b"");
    assert_eq!(ty(fx.p.evd_dequeue(fx.conn_evd)), ErrorType::QueueEmpty);
}

#[test]
fn dat_ep_reset_in_active_connection_pending_is_invalid_state() {
    let mut fx = Fx::new();
    let ep = fx.ep_connecting();
    let e = fx.p.ep_reset(ep).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateEpActconnpending));
}

#[test]
fn dat_ep_modify_after_connect_is_invalid_state() {
    let mut fx = Fx::new();
    let ep = fx.ep_connecting();
    let ch = EpChanges { attr: Some(fx.attr()), ..EpChanges::default() };
    assert_eq!(ty(fx.p.ep_modify(ep, &ch)), ErrorType::InvalidState);
    let ep = fx.ep_connected();
    let ch = EpChanges { pz: Some(fx.pz), ..EpChanges::default() };
    assert_eq!(ty(fx.p.ep_modify(ep, &ch)), ErrorType::InvalidState);
}

// ---- Connected ------------------------------------------------------------

#[test]
fn dat_ep_disconnect_graceful_goes_through_disconnect_pending() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    // The mock queues the DISCONNECTED event; it is not pulled yet.
    fx.p.ep_disconnect(ep, CloseFlags::Graceful).unwrap();
    assert_eq!(fx.state(ep), EpState::DisconnectPending);
    // "No new Send, RDMA Read, and RDMA Write DTOs, or RMR Binds can be
    // posted to the Endpoint when the local Endpoint is in the
    // DAT_EP_STATE_DISCONNECT_PENDING state."
    let e = fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateEpDiscpending));
    // Graceful again has no effect.
    fx.p.ep_disconnect(ep, CloseFlags::Graceful).unwrap();
    assert_eq!(fx.p.evd_dequeue(fx.conn_evd).unwrap().number, EventNumber::ConnectionDisconnected);
    assert_eq!(fx.state(ep), EpState::Disconnected);
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(1, DtoStatus::Flushed)]);
}

#[test]
fn dat_ep_disconnect_abrupt_in_disconnect_pending_finishes_at_once() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_disconnect(ep, CloseFlags::Graceful).unwrap();
    fx.p.ep_disconnect(ep, CloseFlags::Abrupt).unwrap();
    assert_eq!(fx.state(ep), EpState::Disconnected);
    // One DISCONNECTED event, not two: the transport's late one is stale.
    let evs: Vec<_> = fx.drain(fx.conn_evd).iter().map(|e| e.number).collect();
    assert_eq!(evs, [EventNumber::ConnectionDisconnected]);
}

#[test]
fn dat_ep_disconnect_abrupt_flushes_in_post_order() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    for c in 1..=3 {
        fx.p.ep_post_request(ep, &[fx.seg(0, 8)], c, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
        fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 10 + c, CompletionFlags::DEFAULT).unwrap();
    }
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    fx.p.ep_disconnect(ep, CloseFlags::Abrupt).unwrap();
    let got = dtos(&fx.drain(fx.dto_evd));
    let sends: Vec<_> = got.iter().filter(|(c, _)| *c < 10).copied().collect();
    let recvs: Vec<_> = got.iter().filter(|(c, _)| *c > 10).copied().collect();
    assert_eq!(sends, [(1, DtoStatus::Success), (2, DtoStatus::Flushed), (3, DtoStatus::Flushed)]);
    assert_eq!(recvs, [(11, DtoStatus::Flushed), (12, DtoStatus::Flushed), (13, DtoStatus::Flushed)]);
    assert_eq!(fx.p.ep_get_status(ep), Ok((EpState::Disconnected, true, true)));
}

#[test]
fn peer_disconnect_moves_connected_to_disconnected() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 1, CompletionFlags::DEFAULT).unwrap();
    fx.p.backend_mut().conn_event(ep, ConnOutcome::Disconnected, b"");
    assert_eq!(fx.p.evd_dequeue(fx.conn_evd).unwrap().number, EventNumber::ConnectionDisconnected);
    assert_eq!(fx.state(ep), EpState::Disconnected);
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(1, DtoStatus::Flushed)]);
}

#[test]
fn broken_connection_reports_broken() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.backend_mut().conn_event(ep, ConnOutcome::Broken, b"");
    assert_eq!(fx.p.evd_dequeue(fx.conn_evd).unwrap().number, EventNumber::ConnectionBroken);
    assert_eq!(fx.state(ep), EpState::Disconnected);
}

#[test]
fn catastrophic_error_breaks_every_connection_and_tells_the_async_evd() {
    let mut fx = Fx::new();
    let a = fx.ep_connected();
    let b = fx.ep_connecting();
    fx.p.backend_mut().catastrophe();
    assert_eq!(fx.p.evd_dequeue(fx.async_evd).unwrap().number, EventNumber::AsyncIaCatastrophic);
    assert_eq!((fx.state(a), fx.state(b)), (EpState::Disconnected, EpState::Disconnected));
}

#[test]
fn dat_ep_dup_connect_reuses_the_remote_end() {
    let mut fx = Fx::new();
    let up = fx.ep_connected();
    let ep = fx.ep();
    fx.p.ep_dup_connect(ep, up, TIMEOUT_INFINITE, b"dup", Qos::BEST_EFFORT).unwrap();
    assert_eq!(fx.state(ep), EpState::ActiveConnectionPending);
    assert_eq!(fx.p.backend().last_connect.as_ref().map(|(q, _)| *q), Some(1000));
    let idle = fx.ep();
    let other = fx.ep();
    assert_eq!(ty(fx.p.ep_dup_connect(other, idle, 10, b"", Qos::BEST_EFFORT)), ErrorType::InvalidState);
}

#[test]
fn dat_ep_free_in_connected_flushes_and_frees() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_free(ep).unwrap();
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(1, DtoStatus::Flushed)]);
    assert_eq!(fx.p.backend().live_qps(), 0);
    fx.p.evd_free(fx.dto_evd).unwrap();
}

// ---- Disconnected ---------------------------------------------------------

#[test]
fn dat_ep_disconnect_in_disconnected_is_a_noop() {
    let mut fx = Fx::new();
    let ep = fx.ep_disconnected();
    fx.p.ep_disconnect(ep, CloseFlags::Abrupt).unwrap();
    fx.p.ep_disconnect(ep, CloseFlags::Graceful).unwrap();
    assert_eq!(ty(fx.p.evd_dequeue(fx.conn_evd)), ErrorType::QueueEmpty);
}

#[test]
fn dat_ep_reset_takes_disconnected_back_to_unconnected() {
    let mut fx = Fx::new();
    let ep = fx.ep_disconnected();
    assert_eq!(fx.p.ep_private_data(ep), Ok(&b"welcome"[..]));
    fx.p.ep_reset(ep).unwrap();
    assert_eq!(fx.state(ep), EpState::Unconnected);
    // The private data was valid until the reset.
    assert_eq!(fx.p.ep_private_data(ep), Ok(&b""[..]));
    // And the EP connects again (dapltest reuses EPs this way).
    fx.connect(ep);
    assert_eq!(fx.state(ep), EpState::ActiveConnectionPending);
}

#[test]
fn dat_ep_free_in_disconnected_succeeds() {
    let mut fx = Fx::new();
    let ep = fx.ep_disconnected();
    fx.p.ep_free(ep).unwrap();
    fx.p.evd_free(fx.conn_evd).unwrap();
}

#[test]
fn dat_ep_query_reports_remote_address_once_connecting() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let remote =
        IaAddress { bytes: [2, 0, 0, 0, 10, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] };
    fx.p.ep_connect(ep, &remote, 4242, 10, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT).unwrap();
    let q = fx.p.ep_query(ep).unwrap();
    assert_eq!((q.state, q.remote_ia_address, q.remote_port_qual), (EpState::ActiveConnectionPending, remote, 4242));
    let (_, ia_attr) = fx.p.ia_query(fx.ia).unwrap();
    assert_eq!(q.local_ia_address, ia_attr.ia_address);
    assert_eq!(ty(fx.p.ep_query(EpHandle::NULL)), ErrorType::InvalidHandle);
}

#[test]
fn dat_ep_create_zero_message_and_rdma_sizes_mean_the_ia_maximum() {
    let mut fx = Fx::new();
    let (_, ia_attr) = fx.p.ia_query(fx.ia).unwrap();
    let zeroed = EpAttr { max_message_size: 0, max_rdma_size: 0, ..fx.attr() };
    let ep = fx.ep_with(Some(&zeroed));
    let got = fx.p.ep_query(ep).unwrap().attr;
    assert_eq!((got.max_message_size, got.max_rdma_size), (ia_attr.max_message_size, ia_attr.max_rdma_size));
    // dat_ep_modify resolves them the same way.
    let small = EpAttr { max_message_size: 64, max_rdma_size: 128, ..fx.attr() };
    fx.p.ep_modify(ep, &EpChanges { attr: Some(small), ..EpChanges::default() }).unwrap();
    assert_eq!(fx.p.ep_query(ep).unwrap().attr.max_message_size, 64);
    fx.p.ep_modify(ep, &EpChanges { attr: Some(zeroed), ..EpChanges::default() }).unwrap();
    let got = fx.p.ep_query(ep).unwrap().attr;
    assert_eq!((got.max_message_size, got.max_rdma_size), (ia_attr.max_message_size, ia_attr.max_rdma_size));
}
