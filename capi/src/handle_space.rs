//! C handle values: a slot and its generation, at an address that stays
//! readable for the life of the process.
//!
//! Each instance reserves one stretch of address space with a region per
//! kind. In a kind's region, the handle of slot `index` at generation `g`
//! is the word at `(g mod K) << slot_bits | index`, where `2^slot_bits`
//! holds the kind's capacity and `K << slot_bits` is [`REGION_WORDS`]. So a
//! handle value comes back only once its slot has been reused `K` times,
//! which takes at least [`REGION_WORDS`] creations of that kind: until then
//! a stale handle is refused (dat_srq_free(3DAT): "If the Provider detects
//! the use of a deleted object handle, it should return
//! DAT_INVALID_HANDLE").
//!
//! The spaces of all instances are consecutive parts of one reservation
//! made at the first instance, so telling whether an address is a handle
//! word of any of them is one range check.
//!
//! A word holds the instance's `DAT_PROVIDER*` once its handle has been
//! handed out, as `<dat2/dat_redirection.h>` requires of a handle's first
//! word, and zero before. Nothing is ever loaded through a handle to find
//! what it names: its address alone gives kind, slot and generation, so a
//! garbage handle is refused without being read. The space is never
//! unmapped, so libdat2 can read a stale handle's provider word even after
//! the provider was removed.

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use udat_core::handle::{Kind, RawHandle};
use udat_core::{DatError, DatResult, ErrorType};

use crate::capacity::Capacity;
use crate::sys::DAT_HANDLE;

/// Every kind, by its `DAT_HANDLE_TYPE` value: the order of the regions.
pub const KINDS: [Kind; 11] = [
    Kind::Cr,
    Kind::Ep,
    Kind::Evd,
    Kind::Ia,
    Kind::Lmr,
    Kind::Psp,
    Kind::Pz,
    Kind::Rmr,
    Kind::Rsp,
    Kind::Cno,
    Kind::Srq,
];

/// Handle words per kind: at least this many creations of one kind pass
/// before a handle value is handed out again.
pub const REGION_WORDS: usize = 1 << 21;

const WORD: usize = size_of::<usize>();
const REGION_BYTES: usize = REGION_WORDS * WORD;
const SPACE_BYTES: usize = REGION_BYTES * KINDS.len();

/// Most handle spaces, hence instances, one process has: their
/// reservation is this many spaces long (5.5 GiB of address space, none
/// of it committed until a handle word is written).
pub const MAX_SPACES: usize = 32;

/// Where the handle spaces are: libudat.a exports it to `dispatch.c`, which
/// makes the check of [`issued`] inline.
#[repr(C)]
#[derive(Debug)]
pub struct Spaces {
    /// Where the reservation starts (0 before the first instance).
    pub base: AtomicUsize,
    /// Words of it made readable so far, from its start, a space at a
    /// time; [`issued`] looks no further. Kept in words so that the range
    /// and the alignment of a handle are one compare ([`issued`]).
    pub words: AtomicUsize,
}

/// The handle spaces of this process.
pub static SPACES: Spaces = Spaces { base: AtomicUsize::new(0), words: AtomicUsize::new(0) };
/// Serialises making spaces.
static MAKING: Mutex<()> = Mutex::new(());

/// The reservation, made on first use: address space no access is
/// allowed to, MAP_NORESERVE so that no part of it is charged until
/// written.
fn reservation() -> DatResult<usize> {
    let base = SPACES.base.load(Ordering::Acquire);
    if base != 0 {
        return Ok(base);
    }
    // SAFETY: a fresh anonymous mapping at an address the kernel picks
    // touches no existing memory.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            SPACE_BYTES * MAX_SPACES,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(DatError::of(ErrorType::InsufficientResources));
    }
    // Each creation writes one word of 8 bytes: in small pages, or a word
    // written in a fresh 2 MiB stretch could hold all of it resident
    // (`crate::pages`). Each space keeps the advice as it is made
    // readable.
    crate::pages::small_pages(p as usize, SPACE_BYTES * MAX_SPACES);
    SPACES.base.store(p as usize, Ordering::Release);
    Ok(p as usize)
}

