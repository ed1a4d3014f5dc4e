//! The arguments of a DAT call as the consumer passed them, each carrying
//! its position. The slots generated from `entries.list` hand argument n
//! to its body as an [`Arg<n, _>`](Arg), so every check of it reports
//! `DAT_INVALID_ARGn` (dat_error.h numbers a call's arguments from 1, as
//! the man pages list them) without the body repeating the number.

use std::ffi::CString;

use udat_core::backend::{MAX_PRIVATE_DATA, MAX_SGE};
use udat_core::types::LmrTriplet;
use udat_core::{DatError, DatResult};

use crate::sys::{DAT_COUNT, DAT_HANDLE, DAT_LMR_TRIPLET, DAT_NAME_MAX_LENGTH};

/// Argument `N` of a DAT call.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Arg<const N: u8, T>(pub T);

impl<const N: u8, T> Arg<N, T> {
    /// `DAT_INVALID_PARAMETER` for this argument.
    pub fn invalid(&self) -> DatError {
        DatError::invalid_arg(N)
    }

    /// A count field of the structure this argument points at: negative
    /// is `DAT_INVALID_PARAMETER` for the argument.
    pub fn field_count(&self, c: DAT_COUNT) -> DatResult<u32> {
        u32::try_from(c).map_err(|_| self.invalid())
    }
}

/// A handle as a value: a consumer's argument, or a handle field of a
/// structure it passed.
pub trait AsHandle {
    fn handle(self) -> DAT_HANDLE;
}

impl AsHandle for DAT_HANDLE {
    #[inline(always)]
    fn handle(self) -> DAT_HANDLE {
        self
    }
}

impl<const N: u8> AsHandle for Arg<N, DAT_HANDLE> {
    #[inline(always)]
    fn handle(self) -> DAT_HANDLE {
        self.0
    }
}

impl<const N: u8> Arg<N, DAT_COUNT> {
    /// A count that must not be negative.
    pub fn count(self) -> DatResult<u32> {
        self.field_count(self.0)
    }
}

impl<const N: u8, T> Arg<N, *mut T> {
    /// An out-pointer: null or misaligned is `DAT_INVALID_PARAMETER`.
    pub fn out<'a>(self) -> DatResult<&'a mut T> {
        if !non_null_aligned(self.0) {
            return Err(self.invalid());
        }
        // SAFETY: a non-null, aligned out-pointer from the consumer points
        // at a writable `T` (the DAT call's contract).
        Ok(unsafe { &mut *self.0 })
    }

    /// An out-pointer the call may be given as null.
    pub fn out_or_null<'a>(self) -> DatResult<Option<&'a mut T>> {
        if self.0.is_null() {
            Ok(None)
        } else {
            self.out().map(Some)
        }
    }
}

impl<const N: u8, T: Copy> Arg<N, *const T> {
    /// A structure the consumer passes in, copied with an unaligned load:
    /// null is `DAT_INVALID_PARAMETER`, and a misaligned pointer is read
    /// as it is rather than taken for a reference.
    ///
    /// # Safety
    /// A non-null pointer points at a readable `T`.
    pub unsafe fn input(self) -> DatResult<T> {
        if self.0.is_null() {
            return Err(self.invalid());
        }
        // SAFETY: by the contract; `read_unaligned` asks no alignment.
        Ok(unsafe { self.0.read_unaligned() })
    }

    /// An input structure the call may be given as null.
    ///
    /// # Safety
    /// As [`Arg::input`].
    pub unsafe fn input_or_null(self) -> DatResult<Option<T>> {
        if self.0.is_null() {
            Ok(None)
        } else {
            // SAFETY: as the caller's contract.
            unsafe { self.input() }.map(Some)
        }
    }
}

impl<const N: u8, T: Copy> Arg<N, *mut T> {
    /// A structure the consumer passes in through a pointer the header
    /// does not mark `const`; as [`Arg::input`].
    ///
    /// # Safety
    /// A non-null pointer points at a readable `T`.
    pub unsafe fn input(self) -> DatResult<T> {
        // SAFETY: as the caller's contract.
        unsafe { Arg::<N, *const T>(self.0.cast_const()).input() }
    }
}

impl<const N: u8> Arg<N, *mut libc::c_char> {
    /// A NUL-terminated name, read as [`name`] reads it.
    pub fn name(self) -> DatResult<CString> {
        name(self.0, N)
    }
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

/// Private data: `size` bytes at `p` (none when `size` is 0). More than
/// any IA takes is `DAT_INVALID_PARAMETER` for `size`, as the core would
/// say, before a slice of the consumer's memory exists.
///
/// # Safety
/// A non-null `p` points at `size` readable bytes.
pub(crate) unsafe fn private_data<'a, const S: u8, const P: u8>(
    size: Arg<S, DAT_COUNT>,
    p: Arg<P, *mut libc::c_void>,
) -> DatResult<&'a [u8]> {
    let len = size.count()? as usize;
    if len == 0 {
        return Ok(&[]);
    }
    if len > MAX_PRIVATE_DATA {
        return Err(size.invalid());
    }
    if p.0.is_null() {
        return Err(p.invalid());
    }
    // SAFETY: by the contract.
    Ok(unsafe { std::slice::from_raw_parts(p.0.cast::<u8>(), len) })
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

