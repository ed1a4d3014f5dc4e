//! Each IA brands its objects: a PZ of one IA is no PZ of another.
use udat::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

fn main() {
    let _ = Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut first| {
        let pz = first.pz_create()?;
        Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut second| {
            second.lmr_create(vec![0u8; 64], &pz, MemPriv::ALL)?;
            Ok(())
        })
    });
}
