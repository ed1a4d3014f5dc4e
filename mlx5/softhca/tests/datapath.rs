//! The mlx5 data path on the software HCA, below the DAT layer: the send
//! ring across wrap-around and when full, batched and BlueFlame
//! doorbells, immediate data and atomics, the CQEs of a destroyed QP, and
//! doorbells on both ends of a connection from two threads.
//! The software HCA checks every doorbell as it executes it, and every range a
//! WQE names: a bad one is an error CQE, even one that wraps past 2^64.

use std::alloc::{alloc, dealloc, Layout};
use std::ptr::NonNull;

use proptest::prelude::*;
use udat_core::backend::{
    Backend, CmEvent, Completion, ConnOutcome, ConnectionManager, Control, CqHead, Cqs, Grh, HoldsQp, Listener,
    QpConfig, QpType, Qps, Registration, RequestOp, SendWr, Sge, UdDest, Untaken,
};
use udat_core::types::{CompletionFlags, DtoOp, DtoStatus, IaAttr, MemPriv, RmrTriplet, SrqAttr};
use udat_mlx5::testing::Recorder;

/// Every privilege, the atomic target's included.
const ALL: MemPriv = MemPriv(MemPriv::ALL.0 | MemPriv::REMOTE_ATOMIC.0);
use udat_mlx5::backend::{self, Qp};
use udat_mlx5::cq::CompletionQueue;
use udat_mlx5::cqe::{Cqe, CqeOpcode, Syndrome};
use udat_mlx5::device::{Device, QpSpec};
use udat_mlx5::doorbell::Register;
use udat_mlx5::mem::DmaBuf;
use udat_mlx5::rq::RecvQueue;
use udat_mlx5::sq::{Op, Remote, SendQueue, SendSlot, SqGeometry};
use udat_mlx5::wqe::{fm_ce_se, opcode, WQEBB_BYTES};
use udat_mlx5::Mlx5;
use udat_softhca::{SoftHca, SoftPd, SoftRegister};

type Sq = SendQueue<SoftRegister, Box<[SendSlot]>>;
type Rq = RecvQueue<Box<[udat_mlx5::rq::RecvSlot]>>;
type Cq = CompletionQueue<SoftRegister>;

/// Two connected QPs on the software HCA, driven through the data path's own
/// queues, and one registered buffer on each side.
struct Pair {
    hca: SoftHca,
    a: (Sq, Rq),
    b: (Sq, Rq),
    cq_a: Cq,
    cq_b: Cq,
    mem_a: Vec<u8>,
    mem_b: Vec<u8>,
    key_a: u32,
    key_b: u32,
    pd: SoftPd,
}

impl Pair {
    fn new(send_wqebbs: u32) -> Pair {
        Pair::on(SoftHca::new(), send_wqebbs)
    }

    /// A pair on a device that other pairs may share.
    fn on(mut hca: SoftHca, send_wqebbs: u32) -> Pair {
        let (mut ia, attr) = hca.ia_open(b"mlx5_soft0").unwrap();
        let pd = hca.pd_alloc(&mut ia).unwrap();
        let (mut cqs, mut qps) = (Vec::new(), Vec::new());
        for tag in [1u64, 2] {
            let cq = hca.cq_create(&mut ia, 256, 0).unwrap();
            let spec = QpSpec::<SoftHca> {
                pd: &pd,
                send_cq: Some(&cq.cq),
                recv_cq: Some(&cq.cq),
                srq: None,
                sq_wqebbs: send_wqebbs,
                max_recv_wr: 64,
                max_recv_sge: 4,
                max_rdma_read_in: 4,
                max_rdma_read_out: 4,
                tag,
                ud: false,
            };
            let parts = hca.qp_create(&spec).unwrap();
            let sq = SendQueue::new(parts.sq, parts.send_slots).unwrap();
            let (g, slots) = parts.rq.unwrap();
            qps.push((parts.qp, sq, RecvQueue::new(g, slots).unwrap()));
            cqs.push(CompletionQueue::new(cq.geometry).unwrap());
        }
        let (mut qa, mut qb) = (qps.remove(0), qps.remove(0));
        let here = attr.ia_address;
        let listener = hca.listen(&mut ia, 7, 99).unwrap();
        hca.connect(&mut qa.0, &here, 7, b"hi", None).unwrap();
        let Some(CmEvent::Request { mut request, .. }) = hca.poll_cm(&mut ia) else { panic!("no request") };
        hca.accept(&mut request, &mut qb.0, b"").unwrap();
        for _ in 0..2 {
            assert!(matches!(hca.poll_cm(&mut ia), Some(CmEvent::Conn { outcome: ConnOutcome::Established, .. })));
        }
        hca.unlisten(listener);
        let (mem_a, mem_b) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
        let key_a = hca.mr_register(&pd, mem_a.as_ptr() as u64, mem_a.len() as u64, ALL).unwrap().lkey;
        let key_b = hca.mr_register(&pd, mem_b.as_ptr() as u64, mem_b.len() as u64, ALL).unwrap().lkey;
        let cq_b = cqs.pop().unwrap();
        let cq_a = cqs.pop().unwrap();
        Pair { hca, a: (qa.1, qa.2), b: (qb.1, qb.2), cq_a, cq_b, mem_a, mem_b, key_a, key_b, pd }
    }

    fn a_seg(&self, offset: usize, len: u32) -> Sge {
        Sge { addr: self.mem_a.as_ptr() as u64 + offset as u64, length: len, lkey: self.key_a }
    }

    fn b_seg(&self, offset: usize, len: u32) -> Sge {
        Sge { addr: self.mem_b.as_ptr() as u64 + offset as u64, length: len, lkey: self.key_b }
    }

    fn b_remote(&self, offset: usize) -> Remote {
        Remote { addr: self.mem_b.as_ptr() as u64 + offset as u64, rkey: self.key_b }
    }

    /// Post one signalled WQE on A, ring, and take its CQE.
    fn complete(&mut self, op: Op, sges: &[Sge]) -> Cqe {
        self.a.0.post(op, sges, SIGNALLED, slot(0, DtoOp::RdmaWrite)).unwrap();
        self.a.0.ring();
        let cqe = self.cq_a.poll().expect("the WQE completed");
        self.a.0.retire(cqe.wqe_counter).expect("the CQE names the WQE");
        cqe
    }
}

fn slot(cookie: u64, op: DtoOp) -> SendSlot {
    SendSlot { cookie, length: 0, op, flags: CompletionFlags::DEFAULT, bbs: 0 }
}

const SIGNALLED: u8 = fm_ce_se::CQ_UPDATE;

/// 2 KiB below 2^64: a 4 KiB range from here wraps past the end of the
/// address space.
const NEAR_END: u64 = u64::MAX - 2047;

