//! Endpoint (EP): dat_ep_create(3DAT), dat_ep_create_with_srq(3DAT),
//! dat_ep_free(3DAT), dat_ep_query(3DAT), dat_ep_modify(3DAT),
//! dat_ep_connect(3DAT), dat_ep_dup_connect(3DAT), dat_ep_disconnect(3DAT),
//! dat_ep_reset(3DAT), dat_ep_get_status(3DAT), dat_ep_recv_query(3DAT),
//! dat_ep_set_watermark(3DAT). The data transfers are in `post`.
//!
//! Before you edit, read the state rules of dat_ep_connect(3DAT),
//! dat_ep_disconnect(3DAT), dat_ep_free(3DAT), dat_ep_modify(3DAT) and
//! dat_ep_reset(3DAT), and dat_cr_accept/reject(3DAT) and
//! dat_rsp_create(3DAT) for the passive side. The states:
//!
//! ```text
//!            connect                 ESTABLISHED
//! UNCONNECTED ──────> ACTIVE_CONNECTION_PENDING ──────> CONNECTED
//!  │ ^  rsp_create                                       │  │ graceful
//!  │ └── RESERVED ── request ──> PASSIVE_CONNECTION_PENDING │  v
//!  │     (reject: back to UNCONNECTED)     │ accept      DISCONNECT_PENDING
//!  │                                       v               │
//!  │ (PSP_PROVIDER) TENTATIVE_CONNECTION_PENDING ─> COMPLETION_PENDING
//!  │                                                       │
//!  └──────────────── reset <── DISCONNECTED <── failure, abrupt, peer
//! ```
//!
//! A UD EP of the IB extension connects and accepts in UNCONNECTED and
//! CONNECTED, each connection resolving one more peer (`crate::call::ud`).

use crate::backend::{Backend, ConnectionManager, QpConfig, QpType};
use crate::counts;
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::event::EventNumber;
use crate::handle::{EpHandle, EvdHandle, IaHandle, PzHandle, SrqHandle};
use crate::object::ep::{Ep, Streams};
use crate::object::evd::{EvdCqs, NotifyMode};
use crate::provider::Provider;
use crate::signature::{signature, Parameter};
use crate::storage::Storage;
use crate::types::{CloseFlags, ConnectFlags, EpAttr, EpState, EvdFlags, IaAddress, Qos};

/// `DAT_VALUE_UNKNOWN`.
pub const VALUE_UNKNOWN: u32 = u32::MAX - 1;

/// `DAT_EP_PARAM`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpParam {
    /// The IA the EP belongs to.
    pub ia: IaHandle,
    /// Where the EP is in its connection's life.
    pub state: EpState,
    /// The IA's address.
    pub local_ia_address: IaAddress,
    /// The peer's address, once a connection is under way.
    pub remote_ia_address: IaAddress,
    /// The peer's connection qualifier or port.
    pub remote_port_qual: u64,
    /// The EP's PZ; null if it has none.
    pub pz: PzHandle,
    /// The EVD of receive completions; null if none.
    pub recv_evd: EvdHandle,
    /// The EVD of request completions; null if none.
    pub request_evd: EvdHandle,
    /// The EVD of connection events; null if none.
    pub connect_evd: EvdHandle,
    /// The SRQ the EP receives from; null if none.
    pub srq: SrqHandle,
    /// The EP's attributes.
    pub attr: EpAttr,
}

/// What `dat_ep_modify` changes: `None` leaves a parameter as it is. The
/// parameters the page says cannot be modified have no field here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpChanges {
    /// A new PZ.
    pub pz: Option<PzHandle>,
    /// A new EVD of receive completions.
    pub recv_evd: Option<EvdHandle>,
    /// A new EVD of request completions.
    pub request_evd: Option<EvdHandle>,
    /// A new EVD of connection events.
    pub connect_evd: Option<EvdHandle>,
    /// New attributes.
    pub attr: Option<EpAttr>,
}

