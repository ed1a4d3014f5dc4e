//! Fixtures for the conformance tests: a provider over the mock backend,
//! an open IA, and objects put in the state a test starts from.
#![allow(dead_code)]

use udat_core::backend::ConnOutcome;
use udat_core::types::*;
use udat_core::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

pub type P = Provider<MockBackend, Inline<32, 512>>;

/// The error type of a result, for terse assertions.
pub fn ty<T: core::fmt::Debug>(r: DatResult<T>) -> ErrorType {
    r.expect_err("expected an error").error_type()
}

pub struct Fx {
    pub p: Box<P>,
    pub ia: IaHandle,
    pub async_evd: EvdHandle,
    pub pz: PzHandle,
    /// DTO and RMR-bind completions.
    pub dto_evd: EvdHandle,
    /// Connection events.
    pub conn_evd: EvdHandle,
    /// Connection requests.
    pub cr_evd: EvdHandle,
    pub lmr: LmrCreated,
}

pub const BUF: u64 = 0x10_0000;
pub const BUF_LEN: u64 = 4096;

/// dat_lmr_create(3DAT) over the mock, which never reads or writes the
/// memory it registers: safe whatever the address.
pub trait MockLmr {
    fn mock_lmr_create(
        &mut self,
        ia: IaHandle,
        mem: MemType,
        pz: PzHandle,
        privileges: MemPriv,
    ) -> DatResult<LmrCreated>;
}

impl<S: Storage> MockLmr for Provider<MockBackend, S> {
    fn mock_lmr_create(
        &mut self,
        ia: IaHandle,
        mem: MemType,
        pz: PzHandle,
        privileges: MemPriv,
    ) -> DatResult<LmrCreated> {
        // SAFETY: the mock backend touches no memory: a registration is a
        // record of keys and a range, nothing more.
        unsafe { self.lmr_create(ia, mem, pz, privileges) }
    }
}

pub fn provider() -> Box<P> {
    udat_testkit::boxed(MockBackend::new(), Inline)
}

