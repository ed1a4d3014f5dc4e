//! A receive takes its segment: nothing reads it until the completion
//! gives it back.
use udat::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

fn main() {
    let _ = Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
        let pz = ia.pz_create()?;
        let dto = ia.evd_create(8, None, EvdFlags::DTO)?;
        let ep = ia.ep_create(&pz, &dto, &dto, None, None)?;
        let (_lmr, seg) = ia.lmr_create_seg(vec![0u8; 64], &pz)?;
        ia.ep_post_recv_seg(&ep, seg, 1, CompletionFlags::DEFAULT)?;
        println!("{}", seg[0]);
        Ok(())
    });
}
