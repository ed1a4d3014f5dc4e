//! A deterministic, scriptable backend for tests and benches.
//!
//! It keeps every posted work request in order and completes nothing by
//! itself: the test says which request completes and how
//! ([`MockBackend::complete_send`], [`MockBackend::complete_recv`]), which
//! connection events arrive ([`MockBackend::conn_event`],
//! [`MockBackend::incoming`]), and what time it is. A disconnected QP
//! flushes what it holds, in post order, as a real transport does; so does
//! a post to it. The clock only moves when a wait blocks: `block` jumps to
//! the next scheduled event or to the timeout.
//!
//! Fixed capacities, no allocation: it runs under Miri as the core does.

use heapless::Deque;

use udat_core::FixedVec;

use udat_core::backend::{
    AhAttr, Backend, CmEvent, Completion, ConnOutcome, ConnectionManager, Control, CqHead, Cqs, HoldsQp, PrivateData,
    QpConfig, QpType, Qps, Registration, RequestOp, SendWr, Sge, UdDest, UdPeer, Untaken, Wake,
};
use udat_core::error::{DatError, DatResult, ErrorType};
use udat_core::handle::{EpHandle, EvdHandle};
use udat_core::types::{CompletionFlags, DtoOp, DtoStatus, IaAddress, IaAttr, MemPriv, Qos, SrqAttr};

const QPS: usize = 32;
const CQS: usize = 32;
const CQ_DEPTH: usize = 64;
const WRS: usize = 32;
const CMS: usize = 16;
const SCHEDULED: usize = 8;
/// A connection event any device's channel carries.
const ANY_DEVICE: u32 = 0;

/// The IA name the mock opens; any other is `DAT_PROVIDER_NOT_FOUND`.
pub const MOCK_IA_NAME: &[u8] = b"mock0";

#[derive(Clone, Copy, Debug)]
struct PendingWr {
    cookie: u64,
    op: DtoOp,
    length: u32,
    flags: CompletionFlags,
}

#[derive(Debug, Default)]
struct MockQp {
    live: bool,
    tag: u64,
    send_cq: Option<u32>,
    recv_cq: Option<u32>,
    srq: Option<u32>,
    error: bool,
    sends: Deque<PendingWr, WRS>,
    recvs: Deque<PendingWr, WRS>,
    /// Suppressed successes not yet retired by a completion.
    suppressed: u32,
}

#[derive(Debug, Default)]
struct MockCq {
    live: bool,
    /// What its [`CmEvent::CqError`] carries.
    tag: u64,
    entries: Deque<Completion, CQ_DEPTH>,
    /// How many entries at the front only `cq_poll` takes: those a QP's
    /// reset found (`Backend::qp_reset`).
    held: usize,
    overflowed: bool,
}

/// Something that happens when the clock reaches its time.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Scheduled {
    /// A connection-manager event.
    Cm(CmEvent<u32>),
    /// The oldest pending send of the EP completes with this status.
    Send(EpHandle, DtoStatus),
    /// The oldest pending receive of the EP completes with this length.
    Recv(EpHandle, u32),
}

/// A listener the core opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MockListener {
    pub conn_qual: u64,
    pub tag: u64,
}

/// The mock transport.
#[derive(Debug)]
pub struct MockBackend {
    qps: [MockQp; QPS],
    cqs: [MockCq; CQS],
    srq_recvs: [Deque<PendingWr, WRS>; 4],
    srqs_live: [bool; 4],
    listeners: FixedVec<Option<MockListener>, 16>,
    /// Connection events, each with the device whose channel carries it
    /// ([`ANY_DEVICE`]: whichever is polled first).
    cm: Deque<(u32, CmEvent<u32>), CMS>,
    scheduled: FixedVec<(u64, Scheduled), SCHEDULED>,
    now_us: u64,
    next_key: u32,
    next_request: u32,
    /// Requests rejected, in order.
    pub rejected: FixedVec<u32, 16>,
    /// Requests accepted, in order, with the private data sent back.
    pub accepted: FixedVec<(u32, PrivateData), 16>,
    /// The last connect: remote qualifier and private data.
    pub last_connect: Option<(u64, PrivateData)>,
    /// The key the last send with invalidate named.
    pub invalidates: Option<u32>,
    /// Type 2 windows alloc'ed: `mw_alloc_for_ep` refuses when false, as a
    /// device without them does.
    pub type2_windows: bool,
    /// The transport's lanes decline every post, so that each post is the
    /// core's ordinary one: the twin the lane tests post through alone.
    pub no_lanes: bool,
    /// `qp_create` fails, as a device out of QPs does.
    pub refuse_qps: bool,
    /// The backend says whether a connection event waits
    /// (`Backend::cm_waiting`), as one whose connections progress on a
    /// thread of their own does; otherwise it cannot tell, and the core
    /// looks by the clock.
    pub tells_waiting: bool,
    /// Open devices, PDs, MRs, MWs: a leak shows as a count above zero.
    pub live_ias: u32,
    pub live_pds: u32,
    pub live_mrs: u32,
    pub live_mws: u32,
    /// Registrations made, released or not.
    pub registrations: u32,
    /// Device attributes `ia_open` reports.
    pub attr: IaAttr,
    /// Address handles made and not destroyed: a leak shows as a count
    /// above zero.
    pub live_ahs: u32,
    /// The address handle and destination of the last UD send.
    pub last_ud: Option<(u32, UdDest)>,
    /// Whether each QP made was UD, by QP.
    ud_qps: [bool; QPS],
}

