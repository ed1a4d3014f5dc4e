//! The send queue: WQEs into the ring, the doorbell record, BlueFlame.
//!
//! Counters run free over 16 bits (the WQE index in the control segment is
//! 16 bits whatever the ring size); a WQEBB's slot is `index & (cnt - 1)`.
//! A WQE that runs past the end of the ring continues at its start, and an
//! inline copy splits there. A WQE is refused before it is written unless
//! all its WQEBBs are free: the last one, `pi + nbb - 1`, must stay below
//! `ci + cnt` (UCX's rule), so the device never sees a half-written ring.
//!
//! Posting writes the WQE; [`SendQueue::ring`] publishes every WQE written
//! since the last doorbell with one record update and one register write.

// Inline data is copied out of the consumer's registered memory.
#![allow(unsafe_code)]

use udat_core::types::{CompletionFlags, DtoOp};

use crate::barrier;
use crate::doorbell::Register;
use crate::kept::{KeptInline, KeptWqe};
use crate::mem::DmaBuf;
use crate::slots::SlotStorage;
use crate::wqe::{self, opcode, AddressVector, SegWords, SEG_BYTES, WQEBB_BYTES};
use crate::Geometry;

/// Index of the send counter in a QP's doorbell record (`MLX5_SND_DBR`).
#[doc(alias = "MLX5_SND_DBR")]
pub const SND_DBR: usize = 1;

/// The largest ring the WQE index can address.
const MAX_WQEBBS: u32 = 1 << 15;

/// What rdma-core's `mlx5dv_init_obj` hands over for a send queue.
#[derive(Debug)]
pub struct SqGeometry<R> {
    /// The QP number, which every control segment carries.
    pub qpn: u32,
    /// The WQE ring.
    pub buf: DmaBuf,
    /// WQEBBs in the ring, a power of two.
    pub wqe_cnt: u32,
    /// Bytes per WQEBB: 64.
    pub stride: u32,
    /// The QP's doorbell record: the receive counter, then the send counter.
    pub dbrec: DmaBuf,
    /// The BlueFlame register (or the plain doorbell when `bf_size` is 0).
    pub bf: R,
    /// Half the BlueFlame buffer: 256, or 0 when the UAR has none.
    pub bf_size: u32,
}

/// A remote buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    /// The first byte, in the peer's address space.
    pub addr: u64,
    /// The peer's key for it.
    pub rkey: u32,
}

/// The operation of a send WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A send (`MLX5_OPCODE_SEND`).
    Send,
    /// A send with immediate data (`MLX5_OPCODE_SEND_IMM`).
    SendImm(u32),
    /// A send that invalidates the peer's window of this key
    /// (`MLX5_OPCODE_SEND_INVAL`).
    SendInval(u32),
    /// An RDMA write (`MLX5_OPCODE_RDMA_WRITE`).
    Write(Remote),
    /// An RDMA write with immediate data (`MLX5_OPCODE_RDMA_WRITE_IMM`).
    WriteImm(Remote, u32),
    /// An RDMA read (`MLX5_OPCODE_RDMA_READ`).
    Read(Remote),
    /// Compare-and-swap of the 8 bytes at the remote address; the old
    /// value lands in the one 8-byte local segment.
    CompareSwap {
        /// The peer's 8 bytes.
        remote: Remote,
        /// The value expected there.
        compare: u64,
        /// The value written if the expected one is there.
        swap: u64,
    },
    /// Fetch-and-add of the 8 bytes at the remote address.
    FetchAdd {
        /// The peer's 8 bytes.
        remote: Remote,
        /// The addend.
        add: u64,
    },
}

/// What a WQE carries ahead of its data: the opcode and immediate of its
/// control segment, then its remote-address and atomic segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The WQE opcode ([`opcode`]).
    pub opcode: u8,
    /// In host order.
    pub imm: u32,
    /// The remote-address segment, if the opcode has one.
    pub remote: Option<Remote>,
    /// The atomic segment: swap (or addend), then compare.
    pub atomic: Option<(u64, u64)>,
}

impl Header {
    /// Segments before the data: control, remote address, atomic.
    #[inline(always)]
    fn ds(&self) -> usize {
        1 + self.remote.is_some() as usize + self.atomic.is_some() as usize
    }
}

impl From<Op> for Header {
    #[inline(always)]
    fn from(op: Op) -> Header {
        let header = |opcode, imm, remote, atomic| Header { opcode, imm, remote, atomic };
        match op {
            Op::Send => header(opcode::SEND, 0, None, None),
            Op::SendImm(imm) => header(opcode::SEND_IMM, imm, None, None),
            Op::SendInval(rkey) => header(opcode::SEND_INVAL, rkey, None, None),
            Op::Write(remote) => header(opcode::RDMA_WRITE, 0, Some(remote), None),
            Op::WriteImm(remote, imm) => header(opcode::RDMA_WRITE_IMM, imm, Some(remote), None),
            Op::Read(remote) => header(opcode::RDMA_READ, 0, Some(remote), None),
            Op::CompareSwap { remote, compare, swap } => {
                header(opcode::ATOMIC_CS, 0, Some(remote), Some((swap, compare)))
            }
            Op::FetchAdd { remote, add } => header(opcode::ATOMIC_FA, 0, Some(remote), Some((add, 0))),
        }
    }
}

/// A local segment: address, length and lkey.
pub use udat_core::backend::Sge;

/// What a completion of the WQE reports, kept for its first WQEBB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendSlot {
    /// The cookie the request was posted with.
    pub cookie: u64,
    /// Bytes the request moves.
    pub length: u32,
    /// What the completion reports the request as.
    pub op: DtoOp,
    /// The completion flags the request was posted with: kept as given,
    /// and read for [`notify`](Self::notify) only when the completion is
    /// delivered, so a post does not test them.
    pub flags: CompletionFlags,
    /// WQEBBs the WQE took; set by the queue.
    pub bbs: u16,
}

impl SendSlot {
    /// A slot no WQE uses.
    pub const EMPTY: SendSlot =
        SendSlot { cookie: 0, length: 0, op: DtoOp::Send, flags: CompletionFlags::UNSIGNALLED, bbs: 1 };

    /// Whether the completion's event notifies (the request was not
    /// `DAT_COMPLETION_UNSIGNALLED_FLAG`).
    #[inline(always)]
    pub fn notify(&self) -> bool {
        !self.flags.contains(CompletionFlags::UNSIGNALLED)
    }
}

impl Default for SendSlot {
    fn default() -> SendSlot {
        SendSlot::EMPTY
    }
}

/// The ring has no room for the WQE; nothing was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Full;

/// Segments `len` bytes of inline data take (none for none).
#[inline(always)]
fn inline_data_ds(len: u32) -> usize {
    if len == 0 {
        0
    } else {
        wqe::inline_ds(len as usize)
    }
}

/// Most bytes one BlueFlame copy carries: half the BlueFlame buffer.
const BF_BYTES: usize = 256;

/// A lane's BlueFlame copy of a WQE written in place
/// ([`Register::store_blocks_from`]), out of line: inlined, its loop
/// would cost registers in the lanes of one WQEBB, which build theirs in
/// registers and share the caller's code. (The inline lane copies a WQE of
/// two WQEBBs itself: unrolled, that copy has no loop.)
///
/// # Safety
/// As `store_blocks_from`.
#[inline(never)]
unsafe fn copy_out<R: Register>(bf: &mut R, offset: usize, src: *const u64, n: usize) {
    // The WQEs lanes send most, of one WQEBB or two (an inline RDMA
    // write of up to 92 bytes), get a copy the compiler unrolls, with no
    // loop to count; the longer ones, up to `BF_BYTES`, loop.
    // SAFETY: the caller's contract, for each arm alike.
    unsafe {
        match n {
            1 => bf.store_blocks_from(offset, src, 1),
            2 => bf.store_blocks_from(offset, src, 2),
            _ => bf.store_blocks_from(offset, src, n),
        }
    }
}

/// A WQE of at most `K` WQEBBs built on the stack in words: every word
/// of its WQEBBs is written (unused ones zero), so the ring and the
/// BlueFlame copy get the same whole blocks.
#[repr(C, align(16))]
struct Staged<const K: usize> {
    blocks: [[u64; 8]; K],
}

impl<const K: usize> Staged<K> {
    #[inline(always)]
    fn new() -> Self {
        Staged { blocks: [[0; 8]; K] }
    }

    /// Segment `n` (the control segment is 0); one past the end is
    /// dropped (the callers size the WQE before building it, so none is).
    #[inline(always)]
    fn put(&mut self, n: usize, seg: SegWords) {
        if let Some(block) = self.blocks.get_mut(n / 4) {
            let w = n % 4 * 2;
            block[w] = seg[0];
            block[w + 1] = seg[1];
        }
    }

