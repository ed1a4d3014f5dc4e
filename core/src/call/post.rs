//! Posting: every request and receive a consumer hands to an Endpoint or
//! an SRQ, in one place.
//!
//! A request is one value, [`Request`]: the local segments, the cookie,
//! the operation with its remote buffer ([`RequestOp`]), and the
//! completion flags. One function holds the rules of a request
//! (`rule::check`, with one row per kind of request), one those of a
//! receive (`rule::check_recv`) and one those of an SRQ's receive
//! (`rule::check_srq_recv`). Each is reached through four doors, which
//! run the same function and differ only in how they hold the Endpoint
//! and hand the work to the transport:
//! - exclusive ([`request`], [`recv`]): the calls of the man pages on a
//!   provider the caller holds as `&mut`;
//! - lane ([`lane`]): one segment, every rule checked as a yes/no and
//!   nothing written until the transport has taken the work; a refusal
//!   falls back to the exclusive door, which decides the error;
//! - shared ([`shared`]): the same rules on a provider shared among
//!   threads, under the lock of the Endpoint or the SRQ;
//! - poster ([`poster`]): the Rust API's segments checked once and an Endpoint
//!   borrowed for a run of posts.

use crate::backend::RequestOp;
use crate::types::{CompletionFlags, LmrTriplet};

mod lane;
pub mod poster;
mod recv;
mod request;
pub(crate) mod rule;
pub mod shared;
mod ud;

/// A request post as the consumer made it; its kind ([`rule::kind`]) is
/// its operation's.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) iov: &'a [LmrTriplet],
    pub(crate) cookie: u64,
    pub(crate) op: RequestOp,
    pub(crate) flags: CompletionFlags,
}
