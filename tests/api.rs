//! The owning Rust API: `udat::Ia`.
use udat::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

#[test]
fn ia_open_unknown_name_is_provider_not_found() {
    let e = Ia::<MockBackend>::open(MockBackend::new(), b"mlx5_9", 4).unwrap_err();
    assert_eq!(e.error_type(), ErrorType::ProviderNotFound);
    assert_eq!(e.to_raw(), 0x800a_0000);
}

#[test]
fn graceful_close_refused_returns_the_ia_intact() {
    let mut ia: Ia<MockBackend> = Ia::open(MockBackend::new(), MOCK_IA_NAME, 4).unwrap();
    let h = ia.handle();
    let pz = ia.pz_create(h).unwrap();
    let (mut ia, e) = ia.close(CloseFlags::Graceful).unwrap_err();
    assert_eq!(e.error_type(), ErrorType::InvalidState);
    ia.pz_free(pz).unwrap();
    ia.close(CloseFlags::Graceful).unwrap();
}

#[test]
fn errors_work_with_question_mark_into_std_error() {
    fn run() -> Result<(), Box<dyn std::error::Error>> {
        let mut ia: Ia<MockBackend> = Ia::open(MockBackend::new(), MOCK_IA_NAME, 4)?;
        ia.pz_free(PzHandle::NULL)?;
        Ok(())
    }
    let e = run().unwrap_err();
    assert_eq!(e.to_string(), "DAT_INVALID_HANDLE(DAT_INVALID_HANDLE_PZ)");
}

#[test]
fn dropping_an_open_ia_releases_everything() {
    let mut ia: Ia<MockBackend> = Ia::open(MockBackend::new(), MOCK_IA_NAME, 4).unwrap();
    let h = ia.handle();
    let pz = ia.pz_create(h).unwrap();
    let evd = ia.evd_create(h, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    ia.lmr_create(h, MemType::Virtual { address: 0x1000, length: 64 }, pz, MemPriv::ALL).unwrap();
    ia.ep_create(h, pz, evd, evd, EvdHandle::NULL, None).unwrap();
    assert_eq!(ia.backend().live_mrs, 1);
    // Drop closes abruptly; the provider goes with it. Check through a
    // second IA on the same provider type that nothing is shared.
    drop(ia);
    let again: Ia<MockBackend> = Ia::open(MockBackend::new(), MOCK_IA_NAME, 4).unwrap();
    assert_eq!(again.backend().live_mrs, 0);
}
