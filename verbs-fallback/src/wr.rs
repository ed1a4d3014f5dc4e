//! What QPs and SRQs both put in their work requests: the mark of a
//! receive's `wr_id`, and the core's segments as a scatter/gather list.

use udat_core::backend::{Sge, MAX_SGE};
use udat_core::{DatError, DatResult, ErrorType};

use crate::sys;

/// Bit 63 of a receive's `wr_id`.
pub(crate) const RECV: u64 = 1 << 63;

// The core's `Sge` and verbs' `ibv_sge` are one layout (`{ u64, u32,
// u32 }`), so a work request points at the core's segments as they are.
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Sge>() == size_of::<sys::ibv_sge>());
    assert!(align_of::<Sge>() == align_of::<sys::ibv_sge>());
    assert!(offset_of!(Sge, addr) == offset_of!(sys::ibv_sge, addr));
    assert!(offset_of!(Sge, length) == offset_of!(sys::ibv_sge, length));
    assert!(offset_of!(Sge, lkey) == offset_of!(sys::ibv_sge, lkey));
};

/// The core's segments as a work request's scatter/gather list and its
/// length. The device reads the list during the post call and never
/// writes it; the pointer is `*mut` only because `struct ibv_send_wr`
/// declares it so.
pub(crate) fn ibv_sges(sges: &[Sge]) -> DatResult<(*mut sys::ibv_sge, i32)> {
    if sges.len() > MAX_SGE {
        return Err(DatError::of(ErrorType::LengthError));
    }
    Ok((sges.as_ptr().cast::<sys::ibv_sge>().cast_mut(), sges.len() as i32))
}
