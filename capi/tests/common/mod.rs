// Each test crate that includes this module uses a part of it.
#![allow(dead_code)]

//! A model provider registered under a name of the test's own, with an
//! IA open on it: called through its table as libdat2 calls it.

use std::ffi::CStr;
use std::ptr;

use udat_capi::registry::{self, Registration};
use udat_capi::sys::*;

fn same(ia: DAT_IA_HANDLE) -> DAT_IA_HANDLE {
    ia
}

/// The registration every test provider has.
pub const REGISTRATION: Registration = Registration { dapl_version: (2, 0), thread_safe: true, ia_out: same };

/// The `ia_params` of the software HCA's provider, default capacities.
pub const MODEL: &str = "model mlx5_model0";

pub struct Rig {
    pub table: *const DAT_PROVIDER,
    pub ia: DAT_IA_HANDLE,
}

impl Rig {
    /// A provider registered with `params` as its `ia_params`.
    pub fn new(name: &'static CStr, params: &str) -> Rig {
        let table = registry::add(name, params, REGISTRATION).expect("register the model provider");
        let (mut evd, mut ia) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: the table was just registered; the arguments are valid.
        let ret = unsafe { (*table).ia_open_func.unwrap()(name.as_ptr().cast_mut(), 8, &mut evd, &mut ia) };
        assert_eq!(ret, DAT_SUCCESS);
        Rig { table, ia }
    }

    pub fn t(&self) -> &DAT_PROVIDER {
        // SAFETY: registered until `drop`.
        unsafe { &*self.table }
    }

    pub fn pz(&self) -> DAT_PZ_HANDLE {
        let mut pz = ptr::null_mut();
        // SAFETY: a live IA and a valid out-pointer.
        assert_eq!(unsafe { self.t().pz_create_func.unwrap()(self.ia, &mut pz) }, DAT_SUCCESS);
        pz
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // SAFETY: the IA is open.
        let ret = unsafe { self.t().ia_close_func.unwrap()(self.ia, DAT_CLOSE_ABRUPT_FLAG) };
        assert_eq!(ret, DAT_SUCCESS);
        assert!(registry::remove(self.table));
    }
}
