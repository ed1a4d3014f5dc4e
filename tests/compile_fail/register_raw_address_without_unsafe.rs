//! Memory udat does not own registers only in `unsafe`, where the caller
//! vouches for it.
use udat::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

fn main() {
    let _ = Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
        let pz = ia.pz_create()?;
        let address = std::ptr::NonNull::new(0x1000 as *mut u8).unwrap();
        ia.lmr_create_raw(address, 4096, &pz, MemPriv::ALL)?;
        Ok(())
    });
}
