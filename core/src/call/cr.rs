//! Connection Request (CR): dat_cr_query(3DAT), dat_cr_accept(3DAT),
//! dat_cr_reject(3DAT), dat_cr_handoff(3DAT).
//!
//! A CR lives from the request's arrival until it is accepted, rejected or
//! handed off; each of those destroys it ("Use of the handle of the
//! destroyed Connection Request in any consequent operation fails").

use crate::backend::{Backend, ConnReq, ConnectionManager};
use crate::counts;
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::event::{EventData, EventNumber};
use crate::handle::{CrHandle, EpHandle, EvdHandle, PspHandle};
use crate::object::cr::Cr;
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;
use crate::types::{EpState, IaAddress, PspFlags};

/// `DAT_CR_FIELD_ALL`.
pub const CR_FIELD_ALL: u32 = 0x1f;

/// `DAT_CR_PARAM` (the private data itself: [`Provider::cr_private_data`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrParam {
    /// The requester's address.
    pub remote_ia_address: IaAddress,
    /// The requester's port.
    pub remote_port_qual: u64,
    /// Bytes of private data the request carries.
    pub private_data_size: u32,
    /// The EP the provider made or reserved for the request (a PSP with
    /// `DAT_PSP_PROVIDER_FLAG`, an RSP); null otherwise.
    pub local_ep: EpHandle,
}

