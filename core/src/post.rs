//! Posting: every request and receive a consumer hands to an Endpoint or
//! an SRQ, in one place.
//!
//! A request is one value, [`Request`]: the local segments, the cookie,
//! the operation with its remote buffer ([`RequestOp`]), and the
//! completion flags with the set the call admits. One function holds the
//! rules of a request (`request::post_checked`), one those of a receive
//! (`recv::recv_checked`) and one those of an SRQ's receive
//! (`recv::srq_recv_checked`). Each is reached through four doors, which
//! differ only in how they hold the Endpoint and hand the work to the
//! transport:
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
pub mod shared;
mod ud;

pub(crate) use lane::request_lane;

/// The completion flags of dat_ep_post_rdma_write(3DAT) and
/// dat_ep_post_rdma_read(3DAT).
pub(crate) const REQUEST_FLAGS: u32 =
    CompletionFlags::SUPPRESS.0 | CompletionFlags::UNSIGNALLED.0 | CompletionFlags::BARRIER_FENCE.0;
/// dat_ep_post_send(3DAT) admits the solicited-wait flag too.
pub(crate) const SEND_FLAGS: u32 = REQUEST_FLAGS | CompletionFlags::SOLICITED_WAIT.0;

/// The position of the completion flags among the call's arguments:
/// dat_ep_post_send(3DAT) has no remote buffer, the IB extension's
/// immediate write and compare-and-swap have one more operand.
pub(crate) const fn flags_arg(op: &RequestOp) -> u8 {
    match op {
        RequestOp::Send | RequestOp::SendInvalidate { .. } => 5,
        RequestOp::RdmaWrite { .. } | RequestOp::RdmaRead { .. } | RequestOp::FetchAdd { .. } => 6,
        RequestOp::RdmaWriteImm { .. } | RequestOp::CompareSwap { .. } => 7,
    }
}

/// A request post as the consumer made it.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) iov: &'a [LmrTriplet],
    pub(crate) cookie: u64,
    pub(crate) op: RequestOp,
    pub(crate) flags: CompletionFlags,
    /// The completion flags the call admits.
    pub(crate) allowed: u32,
}
