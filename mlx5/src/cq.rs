//! The completion queue: ownership, the consumer index, arming.
//!
//! CQE `i` is software's when its opcode is not `INVALID` and its owner bit
//! equals the wrap parity of the consumer index, `(ci & cqe_cnt) != 0`
//! (PRM "Completion Queue Entry Format", ownership); then a load barrier,
//! then the rest of the CQE. The consumer index goes to the doorbell
//! record once per poll batch. Arming writes the record's arm word, then
//! the UAR's CQ doorbell (rdma-core `mlx5_arm_cq`); the arm sequence
//! number advances with each completion event taken.

// CQEs are read by volatile loads from a ring checked once.
#![allow(unsafe_code)]

use crate::barrier;
use crate::cqe::{self, field, Cqe, Head, QpnWord, CQE_BYTES};
use crate::doorbell::{Register, CQ_DOORBELL};
use crate::mem::DmaBuf;
use crate::table::Route;
use crate::Geometry;

/// Whether a CQE whose `op_own` byte this is, met in the pass of wrap
/// parity `parity`, is software's: its opcode (the high nibble) is not
/// `INVALID` and its owner bit (bit 0) is the parity. Both in one
/// compare: with the parity taken off the owner bit and the bits between
/// masked out, the byte is `oooo000e`; rotated right by one, `eoooo000`,
/// which is below `0x78` exactly when `e` is 0 and the opcode is not
/// `INVALID`'s `0xf`.
#[inline(always)]
fn software_owns(op_own: u8, parity: bool) -> bool {
    ((op_own ^ u8::from(parity)) & 0xf1).rotate_right(1) < 0x78
}

/// Index of the consumer counter in a CQ's doorbell record.
#[doc(alias = "MLX5_CQ_SET_CI")]
pub const SET_CI: usize = 0;
/// Index of the arm word in a CQ's doorbell record.
#[doc(alias = "MLX5_CQ_ARM_DB")]
pub const ARM_DB: usize = 1;
/// Arm for solicited completions only (`MLX5_CQ_DB_REQ_NOT_SOL`).
#[doc(alias = "MLX5_CQ_DB_REQ_NOT_SOL")]
pub const REQ_NOT_SOL: u32 = 1 << 24;
/// A QP number no RC QP has: marks the CQEs of a destroyed QP.
pub const NO_QPN: u32 = 0x00ff_ffff;

/// What rdma-core's `mlx5dv_init_obj` hands over for a CQ.
#[derive(Debug)]
pub struct CqGeometry<R> {
    /// The CQ number, which arming writes to the UAR.
    pub cqn: u32,
    /// The CQE ring.
    pub buf: DmaBuf,
    /// Entries in the ring, a power of two.
    pub cqe_cnt: u32,
    /// 64 or 128; a 128-byte CQE keeps its 64 bytes in the second half.
    pub cqe_size: u32,
    /// The doorbell record: the consumer counter, then the arm word.
    pub dbrec: DmaBuf,
    /// The UAR page whose CQ doorbell arms this CQ.
    pub uar: R,
}

/// A completion queue over device memory.
#[derive(Debug)]
pub struct CompletionQueue<R> {
    /// The ring from the 64-byte CQE of its first entry on: an entry of
    /// 128 bytes keeps its CQE in its second half, so each CQE starts a
    /// whole number of entries into this span.
    buf: DmaBuf,
    dbrec: DmaBuf,
    uar: R,
    cqn: u32,
    cqe_cnt: u32,
    mask: u32,
    shift: u32,
    ci: u32,
    arm_sn: u32,
    /// The consumer index at which a waiting CQE was last reported by
    /// [`has_news`](Self::has_news).
    reported: Option<u32>,
    /// Where the QP of the last CQE taken leads ([`Kept::NONE`] at
    /// first): CQEs of one QP come in runs, so the next one most often
    /// needs no look-up in the QP-number index (rdma-core's `cur_rsc`).
    last: Kept,
}

/// The route a CQ keeps for the QP of its last CQE, its QP number as
/// CQEs carry it, so that a CQE of the same QP is known with no swap.
#[derive(Clone, Copy, Debug)]
struct Kept {
    word: QpnWord,
    srq: bool,
    tag: u64,
}

