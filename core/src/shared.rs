//! The data path through a shared provider: posts on different Endpoints
//! and dequeues on different EVDs, from different threads at once.
//!
//! A caller that shares a provider among threads (the C ABI's thread-safe
//! providers) keeps three rules, which every method here states as its
//! safety contract:
//! - every other call takes the provider to itself (`&mut`), so no
//!   object changes here but the ones the caller locked;
//! - a post holds the lock of its Endpoint (of its SRQ, for
//!   dat_srq_post_recv), a dequeue the lock of its EVD;
//! - a dequeue takes the lock of the Endpoint whose completion it settles
//!   through `lock_ep` (EVD, then Endpoint: a post takes no EVD lock).
//!
//! The rules of the pages are the exclusive calls' own: a post runs the
//! same checks (the core's `dto` module), and a dequeue settles here only what the
//! exclusive one would hand straight to its caller, a successful DTO
//! completion of an EVD with nothing queued, no CNO and no waiter, for an
//! Endpoint that completes to it. Anything else it leaves untouched and
//! answers [`Shared::Exclusive`], and the caller makes the call again with
//! the provider to itself. Connection events are not pulled here: an empty
//! shared dequeue answers [`Shared::Empty`], and the caller makes an
//! exclusive one when a look at them is due. Receives are posted on a
//! shared provider too, an EP's and an SRQ's, and so are the IB
//! extension's requests ([`Provider::ep_post_extension_shared`]). A completion of an SRQ's
//! receive is the exclusive path's: it counts on the SRQ, which the
//! dequeue has not locked.
#![allow(unsafe_code)]

use crate::backend::{Backend, CqHead, RequestOp, Shared};
use crate::dto::{post_checked, recv_checked, Request, REQUEST_FLAGS, SEND_FLAGS};
use crate::error::{DatError, DatResult, Subtype};
use crate::event::{Event, EventData, EventNumber};
use crate::handle::{EpHandle, EvdHandle, RawHandle, SrqHandle};
use crate::lane::request_lane;
use crate::provider::Provider;
use crate::srq::srq_recv_checked;
use crate::storage::Storage;
use crate::types::{CompletionFlags, LmrTriplet, RmrTriplet};

impl<B: Backend, S: Storage> Provider<B, S> {
    /// [`Provider::ep_post_send`] through a shared provider.
    ///
    /// # Safety
    /// No `&mut` to the provider exists while this runs, and the caller
    /// holds `ep`'s lock (see the module).
    pub unsafe fn ep_post_send_shared(
        &self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let request = Request { iov, cookie, op: RequestOp::Send, flags, allowed: SEND_FLAGS };
        // SAFETY: forwarded contract.
        unsafe { self.post_shared(ep, request) }
    }

    /// [`Provider::ep_post_rdma_write`] through a shared provider.
    ///
    /// # Safety
    /// As [`Provider::ep_post_send_shared`].
    pub unsafe fn ep_post_rdma_write_shared(
        &self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let request =
            Request { iov, cookie, op: RequestOp::RdmaWrite { remote: *remote }, flags, allowed: REQUEST_FLAGS };
        // SAFETY: forwarded contract.
        unsafe { self.post_shared(ep, request) }
    }

    /// [`Provider::ep_post_rdma_read`] through a shared provider.
    ///
    /// # Safety
    /// As [`Provider::ep_post_send_shared`].
    pub unsafe fn ep_post_rdma_read_shared(
        &self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let request =
            Request { iov, cookie, op: RequestOp::RdmaRead { remote: *remote }, flags, allowed: REQUEST_FLAGS };
        // SAFETY: forwarded contract.
        unsafe { self.post_shared(ep, request) }
    }

    /// [`Provider::ep_post_recv`] through a shared provider.
    ///
    /// # Safety
    /// As [`Provider::ep_post_send_shared`].
    pub unsafe fn ep_post_recv_shared(
        &self,
        h: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        // SAFETY: the caller holds the EP's lock, which every other access
        // to it takes, and no `&mut` to the provider exists.
        let ep = unsafe { self.eps.get_shared(h.0) }.ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        let backend = &self.backend;
        recv_checked(ep, &self.lmrs, iov, flags, |qp, sges| {
            // SAFETY: `qp` is the locked EP's; no `&mut` to the backend
            // exists (the caller's contract).
            unsafe { backend.post_recv_shared(qp, sges, cookie) }
        })
    }

    /// [`Provider::srq_post_recv`] through a shared provider.
    ///
    /// # Safety
    /// No `&mut` to the provider exists while this runs, and the caller
    /// holds `srq`'s lock (see the module).
    pub unsafe fn srq_post_recv_shared(&self, h: SrqHandle, iov: &[LmrTriplet], cookie: u64) -> DatResult<()> {
        // SAFETY: the caller holds the SRQ's lock, which every other access
        // to it takes, and no `&mut` to the provider exists.
        let s = unsafe { self.srqs.get_shared(h.0) }.ok_or(DatError::invalid_handle(Subtype::InvalidHandleSrq))?;
        let backend = &self.backend;
        srq_recv_checked(s, &self.lmrs, iov, |srq, sges| {
            // SAFETY: `srq` is the locked SRQ's; no `&mut` to the backend
            // exists (the caller's contract).
            unsafe { backend.srq_post_recv_shared(srq, sges, cookie) }
        })
    }

