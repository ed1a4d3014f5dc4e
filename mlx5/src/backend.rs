//! [`Mlx5`]: udat-core's [`Backend`] with the mlx5 data path over a
//! [`Device`]'s control path.
//!
//! A QP's queues live in the QP, which the core holds in its EP, and a
//! CQ's ring in the CQ, which the core holds in its EVD, so neither a
//! post nor a dequeue looks its queue up. A CQ's poll reaches the QPs
//! whose CQEs it carries through the core ([`Qps`]): a CQE names its QP
//! by number, the number leads to the QP's tag (its EP), the tag to its
//! queues, and the WQE counter to the work request. What reaches CQs
//! other than the one polled (a QP's destruction marks its CQEs stale, a
//! block arms every CQ) is handed them by the core ([`Cqs`]). SRQs live
//! in a table of the backend's, which a CQE of a destroyed QP reaches by
//! number: such a CQE is skipped, but a receive it carried from an SRQ
//! still returns its WQE to the SRQ.

use udat_core::backend::{
    AhAttr, Backend, Completion, ConnectionManager, CqHead, Cqs, HoldsQp, QpConfig, QpType, Qps, RequestOp, SendWr,
    Sge, UdDest, Untaken, WaitFds, Wake, MAX_SGE,
};
use udat_core::types::{CompletionFlags, DtoOp, DtoStatus, MemPriv, RmrTriplet, SrqAttr};
use udat_core::{DatError, DatResult, ErrorType};

use crate::cq::CompletionQueue;
use crate::cqe::{Cqe, CqeOpcode, Done, Head};
use crate::device::{Device, QpSpec};
use crate::kept::Kept;
use crate::mw;
use crate::rq::{RecvQueue, SharedRecvQueue};
use crate::sq::{Header, Remote, SendQueue, SendSlot};
use crate::table::{Entry, Inline, Of, QpnIndex, Route, Storage, Table, TableIn};
use crate::wqe::{self, fm_ce_se, opcode, AddressVector, SEG_BYTES};
use udat_core::store::Store;

/// Most bytes a send or RDMA write carries inline: a WQE of control,
/// remote-address and inline segments that fills one BlueFlame half.
pub const MAX_INLINE: usize = 256 - 2 * SEG_BYTES - 4;

/// A QP: the device's handle and its queues.
pub struct Qp<D: Device> {
    ctl: D::Qp,
    queues: QpQueues<D>,
}

impl<D: Device> core::fmt::Debug for Qp<D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Qp").field("qpn", &self.queues.sq.qpn()).finish_non_exhaustive()
    }
}

/// A UD address handle: the device's, and the address vector each send
/// through it copies.
#[derive(Debug)]
pub struct Ah<D: Device> {
    ctl: D::Ah,
    av: AddressVector,
}

/// A CQ: the device's handle and its ring.
#[derive(Debug)]
pub struct Cq<D: Device> {
    ctl: D::Cq,
    ring: CompletionQueue<D::Register>,
    /// The device reported the CQ in error ([`Backend::cq_failed`]): it
    /// writes no more CQEs, so a poll that finds none completes what its
    /// QPs still hold as flushed.
    failed: bool,
}

/// A memory window: the device's handle and its current key, which
/// each bind advances.
#[derive(Debug)]
pub struct Mw<D: Device> {
    ctl: D::Mw,
    rkey: u32,
    /// A type 2 window: its binds name the QP.
    for_ep: bool,
}

/// An SRQ: the device's handle and the slot of its ring.
#[derive(Debug)]
pub struct Srq<D: Device> {
    ctl: D::Srq,
    slot: u16,
}

struct QpQueues<D: Device> {
    tag: u64,
    sq: SendQueue<D::Register, D::SendSlots>,
    rq: Option<RecvQueue<D::RecvSlots>>,
    srq: Option<u16>,
    /// The numbers of the CQs it reports to.
    send_cq: Option<u32>,
    recv_cq: Option<u32>,
    /// A UD QP: its receives complete as [`DtoOp::ReceiveUd`].
    ud: bool,
}

struct SrqQueue<D: Device> {
    srqn: u32,
    ring: SharedRecvQueue<D::RecvSlots>,
}

/// The mlx5 backend over the device `D`, its tables in storage `S`: by
/// default 64 QPs and 128 SRQs.
pub struct Mlx5<D: Device, S: Storage = Inline<128>> {
    device: D,
    by_qpn: QpnIndex<S::Slots<Route>>,
    srqs: TableIn<SrqQueue<D>, S>,
}

impl<D: Device, S: Storage + Default> Mlx5<D, S> {
    /// The backend over `device`, with tables of the default size.
    pub fn new(device: D) -> Self {
        Self::with_storage(device, S::default())
    }
}

impl<D: Device, S: Storage> Mlx5<D, S> {
    /// The next CQE of `cq` that a dequeue's lane or a shared dequeue
    /// (`Backend::cq_lane`, `Backend::cq_take_shared`) settles alone,
    /// taken through [`next`] without the SRQs. Otherwise nothing
    /// changed: [`Untaken::Empty`] when no CQE is software's and the CQ
    /// has no failed QPs to flush (`cq_poll`), [`Untaken::Declined`] for
    /// the rest, which `cq_poll` takes.
    #[inline(always)]
    fn take_next<G: HoldsQp<Qp<D>>>(
        &self,
        cq: &mut Cq<D>,
        admit: impl FnOnce(CqHead) -> Option<G>,
    ) -> Result<(Completion, G), Untaken> {
        match next(&mut cq.ring, &self.by_qpn, admit, None::<&mut TableIn<SrqQueue<D>, S>>) {
            Ok(Next::Taken(completion, admitted)) => {
                cq.ring.update_ci();
                Ok((completion, admitted))
            }
            // Without the SRQs, `next` settles nothing.
            Ok(Next::Settled(_)) => Err(Untaken::Declined),
            Err(Untaken::Empty) if cq.failed => Err(Untaken::Declined),
            Err(untaken) => Err(untaken),
        }
    }

    /// The backend over `device`, with tables in `storage`.
    pub fn with_storage(device: D, mut storage: S) -> Self {
        Mlx5 {
            device,
            by_qpn: QpnIndex::new(storage.slots(Of::QpnIndex)),
            srqs: Table::new(storage.slots(Of::Srqs), usize::MAX),
        }
    }