/// The one segment of a post of one, for its lane; `None` for any other
/// count, or a pointer the ordinary call refuses. The lane reads it where
/// it judges it: a post of a provider that shares, after it has taken
/// the EP's lock, so that the segment is not held across the lock.
///
/// # Safety
/// A non-null `segs` points at `n` triplets, which nobody writes while
/// the call lasts (the call's contract).
#[inline(always)]
pub(crate) unsafe fn lane_segment<'a>(
    n: Arg<2, DAT_COUNT>,
    segs: Arg<3, *mut DAT_LMR_TRIPLET>,
) -> Option<&'a LmrTriplet> {
    let p = segs.0.cast_const().cast::<LmrTriplet>();
    if n.0 != 1 || !non_null_aligned(p) {
        return None;
    }
    // SAFETY: non-null and aligned, and one triplet by the contract; the
    // two triplet types have one layout.
    Some(unsafe { &*p })
}

/// Whether `p` is neither null nor misaligned: two tests of the address
/// itself, which need no register but the one that holds it (one compare
/// of the address rotated by the alignment's bits needs two more).
#[inline(always)]
fn non_null_aligned<T>(p: *const T) -> bool {
    // The low byte alone holds the alignment's bits (an alignment of up
    // to 128): one `test` of it, with no copy of the address to mask.
    const { assert!(align_of::<T>() <= 128) };
    (p.addr() as u8) & (align_of::<T>() - 1) as u8 == 0 && !p.is_null()
}

/// The local segments of a work request: `count` triplets at `p`, as the
/// core's. More segments than any EP takes stand in as [`TOO_MANY`]: the
/// core refuses the count exactly as it would the consumer's, which is
/// never read.
///
/// # Safety
/// A non-null `p` points at `count` triplets.
pub(crate) unsafe fn iov<'a, const C: u8, const P: u8>(
    count: Arg<C, DAT_COUNT>,
    p: Arg<P, *mut DAT_LMR_TRIPLET>,
) -> DatResult<&'a [LmrTriplet]> {
    let len = count.count()? as usize;
    if len > MAX_SGE {
        return Ok(&TOO_MANY);
    }
    // SAFETY: by the contract.
    unsafe { triplets(Arg::<P, _>(p.0.cast_const()), len) }
}

/// One more segment than a work request may have.
static TOO_MANY: [LmrTriplet; MAX_SGE + 1] =
    [LmrTriplet { virtual_address: 0, segment_length: 0, lmr_context: 0 }; MAX_SGE + 1];

/// `len` triplets at `p`: null with a count, or misaligned, is
/// `DAT_INVALID_PARAMETER`.
///
/// # Safety
/// A non-null `p` points at `len` triplets.
pub(crate) unsafe fn triplets<'a, const N: u8>(
    p: Arg<N, *const DAT_LMR_TRIPLET>,
    len: usize,
) -> DatResult<&'a [LmrTriplet]> {
    if len == 0 {
        return Ok(&[]);
    }
    let (invalid, p) = (p.invalid(), p.0);
    if p.is_null() || !p.is_aligned() {
        return Err(invalid);
    }
    // SAFETY: by the contract, and the two triplet types have one layout
    // (asserted above).
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<LmrTriplet>(), len) })
}

#[cfg(test)]
mod tests {
    use super::non_null_aligned;

    #[test]
    fn only_a_non_null_aligned_pointer_passes() {
        let words = [0u64; 4];
        let p = words.as_ptr();
        assert!(non_null_aligned(p));
        assert!(non_null_aligned(p.wrapping_add(3)));
        assert!(!non_null_aligned(std::ptr::null::<u64>()));
        for off in 1..8 {
            assert!(!non_null_aligned(p.cast::<u8>().wrapping_add(off).cast::<u64>()), "{off}");
        }
        // The ends of the address space: the highest aligned address, and
        // the lowest, 8.
        assert!(non_null_aligned(std::ptr::without_provenance::<u64>(usize::MAX & !7)));
        assert!(non_null_aligned(std::ptr::dangling::<u64>()));
        assert!(!non_null_aligned(std::ptr::without_provenance::<u64>(usize::MAX)));
        // A byte's pointer need only be non-null.
        assert!(non_null_aligned(std::ptr::dangling::<u8>()));
        assert!(!non_null_aligned(std::ptr::null::<u8>()));
        // Alignments of 4 and 16.
        let base = words.as_ptr().cast::<u8>();
        for off in 0..16 {
            let at = base.wrapping_add(off);
            assert_eq!(non_null_aligned(at.cast::<u32>()), at.addr() % 4 == 0, "{off}");
            assert_eq!(non_null_aligned(at.cast::<u128>()), at.addr() % 16 == 0, "{off}");
        }
    }
}