impl Default for MockBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl MockBackend {
    /// A mock with generous limits.
    pub fn new() -> Self {
        let mut name = [0u8; 32];
        name[..MOCK_IA_NAME.len()].copy_from_slice(MOCK_IA_NAME);
        MockBackend {
            qps: core::array::from_fn(|_| MockQp::default()),
            cqs: core::array::from_fn(|_| MockCq::default()),
            srq_recvs: core::array::from_fn(|_| Deque::new()),
            srqs_live: [false; 4],
            listeners: FixedVec::new(),
            cm: Deque::new(),
            live_ahs: 0,
            last_ud: None,
            ud_qps: [false; QPS],
            scheduled: FixedVec::new(),
            now_us: 0,
            next_key: 0x100,
            next_request: 1,
            rejected: FixedVec::new(),
            accepted: FixedVec::new(),
            last_connect: None,
            invalidates: None,
            type2_windows: true,
            no_lanes: false,
            refuse_qps: false,
            tells_waiting: false,
            live_ias: 0,
            live_pds: 0,
            live_mrs: 0,
            registrations: 0,
            live_mws: 0,
            attr: IaAttr {
                adapter_name: name,
                vendor_name: name,
                hardware_version_major: 1,
                hardware_version_minor: 0,
                firmware_version_major: 1,
                firmware_version_minor: 0,
                ia_address: IaAddress {
                    bytes: [2, 0, 0, 0, 192, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                },
                max_eps: 1024,
                max_dto_per_ep: WRS as u32,
                max_rdma_read_per_ep_in: 16,
                max_rdma_read_per_ep_out: 16,
                max_evds: 1024,
                max_evd_qlen: 4096,
                max_iov_segments_per_dto: 8,
                max_lmrs: 1024,
                max_lmr_block_size: 1 << 40,
                max_lmr_virtual_address: u64::MAX,
                max_pzs: 1024,
                max_message_size: 1 << 30,
                max_rdma_size: 1 << 30,
                max_rmrs: 1024,
                max_srqs: 4,
                max_recv_per_srq: WRS as u32,
                max_private_data_size: 196,
                qos_supported: Qos::BEST_EFFORT,
                rmr_supported: true,
                srq_ep_pz_difference_supported: false,
                local_read_implied: false,
                atomics: true,
                ud: true,
            },
        }
    }

    fn qp_index(&self, ep: EpHandle) -> Option<usize> {
        let tag = ep.raw().to_bits();
        self.qps.iter().position(|q| q.live && q.tag == tag)
    }

    fn push_cq(&mut self, cq: Option<u32>, c: Completion) {
        if let Some(cq) = cq.and_then(|i| self.cqs.get_mut(i as usize)) {
            if cq.entries.push_back(c).is_err() {
                cq.overflowed = true;
            }
        }
    }

    /// Complete the oldest pending send-queue request of `ep` with `status`.
    /// A suppressed success produces no completion, as on a real
    /// transport. Returns false if nothing was pending.
    pub fn complete_send(&mut self, ep: EpHandle, status: DtoStatus) -> bool {
        let Some(i) = self.qp_index(ep) else { return false };
        let qp = &mut self.qps[i];
        let Some(wr) = qp.sends.pop_front() else { return false };
        if status == DtoStatus::Success && wr.flags.contains(CompletionFlags::SUPPRESS) {
            qp.suppressed += 1;
            return true;
        }
        let retired = 1 + core::mem::take(&mut qp.suppressed);
        let c = completion(qp.tag, &wr, status, retired);
        let cq = qp.send_cq;
        if status != DtoStatus::Success {
            qp.error = true;
        }
        self.push_cq(cq, c);
        if status != DtoStatus::Success {
            self.flush(i);
        }
        true
    }

    /// Complete the oldest pending receive of `ep` (its own or its SRQ's)
    /// as a message of `length` bytes; a message longer than the buffer
    /// completes with `DAT_DTO_ERR_LOCAL_LENGTH`.
    pub fn complete_recv(&mut self, ep: EpHandle, length: u32) -> bool {
        self.take_recv(ep, length, None)
    }

    /// Complete the oldest pending receive of `ep` as consumed by the
    /// peer's RDMA write with immediate data `imm` of `length` bytes. The
    /// bytes went to the write's target, so the buffer's size is moot.
    pub fn complete_recv_imm(&mut self, ep: EpHandle, length: u32, imm: u32) -> bool {
        self.take_recv(ep, length, Some(imm))
    }

    /// Complete the oldest pending receive of `ep` as a datagram of
    /// `length` bytes (its GRH included) from the QP `source_qpn`.
    pub fn complete_recv_ud(&mut self, ep: EpHandle, length: u32, source_qpn: u32) -> bool {
        let Some(i) = self.qp_index(ep) else { return false };
        let qp = &mut self.qps[i];
        let Some(mut wr) = qp.recvs.pop_front() else { return false };
        wr.length = length.min(wr.length);
        wr.op = DtoOp::ReceiveUd;
        let c = Completion { imm: source_qpn, ..completion(qp.tag, &wr, DtoStatus::Success, 1) };
        let cq = qp.recv_cq;
        self.push_cq(cq, c);
        true
    }

    /// A UD connection of `ep`'s QP with `peer` is up.
    pub fn ud_established(&mut self, ep: EpHandle, peer: UdPeer, passive: bool, private_data: &[u8]) {
        let private_data = PrivateData::from_slice(private_data).unwrap_or_default();
        let remote =
            IaAddress { bytes: [2, 0, 0, 0, 192, 0, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] };
        let event = CmEvent::UdEstablished { tag: ep.raw().to_bits(), peer, remote, passive, private_data };
        let _ = self.cm.push_back((ANY_DEVICE, event));
    }

    /// Whether `ep`'s QP was made UD.
    pub fn is_ud(&self, ep: EpHandle) -> bool {
        self.qp_index(ep).is_some_and(|i| self.ud_qps[i])
    }

    /// Complete the oldest pending receive of `ep` as consumed by the
    /// peer's send with invalidate of `rkey`, `length` bytes.
    pub fn complete_recv_invalidate(&mut self, ep: EpHandle, length: u32, rkey: u32) -> bool {
        let Some(i) = self.qp_index(ep) else { return false };
        let qp = &mut self.qps[i];
        let Some(mut wr) = qp.recvs.pop_front() else { return false };
        wr.length = length.min(wr.length);
        wr.op = DtoOp::ReceiveWithInvalidate;
        let c = Completion { imm: rkey, ..completion(qp.tag, &wr, DtoStatus::Success, 1) };
        let cq = qp.recv_cq;
        self.push_cq(cq, c);
        true
    }

    fn take_recv(&mut self, ep: EpHandle, length: u32, imm: Option<u32>) -> bool {
        let Some(i) = self.qp_index(ep) else { return false };
        let qp = &mut self.qps[i];
        let wr = match qp.srq {
            Some(s) => self.srq_recvs.get_mut(s as usize).and_then(|q| q.pop_front()),
            None => qp.recvs.pop_front(),
        };
        let Some(mut wr) = wr else { return false };
        let status = if imm.is_none() && length > wr.length { DtoStatus::LocalLength } else { DtoStatus::Success };
        wr.length = if imm.is_some() { length } else { length.min(wr.length) };
        if imm.is_some() {
            wr.op = DtoOp::ReceiveImm;
        }
        let c = Completion { imm: imm.unwrap_or(0), ..completion(qp.tag, &wr, status, 1) };
        let cq = qp.recv_cq;
        self.push_cq(cq, c);
        true
    }

    fn flush(&mut self, i: usize) {
        let qp = &mut self.qps[i];
        qp.error = true;
        let mut out: FixedVec<(Option<u32>, Completion), { 2 * WRS }> = FixedVec::new();
        let mut retired = 1 + core::mem::take(&mut qp.suppressed);
        while let Some(wr) = qp.sends.pop_front() {
            let _ = out.push((qp.send_cq, completion(qp.tag, &wr, DtoStatus::Flushed, retired)));
            retired = 1;
        }
        if qp.srq.is_none() {
            while let Some(wr) = qp.recvs.pop_front() {
                let _ = out.push((qp.recv_cq, completion(qp.tag, &wr, DtoStatus::Flushed, 1)));
            }
        }
        for (cq, c) in out {
            self.push_cq(cq, c);
        }
    }

    /// Requests waiting on `ep`'s send queue.
    pub fn pending_sends(&self, ep: EpHandle) -> usize {
        self.qp_index(ep).map_or(0, |i| self.qps[i].sends.len())
    }

    /// Receives waiting on `ep`'s receive queue.
    pub fn pending_recvs(&self, ep: EpHandle) -> usize {
        self.qp_index(ep).map_or(0, |i| self.qps[i].recvs.len())
    }

    /// Whether `ep` has a QP (and it is in the error state).
    pub fn qp_state(&self, ep: EpHandle) -> Option<bool> {
        self.qp_index(ep).map(|i| self.qps[i].error)
    }

    /// Completions waiting in CQs, over all of them.
    pub fn queued_completions(&self) -> usize {
        self.cqs.iter().map(|c| c.entries.len()).sum()
    }

    /// QPs alive.
    pub fn live_qps(&self) -> usize {
        self.qps.iter().filter(|q| q.live).count()
    }

    /// CQs alive.
    pub fn live_cqs(&self) -> usize {
        self.cqs.iter().filter(|q| q.live).count()
    }

    /// The listeners open now.
    pub fn listeners(&self) -> impl Iterator<Item = MockListener> + '_ {
        self.listeners.iter().flatten().copied()
    }

