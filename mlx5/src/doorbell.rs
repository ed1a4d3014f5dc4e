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
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(miri)))]
use crate::cpu;
use crate::kept::{self, Wqebb};

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
    /// [`store_block`](Self::store_block) of a block in the words a
    /// [`Wqebb`] holds.
    ///
    /// # Safety
    /// As [`store_block`](Self::store_block)'s.
    #[inline(always)]
    unsafe fn store_wqebb(&mut self, offset: usize, block: &Wqebb) {
        // SAFETY: the caller's contract.
        unsafe { self.store_block(offset, &kept::words(block)) };
    }
    /// [`store_block`](Self::store_block) of the `n` blocks that follow
    /// one another from `src`: a WQE of `n` WQEBBs copied from memory (the
    /// ring, or words staged for it).
    ///
    /// # Safety
    /// `offset` is a multiple of 64 and `offset + 64 * n <= self.span()`;
    /// `src` is 16-aligned and valid for reads of `64 * n` bytes, which
    /// nothing writes meanwhile.
    #[inline(always)]
    unsafe fn store_blocks_from(&mut self, offset: usize, src: *const u64, n: usize) {
        for i in 0..n {
            // SAFETY: the caller's contract covers block `i < n` of the
            // source and of the register.
            unsafe { self.store_block(offset + i * 64, &src.add(i * 8).cast::<[u64; 8]>().read()) };
        }
    }
}

/// A mapped UAR page (or the BlueFlame register of one).
#[derive(Debug)]
pub struct Uar {
    base: NonNull<u8>,
    len: usize,
    /// How a block at a multiple of 64 from the mapping is stored when it
    /// is copied from memory ([`store_blocks_from`](Register::store_blocks_from));
    /// 8-byte stores where SSE2 is not enabled.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    copies: Copies,
}

/// The widest stores a copy of blocks from memory to a [`Uar`] takes: as
/// wide as the mapping's alignment and the CPU allow. The widest is 0, so
/// that a copy tests for it against zero.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Copies {
    /// 32-byte AVX stores: the mapping is 32-aligned, and the CPU has AVX
    /// with its registers enabled ([`cpu::avx`]).
    #[cfg(not(miri))]
    Avx = 0,
    /// 16-byte SSE2 stores: the mapping is 16-aligned.
    Sse = 1,
    /// 8-byte stores from general registers.
    Words = 2,
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
impl Copies {
    /// The widest copy to a mapping at `base`.
    fn of(base: NonNull<u8>) -> Copies {
        let at = base.as_ptr() as usize;
        #[cfg(not(miri))]
        if at % 32 == 0 && cpu::avx() {
            return Copies::Avx;
        }
        if at % 16 == 0 {
            Copies::Sse
        } else {
            Copies::Words
        }
    }
}

impl Uar {
    /// # Safety
    /// `base` is a device register mapping of `len` bytes, 8-aligned, that
    /// stays mapped while the value lives.
    pub unsafe fn new(base: NonNull<u8>, len: usize) -> Uar {
        Uar {
            base,
            len,
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            copies: Copies::of(base),
        }
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

    /// As the words are, where the mapping is 16-aligned (four 16-byte
    /// stores on x86-64); otherwise as eight 8-byte ones.
    #[inline(always)]
    unsafe fn store_wqebb(&mut self, offset: usize, block: &Wqebb) {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        if self.copies == Copies::Words {
            // SAFETY: the caller's contract.
            return unsafe { self.store_block(offset, &kept::words(block)) };
        }
        // SAFETY: the caller's contract puts the 64 bytes from `offset`
        // inside the mapping, and `offset` at a multiple of 8 from a
        // mapping that takes the words' alignment (16 on x86-64, checked
        // above); MMIO is written only through volatile stores.
        let reg = unsafe { self.base.as_ptr().add(offset).cast::<kept::Word>() };
        for (i, &word) in block.iter().enumerate() {
            // SAFETY: as above; the block's words fill the 64 bytes.
            unsafe { reg.add(i).write_volatile(word) };
        }
    }

    /// As wide as the mapping's alignment and the CPU allow: with AVX,
    /// where the mapping is 32-aligned (a BlueFlame half is, in a
    /// page-aligned UAR), each block goes as two 32-byte loads and stores
    /// (`cpu::copy_blocks`); otherwise as `Uar::narrow_copy` copies.
    /// Either way each block is still whole in the write-combining buffer
    /// before [`flush`](Register::flush) pushes it out.
    #[inline(always)]
    unsafe fn store_blocks_from(&mut self, offset: usize, src: *const u64, n: usize) {
        // SAFETY: the caller's contract puts the `64 * n` bytes from
        // `offset` inside the mapping.
        let reg = unsafe { self.base.as_ptr().add(offset) };
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(miri)))]
        {
            if self.copies != Copies::Avx {
                // SAFETY: the caller's contract.
                return unsafe { self.narrow_copy(reg, src, n) };
            }
            // SAFETY: `Avx` says the CPU has it and the mapping is
            // 32-aligned, so a block at a multiple of 64 from it is; the
            // caller's contract puts both ranges inside what may be read
            // and written. MMIO takes the stores as they are written:
            // assembly is not reordered or merged.
            unsafe { cpu::copy_blocks(reg, src, n) };
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(miri))))]
        // SAFETY: the caller's contract.
        unsafe {
            self.narrow_copy(reg, src, n)
        };
    }
}

