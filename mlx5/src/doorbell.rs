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
    /// One 64-byte BlueFlame block at `offset`.
    fn write_block(&mut self, offset: usize, block: &[u8; 64]);
    /// The doorbell is complete: push the writes to the device
    /// (`mmio_flush_writes`).
    fn flush(&mut self);
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

    #[inline(always)]
    fn write_block(&mut self, offset: usize, block: &[u8; 64]) {
        for (i, word) in block.chunks_exact(8).enumerate() {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            self.store(offset + i * 8, u64::from_ne_bytes(bytes));
        }
    }

    #[inline(always)]
    fn flush(&mut self) {
        barrier::wc_flush();
    }
}
