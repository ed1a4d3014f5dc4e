//! Public Service Point (PSP): dat_psp_create(3DAT),
//! dat_psp_create_any(3DAT), dat_psp_free(3DAT), dat_psp_query(3DAT).

use crate::backend::{Backend, ConnReq, ConnectionManager, PrivateData};
use crate::counts;
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{EpHandle, EvdHandle, IaHandle, PspHandle};
use crate::object::cr::Cr;
use crate::object::csp::Common;
use crate::object::psp::Psp;
use crate::provider::{psp_tag, Provider};
use crate::signature::signature;
use crate::storage::Storage;
use crate::types::{EvdFlags, IaAddress, PspFlags};

/// `DAT_PSP_FIELD_ALL`.
pub const PSP_FIELD_ALL: u32 = 0x0f;

/// The connection qualifiers `dat_psp_create_any` chooses from: the
/// "nonprivileged" ephemeral range.
pub const ANY_CONN_QUAL: core::ops::RangeInclusive<u64> = 49152..=65535;

/// `DAT_PSP_PARAM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PspParam {
    /// The IA the PSP belongs to.
    pub ia: IaHandle,
    /// The connection qualifier it listens on.
    pub conn_qual: u64,
    /// The EVD its connection requests go to.
    pub evd: EvdHandle,
    /// Who creates the EP for an arriving request.
    pub flags: PspFlags,
}

