//! Doorbell registers: the UAR page's BlueFlame buffers and CQ doorbell.
//!
//! A doorbell is rung in three steps (PRM "Send Doorbell" and "BlueFlame";
//! rdma-core `post_send_db`): the doorbell record in host memory, then a
//! write to the device's register, then a flush of the write-combining
//! buffer. The record is written by the queues; this module is the
//! register. [`Uar`] writes real MMIO through `volatile`; the software HCA
//! implements [`Register`] itself and checks each write.
//!
//! The provider is single-threaded (`&mut` all the way down), so two QPs
//! sharing one UAR page can never interleave their BlueFlame copies: no
//! lock is needed here.

#![allow(unsafe_code)]

use core::ptr::NonNull;

use volatile::VolatilePtr;

use crate::barrier;

/// Offset of the CQ arm doorbell in a UAR page (`MLX5_CQ_DOORBELL`).
#[doc(alias = "MLX5_CQ_DOORBELL")]
pub const CQ_DOORBELL: usize = 0x20;

/// A device register that doorbells are written to.
pub trait Register {
    /// One 64-bit store of `value` (bytes in memory order) at `offset`.
    fn write64(&mut self, offset: usize, value: [u8; 8]);
    /// One 64-byte BlueFlame block at `offset`: eight words, each holding
    /// its eight bytes in memory order.
    fn write_block(&mut self, offset: usize, block: &[u64; 8]);
    /// BlueFlame blocks one after another from `offset`: a WQE of several
    /// WQEBBs.
    #[inline(always)]
    fn write_blocks(&mut self, offset: usize, blocks: &[[u64; 8]]) {
        for (i, block) in blocks.iter().enumerate() {
            self.write_block(offset + i * 64, block);
        }
    }
    /// The doorbell is complete: push the writes to the device
    /// (`mmio_flush_writes`).
    fn flush(&mut self);
    /// Bytes from offset 0 that writes may reach. A queue checks once,
    /// when it takes the register over, that its BlueFlame halves lie
    /// inside, and then writes with [`store_block`](Self::store_block).
    fn span(&self) -> usize;
    /// [`write_block`](Self::write_block) with its range checked by the
    /// caller.
    ///
    /// # Safety
    /// `offset` is a multiple of 8 and `offset + 64 <= self.span()`.
    #[inline(always)]
    unsafe fn store_block(&mut self, offset: usize, block: &[u64; 8]) {
        self.write_block(offset, block);
    }
}

/// A mapped UAR page (or the BlueFlame register of one).
#[derive(Debug)]
pub struct Uar {
    base: NonNull<u8>,
    len: usize,
}

impl Uar {
    /// # Safety
    /// `base` is a device register mapping of `len` bytes, 8-aligned, that
    /// stays mapped while the value lives.
    pub unsafe fn new(base: NonNull<u8>, len: usize) -> Uar {
        Uar { base, len }
    }

    #[inline(always)]
    fn store(&mut self, offset: usize, value: u64) {
        if offset % 8 == 0 && offset < self.len && self.len - offset >= 8 {
            // SAFETY: `offset` is 8-aligned and inside the mapping (checked
            // above), which `new`'s contract keeps valid; MMIO is written
            // only through volatile stores.
            let reg = unsafe { VolatilePtr::new(self.base.add(offset).cast::<u64>()) };
            reg.write(value);
        }
    }
}

impl Register for Uar {
    #[inline(always)]
    fn write64(&mut self, offset: usize, value: [u8; 8]) {
        self.store(offset, u64::from_ne_bytes(value));
    }

    /// One bounds check for the block, then its eight 64-bit stores in
    /// order (rdma-core's `mlx5_bf_copy` copies BlueFlame in 64-bit words
    /// too).
    #[inline(always)]
    fn write_block(&mut self, offset: usize, block: &[u64; 8]) {
        if offset % 8 != 0 || offset > self.len || self.len - offset < 64 {
            return;
        }
        // SAFETY: `offset` is 8-aligned and the 64 bytes from it are
        // inside the mapping (checked above), which `new`'s contract keeps
        // valid; MMIO is written only through volatile stores.
        let reg = unsafe { self.base.as_ptr().add(offset).cast::<u64>() };
        for (i, &word) in block.iter().enumerate() {
            // SAFETY: as above; `i < 8` keeps the store inside the block.
            unsafe { reg.add(i).write_volatile(word) };
        }
    }

