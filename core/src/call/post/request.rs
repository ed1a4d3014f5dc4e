//! Each request by its own call, for a provider held to itself:
//! dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT),
//! dat_ep_post_rdma_read(3DAT), and the IB extension's requests
//! (`<dat2/dat_ib_extensions.h>`): RDMA write with immediate data,
//! compare-and-swap and fetch-and-add. Each is
//! [`Door::ep_post_request`] of its [`RequestOp`]: one look-up of the EP,
//! the rules of the request's kind (`rule::check`), one O(1) LMR look-up
//! per segment, then the backend. No allocation, no division, no dynamic
//! dispatch.
//!
//! The extension's requests follow the rules of the DTOs they extend
//! (dat_ep_post_rdma_write(3DAT) for the write; an atomic is a one-segment
//! request whose result lands in local memory, so its segment needs local
//! write as a read's does) and complete on the request EVD with their own
//! [`DtoOp`]. A peer's write with immediate data consumes one of its
//! receives, which completes as [`DtoOp::ReceiveImm`] with the data in
//! the event.

use super::door::Door;
use super::rule::PostRdmaRead;
use crate::backend::{Backend, RequestOp};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::EpHandle;
use crate::object::lmr::Lmr;
use crate::object::rmr::Rmr;
use crate::object::rmr::RmrScope;
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;
#[cfg(doc)]
use crate::types::DtoOp;
use crate::types::{CompletionFlags, LmrTriplet, MemPriv, RmrTriplet};

