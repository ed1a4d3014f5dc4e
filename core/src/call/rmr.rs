//! Remote Memory Region (RMR): dat_rmr_create(3DAT), dat_rmr_bind(3DAT),
//! dat_rmr_free(3DAT), dat_rmr_query(3DAT), and DAT 2.0's
//! dat_rmr_create_for_ep (`<dat2/dat.h>`).
//!
//! dat_rmr_create gives a window of the PZ (`DAT_RMR_SCOPE_PZ`: a type 1
//! memory window, rebound at will). dat_rmr_create_for_ep gives one bound
//! to an Endpoint (`DAT_RMR_SCOPE_EP`: "bound to at most one EP at a
//! time"), an InfiniBand type 2 window: the peer reaches it only over the
//! connection of the Endpoint that bound it, and it is invalidated, by a
//! zero-length dat_rmr_bind through that Endpoint or by the peer's
//! dat_ep_post_send_with_invalidate, before it is bound again (IBA
//! o10-36.2.2: a type 2 window is bound only from the free state).

use crate::backend::{Backend, Sge};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{EpHandle, IaHandle, LmrHandle, PzHandle, RmrHandle};
use crate::object::rmr::{Binding, InFlight, Rmr, RmrScope};
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;
use crate::types::{CompletionFlags, EpState, LmrTriplet, MemPriv};

/// `DAT_RMR_FIELD_ALL`.
pub const RMR_FIELD_ALL: u32 = 0x7f;

/// `DAT_RMR_PARAM`. The binding fields are `None` for an unbound RMR
/// (dat_rmr_query(3DAT): "not defined for an unbound RMR").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmrParam {
    /// The IA the RMR belongs to.
    pub ia: IaHandle,
    /// The RMR's PZ.
    pub pz: PzHandle,
    /// The local memory the RMR is bound to.
    pub lmr_triplet: Option<LmrTriplet>,
    /// The privileges the bind granted the peer.
    pub mem_privileges: Option<MemPriv>,
    /// The context a peer names the bound memory by.
    pub rmr_context: Option<u32>,
    /// What the binding is tied to.
    pub scope: RmrScope,
}

