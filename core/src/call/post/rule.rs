//! The rules of a post, written once: a request's ([`check`]), a
//! receive's ([`check_recv`]) and an SRQ receive's ([`check_srq_recv`]).
//!
//! Each kind of request is one row of [`kind`]: the completion flags its
//! call admits, where they stand among the call's arguments, the
//! privilege its local segments need, its length rule and the EP's post
//! mask it reads. [`check`] judges a request by its row in the pages'
//! order, and every door of a post (exclusive, shared, lane, the Rust
//! API's poster) runs it: the rules are not restated anywhere else.
//!
//! A refusal is a [`Refusal`], a word that names the rule that failed;
//! only a post that fails turns it into its `DAT_RETURN`
//! ([`Refusal::error`], out of line), from what the check found, so
//! nothing is looked up again to explain it.

use crate::backend::{Backend, RequestOp, SendWr, Sge, GRH_BYTES, MAX_SGE};
use crate::error::{DatError, ErrorType, Subtype};
use crate::handle::{PzHandle, RawHandle};
use crate::object::ep::{Ep, PostMasks};
use crate::object::ep::{REQUEST_FLAGS, SEND_FLAGS};
use crate::object::ia::Ia;
use crate::object::lmr::{by_context, Lmr};
use crate::object::srq::Srq;
use crate::signature::signature;
use crate::slab::{Slab, SlotsOf};
use crate::store::FixedVec;
use crate::types::{Access, CompletionFlags, EpState, LmrTriplet};

use super::door::Hand;
use super::Request;

/// The operand of an atomic.
const ATOMIC_BYTES: u64 = 8;

signature! {
    /// dat_ep_post_send(3DAT)'s parameters.
    pub(crate) enum PostSend { EpHandle, NumSegments, LocalIov, UserCookie, CompletionFlags }

    /// dat_ep_post_send_with_invalidate's parameters (`<dat2/dat.h>`, DAT 2.0).
    pub(crate) enum PostSendWithInvalidate {
        EpHandle, NumSegments, LocalIov, UserCookie, CompletionFlags, InvalidateFlag, RmrContext,
    }

    /// dat_ep_post_rdma_write(3DAT)'s parameters.
    pub(crate) enum PostRdmaWrite { EpHandle, NumSegments, LocalIov, UserCookie, RemoteBuffer, CompletionFlags }

    /// dat_ep_post_rdma_read(3DAT)'s parameters.
    pub(crate) enum PostRdmaRead { EpHandle, NumSegments, LocalIov, UserCookie, RemoteBuffer, CompletionFlags }

    /// dat_ep_post_recv(3DAT)'s parameters.
    pub(crate) enum PostRecv { EpHandle, NumSegments, LocalIov, UserCookie, CompletionFlags }

    /// `dat_ib_post_rdma_write_immed`'s parameters, as the macro of
    /// `<dat2/dat_ib_extensions.h>` lists them.
    pub(crate) enum PostRdmaWriteImmed {
        EpHandle, Size, LocalIov, UserCookie, RemoteIov, ImmediateData, CompletionFlags,
    }

    /// `dat_ib_post_cmp_and_swap`'s parameters, as the macro lists them.
    pub(crate) enum PostCmpAndSwap {
        EpHandle, CompareValue, SwapValue, LocalIov, UserCookie, RemoteIov, CompletionFlags,
    }

    /// `dat_ib_post_fetch_and_add`'s parameters, as the macro lists them.
    pub(crate) enum PostFetchAndAdd { EpHandle, AddValue, LocalIov, UserCookie, RemoteIov, CompletionFlags }
}

/// How a kind's length is judged against the EP and the remote buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Length {
    /// Within the EP's message size (dat_ep_post_send(3DAT)).
    Message,
    /// Into a remote buffer that holds it, within the RDMA size: "The
    /// size of the remote buffer is too small for the data of the local
    /// buffer" (dat_ep_post_rdma_write(3DAT)).
    IntoRemote,
    /// From a remote buffer the local one holds, within the RDMA size:
    /// "The size of the local buffer is too small for the data of the
    /// remote buffer" (dat_ep_post_rdma_read(3DAT)).
    FromRemote,
    /// 8 naturally aligned remote bytes, their old value into 8 local
    /// ones, on an IA that has atomics (`<dat2/dat_ib_extensions.h>`).
    Atomic,
    /// A receive's: a UD EP's needs room for the GRH, which
    /// [`check_recv`] judges.
    Receive,
}

