//! The ConnectX control path on a device it must refuse: soft-RoCE in
//! CI, through `cargo xtask softroce`, which names the device in
//! `UDAT_RDMA_DEVICE`. Without a device the test fails and says so.

use udat_connectx::ConnectX;
use udat_core::backend::Backend;
use udat_core::{Control, ErrorType};
use udat_mlx5::Device;
use udat_verbs::Verbs;

fn device() -> String {
    std::env::var("UDAT_RDMA_DEVICE").unwrap_or_else(|_| {
        panic!("no RDMA device: run this test through `cargo xtask softroce -- ...` (UDAT_RDMA_DEVICE is unset)")
    })
}

/// The ConnectX control path takes only a device that rdma-core's mlx5
/// provider drives (`mlx5dv_is_supported`): soft-RoCE is refused at open,
/// before any object is made.
#[test]
fn the_connectx_control_path_refuses_a_device_mlx5dv_does_not_drive() {
    let mut cx = ConnectX::new();
    let opened = cx.control().ia_open(device().as_bytes()).map(|_| ());
    assert_eq!(opened.map_err(|e| e.error_type()), Err(ErrorType::ProviderNotFound));
    let mut verbs = Verbs::new();
    assert!(verbs.control().ia_open(device().as_bytes()).is_ok(), "the same device opens on udat-verbs");
}
