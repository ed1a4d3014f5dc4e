//! The data path through a shared provider: posts on different Endpoints
//! and dequeues on different EVDs, from different threads at once.
//!
//! A caller that shares a provider among threads (the C ABI's thread-safe
//! providers) keeps two rules, which the calls that share it
//! ([`Provider::locked`], [`Provider::evd_dequeue_shared`]) state as their
//! safety contract:
//! - every other call takes the provider to itself (`&mut`), so no
//!   object changes here but the ones whose locks are held;
//! - every lock is taken through the caller's [`SlotLock`], on the word
//!   the object's slot keeps, by the same look-up that finds the object.
//!
//! Under them a post holds the lock of its Endpoint (of its SRQ, for
//! dat_srq_post_recv), and a dequeue the lock of its EVD, then that of the
//! Endpoint whose completion it settles (EVD, then Endpoint: a post takes
//! no EVD lock).
//!
//! The rules of the pages are the exclusive calls' own: a post is the
//! same code (the core's `post` module), and a dequeue
//! ([`Provider::evd_dequeue_shared`]) settles only what the exclusive one
//! would hand straight to its caller, a successful DTO completion of an
//! EVD with nothing queued, no CNO and no waiter, for an Endpoint that
//! completes to it. Anything else it leaves untouched and answers
//! [`Shared::NeedsExclusive`](crate::backend::Shared::NeedsExclusive), and the
//! caller makes the call again with the provider to itself. Connection
//! events are not pulled here: an empty shared dequeue answers
//! [`Shared::Empty`](crate::backend::Shared::Empty) unless one waits
//! ([`Backend::cm_waiting`](crate::backend::Backend::cm_waiting)), or,
//! where the transport cannot tell, a look at them is due by the caller's
//! clock; then it answers [`Shared::Look`](crate::backend::Shared::Look)
//! and the caller makes an exclusive one, which looks. Every post
//! is made through the provider [`Locked`](crate::Locked)
//! ([`Provider::locked`]), the same [`Door`](crate::Door) as the
//! provider held to itself: requests (DAT 2.0's and the IB extension's,
//! UD's send among them), an EP's receives and an SRQ's. A completion of an SRQ's receive is the
//! exclusive path's: it counts on the SRQ, which the dequeue has not
//! locked.
#![allow(unsafe_code)]

#[cfg(doc)]
use crate::provider::Provider;

use core::sync::atomic::{AtomicU8, Ordering};

/// How a caller that shares the provider takes the lock of one object: on
/// the word the object's slot keeps for it, found by the same look-up that
/// finds the object ([`Slab::live_locked`](crate::slab::Slab::live_locked)).
/// [`Provider::locked`] and [`Provider::evd_dequeue_shared`] take each
/// object's lock through it, and hold the guard until they are done with
/// the object.
///
/// # Safety
/// While a guard `take` handed back lives, no other `take` on the same
/// word hands one back; and every access to the objects of a shared
/// provider that does not hold it to itself takes their locks through an
/// implementation that agrees on the words.
pub unsafe trait SlotLock {
    /// A held lock; dropping it lets the lock go.
    type Guard<'w>;

    /// Take the lock whose word is `word`, waiting while another holds
    /// it; `None` where the caller refuses it (a lock its implementation
    /// marked as never to be taken again, say).
    fn take<'w>(&self, word: &'w AtomicU8) -> Option<Self::Guard<'w>>;
}

/// A spin lock on the slot's word: 0 free, 1 held. For a caller with no
/// scheduler to yield to while another thread holds the object.
#[derive(Clone, Copy, Debug, Default)]
pub struct Spin;

/// A lock [`Spin`] holds.
#[derive(Debug)]
pub struct SpinGuard<'w>(&'w AtomicU8);

// SAFETY: the exchange that takes the word admits one holder until the
// guard's release store.
unsafe impl SlotLock for Spin {
    type Guard<'w> = SpinGuard<'w>;

    #[inline(always)]
    fn take<'w>(&self, word: &'w AtomicU8) -> Option<SpinGuard<'w>> {
        while word.swap(1, Ordering::Acquire) != 0 {
            while word.load(Ordering::Relaxed) != 0 {
                core::hint::spin_loop();
            }
        }
        Some(SpinGuard(word))
    }
}

impl Drop for SpinGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}