/// A remote range past 2^64 lies outside every registration: an RDMA
/// write, an RDMA read or an atomic there completes with a remote access
/// error, as a bad rkey does, and both QPs go to ERROR: the requester
/// flushes its next WQE, the responder its receive. The device, and every
/// other connection on it, carry on.
#[test]
fn a_remote_range_past_2_64_is_a_remote_access_error() {
    let hca = SoftHca::new();
    let mut other = Pair::on(hca.clone(), 64);
    let ops: [fn(u32) -> Op; 3] = [
        |rkey| Op::Write(Remote { addr: NEAR_END, rkey }),
        |rkey| Op::Read(Remote { addr: NEAR_END, rkey }),
        // The last aligned 8 bytes: their end is 2^64.
        |rkey| Op::FetchAdd { remote: Remote { addr: u64::MAX - 7, rkey }, add: 1 },
    ];
    for op in ops {
        let mut p = Pair::on(hca.clone(), 64);
        let r = p.b_seg(0, 64);
        p.b.1.post(&[r], 9).unwrap();
        let op = op(p.key_b);
        let len = if matches!(op, Op::FetchAdd { .. }) { 8 } else { 4096 };
        let s = p.a_seg(0, len);
        let cqe = p.complete(op, &[s]);
        assert_eq!((cqe.opcode, cqe.syndrome), (CqeOpcode::ReqErr, Syndrome::RemoteAccess), "{op:?}");
        let next = p.complete(Op::Write(p.b_remote(0)), &[p.a_seg(0, 8)]);
        assert_eq!((next.opcode, next.syndrome), (CqeOpcode::ReqErr, Syndrome::WrFlush), "after {op:?}");
        let recv = p.cq_b.poll().expect("the responder flushed its receive");
        assert_eq!((recv.opcode, recv.syndrome), (CqeOpcode::RespErr, Syndrome::WrFlush), "after {op:?}");
    }
    other.mem_a[..8].copy_from_slice(b"carry on");
    let cqe = other.complete(Op::Write(other.b_remote(0)), &[other.a_seg(0, 8)]);
    assert_eq!(cqe.opcode, CqeOpcode::Req);
    assert_eq!(&other.mem_b[..8], b"carry on");
}

/// A local segment past 2^64 lies outside its lkey's registration: the
/// requester's gather (a write) and scatter (a read) complete with a
/// local protection error, and a receive's scatter with one at the
/// responder.
#[test]
fn a_local_segment_past_2_64_is_a_local_protection_error() {
    for read in [false, true] {
        let mut p = Pair::new(64);
        let remote = p.b_remote(0);
        let op = if read { Op::Read(remote) } else { Op::Write(remote) };
        let s = Sge { addr: NEAR_END, length: 4096, lkey: p.key_a };
        let cqe = p.complete(op, &[s]);
        assert_eq!((cqe.opcode, cqe.syndrome), (CqeOpcode::ReqErr, Syndrome::LocalProtection), "read: {read}");
    }
    let mut p = Pair::new(64);
    let r = Sge { addr: NEAR_END, length: 4096, lkey: p.key_b };
    p.b.1.post(&[r], 1).unwrap();
    let cqe = p.complete(Op::Send, &[p.a_seg(0, 64)]);
    assert_eq!(cqe.opcode, CqeOpcode::ReqErr);
    let recv = p.cq_b.poll().expect("the receive completed");
    assert_eq!((recv.opcode, recv.syndrome), (CqeOpcode::RespErr, Syndrome::LocalProtection));
}

/// A WQE longer than the largest message the device reports fails with
/// a local length error (ibv_poll_cq(3), IBV_WC_LOC_LEN_ERR).
#[test]
fn a_message_past_the_device_maximum_is_a_local_length_error() {
    let mut p = Pair::new(64);
    let mem = vec![0u8; 1 << 20];
    let reg = p.hca.mr_register(&p.pd, mem.as_ptr() as u64, mem.len() as u64, ALL).unwrap();
    // Sixteen times the same MiB: 16 MiB, twice the 8 MiB maximum.
    let s = Sge { addr: mem.as_ptr() as u64, length: 1 << 20, lkey: reg.lkey };
    let cqe = p.complete(Op::Write(p.b_remote(0)), &[s; 16]);
    assert_eq!((cqe.opcode, cqe.syndrome), (CqeOpcode::ReqErr, Syndrome::LocalLength));
}

/// A zero-length RDMA write or read names no memory: neither its address
/// nor its key is checked (IBA C9-88), and address 0 is never touched.
#[test]
fn a_zero_length_rdma_at_address_0_completes() {
    let mut p = Pair::new(64);
    for op in [Op::Write(Remote { addr: 0, rkey: 0 }), Op::Read(Remote { addr: 0, rkey: 0 })] {
        let cqe = p.complete(op, &[]);
        assert_eq!((cqe.opcode, cqe.byte_cnt), (CqeOpcode::Req, 0), "{op:?}");
    }
}

#[test]
fn send_and_write_with_immediate_deliver_the_immediate() {
    let mut p = Pair::new(64);
    let (r0, r1) = (p.b_seg(0, 64), p.b_seg(64, 64));
    p.b.1.post(&[r0], 10).unwrap();
    p.b.1.post(&[r1], 11).unwrap();
    p.mem_a[..8].copy_from_slice(b"immdata!");
    let s = p.a_seg(0, 8);
    p.a.0.post(Op::SendImm(0xdead_beef), &[s], SIGNALLED, slot(1, DtoOp::Send)).unwrap();
    let remote = p.b_remote(4096);
    p.a.0.post(Op::WriteImm(remote, 0x1234), &[s], SIGNALLED, slot(2, DtoOp::RdmaWrite)).unwrap();
    p.a.0.ring();

    let recv = p.cq_b.poll().expect("the send arrived");
    assert_eq!((recv.opcode, recv.imm, recv.byte_cnt), (CqeOpcode::RespSendImm, 0xdead_beef, 8));
    let write = p.cq_b.poll().expect("the write with immediate arrived");
    assert_eq!((write.opcode, write.imm, write.byte_cnt), (CqeOpcode::RespWriteImm, 0x1234, 8));
    assert_eq!((p.b.1.complete(), p.b.1.complete()), (Some(10), Some(11)));
    assert_eq!(&p.mem_b[..8], b"immdata!");
    assert_eq!(&p.mem_b[4096..4104], b"immdata!");
    for cookie in [1, 2] {
        let cqe = p.cq_a.poll().unwrap();
        assert_eq!(cqe.opcode, CqeOpcode::Req);
        assert_eq!(p.a.0.retire(cqe.wqe_counter).map(|(s, n)| (s.cookie, n)), Some((cookie, 1)));
    }
    // One doorbell for both WQEs: the 8-byte write, not BlueFlame.
    assert_eq!((p.hca.stats().doorbells, p.hca.stats().blueflame), (1, 0));
}

