//! Objects created and freed over and over leave the software HCA as they
//! found it (issue 30: a CQ's UAR page outlived its CQ, so every cycle of
//! EVD and EP create/free grew the UAR map, and every QP destroy scanned
//! it). Time per cycle belongs to a bench; this test holds the sizes.

use udat_core::types::*;
use udat_core::*;
mod common;

use common::SoftFabric;
use udat_testkit::suite::Rig;

#[test]
fn the_uar_map_returns_to_its_size_after_100_000_evd_and_ep_cycles() {
    let mut rig = Rig::<SoftFabric>::new();
    let before = rig.p.backend_mut().device().uars();
    for cycle in 0..100_000 {
        let dto = rig.p.evd_create(rig.ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
        let ep = rig.p.ep_create(rig.ia, rig.pz, dto, dto, EvdHandle::NULL, None).unwrap();
        assert_eq!(rig.p.backend_mut().device().uars(), before + 2, "cycle {cycle}: a CQ's and a QP's page");
        rig.p.ep_free(ep).unwrap();
        rig.p.evd_free(dto).unwrap();
        assert_eq!(rig.p.backend_mut().device().uars(), before, "cycle {cycle}");
    }
}
