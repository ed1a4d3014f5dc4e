//! udat-mlx5: the direct data path for NVIDIA ConnectX (mlx5) HCAs.
//!
//! This crate is being built: the WQE, doorbell and CQE code, its
//! byte-exact checks against rdma-core's `mlx5dv.h`, and the software HCA
//! that runs it with no hardware arrive with the mlx5 work. Until then udat
//! has no mlx5 backend, and says so in its README.
#![no_std]
#![forbid(unsafe_code)]