/// Which of the EP's post masks ([`PostMasks`]) holds a kind's EP rules.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mask {
    Send,
    Rdma,
    Recv,
    /// None: the kind's EP rules are judged one by one.
    None,
}

/// One kind of post.
#[derive(Clone, Copy)]
pub(crate) struct Kind {
    /// The completion flags the call admits.
    pub(crate) flags: u32,
    /// The flags' position among the call's parameters, for
    /// `DAT_INVALID_PARAMETER`.
    pub(crate) flags_arg: u8,
    /// What the local segments need of their LMRs.
    pub(crate) need: Access,
    pub(crate) length: Length,
    pub(crate) mask: Mask,
}

macro_rules! kinds {
    ($($(#[$doc:meta])* $name:ident: $flags:expr, $arg:path, $need:ident, $length:ident, $mask:ident;)*) => {
        $($(#[$doc])* pub(crate) const $name: Kind = Kind {
            flags: $flags,
            flags_arg: $arg.position(),
            need: Access::$need,
            length: Length::$length,
            mask: Mask::$mask,
        };)*
    };
}

// The flags stand where each call's signature has them:
// dat_ep_post_send(3DAT) has no remote buffer, the extension's immediate
// write and compare-and-swap have one operand more. An atomic's result lands in
// local memory, so its segment needs local write as a read's does.
kinds! {
    /// dat_ep_post_send(3DAT).
    SEND: SEND_FLAGS, PostSend::CompletionFlags, Read, Message, Send;
    /// dat_ep_post_send_with_invalidate of `<dat2/dat.h>`: a send's rules;
    /// no lane takes it.
    SEND_INVALIDATE: SEND_FLAGS, PostSendWithInvalidate::CompletionFlags, Read, Message, None;
    /// dat_ep_post_rdma_write(3DAT).
    RDMA_WRITE: REQUEST_FLAGS, PostRdmaWrite::CompletionFlags, Read, IntoRemote, Rdma;
    /// `dat_ib_post_rdma_write_immed`: the write's rules.
    RDMA_WRITE_IMM: REQUEST_FLAGS, PostRdmaWriteImmed::CompletionFlags, Read, IntoRemote, Rdma;
    /// dat_ep_post_rdma_read(3DAT).
    RDMA_READ: REQUEST_FLAGS, PostRdmaRead::CompletionFlags, Write, FromRemote, Rdma;
    /// `dat_ib_post_cmp_and_swap`.
    COMPARE_SWAP: REQUEST_FLAGS, PostCmpAndSwap::CompletionFlags, Write, Atomic, None;
    /// `dat_ib_post_fetch_and_add`.
    FETCH_ADD: REQUEST_FLAGS, PostFetchAndAdd::CompletionFlags, Write, Atomic, None;
    /// dat_ep_post_recv(3DAT).
    RECV: CompletionFlags::UNSIGNALLED.0, PostRecv::CompletionFlags, Write, Receive, Recv;
}

/// The row of a request: a constant's address, which a refusal's
/// explanation takes out of line without the row being stored first.
#[inline(always)]
pub(crate) const fn kind(op: &RequestOp) -> &'static Kind {
    match op {
        RequestOp::Send => &SEND,
        RequestOp::SendInvalidate { .. } => &SEND_INVALIDATE,
        RequestOp::RdmaWrite { .. } => &RDMA_WRITE,
        RequestOp::RdmaWriteImm { .. } => &RDMA_WRITE_IMM,
        RequestOp::RdmaRead { .. } => &RDMA_READ,
        RequestOp::CompareSwap { .. } => &COMPARE_SWAP,
        RequestOp::FetchAdd { .. } => &FETCH_ADD,
    }
}

/// The rule a post broke, the first in the pages' order. It fits a
/// register; [`Refusal::error`] says it as a `DAT_RETURN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A completion flag the call or the EP does not admit; the flags'
    /// position ([`Kind::flags_arg`]).
    Flags(u8),
    /// More segments than the EP takes.
    Segments,
    /// A state that takes no post: the subtype of the EP's.
    State(Subtype),
    /// A connected operation on a UD EP: not of its transport.
    Datagram,
    /// A segment's LMR: no live one of the context, or of another PZ.
    Protection,
    /// A segment outside its LMR, or an atomic's remote address not
    /// aligned.
    Range,
    /// A segment's LMR without the privilege the kind needs.
    Privileges,
    /// More bytes than the EP's message or RDMA size.
    TooLong,
    /// The remote buffer and the local one do not fit each other.
    Length,
    /// The EP's IA is gone (an atomic reads its attributes).
    NoIa,
    /// Atomics on an IA that has none.
    NoAtomics,
    /// As many requests outstanding as the EP takes.
    Full,
    /// No QP.
    NotReady,
    /// No live EP of the handle.
    NoEp,
}

