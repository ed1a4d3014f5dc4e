//! The IB extension's unreliable datagrams (`<dat2/dat_ib_extensions.h>`):
//! an Endpoint of `DAT_IB_SERVICE_TYPE_UD` resolves a peer with each
//! [`Ia::ep_connect`] or [`Ia::cr_accept`], which ends in a
//! `DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED` on its connect EVD; the
//! [`UdPeer`] of that event ([`Ia::ud_peer_of`]) is where
//! [`Ia::ep_post_send_ud`] sends. A UD receive holds the 40-byte GRH
//! ([`backend::GRH_BYTES`](crate::backend::GRH_BYTES)) before the
//! message, and completes as [`DtoOp::ReceiveUd`](crate::DtoOp::ReceiveUd) naming its sender's QP.
//! Receives go through [`Ia::ep_post_recv`] as on any EP.

use udat_core::types::{CompletionFlags, EpAttr, IaAddress};
use udat_core::{AhHandle, DatResult, Door, Event, EventData, PostOp, Storage};

use crate::memory::Local;
use crate::object::{Brand, Ep, Evd, Pz, Refused};
use crate::{Backend, Ia};

/// A UD peer of one Endpoint: the address handle of the connection event
/// that resolved it, and its QP number (`DAT_IB_ADDR_HANDLE`). Not
/// `Clone`: [`Ia::ud_ah_free`] takes it.
#[derive(Debug, PartialEq, Eq)]
pub struct UdPeer<'id> {
    ah: AhHandle,
    qpn: u32,
    _brand: Brand<'id>,
}

impl UdPeer<'_> {
    /// The address handle, as connection events name it.
    pub fn handle(&self) -> AhHandle {
        self.ah
    }

    /// The peer's QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }
}

impl<'id, B: Backend, S: Storage> Ia<'id, B, S> {
    /// dat_ep_create(3DAT) of `DAT_IB_SERVICE_TYPE_UD`: `DAT_MODEL_NOT_SUPPORTED`
    /// on a transport without UD.
    pub fn ep_create_ud(
        &mut self,
        pz: &Pz<'id>,
        recv_evd: &Evd<'id>,
        request_evd: &Evd<'id>,
        connect_evd: &Evd<'id>,
        attr: Option<&EpAttr>,
    ) -> DatResult<Ep<'id>> {
        let evds = (recv_evd.handle(), request_evd.handle(), connect_evd.handle());
        self.provider.ep_create_ud(self.ia, pz.handle(), evds, attr).map(Ep::new)
    }

    /// The peer a `DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED` resolved.
    pub fn ud_peer_of(&self, event: &Event) -> Option<UdPeer<'id>> {
        match event.data {
            EventData::UdConnection { ah, remote_qpn, .. } if !ah.is_null() => {
                Some(UdPeer { ah, qpn: remote_qpn, _brand: Brand::default() })
            }
            _ => None,
        }
    }

    /// What the connection that resolved `peer` of `ep` carried: the
    /// peer's private data and IA address.
    pub fn ud_connection(&self, ep: &Ep<'id>, peer: &UdPeer<'id>) -> DatResult<(&[u8], IaAddress)> {
        self.provider.ud_connection(ep.handle(), peer.ah)
    }

    /// `dat_ib_post_send_ud`: `iov` as one datagram to `peer`. It
    /// completes as [`DtoOp::SendUd`](udat_core::types::DtoOp::SendUd).
    pub fn ep_post_send_ud(
        &mut self,
        ep: &Ep<'id>,
        iov: &[Local<'_, 'id>],
        peer: &UdPeer<'id>,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.provider.ep_post_request(
            ep.handle(),
            Local::triplets(iov),
            cookie,
            PostOp::SendUd { ah: peer.ah, remote_qpn: peer.qpn },
            flags,
        )
    }

    /// `dat_ib_ud_cm_free`: the connection that resolved `peer` is done
    /// with; the peer stays usable.
    pub fn ud_cm_free(&mut self, ep: &Ep<'id>, peer: &UdPeer<'id>) -> DatResult<()> {
        self.provider.ud_cm_free(ep.handle(), peer.ah)
    }

    /// `dat_ib_ud_ah_free`: `peer`'s address handle goes, once no send to
    /// it is outstanding (the header's rule); freeing `ep` frees those
    /// left.
    pub fn ud_ah_free(&mut self, ep: &Ep<'id>, peer: UdPeer<'id>) -> Result<(), Refused<UdPeer<'id>>> {
        self.provider.ud_ah_free(ep.handle(), peer.ah).map_err(|e| Refused::new(e, peer))
    }
}
