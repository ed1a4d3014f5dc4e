//! udat-softhca: a ConnectX (mlx5) HCA in software.
//!
//! It owns queue memory with the geometry `mlx5dv_init_obj` reports
//! (64-byte WQEBBs and CQEs, power-of-two rings, 256-byte BlueFlame
//! halves), watches the doorbell record and every register write, and
//! executes the WQEs between its QPs in this process — RDMA write and
//! read, send and receive, immediate data, atomics — with real key, range
//! and privilege checks. It writes CQEs with the owner bit, error
//! syndromes, flushes after an error, and leaves the CQEs of a destroyed
//! QP in place, as a CQ the data path polls itself has them. A CQ that
//! overruns goes to error with a CQ error event, and its QPs to ERROR. Connection
//! management is in-process too: listeners by address and qualifier,
//! requests with private data, accept, reject, disconnect, and connect
//! timeouts.
//!
//! Select it with `Mlx5::new(SoftHca::new())`; open IA `mlx5_soft0`.
//! Faults can be injected by the tag of a QP (an EP handle's bits):
//! [`SoftHca::fail_next`], [`SoftHca::force_error`], [`SoftHca::vanish`].
//!
//! Execution is synchronous: a doorbell runs its QP's WQEs on the thread
//! that rang it, before the register write returns, and every entry into
//! the device retries the sends that found no receive (the software HCA's RNR
//! retry) on the QPs that no other thread is running at that moment.
//! Doorbells on the QPs of different connections run in parallel, and meet
//! only at a CQ they share.

mod alarm;
mod hca;
pub mod oracle;
mod region;

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use udat_core::backend::{
    AhAttr, CmEvent, ConnOutcome, ConnectionManager, Control, Grh, PrivateData, Registration, UdPeer, WaitFds, Wake,
    MAX_PRIVATE_DATA, UD_QKEY,
};
use udat_core::types::{IaAddress, IaAttr, MemPriv, Qos, SrqAttr};
use udat_core::{DatError, DatResult, ErrorType};
use udat_mlx5::device::{CqParts, Device, QpParts, QpSpec, SrqParts};
use udat_mlx5::doorbell::{Register, Uar};
use udat_mlx5::dv::{self, DvBlueFlame, DvCq, DvQp, DvSrq, DvWorkQueue};
use udat_mlx5::kept::Wqebb;
use udat_mlx5::rq::RecvSlot;
use udat_mlx5::sq::SendSlot;
use udat_mlx5::wqe::AddressVector;

use hca::{lock, owned, Hca, QpState, UarOwner, BF_SIZE};
pub use hca::{syndrome, Stats};
use region::Region;

/// The IA names the software HCA opens: `mlx5_soft` and a digit.
pub const IA_NAME_PREFIX: &[u8] = b"mlx5_soft";

/// Most bytes of private data a connection carries (as rdma_cm on IB).
pub const PRIVATE_DATA: u32 = 56;

/// Largest message: as soft-RoCE's.
const MAX_MESSAGE: u32 = 8 << 20;

/// The software HCA. Clones share one device, so providers in one process
/// can connect to each other through it. Posts on different QPs may ring
/// their doorbells from different threads, and doorbells whose WQEs reach
/// different QPs and CQs run at once: the device's tables are behind a
/// read-write lock, which only the control path takes to write, and each
/// QP, CQ, SRQ and window behind a lock of its own (the order they are
/// taken in is in `hca.rs`).
#[derive(Clone, Debug, Default)]
pub struct SoftHca {
    hca: Arc<RwLock<Hca>>,
    deferred: Arc<AtomicBool>,
}

// Threads of one provider share the device, each ringing its own QPs'
// doorbells.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<SoftHca>();
    const fn sent<T: Send>() {}
    sent::<SoftRegister>();
};

/// A doorbell register of the software HCA: a UAR page of one QP or CQ.
///
/// The data path's writes go first through a real [`Uar`] to a page of
/// memory standing in for the mapped register: the MMIO stores a ConnectX
/// doorbell makes, which an instruction count includes. Then, unless
/// doorbells are deferred (for benches), the software HCA takes the writes and
/// executes what they publish in `hca_write` and `hca_flush`, distinct
/// symbols that a count leaves out (`cargo xtask icount`): on a ConnectX
/// that work is the device's.
#[derive(Debug)]
pub struct SoftRegister {
    hca: Arc<RwLock<Hca>>,
    uar: u32,
    deferred: Arc<AtomicBool>,
    /// The stand-in register page, owned here (freed on drop).
    page: NonNull<Page>,
    mirror: Uar,
    /// The writes of the doorbell under way, which the device takes whole
    /// at the flush: each register belongs to one thread at a time, so
    /// they need no lock of the device's.
    pending: Vec<(usize, Vec<u8>)>,
    /// Where the BlueFlame blocks stored unchecked (`store_block`,
    /// `store_blocks_from`) since the last flush end, 0 for none: a lane,
    /// or a staged WQE, stores one WQE's blocks in a row from the start of
    /// a BlueFlame half, so the flush hands over the half's blocks up to
    /// here from the page, and the store calls nothing.
    stored_end: usize,
}

