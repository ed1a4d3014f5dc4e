//! The data path through a shared provider: posts on different Endpoints
//! and dequeues on different EVDs, from different threads at once.
//!
//! A caller that shares a provider among threads (the C ABI's thread-safe
//! providers) keeps three rules, which the calls that share it
//! ([`Provider::locked`], [`Provider::evd_dequeue_shared`]) state as their
//! safety contract:
//! - every other call takes the provider to itself (`&mut`), so no
//!   object changes here but the ones the caller locked;
//! - a post holds the lock of its Endpoint (of its SRQ, for
//!   dat_srq_post_recv), a dequeue the lock of its EVD;
//! - a dequeue takes the lock of the Endpoint whose completion it settles
//!   through `lock_ep` (EVD, then Endpoint: a post takes no EVD lock).
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
//! [`Shared::Empty`](crate::backend::Shared::Empty), and the caller makes
//! an exclusive one when a look at them is due. Every post is made
//! through the provider [`Locked`](crate::Locked)
//! ([`Provider::locked`]), the same [`Door`](crate::Door) as the
//! provider held to itself: requests (DAT 2.0's and the IB extension's,
//! UD's send among them), an EP's receives and an SRQ's. A completion of an SRQ's receive is the
//! exclusive path's: it counts on the SRQ, which the dequeue has not
//! locked.

#[cfg(doc)]
use crate::provider::Provider;