    /// The device under the data path.
    pub fn device(&mut self) -> &mut D {
        &mut self.device
    }
}

/// Mark the CQEs of QP `qpn` not yet polled in those of `cqs` it reports
/// to (`reports_to`, their numbers), so no QP that has (or later gets)
/// the number takes them.
fn forget_cqes<D: Device>(qpn: u32, reports_to: [Option<u32>; 2], cqs: &mut impl Cqs<Cq<D>>) {
    cqs.each(|cq| {
        if reports_to.contains(&Some(cq.ring.cqn())) {
            cq.ring.forget_qp(qpn);
        }
    });
}

fn resources() -> DatError {
    DatError::of(ErrorType::InsufficientResources)
}

fn internal() -> DatError {
    DatError::of(ErrorType::InternalError)
}

/// The control segment's `fm_ce_se` for a post's DAT completion flags
/// (dat_ep_post_send(3DAT) and friends): a CQE unless
/// `DAT_COMPLETION_SUPPRESS_FLAG`; "notification completion for matching
/// receive on the other side" (`SOLICITED_WAIT`) is the solicited bit;
/// "Barrier Fence" is the fence. `UNSIGNALLED` is the core's business
/// (the event does not notify), not the device's.
#[inline(always)]
fn wqe_flags(flags: CompletionFlags) -> u8 {
    const fn of(flags: u32) -> u8 {
        let mut bits = if flags & CompletionFlags::SUPPRESS.0 != 0 { 0 } else { fm_ce_se::CQ_UPDATE };
        if flags & CompletionFlags::SOLICITED_WAIT.0 != 0 {
            bits |= fm_ce_se::SOLICITED;
        }
        if flags & CompletionFlags::BARRIER_FENCE.0 != 0 {
            bits |= fm_ce_se::FENCE;
        }
        bits
    }
    /// Every combination of the four flags, looked up rather than tested.
    const TABLE: [u8; 16] = {
        let mut table = [0; 16];
        let mut i = 0;
        while i < 16 {
            table[i] = of(i as u32);
            i += 1;
        }
        table
    };
    TABLE[(flags.0 & 0x0f) as usize]
}

/// The WQE header of a request, and the operation its completion reports.
#[inline(always)]
fn request_header(op: &RequestOp) -> (Header, DtoOp) {
    let header = |opcode, imm, remote: Option<RmrTriplet>, atomic| Header {
        opcode,
        imm,
        remote: remote.map(|r| Remote { addr: r.virtual_address, rkey: r.rmr_context }),
        atomic,
    };
    match *op {
        RequestOp::Send => (header(opcode::SEND, 0, None, None), DtoOp::Send),
        RequestOp::SendInvalidate { rkey } => (header(opcode::SEND_INVAL, rkey, None, None), DtoOp::Send),
        RequestOp::RdmaWrite { remote } => (header(opcode::RDMA_WRITE, 0, Some(remote), None), DtoOp::RdmaWrite),
        RequestOp::RdmaRead { remote } => (header(opcode::RDMA_READ, 0, Some(remote), None), DtoOp::RdmaRead),
        RequestOp::RdmaWriteImm { remote, imm } => {
            (header(opcode::RDMA_WRITE_IMM, imm, Some(remote), None), DtoOp::RdmaWriteImm)
        }
        RequestOp::CompareSwap { remote, compare, swap } => {
            (header(opcode::ATOMIC_CS, 0, Some(remote), Some((swap, compare))), DtoOp::CompareSwap)
        }
        RequestOp::FetchAdd { remote, add } => {
            (header(opcode::ATOMIC_FA, 0, Some(remote), Some((add, 0))), DtoOp::FetchAdd)
        }
    }
}

/// Whether a request `op` of `length` bytes goes inline: a send or an
/// RDMA write (reads and atomics scatter what comes back) of 1 to
/// [`MAX_INLINE`] bytes.
#[inline(always)]
fn goes_inline(op: &RequestOp, length: u32) -> bool {
    let carries_data =
        !matches!(op, RequestOp::RdmaRead { .. } | RequestOp::CompareSwap { .. } | RequestOp::FetchAdd { .. });
    carries_data && length != 0 && length as usize <= MAX_INLINE
}

/// The WQE header of a request `op` of `length` bytes, and the send slot
/// it leaves.
#[inline(always)]
fn request(op: &RequestOp, cookie: u64, length: u32, flags: CompletionFlags) -> (Header, SendSlot) {
    let (header, dto) = request_header(op);
    (header, SendSlot { cookie, length, op: dto, flags, bbs: 0 })
}

/// Send `wr` as a datagram of the UD QP of `queues` to `dest` through
/// `ah`: a WQE with a datagram segment (PRM, "Datagram Segment").
fn ud_to<D: Device>(queues: &mut QpQueues<D>, ah: &Ah<D>, dest: UdDest, wr: &SendWr<'_>) -> DatResult<()> {
    if !queues.ud {
        return Err(internal());
    }
    let av = AddressVector { qkey: dest.qkey, dqpn: dest.remote_qpn, ..ah.av };
    let slot = SendSlot { cookie: wr.cookie, length: wr.length, op: DtoOp::SendUd, flags: wr.flags, bbs: 0 };
    queues.sq.send_ud(&av, wr.sges, wqe_flags(wr.flags), slot).map_err(|_| resources())
}

/// Post `wr` on `queues`: the WQE, its slot and its doorbell. Inlined
/// into each post, where the request's kind is a constant, so a gathered
/// request of one WQEBB is built straight from the caller's registers;
/// an inline one goes through [`post_inline_to`].
#[inline(always)]
fn post_to<D: Device>(queues: &mut QpQueues<D>, wr: &SendWr<'_>) -> DatResult<()> {
    if goes_inline(&wr.op, wr.length) {
        return post_inline_to(queues, wr);
    }
    let (header, slot) = request(&wr.op, wr.cookie, wr.length, wr.flags);
    queues.sq.send(header, wr.sges, wqe_flags(wr.flags), slot).map_err(|_| resources())
}

