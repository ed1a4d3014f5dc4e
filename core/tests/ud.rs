//! UD Endpoints of the IB extension (`<dat2/dat_ib_extensions.h>` 2.0.2,
//! 2.0.9): `DAT_IB_SERVICE_TYPE_UD` EPs, their connections and events,
//! `dat_ib_post_send_ud`, UD receives, `dat_ib_ud_ah_free` and
//! `dat_ib_ud_cm_free`.
mod common;
use common::*;
use udat_core::backend::{AhAttr, ConnOutcome, UdDest, UdPeer, UD_MAX_MESSAGE, UD_QKEY};
use udat_core::shared::Spin;
use udat_core::types::*;
use udat_core::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

/// The peer every test resolves.
const PEER: UdPeer = UdPeer { ah: AhAttr { dlid: 7, sl: 0, port_num: 1, grh: None }, qpn: 0x1234, qkey: UD_QKEY };

/// A UD EP on the fixture's PZ and EVDs, Unconnected.
fn ud_ep(fx: &mut Fx) -> EpHandle {
    fx.p.ep_create_ud(fx.ia, fx.pz, (fx.dto_evd, fx.dto_evd, fx.conn_evd), None).unwrap()
}

/// Connect `ep` and let the mock resolve `PEER`; the address handle the
/// ESTABLISHED event gave.
fn resolve(fx: &mut Fx, ep: EpHandle) -> AhHandle {
    fx.connect(ep);
    fx.p.backend_mut().ud_established(ep, PEER, false, b"welcome");
    let ev = fx.p.evd_dequeue(fx.conn_evd).unwrap();
    assert_eq!(ev.number, EventNumber::UdConnectionEstablished, "{ev:?}");
    match ev.data {
        EventData::UdConnection { ah, .. } => ah,
        other => panic!("expected a UD connection event, got {other:?}"),
    }
}

fn subtype<T: core::fmt::Debug>(r: DatResult<T>) -> (ErrorType, Subtype) {
    let e = r.expect_err("expected an error");
    (e.error_type(), e.subtype())
}

/// dat_ep_create of `DAT_IB_SERVICE_TYPE_UD` makes a UD QP, and a
/// transport without UD refuses it with DAT_MODEL_NOT_SUPPORTED.
#[test]
fn a_ud_ep_has_a_ud_qp_and_a_transport_without_ud_refuses_one() {
    let mut fx = Fx::new();
    let (ud, rc) = (ud_ep(&mut fx), fx.ep());
    assert!(fx.p.backend().is_ud(ud) && !fx.p.backend().is_ud(rc));
    assert_eq!((fx.p.ep_is_ud(ud), fx.p.ep_is_ud(rc)), (Ok(true), Ok(false)));
    assert_eq!(fx.state(ud), EpState::Unconnected);

    let mut backend = MockBackend::new();
    backend.attr.ud = false;
    let mut p: Box<P> = udat_testkit::boxed(backend, Inline);
    let (ia, _) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 8 }).unwrap();
    let pz = p.pz_create(ia).unwrap();
    let refused = p.ep_create_ud(ia, pz, (EvdHandle::NULL, EvdHandle::NULL, EvdHandle::NULL), None);
    assert_eq!(ty(refused), ErrorType::ModelNotSupported);
}

/// A connect of a UD EP resolves one peer: the EP stays as it is until
/// the peer answers, then DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED carries
/// the peer's address handle, QP and private data, and the EP is
/// Connected. It connects again from Connected, one handle a peer.
#[test]
fn a_ud_connect_delivers_the_peers_address_handle() {
    let mut fx = Fx::new();
    let ep = ud_ep(&mut fx);
    fx.connect(ep);
    assert_eq!(fx.state(ep), EpState::Unconnected, "a UD connect does not bind the EP");
    fx.p.backend_mut().ud_established(ep, PEER, false, b"welcome");
    let ev = fx.p.evd_dequeue(fx.conn_evd).unwrap();
    assert_eq!(ev.number, EventNumber::UdConnectionEstablished);
    let EventData::UdConnection { ep: of, ah, remote_qpn, private_data_size, passive } = ev.data else {
        panic!("{ev:?}")
    };
    assert_eq!((of, remote_qpn, private_data_size, passive), (ep, 0x1234, 7, false));
    assert!(!ah.is_null());
    let (data, _) = fx.p.ud_connection(ep, ah).unwrap();
    assert_eq!(data, b"welcome");
    assert_eq!(fx.state(ep), EpState::Connected);
    assert_eq!(fx.p.backend().live_ahs, 1);

    let second = resolve(&mut fx, ep);
    assert_ne!(second, ah, "each connection resolves its own handle");
    assert_eq!(fx.p.backend().live_ahs, 2);
}