    /// A connection event for `ep`'s QP arrives.
    pub fn conn_event(&mut self, ep: EpHandle, outcome: ConnOutcome, private_data: &[u8]) {
        self.conn_event_on(ANY_DEVICE, ep, outcome, private_data);
    }

    /// A connection event for `ep`'s QP arrives on the channel of one
    /// device only: the `device`-th IA opened, counting from 1.
    pub fn conn_event_on(&mut self, device: u32, ep: EpHandle, outcome: ConnOutcome, private_data: &[u8]) {
        let private_data = PrivateData::from_slice(private_data).unwrap_or_default();
        let _ = self.cm.push_back((device, CmEvent::Conn { tag: ep.raw().to_bits(), outcome, private_data }));
    }

    /// A connection request arrives on `conn_qual`; returns its id, or
    /// `None` if nobody listens there.
    pub fn incoming(&mut self, conn_qual: u64, private_data: &[u8]) -> Option<u32> {
        self.request(conn_qual, private_data, false)
    }

    /// A UD connection request arrives on `conn_qual`, as [`MockBackend::incoming`].
    pub fn incoming_ud(&mut self, conn_qual: u64, private_data: &[u8]) -> Option<u32> {
        self.request(conn_qual, private_data, true)
    }

    fn request(&mut self, conn_qual: u64, private_data: &[u8], ud: bool) -> Option<u32> {
        let listener = self.listeners().find(|l| l.conn_qual == conn_qual)?;
        let id = self.next_request;
        self.next_request += 1;
        let private_data = PrivateData::from_slice(private_data).unwrap_or_default();
        let remote = IaAddress {
            bytes: [2, 0, 0x3d, 0xd4, 192, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        };
        let request =
            CmEvent::Request { listener: listener.tag, request: id, remote, remote_port: 15828, private_data, ud };
        self.cm.push_back((ANY_DEVICE, request)).ok()?;
        Some(id)
    }

    /// The device fails.
    pub fn catastrophe(&mut self) {
        let _ = self.cm.push_back((ANY_DEVICE, CmEvent::Catastrophic));
    }

    /// `ep`'s QP fails on its own (a QP fatal or access error).
    pub fn qp_error(&mut self, ep: EpHandle) {
        let _ = self.cm.push_back((ANY_DEVICE, CmEvent::QpError { tag: ep.raw().to_bits() }));
    }

    /// The CQ of `evd` overruns: the device reports a CQ error. Returns
    /// false if the EVD has no live CQ.
    pub fn cq_error(&mut self, evd: EvdHandle) -> bool {
        let tag = evd.raw().to_bits();
        let Some(cq) = self.cqs.iter_mut().find(|c| c.live && c.tag == tag) else { return false };
        cq.overflowed = true;
        self.cm.push_back((ANY_DEVICE, CmEvent::CqError { tag })).is_ok()
    }

    /// The port goes down.
    pub fn port_down(&mut self) {
        let _ = self.cm.push_back((ANY_DEVICE, CmEvent::PortDown));
    }

    /// Make `what` happen when the clock reaches `at_us`.
    pub fn schedule(&mut self, at_us: u64, what: Scheduled) -> bool {
        self.scheduled.push((at_us, what)).is_ok()
    }

    /// The clock.
    pub fn clock(&self) -> u64 {
        self.now_us
    }

    /// Move the clock on by `us`.
    pub fn advance(&mut self, us: u64) {
        self.now_us = self.now_us.saturating_add(us);
    }

    fn run_due(&mut self) {
        while let Some(pos) = self.scheduled.iter().position(|(at, _)| *at <= self.now_us) {
            let (_, what) = self.scheduled.swap_remove(pos);
            match what {
                Scheduled::Cm(e) => {
                    let _ = self.cm.push_back((ANY_DEVICE, e));
                }
                Scheduled::Send(ep, status) => {
                    self.complete_send(ep, status);
                }
                Scheduled::Recv(ep, len) => {
                    self.complete_recv(ep, len);
                }
            }
        }
    }

    fn free_slot<T>(slots: &mut [T], live: impl Fn(&T) -> bool) -> DatResult<usize> {
        slots.iter().position(|s| !live(s)).ok_or(DatError::of(ErrorType::InsufficientResources))
    }

    fn key(&mut self) -> u32 {
        self.next_key += 1;
        self.next_key
    }
}

fn completion(tag: u64, wr: &PendingWr, status: DtoStatus, retired: u32) -> Completion {
    Completion {
        tag,
        cookie: wr.cookie,
        status,
        op: wr.op,
        transferred_length: wr.length,
        imm: 0,
        retired,
        notify: !wr.flags.contains(CompletionFlags::UNSIGNALLED),
    }
}

fn total(sges: &[Sge]) -> u32 {
    sges.iter().map(|s| s.length).fold(0u32, u32::saturating_add)
}

impl ConnectionManager for MockBackend {
    type Ia = u32;
    type Qp = u32;
    type Listener = u32;
    type ConnReq = u32;