const _: () = assert!(core::mem::size_of::<Refusal>() <= 4);

impl Refusal {
    /// The `DAT_RETURN` of the broken rule. The segment count and the
    /// local segments stand where dat_ep_post_send(3DAT) has them,
    /// whichever kind refuses.
    #[cold]
    #[inline(never)]
    pub(crate) fn error(self) -> DatError {
        match self {
            Refusal::Flags(arg) => DatError::invalid_arg(arg),
            Refusal::Segments => DatError::invalid(PostSend::NumSegments),
            Refusal::State(subtype) => DatError::invalid_state(subtype),
            Refusal::Datagram => DatError::of(ErrorType::ModelNotSupported),
            Refusal::Protection => DatError::of(ErrorType::ProtectionViolation),
            Refusal::Range => DatError::of(ErrorType::InvalidParameter),
            Refusal::Privileges => DatError::of(ErrorType::PrivilegesViolation),
            Refusal::TooLong => DatError::invalid(PostSend::LocalIov),
            Refusal::Length => DatError::of(ErrorType::LengthError),
            Refusal::NoIa => DatError::invalid_handle(Subtype::InvalidHandleIa),
            Refusal::NoAtomics => DatError::of(ErrorType::NotImplemented),
            Refusal::Full => DatError::of(ErrorType::InsufficientResources),
            Refusal::NotReady => DatError::invalid_state(Subtype::InvalidStateEpNotready),
            Refusal::NoEp => DatError::invalid_handle(Subtype::InvalidHandleEp),
        }
    }
}

impl From<Refusal> for DatError {
    #[inline(always)]
    fn from(r: Refusal) -> DatError {
        r.error()
    }
}

/// Translated segments, as a post hands them to the transport.
pub(crate) trait Sges {
    /// The segments.
    fn sges(&self) -> &[Sge];
    /// The one segment, if there is exactly one.
    fn one(&self) -> Option<Sge>;
}

/// Where a check puts the segments it translated: a vector, or for a
/// post of one segment a register's worth.
pub(crate) trait Gathered: Sges + Default {
    /// Whether it is a lane's ([`super::lane::request_lane`]): then the
    /// check admits only a post the EP's post mask admits, which a refusal
    /// leaves to the ordinary call to explain.
    const LANE: bool;
    /// Add one; `false` if it holds no more.
    fn push(&mut self, sge: Sge) -> bool;
}

impl Sges for Option<Sge> {
    #[inline(always)]
    fn sges(&self) -> &[Sge] {
        self.as_slice()
    }

    #[inline(always)]
    fn one(&self) -> Option<Sge> {
        *self
    }
}

impl Gathered for Option<Sge> {
    const LANE: bool = true;

    #[inline(always)]
    fn push(&mut self, sge: Sge) -> bool {
        self.replace(sge).is_none()
    }
}

impl Sges for FixedVec<Sge, MAX_SGE> {
    #[inline(always)]
    fn sges(&self) -> &[Sge] {
        self
    }

    #[inline(always)]
    fn one(&self) -> Option<Sge> {
        match **self {
            [sge] => Some(sge),
            _ => None,
        }
    }
}

impl Gathered for FixedVec<Sge, MAX_SGE> {
    const LANE: bool = false;

    #[inline(always)]
    fn push(&mut self, sge: Sge) -> bool {
        FixedVec::push(self, sge).is_ok()
    }
}

/// A request that every rule admits: its segments translated, and their
/// bytes.
#[derive(Clone, Debug)]
pub(crate) struct Checked<G> {
    pub(crate) sges: G,
    pub(crate) total: u64,
}

