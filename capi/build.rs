//! Generates the DAT 2.0 ABI types from Debian's `<dat2/udat.h>` and
//! `<dat2/dat_ib_extensions.h>` (package `libdapl-dev`), with
//! `DAT_EXTENSIONS` defined as libdat2 was built. bindgen's layout checks
//! are kept: every size, alignment and field offset is asserted against
//! the C compiler's view of the header when this crate compiles.
//!
//! It hands udat-static the directory of the consumer functions
//! `cargo xtask entries` generated from `entries.list`
//! (`generated/consumer_calls.inc`, which udat-static's `dispatch.c`
//! includes; its build script finds the directory as
//! `DEP_UDAT_EXT_INCLUDE`).
//!
//! `c/ext.c`, the extended-op slot that reads a `va_list`, and `c/wait.c`,
//! the `dat_evd_wait` slot that sleeps where a cancellation may unwind, are
//! compiled here, and their header `c/ext.h` joins the bindings.

use std::env;
use std::path::PathBuf;

const HEADERS: [&str; 2] = ["/usr/include/dat2/udat.h", "/usr/include/dat2/dat_ib_extensions.h"];

fn main() {
    for h in HEADERS {
        println!("cargo:rerun-if-changed={h}");
        if !std::path::Path::new(h).exists() {
            panic!("{h} is missing: install Debian's libdapl-dev (and libclang-dev for bindgen)");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=c/ext.h");
    println!("cargo:rerun-if-changed=c/ext.c");
    println!("cargo:rerun-if-changed=c/wait.c");
    cc::Build::new().file("c/ext.c").file("c/wait.c").define("DAT_EXTENSIONS", None).warnings(true).compile("udat_ext");
    let bindings = bindgen::Builder::default()
        .header_contents(
            "dat_abi.h",
            "#include <netinet/in.h>\n#include <dat2/udat.h>\n#include <dat2/dat_ib_extensions.h>\n#include <dat2/dat_registry.h>\n#include \"c/ext.h\"\n",
        )
        .clang_arg("-DDAT_EXTENSIONS")
        .clang_arg(format!("-I{}", env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR")))
        .allowlist_type("DAT_.*|dat_.*|sockaddr.*|udat_.*")
        .allowlist_var("DAT_.*|UDAT_.*")
        .allowlist_function("dat_.*|dats_.*|udat_extendedop|udat_evd_wait")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .generate_comments(false)
        .generate()
        .expect("bindgen could not parse <dat2/udat.h>");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    bindings.write_to_file(out_dir.join("dat_abi.rs")).expect("writing the DAT ABI bindings");

    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    println!("cargo:include={}", manifest.join("generated").display());
}