signature! {
    /// dat_rmr_bind(3DAT)'s parameters.
    pub(crate) enum RmrBind { RmrHandle, LmrTriplet, MemPrivileges, EpHandle, UserCookie, CompletionFlags, RmrContext }

    /// dat_rmr_query(3DAT)'s parameters.
    pub(crate) enum RmrQuery { RmrHandle, RmrParamMask, RmrParam }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_rmr_create(3DAT).
    pub fn rmr_create(&mut self, pz_h: PzHandle) -> DatResult<RmrHandle> {
        self.rmr_new(pz_h, RmrScope::Pz)
    }

    /// dat_rmr_create_for_ep of `<dat2/dat.h>` (DAT 2.0): an RMR of
    /// `DAT_RMR_SCOPE_EP` (see the module documentation). A transport
    /// without type 2 windows refuses with `DAT_MODEL_NOT_SUPPORTED`.
    pub fn rmr_create_for_ep(&mut self, pz_h: PzHandle) -> DatResult<RmrHandle> {
        self.rmr_new(pz_h, RmrScope::Ep)
    }

    fn rmr_new(&mut self, pz_h: PzHandle, scope: RmrScope) -> DatResult<RmrHandle> {
        let Provider { pzs, backend, .. } = self;
        let pz = pzs.get(pz_h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandlePz))?;
        let ia = pz.ia;
        let mw = match scope {
            RmrScope::Pz => backend.mw_alloc(&pz.pd)?,
            RmrScope::Ep => backend.mw_alloc_for_ep(&pz.pd)?,
        };
        match crate::object::owned::insert(
            &mut self.ias,
            &mut self.rmrs,
            Rmr { ia, pz: pz_h, scope, mw, binding: None, in_flight: InFlight::default(), context: 0 },
        ) {
            Ok(raw) => {
                self.pz_hold(pz_h);
                Ok(RmrHandle(raw))
            }
            Err(rmr) => {
                self.backend.mw_free(rmr.mw);
                Err(DatError::new(ErrorType::InsufficientResources, Subtype::ResourceMemoryRegion))
            }
        }
    }

    /// dat_rmr_bind(3DAT): bind `rmr` to `triplet` of the LMR `lmr_h`
    /// through `ep`'s request queue; returns the new `rmr_context`. A
    /// zero-length triplet unbinds (its context is then meaningless).
    ///
    /// `lmr_h` is DAT 2.0's argument: a bind names a live LMR of the RMR's
    /// IA, the one whose context the triplet carries, else
    /// `DAT_INVALID_HANDLE` (`DAT_INVALID_HANDLE_LMR`) or, for a triplet of
    /// another LMR, `DAT_INVALID_PARAMETER` on the triplet. An unbind may
    /// pass `DAT_HANDLE_NULL`; any other handle it passes is checked the
    /// same way.
    #[allow(clippy::too_many_arguments)]
    pub fn rmr_bind(
        &mut self,
        rmr_h: RmrHandle,
        lmr_h: LmrHandle,
        triplet: &LmrTriplet,
        privileges: MemPriv,
        ep_h: EpHandle,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<u32> {
        let rmr = self.rmr(rmr_h)?;
        let (rmr_pz, rmr_ia, scope, bound) = (rmr.pz, rmr.ia, rmr.scope, rmr.binding);
        let binds = triplet.segment_length != 0;
        if binds || !lmr_h.is_null() {
            let of_ia = self.lmr(lmr_h).is_ok_and(|l| l.ia == rmr_ia);
            if !of_ia {
                return Err(DatError::invalid_handle(Subtype::InvalidHandleLmr));
            }
        }
        let ep = self.ep(ep_h)?;
        if privileges.0 & !MemPriv::REMOTE.0 != 0 {
            return Err(DatError::invalid(RmrBind::MemPrivileges));
        }
        let allowed = CompletionFlags::SUPPRESS | CompletionFlags::UNSIGNALLED | CompletionFlags::BARRIER_FENCE;
        if flags.0 & !allowed.0 != 0 || !ep.unsignalled_allowed(flags, false) {
            return Err(DatError::invalid(RmrBind::CompletionFlags));
        }
        // "The operation is valid for the Endpoint in the
        // DAT_EP_STATE_CONNECTED and DAT_EP_STATE_DISCONNECTED states."
        if !matches!(ep.state(), EpState::Connected | EpState::Disconnected) {
            return Err(DatError::invalid_state(ep.state_subtype()));
        }
        if ep.request_room.full() {
            return Err(DatError::of(ErrorType::InsufficientResources));
        }
        if ep.pz != rmr_pz {
            return Err(DatError::new(ErrorType::ProtectionViolation, Subtype::ProtectionRdmaWrite));
        }
        if scope == RmrScope::Ep {
            // A window of one Endpoint binds only from the free state (IBA
            // o10-36.2.2), and only the Endpoint it is bound to invalidates
            // it: another is a bad `ep_handle`, an invalid argument as
            // the others here are.
            match (binds, bound) {
                (true, Some(_)) | (false, None) => {
                    return Err(DatError::of(ErrorType::InvalidState));
                }
                (false, Some(b)) if b.ep != ep_h => return Err(DatError::invalid(RmrBind::EpHandle)),
                _ => {}
            }
        }
        let bind = if triplet.segment_length == 0 {
            None
        } else {
            let (named, lmr) =
                self.lmr_by_context(triplet.lmr_context).ok_or(DatError::of(ErrorType::ProtectionViolation))?;
            if named != lmr_h {
                return Err(DatError::invalid(RmrBind::LmrTriplet));
            }
            if lmr.pz != rmr_pz {
                return Err(DatError::of(ErrorType::ProtectionViolation));
            }
            if !lmr.contains(triplet.virtual_address, u64::from(triplet.segment_length)) {
                return Err(DatError::invalid(RmrBind::LmrTriplet));
            }
            // Remote read needs local read on the LMR, remote write local
            // write ("or the operation fails and returns
            // DAT_PRIVILEGES_VIOLATION").
            let needs_read = privileges.contains(MemPriv::REMOTE_READ) && !lmr.privileges.contains(MemPriv::LOCAL_READ);
            let needs_write =
                privileges.contains(MemPriv::REMOTE_WRITE) && !lmr.privileges.contains(MemPriv::LOCAL_WRITE);
            if needs_read || needs_write {
                return Err(DatError::of(ErrorType::PrivilegesViolation));
            }
            Some((lmr_h, Sge { addr: triplet.virtual_address, length: triplet.segment_length, lkey: lmr.lkey }))
        };
        let Provider { eps, rmrs, lmrs, backend, .. } = self;
        let rmr = rmrs.get_mut(rmr_h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleRmr))?;
        if !rmr.in_flight.room(|h| eps.get(h.0).is_some()) {
            return Err(DatError::of(ErrorType::InsufficientResources));
        }
        let ep = eps.get_mut(ep_h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        let qp = ep.qp_mut().ok_or(DatError::invalid_state(Subtype::InvalidStateEpNotready))?;
        let (mr, sge) = match bind {
            Some((lmr_h, sge)) => (lmrs.get(lmr_h.0).map(|l| &l.mr), sge),
            None => (None, Sge::default()),
        };
        let rkey = backend.post_bind(qp, &mut rmr.mw, mr, sge, privileges, rmr_h.0.to_bits(), flags)?;
        ep.request_room.take();
        rmr.in_flight.record(ep_h, cookie, !flags.contains(CompletionFlags::SUPPRESS));
        let old = rmr.binding.take();
        rmr.binding = bind.map(|(lmr, _)| Binding { ep: ep_h, lmr, triplet: *triplet, privileges, rmr_context: rkey });
        if scope == RmrScope::Ep {
            // Only an unbound window binds, and only its EP unbinds it.
            ep.count_window(bind.is_some());
        }
        if let Some(old) = old {
            if let Some(l) = self.lmrs.get_mut(old.lmr.0) {
                l.rmr_refs = l.rmr_refs.saturating_sub(1);
            }
        }
        if let Some((lmr_h, _)) = bind {
            if let Some(l) = self.lmrs.get_mut(lmr_h.0) {
                l.rmr_refs += 1;
            }
        }
        Ok(rkey)
    }

    /// Drop `rmr`'s binding, releasing its LMR (and, for a window of an
    /// EP, the EP).
    pub(crate) fn rmr_unbind(&mut self, rmr: RmrHandle) {
        let Some(r) = self.rmrs.get_mut(rmr.0) else { return };
        let Some(old) = r.binding.take() else { return };
        if r.scope == RmrScope::Ep {
            if let Some(ep) = self.eps.get_mut(old.ep.0) {
                ep.count_window(false);
            }
        }
        if let Some(l) = self.lmrs.get_mut(old.lmr.0) {
            l.rmr_refs = l.rmr_refs.saturating_sub(1);
        }
    }

    /// The peer's dat_ep_post_send_with_invalidate of `rmr_context`
    /// completed a receive of `ep`: the window of `DAT_RMR_SCOPE_EP` that
    /// `ep` bound with that context is unbound.
    #[cold]
    pub(crate) fn rmr_invalidated(&mut self, ep: EpHandle, rmr_context: u32) {
        let named = |r: &Rmr<B>| {
            r.scope == RmrScope::Ep && r.binding.is_some_and(|b| b.ep == ep && b.rmr_context == rmr_context)
        };
        if let Some(raw) = self.rmrs.find_from(0, named) {
            self.rmr_unbind(RmrHandle(raw));
        }
    }

    /// dat_rmr_free(3DAT): "allowed on either bound or unbound RMR. If RMR is
    /// bound, dat_rmr_free() unbinds ... and then free RMR."
    pub fn rmr_free(&mut self, rmr: RmrHandle) -> DatResult<()> {
        self.rmr(rmr)?;
        self.rmr_destroy(rmr);
        Ok(())
    }

    pub(crate) fn rmr_destroy(&mut self, rmr: RmrHandle) {
        self.rmr_unbind(rmr);
        if let Some(r) = crate::object::owned::remove(&mut self.ias, &mut self.rmrs, rmr.0) {
            self.backend.mw_free(r.mw);
            self.pz_release(r.pz);
        }
    }

    /// dat_rmr_query(3DAT).
    pub fn rmr_query(&self, rmr: RmrHandle, mask: u32) -> DatResult<RmrParam> {
        let r = self.rmr(rmr)?;
        if mask & !RMR_FIELD_ALL != 0 {
            return Err(DatError::invalid(RmrQuery::RmrParamMask));
        }
        Ok(RmrParam {
            ia: r.ia,
            pz: r.pz,
            lmr_triplet: r.binding.map(|b| b.triplet),
            mem_privileges: r.binding.map(|b| b.privileges),
            rmr_context: r.binding.map(|b| b.rmr_context),
            scope: r.scope,
        })
    }
}
