//! Generates the DAT 2.0 ABI types from Debian's `<dat2/udat.h>` and
//! `<dat2/dat_ib_extensions.h>` (package `libdapl-dev`), with
//! `DAT_EXTENSIONS` defined as libdat2 was built. bindgen's layout checks
//! are kept: every size, alignment and field offset is asserted against
//! the C compiler's view of the header when this crate compiles.
//!
//! From `entries.list` it generates the provider table's `extern "C"`
//! slots (`$OUT_DIR/entries.rs`, included by `src/table.rs`) and the
//! consumer functions of libudat.a (`$OUT_DIR/consumer_calls.inc`, which
//! udat-static's `dispatch.c` includes: its build script finds the
//! directory as `DEP_UDAT_EXT_INCLUDE`).
//!
//! `c/ext.c`, the extended-op slot that reads a `va_list`, is compiled
//! here, and its header `c/ext.h` joins the bindings.

use std::env;
use std::fs;
use std::path::PathBuf;

#[path = "build/entries.rs"]
mod entries;

const HEADERS: [&str; 2] = ["/usr/include/dat2/udat.h", "/usr/include/dat2/dat_ib_extensions.h"];

fn main() {
    for h in HEADERS {
        println!("cargo:rerun-if-changed={h}");
        if !std::path::Path::new(h).exists() {
            panic!("{h} is missing: install Debian's libdapl-dev (and libclang-dev for bindgen)");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/entries.rs");
    println!("cargo:rerun-if-changed=entries.list");
    println!("cargo:rerun-if-changed=c/ext.h");
    println!("cargo:rerun-if-changed=c/ext.c");
    cc::Build::new().file("c/ext.c").define("DAT_EXTENSIONS", None).warnings(true).compile("udat_ext");
    let bindings = bindgen::Builder::default()
        .header_contents(
            "dat_abi.h",
            "#include <netinet/in.h>\n#include <dat2/udat.h>\n#include <dat2/dat_ib_extensions.h>\n#include <dat2/dat_registry.h>\n#include \"c/ext.h\"\n",
        )
        .clang_arg("-DDAT_EXTENSIONS")
        .clang_arg(format!("-I{}", env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR")))
        .allowlist_type("DAT_.*|dat_.*|sockaddr.*|udat_.*")
        .allowlist_var("DAT_.*")
        .allowlist_function("dat_.*|dats_.*|udat_extendedop")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .generate_comments(false)
        .generate()
        .expect("bindgen could not parse <dat2/udat.h>");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    bindings.write_to_file(out_dir.join("dat_abi.rs")).expect("writing the DAT ABI bindings");

    let list = entries::parse(&fs::read_to_string("entries.list").expect("reading entries.list"));
    fs::write(out_dir.join("entries.rs"), entries::rust(&list)).expect("writing entries.rs");
    fs::write(out_dir.join("consumer_calls.inc"), entries::c(&list)).expect("writing consumer_calls.inc");
    println!("cargo:include={}", out_dir.display());
}