/// 64-bit words of a stand-in register page: both BlueFlame halves and
/// the CQ doorbell fit.
const PAGE_WORDS: usize = 128;

/// A stand-in register page, 64-aligned as a mapped UAR's BlueFlame
/// halves are (a UAR is page-aligned).
#[repr(C, align(64))]
struct Page([u64; PAGE_WORDS]);

impl SoftRegister {
    fn new(hca: Arc<RwLock<Hca>>, uar: u32, deferred: Arc<AtomicBool>) -> SoftRegister {
        let page = NonNull::from(Box::leak(Box::new(Page([0; PAGE_WORDS]))));
        // SAFETY: the page is 64-aligned, `PAGE_WORDS * 8` bytes long, and
        // lives until this register drops; only the `Uar` writes it.
        let mirror = unsafe { Uar::new(page.cast(), PAGE_WORDS * 8) };
        SoftRegister { hca, uar, deferred, page, mirror, pending: Vec::new(), stored_end: 0 }
    }
}

impl SoftRegister {
    /// The stand-in register page: what `mlx5dv_init_obj` reports as a
    /// QP's `bf.reg` or a CQ's `cq_uar`.
    fn page_ptr(&self) -> *mut std::ffi::c_void {
        self.page.as_ptr().cast()
    }
}

// SAFETY: the register owns its stand-in page (and the `Uar` over it, which
// nothing else reaches); the device is behind its locks and the deferral
// flag is atomic, so the register may be used from another thread.
unsafe impl Send for SoftRegister {}

impl Drop for SoftRegister {
    fn drop(&mut self) {
        // SAFETY: leaked from a Box in `new` and freed only here.
        drop(unsafe { Box::from_raw(self.page.as_ptr()) });
    }
}

impl SoftRegister {
    /// The software HCA takes a register write.
    #[inline(never)]
    fn hca_write(&mut self, offset: usize, bytes: &[u8]) {
        self.pending.push((offset, bytes.to_vec()));
    }

    /// The software HCA takes the BlueFlame block just written at `offset`, as
    /// the mirror page holds it (so the post hands it over in no memory of
    /// its own, as a ConnectX's doorbell does).
    #[inline(never)]
    fn hca_write_block(&mut self, offset: usize) {
        self.take_block(offset);
    }

    /// The BlueFlame block at `offset`, as the page holds it, joins the
    /// doorbell's writes. Not an `hca_*` function, nor through one: a
    /// count toggles collection at each `hca_*` entry, so they must not
    /// nest.
    fn take_block(&mut self, offset: usize) {
        // SAFETY: the page lives while the register does and only the
        // mirror `Uar` writes it, through `&mut self`, which this call has.
        let page = unsafe { self.page.as_ref() };
        let Some(words) = page.0.get(offset / 8..offset / 8 + 8) else { return };
        let bytes: [u8; 64] = core::array::from_fn(|i| words[i / 8].to_ne_bytes()[i % 8]);
        self.pending.push((offset, bytes.to_vec()));
    }

    /// The software HCA takes the doorbell, the blocks stored unchecked
    /// first (in address order, the order a WQE's blocks are stored in),
    /// and executes what it publishes; deferred, it takes no write of
    /// this doorbell. The test is made here, where a count does not
    /// collect, rather than in the post, which a ConnectX runs without it.
    #[inline(never)]
    fn hca_flush(&mut self) {
        let end = core::mem::take(&mut self.stored_end);
        if self.deferred.load(Ordering::Relaxed) {
            return;
        }
        if end != 0 {
            let half = (end - 1) / BF_SIZE * BF_SIZE;
            for offset in (half..end).step_by(64) {
                self.take_block(offset);
            }
        }
        read(&self.hca).register_flush(self.uar, &self.pending);
        self.pending.clear();
    }
}

impl Register for SoftRegister {
    #[inline(always)]
    fn write64(&mut self, offset: usize, value: [u8; 8]) {
        self.mirror.write64(offset, value);
        if !self.deferred.load(Ordering::Relaxed) {
            self.hca_write(offset, &value);
        }
    }

    #[inline(always)]
    fn write_block(&mut self, offset: usize, block: &[u64; 8]) {
        self.mirror.write_block(offset, block);
        if !self.deferred.load(Ordering::Relaxed) {
            self.hca_write_block(offset);
        }
    }

    fn span(&self) -> usize {
        self.mirror.span()
    }

    /// The block is left for the flush to hand over (`stored_end`): the
    /// unchecked stores are only of whole doorbells of blocks, with no
    /// other write between their blocks and the flush.
    #[inline(always)]
    unsafe fn store_block(&mut self, offset: usize, block: &[u64; 8]) {
        // SAFETY: the caller's contract, and the mirror spans the register.
        unsafe { self.mirror.store_block(offset, block) };
        self.stored_end = offset + 64;
    }

    /// As [`store_block`](Register::store_block).
    #[inline(always)]
    unsafe fn store_wqebb(&mut self, offset: usize, block: &Wqebb) {
        // SAFETY: the caller's contract, and the mirror spans the register.
        unsafe { self.mirror.store_wqebb(offset, block) };
        self.stored_end = offset + 64;
    }