signature! {
    /// dat_psp_query(3DAT)'s parameters.
    pub(crate) enum PspQuery { PspHandle, PspParamMask, PspParam }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_psp_create(3DAT): listen on `conn_qual`; requests arrive on
    /// `evd`, whose queue length is the backlog.
    pub fn psp_create(
        &mut self,
        ia: IaHandle,
        conn_qual: u64,
        evd: EvdHandle,
        flags: PspFlags,
    ) -> DatResult<PspHandle> {
        self.sp_create(ia, conn_qual, evd, flags, None)
    }

    /// A PSP, or with `common` a CSP, listening on `conn_qual`.
    pub(crate) fn sp_create(
        &mut self,
        ia: IaHandle,
        conn_qual: u64,
        evd: EvdHandle,
        flags: PspFlags,
        common: Option<Common>,
    ) -> DatResult<PspHandle> {
        self.ia(ia)?;
        self.evd_for(ia, evd, EvdFlags::CR, Subtype::InvalidHandleEvdCr)?;
        if self.conn_qual_taken(ia, conn_qual) {
            return Err(DatError::of(ErrorType::ConnQualInUse));
        }
        let psp = Psp { ia, conn_qual, evd, flags, common, listener: None, context: 0 };
        let h = PspHandle(
            crate::object::owned::insert(&mut self.ias, &mut self.psps, psp)
                .map_err(|_| DatError::of(ErrorType::InsufficientResources))?,
        );
        let Provider { ias, psps, backend, .. } = self;
        let listened = match ias.get_mut(ia.0) {
            Some(i) => backend.cm().listen(&mut i.dev, conn_qual, psp_tag(h)),
            None => Err(DatError::invalid_handle(Subtype::InvalidHandleIa)),
        };
        match listened {
            Ok(l) => {
                if let Some(p) = psps.get_mut(h.0) {
                    p.listener = Some(l);
                }
                self.sp_feeds(evd, true);
                Ok(h)
            }
            Err(e) => {
                crate::object::owned::remove(ias, psps, h.0);
                Err(e)
            }
        }
    }

    /// dat_psp_create_any(3DAT): as [`Provider::psp_create`] on a free
    /// connection qualifier the provider picks; returns it too.
    pub fn psp_create_any(&mut self, ia: IaHandle, evd: EvdHandle, flags: PspFlags) -> DatResult<(PspHandle, u64)> {
        for qual in ANY_CONN_QUAL {
            match self.psp_create(ia, qual, evd, flags) {
                Ok(h) => {
                    self.count_ia(ia, counts::ia::Counter::PSP_CREATE_ANY);
                    return Ok((h, qual));
                }
                Err(e) if e.error_type() == ErrorType::ConnQualInUse => continue,
                Err(e) => return Err(e),
            }
        }
        Err(DatError::of(ErrorType::ConnQualUnavailable))
    }

    /// The PSP `h` names; a CSP, which lives among the PSPs, is none.
    pub(crate) fn psp(&self, h: PspHandle) -> DatResult<&Psp<B>> {
        let psp = self.psps.get(h.0).filter(|p| p.common.is_none());
        psp.ok_or(DatError::invalid_handle(Subtype::InvalidHandlePsp))
    }

    /// Whether a service point of `ia` listens on `conn_qual`.
    pub(crate) fn conn_qual_taken(&self, ia: IaHandle, conn_qual: u64) -> bool {
        let owned = self.owned(ia);
        self.psps.members(&owned.psps).any(|(_, p)| p.conn_qual == conn_qual)
            || self.rsps.members(&owned.rsps).any(|(_, r)| r.conn_qual == conn_qual)
    }

    /// A service point starts or stops feeding `evd`.
    pub(crate) fn sp_feeds(&mut self, evd: EvdHandle, starts: bool) {
        if let Some(e) = self.evds.get_mut(evd.0) {
            if starts {
                e.attach_cm(false);
            } else {
                e.detach_cm(false);
            }
        }
    }

    /// dat_psp_free(3DAT): stop listening. Connection Requests already
    /// delivered live on.
    pub fn psp_free(&mut self, psp: PspHandle) -> DatResult<()> {
        self.psp(psp)?;
        self.psp_destroy(psp);
        Ok(())
    }

    pub(crate) fn psp_destroy(&mut self, psp: PspHandle) {
        if let Some(p) = crate::object::owned::remove(&mut self.ias, &mut self.psps, psp.0) {
            if let Some(l) = p.listener {
                self.backend.cm().unlisten(l);
            }
            self.sp_feeds(p.evd, false);
        }
    }

    /// dat_psp_query(3DAT).
    pub fn psp_query(&self, psp: PspHandle, mask: u32) -> DatResult<PspParam> {
        let p = self.psp(psp)?;
        if mask & !PSP_FIELD_ALL != 0 {
            return Err(DatError::invalid(PspQuery::PspParamMask));
        }
        Ok(PspParam { ia: p.ia, conn_qual: p.conn_qual, evd: p.evd, flags: p.flags })
    }

    /// A request arrived at `psp`: make its Connection Request (and, for
    /// `DAT_PSP_PROVIDER`, its Endpoint) and tell the PSP's EVD. Hands the
    /// request back when it cannot be taken.
    pub(crate) fn psp_request(
        &mut self,
        ia: IaHandle,
        psp_h: PspHandle,
        request: ConnReq<B>,
        (remote, remote_port, private_data): (IaAddress, u64, PrivateData),
        ud: bool,
    ) -> Result<(), ConnReq<B>> {
        let Some(psp) = self.psps.get(psp_h.0).filter(|p| p.ia == ia) else { return Err(request) };
        let (evd, conn_qual, flags) = (psp.evd, psp.conn_qual, psp.flags);
        // The EP a `DAT_PSP_PROVIDER` PSP makes is RC: a UD request is
        // refused there as where nobody listens (OFA dapl takes UD
        // requests on consumer PSPs only).
        if ud && flags == PspFlags::Provider {
            return Err(request);
        }
        if self.evds.get(evd.0).is_none_or(|e| e.queue().room() == 0) {
            return Err(request);
        }
        let local_ep = match flags {
            PspFlags::Provider => match self.ep_for_provider(ia) {
                Some(ep) => ep,
                None => return Err(request),
            },
            PspFlags::Consumer => EpHandle::NULL,
        };
        let cr = Cr { ia, psp: psp_h, conn_qual, local_ep, remote, remote_port, private_data, request, context: 0, ud };
        self.cr_deliver(cr, evd)
    }
}
