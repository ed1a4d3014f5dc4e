//! Receive queues and shared receive queues.
//!
//! A receive WQE is a scatter list of data segments (no control segment);
//! a list shorter than the WQE ends with a zero-length segment whose lkey
//! is `MLX5_INVALID_LKEY`. An RQ completes in order, so its CQEs retire
//! the oldest WQE. An SRQ WQE starts with a next segment: the free WQEs
//! form a list the device follows from WQE to WQE, and each CQE names the
//! WQE it consumed (`wqe_counter`), which goes back on the list's tail
//! (PRM "Shared Receive Queue"; rdma-core `mlx5_post_srq_recv`).

use crate::barrier;
use crate::mem::DmaBuf;
use crate::slots::SlotStorage;
use crate::sq::Sge;
use crate::wqe::{self, SEG_BYTES};
use crate::Geometry;

/// Index of the receive counter in a QP's doorbell record (`MLX5_RCV_DBR`).
#[doc(alias = "MLX5_RCV_DBR")]
pub const RCV_DBR: usize = 0;

/// What rdma-core hands over for a receive queue or an SRQ.
#[derive(Debug)]
pub struct RqGeometry {
    /// The WQE ring.
    pub buf: DmaBuf,
    /// WQEs in the ring, a power of two.
    pub wqe_cnt: u32,
    /// Bytes per WQE: room for its scatter entries.
    pub stride: u32,
    /// For an RQ the QP's record (receive counter first); for an SRQ its own.
    pub dbrec: DmaBuf,
}

/// What a receive WQE's completion reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvSlot {
    /// The cookie the receive was posted with.
    pub cookie: u64,
    /// SRQ only: the WQE after this one on the free list.
    pub next: u16,
}

/// The queue has no room; nothing was written.
pub use crate::sq::Full;

#[derive(Debug)]
struct Ring<S> {
    buf: DmaBuf,
    dbrec: DmaBuf,
    slots: S,
    mask: u16,
    cnt: u16,
    stride: usize,
    /// Bytes before a WQE's scatter list, whole segments: an SRQ's next
    /// segment.
    header: usize,
    /// Data segments a WQE holds.
    max_sge: usize,
}

impl<S: SlotStorage<RecvSlot>> Ring<S> {
    /// A ring of WQEs that each begin with `header_segs` segments of their
    /// own before the scatter list.
    fn new(geometry: RqGeometry, slots: S, header_segs: usize) -> Result<Ring<S>, Geometry> {
        let RqGeometry { buf, wqe_cnt, stride, dbrec } = geometry;
        let header = header_segs * SEG_BYTES;
        if !stride.is_power_of_two() || (stride as usize) < SEG_BYTES + header {
            return Err(Geometry::Stride);
        }
        if !wqe_cnt.is_power_of_two()
            || wqe_cnt > 1 << 15
            || buf.len() != (wqe_cnt * stride) as usize
            || slots.as_ref().len() < wqe_cnt as usize
            || dbrec.len() < 4
        {
            return Err(Geometry::Ring);
        }
        let max_sge = (stride as usize - header) / SEG_BYTES;
        Ok(Ring {
            buf,
            dbrec,
            slots,
            mask: (wqe_cnt - 1) as u16,
            cnt: wqe_cnt as u16,
            stride: stride as usize,
            header,
            max_sge,
        })
    }

    /// The scatter list of WQE `index`, after its header: stored as words
    /// into the geometry `new` checked, with no test of each segment's
    /// bounds.
    #[allow(unsafe_code)]
    #[inline(always)]
    fn scatter(&self, index: u16, sges: &[Sge]) -> Result<(), Full> {
        if sges.len() > self.max_sge {
            return Err(Full);
        }
        let mut at = usize::from(index & self.mask) * self.stride + self.header;
        for sge in sges {
            // SAFETY: `new` checked that the buffer is `cnt` WQEs of
            // `stride` bytes, a power of two, each a header of whole
            // segments and room for `max_sge` segments after it; the index
            // is masked and at most `max_sge` segments are written, so the
            // segment lies inside the buffer, 8-aligned.
            unsafe { self.buf.store_words(at, &wqe::data_words(sge.length, sge.lkey, sge.addr)) };
            at += SEG_BYTES;
        }
        if sges.len() < self.max_sge {
            // SAFETY: as above, the segment after the last, still one of
            // the WQE's `max_sge`.
            unsafe { self.buf.store_words(at, &wqe::data_words(0, wqe::INVALID_LKEY, 0)) };
        }
        Ok(())
    }

    /// The slot of WQE `index`, masked into the ring.
    #[allow(unsafe_code)]
    #[inline(always)]
    fn slot(&mut self, index: u16) -> &mut RecvSlot {
        let slots = self.slots.as_mut();
        let i = usize::from(index & self.mask);
        debug_assert!(i < slots.len());
        // SAFETY: `i <= mask`, which is `cnt - 1`; `new` checked that the
        // slots are at least `cnt`, a length `SlotStorage` holds still
        // (the ring uses them only through `as_ref` and `as_mut`).
        unsafe { slots.get_unchecked_mut(i) }
    }

