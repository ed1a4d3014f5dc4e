//! The HCA: queues, keys, WQE execution and CQE writing.
//!
//! It reads only what a ConnectX reads — the doorbell record, the WQEs in
//! the rings, the register writes — and parses them with its own code
//! from the PRM's layouts, never with the data path's. Each doorbell is
//! checked: the record names the index after the last WQE, every WQE's
//! control segment carries its own index and the QP's number, an 8-byte
//! doorbell repeats the last WQE's first control bytes, a BlueFlame copy
//! repeats the whole WQE, and the BlueFlame halves alternate. A broken
//! rule is a bug in the data path: the software HCA panics and says which. A CQ
//! its consumer let fill up is no such bug: it overruns as a ConnectX's
//! does, with a CQ error event.
//!
//! # Locks
//!
//! Doorbells on different QPs run at once, as on a ConnectX, whose QPs
//! are served in parallel. The tables of the [`Hca`] — which objects
//! live, a registration's range, which QP is whose peer — change only
//! under the device's write lock, which the control path takes; a
//! doorbell, a poll for events and a release take its read lock, and what
//! executing WQEs changes has a lock for each object: a QP's queue state,
//! a CQ's ring, an SRQ's next receive, a window's binding, an IA's event
//! queues. A thread takes them in this order only, so none waits for a
//! lock held by a thread that waits for one of its own:
//!
//! 1. the device's lock, read or write, once for each entry;
//! 2. QP locks, at most two, in ascending QP number: a QP's and its
//!    peer's, whose memory, receives and CQs a WQE reaches;
//! 3. a CQ's lock;
//! 4. an IA's event queues;
//! 5. the connect timers.
//!
//! The busy set's, an SRQ's, a window's, the overrun list's and the
//! atomics' locks are leaves: nothing is taken while one is held. A CQ
//! that overruns breaks every QP that reports to it, which a thread
//! holding a QP's lock may not lock; so the CQ goes on the overrun list,
//! and the entry breaks its QPs once it holds no QP's lock
//! ([`Hca::break_overrun_qps`]), before it leaves the device. A QP run meanwhile
//! finds its CQ on the list and breaks itself.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Instant;

use udat_core::backend::{CmEvent, ConnOutcome, PrivateData};
use udat_core::types::{IaAddress, MemPriv};

use crate::alarm::AlarmFds;
use crate::region::{self, Region};
use crate::MAX_MESSAGE;

/// CQE opcodes (PRM "Completion Queue Entry Format").
pub mod cqe_op {
    pub const REQ: u8 = 0;
    pub const RESP_WR_IMM: u8 = 1;
    pub const RESP_SEND: u8 = 2;
    pub const RESP_SEND_IMM: u8 = 3;
    pub const RESP_SEND_INV: u8 = 4;
    pub const REQ_ERR: u8 = 13;
    pub const RESP_ERR: u8 = 14;
    pub const INVALID: u8 = 15;
}

/// Error syndromes (PRM "Completion with Error").
pub mod syndrome {
    pub const LOCAL_LENGTH: u8 = 0x01;
    pub const LOCAL_QP_OP: u8 = 0x02;
    pub const LOCAL_PROT: u8 = 0x04;
    pub const MW_BIND: u8 = 0x06;
    pub const WR_FLUSH: u8 = 0x05;
    pub const REMOTE_INVAL_REQ: u8 = 0x12;
    pub const REMOTE_ACCESS: u8 = 0x13;
    pub const TRANSPORT_RETRY_EXC: u8 = 0x15;
}

const OP_SEND_INVAL: u8 = 0x01;
const OP_RDMA_WRITE: u8 = 0x08;
const OP_RDMA_WRITE_IMM: u8 = 0x09;
const OP_SEND: u8 = 0x0a;
const OP_SEND_IMM: u8 = 0x0b;
const OP_RDMA_READ: u8 = 0x10;
const OP_ATOMIC_CS: u8 = 0x11;
const OP_ATOMIC_FA: u8 = 0x12;
const OP_UMR: u8 = 0x25;
const CQ_UPDATE: u8 = 0x08;
const SOLICITED: u8 = 0x02;
/// `fm_ce_se` fences: the initiator small fence and the full one.
const FENCES: u8 = 0x20 | 0x80;
const INLINE: u32 = 0x8000_0000;
const INVALID_LKEY: u32 = 0x100;
pub const BF_SIZE: usize = 256;
pub const CQ_DOORBELL: usize = 0x20;

/// Who a UAR page belongs to.
#[derive(Clone, Copy, Debug)]
pub enum UarOwner {
    Qp(u32),
    Cq(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    Init,
    Connecting,
    Rts,
    Error,
    /// The peer process is gone: nothing answers.
    Vanished,
}

#[derive(Debug)]
pub struct Mr {
    pub pd: u32,
    pub addr: u64,
    pub len: u64,
    pub access: MemPriv,
}

impl Mr {
    /// Whether `[addr, addr + len)` lies inside the registration. Computed
    /// from the offset into it, so a range that wraps past 2^64 is outside
    /// rather than an overflow.
    fn covers(&self, addr: u64, len: u64) -> bool {
        addr.checked_sub(self.addr).is_some_and(|offset| offset <= self.len && len <= self.len - offset)
    }
}

/// A memory window: an mkey of its own, bound by UMR WQEs. A type 2
/// window is bound to the QP whose UMR bound it: only that QP's
/// connection reaches it, it is bound only from the free state (IBA
/// o10-36.2.2), and the peer's send with invalidate frees it.
#[derive(Debug)]
pub struct Mw {
    pub pd: u32,
    pub type2: bool,
    pub binding: Mutex<Binding>,
}

/// What a window's last bind set.
#[derive(Debug, Default)]
pub struct Binding {
    /// The low 8 bits of its key; each bind sets them.
    pub key: u8,
    pub bound: Option<Window>,
    /// The QP a bound type 2 window is bound to.
    pub qp: Option<u32>,
}

/// What a bound window opens.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub addr: u64,
    pub len: u64,
    pub access: MemPriv,
}

#[derive(Debug)]
pub struct Cq {
    pub ia: u32,
    /// What its CQ error event carries.
    pub tag: u64,
    pub cnt: u32,
    pub dbrec: Region,
    pub ring: Mutex<CqRing>,
}

/// What writing CQEs changes, behind the CQ's lock.
#[derive(Debug)]
pub struct CqRing {
    /// The CQEs, written only under this lock.
    pub buf: Region,
    pub pi: u32,
    /// It overran: it takes no more CQEs (PRM "Completion Queue Error").
    pub error: bool,
    /// Armed at this consumer index; for solicited CQEs only.
    pub armed: Option<(u32, bool)>,
    /// CQEs written and arms taken.
    pub stats: Stats,
}

impl CqRing {
    pub fn new(buf: Region) -> CqRing {
        CqRing { buf, pi: 0, error: false, armed: None, stats: Stats::default() }
    }
}

#[derive(Debug)]
pub struct Qp {
    pub ia: u32,
    pub pd: u32,
    pub tag: u64,
    pub send_cq: Option<u32>,
    pub recv_cq: Option<u32>,
    pub srq: Option<u32>,
    pub sq: Region,
    pub sq_cnt: u32,
    pub rq: Option<(Region, u32, u32)>,
    pub dbrec: Region,
    /// Set and cleared under the device's write lock only, so that a
    /// doorbell knows, before it takes any, which QPs' locks it needs.
    pub peer: Option<u32>,
    /// An `IBV_QPT_UD` QP: ready to send from creation, its Q_Key
    /// `UD_QKEY`; a send names its destination in the WQE.
    pub ud: bool,
    pub run: Mutex<QpRun>,
}

/// What executing a QP's WQEs changes, behind the QP's lock.
#[derive(Debug)]
pub struct QpRun {
    pub state: QpState,
    /// The next WQE to execute.
    pub exec: u16,
    /// The doorbell record last checked: WQEs before it are published.
    pub seen: u16,
    /// The next receive WQE to consume.
    pub rq_next: u16,
    pub bf_next: usize,
    /// An injected fault: the next WQE fails with this syndrome.
    pub fail_next: Option<u8>,
    /// The last WQE rung was a UMR: the next must be fenced.
    pub after_umr: bool,
    /// Whether it is in the device's busy set.
    busy: bool,
    /// Doorbells and WQEs.
    pub stats: Stats,
}

