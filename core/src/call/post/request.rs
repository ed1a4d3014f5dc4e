//! DAT 2.0's read into memory named by an RMR context
//! (dat_ep_post_rdma_read_to_rmr of `<dat2/dat.h>`), a request of
//! [`Door::ep_post_request`] ([`PostOp::RdmaReadToRmr`]): the context
//! resolved to the LMR segment under it, then the rules of
//! dat_ep_post_rdma_read(3DAT) on that one segment.
//!
//! The other requests need nothing of their own: each is
//! [`Door::ep_post_request`] of its [`RequestOp`], judged by
//! `rule::check`. The IB extension's requests
//! (`<dat2/dat_ib_extensions.h>`) follow the rules of the DTOs they extend
//! (dat_ep_post_rdma_write(3DAT) for the write with immediate data; an
//! atomic is a one-segment request whose result lands in local memory,
//! so its segment needs local write as a read's does) and complete on
//! the request EVD with their own [`DtoOp`]. A peer's write with
//! immediate data consumes one of its receives, which completes as
//! [`DtoOp::ReceiveImm`] with the data in the event.

use super::door::{At, Door};
use super::rule::{checked_post, PostRdmaRead};
use super::ud::send_ud;
use super::PostOp;
use crate::backend::{Backend, RequestOp};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{EpHandle, IaHandle};
use crate::object::lmr::Lmr;
use crate::object::rmr::{Rmr, RmrScope};
use crate::signature::signature;
use crate::slab::{Slab, SlotsOf};
use crate::storage::Storage;
#[cfg(doc)]
use crate::types::DtoOp;
use crate::types::{CompletionFlags, LmrTriplet, MemPriv, RmrTriplet};

signature! {
    /// dat_ep_post_rdma_read_to_rmr's parameters (`<dat2/dat.h>`, DAT 2.0).
    pub(crate) enum PostRdmaReadToRmr { EpHandle, LocalIov, UserCookie, RemoteIov, CompletionFlags }
}

/// A request whose other side is named another way ([`PostOp`]): a UD
/// send's peer by its address handle, a read's local memory by an RMR
/// context. Out of line: neither has a lane.
#[cold]
#[inline(never)]
pub(crate) fn post_named<B: Backend, S: Storage, D: Door<B, S> + ?Sized>(
    door: &mut D,
    h: EpHandle,
    iov: &[LmrTriplet],
    cookie: u64,
    op: PostOp,
    flags: CompletionFlags,
) -> DatResult<()> {
    match op {
        PostOp::Connected(op) => door.ep_post_request(h, iov, cookie, op, flags),
        PostOp::SendUd { ah, remote_qpn } => send_ud(door, h, iov, ah, remote_qpn, cookie, flags),
        PostOp::RdmaReadToRmr { local, remote } => read_to_rmr(door, h, iov, &local, cookie, &remote, flags),
    }
}

/// `remote` into the local memory that `local` names by an RMR context.
/// The target is memory this IA exposes for remote writes: a bound RMR of
/// the EP's IA (of `DAT_RMR_SCOPE_EP`, one the EP bound), or an LMR
/// registered with remote write. The read lands in the LMR under it, so
/// the rules are dat_ep_post_rdma_read(3DAT)'s on that one segment, and:
/// a context that names none of these is `DAT_PROTECTION_VIOLATION` (as a
/// freed LMR's is, dat_lmr_free(3DAT)); memory it does not let a peer
/// write is `DAT_PRIVILEGES_VIOLATION`; a range outside it is
/// `DAT_INVALID_PARAMETER`. dat_ep_post_rdma_read(3DAT)'s refusals of an
/// argument are numbered as this call has them (its one local segment
/// second, the remote one fourth, the flags fifth). The local side is
/// `local`, so `iov` is empty.
fn read_to_rmr<B: Backend, S: Storage, D: Door<B, S> + ?Sized>(
    door: &mut D,
    h: EpHandle,
    iov: &[LmrTriplet],
    local: &RmrTriplet,
    cookie: u64,
    remote: &RmrTriplet,
    flags: CompletionFlags,
) -> DatResult<()> {
    let At { object: ep, lmrs, ias, rmrs, hand, .. } = door.ep_named(h)?;
    if !iov.is_empty() {
        return Err(DatError::invalid(PostRdmaReadToRmr::LocalIov));
    }
    let target = target(h, ep.ia, rmrs, lmrs, local)?;
    let op = RequestOp::RdmaRead { remote: *remote };
    let posted = checked_post(ep, h.0, lmrs, ias, core::slice::from_ref(&target), (cookie, op, flags), hand);
    // The read refuses its segment (too long: `local_iov`) and its flags
    // by argument; its segment count is second in both calls.
    const LOCAL_IOV: Subtype = DatError::invalid_arg(PostRdmaRead::LocalIov.position()).subtype();
    const FLAGS: Subtype = DatError::invalid_arg(PostRdmaRead::CompletionFlags.position()).subtype();
    posted.map_err(|e| match e.subtype() {
        LOCAL_IOV => DatError::invalid(PostRdmaReadToRmr::LocalIov),
        FLAGS => DatError::invalid(PostRdmaReadToRmr::CompletionFlags),
        _ => e,
    })
}

/// The LMR segment under `local`, an RMR triplet of the IA `ia` of the EP
/// `ep_h`.
fn target<B: Backend, R: SlotsOf<Rmr<B>>, L: SlotsOf<Lmr<B>>>(
    ep_h: EpHandle,
    ia: IaHandle,
    rmrs: &Slab<Rmr<B>, R>,
    lmrs: &Slab<Lmr<B>, L>,
    local: &RmrTriplet,
) -> DatResult<LmrTriplet> {
    let (context, len) = (local.rmr_context, u64::from(local.segment_length));
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
    if let Some((scope, b)) =
        rmrs.find_from(0, bound).and_then(|h| rmrs.get(h)).and_then(|r| r.binding.map(|b| (r.scope, b)))
    {
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
    let lmr = lmrs.find_from(0, registered).and_then(|h| lmrs.get(h));
    let lmr = lmr.ok_or(DatError::of(ErrorType::ProtectionViolation))?;
    if !lmr.privileges.contains(MemPriv::REMOTE_WRITE) {
        return Err(DatError::of(ErrorType::PrivilegesViolation));
    }
    if !lmr.contains(local.virtual_address, len) {
        return Err(DatError::invalid(PostRdmaReadToRmr::LocalIov));
    }
    Ok(segment(lmr.lmr_context))
}
