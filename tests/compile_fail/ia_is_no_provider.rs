//! An `Ia` gives no way to the provider it owns: not its raw calls, not
//! its backend's mutable state.
use udat::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

fn main() {
    let _ = Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
        let h = ia.handle();
        let pz = ia.pz_create()?;
        ia.lmr_create(h, MemType::Virtual { address: 0x1000, length: 4096 }, pz.handle(), MemPriv::ALL)?;
        ia.backend_mut();
        Ok(())
    });
}