    /// The remote-address and atomic segments; the segment after them.
    #[inline(always)]
    fn headers(&mut self, header: &Header) -> usize {
        let mut n = 1;
        if let Some(r) = header.remote {
            self.put(n, wqe::raddr_words(r.addr, r.rkey));
            n += 1;
        }
        if let Some((swap_add, compare)) = header.atomic {
            self.put(n, wqe::atomic_words(swap_add, compare));
            n += 1;
        }
        n
    }

    /// Copy `len` bytes of registered memory at `src` in from byte `at`;
    /// a copy past the end is dropped (the callers size the WQE first).
    ///
    /// # Safety
    /// `src` is valid for reads of `len` bytes.
    #[inline(always)]
    unsafe fn copy_in(&mut self, at: usize, src: *const u8, len: usize) {
        if at <= K * WQEBB_BYTES && len <= K * WQEBB_BYTES - at {
            // SAFETY: `[at, at + len)` is inside the blocks (checked
            // above), which are plain words: any bytes written are valid.
            // The caller vouches for the source, which is the consumer's
            // memory and cannot overlap this stack frame.
            unsafe { self.blocks.as_mut_ptr().cast::<u8>().add(at).copy_from_nonoverlapping(src, len) };
        }
    }

    /// The first `bbs` WQEBBs.
    #[inline(always)]
    fn first(&self, bbs: usize) -> &[[u64; 8]] {
        self.blocks.get(..bbs).unwrap_or(&self.blocks)
    }
}

/// The last WQE written since the doorbell.
#[derive(Clone, Copy, Debug)]
struct Last {
    pi: u16,
    /// The first word of its control segment: the 8-byte doorbell.
    word: u64,
    bbs: u16,
}

/// A send queue over device memory; `S` holds one [`SendSlot`] per WQEBB.
#[derive(Debug)]
pub struct SendQueue<R, S> {
    buf: DmaBuf,
    dbrec: DmaBuf,
    bf: R,
    slots: S,
    qpn: u32,
    /// The control segment's second field, `qpn << 8 | ds`, with the `ds`
    /// of the one-WQEBB lane's two shapes (2 and 3), as words in place
    /// ([`wqe::qpn_ds_word`]): `try_send_one` makes only the index and
    /// opcode per WQE; `try_send_inline_one` adds its `ds` beyond 2.
    lane_qpn_ds: [u64; 2],
    ring_mask: usize,
    /// `wqe_cnt - 1`, a word: a 16-bit index is widened and masked by it in
    /// two instructions, not three.
    wqe_mask: usize,
    wqe_cnt: u16,
    bf_size: usize,
    bf_offset: usize,
    /// Most segments a WQE built on the stack may have: those of one
    /// WQEBB (`send`) and those of one BlueFlame copy (`send_inline`);
    /// none without BlueFlame.
    staged_segs: [usize; 2],
    /// Index of the next WQEBB to write.
    pi: u16,
    /// Index of the oldest WQEBB not yet retired.
    ci: u16,
    /// WQEs written since the last doorbell.
    pending: u16,
    /// Fence bits the next WQE carries: the small fence after a UMR.
    fence_next: u8,
    /// What the lanes (`try_send_one`, `try_send_inline_one`) check in
    /// one compare: `wqe_cnt` while nothing waits for a doorbell, no fence
    /// is owed and the queue has BlueFlame, else 0 (no lane). Kept by
    /// [`reopen`](Self::reopen) wherever one of those changes.
    lane_room: u16,
    last: Last,
}

impl<R: Register, S: SlotStorage<SendSlot>> SendQueue<R, S> {
    /// Take over a send queue; its geometry must be what the data path
    /// expects (64-byte stride, a power-of-two ring, BlueFlame of 0 or 256
    /// bytes), and `slots` must cover the ring.
    pub fn new(geometry: SqGeometry<R>, slots: S) -> Result<Self, Geometry> {
        let SqGeometry { qpn, buf, wqe_cnt, stride, dbrec, bf, bf_size } = geometry;
        if stride as usize != WQEBB_BYTES {
            return Err(Geometry::Stride);
        }
        if !wqe_cnt.is_power_of_two() || wqe_cnt > MAX_WQEBBS || buf.len() != wqe_cnt as usize * WQEBB_BYTES {
            return Err(Geometry::Ring);
        }
        // Both BlueFlame halves inside the register, so that the lanes
        // store to it unchecked.
        if bf_size != 0 && (bf_size != 256 || bf.span() < 2 * bf_size as usize) {
            return Err(Geometry::BlueFlame);
        }
        if dbrec.len() < 8 || slots.as_ref().len() < wqe_cnt as usize {
            return Err(Geometry::Ring);
        }
        let mut sq = SendQueue {
            buf,
            dbrec,
            bf,
            slots,
            qpn,
            lane_qpn_ds: [2, 3].map(|ds| wqe::qpn_ds_word(qpn << 8 | ds)),
            ring_mask: wqe_cnt as usize * WQEBB_BYTES - 1,
            wqe_mask: wqe_cnt as usize - 1,
            wqe_cnt: wqe_cnt as u16,
            bf_size: bf_size as usize,
            bf_offset: 0,
            staged_segs: [WQEBB_BYTES.min(bf_size as usize) / SEG_BYTES, BF_BYTES.min(bf_size as usize) / SEG_BYTES],
            pi: 0,
            ci: 0,
            pending: 0,
            fence_next: 0,
            lane_room: 0,
            last: Last { pi: 0, word: 0, bbs: 0 },
        };
        sq.reset();
        Ok(sq)
    }

    /// Back to an empty ring and a zero doorbell record, as after the QP
    /// moves through RESET.
    pub fn reset(&mut self) {
        self.pi = 0;
        self.ci = 0;
        self.pending = 0;
        self.fence_next = 0;
        self.bf_offset = 0;
        self.dbrec.write_be32(SND_DBR * 4, 0);
        self.reopen();
    }

    /// Open the lanes if nothing waits for a doorbell, no fence is owed
    /// and the queue has BlueFlame (`bf_size` is then 256: `new` checked
    /// it is 0 or 256); close them otherwise.
    #[inline(always)]
    fn reopen(&mut self) {
        self.lane_room = self.room_for_lanes();
    }

