//! An object does not leave the IA's closure: after the IA is gone there
//! is nothing it could name.
use udat::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

fn main() {
    let pz = Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| ia.pz_create());
    drop(pz);
}
