//! The IB extension's UD send (`dat_ib_post_send_ud` of
//! `<dat2/dat_ib_extensions.h>`), a request of [`Door::ep_post_request`]
//! ([`PostOp::SendUd`]): a send of a UD EP to one of its peers, named by
//! the address handle a UD connection event gave.
//!
//! Its rules are dat_ep_post_send(3DAT)'s (flags, segments, lengths, the
//! outstanding limit, the states that take a post), plus the peer: an
//! address handle of this EP, not freed. Argument numbers in errors count
//! as `dat_extension_op` does (`PostSendUd`): the EP is 1, the
//! operation 2.

use super::door::{At, Door, Hand};
use super::rule::{segments, Refusal};
#[cfg(doc)]
use super::PostOp;
use crate::backend::{Backend, RequestOp, SendWr, Sge, UdDest, MAX_SGE};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{AhHandle, EpHandle};
use crate::object::ep::SEND_FLAGS;
use crate::signature::signature;
use crate::storage::Storage;
use crate::store::FixedVec;
use crate::types::{Access, CompletionFlags, EpState, LmrTriplet};

/// The bits of a QP number: the 24 of the Base Transport Header's DestQP
/// field (IBTA Vol. 1, §9.2 "Base Transport Header").
const QPN_MASK: u32 = 0x00ff_ffff;

signature! {
    /// `dat_ib_post_send_ud`'s parameters, as `dat_extension_op` numbers
    /// them (`<dat2/dat_ib_extensions.h>`).
    pub(crate) enum PostSendUd { EpHandle, Operation, Segments, LocalIov, AddrHandle, UserCookie, CompletionFlags }
}

/// `iov` as one datagram of the UD EP `h` to the QP `remote_qpn` at the
/// peer `ah_h` names.
pub(crate) fn send_ud<B: Backend, S: Storage, D: Door<B, S> + ?Sized>(
    door: &mut D,
    h: EpHandle,
    iov: &[LmrTriplet],
    ah_h: AhHandle,
    remote_qpn: u32,
    cookie: u64,
    flags: CompletionFlags,
) -> DatResult<()> {
    let At { object: ep, lmrs, ahs, mut hand, .. } = door.ep_named(h)?;
    // Only a UD EP has peers to send datagrams to.
    if !ep.ud {
        return Err(Refusal::NoEp.error());
    }
    if flags.0 & !SEND_FLAGS != 0 || !ep.unsignalled_allowed(flags, false) {
        return Err(DatError::invalid(PostSendUd::CompletionFlags));
    }
    if iov.len() > ep.attr().max_request_iov as usize {
        return Err(DatError::invalid(PostSendUd::Segments));
    }
    // dat_ep_post_send(3DAT): "The operation is valid for the Endpoint
    // in the DAT_EP_STATE_CONNECTED and DAT_EP_STATE_DISCONNECTED
    // states." A UD EP is Connected from its first resolved peer on.
    if !matches!(ep.state(), EpState::Connected | EpState::Disconnected) {
        return Err(DatError::invalid_state(ep.state_subtype()));
    }
    let ah = ahs.get(ah_h.0).filter(|a| a.ep == h).ok_or(DatError::invalid(PostSendUd::AddrHandle))?;
    if remote_qpn & !QPN_MASK != 0 {
        return Err(DatError::invalid(PostSendUd::AddrHandle));
    }
    let (sges, total) = segments::<B, _, FixedVec<Sge, MAX_SGE>>(lmrs, ep.pz, iov, Access::Read)?;
    if total > u64::from(ep.attr().max_message_size) {
        return Err(DatError::invalid(PostSendUd::LocalIov));
    }
    if ep.request_room.full() {
        return Err(DatError::of(ErrorType::InsufficientResources));
    }
    let qp = ep.qp_mut().ok_or(DatError::invalid_state(Subtype::InvalidStateEpNotready))?;
    let wr = SendWr { op: RequestOp::Send, sges: &sges, length: total as u32, cookie, flags };
    hand.post_send_ud(qp, &ah.ah, UdDest { remote_qpn, qkey: ah.qkey }, &wr)?;
    ep.request_room.take();
    Ok(())
}
