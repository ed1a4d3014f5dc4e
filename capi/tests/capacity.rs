//! How many objects a provider of the C ABI holds: the defaults fit
//! storage engines (16,384 EPs and EVDs, 65,536 LMRs), `ia_params` sets
//! other counts, running out is `DAT_INSUFFICIENT_RESOURCES`, and the
//! provider is built on the heap, so a first `dat_ia_open` on a small
//! thread stack works.

use std::ptr;

use udat_capi::registry;
use udat_capi::sys::*;

mod common;
use common::{ty, Rig, REGISTRATION, SOFTHCA};

/// An EP in `pz` with no EVDs: the EP, or the error of `dat_ep_create`.
fn lone_ep(rig: &Rig, pz: DAT_PZ_HANDLE) -> Result<DAT_EP_HANDLE, DAT_RETURN> {
    let null = ptr::null_mut();
    rig.try_ep(pz, null, null, null)
}

#[test]
fn ten_thousand_eps_and_lmrs_live_at_once_by_default() {
    // Declared before the rig, so it outlives the IA that registers it.
    let mut buf = vec![0u8; 64];
    let rig = Rig::new(c"capacity-default", SOFTHCA);
    let pz = rig.pz();
    let attr = rig.attr();
    assert!(attr.max_eps >= 16_384 && attr.max_evds >= 16_384, "{} EPs, {} EVDs", attr.max_eps, attr.max_evds);
    assert!(attr.max_lmrs >= 65_536, "{} LMRs", attr.max_lmrs);
    for i in 0..10_000 {
        lone_ep(&rig, pz).unwrap_or_else(|ret| panic!("EP {i}: {ret:#x}"));
        rig.try_lmr(pz, &mut buf, DAT_MEM_PRIV_LOCAL_WRITE_FLAG).unwrap_or_else(|ret| panic!("LMR {i}: {ret:#x}"));
    }
}

#[test]
fn ia_params_set_the_counts_and_the_next_object_is_insufficient_resources() {
    let mut buf = vec![0u8; 64];
    let rig = Rig::new(c"capacity-params", "softhca mlx5_soft0 eps=3 lmrs=2");
    let pz = rig.pz();
    assert_eq!((rig.attr().max_eps, rig.attr().max_lmrs), (3, 2));
    for _ in 0..3 {
        assert!(lone_ep(&rig, pz).is_ok());
    }
    assert_eq!(lone_ep(&rig, pz).map_err(ty), Err(DAT_INSUFFICIENT_RESOURCES));
    let mut lmr = || rig.try_lmr(pz, &mut buf, DAT_MEM_PRIV_LOCAL_WRITE_FLAG).map(|_| ()).map_err(ty);
    assert_eq!(lmr(), Ok(()));
    assert_eq!(lmr(), Ok(()));
    assert_eq!(lmr(), Err(DAT_INSUFFICIENT_RESOURCES));
}

#[test]
fn a_bad_count_in_ia_params_registers_nothing() {
    assert!(udat_capi::register(c"capacity-bad", "softhca mlx5_soft0 eps=lots", REGISTRATION).is_err());
    assert!(registry::table(c"capacity-bad").is_none());
}

#[test]
fn first_open_works_on_a_small_thread_stack() {
    let opened = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| {
            let rig = Rig::new(c"capacity-stack", SOFTHCA);
            lone_ep(&rig, rig.pz()).map(|_| ())
        })
        .expect("spawn")
        .join()
        .expect("the open did not overflow the stack");
    assert_eq!(opened, Ok(()));
}