/// [`post_to`] of a request that carries its data inline.
#[inline(never)]
#[allow(unsafe_code)]
fn post_inline_to<D: Device>(queues: &mut QpQueues<D>, wr: &SendWr<'_>) -> DatResult<()> {
    let (header, slot) = request(&wr.op, wr.cookie, wr.length, wr.flags);
    // SAFETY: the core translated every segment through a live LMR that
    // covers it (dat_ep_post_send(3DAT) and friends check the triplets
    // against the LMR), and registered memory stays mapped while it is
    // registered.
    unsafe { queues.sq.send_inline(header, wr.sges, wr.length, wqe_flags(wr.flags), slot) }.map_err(|_| resources())
}

/// The lane of a request of one segment on `queues`, built straight from
/// its scalars ([`SendQueue::try_send_one`],
/// [`SendQueue::try_send_inline_one`]); `false`, with nothing written,
/// where the send queue leaves it to [`post_to`]. Other kinds of request
/// go the ordinary way.
#[inline(always)]
#[allow(unsafe_code)]
fn lane_to<D: Device>(queues: &mut QpQueues<D>, op: RequestOp, sge: Sge, cookie: u64, flags: CompletionFlags) -> bool {
    if !matches!(op, RequestOp::Send | RequestOp::RdmaWrite { .. } | RequestOp::RdmaRead { .. }) {
        let sges = core::slice::from_ref(&sge);
        return post_to(queues, &SendWr { op, sges, length: sge.length, cookie, flags }).is_ok();
    }
    let (header, slot) = request(&op, cookie, sge.length, flags);
    if goes_inline(&op, sge.length) {
        // SAFETY: the core translated the segment through a live LMR that
        // covers it, and registered memory stays mapped while it is
        // registered.
        return unsafe {
            queues.sq.try_send_inline_one(header.opcode, header.remote, sge.addr, sge.length, wqe_flags(flags), slot)
        };
    }
    queues.sq.try_send_one(header.opcode, header.remote, sge, wqe_flags(flags), slot)
}

/// What `cqe` of a QP of `queues` completes: the work request it retires
/// from the send queue, or the receive it fills (an SRQ's through
/// `srq_complete`, given the SRQ's slot); `None` when it names no
/// outstanding request.
#[inline(always)]
fn complete_on<D: Device>(
    queues: &mut QpQueues<D>,
    cqe: &Cqe,
    srq_complete: impl FnOnce(u16) -> Option<u64>,
    source_qpn: impl FnOnce() -> u32,
) -> Option<Completion> {
    if cqe.is_requester() {
        let (sent, retired) = queues.sq.retire(cqe.wqe_counter)?;
        return Some(Completion { status: cqe.status(), ..requested(queues.tag, sent, retired) });
    }
    let cookie = match (queues.srq, queues.rq.as_mut()) {
        (Some(s), _) => srq_complete(s),
        (None, Some(rq)) => rq.complete(),
        (None, None) => None,
    }?;
    let completion = received(queues.tag, cookie, cqe, cqe.status());
    if queues.ud && completion.op == DtoOp::Receive {
        return Some(Completion { op: DtoOp::ReceiveUd, imm: source_qpn(), ..completion });
    }
    Some(completion)
}

/// What [`look`] found a CQE to complete, for [`take`] to retire.
enum Taking {
    /// The oldest request of the send queue, alone: its WQEBBs.
    Request(u16),
    /// The oldest receive of the QP's own receive queue.
    Receive,
}

/// The completion the CQE `head`, the next of `ring`, makes of a QP of
/// `queues`, if a dequeue may settle it alone: a success (`done`, from
/// [`Head::done`]; an error breaks the connection, an exclusive poll's
/// business) that completes
/// the oldest request of the send queue alone (not a window bind's, which
/// changes its window), or fills the oldest receive of the QP's own queue
/// (not an SRQ's, which QPs of other EPs share, nor a UD QP's, whose
/// completion names its sender). Nothing is consumed: the dequeue
/// decides, and [`take`] consumes.
#[inline(always)]
fn look<D: Device>(
    ring: &CompletionQueue<D::Register>,
    head: Head,
    done: Done,
    queues: &QpQueues<D>,
) -> Option<(Completion, Taking)> {
    if done == Done::Request {
        let sent = queues.sq.oldest(head.wqe_counter())?;
        if sent.op == DtoOp::BindMw {
            return None;
        }
        return Some((requested(queues.tag, *sent, 1), Taking::Request(sent.bbs)));
    }
    if queues.srq.is_some() || queues.ud {
        return None;
    }
    let cookie = queues.rq.as_ref()?.oldest()?;
    // `done` names only a successful CQE, whose syndrome is not read.
    Some((received(queues.tag, cookie, &ring.peeked(head), DtoStatus::Success), Taking::Receive))
}

/// Consume the CQE [`look`] looked at, and retire what it completes: the
/// one place where a CQE is taken, for a dequeue's lane, a shared
/// dequeue and a poll alike. The consumer index reaches the device at the
/// caller's [`CompletionQueue::update_ci`].
#[inline(always)]
fn take<D: Device>(ring: &mut CompletionQueue<D::Register>, queues: &mut QpQueues<D>, taking: &Taking) {
    ring.advance();
    match taking {
        Taking::Request(bbs) => queues.sq.retire_oldest(*bbs),
        Taking::Receive => {
            if let Some(rq) = queues.rq.as_mut() {
                rq.complete();
            }
        }
    }
}

/// What [`next`] did with the CQE at the head of a CQ.
enum Next<G> {
    /// Settled alone ([`look`], [`take`]): the completion, and the holder
    /// of its QP that `admit` handed back.
    Taken(Completion, G),
    /// Consumed by the ordinary poll's rules ([`complete_on`]): what it
    /// completes, if anything (a CQE of a destroyed QP completes
    /// nothing).
    Settled(Option<Completion>),
}