signature! {
    /// dat_ep_create(3DAT)'s parameters.
    pub(crate) enum EpCreate {
        IaHandle, PzHandle, RecvEvdHandle, RequestEvdHandle, ConnectEvdHandle, EpAttributes, EpHandle,
    }

    /// dat_ep_create_with_srq(3DAT)'s parameters.
    pub(crate) enum EpCreateWithSrq {
        IaHandle, PzHandle, RecvEvdHandle, RequestEvdHandle, ConnectEvdHandle, SrqHandle, EpAttributes, EpHandle,
    }

    /// dat_ep_modify(3DAT)'s parameters.
    pub(crate) enum EpModify { EpHandle, EpParamMask, EpParam }

    /// dat_ep_connect(3DAT)'s parameters.
    pub(crate) enum EpConnect {
        EpHandle, RemoteIaAddress, RemoteConnQual, Timeout, PrivateDataSize, PrivateData, Qos, ConnectFlags,
    }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_ep_create(3DAT): an Endpoint in `DAT_EP_STATE_UNCONNECTED`. With
    /// no `attr` the provider picks [`EpAttr::provider_default`].
    pub fn ep_create(
        &mut self,
        ia: IaHandle,
        pz: PzHandle,
        recv_evd: EvdHandle,
        request_evd: EvdHandle,
        connect_evd: EvdHandle,
        attr: Option<&EpAttr>,
    ) -> DatResult<EpHandle> {
        let evds = (recv_evd, request_evd, connect_evd);
        self.ep_new(ia, pz, evds, SrqHandle::NULL, attr, EpCreate::EpAttributes, QpType::Rc)
    }

    /// dat_ep_create_with_srq(3DAT): as [`Provider::ep_create`], receiving
    /// from `srq`. "Consumer can not specify NULL for ep_attributes".
    #[allow(clippy::too_many_arguments)]
    pub fn ep_create_with_srq(
        &mut self,
        ia: IaHandle,
        pz: PzHandle,
        recv_evd: EvdHandle,
        request_evd: EvdHandle,
        connect_evd: EvdHandle,
        srq: SrqHandle,
        attr: &EpAttr,
    ) -> DatResult<EpHandle> {
        let s = self.srq(srq)?;
        if s.ia != ia {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleSrq));
        }
        // "pz_handle specified does not match the one for SRQ" is
        // DAT_INVALID_PARAMETER where the provider needs them equal.
        let differ_ok = self.ia(ia)?.attr.srq_ep_pz_difference_supported;
        if s.pz != pz && !differ_ok {
            return Err(DatError::invalid(EpCreateWithSrq::PzHandle));
        }
        let evds = (recv_evd, request_evd, connect_evd);
        let ep = self.ep_new(ia, pz, evds, srq, Some(attr), EpCreateWithSrq::EpAttributes, QpType::Rc)?;
        if let Ok(s) = self.srq_mut(srq) {
            s.ep_refs += 1;
        }
        Ok(ep)
    }

    /// An Endpoint of `qp_type` with `attr`, which the creating call
    /// passes as its parameter `attributes`: where a refusal of them, or of
    /// the EVDs' completion flags they conflict with, points.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ep_new(
        &mut self,
        ia_h: IaHandle,
        pz: PzHandle,
        evds: (EvdHandle, EvdHandle, EvdHandle),
        srq: SrqHandle,
        attr: Option<&EpAttr>,
        attributes: impl Parameter,
        qp_type: QpType,
    ) -> DatResult<EpHandle> {
        let ia = self.ia(ia_h)?;
        let attr = match attr {
            Some(a) => {
                a.check(&ia.attr, attributes)?;
                a.resolved(&ia.attr)
            }
            None => EpAttr::provider_default(&ia.attr),
        };
        self.pz_of(ia_h, pz)?;
        let ep = Ep::new(ia_h, pz, evds, srq, attr, EpState::Unconnected, false);
        let ep = if qp_type == QpType::Ud { ep.datagram() } else { ep };
        let streams = ep.streams();
        self.check_streams(&streams, attributes)?;
        let h = EpHandle(
            crate::object::owned::insert(&mut self.ias, &mut self.eps, ep)
                .map_err(|_| DatError::new(ErrorType::InsufficientResources, Subtype::ResourceTep))?,
        );
        if let Err(e) = self.qp_build(h) {
            crate::object::owned::remove(&mut self.ias, &mut self.eps, h.0);
            return Err(e);
        }
        self.attach(&streams);
        self.pz_hold(pz);
        self.tally_new_ep(h.0);
        Ok(h)
    }

    /// An EP the provider makes for a `DAT_PSP_PROVIDER` request: no PZ,
    /// no EVDs, default attributes, Tentative Connection Pending.
    pub(crate) fn ep_for_provider(&mut self, ia_h: IaHandle) -> Option<EpHandle> {
        let attr = EpAttr::provider_default(&self.ia(ia_h).ok()?.attr);
        let ep = Ep::new(
            ia_h,
            PzHandle::NULL,
            (EvdHandle::NULL, EvdHandle::NULL, EvdHandle::NULL),
            SrqHandle::NULL,
            attr,
            EpState::TentativeConnectionPending,
            true,
        );
        let h = crate::object::owned::insert(&mut self.ias, &mut self.eps, ep).ok()?;
        self.tally_new_ep(h);
        Some(EpHandle(h))
    }

    /// Create the EP's QP if it has a PZ and none yet.
    fn qp_build(&mut self, h: EpHandle) -> DatResult<()> {
        let Provider { eps, pzs, evds, srqs, backend, .. } = self;
        let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        if ep.qp().is_some() {
            return Ok(());
        }
        let Some(pz) = pzs.get(ep.pz.0) else { return Ok(()) };
        let config = QpConfig {
            pd: &pz.pd,
            send_cq: evds.get(ep.request_evd.0).and_then(|e| e.cq()),
            recv_cq: evds.get(ep.recv_evd.0).and_then(|e| e.cq()),
            srq: srqs.get(ep.srq.0).map(|s| &s.srq),
            max_send_wr: ep.attr().max_request_dtos,
            max_recv_wr: ep.attr().max_recv_dtos,
            max_send_sge: ep.attr().max_request_iov,
            max_recv_sge: ep.attr().max_recv_iov,
            max_rdma_read_in: ep.attr().max_rdma_read_in,
            max_rdma_read_out: ep.attr().max_rdma_read_out,
            qp_type: if ep.ud { QpType::Ud } else { QpType::Rc },
        };
        let qp = backend.qp_create(&config, h.0.to_bits())?;
        ep.reconfigure(|_, slot| *slot = Some(qp));
        Ok(())
    }

    /// The EVD rules of dat_ep_create(3DAT) for these streams, as if
    /// attached now: each EVD takes its kind of event; a solicited-wait
    /// receive EVD takes no other kind of stream, nor a DTO stream of
    /// another mode.
    ///
    /// The page also wants every DTO stream sharing an EVD with an
    /// unsignalled one to be unsignalled. OFA's providers do not check
    /// it, and MVAPICH2 gives one EVD to both streams of each EP, its
    /// receives signalled and its requests unsignalled. Every transport
    /// decides notification per work request, so udat accepts any mix of
    /// threshold and unsignalled streams, each keeping its own rules
    /// (docs/conformance.md, "Where udat follows OFA").
    ///
    /// The DTO EVDs must be of the EP's IA: their CQs belong to its device
    /// context, as the QP does. The page ties only the EP to `ia_handle`,
    /// and a connection EVD is a queue of the provider's, so it may be of
    /// any IA of this provider (dapltest's limit test shares one among
    /// the IAs it opens).
    ///
    /// A refusal names the calling DAT call's parameter `attributes`, the
    /// attributes whose completion flags conflict.
    fn check_streams(&self, s: &Streams, attributes: impl Parameter) -> DatResult<()> {
        let (recv, recv_mode) = s.recv;
        let (request, request_mode) = s.request;
        if !recv.is_null() {
            self.evd_for(s.ia, recv, EvdFlags::DTO, Subtype::InvalidHandleEvdRecv)?;
        }
        if !request.is_null() {
            self.evd_for(s.ia, request, EvdFlags::DTO, Subtype::InvalidHandleEvdRequest)?;
        }
        if !s.connect.is_null() {
            let ia = self.evds.get(s.connect.0).map_or(s.ia, |e| e.ia);
            self.evd_for(ia, s.connect, EvdFlags::CONNECTION, Subtype::InvalidHandleEvdConn)?;
        }
        let fits = |evd: EvdHandle, mode: NotifyMode| {
            let Some(e) = self.evds.get(evd.0) else { return true };
            let alone = mode != NotifyMode::Solicited || (!e.fed_by_cm() && evd != s.connect);
            e.dto().admit(mode) && alone
        };
        let shared_ok = recv.is_null() || recv != request || recv_mode.shares_with(request_mode);
        let connect_ok = self.evds.get(s.connect.0).is_none_or(|e| !e.dto().solicited());
        if !fits(recv, recv_mode) || !fits(request, request_mode) || !shared_ok || !connect_ok {
            return Err(DatError::invalid(attributes));
        }
        Ok(())
    }

    fn attach(&mut self, s: &Streams) {
        for ((evd, mode), holds) in [(s.recv, s.holds.recv), (s.request, s.holds.request)] {
            if let Some(e) = self.evds.get_mut(evd.0) {
                e.attach_dto(mode, holds);
            }
        }
        if let Some(e) = self.evds.get_mut(s.connect.0) {
            let foreign = e.ia != s.ia;
            e.attach_cm(foreign);
        }
    }

    fn detach(&mut self, s: &Streams) {
        for ((evd, mode), holds) in [(s.recv, s.holds.recv), (s.request, s.holds.request)] {
            if let Some(e) = self.evds.get_mut(evd.0) {
                e.detach_dto(mode, holds);
            }
        }
        if let Some(e) = self.evds.get_mut(s.connect.0) {
            let foreign = e.ia != s.ia;
            e.detach_cm(foreign);
        }
    }

    /// dat_ep_free(3DAT): "The Endpoint can be destroyed in any Endpoint
    /// state except Reserved, Passive Connection Pending, and Tentative
    /// Connection Pending."
    pub fn ep_free(&mut self, ep: EpHandle) -> DatResult<()> {
        let e = self.ep(ep)?;
        if matches!(
            e.state(),
            EpState::Reserved | EpState::PassiveConnectionPending | EpState::TentativeConnectionPending
        ) {
            return Err(DatError::invalid_state(e.state_subtype()));
        }
        self.ep_destroy(ep);
        Ok(())
    }

    /// Destroy an EP in any state. Its outstanding DTOs are flushed first,
    /// and what the backend flushes at once reaches the EVDs while the EP
    /// still exists.
    pub(crate) fn ep_destroy(&mut self, h: EpHandle) {
        let Some(ep) = self.eps.get_mut(h.0) else { return };
        let outstanding = ep.request_outstanding() != 0 || ep.recv_outstanding() != 0;
        let live = !matches!(ep.state(), EpState::Unconnected | EpState::Disconnected);
        let (ia, recv, request) = (ep.ia, ep.recv_evd, ep.request_evd);
        if let Some(qp) = ep.qp_mut() {
            if outstanding || live {
                self.backend.cm().disconnect(B::cm_qp(qp), false);
            }
        }
        self.progress(ia, Some(recv));
        self.progress(ia, Some(request));
        self.ud_ahs_free(h);
        let Some(ep) = crate::object::owned::remove(&mut self.ias, &mut self.eps, h.0) else { return };
        self.detach(&ep.streams());
        self.pz_release(ep.pz);
        let srq = ep.srq;
        if let Some(qp) = ep.into_qp() {
            self.backend.qp_destroy(qp, &mut EvdCqs::of(&mut self.evds, [recv, request]));
        }
        if let Ok(s) = self.srq_mut(srq) {
            s.ep_refs = s.ep_refs.saturating_sub(1);
        }
    }

    /// dat_ep_query(3DAT).
    pub fn ep_query(&self, ep: EpHandle) -> DatResult<EpParam> {
        let e = self.ep(ep)?;
        let local = self.ia(e.ia)?.attr.ia_address;
        Ok(EpParam {
            ia: e.ia,
            state: e.state(),
            local_ia_address: local,
            remote_ia_address: e.connection().remote,
            remote_port_qual: e.connection().remote_port,
            pz: e.pz,
            recv_evd: e.recv_evd,
            request_evd: e.request_evd,
            connect_evd: e.connect_evd,
            srq: e.srq,
            attr: *e.attr(),
        })
    }

    /// Name `ep` by `name`, what the layer above calls it in the events
    /// it writes: a dequeue's lane hands it over with each completion of
    /// the EP ([`Provider::lane_dequeue_with`]).
    pub fn ep_name(&mut self, ep: EpHandle, name: u64) -> DatResult<()> {
        self.eps.get_mut(ep.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?.name = name;
        self.eps.call(ep.0.index(), name);
        Ok(())
    }

    /// The private data the peer sent with the connection this EP
    /// established (active side), as the ESTABLISHED event promised.
    pub fn ep_private_data(&self, ep: EpHandle) -> DatResult<&[u8]> {
        Ok(&self.ep(ep)?.connection().private_data)
    }

    /// dat_ep_modify(3DAT).
    ///
    /// The PZ changes only in Unconnected or Tentative Connection Pending;
    /// EVDs and attributes in Unconnected, Reserved, Passive and Tentative
    /// Connection Pending; receive completion flags only before any
    /// receive is posted. The QP is rebuilt to the new shape, which the
    /// transport allows only while no receive is posted on it.
    pub fn ep_modify(&mut self, h: EpHandle, changes: &EpChanges) -> DatResult<()> {
        let ep = self.ep(h)?;
        let ia = self.ia(ep.ia)?;
        let quiescent = matches!(ep.state(), EpState::Unconnected | EpState::TentativeConnectionPending);
        let before_connect = quiescent || matches!(ep.state(), EpState::Reserved | EpState::PassiveConnectionPending);
        let shaping = changes.recv_evd.is_some()
            || changes.request_evd.is_some()
            || changes.connect_evd.is_some()
            || changes.attr.is_some();
        if (changes.pz.is_some() && !quiescent) || (shaping && !before_connect) {
            return Err(DatError::invalid_state(ep.state_subtype()));
        }
        if let Some(attr) = changes.attr {
            attr.check(&ia.attr, EpModify::EpParam)?;
            if attr.recv_completion_flags != ep.attr().recv_completion_flags && ep.recv_outstanding() != 0 {
                return Err(DatError::invalid_state(Subtype::InvalidStateEpNotready));
            }
        }
        if let Some(pz) = changes.pz {
            self.pz_of(ep.ia, pz)?;
        }
        let rebuild = ep.qp().is_some() && (changes.pz.is_some() || shaping);
        if rebuild && ep.recv_outstanding() != 0 {
            return Err(DatError::invalid_state(Subtype::InvalidStateEpNotready));
        }
        let pz = changes.pz.unwrap_or(ep.pz);
        let recv_evd = changes.recv_evd.unwrap_or(ep.recv_evd);
        let request_evd = changes.request_evd.unwrap_or(ep.request_evd);
        let connect_evd = changes.connect_evd.unwrap_or(ep.connect_evd);
        let attr = changes.attr.map_or(*ep.attr(), |a| a.resolved(&ia.attr));
        let attr = if ep.ud { attr.for_datagrams() } else { attr };
        let old_streams = ep.streams();
        let new_streams = Streams::new(ep.ia, recv_evd, request_evd, connect_evd, &attr, ep.srq).holding(ep.lane_holds);
        let old_pz = ep.pz;
        self.detach(&old_streams);
        if let Err(e) = self.check_streams(&new_streams, EpModify::EpParam) {
            self.attach(&old_streams);
            return Err(e);
        }
        let Some(ep) = self.eps.get_mut(h.0) else { return Err(DatError::of(ErrorType::InternalError)) };
        let old_qp = if rebuild { ep.reconfigure(|_, qp| qp.take()) } else { None };
        let old_evds = [ep.recv_evd, ep.request_evd];
        ep.pz = pz;
        ep.recv_evd = recv_evd;
        ep.request_evd = request_evd;
        ep.connect_evd = connect_evd;
        ep.reconfigure(|a, _| *a = attr);
        if let Some(qp) = old_qp {
            self.backend.qp_destroy(qp, &mut EvdCqs::of(&mut self.evds, old_evds));
        }
        self.attach(&new_streams);
        if pz != old_pz {
            self.pz_release(old_pz);
            self.pz_hold(pz);
        }
        self.qp_build(h)
    }

    /// dat_ep_connect(3DAT): start connecting to `conn_qual` at `remote`.
    /// `timeout_us` is `TIMEOUT_INFINITE` or positive.
    #[allow(clippy::too_many_arguments)]
    pub fn ep_connect(
        &mut self,
        h: EpHandle,
        remote: &IaAddress,
        conn_qual: u64,
        timeout_us: u32,
        private_data: &[u8],
        qos: Qos,
        flags: ConnectFlags,
    ) -> DatResult<()> {
        let ep = self.ep(h)?;
        let ia = &self.ia(ep.ia)?.attr;
        if timeout_us == 0 {
            return Err(DatError::invalid(EpConnect::Timeout));
        }
        if private_data.len() > ia.max_private_data_size as usize {
            return Err(DatError::invalid(EpConnect::PrivateDataSize));
        }
        if !flags.is_valid() {
            return Err(DatError::invalid(EpConnect::ConnectFlags));
        }
        if !qos.is_valid() {
            return Err(DatError::invalid(EpConnect::Qos));
        }
        // "If the local Provider or Transport does not support the requested
        // qos, the operation fails and DAT_MODEL_NOT_SUPPORTED is returned
        // synchronously." No multipath here either.
        if qos.0 & !ia.qos_supported.0 != 0 || flags.contains(ConnectFlags::MULTIPATH_REQUIRED) {
            return Err(DatError::of(ErrorType::ModelNotSupported));
        }
        if ep.ud {
            return self.ud_connect(h, remote, conn_qual, private_data, timeout_us);
        }
        // "DAT_INVALID_STATE: Endpoint was not in DAT_EP_STATE_UNCONNECTED".
        if ep.state() != EpState::Unconnected {
            return Err(DatError::invalid_state(ep.state_subtype()));
        }
        let timeout = (timeout_us != crate::object::evd::TIMEOUT_INFINITE).then_some(u64::from(timeout_us));
        let Provider { eps, backend, .. } = self;
        let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        let qp = ep.qp_mut().ok_or(DatError::invalid_state(Subtype::InvalidStateEpPz))?;
        backend.cm().connect(B::cm_qp(qp), remote, conn_qual, private_data, timeout)?;
        ep.connection_moves(|c| c.connect(*remote, conn_qual));
        self.count_ep(h.0, counts::ep::Counter::CONNECT);
        Ok(())
    }

    /// dat_ep_dup_connect(3DAT): connect to the same remote end as the
    /// connected `dup`.
    pub fn ep_dup_connect(
        &mut self,
        h: EpHandle,
        dup: EpHandle,
        timeout_us: u32,
        private_data: &[u8],
        qos: Qos,
    ) -> DatResult<()> {
        self.ep(h)?;
        let d = self.ep(dup)?;
        if d.state() != EpState::Connected {
            return Err(DatError::invalid_state(d.state_subtype()));
        }
        let (remote, qual) = (d.connection().remote, d.connection().remote_conn_qual);
        self.ep_connect(h, &remote, qual, timeout_us, private_data, qos, ConnectFlags::DEFAULT)
    }

    /// dat_ep_disconnect(3DAT).
    pub fn ep_disconnect(&mut self, h: EpHandle, flags: CloseFlags) -> DatResult<()> {
        self.disconnect(h, flags)?;
        self.count_ep(h.0, counts::ep::Counter::DISCONNECT);
        Ok(())
    }

    fn disconnect(&mut self, h: EpHandle, flags: CloseFlags) -> DatResult<()> {
        let ep = self.ep(h)?;
        match (ep.state(), flags) {
            // "Disconnecting an unconnected Disconnected Endpoint is no-op";
            // graceful in Disconnect Pending "has no effect".
            (EpState::Disconnected, _) | (EpState::DisconnectPending, CloseFlags::Graceful) => Ok(()),
            (EpState::Connected, CloseFlags::Graceful) => {
                let Provider { eps, backend, .. } = self;
                let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
                ep.connection_moves(|c| c.disconnect());
                if let Some(qp) = ep.qp_mut() {
                    backend.cm().disconnect(B::cm_qp(qp), true);
                }
                Ok(())
            }
            // Abrupt, or aborting connection establishment: Disconnected at
            // once, outstanding work flushed, the event reported here.
            (
                EpState::Connected
                | EpState::DisconnectPending
                | EpState::ActiveConnectionPending
                | EpState::CompletionPending,
                _,
            ) => {
                self.ep_lost(h, EventNumber::ConnectionDisconnected);
                Ok(())
            }
            // "Disconnecting an Endpoint in DAT_EP_STATE_UNCONNECTED,
            // DAT_EP_STATE_RESERVED, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING,
            // and DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING is disallowed."
            _ => Err(DatError::invalid_state(ep.state_subtype())),
        }
    }

    /// dat_ep_reset(3DAT): Disconnected to Unconnected; a no-op when
    /// Unconnected; `DAT_INVALID_STATE` otherwise. Completions not yet
    /// dequeued may be lost, as the page allows.
    pub fn ep_reset(&mut self, h: EpHandle) -> DatResult<()> {
        let Provider { eps, evds, backend, .. } = self;
        let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        match ep.state() {
            EpState::Unconnected => Ok(()),
            EpState::Disconnected => {
                let streams = [ep.recv_evd, ep.request_evd];
                if let Some(qp) = ep.qp_mut() {
                    backend.qp_reset(qp, &mut EvdCqs::of(evds, streams))?;
                }
                ep.connection_moves(|c| c.reset());
                ep.forget_outstanding();
                Ok(())
            }
            _ => Err(DatError::invalid_state(ep.state_subtype())),
        }
    }

    /// Whether [`Provider::ep_reset`] of the Disconnected `h` would wait for
    /// the transport's flushes now: a caller that can sleep without holding
    /// others out waits until this is false first.
    pub fn ep_reset_would_wait(&mut self, h: EpHandle) -> DatResult<bool> {
        let Provider { eps, backend, .. } = self;
        let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        Ok(ep.state() == EpState::Disconnected && ep.qp_mut().is_some_and(|qp| backend.qp_unflushed(qp)))
    }

    /// dat_ep_get_status(3DAT): the state, and whether the receive and
    /// request sides are idle.
    pub fn ep_get_status(&self, h: EpHandle) -> DatResult<(EpState, bool, bool)> {
        let ep = self.ep(h)?;
        Ok((ep.state(), ep.recv_outstanding() == 0, ep.request_outstanding() == 0))
    }

    /// dat_ep_recv_query(3DAT): `(nbufs_allocated, bufs_alloc_span)`. An EP
    /// with its own receive queue has every posted buffer allocated, and
    /// can complete each; for an SRQ EP the transport does not say which
    /// buffers it holds, so both are `DAT_VALUE_UNKNOWN`.
    pub fn ep_recv_query(&self, h: EpHandle) -> DatResult<(u32, u32)> {
        let ep = self.ep(h)?;
        if ep.srq.is_null() {
            let n = ep.recv_outstanding();
            Ok((n, n))
        } else {
            Ok((VALUE_UNKNOWN, VALUE_UNKNOWN))
        }
    }

    /// dat_ep_set_watermark(3DAT): `DAT_MODEL_NOT_SUPPORTED` — the
    /// transports udat drives do not report the receive buffers an EP
    /// holds, so no watermark can be watched (`srq_watermarks_supported`
    /// is 0).
    pub fn ep_set_watermark(&self, h: EpHandle, _soft: u32, _hard: u32) -> DatResult<()> {
        self.ep(h)?;
        Err(DatError::of(ErrorType::ModelNotSupported))
    }
}
