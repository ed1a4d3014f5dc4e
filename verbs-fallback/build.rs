//! Generates Rust bindings of rdma-core's `<infiniband/verbs.h>` and
//! `<rdma/rdma_cma.h>` (Debian `libibverbs-dev`, `librdmacm-dev`) and links
//! libibverbs and librdmacm. udat-mlx5 reuses these bindings. With the
//! `connectx` feature, also `<infiniband/mlx5dv.h>` (over the same verbs
//! types) and libmlx5.

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
    if env::var_os("CARGO_FEATURE_CONNECTX").is_some() {
        mlx5dv(&out.with_file_name("mlx5dv.rs"));
        println!("cargo:rustc-link-lib=mlx5");
    }
    println!("cargo:rustc-link-lib=ibverbs");
    println!("cargo:rustc-link-lib=rdmacm");
}

/// The calls of `mlx5dv.h` the ConnectX control path makes and the structs
/// they fill; the verbs types they name come from the verbs bindings.
fn mlx5dv(out: &Path) {
    const HEADER: &str = "/usr/include/infiniband/mlx5dv.h";
    println!("cargo:rerun-if-changed={HEADER}");
    if !Path::new(HEADER).exists() {
        panic!("{HEADER} is missing: the `connectx` feature needs Debian's libibverbs-dev");
    }
    bindgen::Builder::default()
        .header_contents("mlx5dv_wrapper.h", "#include <infiniband/mlx5dv.h>\n")
        .allowlist_function("mlx5dv_is_supported|mlx5dv_init_obj|mlx5dv_create_qp")
        .allowlist_type("mlx5dv_(obj|qp|cq|srq|qp_init_attr|obj_type|qp_init_attr_mask|qp_create_flags|srq_comp_mask)")
        .blocklist_type("ibv_.*")
        .default_enum_style(bindgen::EnumVariation::ModuleConsts)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .raw_line("use super::*;")
        .generate()
        .expect("bindgen could not parse mlx5dv.h")
        .write_to_file(out)
        .expect("writing the mlx5dv bindings");
}
