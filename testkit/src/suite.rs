//! The transport conformance suite: every test of udat over a real
//! transport, written once and run on each backend — udat-verbs on
//! soft-RoCE, udat-mlx5 on the software mlx5 HCA. A backend's test file
//! names its [`Fabric`] and expands [`transport_suite!`](crate::transport_suite).
//!
//! Both sides of a connection live on one IA of one provider: the
//! connection still goes through the transport's connection manager and
//! data path, and every call on either side makes progress for both.

use std::time::{Duration, Instant};

use udat_core::backend::Wake;
use udat_core::types::*;
use udat_core::*;

/// A transport under test.
pub trait Fabric {
    type B: Backend;
    fn backend() -> Self::B;
    /// The IA name to open.
    fn device() -> String;
    /// Whether the transport binds memory windows (RMRs).
    const MEMORY_WINDOWS: bool;
    /// Whether the device offers remote invalidation and windows of an EP
    /// (`dat_ep_post_send_with_invalidate`, `dat_rmr_create_for_ep`); one
    /// that does not must refuse both with `DAT_MODEL_NOT_SUPPORTED`.
    fn remote_invalidation() -> bool {
        true
    }
    /// Whether the transport has the IB extension's UD EPs
    /// (`DAT_IB_SERVICE_TYPE_UD`); one that does not must refuse them
    /// with `DAT_MODEL_NOT_SUPPORTED` and say so in its IA's attributes.
    fn ud() -> bool {
        false
    }
    /// How many completions the CQ of a DTO EVD of qlen 1 holds, where the
    /// transport fixes it; `None` where the device sizes the CQ itself
    /// (`ibv_create_cq` may round the size up as the driver likes).
    const SMALLEST_CQ: Option<usize>;
}

pub const PORT: u64 = 18515;
/// How long a test waits for one event: TCG is slow.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A registered buffer. Its memory is never freed: a registration may
/// outlive the `Buf`, and the transport may write into it until then.
pub struct Buf {
    pub mem: std::mem::ManuallyDrop<Vec<u8>>,
    pub lmr: LmrCreated,
}

impl Buf {
    pub fn seg(&self, offset: usize, len: usize) -> LmrTriplet {
        LmrTriplet {
            virtual_address: self.mem.as_ptr() as u64 + offset as u64,
            segment_length: len as u32,
            lmr_context: self.lmr.lmr_context,
        }
    }

    pub fn remote(&self, offset: usize, len: usize) -> RmrTriplet {
        RmrTriplet {
            virtual_address: self.mem.as_ptr() as u64 + offset as u64,
            segment_length: len as u32,
            rmr_context: self.lmr.rmr_context.expect("registered with remote privileges"),
        }
    }
}

/// One side of a connection: its EP and EVDs.
#[derive(Clone, Copy)]
pub struct Side {
    pub ep: EpHandle,
    pub dto: EvdHandle,
    pub conn: EvdHandle,
}

pub struct Rig<F: Fabric> {
    pub p: Box<Provider<F::B, Inline<64, 4096>>>,
    pub ia: IaHandle,
    pub pz: PzHandle,
    pub cr_evd: EvdHandle,
    pub attr: IaAttr,
}

impl<F: Fabric> Default for Rig<F> {
    fn default() -> Rig<F> {
        Rig::new()
    }
}

impl<F: Fabric> Rig<F> {
    pub fn new() -> Rig<F> {
        let mut p = crate::boxed(F::backend(), Inline);
        let (ia, _) =
            p.ia_open(F::device().as_bytes(), AsyncEvd::Create { min_qlen: 8 }).expect("dat_ia_open on the device");
        let pz = p.pz_create(ia).unwrap();
        let cr_evd = p.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::CR).unwrap();
        let (_, attr) = p.ia_query(ia).unwrap();
        Rig { p, ia, pz, cr_evd, attr }
    }

    pub fn buf(&mut self, len: usize, privileges: MemPriv) -> Buf {
        let mem = std::mem::ManuallyDrop::new(vec![0u8; len.max(1)]);
        let region = MemType::Virtual { address: mem.as_ptr() as u64, length: mem.len() as u64 };
        // SAFETY: the memory is never freed (`ManuallyDrop`), so it stays
        // allocated for as long as the process runs; the suite's tests
        // touch it only where no DTO that writes it is outstanding (they
        // read a buffer after its completion).
        let lmr = unsafe { self.p.lmr_create(self.ia, region, self.pz, privileges) }.expect("dat_lmr_create");
        Buf { mem, lmr }
    }

    pub fn side(&mut self) -> Side {
        self.side_with(None)
    }

    pub fn side_with(&mut self, attr: Option<&EpAttr>) -> Side {
        let dto = self.p.evd_create(self.ia, 128, CnoHandle::NULL, EvdFlags::DTO | EvdFlags::RMR_BIND).unwrap();
        let conn = self.p.evd_create(self.ia, 8, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
        let ep = self.p.ep_create(self.ia, self.pz, dto, dto, conn, attr).unwrap();
        Side { ep, dto, conn }
    }

    /// The next event on `evd`, waiting (in `dat_evd_wait`) up to PATIENCE.
    pub fn next(&mut self, evd: EvdHandle) -> Event {
        let start = Instant::now();
        loop {
            match self.p.evd_wait(evd, 100_000, 1) {
                Ok((event, _)) => return event,
                Err(e) if e.error_type() == ErrorType::TimeoutExpired => {}
                Err(e) => panic!("dat_evd_wait: {e:?}"),
            }
            assert!(start.elapsed() < PATIENCE, "no event on {evd:?} within {PATIENCE:?}");
        }
    }

    pub fn expect(&mut self, evd: EvdHandle, number: EventNumber) -> Event {
        let e = self.next(evd);
        assert_eq!(e.number, number, "{e:?}");
        e
    }

    /// An RDMA write of the one segment `local` on `ep` into `remote`,
    /// with the default completion flags.
    pub fn write(&mut self, ep: EpHandle, local: LmrTriplet, cookie: u64, remote: RmrTriplet) -> DatResult<()> {
        self.p.ep_post_request(ep, &[local], cookie, RequestOp::RdmaWrite { remote }, CompletionFlags::DEFAULT)
    }

    /// An RDMA read of `remote` into the one segment `local` on `ep`, with
    /// the default completion flags.
    pub fn read(&mut self, ep: EpHandle, local: LmrTriplet, cookie: u64, remote: RmrTriplet) -> DatResult<()> {
        self.p.ep_post_request(ep, &[local], cookie, RequestOp::RdmaRead { remote }, CompletionFlags::DEFAULT)
    }

    /// A DTO completion: (cookie, status, transferred length, op).
    pub fn dto(&mut self, evd: EvdHandle) -> (u64, DtoStatus, u32, DtoOp) {
        match self.next(evd).data {
            EventData::Dto { cookie, status, transferred_length, op, .. } => (cookie, status, transferred_length, op),
            other => panic!("expected a DTO completion, got {other:?}"),
        }
    }

    pub fn state(&self, ep: EpHandle) -> EpState {
        self.p.ep_get_status(ep).unwrap().0
    }

    pub fn address(&self) -> IaAddress {
        self.attr.ia_address
    }

    /// `dat_ep_connect` to this IA on `qual`.
    pub fn dial(&mut self, client: Side, qual: u64, data: &[u8], timeout_us: u32) -> DatResult<()> {
        let remote = self.address();
        self.p.ep_connect(client.ep, &remote, qual, timeout_us, data, Qos::BEST_EFFORT, ConnectFlags::DEFAULT)
    }

    /// A listener on `qual`, and the request `client` makes to it.
    pub fn request(&mut self, client: Side, qual: u64, data: &[u8]) -> (PspHandle, CrHandle) {
        let psp = self.p.psp_create(self.ia, qual, self.cr_evd, PspFlags::Consumer).unwrap();
        self.dial(client, qual, data, 10_000_000).unwrap();
        match self.expect(self.cr_evd, EventNumber::ConnectionRequest).data {
            EventData::CrArrival { cr, conn_qual, .. } => {
                assert_eq!(conn_qual, qual);
                (psp, cr)
            }
            other => panic!("{other:?}"),
        }
    }

    /// Connect `client` to a listener on `qual` and accept on `server`;
    /// returns the CR's private data as the server saw it.
    pub fn connect(&mut self, client: Side, server: Side, qual: u64, data: &[u8], reply: &[u8]) -> Vec<u8> {
        let (psp, cr) = self.request(client, qual, data);
        let seen = self.p.cr_private_data(cr).unwrap().to_vec();
        self.p.cr_accept(cr, server.ep, reply).unwrap();
        self.expect(client.conn, EventNumber::ConnectionEstablished);
        self.expect(server.conn, EventNumber::ConnectionEstablished);
        self.p.psp_free(psp).unwrap();
        seen
    }

    pub fn pair(&mut self) -> (Side, Side) {
        let (client, server) = (self.side(), self.side());
        self.connect(client, server, PORT, b"", b"");
        (client, server)
    }
}

