//! The entry points of `struct dat_provider`, one `extern "C"` function per
//! slot, generic over the transport. Each finds its instance from its
//! first handle, takes the lock, turns C arguments into core values, and
//! returns the core's `DAT_RETURN`. No entry point unwinds into C: a panic
//! is `DAT_INTERNAL_ERROR`.
//!
//! # Safety
//! Every entry point has one contract, the DAT API's: it is reached
//! through the table of the provider its first handle points at (libdat2
//! and the static registry dispatch so), and every pointer argument is
//! null or valid for its type as the man page describes it.
#![allow(clippy::missing_safety_doc)]

use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use parking_lot::MutexGuard;

use udat_core::backend::{MAX_PRIVATE_DATA, MAX_SGE};
use udat_core::handle::{Kind, RawHandle};
use udat_core::{DatError, DatResult, ErrorType};

use crate::instance::{invalid, Instance, State, Transport};
use udat_core::types::LmrTriplet;

use crate::sys::{DAT_HANDLE, DAT_LMR_TRIPLET, DAT_NAME_MAX_LENGTH, DAT_RETURN, DAT_SUCCESS};

pub mod cm;
pub mod cno;
pub mod ep;
pub mod evd;
pub mod ext;
pub mod ia;
pub mod mem;
pub mod misc;
pub mod srq;

/// The `DAT_RETURN` of a result.
#[inline(always)]
pub(crate) fn ret(r: DatResult<()>) -> DAT_RETURN {
    match r {
        Ok(()) => DAT_SUCCESS,
        Err(e) => e.to_raw(),
    }
}

/// Run `f`, the body of an exported function that reaches no instance,
/// without letting a panic cross into C.
pub fn guarded(f: impl FnOnce() -> DAT_RETURN) -> DAT_RETURN {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| DatError::of(ErrorType::InternalError).to_raw())
}

/// Run `f` on `inst` without letting a panic cross into C. A panic may
/// have left the instance's objects half-updated, so it is the last call
/// the instance serves: every later one is `DAT_INTERNAL_ERROR`.
#[inline(always)]
pub(crate) fn guarded_on<B: Transport>(inst: &Instance<B>, f: impl FnOnce() -> DatResult<()>) -> DAT_RETURN {
    if inst.poisoned.load(Ordering::Relaxed) {
        return DatError::of(ErrorType::InternalError).to_raw();
    }
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => ret(r),
        Err(_) => {
            inst.poisoned.store(true, Ordering::Relaxed);
            DatError::of(ErrorType::InternalError).to_raw()
        }
    }
}

/// The context an entry point works in: its instance and the locked state.
pub(crate) struct Cx<B: Transport> {
    pub(crate) inst: &'static Instance<B>,
    pub(crate) st: MutexGuard<'static, State<B>>,
}

impl<B: Transport> Cx<B> {
    /// A further handle argument of `kind`, which must belong to the same
    /// provider.
    pub(crate) fn raw(&self, h: DAT_HANDLE, kind: Kind) -> DatResult<RawHandle> {
        self.st.raw(h, kind)
    }

    /// A further handle argument that may be `DAT_HANDLE_NULL`.
    pub(crate) fn raw_or_null(&self, h: DAT_HANDLE, kind: Kind) -> DatResult<RawHandle> {
        self.st.raw_or_null(h, kind)
    }
}

/// Run `f` on the instance that owns `h` (a handle of `kind`), under its
/// lock, with `h` resolved.
///
/// # Safety
/// `h` is null or a handle this transport's table was dispatched for.
#[inline(always)]
pub(crate) unsafe fn with<B: Transport>(
    h: DAT_HANDLE,
    kind: Kind,
    f: impl FnOnce(&mut Cx<B>, RawHandle) -> DatResult<()>,
) -> DAT_RETURN {
    if h.is_null() {
        return invalid(kind).to_raw();
    }
    // SAFETY: `h` is non-null and dispatched to this transport.
    let inst = unsafe { Instance::<B>::of(h) };
    guarded_on(inst, || {
        let mut cx = Cx { inst, st: inst.state.lock() };
        let raw = cx.raw(h, kind)?;
        f(&mut cx, raw)
    })
}

/// An out-pointer argument (argument number `n`, for the subtype): null
/// or misaligned is `DAT_INVALID_PARAMETER`.
pub(crate) fn out<'a, T>(p: *mut T, n: u8) -> DatResult<&'a mut T> {
    if !p.is_aligned() {
        return Err(DatError::invalid_arg(n));
    }
    // SAFETY: a non-null, aligned out-pointer from C points at a writable
    // `T`.
    unsafe { p.as_mut() }.ok_or(DatError::invalid_arg(n))
}

/// A structure the consumer passes in (argument `n`), copied with an
/// unaligned load: a null pointer is `DAT_INVALID_PARAMETER`, and a
/// misaligned one is read as it is rather than taken for a reference.
///
/// # Safety
/// A non-null `p` points at a readable `T`.
pub(crate) unsafe fn input<T: Copy>(p: *const T, n: u8) -> DatResult<T> {
    if p.is_null() {
        return Err(DatError::invalid_arg(n));
    }
    // SAFETY: by the contract; `read_unaligned` asks no alignment.
    Ok(unsafe { p.read_unaligned() })
}