/// Judge `request` on `ep`, its segments translated through `lmrs` (and,
/// for an atomic, the IA's attributes read from `ias`), in the pages'
/// order: the flags, the segment count, the state ("valid for the
/// Endpoint in the DAT_EP_STATE_CONNECTED and DAT_EP_STATE_DISCONNECTED
/// states"), the transport, each segment's LMR, the lengths, the
/// outstanding requests. Changes nothing. The last rule, a QP to post
/// on, is judged where the QP is taken ([`commit`]).
#[inline(always)]
pub(crate) fn check<B: Backend, L: SlotsOf<Lmr<B>>, I: SlotsOf<Ia<B>>, G: Gathered>(
    ep: &Ep<B>,
    lmrs: &Slab<Lmr<B>, L>,
    ias: &Slab<Ia<B>, I>,
    request: &Request<'_>,
) -> Result<Checked<G>, Refusal> {
    let Request { iov, op, flags, .. } = *request;
    let kind = kind(&op);
    if !admitted(ep, kind, flags, iov.len())? {
        // A lane takes only what the EP's post mask admits: its
        // transport's lane neither counts nor explains a missing QP.
        if G::LANE {
            return Err(Refusal::NotReady);
        }
    }
    let (sges, total) = segments::<B, L, G>(lmrs, ep.pz, iov, kind.need)?;
    fits(ep, ias, &op, kind.length, total)?;
    room(ep)?;
    Ok(Checked { sges, total })
}

/// Judge a receive of `iov` with `flags` on `ep`, its segments translated
/// through `lmrs`, in the pages' order: the flags, the segment count and
/// the SRQ (the receive's row, [`admitted`]), each segment's LMR, a UD
/// EP's room for the GRH, the outstanding receives. Changes nothing; the
/// QP is judged where it is taken. "The operation is valid for all
/// states of the Endpoint" (dat_ep_post_recv(3DAT)).
#[inline(always)]
pub(crate) fn check_recv<B: Backend, L: SlotsOf<Lmr<B>>, G: Gathered>(
    ep: &Ep<B>,
    lmrs: &Slab<Lmr<B>, L>,
    iov: &[LmrTriplet],
    flags: CompletionFlags,
) -> Result<Checked<G>, Refusal> {
    if !admitted(ep, &RECV, flags, iov.len())? && G::LANE {
        return Err(Refusal::NotReady);
    }
    let (sges, total) = segments::<B, L, G>(lmrs, ep.pz, iov, RECV.need)?;
    // A datagram lands after the 40 bytes of its GRH (ibv_post_recv(3)): a
    // UD receive with less room could take none.
    if ep.ud && total < u64::from(GRH_BYTES) {
        return Err(Refusal::Length);
    }
    if ep.recv_room.full() {
        return Err(Refusal::Full);
    }
    Ok(Checked { sges, total })
}

/// Judge a receive of `iov` on the SRQ `s`, its segments translated
/// through `lmrs`: the segment count, each segment's LMR (of the SRQ's PZ,
/// with local write), the outstanding receives. The call "is valid in
/// every SRQ state" (dat_srq_post_recv(3DAT)). Changes nothing.
#[inline(always)]
pub(crate) fn check_srq_recv<B: Backend, L: SlotsOf<Lmr<B>>, G: Gathered>(
    s: &Srq<B>,
    lmrs: &Slab<Lmr<B>, L>,
    iov: &[LmrTriplet],
) -> Result<Checked<G>, Refusal> {
    // dat_srq_post_recv(3DAT) has its segment count second, as
    // dat_ep_post_send(3DAT) does.
    if iov.len() > s.attr.max_recv_iov as usize {
        return Err(Refusal::Segments);
    }
    let (sges, total) = segments::<B, L, G>(lmrs, s.pz, iov, Access::Write)?;
    if s.outstanding >= s.attr.max_recv_dtos {
        return Err(Refusal::Full);
    }
    Ok(Checked { sges, total })
}

/// The segments of `iov` translated through `lmrs` for a post on an EP or
/// SRQ of `pz` that needs `need` of them ([`translated`]), and their
/// bytes. "When 0 is specified for segment_length then the other two
/// elements of the dat_lmr_triplet are irrelevant"
/// (dat_ep_post_send(3DAT)): an empty segment is skipped. More than `G`
/// holds is [`Refusal::Segments`].
#[inline(always)]
pub(crate) fn segments<B: Backend, L: SlotsOf<Lmr<B>>, G: Gathered>(
    lmrs: &Slab<Lmr<B>, L>,
    pz: PzHandle,
    iov: &[LmrTriplet],
    need: Access,
) -> Result<(G, u64), Refusal> {
    let mut sges = G::default();
    let mut total = 0u64;
    for seg in iov {
        if seg.segment_length == 0 {
            // A lane takes a segment that is not empty, so that its
            // segment and bytes are one value each, not a choice of two.
            if G::LANE {
                return Err(Refusal::Range);
            }
            continue;
        }
        if !sges.push(translated(lmrs, pz, seg, need)?) {
            return Err(Refusal::Segments);
        }
        total += u64::from(seg.segment_length);
    }
    Ok((sges, total))
}