    /// What `lane_room` must hold: the one place it is derived, which the
    /// lanes check the cached word against in debug builds.
    #[inline(always)]
    fn room_for_lanes(&self) -> u16 {
        let open = self.pending == 0 && self.fence_next == 0 && self.bf_size != 0;
        if open {
            self.wqe_cnt
        } else {
            0
        }
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// WQEBBs free for new WQEs.
    #[inline(always)]
    pub fn free_bbs(&self) -> u16 {
        self.wqe_cnt - self.pi.wrapping_sub(self.ci)
    }

    /// Whether every WQE has been retired.
    pub fn is_idle(&self) -> bool {
        self.pi == self.ci
    }

    /// The doorbell register.
    pub fn register(&self) -> &R {
        &self.bf
    }

    /// The producer index: the next WQE's index.
    pub fn pi(&self) -> u16 {
        self.pi
    }

    #[inline(always)]
    fn at(&self, start: usize, byte: usize) -> usize {
        (start + byte) & self.ring_mask
    }

    /// The ring position of WQEBB `index`: below `wqe_cnt`.
    #[inline(always)]
    fn block_index(&self, index: u16) -> usize {
        usize::from(index) & self.wqe_mask
    }

    /// The ring offset of WQEBB `index`: inside the ring, which `new`
    /// checked holds `wqe_cnt` WQEBBs, and 64-aligned.
    #[inline(always)]
    fn block_offset(&self, index: u16) -> usize {
        self.block_index(index) * WQEBB_BYTES
    }

    /// Write a WQE that gathers `sges`. It reaches the device at the next
    /// [`ring`](Self::ring).
    #[inline]
    pub fn post(&mut self, op: impl Into<Header>, sges: &[Sge], flags: u8, slot: SendSlot) -> Result<(), Full> {
        let header = op.into();
        let ds = header.ds() + sges.len();
        let start = self.begin(ds)?;
        let mut byte = self.headers(start, &header);
        for sge in sges {
            self.buf.write(self.at(start, byte), &wqe::data_seg(sge.length, sge.lkey, sge.addr));
            byte += SEG_BYTES;
        }
        self.finish(start, &header, ds, flags, slot);
        Ok(())
    }

    /// Write a UD send of `sges` to `av` and ring its doorbell: the
    /// control segment (opcode SEND), the datagram segment (PRM "Datagram
    /// Segment", three 16-byte units), then the data segments, as
    /// rdma-core's `_mlx5_post_send` lays out an `IBV_QPT_UD` send.
    pub fn send_ud(&mut self, av: &AddressVector, sges: &[Sge], flags: u8, slot: SendSlot) -> Result<(), Full> {
        let header = Header { opcode: opcode::SEND, imm: 0, remote: None, atomic: None };
        let datagram_ds = wqe::DATAGRAM_BYTES / SEG_BYTES;
        let ds = header.ds() + datagram_ds + sges.len();
        let start = self.begin(ds)?;
        let mut byte = SEG_BYTES;
        // A segment of 16 bytes never straddles the ring's end: each is
        // written at its own wrapped offset.
        for seg in wqe::datagram_words(av) {
            self.buf.write(self.at(start, byte), &wqe::seg_bytes(seg));
            byte += SEG_BYTES;
        }
        for sge in sges {
            self.buf.write(self.at(start, byte), &wqe::data_seg(sge.length, sge.lkey, sge.addr));
            byte += SEG_BYTES;
        }
        self.finish(start, &header, ds, flags, slot);
        self.ring();
        Ok(())
    }

    /// Write a WQE that carries the `len` bytes of `sges` inline.
    ///
    /// # Safety
    /// Each segment's `[addr, addr + length)` is readable memory: it lies
    /// inside a live memory registration. `len` is the sum of the
    /// segments' lengths (the WQE is sized by it).
    #[inline]
    pub unsafe fn post_inline(
        &mut self,
        op: impl Into<Header>,
        sges: &[Sge],
        len: u32,
        flags: u8,
        slot: SendSlot,
    ) -> Result<(), Full> {
        let header = op.into();
        let ds = header.ds() + inline_data_ds(len);
        let len = len as usize;
        let start = self.begin(ds)?;
        let mut byte = self.headers(start, &header);
        if len != 0 {
            self.buf.write(self.at(start, byte), &wqe::inline_header(len as u32));
            byte += 4;
            for sge in sges {
                // A DAT address is an integer: the consumer exposed its pointer.
                let (mut src, mut left) =
                    (core::ptr::with_exposed_provenance::<u8>(sge.addr as usize), sge.length as usize);
                while left != 0 {
                    let offset = self.at(start, byte);
                    let n = left.min(self.ring_mask + 1 - offset);
                    // SAFETY: the caller vouches that the segment is
                    // readable; `src..src + n` stays inside it.
                    unsafe { self.buf.copy_in(offset, src, n) };
                    src = src.wrapping_add(n);
                    left -= n;
                    byte += n;
                }
            }
        }
        self.finish(start, &header, ds, flags, slot);
        Ok(())
    }

    /// Write a UMR WQE (a memory window bind, [`crate::mw`]): `imm` is the
    /// window's current key, `body` the segments after the control
    /// segment. The WQE after it carries the initiator small fence.
    pub fn post_umr(&mut self, imm: u32, body: &[SegWords], flags: u8, slot: SendSlot) -> Result<(), Full> {
        let header = Header { opcode: opcode::UMR, imm, remote: None, atomic: None };
        let ds = header.ds() + body.len();
        let start = self.begin(ds)?;
        for (n, seg) in (1..).zip(body) {
            self.buf.write(self.at(start, n * SEG_BYTES), &wqe::seg_bytes(*seg));
        }
        self.finish(start, &header, ds, flags, slot);
        self.fence_next = wqe::fm_ce_se::INITIATOR_SMALL_FENCE;
        self.lane_room = 0;
        Ok(())
    }

    /// Room for a WQE of `ds` segments: its first byte in the ring.
    #[inline(always)]
    fn begin(&self, ds: usize) -> Result<usize, Full> {
        if wqe::bbs(ds) > usize::from(self.free_bbs()) || ds > usize::from(u8::MAX) {
            return Err(Full);
        }
        Ok((usize::from(self.pi) & self.wqe_mask) * WQEBB_BYTES)
    }

    /// The remote-address and atomic segments; the byte after them.
    #[inline(always)]
    fn headers(&self, start: usize, header: &Header) -> usize {
        let mut byte = SEG_BYTES;
        if let Some(r) = header.remote {
            self.buf.write(self.at(start, byte), &wqe::raddr_seg(r.addr, r.rkey));
            byte += SEG_BYTES;
        }
        if let Some((swap_add, compare)) = header.atomic {
            self.buf.write(self.at(start, byte), &wqe::atomic_seg(swap_add, compare));
            byte += SEG_BYTES;
        }
        byte
    }

    /// The control segment, last; the slot; the producer index.
    #[inline(always)]
    fn finish(&mut self, start: usize, header: &Header, ds: usize, flags: u8, slot: SendSlot) {
        let flags = flags | core::mem::take(&mut self.fence_next);
        let ctrl = wqe::ctrl_words(self.pi, header.opcode, 0, self.qpn, ds as u8, flags, header.imm);
        self.buf.write(start, &wqe::seg_bytes(ctrl));
        let bbs = wqe::bbs(ds) as u16;
        self.last = Last { pi: self.pi, word: ctrl[0], bbs };
        self.pending += 1;
        // A doorbell is owed: no lane until `ring`.
        self.lane_room = 0;
        self.keep(slot, bbs);
    }

    /// Keep what the WQE at the producer index reports on completion, and
    /// move the producer index past its `bbs` WQEBBs: the new index, in a
    /// register (the slot store may alias `self` as far as the compiler
    /// knows, so it would load the field again).
    #[inline(always)]
    fn keep(&mut self, mut slot: SendSlot, bbs: u16) -> u16 {
        slot.bbs = bbs;
        let pi = self.pi;
        let next = pi.wrapping_add(bbs);
        self.pi = next;
        let slots = self.slots.as_mut();
        let i = usize::from(pi) & self.wqe_mask;
        debug_assert!(i < slots.len());
        // SAFETY: `i <= wqe_mask`, which is `wqe_cnt - 1` from `new` on;
        // `new` checked that the slots are at least `wqe_cnt`, a length
        // that `SlotStorage` holds still (the queue uses them only
        // through `as_ref` and `as_mut`).
        unsafe { *slots.get_unchecked_mut(i) = slot };
        next
    }

    /// Post a WQE that gathers `sges` and ring the doorbell for it. With
    /// nothing else waiting for a doorbell and a WQE of one WQEBB, the WQE
    /// is built in registers as the eight words of its WQEBB (its segments
    /// at fixed places, no loop and no zeroed staging array), stored into
    /// the ring whole and copied to the BlueFlame register from the same
    /// words.
    #[inline(always)]
    pub fn send(&mut self, op: impl Into<Header>, sges: &[Sge], flags: u8, slot: SendSlot) -> Result<(), Full> {
        let header = op.into();
        let ds = header.ds() + sges.len();
        if self.pending != 0 || ds > self.staged_segs[0] {
            return self.post_and_ring(header, sges, flags, slot);
        }
        // One WQEBB: room for it is one free WQEBB.
        if self.pi.wrapping_sub(self.ci) >= self.wqe_cnt {
            return Err(Full);
        }
        let data = |i: usize| sges.get(i).map_or([0; 2], |s| wqe::data_words(s.length, s.lkey, s.addr));
        // `ds` is at most 4, so the segments after the control segment
        // are the headers, then the data, in the three places left.
        let segs = match (header.remote, header.atomic) {
            (Some(r), Some((swap_add, compare))) => {
                [wqe::raddr_words(r.addr, r.rkey), wqe::atomic_words(swap_add, compare), data(0)]
            }
            (Some(r), None) => [wqe::raddr_words(r.addr, r.rkey), data(0), data(1)],
            (None, _) => [data(0), data(1), data(2)],
        };
        let flags = flags | core::mem::take(&mut self.fence_next);
        let ctrl = wqe::ctrl_words(self.pi, header.opcode, 0, self.qpn, ds as u8, flags, header.imm);
        let block = [ctrl[0], ctrl[1], segs[0][0], segs[0][1], segs[1][0], segs[1][1], segs[2][0], segs[2][1]];
        // SAFETY: `block_offset` is 64-aligned and inside the ring.
        unsafe { self.buf.store_block(self.block_offset(self.pi), &block) };
        self.keep(slot, 1);
        barrier::to_device_barrier();
        self.dbrec.write_be32(SND_DBR * 4, u32::from(self.pi));
        barrier::wc_start();
        self.bf.write_block(self.bf_offset, &block);
        self.bf.flush();
        self.bf_offset ^= self.bf_size;
        // The fence it carried is paid.
        self.reopen();
        Ok(())
    }

    /// The lane of a request of one data segment: its WQE built in
    /// registers as the words of one WQEBB, stored into the ring and
    /// copied to BlueFlame from the same words, and rung. Taken only when
    /// nothing waits for a doorbell, the queue has BlueFlame and a WQEBB is
    /// free; otherwise `false`, and nothing was written ([`send`](Self::send)
    /// then decides, which may ring another way or refuse). Nothing is
    /// re-checked per post that [`new`](Self::new) checked once.
    #[inline(always)]
    pub fn try_send_one(&mut self, opcode: u8, remote: Option<Remote>, sge: Sge, flags: u8, slot: SendSlot) -> bool {
        // No doorbell owed, no fence owed, BlueFlame, and a free WQEBB.
        debug_assert_eq!(self.lane_room, self.room_for_lanes());
        if self.pi.wrapping_sub(self.ci) >= self.lane_room {
            return false;
        }
        let data = wqe::data_words(sge.length, sge.lkey, sge.addr);
        let (ds, first, second) = match remote {
            Some(r) => (3, wqe::raddr_words(r.addr, r.rkey), data),
            None => (2, data, [0; 2]),
        };
        let ctrl = [wqe::ctrl_head_with(self.pi, opcode, self.lane_qpn_ds[ds - 2]), wqe::ctrl_tail(flags, 0)];
        let wqe = [ctrl[0], ctrl[1], first[0], first[1], second[0], second[1]];
        // The ring gets the WQE's `ds` segments, which are all the device
        // reads: the rest of the WQEBB is left as it was (rdma-core writes
        // no padding either). BlueFlame gets the whole WQEBB, as
        // rdma-core's `mlx5_bf_copy` copies whole blocks, so the
        // write-combining buffer fills and goes out in one burst.
        let at = self.block_offset(self.pi);
        // SAFETY: `at` is 64-aligned and inside the ring, which holds whole
        // WQEBBs: the four or six words lie in the WQEBB.
        unsafe {
            if ds == 3 {
                self.buf.store_words(at, &wqe);
            } else {
                self.buf.store_words(at, &[wqe[0], wqe[1], wqe[2], wqe[3]]);
            }
        }
        let block = [wqe[0], wqe[1], wqe[2], wqe[3], wqe[4], wqe[5], 0, 0];
        let pi = self.keep(slot, 1);
        self.doorbell(pi);
        // SAFETY: `bf_offset` is 0 or `bf_size`, and `new` checked that
        // both halves lie in the register.
        unsafe { self.bf.store_block(self.bf_offset, &block) };
        self.bf.flush();
        // An open lane has BlueFlame, of halves of `BF_BYTES` (`reopen`).
        self.bf_offset ^= BF_BYTES;
        true
    }

    /// A request of one data segment, as [`try_send_one`](Self::try_send_one)
    /// builds it, kept built for this queue: its WQE but for the index,
    /// and its slot but for the cookie.
    pub fn keep_wqe(&self, opcode: u8, remote: Option<Remote>, sge: Sge, flags: u8, slot: SendSlot) -> KeptWqe {
        let data = wqe::data_words(sge.length, sge.lkey, sge.addr);
        let (ds, first, second) = match remote {
            Some(r) => (3, wqe::raddr_words(r.addr, r.rkey), data),
            None => (2, data, [0; 2]),
        };
        let ctrl = [wqe::ctrl_head_with(0, opcode, self.lane_qpn_ds[ds - 2]), wqe::ctrl_tail(flags, 0)];
        KeptWqe::new([ctrl[0], ctrl[1], first[0], first[1], second[0], second[1], 0, 0], slot)
    }

    /// The lane of a WQE this queue kept ([`keep_wqe`](Self::keep_wqe)),
    /// posted with `cookie`: the kept WQEBB with its index stored into the
    /// ring and copied to BlueFlame from the same registers, and rung.
    /// Taken, as [`try_send_one`](Self::try_send_one)'s lane, only when
    /// nothing waits for a doorbell, the queue has BlueFlame and a WQEBB
    /// is free; otherwise `false`, and nothing was written. The ring gets
    /// the whole WQEBB, its bytes past the WQE's segments zero, which the
    /// device does not read.
    #[inline(always)]
    pub fn try_send_kept(&mut self, kept: &KeptWqe, cookie: u64) -> bool {
        debug_assert_eq!(self.lane_room, self.room_for_lanes());
        if self.pi.wrapping_sub(self.ci) >= self.lane_room {
            return false;
        }
        let block = kept.at(self.pi);
        // SAFETY: `block_offset` is 64-aligned and inside the ring.
        unsafe { self.buf.store_wqebb(self.block_offset(self.pi), &block) };
        let pi = self.keep(kept.slot(cookie), 1);
        self.doorbell(pi);
        // SAFETY: `bf_offset` is 0 or `bf_size`, and `new` checked that
        // both halves lie in the register.
        unsafe { self.bf.store_wqebb(self.bf_offset, &block) };
        self.bf.flush();
        // An open lane has BlueFlame, of halves of `BF_BYTES` (`reopen`).
        self.bf_offset ^= BF_BYTES;
        true
    }

    /// The lane of a request whose `len` bytes at `addr` go inline (1 to
    /// what one BlueFlame copy holds): the WQE is written into the ring in
    /// place, its data copied straight from the consumer's memory, and
    /// BlueFlame copies it from the ring, with no staging on the stack.
    /// Taken only when nothing waits for a doorbell, the WQE fits one
    /// BlueFlame copy, its WQEBBs are free and do not wrap round the ring;
    /// otherwise `false`, and nothing was written.
    ///
    /// # Safety
    /// `[addr, addr + len)` is readable memory: it lies inside a live
    /// memory registration.
    #[inline(always)]
    pub unsafe fn try_send_inline_one(
        &mut self,
        opcode: u8,
        remote: Option<Remote>,
        addr: u64,
        len: u32,
        flags: u8,
        slot: SendSlot,
    ) -> bool {
        let head = 1 + remote.is_some() as usize;
        let ds = head + wqe::inline_ds(len as usize);
        let bbs = wqe::bbs(ds);
        let first = usize::from(self.pi) & self.wqe_mask;
        debug_assert_eq!(self.lane_room, self.room_for_lanes());
        // An open lane (no doorbell or fence owed, BlueFlame of halves of
        // `BF_BYTES`) with room for all `bbs` (at most 4 by then, so
        // `bbs as u16` is exact; a sum past `u16::MAX` has no room either),
        // and no wrap: `first + bbs` is below `MAX_WQEBBS + 4` then, so
        // exact in 16 bits, and compared with the 16-bit count as it is.
        if len == 0
            || ds * SEG_BYTES > BF_BYTES
            || self.pi.wrapping_sub(self.ci).checked_add(bbs as u16).is_none_or(|n| n > self.lane_room)
            || (first + bbs) as u16 > self.wqe_cnt
        {
            return false;
        }
        let start = first * WQEBB_BYTES;
        // The second field as the lane of one WQEBB keeps it for `ds` 2,
        // plus the `ds` beyond 2 (a header and inline data make at least
        // 2; at most 16, so the sum stays in the field's byte).
        let qpn_ds = self.lane_qpn_ds[0] + wqe::qpn_ds_word(ds as u32 - 2);
        let ctrl = [wqe::ctrl_head_with(self.pi, opcode, qpn_ds), wqe::ctrl_tail(flags, 0)];
        // SAFETY: the WQE's `bbs` WQEBBs from `start` are inside the ring
        // (`first + bbs <= wqe_cnt`, and `new` checked the ring holds
        // `wqe_cnt` WQEBBs), and every segment stored below lies in them:
        // `ds` segments, the inline data's bytes included.
        unsafe {
            self.buf.store_words(start, &ctrl);
            let mut at = start + SEG_BYTES;
            if let Some(r) = remote {
                self.buf.store_words(at, &wqe::raddr_words(r.addr, r.rkey));
                at += SEG_BYTES;
            }
            self.finish_inline(start, at, wqe::inline_words(len), addr, len, bbs, slot)
        }
    }

    /// A request whose `len` bytes at `addr` go inline, as
    /// [`try_send_inline_one`](Self::try_send_inline_one) builds it, kept
    /// for this queue: its segments before the data but for the index;
    /// `None` where the lane would not take it (no data, or more than one
    /// BlueFlame copy holds).
    pub fn keep_inline(
        &self,
        opcode: u8,
        remote: Option<Remote>,
        addr: u64,
        len: u32,
        flags: u8,
        slot: SendSlot,
    ) -> Option<KeptInline> {
        let head = 1 + remote.is_some() as usize;
        let ds = head + wqe::inline_ds(len as usize);
        if len == 0 || ds * SEG_BYTES > BF_BYTES {
            return None;
        }
        let qpn_ds = self.lane_qpn_ds[0] + wqe::qpn_ds_word(ds as u32 - 2);
        let raddr = remote.map_or([0; 2], |r| wqe::raddr_words(r.addr, r.rkey));
        let words = [wqe::ctrl_head_with(0, opcode, qpn_ds), wqe::ctrl_tail(flags, 0), raddr[0], raddr[1]];
        let bbs = wqe::bbs(ds) as u16;
        Some(KeptInline { words, remote: remote.is_some(), inline: wqe::inline_words(len), addr, len, bbs, slot })
    }

    /// The lane of a request this queue kept inline
    /// ([`keep_inline`](Self::keep_inline)), posted with `cookie`: as
    /// [`try_send_inline_one`](Self::try_send_inline_one)'s, its segments
    /// before the data as they were kept, but for the index.
    ///
    /// # Safety
    /// As [`try_send_inline_one`](Self::try_send_inline_one)'s, for the
    /// kept request's data.
    #[inline(always)]
    pub unsafe fn try_send_inline_kept(&mut self, kept: &KeptInline, cookie: u64) -> bool {
        let bbs = usize::from(kept.bbs);
        let first = usize::from(self.pi) & self.wqe_mask;
        debug_assert_eq!(self.lane_room, self.room_for_lanes());
        // As `try_send_inline_one`'s test, of a WQE `keep_inline` found to
        // fit one BlueFlame copy.
        if self.pi.wrapping_sub(self.ci).checked_add(kept.bbs).is_none_or(|n| n > self.lane_room)
            || (first + bbs) as u16 > self.wqe_cnt
        {
            return false;
        }
        let start = first * WQEBB_BYTES;
        let head = kept.at(self.pi);
        // SAFETY: as `try_send_inline_one`'s: the kept WQE is of `bbs`
        // WQEBBs, inside the ring from `start`; the caller's contract.
        unsafe {
            let at = if kept.remote {
                self.buf.store_words(start, &head);
                start + 2 * SEG_BYTES
            } else {
                self.buf.store_words(start, &[head[0], head[1]]);
                start + SEG_BYTES
            };
            self.finish_inline(start, at, kept.inline, kept.addr, kept.len, bbs, kept.slot(cookie))
        }
    }

    /// The inline lane's WQE from its inline segment on: the segment's
    /// word `inline` at `at`, the `len` bytes at `addr` after its four,
    /// then the slot, the doorbell and BlueFlame for the `bbs` WQEBBs
    /// from `start`, whose segments before `at` are written.
    ///
    /// # Safety
    /// As [`try_send_inline_one`](Self::try_send_inline_one)'s, for a WQE
    /// of `bbs` WQEBBs that fits one BlueFlame copy and lies in the ring
    /// from `start` without a wrap, with the lane open for it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn finish_inline(
        &mut self,
        start: usize,
        at: usize,
        inline: u64,
        addr: u64,
        len: u32,
        bbs: usize,
        slot: SendSlot,
    ) -> bool {
        // SAFETY: the caller's contract: the segment and the data lie in
        // the WQE's WQEBBs.
        unsafe {
            self.buf.store_words(at, &[inline]);
            // A DAT address is an integer: the consumer exposed its pointer.
            // The caller vouches that the bytes are readable.
            let src = core::ptr::with_exposed_provenance::<u8>(addr as usize);
            self.buf.copy_in_unchecked(at + 4, src, len as usize);
        }
        let pi = self.keep(slot, bbs as u16);
        self.doorbell(pi);
        let from = self.buf.block_ptr(start);
        // SAFETY: `bf_offset` is 0 or `bf_size`, both halves lie in the
        // register (`new` checked), and the WQE fits one half; its `bbs`
        // WQEBBs lie in the ring from the 64-aligned `start` (as above),
        // written above and read by nothing else meanwhile.
        unsafe {
            // A WQE of two WQEBBs, what a 64-byte send or RDMA write takes
            // (a write of 29 to 92 bytes, a send of 45 to 108), is copied
            // here: of a known length, unrolled, it needs one register and
            // no loop, and saves the call and `copy_out`'s own test of the
            // length. The others go out of line, as `copy_out` says why.
            if bbs == 2 {
                self.bf.store_blocks_from(self.bf_offset, from, 2);
            } else {
                copy_out(&mut self.bf, self.bf_offset, from, bbs);
            }
        }
        self.bf.flush();
        self.bf_offset ^= BF_BYTES;
        true
    }