/// A consumer's NUL-terminated name (argument `n`), read no further than
/// `DAT_NAME_MAX_LENGTH` bytes and never past the last readable byte: a
/// name with no NUL in that reach is `DAT_INVALID_PARAMETER`.
pub fn name(p: *const libc::c_char, n: u8) -> DatResult<CString> {
    if p.is_null() {
        return Err(DatError::invalid_arg(n));
    }
    let mut buf = [0u8; DAT_NAME_MAX_LENGTH as usize];
    let got = read_readable(p as usize, &mut buf);
    let bytes = buf.get(..got).unwrap_or_default();
    let len = bytes.iter().position(|&b| b == 0).ok_or(DatError::invalid_arg(n))?;
    CString::new(bytes.get(..len).unwrap_or_default()).map_err(|_| DatError::invalid_arg(n))
}

/// Copy what is readable of `buf.len()` bytes at `addr` in this process
/// into `buf`; how many bytes that was. process_vm_readv(2) reports a page
/// that is not readable as a short transfer where a load would fault. It
/// transfers whole iovecs only, so the source is split at the first page
/// boundary (4,096 bytes divides every page size).
fn read_readable(addr: usize, buf: &mut [u8]) -> usize {
    const PAGE: usize = 4096;
    let first = buf.len().min(PAGE - addr % PAGE);
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let remote = [
        libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: first },
        libc::iovec { iov_base: addr.wrapping_add(first) as *mut libc::c_void, iov_len: buf.len() - first },
    ];
    let parts = if first == buf.len() { 1 } else { 2 };
    // SAFETY: the local iovec is `buf`, writable for its length; the
    // remote ones are only read by the kernel, which checks them.
    let got = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, remote.as_ptr(), parts, 0) };
    usize::try_from(got).unwrap_or(0).min(buf.len())
}

/// A `DAT_COUNT` argument that must not be negative.
pub(crate) fn count(c: i32, n: u8) -> DatResult<u32> {
    u32::try_from(c).map_err(|_| DatError::invalid_arg(n))
}

/// Bytes of private data at `p`, `size` long (none when `size` is 0).
/// More than any IA takes is `DAT_INVALID_PARAMETER` for `size`, as the
/// core would say, before a slice of the consumer's memory exists.
pub(crate) fn bytes<'a>(p: *const libc::c_void, size: i32, n: u8) -> DatResult<&'a [u8]> {
    let len = count(size, n)? as usize;
    if len == 0 {
        return Ok(&[]);
    }
    if len > MAX_PRIVATE_DATA {
        return Err(DatError::invalid_arg(n));
    }
    if p.is_null() {
        return Err(DatError::invalid_arg(n + 1));
    }
    // SAFETY: the caller's buffer holds `size` bytes (DAT private data).
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

// `DAT_LMR_TRIPLET` of <dat2/dat.h> and the core's `LmrTriplet` are one
// layout (`{ u64, u32, u32 }`), so a consumer's segment array is handed to
// the core as it is, with no copy on the post path.
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<DAT_LMR_TRIPLET>() == size_of::<LmrTriplet>());
    assert!(align_of::<DAT_LMR_TRIPLET>() == align_of::<LmrTriplet>());
    assert!(offset_of!(DAT_LMR_TRIPLET, virtual_address) == offset_of!(LmrTriplet, virtual_address));
    assert!(offset_of!(DAT_LMR_TRIPLET, segment_length) == offset_of!(LmrTriplet, segment_length));
    assert!(offset_of!(DAT_LMR_TRIPLET, lmr_context) == offset_of!(LmrTriplet, lmr_context));
};

/// The `len` local segments of a work request at `p` (argument `n` is the
/// count, `n + 1` the array), as the core's triplets. A misaligned array
/// is `DAT_INVALID_PARAMETER`. More segments than any EP takes stand in as
/// [`TOO_MANY`]: the core refuses the count exactly as it would the
/// consumer's, which is never read.
pub(crate) fn iov<'a>(p: *const DAT_LMR_TRIPLET, len: i32, n: u8) -> DatResult<&'a [LmrTriplet]> {
    let len = count(len, n)? as usize;
    if len > MAX_SGE {
        return Ok(&TOO_MANY);
    }
    // SAFETY: at most MAX_SGE triplets, as `triplets` asks.
    unsafe { triplets(p, len, n) }
}

/// One more segment than a work request may have.
static TOO_MANY: [LmrTriplet; MAX_SGE + 1] =
    [LmrTriplet { virtual_address: 0, segment_length: 0, lmr_context: 0 }; MAX_SGE + 1];

/// The `len` triplets at `p` (argument `n` is the count, `n + 1` the
/// array): null with a count, or misaligned, is `DAT_INVALID_PARAMETER`.
///
/// # Safety
/// A non-null `p` from the consumer points at `len` triplets.
pub(crate) unsafe fn triplets<'a>(p: *const DAT_LMR_TRIPLET, len: usize, n: u8) -> DatResult<&'a [LmrTriplet]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() || !p.is_aligned() {
        return Err(DatError::invalid_arg(n + 1));
    }
    // SAFETY: by the contract, and the two triplet types have one layout
    // (asserted above).
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<LmrTriplet>(), len) })
}
