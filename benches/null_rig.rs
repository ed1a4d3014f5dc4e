//! The benches' rig: a connected EP on udat-testkit's null backend, which
//! hands back one completion per post, so that what the benches measure
//! is the DAT layer itself.

use udat::*;
use udat_testkit::null::{NullBackend, NAME};

/// A connected EP over the null backend, one segment of memory given up
/// to the IA, and the EP's EVD.
pub struct Rig<'l, 'id> {
    pub ia: Ia<'id, NullBackend, Inline<8, 4096>>,
    pub ep: Ep<'id>,
    pub evd: Evd<'id>,
    pub seg: [Local<'l, 'id>; 1],
}

/// Run `bench` on a new rig.
pub fn with_rig<R>(bench: impl for<'l, 'id> FnOnce(&mut Rig<'l, 'id>) -> R) -> R {
    Ia::open_in(NullBackend::default(), Inline, NAME, 4, |mut ia| {
        let pz = ia.pz_create()?;
        let evd = ia.evd_create(1024, None, EvdFlags::DTO)?;
        let conn = ia.evd_create(4, None, EvdFlags::CONNECTION)?;
        let lmr = ia.lmr_create(vec![0u8; 4096], &pz, MemPriv::ALL)?;
        let mut ep_attr = EpAttr::provider_default(&ia.ia_query()?);
        ep_attr.max_request_dtos = u32::MAX;
        let ep = ia.ep_create(&pz, &evd, &evd, Some(&conn), Some(&ep_attr))?;
        ia.ep_connect(&ep, &IaAddress::default(), 1, TIMEOUT_INFINITE, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
        // The null transport never establishes; a disconnected EP takes the
        // same post path (state check, flags, LMR lookup, backend call).
        ia.ep_disconnect(&ep, CloseFlags::Abrupt)?;
        while ia.evd_dequeue(&conn).is_ok() {}
        let seg = [lmr.local(0, 64)?];
        Ok(bench(&mut Rig { ia, ep, evd, seg }))
    })
    .expect("the null rig")
}

impl Rig<'_, '_> {
    #[inline(always)]
    pub fn post(&mut self) {
        self.ia.ep_post_send(&self.ep, &self.seg, 7, CompletionFlags::DEFAULT).expect("post");
    }

    #[inline(always)]
    pub fn reap(&mut self) -> Event {
        self.ia.evd_dequeue(&self.evd).expect("dequeue")
    }
}