    /// The doorbell record of what was just written, up to the producer
    /// index `pi`, ordered after the WQE and before the BlueFlame copy
    /// (PRM "Send Doorbell").
    #[inline(always)]
    fn doorbell(&mut self, pi: u16) {
        barrier::to_device_barrier();
        // SAFETY: `new` checked that the record holds both counters.
        unsafe { self.dbrec.store_be32(SND_DBR * 4, u32::from(pi)) };
        barrier::wc_start();
    }

    /// [`post`](Self::post), then [`ring`](Self::ring): out of line, so
    /// that [`send`](Self::send) inlines only its WQE of one WQEBB.
    #[inline(never)]
    fn post_and_ring(&mut self, header: Header, sges: &[Sge], flags: u8, slot: SendSlot) -> Result<(), Full> {
        self.post(header, sges, flags, slot)?;
        self.ring();
        Ok(())
    }

    /// Post a WQE that carries the `len` bytes of `sges` inline and ring
    /// the doorbell for it; built on the stack as [`send`](Self::send)
    /// builds one, when it fits a BlueFlame copy.
    ///
    /// # Safety
    /// As [`post_inline`](Self::post_inline).
    #[inline]
    pub unsafe fn send_inline(
        &mut self,
        op: impl Into<Header>,
        sges: &[Sge],
        len: u32,
        flags: u8,
        slot: SendSlot,
    ) -> Result<(), Full> {
        let header = op.into();
        let ds = header.ds() + inline_data_ds(len);
        if self.pending != 0 || ds > self.staged_segs[1] {
            // SAFETY: forwarded contract.
            unsafe { self.post_inline(header, sges, len, flags, slot)? };
            self.ring();
            return Ok(());
        }
        self.begin(ds)?;
        let mut wqe = Staged::<{ BF_BYTES / WQEBB_BYTES }>::new();
        let n = wqe.headers(&header);
        if len != 0 {
            // The inline segment's header, then its data from byte 4.
            wqe.put(n, [wqe::inline_words(len), 0]);
            let mut at = n * SEG_BYTES + 4;
            for sge in sges {
                // SAFETY: the caller vouches that each segment is
                // readable; the segments sum to `len`, which `ds` sized.
                unsafe { wqe.copy_in(at, core::ptr::with_exposed_provenance(sge.addr as usize), sge.length as usize) };
                at += sge.length as usize;
            }
        }
        // SAFETY: `ds <= staged_segs[1]`, which is 0 unless the queue has
        // BlueFlame of halves of `BF_BYTES`.
        unsafe { self.ring_staged(&mut wqe, &header, ds, flags, slot) };
        Ok(())
    }

