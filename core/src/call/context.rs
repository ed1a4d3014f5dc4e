//! Consumer contexts and handle types: dat_set_consumer_context(3DAT),
//! dat_get_consumer_context(3DAT), dat_get_handle_type(3DAT).

use crate::backend::Backend;
use crate::error::{DatError, DatResult, Subtype};
use crate::handle::{AnyHandle, Kind};
use crate::provider::Provider;
use crate::storage::Storage;

impl<B: Backend, S: Storage> Provider<B, S> {
    fn context_slot(&mut self, h: AnyHandle) -> Option<&mut u64> {
        Some(match h.kind {
            Kind::Ia => &mut self.ias.get_mut(h.raw)?.context,
            Kind::Pz => &mut self.pzs.get_mut(h.raw)?.context,
            Kind::Lmr => &mut self.lmrs.get_mut(h.raw)?.context,
            Kind::Rmr => &mut self.rmrs.get_mut(h.raw)?.context,
            Kind::Evd => &mut self.evds.get_mut(h.raw)?.context,
            Kind::Cno => &mut self.cnos.get_mut(h.raw)?.context,
            Kind::Ep => &mut self.eps.get_mut(h.raw)?.context,
            Kind::Psp | Kind::Csp => &mut self.psps.get_mut(h.raw)?.context,
            Kind::Rsp => &mut self.rsps.get_mut(h.raw)?.context,
            Kind::Cr => &mut self.crs.get_mut(h.raw)?.context,
            Kind::Srq => &mut self.srqs.get_mut(h.raw)?.context,
        })
    }

    /// Whether `h` names a live object.
    pub fn is_live(&self, h: AnyHandle) -> bool {
        match h.kind {
            Kind::Ia => self.ias.contains(h.raw),
            Kind::Pz => self.pzs.contains(h.raw),
            Kind::Lmr => self.lmrs.contains(h.raw),
            Kind::Rmr => self.rmrs.contains(h.raw),
            Kind::Evd => self.evds.contains(h.raw),
            Kind::Cno => self.cnos.contains(h.raw),
            Kind::Ep => self.eps.contains(h.raw),
            Kind::Psp => self.psps.contains(h.raw),
            Kind::Csp => self.psps.get(h.raw).is_some_and(|p| p.common.is_some()),
            Kind::Rsp => self.rsps.contains(h.raw),
            Kind::Cr => self.crs.contains(h.raw),
            Kind::Srq => self.srqs.contains(h.raw),
        }
    }

    /// dat_set_consumer_context(3DAT): one opaque context per object; 0 is
    /// none.
    pub fn set_consumer_context(&mut self, h: AnyHandle, context: u64) -> DatResult<()> {
        let slot = self.context_slot(h).ok_or(DatError::invalid_handle(Subtype::NoSubtype))?;
        *slot = context;
        Ok(())
    }

    /// dat_get_consumer_context(3DAT).
    pub fn get_consumer_context(&mut self, h: AnyHandle) -> DatResult<u64> {
        self.context_slot(h).map(|c| *c).ok_or(DatError::invalid_handle(Subtype::NoSubtype))
    }

    /// dat_get_handle_type(3DAT). A CSP's handle is of the PSPs' kind
    /// (they share a slab), and its type is `DAT_HANDLE_TYPE_CSP`.
    pub fn get_handle_type(&self, h: AnyHandle) -> DatResult<Kind> {
        if !self.is_live(h) {
            return Err(DatError::invalid_handle(Subtype::NoSubtype));
        }
        let csp = h.kind == Kind::Psp && self.psps.get(h.raw).is_some_and(|p| p.common.is_some());
        Ok(if csp { Kind::Csp } else { h.kind })
    }
}