    fn listen(&mut self, _ia: &mut u32, conn_qual: u64, tag: u64) -> DatResult<u32> {
        if self.listeners().any(|l| l.conn_qual == conn_qual) {
            return Err(DatError::of(ErrorType::ConnQualInUse));
        }
        let l = Some(MockListener { conn_qual, tag });
        match self.listeners.iter().position(Option::is_none) {
            Some(i) => {
                self.listeners[i] = l;
                Ok(i as u32)
            }
            None => {
                self.listeners.push(l).map_err(|_| DatError::of(ErrorType::InsufficientResources))?;
                Ok(self.listeners.len() as u32 - 1)
            }
        }
    }

    fn unlisten(&mut self, listener: u32) {
        if let Some(l) = self.listeners.get_mut(listener as usize) {
            *l = None;
        }
    }

    fn connect(
        &mut self,
        qp: &mut u32,
        _remote: &IaAddress,
        conn_qual: u64,
        private_data: &[u8],
        _timeout_us: Option<u64>,
    ) -> DatResult<()> {
        self.qps.get_mut(*qp as usize).ok_or(DatError::of(ErrorType::InternalError))?.error = false;
        self.last_connect = Some((conn_qual, PrivateData::from_slice(private_data).unwrap_or_default()));
        Ok(())
    }