signature! {
    /// dat_cr_query(3DAT)'s parameters.
    pub(crate) enum CrQuery { CrHandle, CrParamMask, CrParam }

    /// dat_cr_accept(3DAT)'s parameters.
    pub(crate) enum CrAccept { CrHandle, EpHandle, PrivateDataSize, PrivateData }

    /// dat_cr_reject's parameters in DAT 2.0 (`<dat2/dat.h>`), which gives
    /// the rejection private data; dat_cr_reject(3DAT) has only `cr_handle`.
    pub(crate) enum CrReject { CrHandle, PrivateDataSize, PrivateData }

    /// dat_cr_handoff(3DAT)'s parameters.
    pub(crate) enum CrHandoff { CrHandle, Handoff }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// Store `cr` and announce it on `evd`. Hands the request back when no
    /// CR slot is free (the provider's EP, if any, is dropped).
    pub(crate) fn cr_deliver(&mut self, cr: Cr<B>, evd: EvdHandle) -> Result<(), ConnReq<B>> {
        let (psp, conn_qual, local_ep, ia) = (cr.psp, cr.conn_qual, cr.local_ep, cr.ia);
        let number = if cr.ud { EventNumber::UdConnectionRequest } else { EventNumber::ConnectionRequest };
        let h = match crate::object::owned::insert(&mut self.ias, &mut self.crs, cr) {
            Ok(raw) => {
                self.count_ia(ia, counts::ia::Counter::SP_CR);
                CrHandle(raw)
            }
            Err(cr) => {
                if self.eps.get(local_ep.0).is_some_and(|e| e.connection().provider_owned()) {
                    self.ep_destroy(local_ep);
                }
                return Err(cr.request);
            }
        };
        if let Some(e) = self.eps.get_mut(local_ep.0) {
            e.connection_moves(|c| c.cr = h);
        }
        self.deliver(evd, number, EventData::CrArrival { psp, conn_qual, cr: h }, true);
        Ok(())
    }

    /// dat_cr_query(3DAT).
    pub fn cr_query(&self, cr: CrHandle, mask: u32) -> DatResult<CrParam> {
        let c = self.cr(cr)?;
        if mask & !CR_FIELD_ALL != 0 {
            return Err(DatError::invalid(CrQuery::CrParamMask));
        }
        Ok(CrParam {
            remote_ia_address: c.remote,
            remote_port_qual: c.remote_port,
            private_data_size: c.private_data.len() as u32,
            local_ep: c.local_ep,
        })
    }

    /// The private data the remote consumer sent with the request.
    pub fn cr_private_data(&self, cr: CrHandle) -> DatResult<&[u8]> {
        Ok(&self.cr(cr)?.private_data)
    }

    /// dat_cr_accept(3DAT): accept on `ep` — the CR's own EP (pass it or
    /// null), or an Unconnected EP of the consumer's. The EP goes
    /// Completion Pending until ESTABLISHED or ACCEPT_COMPLETION_ERROR.
    /// A failure leaves the CR, the EP and the peer as they were.
    pub fn cr_accept(&mut self, cr_h: CrHandle, ep: EpHandle, private_data: &[u8]) -> DatResult<()> {
        let cr = self.cr(cr_h)?;
        let max = self.ia(cr.ia)?.attr.max_private_data_size as usize;
        if private_data.len() > max {
            return Err(DatError::invalid(CrAccept::PrivateDataSize));
        }
        let target = if cr.local_ep.is_null() {
            let e = self.ep(ep)?;
            if e.ia != cr.ia {
                return Err(DatError::invalid_handle(Subtype::InvalidHandleEp));
            }
            if e.ud || cr.ud {
                return self.ud_accept(cr_h, ep, private_data);
            }
            if e.state() != EpState::Unconnected {
                return Err(DatError::invalid_state(e.state_subtype()));
            }
            ep
        } else if ep.is_null() || ep == cr.local_ep {
            cr.local_ep
        } else {
            // "If the local Endpoint is specified by the Connection Request,
            // the ep_handle shall be DAT_HANDLE_NULL."
            return Err(DatError::invalid(CrAccept::EpHandle));
        };
        let (remote, remote_port, ia) = (cr.remote, cr.remote_port, cr.ia);
        let Provider { crs, eps, backend, .. } = self;
        let e = eps.get_mut(target.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        // An EP without a PZ (a provider's, not yet modified) has no QP.
        let qp = e.qp_mut().ok_or(DatError::invalid_state(Subtype::InvalidStateEpPz))?;
        let c = crs.get_mut(cr_h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleCr))?;
        backend.cm().accept(&mut c.request, B::cm_qp(qp), private_data)?;
        e.connection_moves(|c| c.accept(remote, remote_port));
        crate::object::owned::remove(&mut self.ias, &mut self.crs, cr_h.0);
        self.count_ia(ia, counts::ia::Counter::SP_CR_ACCEPTED);
        Ok(())
    }

    /// dat_cr_reject(3DAT): an RSP's EP reverts to the consumer
    /// (Unconnected); a PSP's provider EP reverts to the provider (gone).
    /// `private_data` reaches the peer with its rejection (the DAT 2.0
    /// form of the call; the uDAPL 1.2 page has none).
    pub fn cr_reject(&mut self, cr: CrHandle, private_data: &[u8]) -> DatResult<()> {
        let ia = self.cr(cr)?.ia;
        let max = self.ia(ia)?.attr.max_private_data_size as usize;
        if private_data.len() > max {
            return Err(DatError::invalid(CrReject::PrivateDataSize));
        }
        self.cr_refuse(cr, private_data);
        self.count_ia(ia, counts::ia::Counter::SP_CR_REJECTED);
        Ok(())
    }

    pub(crate) fn cr_destroy(&mut self, cr: CrHandle) {
        self.cr_refuse(cr, &[]);
    }

    fn cr_refuse(&mut self, cr: CrHandle, private_data: &[u8]) {
        let Some(c) = crate::object::owned::remove(&mut self.ias, &mut self.crs, cr.0) else { return };
        self.backend.cm().reject(c.request, private_data);
        self.cr_release_ep(c.local_ep);
    }

    fn cr_release_ep(&mut self, ep: EpHandle) {
        match self.eps.get_mut(ep.0) {
            Some(e) if e.connection().provider_owned() => self.ep_destroy(ep),
            Some(e) => e.connection_moves(|c| c.release()),
            None => {}
        }
    }

    /// dat_cr_handoff(3DAT): pass the request to the PSP of this IA on
    /// `conn_qual`, as a new CR there. `DAT_INVALID_PARAMETER` if no PSP
    /// listens there, or if the request is bound to a consumer's EP (an
    /// RSP's).
    pub fn cr_handoff(&mut self, cr_h: CrHandle, conn_qual: u64) -> DatResult<()> {
        let cr = self.cr(cr_h)?;
        let ia = cr.ia;
        let bound = self.eps.get(cr.local_ep.0).is_some_and(|e| !e.connection().provider_owned());
        let target = self.psps.members(&self.owned(ia).psps).find(|(_, p)| p.conn_qual == conn_qual);
        let Some((psp_raw, psp)) = target.filter(|_| !bound) else {
            return Err(DatError::invalid(CrHandoff::Handoff));
        };
        let (psp_h, evd, flags) = (PspHandle(psp_raw), psp.evd, psp.flags);
        let Some(mut c) = crate::object::owned::remove(&mut self.ias, &mut self.crs, cr_h.0) else {
            return Err(DatError::of(ErrorType::InternalError));
        };
        self.cr_release_ep(c.local_ep);
        c.psp = psp_h;
        c.conn_qual = conn_qual;
        c.local_ep = EpHandle::NULL;
        let room = self.evds.get(evd.0).is_some_and(|e| e.queue().room() != 0);
        if flags == PspFlags::Provider && room {
            match self.ep_for_provider(ia) {
                Some(ep) => c.local_ep = ep,
                None => {
                    self.backend.cm().reject(c.request, &[]);
                    return Ok(());
                }
            }
        }
        if !room {
            // The target's backlog is full: the request is refused as at a
            // full PSP. The CR is destroyed either way.
            self.backend.cm().reject(c.request, &[]);
            return Ok(());
        }
        if let Err(request) = self.cr_deliver(c, evd) {
            self.backend.cm().reject(request, &[]);
        }
        Ok(())
    }
}