/// A send with the solicited bit raises it in the responder's CQE (the
/// bit `DAT_COMPLETION_SOLICITED_WAIT_FLAG` becomes); one without does not.
#[test]
fn the_solicited_bit_reaches_the_responder() {
    let mut p = Pair::new(64);
    for cookie in 0..2 {
        let r = p.b_seg(cookie as usize * 64, 64);
        p.b.1.post(&[r], cookie).unwrap();
    }
    let s = p.a_seg(0, 8);
    p.a.0.post(Op::Send, &[s], SIGNALLED | fm_ce_se::SOLICITED, slot(1, DtoOp::Send)).unwrap();
    p.a.0.post(Op::Send, &[s], SIGNALLED, slot(2, DtoOp::Send)).unwrap();
    p.a.0.ring();
    let solicited: Vec<bool> = (0..2).map(|_| p.cq_b.poll().expect("a receive").solicited).collect();
    assert_eq!(solicited, vec![true, false]);
}

/// One end of a [`Pair`], for the thread that drives it.
struct End<'a> {
    queues: &'a mut (Sq, Rq),
    cq: &'a mut Cq,
    source: Sge,
    remote: Remote,
}

// SAFETY: the queues' memory is the software HCA's, which outlives the
// threads; an end's queues are reached only through it, by the one
// thread it goes to, and the HCA takes its own locks.
unsafe impl Send for End<'_> {}

/// The two ends of one connection ring their doorbells from two threads
/// at once. Each doorbell's WQEs reach both QPs (a send takes a receive
/// of the peer's and writes its CQE into the peer's CQ, which the other
/// thread polls meanwhile), so both threads take both QPs' locks: in one
/// order, whichever end rings, or the two would wait on each other for
/// ever. Every WQE completes once, in order, and every send lands.
#[test]
fn both_ends_of_a_connection_ring_from_two_threads_at_once() {
    const SENDS: u64 = 32;
    const WRITES: u64 = 10_000;
    let mut p = Pair::new(64);
    let (a_to_b, b_to_a) = (p.b_remote(8192), Remote { addr: p.mem_a.as_ptr() as u64 + 8192, rkey: p.key_a });
    let (from_a, from_b) = (p.a_seg(0, 8), p.b_seg(0, 8));
    // Each side's receives up front, one 8-byte buffer each, so that no
    // send waits for one.
    for i in 0..SENDS {
        let at = 1024 + i as usize * 8;
        let (ra, rb) = (p.a_seg(at, 8), p.b_seg(at, 8));
        p.a.1.post(&[ra], i).unwrap();
        p.b.1.post(&[rb], i).unwrap();
    }
    let ends = [
        End { queues: &mut p.a, cq: &mut p.cq_a, source: from_a, remote: a_to_b },
        End { queues: &mut p.b, cq: &mut p.cq_b, source: from_b, remote: b_to_a },
    ];
    std::thread::scope(|s| {
        for end in ends {
            s.spawn(move || {
                // The whole end moves to the thread, not its fields one
                // by one (which are not `Send`).
                let end = end;
                let End { queues: (sq, rq), cq, source, remote } = end;
                let mut received = Vec::new();
                for i in 0..SENDS + WRITES {
                    let op = if i < SENDS { Op::Send } else { Op::Write(remote) };
                    sq.post(op, &[source], SIGNALLED, slot(i, DtoOp::Send)).unwrap();
                    sq.ring();
                    // Its own CQE, and the peer's sends' as they come.
                    loop {
                        let Some(cqe) = cq.poll() else { continue };
                        cq.update_ci();
                        if cqe.opcode == CqeOpcode::RespSend {
                            received.push(rq.complete().expect("a receive completed"));
                            continue;
                        }
                        assert_eq!(cqe.opcode, CqeOpcode::Req, "WQE {i}: {cqe:?}");
                        assert_eq!(sq.retire(cqe.wqe_counter).map(|(s, n)| (s.cookie, n)), Some((i, 1)));
                        break;
                    }
                }
                while received.len() < SENDS as usize {
                    if let Some(cqe) = cq.poll() {
                        cq.update_ci();
                        assert_eq!(cqe.opcode, CqeOpcode::RespSend, "{cqe:?}");
                        received.push(rq.complete().expect("a receive completed"));
                    }
                }
                assert_eq!(received, (0..SENDS).collect::<Vec<_>>(), "each receive once, in order");
                assert!(sq.is_idle());
            });
        }
    });
    assert!(p.cq_a.poll().is_none() && p.cq_b.poll().is_none(), "a CQE too many");
    assert_eq!(p.hca.stats().wqes, 2 * (SENDS + WRITES));
}

#[test]
fn compare_and_swap_and_fetch_and_add_return_the_old_value() {
    let mut p = Pair::new(64);
    p.mem_b[8..16].copy_from_slice(&5u64.to_ne_bytes());
    let remote = p.b_remote(8);
    let result = p.a_seg(0, 8);
    let step = |p: &mut Pair, op: Op| {
        p.a.0.post(op, &[result], SIGNALLED, slot(0, DtoOp::RdmaRead)).unwrap();
        p.a.0.ring();
        let cqe = p.cq_a.poll().expect("the atomic completed");
        assert_eq!((cqe.opcode, cqe.byte_cnt), (CqeOpcode::Req, 8), "{cqe:?}");
        p.a.0.retire(cqe.wqe_counter).unwrap();
        let old = u64::from_ne_bytes(p.mem_a[..8].try_into().unwrap());
        let now = u64::from_ne_bytes(p.mem_b[8..16].try_into().unwrap());
        (old, now)
    };
    assert_eq!(step(&mut p, Op::FetchAdd { remote, add: 3 }), (5, 8));
    assert_eq!(step(&mut p, Op::CompareSwap { remote, compare: 8, swap: 42 }), (8, 42));
    assert_eq!(step(&mut p, Op::CompareSwap { remote, compare: 1, swap: 7 }), (42, 42));
}

