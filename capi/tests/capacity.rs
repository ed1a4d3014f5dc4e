//! How many objects a provider of the C ABI holds: the defaults fit
//! storage engines (16,384 EPs and EVDs, 65,536 LMRs), `ia_params` sets
//! other counts, running out is `DAT_INSUFFICIENT_RESOURCES`, and the
//! provider is built on the heap, so a first `dat_ia_open` on a small
//! thread stack works.

use std::ffi::CStr;
use std::ptr;

use udat_capi::registry;
use udat_capi::sys::*;

mod common;
use common::{Rig, MODEL, REGISTRATION};

/// A provider with a PZ on its IA.
struct Cap {
    rig: Rig,
    pz: DAT_PZ_HANDLE,
}

impl Cap {
    fn new(name: &'static CStr, params: &str) -> Cap {
        let rig = Rig::new(name, params);
        let pz = rig.pz();
        Cap { rig, pz }
    }

    fn t(&self) -> &DAT_PROVIDER {
        self.rig.t()
    }

    fn ep(&self) -> DAT_RETURN {
        let mut ep = ptr::null_mut();
        let null = ptr::null_mut();
        // SAFETY: a live IA and PZ; no EVDs and default attributes.
        unsafe { self.t().ep_create_func.unwrap()(self.rig.ia, self.pz, null, null, null, ptr::null(), &mut ep) }
    }

    fn lmr(&self, buf: &[u8]) -> DAT_RETURN {
        let mut lmr = ptr::null_mut();
        let region = DAT_REGION_DESCRIPTION { for_va: buf.as_ptr().cast_mut().cast() };
        // SAFETY: a live IA and PZ; `buf` outlives the LMR (the IA is
        // closed before the test returns); null optional out-pointers.
        unsafe {
            self.t().lmr_create_func.unwrap()(
                self.rig.ia,
                DAT_MEM_TYPE_VIRTUAL,
                region,
                buf.len() as u64,
                self.pz,
                DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                DAT_VA_TYPE_VA,
                &mut lmr,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        }
    }

    fn attr(&self) -> DAT_IA_ATTR {
        let mut attr = DAT_IA_ATTR::default();
        // SAFETY: a live IA and a valid out-pointer.
        let ret = unsafe {
            self.t().ia_query_func.unwrap()(self.rig.ia, ptr::null_mut(), u64::MAX, &mut attr, 0, ptr::null_mut())
        };
        assert_eq!(ret, DAT_SUCCESS);
        attr
    }
}

#[test]
fn ten_thousand_eps_and_lmrs_live_at_once_by_default() {
    let rig = Cap::new(c"capacity-default", MODEL);
    let attr = rig.attr();
    assert!(attr.max_eps >= 16_384 && attr.max_evds >= 16_384, "{} EPs, {} EVDs", attr.max_eps, attr.max_evds);
    assert!(attr.max_lmrs >= 65_536, "{} LMRs", attr.max_lmrs);
    let buf = vec![0u8; 64];
    for i in 0..10_000 {
        assert_eq!(rig.ep(), DAT_SUCCESS, "EP {i}");
        assert_eq!(rig.lmr(&buf), DAT_SUCCESS, "LMR {i}");
    }
}

#[test]
fn ia_params_set_the_counts_and_the_next_object_is_insufficient_resources() {
    let rig = Cap::new(c"capacity-params", "model mlx5_model0 eps=3 lmrs=2");
    assert_eq!((rig.attr().max_eps, rig.attr().max_lmrs), (3, 2));
    for _ in 0..3 {
        assert_eq!(rig.ep(), DAT_SUCCESS);
    }
    assert_eq!(rig.ep() & 0x3fff_0000, DAT_INSUFFICIENT_RESOURCES);
    let buf = vec![0u8; 64];
    assert_eq!(rig.lmr(&buf), DAT_SUCCESS);
    assert_eq!(rig.lmr(&buf), DAT_SUCCESS);
    assert_eq!(rig.lmr(&buf) & 0x3fff_0000, DAT_INSUFFICIENT_RESOURCES);
}

#[test]
fn a_bad_count_in_ia_params_registers_nothing() {
    assert!(registry::add(c"capacity-bad", "model mlx5_model0 eps=lots", REGISTRATION).is_err());
    assert!(registry::table(c"capacity-bad").is_none());
}

#[test]
fn first_open_works_on_a_small_thread_stack() {
    let opened = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| {
            let rig = Cap::new(c"capacity-stack", MODEL);
            rig.ep()
        })
        .expect("spawn")
        .join()
        .expect("the open did not overflow the stack");
    assert_eq!(opened, DAT_SUCCESS);
}