signature! {
    /// dat_ep_post_rdma_read_to_rmr's parameters (`<dat2/dat.h>`, DAT 2.0).
    pub(crate) enum PostRdmaReadToRmr { EpHandle, LocalIov, UserCookie, RemoteIov, CompletionFlags }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_ep_post_send(3DAT). Every request post is
    /// [`Door::ep_post_request`], judged by `rule::check`.
    pub fn ep_post_send(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        Door::ep_post_request(self, ep, iov, cookie, RequestOp::Send, flags)
    }

    /// dat_ep_post_send_with_invalidate of `<dat2/dat.h>` (DAT 2.0): a
    /// send with the rules of dat_ep_post_send(3DAT) that also
    /// invalidates the peer's `rmr_context` (an RMR the peer created with
    /// dat_rmr_create_for_ep and bound to its end of the connection). The
    /// receive it consumes completes as `DAT_DTO_RECEIVE_WITH_INVALIDATE`
    /// carrying the context. With `invalidate` false it is
    /// dat_ep_post_send(3DAT) and `rmr_context` is not looked at.
    pub fn ep_post_send_with_invalidate(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
        invalidate: bool,
        rmr_context: u32,
    ) -> DatResult<()> {
        if !invalidate {
            return self.ep_post_send(ep, iov, cookie, flags);
        }
        Door::ep_post_request(self, ep, iov, cookie, RequestOp::SendInvalidate { rkey: rmr_context }, flags)
    }

    /// dat_ep_post_rdma_write(3DAT): `iov` into `remote`.
    pub fn ep_post_rdma_write(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        Door::ep_post_request(self, ep, iov, cookie, RequestOp::RdmaWrite { remote: *remote }, flags)
    }

    /// dat_ep_post_rdma_read(3DAT): `remote` into `iov`.
    pub fn ep_post_rdma_read(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        Door::ep_post_request(self, ep, iov, cookie, RequestOp::RdmaRead { remote: *remote }, flags)
    }

    /// dat_ep_post_rdma_read_to_rmr of `<dat2/dat.h>` (DAT 2.0): `remote`
    /// into the local memory that `local` names by an RMR context rather
    /// than an LMR triplet. The target is memory this IA exposes for
    /// remote writes: a bound RMR of the EP's IA (of `DAT_RMR_SCOPE_EP`,
    /// one the EP bound), or an LMR registered with remote write. The
    /// read lands in the LMR under it, so the rules are
    /// dat_ep_post_rdma_read(3DAT)'s on that one segment, and: a context
    /// that names none of these is `DAT_PROTECTION_VIOLATION` (as a freed
    /// LMR's is, dat_lmr_free(3DAT)); memory it does not let a peer write
    /// is `DAT_PRIVILEGES_VIOLATION`; a range outside it is
    /// `DAT_INVALID_PARAMETER`. dat_ep_post_rdma_read(3DAT)'s refusals of
    /// an argument are numbered as this call has them (its one local
    /// segment second, the remote one fourth, the flags fifth).
    pub fn ep_post_rdma_read_to_rmr(
        &mut self,
        ep: EpHandle,
        local: &RmrTriplet,
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let target = self.rmr_target(ep, local)?;
        let op = RequestOp::RdmaRead { remote: *remote };
        let posted = Door::ep_post_request(self, ep, core::slice::from_ref(&target), cookie, op, flags);
        // The read refuses its segment (too long: `local_iov`) and its
        // flags by argument; its segment count is second in both calls.
        const LOCAL_IOV: Subtype = DatError::invalid_arg(PostRdmaRead::LocalIov.position()).subtype();
        const FLAGS: Subtype = DatError::invalid_arg(PostRdmaRead::CompletionFlags.position()).subtype();
        posted.map_err(|e| match e.subtype() {
            LOCAL_IOV => DatError::invalid(PostRdmaReadToRmr::LocalIov),
            FLAGS => DatError::invalid(PostRdmaReadToRmr::CompletionFlags),
            _ => e,
        })
    }

    /// The LMR segment under `local`, an RMR triplet of `ep`'s IA.
    fn rmr_target(&self, ep_h: EpHandle, local: &RmrTriplet) -> DatResult<LmrTriplet> {
        let ep = self.ep(ep_h)?;
        let (ia, context, len) = (ep.ia, local.rmr_context, u64::from(local.segment_length));
        let segment = |lmr_context| LmrTriplet {
            virtual_address: local.virtual_address,
            segment_length: local.segment_length,
            lmr_context,
        };
        // "When 0 is specified for segment_length then the other two
        // elements ... are irrelevant" (dat_ep_post_rdma_read(3DAT)).
        if len == 0 {
            return Ok(segment(0));
        }
        let bound = |r: &Rmr<B>| r.ia == ia && r.binding.is_some_and(|b| b.rmr_context == context);
        if let Some(b) =
            self.rmrs.find_from(0, bound).and_then(|h| self.rmrs.get(h)).and_then(|r| r.binding.map(|b| (r.scope, b)))
        {
            let (scope, b) = b;
            if scope == RmrScope::Ep && b.ep != ep_h {
                return Err(DatError::of(ErrorType::ProtectionViolation));
            }
            if !b.privileges.contains(MemPriv::REMOTE_WRITE) {
                return Err(DatError::of(ErrorType::PrivilegesViolation));
            }
            let offset = local.virtual_address.wrapping_sub(b.triplet.virtual_address);
            let window = u64::from(b.triplet.segment_length);
            if offset > window || len > window - offset {
                return Err(DatError::invalid(PostRdmaReadToRmr::LocalIov));
            }
            return Ok(segment(b.triplet.lmr_context));
        }
        let registered = |l: &Lmr<B>| l.ia == ia && l.rmr_context == Some(context);
        let lmr = self.lmrs.find_from(0, registered).and_then(|h| self.lmrs.get(h));
        let lmr = lmr.ok_or(DatError::of(ErrorType::ProtectionViolation))?;
        if !lmr.privileges.contains(MemPriv::REMOTE_WRITE) {
            return Err(DatError::of(ErrorType::PrivilegesViolation));
        }
        if !lmr.contains(local.virtual_address, len) {
            return Err(DatError::invalid(PostRdmaReadToRmr::LocalIov));
        }
        Ok(segment(lmr.lmr_context))
    }

    /// `dat_ib_post_rdma_write_immed`: `iov` into `remote`, then `imm` to
    /// the peer with the receive it consumes, by the write's rules.
    pub fn ep_post_rdma_write_imm(
        &mut self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        remote: &RmrTriplet,
        imm: u32,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        Door::ep_post_request(self, ep, iov, cookie, RequestOp::RdmaWriteImm { remote: *remote, imm }, flags)
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
        Door::ep_post_request(self, ep, core::slice::from_ref(local), cookie, op, flags)
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
        Door::ep_post_request(self, ep, core::slice::from_ref(local), cookie, op, flags)
    }
}