/// Consume the next CQE of `ring`: the one place a CQE is taken, for a
/// dequeue's lane, a shared dequeue and a poll alike. It is shown to
/// `admit` ([`CqHead`]) before anything is consumed; one [`look`] settles
/// alone, of a QP whose holder `admit` hands back, is [`Next::Taken`].
/// The rest (an error, which breaks the connection; a window bind; an
/// SRQ's or a UD receive; a request with unsignalled ones before it; a
/// CQE of a destroyed QP) only a poll consumes, given the SRQs
/// (`ordinary`): [`Next::Settled`]. Without them, nothing changes and the
/// answer is [`Untaken::Declined`]; [`Untaken::Empty`] when no CQE is
/// software's. The consumer index reaches the device at the caller's
/// [`CompletionQueue::update_ci`].
#[inline(always)]
fn next<D: Device, R: Store<Entry<Route>>, Q: Store<Entry<SrqQueue<D>>>, G: HoldsQp<Qp<D>>>(
    ring: &mut CompletionQueue<D::Register>,
    by_qpn: &QpnIndex<R>,
    admit: impl FnOnce(CqHead) -> Option<G>,
    ordinary: Option<&mut Table<SrqQueue<D>, Q>>,
) -> Result<Next<G>, Untaken> {
    let head = ring.peek_head().ok_or(Untaken::Empty)?;
    // Each kind of CQE in code of its own, so that a request's is known by
    // its opcode's one test and none after.
    match head.done() {
        Some(Done::Request) => next_done(ring, by_qpn, admit, ordinary, head, Some(Done::Request)),
        Some(Done::Receive) => next_done(ring, by_qpn, admit, ordinary, head, Some(Done::Receive)),
        None if ordinary.is_none() => Err(Untaken::Declined),
        None => next_done(ring, by_qpn, admit, ordinary, head, None),
    }
}

/// [`next`] of the CQE `head`, whose [`Head::done`] is `done`.
#[inline(always)]
#[allow(unsafe_code)]
fn next_done<D: Device, R: Store<Entry<Route>>, Q: Store<Entry<SrqQueue<D>>>, G: HoldsQp<Qp<D>>>(
    ring: &mut CompletionQueue<D::Register>,
    by_qpn: &QpnIndex<R>,
    admit: impl FnOnce(CqHead) -> Option<G>,
    ordinary: Option<&mut Table<SrqQueue<D>, Q>>,
    head: Head,
    done: Option<Done>,
) -> Result<Next<G>, Untaken> {
    // Inlined: called, the look-up would hand its route back through the
    // stack of a dequeue's lane, and a stack slot whose address escapes
    // keeps the lane's ways out from being jumps.
    let route = ring.route(
        head.qpn_word(),
        #[inline(always)]
        |qpn| by_qpn.route(qpn),
    );
    // A lane's CQE is done (above): its `done` says what `is_receive`
    // would, and the lane need not ask the opcode again.
    let recv = match done {
        Some(done) => done == Done::Receive,
        None => head.is_receive(),
    };
    // SAFETY: a route is in the QP index or a CQ's kept route only while
    // its QP lives: `qp_destroy` takes it out of the index and
    // `forget_cqes` clears the kept route of each CQ the QP reports to,
    // the only CQs whose CQEs name it. Its tag is the one `qp_create` was
    // given, and the device writes a QP's receive CQEs (`recv`) to the
    // receive CQ `qp_create` was given, the others to its send CQ.
    let admitted = route.and_then(|r| admit(unsafe { CqHead::of_live_qp(r.tag, recv) }));
    let Some(mut admitted) = admitted else {
        let srqs = ordinary.ok_or(Untaken::Declined)?;
        let cqe = ring.peeked(head);
        ring.advance();
        // A destroyed QP's CQE: a receive still gives its SRQ WQE back.
        if !cqe.is_requester() {
            if let Some(s) = srqs.iter_mut().find(|s| s.srqn == cqe.srqn) {
                s.ring.complete(cqe.wqe_counter);
            }
        }
        return Ok(Next::Settled(None));
    };
    let queues = &mut admitted.qp().queues;
    if let Some((completion, taking)) = done.and_then(|done| look(ring, head, done, queues)) {
        take(ring, queues, &taking);
        return Ok(Next::Taken(completion, admitted));
    }
    let srqs = ordinary.ok_or(Untaken::Declined)?;
    let cqe = ring.peeked(head);
    ring.advance();
    let srq_complete = |s: u16| srqs.get_mut(s).and_then(|s| s.ring.complete(cqe.wqe_counter));
    let source_qpn = || ring.last_source_qpn();
    Ok(Next::Settled(complete_on(queues, &cqe, srq_complete, source_qpn)))
}

/// A poll's holder of a QP: the QP itself, which the poll reaches
/// through the core's [`Qps`].
impl<D: Device> HoldsQp<Qp<D>> for &mut Qp<D> {
    #[inline(always)]
    fn qp(&mut self) -> &mut Qp<D> {
        self
    }
}

/// The completion of `sent`, a request of the QP tagged `tag`, which
/// retires `retired` requests; a success (an error's status is the
/// caller's).
#[inline(always)]
fn requested(tag: u64, sent: SendSlot, retired: u32) -> Completion {
    Completion {
        tag,
        cookie: sent.cookie,
        status: DtoStatus::Success,
        op: sent.op,
        transferred_length: sent.length,
        imm: 0,
        retired,
        notify: sent.notify(),
    }
}

/// The completion `cqe`, of `status` ([`Cqe::status`]), makes of the
/// receive posted with `cookie` on the QP tagged `tag`.
#[inline(always)]
fn received(tag: u64, cookie: u64, cqe: &Cqe, status: DtoStatus) -> Completion {
    let (op, imm) = match cqe.opcode {
        CqeOpcode::RespWriteImm => (DtoOp::ReceiveImm, cqe.imm),
        CqeOpcode::RespSendImm => (DtoOp::ReceiveMsgImm, cqe.imm),
        // The key the sender invalidated (`imm_inval_pkey`).
        CqeOpcode::RespSendInv => (DtoOp::ReceiveWithInvalidate, cqe.imm),
        _ => (DtoOp::Receive, 0),
    };
    Completion {
        tag,
        cookie,
        status,
        op,
        transferred_length: if status == DtoStatus::Success { cqe.byte_cnt } else { 0 },
        imm,
        retired: 1,
        notify: true,
    }
}

