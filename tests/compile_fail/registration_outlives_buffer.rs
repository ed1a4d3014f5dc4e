//! A registration cannot outlive its memory: memory handed over by borrow
//! must live as long as the program.
use udat::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

fn main() {
    let _ = Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
        let pz = ia.pz_create()?;
        let mut buf = vec![0u8; 4096];
        let lmr = ia.lmr_create(&mut buf[..], &pz, MemPriv::ALL)?;
        drop(buf);
        ia.lmr_free(lmr)?;
        Ok(())
    });
}