    /// Store a staged WQE of `ds` segments into the ring, then ring its
    /// doorbell: the record, and the same words by BlueFlame.
    ///
    /// # Safety
    /// The queue has BlueFlame (`bf_size` is 256, which `new` checked
    /// lies twice in the register).
    #[inline(always)]
    unsafe fn ring_staged<const K: usize>(
        &mut self,
        wqe: &mut Staged<K>,
        header: &Header,
        ds: usize,
        flags: u8,
        slot: SendSlot,
    ) {
        const { assert!(K * WQEBB_BYTES <= BF_BYTES, "a staged WQE fits one BlueFlame half") };
        let flags = flags | core::mem::take(&mut self.fence_next);
        wqe.put(0, wqe::ctrl_words(self.pi, header.opcode, 0, self.qpn, ds as u8, flags, header.imm));
        let blocks = wqe.first(wqe::bbs(ds));
        let pi = self.pi;
        for (i, block) in blocks.iter().enumerate() {
            // SAFETY: `block_offset` is 64-aligned and inside the ring.
            unsafe { self.buf.store_block(self.block_offset(pi.wrapping_add(i as u16)), block) };
        }
        self.keep(slot, blocks.len() as u16);
        barrier::to_device_barrier();
        self.dbrec.write_be32(SND_DBR * 4, u32::from(self.pi));
        barrier::wc_start();
        // SAFETY: the WQE's at most `K` blocks fit one BlueFlame half (the
        // assertion above), `bf_offset` is 0 or `bf_size` and both halves
        // lie in the register (the contract); the blocks are this call's
        // own, 16-aligned (`Staged` is, and they are its first field).
        unsafe { self.bf.store_blocks_from(self.bf_offset, blocks.as_ptr().cast::<u64>(), blocks.len()) };
        self.bf.flush();
        self.bf_offset ^= self.bf_size;
        self.reopen();
    }