/// The rules of `kind` that read only the EP and the flags: the flags the
/// call and the EP admit, `segments` within the EP's limit, a state that
/// takes the kind, the transport. One `and` with the EP's post mask
/// answers them all when they hold, and then the EP neither counts nor
/// lacks a QP: the answer is `true`. Otherwise they are judged one by
/// one, out of line, in the pages' order, and the answer, if they hold,
/// is `false` (a mask also refuses an EP that counts or has no QP:
/// [`commit`] judges the QP, in its place in the order, and counts).
#[inline(always)]
pub(crate) fn admitted<B: Backend>(
    ep: &Ep<B>,
    kind: &'static Kind,
    flags: CompletionFlags,
    segments: usize,
) -> Result<bool, Refusal> {
    debug_assert!(ep.post_masks_current());
    let mask = match kind.mask {
        Mask::Send => ep.post_masks.send,
        Mask::Rdma => ep.post_masks.rdma,
        Mask::Recv => ep.post_masks.recv,
        Mask::None => !0,
    };
    let limit = if kind.mask == Mask::Recv { ep.attr().max_recv_iov } else { ep.attr().max_request_iov };
    // A mask that admits holds a limit of at least one segment.
    let within = segments <= 1 || segments <= limit as usize;
    if PostMasks::widened(flags) & mask == 0 && within {
        return Ok(true);
    }
    one_by_one(ep, kind, flags, segments, limit).map(|()| false)
}

/// [`admitted`]'s rules one by one.
#[cold]
#[inline(never)]
fn one_by_one<B: Backend>(
    ep: &Ep<B>,
    kind: &'static Kind,
    flags: CompletionFlags,
    segments: usize,
    limit: u32,
) -> Result<(), Refusal> {
    if flags.0 & !kind.flags != 0 || !ep.unsignalled_allowed(flags, kind.mask == Mask::Recv) {
        return Err(Refusal::Flags(kind.flags_arg));
    }
    if segments > limit as usize {
        return Err(Refusal::Segments);
    }
    if kind.mask == Mask::Recv {
        // dat_ep_post_recv(3DAT) is "valid for all states of the
        // Endpoint"; an EP that receives from an SRQ takes no receives of
        // its own (dat_ep_create_with_srq(3DAT)).
        return if ep.srq.is_null() { Ok(()) } else { Err(Refusal::NotReady) };
    }
    if !matches!(ep.state(), EpState::Connected | EpState::Disconnected) {
        return Err(Refusal::State(ep.state_subtype()));
    }
    // A UD EP sends datagrams to the peers its address handles name
    // (`dat_ib_post_send_ud`); the connected operations are not of its
    // transport.
    if ep.ud {
        return Err(Refusal::Datagram);
    }
    Ok(())
}

/// `seg` translated through its LMR in `lmrs` for a post on an EP or SRQ
/// of `pz`: a live context (dat_lmr_free(3DAT): "Any DTO operation that uses
/// the destroyed LMR ... shall fail and report a protection violation"),
/// the PZ, inside the region, with the privilege `need`.
#[inline(always)]
pub(crate) fn translated<B: Backend, L: SlotsOf<Lmr<B>>>(
    lmrs: &Slab<Lmr<B>, L>,
    pz: PzHandle,
    seg: &LmrTriplet,
    need: Access,
) -> Result<Sge, Refusal> {
    let (_, lmr) = by_context(lmrs, seg.lmr_context).ok_or(Refusal::Protection)?;
    // The PZ and the privilege in one compare of the handles' bits, and
    // the rules as one yes/no; only a refusal says which.
    let granted = lmr.pz_granting(need) == pz.0.to_bits();
    let inside = lmr.contains(seg.virtual_address, u64::from(seg.segment_length));
    if granted & inside {
        return Ok(Sge { addr: seg.virtual_address, length: seg.segment_length, lkey: lmr.lkey });
    }
    Err(lmr_refusal(lmr, pz, *seg))
}