/// Three laps of a 16-WQEBB ring with WQEs of one to four WQEBBs, inline
/// and gathered, each doorbell checked by the software HCA; every CQE retires
/// exactly the WQE it names.
#[test]
fn the_send_ring_wraps_three_times() {
    let depth = 16u32;
    let mut p = Pair::new(depth);
    let mut posted = 0u64;
    let mut bbs_total = 0u32;
    while bbs_total < 3 * depth {
        let n = 1 + posted as usize % 4;
        let before = p.a.0.free_bbs();
        let remote = p.b_remote(posted as usize * 8 % 4096);
        if posted % 2 == 0 {
            // Inline: 1..=196 bytes.
            let len = 1 + (posted as u32 * 37) % 196;
            let s = p.a_seg(0, len);
            // SAFETY: `s` lies in mem_a, registered and alive.
            unsafe { p.a.0.post_inline(Op::Write(remote), &[s], len, SIGNALLED, slot(posted, DtoOp::RdmaWrite)) }
                .unwrap();
        } else {
            let sges: Vec<Sge> = (0..n * 3).map(|i| p.a_seg(i * 8, 8)).collect();
            p.a.0.post(Op::Write(remote), &sges, SIGNALLED, slot(posted, DtoOp::RdmaWrite)).unwrap();
        }
        bbs_total += u32::from(before - p.a.0.free_bbs());
        p.a.0.ring();
        let cqe = p.cq_a.poll().expect("the write completed");
        assert_eq!(p.a.0.retire(cqe.wqe_counter).map(|(s, n)| (s.cookie, n)), Some((posted, 1)));
        p.cq_a.update_ci();
        posted += 1;
    }
    assert!(p.a.0.is_idle());
    assert!(p.a.0.pi() as u32 >= 3 * depth, "pi {}", p.a.0.pi());
    let stats = p.hca.stats();
    assert_eq!(stats.blueflame + stats.doorbells, posted);
    assert!(stats.blueflame > 0, "{stats:?}");
}

/// Requests kept once (`SendQueue::keep_wqe`, `keep_inline`) and posted
/// again round the ring three times execute on the software HCA, which
/// checks every doorbell and WQE, as the lanes' own: each RDMA write
/// lands its bytes of the moment (an inline one copies them at its post),
/// each CQE names its WQE and each slot its post's cookie.
#[test]
fn kept_requests_post_again_round_the_ring() {
    let depth = 16u32;
    let mut p = Pair::new(depth);
    let gathered =
        p.a.0.keep_wqe(opcode::RDMA_WRITE, Some(p.b_remote(0)), p.a_seg(0, 256), SIGNALLED, slot(0, DtoOp::RdmaWrite));
    let inline =
        p.a.0
            .keep_inline(
                opcode::RDMA_WRITE,
                Some(p.b_remote(512)),
                p.mem_a.as_ptr() as u64 + 512,
                64,
                SIGNALLED,
                slot(0, DtoOp::RdmaWrite),
            )
            .expect("64 bytes go inline");
    let mut refused = 0;
    for cookie in 0..3 * u64::from(depth) {
        let fill = cookie as u8 + 1;
        let (at, len) = if cookie % 2 == 0 { (0, 256) } else { (512, 64) };
        p.mem_a[at..at + len].fill(fill);
        let taken = if cookie % 2 == 0 {
            p.a.0.try_send_kept(&gathered, cookie)
        } else {
            // SAFETY: the inline request's bytes lie in mem_a, registered
            // and alive.
            unsafe { p.a.0.try_send_inline_kept(&inline, cookie) }
        };
        if !taken {
            refused += 1;
            // An inline WQE of two WQEBBs at the ring's last is the ordinary send's.
            let s = p.a_seg(512, 64);
            // SAFETY: as above.
            unsafe {
                p.a.0.send_inline(Op::Write(p.b_remote(512)), &[s], 64, SIGNALLED, slot(cookie, DtoOp::RdmaWrite))
            }
            .unwrap();
        }
        let cqe = p.cq_a.poll().expect("the write completed");
        assert_eq!(cqe.opcode, CqeOpcode::Req, "cookie {cookie}: {cqe:?}");
        assert_eq!(p.a.0.retire(cqe.wqe_counter).map(|(s, n)| (s.cookie, n)), Some((cookie, 1)));
        p.cq_a.update_ci();
        assert!(p.mem_b[at..at + len].iter().all(|&b| b == fill), "cookie {cookie}: the bytes of the moment");
    }
    assert!(p.a.0.pi() as u32 >= 3 * depth, "pi {}", p.a.0.pi());
    assert!(p.hca.stats().blueflame > 0);
    assert!(refused > 0, "no kept inline WQE came to the ring's end");
}

/// Unsignalled WQEs retire with the next signalled one.
#[test]
fn a_signalled_cqe_retires_the_unsignalled_wqes_before_it() {
    let mut p = Pair::new(64);
    let s = p.a_seg(0, 8);
    for cookie in 0..5 {
        let remote = p.b_remote(0);
        p.a.0.post(Op::Write(remote), &[s], 0, slot(cookie, DtoOp::RdmaWrite)).unwrap();
    }
    let remote = p.b_remote(0);
    p.a.0.post(Op::Write(remote), &[s], SIGNALLED, slot(5, DtoOp::RdmaWrite)).unwrap();
    p.a.0.ring();
    let cqe = p.cq_a.poll().unwrap();
    assert!(p.cq_a.poll().is_none(), "unsignalled WQEs wrote CQEs");
    assert_eq!(p.a.0.retire(cqe.wqe_counter).map(|(s, n)| (s.cookie, n)), Some((5, 6)));
    assert!(p.a.0.is_idle());
}

/// Memory for a send ring outside any device, with a recording register.
struct Bare {
    ring: NonNull<u8>,
    record: NonNull<u8>,
    len: usize,
}

impl Bare {
    fn new(wqebbs: usize) -> Bare {
        let len = wqebbs * WQEBB_BYTES;
        // SAFETY: nonzero sizes.
        let (ring, record) = unsafe {
            (alloc(Layout::from_size_align(len, 64).unwrap()), alloc(Layout::from_size_align(64, 64).unwrap()))
        };
        // SAFETY: `ring` is a fresh allocation of `len` bytes.
        unsafe { ring.write_bytes(0xa5, len) };
        Bare { ring: NonNull::new(ring).unwrap(), record: NonNull::new(record).unwrap(), len }
    }

    /// A copy of the ring.
    fn snapshot(&self) -> Vec<u8> {
        // SAFETY: the allocation is `len` bytes; tests look while no queue
        // call is running.
        unsafe { std::slice::from_raw_parts(self.ring.as_ptr(), self.len) }.to_vec()
    }

    fn record(&self) -> u32 {
        // SAFETY: the record allocation is 64 bytes.
        u32::from_be(unsafe { self.record.as_ptr().add(4).cast::<u32>().read_volatile() })
    }

    fn sq<R: Register>(&self, wqebbs: u32, bf: R, bf_size: u32) -> SendQueue<R, Vec<SendSlot>> {
        // SAFETY: both allocations outlive the queue (each test drops the
        // queue first) and are touched otherwise only between calls.
        let (buf, dbrec) = unsafe { (DmaBuf::new(self.ring, self.len), DmaBuf::new(self.record, 64)) };
        let g = SqGeometry { qpn: 0x4242, buf, wqe_cnt: wqebbs, stride: 64, dbrec, bf, bf_size };
        SendQueue::new(g, vec![SendSlot::EMPTY; wqebbs as usize]).unwrap()
    }
}

