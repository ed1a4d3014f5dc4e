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
//! same checks (the core's `post` module), and a dequeue
//! ([`Provider::evd_dequeue_shared`]) settles only what the exclusive one
//! would hand straight to its caller, a successful DTO completion of an
//! EVD with nothing queued, no CNO and no waiter, for an Endpoint that
//! completes to it. Anything else it leaves untouched and answers
//! [`Shared::NeedsExclusive`](crate::backend::Shared::NeedsExclusive), and the
//! caller makes the call again with the provider to itself. Connection
//! events are not pulled here: an empty shared dequeue answers
//! [`Shared::Empty`](crate::backend::Shared::Empty), and the caller makes
//! an exclusive one when a look at them is due. Receives are posted on a
//! shared provider too, an EP's and an SRQ's, and so are the IB
//! extension's requests ([`Provider::ep_post_request_shared`]). A
//! completion of an SRQ's receive is the exclusive path's: it counts on
//! the SRQ, which the dequeue has not locked.
#![allow(unsafe_code)]

use super::lane::request_lane;
use super::recv::{recv_checked, srq_recv_checked};
use super::rule::{checked_post, Work};
use super::Request;
use crate::backend::{Backend, RequestOp};
use crate::error::{DatError, DatResult, Subtype};
use crate::handle::{EpHandle, SrqHandle};
use crate::provider::Provider;
use crate::storage::Storage;
use crate::types::{CompletionFlags, LmrTriplet};

impl<B: Backend, S: Storage> Provider<B, S> {
    /// A request post through a shared provider: [`Provider::ep_post_send`],
    /// [`Provider::ep_post_rdma_write`], [`Provider::ep_post_rdma_read`] or
    /// one of the IB extension's requests, as `op` says
    /// ([`Provider::ep_post_request`]). The checks and errors are theirs.
    ///
    /// # Safety
    /// No `&mut` to the provider exists while this runs, and the caller
    /// holds `ep`'s lock (see the module).
    pub unsafe fn ep_post_request_shared(
        &self,
        ep: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        op: RequestOp,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        // SAFETY: forwarded contract.
        unsafe { self.post_shared(ep, Request { iov, cookie, op, flags }) }
    }

    /// [`Provider::ep_post_recv`] through a shared provider.
    ///
    /// # Safety
    /// As [`Provider::ep_post_request_shared`].
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
        recv_checked(
            ep,
            &self.lmrs,
            iov,
            flags,
            |qp, sges| {
                // SAFETY: `qp` is the locked EP's; no `&mut` to the backend
                // exists (the caller's contract).
                unsafe { backend.post_recv_shared(qp, sges, cookie) }
            },
            #[cold]
            #[inline(never)]
            // SAFETY: the caller holds the EP's lock, which its counters'
            // every other use takes too.
            |bytes| unsafe { self.ep_counts.posted_recv_shared(h.0, bytes) },
        )
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
        matches_generation: impl FnOnce(u32) -> bool,
        seg: &LmrTriplet,
        cookie: u64,
        op: RequestOp,
        flags: CompletionFlags,
    ) -> bool {
        // SAFETY: the caller holds the EP's lock, which every other access
        // to it takes, and no `&mut` to the provider exists.
        let Some((generation, ep)) = (unsafe { self.eps.live_shared(ep) }) else { return false };
        let backend = &self.backend;
        matches_generation(generation)
            && request_lane(
                ep,
                &self.lmrs,
                &self.ias,
                &Request { iov: core::slice::from_ref(seg), cookie, op, flags },
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
    /// As [`Provider::ep_post_request_shared`].
    #[inline(always)]
    pub(crate) unsafe fn post_shared(&self, h: EpHandle, request: Request<'_>) -> DatResult<()> {
        // SAFETY: the caller holds the EP's lock, which every other access
        // to it takes, and no `&mut` to the provider exists.
        let ep = unsafe { self.eps.get_shared(h.0) }.ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        let backend = &self.backend;
        let Request { iov, cookie, op, flags } = request;
        checked_post(
            ep,
            &self.lmrs,
            &self.ias,
            iov,
            (cookie, op, flags),
            #[inline(always)]
            |qp, work| match work {
                // SAFETY: `qp` is the locked EP's; no `&mut` to the backend
                // exists (the caller's contract).
                Work::One(sge) => Ok(unsafe { backend.post_one_shared(qp, op, sge, cookie, flags) }),
                // SAFETY: as above.
                Work::Wr(wr) => unsafe { backend.post_send_shared(qp, wr) }.map(|()| true),
            },
            #[cold]
            #[inline(never)]
            // SAFETY: the caller holds the EP's lock, which its counters'
            // every other use takes too.
            |wr| unsafe { self.ep_counts.posted_shared(h.0, wr) },
        )
    }
}
