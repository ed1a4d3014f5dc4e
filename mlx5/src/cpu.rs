//! What the CPU offers the BlueFlame copy: AVX, found once at run time,
//! so that a build for any x86-64 still copies a WQE to the register 32
//! bytes at a time where the CPU can.
//!
//! The copy is assembly, since a build without AVX enabled cannot name
//! its registers otherwise. It ends with `vzeroupper`, as compilers end
//! AVX code, so that the SSE code after it pays no transition, and names
//! every `xmm` register clobbered: no value the compiler keeps in one
//! (or, where AVX is enabled, in the `ymm` register around it) lives
//! across a copy.

#![allow(unsafe_code)]

use core::arch::asm;
use core::sync::atomic::{AtomicU8, Ordering};

/// What [`avx`] found: [`UNKNOWN`] until it is asked.
static AVX: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const ABSENT: u8 = 1;
const PRESENT: u8 = 2;

/// Whether this CPU has AVX and the operating system saves its registers:
/// CPUID leaf 1 reports AVX and OSXSAVE, and XCR0 enables the SSE and AVX
/// state (Intel SDM vol. 1, 14.3 "Detection of Intel AVX Instructions").
/// Asked on the control path (a register is made with the answer), once
/// a process.
pub(crate) fn avx() -> bool {
    match AVX.load(Ordering::Relaxed) {
        ABSENT => return false,
        PRESENT => return true,
        _ => {}
    }
    const OSXSAVE: u32 = 1 << 27;
    const HAS_AVX: u32 = 1 << 28;
    const SSE_AVX_STATE: u64 = 0b110;
    // SAFETY: every x86-64 CPU has CPUID. (A safe function from Rust
    // 1.87 on; the block is for the workspace's rust-version.)
    #[allow(unused_unsafe)]
    let ecx = unsafe { core::arch::x86_64::__cpuid(1) }.ecx;
    let usable = ecx & (OSXSAVE | HAS_AVX) == OSXSAVE | HAS_AVX
        // SAFETY: OSXSAVE says the OS enabled XGETBV, and with it the
        // XSAVE feature the intrinsic asks for.
        && unsafe { core::arch::x86_64::_xgetbv(0) } & SSE_AVX_STATE == SSE_AVX_STATE;
    AVX.store(if usable { PRESENT } else { ABSENT }, Ordering::Relaxed);
    usable
}

/// Copy the `n` 64-byte blocks at `from` to `to` as 32-byte loads and
/// aligned stores, a block's loads before its stores and the stores in
/// address order: a WQE to BlueFlame.
///
/// # Safety
/// [`avx`] found AVX; `to` is 32-aligned and valid for writes of `64 * n`
/// bytes, `from` valid for reads of as many.
#[inline(always)]
pub(crate) unsafe fn copy_blocks(to: *mut u8, from: *const u64, n: usize) {
    macro_rules! copy {
        ($to:expr, $from:expr; $($asm:literal),*) => {
            // SAFETY: the caller's contract.
            unsafe {
                asm!(
                    $($asm,)*
                    "vzeroupper",
                    s = in(reg) $from, d = in(reg) $to,
                    out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                    out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                    out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                    out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
                    options(nostack, preserves_flags),
                )
            }
        };
    }
    // A WQE of two WQEBBs, what a 64-byte inline send or write takes, as
    // one run of four loads and four stores; the others a block at a time.
    if n == 2 {
        copy!(
            to, from;
            "vmovdqu ymm0, [{s}]",
            "vmovdqu ymm1, [{s} + 32]",
            "vmovdqu ymm2, [{s} + 64]",
            "vmovdqu ymm3, [{s} + 96]",
            "vmovdqa [{d}], ymm0",
            "vmovdqa [{d} + 32], ymm1",
            "vmovdqa [{d} + 64], ymm2",
            "vmovdqa [{d} + 96], ymm3"
        );
        return;
    }
    for i in 0..n {
        copy!(
            to.wrapping_add(64 * i), from.wrapping_add(8 * i);
            "vmovdqu ymm0, [{s}]",
            "vmovdqu ymm1, [{s} + 32]",
            "vmovdqa [{d}], ymm0",
            "vmovdqa [{d} + 32], ymm1"
        );
    }
}
