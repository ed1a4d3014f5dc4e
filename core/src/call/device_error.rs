//! Device errors: what a transport reports about its own objects, outside
//! any completion, and how each becomes a DAT asynchronous event.
//!
//! | device error ([`CmEvent`]) | DAT events |
//! | --- | --- |
//! | `QpError`: the QP failed on its own | its EP is broken: `DAT_CONNECTION_EVENT_BROKEN` on the connect EVD, its DTOs flushed; `DAT_ASYNC_ERROR_EP_BROKEN` naming the EP |
//! | `CqError`: the CQ overran | `DAT_ASYNC_ERROR_EVD_OVERFLOW` naming the EVD; each connected EP that feeds the EVD broken, its DTOs flushed once |
//! | `PortDown` | `DAT_ASYNC_ERROR_IA_CATASTROPHIC`, reason `DAT_IA_OTHER_ERROR`; objects stay |
//! | `Catastrophic` | `DAT_ASYNC_ERROR_IA_CATASTROPHIC`, reason `DAT_IA_CATASTROPHIC_ERROR`; every connection broken |
//!
//! The reasons are `<dat2/dat.h>`'s object-specific ones
//! (`DAT_IA_ASYNC_ERROR_REASON`, `DAT_EP_ASYNC_ERROR_REASON`,
//! `DAT_EVD_ASYNC_ERROR_REASON`). Every other object of the provider
//! carries on (docs/design.md, "Overload is an event, never a poisoned
//! provider").

use crate::backend::{Backend, CmEvent, ConnReq};
use crate::event::EventNumber;
use crate::handle::{EpHandle, EvdHandle, IaHandle, RawHandle};
use crate::object::ep::Ep;
use crate::provider::Provider;
use crate::storage::Storage;
use crate::types::EpState;

/// `DAT_IA_CATASTROPHIC_ERROR`: the IA is unusable.
pub const IA_CATASTROPHIC_ERROR: u32 = 0;
/// `DAT_IA_OTHER_ERROR`: the IA reports trouble it survives.
pub const IA_OTHER_ERROR: u32 = 1;
/// `DAT_EP_TRANSFER_TO_ERROR`: the EP's transport went to its error state.
pub const EP_TRANSFER_TO_ERROR: u32 = 0;
/// `DAT_EVD_OVERFLOW_ERROR`: the EVD lost events to an overflow.
pub const EVD_OVERFLOW_ERROR: u32 = 0;

/// Whether the EP has a connection, or one under way, that a device error
/// ends.
fn has_connection<B: Backend>(ep: &Ep<B>) -> bool {
    matches!(
        ep.state(),
        EpState::Connected | EpState::DisconnectPending | EpState::ActiveConnectionPending | EpState::CompletionPending
    )
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// Turn one device error of `ia` into DAT events.
    pub(crate) fn on_device_error(&mut self, ia: IaHandle, event: CmEvent<ConnReq<B>>) {
        match event {
            CmEvent::QpError { tag } => self.on_qp_error(ia, EpHandle(RawHandle::from_bits(tag))),
            CmEvent::CqError { tag } => self.on_cq_error(ia, EvdHandle(RawHandle::from_bits(tag))),
            // dat.h: DAT_IA_OTHER_ERROR, an IA-level error that is not
            // catastrophic; the connections over the port fail by their
            // own timers and connection events.
            CmEvent::PortDown => {
                self.async_event(ia, EventNumber::AsyncIaCatastrophic, Some(ia.into()), IA_OTHER_ERROR)
            }
            CmEvent::Catastrophic => {
                let mut next = self.eps.first_member(&self.owned(ia).eps);
                while let Some(h) = next {
                    next = self.eps.next_member(h);
                    if self.eps.get(h).is_some_and(has_connection) {
                        self.ep_lost(EpHandle(h), EventNumber::ConnectionBroken);
                    }
                }
                self.async_event(ia, EventNumber::AsyncIaCatastrophic, Some(ia.into()), IA_CATASTROPHIC_ERROR);
            }
            CmEvent::Request { .. } | CmEvent::Conn { .. } | CmEvent::UdEstablished { .. } => {}
        }
    }

    /// The EP's QP failed: the connection breaks, its DTOs are flushed, and
    /// the async EVD hears `DAT_ASYNC_ERROR_EP_BROKEN` once.
    fn on_qp_error(&mut self, ia: IaHandle, ep_h: EpHandle) {
        let Some(ep) = self.eps.get(ep_h.0).filter(|ep| ep.ia == ia) else { return };
        let (connected, on_srq) = (has_connection(ep), !ep.srq.is_null());
        if connected {
            self.ep_lost(ep_h, EventNumber::ConnectionBroken);
        }
        // ep_lost already named an EP on an SRQ.
        if !(connected && on_srq) {
            self.async_event(ia, EventNumber::AsyncEpBroken, Some(ep_h.into()), EP_TRANSFER_TO_ERROR);
        }
    }

    /// The EVD's CQ overran, as a ConnectX's does when its consumer falls
    /// behind: `DAT_ASYNC_ERROR_EVD_OVERFLOW`, and every connected EP that
    /// feeds the EVD broken with its DTOs flushed once each (the transport
    /// completes them through the failed CQ).
    fn on_cq_error(&mut self, ia: IaHandle, evd_h: EvdHandle) {
        let Provider { evds, backend, .. } = self;
        let Some(evd) = evds.get_mut(evd_h.0).filter(|e| e.ia == ia) else { return };
        if !evd.cq_fails() {
            return;
        }
        if let Some(cq) = evd.cq_mut() {
            backend.cq_failed(cq);
        }
        self.async_event(ia, EventNumber::AsyncEvdOverflow, Some(evd_h.into()), EVD_OVERFLOW_ERROR);
        // An EP's EVDs are of its IA (dat_ep_create(3DAT)).
        let feeds = |ep: &Ep<B>| (ep.request_evd == evd_h || ep.recv_evd == evd_h) && has_connection(ep);
        let mut next = self.eps.first_member(&self.owned(ia).eps);
        while let Some(h) = next {
            next = self.eps.next_member(h);
            if self.eps.get(h).is_some_and(feeds) {
                self.ep_lost(EpHandle(h), EventNumber::ConnectionBroken);
            }
        }
    }
}