impl Drop for Bare {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts.
        unsafe {
            dealloc(self.ring.as_ptr(), Layout::from_size_align(self.len, 64).unwrap());
            dealloc(self.record.as_ptr(), Layout::from_size_align(64, 64).unwrap());
        }
    }
}

#[test]
fn a_full_ring_refuses_a_wqe_before_writing_any_of_it() {
    let bare = Bare::new(8);
    let mut sq = bare.sq(8, Recorder::default(), 256);
    let sge = Sge { addr: 0x1000, length: 8, lkey: 1 };
    // Three 2-WQEBB writes (ctrl, raddr and six data segments) leave two.
    for cookie in 0..3 {
        sq.post(Op::Write(Remote { addr: 0, rkey: 2 }), &[sge; 6], SIGNALLED, slot(cookie, DtoOp::RdmaWrite)).unwrap();
    }
    assert_eq!(sq.free_bbs(), 2);
    let before = bare.snapshot();
    // Ten data segments need three WQEBBs.
    let refused = sq.post(Op::Write(Remote { addr: 0, rkey: 2 }), &[sge; 10], SIGNALLED, slot(9, DtoOp::RdmaWrite));
    assert!(refused.is_err());
    assert_eq!(bare.snapshot(), before, "a refused WQE wrote to the ring");
    assert_eq!(sq.free_bbs(), 2);
    // Two WQEBBs still fit, and then nothing does.
    sq.post(Op::Write(Remote { addr: 0, rkey: 2 }), &[sge; 6], SIGNALLED, slot(4, DtoOp::RdmaWrite)).unwrap();
    assert!(sq.post(Op::Send, &[], SIGNALLED, slot(5, DtoOp::Send)).is_err());
    // Retiring the first WQE frees its two WQEBBs.
    assert_eq!(sq.retire(0).map(|(s, n)| (s.cookie, n)), Some((0, 1)));
    assert_eq!(sq.free_bbs(), 2);
    // A counter that names no outstanding WQE retires nothing.
    assert_eq!(sq.retire(0), None);
}

proptest! {
    /// Random batches over a small ring: after each doorbell the record
    /// is the producer index, the register write is the last WQE's first
    /// eight control bytes (or, for a lone WQE that fits, the whole WQE as
    /// BlueFlame blocks), the halves alternate, and each WQE carries its
    /// own index and the QP's number.
    #[test]
    fn every_doorbell_publishes_exactly_what_was_written(
        batches in prop::collection::vec(prop::collection::vec((0usize..14, any::<bool>()), 1..4), 1..60),
        seed: u64,
    ) {
        const CNT: u16 = 32;
        let bare = Bare::new(CNT as usize);
        let mut sq = bare.sq(u32::from(CNT), Recorder::default(), 256);
        let (mut half, mut rung) = (0, 0);
        let mut outstanding = std::collections::VecDeque::new();
        for (n, batch) in batches.into_iter().enumerate() {
            let mut posted = Vec::new();
            for (sges, read) in batch {
                let bbs = (1 + usize::from(read) + sges).div_ceil(4) as u16;
                while sq.free_bbs() < bbs {
                    let oldest = outstanding.pop_front().expect("a full ring has WQEs to retire");
                    prop_assert!(sq.retire(oldest).is_some());
                }
                let list: Vec<Sge> = (0..sges).map(|i| Sge { addr: seed ^ i as u64, length: 8, lkey: 3 }).collect();
                let op = if read { Op::Read(Remote { addr: seed, rkey: 4 }) } else { Op::Send };
                let pi = sq.pi();
                sq.post(op, &list, SIGNALLED, slot(n as u64, DtoOp::Send)).unwrap();
                outstanding.push_back(pi);
                posted.push((pi, bbs));
            }
            let seen = sq.register().writes.len();
            sq.ring();
            rung += 1;
            prop_assert_eq!(bare.record(), u32::from(sq.pi()));
            let ring = bare.snapshot();
            let at = |index: u16| usize::from(index % CNT) * 64;
            for (pi, _) in &posted {
                let word = u32::from_be_bytes(ring[at(*pi)..at(*pi) + 4].try_into().unwrap());
                let qpn_ds = u32::from_be_bytes(ring[at(*pi) + 4..at(*pi) + 8].try_into().unwrap());
                prop_assert_eq!((word >> 8) as u16, *pi);
                prop_assert_eq!(qpn_ds >> 8, 0x4242);
            }
            let writes = &sq.register().writes[seen..];
            let (last, bbs) = *posted.last().unwrap();
            if posted.len() == 1 && bbs <= 4 {
                prop_assert_eq!(writes.len(), usize::from(bbs));
                for (i, (offset, block)) in writes.iter().enumerate() {
                    prop_assert_eq!(*offset, half + i * 64);
                    let wqebb = at(last.wrapping_add(i as u16));
                    prop_assert_eq!(&block[..], &ring[wqebb..wqebb + 64]);
                }
            } else {
                prop_assert_eq!(writes.len(), 1);
                prop_assert_eq!(writes[0].0, half);
                prop_assert_eq!(&writes[0].1[..], &ring[at(last)..at(last) + 8]);
            }
            half ^= 256;
        }
        prop_assert_eq!(sq.register().flushes, rung, "one flush per doorbell");
    }
}