/// A UD EP and its EVDs on the rig's IA.
fn ud_side<F: Fabric>(rig: &mut Rig<F>) -> Side {
    let dto = rig.p.evd_create(rig.ia, 128, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let conn = rig.p.evd_create(rig.ia, 8, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
    let ep = rig.p.ep_create_ud(rig.ia, rig.pz, (dto, dto, conn), None).unwrap();
    Side { ep, dto, conn }
}

/// The address handle, the peer's QP, private data and side of a UD
/// connection event on `side`'s connect EVD.
fn ud_established<F: Fabric>(rig: &mut Rig<F>, side: Side) -> (AhHandle, u32, Vec<u8>, bool) {
    let e = rig.expect(side.conn, EventNumber::UdConnectionEstablished);
    let EventData::UdConnection { ep, ah, remote_qpn, passive, .. } = e.data else { panic!("{e:?}") };
    assert_eq!(ep, side.ep);
    let data = rig.p.ud_connection(ep, ah).unwrap().0.to_vec();
    (ah, remote_qpn, data, passive)
}

/// A UD EP resolves a peer through the CM (dat_ep_connect, a
/// `DAT_IB_UD_CONNECTION_REQUEST_EVENT` at the PSP, dat_cr_accept), both
/// ends hear `DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED` with the other's
/// address handle and QP, and datagrams go both ways through them: each
/// lands after the 40 bytes of its GRH and names its sender's QP. A freed
/// address handle is refused. A transport without UD refuses the EP with
/// `DAT_MODEL_NOT_SUPPORTED` (and says so on stdout).
pub fn ud_endpoints_resolve_each_other_and_exchange_datagrams<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    assert_eq!(rig.attr.ud, F::ud(), "the IA's attributes say whether it has UD");
    if !F::ud() {
        let none = EvdHandle::NULL;
        let refused = rig.p.ep_create_ud(rig.ia, rig.pz, (none, none, none), None).unwrap_err();
        assert_eq!(refused.error_type(), ErrorType::ModelNotSupported);
        println!("no UD on this transport: a DAT_IB_SERVICE_TYPE_UD EP is refused");
        return;
    }
    let (client, server) = (ud_side(&mut rig), ud_side(&mut rig));
    let psp = rig.p.psp_create(rig.ia, PORT + 7, rig.cr_evd, PspFlags::Consumer).unwrap();
    rig.dial(client, PORT + 7, b"who", 10_000_000).unwrap();
    let e = rig.expect(rig.cr_evd, EventNumber::UdConnectionRequest);
    let EventData::CrArrival { cr, .. } = e.data else { panic!("{e:?}") };
    rig.p.cr_accept(cr, server.ep, b"me").unwrap();
    let (to_server, server_qpn, reply, passive) = ud_established(&mut rig, client);
    assert_eq!((reply.as_slice(), passive), (&b"me"[..], false));
    let (to_client, client_qpn, request, passive) = ud_established(&mut rig, server);
    assert_eq!((request.as_slice(), passive), (&b"who"[..], true));
    assert_ne!(client_qpn, server_qpn);
    rig.p.psp_free(psp).unwrap();

    let grh = udat_core::backend::GRH_BYTES as usize;
    let (mut out, inbox) = (rig.buf(4096, MemPriv::ALL), rig.buf(4096, MemPriv::ALL));
    out.mem[..100].copy_from_slice(&pattern(100, 3));
    for (from, to, ah, qpn, cookie) in
        [(client, server, to_server, server_qpn, 1), (server, client, to_client, client_qpn, 2)]
    {
        let at = cookie as usize * 1024;
        rig.p.ep_post_recv(to.ep, &[inbox.seg(at, grh + 100)], cookie, CompletionFlags::DEFAULT).unwrap();
        rig.p
            .ep_post_request(
                from.ep,
                &[out.seg(0, 100)],
                cookie + 10,
                PostOp::SendUd { ah, remote_qpn: qpn },
                CompletionFlags::DEFAULT,
            )
            .unwrap();
        assert_eq!(rig.dto(from.dto), (cookie + 10, DtoStatus::Success, 100, DtoOp::SendUd));
        match rig.next(to.dto).data {
            EventData::Dto { cookie: c, status: DtoStatus::Success, transferred_length, op, imm, .. } => {
                assert_eq!((c, transferred_length, op), (cookie, (grh + 100) as u32, DtoOp::ReceiveUd));
                let sender = if from.ep == client.ep { client_qpn } else { server_qpn };
                assert_eq!(imm, sender, "the receive names its sender's QP");
            }
            other => panic!("expected a UD receive, got {other:?}"),
        }
        assert_eq!(&inbox.mem[at + grh..at + grh + 100], &pattern(100, 3)[..]);
    }
    rig.p.ud_ah_free(client.ep, to_server).unwrap();
    let refused = rig.p.ep_post_request(
        client.ep,
        &[out.seg(0, 8)],
        9,
        PostOp::SendUd { ah: to_server, remote_qpn: server_qpn },
        CompletionFlags::DEFAULT,
    );
    assert_eq!(refused.unwrap_err().subtype(), Subtype::InvalidArg5);
    rig.p.ud_cm_free(server.ep, to_client).unwrap();
    rig.p.ep_free(client.ep).unwrap();
    rig.p.ep_free(server.ep).unwrap();
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

pub fn connect_accept_carry_private_data_both_ways<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = (rig.side(), rig.side());
    let hello = pattern(48, 1);
    let seen = rig.connect(client, server, PORT, &hello, b"welcome");
    // The IB CM pads a request's private data to its full 56 bytes.
    assert_eq!(&seen[..48], &hello[..]);
    assert_eq!(&rig.p.ep_private_data(client.ep).unwrap()[..7], b"welcome");
    assert_eq!(rig.state(client.ep), EpState::Connected);
    assert_eq!(rig.state(server.ep), EpState::Connected);
    assert_eq!(rig.p.ep_query(client.ep).unwrap().remote_ia_address, rig.address());
}

pub fn reject_carries_private_data_to_the_active_side<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let client = rig.side();
    let (psp, cr) = rig.request(client, PORT + 1, b"may I");
    rig.p.cr_reject(cr, b"busy").unwrap();
    let e = rig.expect(client.conn, EventNumber::ConnectionPeerRejected);
    assert!(matches!(e.data, EventData::Connection { private_data_size, .. } if private_data_size >= 4));
    assert_eq!(&rig.p.ep_private_data(client.ep).unwrap()[..4], b"busy");
    assert_eq!(rig.state(client.ep), EpState::Disconnected);
    rig.p.psp_free(psp).unwrap();
}

pub fn connect_to_a_port_nobody_listens_on_is_rejected_by_the_transport<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let client = rig.side();
    rig.dial(client, PORT + 2, b"", 10_000_000).unwrap();
    rig.expect(client.conn, EventNumber::ConnectionNonPeerRejected);
    assert_eq!(rig.state(client.ep), EpState::Disconnected);
}

/// dat_ep_connect(3DAT): an attempt that outlives its timeout ends in
/// DAT_CONNECTION_EVENT_TIMED_OUT. 192.0.2.77 answers no ARP, so address
/// resolution alone would take seconds.
pub fn connect_that_outlives_its_timeout_times_out<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let client = rig.side();
    let mut nobody = rig.address();
    nobody.bytes[7] = 77;
    let start = Instant::now();
    rig.p.ep_connect(client.ep, &nobody, PORT, 300_000, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT).unwrap();
    rig.expect(client.conn, EventNumber::ConnectionTimedOut);
    assert!(start.elapsed() >= Duration::from_millis(300), "timed out after {:?}", start.elapsed());
    assert_eq!(rig.state(client.ep), EpState::Disconnected);
}

