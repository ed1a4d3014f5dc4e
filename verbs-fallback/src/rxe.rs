//! Soft-RoCE's queues, written and read in place.
//!
//! rdma_rxe shares each QP's send and receive queue, and each CQ's queue,
//! with user space: a header of producer and consumer indices, then a
//! power-of-two ring of entries (`<rdma/rdma_user_rxe.h>`:
//! `rxe_queue_buf`, `rxe_send_wqe`, `rxe_recv_wqe`; a CQ's entries are
//! `struct ib_uverbs_wc`). librxe's `post_send` writes the next entry,
//! moves the producer index with release ordering and rings the kernel
//! with an empty `IB_USER_VERBS_CMD_POST_SEND` (`write(2)` on the
//! context's command file); its `post_recv` writes and moves the index
//! alone; its `poll_cq` copies entries up to the kernel's producer index
//! and moves the consumer index. Those formats are the kernel's ABI.
//! Where librxe keeps the mapped queues is not: they are in its private
//! `rxe_qp` and `rxe_cq`, behind the `ibv_qp` and `ibv_cq`. So
//! [`Queues::find`] and [`CqRing::find`] look for them there by what they
//! know of them: each mapping's information (`mminfo`) and queue pointer,
//! and for a QP the limits it was created with, where librxe's
//! `map_queue_pair` and `rxe_create_cq` put them; then they check that
//! each pointer is exactly a shared mapping of the device's command file
//! at that information's offset (`/proc/self/maps`), and that each
//! header's ring holds the QP's work requests or the CQ's entries.
//! Anything amiss, and the QP or CQ goes through librxe's entry points, as
//! any other provider's does.
//!
//! A post here writes what librxe's `init_send_wqe` and
//! `rxe_post_one_recv` write, from the request's scalars, with no
//! `ibv_send_wr` in between, and makes the doorbell's system call itself.
//! Posts to one QP, and polls of one CQ, are never concurrent (the core
//! holds the EP or the EVD, alone or under its lock), as librxe's spin
//! locks ensure for its own.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::sys;

/// Soft-RoCE RC QPs and CQs of this process whose queues
/// [`Queues::find`] and [`CqRing::find`] found, and those they did not.
static FOUND: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// How many of this process's RC QPs and CQs on soft-RoCE reach their
/// queues in place, and how many through librxe because their queues were
/// not found: a test on rxe asserts the second is zero, so that a librxe
/// whose layout differs shows up as a failure rather than as a slower
/// post or poll.
pub fn queues_found() -> (u64, u64) {
    (FOUND[0].load(Ordering::Relaxed), FOUND[1].load(Ordering::Relaxed))
}

/// `sizeof(struct rxe_queue_buf)`: the header before a queue's ring.
const HEADER: usize = 384;
/// `offsetof(struct rxe_queue_buf, producer_index)`.
const PRODUCER: usize = 128;
/// `offsetof(struct rxe_queue_buf, consumer_index)`.
const CONSUMER: usize = 256;

/// `struct rxe_send_wqe`, to its gather list or inline data.
mod send_wqe {
    /// `wr`, `struct rxe_send_wr`, which librxe clears before writing it.
    pub const WR_BYTES: usize = 144;
    pub const WR_ID: usize = 0;
    pub const OPCODE: usize = 12;
    pub const SEND_FLAGS: usize = 16;
    /// `wr.ex.imm_data` or `wr.ex.invalidate_rkey`.
    pub const EX: usize = 20;
    /// `wr.wr.rdma.remote_addr`, then `rkey`.
    pub const REMOTE_ADDR: usize = 24;
    pub const RKEY: usize = 32;
    pub const STATE: usize = 148;
    pub const IOVA: usize = 152;
    /// `dma`, `struct rxe_dma_info`: length, resid, cur_sge, num_sge,
    /// sge_offset, reserved; then the segments or the inline data.
    pub const DMA: usize = 184;
    pub const SGE: usize = 208;
}

/// `struct rxe_recv_wqe`.
mod recv_wqe {
    pub const WR_ID: usize = 0;
    pub const DMA: usize = 16;
    pub const SGE: usize = 40;
}

