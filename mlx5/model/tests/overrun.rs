//! A CQ overrun behaves as a ConnectX's does (issue 30): the software HCA
//! reports a CQ error instead of panicking, and udat reports
//! `DAT_ASYNC_ERROR_EVD_OVERFLOW` and breaks the EPs that feed the EVD,
//! their DTOs flushed once each, while the rest of the provider carries
//! on. Before, the 65th completion panicked the model ("model: CQ
//! overrun") and every later call of the provider answered
//! `DAT_INTERNAL_ERROR`.

use std::collections::BTreeMap;

use udat_core::types::*;
use udat_core::*;
use udat_testkit::model::Model;
use udat_testkit::suite::{Rig, Side};

const EPS: u64 = 8;
const WRITES: u64 = 16;

#[test]
fn eight_eps_overrunning_one_evds_cq_are_broken_and_flushed_once_and_the_rest_carries_on() {
    let mut rig = Rig::<Model>::new();
    let bystander = rig.pair();
    let src = rig.buf(64, MemPriv::ALL);
    let dst = rig.buf(64, MemPriv::ALL);
    // One DTO EVD of qlen 1 for every request: the software HCA gives it
    // a CQ of 64, which 128 writes overrun while nobody dequeues.
    let shared = rig.p.evd_create(rig.ia, 1, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let mut clients = Vec::new();
    for i in 0..EPS {
        let recv = rig.p.evd_create(rig.ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
        let conn = rig.p.evd_create(rig.ia, 8, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
        let ep = rig.p.ep_create(rig.ia, rig.pz, recv, shared, conn, None).unwrap();
        let client = Side { ep, dto: shared, conn };
        let server = rig.side();
        rig.connect(client, server, 0x5000 + i, b"", b"");
        clients.push(client);
    }
    let mut posted = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        for w in 0..WRITES {
            let cookie = (i as u64) << 8 | w;
            let write = rig.p.ep_post_rdma_write(
                client.ep,
                &[src.seg(0, 64)],
                cookie,
                &dst.remote(0, 64),
                CompletionFlags::DEFAULT,
            );
            match write {
                Ok(()) => posted.push(cookie),
                Err(e) => assert_ne!(e.error_type(), ErrorType::InternalError, "write {cookie:#x}: {e:?}"),
            }
        }
    }
    assert!(posted.len() > 64, "the CQ of 64 is overrun: {} posted", posted.len());

    // The async EVD hears of the overflow, naming the EVD, once.
    let e = rig.next(rig_async(&rig));
    assert_eq!(e.number, EventNumber::AsyncEvdOverflow, "{e:?}");
    assert!(matches!(e.data, EventData::AsyncError { handle: Some(h), reason: 0 } if h == shared.into()));
    // Every EP feeding the EVD is broken.
    for client in &clients {
        rig.expect(client.conn, EventNumber::ConnectionBroken);
        assert_eq!(rig.state(client.ep), EpState::Disconnected);
    }
    // Every write posted completes exactly once: those the CQ held as the
    // device wrote them, every other one flushed.
    let mut completed = BTreeMap::new();
    while completed.len() < posted.len() {
        let (cookie, status, _, _) = rig.dto(shared);
        assert!(matches!(status, DtoStatus::Success | DtoStatus::Flushed), "{cookie:#x}: {status:?}");
        assert!(completed.insert(cookie, status).is_none(), "{cookie:#x} completed twice");
    }
    assert_eq!(completed.keys().copied().collect::<Vec<_>>(), {
        let mut p = posted.clone();
        p.sort();
        p
    });
    assert!(completed.values().filter(|s| **s == DtoStatus::Success).count() <= 64);
    assert!(rig.p.evd_dequeue(shared).is_err(), "nothing more");
    assert!(rig.p.evd_dequeue(rig_async(&rig)).is_err(), "one overflow event");

    // The other connection of the IA carries on.
    rig.p
        .ep_post_rdma_write(bystander.0.ep, &[src.seg(0, 64)], 7, &dst.remote(0, 64), CompletionFlags::DEFAULT)
        .unwrap();
    assert_eq!(rig.dto(bystander.0.dto), (7, DtoStatus::Success, 64, DtoOp::RdmaWrite));
    // And so does another IA of the provider.
    let (ia, _) = rig.p.ia_open(b"mlx5_model1", AsyncEvd::Create { min_qlen: 8 }).unwrap();
    let pz = rig.p.pz_create(ia).unwrap();
    let evd = rig.p.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let ep = rig.p.ep_create(ia, pz, evd, evd, EvdHandle::NULL, None).unwrap();
    rig.p.ep_free(ep).unwrap();
    rig.p.evd_free(evd).unwrap();
    rig.p.pz_free(pz).unwrap();
    rig.p.ia_close(ia, CloseFlags::Graceful).unwrap();
    // The EVD that overran is freed like any other once its EPs are.
    for client in clients {
        rig.p.ep_free(client.ep).unwrap();
    }
    rig.p.evd_free(shared).unwrap();
}

fn rig_async(rig: &Rig<Model>) -> EvdHandle {
    match rig.p.ia_query(rig.ia).unwrap().0 {
        AsyncEvdRef::Handle(evd) => evd,
        other => panic!("{other:?}"),
    }
}