pub fn send_receive_write_and_read_move_the_bytes<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = rig.pair();
    let mut src = rig.buf(4096, MemPriv::ALL);
    let dst = rig.buf(4096, MemPriv::ALL);
    src.mem.copy_from_slice(&pattern(4096, 7));

    // Send into a posted receive.
    rig.p.ep_post_recv(server.ep, &[dst.seg(0, 4096)], 1, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_request(client.ep, &[src.seg(0, 1000)], 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(rig.dto(client.dto), (2, DtoStatus::Success, 1000, DtoOp::Send));
    assert_eq!(rig.dto(server.dto), (1, DtoStatus::Success, 1000, DtoOp::Receive));
    assert_eq!(&dst.mem[..1000], &src.mem[..1000]);

    // RDMA write.
    rig.write(client.ep, src.seg(1000, 3000), 3, dst.remote(1000, 3000)).unwrap();
    assert_eq!(rig.dto(client.dto), (3, DtoStatus::Success, 3000, DtoOp::RdmaWrite));
    assert_eq!(&dst.mem[1000..4000], &src.mem[1000..4000]);

    // RDMA read back into the zeroed tail of the source.
    src.mem[..96].fill(0);
    rig.read(client.ep, src.seg(0, 96), 4, dst.remote(4000, 96)).unwrap();
    assert_eq!(rig.dto(client.dto), (4, DtoStatus::Success, 96, DtoOp::RdmaRead));
    assert_eq!(&src.mem[..96], &dst.mem[4000..4096]);

    // And the other way: the passive side writes into and reads from the
    // active side's memory.
    rig.write(server.ep, dst.seg(0, 512), 5, src.remote(2048, 512)).unwrap();
    assert_eq!(rig.dto(server.dto), (5, DtoStatus::Success, 512, DtoOp::RdmaWrite));
    assert_eq!(&src.mem[2048..2560], &dst.mem[..512]);
    rig.read(server.ep, dst.seg(0, 64), 6, src.remote(3000, 64)).unwrap();
    assert_eq!(rig.dto(server.dto), (6, DtoStatus::Success, 64, DtoOp::RdmaRead));
    assert_eq!(&dst.mem[..64], &src.mem[3000..3064]);
}

pub fn zero_byte_and_multi_segment_posts<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = rig.pair();
    let mut src = rig.buf(4096, MemPriv::ALL);
    let dst = rig.buf(4096, MemPriv::ALL);
    src.mem.copy_from_slice(&pattern(4096, 3));

    // A 0-byte send consumes a receive and reports 0 bytes.
    rig.p.ep_post_recv(server.ep, &[dst.seg(0, 64)], 10, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_request(client.ep, &[], 11, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(rig.dto(client.dto), (11, DtoStatus::Success, 0, DtoOp::Send));
    assert_eq!(rig.dto(server.dto), (10, DtoStatus::Success, 0, DtoOp::Receive));

    // A 0-byte RDMA write completes.
    rig.p
        .ep_post_request(
            client.ep,
            &[],
            12,
            RequestOp::RdmaWrite { remote: dst.remote(0, 0) },
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    assert_eq!(rig.dto(client.dto), (12, DtoStatus::Success, 0, DtoOp::RdmaWrite));

    // Three gathered segments land in two scattered ones.
    let gather = [src.seg(0, 100), src.seg(1000, 200), src.seg(3000, 300)];
    rig.p.ep_post_recv(server.ep, &[dst.seg(0, 250), dst.seg(2048, 350)], 13, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_request(client.ep, &gather, 14, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(rig.dto(client.dto), (14, DtoStatus::Success, 600, DtoOp::Send));
    assert_eq!(rig.dto(server.dto), (13, DtoStatus::Success, 600, DtoOp::Receive));
    let sent: Vec<u8> = [&src.mem[0..100], &src.mem[1000..1200], &src.mem[3000..3300]].concat();
    let got: Vec<u8> = [&dst.mem[0..250], &dst.mem[2048..2398]].concat();
    assert_eq!(sent, got);
}

pub fn the_largest_message_the_device_allows<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let max = rig.attr.max_message_size as usize;
    assert!(max >= 1 << 20, "the device reports max_message_size {max}");
    let (client, server) = rig.pair();
    let mut src = rig.buf(max, MemPriv::ALL);
    let dst = rig.buf(max, MemPriv::ALL);
    src.mem.copy_from_slice(&pattern(max, 9));

    rig.write(client.ep, src.seg(0, max), 1, dst.remote(0, max)).unwrap();
    assert_eq!(rig.dto(client.dto), (1, DtoStatus::Success, max as u32, DtoOp::RdmaWrite));
    assert!(dst.mem == src.mem, "the RDMA write of {max} bytes differs");

    src.mem.reverse();
    rig.p.ep_post_recv(server.ep, &[dst.seg(0, max)], 2, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_request(client.ep, &[src.seg(0, max)], 3, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(rig.dto(client.dto), (3, DtoStatus::Success, max as u32, DtoOp::Send));
    assert_eq!(rig.dto(server.dto), (2, DtoStatus::Success, max as u32, DtoOp::Receive));
    assert!(dst.mem == src.mem, "the send of {max} bytes differs");
}

pub fn suppressed_completions_retire_with_the_next_signalled_one<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, _server) = rig.pair();
    let src = rig.buf(4096, MemPriv::ALL);
    let dst = rig.buf(4096, MemPriv::ALL);
    for cookie in 0..8 {
        rig.p
            .ep_post_request(
                client.ep,
                &[src.seg(0, 64)],
                cookie,
                RequestOp::RdmaWrite { remote: dst.remote(0, 64) },
                CompletionFlags::SUPPRESS,
            )
            .unwrap();
    }
    rig.write(client.ep, src.seg(0, 64), 8, dst.remote(0, 64)).unwrap();
    assert_eq!(rig.dto(client.dto), (8, DtoStatus::Success, 64, DtoOp::RdmaWrite));
    let (_, recv_idle, request_idle) = rig.p.ep_get_status(client.ep).unwrap();
    assert!(recv_idle && request_idle, "suppressed writes still outstanding");
}

/// A consumer polls its EVD in a loop, as MVAPICH2 does: a dequeue that
/// found the EVD empty (which a transport may answer past its lane) leaves
/// nothing behind that hides what completes after it, whether the lane
/// takes that completion (a write, a send, a send that retires a
/// suppressed write before it) or leaves it to the ordinary dequeue (a
/// failed write, last). Each completion is found by polling alone, once,
/// and the EVD is empty again after it.
pub fn polling_an_empty_evd_misses_no_completion_after_it<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = (rig.side(), rig.side());
    rig.connect(client, server, PORT + 14, b"", b"");
    let src = rig.buf(4096, MemPriv::ALL);
    let dst = rig.buf(4096, MemPriv::ALL);
    let empty = |r: DatResult<Event>| r.is_err_and(|e| e.error_type() == ErrorType::QueueEmpty);
    for round in 0..8u64 {
        for _ in 0..4 {
            assert!(empty(rig.p.evd_dequeue(client.dto)), "round {round}: a completion before any post");
        }
        rig.p.ep_post_recv(server.ep, &[dst.seg(0, 64)], 100 + round, CompletionFlags::DEFAULT).unwrap();
        let write = (src.seg(0, 256), dst.remote(1024, 256));
        let suppressed = round % 2 == 1;
        let flags = if suppressed { CompletionFlags::SUPPRESS } else { CompletionFlags::DEFAULT };
        rig.p
            .ep_post_request(client.ep, &[write.0], 2 * round, RequestOp::RdmaWrite { remote: write.1 }, flags)
            .unwrap();
        rig.p
            .ep_post_request(client.ep, &[src.seg(512, 64)], 2 * round + 1, RequestOp::Send, CompletionFlags::DEFAULT)
            .unwrap();
        let mut expected = vec![(2 * round, DtoStatus::Success), (2 * round + 1, DtoStatus::Success)];
        if suppressed {
            expected.remove(0);
        }
        let (mut found, mut empties) = (Vec::new(), 0u64);
        let start = Instant::now();
        while found.len() < expected.len() {
            match rig.p.evd_dequeue(client.dto) {
                Ok(Event { data: EventData::Dto { cookie, status, .. }, .. }) => found.push((cookie, status)),
                Ok(other) => panic!("round {round}: {other:?}"),
                Err(e) if e.error_type() == ErrorType::QueueEmpty => empties += 1,
                Err(e) => panic!("round {round}: dat_evd_dequeue: {e:?}"),
            }
            assert!(start.elapsed() < PATIENCE, "round {round}: polling found {found:?} after {empties} empty answers");
        }
        assert_eq!(found, expected, "round {round}");
        assert_eq!(rig.dto(server.dto), (100 + round, DtoStatus::Success, 64, DtoOp::Receive));
        assert!(empty(rig.p.evd_dequeue(client.dto)), "round {round}: a completion twice");
    }
    // A failed write, which no lane takes: the ordinary dequeue finds it.
    let freed = rig.buf(4096, MemPriv::ALL);
    let remote = freed.remote(0, 64);
    rig.p.lmr_free(freed.lmr.lmr).unwrap();
    rig.write(client.ep, src.seg(0, 64), 99, remote).unwrap();
    let start = Instant::now();
    let status = loop {
        match rig.p.evd_dequeue(client.dto) {
            Ok(Event { data: EventData::Dto { cookie: 99, status, .. }, .. }) => break status,
            Ok(other) => panic!("{other:?}"),
            Err(e) if e.error_type() == ErrorType::QueueEmpty => {}
            Err(e) => panic!("dat_evd_dequeue: {e:?}"),
        }
        assert!(start.elapsed() < PATIENCE, "polling never found the failed write");
    };
    assert_eq!(status, DtoStatus::RemoteAccess);
}

/// MVAPICH2's Endpoints: one EVD for both streams, receives signalled and
/// requests unsignalled. Each stream keeps its own flags on the device:
/// the receive and the signalled requests complete there, the suppressed
/// writes retire silently with them, and a receive may not be unsignalled.
pub fn one_evd_takes_signalled_receives_and_unsignalled_requests<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let attr = EpAttr { request_completion_flags: CompletionFlags::UNSIGNALLED, ..EpAttr::provider_default(&rig.attr) };
    let (client, server) = (rig.side_with(Some(&attr)), rig.side_with(Some(&attr)));
    rig.connect(client, server, PORT, b"", b"");
    let mut src = rig.buf(4096, MemPriv::ALL);
    let dst = rig.buf(4096, MemPriv::ALL);
    src.mem.copy_from_slice(&pattern(4096, 7));
    let r = rig.p.ep_post_recv(server.ep, &[dst.seg(2048, 64)], 1, CompletionFlags::UNSIGNALLED);
    assert_eq!(r.map_err(|e| e.error_type()), Err(ErrorType::InvalidParameter));
    rig.p.ep_post_recv(server.ep, &[dst.seg(2048, 64)], 1, CompletionFlags::DEFAULT).unwrap();
    for cookie in 2..6 {
        let (local, remote) = (src.seg(0, 512), dst.remote(0, 512));
        rig.p
            .ep_post_request(client.ep, &[local], cookie, RequestOp::RdmaWrite { remote }, CompletionFlags::SUPPRESS)
            .unwrap();
    }
    rig.p
        .ep_post_request(
            client.ep,
            &[src.seg(512, 512)],
            6,
            RequestOp::RdmaWrite { remote: dst.remote(512, 512) },
            CompletionFlags::UNSIGNALLED,
        )
        .unwrap();
    rig.p.ep_post_request(client.ep, &[src.seg(2048, 64)], 7, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(rig.dto(client.dto), (6, DtoStatus::Success, 512, DtoOp::RdmaWrite));
    assert_eq!(rig.dto(client.dto), (7, DtoStatus::Success, 64, DtoOp::Send));
    assert_eq!(rig.dto(server.dto), (1, DtoStatus::Success, 64, DtoOp::Receive));
    assert!(dst.mem[..1024] == src.mem[..1024], "the writes differ");
    assert!(dst.mem[2048..2048 + 64] == src.mem[2048..2048 + 64], "the send differs");
    let (_, recv_idle, request_idle) = rig.p.ep_get_status(client.ep).unwrap();
    assert!(recv_idle && request_idle, "suppressed writes still outstanding");
    assert!(rig.p.evd_dequeue(client.dto).is_err_and(|e| e.error_type() == ErrorType::QueueEmpty));
    // dat_evd_wait(3DAT): an unsignalled stream feeds the EVD.
    let r = rig.p.evd_wait(client.dto, 0, 2).map(|_| ());
    assert_eq!(r.map_err(|e| e.error_type()), Err(ErrorType::InvalidState));
}

/// Every DTO posted before an abrupt disconnect completes exactly once,
/// the flushed ones in post order. The server posts no receives, so the
/// client's sends stall in RNR retry (which never gives up) until the
/// disconnect flushes them.
pub fn disconnect_with_dtos_in_flight_completes_each_exactly_once_in_order<F: Fabric>() {
    const WRITES: u64 = 8;
    const SENDS: u64 = 16;
    const RECVS: u64 = 16;
    let mut rig = Rig::<F>::new();
    let mut attr = EpAttr::provider_default(&rig.attr);
    attr.max_request_dtos = (WRITES + SENDS) as u32;
    attr.max_recv_dtos = RECVS as u32;
    let (client, server) = (rig.side_with(Some(&attr)), rig.side_with(Some(&attr)));
    rig.connect(client, server, PORT, b"", b"");
    let src = rig.buf(4096, MemPriv::ALL);
    let dst = rig.buf(4096, MemPriv::ALL);
    for cookie in 0..RECVS {
        rig.p.ep_post_recv(client.ep, &[dst.seg(0, 64)], 1000 + cookie, CompletionFlags::DEFAULT).unwrap();
    }
    for cookie in 0..WRITES {
        let remote = dst.remote(0, 4096);
        rig.write(client.ep, src.seg(0, 4096), cookie, remote).unwrap();
    }
    for cookie in WRITES..WRITES + SENDS {
        rig.p.ep_post_request(client.ep, &[src.seg(0, 64)], cookie, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    }
    rig.p.ep_disconnect(client.ep, CloseFlags::Abrupt).unwrap();

    let (mut requests, mut recvs) = (Vec::new(), Vec::new());
    for _ in 0..WRITES + SENDS + RECVS {
        let (cookie, status, _, op) = rig.dto(client.dto);
        match op {
            DtoOp::Receive => recvs.push((cookie, status)),
            _ => requests.push((cookie, status)),
        }
    }
    assert!(rig.p.evd_dequeue(client.dto).is_err(), "a DTO completed twice");
    let cookies: Vec<u64> = requests.iter().map(|r| r.0).collect();
    assert_eq!(cookies, (0..WRITES + SENDS).collect::<Vec<_>>(), "requests out of post order");
    let first_flush = requests.iter().position(|r| r.1 == DtoStatus::Flushed).expect("no request was flushed");
    assert!(requests[first_flush..].iter().all(|r| r.1 == DtoStatus::Flushed), "a success after a flush: {requests:?}");
    assert!(requests[..first_flush].iter().all(|r| r.1 == DtoStatus::Success), "{requests:?}");
    assert!(first_flush <= (WRITES + 1) as usize, "a send completed with no receive posted: {requests:?}");
    let expected: Vec<_> = (0..RECVS).map(|c| (1000 + c, DtoStatus::Flushed)).collect();
    assert_eq!(recvs, expected);
    rig.expect(server.conn, EventNumber::ConnectionDisconnected);
    println!("{} of {} requests flushed", requests.len() - first_flush, requests.len());
}

/// When the peer goes away, the receives of a consumer whose data thread
/// only dequeues its DTO EVD (never the connect EVD, never a wait) are
/// flushed, each once and in post order, and the connection event follows.
pub fn a_peer_disconnect_flushes_the_receives_of_a_consumer_that_only_dequeues<F: Fabric>() {
    const RECVS: u64 = 4;
    let mut rig = Rig::<F>::new();
    let (client, server) = rig.pair();
    let dst = rig.buf(4096, MemPriv::ALL);
    for cookie in 0..RECVS {
        rig.p.ep_post_recv(client.ep, &[dst.seg(0, 64)], cookie, CompletionFlags::DEFAULT).unwrap();
    }
    rig.p.ep_disconnect(server.ep, CloseFlags::Abrupt).unwrap();
    let start = Instant::now();
    let mut flushed = Vec::new();
    while flushed.len() < RECVS as usize {
        match rig.p.evd_dequeue(client.dto) {
            Ok(Event { data: EventData::Dto { cookie, status, .. }, .. }) => flushed.push((cookie, status)),
            Ok(other) => panic!("{other:?}"),
            Err(e) if e.error_type() == ErrorType::QueueEmpty => std::thread::sleep(Duration::from_micros(100)),
            Err(e) => panic!("dat_evd_dequeue: {e:?}"),
        }
        assert!(start.elapsed() < PATIENCE, "flushed after {:?}: {flushed:?}", start.elapsed());
    }
    println!("receives flushed {:?} after the peer's disconnect", start.elapsed());
    let expected: Vec<_> = (0..RECVS).map(|c| (c, DtoStatus::Flushed)).collect();
    assert_eq!(flushed, expected);
    std::thread::sleep(Duration::from_millis(2));
    assert!(rig.p.evd_dequeue(client.dto).is_err(), "a receive completed twice");
    assert_eq!(rig.state(client.ep), EpState::Disconnected);
    rig.expect(client.conn, EventNumber::ConnectionDisconnected);
}

/// How soon a DTO posted in Disconnected must complete: at once, so no
/// longer than a round of the transport's own work, even under TCG.
pub const AT_ONCE: Duration = Duration::from_secs(2);

/// dat_ep_post_recv(3DAT), in DAT_EP_STATE_DISCONNECTED: "the posted Recv
/// is immediately flushed to recv_evd_handle"; dat_ep_post_send(3DAT):
/// "the posted Send is immediately flushed to request_evd_handle". Once both sides are Disconnected, a
/// receive posted on either side (one segment, which may take the lane,
/// and two, which take the ordinary post) and a send complete flushed
/// within [`AT_ONCE`], each once, in post order, with their cookies.
pub fn dtos_posted_in_disconnected_complete_flushed_at_once<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = rig.pair();
    rig.p.ep_disconnect(client.ep, CloseFlags::Graceful).unwrap();
    rig.expect(client.conn, EventNumber::ConnectionDisconnected);
    rig.expect(server.conn, EventNumber::ConnectionDisconnected);
    let buf = rig.buf(4096, MemPriv::ALL);
    for (side, base) in [(client, 100), (server, 200)] {
        assert_eq!(rig.state(side.ep), EpState::Disconnected);
        let flags = CompletionFlags::DEFAULT;
        rig.p.ep_post_recv(side.ep, &[buf.seg(0, 64)], base, flags).unwrap();
        rig.p.ep_post_recv(side.ep, &[buf.seg(64, 32), buf.seg(96, 32)], base + 1, flags).unwrap();
        rig.p.ep_post_recv(side.ep, &[buf.seg(128, 64)], base + 2, flags).unwrap();
        rig.p.ep_post_request(side.ep, &[buf.seg(256, 64)], base + 3, RequestOp::Send, flags).unwrap();
        let start = Instant::now();
        let mut done = Vec::new();
        while done.len() < 4 {
            match rig.p.evd_dequeue(side.dto) {
                Ok(Event { data: EventData::Dto { cookie, status, op, .. }, .. }) => done.push((cookie, status, op)),
                Ok(other) => panic!("{other:?}"),
                Err(e) if e.error_type() == ErrorType::QueueEmpty => std::thread::sleep(Duration::from_micros(100)),
                Err(e) => panic!("dat_evd_dequeue: {e:?}"),
            }
            assert!(start.elapsed() < AT_ONCE, "after {:?} only {done:?} of 4 DTOs completed", start.elapsed());
        }
        println!("4 DTOs posted in Disconnected flushed in {:?}", start.elapsed());
        // Receives and the send complete in post order within each queue.
        let (recvs, sends): (Vec<_>, Vec<_>) = done.into_iter().partition(|d| d.2 == DtoOp::Receive);
        let flushed = |cookie, op| (cookie, DtoStatus::Flushed, op);
        assert_eq!(recvs, [base, base + 1, base + 2].map(|c| flushed(c, DtoOp::Receive)));
        assert_eq!(sends, [flushed(base + 3, DtoOp::Send)]);
        std::thread::sleep(Duration::from_millis(20));
        assert!(rig.p.evd_dequeue(side.dto).is_err(), "a DTO completed twice");
    }
}

pub fn graceful_disconnect_reaches_both_sides_and_the_ep_can_be_reused<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = rig.pair();
    rig.p.ep_disconnect(client.ep, CloseFlags::Graceful).unwrap();
    rig.expect(client.conn, EventNumber::ConnectionDisconnected);
    rig.expect(server.conn, EventNumber::ConnectionDisconnected);
    assert_eq!(rig.state(client.ep), EpState::Disconnected);
    assert_eq!(rig.state(server.ep), EpState::Disconnected);

    // dat_ep_reset, then a second connection on the same EPs.
    rig.p.ep_reset(client.ep).unwrap();
    rig.p.ep_reset(server.ep).unwrap();
    rig.connect(client, server, PORT + 3, b"again", b"");
    let src = rig.buf(64, MemPriv::ALL);
    let dst = rig.buf(64, MemPriv::ALL);
    rig.write(client.ep, src.seg(0, 64), 1, dst.remote(0, 64)).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::Success);
}

/// After dat_lmr_free, a remote RDMA write or read to the old rmr_context
/// completes with DAT_DTO_ERR_REMOTE_ACCESS and breaks the connection.
pub fn remote_access_to_a_freed_lmr_fails_and_breaks_the_connection<F: Fabric>() {
    for read in [false, true] {
        let mut rig = Rig::<F>::new();
        let (client, server) = rig.pair();
        let local = rig.buf(4096, MemPriv::ALL);
        let target = rig.buf(4096, MemPriv::ALL);
        let remote = target.remote(0, 64);
        rig.p.lmr_free(target.lmr.lmr).unwrap();
        if read {
            rig.read(client.ep, local.seg(0, 64), 1, remote).unwrap();
        } else {
            rig.write(client.ep, local.seg(0, 64), 1, remote).unwrap();
        }
        assert_eq!(rig.dto(client.dto).1, DtoStatus::RemoteAccess, "read: {read}");
        rig.expect(client.conn, EventNumber::ConnectionBroken);
        assert_eq!(rig.state(client.ep), EpState::Disconnected);
        let e = rig.next(server.conn);
        assert!(
            matches!(e.number, EventNumber::ConnectionDisconnected | EventNumber::ConnectionBroken),
            "server: {e:?}"
        );
    }
}

pub fn remote_write_without_the_remote_write_privilege_fails<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, _server) = rig.pair();
    let local = rig.buf(4096, MemPriv::ALL);
    let read_only = rig.buf(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_READ);
    // Reading is allowed.
    rig.read(client.ep, local.seg(0, 64), 1, read_only.remote(0, 64)).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::Success);
    // Writing is not.
    rig.write(client.ep, local.seg(0, 64), 2, read_only.remote(0, 64)).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::RemoteAccess);
    rig.expect(client.conn, EventNumber::ConnectionBroken);
}