/// Complete as flushed, into `out`, what the QPs reporting to the failed
/// CQ numbered `cqn` still hold, oldest first, request by request: the
/// flushes the device would have written there (ibv_poll_cq(3),
/// `IBV_WC_WR_FLUSH_ERR`), had the CQ not overrun. rdma-core's mlx5
/// provider completes a device in its fatal state the same way, from its
/// own tables. Receives of an SRQ stay with the SRQ.
#[cold]
fn flush_failed<D: Device, R: Store<Entry<Route>>>(
    by_qpn: &QpnIndex<R>,
    qps: &mut impl Qps<Qp<D>>,
    cqn: u32,
    out: &mut [Completion],
) -> usize {
    let mut n = 0;
    for route in by_qpn.routes() {
        let Some(Qp { queues, .. }) = qps.by_tag(route.tag) else { continue };
        let tag = queues.tag;
        if queues.send_cq == Some(cqn) {
            while n < out.len() {
                let Some(sent) = queues.sq.retire_next() else { break };
                if let Some(place) = out.get_mut(n) {
                    *place = Completion { status: DtoStatus::Flushed, notify: true, ..requested(tag, sent, 1) };
                }
                n += 1;
            }
        }
        if queues.recv_cq == Some(cqn) && queues.srq.is_none() {
            while n < out.len() {
                let Some(cookie) = queues.rq.as_mut().and_then(|rq| rq.complete()) else { break };
                if let Some(place) = out.get_mut(n) {
                    *place = Completion {
                        tag,
                        cookie,
                        status: DtoStatus::Flushed,
                        op: if queues.ud { DtoOp::ReceiveUd } else { DtoOp::Receive },
                        transferred_length: 0,
                        imm: 0,
                        retired: 1,
                        notify: true,
                    };
                }
                n += 1;
            }
        }
    }
    n
}

/// Send ring WQEBBs for `max_send_wr` WQEs of the largest kind: on a UD
/// QP, a send's three units of datagram segment take the place of the
/// remote-address segment.
fn sq_wqebbs(max_send_wr: u32, max_send_sge: u32, ud: bool) -> u32 {
    let headers = if ud { wqe::DATAGRAM_BYTES / SEG_BYTES } else { 1 };
    let gather = 1 + headers + max_send_sge.max(1) as usize;
    let inline = 2 + wqe::inline_ds(MAX_INLINE);
    let per_wqe = wqe::bbs(gather.max(inline)) as u32;
    (max_send_wr.max(1) * per_wqe).next_power_of_two()
}

impl<D: Device, S: Storage> Backend for Mlx5<D, S> {
    type Ia = D::Ia;
    type Pd = D::Pd;
    type Mr = D::Mr;
    type Mw = Mw<D>;
    type Cq = Cq<D>;
    type Qp = Qp<D>;
    type Kept = Kept;
    type Srq = Srq<D>;
    type Ah = Ah<D>;
    type Cm = D::Cm;
    type Control = D::Control;

    #[inline]
    fn cm(&mut self) -> &mut D::Cm {
        self.device.cm()
    }

    #[inline]
    fn cm_qp(qp: &mut Qp<D>) -> &mut <D::Cm as ConnectionManager>::Qp {
        D::cm_qp(&mut qp.ctl)
    }

    fn control(&mut self) -> &mut D::Control {
        self.device.control()
    }

    fn mw_alloc(&mut self, pd: &D::Pd) -> DatResult<Mw<D>> {
        let (ctl, rkey) = self.device.mw_alloc(pd)?;
        Ok(Mw { ctl, rkey, for_ep: false })
    }

    fn mw_alloc_for_ep(&mut self, pd: &D::Pd) -> DatResult<Mw<D>> {
        let (ctl, rkey) = self.device.mw_alloc_for_ep(pd)?;
        Ok(Mw { ctl, rkey, for_ep: true })
    }

    fn mw_free(&mut self, mw: Mw<D>) {
        self.device.mw_free(mw.ctl);
    }

    fn cq_create(&mut self, ia: &mut D::Ia, min_entries: u32, tag: u64) -> DatResult<Cq<D>> {
        let parts = self.device.cq_create(ia, min_entries, tag)?;
        match CompletionQueue::new(parts.geometry) {
            Ok(ring) => Ok(Cq { ctl: parts.cq, ring, failed: false }),
            Err(_) => {
                self.device.cq_destroy(parts.cq);
                Err(internal())
            }
        }
    }

    fn cq_resize(&mut self, _cq: &mut Cq<D>, _min_entries: u32) -> DatResult<()> {
        Err(DatError::of(ErrorType::ModelNotSupported))
    }

    /// The data path lets go of the ring before the device frees it.
    fn cq_destroy(&mut self, cq: Cq<D>) {
        let Cq { ctl, ring, .. } = cq;
        drop(ring);
        self.device.cq_destroy(ctl);
    }

    fn cq_failed(&mut self, cq: &mut Cq<D>) {
        cq.failed = true;
    }

    #[inline]
    fn cq_poll(&mut self, cq: &mut Cq<D>, qps: &mut impl Qps<Qp<D>>, out: &mut [Completion]) -> usize {
        let Mlx5 { by_qpn, srqs, .. } = self;
        let ring = &mut cq.ring;
        let mut n = 0;
        let mut taken = false;
        while n < out.len() {
            let completion = match next(ring, by_qpn, |head| qps.by_tag(head.tag), Some(&mut *srqs)) {
                Ok(Next::Taken(completion, _)) => Some(completion),
                Ok(Next::Settled(completion)) => completion,
                // A poll, given the SRQs, consumes every CQE it finds.
                Err(_) => break,
            };
            taken = true;
            let Some(completion) = completion else { continue };
            if let Some(place) = out.get_mut(n) {
                *place = completion;
            }
            n += 1;
        }
        if taken {
            ring.update_ci();
        }
        if n < out.len() && cq.failed {
            n += flush_failed(by_qpn, qps, ring.cqn(), out.get_mut(n..).unwrap_or_default());
        }
        n
    }

