//! Reserved Service Point (RSP): dat_rsp_create(3DAT), dat_rsp_free(3DAT),
//! dat_rsp_query(3DAT).
//!
//! An RSP yields at most one Connection Request and then is gone: the
//! request's event names no service point (`<dat2/dat.h>`: "If the Service
//! Point was Reserved, sp_handle is DAT_HANDLE_NULL because the reserved
//! Service Point is automatically destroyed upon generating this event").

use crate::backend::{Backend, ConnReq, ConnectionManager, PrivateData};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{EpHandle, EvdHandle, IaHandle, PspHandle, RspHandle};
use crate::object::cr::Cr;
use crate::object::rsp::Rsp;
use crate::provider::{rsp_tag, Provider};
use crate::signature::signature;
use crate::storage::Storage;
use crate::types::{EpState, EvdFlags, IaAddress};

/// `DAT_RSP_FIELD_ALL`.
pub const RSP_FIELD_ALL: u32 = 0x0f;

/// `DAT_RSP_PARAM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RspParam {
    /// The IA the RSP belongs to.
    pub ia: IaHandle,
    /// The connection qualifier it listens on.
    pub conn_qual: u64,
    /// The EVD its connection request goes to.
    pub evd: EvdHandle,
    /// The EP reserved for that request.
    pub ep: EpHandle,
}

signature! {
    /// dat_rsp_query(3DAT)'s parameters.
    pub(crate) enum RspQuery { RspHandle, RspParamMask, RspParam }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_rsp_create(3DAT): reserve `ep` (Unconnected) for one request on
    /// `conn_qual`; a null `ep` asks the provider for one.
    pub fn rsp_create(&mut self, ia: IaHandle, conn_qual: u64, ep: EpHandle, evd: EvdHandle) -> DatResult<RspHandle> {
        self.ia(ia)?;
        self.evd_for(ia, evd, EvdFlags::CR, Subtype::InvalidHandleEvdCr)?;
        if !ep.is_null() {
            let e = self.ep(ep)?;
            if e.ia != ia {
                return Err(DatError::invalid_handle(Subtype::InvalidHandleEp));
            }
            // "DAT_INVALID_STATE ... an Endpoint was not in the Idle state."
            if e.state() != EpState::Unconnected {
                return Err(DatError::invalid_state(e.state_subtype()));
            }
        }
        if self.conn_qual_taken(ia, conn_qual) {
            return Err(DatError::of(ErrorType::ConnQualInUse));
        }
        let ep = if ep.is_null() {
            self.ep_for_provider(ia).ok_or(DatError::of(ErrorType::InsufficientResources))?
        } else {
            ep
        };
        let rsp = Rsp { ia, conn_qual, evd, ep, listener: None, context: 0 };
        let h = match crate::object::owned::insert(&mut self.ias, &mut self.rsps, rsp) {
            Ok(raw) => RspHandle(raw),
            Err(rsp) => {
                self.ep_release_reserved(rsp.ep);
                return Err(DatError::of(ErrorType::InsufficientResources));
            }
        };
        let Provider { ias, rsps, backend, .. } = self;
        let listened = match ias.get_mut(ia.0) {
            Some(i) => backend.cm().listen(&mut i.dev, conn_qual, rsp_tag(h)),
            None => Err(DatError::invalid_handle(Subtype::InvalidHandleIa)),
        };
        match listened {
            Ok(l) => {
                if let Some(r) = rsps.get_mut(h.0) {
                    r.listener = Some(l);
                }
            }
            Err(e) => {
                crate::object::owned::remove(ias, rsps, h.0);
                self.ep_release_reserved(ep);
                return Err(e);
            }
        }
        if let Some(e) = self.eps.get_mut(ep.0) {
            e.connection_moves(|c| c.reserve(h));
        }
        self.sp_feeds(evd, true);
        Ok(h)
    }

    /// A reserved EP goes back to its owner: the consumer's to Unconnected,
    /// the provider's away.
    fn ep_release_reserved(&mut self, ep: EpHandle) {
        match self.eps.get_mut(ep.0) {
            Some(e) if e.connection().provider_owned() => self.ep_destroy(ep),
            Some(e) => e.connection_moves(|c| c.release()),
            None => {}
        }
    }

    /// dat_rsp_free(3DAT): "For the Reserved Service Point, the
    /// Consumer-provided Endpoint reverts to Consumer control."
    pub fn rsp_free(&mut self, rsp: RspHandle) -> DatResult<()> {
        self.rsp(rsp)?;
        self.rsp_destroy(rsp);
        Ok(())
    }

    pub(crate) fn rsp_destroy(&mut self, rsp: RspHandle) {
        let Some(r) = crate::object::owned::remove(&mut self.ias, &mut self.rsps, rsp.0) else { return };
        if let Some(l) = r.listener {
            self.backend.cm().unlisten(l);
        }
        self.sp_feeds(r.evd, false);
        if self.eps.get(r.ep.0).is_some_and(|e| e.connection().rsp() == rsp && e.state() == EpState::Reserved) {
            self.ep_release_reserved(r.ep);
        }
    }

    /// dat_rsp_query(3DAT).
    pub fn rsp_query(&self, rsp: RspHandle, mask: u32) -> DatResult<RspParam> {
        let r = self.rsp(rsp)?;
        if mask & !RSP_FIELD_ALL != 0 {
            return Err(DatError::invalid(RspQuery::RspParamMask));
        }
        Ok(RspParam { ia: r.ia, conn_qual: r.conn_qual, evd: r.evd, ep: r.ep })
    }

    /// The RSP's one request arrived: its EP goes Passive Connection
    /// Pending, the RSP goes away.
    pub(crate) fn rsp_request(
        &mut self,
        ia: IaHandle,
        rsp_h: RspHandle,
        request: ConnReq<B>,
        remote: IaAddress,
        remote_port: u64,
        private_data: PrivateData,
    ) -> Result<(), ConnReq<B>> {
        let Some(rsp) = self.rsps.get(rsp_h.0).filter(|r| r.ia == ia) else { return Err(request) };
        let (evd, ep, conn_qual) = (rsp.evd, rsp.ep, rsp.conn_qual);
        if self.evds.get(evd.0).is_none_or(|e| e.queue().room() == 0) {
            return Err(request);
        }
        let cr = Cr {
            ia,
            psp: PspHandle::NULL,
            conn_qual,
            local_ep: ep,
            remote,
            remote_port,
            private_data,
            request,
            context: 0,
            ud: false,
        };
        let Some(r) = crate::object::owned::remove(&mut self.ias, &mut self.rsps, rsp_h.0) else {
            return Err(cr.request);
        };
        if let Some(l) = r.listener {
            self.backend.cm().unlisten(l);
        }
        if let Some(e) = self.eps.get_mut(ep.0) {
            e.connection_moves(|c| c.request_arrived());
        }
        let delivered = self.cr_deliver(cr, evd);
        self.sp_feeds(evd, false);
        if delivered.is_err() {
            self.ep_release_reserved(ep);
        }
        delivered
    }
}