pub fn an_lmr_without_remote_privileges_has_no_rmr_context<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let local = rig.buf(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
    assert_eq!(local.lmr.rmr_context, None);
}

/// Whether the transport has memory windows; one that has none must
/// refuse `dat_rmr_create` (and says so on stdout).
fn memory_windows<F: Fabric>(rig: &mut Rig<F>) -> bool {
    assert_eq!(rig.attr.rmr_supported, F::MEMORY_WINDOWS, "rmr_supported");
    if !F::MEMORY_WINDOWS {
        let refused = rig.p.rmr_create(rig.pz).unwrap_err();
        assert_eq!(refused.error_type(), ErrorType::ModelNotSupported);
        println!("no memory windows on this transport: dat_rmr_create is refused");
    }
    F::MEMORY_WINDOWS
}

/// Whether the transport offers windows of an EP and remote invalidation;
/// one that does not must refuse them (and says so on stdout).
fn remote_invalidation<F: Fabric>(rig: &mut Rig<F>) -> bool {
    if !F::remote_invalidation() {
        let refused = rig.p.rmr_create_for_ep(rig.pz).unwrap_err();
        assert_eq!(refused.error_type(), ErrorType::ModelNotSupported);
        println!("no remote invalidation on this transport: dat_rmr_create_for_ep is refused");
    }
    F::remote_invalidation()
}