    /// [`Ring::slot`], to read.
    #[allow(unsafe_code)]
    #[inline(always)]
    fn slot_ref(&self, index: u16) -> &RecvSlot {
        let slots = self.slots.as_ref();
        let i = usize::from(index & self.mask);
        debug_assert!(i < slots.len());
        // SAFETY: as in `slot`.
        unsafe { slots.get_unchecked(i) }
    }
}

/// A QP's receive queue.
#[derive(Debug)]
pub struct RecvQueue<S> {
    ring: Ring<S>,
    head: u16,
    tail: u16,
}

impl<S: SlotStorage<RecvSlot>> RecvQueue<S> {
    /// Take over a receive queue, with one slot of `slots` per WQE.
    pub fn new(geometry: RqGeometry, slots: S) -> Result<Self, Geometry> {
        let mut rq = RecvQueue { ring: Ring::new(geometry, slots, 0)?, head: 0, tail: 0 };
        rq.reset();
        Ok(rq)
    }

    /// Empty, with a zero receive counter.
    pub fn reset(&mut self) {
        self.head = 0;
        self.tail = 0;
        self.ring.dbrec.write_be32(RCV_DBR * 4, 0);
    }

    /// Post a receive and publish it in the doorbell record.
    #[inline]
    pub fn post(&mut self, sges: &[Sge], cookie: u64) -> Result<(), Full> {
        self.post_inlined(sges, cookie)
    }

    /// [`post`](Self::post) of one segment, built in place in the lane of
    /// a receive; `false` when the queue is full, with nothing written.
    #[inline(always)]
    pub fn post_one(&mut self, sge: Sge, cookie: u64) -> bool {
        self.post_inlined(core::slice::from_ref(&sge), cookie).is_ok()
    }

    #[allow(unsafe_code)]
    #[inline(always)]
    fn post_inlined(&mut self, sges: &[Sge], cookie: u64) -> Result<(), Full> {
        if self.head.wrapping_sub(self.tail) == self.ring.cnt {
            return Err(Full);
        }
        self.ring.scatter(self.head, sges)?;
        self.ring.slot(self.head).cookie = cookie;
        self.head = self.head.wrapping_add(1);
        barrier::to_device_barrier();
        // SAFETY: `new` checked that the record holds its first word.
        unsafe { self.ring.dbrec.store_be32(RCV_DBR * 4, u32::from(self.head)) };
        Ok(())
    }

    /// The oldest receive's cookie, left outstanding.
    #[inline(always)]
    pub fn oldest(&self) -> Option<u64> {
        if self.head == self.tail {
            return None;
        }
        Some(self.ring.slot_ref(self.tail).cookie)
    }

    /// Retire the oldest receive: its cookie.
    #[inline]
    pub fn complete(&mut self) -> Option<u64> {
        if self.head == self.tail {
            return None;
        }
        let cookie = self.ring.slot(self.tail).cookie;
        self.tail = self.tail.wrapping_add(1);
        Some(cookie)
    }

    /// Whether no receive is outstanding.
    pub fn is_idle(&self) -> bool {
        self.head == self.tail
    }
}

/// A shared receive queue.
#[derive(Debug)]
pub struct SharedRecvQueue<S> {
    ring: Ring<S>,
    /// The next free WQE to fill.
    head: u16,
    /// The last WQE on the free list.
    tail: u16,
    /// Receives posted, free-running: the doorbell record's counter.
    counter: u16,
}

impl<S: SlotStorage<RecvSlot>> SharedRecvQueue<S> {
    /// Take over an SRQ and link every WQE into the free list. One WQE
    /// always stays on the list, so the SRQ holds `wqe_cnt - 1` receives.
    pub fn new(geometry: RqGeometry, slots: S) -> Result<Self, Geometry> {
        let ring = Ring::new(geometry, slots, 1)?;
        let mut srq = SharedRecvQueue { ring, head: 0, tail: 0, counter: 0 };
        for i in 0..srq.ring.cnt {
            let next = (i + 1) & srq.ring.mask;
            srq.ring.buf.write(usize::from(i) * srq.ring.stride, &wqe::srq_next_seg(next));
            *srq.ring.slot(i) = RecvSlot { cookie: 0, next };
        }
        srq.tail = srq.ring.mask;
        srq.ring.dbrec.write_be32(0, 0);
        Ok(srq)
    }

    /// Post a receive and publish it in the doorbell record.
    #[allow(unsafe_code)]
    #[inline]
    pub fn post(&mut self, sges: &[Sge], cookie: u64) -> Result<(), Full> {
        if self.head == self.tail {
            return Err(Full);
        }
        let index = self.head;
        self.ring.scatter(index, sges)?;
        let slot = self.ring.slot(index);
        slot.cookie = cookie;
        self.head = slot.next;
        self.counter = self.counter.wrapping_add(1);
        barrier::to_device_barrier();
        // SAFETY: `new` checked that the record holds its first word.
        unsafe { self.ring.dbrec.store_be32(0, u32::from(self.counter)) };
        Ok(())
    }

