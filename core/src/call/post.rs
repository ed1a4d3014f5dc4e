//! Posting: every request and receive a consumer hands to an Endpoint or
//! an SRQ, in one place.
//!
//! A request, as its rules see it, is one value, [`Request`]: the local
//! segments, the operation with its remote buffer ([`RequestOp`]), and
//! the completion flags. One function holds the rules of a request
//! (`rule::check`, with one row per kind of request), one those of a
//! receive (`rule::check_recv`) and one those of an SRQ's receive
//! (`rule::check_srq_recv`). The posts are written once, over one type
//! parameter, [`Door`](door::Door): the provider held to itself, or
//! shared among threads under the lock of the Endpoint or the SRQ
//! ([`shared`]). Each hot post has a lane ([`lane`]): one segment, every
//! rule checked as a yes/no and nothing written until the transport has
//! taken the work; a refusal falls to the ordinary post, which decides
//! the error. The Rust API's [`poster`] checks segments once and borrows
//! an Endpoint for a run of posts.

use crate::backend::RequestOp;
use crate::types::{CompletionFlags, LmrTriplet};

pub(crate) mod door;
mod lane;
pub mod poster;
mod recv;
mod request;
pub(crate) mod rule;
pub mod shared;
mod ud;

/// A request post as the consumer made it, less its cookie, which no rule
/// reads; its kind ([`rule::kind`]) is its operation's.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) iov: &'a [LmrTriplet],
    pub(crate) op: RequestOp,
    pub(crate) flags: CompletionFlags,
}
