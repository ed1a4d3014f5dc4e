//! Memory shared with the HCA: queue buffers and doorbell records.
//!
//! The device reads WQEs and writes CQEs and doorbell records behind the
//! compiler's back, so no Rust reference to this memory ever exists: a
//! [`DmaBuf`] is a pointer and a length, every access is a raw read or
//! write inside the bounds, and reads of what the device writes are
//! volatile.

#![allow(unsafe_code)]

use core::ptr::NonNull;

use crate::kept::Wqebb;

/// A span of queue memory shared with the device.
#[derive(Debug)]
pub struct DmaBuf {
    ptr: NonNull<u8>,
    len: usize,
}

impl DmaBuf {
    /// # Safety
    /// For as long as the value lives, `ptr` is valid for reads and writes
    /// of `len` bytes and aligned to 64; nothing but the device and this
    /// value's holder accesses the memory, and no reference to it exists.
    pub unsafe fn new(ptr: NonNull<u8>, len: usize) -> DmaBuf {
        DmaBuf { ptr, len }
    }

    /// The buffer from byte `n` on, if `n` is a multiple of 64 inside it
    /// (so the rest keeps the alignment [`new`](Self::new) promises).
    pub fn skip(self, n: usize) -> Option<DmaBuf> {
        if n % 64 != 0 || n > self.len {
            return None;
        }
        // SAFETY: `n` is inside the buffer (checked above), so the pointer
        // stays in the same allocation, non-null.
        let ptr = unsafe { self.ptr.add(n) };
        Some(DmaBuf { ptr, len: self.len - n })
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `[offset, offset + n)` lies inside the buffer.
    #[inline(always)]
    fn holds(&self, offset: usize, n: usize) -> bool {
        offset <= self.len && n <= self.len - offset
    }

    /// Copy `bytes` in at `offset`; a write past the end is dropped (the
    /// rings mask every offset, so none happens).
    #[inline(always)]
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        debug_assert!(self.holds(offset, bytes.len()), "write of {} at {offset} past {}", bytes.len(), self.len);
        if self.holds(offset, bytes.len()) {
            // SAFETY: the range is inside the buffer (checked above), which
            // `new`'s contract makes valid for writes; `bytes` is ordinary
            // memory and cannot overlap it, since no reference into the
            // buffer exists.
            unsafe { self.ptr.as_ptr().add(offset).copy_from_nonoverlapping(bytes.as_ptr(), bytes.len()) }
        }
    }

    /// Copy `len` bytes of registered memory at `src` in at `offset`
    /// (inline data).
    ///
    /// # Safety
    /// `src` is valid for reads of `len` bytes: it lies inside a live
    /// memory registration, which the consumer keeps mapped
    /// (dat_lmr_create(3DAT)).
    #[inline(always)]
    pub unsafe fn copy_in(&self, offset: usize, src: *const u8, len: usize) {
        debug_assert!(self.holds(offset, len));
        if self.holds(offset, len) {
            // SAFETY: the destination is inside the buffer (checked above);
            // the caller vouches for the source. A consumer buffer may not
            // overlap queue memory, which the device owns.
            unsafe { self.ptr.as_ptr().add(offset).copy_from(src, len) }
        }
    }

    /// Store one WQEBB, as eight words, at `offset`.
    ///
    /// # Safety
    /// `offset` is a multiple of 64 and `offset + 64 <= self.len()`: the
    /// queue that calls it checked its ring's geometry once, when it took
    /// the buffer over, and masks every index into it.
    #[inline(always)]
    pub unsafe fn store_block(&self, offset: usize, block: &[u64; 8]) {
        debug_assert!(offset % 64 == 0 && self.holds(offset, 64));
        // SAFETY: inside the buffer and 64-aligned (the caller's contract,
        // the buffer being 64-aligned); `block` is a local or the caller's
        // memory and cannot overlap the buffer, which no reference reaches.
        let to = unsafe { self.ptr.as_ptr().add(offset).cast::<u64>() };
        for (i, &word) in block.iter().enumerate() {
            // SAFETY: as above; `i < 8` keeps the store inside the WQEBB.
            // Word by word, so the block goes from registers to the ring.
            unsafe { to.add(i).write(word) };
        }
    }