proptest! {
    /// A WQE built on the stack and rung at once (`send`, `send_inline`)
    /// publishes what `post` or `post_inline` then `ring` publish: the same
    /// segments at the same ring index, the same record, the same register
    /// writes at the same offsets; and its BlueFlame blocks are the ring's
    /// bytes (the staged path zeroes what no segment covers).
    #[test]
    fn a_staged_wqe_publishes_what_post_and_ring_publish(
        wqes in prop::collection::vec((0usize..8, 0usize..4, 0usize..230), 1..80),
    ) {
        const CNT: u16 = 16;
        let (staged_ring, posted_ring) = (Bare::new(CNT as usize), Bare::new(CNT as usize));
        let mut staged = staged_ring.sq(u32::from(CNT), Recorder::default(), 256);
        let mut posted = posted_ring.sq(u32::from(CNT), Recorder::default(), 256);
        let data: Vec<u8> = (0..256u32).map(|i| i as u8 ^ 0x5a).collect();
        let mut outstanding = std::collections::VecDeque::new();
        for (n, (sges, kind, inline_len)) in wqes.into_iter().enumerate() {
            let remote = Remote { addr: 0x1000 * n as u64, rkey: 7 };
            let op = [Op::Send, Op::Write(remote), Op::Read(remote), Op::FetchAdd { remote, add: 3 }][kind];
            let inline = matches!(op, Op::Send | Op::Write(_)) && sges % 2 == 1;
            let list: Vec<Sge> = if inline {
                vec![Sge { addr: data.as_ptr() as u64, length: inline_len as u32, lkey: 0 }]
            } else {
                (0..sges).map(|i| Sge { addr: 0x9000 + i as u64, length: 8, lkey: 3 }).collect()
            };
            let len: u32 = list.iter().map(|s| s.length).sum();
            let pi = staged.pi();
            let s = slot(n as u64, DtoOp::Send);
            let (a, b) = if inline {
                // SAFETY: every segment lies inside `data`.
                unsafe {
                    (staged.send_inline(op, &list, len, SIGNALLED, s), posted.post_inline(op, &list, len, SIGNALLED, s))
                }
            } else {
                (staged.send(op, &list, SIGNALLED, s), posted.post(op, &list, SIGNALLED, s))
            };
            prop_assert_eq!(a.is_ok(), b.is_ok());
            if a.is_err() {
                // Full: retire the oldest WQE of both and go on.
                let oldest = outstanding.pop_front().expect("a full ring holds WQEs");
                prop_assert!(staged.retire(oldest).is_some() && posted.retire(oldest).is_some());
                continue;
            }
            posted.ring();
            outstanding.push_back(pi);
            prop_assert_eq!(staged.pi(), posted.pi());
            prop_assert_eq!(staged_ring.record(), posted_ring.record());
            let (x, y) = (staged_ring.snapshot(), posted_ring.snapshot());
            let ds = usize::from(x[usize::from(pi % CNT) * 64 + 7] & 0x3f);
            // The bytes the segments cover; an inline segment's padding is
            // the device's to ignore.
            let headers = 1 + usize::from(!matches!(op, Op::Send)) + usize::from(matches!(op, Op::FetchAdd { .. }));
            let payload = match (inline, len) {
                (true, 0) => 0,
                (true, len) => 4 + len as usize,
                (false, _) => 16 * list.len(),
            };
            let covered = 16 * headers + payload;
            for byte in 0..covered {
                let at = (usize::from(pi % CNT) * 64 + byte) % x.len();
                prop_assert_eq!(x[at], y[at], "WQE {} byte {}", n, byte);
            }
            let (wx, wy) = (&staged.register().writes, &posted.register().writes);
            prop_assert_eq!(wx.len(), wy.len());
            // This doorbell's writes: BlueFlame blocks, or the 8-byte write
            // of a WQE too large for BlueFlame.
            let rung = if ds * 16 <= 256 { wqe_blocks(ds) } else { 1 };
            for (i, ((ox, bx), (oy, by))) in wx.iter().zip(wy).skip(wx.len() - rung).enumerate() {
                prop_assert_eq!(ox, oy);
                prop_assert_eq!(bx.len(), by.len());
                let wqebb = usize::from(pi.wrapping_add(i as u16) % CNT) * 64;
                prop_assert_eq!(&bx[..], &x[wqebb..wqebb + bx.len()], "register write {} is not the ring's", i);
            }
            prop_assert_eq!(staged.register().flushes, posted.register().flushes);
        }
    }
}

/// WQEBBs of a WQE of `ds` segments.
fn wqe_blocks(ds: usize) -> usize {
    (ds * 16).div_ceil(64)
}

type B = Mlx5<SoftHca>;

/// A software HCA opened for a test of the backend: its IA, a PD, a CQ
/// of 64 entries, and 4 KiB registered with every privilege.
struct Opened {
    b: B,
    ia: <B as Backend>::Ia,
    attr: IaAttr,
    pd: <B as Backend>::Pd,
    cq: backend::Cq<SoftHca>,
    mem: Vec<u8>,
    reg: Registration<<B as Backend>::Mr>,
}

fn opened() -> Opened {
    let mut b: B = Mlx5::new(SoftHca::new());
    let (mut ia, attr) = b.control().ia_open(b"mlx5_soft0").unwrap();
    let pd = b.control().pd_alloc(&mut ia).unwrap();
    let cq = b.cq_create(&mut ia, 64, 0).unwrap();
    let mem = vec![0u8; 4096];
    let reg = b.control().mr_register(&pd, mem.as_ptr() as u64, 4096, MemPriv::ALL).unwrap();
    Opened { b, ia, attr, pd, cq, mem, reg }
}

/// An RC QP's configuration on `pd` and `cq`, receiving from `srq` if
/// given.
fn rc<'a>(
    pd: &'a <B as Backend>::Pd,
    cq: &'a backend::Cq<SoftHca>,
    srq: Option<&'a backend::Srq<SoftHca>>,
) -> QpConfig<'a, B> {
    QpConfig {
        pd,
        send_cq: Some(cq),
        recv_cq: Some(cq),
        srq,
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_rdma_read_in: 4,
        max_rdma_read_out: 4,
        qp_type: QpType::Rc,
    }
}

/// Connect `a` to `c` through the listener on qualifier 9 of `ia`: the
/// events left from before are read, `c` accepts the request, and the
/// events that follow are read.
fn connect(b: &mut B, ia: &mut <B as Backend>::Ia, attr: &IaAttr, a: &mut Qp<SoftHca>, c: &mut Qp<SoftHca>) {
    while b.cm().poll_cm(ia).is_some() {}
    b.cm().connect(B::cm_qp(a), &attr.ia_address, 9, b"", None).unwrap();
    let Some(CmEvent::Request { mut request, .. }) = b.cm().poll_cm(ia) else { panic!("no request") };
    b.cm().accept(&mut request, B::cm_qp(c), b"").unwrap();
    while b.cm().poll_cm(ia).is_some() {}
}

/// QPs 1 and 2 of `o`'s CQ, connected to each other through the listener
/// on qualifier 9 (given back, to let go of), and the segment of `o`'s
/// first 64 bytes with the remote triplet of its bytes from 1024.
fn looped(o: &mut Opened) -> (Qp<SoftHca>, Qp<SoftHca>, Listener<B>, Sge, RmrTriplet) {
    let config = rc(&o.pd, &o.cq, None);
    let (mut a, mut c) = (o.b.qp_create(&config, 1).unwrap(), o.b.qp_create(&config, 2).unwrap());
    let listener = o.b.cm().listen(&mut o.ia, 9, 7).unwrap();
    connect(&mut o.b, &mut o.ia, &o.attr, &mut a, &mut c);
    let at = o.mem.as_ptr() as u64;
    let sge = Sge { addr: at, length: 64, lkey: o.reg.lkey };
    let remote = RmrTriplet { virtual_address: at + 1024, segment_length: 64, rmr_context: o.reg.rkey };
    (a, c, listener, sge, remote)
}