/// `struct rxe_sge` is `struct ibv_sge`: address, length, key.
const SGE_BYTES: usize = 16;

/// A CQ's entry, `struct ib_uverbs_wc`, is `struct ibv_wc`, which
/// librxe's `poll_cq` copies it into.
const WC_BYTES: usize = std::mem::size_of::<sys::ibv_wc>();
const _: () = assert!(WC_BYTES == 48);

/// One mapped queue: its header and ring.
#[derive(Clone, Copy, Debug)]
struct Queue {
    base: *mut u8,
    /// `index_mask`: slots less one.
    mask: u32,
    /// `log2_elem_size`.
    log2: u32,
}

impl Queue {
    /// The queue at `base` whose mapping is `size` bytes, if its header
    /// describes a ring of at least `slots` entries of at least `entry`
    /// bytes that fits the mapping.
    ///
    /// # Safety
    /// `base` is a live mapping of at least `size` bytes, `size` at least
    /// a header's.
    unsafe fn at(base: *mut u8, size: usize, slots: u32, entry: usize) -> Option<Queue> {
        // SAFETY: the header lies in the mapping (the caller's contract).
        let (log2, mask) = unsafe { (base.cast::<u32>().read_volatile(), base.cast::<u32>().add(1).read_volatile()) };
        let ring = (mask as usize + 1).checked_shl(log2)?;
        let fits = log2 < 16
            && (mask as usize + 1).is_power_of_two()
            && mask >= slots
            && 1usize << log2 >= entry
            && HEADER.checked_add(ring).is_some_and(|end| end <= size);
        fits.then_some(Queue { base, mask, log2 })
    }

    /// The index word at `offset` of the header.
    #[inline(always)]
    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: the header is mapped as long as its QP or CQ lives, and
        // its index words are 4-aligned (the mapping is page-aligned); the
        // kernel reads and writes them as atomics too.
        unsafe { AtomicU32::from_ptr(self.base.add(offset).cast()) }
    }

    /// The next entry to write and its index, or `None` when the ring is
    /// full: one slot stays empty, as librxe's `queue_full` keeps it.
    #[inline(always)]
    fn next(&self) -> Option<(*mut u8, u32)> {
        let producer = self.index(PRODUCER).load(Ordering::Relaxed);
        let consumer = self.index(CONSUMER).load(Ordering::Acquire);
        let next = producer.wrapping_add(1) & self.mask;
        if next == consumer {
            return None;
        }
        // SAFETY: `producer & mask` is a slot of the ring, which lies in
        // the mapping (`Queue::at`).
        let entry = unsafe { self.base.add(HEADER + (((producer & self.mask) as usize) << self.log2)) };
        Some((entry, next))
    }

    /// Hand the entries written up to `next` to the kernel.
    #[inline(always)]
    fn publish(&self, next: u32) {
        self.index(PRODUCER).store(next, Ordering::Release);
    }
}

/// A QP's queues as rdma_rxe maps them, and how to ring its doorbell.
#[derive(Debug)]
pub(crate) struct Queues {
    send: Queue,
    /// None on a QP of an SRQ.
    recv: Option<Queue>,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline: u32,
    /// The context's command file, and the doorbell's command for the
    /// QP, made once.
    cmd_fd: i32,
    doorbell: PostSend,
}

/// `struct mminfo`: a queue's mapping offset in the command file, and
/// its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MmInfo {
    offset: u64,
    size: u32,
}

/// The part of librxe's `rxe_qp` after its `verbs_qp`: the receive
/// queue's `mminfo` and `rxe_wq` (queue, lock, max_sge, max_inline,
/// padded to 8), then the send queue's.
const WQ_STRIDE: usize = 16 + 24;