impl Default for QpRun {
    fn default() -> QpRun {
        QpRun {
            state: QpState::Init,
            exec: 0,
            seen: 0,
            rq_next: 0,
            bf_next: 0,
            fail_next: None,
            after_umr: false,
            busy: false,
            stats: Stats::default(),
        }
    }
}

#[derive(Debug)]
pub struct Srq {
    pub pd: u32,
    pub buf: Region,
    pub stride: u32,
    pub dbrec: Region,
    pub next: Mutex<SrqNext>,
}

/// Where an SRQ's next receive is, behind the SRQ's lock: QPs on
/// different threads take from it.
#[derive(Debug, Default)]
pub struct SrqNext {
    pub head: u16,
    pub consumed: u16,
}

#[derive(Debug)]
pub struct Request {
    pub active: u32,
    /// A UD request: what the requester sent, for the accepting QP's
    /// event.
    pub ud: Option<PrivateData>,
}

#[derive(Debug, Default)]
pub struct Ia {
    pub address: IaAddress,
    pub events: Mutex<IaEvents>,
    /// The descriptors of the IA's [`crate::alarm::Alarm`].
    pub alarm: Option<AlarmFds>,
    /// Whether the alarm says events are queued, and when its timer was
    /// last set to fire, plus one (µs on the HCA's clock; 0, as created,
    /// for never): set again to the same, it costs no system call.
    pub armed: (AtomicBool, AtomicU64),
}

/// An IA's queued events.
#[derive(Debug, Default)]
pub struct IaEvents {
    pub cm: VecDeque<CmEvent<u32>>,
    pub cq_events: VecDeque<u32>,
}

/// What the HCA counted: doorbells by kind, WQEs, CQEs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub blueflame: u64,
    pub doorbells: u64,
    pub wqes: u64,
    pub cqes: u64,
    pub cq_arms: u64,
}

impl Stats {
    fn add(&mut self, other: &Stats) {
        self.blueflame += other.blueflame;
        self.doorbells += other.doorbells;
        self.wqes += other.wqes;
        self.cqes += other.cqes;
        self.cq_arms += other.cq_arms;
    }
}

/// A CQE to write.
#[derive(Clone, Copy, Debug, Default)]
struct CqeOut {
    opcode: u8,
    qpn: u32,
    wqe_counter: u16,
    byte_cnt: u32,
    imm: u32,
    srqn: u32,
    syndrome: u8,
    send_opcode: u8,
    solicited: bool,
    /// A UD receive: GRH present (bits 29–28 = 1, which rdma-core's
    /// `handle_responder` reports as `IBV_WC_GRH`), service level 0 (27–24)
    /// and the sender's QP (23–0, `wc->src_qp`). The other fields it reads
    /// of a UD receive stay 0, as on RoCE: `slid`, `ml_path`, and the
    /// P_Key index in `imm_inval_pkey`.
    flags_rqpn: u32,
}

/// Where a UD send goes, from its datagram segment.
#[derive(Clone, Copy, Debug)]
struct Dest {
    qkey: u32,
    dqpn: u32,
    tclass: u8,
    hop_limit: u8,
    flow_label: u32,
    rgid: [u8; 16],
}

/// A parsed send WQE.
#[derive(Debug)]
struct Wqe {
    opcode: u8,
    flags: u8,
    imm: u32,
    bbs: u16,
    remote: Option<(u64, u32)>,
    atomic: Option<(u64, u64)>,
    /// Gather or scatter list: (addr, len, lkey).
    data: Vec<(u64, u32, u32)>,
    inline: Option<Vec<u8>>,
    umr: Option<Umr>,
    /// A UD send's datagram segment.
    dest: Option<Dest>,
}

/// The segments of a UMR WQE that binds or frees a window (`mlx5dv.h`:
/// `mlx5_wqe_umr_ctrl_seg`, `mlx5_wqe_mkey_context_seg`,
/// `mlx5_wqe_umr_klm_seg`).
#[derive(Debug)]
struct Umr {
    /// The window's next key, its low 8 bits.
    key: u8,
    /// The QP the mkey context names: a type 2 window's bind names its
    /// own, anything else none.
    qp: Option<u32>,
    access: MemPriv,
    start: u64,
    len: u64,
    /// The registration under the window: (byte count, mkey, address).
    klm: Option<(u32, u32, u64)>,
}

impl Wqe {
    /// The bytes the data segments cover: past the largest message the
    /// device reports (`max_message_size`, `max_rdma_size`) a local length
    /// error (ibv_poll_cq(3), IBV_WC_LOC_LEN_ERR).
    fn data_len(&self) -> Result<usize, u8> {
        // At most 63 segments of under 2^32 bytes: the sum fits.
        let len: u64 = self.data.iter().map(|d| u64::from(d.1)).sum();
        if len > u64::from(MAX_MESSAGE) {
            return Err(syndrome::LOCAL_LENGTH);
        }
        Ok(len as usize)
    }
}

/// How one WQE went.
enum Outcome {
    Done(u32),
    /// Receiver not ready: retry later.
    Stall,
    Failed(u8),
}

#[derive(Debug)]
pub struct Hca {
    start: Instant,
    next_id: u32,
    pub ias: BTreeMap<u32, Ia>,
    pub mrs: BTreeMap<u32, Mr>,
    /// Memory windows by mkey index (the key less its low 8 bits).
    pub mws: BTreeMap<u32, Mw>,
    pub cqs: BTreeMap<u32, Cq>,
    pub qps: BTreeMap<u32, Qp>,
    pub srqs: BTreeMap<u32, Srq>,
    pub uars: BTreeMap<u32, UarOwner>,
    /// Live protection domains: nothing else keeps their numbers.
    pub pds: BTreeSet<u32>,
    /// (IA address, connection qualifier) → (IA, tag).
    pub listeners: BTreeMap<([u8; 28], u64), (u32, u64)>,
    pub requests: BTreeMap<u32, Request>,
    /// QP → (deadline µs, outcome) of a connect nobody answers.
    pub deadlines: Mutex<BTreeMap<u32, (u64, ConnOutcome)>>,
    /// What destroyed QPs and CQs counted.
    retired: Stats,
    /// QPs that may have work: WQEs rung but not yet executed, or an
    /// ERROR state whose receives are flushed as they are posted. Only
    /// these are run, so a device with thousands of idle QPs stays quick.
    /// A QP joins and leaves it under its own lock, which keeps
    /// [`QpRun`]'s `busy` in step with it: a doorbell whose WQEs all
    /// complete takes no lock of it.
    busy: Mutex<BTreeSet<u32>>,
    /// How many QPs are busy: set under the busy set's lock, read without,
    /// so that an entry takes that lock only when some QP is busy.
    busy_len: AtomicUsize,
    /// CQs that overran whose QPs are yet to break (see the module doc).
    overrun: Mutex<Vec<u32>>,
    /// Whether `overrun` may hold a CQ: set and cleared under its lock,
    /// read without, so that running a QP costs no lock while no CQ
    /// overruns.
    overran: AtomicBool,
    /// Held while an atomic WQE reads, changes and writes its target.
    atomics: Mutex<()>,
}

impl Default for Hca {
    fn default() -> Self {
        Hca {
            start: Instant::now(),
            next_id: 0x100,
            ias: BTreeMap::new(),
            mrs: BTreeMap::new(),
            mws: BTreeMap::new(),
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            srqs: BTreeMap::new(),
            uars: BTreeMap::new(),
            pds: BTreeSet::new(),
            listeners: BTreeMap::new(),
            requests: BTreeMap::new(),
            deadlines: Mutex::new(BTreeMap::new()),
            retired: Stats::default(),
            busy: Mutex::new(BTreeSet::new()),
            busy_len: AtomicUsize::new(0),
            overrun: Mutex::new(Vec::new()),
            overran: AtomicBool::new(false),
            atomics: Mutex::new(()),
        }
    }
}

/// One of the device's locks. A thread that panicked inside the software HCA
/// left what it held as it was at the panic, which the next entry takes
/// as it is: the software HCA checks every WQE it reads.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one of the device's locks guards, under the device's write lock
/// (no other thread can hold it).
pub fn owned<T>(m: &mut Mutex<T>) -> &mut T {
    m.get_mut().unwrap_or_else(PoisonError::into_inner)
}

