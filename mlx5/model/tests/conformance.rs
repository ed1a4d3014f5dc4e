//! The transport conformance suite on udat-core + udat-mlx5 + the
//! software HCA: every WQE the suite posts is written by the mlx5 data
//! path, checked and executed by the model, and completed through CQEs
//! the data path polls.

#[path = "../../../tests/transport/suite.rs"]
#[macro_use]
mod suite;

use suite::Fabric;
use udat_mlx5::Mlx5;
use udat_mlx5_model::SoftHca;

struct Model;

impl Fabric for Model {
    type B = Mlx5<SoftHca>;
    const MEMORY_WINDOWS: bool = false;

    fn backend() -> Mlx5<SoftHca> {
        Mlx5::new(SoftHca::new())
    }

    fn device() -> String {
        "mlx5_model0".into()
    }
}

transport_suite!(Model);