/// One instance's handle space.
#[derive(Debug)]
pub struct HandleSpace {
    base: usize,
    /// The provider word every handed-out handle holds.
    word: usize,
    /// Per kind (by `DAT_HANDLE_TYPE`): bits of the slot index.
    slot_bits: [u32; KINDS.len()],
    /// Per kind: the bits of a region's word that hold the slot index
    /// (`2^slot_bits - 1`), and those that hold the generation, as masks
    /// kept rather than made from `slot_bits` on every look-up.
    masks: [(u32, usize); KINDS.len()],
}

impl HandleSpace {
    /// Reserve a space for objects in the counts of `capacity`. Its pages
    /// are touched only as handles are handed out.
    pub fn new(capacity: &Capacity) -> DatResult<HandleSpace> {
        let mut slot_bits = [0; KINDS.len()];
        for (bits, kind) in slot_bits.iter_mut().zip(KINDS) {
            let slots = (capacity.of(kind) as usize).max(2).next_power_of_two();
            if slots > REGION_WORDS {
                return Err(DatError::of(ErrorType::InsufficientResources));
            }
            *bits = slots.trailing_zeros();
        }
        let _making = MAKING.lock();
        let at = SPACES.words.load(Ordering::Acquire) / (SPACE_BYTES / WORD);
        if at >= MAX_SPACES {
            return Err(DatError::of(ErrorType::InsufficientResources));
        }
        let base = reservation()? + at * SPACE_BYTES;
        // SAFETY: `base..base + SPACE_BYTES` is a part of the reservation
        // no space uses yet; it becomes ordinary zeroed memory.
        if unsafe { libc::mprotect(base as *mut libc::c_void, SPACE_BYTES, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
            return Err(DatError::of(ErrorType::InsufficientResources));
        }
        SPACES.words.store((at + 1) * (SPACE_BYTES / WORD), Ordering::Release);
        let masks = slot_bits.map(|bits| {
            let slots = (1usize << bits) - 1;
            // Below REGION_WORDS (checked above), so in 32 bits: a
            // lane's slot is made and widened in one `and`.
            (slots as u32, (REGION_WORDS - 1) & !slots)
        });
        Ok(HandleSpace { base, word: 0, slot_bits, masks })
    }

    /// Set the provider word, before any handle is handed out.
    pub fn set_word(&mut self, word: usize) {
        self.word = word;
    }

    fn region(&self, kind: Kind) -> usize {
        self.base + kind as usize * REGION_BYTES
    }

    /// The C handle of `raw`, a live object of `kind`; null for the null
    /// handle. Writes the provider word the handle's first word must hold.
    #[inline(always)]
    pub fn handle(&self, kind: Kind, raw: RawHandle) -> DAT_HANDLE {
        if raw.is_null() {
            return ptr::null_mut();
        }
        let bits = self.slot_bits[kind as usize];
        let slots = (1usize << bits) - 1;
        let word = ((raw.generation() as usize) << bits | raw.index() as usize & slots) & (REGION_WORDS - 1);
        let at = (self.region(kind) + word * WORD) as *const AtomicUsize;
        // SAFETY: `word` is below REGION_WORDS, so `at` is an aligned word
        // of this space's region for `kind`, mapped for the process's life.
        let cell = unsafe { &*at };
        if cell.load(Ordering::Relaxed) != self.word {
            cell.store(self.word, Ordering::Relaxed);
        }
        at as DAT_HANDLE
    }

    /// The kind of the region `h` points into, if it is a word of this
    /// space. Reads nothing through `h`.
    pub fn kind_of(&self, h: DAT_HANDLE) -> Option<Kind> {
        let off = (h as usize).wrapping_sub(self.base);
        if off >= SPACE_BYTES || off % WORD != 0 {
            return None;
        }
        KINDS.get(off / REGION_BYTES).copied()
    }

    /// The handle `h` names as a handle of `kind`: `generation_of` gives
    /// the generation of the object living in a slot. Refused unless `h`
    /// is a word of `kind`'s region whose slot lives at a generation that
    /// names that very word. Reads nothing through `h`.
    #[inline(always)]
    pub fn resolve(
        &self,
        h: DAT_HANDLE,
        kind: Kind,
        generation_of: impl FnOnce(u32) -> Option<u32>,
    ) -> Option<RawHandle> {
        let (index, word) = self.slot_of(h, kind)?;
        let generation = generation_of(index)?;
        self.matches_generation(kind, word, generation)
            .then(|| RawHandle::from_bits(u64::from(generation) << 32 | u64::from(index)))
    }

    /// [`resolve`](Self::resolve) in two halves, for a lane that looks
    /// the slot up once: the slot `h` names as a handle of `kind`, and its
    /// word. Reads nothing through `h`.
    #[inline(always)]
    pub fn slot_of(&self, h: DAT_HANDLE, kind: Kind) -> Option<(u32, usize)> {
        let off = (h as usize).wrapping_sub(self.region(kind));
        if off >= REGION_BYTES || off % WORD != 0 {
            return None;
        }
        let word = off / WORD;
        Some((word as u32 & self.masks[kind as usize].0, word))
    }

    /// The slot `h` names if it is a handle of `kind`, with no test that
    /// it is one: a lane that compares the object living there with `h`
    /// itself (its name) needs none, and judges any other handle by
    /// [`slot_of`](Self::slot_of) and
    /// [`matches_generation`](Self::matches_generation). Below
    /// `2^slot_bits` of the kind whatever `h` is, and for a handle of
    /// `kind` the slot [`slot_of`](Self::slot_of) gives: a region is
    /// `REGION_BYTES`, a multiple of every kind's slots' span, long.
    /// Reads nothing through `h`.
    #[inline(always)]
    pub fn lane_slot(&self, h: DAT_HANDLE, kind: Kind) -> u32 {
        (self.lane_word(h) / WORD) as u32 & self.masks[kind as usize].0
    }

    /// The byte offset of `h` in the space, if it is one of its words, as
    /// [`lane_slot`] takes it before the mask: the core's lanes take it
    /// whole (`udat_core::Slab::slot_of`), its word's low `slot_bits` the
    /// slot. Reads nothing through `h`.
    ///
    /// [`lane_slot`]: Self::lane_slot
    #[inline(always)]
    pub fn lane_word(&self, h: DAT_HANDLE) -> usize {
        (h as usize).wrapping_sub(self.base)
    }

    /// The other half: whether the object living at `generation` in the
    /// slot of `word` (from [`slot_of`](Self::slot_of)) is the one that
    /// word names.
    #[inline(always)]
    pub fn matches_generation(&self, kind: Kind, word: usize, generation: u32) -> bool {
        let generations = self.masks[kind as usize].1;
        (((generation as usize) << self.slot_bits[kind as usize]) ^ word) & generations == 0
    }
}

/// Whether `h` is a handle some instance of this process has handed out:
/// an aligned word of a handle space that holds a provider word. The
/// static registry checks this before it reads the provider word through
/// a consumer's first handle.
/// `dispatch.c` makes the same check inline, from [`SPACES`]; no
/// operation in it can panic.
#[inline]
pub fn issued(h: DAT_HANDLE) -> bool {
    let words = SPACES.words.load(Ordering::Acquire);
    let off = (h as usize).wrapping_sub(SPACES.base.load(Ordering::Relaxed));
    // The offset in words, its bits below a word's alignment rotated to
    // the top: below `words` exactly when the offset is in range and
    // aligned.
    off.rotate_right(WORD.trailing_zeros()) < words && {
        // SAFETY: `h` is an aligned word of a space made readable before
        // `words` took it in, and spaces are never unmapped.
        unsafe { &*(h as *const AtomicUsize) }.load(Ordering::Relaxed) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> HandleSpace {
        let mut s = HandleSpace::new(&Capacity::default()).unwrap();
        s.set_word(0x1234_5670);
        s
    }

    #[test]
    fn a_handle_resolves_to_its_slot_and_generation_only() {
        let s = space();
        let raw = RawHandle::from_bits(7 << 32 | 42);
        let h = s.handle(Kind::Pz, raw);
        assert!(issued(h));
        assert_eq!(s.kind_of(h), Some(Kind::Pz));
        assert_eq!(s.resolve(h, Kind::Pz, |i| (i == 42).then_some(7)), Some(raw));
        // The slot moved on: the old value is refused.
        assert_eq!(s.resolve(h, Kind::Pz, |_| Some(8)), None);
        // Another kind's region, or the middle of a word: refused.
        assert_eq!(s.resolve(h, Kind::Ep, |_| Some(7)), None);
        assert_eq!(s.resolve(h.wrapping_byte_add(4), Kind::Pz, |_| Some(7)), None);
        // The two halves a lane uses judge the same.
        let (index, word) = s.slot_of(h, Kind::Pz).unwrap();
        assert_eq!(index, 42);
        assert!(s.matches_generation(Kind::Pz, word, 7));
        assert!(!s.matches_generation(Kind::Pz, word, 8));
        assert_eq!(s.slot_of(h, Kind::Ep), None);
        assert_eq!(s.slot_of(h.wrapping_byte_add(4), Kind::Pz), None);
        // A lane's slot, untested, is the same for a handle of the kind,
        // and within the kind's slots for any other value.
        assert_eq!(s.lane_slot(h, Kind::Pz), 42);
        let slots = 1u32 << s.slot_bits[Kind::Ep as usize];
        for other in [h, h.wrapping_byte_add(4), ptr::null_mut(), usize::MAX as DAT_HANDLE] {
            assert!(s.lane_slot(other, Kind::Ep) < slots);
        }
        assert!(!issued(h.wrapping_byte_add(4)));
    }

    #[test]
    fn a_word_never_handed_out_is_not_issued() {
        let s = space();
        let h = s.handle(Kind::Ep, RawHandle::from_bits(1 << 32 | 3));
        assert!(!issued(h.wrapping_byte_add(WORD)));
        assert!(!issued(ptr::null_mut()));
        assert!(!issued(8 as DAT_HANDLE));
    }

    /// The one compare of `issued` refuses every misalignment of an issued
    /// handle, the first word past the readable ones, and any word below
    /// the spaces.
    #[test]
    fn an_issued_handle_off_by_a_byte_past_the_spaces_or_below_them_is_not() {
        let s = space();
        let h = s.handle(Kind::Pz, RawHandle::from_bits(1 << 32 | 9));
        assert!(issued(h));
        for by in 1..WORD {
            assert!(!issued(h.wrapping_byte_add(by)), "{by} bytes in");
        }
        let base = SPACES.base.load(Ordering::Relaxed);
        let end = base + SPACES.words.load(Ordering::Acquire) * WORD;
        assert!(!issued(end as DAT_HANDLE));
        assert!(!issued((base - WORD) as DAT_HANDLE));
        assert!(!issued(usize::MAX as DAT_HANDLE));
    }

    #[test]
    fn the_handle_space_is_kept_in_small_pages() {
        let s = space();
        for kind in KINDS {
            let h = s.handle(kind, RawHandle::from_bits(1 << 32 | 2));
            assert!(crate::pages::in_small_pages(h as usize), "{kind:?}");
        }
    }

    #[test]
    fn handle_values_repeat_only_after_a_region_of_creations() {
        let s = space();
        let slots = 1u64 << s.slot_bits[Kind::Pz as usize];
        let first = s.handle(Kind::Pz, RawHandle::from_bits(1 << 32 | 5));
        let generations = REGION_WORDS as u64 / slots;
        for g in 2..=generations {
            assert_ne!(s.handle(Kind::Pz, RawHandle::from_bits(g << 32 | 5)), first);
        }
        assert_eq!(s.handle(Kind::Pz, RawHandle::from_bits((generations + 1) << 32 | 5)), first);
    }
}