    /// Store one WQEBB, in the words [`Wqebb`] holds, at `offset`.
    ///
    /// # Safety
    /// As [`store_block`](Self::store_block)'s.
    #[inline(always)]
    pub unsafe fn store_wqebb(&self, offset: usize, block: &Wqebb) {
        debug_assert!(offset % 64 == 0 && self.holds(offset, 64));
        // SAFETY: inside the buffer and 64-aligned, as `store_block`'s; a
        // `Wqebb` is 64 bytes.
        unsafe { self.ptr.as_ptr().add(offset).cast::<Wqebb>().write(*block) }
    }

    /// Store `N` words at the 8-aligned `offset`, in memory order.
    ///
    /// # Safety
    /// `offset` is a multiple of 8 and `offset + 8 * N <= self.len()`: the
    /// queue that calls it checked its ring's geometry once, when it took
    /// the buffer over, and places every WQE inside it.
    #[inline(always)]
    pub unsafe fn store_words<const N: usize>(&self, offset: usize, words: &[u64; N]) {
        debug_assert!(offset % 8 == 0 && self.holds(offset, 8 * N));
        // SAFETY: inside the buffer and 8-aligned (the caller's contract,
        // the buffer being 64-aligned); `words` cannot overlap the buffer,
        // which no reference reaches.
        unsafe { self.ptr.as_ptr().add(offset).cast::<[u64; N]>().write(*words) }
    }

