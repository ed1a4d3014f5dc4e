//! The IB extension's posts (`<dat2/dat_ib_extensions.h>`): RDMA write with
//! immediate data, compare-and-swap and fetch-and-add. `c/ext.c` reads
//! them from the `va_list` of `dat_extension_op`; here they reach the
//! core. Argument numbers in errors count as `dat_extension_op` does:
//! the handle is 1, the operation 2.

use udat_core::handle::{EpHandle, Kind};
use udat_core::types::CompletionFlags;
use udat_core::{DatError, ErrorType};

use super::arg::iov;
use super::ep::remote;
use super::{with, Arg};
use crate::instance::Transport;
use crate::sys::*;

/// `udat_provider_head.post`: one extended post on the EP `h`.
pub unsafe extern "C" fn post<B: Transport>(h: DAT_HANDLE, p: *const udat_ext_post) -> DAT_RETURN {
    // SAFETY: `c/ext.c` passes the post it filled, on its stack.
    let Some(p) = (unsafe { p.as_ref() }) else { return DAT_INTERNAL_ERROR };
    // SAFETY: a cookie is 64 bits, whichever member the consumer set.
    let cookie = unsafe { p.cookie.as_64 };
    let flags = CompletionFlags(p.flags);
    // SAFETY: dispatched on `h`'s provider word; the triplet pointers are
    // the consumer's, checked for null by `iov` and `remote`.
    unsafe {
        with::<B>(Arg(h), Kind::Ep, |cx, raw| {
            let (core, ep) = (&mut cx.st.core, EpHandle::from_raw(raw));
            match p.op {
                DAT_IB_RDMA_WRITE_IMMED_OP => {
                    let local = iov(Arg::<3, _>(p.segments), Arg::<4, _>(p.local.cast_mut()))?;
                    core.ep_post_rdma_write_imm(ep, local, cookie, &remote(Arg::<6, _>(p.remote))?, p.immediate, flags)
                }
                DAT_IB_CMP_AND_SWAP_OP => {
                    let local = &iov(Arg::<4, _>(1), Arg::<5, _>(p.local.cast_mut()))?[0];
                    core.ep_post_compare_swap(
                        ep,
                        p.compare_add,
                        p.swap,
                        local,
                        cookie,
                        &remote(Arg::<7, _>(p.remote))?,
                        flags,
                    )
                }
                DAT_IB_FETCH_AND_ADD_OP => {
                    let local = &iov(Arg::<3, _>(1), Arg::<4, _>(p.local.cast_mut()))?[0];
                    core.ep_post_fetch_add(ep, p.compare_add, local, cookie, &remote(Arg::<6, _>(p.remote))?, flags)
                }
                _ => Err(DatError::of(ErrorType::NotImplemented)),
            }
        })
    }
}
