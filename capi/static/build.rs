//! Compiles the consumer entry points that dispatch through a handle's
//! provider table into libudat.a: `src/dispatch.c`, the check of a first
//! handle, includes the functions udat-capi's build script generated from
//! its `entries.list`.

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=src/dispatch.c");
    let generated = env::var("DEP_UDAT_EXT_INCLUDE").expect("udat-capi's build script names its output directory");
    cc::Build::new()
        .file("src/dispatch.c")
        .include(generated)
        .define("DAT_EXTENSIONS", None)
        .warnings_into_errors(true)
        .compile("udat_dispatch");
}