    /// The WQE a CQE names is consumed: its cookie; it joins the tail of
    /// the free list.
    #[inline]
    pub fn complete(&mut self, wqe_counter: u16) -> Option<u64> {
        let index = wqe_counter & self.ring.mask;
        if index == self.tail {
            return None;
        }
        let cookie = self.ring.slot(index).cookie;
        let tail = self.tail;
        self.ring.buf.write(usize::from(tail) * self.ring.stride, &wqe::srq_next_seg(index));
        self.ring.slot(tail).next = index;
        self.tail = index;
        Some(cookie)
    }

    /// Receives the SRQ can hold.
    pub fn capacity(&self) -> u32 {
        u32::from(self.ring.cnt) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Memory;

    fn seg(bytes: &[u8]) -> (u32, u32, u64) {
        let word = |r: core::ops::Range<usize>| bytes[r].iter().fold(0u64, |n, &b| n << 8 | u64::from(b));
        (word(0..4) as u32, word(4..8) as u32, word(8..16))
    }

    #[test]
    fn a_receive_fills_its_segments_and_ends_a_short_list_with_the_invalid_key() {
        // Four segments a WQE, four WQEs.
        let (ring, record) = (Memory::new(4 * 64), Memory::new(64));
        let geometry = RqGeometry { buf: ring.share(), wqe_cnt: 4, stride: 64, dbrec: record.share() };
        let mut rq = RecvQueue::new(geometry, [RecvSlot::default(); 4]).unwrap();
        let sge = |addr, length, lkey| Sge { addr, length, lkey };
        rq.post(&[sge(0x1000, 100, 7), sge(0x2000, 28, 8)], 1).unwrap();
        assert_eq!(seg(&ring.read(0, 16)), (100, 7, 0x1000));
        assert_eq!(seg(&ring.read(16, 16)), (28, 8, 0x2000));
        assert_eq!(seg(&ring.read(32, 16)), (0, wqe::INVALID_LKEY, 0), "the list ends");
        assert!(rq.post_one(sge(0x3000, 4, 9), 2));
        assert_eq!(seg(&ring.read(64, 16)), (4, 9, 0x3000), "the next WQE");
        assert_eq!(seg(&ring.read(80, 16)), (0, wqe::INVALID_LKEY, 0));
        assert_eq!(rq.post(&[sge(0, 1, 1); 5], 3), Err(Full), "more segments than a WQE holds");
        assert_eq!(&record.read(RCV_DBR * 4, 4), &2u32.to_be_bytes(), "two published");
    }

    #[test]
    fn an_srq_scatters_after_its_next_segment_and_a_ring_without_room_for_one_is_refused() {
        let (ring, record) = (Memory::new(4 * 32), Memory::new(64));
        let geometry = RqGeometry { buf: ring.share(), wqe_cnt: 4, stride: 32, dbrec: record.share() };
        let mut srq = SharedRecvQueue::new(geometry, [RecvSlot::default(); 4]).unwrap();
        srq.post(&[Sge { addr: 0x1000, length: 64, lkey: 5 }], 1).unwrap();
        assert_eq!(seg(&ring.read(SEG_BYTES, 16)), (64, 5, 0x1000), "after the next segment");
        let (ring, record) = (Memory::new(4 * 16), Memory::new(64));
        let geometry = RqGeometry { buf: ring.share(), wqe_cnt: 4, stride: 16, dbrec: record.share() };
        assert!(matches!(SharedRecvQueue::new(geometry, [RecvSlot::default(); 4]), Err(Geometry::Stride)));
    }

    /// The slots and the record are indexed unchecked once the queue is
    /// made: fewer slots than WQEs, or a record short of its word, are
    /// refused then.
    #[test]
    fn a_queue_with_fewer_slots_than_wqes_or_a_short_record_is_refused() {
        let (ring, record, short) = (Memory::new(4 * 64), Memory::new(64), Memory::new(2));
        let geometry = |dbrec: &Memory| RqGeometry { buf: ring.share(), wqe_cnt: 4, stride: 64, dbrec: dbrec.share() };
        let three = [RecvSlot::default(); 3];
        assert!(matches!(RecvQueue::new(geometry(&record), three), Err(Geometry::Ring)));
        assert!(matches!(SharedRecvQueue::new(geometry(&record), three), Err(Geometry::Ring)));
        let four = [RecvSlot::default(); 4];
        assert!(matches!(RecvQueue::new(geometry(&short), four), Err(Geometry::Ring)));
        let mut rq = RecvQueue::new(geometry(&record), four).unwrap();
        for cookie in 0..4 {
            assert!(rq.post_one(Sge { addr: 0x1000, length: 8, lkey: 1 }, cookie));
        }
        assert!(!rq.post_one(Sge { addr: 0x1000, length: 8, lkey: 1 }, 4), "full at four");
        assert_eq!((rq.complete(), rq.oldest()), (Some(0), Some(1)), "the oldest first");
    }
}
