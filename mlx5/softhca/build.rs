//! Compile the byte oracle: rdma-core's mlx5dv.h helpers in C.

fn main() {
    println!("cargo:rerun-if-changed=oracle/mlx5dv_oracle.c");
    cc::Build::new().file("oracle/mlx5dv_oracle.c").flag("-mssse3").warnings(true).compile("mlx5dv_oracle");
}
