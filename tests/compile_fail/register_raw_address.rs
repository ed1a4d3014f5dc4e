//! A raw address is not memory handed to the IA: only a `Buffer` (or what
//! becomes one) registers.
use udat::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

fn main() {
    let _ = Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
        let pz = ia.pz_create()?;
        ia.lmr_create(MemType::Virtual { address: 0x1000, length: 4096 }, &pz, MemPriv::ALL)?;
        Ok(())
    });
}
