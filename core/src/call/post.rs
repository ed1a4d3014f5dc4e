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
use crate::handle::AhHandle;
use crate::types::{CompletionFlags, LmrTriplet, RmrTriplet};

pub(crate) mod door;
mod lane;
pub mod poster;
mod recv;
mod request;
pub(crate) mod rule;
pub mod shared;
mod ud;

/// A request as [`Door::ep_post_request`](door::Door::ep_post_request)
/// takes it: one of the connection's, or one whose other side is named
/// another way. A [`RequestOp`] is the first kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostOp {
    /// A send, RDMA write or read, or atomic of the connection, its local
    /// segments the call's `iov`.
    Connected(RequestOp),
    /// `dat_ib_post_send_ud`: a datagram of a UD EP, its segments the
    /// call's `iov`, to the QP `remote_qpn` at the peer `ah` names (an
    /// address handle a UD connection event of this EP gave). It
    /// completes on the request EVD as `DAT_IB_DTO_SEND_UD`; the peer's
    /// receive as `DAT_IB_DTO_RECV_UD`.
    SendUd {
        /// The peer.
        ah: AhHandle,
        /// Its QP.
        remote_qpn: u32,
    },
    /// dat_ep_post_rdma_read_to_rmr of `<dat2/dat.h>` (DAT 2.0): `remote`
    /// read into the local memory `local` names by an RMR context rather
    /// than an LMR triplet; the call's `iov` is empty.
    RdmaReadToRmr {
        /// The local memory, by its RMR context.
        local: RmrTriplet,
        /// The peer's memory.
        remote: RmrTriplet,
    },
}

impl From<RequestOp> for PostOp {
    #[inline(always)]
    fn from(op: RequestOp) -> PostOp {
        PostOp::Connected(op)
    }
}

/// A request post as the consumer made it, less its cookie, which no rule
/// reads; its kind ([`rule::kind`]) is its operation's.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) iov: &'a [LmrTriplet],
    pub(crate) op: RequestOp,
    pub(crate) flags: CompletionFlags,
}