impl Fx {
    pub fn new() -> Fx {
        let mut p = provider();
        let (ia, async_evd) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 8 }).unwrap();
        let pz = p.pz_create(ia).unwrap();
        let dto_evd = p.evd_create(ia, 32, CnoHandle::NULL, EvdFlags::DTO | EvdFlags::RMR_BIND).unwrap();
        let conn_evd = p.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
        let cr_evd = p.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::CR).unwrap();
        let lmr = p.mock_lmr_create(ia, MemType::Virtual { address: BUF, length: BUF_LEN }, pz, MemPriv::ALL).unwrap();
        Fx { p, ia, async_evd, pz, dto_evd, conn_evd, cr_evd, lmr }
    }

    /// An LMR of the 64 bytes at `address`, on the fixture's IA.
    pub fn lmr_of_64(&mut self, address: u64, pz: PzHandle, privileges: MemPriv) -> LmrCreated {
        self.p.mock_lmr_create(self.ia, MemType::Virtual { address, length: 64 }, pz, privileges).unwrap()
    }

    /// A second PZ of the fixture's IA, and a segment of an LMR in it
    /// ([`Fx::seg_of_64`], every privilege).
    pub fn another_zone(&mut self) -> (PzHandle, LmrTriplet) {
        let pz = self.p.pz_create(self.ia).unwrap();
        (pz, self.seg_of_64(0x8000, pz, MemPriv::ALL))
    }

    /// The first 8 bytes of a new [`Fx::lmr_of_64`], as a segment.
    pub fn seg_of_64(&mut self, address: u64, pz: PzHandle, privileges: MemPriv) -> LmrTriplet {
        let lmr = self.lmr_of_64(address, pz, privileges);
        LmrTriplet { lmr_context: lmr.lmr_context, virtual_address: address, segment_length: 8 }
    }

    /// An Unconnected EP on the fixture's PZ and EVDs.
    pub fn ep(&mut self) -> EpHandle {
        self.ep_with(None)
    }

    pub fn ep_with(&mut self, attr: Option<&EpAttr>) -> EpHandle {
        self.p.ep_create(self.ia, self.pz, self.dto_evd, self.dto_evd, self.conn_evd, attr).unwrap()
    }

    pub fn attr(&self) -> EpAttr {
        let (_, ia_attr) = self.p.ia_query(self.ia).unwrap();
        EpAttr::provider_default(&ia_attr)
    }

    /// An EP in Active Connection Pending.
    pub fn ep_connecting(&mut self) -> EpHandle {
        let ep = self.ep();
        self.connect(ep);
        ep
    }

    pub fn connect(&mut self, ep: EpHandle) {
        let remote = IaAddress::default();
        self.p
            .ep_connect(ep, &remote, 1000, TIMEOUT_INFINITE, b"hello", Qos::BEST_EFFORT, ConnectFlags::DEFAULT)
            .unwrap();
    }

    /// An EP in Connected, its ESTABLISHED event already taken.
    pub fn ep_connected(&mut self) -> EpHandle {
        let ep = self.ep();
        self.establish(ep);
        ep
    }

    /// Connect the Unconnected `ep` and establish it; the peer's private
    /// data is "welcome". Its ESTABLISHED event is taken from the fixture's
    /// connect EVD.
    pub fn establish(&mut self, ep: EpHandle) {
        self.connect(ep);
        self.p.backend_mut().conn_event(ep, ConnOutcome::Established, b"welcome");
        let ev = self.p.evd_dequeue(self.conn_evd).unwrap();
        assert_eq!(ev.number, EventNumber::ConnectionEstablished);
    }

    /// An EP in Disconnected (abruptly disconnected), events drained.
    pub fn ep_disconnected(&mut self) -> EpHandle {
        let ep = self.ep_connected();
        self.p.ep_disconnect(ep, CloseFlags::Abrupt).unwrap();
        self.drain(self.conn_evd);
        ep
    }

    /// Name `ep` as a layer above names it for the lanes
    /// ([`Provider::ep_name`]): by a word no other EP has ([`lane_name`]).
    pub fn name(&mut self, ep: EpHandle) -> std::num::NonZeroU64 {
        let name = lane_name(ep);
        self.p.ep_name(ep, name.get()).unwrap();
        name
    }

    /// A segment of the fixture's LMR.
    pub fn seg(&self, offset: u64, len: u32) -> LmrTriplet {
        LmrTriplet { virtual_address: BUF + offset, segment_length: len, lmr_context: self.lmr.lmr_context }
    }

    pub fn remote(&self, len: u32) -> RmrTriplet {
        RmrTriplet { virtual_address: 0x9000, segment_length: len, rmr_context: 0x77 }
    }

    pub fn state(&self, ep: EpHandle) -> EpState {
        self.p.ep_get_status(ep).unwrap().0
    }

    /// Every event queued on `evd`, oldest first.
    pub fn drain(&mut self, evd: EvdHandle) -> Vec<Event> {
        let mut out = Vec::new();
        while let Ok(e) = self.p.evd_dequeue(evd) {
            out.push(e);
        }
        out
    }

    /// A PSP on `qual` feeding the CR EVD, and a request arriving on it.
    pub fn request(&mut self, qual: u64, flags: PspFlags) -> (PspHandle, CrHandle) {
        let psp = self.p.psp_create(self.ia, qual, self.cr_evd, flags).unwrap();
        self.p.backend_mut().incoming(qual, b"ping").unwrap();
        let ev = self.p.evd_dequeue(self.cr_evd).unwrap();
        match ev.data {
            EventData::CrArrival { cr, .. } => (psp, cr),
            other => panic!("expected a connection request, got {other:?}"),
        }
    }
}

/// The DTO events among `events`: (cookie, status).
/// The name [`Fx::name`] gives `ep`: its handle's bits, which are never
/// 0 (a generation is never 0).
pub fn lane_name(ep: EpHandle) -> std::num::NonZeroU64 {
    std::num::NonZeroU64::new(ep.raw().to_bits()).unwrap()
}

pub fn dtos(events: &[Event]) -> Vec<(u64, DtoStatus)> {
    events
        .iter()
        .filter_map(|e| match e.data {
            EventData::Dto { cookie, status, .. } => Some((cookie, status)),
            _ => None,
        })
        .collect()
}