impl Queues {
    /// The queues of `qp`, an RC QP librxe made with the limits `cap`
    /// (as `ibv_create_qp` returned them) and an SRQ if `srq`; `None`
    /// unless each is found and checked as the module says.
    ///
    /// # Safety
    /// `qp` is a live QP of rdma_rxe, made through libibverbs.
    pub(crate) unsafe fn find(qp: *mut sys::ibv_qp, cap: &sys::ibv_qp_cap, srq: bool) -> Option<Queues> {
        // SAFETY: the caller's contract.
        counted(unsafe { Queues::look(qp, cap, srq) })
    }

    /// [`Queues::find`]'s search.
    ///
    /// # Safety
    /// As [`Queues::find`].
    unsafe fn look(qp: *mut sys::ibv_qp, cap: &sys::ibv_qp_cap, srq: bool) -> Option<Queues> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        // librxe allocates its `rxe_qp` with `calloc`, the `ibv_qp` first:
        // nothing past the allocation is read.
        // SAFETY: `qp` is the start of a live allocation of the C heap.
        let bytes = unsafe { libc::malloc_usable_size(qp.cast()) };
        let word = |at: usize| -> u64 {
            // SAFETY: `at + 8 <= bytes`, inside the allocation (checked
            // by every caller below).
            unsafe { qp.cast::<u8>().add(at).cast::<u64>().read_unaligned() }
        };
        let half = |at: usize| -> u32 {
            // SAFETY: as `word`.
            unsafe { qp.cast::<u8>().add(at).cast::<u32>().read_unaligned() }
        };
        let wq =
            |at: usize| (MmInfo { offset: word(at), size: half(at + 8) }, word(at + 16), half(at + 28), half(at + 32));
        let mut at = std::mem::size_of::<sys::ibv_qp>();
        while at + 2 * WQ_STRIDE <= bytes {
            let (recv_mi, recv_q, recv_sge, _) = wq(at);
            let (send_mi, send_q, send_sge, send_inline) = wq(at + WQ_STRIDE);
            let recv_ok = if srq {
                recv_mi.size == 0 && recv_q == 0
            } else {
                recv_sge == cap.max_recv_sge && mapped(&maps, recv_q, recv_mi)
            };
            if recv_ok
                && send_sge == cap.max_send_sge
                && send_inline == cap.max_inline_data
                && mapped(&maps, send_q, send_mi)
            {
                // SAFETY: each queue is a live mapping of its `mminfo`'s
                // size (`mapped`), which holds a header.
                let (send, recv) = unsafe {
                    let entry =
                        send_wqe::SGE + (cap.max_send_sge as usize * SGE_BYTES).max(cap.max_inline_data as usize);
                    let send = Queue::at(send_q as *mut u8, send_mi.size as usize, cap.max_send_wr, entry)?;
                    let recv = if srq {
                        None
                    } else {
                        let entry = recv_wqe::SGE + cap.max_recv_sge as usize * SGE_BYTES;
                        Some(Queue::at(recv_q as *mut u8, recv_mi.size as usize, cap.max_recv_wr, entry)?)
                    };
                    (send, recv)
                };
                // SAFETY: `qp` is live, and so its context.
                let (cmd_fd, handle) = unsafe { ((*(*qp).context).cmd_fd, (*qp).handle) };
                return Some(Queues {
                    send,
                    recv,
                    max_send_sge: cap.max_send_sge,
                    max_recv_sge: cap.max_recv_sge,
                    max_inline: cap.max_inline_data,
                    cmd_fd,
                    doorbell: PostSend::doorbell(handle),
                });
            }
            at += 8;
        }
        None
    }

    /// Post a request as librxe's `post_send` would: `opcode` and
    /// `send_flags` are `ibv_send_wr`'s, `ex` its immediate data or key
    /// to invalidate, `remote` the remote address and key (zeros for a
    /// send); the data inline if `send_flags` says so. Its length is the
    /// segments', summed here as librxe sums them, so that the inline
    /// bound holds for what is copied. Returns what
    /// `post_send` would: 0, or an errno.
    ///
    /// # Safety
    /// Each segment of `sges` is readable for its length where the flags
    /// ask for inline data; nothing else posts to the QP meanwhile.
    #[inline(always)]
    pub(crate) unsafe fn post_send(
        &self,
        wr_id: u64,
        opcode: u32,
        send_flags: u32,
        ex: u32,
        (remote_addr, rkey): (u64, u32),
        sges: &[sys::ibv_sge],
    ) -> i32 {
        let inline = send_flags & sys::ibv_send_flags::IBV_SEND_INLINE.0 != 0;
        let length = sges.iter().fold(0u32, |n, s| n.saturating_add(s.length));
        if sges.len() > self.max_send_sge as usize || (inline && length > self.max_inline) {
            return libc::EINVAL;
        }
        let Some((wqe, next)) = self.send.next() else { return libc::ENOMEM };
        // SAFETY: `wqe` is an entry of the ring, large enough for the QP's
        // segments or inline data (`Queue::at`); the segments' data is
        // readable (the caller's contract).
        unsafe {
            wqe.write_bytes(0, send_wqe::WR_BYTES);
            put(wqe, send_wqe::WR_ID, wr_id);
            put(wqe, send_wqe::OPCODE, opcode);
            put(wqe, send_wqe::SEND_FLAGS, send_flags);
            put(wqe, send_wqe::EX, ex);
            put(wqe, send_wqe::REMOTE_ADDR, remote_addr);
            put(wqe, send_wqe::RKEY, rkey);
            put(wqe, send_wqe::STATE, 0u32);
            put(wqe, send_wqe::IOVA, remote_addr);
            dma(wqe.add(send_wqe::DMA), length, sges.len() as u32);
            let data = wqe.add(send_wqe::SGE);
            if inline {
                let mut to = data;
                for sge in sges {
                    std::ptr::copy_nonoverlapping(sge.addr as *const u8, to, sge.length as usize);
                    to = to.add(sge.length as usize);
                }
            } else {
                std::ptr::copy_nonoverlapping(sges.as_ptr().cast::<u8>(), data, std::mem::size_of_val(sges));
            }
        }
        self.send.publish(next);
        self.doorbell()
    }

    /// Post a receive as librxe's `post_recv` would, without entering the
    /// kernel; 0 or an errno.
    #[inline(always)]
    pub(crate) fn post_recv(&self, wr_id: u64, sges: &[sys::ibv_sge]) -> i32 {
        let Some(recv) = &self.recv else { return libc::EINVAL };
        if sges.len() > self.max_recv_sge as usize {
            return libc::EINVAL;
        }
        let Some((wqe, next)) = recv.next() else { return libc::ENOMEM };
        let length = sges.iter().fold(0u32, |n, s| n.wrapping_add(s.length));
        // SAFETY: `wqe` is an entry of the ring, large enough for the QP's
        // segments (`Queue::at`).
        unsafe {
            put(wqe, recv_wqe::WR_ID, wr_id);
            dma(wqe.add(recv_wqe::DMA), length, sges.len() as u32);
            std::ptr::copy_nonoverlapping(
                sges.as_ptr().cast::<u8>(),
                wqe.add(recv_wqe::SGE),
                std::mem::size_of_val(sges),
            );
        }
        recv.publish(next);
        0
    }

    /// librxe's `post_send_db`: an `IB_USER_VERBS_CMD_POST_SEND` of no
    /// work requests, which has the kernel look at the send queue.
    #[inline(always)]
    fn doorbell(&self) -> i32 {
        // The system call itself, not libc's `write`: that is a
        // cancellation point, and a thread cancelled there would leave
        // its post half made and the provider's lock held.
        // SAFETY: `doorbell` is a whole command of the uverbs write ABI,
        // whose response goes to `RESPONSE`, which lives for ever.
        let n = unsafe {
            libc::syscall(
                libc::SYS_write,
                self.cmd_fd,
                std::ptr::from_ref(&self.doorbell),
                std::mem::size_of::<PostSend>(),
            )
        };
        if n == std::mem::size_of::<PostSend>() as i64 {
            0
        } else {
            crate::status::errno()
        }
    }
}