/// dat_ep_reset(3DAT) may lose completions not yet dequeued, but never
/// hands them to the reset QP: after a reset the flushed CQEs of the old
/// connection are skipped, and the first new WQE completes as itself.
#[test]
fn cqes_from_before_a_reset_never_reach_the_reset_qp() {
    let mut o = opened();
    let (mut a, mut c, listener, sge, remote) = looped(&mut o);
    let Opened { mut b, mut ia, attr, mut cq, .. } = o;
    let write = |cookie| SendWr {
        op: RequestOp::RdmaWrite { remote },
        sges: std::slice::from_ref(&sge),
        length: 64,
        cookie,
        flags: CompletionFlags::DEFAULT,
    };
    // The peer goes away with four writes posted behind a stalled send:
    // they are flushed into the CQ, and nobody polls them.
    b.post_send(
        &mut a,
        &SendWr { op: RequestOp::Send, sges: &[], length: 0, cookie: 100, flags: CompletionFlags::DEFAULT },
    )
    .unwrap();
    for cookie in 0..4 {
        b.post_send(&mut a, &write(cookie)).unwrap();
    }
    b.cm().disconnect(B::cm_qp(&mut a), false);
    b.qp_reset(&mut a, &mut One(&mut cq)).unwrap();
    b.qp_reset(&mut c, &mut One(&mut cq)).unwrap();
    connect(&mut b, &mut ia, &attr, &mut a, &mut c);
    b.post_send(&mut a, &write(50)).unwrap();
    let mut out = [Completion::EMPTY; 16];
    let n = b.cq_poll(&mut cq, &mut Two(&mut a, &mut c), &mut out);
    let got: Vec<_> = out[..n].iter().map(|c| (c.tag, c.cookie, c.status, c.retired)).collect();
    assert_eq!(got, vec![(1, 50, DtoStatus::Success, 1)]);
    b.cm().unlisten(listener);
    b.qp_destroy(a, &mut One(&mut cq));
    b.qp_destroy(c, &mut One(&mut cq));
    b.cq_destroy(cq);
}

/// A receive an SRQ filled for a QP destroyed before its CQE was polled
/// completes nothing, yet the poll that skips the CQE gives the SRQ its
/// WQE back: the SRQ, full until then, takes one more receive.
#[test]
fn a_destroyed_qps_srq_receive_gives_its_wqe_back_when_its_cqe_is_skipped() {
    let Opened { mut b, mut ia, attr, pd, mut cq, mem, reg } = opened();
    let mut srq = b.srq_create(&pd, &SrqAttr { max_recv_dtos: 4, max_recv_iov: 1, low_watermark: 0 }).unwrap();
    let mut a = b.qp_create(&rc(&pd, &cq, None), 1).unwrap();
    let mut c = b.qp_create(&rc(&pd, &cq, Some(&srq)), 2).unwrap();
    let listener = b.cm().listen(&mut ia, 9, 7).unwrap();
    connect(&mut b, &mut ia, &attr, &mut a, &mut c);
    let sge = |offset: u64| Sge { addr: mem.as_ptr() as u64 + offset, length: 64, lkey: reg.lkey };
    let mut posted = 0;
    while b.srq_post_recv(&mut srq, &[sge(1024 + 64 * posted)], posted).is_ok() {
        posted += 1;
    }
    assert!(posted >= 4, "the SRQ took {posted} receives");
    let send =
        SendWr { op: RequestOp::Send, sges: &[sge(0)], length: 64, cookie: 100, flags: CompletionFlags::DEFAULT };
    b.post_send(&mut a, &send).unwrap();
    assert!(b.srq_post_recv(&mut srq, &[sge(0)], 99).is_err(), "the SRQ's WQE is the CQE's until it is polled");
    b.qp_destroy(c, &mut One(&mut cq));
    let mut out = [Completion::EMPTY; 16];
    let n = b.cq_poll(&mut cq, &mut Only(&mut a), &mut out);
    let got: Vec<_> = out[..n].iter().map(|c| (c.tag, c.cookie, c.status)).collect();
    assert_eq!(got, vec![(1, 100, DtoStatus::Success)]);
    b.srq_post_recv(&mut srq, &[sge(0)], 99).expect("the skipped CQE gave its WQE back");
    b.cm().unlisten(listener);
    b.qp_destroy(a, &mut One(&mut cq));
    b.srq_destroy(srq);
    b.cq_destroy(cq);
}

/// A dequeue's lane is shown only the tags of QPs that live, which the
/// core then takes without judging them (`CqHead::of_live_qp`): once a QP
/// is destroyed, neither the route the CQ kept for it nor its CQEs still
/// in the CQ lead to it.
#[test]
fn a_dequeues_lane_is_never_shown_a_destroyed_qps_cqe() {
    let mut o = opened();
    let (mut a, mut c, listener, sge, remote) = looped(&mut o);
    let Opened { mut b, mut cq, .. } = o;
    for cookie in 0..2 {
        let write = SendWr {
            op: RequestOp::RdmaWrite { remote },
            sges: std::slice::from_ref(&sge),
            length: 64,
            cookie,
            flags: CompletionFlags::DEFAULT,
        };
        b.post_send(&mut a, &write).unwrap();
    }
    let (first, _) = b
        .cq_lane(&mut cq, |head: CqHead| {
            assert!(head.is_live() && head.tag == 1, "{head:?}");
            Some(Held(&mut a))
        })
        .unwrap();
    assert_eq!((first.tag, first.cookie), (1, 0));
    // The CQ's kept route is QP 1's, and its second CQE waits.
    b.qp_destroy(a, &mut One(&mut cq));
    assert_eq!(b.cq_lane(&mut cq, never_shown).err(), Some(Untaken::Declined));
    let mut out = [Completion::EMPTY; 4];
    assert_eq!(b.cq_poll(&mut cq, &mut Only(&mut c), &mut out), 0, "the CQE completes nothing");
    assert_eq!(b.cq_lane(&mut cq, never_shown).err(), Some(Untaken::Empty));
    b.cm().unlisten(listener);
    b.qp_destroy(c, &mut One(&mut cq));
    b.cq_destroy(cq);
}

/// The QP a dequeue's lane was admitted to.
struct Held<'q>(&'q mut Qp<SoftHca>);

impl HoldsQp<Qp<SoftHca>> for Held<'_> {
    fn qp(&mut self) -> &mut Qp<SoftHca> {
        self.0
    }
}

/// A lane's `accept` that no CQE may reach.
fn never_shown<'q>(head: CqHead) -> Option<Held<'q>> {
    panic!("a lane was shown {head:?}")
}

/// The one QP of a test, by its tag 1.
struct Only<'q>(&'q mut Qp<SoftHca>);

impl Qps<Qp<SoftHca>> for Only<'_> {
    fn by_tag(&mut self, tag: u64) -> Option<&mut Qp<SoftHca>> {
        (tag == 1).then_some(&mut *self.0)
    }
}