/// The bind completion of `cookie` on `evd`, successful.
fn bound<F: Fabric>(rig: &mut Rig<F>, evd: EvdHandle, cookie: u64) {
    let e = rig.next(evd);
    assert!(matches!(e.data, EventData::RmrBind { cookie: c, status: DtoStatus::Success, .. } if c == cookie), "{e:?}");
}

/// dat_rmr_bind opens an LMR to the peer through a window; dat_rmr_free
/// on a bound RMR unbinds it, and the old context is refused.
pub fn rmr_bind_grants_remote_access_and_rmr_free_revokes_it<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    if !memory_windows(&mut rig) {
        return;
    }
    let (client, server) = rig.pair();
    let local = rig.buf(4096, MemPriv::ALL);
    let mut target = rig.buf(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
    target.mem[..64].copy_from_slice(&pattern(64, 5));
    let rmr = rig.p.rmr_create(rig.pz).unwrap();
    let context = rig
        .p
        .rmr_bind(
            rmr,
            target.lmr.lmr,
            &target.seg(0, 4096),
            MemPriv::REMOTE_READ,
            server.ep,
            77,
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    bound(&mut rig, server.dto, 77);
    let window = RmrTriplet { virtual_address: target.mem.as_ptr() as u64, segment_length: 64, rmr_context: context };
    rig.read(client.ep, local.seg(0, 64), 1, window).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::Success);
    assert_eq!(&local.mem[..64], &target.mem[..64]);

    rig.p.rmr_free(rmr).unwrap();
    rig.read(client.ep, local.seg(0, 64), 2, window).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::RemoteAccess);
    // The LMR the window was bound to is free to go.
    rig.p.lmr_free(target.lmr.lmr).unwrap();
}

/// A second dat_rmr_bind moves the window: its new context reaches the
/// new range, the first context is refused. Both binds and a write after
/// them go through one Endpoint's send queue, in order.
pub fn rmr_rebind_moves_the_window_and_retires_the_old_context<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    if !memory_windows(&mut rig) {
        return;
    }
    let (client, server) = rig.pair();
    let local = rig.buf(4096, MemPriv::ALL);
    let mut first_target = rig.buf(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
    let mut second_target = rig.buf(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
    first_target.mem[..64].copy_from_slice(&pattern(64, 1));
    second_target.mem[..64].copy_from_slice(&pattern(64, 2));
    let rmr = rig.p.rmr_create(rig.pz).unwrap();
    let read = MemPriv::REMOTE_READ;
    let first = rig
        .p
        .rmr_bind(rmr, first_target.lmr.lmr, &first_target.seg(0, 4096), read, server.ep, 1, CompletionFlags::DEFAULT)
        .unwrap();
    let second = rig
        .p
        .rmr_bind(rmr, second_target.lmr.lmr, &second_target.seg(0, 4096), read, server.ep, 2, CompletionFlags::DEFAULT)
        .unwrap();
    assert_ne!(first, second, "a bind gives the window a new context");
    bound(&mut rig, server.dto, 1);
    bound(&mut rig, server.dto, 2);
    let (src, dst) = (rig.buf(64, MemPriv::ALL), rig.buf(64, MemPriv::ALL));
    rig.write(server.ep, src.seg(0, 64), 3, dst.remote(0, 64)).unwrap();
    assert_eq!(rig.dto(server.dto), (3, DtoStatus::Success, 64, DtoOp::RdmaWrite));

    let window = |target: &Buf, rmr_context| RmrTriplet {
        virtual_address: target.mem.as_ptr() as u64,
        segment_length: 64,
        rmr_context,
    };
    let moved = window(&second_target, second);
    rig.read(client.ep, local.seg(0, 64), 4, moved).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::Success);
    assert_eq!(&local.mem[..64], &second_target.mem[..64]);
    let old = window(&first_target, first);
    rig.read(client.ep, local.seg(0, 64), 5, old).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::RemoteAccess);
    rig.p.rmr_free(rmr).unwrap();
}

/// An RMR of `DAT_RMR_SCOPE_EP` (dat_rmr_create_for_ep, a type 2 window)
/// bound through the server's EP opens memory to its peer until the peer
/// invalidates it with dat_ep_post_send_with_invalidate: the server's
/// receive completes as `DAT_DTO_RECEIVE_WITH_INVALIDATE` with the
/// context, the RMR is unbound (its LMR is free to go), and the context
/// is refused. A transport without type 2 windows refuses the RMR with
/// `DAT_MODEL_NOT_SUPPORTED`.
pub fn a_send_with_invalidate_frees_the_window_bound_to_its_peer<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    if !memory_windows(&mut rig) {
        let refused = rig.p.rmr_create_for_ep(rig.pz).unwrap_err();
        assert_eq!(refused.error_type(), ErrorType::ModelNotSupported);
        return;
    }
    if !remote_invalidation(&mut rig) {
        return;
    }
    let (client, server) = rig.pair();
    let local = rig.buf(4096, MemPriv::ALL);
    let target = rig.buf(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
    let inbox = rig.buf(64, MemPriv::ALL);
    let rmr = rig.p.rmr_create_for_ep(rig.pz).unwrap();
    assert_eq!(rig.p.rmr_query(rmr, RMR_FIELD_ALL).unwrap().scope, RmrScope::Ep);
    let write = MemPriv::REMOTE_WRITE;
    let context = rig
        .p
        .rmr_bind(rmr, target.lmr.lmr, &target.seg(0, 4096), write, server.ep, 1, CompletionFlags::DEFAULT)
        .unwrap();
    bound(&mut rig, server.dto, 1);
    let window = RmrTriplet { virtual_address: target.mem.as_ptr() as u64, segment_length: 64, rmr_context: context };
    rig.write(client.ep, local.seg(0, 64), 2, window).unwrap();
    assert_eq!(rig.dto(client.dto), (2, DtoStatus::Success, 64, DtoOp::RdmaWrite));

    rig.p.ep_post_recv(server.ep, &[inbox.seg(0, 64)], 3, CompletionFlags::DEFAULT).unwrap();
    let send = [local.seg(0, 16)];
    rig.p
        .ep_post_request(client.ep, &send, 4, RequestOp::SendInvalidate { rkey: context }, CompletionFlags::DEFAULT)
        .unwrap();
    assert_eq!(rig.dto(client.dto), (4, DtoStatus::Success, 16, DtoOp::Send));
    match rig.next(server.dto).data {
        EventData::Dto { cookie: 3, status: DtoStatus::Success, transferred_length: 16, op, imm, .. } => {
            assert_eq!((op, imm), (DtoOp::ReceiveWithInvalidate, context));
        }
        other => panic!("expected the receive with invalidate, got {other:?}"),
    }
    assert_eq!(rig.p.rmr_query(rmr, RMR_FIELD_ALL).unwrap().rmr_context, None);
    rig.write(client.ep, local.seg(0, 64), 5, window).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::RemoteAccess);
    rig.p.lmr_free(target.lmr.lmr).unwrap();
    rig.p.rmr_free(rmr).unwrap();
}

/// A send with invalidate of a key that names no type 2 window bound to
/// the peer's EP (here an LMR's) fails at both ends, and the connection
/// breaks; the LMR still works for a new connection's peer.
pub fn a_send_with_invalidate_of_a_key_not_bound_to_the_peer_fails<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = rig.pair();
    let local = rig.buf(64, MemPriv::ALL);
    let target = rig.buf(4096, MemPriv::ALL);
    rig.p.ep_post_recv(server.ep, &[target.seg(0, 64)], 1, CompletionFlags::DEFAULT).unwrap();
    let lmr_key = target.lmr.rmr_context.unwrap();
    if !F::remote_invalidation() {
        let refused = rig
            .p
            .ep_post_request(
                client.ep,
                &[local.seg(0, 8)],
                2,
                RequestOp::SendInvalidate { rkey: lmr_key },
                CompletionFlags::DEFAULT,
            )
            .unwrap_err();
        assert_eq!(refused.error_type(), ErrorType::ModelNotSupported);
        println!("no remote invalidation on this transport: dat_ep_post_send_with_invalidate is refused");
        return;
    }
    rig.p
        .ep_post_request(
            client.ep,
            &[local.seg(0, 8)],
            2,
            RequestOp::SendInvalidate { rkey: lmr_key },
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    let (cookie, status, _, _) = rig.dto(client.dto);
    assert_eq!(cookie, 2);
    assert_ne!(status, DtoStatus::Success, "the responder refused the invalidation");
    let (cookie, status, _, _) = rig.dto(server.dto);
    assert_eq!(cookie, 1);
    assert_ne!(status, DtoStatus::Success, "the receive did not complete as a message");
    assert_eq!(rig.p.lmr_query(target.lmr.lmr, LMR_FIELD_ALL).unwrap().rmr_context, Some(lmr_key));
}