impl Kept {
    /// No CQE's QP: [`Route::NONE`]'s number has more than 24 bits.
    const NONE: Kept = Kept::of(Route::NONE);

    const fn of(route: Route) -> Kept {
        Kept { word: QpnWord::of(route.qpn), srq: route.srq, tag: route.tag }
    }
}

impl<R: Register> CompletionQueue<R> {
    /// Take over a CQ; every entry must start out invalid.
    pub fn new(geometry: CqGeometry<R>) -> Result<Self, Geometry> {
        let CqGeometry { cqn, buf, cqe_cnt, cqe_size, dbrec, uar } = geometry;
        if cqe_size != 64 && cqe_size != 128 {
            return Err(Geometry::Stride);
        }
        if !cqe_cnt.is_power_of_two() || cqe_cnt > 1 << 22 || buf.len() != (cqe_cnt * cqe_size) as usize {
            return Err(Geometry::Ring);
        }
        if dbrec.len() < 8 {
            return Err(Geometry::Ring);
        }
        // The CQE's offset inside an entry folded into the span read, so
        // finding a CQE takes no add: the last entry's CQE ends the span.
        let buf = buf.skip(cqe_size as usize - CQE_BYTES).ok_or(Geometry::Ring)?;
        dbrec.write_be32(SET_CI * 4, 0);
        dbrec.write_be32(ARM_DB * 4, 0);
        Ok(CompletionQueue {
            buf,
            dbrec,
            uar,
            cqn,
            cqe_cnt,
            mask: cqe_cnt - 1,
            shift: cqe_size.trailing_zeros(),
            ci: 0,
            arm_sn: 0,
            reported: None,
            last: Kept::NONE,
        })
    }

    /// The CQ number.
    pub fn cqn(&self) -> u32 {
        self.cqn
    }

    /// The consumer index.
    pub fn ci(&self) -> u32 {
        self.ci
    }

    /// Where CQE `index` starts: masked into the ring, so inside it.
    #[inline(always)]
    fn entry(&self, index: u32) -> usize {
        ((index & self.mask) << self.shift) as usize
    }

    /// Whether CQE `index` is software's.
    #[inline(always)]
    fn owned(&self, at: usize, index: u32) -> bool {
        // SAFETY: `at` is an entry's CQE (see `entry`): 8-aligned, its 64
        // bytes inside the ring, whose length `new` checked; the ring lives
        // as long as `self`.
        let op_own = unsafe { self.buf.word(at + cqe::LAST_WORD).byte(field::OP_OWN - cqe::LAST_WORD) };
        self.owns(op_own, index)
    }

    /// Whether a CQE `index` whose `op_own` byte reads `op_own` is
    /// software's.
    #[inline(always)]
    fn owns(&self, op_own: u8, index: u32) -> bool {
        software_owns(op_own, index & self.cqe_cnt != 0)
    }

    /// Whether the next CQE is software's.
    #[inline]
    pub fn has_cqe(&self) -> bool {
        self.owned(self.entry(self.ci), self.ci)
    }

    /// Whether a CQE waits that no earlier call reported. A CQE left for
    /// its EVD's next poll is old news: a wait on another EVD that counted
    /// it would wake again and again, to find nothing.
    pub fn has_news(&mut self) -> bool {
        if !self.has_cqe() {
            return false;
        }
        let news = self.reported != Some(self.ci);
        self.reported = Some(self.ci);
        news
    }

    /// Take the next CQE, if the device has written it. The consumer
    /// index reaches the device at [`update_ci`](Self::update_ci).
    ///
    /// The owner is read first, then (after the barrier) the last word
    /// again, and the three words before it only when
    /// [`cqe::needs_middle`]: a successful send or RDMA write is one load.
    #[inline(always)]
    pub fn poll(&mut self) -> Option<Cqe> {
        let cqe = self.peek()?;
        self.advance();
        Some(cqe)
    }

    /// Take the CQE [`peek`](Self::peek) found.
    #[inline(always)]
    pub fn advance(&mut self) {
        self.ci = self.ci.wrapping_add(1);
    }

    /// The next CQE, if the device has written it, left in place: the
    /// next [`poll`](Self::poll) takes it.
    #[inline(always)]
    pub fn peek(&self) -> Option<Cqe> {
        self.peek_head().map(|head| self.peeked(head))
    }