    fn accept(&mut self, request: &mut u32, _qp: &mut u32, private_data: &[u8]) -> DatResult<()> {
        let pd = PrivateData::from_slice(private_data).unwrap_or_default();
        self.accepted.push((*request, pd)).map_err(|_| DatError::of(ErrorType::InsufficientResources))
    }

    fn reject(&mut self, request: u32, _private_data: &[u8]) {
        let _ = self.rejected.push(request);
    }

    fn disconnect(&mut self, qp: &mut u32, graceful: bool) {
        let i = *qp as usize;
        let Some(q) = self.qps.get(i) else { return };
        if graceful {
            let tag = q.tag;
            let event = CmEvent::Conn { tag, outcome: ConnOutcome::Disconnected, private_data: PrivateData::new() };
            let _ = self.cm.push_back((ANY_DEVICE, event));
        } else {
            self.flush(i);
        }
    }

    fn poll_cm(&mut self, ia: &mut u32) -> Option<CmEvent<u32>> {
        self.run_due();
        // The first event this device's channel carries; the others keep
        // their order.
        let mut found = None;
        for _ in 0..self.cm.len() {
            let (device, event) = self.cm.pop_front()?;
            if found.is_none() && (device == ANY_DEVICE || device == *ia) {
                found = Some(event);
            } else {
                let _ = self.cm.push_back((device, event));
            }
        }
        found
    }
}

impl Control for MockBackend {
    type Ia = u32;
    type Pd = u32;
    type Mr = u32;