    /// As [`store_block`](Register::store_block), for the `n` blocks.
    #[inline(always)]
    unsafe fn store_blocks_from(&mut self, offset: usize, src: *const u64, n: usize) {
        // SAFETY: the caller's contract, and the mirror spans the register.
        unsafe { self.mirror.store_blocks_from(offset, src, n) };
        self.stored_end = offset + 64 * n;
    }

    #[inline(always)]
    fn flush(&mut self) {
        self.mirror.flush();
        self.hca_flush();
    }
}

#[derive(Debug)]
pub struct SoftIa(u32, Option<alarm::Alarm>);

#[derive(Debug)]
pub struct SoftPd {
    id: u32,
    ia: u32,
}

/// The address of the IA at `address` as a UD peer sees it: RoCE-like,
/// LID 0 and a GRH to its GID.
fn ah_attr(address: &IaAddress) -> AhAttr {
    let grh = Grh { dgid: hca::gid(address), sgid_index: 0, hop_limit: 64, traffic_class: 0, flow_label: 0 };
    AhAttr { dlid: 0, sl: 0, port_num: 1, grh: Some(grh) }
}

/// A QP: its number and its doorbell register's UAR.
#[derive(Debug)]
pub struct SoftQp {
    qpn: u32,
    uar: u32,
}

/// A CQ: its number and its doorbell register's UAR.
#[derive(Debug)]
pub struct SoftCq {
    cqn: u32,
    uar: u32,
}

#[derive(Debug)]
pub struct SoftSrq {
    srqn: u32,
}

#[derive(Debug)]
pub struct SoftListener {
    key: ([u8; 28], u64),
}

/// An incoming connection request.
#[derive(Debug)]
pub struct SoftConnReq(u32);

/// The device, for one entry of the data path or the event path into it:
/// its tables as they are, and each object behind its own lock. A thread
/// that panicked inside the software HCA left the device as it was at the panic,
/// which the next entry takes as it is: the software HCA checks every WQE it
/// reads.
fn read(hca: &RwLock<Hca>) -> RwLockReadGuard<'_, Hca> {
    hca.read().unwrap_or_else(PoisonError::into_inner)
}

/// The device, for one entry of the control path, which changes its
/// tables: no doorbell runs meanwhile.
fn write(hca: &RwLock<Hca>) -> RwLockWriteGuard<'_, Hca> {
    hca.write().unwrap_or_else(PoisonError::into_inner)
}

fn error(ty: ErrorType) -> DatError {
    DatError::of(ty)
}

fn private(data: &[u8]) -> PrivateData {
    let mut out = PrivateData::new();
    let _ = out.extend_from_slice(&data[..data.len().min(MAX_PRIVATE_DATA)]);
    out
}

