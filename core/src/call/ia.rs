//! Interface Adapter (IA): dat_ia_open(3DAT), dat_ia_close(3DAT),
//! dat_ia_query(3DAT).

use crate::backend::{Backend, Control};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{EvdHandle, IaHandle};
use crate::object::ia::Ia;
use crate::object::ia::Owned;
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;
use crate::types::{CloseFlags, EvdFlags, IaAttr};

/// The async EVD argument of `dat_ia_open`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvd {
    /// `DAT_HANDLE_NULL`: the provider creates one of at least this length.
    Create {
        /// Events the new EVD holds at least.
        min_qlen: u32,
    },
    /// `DAT_EVD_ASYNC_EXISTS`: one exists elsewhere, out of this consumer's
    /// scope.
    Exists,
    /// An async EVD the consumer already has (of another open IA).
    Use(EvdHandle),
}

/// What `dat_ia_query` reports as the async EVD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvdRef {
    /// The async EVD of this IA.
    Handle(EvdHandle),
    /// `DAT_EVD_OUT_OF_SCOPE`.
    OutOfScope,
}

signature! {
    /// dat_ia_open(3DAT)'s parameters.
    pub(crate) enum IaOpen { IaNamePtr, AsyncEvdMinQlen, AsyncEvdHandle, IaHandle }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_ia_open(3DAT): open the IA `name`.
    pub fn ia_open(&mut self, name: &[u8], async_evd: AsyncEvd) -> DatResult<(IaHandle, EvdHandle)> {
        let stored = crate::store::FixedVec::from_slice(name).map_err(|_| DatError::invalid(IaOpen::IaNamePtr))?;
        if name.is_empty() {
            return Err(DatError::invalid(IaOpen::IaNamePtr));
        }
        if let AsyncEvd::Create { min_qlen: 0 } = async_evd {
            return Err(DatError::invalid(IaOpen::AsyncEvdMinQlen));
        }
        if let AsyncEvd::Use(h) = async_evd {
            // "If the Provider determines that the Consumer-provided
            // async_evd_handle is invalid, the operation fails and returns
            // DAT_INVALID_HANDLE."
            let e = self.evd(h).map_err(|_| DatError::invalid_handle(Subtype::InvalidHandleEvdAsync))?;
            if !e.flags.contains(EvdFlags::ASYNC) {
                return Err(DatError::invalid_handle(Subtype::InvalidHandleEvdAsync));
            }
        }
        let (dev, mut attr) = self.backend.control().ia_open(name)?;
        // The core's capacities bound what the device can offer.
        for (limit, cap) in [
            (&mut attr.max_eps, self.eps.capacity()),
            (&mut attr.max_evds, self.evds.capacity()),
            (&mut attr.max_lmrs, self.lmrs.capacity()),
            (&mut attr.max_pzs, self.pzs.capacity()),
            (&mut attr.max_rmrs, self.rmrs.capacity()),
            (&mut attr.max_srqs, self.srqs.capacity()),
            (&mut attr.max_evd_qlen, self.events.size()),
        ] {
            *limit = (*limit).min(cap);
        }
        attr.max_iov_segments_per_dto = attr.max_iov_segments_per_dto.min(crate::backend::MAX_SGE as u32);
        attr.max_private_data_size = attr.max_private_data_size.min(crate::backend::MAX_PRIVATE_DATA as u32);
        let ia = Ia {
            dev,
            attr,
            async_evd: EvdHandle::NULL,
            owns_async_evd: false,
            out_of_scope: false,
            name: stored,
            context: 0,
            cm_look_us: 0,
            owned: Owned::default(),
            counts: crate::counts::Counts::new(),
            counting: false,
        };
        let ia_h = match self.ias.insert(ia) {
            Ok(raw) => IaHandle(raw),
            Err(ia) => {
                self.backend.control().ia_close(ia.dev);
                return Err(DatError::of(ErrorType::InsufficientResources));
            }
        };
        let (evd, owns) = match async_evd {
            AsyncEvd::Create { min_qlen } => {
                match self.evd_create(ia_h, min_qlen, crate::handle::CnoHandle::NULL, EvdFlags::ASYNC) {
                    Ok(evd) => (evd, true),
                    Err(e) => {
                        if let Some(ia) = self.ias.remove(ia_h.0) {
                            self.backend.control().ia_close(ia.dev);
                        }
                        return Err(e);
                    }
                }
            }
            AsyncEvd::Exists => (EvdHandle::NULL, false),
            AsyncEvd::Use(h) => (h, false),
        };
        if let Some(e) = self.evds.get_mut(evd.0) {
            e.attach_async();
        }
        if let Some(ia) = self.ias.get_mut(ia_h.0) {
            ia.async_evd = evd;
            ia.owns_async_evd = owns;
            ia.out_of_scope = async_evd == AsyncEvd::Exists;
        }
        Ok((ia_h, evd))
    }

    /// dat_ia_close(3DAT).
    ///
    /// Graceful: only when every object the consumer created is freed (the
    /// async EVD the open created excepted), else `DAT_INVALID_STATE`.
    /// Abrupt: tears everything down in dependency order; waiters on the
    /// IA's EVDs get `DAT_ABORT`, CNO waiters a null EVD.
    pub fn ia_close(&mut self, ia_h: IaHandle, flags: CloseFlags) -> DatResult<()> {
        let ia = self.ia(ia_h)?;
        let own_async = if ia.owns_async_evd { ia.async_evd } else { EvdHandle::NULL };
        if flags == CloseFlags::Graceful && self.ia_objects(ia_h, own_async) != 0 {
            return Err(DatError::invalid_state(Subtype::InvalidStateIaInUse));
        }
        self.ia_teardown(ia_h);
        let Some(ia) = self.ias.remove(ia_h.0) else { return Ok(()) };
        if !ia.owns_async_evd {
            if let Some(e) = self.evds.get_mut(ia.async_evd.0) {
                e.detach_async();
            }
        }
        self.backend.control().ia_close(ia.dev);
        Ok(())
    }

    /// Objects `ia` owns, `except` and the provider's own EPs not
    /// counted.
    fn ia_objects(&self, ia: IaHandle, except: EvdHandle) -> usize {
        let owned = self.owned(ia);
        let providers = self.eps.members(&owned.eps).filter(|(_, e)| e.connection().provider_owned()).count();
        let except = self.evds.get(except.0).is_some_and(|e| e.ia == ia);
        owned.len() - providers - usize::from(except)
    }

    /// What `ia` owns; nothing for an IA not open.
    pub(crate) fn owned(&self, ia: IaHandle) -> Owned {
        self.ias.get(ia.0).map(|i| i.owned).unwrap_or_default()
    }

    /// Free every object of `ia`, dependents before what they depend on,
    /// visiting its own objects only.
    fn ia_teardown(&mut self, ia: IaHandle) {
        macro_rules! each {
            ($slab:ident, $handle:ident, $free:ident) => {
                while let Some(h) = self.$slab.first_member(&self.owned(ia).$slab) {
                    self.$free(crate::handle::$handle(h));
                    // Every free takes its object out of the list; one that
                    // did not would be visited forever.
                    if self.$slab.contains(h) {
                        debug_assert!(false, "{} left {h:?} behind", stringify!($free));
                        break;
                    }
                }
            };
        }
        each!(crs, CrHandle, cr_destroy);
        each!(rsps, RspHandle, rsp_destroy);
        each!(psps, PspHandle, psp_destroy);
        each!(eps, EpHandle, ep_destroy);
        each!(rmrs, RmrHandle, rmr_destroy);
        each!(lmrs, LmrHandle, lmr_destroy);
        each!(srqs, SrqHandle, srq_destroy);
        each!(evds, EvdHandle, evd_destroy);
        each!(cnos, CnoHandle, cno_destroy);
        each!(pzs, PzHandle, pz_destroy);
    }

    /// dat_ia_query(3DAT): the async EVD and the IA's attributes.
    pub fn ia_query(&self, ia: IaHandle) -> DatResult<(AsyncEvdRef, IaAttr)> {
        let ia = self.ia(ia)?;
        let evd = if ia.out_of_scope { AsyncEvdRef::OutOfScope } else { AsyncEvdRef::Handle(ia.async_evd) };
        Ok((evd, ia.attr))
    }

    /// The name the IA was opened with.
    pub fn ia_name(&self, ia: IaHandle) -> DatResult<&[u8]> {
        Ok(&self.ia(ia)?.name)
    }
}