/// A UD request arrives at a consumer PSP as
/// DAT_IB_UD_CONNECTION_REQUEST_EVENT; a UD EP accepts it, in Unconnected
/// or Connected, and stays there until the accept completes. A UD request
/// on an RC EP, or an RC one on a UD EP, is DAT_INVALID_PARAMETER of the
/// EP (argument 2); a provider PSP, whose EP would be RC, refuses UD
/// requests.
#[test]
fn a_ud_request_is_accepted_by_a_ud_ep_only() {
    let mut fx = Fx::new();
    let (ud, rc) = (ud_ep(&mut fx), fx.ep());
    let _psp = fx.p.psp_create(fx.ia, 77, fx.cr_evd, PspFlags::Consumer).unwrap();
    let ud_request = |fx: &mut Fx| {
        fx.p.backend_mut().incoming_ud(77, b"ping").unwrap();
        let ev = fx.p.evd_dequeue(fx.cr_evd).unwrap();
        assert_eq!(ev.number, EventNumber::UdConnectionRequest);
        let EventData::CrArrival { cr, .. } = ev.data else { panic!("{ev:?}") };
        cr
    };
    let cr = ud_request(&mut fx);
    assert_eq!(subtype(fx.p.cr_accept(cr, rc, b"")), (ErrorType::InvalidParameter, Subtype::InvalidArg2));
    fx.p.cr_accept(cr, ud, b"pong").unwrap();
    assert_eq!(fx.state(ud), EpState::Unconnected);
    fx.p.backend_mut().ud_established(ud, PEER, true, b"ping");
    let ev = fx.p.evd_dequeue(fx.conn_evd).unwrap();
    assert!(matches!(ev.data, EventData::UdConnection { passive: true, .. }), "{ev:?}");
    assert_eq!(fx.state(ud), EpState::Connected);
    let again = ud_request(&mut fx);
    fx.p.cr_accept(again, ud, b"").unwrap();

    fx.p.backend_mut().incoming(77, b"rc").unwrap();
    let ev = fx.p.evd_dequeue(fx.cr_evd).unwrap();
    assert_eq!(ev.number, EventNumber::ConnectionRequest);
    let EventData::CrArrival { cr: rc_request, .. } = ev.data else { panic!("{ev:?}") };
    assert_eq!(subtype(fx.p.cr_accept(rc_request, ud, b"")), (ErrorType::InvalidParameter, Subtype::InvalidArg2));

    let _provider = fx.p.psp_create(fx.ia, 78, fx.cr_evd, PspFlags::Provider).unwrap();
    let rejected = fx.p.backend_mut().incoming_ud(78, b"").unwrap();
    assert!(fx.drain(fx.cr_evd).is_empty());
    assert!(fx.p.backend().rejected.contains(&rejected));
}