/// A CQ's queue as rdma_rxe maps it, which a poll reads in place of
/// librxe's `poll_cq`: librxe's `rxe_cq` keeps the queue's `mminfo` and
/// then the queue right after its `verbs_cq`, found and checked as a
/// QP's queues are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqRing(Queue);

impl CqRing {
    /// The queue of `cq`, or `None` unless found and checked.
    ///
    /// # Safety
    /// `cq` is a live CQ of rdma_rxe, made through libibverbs, and no
    /// poll of it runs meanwhile.
    pub(crate) unsafe fn find(cq: *mut sys::ibv_cq) -> Option<CqRing> {
        // SAFETY: the caller's contract.
        counted(unsafe { CqRing::look(cq) })
    }

    /// [`CqRing::find`]'s search.
    ///
    /// # Safety
    /// As [`CqRing::find`].
    unsafe fn look(cq: *mut sys::ibv_cq) -> Option<CqRing> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        // SAFETY: `cq` is the start of librxe's `calloc`ed `rxe_cq`.
        let bytes = unsafe { libc::malloc_usable_size(cq.cast()) };
        // SAFETY: `cq` is live.
        let entries = u32::try_from(unsafe { (*cq).cqe }).ok()?;
        let mut at = std::mem::size_of::<sys::ibv_cq>();
        while at + 24 <= bytes {
            // SAFETY: the 24 bytes at `at` lie in the allocation.
            let (offset, size, queue) = unsafe {
                let p = cq.cast::<u8>().add(at);
                (
                    p.cast::<u64>().read_unaligned(),
                    p.add(8).cast::<u32>().read_unaligned(),
                    p.add(16).cast::<u64>().read_unaligned(),
                )
            };
            let mi = MmInfo { offset, size };
            if mapped(&maps, queue, mi) {
                // SAFETY: a live mapping of `size` bytes (`mapped`).
                return unsafe { Queue::at(queue as *mut u8, size as usize, entries, WC_BYTES) }.map(CqRing);
            }
            at += 8;
        }
        None
    }

    /// Take up to `out.len()` work completions, oldest first, as
    /// librxe's `poll_cq` takes them; how many.
    #[inline(always)]
    pub(crate) fn poll(&self, out: &mut [std::mem::MaybeUninit<sys::ibv_wc>]) -> usize {
        let q = &self.0;
        let mut consumer = q.index(CONSUMER).load(Ordering::Relaxed);
        let producer = q.index(PRODUCER).load(Ordering::Acquire);
        let mut n = 0;
        while n < out.len() && consumer != producer {
            // SAFETY: `consumer & mask` is a slot of the ring, which lies
            // in the mapping and holds a whole work completion
            // (`Queue::at`); the kernel wrote it before it moved the
            // producer index this thread read with acquire ordering.
            unsafe {
                let entry = q.base.add(HEADER + (((consumer & q.mask) as usize) << q.log2));
                std::ptr::copy_nonoverlapping(entry, out[n].as_mut_ptr().cast::<u8>(), WC_BYTES);
            }
            consumer = consumer.wrapping_add(1) & q.mask;
            n += 1;
        }
        if n > 0 {
            q.index(CONSUMER).store(consumer, Ordering::Release);
        }
        n
    }
}