    /// [`Provider::lane_request`] through a shared provider
    /// ([`crate::shared`]).
    ///
    /// # Safety
    /// No `&mut` to the provider exists while this runs, and the caller
    /// holds the lock of the EP in slot `ep`.
    #[inline(always)]
    pub unsafe fn lane_request_shared(
        &self,
        ep: u32,
        selects: impl FnOnce(u32) -> bool,
        seg: &LmrTriplet,
        cookie: u64,
        op: RequestOp,
        flags: CompletionFlags,
    ) -> bool {
        // SAFETY: the caller holds the EP's lock, which every other access
        // to it takes, and no `&mut` to the provider exists.
        let Some((generation, ep)) = (unsafe { self.eps.live_shared(ep) }) else { return false };
        let backend = &self.backend;
        selects(generation)
            && request_lane(
                ep,
                &self.lmrs,
                seg,
                op,
                flags,
                #[inline(always)]
                |qp, sge| {
                    // SAFETY: `qp` is the locked EP's; no `&mut` to the backend
                    // exists (the caller's contract).
                    unsafe { backend.post_one_shared(qp, op, sge, cookie, flags) }
                },
            )
    }

    /// The request post of a shared provider, checked as an exclusive one.
    ///
    /// # Safety
    /// As [`Provider::ep_post_send_shared`].
    #[inline(always)]
    pub(crate) unsafe fn post_shared(&self, h: EpHandle, request: Request<'_>) -> DatResult<()> {
        // SAFETY: the caller holds the EP's lock, which every other access
        // to it takes, and no `&mut` to the provider exists.
        let ep = unsafe { self.eps.get_shared(h.0) }.ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        let backend = &self.backend;
        post_checked(
            ep,
            &self.lmrs,
            &self.ias,
            request,
            #[inline(always)]
            |qp, wr| {
                // SAFETY: `qp` is the locked EP's; no `&mut` to the backend
                // exists (the caller's contract).
                unsafe { backend.post_send_shared(qp, wr) }
            },
        )
    }

    /// [`Provider::evd_dequeue`] through a shared provider, for what it can
    /// settle alone (see the module); `lock_ep` takes the lock of the
    /// Endpoint with the given slot index and hands back its guard, or
    /// `None` when it cannot (the call is then for the exclusive path).
    ///
    /// # Safety
    /// No `&mut` to the provider exists while this runs, the caller holds
    /// `evd`'s lock, and the guards `lock_ep` returns hold the Endpoints'
    /// locks (see the module).
    #[inline(always)]
    pub unsafe fn evd_dequeue_shared<G>(
        &self,
        evd: EvdHandle,
        mut lock_ep: impl FnMut(u32) -> Option<G>,
    ) -> Shared<Event> {
        // SAFETY: the caller holds the EVD's lock.
        let Some(e) = (unsafe { self.evds.get_shared(evd.0) }) else { return Shared::Exclusive };
        if e.waiter || !e.queue.is_empty() || !e.takes_direct() {
            return Shared::Exclusive;
        }
        let Some(cq) = e.cq.as_mut() else { return Shared::Exclusive };
        loop {
            // SAFETY: the CQ is the locked EVD's; the closure locks the EP of
            // the QP the CQE names before anything is taken, and reads the
            // EP (`get_shared`) only once `lock_ep` has taken its lock.
            let taken = unsafe {
                self.backend.cq_take_shared(
                    cq,
                    #[inline(always)]
                    |head: CqHead| {
                        let ep_h = EpHandle(RawHandle::from_bits(head.tag));
                        let lock = lock_ep(ep_h.0.index)?;
                        let ep = self.eps.get_shared(ep_h.0)?;
                        // A completion for another EVD is queued there, and an
                        // SRQ's receives are counted on the SRQ: both
                        // exclusive work.
                        let (to, own_queue) =
                            if head.recv { (ep.recv_evd, ep.srq.is_null()) } else { (ep.request_evd, true) };
                        (to == evd && own_queue).then_some((lock, ep, ep_h, head.recv))
                    },
                )
            };
            let (c, (_lock, ep, ep_h, recv)) = match taken {
                Shared::Done(Some(taken)) => taken,
                Shared::Done(None) => continue,
                Shared::Empty => return Shared::Empty,
                Shared::Exclusive => return Shared::Exclusive,
            };
            if recv {
                ep.recv_outstanding = ep.recv_outstanding.saturating_sub(1);
            } else {
                ep.request_outstanding = ep.request_outstanding.saturating_sub(c.retired);
            }
            let data = EventData::Dto {
                ep: ep_h,
                cookie: c.cookie,
                status: c.status,
                transferred_length: c.transferred_length,
                op: c.op,
                imm: c.imm,
            };
            return Shared::Done(Event { number: EventNumber::DtoCompletion, evd, data });
        }
    }
}