    fn ia_open(&mut self, name: &[u8]) -> DatResult<(u32, IaAttr)> {
        if name != MOCK_IA_NAME {
            return Err(DatError::of(ErrorType::ProviderNotFound));
        }
        self.live_ias += 1;
        Ok((self.live_ias, self.attr))
    }

    fn ia_close(&mut self, _ia: u32) {
        self.live_ias -= 1;
    }

    fn pd_alloc(&mut self, _ia: &mut u32) -> DatResult<u32> {
        self.live_pds += 1;
        Ok(self.key())
    }

    fn pd_free(&mut self, _pd: u32) {
        self.live_pds -= 1;
    }

    fn mr_register(&mut self, _pd: &u32, address: u64, length: u64, _p: MemPriv) -> DatResult<Registration<u32>> {
        self.live_mrs += 1;
        self.registrations += 1;
        let key = self.key();
        Ok(Registration { mr: key, lkey: key, rkey: key | 0x8000_0000, address, length })
    }

    fn mr_deregister(&mut self, _mr: u32) {
        self.live_mrs -= 1;
    }
}

impl Backend for MockBackend {
    type Ia = u32;
    type Pd = u32;
    type Mr = u32;
    type Mw = u32;
    type Cq = u32;
    type Qp = u32;
    /// A request kept is the request: its post is the lane's.
    type Kept = Option<(RequestOp, Sge, CompletionFlags)>;
    type Srq = u32;
    type Ah = u32;
    type Cm = Self;
    type Control = Self;

    fn cm(&mut self) -> &mut Self {
        self
    }

    fn cm_qp(qp: &mut u32) -> &mut u32 {
        qp
    }

    fn control(&mut self) -> &mut Self {
        self
    }

    fn mw_alloc(&mut self, _pd: &u32) -> DatResult<u32> {
        self.live_mws += 1;
        Ok(self.key())
    }

    fn mw_alloc_for_ep(&mut self, _pd: &u32) -> DatResult<u32> {
        if !self.type2_windows {
            return Err(DatError::of(ErrorType::ModelNotSupported));
        }
        self.live_mws += 1;
        Ok(self.key())
    }

    fn mw_free(&mut self, _mw: u32) {
        self.live_mws -= 1;
    }

    fn cq_create(&mut self, _ia: &mut u32, min_entries: u32, tag: u64) -> DatResult<u32> {
        let _ = min_entries;
        let i = Self::free_slot(&mut self.cqs, |c| c.live)?;
        self.cqs[i] = MockCq { live: true, tag, ..MockCq::default() };
        Ok(i as u32)
    }

    fn cq_resize(&mut self, _cq: &mut u32, _min: u32) -> DatResult<()> {
        Ok(())
    }

    fn cq_destroy(&mut self, cq: u32) {
        if let Some(c) = self.cqs.get_mut(cq as usize) {
            *c = MockCq::default();
        }
    }

    fn cq_poll(&mut self, cq: &mut u32, _qps: &mut impl Qps<u32>, out: &mut [Completion]) -> usize {
        self.run_due();
        let Some(cq) = self.cqs.get_mut(*cq as usize) else { return 0 };
        let mut n = 0;
        for slot in out.iter_mut() {
            match cq.entries.pop_front() {
                Some(c) => {
                    *slot = c;
                    n += 1;
                    cq.held = cq.held.saturating_sub(1);
                }
                None => break,
            }
        }
        n
    }

    fn qp_create(&mut self, config: &QpConfig<'_, Self>, tag: u64) -> DatResult<u32> {
        if self.refuse_qps {
            return Err(DatError::of(ErrorType::InsufficientResources));
        }
        let i = Self::free_slot(&mut self.qps, |q| q.live)?;
        self.qps[i] = MockQp {
            live: true,
            tag,
            send_cq: config.send_cq.copied(),
            recv_cq: config.recv_cq.copied(),
            srq: config.srq.copied(),
            ..MockQp::default()
        };
        self.ud_qps[i] = config.qp_type == QpType::Ud;
        Ok(i as u32)
    }

    fn ah_create(&mut self, _pd: &u32, _attr: &AhAttr) -> DatResult<u32> {
        self.live_ahs += 1;
        Ok(self.key())
    }

    fn ah_destroy(&mut self, _ah: u32) {
        self.live_ahs -= 1;
    }