    /// [`copy_in`](Self::copy_in) with its range checked by the caller.
    /// 17 to 64 bytes are copied here rather than by a call to `memmove`:
    /// as two or four 16-byte words, the first and last of which may
    /// overlap the others, all loaded before any is stored. That is a
    /// `memmove` still, as `ptr::copy` is: the bytes written are the
    /// source's as they were before the copy, whether or not the source
    /// overlaps the buffer (a consumer may register any memory it has).
    /// Other lengths, and hosts other than x86-64, call `memmove`.
    ///
    /// # Safety
    /// As `copy_in`, and `offset + len <= self.len()`.
    #[inline(always)]
    pub unsafe fn copy_in_unchecked(&self, offset: usize, src: *const u8, len: usize) {
        debug_assert!(self.holds(offset, len));
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::__m128i;
            /// The 16 bytes at `at` from `from`, unaligned.
            ///
            /// # Safety
            /// They are readable.
            #[inline(always)]
            unsafe fn word(from: *const u8, at: usize) -> __m128i {
                // SAFETY: the caller's contract.
                unsafe { from.add(at).cast::<__m128i>().read_unaligned() }
            }
            /// Store `w` at `at` from `to`, unaligned.
            ///
            /// # Safety
            /// The 16 bytes are writable.
            #[inline(always)]
            unsafe fn put(to: *mut u8, at: usize, w: __m128i) {
                // SAFETY: the caller's contract.
                unsafe { to.add(at).cast::<__m128i>().write_unaligned(w) }
            }
            // SAFETY: each word is read from the `len` bytes at `src` that
            // the caller's contract makes readable, and stored to the `len`
            // bytes at `offset`, inside the buffer (the contract), which
            // `new`'s makes writable: the words at 0, 16, `len - 32` and
            // `len - 16` for 33 to 64 bytes (checked in one compare), those
            // at 0 and `len - 16` for 17 to 32.
            unsafe {
                let dst = self.ptr.as_ptr().add(offset);
                if len.wrapping_sub(33) < 32 {
                    let (a, b, c, d) = (word(src, 0), word(src, 16), word(src, len - 32), word(src, len - 16));
                    put(dst, 0, a);
                    put(dst, 16, b);
                    put(dst, len - 32, c);
                    put(dst, len - 16, d);
                    return;
                }
                if len.wrapping_sub(17) < 16 {
                    let (a, d) = (word(src, 0), word(src, len - 16));
                    put(dst, 0, a);
                    put(dst, len - 16, d);
                    return;
                }
            }
        }
        // SAFETY: the destination is inside the buffer (the caller's
        // contract), as is the source's readability.
        unsafe { self.ptr.as_ptr().add(offset).copy_from(src, len) }
    }

    /// The address of the WQEBB at `offset`, for a BlueFlame copy that
    /// reads a WQE written in place straight from the ring
    /// ([`Register::store_blocks_from`](crate::doorbell::Register::store_blocks_from)).
    /// Reads nothing.
    #[inline(always)]
    pub fn block_ptr(&self, offset: usize) -> *const u64 {
        debug_assert!(offset % 64 == 0 && self.holds(offset, 64));
        self.ptr.as_ptr().wrapping_add(offset).cast::<u64>()
    }

    /// `N` words from the 8-aligned `offset`, each one volatile 8-byte
    /// load (fields of a CQE the device wrote), in memory order.
    ///
    /// # Safety
    /// `offset` is a multiple of 8 and `offset + 8 * N <= self.len()`: the
    /// queue that calls it checked its ring's geometry once, when it took
    /// the buffer over, and masks every index into it.
    #[inline(always)]
    pub unsafe fn load_words<const N: usize>(&self, offset: usize) -> [u64; N] {
        debug_assert!(offset % 8 == 0 && self.holds(offset, 8 * N));
        // SAFETY: inside the buffer and 8-aligned (the caller's contract,
        // the buffer being 64-aligned); volatile because the device
        // writes it.
        core::array::from_fn(|i| unsafe { self.ptr.as_ptr().add(offset + 8 * i).cast::<u64>().read_volatile() })
    }

    /// The 8-aligned word at `offset`, for a field the device writes that
    /// is read more than once (a CQE's last word, before and after the
    /// barrier): the address is made once, and each read of it is a
    /// volatile 8-byte load.
    ///
    /// # Safety
    /// As [`load_words`](Self::load_words) of one word.
    #[inline(always)]
    pub unsafe fn word(&self, offset: usize) -> DeviceWord {
        debug_assert!(offset % 8 == 0 && self.holds(offset, 8));
        // SAFETY: inside the buffer (the caller's contract).
        DeviceWord(unsafe { self.ptr.as_ptr().add(offset).cast::<u64>() })
    }

    /// A volatile read of the big-endian 32-bit field at `offset`.
    #[inline(always)]
    pub fn read_be32(&self, offset: usize) -> u32 {
        if self.holds(offset, 4) {
            // SAFETY: inside the buffer (checked above); unaligned-safe.
            let raw = unsafe { self.ptr.as_ptr().add(offset).cast::<[u8; 4]>().read_volatile() };
            u32::from_be_bytes(raw)
        } else {
            0
        }
    }

    /// [`write_be32`](Self::write_be32) with its place checked by the
    /// caller.
    ///
    /// # Safety
    /// `offset` is a multiple of 4 and `offset + 4 <= self.len()`: the
    /// queue that calls it checked its record's length once, when it took
    /// the record over.
    #[inline(always)]
    pub unsafe fn store_be32(&self, offset: usize, value: u32) {
        debug_assert!(self.holds(offset, 4) && offset % 4 == 0);
        // SAFETY: inside the buffer and 4-aligned (the caller's contract,
        // the buffer being 64-aligned); a single aligned 32-bit volatile
        // store.
        unsafe { self.ptr.as_ptr().add(offset).cast::<u32>().write_volatile(value.to_be()) }
    }

    /// A volatile write of a big-endian 32-bit word at a 4-aligned
    /// `offset`: one store the device sees whole (doorbell records).
    #[inline(always)]
    pub fn write_be32(&self, offset: usize, value: u32) {
        debug_assert!(self.holds(offset, 4) && offset % 4 == 0);
        if self.holds(offset, 4) && offset % 4 == 0 {
            // SAFETY: inside the buffer and 4-aligned (the buffer is
            // 64-aligned); a single aligned 32-bit volatile store.
            unsafe { self.ptr.as_ptr().add(offset).cast::<u32>().write_volatile(value.to_be()) }
        }
    }
}