    /// Ring the doorbell for the WQEs written since the last one: the
    /// record, then BlueFlame for a lone WQE that fits, else the 8-byte
    /// doorbell with the last WQE's first control bytes.
    #[inline]
    pub fn ring(&mut self) {
        if self.pending == 0 {
            return;
        }
        barrier::to_device_barrier();
        self.dbrec.write_be32(SND_DBR * 4, u32::from(self.pi));
        barrier::wc_start();
        let Last { pi, word, bbs } = self.last;
        let bytes = usize::from(bbs) * WQEBB_BYTES;
        if self.pending == 1 && bytes <= self.bf_size {
            // The WQE's WQEBBs up to the ring's end, then those that wrapped
            // round to its start.
            let (first, bbs) = (self.block_index(pi), usize::from(bbs));
            let ahead = bbs.min(usize::from(self.wqe_cnt) - first);
            let (start, wrapped) = (self.buf.block_ptr(self.block_offset(pi)), self.buf.block_ptr(0));
            // SAFETY: `bf_offset` is 0 or `bf_size`, both halves lie in the
            // register (`new` checked), and the WQE's `bbs` WQEBBs fit one
            // (`bytes <= bf_size`). The `ahead` WQEBBs from `first` and the
            // `bbs - ahead` from 0 lie in the ring (`new` checked that it
            // holds `wqe_cnt`), each 64-aligned in a 64-aligned buffer
            // (`DmaBuf::new`'s contract), written by `post` and read by
            // nothing else meanwhile.
            unsafe {
                copy_out(&mut self.bf, self.bf_offset, start, ahead);
                if ahead < bbs {
                    let rest = self.bf_offset + ahead * WQEBB_BYTES;
                    copy_out(&mut self.bf, rest, wrapped, bbs - ahead);
                }
            }
        } else {
            self.bf.write64(self.bf_offset, word.to_ne_bytes());
        }
        self.bf.flush();
        self.bf_offset ^= self.bf_size;
        self.pending = 0;
        self.reopen();
    }

    /// What the outstanding WQE whose first WQEBB is `wqe_counter` (a
    /// CQE's) reports, left outstanding.
    #[inline]
    pub fn pending(&self, wqe_counter: u16) -> Option<&SendSlot> {
        if wqe_counter.wrapping_sub(self.ci) >= self.pi.wrapping_sub(self.ci) {
            return None;
        }
        self.slots.as_ref().get(usize::from(wqe_counter) & self.wqe_mask)
    }

    /// What the oldest outstanding WQE reports, if its first WQEBB is
    /// `wqe_counter` (a CQE's): a completion that [`retire`](Self::retire)
    /// would retire alone. Nothing is retired.
    #[inline(always)]
    pub fn oldest(&self, wqe_counter: u16) -> Option<&SendSlot> {
        if wqe_counter != self.ci || self.pi == self.ci {
            return None;
        }
        let slots = self.slots.as_ref();
        let i = usize::from(self.ci) & self.wqe_mask;
        debug_assert!(i < slots.len());
        // SAFETY: as in `keep`: `i <= wqe_mask < wqe_cnt`, which `new`
        // checked the slots hold, a length `SlotStorage` holds still.
        Some(unsafe { slots.get_unchecked(i) })
    }

    /// Retire the oldest outstanding WQE, of `bbs` WQEBBs: the `bbs` of
    /// the slot [`oldest`](Self::oldest) showed, at least 1 as every slot
    /// of an outstanding WQE holds (`keep` writes it).
    #[inline(always)]
    pub fn retire_oldest(&mut self, bbs: u16) {
        self.ci = self.ci.wrapping_add(bbs);
    }

    /// Retire the oldest outstanding WQE, whose CQE will never come (its
    /// CQ failed): its slot.
    pub fn retire_next(&mut self) -> Option<SendSlot> {
        if self.pi == self.ci {
            return None;
        }
        let slot = *self.slots.as_ref().get(usize::from(self.ci) & self.wqe_mask)?;
        self.ci = self.ci.wrapping_add(slot.bbs.max(1));
        Some(slot)
    }

