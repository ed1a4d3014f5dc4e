//! Generates Rust bindings of the calls of rdma-core's
//! `<infiniband/mlx5dv.h>` the ConnectX control path makes, over the verbs
//! types of udat-verbs's bindings, and links libmlx5 (Debian
//! `libibverbs-dev`).

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("mlx5dv.rs");
    mlx5dv(&out);
    println!("cargo:rustc-link-lib=mlx5");
}

/// The calls of `mlx5dv.h` the ConnectX control path makes and the structs
/// they fill; the verbs types they name come from the verbs bindings.
fn mlx5dv(out: &Path) {
    const HEADER: &str = "/usr/include/infiniband/mlx5dv.h";
    println!("cargo:rerun-if-changed={HEADER}");
    if !Path::new(HEADER).exists() {
        panic!("{HEADER} is missing: udat-connectx needs Debian's libibverbs-dev");
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
        .raw_line("use udat_verbs::sys::*;")
        .generate()
        .expect("bindgen could not parse mlx5dv.h")
        .write_to_file(out)
        .expect("writing the mlx5dv bindings");
}