/// A UD connection that fails is DAT_IB_UD_CONNECTION_REJECT_EVENT (with
/// the peer's private data) or DAT_IB_UD_CONNECTION_ERROR_EVENT, no
/// address handle, and the EP's state unchanged.
#[test]
fn a_failed_ud_connection_is_a_reject_or_error_event() {
    let mut fx = Fx::new();
    let ep = ud_ep(&mut fx);
    fx.connect(ep);
    fx.p.backend_mut().conn_event(ep, ConnOutcome::PeerRejected, b"no");
    let ev = fx.p.evd_dequeue(fx.conn_evd).unwrap();
    assert_eq!(ev.number, EventNumber::UdConnectionReject);
    let EventData::UdConnection { ah, private_data_size, .. } = ev.data else { panic!("{ev:?}") };
    assert!(ah.is_null());
    assert_eq!((private_data_size, fx.p.ud_connection(ep, ah).unwrap().0), (2, &b"no"[..]));
    fx.connect(ep);
    fx.p.backend_mut().conn_event(ep, ConnOutcome::TimedOut, b"");
    assert_eq!(fx.p.evd_dequeue(fx.conn_evd).unwrap().number, EventNumber::UdConnectionError);
    assert_eq!(fx.state(ep), EpState::Unconnected);
    assert_eq!(fx.p.backend().live_ahs, 0);
}

/// dat_ib_post_send_ud sends to the QP the consumer names through the
/// address handle, with the Q_Key the connection learned, and completes
/// as DAT_IB_DTO_SEND_UD on the request EVD.
#[test]
fn dat_ib_post_send_ud_sends_through_the_address_handle() {
    let mut fx = Fx::new();
    let ep = ud_ep(&mut fx);
    let ah = resolve(&mut fx, ep);
    fx.p.ep_post_request(ep, &[fx.seg(0, 64)], 5, PostOp::SendUd { ah, remote_qpn: 0x1234 }, CompletionFlags::DEFAULT)
        .unwrap();
    let (_, dest) = fx.p.backend().last_ud.unwrap();
    assert_eq!(dest, UdDest { remote_qpn: 0x1234, qkey: UD_QKEY });
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert_eq!(
        ev.data,
        EventData::Dto { ep, cookie: 5, status: DtoStatus::Success, transferred_length: 64, op: DtoOp::SendUd, imm: 0 }
    );
}

/// The rules of dat_ib_post_send_ud, each with its error, and nothing left
/// behind by a refused post: an EP that is not UD is DAT_INVALID_HANDLE;
/// bad flags are argument 7; too many segments argument 3; a message
/// longer than the EP's limit argument 4; an address handle that is
/// freed, null, of another EP, or a QP number of more than 24 bits is
/// argument 5; a UD EP with no peer yet is DAT_INVALID_STATE.
#[test]
fn dat_ib_post_send_ud_refuses_what_it_cannot_send() {
    let mut fx = Fx::new();
    let (ep, other, rc) = (ud_ep(&mut fx), ud_ep(&mut fx), fx.ep_connected());
    let fresh = ud_ep(&mut fx);
    let ah = resolve(&mut fx, ep);
    let theirs = resolve(&mut fx, other);
    let seg = [fx.seg(0, 64)];
    let post = |fx: &mut Fx, ep, iov: &[LmrTriplet], ah, qpn, flags| {
        fx.p.ep_post_request(ep, iov, 1, PostOp::SendUd { ah, remote_qpn: qpn }, flags)
    };
    let d = CompletionFlags::DEFAULT;
    assert_eq!(subtype(post(&mut fx, rc, &seg, ah, 1, d)), (ErrorType::InvalidHandle, Subtype::InvalidHandleEp));
    assert_eq!(subtype(post(&mut fx, ep, &seg, ah, 1, CompletionFlags(0x40))).1, Subtype::InvalidArg7);
    let five = [fx.seg(0, 8); 5];
    assert_eq!(subtype(post(&mut fx, ep, &five, ah, 1, d)).1, Subtype::InvalidArg3);
    let long = [fx.seg(0, 4096)];
    let mut small = fx.attr();
    small.max_message_size = 1024;
    let limited = fx.p.ep_create_ud(fx.ia, fx.pz, (fx.dto_evd, fx.dto_evd, fx.conn_evd), Some(&small)).unwrap();
    let limited_ah = resolve(&mut fx, limited);
    assert_eq!(subtype(post(&mut fx, limited, &long, limited_ah, 1, d)).1, Subtype::InvalidArg4);
    // No datagram beyond one packet of the largest MTU, whatever the IA
    // allows an RC EP (the mock's 1 GiB).
    assert_eq!(fx.p.ep_query(ep).unwrap().attr.max_message_size, UD_MAX_MESSAGE);
    let jumbo = [fx.seg(0, 4096), fx.seg(0, 1)];
    assert_eq!(subtype(post(&mut fx, ep, &jumbo, ah, 1, d)).1, Subtype::InvalidArg4);
    assert_eq!(subtype(post(&mut fx, ep, &seg, AhHandle::NULL, 1, d)).1, Subtype::InvalidArg5);
    assert_eq!(subtype(post(&mut fx, ep, &seg, theirs, 1, d)).1, Subtype::InvalidArg5);
    assert_eq!(subtype(post(&mut fx, ep, &seg, ah, 0x0100_0000, d)).1, Subtype::InvalidArg5);
    assert_eq!(ty(post(&mut fx, fresh, &seg, ah, 1, d)), ErrorType::InvalidState);
    fx.p.ud_ah_free(ep, ah).unwrap();
    assert_eq!(subtype(post(&mut fx, ep, &seg, ah, 1, d)).1, Subtype::InvalidArg5);
    assert_eq!(fx.p.backend().pending_sends(ep), 0, "refused posts left nothing behind");
}