    fn post_send_ud(&mut self, qp: &mut u32, ah: &u32, dest: UdDest, wr: &SendWr<'_>) -> DatResult<()> {
        if !self.ud_qps.get(*qp as usize).copied().unwrap_or(false) {
            return Err(DatError::of(ErrorType::InternalError));
        }
        self.post_send(qp, wr)?;
        if let Some(last) = self.qps.get_mut(*qp as usize).and_then(|q| q.sends.back_mut()) {
            last.op = DtoOp::SendUd;
        }
        self.last_ud = Some((*ah, dest));
        Ok(())
    }

    fn qp_destroy(&mut self, qp: u32, _: &mut impl Cqs<Self::Cq>) {
        if let Some(q) = self.qps.get_mut(qp as usize) {
            *q = MockQp::default();
        }
    }

    fn qp_reset(&mut self, qp: &mut u32, _: &mut impl Cqs<Self::Cq>) -> DatResult<()> {
        let q = self.qps.get_mut(*qp as usize).ok_or(DatError::of(ErrorType::InternalError))?;
        q.error = false;
        q.sends.clear();
        q.recvs.clear();
        q.suppressed = 0;
        // What the QP completed before the reset is left to the poll.
        for cq in [q.send_cq, q.recv_cq].into_iter().flatten() {
            if let Some(cq) = self.cqs.get_mut(cq as usize) {
                cq.held = cq.entries.len();
            }
        }
        Ok(())
    }

    fn post_send(&mut self, qp: &mut u32, wr: &SendWr<'_>) -> DatResult<()> {
        let i = *qp as usize;
        let q = self.qps.get_mut(i).ok_or(DatError::of(ErrorType::InternalError))?;
        let op = match wr.op {
            RequestOp::Send => DtoOp::Send,
            RequestOp::SendInvalidate { rkey } => {
                self.invalidates = Some(rkey);
                DtoOp::Send
            }
            RequestOp::RdmaWrite { .. } => DtoOp::RdmaWrite,
            RequestOp::RdmaRead { .. } => DtoOp::RdmaRead,
            RequestOp::RdmaWriteImm { .. } => DtoOp::RdmaWriteImm,
            RequestOp::CompareSwap { .. } => DtoOp::CompareSwap,
            RequestOp::FetchAdd { .. } => DtoOp::FetchAdd,
        };
        let pending = PendingWr { cookie: wr.cookie, op, length: wr.length, flags: wr.flags };
        q.sends.push_back(pending).map_err(|_| DatError::of(ErrorType::InsufficientResources))?;
        if q.error {
            self.flush(i);
        }
        Ok(())
    }

    /// The lane is the ordinary post, which leaves no trace when it fails.
    fn post_one(&mut self, qp: &mut u32, op: RequestOp, sge: Sge, cookie: u64, flags: CompletionFlags) -> bool {
        if self.no_lanes {
            return false;
        }
        let sges = core::slice::from_ref(&sge);
        self.post_send(qp, &SendWr { op, sges, length: sge.length, cookie, flags }).is_ok()
    }

    /// Kept as it is, where lanes are open.
    fn keep_one(&self, _qp: &u32, op: RequestOp, sge: Sge, flags: CompletionFlags) -> Option<Self::Kept> {
        (!self.no_lanes).then_some(Some((op, sge, flags)))
    }

    /// The lane's post of the kept request.
    fn post_kept(&mut self, qp: &mut u32, kept: &Self::Kept, cookie: u64) -> bool {
        kept.is_some_and(|(op, sge, flags)| self.post_one(qp, op, sge, cookie, flags))
    }

    /// The lane is the ordinary post, which leaves no trace when it fails.
    fn post_recv_one(&mut self, qp: &mut u32, sge: Sge, cookie: u64) -> bool {
        if self.no_lanes {
            return false;
        }
        self.post_recv(qp, core::slice::from_ref(&sge), cookie).is_ok()
    }

    /// The next completion, taken only if `accept` takes it.
    /// Shows `accept` what a transport's lane shows (a DTO's success) and
    /// leaves the rest to `cq_poll`.
    fn cq_lane<G: HoldsQp<u32>>(
        &mut self,
        cq: &mut u32,
        accept: impl FnOnce(CqHead) -> Option<G>,
    ) -> Result<(Completion, G), Untaken> {
        self.run_due();
        let cq = self.cqs.get_mut(*cq as usize).ok_or(Untaken::Declined)?;
        let c = *cq.entries.front().ok_or(Untaken::Empty)?;
        if c.status != DtoStatus::Success || c.op == DtoOp::BindMw || cq.held != 0 {
            return Err(Untaken::Declined);
        }
        let accepted = accept(CqHead::new(c.tag, c.op.is_recv())).ok_or(Untaken::Declined)?;
        cq.entries.pop_front();
        Ok((c, accepted))
    }

