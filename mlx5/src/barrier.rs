//! Memory ordering between the CPU and the HCA, named for what each
//! barrier orders, as rdma-core's `util/udma_barrier.h` names them.
//!
//! On x86-64 stores to write-back memory are seen in program order by a
//! device that reads them after a doorbell, so `to_device_barrier` only
//! stops the compiler; write-combining stores to the BlueFlame register
//! need `sfence` around them; a CQE read after its owner bit needs `lfence`
//! so no load of its other fields is satisfied early. Elsewhere, and under
//! Miri (which has no x86 fence intrinsics), a full fence stands in for
//! each.

#![allow(unsafe_code)]

use core::sync::atomic::{compiler_fence, fence, Ordering};

/// Order writes to queue memory before the doorbell record write that
/// publishes them (`udma_to_device_barrier`).
#[inline(always)]
pub fn to_device_barrier() {
    if cfg!(target_arch = "x86_64") {
        compiler_fence(Ordering::Release);
    } else {
        fence(Ordering::Release);
    }
}

/// Order the doorbell record before the first store to the write-combining
/// UAR page (`mmio_wc_start`).
#[inline(always)]
pub fn wc_start() {
    sfence();
}

/// Push write-combined stores out to the device (`mmio_flush_writes`).
#[inline(always)]
pub fn wc_flush() {
    sfence();
}

/// Order the owner-bit load of a CQE before the loads of its other fields
/// (`udma_from_device_barrier`).
#[inline(always)]
pub fn from_device_barrier() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: lfence is SSE2, part of the x86-64 baseline; it has no
    // operands and touches no memory.
    unsafe {
        core::arch::x86_64::_mm_lfence()
    };
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    fence(Ordering::Acquire);
}

#[inline(always)]
fn sfence() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: sfence is SSE, part of the x86-64 baseline; it has no
    // operands and touches no memory.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    fence(Ordering::SeqCst);
}
