//! Compiles the consumer entry points that dispatch through a handle's
//! provider table into libudat.a: `src/dispatch.c`, the check of a first
//! handle, includes the functions `cargo xtask entries` generated from
//! udat-capi's `entries.list` (its `generated/consumer_calls.inc`).

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=src/dispatch.c");
    let generated = env::var("DEP_UDAT_EXT_INCLUDE").expect("udat-capi's build script names its output directory");
    println!("cargo:rerun-if-changed={generated}/consumer_calls.inc");
    cc::Build::new()
        .file("src/dispatch.c")
        .include(generated)
        .define("DAT_EXTENSIONS", None)
        .warnings_into_errors(true)
        .compile("udat_dispatch");
}
