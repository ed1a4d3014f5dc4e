//! UD Endpoints of the IB extension (`<dat2/dat_ib_extensions.h>`, version
//! 2.0.2 and 2.0.9): `DAT_IB_SERVICE_TYPE_UD` EPs, their connections, and
//! `dat_ib_ud_cm_free` / `dat_ib_ud_ah_free`. The UD send is in `post::ud`.
//!
//! Before you edit, read the header's comments on `dat_ib_post_send_ud`,
//! `dat_ib_ud_cm_free`, `dat_ib_ud_ah_free` and
//! `DAT_IB_EXTENSION_EVENT_DATA`, and how OFA dapl's `dtestx -u` uses them.
//! A UD connection resolves a peer rather than binding the EP to it: one UD
//! EP connects and accepts as often as it has peers, in state Unconnected
//! or Connected, and each connection ends in one event on the connect EVD:
//! - `DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED` with the peer's address
//!   handle (`DAT_IB_UD_REMOTE_AH` for a connect,
//!   `DAT_IB_UD_PASSIVE_REMOTE_AH` for an accept); the EP is then
//!   Connected, and takes UD sends;
//! - `DAT_IB_UD_CONNECTION_REJECT_EVENT` or
//!   `DAT_IB_UD_CONNECTION_ERROR_EVENT`, the EP's state unchanged.
//!
//! Requests arrive at a PSP as `DAT_IB_UD_CONNECTION_REQUEST_EVENT`.

use super::cr::CrAccept;
use super::ep::EpCreate;
use crate::backend::{Backend, ConnOutcome, ConnectionManager, PrivateData, QpType, UdPeer};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::event::{EventData, EventNumber};
use crate::handle::{AhHandle, CrHandle, EpHandle, EvdHandle, IaHandle, PzHandle, SrqHandle};
use crate::object::ah::Ah;
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;
use crate::types::{EpAttr, EpState, IaAddress};