/// An RMR of `DAT_RMR_SCOPE_EP` is invalidated by its own EP with a
/// zero-length dat_rmr_bind, and then binds again with a new context.
pub fn a_window_of_an_ep_unbinds_by_invalidation_and_binds_again<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    if !memory_windows(&mut rig) {
        return;
    }
    if !remote_invalidation(&mut rig) {
        return;
    }
    let (client, server) = rig.pair();
    let local = rig.buf(4096, MemPriv::ALL);
    let mut target = rig.buf(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
    target.mem[..64].copy_from_slice(&pattern(64, 7));
    let rmr = rig.p.rmr_create_for_ep(rig.pz).unwrap();
    let read = MemPriv::REMOTE_READ;
    let seg = target.seg(0, 4096);
    let first = rig.p.rmr_bind(rmr, target.lmr.lmr, &seg, read, server.ep, 1, CompletionFlags::DEFAULT).unwrap();
    bound(&mut rig, server.dto, 1);
    let nothing = LmrTriplet { lmr_context: 0, virtual_address: 0, segment_length: 0 };
    rig.p.rmr_bind(rmr, LmrHandle::NULL, &nothing, read, server.ep, 2, CompletionFlags::DEFAULT).unwrap();
    bound(&mut rig, server.dto, 2);
    let second = rig.p.rmr_bind(rmr, target.lmr.lmr, &seg, read, server.ep, 3, CompletionFlags::DEFAULT).unwrap();
    bound(&mut rig, server.dto, 3);
    assert_ne!(first, second, "a bind gives the window a new context");
    let window =
        |rmr_context| RmrTriplet { virtual_address: target.mem.as_ptr() as u64, segment_length: 64, rmr_context };
    rig.read(client.ep, local.seg(0, 64), 4, window(second)).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::Success);
    assert_eq!(&local.mem[..64], &target.mem[..64]);
    rig.read(client.ep, local.seg(0, 64), 5, window(first)).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::RemoteAccess);
    rig.p.rmr_free(rmr).unwrap();
}

/// An RMR of `DAT_RMR_SCOPE_EP` bound through one EP is reached over that
/// EP's connection only: the peer of another connection of the same IA,
/// naming the same context, gets a remote access error.
pub fn a_window_of_an_ep_is_reached_over_its_connection_only<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    if !memory_windows(&mut rig) {
        return;
    }
    if !remote_invalidation(&mut rig) {
        return;
    }
    let (client, server) = rig.pair();
    let (stranger, host) = (rig.side(), rig.side());
    rig.connect(stranger, host, PORT + 8, b"", b"");
    let local = rig.buf(64, MemPriv::ALL);
    let target = rig.buf(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
    let rmr = rig.p.rmr_create_for_ep(rig.pz).unwrap();
    let write = MemPriv::REMOTE_WRITE;
    let context = rig
        .p
        .rmr_bind(rmr, target.lmr.lmr, &target.seg(0, 4096), write, server.ep, 1, CompletionFlags::DEFAULT)
        .unwrap();
    bound(&mut rig, server.dto, 1);
    let window = RmrTriplet { virtual_address: target.mem.as_ptr() as u64, segment_length: 64, rmr_context: context };
    rig.write(stranger.ep, local.seg(0, 64), 2, window).unwrap();
    assert_eq!(rig.dto(stranger.dto).1, DtoStatus::RemoteAccess, "another connection");
    rig.write(client.ep, local.seg(0, 64), 3, window).unwrap();
    assert_eq!(rig.dto(client.dto), (3, DtoStatus::Success, 64, DtoOp::RdmaWrite), "its own connection");
    rig.p.rmr_free(rmr).unwrap();
}

