//! Endpoints and their connections: dat_ep_create(3DAT),
//! dat_ep_create_with_srq(3DAT), dat_ep_free(3DAT), dat_ep_connect(3DAT),
//! dat_ep_dup_connect(3DAT), dat_ep_disconnect(3DAT), dat_ep_query(3DAT),
//! dat_ep_get_status(3DAT), dat_ep_modify(3DAT), dat_ep_reset(3DAT),
//! dat_ep_recv_query(3DAT), dat_ep_set_watermark(3DAT); the service points
//! that take connection requests: dat_psp_create(3DAT),
//! dat_psp_create_any(3DAT), dat_psp_free(3DAT), dat_psp_query(3DAT),
//! dat_rsp_create(3DAT), dat_rsp_free(3DAT), dat_rsp_query(3DAT); the
//! requests: dat_cr_accept(3DAT), dat_cr_reject(3DAT),
//! dat_cr_query(3DAT), dat_cr_handoff(3DAT); and Shared Receive Queues:
//! dat_srq_create(3DAT), dat_srq_free(3DAT), dat_srq_query(3DAT),
//! dat_srq_resize(3DAT), dat_srq_set_lw(3DAT).

use udat_core::types::{CloseFlags, ConnectFlags, EpAttr, EpState, IaAddress, PspFlags, Qos, SrqAttr};
use udat_core::{
    CrParam, DatResult, EpChanges, EpParam, EvdHandle, PspParam, RspParam, SrqParam, Storage, CR_FIELD_ALL,
    PSP_FIELD_ALL, RSP_FIELD_ALL, SRQ_FIELD_ALL,
};

use crate::object::{Cr, Ep, Evd, Psp, Pz, Refused, Rsp, Srq};
use crate::{Backend, Ia};