/// Which of [`translated`]'s rules refused `seg` on `lmr`, in their
/// order: judged again here, out of line, so that the post keeps no
/// partial answer for it. The segment comes as a value: its address
/// handed to a function the compiler cannot see into would be the
/// caller's memory escaping, which a loop of posts would then read
/// again at each turn.
#[cold]
#[inline(never)]
fn lmr_refusal<B: Backend>(lmr: &Lmr<B>, pz: PzHandle, seg: LmrTriplet) -> Refusal {
    if lmr.pz != pz {
        Refusal::Protection
    } else if !lmr.contains(seg.virtual_address, u64::from(seg.segment_length)) {
        Refusal::Range
    } else {
        Refusal::Privileges
    }
}

/// The length rule of `op`, `total` bytes on `ep`.
#[inline(always)]
pub(crate) fn fits<B: Backend, I: SlotsOf<Ia<B>>>(
    ep: &Ep<B>,
    ias: &Slab<Ia<B>, I>,
    op: &RequestOp,
    length: Length,
    total: u64,
) -> Result<(), Refusal> {
    let remote = match op {
        RequestOp::RdmaWrite { remote }
        | RequestOp::RdmaWriteImm { remote, .. }
        | RequestOp::RdmaRead { remote }
        | RequestOp::CompareSwap { remote, .. }
        | RequestOp::FetchAdd { remote, .. } => *remote,
        RequestOp::Send | RequestOp::SendInvalidate { .. } => Default::default(),
    };
    let far = u64::from(remote.segment_length);
    let rdma = u64::from(ep.attr().max_rdma_size);
    match length {
        Length::Message if total > u64::from(ep.attr().max_message_size) => Err(Refusal::TooLong),
        Length::IntoRemote if total > far => Err(Refusal::Length),
        Length::FromRemote if far > total => Err(Refusal::Length),
        Length::IntoRemote | Length::FromRemote if total > rdma => Err(Refusal::TooLong),
        Length::Atomic => {
            let ia = ias.get(ep.ia.0).ok_or(Refusal::NoIa)?;
            if !ia.attr.atomics {
                return Err(Refusal::NoAtomics);
            }
            if total != ATOMIC_BYTES || far < ATOMIC_BYTES {
                return Err(Refusal::Length);
            }
            if remote.virtual_address % ATOMIC_BYTES != 0 {
                return Err(Refusal::Range);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Room among the EP's outstanding requests.
#[inline(always)]
pub(crate) fn room<B: Backend>(ep: &Ep<B>) -> Result<(), Refusal> {
    if ep.request_room.full() {
        return Err(Refusal::Full);
    }
    Ok(())
}

/// Hand a request of one segment that [`check`] admitted to the
/// transport's lane through `post`, on an EP whose post mask admitted the post
/// ([`admitted`]; an EP that counts, or has no QP, is not admitted: it
/// hands its posts to the counters as work requests, through [`commit`]):
/// `true` once taken and counted outstanding; `false` with nothing
/// changed when the transport's lane declines. Everything stays in
/// registers.
///
/// # Safety
/// [`admitted`] answered `Ok(true)` for this post on `ep`, which has not
/// changed since ([`Ep::qp_admitted`]).
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) unsafe fn commit_admitted<B: Backend>(ep: &mut Ep<B>, post: impl FnOnce(&mut B::Qp) -> bool) -> bool {
    debug_assert!(!ep.counting);
    // SAFETY: the caller's promise.
    let qp = unsafe { ep.qp_admitted() };
    if !post(qp) {
        return false;
    }
    ep.request_room.take();
    true
}

/// Hand a request on the EP `h` whose segments `sges` of `total` bytes
/// [`check`] admitted to the transport through `hand`, once the last rule
/// holds: a QP to post on. One segment goes to the transport's lane
/// ([`commit_admitted`]); any other number, or a segment the lane does not
/// take, as a work request, which an EP that counts hands its counters.
/// Out of line: the hot paths try [`commit_admitted`] first.
#[cold]
#[inline(never)]
pub(crate) fn commit<B: Backend, G: Sges>(
    ep: &mut Ep<B>,
    h: RawHandle,
    sges: &G,
    total: u64,
    (cookie, op, flags): (u64, RequestOp, CompletionFlags),
    hand: &mut impl Hand<B>,
) -> Result<(), DatError> {
    let counting = ep.counting;
    let Some(qp) = ep.qp_mut() else { return Err(Refusal::NotReady.error()) };
    if let (Some(sge), false) = (sges.one(), counting) {
        if hand.post_one(qp, op, sge, cookie, flags) {
            ep.request_room.take();
            return Ok(());
        }
    }
    let wr = SendWr { op, sges: sges.sges(), length: total as u32, cookie, flags };
    hand.post_send(qp, &wr)?;
    ep.request_room.take();
    if counting {
        hand.posted(h, &wr);
    }
    Ok(())
}

/// A request on the EP `h`: [`check`], then [`commit`], every refusal its
/// `DAT_RETURN`. `hand` comes by value, so that a door that declined its
/// lane hands its pointers over in registers rather than keeping them in
/// memory for this call on every post. Out of line: the hot doors try the request's lane
/// ([`super::lane::request_lane`]) first, and come here when it declines,
/// so that the refusal is explained, and any other post made, here.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn checked_post<B: Backend, L: SlotsOf<Lmr<B>>, I: SlotsOf<Ia<B>>>(
    ep: &mut Ep<B>,
    h: RawHandle,
    lmrs: &Slab<Lmr<B>, L>,
    ias: &Slab<Ia<B>, I>,
    iov: &[LmrTriplet],
    (cookie, op, flags): (u64, RequestOp, CompletionFlags),
    mut hand: impl Hand<B>,
) -> Result<(), DatError> {
    let request = Request { iov, op, flags };
    let checked = check::<_, _, _, FixedVec<Sge, MAX_SGE>>(ep, lmrs, ias, &request)?;
    commit(ep, h, &checked.sges, checked.total, (cookie, op, flags), &mut hand)
}

#[cfg(test)]
mod tests {
    use super::Refusal;
    use crate::error::Subtype;

    /// Each refusal by the names of the `DAT_RETURN` the post pages give
    /// for its rule (dat_ep_post_send(3DAT), dat_ep_post_rdma_read(3DAT),
    /// dat_ep_post_recv(3DAT), dat_ib_post_cmp_and_swap of OFA's IB
    /// extension), so that a change of the one match shows here by name.
    #[test]
    fn each_refusal_is_its_pages_return() {
        let table: [(Refusal, &str, &str); 15] = [
            (Refusal::Flags(5), "DAT_INVALID_PARAMETER", "DAT_INVALID_ARG5"),
            (Refusal::Flags(6), "DAT_INVALID_PARAMETER", "DAT_INVALID_ARG6"),
            (Refusal::Segments, "DAT_INVALID_PARAMETER", "DAT_INVALID_ARG2"),
            (
                Refusal::State(Subtype::InvalidStateEpDisconnected),
                "DAT_INVALID_STATE",
                "DAT_INVALID_STATE_EP_DISCONNECTED",
            ),
            (Refusal::Datagram, "DAT_MODEL_NOT_SUPPORTED", "DAT_NO_SUBTYPE"),
            (Refusal::Protection, "DAT_PROTECTION_VIOLATION", "DAT_NO_SUBTYPE"),
            (Refusal::Range, "DAT_INVALID_PARAMETER", "DAT_NO_SUBTYPE"),
            (Refusal::Privileges, "DAT_PRIVILEGES_VIOLATION", "DAT_NO_SUBTYPE"),
            (Refusal::TooLong, "DAT_INVALID_PARAMETER", "DAT_INVALID_ARG3"),
            (Refusal::Length, "DAT_LENGTH_ERROR", "DAT_NO_SUBTYPE"),
            (Refusal::NoIa, "DAT_INVALID_HANDLE", "DAT_INVALID_HANDLE_IA"),
            (Refusal::NoAtomics, "DAT_NOT_IMPLEMENTED", "DAT_NO_SUBTYPE"),
            (Refusal::Full, "DAT_INSUFFICIENT_RESOURCES", "DAT_NO_SUBTYPE"),
            (Refusal::NotReady, "DAT_INVALID_STATE", "DAT_INVALID_STATE_EP_NOTREADY"),
            (Refusal::NoEp, "DAT_INVALID_HANDLE", "DAT_INVALID_HANDLE_EP"),
        ];
        for (refusal, ty, subtype) in table {
            let error = refusal.error();
            assert_eq!((error.error_type().name(), error.subtype().name()), (ty, subtype), "{refusal:?}");
        }
    }
}