/// One 8-aligned word of a [`DmaBuf`] that the device writes
/// ([`DmaBuf::word`]).
#[derive(Clone, Copy, Debug)]
pub struct DeviceWord(*const u64);

impl DeviceWord {
    /// A volatile load of the word, its bytes in memory order.
    ///
    /// # Safety
    /// The buffer the word was taken from is still alive.
    #[inline(always)]
    pub unsafe fn read(self) -> u64 {
        // SAFETY: 8-aligned and inside a live buffer (`DmaBuf::word`'s
        // contract and the caller's); volatile because the device writes it.
        unsafe { self.0.read_volatile() }
    }

    /// A volatile load of the word's byte `at` (0 to 7, in memory order).
    ///
    /// # Safety
    /// As [`read`](Self::read).
    #[inline(always)]
    pub unsafe fn byte(self, at: usize) -> u8 {
        debug_assert!(at < 8);
        // SAFETY: inside the word (`at < 8`), so inside the live buffer;
        // volatile because the device writes it.
        unsafe { self.0.cast::<u8>().add(at).read_volatile() }
    }
}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use crate::testing::Memory;

    /// `copy_in_unchecked` is a `memmove` for every length from 0 to 100
    /// (17 to 64 it copies itself, the others it leaves to `ptr::copy`), to
    /// places of each alignment the inline lane uses and others, from
    /// memory of its own and from the buffer itself: before, at and after
    /// the destination, overlapping it or not.
    #[test]
    fn a_copy_in_is_a_memmove_of_every_length_from_anywhere() {
        const LEN: usize = 256;
        let pattern: Vec<u8> = (0..LEN).map(|i| (i * 7 + 3) as u8).collect();
        // Under Miri, the lengths at the edges of each way of copying.
        let lens: Vec<usize> =
            if cfg!(miri) { [0, 1, 16, 17, 31, 32, 33, 48, 64, 65, 100].to_vec() } else { (0..=100).collect() };
        for len in lens {
            for at in [0, 4, 20, 36, 61, 100] {
                let own: Vec<u8> = (0..len).map(|i| !(i as u8)).collect();
                let mem = Memory::new(LEN);
                mem.write(0, &pattern);
                // SAFETY: `own` holds the `len` bytes; `at + len` is inside.
                unsafe { mem.share().copy_in_unchecked(at, own.as_ptr(), len) };
                let mut expected = pattern.clone();
                expected[at..at + len].copy_from_slice(&own);
                assert_eq!(mem.read(0, LEN), expected, "{len} bytes to {at}");
                for from in [at.saturating_sub(20), at.saturating_sub(3), at, at + 1, at + 17, at + 70] {
                    if from + len > LEN {
                        continue;
                    }
                    let mem = Memory::new(LEN);
                    mem.write(0, &pattern);
                    let buf = mem.share();
                    let src = buf.block_ptr(0).cast::<u8>().wrapping_add(from);
                    // SAFETY: both ranges lie in the buffer, which is
                    // readable and writable through its pointer.
                    unsafe { buf.copy_in_unchecked(at, src, len) };
                    let mut expected = pattern.clone();
                    expected.copy_within(from..from + len, at);
                    assert_eq!(mem.read(0, LEN), expected, "{len} bytes from {from} to {at}");
                }
            }
        }
    }
}