    /// Takes nothing: says whether the CQ is empty, with nothing due to
    /// complete into it, and leaves every completion to the exclusive
    /// dequeue.
    #[allow(unsafe_code)]
    unsafe fn cq_take_shared<G: HoldsQp<u32>>(
        &self,
        cq: &mut u32,
        _admit: impl FnOnce(CqHead) -> Option<G>,
    ) -> Result<(Completion, G), Untaken> {
        let due = self.scheduled.iter().any(|(at, _)| *at <= self.now_us);
        match self.cqs.get(*cq as usize) {
            Some(cq) if cq.entries.is_empty() && !due => Err(Untaken::Empty),
            _ => Err(Untaken::Declined),
        }
    }

    fn post_recv(&mut self, qp: &mut u32, sges: &[Sge], cookie: u64) -> DatResult<()> {
        let i = *qp as usize;
        let q = self.qps.get_mut(i).ok_or(DatError::of(ErrorType::InternalError))?;
        let pending = PendingWr { cookie, op: DtoOp::Receive, length: total(sges), flags: CompletionFlags::DEFAULT };
        q.recvs.push_back(pending).map_err(|_| DatError::of(ErrorType::InsufficientResources))?;
        if q.error {
            self.flush(i);
        }
        Ok(())
    }

    fn post_bind(
        &mut self,
        qp: &mut u32,
        _mw: &mut u32,
        _mr: Option<&u32>,
        sge: Sge,
        _privileges: MemPriv,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<u32> {
        let i = *qp as usize;
        let key = self.key();
        let q = self.qps.get_mut(i).ok_or(DatError::of(ErrorType::InternalError))?;
        let pending = PendingWr { cookie, op: DtoOp::BindMw, length: sge.length, flags };
        q.sends.push_back(pending).map_err(|_| DatError::of(ErrorType::InsufficientResources))?;
        if q.error {
            self.flush(i);
        }
        Ok(key)
    }

    fn srq_create(&mut self, _pd: &u32, _attr: &SrqAttr) -> DatResult<u32> {
        let i = Self::free_slot(&mut self.srqs_live, |l| *l)?;
        self.srqs_live[i] = true;
        self.srq_recvs[i].clear();
        Ok(i as u32)
    }

    fn srq_resize(&mut self, _srq: &mut u32, _max: u32) -> DatResult<()> {
        Ok(())
    }

    fn srq_destroy(&mut self, srq: u32) {
        if let Some(l) = self.srqs_live.get_mut(srq as usize) {
            *l = false;
        }
    }

    fn srq_post_recv(&mut self, srq: &mut u32, sges: &[Sge], cookie: u64) -> DatResult<()> {
        let q = self.srq_recvs.get_mut(*srq as usize).ok_or(DatError::of(ErrorType::InternalError))?;
        let pending = PendingWr { cookie, op: DtoOp::Receive, length: total(sges), flags: CompletionFlags::DEFAULT };
        q.push_back(pending).map_err(|_| DatError::of(ErrorType::InsufficientResources))
    }

    /// The lane is the ordinary post, which leaves no trace when it fails.
    fn srq_post_recv_one(&mut self, srq: &mut u32, sge: Sge, cookie: u64) -> bool {
        if self.no_lanes {
            return false;
        }
        self.srq_post_recv(srq, core::slice::from_ref(&sge), cookie).is_ok()
    }

    fn now_us(&mut self) -> u64 {
        self.now_us
    }

    fn cm_waiting(&self, ia: &u32) -> Option<bool> {
        let due = self.scheduled.iter().any(|(at, _)| *at <= self.now_us);
        let queued = self.cm.iter().any(|(device, _)| *device == ANY_DEVICE || device == ia);
        self.tells_waiting.then_some(due || queued)
    }

    fn block(&mut self, _ia: &mut u32, _: &mut impl Cqs<Self::Cq>, timeout_us: Option<u64>) -> Wake {
        let next = self.scheduled.iter().map(|(at, _)| *at).min();
        let limit = timeout_us.map(|t| self.now_us.saturating_add(t));
        match (next, limit) {
            (Some(at), Some(end)) if at > end => {
                self.now_us = end;
                Wake::Timeout
            }
            (Some(at), _) => {
                self.now_us = self.now_us.max(at);
                self.run_due();
                Wake::Activity
            }
            (None, Some(end)) => {
                self.now_us = end;
                Wake::Timeout
            }
            // Nothing will ever happen: a real wait would hang; the mock
            // reports an interruption instead.
            (None, None) => Wake::Interrupted,
        }
    }
}
