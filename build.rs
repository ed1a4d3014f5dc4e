//! Generates Rust bindings of Debian's `<dat2/udat.h>` (package
//! `libdapl-dev`) so the tests can hold udat's values to the C header's:
//! return codes, states, event numbers, flags. The C ABI builds on the same
//! bindings.

use std::env;
use std::path::PathBuf;

const HEADER: &str = "/usr/include/dat2/udat.h";

fn main() {
    println!("cargo:rerun-if-changed={HEADER}");
    println!("cargo:rerun-if-changed=build.rs");
    if !std::path::Path::new(HEADER).exists() {
        panic!("{HEADER} is missing: install Debian's libdapl-dev (and libclang-dev for bindgen)");
    }
    let bindings = bindgen::Builder::default()
        .header_contents("dat_wrapper.h", "#include <dat2/udat.h>\n")
        .allowlist_type("DAT_.*|dat_.*")
        .allowlist_var("DAT_.*")
        .default_enum_style(bindgen::EnumVariation::ModuleConsts)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen could not parse <dat2/udat.h>");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("dat2.rs");
    bindings.write_to_file(out).expect("writing the DAT bindings");
}
