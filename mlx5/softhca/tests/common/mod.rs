//! What the software HCA's tests and benches share: the software HCA as
//! a transport of udat-testkit's suite, and the syndrome table.

#![allow(dead_code)]

use udat_core::types::DtoStatus;
use udat_mlx5::Mlx5;
use udat_softhca::SoftHca;

/// The software HCA under udat-mlx5, as a transport of the suite.
pub struct SoftFabric;

impl udat_testkit::suite::Fabric for SoftFabric {
    type B = Mlx5<SoftHca>;
    const MEMORY_WINDOWS: bool = true;
    /// The software HCA's smallest CQ (`SoftHca`'s `cq_create`).
    const SMALLEST_CQ: Option<usize> = Some(64);

    fn backend() -> Mlx5<SoftHca> {
        Mlx5::new(SoftHca::new())
    }

    fn device() -> String {
        "mlx5_soft0".into()
    }

    fn ud() -> bool {
        true
    }
}

/// Every syndrome of `mlx5dv.h` and the DAT status it means, plus one the
/// header does not name.
pub const SYNDROMES: &[(u8, DtoStatus)] = &[
    (0x01, DtoStatus::LocalLength),
    (0x02, DtoStatus::LocalEp),
    (0x04, DtoStatus::LocalProtection),
    (0x05, DtoStatus::Flushed),
    (0x06, DtoStatus::RmrOperationFailed),
    (0x10, DtoStatus::BadResponse),
    (0x11, DtoStatus::LocalProtection),
    (0x12, DtoStatus::RemoteResponder),
    (0x13, DtoStatus::RemoteAccess),
    (0x14, DtoStatus::RemoteResponder),
    (0x15, DtoStatus::Transport),
    (0x16, DtoStatus::ReceiverNotReady),
    (0x22, DtoStatus::RemoteResponder),
    (0x7f, DtoStatus::Transport),
];
