//! The IB extension's UD send (`dat_ib_post_send_ud` of
//! `<dat2/dat_ib_extensions.h>`): a send of a UD EP to one of its peers,
//! named by the address handle a UD connection event gave.
//!
//! Its rules are dat_ep_post_send(3DAT)'s (flags, segments, lengths, the
//! outstanding limit, the states that take a post), plus the peer: an
//! address handle of this EP, not freed. Argument numbers in errors count
//! as `dat_extension_op` does (`PostSendUd`): the EP is 1, the
//! operation 2.

use super::rule::segments;
use crate::backend::{Backend, SendWr, Sge, UdDest, MAX_SGE};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{AhHandle, EpHandle};
use crate::object::ep::SEND_FLAGS;
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;
use crate::store::FixedVec;
use crate::types::{CompletionFlags, EpState, LmrTriplet, MemPriv};

/// The bits of a QP number: the 24 of the Base Transport Header's DestQP
/// field (IBTA Vol. 1, §9.2 "Base Transport Header").
const QPN_MASK: u32 = 0x00ff_ffff;

signature! {
    /// `dat_ib_post_send_ud`'s parameters, as `dat_extension_op` numbers
    /// them (`<dat2/dat_ib_extensions.h>`).
    pub(crate) enum PostSendUd { EpHandle, Operation, Segments, LocalIov, AddrHandle, UserCookie, CompletionFlags }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// `dat_ib_post_send_ud`: `iov` as one datagram to the QP `remote_qpn`
    /// at the peer `ah` names. It completes on the request EVD as
    /// `DAT_IB_DTO_SEND_UD`; the peer's receive as `DAT_IB_DTO_RECV_UD`.
    #[allow(clippy::too_many_arguments)]
    pub fn ep_post_send_ud(
        &mut self,
        h: EpHandle,
        iov: &[LmrTriplet],
        ah_h: AhHandle,
        remote_qpn: u32,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let Provider { eps, lmrs, ahs, backend, .. } = self;
        let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        // Only a UD EP has peers to send datagrams to.
        if !ep.ud {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleEp));
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
        let (sges, total) = segments::<B, _, FixedVec<Sge, MAX_SGE>>(lmrs, ep.pz, iov, MemPriv::LOCAL_READ)?;
        if total > u64::from(ep.attr().max_message_size) {
            return Err(DatError::invalid(PostSendUd::LocalIov));
        }
        if ep.request_outstanding >= ep.attr().max_request_dtos {
            return Err(DatError::of(ErrorType::InsufficientResources));
        }
        let qp = ep.qp_mut().ok_or(DatError::invalid_state(Subtype::InvalidStateEpNotready))?;
        let wr = SendWr { op: crate::backend::RequestOp::Send, sges: &sges, length: total as u32, cookie, flags };
        backend.post_send_ud(qp, &ah.ah, UdDest { remote_qpn, qkey: ah.qkey }, &wr)?;
        ep.request_outstanding += 1;
        Ok(())
    }
}