    /// The last word of the next CQE, if the device has written it, left
    /// in place: read after the owner and the barrier, as [`peek`](Self::peek)
    /// reads the whole CQE.
    #[inline(always)]
    pub fn peek_head(&self) -> Option<Head> {
        // SAFETY: as in `owned`; the ring lives as long as `self`, past
        // both reads.
        let word = unsafe { self.buf.word(self.entry(self.ci) + cqe::LAST_WORD) };
        // SAFETY: the ring is alive (above). The owner alone is read
        // before the barrier: one byte, as rdma-core's `op_own` test.
        if !self.owns(unsafe { word.byte(field::OP_OWN - cqe::LAST_WORD) }, self.ci) {
            return None;
        }
        barrier::from_device_barrier();
        // SAFETY: as above; read again, after the barrier.
        Some(Head(unsafe { word.read() }))
    }

    /// The next CQE, whose last word [`peek_head`](Self::peek_head) read
    /// as `head`: the three words before it only when [`cqe::needs_middle`].
    #[inline(always)]
    pub fn peeked(&self, head: Head) -> Cqe {
        let middle = if cqe::needs_middle(head.0) {
            // SAFETY: as in `owned`: the next entry's CQE.
            unsafe { self.buf.load_words::<3>(self.entry(self.ci) + cqe::TAIL) }
        } else {
            [0; 3]
        };
        Cqe::from_words(middle, head.0)
    }

    /// Where the QP of a CQE leads, its number `word` as the CQE carries
    /// it: the last CQE's route if it is that QP's, or else what `find`
    /// says of the number, kept for the next CQE.
    #[inline(always)]
    pub fn route(&mut self, word: QpnWord, find: impl FnOnce(u32) -> Option<Route>) -> Option<Route> {
        if self.last.word == word {
            // Made of the kept route's fields: a copy merged with the
            // look-up's answer is read back through the stack, a few bytes
            // at a time.
            return Some(Route { qpn: word.qpn(), srq: self.last.srq, tag: self.last.tag });
        }
        let route = find(word.qpn())?;
        self.last = Kept::of(route);
        Some(route)
    }

    /// The sender's QP number in the CQE [`poll`](Self::poll) took last,
    /// a UD receive's (`flags_rqpn`, bits 23–0, which rdma-core's
    /// `handle_responder` reports as `wc->src_qp`): a word the tail that
    /// `poll` reads leaves out.
    #[inline]
    pub fn last_source_qpn(&self) -> u32 {
        let at = self.entry(self.ci.wrapping_sub(1));
        // SAFETY: as in `owned`; `FLAGS_RQPN` starts a word of the CQE.
        let [word] = unsafe { self.buf.load_words::<1>(at + field::FLAGS_RQPN.start) };
        let b = word.to_ne_bytes();
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x00ff_ffff
    }

    /// Tell the device which CQEs are consumed (`SET_CI`).
    #[inline]
    pub fn update_ci(&mut self) {
        barrier::to_device_barrier();
        // SAFETY: `new` checked that the record holds both of its words.
        unsafe { self.dbrec.store_be32(SET_CI * 4, self.ci & 0x00ff_ffff) };
    }

    /// Ask for a completion event at the next CQE (or the next solicited
    /// one).
    pub fn arm(&mut self, solicited_only: bool) {
        let cmd = if solicited_only { REQ_NOT_SOL } else { 0 };
        let word = ((self.arm_sn & 3) << 28) | cmd | (self.ci & 0x00ff_ffff);
        self.dbrec.write_be32(ARM_DB * 4, word);
        barrier::wc_start();
        let mut doorbell = [0u8; 8];
        doorbell[..4].copy_from_slice(&word.to_be_bytes());
        doorbell[4..].copy_from_slice(&self.cqn.to_be_bytes());
        self.uar.write64(CQ_DOORBELL, doorbell);
        self.uar.flush();
    }

    /// A completion event of this CQ was taken: the next arm carries the
    /// next sequence number.
    pub fn event_taken(&mut self) {
        self.arm_sn = self.arm_sn.wrapping_add(1);
    }