/// `found`, counted in [`FOUND`].
fn counted<T>(found: Option<T>) -> Option<T> {
    FOUND[usize::from(found.is_none())].fetch_add(1, Ordering::Relaxed);
    found
}

/// `IB_USER_VERBS_CMD_POST_SEND` of `<rdma/ib_user_verbs.h>`.
const IB_USER_VERBS_CMD_POST_SEND: u32 = 28;

/// `struct ib_uverbs_cmd_hdr` and `struct ib_uverbs_post_send` with no
/// work requests (`<rdma/ib_user_verbs.h>`).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct PostSend {
    command: u32,
    in_words: u16,
    out_words: u16,
    response: u64,
    qp_handle: u32,
    wr_count: u32,
    sge_count: u32,
    wqe_size: u32,
}

const _: () = assert!(std::mem::size_of::<PostSend>() == 32);

/// Where the kernel writes a doorbell's response: its `bad_wr`, which a
/// command of no work requests leaves 0 and which nothing reads. One for
/// every QP, so that a QP's command is made once rather than on each
/// post; the kernel's writes are the only accesses.
static RESPONSE: AtomicU32 = AtomicU32::new(0);

impl PostSend {
    /// librxe's `post_send_db` for the QP of `qp_handle`.
    fn doorbell(qp_handle: u32) -> PostSend {
        PostSend {
            command: IB_USER_VERBS_CMD_POST_SEND,
            in_words: (std::mem::size_of::<PostSend>() / 4) as u16,
            out_words: 1,
            response: RESPONSE.as_ptr() as u64,
            qp_handle,
            wr_count: 0,
            sge_count: 0,
            wqe_size: std::mem::size_of::<sys::ibv_send_wr>() as u32,
        }
    }
}

