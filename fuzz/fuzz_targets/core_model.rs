//! The core's Rust API against the reference model of
//! `udat_testkit::reference`, with sequences libFuzzer grows: every
//! call's outcome must be the model's, every DTO must complete exactly
//! once, and the transport must hold nothing at the end.
#![no_main]

use libfuzzer_sys::fuzz_target;

use udat_testkit::reference;

fuzz_target!(|ops: Vec<reference::Op>| {
    if let Err(e) = reference::check(&ops[..ops.len().min(128)]) {
        panic!("{e}");
    }
});