    /// Retire the WQEs up to the one whose first WQEBB is `wqe_counter`
    /// (a CQE's): that WQE's slot and how many WQEs went. A counter that
    /// names no outstanding WQE retires nothing.
    #[inline(always)]
    pub fn retire(&mut self, wqe_counter: u16) -> Option<(SendSlot, u32)> {
        if wqe_counter.wrapping_sub(self.ci) >= self.pi.wrapping_sub(self.ci) {
            return None;
        }
        let mut retired = 0;
        loop {
            let slot = *self.slots.as_ref().get(usize::from(self.ci) & self.wqe_mask)?;
            retired += 1;
            let (this, bbs) = (self.ci, slot.bbs.max(1));
            self.ci = self.ci.wrapping_add(bbs);
            if wqe_counter.wrapping_sub(this) < bbs {
                return Some((slot, retired));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use super::*;
    use crate::mw;
    use crate::testing::{Memory, Recorder};
    use crate::wqe::{ctrl, fm_ce_se};

    const CNT: u32 = 8;
    const QPN: u32 = 0x1234;

    struct Queue {
        ring: Memory,
        _dbrec: Memory,
        sq: SendQueue<Recorder, [SendSlot; CNT as usize]>,
    }

    fn queue() -> Queue {
        let (ring, dbrec) = (Memory::new(CNT as usize * WQEBB_BYTES), Memory::new(64));
        let geometry = SqGeometry {
            qpn: QPN,
            buf: ring.share(),
            wqe_cnt: CNT,
            stride: 64,
            dbrec: dbrec.share(),
            bf: Recorder::default(),
            bf_size: 256,
        };
        let sq = SendQueue::new(geometry, [SendSlot::EMPTY; CNT as usize]).unwrap();
        Queue { ring, _dbrec: dbrec, sq }
    }

    fn slot(cookie: u64) -> SendSlot {
        SendSlot { cookie, length: 8, op: DtoOp::RdmaWrite, flags: CompletionFlags::DEFAULT, bbs: 0 }
    }

    /// The WQE at `index` as the device reads it (its `ds` segments,
    /// across the ring's end, less the last `padding` bytes), and the
    /// bytes of the doorbell that rang it, cut to the same length. The
    /// rest of a last WQEBB, and an inline segment's padding, are
    /// nobody's: a WQE built on the stack zeroes them, one written in
    /// place leaves them as they were.
    fn rung(q: &Queue, index: u16, padding: usize) -> (Vec<u8>, Vec<u8>) {
        let ring = q.ring.read(0, CNT as usize * WQEBB_BYTES);
        let start = usize::from(index) % CNT as usize * WQEBB_BYTES;
        let ds = usize::from(ring[start + ctrl::QPN_DS.end - 1]);
        let wqe: Vec<u8> = (0..ds * SEG_BYTES - padding).map(|i| ring[(start + i) % ring.len()]).collect();
        let writes = &q.sq.register().writes;
        let blocks = wqe::bbs(ds);
        let doorbell: Vec<u8> = writes[writes.len() - blocks..].iter().flat_map(|(_, b)| b.clone()).collect();
        (wqe.clone(), doorbell[..wqe.len()].to_vec())
    }

    /// A WQE built in words and rung at once (`send`, `send_inline`) is,
    /// in the ring and at the register, the WQE `post` writes in place
    /// and `ring` publishes; across the ring's end too.
    #[test]
    fn a_staged_wqe_is_the_wqe_post_and_ring_write() {
        let data: Vec<u8> = (0..100u8).collect();
        let remote = Remote { addr: 0x1122_3344_5566_7788, rkey: 0xabcd };
        let sges = [
            Sge { addr: data.as_ptr() as u64, length: 40, lkey: 7 },
            Sge { addr: data.as_ptr() as u64 + 40, length: 60, lkey: 7 },
        ];
        let (mut staged, mut posted) = (queue(), queue());
        // Two WQEBBs in, so the second round's inline WQE runs across the
        // ring's end.
        for q in [&mut staged, &mut posted] {
            for cookie in [90, 91] {
                q.sq.send(Op::Send, &sges, fm_ce_se::CQ_UPDATE, slot(cookie)).unwrap();
            }
            assert_eq!(q.sq.retire(1).map(|(s, n)| (s.cookie, n)), Some((91, 2)));
        }
        let mut wrapped = false;
        for (round, op) in [Op::Write(remote), Op::Write(remote), Op::Send, Op::WriteImm(remote, 9)].iter().enumerate()
        {
            let cookie = round as u64;
            // Gathered: one WQEBB.
            let gathered = staged.sq.pi();
            staged.sq.send(*op, &sges, fm_ce_se::CQ_UPDATE, slot(cookie)).unwrap();
            posted.sq.post(*op, &sges, fm_ce_se::CQ_UPDATE, slot(cookie)).unwrap();
            posted.sq.ring();
            assert_eq!(rung(&staged, gathered, 0), rung(&posted, gathered, 0), "round {round}, gathered");
            // Inline: two or three WQEBBs.
            let start = staged.sq.pi();
            // SAFETY: both segments lie in `data`, which outlives the posts.
            unsafe {
                staged.sq.send_inline(*op, &sges, 100, fm_ce_se::CQ_UPDATE, slot(cookie)).unwrap();
                posted.sq.post_inline(*op, &sges, 100, fm_ce_se::CQ_UPDATE, slot(cookie)).unwrap();
            }
            posted.sq.ring();
            wrapped |= u32::from(start) % CNT + u32::from(staged.sq.pi().wrapping_sub(start)) > CNT;
            // 4 + 100 bytes of inline segment, padded to 112.
            assert_eq!(rung(&staged, start, 8), rung(&posted, start, 8), "round {round}, inline");
            let (wqe, _) = rung(&staged, start, 8);
            assert_eq!(&wqe[wqe.len() - 100..], &data[..], "round {round}: the inline data");
            for q in [&mut staged, &mut posted] {
                assert_eq!(q.sq.retire(start).map(|(s, n)| (s.cookie, n)), Some((cookie, 2)));
            }
        }
        assert!(wrapped, "an inline WQE ran across the ring's end");
    }

    /// The lanes (`try_send_one`, `try_send_inline_one`) write and ring
    /// the WQE `post` writes and `ring` publishes, and keep the same slot;
    /// they refuse, writing nothing, what they leave to the ordinary send:
    /// a doorbell still owed, an inline WQE that would run across the
    /// ring's end.
    #[test]
    fn a_lane_wqe_is_the_wqe_post_and_ring_write_and_a_refused_one_writes_nothing() {
        let data: Vec<u8> = (0..100u8).collect();
        let remote = Remote { addr: 0x1122_3344_5566_7788, rkey: 0xabcd };
        let sge = Sge { addr: data.as_ptr() as u64, length: 100, lkey: 7 };
        let (mut lane, mut posted) = (queue(), queue());
        let rounds = [
            (opcode::RDMA_WRITE, Some(remote), Op::Write(remote)),
            (opcode::SEND, None, Op::Send),
            (opcode::RDMA_READ, Some(remote), Op::Read(remote)),
        ];
        for (round, (opcode, remote, op)) in rounds.into_iter().enumerate() {
            let cookie = round as u64;
            let gathered = lane.sq.pi();
            assert!(lane.sq.try_send_one(opcode, remote, sge, fm_ce_se::CQ_UPDATE, slot(cookie)));
            posted.sq.post(op, &[sge], fm_ce_se::CQ_UPDATE, slot(cookie)).unwrap();
            posted.sq.ring();
            assert_eq!(rung(&lane, gathered, 0), rung(&posted, gathered, 0), "round {round}, gathered");
            for q in [&mut lane, &mut posted] {
                let oldest = *q.sq.oldest(gathered).expect("the WQE just posted is the oldest");
                assert_eq!((oldest.cookie, oldest.bbs), (cookie, 1));
                q.sq.retire_oldest(oldest.bbs);
            }
            if matches!(op, Op::Read(_)) {
                continue;
            }
            // Inline: two WQEBBs.
            let start = lane.sq.pi();
            // SAFETY: the segment lies in `data`, which outlives the posts.
            unsafe {
                let slot = slot(cookie);
                assert!(lane.sq.try_send_inline_one(opcode, remote, sge.addr, 100, fm_ce_se::CQ_UPDATE, slot));
                posted.sq.post_inline(op, &[sge], 100, fm_ce_se::CQ_UPDATE, slot).unwrap();
            }
            posted.sq.ring();
            assert_eq!(rung(&lane, start, 8), rung(&posted, start, 8), "round {round}, inline");
            for q in [&mut lane, &mut posted] {
                assert_eq!(q.sq.retire(start).map(|(s, n)| (s.cookie, n)), Some((cookie, 1)), "round {round}");
            }
        }
        // Up to the ring's last WQEBB: an inline WQE of two would wrap.
        while lane.sq.pi() % CNT as u16 != CNT as u16 - 1 {
            let pi = lane.sq.pi();
            assert!(lane.sq.try_send_one(opcode::SEND, None, sge, fm_ce_se::CQ_UPDATE, slot(9)));
            let bbs = lane.sq.oldest(pi).expect("just posted").bbs;
            lane.sq.retire_oldest(bbs);
        }
        let before = (lane.ring.read(0, CNT as usize * WQEBB_BYTES), lane.sq.register().writes.len(), lane.sq.pi());
        // SAFETY: as above.
        let taken =
            unsafe { lane.sq.try_send_inline_one(opcode::SEND, None, sge.addr, 100, fm_ce_se::CQ_UPDATE, slot(10)) };
        assert!(!taken, "an inline WQE that would wrap is the ordinary send's");
        let after = (lane.ring.read(0, CNT as usize * WQEBB_BYTES), lane.sq.register().writes.len(), lane.sq.pi());
        assert_eq!(before, after, "a refused lane wrote");
        // A doorbell still owed: the lane leaves the WQE to `send`.
        let mut owed = queue();
        owed.sq.post(Op::Send, &[sge], fm_ce_se::CQ_UPDATE, slot(1)).unwrap();
        let pi = owed.sq.pi();
        assert!(!owed.sq.try_send_one(opcode::SEND, None, sge, fm_ce_se::CQ_UPDATE, slot(2)));
        assert_eq!(owed.sq.pi(), pi);
    }

    /// A request kept (`keep_wqe`, `keep_inline`) and posted again
    /// (`try_send_kept`, `try_send_inline_kept`) writes and rings, post
    /// after post and round the ring twice, the WQE the lanes build afresh
    /// for it, and keeps its slot with the cookie of each post; where the
    /// inline lane refuses a WQE that would run across the ring's end, so
    /// does the kept one, writing nothing; and with a doorbell owed both
    /// refuse. Inline data the lane would not take is not kept.
    #[test]
    fn a_kept_wqe_is_the_lanes_wqe_at_every_index() {
        let data: Vec<u8> = (0..64u8).collect();
        let remote = Remote { addr: 0x1122_3344_5566_7788, rkey: 0xabcd };
        let sge = Sge { addr: data.as_ptr() as u64, length: 64, lkey: 7 };
        let flags = fm_ce_se::CQ_UPDATE;
        let (mut kept, mut lane) = (queue(), queue());
        let shapes = [(opcode::RDMA_WRITE, Some(remote)), (opcode::SEND, None), (opcode::RDMA_READ, Some(remote))];
        for (opcode, remote) in shapes {
            let wqe = kept.sq.keep_wqe(opcode, remote, sge, flags, slot(0));
            for cookie in 0..2 * u64::from(CNT) {
                let start = kept.sq.pi();
                assert!(kept.sq.try_send_kept(&wqe, cookie));
                assert!(lane.sq.try_send_one(opcode, remote, sge, flags, slot(cookie)));
                assert_eq!(rung(&kept, start, 0), rung(&lane, start, 0), "opcode {opcode}, cookie {cookie}");
                for q in [&mut kept, &mut lane] {
                    let oldest = *q.sq.oldest(start).expect("the WQE just posted is the oldest");
                    assert_eq!((oldest.cookie, oldest.bbs), (cookie, 1));
                    q.sq.retire_oldest(1);
                }
            }
        }
        // One WQEBB more, so that WQEs of two come to the ring's end.
        for q in [&mut kept, &mut lane] {
            let start = q.sq.pi();
            assert!(q.sq.try_send_one(opcode::SEND, None, sge, flags, slot(0)));
            q.sq.retire_oldest(q.sq.oldest(start).expect("just posted").bbs);
        }
        let mut refused = 0;
        for (opcode, remote) in shapes.into_iter().take(2) {
            let inline = kept.sq.keep_inline(opcode, remote, sge.addr, 64, flags, slot(0)).expect("64 bytes go inline");
            for cookie in 0..2 * u64::from(CNT) {
                let (start, written) = (kept.sq.pi(), kept.sq.register().writes.len());
                // SAFETY: the data lies in `data`, which outlives the posts.
                let taken = unsafe {
                    let taken = kept.sq.try_send_inline_kept(&inline, cookie);
                    assert_eq!(taken, lane.sq.try_send_inline_one(opcode, remote, sge.addr, 64, flags, slot(cookie)));
                    if !taken {
                        assert_eq!(
                            (kept.sq.pi(), kept.sq.register().writes.len()),
                            (start, written),
                            "a refusal wrote"
                        );
                        refused += 1;
                        for q in [&mut kept, &mut lane] {
                            let op = remote.map_or(Op::Send, Op::Write);
                            q.sq.send_inline(op, &[sge], 64, flags, slot(cookie)).unwrap();
                        }
                    }
                    taken
                };
                let padding = wqe::inline_ds(64) * SEG_BYTES - 4 - 64;
                assert_eq!(rung(&kept, start, padding), rung(&lane, start, padding), "opcode {opcode}, {taken}");
                for q in [&mut kept, &mut lane] {
                    assert_eq!(q.sq.retire(start).map(|(s, _)| s.cookie), Some(cookie), "opcode {opcode}");
                }
            }
        }
        assert!(refused > 0, "no kept inline WQE came to the ring's end");
        assert!(kept.sq.keep_inline(opcode::SEND, None, sge.addr, 0, flags, slot(0)).is_none());
        let too_long = crate::backend::MAX_INLINE as u32 + 200;
        assert!(kept.sq.keep_inline(opcode::SEND, None, sge.addr, too_long, flags, slot(0)).is_none());
        // A doorbell still owed: neither kept lane takes a WQE.
        let wqe = kept.sq.keep_wqe(opcode::SEND, None, sge, flags, slot(0));
        let inline = kept.sq.keep_inline(opcode::SEND, None, sge.addr, 64, flags, slot(0)).expect("inline");
        kept.sq.post(Op::Send, &[sge], flags, slot(1)).unwrap();
        let pi = kept.sq.pi();
        assert!(!kept.sq.try_send_kept(&wqe, 2));
        // SAFETY: as above.
        assert!(!unsafe { kept.sq.try_send_inline_kept(&inline, 3) });
        assert_eq!(kept.sq.pi(), pi);
    }

    /// The inline lane writes and rings the WQE `post_inline` writes and
    /// `ring` publishes, for every length it takes (1 to
    /// [`MAX_INLINE`](crate::backend::MAX_INLINE), so those it copies
    /// itself and those it leaves to `memmove`, and a BlueFlame copy of one
    /// WQEBB to four), from every place in the ring: up to its last WQEBB,
    /// from its first, and, refused, across its end (which the ordinary
    /// send then writes). The data is the source's in the ring and at the
    /// register alike.
    #[test]
    fn an_inline_lane_wqe_of_every_length_is_the_wqe_post_inline_writes() {
        let max = crate::backend::MAX_INLINE;
        let data: Vec<u8> = (0..max).map(|i| (i * 37 + 11) as u8).collect();
        let remote = Remote { addr: 0x1122_3344_5566_7788, rkey: 0xabcd };
        let (mut lane, mut posted) = (queue(), queue());
        let (mut at_end, mut refused) = (0, 0);
        // Under Miri, every fifth length: each WQE size and ring place still.
        for len in (1..=max).step_by(if cfg!(miri) { 5 } else { 1 }) {
            for (opcode, remote, op) in
                [(opcode::RDMA_WRITE, Some(remote), Op::Write(remote)), (opcode::SEND, None, Op::Send)]
            {
                let (cookie, length) = (len as u64, len as u32);
                let sge = Sge { addr: data.as_ptr() as u64, length, lkey: 7 };
                let (start, head) = (lane.sq.pi(), 1 + usize::from(remote.is_some()));
                let first = u32::from(start) % CNT;
                let bbs = wqe::bbs(head + wqe::inline_ds(len)) as u32;
                // SAFETY: the segment lies in `data`, which outlives the posts.
                unsafe {
                    let flags = fm_ce_se::CQ_UPDATE;
                    if lane.sq.try_send_inline_one(opcode, remote, sge.addr, length, flags, slot(cookie)) {
                        at_end += usize::from(first + bbs == CNT);
                    } else {
                        assert!(first + bbs > CNT, "len {len}: refused, yet it does not wrap");
                        refused += 1;
                        lane.sq.send_inline(op, &[sge], length, flags, slot(cookie)).unwrap();
                    }
                    posted.sq.post_inline(op, &[sge], length, flags, slot(cookie)).unwrap();
                }
                posted.sq.ring();
                assert_eq!(lane.sq.pi(), posted.sq.pi(), "len {len}");
                let padding = wqe::inline_ds(len) * SEG_BYTES - 4 - len;
                let (wqe, doorbell) = rung(&lane, start, padding);
                assert_eq!(wqe, rung(&posted, start, padding).0, "len {len}: the ring");
                assert_eq!(doorbell, wqe, "len {len}: the BlueFlame copy");
                assert_eq!(&wqe[head * SEG_BYTES + 4..], &data[..len], "len {len}: the inline data");
                for q in [&mut lane, &mut posted] {
                    assert_eq!(q.sq.retire(start).map(|(s, n)| (s.cookie, n)), Some((cookie, 1)), "len {len}");
                }
            }
        }
        assert!(at_end > 0 && refused > 0, "{at_end} WQEs up to the ring's end, {refused} refused");
    }

    /// A window bind is a UMR WQE of its control segment and the `mw`
    /// segments, and the WQE after it waits for it (the initiator small
    /// fence); the one after that does not.
    #[test]
    fn the_wqe_after_a_umr_carries_the_small_fence() {
        let mut q = queue();
        let bind = mw::Bind {
            lkey: 0x500,
            addr: 0x1000,
            len: 4096,
            privileges: udat_core::types::MemPriv::REMOTE_READ,
            qpn: None,
        };
        let (body, n) = mw::bind_body(0x4201, Some(&bind));
        q.sq.post_umr(0x4200, &body[..n], fm_ce_se::CQ_UPDATE, slot(1)).unwrap();
        q.sq.ring();
        let remote = Remote { addr: 0, rkey: 1 };
        let sge = [Sge { addr: 0, length: 0, lkey: 0 }];
        q.sq.send(Op::Write(remote), &sge, fm_ce_se::CQ_UPDATE, slot(2)).unwrap();
        q.sq.send(Op::Write(remote), &sge, fm_ce_se::CQ_UPDATE, slot(3)).unwrap();
        let wqe = q.ring.read(0, 3 * WQEBB_BYTES);
        let expected_ctrl = wqe::ctrl_seg(0, opcode::UMR, 0, QPN, 12, fm_ce_se::CQ_UPDATE, 0x4200);
        assert_eq!(&wqe[..SEG_BYTES], &expected_ctrl[..]);
        let expected_body: Vec<u8> = body[..n].iter().flat_map(|s| wqe::seg_bytes(*s)).collect();
        assert_eq!(&wqe[SEG_BYTES..], &expected_body[..]);
        let fm_ce_se_of = |index: usize| q.ring.read(index * WQEBB_BYTES + ctrl::FM_CE_SE, 1)[0];
        assert_eq!(fm_ce_se_of(3), fm_ce_se::CQ_UPDATE | fm_ce_se::INITIATOR_SMALL_FENCE);
        assert_eq!(fm_ce_se_of(4), fm_ce_se::CQ_UPDATE);
    }

    /// A UD send written across the ring's end is its control segment
    /// (SEND, five units), the datagram segment and the data segment, read
    /// by the device from the ring and from BlueFlame alike; its slot
    /// reports a UD send.
    #[test]
    fn a_ud_send_across_the_rings_end_is_control_datagram_and_data() {
        let mut q = queue();
        for cookie in 0..CNT as u64 - 1 {
            q.sq.send(Op::Send, &[], 0, slot(cookie)).unwrap();
        }
        q.sq.retire(q.sq.pi().wrapping_sub(1)).unwrap();
        let av =
            wqe::AddressVector { qkey: 0x7865_4321, dqpn: 0x42, extended: true, rgid: [7; 16], ..Default::default() };
        let sge = Sge { addr: 0x1000, length: 100, lkey: 0x77 };
        let ud = SendSlot { op: DtoOp::SendUd, ..slot(9) };
        q.sq.send_ud(&av, &[sge], fm_ce_se::CQ_UPDATE, ud).unwrap();
        let (wqe, doorbell) = rung(&q, CNT as u16 - 1, 0);
        let ctrl = wqe::ctrl_seg(CNT as u16 - 1, opcode::SEND, 0, QPN, 5, fm_ce_se::CQ_UPDATE, 0);
        let expected: Vec<u8> =
            [&ctrl[..], &wqe::datagram_seg(&av)[..], &wqe::data_seg(100, 0x77, 0x1000)[..]].concat();
        assert_eq!(wqe, expected);
        assert_eq!(doorbell, expected);
        let (sent, _) = q.sq.retire(CNT as u16 - 1).unwrap();
        assert_eq!((sent.cookie, sent.op), (9, DtoOp::SendUd));
    }
}
