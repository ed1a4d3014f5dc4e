//! Faults injected into the software HCA, seen through the DAT API: each
//! error syndrome reaches the consumer as its DAT status and breaks the
//! connection; a QP forced to error and a peer that vanishes leave every
//! DTO completed exactly once; a reset loses the flushes not dequeued.

use udat_core::types::*;
use udat_core::*;
mod common;

use common::{SoftFabric, SYNDROMES};
use udat_testkit::suite::Rig;

fn tag(ep: EpHandle) -> u64 {
    ep.raw().to_bits()
}

#[test]
fn each_error_syndrome_completes_with_its_dat_status_and_breaks_the_connection() {
    // A flush and an unknown syndrome are not faults a device reports first.
    for &(raw, status) in SYNDROMES.iter().filter(|(raw, _)| !matches!(raw, 0x05 | 0x7f)) {
        let mut rig = Rig::<SoftFabric>::new();
        let (client, server) = rig.pair();
        let src = rig.buf(64, MemPriv::ALL);
        let dst = rig.buf(64, MemPriv::ALL);
        assert!(rig.p.backend_mut().device().fail_next(tag(client.ep), raw));
        rig.write(client.ep, src.seg(0, 64), 1, dst.remote(0, 64)).unwrap();
        rig.write(client.ep, src.seg(0, 64), 2, dst.remote(0, 64)).unwrap();
        assert_eq!(rig.dto(client.dto), (1, status, 64, DtoOp::RdmaWrite), "syndrome {raw:#x}");
        rig.expect(client.conn, EventNumber::ConnectionBroken);
        assert_eq!(rig.dto(client.dto).1, DtoStatus::Flushed, "the WQE after the error");
        rig.expect(server.conn, EventNumber::ConnectionDisconnected);
        assert!(rig.p.evd_dequeue(client.dto).is_err(), "a DTO completed twice");
    }
}

/// An RMR triplet whose range runs past 2^64 is outside its registration:
/// an RDMA write or read completes with DAT_DTO_ERR_REMOTE_ACCESS and
/// breaks its connection, as a bad rmr_context does, and another
/// connection of the provider carries on.
#[test]
fn a_remote_range_past_2_64_is_a_remote_access_error() {
    let mut rig = Rig::<SoftFabric>::new();
    let (bystander, _) = rig.pair();
    let local = rig.buf(4096, MemPriv::ALL);
    let target = rig.buf(4096, MemPriv::ALL);
    for read in [false, true] {
        let (client, _server) = rig.pair();
        let remote = RmrTriplet { virtual_address: u64::MAX - 2047, ..target.remote(0, 4096) };
        let op = if read { RequestOp::RdmaRead { remote } } else { RequestOp::RdmaWrite { remote } };
        rig.p.ep_post_request(client.ep, &[local.seg(0, 4096)], 1, op, CompletionFlags::DEFAULT).unwrap();
        assert_eq!(rig.dto(client.dto).1, DtoStatus::RemoteAccess, "read: {read}");
        rig.expect(client.conn, EventNumber::ConnectionBroken);
    }
    let remote = target.remote(0, 4096);
    rig.write(bystander.ep, local.seg(0, 4096), 2, remote).unwrap();
    assert_eq!(rig.dto(bystander.dto), (2, DtoStatus::Success, 4096, DtoOp::RdmaWrite));
}

