//! The IB extension's posts (`<dat2/dat_ib_extensions.h>`): RDMA write with
//! immediate data, compare-and-swap and fetch-and-add. `c/ext.c` reads
//! them from the `va_list` of `dat_extension_op`; here they reach the
//! core. Argument numbers in errors count as `dat_extension_op` does:
//! the handle is 1, the operation 2. A provider that shares its state
//! among threads posts them as it posts the other requests, with the
//! state shared and only the EP locked ([`udat_core::shared`]).

use udat_core::backend::RequestOp;
use udat_core::handle::{EpHandle, Kind};
use udat_core::types::{CompletionFlags, LmrTriplet};
use udat_core::{DatError, DatResult, Door, ErrorType};

use super::arg::iov;
use super::ep::remote;
use super::{exclusive_on, shared_on, Arg};
use crate::instance::{invalid, Instance};
use crate::sys::*;
use crate::transport::Transport;

/// The local segments and the request of `p`, in the order
/// `dat_extension_op` numbers its arguments.
///
/// # Safety
/// The triplet pointers of `p` are null or point at what the operation
/// reads.
unsafe fn decode(p: &udat_ext_post) -> DatResult<(&[LmrTriplet], RequestOp)> {
    // SAFETY: by the contract; `iov` and `remote` check for null.
    unsafe {
        match p.op {
            DAT_IB_RDMA_WRITE_IMMED_OP => {
                let local = iov(Arg::<3, _>(p.segments), Arg::<4, _>(p.local.cast_mut()))?;
                let remote = remote(Arg::<6, _>(p.remote))?;
                Ok((local, RequestOp::RdmaWriteImm { remote, imm: p.immediate }))
            }
            DAT_IB_CMP_AND_SWAP_OP => {
                let local = iov(Arg::<4, _>(1), Arg::<5, _>(p.local.cast_mut()))?;
                let remote = remote(Arg::<7, _>(p.remote))?;
                Ok((local, RequestOp::CompareSwap { remote, compare: p.compare_add, swap: p.swap }))
            }
            DAT_IB_FETCH_AND_ADD_OP => {
                let local = iov(Arg::<3, _>(1), Arg::<4, _>(p.local.cast_mut()))?;
                let remote = remote(Arg::<6, _>(p.remote))?;
                Ok((local, RequestOp::FetchAdd { remote, add: p.compare_add }))
            }
            _ => Err(DatError::of(ErrorType::NotImplemented)),
        }
    }
}

/// `udat_provider_head.post`: one extended post on the EP `h`.
pub unsafe extern "C" fn post<B: Transport>(h: DAT_HANDLE, p: *const udat_ext_post) -> DAT_RETURN {
    // SAFETY: `c/ext.c` passes the post it filled, on its stack.
    let Some(p) = (unsafe { p.as_ref() }) else { return DAT_INTERNAL_ERROR };
    if super::ud::serves(p.op) {
        // SAFETY: the consumer's pointers (the call's contract).
        return unsafe { super::ud::post::<B>(h, p) };
    }
    if h.is_null() {
        return invalid(Kind::Ep).to_raw();
    }
    // SAFETY: a cookie is 64 bits, whichever member the consumer set; `h`
    // is non-null and dispatched to this transport.
    let (cookie, instance) = unsafe { (p.cookie.as_64, Instance::<B>::of(h)) };
    let flags = CompletionFlags(p.flags);
    if !instance.shares {
        return exclusive_on(instance, h, Kind::Ep, |cx, raw| {
            let (core, ep) = (&mut cx.state.core, EpHandle::from_raw(raw));
            // SAFETY: the consumer's triplets (the call's contract).
            let (local, op) = unsafe { decode(p) }?;
            core.ep_post_request(ep, local, cookie, op, flags)
        });
    }
    // SAFETY: the provider shares (tested above), and the closure changes
    // only the EP, whose lock the door takes, with no `&mut` to the state
    // (`shared_on`'s contract), which is `Provider::locked`'s; the
    // triplets are the consumer's.
    unsafe {
        shared_on(instance, h, Kind::Ep, |core, raw| {
            let (local, op) = decode(p)?;
            core.locked(instance.call_lock()).ep_post_request(EpHandle::from_raw(raw), local, cookie, op, flags)
        })
    }
}