impl<'id, B: Backend, S: Storage> Ia<'id, B, S> {
    /// dat_ep_create(3DAT): an EP in `pz` whose receives complete on
    /// `recv_evd`, requests on `request_evd` and connection events on
    /// `connect_evd`; `attr` or the provider's defaults.
    pub fn ep_create(
        &mut self,
        pz: &Pz<'id>,
        recv_evd: &Evd<'id>,
        request_evd: &Evd<'id>,
        connect_evd: Option<&Evd<'id>>,
        attr: Option<&EpAttr>,
    ) -> DatResult<Ep<'id>> {
        let connect = connect_evd.map_or(EvdHandle::NULL, Evd::handle);
        self.provider
            .ep_create(self.ia, pz.handle(), recv_evd.handle(), request_evd.handle(), connect, attr)
            .map(Ep::new)
    }

    /// dat_ep_create_with_srq(3DAT): [`Ia::ep_create`], with its receives
    /// from `srq`.
    pub fn ep_create_with_srq(
        &mut self,
        pz: &Pz<'id>,
        recv_evd: &Evd<'id>,
        request_evd: &Evd<'id>,
        connect_evd: Option<&Evd<'id>>,
        srq: &Srq<'id>,
        attr: &EpAttr,
    ) -> DatResult<Ep<'id>> {
        let connect = connect_evd.map_or(EvdHandle::NULL, Evd::handle);
        let (pz, recv, request) = (pz.handle(), recv_evd.handle(), request_evd.handle());
        self.provider.ep_create_with_srq(self.ia, pz, recv, request, connect, srq.handle(), attr).map(Ep::new)
    }

    /// dat_ep_free(3DAT): refused (`DAT_INVALID_STATE`) while the EP is
    /// Reserved or a connection on it is pending.
    pub fn ep_free(&mut self, ep: Ep<'id>) -> Result<(), Refused<Ep<'id>>> {
        self.provider.ep_free(ep.handle()).map_err(|e| Refused::new(e, ep))
    }

    /// dat_ep_connect(3DAT): ask `remote`'s service point `conn_qual` for a
    /// connection; its outcome is an event on the connect EVD.
    #[allow(clippy::too_many_arguments)]
    pub fn ep_connect(
        &mut self,
        ep: &Ep<'id>,
        remote: &IaAddress,
        conn_qual: u64,
        timeout_us: u32,
        private_data: &[u8],
        qos: Qos,
        flags: ConnectFlags,
    ) -> DatResult<()> {
        self.provider.ep_connect(ep.handle(), remote, conn_qual, timeout_us, private_data, qos, flags)
    }

    /// dat_ep_dup_connect(3DAT): connect `ep` to where `dup` is connected.
    pub fn ep_dup_connect(
        &mut self,
        ep: &Ep<'id>,
        dup: &Ep<'id>,
        timeout_us: u32,
        private_data: &[u8],
        qos: Qos,
    ) -> DatResult<()> {
        self.provider.ep_dup_connect(ep.handle(), dup.handle(), timeout_us, private_data, qos)
    }

    /// dat_ep_disconnect(3DAT).
    pub fn ep_disconnect(&mut self, ep: &Ep<'id>, flags: CloseFlags) -> DatResult<()> {
        self.provider.ep_disconnect(ep.handle(), flags)
    }

    /// dat_ep_query(3DAT).
    pub fn ep_query(&self, ep: &Ep<'id>) -> DatResult<EpParam> {
        self.provider.ep_query(ep.handle())
    }

    /// The private data of the peer's connect or accept (dat_ep_query(3DAT)'s
    /// `remote_private_data`).
    pub fn ep_private_data(&self, ep: &Ep<'id>) -> DatResult<&[u8]> {
        self.provider.ep_private_data(ep.handle())
    }

    /// dat_ep_get_status(3DAT): the state, and whether requests and
    /// receives are in progress.
    pub fn ep_get_status(&self, ep: &Ep<'id>) -> DatResult<(EpState, bool, bool)> {
        self.provider.ep_get_status(ep.handle())
    }

    /// dat_ep_modify(3DAT).
    pub fn ep_modify(&mut self, ep: &Ep<'id>, changes: &EpChanges) -> DatResult<()> {
        self.provider.ep_modify(ep.handle(), changes)
    }

    /// dat_ep_reset(3DAT).
    pub fn ep_reset(&mut self, ep: &Ep<'id>) -> DatResult<()> {
        self.provider.ep_reset(ep.handle())
    }

    /// dat_ep_recv_query(3DAT): receives posted, and bytes they hold.
    pub fn ep_recv_query(&self, ep: &Ep<'id>) -> DatResult<(u32, u32)> {
        self.provider.ep_recv_query(ep.handle())
    }

    /// dat_ep_set_watermark(3DAT).
    pub fn ep_set_watermark(&self, ep: &Ep<'id>, soft: u32, hard: u32) -> DatResult<()> {
        self.provider.ep_set_watermark(ep.handle(), soft, hard)
    }

    /// dat_psp_create(3DAT): listen on `conn_qual`, requests to `evd`.
    pub fn psp_create(&mut self, conn_qual: u64, evd: &Evd<'id>, flags: PspFlags) -> DatResult<Psp<'id>> {
        self.provider.psp_create(self.ia, conn_qual, evd.handle(), flags).map(Psp::new)
    }

    /// dat_psp_create_any(3DAT): listen on a free connection qualifier,
    /// which comes with the PSP.
    pub fn psp_create_any(&mut self, evd: &Evd<'id>, flags: PspFlags) -> DatResult<(Psp<'id>, u64)> {
        let (psp, qual) = self.provider.psp_create_any(self.ia, evd.handle(), flags)?;
        Ok((Psp::new(psp), qual))
    }

    /// dat_psp_free(3DAT).
    pub fn psp_free(&mut self, psp: Psp<'id>) -> Result<(), Refused<Psp<'id>>> {
        self.provider.psp_free(psp.handle()).map_err(|e| Refused::new(e, psp))
    }

    /// dat_psp_query(3DAT).
    pub fn psp_query(&self, psp: &Psp<'id>) -> DatResult<PspParam> {
        self.provider.psp_query(psp.handle(), PSP_FIELD_ALL)
    }

    /// dat_rsp_create(3DAT): listen on `conn_qual` for `ep` alone.
    pub fn rsp_create(&mut self, conn_qual: u64, ep: &Ep<'id>, evd: &Evd<'id>) -> DatResult<Rsp<'id>> {
        self.provider.rsp_create(self.ia, conn_qual, ep.handle(), evd.handle()).map(Rsp::new)
    }

    /// dat_rsp_free(3DAT).
    pub fn rsp_free(&mut self, rsp: Rsp<'id>) -> Result<(), Refused<Rsp<'id>>> {
        self.provider.rsp_free(rsp.handle()).map_err(|e| Refused::new(e, rsp))
    }

    /// dat_rsp_query(3DAT).
    pub fn rsp_query(&self, rsp: &Rsp<'id>) -> DatResult<RspParam> {
        self.provider.rsp_query(rsp.handle(), RSP_FIELD_ALL)
    }

    /// dat_cr_accept(3DAT): accept `cr` on `ep`; a refusal gives the
    /// request back.
    pub fn cr_accept(&mut self, cr: Cr<'id>, ep: &Ep<'id>, private_data: &[u8]) -> Result<(), Refused<Cr<'id>>> {
        self.provider.cr_accept(cr.handle(), ep.handle(), private_data).map_err(|e| Refused::new(e, cr))
    }

    /// dat_cr_reject(3DAT).
    pub fn cr_reject(&mut self, cr: Cr<'id>, private_data: &[u8]) -> Result<(), Refused<Cr<'id>>> {
        self.provider.cr_reject(cr.handle(), private_data).map_err(|e| Refused::new(e, cr))
    }

    /// dat_cr_handoff(3DAT): hand `cr` to the service point `conn_qual`.
    pub fn cr_handoff(&mut self, cr: Cr<'id>, conn_qual: u64) -> Result<(), Refused<Cr<'id>>> {
        self.provider.cr_handoff(cr.handle(), conn_qual).map_err(|e| Refused::new(e, cr))
    }

    /// dat_cr_query(3DAT).
    pub fn cr_query(&self, cr: &Cr<'id>) -> DatResult<CrParam> {
        self.provider.cr_query(cr.handle(), CR_FIELD_ALL)
    }

    /// The private data of the request (dat_cr_query(3DAT)'s
    /// `private_data`).
    pub fn cr_private_data(&self, cr: &Cr<'id>) -> DatResult<&[u8]> {
        self.provider.cr_private_data(cr.handle())
    }

    /// dat_srq_create(3DAT): an SRQ in `pz`.
    pub fn srq_create(&mut self, pz: &Pz<'id>, attr: &SrqAttr) -> DatResult<Srq<'id>> {
        self.provider.srq_create(self.ia, pz.handle(), attr).map(Srq::new)
    }

    /// dat_srq_free(3DAT): refused (`DAT_SRQ_IN_USE`) while an EP uses it.
    pub fn srq_free(&mut self, srq: Srq<'id>) -> Result<(), Refused<Srq<'id>>> {
        self.provider.srq_free(srq.handle()).map_err(|e| Refused::new(e, srq))
    }

    /// dat_srq_query(3DAT).
    pub fn srq_query(&self, srq: &Srq<'id>) -> DatResult<SrqParam> {
        self.provider.srq_query(srq.handle(), SRQ_FIELD_ALL)
    }

    /// dat_srq_resize(3DAT).
    pub fn srq_resize(&mut self, srq: &Srq<'id>, max_recv_dtos: u32) -> DatResult<()> {
        self.provider.srq_resize(srq.handle(), max_recv_dtos)
    }

    /// dat_srq_set_lw(3DAT).
    pub fn srq_set_lw(&mut self, srq: &Srq<'id>, low_watermark: u32) -> DatResult<()> {
        self.provider.srq_set_lw(srq.handle(), low_watermark)
    }
}
