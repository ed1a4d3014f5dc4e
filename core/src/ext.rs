//! The IB extension's data transfers (`<dat2/dat_ib_extensions.h>`):
//! RDMA write with immediate data, compare-and-swap and fetch-and-add.
//!
//! They follow the rules of the DTOs they extend (dat_ep_post_rdma_write(3DAT)
//! for the write; an atomic is a one-segment request whose result lands in
//! local memory, so its segment needs local write as a read's does) and
//! complete on the request EVD with their own [`DtoOp`]. A peer's write
//! with immediate data consumes one of its receives, which completes as
//! [`DtoOp::ReceiveImm`] with the data in the event.

use crate::backend::{Backend, RequestOp};
use crate::dto::REQUEST_FLAGS;
use crate::error::{DatError, DatResult};
use crate::handle::EpHandle;
use crate::provider::Provider;
use crate::storage::Storage;
#[cfg(doc)]
use crate::types::DtoOp;
use crate::types::{CompletionFlags, LmrTriplet, RmrTriplet};

impl<B: Backend, S: Storage> Provider<B, S> {
    /// `dat_ib_post_rdma_write_immed`: `iov` into `remote`, then `imm` to
    /// the peer with the receive it consumes.
    pub fn ep_post_rdma_write_imm(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        remote: &RmrTriplet,
        imm: u32,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.post_request(ep, iov, cookie, RequestOp::RdmaWriteImm { remote: *remote, imm }, flags, REQUEST_FLAGS)
    }

    /// `dat_ib_post_cmp_and_swap`: if the 8 bytes at `remote` equal
    /// `compare`, they become `swap`; their old value lands in `local`
    /// (8 bytes, local write). The arguments are the macro's, in its order.
    #[allow(clippy::too_many_arguments)]
    pub fn ep_post_compare_swap(
        &mut self,
        ep: EpHandle,
        compare: u64,
        swap: u64,
        local: &LmrTriplet,
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let op = RequestOp::CompareSwap { remote: *remote, compare, swap };
        self.post_request(ep, core::slice::from_ref(local), cookie, op, flags, REQUEST_FLAGS)
    }

    /// `dat_ib_post_fetch_and_add`: the 8 bytes at `remote` grow by `add`;
    /// their old value lands in `local` (8 bytes, local write).
    pub fn ep_post_fetch_add(
        &mut self,
        ep: EpHandle,
        add: u64,
        local: &LmrTriplet,
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let op = RequestOp::FetchAdd { remote: *remote, add };
        self.post_request(ep, core::slice::from_ref(local), cookie, op, flags, REQUEST_FLAGS)
    }

    /// One of the IB extension's requests through a shared provider:
    /// `op` is [`RequestOp::RdmaWriteImm`], [`RequestOp::CompareSwap`] or
    /// [`RequestOp::FetchAdd`], and `iov` its local segments, as the
    /// methods above take them (any other `op` is
    /// `DAT_INVALID_PARAMETER`). The checks and errors are theirs.
    ///
    /// # Safety
    /// As [`Provider::ep_post_send_shared`].
    #[allow(unsafe_code)]
    pub unsafe fn ep_post_extension_shared(
        &self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        op: RequestOp,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        if !matches!(op, RequestOp::RdmaWriteImm { .. } | RequestOp::CompareSwap { .. } | RequestOp::FetchAdd { .. }) {
            return Err(DatError::invalid_arg(2));
        }
        let request = crate::dto::Request { iov, cookie, op, flags, allowed: REQUEST_FLAGS };
        // SAFETY: forwarded contract.
        unsafe { self.post_shared(ep, request) }
    }
}