/// Write `value` at `offset` of the entry `wqe`.
///
/// # Safety
/// `offset` and the value's size lie in the entry, at its alignment.
#[inline(always)]
unsafe fn put<T>(wqe: *mut u8, offset: usize, value: T) {
    // SAFETY: the caller's contract.
    unsafe { wqe.add(offset).cast::<T>().write(value) }
}

/// `struct rxe_dma_info` at `at`: `length` bytes in `num_sge` segments,
/// none placed yet.
///
/// # Safety
/// `at` is the `dma` of an entry.
#[inline(always)]
unsafe fn dma(at: *mut u8, length: u32, num_sge: u32) {
    // SAFETY: the caller's contract; the six words are the struct's.
    unsafe { at.cast::<[u32; 6]>().write([length, length, 0, num_sge, 0, 0]) }
}

/// Whether `queue` is the start of a shared, writable mapping of a uverbs
/// device file at `mi`'s offset, of at least `mi`'s size, in `maps`
/// (`/proc/self/maps`).
fn mapped(maps: &str, queue: u64, mi: MmInfo) -> bool {
    if queue == 0 || queue % 4096 != 0 || (mi.size as usize) < HEADER {
        return false;
    }
    maps.lines().any(|line| {
        let mut fields = line.split_ascii_whitespace();
        let (Some(range), Some(perms), Some(offset), _, _, Some(path)) =
            (fields.next(), fields.next(), fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return false;
        };
        let Some((start, end)) = range.split_once('-') else { return false };
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        let (Some(start), Some(end), Some(offset)) = (hex(start), hex(end), hex(offset)) else { return false };
        start == queue
            && end - start >= u64::from(mi.size)
            && offset == mi.offset
            && perms.starts_with("rw")
            && perms.ends_with('s')
            && path.starts_with("/dev/infiniband/uverbs")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_a_mapping_of_the_device_file_at_its_offset() {
        let maps = "\
7f0000000000-7f0000003000 rw-s 00002000 00:05 123 /dev/infiniband/uverbs0
7f0000004000-7f0000005000 rw-p 00000000 00:00 0
7f0000006000-7f0000007000 rw-s 00000000 00:05 124 /dev/shm/other
";
        let mi = MmInfo { offset: 0x2000, size: 0x3000 };
        assert!(mapped(maps, 0x7f00_0000_0000, mi));
        assert!(!mapped(maps, 0x7f00_0000_0000, MmInfo { offset: 0x1000, ..mi }), "another offset");
        assert!(!mapped(maps, 0x7f00_0000_0000, MmInfo { size: 0x4000, ..mi }), "larger than the mapping");
        assert!(!mapped(maps, 0x7f00_0000_4000, MmInfo { offset: 0, size: 0x1000 }), "private memory");
        assert!(!mapped(maps, 0x7f00_0000_6000, MmInfo { offset: 0, size: 0x1000 }), "another file");
        assert!(!mapped(maps, 0x7f00_0000_1000, mi), "not the mapping's start");
    }

    /// A queue header and ring in ordinary memory, laid out as rdma_rxe
    /// lays one out.
    fn ring(slots: u32, log2: u32) -> Vec<u64> {
        let bytes = HEADER + ((slots as usize) << log2);
        let mut mem = vec![0u64; bytes / 8];
        let p = mem.as_mut_ptr().cast::<u32>();
        // SAFETY: the header's first two words.
        unsafe { (p.write(log2), p.add(1).write(slots - 1)) };
        mem
    }

    #[test]
    fn a_header_must_describe_a_ring_that_fits() {
        let mut mem = ring(8, 8);
        let base = mem.as_mut_ptr().cast::<u8>();
        let size = mem.len() * 8;
        // SAFETY: `base` holds `size` bytes.
        unsafe {
            assert!(Queue::at(base, size, 7, 256).is_some());
            assert!(Queue::at(base, size, 8, 256).is_none(), "one slot stays empty");
            assert!(Queue::at(base, size, 7, 257).is_none(), "entries too small");
            assert!(Queue::at(base, size - 1, 7, 256).is_none(), "past the mapping");
        }
    }

    #[test]
    fn entries_go_in_order_and_the_ring_keeps_one_empty() {
        let mut mem = ring(4, 8);
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: `base` holds the ring.
        let q = unsafe { Queue::at(base, mem.len() * 8, 3, 256) }.unwrap();
        let mut seen = Vec::new();
        while let Some((entry, next)) = q.next() {
            seen.push(entry as usize - base as usize);
            q.publish(next);
        }
        assert_eq!(seen, [HEADER, HEADER + 256, HEADER + 512]);
        q.index(CONSUMER).store(1, Ordering::Release);
        let (entry, next) = q.next().unwrap();
        assert_eq!((entry as usize - base as usize, next), (HEADER + 768, 0), "the ring wraps");
    }

    #[test]
    fn a_receive_is_written_as_librxe_writes_one() {
        let mut mem = ring(4, 7);
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: `base` holds the ring.
        let recv = unsafe { Queue::at(base, mem.len() * 8, 3, recv_wqe::SGE + 2 * SGE_BYTES) }.unwrap();
        // SAFETY: as above; a send queue this test leaves alone.
        let send = unsafe { Queue::at(base, mem.len() * 8, 0, 0) }.unwrap();
        let qs = Queues {
            send,
            recv: Some(recv),
            max_send_sge: 1,
            max_recv_sge: 2,
            max_inline: 0,
            cmd_fd: -1,
            doorbell: PostSend::doorbell(0),
        };
        let sges =
            [sys::ibv_sge { addr: 0x1000, length: 100, lkey: 7 }, sys::ibv_sge { addr: 0x2000, length: 28, lkey: 8 }];
        assert_eq!(qs.post_recv(0x8000_0000_0000_0005, &sges), 0);
        let word = |at: usize| {
            // SAFETY: inside the first entry.
            unsafe { base.add(HEADER + at).cast::<u32>().read() }
        };
        assert_eq!((word(0), word(4)), (5, 0x8000_0000));
        assert_eq!(
            [word(16), word(20), word(24), word(28), word(32)],
            [128, 128, 0, 2, 0],
            "length, resid, cur, num, offset"
        );
        assert_eq!([word(40), word(48), word(52), word(56), word(64), word(68)], [0x1000, 100, 7, 0x2000, 28, 8]);
        assert_eq!(qs.index_of(PRODUCER), 1);
        assert_eq!(qs.post_recv(1, &[sges[0]; 3]), libc::EINVAL, "more segments than the QP takes");
    }

    #[test]
    fn a_request_is_written_as_librxe_writes_one_then_rung() {
        let mut mem = ring(4, 9);
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: `base` holds the ring.
        let send = unsafe { Queue::at(base, mem.len() * 8, 3, send_wqe::SGE + 64) }.unwrap();
        // SAFETY: the first entry's bytes.
        unsafe { base.add(HEADER).write_bytes(0xee, 512) };
        let qs = Queues {
            send,
            recv: None,
            max_send_sge: 2,
            max_recv_sge: 0,
            max_inline: 64,
            cmd_fd: -1,
            doorbell: PostSend::doorbell(9),
        };
        let data = *b"inline data";
        let sges = [sys::ibv_sge { addr: data.as_ptr() as u64, length: data.len() as u32, lkey: 3 }];
        let flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0 | sys::ibv_send_flags::IBV_SEND_INLINE.0;
        // SAFETY: the segment's data is readable; no other poster.
        let rc = unsafe { qs.post_send(6, sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE, flags, 0, (0xabc0, 77), &sges) };
        assert_eq!(rc, libc::EBADF, "the doorbell is a write to the command file, here none");
        let entry = |at: usize, n: usize| {
            // SAFETY: inside the first entry.
            unsafe { std::slice::from_raw_parts(base.add(HEADER + at), n) }.to_vec()
        };
        let word = |at: usize| u32::from_ne_bytes(entry(at, 4).try_into().unwrap());
        assert_eq!(
            (word(0), word(12), word(16), word(24), word(32)),
            (6, sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE, flags, 0xabc0, 77)
        );
        assert!(entry(36, send_wqe::WR_BYTES - 36).iter().all(|&b| b == 0), "the rest of `wr` cleared");
        assert_eq!((word(send_wqe::STATE), word(send_wqe::IOVA)), (0, 0xabc0));
        assert_eq!([word(184), word(188), word(192), word(196), word(200)], [11, 11, 0, 1, 0]);
        assert_eq!(entry(send_wqe::SGE, 11), data, "the data inline");
        assert_eq!(qs.send.index(PRODUCER).load(Ordering::Relaxed), 1, "published before the doorbell");
        let long = [0u8; 65];
        let sges = [sys::ibv_sge { addr: long.as_ptr() as u64, length: 65, lkey: 3 }];
        // SAFETY: as above.
        let too_long = unsafe { qs.post_send(7, 0, flags, 0, (0, 0), &sges) };
        assert_eq!(too_long, libc::EINVAL, "more inline data than the QP takes");
    }

    #[test]
    fn a_doorbell_is_librxe_s_post_send_of_no_requests() {
        let d = PostSend::doorbell(9);
        assert_eq!((d.command, d.in_words, d.out_words), (IB_USER_VERBS_CMD_POST_SEND, 8, 1));
        assert_eq!((d.qp_handle, d.wr_count, d.sge_count), (9, 0, 0));
        assert_eq!(d.wqe_size as usize, std::mem::size_of::<sys::ibv_send_wr>());
        assert_eq!(d.response, RESPONSE.as_ptr() as u64, "a response the kernel may write");
    }

    #[test]
    fn completions_are_taken_oldest_first_and_the_consumer_index_follows() {
        let mut mem = ring(4, 6);
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: `base` holds the ring.
        let cq = CqRing(unsafe { Queue::at(base, mem.len() * 8, 3, WC_BYTES) }.unwrap());
        let mut out = [const { std::mem::MaybeUninit::<sys::ibv_wc>::uninit() }; 4];
        assert_eq!(cq.poll(&mut out), 0, "nothing produced");
        for (slot, wr_id) in [(3u32, 30u64), (0, 40), (1, 50)] {
            // SAFETY: the slot's first word, inside the ring.
            unsafe { base.add(HEADER + ((slot as usize) << 6)).cast::<u64>().write(wr_id) };
        }
        // The kernel produced three, starting at slot 3: the ring wraps.
        cq.0.index(CONSUMER).store(3, Ordering::Relaxed);
        cq.0.index(PRODUCER).store(2, Ordering::Release);
        assert_eq!(cq.poll(&mut out[..2]), 2);
        // SAFETY: `poll` wrote the first two.
        assert_eq!(unsafe { (out[0].assume_init_ref().wr_id, out[1].assume_init_ref().wr_id) }, (30, 40));
        assert_eq!(cq.0.index(CONSUMER).load(Ordering::Relaxed), 1);
        assert_eq!(cq.poll(&mut out), 1);
        // SAFETY: as above.
        assert_eq!(unsafe { out[0].assume_init_ref().wr_id }, 50);
        assert_eq!(cq.poll(&mut out), 0, "consumer met producer");
    }

    impl Queues {
        fn index_of(&self, offset: usize) -> u32 {
            self.recv.as_ref().unwrap().index(offset).load(Ordering::Relaxed)
        }
    }
}