fn address(n: u8) -> IaAddress {
    let mut a = IaAddress::default();
    a.bytes[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    a.bytes[4..8].copy_from_slice(&[192, 0, 2, n]);
    a
}

impl SoftHca {
    pub fn new() -> SoftHca {
        SoftHca::default()
    }

    /// For benches: doorbell registers make only the MMIO stores a
    /// ConnectX's `Uar` makes, to a stand-in page, and the software HCA executes
    /// nothing until [`release`](Self::release). The doorbell checks are
    /// off from here on.
    pub fn defer_doorbells(&self) {
        self.set_deferred(true);
    }

    /// Defer doorbells ([`defer_doorbells`](Self::defer_doorbells)), or
    /// take them at once again: what was deferred waits for a
    /// [`release`](Self::release).
    pub fn set_deferred(&self, on: bool) {
        self.deferred.store(on, Ordering::Relaxed);
    }

    /// Execute every WQE the doorbell records publish, unchecked.
    pub fn release(&self) {
        read(&self.hca).release();
    }

    /// Doorbells, WQEs and CQEs so far.
    pub fn stats(&self) -> Stats {
        read(&self.hca).stats()
    }

    /// The next WQE the QP with `tag` executes fails with `syndrome`.
    pub fn fail_next(&self, tag: u64, syndrome: u8) -> bool {
        let mut hca = write(&self.hca);
        let Some(qpn) = hca.qp_by_tag(tag) else { return false };
        hca.qps.get_mut(&qpn).map(|q| owned(&mut q.run).fail_next = Some(syndrome)).is_some()
    }

    /// The QP with `tag` fails (a local work queue catastrophic error): it
    /// flushes everything, and its IA hears a QP error event, as verbs'
    /// `IBV_EVENT_QP_FATAL` reports it.
    pub fn force_error(&self, tag: u64) -> bool {
        let hca = write(&self.hca);
        let Some(qpn) = hca.qp_by_tag(tag) else { return false };
        hca.fail_qp(qpn);
        let ia = hca.qps[&qpn].ia;
        hca.push_cm(ia, CmEvent::QpError { tag });
        true
    }

    /// The QP with `tag` vanishes, as a killed peer's does: it stops
    /// answering, and nothing tells its peer.
    pub fn vanish(&self, tag: u64) -> bool {
        let mut hca = write(&self.hca);
        let Some(qpn) = hca.qp_by_tag(tag) else { return false };
        hca.qps.get_mut(&qpn).map(|q| owned(&mut q.run).state = QpState::Vanished).is_some()
    }

    /// The UD QP `passive` accepts the request of the UD QP `active`,
    /// which sent `sent`: each hears the other's address, QP and Q_Key.
    fn ud_accept(hca: &Hca, (active, sent): (u32, PrivateData), passive: u32, data: &[u8]) -> DatResult<()> {
        let (Some(a), Some(p)) = (hca.qps.get(&active).filter(|q| q.ud), hca.qps.get(&passive)) else {
            SoftHca::conn(hca, passive, ConnOutcome::AcceptError, &[]);
            return Ok(());
        };
        let peer = |qp: &hca::Qp, qpn| {
            let address = hca.ias.get(&qp.ia).map(|i| i.address).unwrap_or_default();
            (UdPeer { ah: ah_attr(&address), qpn, qkey: UD_QKEY }, address)
        };
        let ((to_active, passive_address), (to_passive, active_address)) = (peer(p, passive), peer(a, active));
        let event = |tag, peer, remote, passive, private_data| CmEvent::UdEstablished {
            tag,
            peer,
            remote,
            passive,
            private_data,
        };
        hca.push_cm(a.ia, event(a.tag, to_active, passive_address, false, private(data)));
        hca.push_cm(p.ia, event(p.tag, to_passive, active_address, true, sent));
        Ok(())
    }

    fn conn(hca: &Hca, qpn: u32, outcome: ConnOutcome, data: &[u8]) {
        let Some(qp) = hca.qps.get(&qpn) else { return };
        let (ia, tag) = (qp.ia, qp.tag);
        hca.push_cm(ia, CmEvent::Conn { tag, outcome, private_data: private(data) });
    }

    /// `me` leaves the connection: its peer, if still connected to it,
    /// goes to ERROR and hears DISCONNECTED, once.
    fn hang_up(hca: &mut Hca, peer: u32, me: u32) {
        let Some(p) = hca.qps.get_mut(&peer) else { return };
        if p.peer != Some(me) || owned(&mut p.run).state == QpState::Vanished {
            return;
        }
        p.peer = None;
        hca.fail_qp(peer);
        SoftHca::conn(hca, peer, ConnOutcome::Disconnected, &[]);
    }

    /// Connection timers that ran out.
    fn expire(hca: &Hca) {
        let now = hca.now_us();
        let mut deadlines = lock(&hca.deadlines);
        let due: Vec<(u32, ConnOutcome)> =
            deadlines.iter().filter(|(_, (at, _))| *at <= now).map(|(q, (_, o))| (*q, *o)).collect();
        deadlines.retain(|_, (at, _)| *at > now);
        // Let go before failing the QPs, whose locks come before it.
        drop(deadlines);
        for (qpn, outcome) in due {
            // A UD QP's connect only resolves a peer: it fails alone.
            if !hca.qps.get(&qpn).is_some_and(|q| q.ud) {
                hca.fail_qp(qpn);
            }
            SoftHca::conn(hca, qpn, outcome, &[]);
        }
    }

    fn register(&self, owner: UarOwner) -> SoftRegister {
        let mut hca = write(&self.hca);
        let uar = hca.id();
        hca.uars.insert(uar, owner);
        SoftRegister::new(self.hca.clone(), uar, self.deferred.clone())
    }

    /// UAR pages in use: one for each live QP and CQ.
    pub fn uars(&self) -> usize {
        read(&self.hca).uars.len()
    }
}

impl ConnectionManager for SoftHca {
    type Ia = SoftIa;
    type Qp = SoftQp;
    type Listener = SoftListener;
    type ConnReq = SoftConnReq;

    fn listen(&mut self, ia: &mut SoftIa, conn_qual: u64, tag: u64) -> DatResult<SoftListener> {
        let mut hca = write(&self.hca);
        let address = hca.ias.get(&ia.0).ok_or(error(ErrorType::InternalError))?.address;
        let key = (address.bytes, conn_qual);
        if hca.listeners.contains_key(&key) {
            return Err(error(ErrorType::ConnQualInUse));
        }
        hca.listeners.insert(key, (ia.0, tag));
        Ok(SoftListener { key })
    }

    fn unlisten(&mut self, listener: SoftListener) {
        write(&self.hca).listeners.remove(&listener.key);
    }

    fn connect(
        &mut self,
        qp: &mut SoftQp,
        remote: &IaAddress,
        conn_qual: u64,
        private_data: &[u8],
        timeout_us: Option<u64>,
    ) -> DatResult<()> {
        let mut hca = write(&self.hca);
        let q = hca.qps.get_mut(&qp.qpn).ok_or(error(ErrorType::InternalError))?;
        // A UD QP sends all along: a connect only resolves a peer.
        let ud = q.ud;
        if !ud {
            owned(&mut q.run).state = QpState::Connecting;
        }
        let (ia, qpn) = (q.ia, qp.qpn);
        let mut target = remote.bytes;
        target[2..4].fill(0);
        let from = hca.ias[&ia].address;
        if let Some(&(listener_ia, tag)) = hca.listeners.get(&(target, conn_qual)) {
            let id = hca.id();
            let sent = ud.then(|| private(private_data));
            hca.requests.insert(id, hca::Request { active: qpn, ud: sent });
            let event = CmEvent::Request {
                listener: tag,
                request: id,
                remote: from,
                remote_port: u64::from(qpn),
                private_data: private(private_data),
                ud,
            };
            hca.push_cm(listener_ia, event);
        } else if hca.ias.values().any(|i| i.address.bytes == target) {
            // The device is there and nobody listens: the CM rejects.
            if !ud {
                hca.fail_qp(qpn);
            }
            SoftHca::conn(&hca, qpn, ConnOutcome::NonPeerRejected, &[]);
        } else {
            // Nobody answers: the attempt times out.
            let (after, outcome) = match timeout_us {
                Some(t) => (t, ConnOutcome::TimedOut),
                None => (2_000_000, ConnOutcome::Unreachable),
            };
            let at = hca.now_us() + after;
            lock(&hca.deadlines).insert(qpn, (at, outcome));
            hca.rearm(ia);
        }
        Ok(())
    }

    fn accept(&mut self, request: &mut SoftConnReq, qp: &mut SoftQp, private_data: &[u8]) -> DatResult<()> {
        let mut hca = write(&self.hca);
        let req = hca.requests.remove(&request.0).ok_or(error(ErrorType::InvalidState))?;
        let active = req.active;
        if let Some(sent) = req.ud {
            return SoftHca::ud_accept(&hca, (active, sent), qp.qpn, private_data);
        }
        let live = hca.qps.get_mut(&active).is_some_and(|q| owned(&mut q.run).state == QpState::Connecting);
        if !live {
            SoftHca::conn(&hca, qp.qpn, ConnOutcome::AcceptError, &[]);
            return Ok(());
        }
        for (me, peer) in [(active, qp.qpn), (qp.qpn, active)] {
            let q = hca.qps.get_mut(&me).ok_or(error(ErrorType::InternalError))?;
            owned(&mut q.run).state = QpState::Rts;
            q.peer = Some(peer);
        }
        SoftHca::conn(&hca, active, ConnOutcome::Established, private_data);
        SoftHca::conn(&hca, qp.qpn, ConnOutcome::Established, &[]);
        Ok(())
    }

    fn reject(&mut self, request: SoftConnReq, private_data: &[u8]) {
        let mut hca = write(&self.hca);
        let Some(req) = hca.requests.remove(&request.0) else { return };
        if req.ud.is_some() {
            SoftHca::conn(&hca, req.active, ConnOutcome::PeerRejected, private_data);
            return;
        }
        if hca.qps.get_mut(&req.active).is_some_and(|q| owned(&mut q.run).state == QpState::Connecting) {
            hca.fail_qp(req.active);
            SoftHca::conn(&hca, req.active, ConnOutcome::PeerRejected, private_data);
        }
    }

    fn disconnect(&mut self, qp: &mut SoftQp, _graceful: bool) {
        let mut hca = write(&self.hca);
        let Some(q) = hca.qps.get_mut(&qp.qpn) else { return };
        let (state, peer) = (owned(&mut q.run).state, q.peer);
        if state == QpState::Vanished {
            return;
        }
        hca.fail_qp(qp.qpn);
        if matches!(state, QpState::Rts | QpState::Connecting) {
            SoftHca::conn(&hca, qp.qpn, ConnOutcome::Disconnected, &[]);
        }
        if let Some(peer) = peer {
            SoftHca::hang_up(&mut hca, peer, qp.qpn);
        }
    }

    fn poll_cm(&mut self, ia: &mut SoftIa) -> Option<CmEvent<SoftConnReq>> {
        let hca = read(&self.hca);
        hca.progress();
        SoftHca::expire(&hca);
        // The IA's lock is let go before `rearm` takes it again.
        let event = lock(&hca.ias.get(&ia.0)?.events).cm.pop_front();
        let Some(event) = event else {
            hca.rearm(ia.0);
            return None;
        };
        Some(match event {
            CmEvent::Request { listener, request, remote, remote_port, private_data, ud } => {
                CmEvent::Request { listener, request: SoftConnReq(request), remote, remote_port, private_data, ud }
            }
            CmEvent::UdEstablished { tag, peer, remote, passive, private_data } => {
                CmEvent::UdEstablished { tag, peer, remote, passive, private_data }
            }
            CmEvent::Conn { tag, outcome, private_data } => CmEvent::Conn { tag, outcome, private_data },
            CmEvent::QpError { tag } => CmEvent::QpError { tag },
            CmEvent::CqError { tag } => CmEvent::CqError { tag },
            CmEvent::PortDown => CmEvent::PortDown,
            CmEvent::Catastrophic => CmEvent::Catastrophic,
        })
    }
}

impl Control for SoftHca {
    type Ia = SoftIa;
    type Pd = SoftPd;
    type Mr = u32;

    fn ia_open(&mut self, name: &[u8]) -> DatResult<(SoftIa, IaAttr)> {
        let digit = match name.strip_prefix(IA_NAME_PREFIX) {
            Some([d]) if d.is_ascii_digit() => d - b'0',
            _ => return Err(error(ErrorType::ProviderNotFound)),
        };
        let mut hca = write(&self.hca);
        let id = hca.id();
        let ia_address = address(10 + digit);
        // Without a descriptor the IA still works; only an event loop
        // cannot wait on it.
        let alarm = alarm::Alarm::new();
        hca.ias.insert(
            id,
            hca::Ia { address: ia_address, alarm: alarm.as_ref().map(alarm::Alarm::fds), ..Default::default() },
        );
        let mut adapter_name = [0u8; 32];
        adapter_name[..name.len().min(31)].copy_from_slice(&name[..name.len().min(31)]);
        let mut vendor_name = [0u8; 32];
        vendor_name[..4].copy_from_slice(b"udat");
        // Object limits of a ConnectX-5 (`ibv_devinfo -v`); nothing in the
        // software HCA is sized by them.
        let attr = IaAttr {
            adapter_name,
            vendor_name,
            hardware_version_major: 0,
            hardware_version_minor: 0,
            firmware_version_major: 0,
            firmware_version_minor: 0,
            ia_address,
            max_eps: 1 << 18,
            max_dto_per_ep: 1024,
            max_rdma_read_per_ep_in: 16,
            max_rdma_read_per_ep_out: 16,
            max_evds: 1 << 24,
            max_evd_qlen: 4096,
            max_iov_segments_per_dto: 16,
            max_lmrs: 1 << 24,
            max_lmr_block_size: 1 << 40,
            max_lmr_virtual_address: u64::MAX,
            max_pzs: 1 << 24,
            max_message_size: MAX_MESSAGE,
            max_rdma_size: MAX_MESSAGE,
            max_rmrs: 1 << 24,
            max_srqs: 1 << 23,
            max_recv_per_srq: 4095,
            max_private_data_size: PRIVATE_DATA,
            qos_supported: Qos::BEST_EFFORT,
            rmr_supported: true,
            srq_ep_pz_difference_supported: false,
            local_read_implied: true,
            atomics: true,
            ud: true,
        };
        Ok((SoftIa(id, alarm), attr))
    }

    fn ia_close(&mut self, ia: SoftIa) {
        write(&self.hca).ias.remove(&ia.0);
    }

    fn pd_alloc(&mut self, ia: &mut SoftIa) -> DatResult<SoftPd> {
        let mut hca = write(&self.hca);
        let id = hca.id();
        hca.pds.insert(id);
        Ok(SoftPd { id, ia: ia.0 })
    }

    fn pd_free(&mut self, pd: SoftPd) {
        write(&self.hca).pds.remove(&pd.id);
    }

    fn mr_register(
        &mut self,
        pd: &SoftPd,
        address: u64,
        length: u64,
        privileges: MemPriv,
    ) -> DatResult<Registration<u32>> {
        if !region::mapped(address, length) {
            return Err(error(ErrorType::ProtectionViolation));
        }
        let mut hca = write(&self.hca);
        let key = hca.id() << 8;
        hca.mrs.insert(key, hca::Mr { pd: pd.id, addr: address, len: length, access: privileges });
        Ok(Registration { mr: key, lkey: key, rkey: key, address, length })
    }

    fn mr_deregister(&mut self, mr: u32) {
        write(&self.hca).mrs.remove(&mr);
    }
}

impl Device for SoftHca {
    type Ia = SoftIa;
    type Qp = SoftQp;
    type Cm = Self;
    type Control = Self;
    type Pd = SoftPd;
    type Mr = u32;
    /// The window's mkey index.
    type Mw = u32;
    type Cq = SoftCq;
    type Srq = SoftSrq;
    /// The software HCA keeps nothing of an address handle: the vector
    /// is all a send needs.
    type Ah = ();
    type Register = SoftRegister;
    type SendSlots = Box<[SendSlot]>;
    type RecvSlots = Box<[RecvSlot]>;

    fn cm(&mut self) -> &mut SoftHca {
        self
    }

    fn cm_qp(qp: &mut SoftQp) -> &mut SoftQp {
        qp
    }

    fn control(&mut self) -> &mut SoftHca {
        self
    }

    /// Each QP rings a register of its own, and the device is behind its
    /// locks.
    const SHARED_QUEUES: bool = true;

    /// The vector of a RoCE address: it must have a GRH (a UD send
    /// without one is dropped on Ethernet), from GID index 0, the one GID
    /// of the software HCA's port.
    fn ah_create(&mut self, pd: &SoftPd, attr: &AhAttr) -> DatResult<((), AddressVector)> {
        let live = read(&self.hca).pds.contains(&pd.id);
        match attr.grh {
            Some(g) if live && g.sgid_index == 0 => Ok(((), AddressVector::of(attr))),
            _ => Err(error(ErrorType::InvalidParameter)),
        }
    }

    fn mw_alloc(&mut self, pd: &SoftPd) -> DatResult<(u32, u32)> {
        let mut hca = write(&self.hca);
        let index = hca.id();
        hca.mws.insert(index, hca::Mw { pd: pd.id, type2: false, binding: Default::default() });
        Ok((index, index << 8))
    }

    fn mw_alloc_for_ep(&mut self, pd: &SoftPd) -> DatResult<(u32, u32)> {
        let mut hca = write(&self.hca);
        let index = hca.id();
        hca.mws.insert(index, hca::Mw { pd: pd.id, type2: true, binding: Default::default() });
        Ok((index, index << 8))
    }

    fn mw_free(&mut self, mw: u32) {
        write(&self.hca).mws.remove(&mw);
    }

    fn cq_create(&mut self, ia: &mut SoftIa, min_entries: u32, tag: u64) -> DatResult<CqParts<Self>> {
        let cnt = (min_entries.max(1) * 2).next_power_of_two().max(64);
        let mut buf = Region::new(cnt as usize * 64);
        for i in 0..cnt as usize {
            buf.write(i * 64 + 63, &[hca::cqe_op::INVALID << 4]);
        }
        let dbrec = Region::new(64);
        let cqn = write(&self.hca).id();
        let uar = self.register(UarOwner::Cq(cqn));
        let uar_id = uar.uar;
        // What mlx5dv_init_obj reports for a CQ of a ConnectX.
        let dv = DvCq {
            buf: buf.as_ptr(),
            dbrec: dbrec.as_ptr().cast(),
            cqe_cnt: cnt,
            cqe_size: 64,
            cq_uar: uar.page_ptr(),
            cqn,
            comp_mask: 0,
        };
        // SAFETY: the regions move into the HCA's CQ, which outlives the
        // data path's ring: the backend drops the ring before it destroys
        // the CQ.
        let geometry = match unsafe { dv::completion_queue(&dv, uar) } {
            Ok(geometry) => geometry,
            Err(_) => {
                write(&self.hca).uars.remove(&uar_id);
                return Err(error(ErrorType::InternalError));
            }
        };
        let ring = hca::CqRing::new(buf).into();
        write(&self.hca).cqs.insert(cqn, hca::Cq { ia: ia.0, tag, cnt, dbrec, ring });
        Ok(CqParts { cq: SoftCq { cqn, uar: uar_id }, geometry })
    }

    /// The CQ and its UAR page go together.
    fn cq_destroy(&mut self, cq: SoftCq) {
        let mut hca = write(&self.hca);
        hca.remove_cq(cq.cqn);
        hca.uars.remove(&cq.uar);
    }

    fn cq_event(&mut self, ia: &mut SoftIa) -> Option<u32> {
        let hca = read(&self.hca);
        let event = lock(&hca.ias.get(&ia.0)?.events).cq_events.pop_front();
        if event.is_none() {
            hca.rearm(ia.0);
        }
        event
    }

    fn qp_create(&mut self, spec: &QpSpec<'_, Self>) -> DatResult<QpParts<Self>> {
        let sq_cnt = spec.sq_wqebbs;
        let sq = Region::new(sq_cnt as usize * 64);
        let dbrec = Region::new(64);
        let rq = spec.srq.is_none().then(|| {
            let cnt = spec.max_recv_wr.next_power_of_two();
            let stride = (spec.max_recv_sge * 16).next_power_of_two();
            (Region::new((cnt * stride) as usize), cnt, stride)
        });
        let qpn = write(&self.hca).id();
        let bf = self.register(UarOwner::Qp(qpn));
        let uar = bf.uar;
        // What mlx5dv_init_obj reports for a QP of a ConnectX.
        let no_rq = DvWorkQueue { buf: std::ptr::null_mut(), wqe_cnt: 0, stride: 0 };
        let dv = DvQp {
            dbrec: dbrec.as_ptr().cast(),
            sq: DvWorkQueue { buf: sq.as_ptr(), wqe_cnt: sq_cnt, stride: 64 },
            rq: rq.as_ref().map_or(no_rq, |(buf, cnt, stride)| DvWorkQueue {
                buf: buf.as_ptr(),
                wqe_cnt: *cnt,
                stride: *stride,
            }),
            bf: DvBlueFlame { reg: bf.page_ptr(), size: BF_SIZE as u32 },
            comp_mask: 0,
            uar_mmap_offset: 0,
            tirn: 0,
            tisn: 0,
            rqn: 0,
            sqn: 0,
            tir_icm_addr: 0,
        };
        // SAFETY: the regions move into the HCA's QP, which the backend
        // destroys only after dropping its queues.
        let (geometry, rq_geometry) = unsafe { (dv::send_queue(&dv, qpn, bf), dv::recv_queue(&dv)) };
        let (Ok(geometry), Ok(rq_geometry)) = (geometry, rq_geometry) else {
            write(&self.hca).uars.remove(&uar);
            return Err(error(ErrorType::InternalError));
        };
        let rq_parts = rq_geometry.map(|g| {
            let cnt = g.wqe_cnt as usize;
            (g, vec![RecvSlot::default(); cnt].into_boxed_slice())
        });
        let pd = spec.pd;
        // A UD QP is made ready to send (INIT, RTR, RTS in one go, as
        // rdma-core's consumers of `IBV_QPT_UD` do at creation).
        let mut run = hca::QpRun::default();
        if spec.ud {
            run.state = QpState::Rts;
        }
        write(&self.hca).qps.insert(
            qpn,
            hca::Qp {
                ia: pd.ia,
                pd: pd.id,
                tag: spec.tag,
                send_cq: spec.send_cq.map(|c| c.cqn),
                recv_cq: spec.recv_cq.map(|c| c.cqn),
                srq: spec.srq.map(|s| s.srqn),
                sq,
                sq_cnt,
                rq,
                dbrec,
                peer: None,
                ud: spec.ud,
                run: std::sync::Mutex::new(run),
            },
        );
        Ok(QpParts {
            qp: SoftQp { qpn, uar },
            sq: geometry,
            send_slots: vec![SendSlot::EMPTY; sq_cnt as usize].into_boxed_slice(),
            rq: rq_parts,
        })
    }

    fn qp_destroy(&mut self, qp: SoftQp) {
        let mut hca = write(&self.hca);
        let Some(gone) = hca.remove_qp(qp.qpn) else { return };
        lock(&hca.deadlines).remove(&qp.qpn);
        // The peer of a connected QP hears the disconnect.
        if let Some(peer) = gone.peer {
            SoftHca::hang_up(&mut hca, peer, qp.qpn);
        }
        hca.uars.remove(&qp.uar);
    }

    fn qp_reset(&mut self, qp: &mut SoftQp) -> DatResult<()> {
        let mut hca = write(&self.hca);
        let q = hca.qps.get_mut(&qp.qpn).ok_or(error(ErrorType::InternalError))?;
        q.peer = None;
        let ud = q.ud;
        let run = owned(&mut q.run);
        // A UD QP is made ready again, as at its creation.
        run.state = if ud { QpState::Rts } else { QpState::Init };
        (run.exec, run.seen, run.rq_next, run.bf_next) = (0, 0, 0, 0);
        run.after_umr = false;
        Ok(())
    }

    fn qpn(&self, qp: &SoftQp) -> u32 {
        qp.qpn
    }

    fn srq_create(&mut self, pd: &SoftPd, attr: &SrqAttr) -> DatResult<SrqParts<Self>> {
        let cnt = (attr.max_recv_dtos + 1).next_power_of_two();
        let stride = (16 * (1 + attr.max_recv_iov.max(1))).next_power_of_two();
        let buf = Region::new((cnt * stride) as usize);
        let dbrec = Region::new(64);
        let srqn = write(&self.hca).id();
        // What mlx5dv_init_obj reports for an SRQ of a ConnectX, whose WQE
        // count is the one it was created with.
        let dv = DvSrq {
            buf: buf.as_ptr(),
            dbrec: dbrec.as_ptr().cast(),
            stride,
            head: 0,
            tail: cnt - 1,
            comp_mask: 0,
            srqn,
        };
        // SAFETY: the regions move into the HCA's SRQ, destroyed after the
        // data path drops its ring.
        let geometry = unsafe { dv::shared_recv_queue(&dv, cnt) }.map_err(|_| error(ErrorType::InternalError))?;
        write(&self.hca).srqs.insert(srqn, hca::Srq { pd: pd.id, buf, stride, dbrec, next: Default::default() });
        Ok(SrqParts {
            srq: SoftSrq { srqn },
            srqn,
            geometry,
            slots: vec![RecvSlot::default(); cnt as usize].into_boxed_slice(),
        })
    }

    fn srq_destroy(&mut self, srq: SoftSrq) {
        write(&self.hca).srqs.remove(&srq.srqn);
    }

    fn now_us(&mut self) -> u64 {
        read(&self.hca).now_us()
    }

    /// The clock ConnectX's control path reads: what an empty poll pays
    /// for it is what it pays on hardware.
    fn coarse_now_us(&mut self) -> u64 {
        udat_wake::coarse_now_us()
    }

    fn block(&mut self, ia: &mut SoftIa, timeout_us: Option<u64>) -> Wake {
        let ready = |hca: &Hca| {
            hca.progress();
            SoftHca::expire(hca);
            hca.ias.get(&ia.0).is_some_and(|i| {
                let events = lock(&i.events);
                !events.cm.is_empty() || !events.cq_events.is_empty()
            })
        };
        let wait = {
            let hca = read(&self.hca);
            if ready(&hca) {
                return Wake::Activity;
            }
            let now = hca.now_us();
            let next = lock(&hca.deadlines).values().map(|(at, _)| at.saturating_sub(now)).min();
            match (timeout_us, next) {
                (Some(t), Some(d)) => Some((t.min(d), d < t)),
                (Some(t), None) => Some((t, false)),
                (None, Some(d)) => Some((d, true)),
                // Nothing can happen in a single-threaded software HCA: a wait
                // with no limit and no timer would never end.
                (None, None) => None,
            }
        };
        let Some((us, timer)) = wait else { return Wake::Timeout };
        std::thread::sleep(Duration::from_micros(us));
        let hca = read(&self.hca);
        if ready(&hca) || timer {
            Wake::Activity
        } else {
            Wake::Timeout
        }
    }

    fn wait_fds(&self, ia: &SoftIa) -> WaitFds {
        let mut fds = WaitFds::NONE;
        if let Some(alarm) = &ia.1 {
            fds.0[..2].copy_from_slice(&alarm.fds().both());
        }
        fds
    }
}
