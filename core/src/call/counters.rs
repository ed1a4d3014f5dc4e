//! The IB extension's counters (`<dat2/dat_ib_extensions.h>`, versions
//! 2.0.3 and 2.0.7): `DAT_IA_COUNTERS`, `DAT_EP_COUNTERS` and
//! `DAT_EVD_COUNTERS`, 64 bits each, read with `dat_ib_query_counters`
//! ("Provide IA, EP, or EVD and call will return appropriate counters ...
//! use _ALL_COUNTERS to query all").
//!
//! Counting is an IA's, and its EPs' and EVDs' with it: off until
//! [`Provider::counters_start`], and off again after
//! [`Provider::counters_stop`]. An EP or EVD that counts is kept off its
//! lanes (its post masks refuse every post, its dequeue is not direct), so
//! the ordinary calls, which count, serve it; one that does not count
//! runs its lanes as if counters did not exist. The counters of objects
//! that are not counting hold still, and a query reads them all the same.
//!
//! An EP's and an EVD's counters live beside their slab, in a `CountTable`,
//! not in the object: the objects the lanes read keep their size, and so
//! the lanes keep their code.

pub use crate::counts::{ep, evd, ia};

use crate::backend::{Backend, Completion};
use crate::error::{DatError, DatResult, Subtype};
use crate::handle::{AnyHandle, EpHandle, EvdHandle, IaHandle, Kind, RawHandle};
use crate::provider::Provider;
use crate::storage::Storage;
use crate::types::{DtoOp, DtoStatus};

impl<B: Backend, S: Storage> Provider<B, S> {
    /// `dat_ib_start_counter`: the counters of `ia`, of its EPs and of its
    /// EVDs count from now on, the ones made later as well.
    pub fn counters_start(&mut self, ia: IaHandle) -> DatResult<()> {
        self.counters_switch(ia, true)
    }

    /// `dat_ib_stop_counter`: the counters of `ia`, its EPs and its EVDs
    /// hold still; its EPs and EVDs take their lanes again.
    pub fn counters_stop(&mut self, ia: IaHandle) -> DatResult<()> {
        self.counters_switch(ia, false)
    }

    fn counters_switch(&mut self, ia_h: IaHandle, on: bool) -> DatResult<()> {
        let Provider { ias, eps, evds, ep_counts, .. } = self;
        let ia = ias.get_mut(ia_h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleIa))?;
        ia.counting = on;
        let mut at = 0;
        while let Some(h) = eps.find_from(at, |e| e.ia == ia_h) {
            at = h.index() + 1;
            if let Some(ep) = eps.get_mut(h) {
                ep.set_counting(on);
                // A shared post counts only into counters made already.
                if on {
                    ep_counts.of(h);
                }
            }
        }
        let mut at = 0;
        while let Some(h) = evds.find_from(at, |e| e.ia == ia_h) {
            at = h.index() + 1;
            if let Some(e) = evds.get_mut(h) {
                e.set_counting(on);
            }
        }
        Ok(())
    }

    /// Make the counters of the new EP `h` if it counts, so that a shared
    /// post finds them.
    pub(crate) fn tally_new_ep(&mut self, h: RawHandle) {
        if self.eps.get(h).is_some_and(|e| e.counting) {
            self.ep_counts.of(h);
        }
    }

    /// `dat_ib_query_counters`: counter `which` of the IA, EP or EVD `h`
    /// into `out[0]`, or all of them into `out` when `which` is the
    /// kind's `*_ALL_COUNTERS` ([`ia::COUNT`], [`ep::COUNT`],
    /// [`evd::COUNT`]); `reset` zeroes what was read. Any other handle is
    /// `DAT_INVALID_HANDLE`; a counter past the kind's is
    /// `DAT_INVALID_PARAMETER` for argument 3, an `out` too short for
    /// argument 4.
    pub fn counters_query(&mut self, h: AnyHandle, which: usize, out: &mut [u64], reset: bool) -> DatResult<()> {
        match h.kind {
            Kind::Ia => self.ias.get_mut(h.raw).map(|i| i.counts.read(which, out, reset)),
            Kind::Ep if self.eps.contains(h.raw) => self.ep_counts.of(h.raw).map(|c| c.read(which, out, reset)),
            Kind::Evd if self.evds.contains(h.raw) => self.evd_counts.of(h.raw).map(|c| c.read(which, out, reset)),
            _ => None,
        }
        .ok_or(DatError::invalid_handle(Subtype::NoSubtype))?
    }

    /// One more event of counter `c` of `evd`, if it counts: what the
    /// wait of a caller that blocks outside the provider reports.
    pub fn count_evd(&mut self, evd: EvdHandle, c: evd::Counter) {
        if self.evds.get(evd.0).is_some_and(|e| e.counting()) {
            self.evd_counts.bump(evd.0, c as usize);
        }
    }

    /// One more event of counter `c` of the EP `h`, if it counts.
    pub(crate) fn count_ep(&mut self, h: RawHandle, c: ep::Counter) {
        if self.eps.get(h).is_some_and(|e| e.counting) {
            self.ep_counts.bump(h, c as usize);
        }
    }

    /// A completion `c` of the EP `ep` that counts, routed to `evd` as
    /// `op`: a receive's count and bytes on the EP, a DTO completion on
    /// the EVD.
    #[cold]
    #[inline(never)]
    pub(crate) fn count_completion(&mut self, ep: EpHandle, evd: EvdHandle, op: DtoOp, c: &Completion) {
        if op.is_recv() && c.status == DtoStatus::Success {
            if let Some(counts) = self.ep_counts.of(ep.0) {
                counts.received(op, c.transferred_length);
            }
        }
        self.count_evd(evd, evd::Counter::DTO_CALLBACK);
    }

    /// One more event of counter `c` of `ia`, if it counts.
    pub(crate) fn count_ia(&mut self, ia: IaHandle, c: ia::Counter) {
        if let Some(i) = self.ias.get_mut(ia.0).filter(|i| i.counting) {
            i.counts.bump(c as usize);
        }
    }
}