    fn qp_create(&mut self, config: &QpConfig<'_, Self>, tag: u64) -> DatResult<Qp<D>> {
        let max_recv_sge = config.max_recv_sge.max(1);
        if config.max_send_sge as usize > MAX_SGE || max_recv_sge as usize > MAX_SGE {
            return Err(DatError::invalid_arg(0));
        }
        let spec = QpSpec::<D> {
            pd: config.pd,
            send_cq: config.send_cq.map(|c| &c.ctl),
            recv_cq: config.recv_cq.map(|c| &c.ctl),
            srq: config.srq.map(|s| &s.ctl),
            sq_wqebbs: sq_wqebbs(config.max_send_wr, config.max_send_sge, config.qp_type == QpType::Ud),
            max_recv_wr: config.max_recv_wr.max(1),
            max_recv_sge,
            max_rdma_read_in: config.max_rdma_read_in,
            max_rdma_read_out: config.max_rdma_read_out,
            tag,
            ud: config.qp_type == QpType::Ud,
        };
        let parts = self.device.qp_create(&spec)?;
        let qpn = parts.sq.qpn;
        let sq = SendQueue::new(parts.sq, parts.send_slots);
        let rq = parts.rq.map(|(geometry, slots)| RecvQueue::new(geometry, slots)).transpose();
        let (Ok(sq), Ok(rq)) = (sq, rq) else {
            self.device.qp_destroy(parts.qp);
            return Err(internal());
        };
        let queues = QpQueues {
            tag,
            sq,
            rq,
            srq: config.srq.map(|s| s.slot),
            send_cq: config.send_cq.map(|c| c.ring.cqn()),
            recv_cq: config.recv_cq.map(|c| c.ring.cqn()),
            ud: config.qp_type == QpType::Ud,
        };
        let route = Route { qpn, srq: config.srq.is_some(), tag };
        if !self.by_qpn.insert(route) {
            drop(queues);
            self.device.qp_destroy(parts.qp);
            return Err(resources());
        }
        Ok(Qp { ctl: parts.qp, queues })
    }

    /// The data path lets go of the queue memory before the device frees
    /// it; the CQEs are marked once the device writes no more.
    fn qp_destroy(&mut self, qp: Qp<D>, cqs: &mut impl Cqs<Cq<D>>) {
        let Qp { ctl, queues } = qp;
        let (qpn, reports_to) = (queues.sq.qpn(), [queues.send_cq, queues.recv_cq]);
        self.by_qpn.remove(qpn);
        drop(queues);
        self.device.qp_destroy(ctl);
        forget_cqes(qpn, reports_to, cqs);
    }

    fn qp_reset(&mut self, qp: &mut Qp<D>, cqs: &mut impl Cqs<Cq<D>>) -> DatResult<()> {
        self.device.qp_reset(&mut qp.ctl)?;
        // dat_ep_reset(3DAT): "The operation might cause the loss of any
        // completions of previously posted DTOs ... that were not dequeued
        // yet": the QP keeps its number, so its old CQEs are marked stale.
        let queues = &mut qp.queues;
        let (qpn, reports_to) = (queues.sq.qpn(), [queues.send_cq, queues.recv_cq]);
        queues.sq.reset();
        if let Some(rq) = queues.rq.as_mut() {
            rq.reset();
        }
        forget_cqes(qpn, reports_to, cqs);
        Ok(())
    }

    /// Inlined into each post, where the request's kind is a constant, so
    /// the WQE code of the other kinds folds away (unless measured apart:
    /// feature `measure-dat-layer`).
    #[cfg_attr(not(feature = "measure-dat-layer"), inline(always))]
    #[cfg_attr(feature = "measure-dat-layer", inline(never))]
    fn post_send(&mut self, qp: &mut Qp<D>, wr: &SendWr<'_>) -> DatResult<()> {
        post_to(&mut qp.queues, wr)
    }

    fn ah_create(&mut self, pd: &D::Pd, attr: &AhAttr) -> DatResult<Ah<D>> {
        let (ctl, av) = self.device.ah_create(pd, attr)?;
        Ok(Ah { ctl, av })
    }

    fn ah_destroy(&mut self, ah: Ah<D>) {
        self.device.ah_destroy(ah.ctl);
    }

    /// The vector of the handle with the send's Q_Key and QP, gathered
    /// ([`SendQueue::send_ud`]).
    fn post_send_ud(&mut self, qp: &mut Qp<D>, ah: &Ah<D>, dest: UdDest, wr: &SendWr<'_>) -> DatResult<()> {
        ud_to(&mut qp.queues, ah, dest, wr)
    }

    /// The lane: `lane_to`.
    #[cfg_attr(not(feature = "measure-dat-layer"), inline(always))]
    #[cfg_attr(feature = "measure-dat-layer", inline(never))]
    fn post_one(&mut self, qp: &mut Qp<D>, op: RequestOp, sge: Sge, cookie: u64, flags: CompletionFlags) -> bool {
        lane_to(&mut qp.queues, op, sge, cookie, flags)
    }

    /// A send, RDMA write or read, as `lane_to` posts it: gathered, a WQE
    /// of one WQEBB ([`SendQueue::keep_wqe`]); inline, the inline lane's
    /// scalars.
    fn keep_one(&self, qp: &Qp<D>, op: RequestOp, sge: Sge, flags: CompletionFlags) -> Option<Kept> {
        if !matches!(op, RequestOp::Send | RequestOp::RdmaWrite { .. } | RequestOp::RdmaRead { .. }) {
            return None;
        }
        let (header, slot) = request(&op, 0, sge.length, flags);
        let (sq, flags) = (&qp.queues.sq, wqe_flags(flags));
        if goes_inline(&op, sge.length) {
            let kept = sq.keep_inline(header.opcode, header.remote, sge.addr, sge.length, flags, slot);
            return kept.map(Kept::Inline);
        }
        Some(Kept::Gathered(sq.keep_wqe(header.opcode, header.remote, sge, flags, slot)))
    }

    /// A gathered WQE: [`Kept::is_gathered`].
    #[inline(always)]
    fn keeps_hot(kept: &Kept) -> bool {
        kept.is_gathered()
    }

    /// The kept lane: [`Kept::post`].
    #[cfg_attr(not(feature = "measure-dat-layer"), inline(always))]
    #[cfg_attr(feature = "measure-dat-layer", inline(never))]
    #[allow(unsafe_code)]
    fn post_kept(&mut self, qp: &mut Qp<D>, kept: &Kept, cookie: u64) -> bool {
        // SAFETY: the core translated the segment through a live LMR that
        // covers it when it kept the request, and no LMR is freed while
        // the poster that kept it posts; registered memory stays mapped
        // while it is registered.
        unsafe { kept.post(&mut qp.queues.sq, cookie) }
    }

