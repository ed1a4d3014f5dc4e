//! Generates Rust bindings of rdma-core's `<infiniband/verbs.h>` and
//! `<rdma/rdma_cma.h>` (Debian `libibverbs-dev`, `librdmacm-dev`) and links
//! libibverbs and librdmacm. udat-connectx reuses these bindings.

use std::env;
use std::path::{Path, PathBuf};

const HEADERS: [&str; 2] = ["/usr/include/infiniband/verbs.h", "/usr/include/rdma/rdma_cma.h"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for header in HEADERS {
        println!("cargo:rerun-if-changed={header}");
        if !Path::new(header).exists() {
            panic!("{header} is missing: install Debian's libibverbs-dev and librdmacm-dev (and libclang-dev)");
        }
    }
    let bindings = bindgen::Builder::default()
        .header_contents("verbs_wrapper.h", "#include <infiniband/verbs.h>\n#include <rdma/rdma_cma.h>\n")
        .allowlist_function("ibv_.*|rdma_.*")
        .allowlist_type("ibv_.*|rdma_.*")
        .allowlist_var("IBV_.*|RDMA_.*")
        .default_enum_style(bindgen::EnumVariation::ModuleConsts)
        .bitfield_enum("ibv_access_flags|ibv_send_flags|ibv_qp_attr_mask")
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen could not parse the verbs headers");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("verbs.rs");
    bindings.write_to_file(&out).expect("writing the verbs bindings");
    println!("cargo:rustc-link-lib=ibverbs");
    println!("cargo:rustc-link-lib=rdmacm");
}
