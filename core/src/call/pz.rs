//! Protection Zone (PZ): dat_pz_create(3DAT), dat_pz_free(3DAT),
//! dat_pz_query(3DAT).

use crate::backend::{Backend, Control};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{IaHandle, PzHandle};
use crate::object::pz::Pz;
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;

/// `DAT_PZ_FIELD_ALL`.
pub const PZ_FIELD_ALL: u32 = 0x01;

/// `DAT_PZ_PARAM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PzParam {
    /// The IA the PZ belongs to.
    pub ia: IaHandle,
}

signature! {
    /// dat_pz_query(3DAT)'s parameters.
    pub(crate) enum PzQuery { PzHandle, PzParamMask, PzParam }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_pz_create(3DAT).
    pub fn pz_create(&mut self, ia_h: IaHandle) -> DatResult<PzHandle> {
        let Provider { ias, backend, .. } = self;
        let ia = ias.get_mut(ia_h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleIa))?;
        let pd = backend.control().pd_alloc(&mut ia.dev)?;
        match crate::object::owned::insert(
            &mut self.ias,
            &mut self.pzs,
            Pz { ia: ia_h, pd, refs: 0, context: 0, stamp: crate::provider::new_stamp() },
        ) {
            Ok(raw) => Ok(PzHandle(raw)),
            Err(pz) => {
                self.backend.control().pd_free(pz.pd);
                Err(DatError::new(ErrorType::InsufficientResources, Subtype::ResourceProtectionDomain))
            }
        }
    }

    /// dat_pz_free(3DAT): "The Protection Zone cannot be destroyed if it is
    /// in use by an Endpoint, LMR, or RMR."
    pub fn pz_free(&mut self, pz: PzHandle) -> DatResult<()> {
        if self.pz(pz)?.refs != 0 {
            return Err(DatError::invalid_state(Subtype::InvalidStatePzInUse));
        }
        self.pz_destroy(pz);
        Ok(())
    }

    pub(crate) fn pz_destroy(&mut self, pz: PzHandle) {
        if let Some(pz) = crate::object::owned::remove(&mut self.ias, &mut self.pzs, pz.0) {
            self.backend.control().pd_free(pz.pd);
        }
    }

    /// dat_pz_query(3DAT).
    pub fn pz_query(&self, pz: PzHandle, mask: u32) -> DatResult<PzParam> {
        let pz = self.pz(pz)?;
        if mask & !PZ_FIELD_ALL != 0 {
            return Err(DatError::invalid(PzQuery::PzParamMask));
        }
        Ok(PzParam { ia: pz.ia })
    }

    /// Count one more user of `pz`.
    pub(crate) fn pz_hold(&mut self, pz: PzHandle) {
        if let Some(pz) = self.pzs.get_mut(pz.0) {
            pz.refs += 1;
        }
    }

    /// Count one user of `pz` fewer.
    pub(crate) fn pz_release(&mut self, pz: PzHandle) {
        if let Some(pz) = self.pzs.get_mut(pz.0) {
            pz.release();
        }
    }

    /// `pz` must be a live PZ of `ia`.
    pub(crate) fn pz_of(&self, ia: IaHandle, pz: PzHandle) -> DatResult<&Pz<B>> {
        let p = self.pz(pz)?;
        if p.ia != ia {
            return Err(DatError::invalid_handle(Subtype::InvalidHandlePz));
        }
        Ok(p)
    }
}
