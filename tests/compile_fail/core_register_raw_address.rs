//! In the core too, registering raw memory is `unsafe`: the caller vouches
//! for the memory.
use udat_core::types::{MemPriv, MemType};
use udat_core::{AsyncEvd, Inline, Provider};
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

fn main() {
    let mut p: Box<Provider<MockBackend, Inline<8, 64>>> = Box::new(Provider::new(MockBackend::new()));
    let (ia, _) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 8 }).unwrap();
    let pz = p.pz_create(ia).unwrap();
    let _ = p.lmr_create(ia, MemType::Virtual { address: 0x1000, length: 4096 }, pz, MemPriv::ALL);
}