/// The shared door (the C ABI's, for a thread-safe provider) judges a UD
/// send as the exclusive one does, and a send every rule admits reaches
/// the shared transport, which the mock does not have.
#[test]
fn the_shared_door_sends_datagrams_by_the_same_rules() {
    let world = || {
        let mut fx = Fx::new();
        let ep = ud_ep(&mut fx);
        let ah = resolve(&mut fx, ep);
        (fx, ep, ah)
    };
    let ((mut exclusive, a, ah_a), (shared, b, ah_b)) = (world(), world());
    let cases = |fx: &Fx, ah: AhHandle| {
        [
            (vec![fx.seg(0, 64)], ah, 1, CompletionFlags::DEFAULT),
            (vec![fx.seg(0, 64)], ah, 1, CompletionFlags(0x40)),
            (vec![fx.seg(0, 8); 5], ah, 1, CompletionFlags::DEFAULT),
            (vec![fx.seg(0, 64)], AhHandle::NULL, 1, CompletionFlags::DEFAULT),
            (vec![fx.seg(0, 64)], ah, 0x0100_0000, CompletionFlags::DEFAULT),
        ]
    };
    let transport = Err(DatError::of(ErrorType::ModelNotSupported));
    let mut refused = 0;
    for ((iov, ah, qpn, f), (iov2, ah2, qpn2, f2)) in cases(&exclusive, ah_a).into_iter().zip(cases(&shared, ah_b)) {
        let want = exclusive.p.ep_post_request(a, &iov, 1, PostOp::SendUd { ah, remote_qpn: qpn }, f);
        // SAFETY: one thread: no `&mut` to the provider exists while the
        // door lives, and nothing else uses the EP.
        let got = unsafe { shared.p.locked(Spin) }.ep_post_request(
            b,
            &iov2,
            1,
            PostOp::SendUd { ah: ah2, remote_qpn: qpn2 },
            f2,
        );
        assert_eq!(got, if want.is_ok() { transport } else { want }, "{iov:?} {qpn:#x} {f:?}");
        refused += usize::from(want.is_err());
    }
    assert_eq!(refused, 4, "one send admitted, four refused");
    assert_eq!((exclusive.p.backend().pending_sends(a), shared.p.backend().pending_sends(b)), (1, 0));
}