    /// The QP `qpn` is destroyed: mark its CQEs not yet polled, so a QP
    /// that later gets the same number never sees them, and forget its
    /// route. The device writes no CQE for a destroyed QP, and the ones it
    /// wrote are software's.
    pub fn forget_qp(&mut self, qpn: u32) {
        if self.last.word == QpnWord::of(qpn) {
            self.last = Kept::NONE;
        }
        let mut index = self.ci;
        for _ in 0..self.cqe_cnt {
            let at = self.entry(index);
            if !self.owned(at, index) {
                break;
            }
            let word = self.buf.read_be32(at + field::SOP_DROP_QPN.start);
            if word & 0x00ff_ffff == qpn {
                self.buf.write(at + field::SOP_DROP_QPN.start, &((word & 0xff00_0000) | NO_QPN).to_be_bytes());
            }
            index = index.wrapping_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cqe::CqeOpcode;
    use crate::testing::{Memory, Recorder};
    use crate::wqe::opcode;

    /// The one compare of `software_owns` says what its two tests say
    /// (the PRM's, and rdma-core's `get_sw_cqe`'s), for every byte and
    /// either parity.
    #[test]
    fn ownership_in_one_compare_is_the_opcode_and_owner_tests() {
        let invalid = u8::from(CqeOpcode::Invalid);
        for op_own in 0..=u8::MAX {
            for parity in [false, true] {
                let plain = op_own >> 4 != invalid && (op_own & 1 != 0) == parity;
                assert_eq!(software_owns(op_own, parity), plain, "op_own {op_own:#04x}, parity {parity}");
            }
        }
    }

    const CNT: u32 = 4;

    /// A CQE as the device writes it, owner bit last.
    #[allow(clippy::too_many_arguments)]
    fn write_cqe(mem: &Memory, index: u32, op: CqeOpcode, send_opcode: u8, qpn: u32, counter: u16, byte_cnt: u32) {
        write_cqe_sized(mem, CQE_BYTES, index, op, send_opcode, qpn, counter, byte_cnt);
    }

    /// [`write_cqe`] into a ring of `size`-byte entries, whose CQE is an
    /// entry's last 64 bytes.
    #[allow(clippy::too_many_arguments)]
    fn write_cqe_sized(
        mem: &Memory,
        size: usize,
        index: u32,
        op: CqeOpcode,
        send_opcode: u8,
        qpn: u32,
        counter: u16,
        byte_cnt: u32,
    ) {
        let at = (index % CNT) as usize * size + size - CQE_BYTES;
        mem.write(at + field::SRQN.start, &0x77u32.to_be_bytes());
        mem.write(at + field::IMM.start, &0x1234_5678u32.to_be_bytes());
        mem.write(at + field::BYTE_CNT.start, &byte_cnt.to_be_bytes());
        mem.write(at + field::SOP_DROP_QPN.start, &((u32::from(send_opcode) << 24) | qpn).to_be_bytes());
        mem.write(at + field::WQE_COUNTER.start, &counter.to_be_bytes());
        let owner = u8::from(index & CNT != 0);
        mem.write(at + field::OP_OWN, &[(u8::from(op) << 4) | owner]);
    }

    /// A CQ of `CNT` CQEs, every one still the device's, with its ring
    /// and doorbell record.
    fn empty_cq() -> (Memory, Memory, CompletionQueue<Recorder>) {
        empty_cq_sized(CQE_BYTES)
    }

    /// [`empty_cq`] of `size`-byte entries.
    fn empty_cq_sized(size: usize) -> (Memory, Memory, CompletionQueue<Recorder>) {
        let (ring, dbrec) = (Memory::new(CNT as usize * size), Memory::new(64));
        for i in 0..CNT as usize {
            ring.write(i * size + size - CQE_BYTES + field::OP_OWN, &[u8::from(CqeOpcode::Invalid) << 4]);
        }
        let geometry = CqGeometry {
            cqn: 5,
            buf: ring.share(),
            cqe_cnt: CNT,
            cqe_size: size as u32,
            dbrec: dbrec.share(),
            uar: Recorder::default(),
        };
        let cq = CompletionQueue::new(geometry).unwrap();
        (ring, dbrec, cq)
    }

    /// A successful send or RDMA write is read from the CQE's last word
    /// (its byte count and immediate are not read); an RDMA read, an
    /// atomic, a receive or an error CQE is read whole; on every lap the
    /// owner bit decides whose a CQE is.
    #[test]
    fn a_cqe_is_read_by_the_word_and_owned_by_its_lap() {
        let (ring, dbrec, mut cq) = empty_cq();
        let cases = [
            (CqeOpcode::Req, opcode::RDMA_WRITE, false),
            (CqeOpcode::Req, opcode::SEND, false),
            (CqeOpcode::Req, opcode::RDMA_READ, true),
            (CqeOpcode::Req, opcode::ATOMIC_FA, true),
            (CqeOpcode::RespSendImm, 0, true),
            (CqeOpcode::ReqErr, opcode::RDMA_WRITE, true),
        ];
        for (index, (op, send_opcode, whole)) in cases.into_iter().enumerate() {
            let index = index as u32;
            assert!(cq.poll().is_none(), "CQE {index} is still the device's");
            write_cqe(&ring, index, op, send_opcode, 0x42, index as u16, 4096);
            let cqe = cq.poll().expect("the CQE the device wrote");
            assert_eq!((cqe.opcode, cqe.send_opcode, cqe.qpn, cqe.wqe_counter), (op, send_opcode, 0x42, index as u16));
            let rest = if whole { (4096, 0x1234_5678, 0x77) } else { (0, 0, 0) };
            assert_eq!((cqe.byte_cnt, cqe.imm, cqe.srqn), rest, "CQE {index}");
        }
        cq.update_ci();
        assert_eq!(dbrec.read(SET_CI * 4, 4), (CNT + 2).to_be_bytes());
    }

    /// In a ring of 128-byte entries the CQE is each entry's second half
    /// (PRM, "Completion Queue Entry Format": a 128-byte CQE keeps its 64 bytes
    /// last), read there on every lap up to the ring's last entry; the
    /// first half is never taken for a CQE.
    #[test]
    fn a_128_byte_entry_keeps_its_cqe_in_its_second_half() {
        let (ring, _dbrec, mut cq) = empty_cq_sized(128);
        // A first half that looks like a software-owned CQE of another QP.
        for i in 0..CNT as usize {
            ring.write(i * 128 + field::OP_OWN, &[u8::from(CqeOpcode::Req) << 4]);
        }
        for index in 0..2 * CNT {
            assert!(cq.poll().is_none(), "CQE {index} is still the device's");
            write_cqe_sized(&ring, 128, index, CqeOpcode::Req, opcode::SEND, 0x42, index as u16, 0);
            let cqe = cq.poll().expect("the CQE the device wrote");
            assert_eq!((cqe.opcode, cqe.qpn, cqe.wqe_counter), (CqeOpcode::Req, 0x42, index as u16), "CQE {index}");
        }
    }

    /// The route of the last CQE's QP is kept for the next CQE of that QP
    /// and asked for again for another QP, or once the QP is forgotten.
    #[test]
    fn the_last_route_serves_its_qp_until_the_qp_is_forgotten() {
        let (_ring, _dbrec, mut cq) = empty_cq();
        let route = |qpn: u32, tag: u64| Route { qpn, srq: false, tag };
        let asked = core::cell::Cell::new(0);
        let find = |tag: u64| {
            let asked = &asked;
            move |qpn: u32| {
                asked.set(asked.get() + 1);
                Some(route(qpn, tag))
            }
        };
        assert_eq!(cq.route(QpnWord::of(0x42), find(1)), Some(route(0x42, 1)));
        assert_eq!(cq.route(QpnWord::of(0x42), find(9)), Some(route(0x42, 1)), "kept");
        assert_eq!(asked.get(), 1);
        assert_eq!(cq.route(QpnWord::of(0x43), find(2)), Some(route(0x43, 2)));
        assert_eq!(cq.route(QpnWord::of(0x44), |_| None), None, "no QP has the number");
        assert_eq!(cq.route(QpnWord::of(0x43), find(9)), Some(route(0x43, 2)), "a miss keeps the last route");
        cq.forget_qp(0x42);
        assert_eq!(cq.route(QpnWord::of(0x43), find(9)), Some(route(0x43, 2)), "another QP's route stays");
        cq.forget_qp(0x43);
        assert_eq!(
            cq.route(QpnWord::of(0x43), find(3)),
            Some(route(0x43, 3)),
            "a forgotten QP's number is looked up again"
        );
        assert_eq!(asked.get(), 3);
        assert_eq!(cq.route(QpnWord::of(NO_QPN), |_| None), None);
    }
}