signature! {
    /// `dat_ib_ud_cm_free`'s parameters, as `dat_extension_op` numbers
    /// them (`<dat2/dat_ib_extensions.h>`): the operation second.
    pub(crate) enum UdCmFree { EpHandle, Operation, Cm }

    /// `dat_ib_ud_ah_free`'s parameters, as `dat_extension_op` numbers
    /// them: the operation second.
    pub(crate) enum UdAhFree { EpHandle, Operation, Ah }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_ep_create(3DAT) of `DAT_IB_SERVICE_TYPE_UD`: a UD Endpoint in
    /// `DAT_EP_STATE_UNCONNECTED`. A transport without UD refuses with
    /// `DAT_MODEL_NOT_SUPPORTED`, as for any service it lacks.
    pub fn ep_create_ud(
        &mut self,
        ia: IaHandle,
        pz: PzHandle,
        evds: (EvdHandle, EvdHandle, EvdHandle),
        attr: Option<&EpAttr>,
    ) -> DatResult<EpHandle> {
        if !self.ia(ia)?.attr.ud {
            return Err(DatError::of(ErrorType::ModelNotSupported));
        }
        self.ep_new(ia, pz, evds, SrqHandle::NULL, attr, EpCreate::EpAttributes, QpType::Ud)
    }

    /// Whether `ep` is of `DAT_IB_SERVICE_TYPE_UD` (dat_ep_query(3DAT)'s
    /// `service_type`).
    pub fn ep_is_ud(&self, ep: EpHandle) -> DatResult<bool> {
        Ok(self.ep(ep)?.ud)
    }

    /// dat_ep_connect(3DAT) of a UD EP, its arguments checked: resolve one
    /// more peer. The EP's state does not change until the peer answers.
    pub(crate) fn ud_connect(
        &mut self,
        h: EpHandle,
        remote: &IaAddress,
        conn_qual: u64,
        private_data: &[u8],
        timeout_us: u32,
    ) -> DatResult<()> {
        let timeout = (timeout_us != crate::object::evd::TIMEOUT_INFINITE).then_some(u64::from(timeout_us));
        let Provider { eps, backend, .. } = self;
        let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        if !matches!(ep.state(), EpState::Unconnected | EpState::Connected) {
            return Err(DatError::invalid_state(ep.state_subtype()));
        }
        let qp = ep.qp_mut().ok_or(DatError::invalid_state(Subtype::InvalidStateEpPz))?;
        backend.cm().connect(B::cm_qp(qp), remote, conn_qual, private_data, timeout)
    }

    /// dat_cr_accept(3DAT) where the request or the EP is UD: both must
    /// be, and the EP takes the request in state Unconnected or Connected,
    /// which the accept leaves as it is.
    pub(crate) fn ud_accept(&mut self, cr_h: CrHandle, ep_h: EpHandle, private_data: &[u8]) -> DatResult<()> {
        let Provider { crs, eps, backend, .. } = self;
        let c = crs.get_mut(cr_h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleCr))?;
        let e = eps.get_mut(ep_h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        // An RC request on a UD EP, or a UD request on an RC EP: the EP
        // cannot take this connection.
        if e.ud != c.ud {
            return Err(DatError::invalid(CrAccept::EpHandle));
        }
        if !matches!(e.state(), EpState::Unconnected | EpState::Connected) {
            return Err(DatError::invalid_state(e.state_subtype()));
        }
        let qp = e.qp_mut().ok_or(DatError::invalid_state(Subtype::InvalidStateEpPz))?;
        backend.cm().accept(&mut c.request, B::cm_qp(qp), private_data)?;
        crate::object::owned::remove(&mut self.ias, &mut self.crs, cr_h.0);
        Ok(())
    }

    /// A UD connection of `ep_h` is up: make the peer's address handle and
    /// tell the connect EVD. With no room for the handle, or a transport
    /// that cannot make it, the connection fails instead
    /// (`DAT_IB_UD_CONNECTION_ERROR_EVENT`).
    pub(crate) fn on_ud_established(
        &mut self,
        ep_h: EpHandle,
        (peer, remote): (UdPeer, IaAddress),
        passive: bool,
        private_data: PrivateData,
    ) {
        let Provider { eps, pzs, ahs, backend, .. } = self;
        let Some(ep) = eps.get_mut(ep_h.0).filter(|e| e.ud) else { return };
        let made = match pzs.get(ep.pz.0) {
            Some(pz) => backend.ah_create(&pz.pd, &peer.ah).ok(),
            None => None,
        };
        let evd = ep.connect_evd;
        let Some(ah) = made else {
            return self.ud_event(ep_h, EventNumber::UdConnectionError, AhHandle::NULL, 0, passive);
        };
        let size = private_data.len() as u32;
        let object = Ah { ep: ep_h, ah, qkey: peer.qkey, remote, private_data, cm_held: true };
        let ah_h = match ahs.insert_member(&mut ep.ahs, object) {
            Ok(raw) => AhHandle(raw),
            Err(object) => {
                backend.ah_destroy(object.ah);
                return self.ud_event(ep_h, EventNumber::UdConnectionError, AhHandle::NULL, 0, passive);
            }
        };
        ep.connection_moves(|c| c.resolve_peer());
        let data =
            EventData::UdConnection { ep: ep_h, ah: ah_h, remote_qpn: peer.qpn, private_data_size: size, passive };
        self.deliver(evd, EventNumber::UdConnectionEstablished, data, true);
    }

    /// A UD connection of `ep_h` did not come up, or its QP's connection
    /// ended: a rejection or an error on the connect EVD, with the state
    /// unchanged; a disconnect or a break as for any EP.
    pub(crate) fn on_ud_failed(&mut self, ep_h: EpHandle, outcome: ConnOutcome, private_data: PrivateData) {
        let number = match outcome {
            ConnOutcome::PeerRejected => {
                // DAT 2.0 dat_cr_reject: the rejecting peer's private data
                // reaches the requester; it stays with the EP.
                if let Some(ep) = self.eps.get_mut(ep_h.0) {
                    ep.connection_moves(|c| c.private_data = private_data);
                }
                EventNumber::UdConnectionReject
            }
            // An RC-style ESTABLISHED has no peer to make a handle of: a
            // UD connection that cannot be used.
            ConnOutcome::NonPeerRejected
            | ConnOutcome::Unreachable
            | ConnOutcome::TimedOut
            | ConnOutcome::AcceptError
            | ConnOutcome::Established => EventNumber::UdConnectionError,
            ConnOutcome::Disconnected | ConnOutcome::Broken => {
                let connected = self.eps.get(ep_h.0).is_some_and(|e| e.state() == EpState::Connected);
                if connected {
                    let number = if outcome == ConnOutcome::Broken {
                        EventNumber::ConnectionBroken
                    } else {
                        EventNumber::ConnectionDisconnected
                    };
                    self.ep_lost(ep_h, number);
                }
                return;
            }
        };
        self.ud_event(ep_h, number, AhHandle::NULL, 0, false);
    }

    fn ud_event(&mut self, ep_h: EpHandle, number: EventNumber, ah: AhHandle, remote_qpn: u32, passive: bool) {
        let Some(ep) = self.eps.get(ep_h.0) else { return };
        let size =
            if number == EventNumber::UdConnectionReject { ep.connection().private_data.len() as u32 } else { 0 };
        let evd = ep.connect_evd;
        let data = EventData::UdConnection { ep: ep_h, ah, remote_qpn, private_data_size: size, passive };
        self.deliver(evd, number, data, true);
    }

    /// The private data and the peer's address of the UD connection event
    /// that gave `ah`; with `ah` null, the private data of `ep`'s last
    /// rejection and no address. An `ah` not of `ep` is refused as
    /// `dat_ib_ud_ah_free` refuses it.
    pub fn ud_connection(&self, ep: EpHandle, ah: AhHandle) -> DatResult<(&[u8], IaAddress)> {
        if ah.is_null() {
            return Ok((&self.ep(ep)?.connection().private_data, IaAddress::default()));
        }
        let a = self.ahs.get(ah.0).filter(|a| a.ep == ep).ok_or(DatError::invalid(UdAhFree::Ah))?;
        Ok((&a.private_data, a.remote))
    }

    /// `dat_ib_ud_ah_free`: the address handle `ah` of the UD EP `ep` is
    /// freed. The header: it "MUST be called after all UD sends are
    /// complete and before UD EP is destroyed"; udat frees what is left
    /// when the EP is freed.
    pub fn ud_ah_free(&mut self, ep: EpHandle, ah: AhHandle) -> DatResult<()> {
        let Provider { eps, ahs, backend, .. } = self;
        let e = eps.get_mut(ep.0).filter(|e| e.ud).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        if ahs.get(ah.0).is_none_or(|a| a.ep != ep) {
            return Err(DatError::invalid(UdAhFree::Ah));
        }
        let a = ahs.remove_member(&mut e.ahs, ah.0).ok_or(DatError::invalid(UdAhFree::Ah))?;
        backend.ah_destroy(a.ah);
        Ok(())
    }

    /// `dat_ib_ud_cm_free`: the consumer has copied what the connection
    /// event of `cm` (its `context`, the address handle's) carried, and
    /// releases the connection's CM object. The header: it "MAY be called
    /// after CM establishment and before EP destroyed". udat's transports
    /// keep nothing of a UD connection past its event, so the call checks
    /// that `cm` names a connection of `ep` not yet released, and marks it
    /// released: a second release is `DAT_INVALID_PARAMETER`.
    pub fn ud_cm_free(&mut self, ep: EpHandle, cm: AhHandle) -> DatResult<()> {
        let Provider { eps, ahs, .. } = self;
        eps.get(ep.0).filter(|e| e.ud).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        let a = ahs.get_mut(cm.0).filter(|a| a.ep == ep && a.cm_held).ok_or(DatError::invalid(UdCmFree::Cm))?;
        a.cm_held = false;
        Ok(())
    }

    /// Free every address handle of the EP `ep`, which is going.
    pub(crate) fn ud_ahs_free(&mut self, ep: EpHandle) {
        let Provider { eps, ahs, backend, .. } = self;
        let Some(e) = eps.get_mut(ep.0) else { return };
        while let Some(h) = ahs.first_member(&e.ahs) {
            let Some(a) = ahs.remove_member(&mut e.ahs, h) else { return };
            backend.ah_destroy(a.ah);
        }
    }
}