    #[cfg_attr(not(feature = "measure-dat-layer"), inline(always))]
    #[cfg_attr(feature = "measure-dat-layer", inline(never))]
    #[allow(unsafe_code)]
    unsafe fn post_one_shared(
        &self,
        qp: &mut Qp<D>,
        op: RequestOp,
        sge: Sge,
        cookie: u64,
        flags: CompletionFlags,
    ) -> bool {
        // The caller holds the lock of the QP's EP, which every other use
        // of its queues takes.
        lane_to(&mut qp.queues, op, sge, cookie, flags)
    }

    const SHARED_QUEUES: bool = D::SHARED_QUEUES;

    #[cfg_attr(not(feature = "measure-dat-layer"), inline(always))]
    #[cfg_attr(feature = "measure-dat-layer", inline(never))]
    #[allow(unsafe_code)]
    unsafe fn post_send_shared(&self, qp: &mut Qp<D>, wr: &SendWr<'_>) -> DatResult<()> {
        // The caller holds the lock of the QP's EP, which every other use
        // of its queues takes.
        post_to(&mut qp.queues, wr)
    }

    #[allow(unsafe_code)]
    unsafe fn post_send_ud_shared(&self, qp: &mut Qp<D>, ah: &Ah<D>, dest: UdDest, wr: &SendWr<'_>) -> DatResult<()> {
        // As in `post_send_shared`.
        ud_to(&mut qp.queues, ah, dest, wr)
    }

    #[inline]
    #[allow(unsafe_code)]
    unsafe fn post_recv_shared(&self, qp: &mut Qp<D>, sges: &[Sge], cookie: u64) -> DatResult<()> {
        // As in `post_send_shared`.
        qp.queues.rq.as_mut().ok_or_else(internal)?.post(sges, cookie).map_err(|_| resources())
    }

    #[allow(unsafe_code)]
    #[inline(always)]
    unsafe fn post_recv_one_shared(&self, qp: &mut Qp<D>, sge: Sge, cookie: u64) -> bool {
        // As in `post_send_shared`.
        qp.queues.rq.as_mut().is_some_and(|rq| rq.post_one(sge, cookie))
    }

    #[allow(unsafe_code)]
    #[inline(always)]
    unsafe fn srq_post_recv_one_shared(&self, srq: &mut Srq<D>, sge: Sge, cookie: u64) -> bool {
        // SAFETY: as in `srq_post_recv_shared`.
        let ring = unsafe { self.srqs.get_shared(srq.slot) };
        ring.is_some_and(|r| r.ring.post(core::slice::from_ref(&sge), cookie).is_ok())
    }

    #[allow(unsafe_code)]
    unsafe fn srq_post_recv_shared(&self, srq: &mut Srq<D>, sges: &[Sge], cookie: u64) -> DatResult<()> {
        // SAFETY: the caller holds the lock of the SRQ, which every other
        // use of its ring takes, and no `&mut` to the backend exists.
        let ring = unsafe { self.srqs.get_shared(srq.slot) }.ok_or_else(internal)?;
        ring.ring.post(sges, cookie).map_err(|_| resources())
    }

    /// A CQE another thread may settle alone: what [`Backend::cq_lane`]
    /// takes, taken by the same code.
    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn cq_take_shared<G: HoldsQp<Qp<D>>>(
        &self,
        cq: &mut Cq<D>,
        admit: impl FnOnce(CqHead) -> Option<G>,
    ) -> Result<(Completion, G), Untaken> {
        // The caller holds the lock of the CQ's EVD, and what `admit`
        // returns the lock of the EP whose QP the CQE names.
        self.take_next(cq, admit)
    }

    /// Taken: a success, of a live QP, that completes the oldest request
    /// of its send queue alone, or fills a receive of the QP's own queue.
    /// Empty: no CQE owned by software, and no flushes to make of a
    /// failed CQ's QPs (`cq_poll`).
    #[inline(always)]
    fn cq_lane<G: HoldsQp<Qp<D>>>(
        &mut self,
        cq: &mut Cq<D>,
        accept: impl FnOnce(CqHead) -> Option<G>,
    ) -> Result<(Completion, G), Untaken> {
        self.take_next(cq, accept)
    }

    /// A receive queue refuses a post before it writes anything.
    #[inline(always)]
    fn post_recv_one(&mut self, qp: &mut Qp<D>, sge: Sge, cookie: u64) -> bool {
        qp.queues.rq.as_mut().is_some_and(|rq| rq.post_one(sge, cookie))
    }

    #[inline]
    fn post_recv(&mut self, qp: &mut Qp<D>, sges: &[Sge], cookie: u64) -> DatResult<()> {
        let rq = qp.queues.rq.as_mut().ok_or_else(internal)?;
        rq.post(sges, cookie).map_err(|_| resources())
    }