    /// One bounds check for the span, then its stores in order; a span
    /// that does not fit the mapping is dropped whole.
    #[inline(always)]
    fn write_blocks(&mut self, offset: usize, blocks: &[[u64; 8]]) {
        let fits = blocks.len().checked_mul(64).is_some_and(|n| offset <= self.len && n <= self.len - offset);
        if offset % 8 != 0 || !fits {
            return;
        }
        // SAFETY: `offset` is 8-aligned and the span from it is inside the
        // mapping (checked above), which `new`'s contract keeps valid; MMIO
        // is written only through volatile stores.
        let reg = unsafe { self.base.as_ptr().add(offset).cast::<u64>() };
        for (b, block) in blocks.iter().enumerate() {
            for (i, &word) in block.iter().enumerate() {
                // SAFETY: as above; `b * 8 + i` counts the span's words.
                unsafe { reg.add(b * 8 + i).write_volatile(word) };
            }
        }
    }

    #[inline(always)]
    fn flush(&mut self) {
        barrier::wc_flush();
    }

    fn span(&self) -> usize {
        self.len
    }

    /// The block's eight 64-bit stores in order, with no check.
    #[inline(always)]
    unsafe fn store_block(&mut self, offset: usize, block: &[u64; 8]) {
        // SAFETY: the caller's contract puts the 64 bytes from the
        // 8-aligned `offset` inside the mapping, which `new`'s contract
        // keeps valid; MMIO is written only through volatile stores.
        let reg = unsafe { self.base.as_ptr().add(offset).cast::<u64>() };
        for (i, &word) in block.iter().enumerate() {
            // SAFETY: as above; `i < 8` keeps the store inside the block.
            unsafe { reg.add(i).write_volatile(word) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page of memory standing in for a mapped register.
    fn page(words: &mut [u64; 24]) -> Uar {
        let base = NonNull::from(words).cast::<u8>();
        // SAFETY: the array outlives the Uar in each test, is 8-aligned
        // and 192 bytes long, and the test reads it only after the writes.
        unsafe { Uar::new(base, 192) }
    }

    #[test]
    fn a_blueflame_block_lands_whole_and_an_out_of_range_one_not_at_all() {
        let mut words = [0u64; 24];
        let block: [u64; 8] = core::array::from_fn(|i| 0x0101_0101_0101_0101 * (i as u64 + 1));
        {
            let mut uar = page(&mut words);
            uar.write_block(64, &block);
            // Misaligned, and past the end: dropped.
            uar.write_block(4, &[u64::MAX; 8]);
            uar.write_block(136, &[u64::MAX; 8]);
            // Two blocks where only one fits: dropped whole.
            uar.write_blocks(128, &[[u64::MAX; 8]; 2]);
            uar.write64(0, [9; 8]);
            uar.flush();
        }
        let bytes: [u8; 192] = core::array::from_fn(|i| words[i / 8].to_ne_bytes()[i % 8]);
        let expected: [u8; 64] = core::array::from_fn(|i| block[i / 8].to_ne_bytes()[i % 8]);
        assert_eq!(&bytes[64..128], &expected[..]);
        assert_eq!(&bytes[..8], &[9; 8]);
        assert!(bytes[8..64].iter().chain(&bytes[128..]).all(|&b| b == 0));
    }
}

#[cfg(test)]
mod spans {
    use super::*;

    #[test]
    fn blocks_in_a_row_land_after_one_another() {
        let mut words = [0u64; 24];
        let blocks: [[u64; 8]; 2] = core::array::from_fn(|b| core::array::from_fn(|i| (b * 8 + i) as u64 + 1));
        {
            let base = NonNull::from(&mut words).cast::<u8>();
            // SAFETY: the array outlives the Uar, is 8-aligned and 192
            // bytes long, and is read only after the writes.
            let mut uar = unsafe { Uar::new(base, 192) };
            uar.write_blocks(64, &blocks);
        }
        let expected: [u64; 16] = core::array::from_fn(|i| i as u64 + 1);
        assert_eq!(&words[8..], &expected[..]);
        assert!(words[..8].iter().all(|&w| w == 0));
    }
}