/// dat_ep_post_rdma_read_to_rmr reads the peer's memory into local
/// memory named by an RMR context: a bound window's, or an LMR's.
pub fn rdma_read_to_rmr_lands_in_the_memory_the_context_names<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = rig.pair();
    let _ = server;
    let mut source = rig.buf(4096, MemPriv::ALL);
    source.mem[..128].copy_from_slice(&pattern(128, 9));
    let sink = rig.buf(4096, MemPriv::ALL);
    let into_lmr = RmrTriplet {
        virtual_address: sink.mem.as_ptr() as u64 + 64,
        segment_length: 64,
        rmr_context: sink.lmr.rmr_context.unwrap(),
    };
    rig.p
        .ep_post_request(
            client.ep,
            &[],
            1,
            PostOp::RdmaReadToRmr { local: into_lmr, remote: source.remote(0, 64) },
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    assert_eq!(rig.dto(client.dto), (1, DtoStatus::Success, 64, DtoOp::RdmaRead));
    assert_eq!(&sink.mem[64..128], &source.mem[..64]);
    if !F::MEMORY_WINDOWS {
        return;
    }
    let rmr = rig.p.rmr_create(rig.pz).unwrap();
    let write = MemPriv::REMOTE_WRITE;
    let context = rig
        .p
        .rmr_bind(rmr, sink.lmr.lmr, &sink.seg(1024, 1024), write, client.ep, 2, CompletionFlags::DEFAULT)
        .unwrap();
    bound(&mut rig, client.dto, 2);
    let into_window =
        RmrTriplet { virtual_address: sink.mem.as_ptr() as u64 + 1024, segment_length: 64, rmr_context: context };
    rig.p
        .ep_post_request(
            client.ep,
            &[],
            3,
            PostOp::RdmaReadToRmr { local: into_window, remote: source.remote(64, 64) },
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    assert_eq!(rig.dto(client.dto), (3, DtoStatus::Success, 64, DtoOp::RdmaRead));
    assert_eq!(&sink.mem[1024..1088], &source.mem[64..128]);
    rig.p.rmr_free(rmr).unwrap();
}

/// A Common Service Point (DAT 2.0) listens on the IA's address and a
/// port; dat_ep_common_connect to that address reaches it, and its
/// request is accepted as a PSP's.
pub fn a_common_connect_reaches_a_common_service_point<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = (rig.side(), rig.side());
    let port = PORT + 7;
    let mut address = rig.address();
    address.bytes[2..4].copy_from_slice(&(port as u16).to_be_bytes());
    let domain = i32::from(u16::from_ne_bytes([address.bytes[0], address.bytes[1]]));
    let comm = Comm { domain, socket_type: 1, protocol: 0 };
    let csp = rig.p.csp_create(rig.ia, &comm, &address, rig.cr_evd).unwrap();
    rig.p.ep_common_connect(client.ep, &address, 10_000_000, b"common").unwrap();
    let cr = match rig.expect(rig.cr_evd, EventNumber::ConnectionRequest).data {
        EventData::CrArrival { psp, cr, conn_qual } => {
            assert_eq!((psp.raw(), conn_qual), (csp.raw(), port));
            cr
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(&rig.p.cr_private_data(cr).unwrap()[..6], b"common");
    rig.p.cr_accept(cr, server.ep, b"").unwrap();
    rig.expect(client.conn, EventNumber::ConnectionEstablished);
    rig.expect(server.conn, EventNumber::ConnectionEstablished);
    rig.p.csp_free(csp).unwrap();
}

/// A zero-length dat_rmr_bind unbinds the window: its context is refused,
/// dat_rmr_query shows no binding, and the LMR is free to go.
pub fn a_zero_length_rmr_bind_unbinds_the_window<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    if !memory_windows(&mut rig) {
        return;
    }
    let (client, server) = rig.pair();
    let local = rig.buf(4096, MemPriv::ALL);
    let target = rig.buf(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
    let rmr = rig.p.rmr_create(rig.pz).unwrap();
    let write = MemPriv::REMOTE_WRITE;
    let context = rig
        .p
        .rmr_bind(rmr, target.lmr.lmr, &target.seg(0, 4096), write, server.ep, 1, CompletionFlags::DEFAULT)
        .unwrap();
    bound(&mut rig, server.dto, 1);
    let window = RmrTriplet { virtual_address: target.mem.as_ptr() as u64, segment_length: 64, rmr_context: context };
    rig.write(client.ep, local.seg(0, 64), 2, window).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::Success);

    let nothing = LmrTriplet { lmr_context: 0, virtual_address: 0, segment_length: 0 };
    rig.p.rmr_bind(rmr, LmrHandle::NULL, &nothing, write, server.ep, 3, CompletionFlags::DEFAULT).unwrap();
    bound(&mut rig, server.dto, 3);
    assert_eq!(rig.p.rmr_query(rmr, RMR_FIELD_ALL).unwrap().lmr_triplet, None);
    rig.write(client.ep, local.seg(0, 64), 4, window).unwrap();
    assert_eq!(rig.dto(client.dto).1, DtoStatus::RemoteAccess);
    rig.p.lmr_free(target.lmr.lmr).unwrap();
    rig.p.rmr_free(rmr).unwrap();
}

pub fn shared_receive_queue_feeds_two_endpoints<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let srq_attr = SrqAttr { max_recv_dtos: 16, max_recv_iov: 2, low_watermark: 0 };
    let dst = rig.buf(4096, MemPriv::ALL);
    let src = rig.buf(4096, MemPriv::ALL);
    let srq = rig.p.srq_create(rig.ia, rig.pz, &srq_attr).unwrap();
    for cookie in 0..4 {
        rig.p.srq_post_recv(srq, &[dst.seg(cookie as usize * 64, 64)], cookie).unwrap();
    }
    let mut servers = Vec::new();
    for qual in [PORT + 4, PORT + 5] {
        let client = rig.side();
        let dto = rig.p.evd_create(rig.ia, 64, CnoHandle::NULL, EvdFlags::DTO).unwrap();
        let conn = rig.p.evd_create(rig.ia, 8, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
        let attr = EpAttr::provider_default(&rig.attr);
        let ep = rig.p.ep_create_with_srq(rig.ia, rig.pz, dto, dto, conn, srq, &attr).unwrap();
        let server = Side { ep, dto, conn };
        rig.connect(client, server, qual, b"", b"");
        rig.p.ep_post_request(client.ep, &[src.seg(0, 32)], 100, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
        assert_eq!(rig.dto(client.dto).1, DtoStatus::Success);
        servers.push(server);
    }
    let first = rig.dto(servers[0].dto);
    let second = rig.dto(servers[1].dto);
    assert_eq!((first.1, first.2, second.1, second.2), (DtoStatus::Success, 32, DtoStatus::Success, 32));
    assert_ne!(first.0, second.0, "one SRQ buffer used twice");
}

/// dat_ep_free(3DAT) in every state the transport takes part in: the EP
/// goes, its DTOs are flushed, and a connected peer hears DISCONNECTED.
pub fn ep_free_in_every_state<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let buf = rig.buf(4096, MemPriv::ALL);

    // Unconnected, with a receive posted.
    let lone = rig.side();
    rig.p.ep_post_recv(lone.ep, &[buf.seg(0, 64)], 1, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_free(lone.ep).unwrap();

    // Active Connection Pending: the attempt is abandoned.
    let pending = rig.side();
    let psp = rig.p.psp_create(rig.ia, PORT + 6, rig.cr_evd, PspFlags::Consumer).unwrap();
    rig.dial(pending, PORT + 6, b"", 10_000_000).unwrap();
    rig.p.ep_free(pending.ep).unwrap();
    // Its request may still arrive; refusing it is harmless.
    if let Ok(e) = rig.p.evd_wait(rig.cr_evd, 2_000_000, 1) {
        if let EventData::CrArrival { cr, .. } = e.0.data {
            rig.p.cr_reject(cr, b"").unwrap();
        }
    }
    rig.p.psp_free(psp).unwrap();

    // Connected, with DTOs outstanding: the peer hears DISCONNECTED.
    let (client, server) = rig.pair();
    rig.p.ep_post_recv(client.ep, &[buf.seg(0, 64)], 2, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_free(client.ep).unwrap();
    rig.expect(server.conn, EventNumber::ConnectionDisconnected);
    assert_eq!(rig.p.ep_get_status(client.ep).map(|s| s.0).unwrap_err().error_type(), ErrorType::InvalidHandle);

    // Disconnected.
    rig.p.ep_free(server.ep).unwrap();

    // Disconnect Pending.
    let (client, server) = rig.pair();
    rig.p.ep_disconnect(client.ep, CloseFlags::Graceful).unwrap();
    let freed_in = rig.state(client.ep);
    rig.p.ep_free(client.ep).unwrap();
    rig.expect(server.conn, EventNumber::ConnectionDisconnected);
    rig.p.ep_free(server.ep).unwrap();
    assert!(matches!(freed_in, EpState::DisconnectPending | EpState::Disconnected), "{freed_in:?}");

    // Completion Pending: accepted, freed before ESTABLISHED is taken.
    let (client, server) = (rig.side(), rig.side());
    let (psp, cr) = rig.request(client, PORT + 7, b"");
    rig.p.cr_accept(cr, server.ep, b"").unwrap();
    assert_eq!(rig.state(server.ep), EpState::CompletionPending);
    rig.p.ep_free(server.ep).unwrap();
    let e = rig.next(client.conn);
    assert!(
        matches!(
            e.number,
            EventNumber::ConnectionDisconnected
                | EventNumber::ConnectionEstablished
                | EventNumber::ConnectionNonPeerRejected
                | EventNumber::ConnectionUnreachable
        ),
        "{e:?}"
    );
    rig.p.ep_free(client.ep).unwrap();
    rig.p.psp_free(psp).unwrap();

    // Reserved: an RSP's EP may not be freed.
    let reserved = rig.side();
    let rsp = rig.p.rsp_create(rig.ia, PORT + 8, reserved.ep, rig.cr_evd).unwrap();
    assert_eq!(rig.p.ep_free(reserved.ep).unwrap_err().error_type(), ErrorType::InvalidState);
    rig.p.rsp_free(rsp).unwrap();
    rig.p.ep_free(reserved.ep).unwrap();
}

pub fn evd_wait_blocks_until_the_completion_and_honours_its_timeout<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = rig.pair();
    let dst = rig.buf(64, MemPriv::ALL);
    let src = rig.buf(64, MemPriv::ALL);
    // Nothing to wait for: the timeout expires.
    let start = Instant::now();
    let err = rig.p.evd_wait(server.dto, 200_000, 1).unwrap_err();
    assert_eq!(err.error_type(), ErrorType::TimeoutExpired);
    assert!(start.elapsed() >= Duration::from_millis(200), "woke after {:?}", start.elapsed());
    // Two receives, a threshold of 2: one wait returns both.
    rig.p.ep_post_recv(server.ep, &[dst.seg(0, 32)], 1, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_recv(server.ep, &[dst.seg(32, 32)], 2, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_request(client.ep, &[src.seg(0, 8)], 3, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_request(client.ep, &[src.seg(0, 8)], 4, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    let (first, more) = rig.p.evd_wait(server.dto, 20_000_000, 2).unwrap();
    assert!(matches!(first.data, EventData::Dto { cookie: 1, status: DtoStatus::Success, .. }), "{first:?}");
    assert_eq!(more, 1);
    assert_eq!(rig.dto(server.dto).0, 2);
}

/// A completion left in the transport for its EVD wakes a block once.
/// Afterwards a block sleeps its timeout: a thread waiting on another EVD
/// of the IA (for connection requests, say) must not spin on it, holding
/// up the thread whose EVD it is. The completion is still delivered.
pub fn a_completion_left_for_its_evd_wakes_a_block_once<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    let (client, server) = rig.pair();
    let dst = rig.buf(64, MemPriv::ALL);
    let src = rig.buf(64, MemPriv::ALL);
    rig.p.ep_post_recv(server.ep, &[dst.seg(0, 8)], 1, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_request(client.ep, &[src.seg(0, 8)], 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    // The send completes once the receiver has taken the message.
    assert_eq!(rig.dto(client.dto).0, 2);
    let quiet = (0..20).any(|_| rig.p.block(rig.ia, Some(50_000)).unwrap() == Wake::Timeout);
    assert!(quiet, "every block woke at once for a completion nobody took");
    let (cookie, status, len, _) = rig.dto(server.dto);
    assert_eq!((cookie, status, len), (1, DtoStatus::Success, 8));
}

/// The IB extension's operations move real bytes: an RDMA write with
/// immediate data lands and consumes the peer's receive, which carries the
/// data; compare-and-swap swaps only on a match; fetch-and-add adds. Each
/// atomic returns the old value.
pub fn immediate_data_and_atomics_reach_the_peer<F: Fabric>() {
    let mut rig = Rig::<F>::new();
    assert!(rig.attr.atomics, "the device reports no atomics");
    let (client, server) = rig.pair();
    let mut target = rig.buf(64, MemPriv(MemPriv::ALL.0 | MemPriv::REMOTE_ATOMIC.0));
    let mut src = rig.buf(64, MemPriv::ALL);
    let data = pattern(16, 3);
    src.mem[..16].copy_from_slice(&data);
    rig.p.ep_post_recv(server.ep, &[target.seg(48, 8)], 1, CompletionFlags::DEFAULT).unwrap();
    let remote = target.remote(0, 16);
    rig.p
        .ep_post_request(
            client.ep,
            &[src.seg(0, 16)],
            2,
            RequestOp::RdmaWriteImm { remote, imm: 0xabcd },
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    assert_eq!(rig.dto(client.dto), (2, DtoStatus::Success, 16, DtoOp::RdmaWriteImm));
    match rig.next(server.dto).data {
        EventData::Dto { cookie, status, transferred_length, op, imm, .. } => {
            assert_eq!(
                (cookie, status, transferred_length, op, imm),
                (1, DtoStatus::Success, 16, DtoOp::ReceiveImm, 0xabcd)
            );
        }
        other => panic!("expected the receive, got {other:?}"),
    }
    assert_eq!(target.mem[..16], data[..]);

    // Eight naturally aligned bytes of the target, and of the result.
    let word = |b: &Buf| 24 + (8 - b.mem.as_ptr() as usize % 8) % 8;
    let (t, r) = (word(&target), word(&src));
    target.mem[t..t + 8].copy_from_slice(&0x12345u64.to_ne_bytes());
    let at = target.remote(t, 8);
    let old = |src: &Buf| u64::from_ne_bytes(src.mem[r..r + 8].try_into().unwrap());
    let value = |target: &Buf| u64::from_ne_bytes(target.mem[t..t + 8].try_into().unwrap());
    rig.p
        .ep_post_request(
            client.ep,
            &[src.seg(r, 8)],
            3,
            RequestOp::CompareSwap { remote: at, compare: 0x1, swap: 0x2 },
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    assert_eq!(rig.dto(client.dto), (3, DtoStatus::Success, 8, DtoOp::CompareSwap));
    assert_eq!((old(&src), value(&target)), (0x12345, 0x12345), "no match, no swap");
    rig.p
        .ep_post_request(
            client.ep,
            &[src.seg(r, 8)],
            4,
            RequestOp::CompareSwap { remote: at, compare: 0x12345, swap: 0x98765 },
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    assert_eq!(rig.dto(client.dto), (4, DtoStatus::Success, 8, DtoOp::CompareSwap));
    assert_eq!((old(&src), value(&target)), (0x12345, 0x98765));
    rig.p
        .ep_post_request(
            client.ep,
            &[src.seg(r, 8)],
            5,
            RequestOp::FetchAdd { remote: at, add: 0x10 },
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    assert_eq!(rig.dto(client.dto), (5, DtoStatus::Success, 8, DtoOp::FetchAdd));
    assert_eq!((old(&src), value(&target)), (0x98765, 0x98775));
}

/// A CQ that overruns, as a ConnectX's does when its consumer falls
/// behind (soft-RoCE and the software HCA lose the completions that find
/// it full and raise a CQ error): eight EPs post 16 RDMA writes each to
/// one DTO EVD of qlen 1 that nobody dequeues. The async EVD hears
/// `DAT_ASYNC_ERROR_EVD_OVERFLOW` naming the EVD, once; every EP that
/// feeds the EVD is broken; every write posted completes exactly once
/// (from the CQ if the device wrote it there, else flushed); and another
/// connection and another IA of the provider carry on.
pub fn a_cq_overrun_is_evd_overflow_and_breaks_the_eps_that_feed_it<F: Fabric>() {
    const EPS: u64 = 8;
    const WRITES: u64 = 16;
    let mut rig = Rig::<F>::new();
    let bystander = rig.side();
    let bystander_server = rig.side();
    rig.connect(bystander, bystander_server, PORT + 13, b"", b"");
    let src = rig.buf(4096, MemPriv::ALL);
    let dst = rig.buf(4096, MemPriv::ALL);
    let shared = rig.p.evd_create(rig.ia, 1, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let recv = rig.p.evd_create(rig.ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let mut clients = Vec::new();
    for i in 0..EPS {
        let conn = rig.p.evd_create(rig.ia, 8, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
        let ep = rig.p.ep_create(rig.ia, rig.pz, recv, shared, conn, None).unwrap();
        let client = Side { ep, dto: shared, conn };
        let server = rig.side();
        rig.connect(client, server, PORT + 20 + i, b"", b"");
        clients.push(client);
    }
    let mut posted = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        for w in 0..WRITES {
            let cookie = (i as u64) << 8 | w;
            let write = rig.write(client.ep, src.seg(0, 64), cookie, dst.remote(0, 64));
            match write {
                Ok(()) => posted.push(cookie),
                Err(e) => assert_ne!(e.error_type(), ErrorType::InternalError, "write {cookie:#x}: {e:?}"),
            }
        }
    }
    if let Some(cq) = F::SMALLEST_CQ {
        assert!(posted.len() > cq, "the CQ of {cq} is overrun: {} posted", posted.len());
    }

    // The async EVD hears of the overflow, naming the EVD, with
    // DAT_EVD_OVERFLOW_ERROR (0).
    let async_evd = match rig.p.ia_query(rig.ia).unwrap().0 {
        AsyncEvdRef::Handle(evd) => evd,
        other => panic!("{other:?}"),
    };
    let e = rig.next(async_evd);
    assert_eq!(e.number, EventNumber::AsyncEvdOverflow, "{e:?}");
    assert!(matches!(e.data, EventData::AsyncError { handle: Some(h), reason: 0 } if h == shared.into()), "{e:?}");
    // Every EP feeding the EVD is broken.
    for client in &clients {
        rig.expect(client.conn, EventNumber::ConnectionBroken);
        assert_eq!(rig.state(client.ep), EpState::Disconnected);
    }
    // Every write posted completes exactly once: those the CQ held as the
    // device wrote them, every other one flushed.
    let mut completed = std::collections::BTreeMap::new();
    while completed.len() < posted.len() {
        let (cookie, status, _, _) = rig.dto(shared);
        assert!(matches!(status, DtoStatus::Success | DtoStatus::Flushed), "{cookie:#x}: {status:?}");
        assert!(completed.insert(cookie, status).is_none(), "{cookie:#x} completed twice");
    }
    posted.sort_unstable();
    assert_eq!(completed.keys().copied().collect::<Vec<_>>(), posted);
    assert!(completed.values().any(|s| *s == DtoStatus::Flushed), "the CQ lost completions: {completed:?}");
    let held = completed.values().filter(|s| **s == DtoStatus::Success).count();
    if let Some(cq) = F::SMALLEST_CQ {
        assert!(held <= cq, "{held} completions from a CQ of {cq}");
    }
    println!("{} writes: {held} from the CQ, {} flushed", posted.len(), posted.len() - held);
    std::thread::sleep(Duration::from_millis(50));
    assert!(rig.p.evd_dequeue(shared).is_err(), "a write completed twice");
    let later: Vec<Event> = std::iter::from_fn(|| rig.p.evd_dequeue(async_evd).ok()).collect();
    assert!(later.is_empty(), "one async event: then {later:?}");

    // The other connection of the IA carries on.
    rig.write(bystander.ep, src.seg(0, 64), 7, dst.remote(0, 64)).unwrap();
    assert_eq!(rig.dto(bystander.dto), (7, DtoStatus::Success, 64, DtoOp::RdmaWrite));
    // And so does another IA of the provider.
    let (ia, _) = rig.p.ia_open(F::device().as_bytes(), AsyncEvd::Create { min_qlen: 8 }).unwrap();
    let pz = rig.p.pz_create(ia).unwrap();
    let evd = rig.p.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let ep = rig.p.ep_create(ia, pz, evd, evd, EvdHandle::NULL, None).unwrap();
    rig.p.ep_free(ep).unwrap();
    rig.p.evd_free(evd).unwrap();
    rig.p.pz_free(pz).unwrap();
    rig.p.ia_close(ia, CloseFlags::Graceful).unwrap();
    // The EVD that overran is freed like any other once its EPs are.
    for client in clients {
        rig.p.ep_free(client.ep).unwrap();
    }
    rig.p.evd_free(shared).unwrap();
}

/// One `#[test]` per suite test, on the fabric `$fabric`.
#[macro_export]
macro_rules! transport_suite {
    ($fabric:ty) => {
        #[test]
        fn connect_accept_carry_private_data_both_ways() {
            $crate::suite::connect_accept_carry_private_data_both_ways::<$fabric>();
        }
        #[test]
        fn reject_carries_private_data_to_the_active_side() {
            $crate::suite::reject_carries_private_data_to_the_active_side::<$fabric>();
        }
        #[test]
        fn connect_to_a_port_nobody_listens_on_is_rejected_by_the_transport() {
            $crate::suite::connect_to_a_port_nobody_listens_on_is_rejected_by_the_transport::<$fabric>();
        }
        #[test]
        fn connect_that_outlives_its_timeout_times_out() {
            $crate::suite::connect_that_outlives_its_timeout_times_out::<$fabric>();
        }
        #[test]
        fn send_receive_write_and_read_move_the_bytes() {
            $crate::suite::send_receive_write_and_read_move_the_bytes::<$fabric>();
        }
        #[test]
        fn zero_byte_and_multi_segment_posts() {
            $crate::suite::zero_byte_and_multi_segment_posts::<$fabric>();
        }
        #[test]
        fn the_largest_message_the_device_allows() {
            $crate::suite::the_largest_message_the_device_allows::<$fabric>();
        }
        #[test]
        fn suppressed_completions_retire_with_the_next_signalled_one() {
            $crate::suite::suppressed_completions_retire_with_the_next_signalled_one::<$fabric>();
        }
        #[test]
        fn polling_an_empty_evd_misses_no_completion_after_it() {
            $crate::suite::polling_an_empty_evd_misses_no_completion_after_it::<$fabric>();
        }
        #[test]
        fn one_evd_takes_signalled_receives_and_unsignalled_requests() {
            $crate::suite::one_evd_takes_signalled_receives_and_unsignalled_requests::<$fabric>();
        }
        #[test]
        fn disconnect_with_dtos_in_flight_completes_each_exactly_once_in_order() {
            $crate::suite::disconnect_with_dtos_in_flight_completes_each_exactly_once_in_order::<$fabric>();
        }
        #[test]
        fn a_peer_disconnect_flushes_the_receives_of_a_consumer_that_only_dequeues() {
            $crate::suite::a_peer_disconnect_flushes_the_receives_of_a_consumer_that_only_dequeues::<$fabric>();
        }
        #[test]
        fn dtos_posted_in_disconnected_complete_flushed_at_once() {
            $crate::suite::dtos_posted_in_disconnected_complete_flushed_at_once::<$fabric>();
        }
        #[test]
        fn graceful_disconnect_reaches_both_sides_and_the_ep_can_be_reused() {
            $crate::suite::graceful_disconnect_reaches_both_sides_and_the_ep_can_be_reused::<$fabric>();
        }
        #[test]
        fn remote_access_to_a_freed_lmr_fails_and_breaks_the_connection() {
            $crate::suite::remote_access_to_a_freed_lmr_fails_and_breaks_the_connection::<$fabric>();
        }
        #[test]
        fn remote_write_without_the_remote_write_privilege_fails() {
            $crate::suite::remote_write_without_the_remote_write_privilege_fails::<$fabric>();
        }
        #[test]
        fn an_lmr_without_remote_privileges_has_no_rmr_context() {
            $crate::suite::an_lmr_without_remote_privileges_has_no_rmr_context::<$fabric>();
        }
        #[test]
        fn rmr_bind_grants_remote_access_and_rmr_free_revokes_it() {
            $crate::suite::rmr_bind_grants_remote_access_and_rmr_free_revokes_it::<$fabric>();
        }
        #[test]
        fn rmr_rebind_moves_the_window_and_retires_the_old_context() {
            $crate::suite::rmr_rebind_moves_the_window_and_retires_the_old_context::<$fabric>();
        }
        #[test]
        fn a_send_with_invalidate_frees_the_window_bound_to_its_peer() {
            $crate::suite::a_send_with_invalidate_frees_the_window_bound_to_its_peer::<$fabric>();
        }
        #[test]
        fn a_send_with_invalidate_of_a_key_not_bound_to_the_peer_fails() {
            $crate::suite::a_send_with_invalidate_of_a_key_not_bound_to_the_peer_fails::<$fabric>();
        }
        #[test]
        fn a_window_of_an_ep_is_reached_over_its_connection_only() {
            $crate::suite::a_window_of_an_ep_is_reached_over_its_connection_only::<$fabric>();
        }
        #[test]
        fn a_window_of_an_ep_unbinds_by_invalidation_and_binds_again() {
            $crate::suite::a_window_of_an_ep_unbinds_by_invalidation_and_binds_again::<$fabric>();
        }
        #[test]
        fn rdma_read_to_rmr_lands_in_the_memory_the_context_names() {
            $crate::suite::rdma_read_to_rmr_lands_in_the_memory_the_context_names::<$fabric>();
        }
        #[test]
        fn a_common_connect_reaches_a_common_service_point() {
            $crate::suite::a_common_connect_reaches_a_common_service_point::<$fabric>();
        }
        #[test]
        fn a_zero_length_rmr_bind_unbinds_the_window() {
            $crate::suite::a_zero_length_rmr_bind_unbinds_the_window::<$fabric>();
        }
        #[test]
        fn shared_receive_queue_feeds_two_endpoints() {
            $crate::suite::shared_receive_queue_feeds_two_endpoints::<$fabric>();
        }
        #[test]
        fn ep_free_in_every_state() {
            $crate::suite::ep_free_in_every_state::<$fabric>();
        }
        #[test]
        fn a_completion_left_for_its_evd_wakes_a_block_once() {
            $crate::suite::a_completion_left_for_its_evd_wakes_a_block_once::<$fabric>();
        }
        #[test]
        fn immediate_data_and_atomics_reach_the_peer() {
            $crate::suite::immediate_data_and_atomics_reach_the_peer::<$fabric>();
        }
        #[test]
        fn evd_wait_blocks_until_the_completion_and_honours_its_timeout() {
            $crate::suite::evd_wait_blocks_until_the_completion_and_honours_its_timeout::<$fabric>();
        }
        #[test]
        fn a_cq_overrun_is_evd_overflow_and_breaks_the_eps_that_feed_it() {
            $crate::suite::a_cq_overrun_is_evd_overflow_and_breaks_the_eps_that_feed_it::<$fabric>();
        }
        #[test]
        fn ud_endpoints_resolve_each_other_and_exchange_datagrams() {
            $crate::suite::ud_endpoints_resolve_each_other_and_exchange_datagrams::<$fabric>();
        }
    };
}
