//! The transport conformance suite on udat-core + udat-mlx5 + the
//! software HCA: every WQE the suite posts is written by the mlx5 data
//! path, checked and executed by the software HCA, and completed through CQEs
//! the data path polls.

mod common;

use common::SoftFabric;

udat_testkit::transport_suite!(SoftFabric);