#[test]
fn a_receive_too_small_for_the_send_fails_both_sides() {
    let mut rig = Rig::<SoftFabric>::new();
    let (client, server) = rig.pair();
    let src = rig.buf(256, MemPriv::ALL);
    let dst = rig.buf(256, MemPriv::ALL);
    rig.p.ep_post_recv(server.ep, &[dst.seg(0, 16)], 1, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_request(client.ep, &[src.seg(0, 200)], 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(rig.dto(server.dto).1, DtoStatus::LocalLength);
    assert_eq!(rig.dto(client.dto).1, DtoStatus::RemoteResponder);
}

#[test]
fn a_qp_forced_to_error_flushes_everything_once_in_order() {
    let mut rig = Rig::<SoftFabric>::new();
    let (client, _server) = rig.pair();
    let buf = rig.buf(4096, MemPriv::ALL);
    for cookie in 0..4 {
        rig.p.ep_post_recv(client.ep, &[buf.seg(0, 64)], 10 + cookie, CompletionFlags::DEFAULT).unwrap();
    }
    assert!(rig.p.backend_mut().device().force_error(tag(client.ep)));
    rig.expect(client.conn, EventNumber::ConnectionBroken);
    let cookies: Vec<u64> = (0..4).map(|_| rig.dto(client.dto)).map(|d| d.0).collect();
    assert_eq!(cookies, vec![10, 11, 12, 13]);
    assert!(rig.p.evd_dequeue(client.dto).is_err());
    // The device's QP error names the EP on the async EVD.
    let async_evd = match rig.p.ia_query(rig.ia).unwrap().0 {
        AsyncEvdRef::Handle(evd) => evd,
        other => panic!("{other:?}"),
    };
    let e = rig.expect(async_evd, EventNumber::AsyncEpBroken);
    assert!(matches!(e.data, EventData::AsyncError { handle: Some(h), .. } if h == client.ep.into()), "{e:?}");
}

#[test]
fn a_vanished_peer_fails_the_next_request_and_nothing_is_lost() {
    let mut rig = Rig::<SoftFabric>::new();
    let (client, server) = rig.pair();
    let src = rig.buf(64, MemPriv::ALL);
    let dst = rig.buf(64, MemPriv::ALL);
    rig.write(client.ep, src.seg(0, 64), 1, dst.remote(0, 64)).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::Success);
    assert!(rig.p.backend_mut().device().vanish(tag(server.ep)));
    for cookie in 2..6 {
        rig.write(client.ep, src.seg(0, 64), cookie, dst.remote(0, 64)).unwrap();
    }
    assert_eq!(rig.dto(client.dto), (2, DtoStatus::Transport, 64, DtoOp::RdmaWrite));
    rig.expect(client.conn, EventNumber::ConnectionBroken);
    let rest: Vec<_> = (3..6).map(|_| rig.dto(client.dto)).map(|d| (d.0, d.1)).collect();
    assert_eq!(rest, vec![(3, DtoStatus::Flushed), (4, DtoStatus::Flushed), (5, DtoStatus::Flushed)]);
}

/// dat_srq_resize(3DAT): the ring is sized at creation, so the SRQ may
/// shrink within it but cannot grow: DAT_INSUFFICIENT_RESOURCES, and the
/// SRQ keeps its size and still takes receives.
#[test]
fn an_srq_shrinks_within_its_ring_and_refuses_to_grow() {
    let mut rig = Rig::<SoftFabric>::new();
    let attr = SrqAttr { max_recv_dtos: 15, max_recv_iov: 1, low_watermark: 0 };
    let srq = rig.p.srq_create(rig.ia, rig.pz, &attr).unwrap();
    rig.p.srq_resize(srq, 8).unwrap();
    rig.p.srq_resize(srq, 15).unwrap();
    let refused = rig.p.srq_resize(srq, 64).unwrap_err();
    assert_eq!(refused.error_type(), ErrorType::InsufficientResources);
    let buf = rig.buf(64 * 15, MemPriv::ALL);
    for cookie in 0..15 {
        rig.p.srq_post_recv(srq, &[buf.seg(cookie as usize * 64, 64)], cookie).unwrap();
    }
    rig.p.srq_free(srq).unwrap();
}

/// dat_ep_reset(3DAT): "The operation might cause the loss of any
/// completions of previously posted DTOs ... that were not dequeued yet".
/// The reset QP keeps its number, so the flushes its disconnect left in
/// its EVD's CQ are lost, not taken for the next connection's work.
#[test]
fn dat_ep_reset_loses_the_flushes_not_dequeued_and_the_next_connection_completes_alone() {
    let mut rig = Rig::<SoftFabric>::new();
    let (client, server) = rig.pair();
    let buf = rig.buf(4096, MemPriv::ALL);
    for cookie in 0..3 {
        rig.p.ep_post_recv(client.ep, &[buf.seg(0, 64)], 10 + cookie, CompletionFlags::DEFAULT).unwrap();
    }
    rig.p.ep_disconnect(client.ep, CloseFlags::Graceful).unwrap();
    rig.expect(client.conn, EventNumber::ConnectionDisconnected);
    rig.expect(server.conn, EventNumber::ConnectionDisconnected);
    rig.p.ep_reset(client.ep).unwrap();
    rig.p.ep_reset(server.ep).unwrap();
    rig.connect(client, server, udat_testkit::suite::PORT + 40, b"again", b"");
    rig.p.ep_post_recv(client.ep, &[buf.seg(0, 64)], 50, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_request(server.ep, &[buf.seg(1024, 16)], 60, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(rig.dto(server.dto), (60, DtoStatus::Success, 16, DtoOp::Send));
    assert_eq!(rig.dto(client.dto), (50, DtoStatus::Success, 16, DtoOp::Receive));
    assert!(rig.p.evd_dequeue(client.dto).is_err(), "a flush from before the reset");
}