    /// A bind is a UMR WQE ([`crate::mw`]) rung at once; the window's
    /// next key is the one it returns.
    fn post_bind(
        &mut self,
        qp: &mut Qp<D>,
        mw: &mut Mw<D>,
        mr: Option<&D::Mr>,
        sge: Sge,
        privileges: MemPriv,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<u32> {
        let queues = &mut qp.queues;
        let rkey = mw::next_rkey(mw.rkey);
        let qpn = mw.for_ep.then(|| queues.sq.qpn());
        let bind = mr.map(|_| mw::Bind { lkey: sge.lkey, addr: sge.addr, len: sge.length, privileges, qpn });
        let (body, n) = mw::bind_body(rkey, bind.as_ref());
        let slot = SendSlot { cookie, length: 0, op: DtoOp::BindMw, flags, bbs: 0 };
        let body = body.get(..n).unwrap_or_default();
        queues.sq.post_umr(mw.rkey, body, wqe_flags(flags), slot).map_err(|_| resources())?;
        queues.sq.ring();
        mw.rkey = rkey;
        Ok(rkey)
    }

    fn srq_create(&mut self, pd: &D::Pd, attr: &SrqAttr) -> DatResult<Srq<D>> {
        let parts = self.device.srq_create(pd, attr)?;
        let Ok(ring) = SharedRecvQueue::new(parts.geometry, parts.slots) else {
            self.device.srq_destroy(parts.srq);
            return Err(internal());
        };
        match self.srqs.insert(SrqQueue { srqn: parts.srqn, ring }) {
            Ok(slot) => Ok(Srq { ctl: parts.srq, slot }),
            Err(_) => {
                self.device.srq_destroy(parts.srq);
                Err(resources())
            }
        }
    }

    fn srq_resize(&mut self, srq: &mut Srq<D>, max_recv_dtos: u32) -> DatResult<()> {
        // The ring was sized at creation; it may shrink in use, never grow.
        let ring = self.srqs.get(srq.slot).ok_or_else(internal)?;
        if max_recv_dtos <= ring.ring.capacity() {
            Ok(())
        } else {
            Err(resources())
        }
    }

    fn srq_destroy(&mut self, srq: Srq<D>) {
        self.srqs.remove(srq.slot);
        self.device.srq_destroy(srq.ctl);
    }

    #[inline]
    fn srq_post_recv(&mut self, srq: &mut Srq<D>, sges: &[Sge], cookie: u64) -> DatResult<()> {
        let ring = self.srqs.get_mut(srq.slot).ok_or_else(internal)?;
        ring.ring.post(sges, cookie).map_err(|_| resources())
    }

    /// A full ring refuses before anything is written
    /// ([`crate::rq::SharedRecvQueue::post`]).
    #[inline(always)]
    fn srq_post_recv_one(&mut self, srq: &mut Srq<D>, sge: Sge, cookie: u64) -> bool {
        let ring = self.srqs.get_mut(srq.slot);
        ring.is_some_and(|r| r.ring.post(core::slice::from_ref(&sge), cookie).is_ok())
    }

    fn now_us(&mut self) -> u64 {
        self.device.now_us()
    }

    fn coarse_now_us(&mut self) -> u64 {
        self.device.coarse_now_us()
    }

    /// Arm every empty CQ, then let the device block; the CQ events it
    /// took advance the arm sequence numbers. A CQ armed at an index with
    /// CQEs past it raises its event at once, so a CQE that lands between
    /// the look and the arming is not missed. For the same reason a CQ
    /// already holding CQEs is left unarmed: they wait for their EVD's
    /// poll, and wake a block only the first time they are seen.
    fn block(&mut self, ia: &mut D::Ia, cqs: &mut impl Cqs<Cq<D>>, timeout_us: Option<u64>) -> Wake {
        let mut ready = false;
        cqs.each(|Cq { ring, .. }| {
            if ring.has_cqe() {
                ready |= ring.has_news();
            } else {
                ring.arm(false);
            }
        });
        let wake = if ready { Wake::Activity } else { self.device.block(ia, timeout_us) };
        while let Some(cqn) = self.device.cq_event(ia) {
            cqs.each(|Cq { ring, .. }| {
                if ring.cqn() == cqn {
                    ring.event_taken();
                }
            });
        }
        wake
    }

    fn wait_fds(&self, ia: &D::Ia) -> WaitFds {
        self.device.wait_fds(ia)
    }

    #[inline(always)]
    fn cm_waiting(&self, ia: &D::Ia) -> Option<bool> {
        self.device.cm_waiting(ia)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dat_completion_flags_become_the_control_segment_bits() {
        let f = |bits: u32| wqe_flags(CompletionFlags(bits));
        assert_eq!(f(CompletionFlags::DEFAULT.0), fm_ce_se::CQ_UPDATE);
        assert_eq!(f(CompletionFlags::SUPPRESS.0), 0);
        assert_eq!(f(CompletionFlags::UNSIGNALLED.0), fm_ce_se::CQ_UPDATE);
        assert_eq!(f(CompletionFlags::SOLICITED_WAIT.0), fm_ce_se::CQ_UPDATE | fm_ce_se::SOLICITED);
        assert_eq!(f(CompletionFlags::BARRIER_FENCE.0), fm_ce_se::CQ_UPDATE | fm_ce_se::FENCE);
        let all = CompletionFlags::SUPPRESS.0 | CompletionFlags::SOLICITED_WAIT.0 | CompletionFlags::BARRIER_FENCE.0;
        assert_eq!(f(all), fm_ce_se::SOLICITED | fm_ce_se::FENCE);
    }

    /// `DAT_COMPLETION_UNSIGNALLED_FLAG`: the request's completion event
    /// does not notify; with any other flags it does. The send slot keeps
    /// the flags, and the completion reads them.
    #[test]
    fn an_unsignalled_request_completes_without_notifying() {
        let completion = |flags: CompletionFlags| {
            let (_, slot) = request(&RequestOp::Send, 7, 64, flags);
            requested(1, slot, 1)
        };
        assert!(!completion(CompletionFlags::UNSIGNALLED).notify);
        let all_but =
            CompletionFlags::SUPPRESS.0 | CompletionFlags::SOLICITED_WAIT.0 | CompletionFlags::BARRIER_FENCE.0;
        assert!(!completion(CompletionFlags(all_but | CompletionFlags::UNSIGNALLED.0)).notify);
        for flags in [CompletionFlags::DEFAULT, CompletionFlags(all_but)] {
            let c = completion(flags);
            assert!(c.notify, "{flags:?}");
            assert_eq!((c.cookie, c.transferred_length, c.op), (7, 64, DtoOp::Send));
        }
    }

    #[test]
    fn the_send_ring_holds_max_send_wr_of_the_largest_wqe() {
        // 16 gather segments: ctrl, raddr and 16 data = 18 ds = 5 WQEBBs.
        assert_eq!(sq_wqebbs(16, 16, false), (16u32 * 5).next_power_of_two());
        // Inline fills a BlueFlame half: 4 WQEBBs.
        assert_eq!(sq_wqebbs(8, 1, false), 32);
        assert_eq!(sq_wqebbs(0, 0, false), 4);
        // UD: ctrl, three units of datagram and 16 data = 20 ds = 5 WQEBBs.
        assert_eq!(sq_wqebbs(16, 16, true), (16u32 * 5).next_power_of_two());
    }
}