impl Uar {
    /// [`store_blocks_from`](Register::store_blocks_from) to `reg` without
    /// AVX: with SSE2, where the mapping is 16-aligned, each block as four
    /// 16-byte loads and stores, as UCX's `uct_ib_mlx5_bf_copy_bb` copies a
    /// WQEBB in `__m128i` words; else as eight of 8 bytes. Out of line on
    /// x86-64, where a CPU that has no AVX is rare, so that the AVX copy is
    /// the one the posts' code holds.
    ///
    /// # Safety
    /// As `store_blocks_from`'s, with `reg` the register at its `offset`.
    #[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2", not(miri)), cold, inline(never))]
    #[cfg_attr(not(all(target_arch = "x86_64", target_feature = "sse2", not(miri))), inline(always))]
    unsafe fn narrow_copy(&mut self, reg: *mut u8, src: *const u64, n: usize) {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        if self.copies == Copies::Sse {
            use core::arch::x86_64::__m128i;
            let (to, from) = (reg.cast::<__m128i>(), src.cast::<__m128i>());
            for i in 0..n * 4 {
                // SAFETY: both 16-aligned (`Sse` and a multiple of 64;
                // the caller's contract); `i < 4 * n` keeps the load
                // inside the source and the store inside the register's
                // span (the caller's contract). MMIO is written only
                // through volatile stores.
                unsafe { to.add(i).write_volatile(from.add(i).read()) };
            }
            return;
        }
        // Word by word from memory rather than a block at a time through
        // `store_block`: a block's eight words held in registers make the
        // whole copy save six registers, 12 instructions on every inline
        // post (measured).
        let reg = reg.cast::<u64>();
        for i in 0..n * 8 {
            // SAFETY: as above, with both 8-aligned (the contract) and
            // `i < 8 * n`.
            unsafe { reg.add(i).write_volatile(src.add(i).read()) };
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
mod copies {
    use super::*;

    /// Memory standing in for a mapped register, aligned as a BlueFlame
    /// register is, with room to spare in front.
    #[repr(C, align(64))]
    struct Aligned([u64; 44]);

    /// The copy a mapping `skip` words past a 64-aligned one takes.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    fn expected(skip: usize) -> Copies {
        #[cfg(not(miri))]
        if skip % 4 == 0 && cpu::avx() {
            return Copies::Avx;
        }
        if skip % 2 == 0 {
            Copies::Sse
        } else {
            Copies::Words
        }
    }

    /// One to four blocks copied from memory land whole, in order, and
    /// nothing else is written, whichever copy the mapping's alignment
    /// allows: from a 32-aligned mapping (32-byte stores where the CPU has
    /// AVX), a 16-aligned one (16-byte stores on x86-64) and one that is
    /// only 8-aligned (8-byte stores).
    #[test]
    fn blocks_copied_from_memory_land_whole_at_every_width() {
        let src = Aligned(core::array::from_fn(|i| i as u64 + 1));
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(miri)))]
        let mut avx = false;
        for skip in [0, 1, 2, 4] {
            for n in 1..=4 {
                let mut page = Aligned([0; 44]);
                {
                    let base = NonNull::new(page.0.as_mut_ptr().wrapping_add(skip).cast::<u8>()).unwrap();
                    // SAFETY: the 320 bytes from `base` lie in `page`, which
                    // outlives the Uar and is read only after the writes.
                    let mut uar = unsafe { Uar::new(base, 320) };
                    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
                    assert_eq!(uar.copies, expected(skip), "{skip} words in");
                    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(miri)))]
                    {
                        avx |= uar.copies == Copies::Avx;
                    }
                    // SAFETY: 64 + 64 * n bytes fit the span; `src` is
                    // 64-aligned and holds the `8 * n` words read.
                    unsafe { uar.store_blocks_from(64, src.0.as_ptr(), n) };
                }
                let (from, to) = (skip + 8, skip + 8 + 8 * n);
                assert_eq!(&page.0[from..to], &src.0[..8 * n], "{n} blocks, {skip} words in");
                assert!(page.0.iter().enumerate().all(|(i, &w)| (from..to).contains(&i) || w == 0));
            }
        }
        // A CPU without AVX runs the other copies only: the assertion says
        // so, where the check is made.
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(miri)))]
        assert!(avx || !cpu::avx(), "the AVX copy was not run on a CPU that has AVX");
    }
}
