//! `UDAT_DEBUG`: a failed `dat_ia_open` says why on stderr when it is
//! set, and nothing when it is not. The test runs itself again as a child
//! with the variable set (or not) and reads the child's stderr.

use std::process::Command;
use std::ptr;

use udat_capi::sys::*;

mod common;
use common::{Rig, SOFTHCA};

/// Set in the child, which makes the failing call.
const CHILD: &str = "UDAT_DEBUG_TEST_CHILD";
const TEST: &str = "a_failed_ia_open_says_why_with_udat_debug_and_nothing_without";

#[test]
fn a_failed_ia_open_says_why_with_udat_debug_and_nothing_without() {
    if std::env::var_os(CHILD).is_some() {
        let rig = Rig::new(c"debug-rig", SOFTHCA);
        let (mut evd, mut ia) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: a registered table; valid out-pointers. The name is
        // not one the provider was registered under.
        let ret = unsafe { rig.t().ia_open_func.unwrap()(c"debug-no-such".as_ptr().cast_mut(), 8, &mut evd, &mut ia) };
        assert_eq!(ret, DAT_CLASS_ERROR | DAT_PROVIDER_NOT_FOUND);
        return;
    }
    let child = |debug: Option<&str>| {
        let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
        cmd.args([TEST, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, "1");
        match debug {
            Some(v) => cmd.env(udat_capi::debug::VARIABLE, v),
            None => cmd.env_remove(udat_capi::debug::VARIABLE),
        };
        let out = cmd.output().expect("run the child");
        assert!(out.status.success(), "the child failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let said = child(Some("1"));
    assert!(said.contains("udat: dat_ia_open") && said.contains("DAT_PROVIDER_NOT_FOUND"), "{said}");
    assert!(said.contains("debug-no-such"), "{said}");
    for quiet in [None, Some("0")] {
        let said = child(quiet);
        assert!(!said.contains("udat: "), "{quiet:?}: {said}");
    }
}