/// The connected operations are not of a UD EP's transport: a send, an
/// RDMA write or read, and the extension's write with immediate data are
/// DAT_MODEL_NOT_SUPPORTED, of one segment (the lane) or more.
#[test]
fn connected_operations_on_a_ud_ep_are_model_not_supported() {
    let mut fx = Fx::new();
    let ep = ud_ep(&mut fx);
    resolve(&mut fx, ep);
    let (one, two) = ([fx.seg(0, 64)], [fx.seg(0, 32), fx.seg(64, 32)]);
    let remote = fx.remote(64);
    let d = CompletionFlags::DEFAULT;
    for iov in [&one[..], &two[..]] {
        assert_eq!(ty(fx.p.ep_post_request(ep, iov, 1, RequestOp::Send, d)), ErrorType::ModelNotSupported);
        assert_eq!(
            ty(fx.p.ep_post_request(ep, iov, 1, RequestOp::RdmaWrite { remote }, d)),
            ErrorType::ModelNotSupported
        );
        assert_eq!(
            ty(fx.p.ep_post_request(ep, iov, 1, RequestOp::RdmaRead { remote }, d)),
            ErrorType::ModelNotSupported
        );
        assert_eq!(
            ty(fx.p.ep_post_request(ep, iov, 1, RequestOp::RdmaWriteImm { remote, imm: 9 }, d)),
            ErrorType::ModelNotSupported
        );
    }
    assert_eq!(fx.p.backend().pending_sends(ep), 0);
}

/// A UD receive needs room for the 40 bytes of the GRH before the
/// datagram (ibv_post_recv(3)): less is DAT_LENGTH_ERROR. Its completion
/// is DAT_IB_DTO_RECV_UD with the bytes that arrived, GRH included, and
/// the sender's QP.
#[test]
fn a_ud_receive_has_room_for_the_grh_and_names_the_sender() {
    let mut fx = Fx::new();
    let ep = ud_ep(&mut fx);
    assert_eq!(ty(fx.p.ep_post_recv(ep, &[fx.seg(0, 39)], 1, CompletionFlags::DEFAULT)), ErrorType::LengthError);
    let split = [fx.seg(0, 20), fx.seg(64, 20)];
    fx.p.ep_post_recv(ep, &split, 2, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_recv(ep, &[fx.seg(128, 40)], 3, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(fx.p.backend().pending_recvs(ep), 2);
    fx.p.backend_mut().complete_recv_ud(ep, 40, 0x4321);
    let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert_eq!(
        ev.data,
        EventData::Dto {
            ep,
            cookie: 2,
            status: DtoStatus::Success,
            transferred_length: 40,
            op: DtoOp::ReceiveUd,
            imm: 0x4321
        }
    );
}

/// dat_ib_ud_ah_free frees the transport's handle once; dat_ib_ud_cm_free
/// releases a connection's CM object once; both take only a UD EP and
/// its own handles; freeing the EP frees the handles it still has.
#[test]
fn dat_ib_ud_ah_free_and_cm_free_release_once() {
    let mut fx = Fx::new();
    let (ep, other, rc) = (ud_ep(&mut fx), ud_ep(&mut fx), fx.ep());
    let (a, b) = (resolve(&mut fx, ep), resolve(&mut fx, ep));
    assert_eq!(fx.p.backend().live_ahs, 2);
    assert_eq!(subtype(fx.p.ud_ah_free(other, a)).1, Subtype::InvalidArg3);
    assert_eq!(subtype(fx.p.ud_ah_free(rc, a)), (ErrorType::InvalidHandle, Subtype::InvalidHandleEp));
    fx.p.ud_ah_free(ep, a).unwrap();
    assert_eq!(fx.p.backend().live_ahs, 1);
    assert_eq!(subtype(fx.p.ud_ah_free(ep, a)).1, Subtype::InvalidArg3);

    assert_eq!(subtype(fx.p.ud_cm_free(other, b)).1, Subtype::InvalidArg3);
    fx.p.ud_cm_free(ep, b).unwrap();
    assert_eq!(subtype(fx.p.ud_cm_free(ep, b)).1, Subtype::InvalidArg3);
    assert_eq!(subtype(fx.p.ud_cm_free(rc, b)), (ErrorType::InvalidHandle, Subtype::InvalidHandleEp));

    fx.p.ep_free(ep).unwrap();
    assert_eq!(fx.p.backend().live_ahs, 0, "the EP's handles went with it");
}