/// The two QPs of a test, by their tags 1 and 2, as a CQ's poll reaches
/// them through the core's EPs.
struct Two<'q>(&'q mut Qp<SoftHca>, &'q mut Qp<SoftHca>);

impl Qps<Qp<SoftHca>> for Two<'_> {
    fn by_tag(&mut self, tag: u64) -> Option<&mut Qp<SoftHca>> {
        match tag {
            1 => Some(self.0),
            2 => Some(self.1),
            _ => None,
        }
    }
}

/// The one CQ of a test, as the core hands a QP's CQs over.
struct One<'c>(&'c mut backend::Cq<SoftHca>);

impl Cqs<backend::Cq<SoftHca>> for One<'_> {
    fn each(&mut self, mut f: impl FnMut(&mut backend::Cq<SoftHca>)) {
        f(self.0);
    }
}

/// A UD send through the software HCA: the receive holds the GRH (IP
/// version 6, next header 0x1B for the BTH, the sender's and receiver's
/// GIDs), then the message, and its CQE names the sender's QP. A datagram
/// with another Q_Key, or to another GID, is lost while its sender
/// completes: the receive stays posted for the next one that fits.
#[test]
fn a_ud_datagram_carries_its_grh_and_reaches_only_its_q_key_and_gid() {
    let Opened { mut b, mut ia, attr, pd, mut cq, mut mem, reg } = opened();
    let config = QpConfig::<B> {
        pd: &pd,
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        srq: None,
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_rdma_read_in: 0,
        max_rdma_read_out: 0,
        qp_type: QpType::Ud,
    };
    let (mut a, mut c) = (b.qp_create(&config, 1).unwrap(), b.qp_create(&config, 2).unwrap());
    let listener = b.cm().listen(&mut ia, 11, 7).unwrap();
    b.cm().connect(B::cm_qp(&mut a), &attr.ia_address, 11, b"", None).unwrap();
    let Some(CmEvent::Request { mut request, ud: true, .. }) = b.cm().poll_cm(&mut ia) else { panic!("no UD request") };
    b.cm().accept(&mut request, B::cm_qp(&mut c), b"").unwrap();
    let (mut to_c, mut to_a) = (None, None);
    while let Some(event) = b.cm().poll_cm(&mut ia) {
        if let CmEvent::UdEstablished { tag, peer, .. } = event {
            *(if tag == 1 { &mut to_c } else { &mut to_a }) = Some(peer);
        }
    }
    let (to_c, to_a) = (to_c.expect("the active side's peer"), to_a.expect("the passive side's peer"));
    let av = b.ah_create(&pd, &to_c.ah).unwrap();
    let base = mem.as_ptr() as u64;
    mem[..5].copy_from_slice(b"hello");
    let recv = |at: u64| Sge { addr: base + at, length: 256, lkey: reg.lkey };
    let send = |cookie| SendWr { op: RequestOp::Send, sges: &[], length: 5, cookie, flags: CompletionFlags::DEFAULT };
    let sge = [Sge { addr: base, length: 5, lkey: reg.lkey }];
    let dest = UdDest { remote_qpn: to_c.qpn, qkey: to_c.qkey };
    let poll = |b: &mut B, cq: &mut _, a: &mut _, c: &mut _| {
        let mut out = [Completion::EMPTY; 8];
        let n = b.cq_poll(cq, &mut Two(a, c), &mut out);
        out[..n].iter().map(|c| (c.tag, c.cookie, c.status, c.op, c.transferred_length, c.imm)).collect::<Vec<_>>()
    };

    b.post_recv(&mut c, &[recv(1024)], 70).unwrap();
    b.post_send_ud(&mut a, &av, dest, &SendWr { sges: &sge, ..send(1) }).unwrap();
    // The two QPs' completions share the CQ, in no order of DAT's.
    let mut got = poll(&mut b, &mut cq, &mut a, &mut c);
    got.sort_by_key(|c| c.0);
    assert_eq!(got[0], (1, 1, DtoStatus::Success, DtoOp::SendUd, 5, 0));
    assert_eq!(got[1], (2, 70, DtoStatus::Success, DtoOp::ReceiveUd, 45, to_a.qpn), "the GRH, then 5 bytes");
    let grh = &mem[1024..1064];
    assert_eq!((grh[0] >> 4, grh[6]), (6, 0x1b), "IP version 6, next header BTH");
    let gid = to_c.ah.grh.expect("a RoCE address has a GRH").dgid;
    assert_eq!((&grh[8..24], &grh[24..40]), (&gid[..], &gid[..]), "one IA: the same GID both ways");
    assert_eq!(&mem[1064..1069], b"hello");

    b.post_recv(&mut c, &[recv(2048)], 71).unwrap();
    let wrong_key = UdDest { qkey: to_c.qkey ^ 1, ..dest };
    b.post_send_ud(&mut a, &av, wrong_key, &SendWr { sges: &sge, ..send(2) }).unwrap();
    let mut other_gid = to_c.ah;
    other_gid.grh = other_gid.grh.map(|g| Grh { dgid: [0xfe; 16], ..g });
    let elsewhere = b.ah_create(&pd, &other_gid).unwrap();
    b.post_send_ud(&mut a, &elsewhere, dest, &SendWr { sges: &sge, ..send(3) }).unwrap();
    let sent: Vec<_> = poll(&mut b, &mut cq, &mut a, &mut c).iter().map(|c| (c.1, c.2)).collect();
    assert_eq!(sent, vec![(2, DtoStatus::Success), (3, DtoStatus::Success)], "lost datagrams still complete");
    b.post_send_ud(&mut a, &av, dest, &SendWr { sges: &sge, ..send(4) }).unwrap();
    let received: Vec<_> = poll(&mut b, &mut cq, &mut a, &mut c).iter().filter(|c| c.0 == 2).map(|c| c.1).collect();
    assert_eq!(received, vec![71], "the receive waited for the datagram that fits");
    // dat_ep_reset of a UD EP: its QP takes datagrams again at once.
    b.qp_reset(&mut c, &mut One(&mut cq)).unwrap();
    b.post_recv(&mut c, &[recv(3072)], 72).unwrap();
    b.post_send_ud(&mut a, &av, dest, &SendWr { sges: &sge, ..send(5) }).unwrap();
    let received: Vec<_> =
        poll(&mut b, &mut cq, &mut a, &mut c).iter().filter(|c| c.0 == 2).map(|c| (c.1, c.2)).collect();
    assert_eq!(received, vec![(72, DtoStatus::Success)], "a reset UD QP receives again");
    b.ah_destroy(av);
    b.ah_destroy(elsewhere);
    b.cm().unlisten(listener);
    b.qp_destroy(a, &mut One(&mut cq));
    b.qp_destroy(c, &mut One(&mut cq));
    b.cq_destroy(cq);
}