/// A QP whose lock this thread holds.
struct Held<'a> {
    qpn: u32,
    qp: &'a Qp,
    run: MutexGuard<'a, QpRun>,
}

impl<'a> Held<'a> {
    fn new(qpn: u32, qp: &'a Qp) -> Held<'a> {
        Held { qpn, qp, run: lock(&qp.run) }
    }

    /// The QP's lock, unless another thread holds it.
    fn try_new(qpn: u32, qp: &'a Qp) -> Option<Held<'a>> {
        let run = match qp.run.try_lock() {
            Ok(run) => run,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(Held { qpn, qp, run })
    }
}

/// A WQE's bytes, read across the ring's end.
fn ring_read(ring: &Region, cnt: u32, index: u16, byte: usize, out: &mut [u8]) {
    let len = cnt as usize * 64;
    let start = usize::from(index) % cnt as usize * 64;
    for (i, b) in out.iter_mut().enumerate() {
        let mut one = [0u8];
        ring.read((start + byte + i) % len, &mut one);
        *b = one[0];
    }
}

/// Object numbers are 24 bits, as a ConnectX's QP, CQ, SRQ and mkey
/// indexes are (PRM: a WQE's control segment carries the QP number in 24
/// bits, an mkey is its 24-bit index and an 8-bit key).
const ID_MASK: u32 = 0x00ff_ffff;
/// The first number handed out, and the one after the last wraps to.
const FIRST_ID: u32 = 0x101;

impl Hca {
    /// A number no live object holds: the next in sequence, past the 24
    /// bits a ConnectX has back to the start, skipping those in use (a
    /// device reuses a destroyed QP's number, never a live one's).
    pub fn id(&mut self) -> u32 {
        loop {
            self.next_id = if self.next_id >= ID_MASK { FIRST_ID } else { self.next_id + 1 };
            if !self.in_use(self.next_id) {
                return self.next_id;
            }
        }
    }

    fn in_use(&self, id: u32) -> bool {
        self.ias.contains_key(&id)
            || self.mrs.contains_key(&(id << 8))
            || self.mws.contains_key(&id)
            || self.cqs.contains_key(&id)
            || self.qps.contains_key(&id)
            || self.srqs.contains_key(&id)
            || self.uars.contains_key(&id)
            || self.pds.contains(&id)
            || self.requests.contains_key(&id)
    }

    pub fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// Set `ia`'s alarm: readable while it has events queued, and its
    /// timer at its earliest connect timer. Only this reads the
    /// descriptors (an event loop polls them): what is set as it was set
    /// stays as it is. Under the IA's lock, so that of two threads the
    /// alarm set last is for the events queued last.
    pub fn rearm(&self, ia: u32) {
        let Some(i) = self.ias.get(&ia) else { return };
        let Some(fds) = i.alarm else { return };
        let events = lock(&i.events);
        let queued = !events.cm.is_empty() || !events.cq_events.is_empty();
        if i.armed.0.swap(queued, Ordering::Relaxed) != queued {
            fds.set_queued(queued);
        }
        let at = lock(&self.deadlines)
            .iter()
            .filter(|(qpn, _)| self.qps.get(qpn).is_some_and(|q| q.ia == ia))
            .map(|(_, (at, _))| *at)
            .min();
        let armed = at.map_or(0, |at| at.saturating_add(1));
        if i.armed.1.swap(armed, Ordering::Relaxed) != armed {
            fds.set_timer(at.map(|at| at.saturating_sub(self.now_us())));
        }
        drop(events);
    }

    /// Queue a connection event for `ia`.
    pub fn push_cm(&self, ia: u32, event: CmEvent<u32>) {
        if let Some(i) = self.ias.get(&ia) {
            lock(&i.events).cm.push_back(event);
        }
        self.rearm(ia);
    }

    pub fn qp_by_tag(&self, tag: u64) -> Option<u32> {
        self.qps.iter().find(|(_, q)| q.tag == tag).map(|(n, _)| *n)
    }

    /// What the device counted, destroyed objects included.
    pub fn stats(&self) -> Stats {
        let mut stats = self.retired;
        for qp in self.qps.values() {
            stats.add(&lock(&qp.run).stats);
        }
        for cq in self.cqs.values() {
            stats.add(&lock(&cq.ring).stats);
        }
        stats
    }

    /// Destroy a QP; its counts stay in the device's.
    pub fn remove_qp(&mut self, qpn: u32) -> Option<Qp> {
        let mut qp = self.qps.remove(&qpn)?;
        self.retired.add(&owned(&mut qp.run).stats);
        let busy = owned(&mut self.busy);
        busy.remove(&qpn);
        self.busy_len.store(busy.len(), Ordering::Relaxed);
        Some(qp)
    }

    /// Destroy a CQ; its counts stay in the device's.
    pub fn remove_cq(&mut self, cqn: u32) {
        if let Some(mut cq) = self.cqs.remove(&cqn) {
            self.retired.add(&owned(&mut cq.ring).stats);
        }
    }

    // ---- registers ----

    /// A doorbell: the register writes `writes` made to UAR `uar` since
    /// the last.
    pub fn register_flush(&self, uar: u32, writes: &[(usize, Vec<u8>)]) {
        match self.uars.get(&uar).copied() {
            Some(UarOwner::Qp(qpn)) => self.send_doorbell(qpn, writes),
            Some(UarOwner::Cq(cqn)) => self.arm(cqn, writes),
            None => panic!("softhca: a doorbell on UAR {uar}, which belongs to nothing live"),
        }
        self.progress();
    }

    /// Check a doorbell on QP `qpn` and execute the WQEs it publishes.
    fn send_doorbell(&self, qpn: u32, writes: &[(usize, Vec<u8>)]) {
        let (mut me, mut peer) = self.hold(qpn, true).expect("a doorbell for a live QP");
        let (qp, run) = (me.qp, &mut me.run);
        let record = qp.dbrec.be32(4);
        assert!(record <= 0xffff, "softhca: QP {qpn:#x}: doorbell record {record:#x} has bits above the 16-bit index");
        let record = record as u16;
        // Every WQE between the last record and this one, in order.
        let (mut at, mut wqes, mut last) = (run.seen, 0u16, None);
        while at != record {
            let mut ctrl = [0u8; 16];
            ring_read(&qp.sq, qp.sq_cnt, at, 0, &mut ctrl);
            let idx = ((u32::from_be_bytes(ctrl[0..4].try_into().unwrap()) >> 8) & 0xffff) as u16;
            let qpn_ds = u32::from_be_bytes(ctrl[4..8].try_into().unwrap());
            assert_eq!(idx, at, "softhca: QP {qpn:#x}: the WQE at {at} carries index {idx}");
            assert_eq!(qpn_ds >> 8, qpn, "softhca: QP {qpn:#x}: the WQE at {at} names QP {:#x}", qpn_ds >> 8);
            let ds = (qpn_ds & 0x3f) as u16;
            assert!(ds >= 1, "softhca: QP {qpn:#x}: the WQE at {at} has ds 0");
            // PRM "UMR": a WQE after a UMR waits for it (rdma-core sets the
            // initiator small fence on the next WQE).
            assert!(
                !run.after_umr || ctrl[11] & FENCES != 0,
                "softhca: QP {qpn:#x}: the WQE at {at}, after a UMR, is not fenced"
            );
            run.after_umr = ctrl[3] == OP_UMR;
            let bbs = (ds * 16).div_ceil(64);
            assert!(
                record.wrapping_sub(at) >= bbs,
                "softhca: QP {qpn:#x}: doorbell record {record} ends inside the WQE at {at}"
            );
            assert!(
                at.wrapping_add(bbs).wrapping_sub(run.exec) as u32 <= qp.sq_cnt,
                "softhca: QP {qpn:#x}: the WQE at {at} overwrites one not yet executed"
            );
            last = Some((at, bbs, ctrl));
            at = at.wrapping_add(bbs);
            wqes += 1;
        }
        let Some((last_at, last_bbs, ctrl)) = last else {
            panic!("softhca: QP {qpn:#x}: a doorbell with no new WQE (record {record})")
        };
        match writes {
            [(offset, word)] if word.len() == 8 => {
                assert_eq!(*offset, run.bf_next, "softhca: QP {qpn:#x}: doorbell at {offset}, not the expected half");
                assert_eq!(&word[..], &ctrl[..8], "softhca: QP {qpn:#x}: the 8-byte doorbell is not the last WQE's");
                run.stats.doorbells += 1;
            }
            blocks if !blocks.is_empty() && blocks.iter().all(|(_, b)| b.len() == 64) => {
                assert_eq!(wqes, 1, "softhca: QP {qpn:#x}: BlueFlame for {wqes} WQEs");
                assert_eq!(blocks.len(), usize::from(last_bbs), "softhca: QP {qpn:#x}: BlueFlame copy is not the WQE");
                for (i, (offset, block)) in blocks.iter().enumerate() {
                    assert_eq!(*offset, run.bf_next + i * 64, "softhca: QP {qpn:#x}: BlueFlame block {i} misplaced");
                    // The WQE's own bytes: the rest of its last block is
                    // padding, which a WQE built in registers leaves
                    // as it was in the ring and zeroes in the copy.
                    let own = (usize::from(ctrl[7] & 0x3f) * 16 - i * 64).min(64);
                    let mut wqe = [0u8; 64];
                    ring_read(&qp.sq, qp.sq_cnt, last_at.wrapping_add(i as u16), 0, &mut wqe);
                    assert_eq!(
                        &block[..own],
                        &wqe[..own],
                        "softhca: QP {qpn:#x}: BlueFlame block {i} differs from the ring"
                    );
                }
                run.stats.blueflame += 1;
            }
            other => panic!("softhca: QP {qpn:#x}: doorbell writes {other:?}"),
        }
        run.bf_next ^= BF_SIZE;
        run.seen = record;
        self.step(&mut me, peer.as_mut());
    }

    fn arm(&self, cqn: u32, writes: &[(usize, Vec<u8>)]) {
        let [(offset, word)] = writes else { panic!("softhca: CQ {cqn:#x}: arm writes {writes:?}") };
        assert_eq!((*offset, word.len()), (CQ_DOORBELL, 8), "softhca: CQ {cqn:#x}: arm is one 8-byte write at 0x20");
        let cq = self.cqs.get(&cqn).expect("arming a live CQ");
        let mut ring = lock(&cq.ring);
        let value = u32::from_be_bytes(word[0..4].try_into().unwrap());
        assert_eq!(u32::from_be_bytes(word[4..8].try_into().unwrap()), cqn, "softhca: arm names another CQ");
        assert_eq!(cq.dbrec.be32(4), value, "softhca: CQ {cqn:#x}: arm doorbell differs from the record's arm word");
        let ci = value & 0xffffff;
        let solicited_only = value & (1 << 24) != 0;
        ring.stats.cq_arms += 1;
        if ring.pi & 0xffffff != ci {
            // CQEs past the armed index exist: the event fires at once.
            ring.armed = None;
            if let Some(i) = self.ias.get(&cq.ia) {
                lock(&i.events).cq_events.push_back(cqn);
            }
        } else {
            ring.armed = Some((ci, solicited_only));
        }
    }

    /// Take every QP's doorbell record as rung (bench mode) and run.
    pub fn release(&self) {
        for (qpn, qp) in &self.qps {
            let mut run = lock(&qp.run);
            run.seen = qp.dbrec.be32(4) as u16;
            self.set_busy(*qpn, &mut run, true);
        }
        self.progress();
    }

    // ---- CQEs ----

    fn write_cqe(&self, cqn: Option<u32>, e: CqeOut) {
        let Some((cqn, cq)) = cqn.and_then(|c| self.cqs.get(&c).map(|cq| (c, cq))) else { return };
        let mut ring = lock(&cq.ring);
        if ring.error {
            return;
        }
        let ci = cq.dbrec.be32(0) & 0xffffff;
        if (ring.pi.wrapping_sub(ci) & 0xffffff) >= cq.cnt {
            self.overrun(cqn, cq, &mut ring);
            return;
        }
        let mut b = [0u8; 64];
        b[24..28].copy_from_slice(&e.flags_rqpn.to_be_bytes());
        b[32..36].copy_from_slice(&e.srqn.to_be_bytes());
        b[36..40].copy_from_slice(&e.imm.to_be_bytes());
        b[44..48].copy_from_slice(&e.byte_cnt.to_be_bytes());
        b[55] = e.syndrome;
        b[56..60].copy_from_slice(&((u32::from(e.send_opcode) << 24) | e.qpn).to_be_bytes());
        b[60..62].copy_from_slice(&e.wqe_counter.to_be_bytes());
        let owner = u8::from(ring.pi & cq.cnt != 0);
        let at = (ring.pi & (cq.cnt - 1)) as usize * 64;
        ring.buf.write(at, &b[..63]);
        std::sync::atomic::fence(Ordering::Release);
        ring.buf.write(at + 63, &[(e.opcode << 4) | (u8::from(e.solicited) << 1) | owner]);
        ring.pi = ring.pi.wrapping_add(1);
        ring.stats.cqes += 1;
        if let Some((_, solicited_only)) = ring.armed {
            if !solicited_only || e.solicited || e.opcode >= cqe_op::REQ_ERR {
                ring.armed = None;
                if let Some(i) = self.ias.get(&cq.ia) {
                    lock(&i.events).cq_events.push_back(cqn);
                }
                self.rearm(cq.ia);
            }
        }
    }

    /// A CQE found no room in CQ `cqn`, as on a ConnectX whose consumer
    /// fell behind (PRM "Completion Queue Error"): the CQE is lost, the CQ
    /// goes to error and takes no more, its IA hears a CQ error event, and
    /// every QP reporting to it goes to ERROR ([`Hca::break_overrun_qps`]). Nothing
    /// else changes: other CQs and QPs carry on.
    fn overrun(&self, cqn: u32, cq: &Cq, ring: &mut CqRing) {
        ring.error = true;
        ring.armed = None;
        if let Some(i) = self.ias.get(&cq.ia) {
            lock(&i.events).cm.push_back(CmEvent::CqError { tag: cq.tag });
        }
        let mut overrun = lock(&self.overrun);
        overrun.push(cqn);
        self.overran.store(true, Ordering::Relaxed);
        drop(overrun);
        self.rearm(cq.ia);
    }

    /// Break the QPs of the CQs that overran: each goes to ERROR, which
    /// the next run flushes. The QPs are not run from here: a QP whose WQE
    /// wrote the CQE may still be run by the caller, which flushes what it
    /// holds next. Called with no QP's lock held, before an entry that
    /// may have written a CQE leaves the device.
    pub fn break_overrun_qps(&self) {
        if !self.overran.load(Ordering::Relaxed) {
            return;
        }
        let cqs = lock(&self.overrun).clone();
        for &cqn in &cqs {
            for (qpn, qp) in &self.qps {
                if qp.send_cq == Some(cqn) || qp.recv_cq == Some(cqn) {
                    self.break_qp(*qpn, &mut lock(&qp.run));
                }
            }
        }
        // Off the list only now: until its QPs are broken, a QP run by
        // another thread breaks itself.
        let mut overrun = lock(&self.overrun);
        overrun.retain(|cqn| !cqs.contains(cqn));
        self.overran.store(!overrun.is_empty(), Ordering::Relaxed);
        drop(overrun);
        for cqn in cqs {
            if let Some(cq) = self.cqs.get(&cqn) {
                self.rearm(cq.ia);
            }
        }
    }

    /// What an overrun does to a QP reporting to the CQ.
    fn break_qp(&self, qpn: u32, run: &mut QpRun) {
        if matches!(run.state, QpState::Vanished | QpState::Error) {
            return;
        }
        run.state = QpState::Error;
        self.set_busy(qpn, run, true);
        lock(&self.deadlines).remove(&qpn);
    }

    /// A QP held whose CQ overran and whose break is still to come breaks
    /// now, as it would have had the overrun broken it at once.
    fn break_if_overrun(&self, q: &mut Held) {
        if !self.overran.load(Ordering::Relaxed) {
            return;
        }
        let overrun = lock(&self.overrun);
        let hit = [q.qp.send_cq, q.qp.recv_cq].iter().flatten().any(|cqn| overrun.contains(cqn));
        drop(overrun);
        if hit {
            self.break_qp(q.qpn, &mut q.run);
        }
    }

    // ---- execution ----

    /// Run every busy QP as far as it goes: retry stalled sends, flush
    /// what an errored QP holds. A QP whose lock, or whose peer's, another
    /// thread holds is left to a later entry: that thread is running it,
    /// or running its peer, and waiting for it would only serialise the
    /// two.
    pub fn progress(&self) {
        if self.busy_len.load(Ordering::Relaxed) != 0 {
            let busy: Vec<u32> = lock(&self.busy).iter().copied().collect();
            for qpn in busy {
                if let Some((mut me, mut peer)) = self.hold(qpn, false) {
                    self.step(&mut me, peer.as_mut());
                }
            }
        }
        self.break_overrun_qps();
    }

    /// Run the QP held as far as it goes; it stays busy while it has work
    /// left, and while it is in ERROR, whose receives are flushed as they
    /// are posted.
    fn step(&self, me: &mut Held, peer: Option<&mut Held>) {
        self.run(me, peer);
        let error = me.run.state == QpState::Error;
        if error {
            self.flush_rq(me);
        }
        let busy = error || me.run.exec != me.run.seen;
        self.set_busy(me.qpn, &mut me.run, busy);
    }

    /// Put the QP whose lock this thread holds in the busy set, or take
    /// it out.
    fn set_busy(&self, qpn: u32, run: &mut QpRun, busy: bool) {
        if run.busy == busy {
            return;
        }
        run.busy = busy;
        let mut set = lock(&self.busy);
        if busy {
            set.insert(qpn);
        } else {
            set.remove(&qpn);
        }
        self.busy_len.store(set.len(), Ordering::Relaxed);
    }

    /// Take the lock of live QP `qpn` and its peer's: waiting for them, in
    /// the order of their numbers, or, unless `wait`, only if no other
    /// thread holds either.
    fn hold(&self, qpn: u32, wait: bool) -> Option<(Held<'_>, Option<Held<'_>>)> {
        let qp = self.qps.get(&qpn)?;
        // Never its own peer (accept joins two QPs); were it, its lock is
        // taken once.
        let peer = qp.peer.filter(|p| *p != qpn).and_then(|p| self.qps.get(&p).map(|q| (p, q)));
        if !wait {
            // A thread that waits for no lock waits for no thread.
            let me = Held::try_new(qpn, qp)?;
            return match peer {
                Some((p, q)) => Some((me, Some(Held::try_new(p, q)?))),
                None => Some((me, None)),
            };
        }
        Some(match peer {
            Some((p, q)) if p < qpn => {
                let peer = Held::new(p, q);
                (Held::new(qpn, qp), Some(peer))
            }
            Some((p, q)) => {
                let me = Held::new(qpn, qp);
                (me, Some(Held::new(p, q)))
            }
            None => (Held::new(qpn, qp), None),
        })
    }

    fn parse(qpn: u32, qp: &Qp, at: u16) -> Wqe {
        let mut ctrl = [0u8; 16];
        ring_read(&qp.sq, qp.sq_cnt, at, 0, &mut ctrl);
        let opcode = ctrl[3];
        let ds = usize::from(ctrl[7] & 0x3f);
        let mut body = vec![0u8; ds * 16];
        ring_read(&qp.sq, qp.sq_cnt, at, 0, &mut body);
        let be32 = |b: &[u8], o: usize| u32::from_be_bytes(b[o..o + 4].try_into().unwrap());
        let be64 = |b: &[u8], o: usize| u64::from_be_bytes(b[o..o + 8].try_into().unwrap());
        let mut wqe = Wqe {
            opcode,
            flags: ctrl[11],
            imm: be32(&ctrl, 12),
            bbs: (ds as u16 * 16).div_ceil(64),
            remote: None,
            atomic: None,
            data: Vec::new(),
            inline: None,
            umr: None,
            dest: None,
        };
        if opcode == OP_UMR {
            wqe.umr = Some(parse_umr(qpn, &body));
            return wqe;
        }
        let mut seg = 16;
        // A UD send: the datagram segment (`struct mlx5_wqe_datagram_seg`)
        // follows the control segment.
        if qp.ud {
            assert_eq!(opcode, OP_SEND, "softhca: UD QP {qpn:#x}: opcode {opcode:#x} is not a send");
            assert!(body.len() >= 64, "softhca: UD QP {qpn:#x}: no datagram segment in {ds} segments");
            let dqp = be32(&body, 24);
            // Every address of this RoCE-like fabric has a GRH: the
            // vector must be the extended one.
            assert!(dqp & UD_AV_EXTENDED != 0, "softhca: UD QP {qpn:#x}: an address vector with no GRH");
            let grh_gid_fl = be32(&body, 44);
            wqe.dest = Some(Dest {
                qkey: be32(&body, 16),
                dqpn: dqp & 0x00ff_ffff,
                tclass: body[42],
                hop_limit: body[43],
                flow_label: grh_gid_fl & 0x000f_ffff,
                rgid: body[48..64].try_into().unwrap(),
            });
            seg = 64;
        }
        let remote = if matches!(opcode, OP_RDMA_WRITE | OP_RDMA_WRITE_IMM | OP_RDMA_READ | OP_ATOMIC_CS | OP_ATOMIC_FA)
        {
            let r = (be64(&body, seg), be32(&body, seg + 8));
            seg += 16;
            Some(r)
        } else {
            None
        };
        let atomic = if matches!(opcode, OP_ATOMIC_CS | OP_ATOMIC_FA) {
            let a = (be64(&body, seg), be64(&body, seg + 8));
            seg += 16;
            Some(a)
        } else {
            None
        };
        let (mut data, mut inline) = (Vec::new(), None);
        if seg < body.len() && be32(&body, seg) & INLINE != 0 {
            let len = (be32(&body, seg) & !INLINE) as usize;
            assert!(seg + 4 + len <= body.len(), "softhca: QP {qpn:#x}: inline data of {len} bytes overruns ds");
            inline = Some(body[seg + 4..seg + 4 + len].to_vec());
        } else {
            while seg < body.len() {
                data.push((be64(&body, seg + 8), be32(&body, seg), be32(&body, seg + 4)));
                seg += 16;
            }
        }
        let dest = wqe.dest;
        Wqe { remote, atomic, data, inline, dest, ..wqe }
    }

    /// Execute the QP `me` holds as far as it goes; `peer` is its peer's,
    /// held too, unless `me` is in ERROR and only flushes.
    fn run(&self, me: &mut Held, mut peer: Option<&mut Held>) {
        let qpn = me.qpn;
        loop {
            self.break_if_overrun(me);
            if me.run.exec == me.run.seen {
                return;
            }
            let (at, state) = (me.run.exec, me.run.state);
            let wqe = Hca::parse(qpn, me.qp, at);
            let requester = |opcode: u8, syndrome: u8, byte_cnt: u32| CqeOut {
                opcode,
                qpn,
                wqe_counter: at,
                byte_cnt,
                syndrome,
                send_opcode: wqe.opcode,
                ..CqeOut::default()
            };
            let cq = me.qp.send_cq;
            match state {
                QpState::Init | QpState::Connecting | QpState::Vanished => return,
                QpState::Error => {
                    let e = requester(cqe_op::REQ_ERR, syndrome::WR_FLUSH, 0);
                    self.write_cqe(cq, e);
                }
                QpState::Rts => {
                    let outcome = match me.run.fail_next.take() {
                        Some(syndrome) => Outcome::Failed(syndrome),
                        None if me.qp.ud => self.execute_ud(me, &wqe),
                        None => self.execute(me, peer.as_deref_mut(), &wqe),
                    };
                    match outcome {
                        Outcome::Stall => return,
                        Outcome::Done(bytes) => {
                            if wqe.flags & CQ_UPDATE != 0 {
                                let e = requester(cqe_op::REQ, 0, bytes);
                                self.write_cqe(cq, e);
                            }
                        }
                        Outcome::Failed(syndrome) => {
                            let e = requester(cqe_op::REQ_ERR, syndrome, 0);
                            self.write_cqe(cq, e);
                            me.run.stats.wqes += 1;
                            me.run.exec = me.run.exec.wrapping_add(wqe.bbs);
                            self.fail(me);
                            continue;
                        }
                    }
                }
            }
            me.run.stats.wqes += 1;
            me.run.exec = me.run.exec.wrapping_add(wqe.bbs);
        }
    }

    /// QP `qpn` goes to ERROR: everything it holds is flushed, in order.
    pub fn fail_qp(&self, qpn: u32) {
        let Some(qp) = self.qps.get(&qpn) else { return };
        self.fail(&mut Held::new(qpn, qp));
        self.break_overrun_qps();
    }

    /// The QP held goes to ERROR: everything it holds is flushed, in order.
    fn fail(&self, q: &mut Held) {
        if q.run.state == QpState::Vanished {
            return;
        }
        q.run.state = QpState::Error;
        self.set_busy(q.qpn, &mut q.run, true);
        lock(&self.deadlines).remove(&q.qpn);
        self.run(q, None);
        self.flush_rq(q);
    }

    fn flush_rq(&self, q: &mut Held) {
        if q.qp.rq.is_none() {
            return;
        }
        let record = q.qp.dbrec.be32(0) as u16;
        let start = q.run.rq_next;
        q.run.rq_next = record;
        let mut at = start;
        while at != record {
            let e = CqeOut {
                opcode: cqe_op::RESP_ERR,
                qpn: q.qpn,
                wqe_counter: at,
                syndrome: syndrome::WR_FLUSH,
                ..CqeOut::default()
            };
            self.write_cqe(q.qp.recv_cq, e);
            at = at.wrapping_add(1);
        }
    }

    /// Check a local segment: (address, length) it covers. Outside its
    /// lkey's registration it is a local protection error (ibv_poll_cq(3),
    /// IBV_WC_LOC_PROT_ERR).
    fn local(&self, pd: u32, (addr, len, lkey): (u64, u32, u32), write: bool) -> Option<(u64, usize)> {
        if len == 0 {
            return Some((addr, 0));
        }
        let mr = self.mrs.get(&lkey)?;
        let allowed = !write || mr.access.contains(MemPriv::LOCAL_WRITE);
        (mr.pd == pd && mr.covers(addr, len.into()) && allowed).then_some((addr, len as usize))
    }

    /// Check a remote range. Outside its rkey's registration it is a remote
    /// access error (ibv_poll_cq(3), IBV_WC_REM_ACCESS_ERR); a zero-length
    /// one names no memory, and neither its address nor its key is checked
    /// (IBA C9-88).
    fn remote(&self, (qpn, pd): (u32, u32), addr: u64, rkey: u32, len: usize, need: MemPriv) -> bool {
        if len == 0 {
            return true;
        }
        if let Some(mr) = self.mrs.get(&rkey) {
            return mr.pd == pd && mr.access.contains(need) && mr.covers(addr, len as u64);
        }
        // A window: its key's low 8 bits must be the current ones, and a
        // type 2 window's QP the responder.
        let Some(mw) = self.mws.get(&(rkey >> 8)) else { return false };
        let binding = lock(&mw.binding);
        let of_qp = !mw.type2 || binding.qp == Some(qpn);
        let Some(w) = binding.bound.filter(|_| mw.pd == pd && binding.key == rkey as u8 && of_qp) else { return false };
        w.access.contains(need) && addr.checked_sub(w.addr).is_some_and(|off| off <= w.len && len as u64 <= w.len - off)
    }

    /// Execute a window bind through QP `qpn`: the window named by the
    /// control segment's immediate (its current key), in the QP's PD,
    /// takes the next key and the range of the KLM entry, which must lie
    /// in a registration of the same PD that allows what the window
    /// grants; or, marked free, is unbound. A type 2 window binds only when
    /// free, to the QP that binds it, and only that QP frees it. Anything
    /// else fails the WQE with a bind error. A bind that names a QP the
    /// window's type does not call for is the data path's mistake, and
    /// panics.
    fn bind(&self, (qpn, pd): (u32, u32), current: u32, umr: &Umr) -> Outcome {
        let failed = Outcome::Failed(syndrome::MW_BIND);
        let window = match umr.klm {
            None => None,
            Some((count, mkey, addr)) => {
                let Some(mr) = self.mrs.get(&mkey) else { return failed };
                let needs = |remote: MemPriv, local: MemPriv| !umr.access.contains(remote) || mr.access.contains(local);
                let allowed = needs(MemPriv::REMOTE_READ, MemPriv::LOCAL_READ)
                    && needs(MemPriv::REMOTE_WRITE, MemPriv::LOCAL_WRITE);
                if mr.pd != pd || !allowed || u64::from(count) != umr.len || addr != umr.start {
                    return failed;
                }
                if !mr.covers(umr.start, umr.len) {
                    return failed;
                }
                Some(Window { addr: umr.start, len: umr.len, access: umr.access })
            }
        };
        let Some(mw) = self.mws.get(&(current >> 8)) else { return failed };
        let names = if mw.type2 && window.is_some() { Some(qpn) } else { None };
        assert_eq!(umr.qp, names, "softhca: QP {qpn:#x}: a UMR names the wrong QP for its window");
        let mut binding = lock(&mw.binding);
        if mw.pd != pd || binding.key != current as u8 {
            return failed;
        }
        if mw.type2 {
            let binds_a_free_one = window.is_some() && binding.bound.is_none();
            let frees_its_own = window.is_none() && binding.bound.is_some() && binding.qp == Some(qpn);
            if !(binds_a_free_one || frees_its_own) {
                return failed;
            }
        }
        binding.key = umr.key;
        binding.bound = window;
        binding.qp = names;
        Outcome::Done(0)
    }

    /// Free the type 2 window of key `rkey` in PD `pd` bound to QP `qpn`,
    /// for a send with invalidate that QP received; false when `rkey`
    /// names no such window.
    fn invalidate(&self, (qpn, pd): (u32, u32), rkey: u32) -> bool {
        let Some(mw) = self.mws.get(&(rkey >> 8)) else { return false };
        let mut binding = lock(&mw.binding);
        let named = mw.type2 && mw.pd == pd && binding.key == rkey as u8 && binding.qp == Some(qpn);
        if !named || binding.bound.is_none() {
            return false;
        }
        binding.bound = None;
        binding.qp = None;
        true
    }

    /// The bytes a WQE sends, or the syndrome it fails with.
    fn gather(&self, pd: u32, wqe: &Wqe) -> Result<Vec<u8>, u8> {
        if let Some(bytes) = &wqe.inline {
            return Ok(bytes.clone());
        }
        let mut out = Vec::with_capacity(wqe.data_len()?);
        for seg in &wqe.data {
            let (addr, len) = self.local(pd, *seg, false).ok_or(syndrome::LOCAL_PROT)?;
            let start = out.len();
            out.resize(start + len, 0);
            // SAFETY: `local` found the range inside a live registration of
            // mapped memory; `out` is ours.
            unsafe { region::copy(out[start..].as_mut_ptr() as u64, addr, len) };
        }
        Ok(out)
    }

    /// Scatter `bytes` over `segs`; None on a protection error, Some(false)
    /// when they do not fit.
    fn scatter(&self, pd: u32, segs: &[(u64, u32, u32)], bytes: &[u8]) -> Option<bool> {
        let mut placed = 0;
        for seg in segs {
            if placed == bytes.len() {
                break;
            }
            let (addr, len) = self.local(pd, *seg, true)?;
            let n = len.min(bytes.len() - placed);
            // SAFETY: `local` found the range inside a live registration
            // with local write access of mapped memory.
            unsafe { region::copy(addr, bytes[placed..].as_ptr() as u64, n) };
            placed += n;
        }
        Some(placed == bytes.len())
    }

    /// Execute a WQE of the QP `me` holds, whose peer `peer` holds.
    fn execute(&self, me: &Held, peer: Option<&mut Held>, wqe: &Wqe) -> Outcome {
        let (qpn, pd) = (me.qpn, me.qp.pd);
        // A bind changes this side's keys: no peer takes part.
        if let Some(umr) = &wqe.umr {
            return self.bind((qpn, pd), wqe.imm, umr);
        }
        let Some(peer) = peer else { return Outcome::Failed(syndrome::TRANSPORT_RETRY_EXC) };
        self.break_if_overrun(peer);
        match peer.run.state {
            QpState::Rts => {}
            // A peer that is gone or broken never acknowledges.
            _ => return Outcome::Failed(syndrome::TRANSPORT_RETRY_EXC),
        }
        let peer_pd = peer.qp.pd;
        let remote_fail = |s: &Self, peer: &mut Held| {
            s.fail(peer);
            Outcome::Failed(syndrome::REMOTE_ACCESS)
        };
        match wqe.opcode {
            OP_RDMA_WRITE | OP_RDMA_WRITE_IMM | OP_SEND | OP_SEND_IMM | OP_SEND_INVAL => {
                let bytes = match self.gather(pd, wqe) {
                    Ok(bytes) => bytes,
                    Err(syndrome) => return Outcome::Failed(syndrome),
                };
                if let Some((addr, rkey)) = wqe.remote {
                    if !self.remote((peer.qpn, peer_pd), addr, rkey, bytes.len(), MemPriv::REMOTE_WRITE) {
                        return remote_fail(self, peer);
                    }
                    // SAFETY: `remote` found the range inside a live
                    // registration with remote write access.
                    unsafe { region::copy(addr, bytes.as_ptr() as u64, bytes.len()) };
                    if wqe.opcode == OP_RDMA_WRITE {
                        return Outcome::Done(bytes.len() as u32);
                    }
                }
                self.deliver(peer, wqe, &bytes)
            }
            OP_RDMA_READ => {
                let Some((addr, rkey)) = wqe.remote else { return Outcome::Failed(syndrome::LOCAL_PROT) };
                let len = match wqe.data_len() {
                    Ok(len) => len,
                    Err(syndrome) => return Outcome::Failed(syndrome),
                };
                if !self.remote((peer.qpn, peer_pd), addr, rkey, len, MemPriv::REMOTE_READ) {
                    return remote_fail(self, peer);
                }
                let mut bytes = vec![0u8; len];
                // SAFETY: `remote` found the range inside a live
                // registration with remote read access.
                unsafe { region::copy(bytes.as_mut_ptr() as u64, addr, len) };
                match self.scatter(pd, &wqe.data, &bytes) {
                    Some(true) => Outcome::Done(len as u32),
                    _ => Outcome::Failed(syndrome::LOCAL_PROT),
                }
            }
            OP_ATOMIC_CS | OP_ATOMIC_FA => {
                let (Some((addr, rkey)), Some((swap_add, compare))) = (wqe.remote, wqe.atomic) else {
                    return Outcome::Failed(syndrome::LOCAL_PROT);
                };
                if addr % 8 != 0 || !self.remote((peer.qpn, peer_pd), addr, rkey, 8, MemPriv::REMOTE_ATOMIC) {
                    return remote_fail(self, peer);
                }
                // Atomic with respect to every other atomic of the device
                // (verbs.h `ibv_atomic_cap`: IBV_ATOMIC_HCA), whichever QP and
                // thread executes it.
                let atomics = lock(&self.atomics);
                let mut old = [0u8; 8];
                // SAFETY: `remote` found the 8 aligned bytes inside a live
                // registration with remote atomic access.
                unsafe { region::copy(old.as_mut_ptr() as u64, addr, 8) };
                let value = u64::from_ne_bytes(old);
                let new = if wqe.opcode == OP_ATOMIC_CS {
                    if value == compare {
                        swap_add
                    } else {
                        value
                    }
                } else {
                    value.wrapping_add(swap_add)
                };
                // SAFETY: as above.
                unsafe { region::copy(addr, new.to_ne_bytes().as_ptr() as u64, 8) };
                drop(atomics);
                match self.scatter(pd, &wqe.data, &old) {
                    Some(true) => Outcome::Done(8),
                    _ => Outcome::Failed(syndrome::LOCAL_PROT),
                }
            }
            other => panic!("softhca: QP {qpn:#x}: opcode {other:#x} is not one the data path posts"),
        }
    }

    /// A send, or a write with immediate, consumes a receive at the peer.
    fn deliver(&self, peer: &mut Held, wqe: &Wqe, bytes: &[u8]) -> Outcome {
        let (peer_qpn, mut pd, cq) = (peer.qpn, peer.qp.pd, peer.qp.recv_cq);
        // The receive WQE: (index, scatter list, srqn).
        let taken = match peer.qp.srq {
            Some(srqn) => {
                let srq = &self.srqs[&srqn];
                let mut next = lock(&srq.next);
                if next.consumed == srq.dbrec.be32(0) as u16 {
                    return Outcome::Stall;
                }
                let at = usize::from(next.head) * srq.stride as usize;
                let link = srq.buf.be16(at + 2);
                let segs = read_scatter(&srq.buf, at + 16, srq.stride as usize - 16);
                let index = next.head;
                pd = srq.pd;
                next.head = link;
                next.consumed = next.consumed.wrapping_add(1);
                (index, segs, srqn)
            }
            None => {
                let Some((rq, cnt, stride)) = &peer.qp.rq else {
                    return Outcome::Failed(syndrome::REMOTE_INVAL_REQ);
                };
                if peer.run.rq_next == peer.qp.dbrec.be32(0) as u16 {
                    return Outcome::Stall;
                }
                let index = peer.run.rq_next;
                let at = (usize::from(index) % *cnt as usize) * *stride as usize;
                let segs = read_scatter(rq, at, *stride as usize);
                peer.run.rq_next = index.wrapping_add(1);
                (index, segs, 0)
            }
        };
        let (index, segs, srqn) = taken;
        let fail = |s: &Self, peer: &mut Held, syndrome: u8| {
            let e = CqeOut {
                opcode: cqe_op::RESP_ERR,
                qpn: peer_qpn,
                wqe_counter: index,
                srqn,
                syndrome,
                ..CqeOut::default()
            };
            s.write_cqe(cq, e);
            s.fail(peer);
        };
        // A send with invalidate frees the responder's type 2 window of the
        // key it carries, one bound to the responder's QP; any other key
        // fails the receive (rxe: IB_WC_LOC_QP_OP_ERR) and the requester
        // sees an invalid request.
        if wqe.opcode == OP_SEND_INVAL && !self.invalidate((peer_qpn, peer.qp.pd), wqe.imm) {
            fail(self, peer, syndrome::LOCAL_QP_OP);
            return Outcome::Failed(syndrome::REMOTE_INVAL_REQ);
        }
        // A write with immediate consumes the receive but places its bytes
        // at the write's target only: the receive's buffers stay untouched.
        let placed = if wqe.opcode == OP_RDMA_WRITE_IMM { Some(true) } else { self.scatter(pd, &segs, bytes) };
        match placed {
            Some(true) => {}
            Some(false) => {
                fail(self, peer, syndrome::LOCAL_LENGTH);
                return Outcome::Failed(syndrome::REMOTE_INVAL_REQ);
            }
            None => {
                fail(self, peer, syndrome::LOCAL_PROT);
                return Outcome::Failed(syndrome::REMOTE_ACCESS);
            }
        }
        let opcode = match wqe.opcode {
            OP_SEND => cqe_op::RESP_SEND,
            OP_SEND_IMM => cqe_op::RESP_SEND_IMM,
            OP_SEND_INVAL => cqe_op::RESP_SEND_INV,
            _ => cqe_op::RESP_WR_IMM,
        };
        let e = CqeOut {
            opcode,
            qpn: peer_qpn,
            wqe_counter: index,
            byte_cnt: bytes.len() as u32,
            imm: if wqe.opcode == OP_SEND { 0 } else { wqe.imm },
            srqn,
            solicited: wqe.flags & SOLICITED != 0,
            ..CqeOut::default()
        };
        self.write_cqe(cq, e);
        Outcome::Done(bytes.len() as u32)
    }
}

impl Hca {
    /// Execute a UD send of the QP `me` holds: the datagram goes to the QP
    /// its segment names, if that QP is UD, lives on the GID the segment
    /// names and holds the Q_Key it carries, and has a receive posted;
    /// otherwise it is lost, as an unreliable datagram is (the IBTA's UD
    /// service has no acknowledgement), and the sender still completes.
    /// A message longer than the path
    /// MTU fails at the sender (ibv_poll_cq(3), IBV_WC_LOC_LEN_ERR). The
    /// destination's lock is only tried: a doorbell never waits for a
    /// QP's lock while it holds one, and retries.
    fn execute_ud(&self, me: &mut Held, wqe: &Wqe) -> Outcome {
        let Some(dest) = wqe.dest else { return Outcome::Failed(syndrome::LOCAL_QP_OP) };
        let bytes = match self.gather(me.qp.pd, wqe) {
            Ok(bytes) => bytes,
            Err(syndrome) => return Outcome::Failed(syndrome),
        };
        if bytes.len() > UD_MTU {
            return Outcome::Failed(syndrome::LOCAL_LENGTH);
        }
        let sent = Outcome::Done(bytes.len() as u32);
        let source = (me.qpn, self.ias.get(&me.qp.ia).map_or([0; 16], |i| gid(&i.address)));
        if dest.dqpn == me.qpn {
            self.deliver_ud(me, source, &dest, wqe, &bytes);
            return sent;
        }
        let Some(qp) = self.qps.get(&dest.dqpn) else { return sent };
        let Some(mut to) = Held::try_new(dest.dqpn, qp) else { return Outcome::Stall };
        self.deliver_ud(&mut to, source, &dest, wqe, &bytes);
        sent
    }

    /// A datagram from `(source QP, source GID)` reaches the QP `to`
    /// holds: the GRH (40 bytes), then the message, into its next receive.
    fn deliver_ud(&self, to: &mut Held, (source, sgid): (u32, [u8; 16]), dest: &Dest, wqe: &Wqe, bytes: &[u8]) {
        self.break_if_overrun(to);
        let on_gid = self.ias.get(&to.qp.ia).is_some_and(|i| gid(&i.address) == dest.rgid);
        if !to.qp.ud || to.run.state != QpState::Rts || !on_gid || dest.qkey != UD_QKEY {
            return;
        }
        let Some((rq, cnt, stride)) = &to.qp.rq else { return };
        if to.run.rq_next == to.qp.dbrec.be32(0) as u16 {
            return;
        }
        let index = to.run.rq_next;
        let at = (usize::from(index) % *cnt as usize) * *stride as usize;
        let segs = read_scatter(rq, at, *stride as usize);
        to.run.rq_next = index.wrapping_add(1);
        // The GRH (IBTA Vol. 1 §8.3 "Global Route Header"): IP version 6,
        // traffic class and flow label; the payload length; next header
        // 0x1B (the BTH); hop limit; source and destination GIDs.
        let mut message = Vec::with_capacity(GRH_BYTES + bytes.len());
        let first = 6 << 28 | u32::from(dest.tclass) << 20 | dest.flow_label;
        message.extend_from_slice(&first.to_be_bytes());
        message.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        message.extend_from_slice(&[0x1b, dest.hop_limit]);
        message.extend_from_slice(&sgid);
        message.extend_from_slice(&dest.rgid);
        message.extend_from_slice(bytes);
        let (qpn, cq) = (to.qpn, to.qp.recv_cq);
        let e = match self.scatter(to.qp.pd, &segs, &message) {
            Some(true) => CqeOut {
                opcode: cqe_op::RESP_SEND,
                qpn,
                wqe_counter: index,
                byte_cnt: message.len() as u32,
                solicited: wqe.flags & SOLICITED != 0,
                flags_rqpn: 1 << 28 | source,
                ..CqeOut::default()
            },
            // A receive that cannot hold the datagram fails, as any
            // receive too small does (IBV_WC_LOC_LEN_ERR), and so does
            // one whose memory it may not write.
            placed => {
                let syndrome = if placed.is_some() { syndrome::LOCAL_LENGTH } else { syndrome::LOCAL_PROT };
                let e = CqeOut { opcode: cqe_op::RESP_ERR, qpn, wqe_counter: index, syndrome, ..CqeOut::default() };
                self.write_cqe(cq, e);
                self.fail(to);
                return;
            }
        };
        self.write_cqe(cq, e);
    }
}

/// The GID of the IA at `address`, as RoCE v2 makes one of an IPv4
/// address (`::ffff:a.b.c.d`); an IPv6 address is its own.
pub fn gid(address: &IaAddress) -> [u8; 16] {
    let b = &address.bytes;
    let mut g = [0u8; 16];
    if u16::from_ne_bytes([b[0], b[1]]) == AF_INET6 {
        g.copy_from_slice(&b[8..24]);
    } else {
        g[10..12].fill(0xff);
        g[12..16].copy_from_slice(&b[4..8]);
    }
    g
}

/// `AF_INET6` of Linux.
const AF_INET6: u16 = 10;

/// The UD Q_Key every QP holds (`udat_core::backend::UD_QKEY`).
const UD_QKEY: u32 = udat_core::backend::UD_QKEY;

/// The bytes of a GRH.
const GRH_BYTES: usize = udat_core::backend::GRH_BYTES as usize;

/// The path MTU of the fabric: the IBTA's largest, 4096 bytes.
pub const UD_MTU: usize = 4096;

/// `MLX5_EXTENDED_UD_AV`: the address vector carries a GRH.
const UD_AV_EXTENDED: u32 = 1 << 31;

/// The UMR segments of a window bind or free, checked against what the
/// data path must write (rdma-core's `set_bind_wr`): a broken rule
/// panics.
fn parse_umr(qpn: u32, body: &[u8]) -> Umr {
    let be16 = |o: usize| u16::from_be_bytes(body[o..o + 2].try_into().unwrap());
    let be32 = |o: usize| u32::from_be_bytes(body[o..o + 4].try_into().unwrap());
    let be64 = |o: usize| u64::from_be_bytes(body[o..o + 8].try_into().unwrap());
    // Control (16), UMR control (48), mkey context (64), one KLM (64).
    let bind = match body.len() {
        192 => true,
        128 => false,
        n => panic!("softhca: QP {qpn:#x}: a UMR WQE of {n} bytes"),
    };
    const UMR_CTRL: usize = 16;
    const MKEY: usize = 64;
    const KLM: usize = 128;
    // TRANSLATION_OFFSET | INLINE; 8-entry KLM units of 16 bytes.
    assert_eq!(body[UMR_CTRL], 0x90, "softhca: QP {qpn:#x}: UMR control flags");
    assert_eq!(be16(UMR_CTRL + 4), if bind { 4 } else { 0 }, "softhca: QP {qpn:#x}: UMR KLM octowords");
    let mask = be64(UMR_CTRL + 8);
    // FREE | MKEY, and for a bind LEN | START_ADDR | the four accesses.
    let expected = (1 << 29) | (1 << 13) | if bind { 1 | (1 << 6) | (0xf << 18) } else { 0 };
    assert_eq!(mask, expected, "softhca: QP {qpn:#x}: UMR mkey mask {mask:#x}");
    let free = body[MKEY] & (1 << 6) != 0;
    assert_eq!(free, !bind, "softhca: QP {qpn:#x}: a UMR's free mark and its KLM disagree");
    let qpn_mkey = be32(MKEY + 4);
    let flags = body[MKEY + 2];
    let mut access = MemPriv(0);
    if flags & (1 << 4) != 0 {
        access = access | MemPriv::REMOTE_READ;
    }
    if flags & (1 << 5) != 0 {
        access = access | MemPriv::REMOTE_WRITE;
    }
    Umr {
        key: qpn_mkey as u8,
        qp: Some(qpn_mkey >> 8).filter(|&q| q != 0xff_ffff),
        access,
        start: be64(MKEY + 16),
        len: be64(MKEY + 24),
        klm: bind.then(|| (be32(KLM), be32(KLM + 4), be64(KLM + 8))),
    }
}

/// A receive WQE's scatter list, up to its terminator.
fn read_scatter(buf: &Region, at: usize, len: usize) -> Vec<(u64, u32, u32)> {
    let mut segs = Vec::new();
    for seg in (at..at + len).step_by(16) {
        let (count, lkey, addr) = (buf.be32(seg), buf.be32(seg + 4), buf.be64(seg + 8));
        if lkey == INVALID_LKEY {
            break;
        }
        segs.push((addr, count, lkey));
    }
    segs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past 2^24 numbers the device starts again, and skips the numbers
    /// of live objects: a QP number wider than a WQE's 24-bit field was
    /// once handed out after some sixteen million creations, and its WQEs
    /// named another QP.
    #[test]
    fn object_numbers_stay_within_24_bits_and_skip_live_ones() {
        let mut hca = Hca::default();
        hca.pds.insert(FIRST_ID);
        hca.uars.insert(FIRST_ID + 1, UarOwner::Cq(7));
        hca.next_id = ID_MASK - 1;
        assert_eq!(hca.id(), ID_MASK);
        assert_eq!(hca.id(), FIRST_ID + 2, "wrapped, past the two live numbers");
        for _ in 0..1000 {
            assert!(hca.id() <= ID_MASK);
        }
    }
}
