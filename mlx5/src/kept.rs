//! A request kept built ([`Kept`]): a gathered WQE of one WQEBB whose
//! segments are written once, when it is kept, and posted again and again
//! with only its index and its cookie new
//! ([`SendQueue::try_send_kept`]); or the scalars of the inline lane
//! ([`SendQueue::try_send_inline_one`]), whose data is copied at each post.
//!
//! A kept WQE goes to the ring and to BlueFlame as it lies in memory, in
//! the widest words the build's registers hold without a test: four
//! 16-byte SSE2 words on x86-64 (where every CPU has them, as UCX's
//! `uct_ib_mlx5_bf_copy_bb` copies a WQEBB), eight 8-byte words
//! elsewhere. The control segment's index is the one word a post makes.

#![allow(unsafe_code)]

use crate::doorbell::Register;
use crate::slots::SlotStorage;
use crate::sq::{SendQueue, SendSlot};
use crate::wqe;

/// The widest word a WQEBB is stored in: see the module.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub type Word = core::arch::x86_64::__m128i;
/// The widest word a WQEBB is stored in: see the module.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
pub type Word = u64;

/// A WQEBB in the words it is stored in.
pub type Wqebb = [Word; 64 / size_of::<Word>()];

// Either way a WQEBB, 64 bytes, so one may stand for the other.
const _: () = assert!(size_of::<Wqebb>() == 64);

/// A request of one segment kept for one send queue. Its kind is a byte
/// of its own, tested with one compare.
#[derive(Clone, Copy, Debug, Default)]
#[repr(u8)]
pub enum Kept {
    /// A request whose data goes inline.
    Inline(KeptInline),
    /// A gathered WQE of one WQEBB.
    Gathered(KeptWqe),
    /// Nothing built: the core posts the request another way.
    #[default]
    Unbuilt,
}

impl Kept {
    /// Whether the request is a gathered WQE, whose lane is short enough
    /// to go in line into every post.
    #[inline(always)]
    pub fn is_gathered(&self) -> bool {
        matches!(self, Kept::Gathered(_))
    }

    /// The lane of the request on `sq`, which kept it, with `cookie`:
    /// `false`, with nothing written, where the lane leaves it to an
    /// ordinary post.
    ///
    /// # Safety
    /// An inline request's data lies inside a live memory registration,
    /// as [`SendQueue::try_send_inline_one`] asks.
    #[inline(always)]
    pub unsafe fn post<R: Register, S: SlotStorage<SendSlot>>(&self, sq: &mut SendQueue<R, S>, cookie: u64) -> bool {
        match self {
            Kept::Gathered(wqe) => sq.try_send_kept(wqe, cookie),
            // SAFETY: the caller's contract.
            Kept::Inline(i) => unsafe { sq.try_send_inline_kept(i, cookie) },
            Kept::Unbuilt => false,
        }
    }
}

/// A request whose data goes inline, kept for one send queue: its
/// segments before the data but for the index, and where the data is.
#[derive(Clone, Copy, Debug)]
pub struct KeptInline {
    /// The control segment, its index 0, and the remote-address
    /// segment's words where `remote`.
    pub(crate) words: [u64; 4],
    pub(crate) remote: bool,
    /// The inline segment's word.
    pub(crate) inline: u64,
    pub(crate) addr: u64,
    pub(crate) len: u32,
    /// WQEBBs the WQE takes.
    pub(crate) bbs: u16,
    pub(crate) slot: SendSlot,
}

impl KeptInline {
    /// The segments before the data at index `pi`.
    #[inline(always)]
    pub(crate) fn at(&self, pi: u16) -> [u64; 4] {
        let [ctrl, tail, raddr, rkey] = self.words;
        [ctrl | wqe::ctrl_head_with(pi, 0, 0), tail, raddr, rkey]
    }

    /// The slot of a post of the request with `cookie`.
    #[inline(always)]
    pub(crate) fn slot(&self, cookie: u64) -> SendSlot {
        SendSlot { cookie, ..self.slot }
    }
}

/// A send WQE of one WQEBB built for the QP that keeps it, but for its
/// index, and the slot its completions read, but for its cookie.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct KeptWqe {
    /// The WQEBB in memory order, its index 0; what the ring does not
    /// read of it (past the WQE's `ds` segments) 0.
    words: [u64; 8],
    slot: SendSlot,
}

impl KeptWqe {
    /// The WQEBB `words`, whose control segment's index is 0, and the
    /// completion's `slot`.
    pub(crate) fn new(words: [u64; 8], slot: SendSlot) -> KeptWqe {
        KeptWqe { words, slot }
    }

    /// The slot of a post of the WQE with `cookie`.
    #[inline(always)]
    pub(crate) fn slot(&self, cookie: u64) -> SendSlot {
        SendSlot { cookie, ..self.slot }
    }

    /// The WQEBB at index `pi`: the kept words, the index merged into the
    /// control segment's first word ([`wqe::ctrl_head_with`] of no opcode
    /// and no QP sets no bit but the index's).
    #[inline(always)]
    pub(crate) fn at(&self, pi: u16) -> Wqebb {
        let index = wqe::ctrl_head_with(pi, 0, 0);
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            use core::arch::x86_64::{__m128i, _mm_cvtsi64_si128, _mm_load_si128, _mm_or_si128};
            let w = self.words.as_ptr().cast::<__m128i>();
            // SAFETY: `self` is 64-aligned (`repr(align(64))`) and its
            // words are 64 bytes: each load is 16-aligned and inside them.
            // SSE2 is enabled (the `cfg`).
            unsafe {
                [
                    _mm_or_si128(_mm_load_si128(w), _mm_cvtsi64_si128(index as i64)),
                    _mm_load_si128(w.add(1)),
                    _mm_load_si128(w.add(2)),
                    _mm_load_si128(w.add(3)),
                ]
            }
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
        {
            let mut words = self.words;
            words[0] |= index;
            words
        }
    }
}

/// The eight words of `block`, in memory order.
#[inline(always)]
pub(crate) fn words(block: &Wqebb) -> [u64; 8] {
    // SAFETY: both are 64 bytes (asserted above) of plain integers, which
    // any bits are.
    unsafe { core::mem::transmute_copy(block) }
}
