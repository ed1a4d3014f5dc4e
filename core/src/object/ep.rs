//! The state of an Endpoint and its own rules; the DAT calls on it are in
//! `crate::call::ep`.

mod connection;

pub(crate) use connection::{Connection, Reached};

use crate::backend::{Backend, Qps};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{EvdHandle, IaHandle, PzHandle, RawHandle, SrqHandle};
use crate::object::evd::NotifyMode;
use crate::signature::Parameter;
use crate::slab::{Members, Slab, SlotsOf};
use crate::types::{CompletionFlags, EpAttr, EpState, IaAttr, Qos};

/// The completion flags of dat_ep_post_rdma_write(3DAT) and
/// dat_ep_post_rdma_read(3DAT).
pub(crate) const REQUEST_FLAGS: u32 =
    CompletionFlags::SUPPRESS.0 | CompletionFlags::UNSIGNALLED.0 | CompletionFlags::BARRIER_FENCE.0;
/// dat_ep_post_send(3DAT) admits the solicited-wait flag too.
pub(crate) const SEND_FLAGS: u32 = REQUEST_FLAGS | CompletionFlags::SOLICITED_WAIT.0;

pub(crate) struct Ep<B: Backend> {
    pub(crate) ia: IaHandle,
    pub(crate) pz: PzHandle,
    pub(crate) recv_evd: EvdHandle,
    pub(crate) request_evd: EvdHandle,
    pub(crate) connect_evd: EvdHandle,
    pub(crate) srq: SrqHandle,
    /// The attributes, the connection (with the state) and the QP are
    /// read by every post and written only through [`Ep::reconfigure`] and
    /// [`Ep::connection_moves`], which keep `post_masks` theirs.
    attr: EpAttr,
    connection: Connection,
    qp: Option<B::Qp>,
    /// What the lanes read of them.
    pub(crate) post_masks: PostMasks,
    /// Room for requests and for receives of the EP's own queue, under
    /// `max_request_dtos` and `max_recv_dtos` ([`Room`]).
    pub(crate) request_room: Room,
    pub(crate) recv_room: Room,
    pub(crate) context: u64,
    /// What the layer above calls this EP in the events it writes (the C
    /// ABI: its handle), kept so that a dequeue's lane need not make it
    /// again ([`Provider::ep_name`](crate::Provider::ep_name)); 0 when
    /// none was given.
    pub(crate) name: u64,
    /// RMRs of `DAT_RMR_SCOPE_EP` bound through this EP.
    pub(crate) windows: u32,
    /// Whether a dequeue's lane, or a shared dequeue, may settle a receive
    /// of this EP alone: it has its own receive queue (an SRQ's receives
    /// are counted on the SRQ), no window of its own is bound through it,
    /// so no receive of it can invalidate one (which changes an RMR), and
    /// it is not UD.
    pub(crate) recv_direct: bool,
    /// Whether its counters count (`crate::call::counters`). While they do, the
    /// post masks refuse every post, so that the ordinary posts, which
    /// count, take them.
    pub(crate) counting: bool,
    /// Of the IB extension's `DAT_IB_SERVICE_TYPE_UD`: datagrams to the
    /// peers its connects and accepts resolve, no RDMA.
    pub(crate) ud: bool,
    /// The address handles of a UD EP's peers.
    pub(crate) ahs: Members,
    /// Holds on the dequeue lanes of the EVDs of this EP's receive and
    /// request streams ([`Provider::ep_hold_lane`](crate::Provider::ep_hold_lane)):
    /// they move with the streams and end with the EP.
    pub(crate) lane_holds: LaneHolds,
}

/// Holds on the dequeue lanes of an EP's two DTO streams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LaneHolds {
    pub(crate) recv: u32,
    pub(crate) request: u32,
}

/// The facts a post's lane reads of its EP, derived from the EP's state,
/// attributes, QP and SRQ, as three masks: the bits a post's completion
/// flags ([`PostMasks::widened`], with [`PostMasks::READY`] set) may not
/// have. A mask has [`PostMasks::READY`] itself when the EP takes no post
/// of the kind at all, so one `and` answers both questions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PostMasks {
    /// dat_ep_post_send(3DAT).
    pub(crate) send: u64,
    /// dat_ep_post_rdma_write(3DAT) and dat_ep_post_rdma_read(3DAT).
    pub(crate) rdma: u64,
    /// dat_ep_post_recv(3DAT).
    pub(crate) recv: u64,
}

impl PostMasks {
    /// The bit a lane sets in the flags it checks: no flag of DAT's,
    /// which [`widened`](Self::widened) moves up past it.
    pub(crate) const READY: u64 = 1;

    /// A post's completion `flags` as its EP's masks take them, with
    /// [`READY`](Self::READY) set: one `lea`, where a bit above the flags
    /// would be a 64-bit constant and an `or`.
    #[inline(always)]
    pub(crate) fn widened(flags: CompletionFlags) -> u64 {
        u64::from(flags.0) << 1 | PostMasks::READY
    }

    /// Masks that admit no post: an EP's until its parts are known.
    const REFUSE_ALL: PostMasks = PostMasks { send: !0, rdma: !0, recv: !0 };

    fn of<B: Backend>(ep: &Ep<B>) -> PostMasks {
        let reject = |admitted: u32, ready: bool| {
            let admit = u64::from(admitted) << 1 | if ready { PostMasks::READY } else { 0 };
            !admit
        };
        let unsignalled = |stream: CompletionFlags| {
            // `DAT_COMPLETION_UNSIGNALLED_FLAG` on a post "is only valid if
            // the Endpoint ... Completion Flags [are]
            // DAT_COMPLETION_UNSIGNALLED_FLAG".
            if stream.contains(CompletionFlags::UNSIGNALLED) {
                0
            } else {
                CompletionFlags::UNSIGNALLED.0
            }
        };
        let request = unsignalled(ep.attr.request_completion_flags);
        // "The operation is valid for the Endpoint in the
        // DAT_EP_STATE_CONNECTED and DAT_EP_STATE_DISCONNECTED states."
        // A UD EP takes neither (its sends name a peer), and its receives
        // have a rule of their own (room for the GRH): the ordinary paths
        // decide them.
        let posts = matches!(ep.state(), EpState::Connected | EpState::Disconnected)
            && ep.qp.is_some()
            && ep.attr.max_request_iov != 0
            && !ep.ud
            && !ep.counting;
        // dat_ep_post_recv(3DAT): "valid for all states of the Endpoint",
        // on an EP with a QP of its own receives (no SRQ).
        let receives = ep.qp.is_some() && ep.srq.is_null() && ep.attr.max_recv_iov != 0 && !ep.ud && !ep.counting;
        PostMasks {
            send: reject(SEND_FLAGS & !request, posts),
            rdma: reject(REQUEST_FLAGS & !request, posts),
            recv: reject(CompletionFlags::UNSIGNALLED.0 & !unsignalled(ep.attr.recv_completion_flags), receives),
        }
    }
}

impl<B: Backend> Ep<B> {
    /// An EP of these parts in `state`, with no QP yet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        ia: IaHandle,
        pz: PzHandle,
        (recv_evd, request_evd, connect_evd): (EvdHandle, EvdHandle, EvdHandle),
        srq: SrqHandle,
        attr: EpAttr,
        state: EpState,
        provider_owned: bool,
    ) -> Ep<B> {
        let mut ep = Ep {
            ia,
            pz,
            recv_evd,
            request_evd,
            connect_evd,
            srq,
            attr,
            connection: Connection::new(state, provider_owned),
            qp: None,
            post_masks: PostMasks::REFUSE_ALL,
            request_room: Room::new(attr.max_request_dtos),
            recv_room: Room::new(attr.max_recv_dtos),
            context: 0,
            name: 0,
            windows: 0,
            recv_direct: srq.is_null(),
            counting: false,
            ud: false,
            ahs: Members::EMPTY,
            lane_holds: LaneHolds::default(),
        };
        ep.post_masks = PostMasks::of(&ep);
        ep
    }

    /// This EP, of `DAT_IB_SERVICE_TYPE_UD`. Its receives name their
    /// sender, which the transport reads only on its ordinary poll: no
    /// dequeue lane settles them.
    pub(crate) fn datagram(mut self) -> Ep<B> {
        self.ud = true;
        self.attr = self.attr.for_datagrams();
        self.recv_direct = false;
        self.post_masks = PostMasks::of(&self);
        self
    }

    /// One window of `DAT_RMR_SCOPE_EP` more (`bound`) or fewer bound
    /// through this EP.
    pub(crate) fn count_window(&mut self, bound: bool) {
        self.windows = if bound { self.windows + 1 } else { self.windows.saturating_sub(1) };
        self.recv_direct = self.srq.is_null() && self.windows == 0 && !self.ud;
    }

    /// Start or stop counting; the post masks follow.
    pub(crate) fn set_counting(&mut self, on: bool) {
        self.counting = on;
        self.post_masks = PostMasks::of(self);
    }

    /// Requests posted and not yet completed.
    pub(crate) fn request_outstanding(&self) -> u32 {
        self.request_room.outstanding(self.attr.max_request_dtos)
    }

    /// Receives of the EP's own queue posted and not yet completed.
    pub(crate) fn recv_outstanding(&self) -> u32 {
        self.recv_room.outstanding(self.attr.max_recv_dtos)
    }

    /// Forget the outstanding work: dat_ep_reset(3DAT) flushed it.
    pub(crate) fn forget_outstanding(&mut self) {
        self.request_room = Room::new(self.attr.max_request_dtos);
        self.recv_room = Room::new(self.attr.max_recv_dtos);
    }

    /// The EP's state.
    #[inline(always)]
    pub(crate) fn state(&self) -> EpState {
        self.connection.state()
    }

    /// The EP's connection: its state, who holds it, the peer.
    #[inline(always)]
    pub(crate) fn connection(&self) -> &Connection {
        &self.connection
    }

    /// The EP's attributes.
    #[inline(always)]
    pub(crate) fn attr(&self) -> &EpAttr {
        &self.attr
    }

    /// The EP's QP, if it has one.
    #[inline(always)]
    pub(crate) fn qp(&self) -> Option<&B::Qp> {
        self.qp.as_ref()
    }

    /// The QP, once the EP is gone from its slab.
    pub(crate) fn into_qp(self) -> Option<B::Qp> {
        self.qp
    }

    /// The EP's QP, to post on or change in place (its presence is one of
    /// the post masks' facts; its contents are not).
    #[inline(always)]
    pub(crate) fn qp_mut(&mut self) -> Option<&mut B::Qp> {
        self.qp.as_mut()
    }

    /// The EP's QP, once its post mask admitted a post ([`PostMasks::READY`]
    /// clear): a mask admits only while the EP has a QP, so a lane does
    /// not test for it again.
    ///
    /// # Safety
    /// A post mask of this EP admitted a post, and the EP has not changed
    /// since.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn qp_admitted(&mut self) -> &mut B::Qp {
        debug_assert!(self.post_masks_current() && self.qp.is_some());
        // SAFETY: `PostMasks::of` clears `READY` only while `qp` holds a
        // QP, and `qp` changes only in `reconfigure`, which refuses every
        // post while it changes it and computes the masks anew after:
        // the masks that admitted are the QP's (the caller's promise).
        unsafe { self.qp.as_mut().unwrap_unchecked() }
    }

    /// The DTO completion rule, which every dequeue keeps: the EVD a
    /// completion of this EP goes to (of a receive if `recv`), and whether
    /// settling it changes this EP's accounts alone ([`Ep::settle_dto`]),
    /// as a dequeue's lane and a shared dequeue need: not for a receive
    /// that counts on an SRQ, nor one that may invalidate a window
    /// ([`Ep::recv_direct`]).
    #[inline(always)]
    pub(crate) fn dto_stream(&self, recv: bool) -> (EvdHandle, bool) {
        if recv {
            (self.recv_evd, self.recv_direct)
        } else {
            (self.request_evd, true)
        }
    }

    /// Count a DTO completion the ordinary poll took out of this EP's
    /// outstanding work, as [`Settle::dto`] does, with no room beyond the
    /// limit: that poll also takes what a transport flushed before
    /// dat_ep_reset(3DAT) forgot the outstanding work (udat-verbs hands
    /// its flushes over after the reset), which the lanes never take (a
    /// CQE from before the reset is discarded, or waits for this poll).
    pub(crate) fn settle_dto(&mut self, recv: bool, retired: u32) {
        if recv {
            self.recv_room.give_within(1, self.attr.max_recv_dtos);
        } else {
            self.request_room.give_within(retired, self.attr.max_request_dtos);
        }
    }

    /// This EP's QP, for a CQ's poll to complete its work, beside what
    /// settling the completion changes: the two halves a dequeue's lane
    /// holds at once.
    #[inline(always)]
    pub(crate) fn completing(&mut self) -> (Option<&mut B::Qp>, Settle<'_>) {
        let settle = Settle { request_room: &mut self.request_room, recv_room: &mut self.recv_room, name: self.name };
        (self.qp.as_mut(), settle)
    }

    /// Move the connection through `step`, one of [`Connection`]'s
    /// transitions; the post masks follow.
    #[inline]
    pub(crate) fn connection_moves<R>(&mut self, step: impl FnOnce(&mut Connection) -> R) -> R {
        let r = step(&mut self.connection);
        self.post_masks = PostMasks::of(self);
        r
    }

    /// Change the attributes or the QP through `change`; the post masks
    /// follow.
    #[inline]
    pub(crate) fn reconfigure<R>(&mut self, change: impl FnOnce(&mut EpAttr, &mut Option<B::Qp>) -> R) -> R {
        // No post is admitted while the QP changes, even if `change` does
        // not return ([`Ep::qp_admitted`] counts on the masks).
        self.post_masks = PostMasks::REFUSE_ALL;
        let old = (self.attr.max_request_dtos, self.attr.max_recv_dtos);
        let r = change(&mut self.attr, &mut self.qp);
        self.request_room.relimit(old.0, self.attr.max_request_dtos);
        self.recv_room.relimit(old.1, self.attr.max_recv_dtos);
        self.post_masks = PostMasks::of(self);
        r
    }

    /// Whether the post masks are the EP's own: what every lane asserts in
    /// a build with debug assertions, so that a change that forgot to
    /// refresh them shows in the first test that posts after it.
    #[inline(always)]
    pub(crate) fn post_masks_current(&self) -> bool {
        self.post_masks == PostMasks::of(self)
    }

    /// `DAT_COMPLETION_UNSIGNALLED_FLAG` on a post "is only valid if the
    /// Endpoint ... Completion Flags \[are\] DAT_COMPLETION_UNSIGNALLED_FLAG".
    pub(crate) fn unsignalled_allowed(&self, flags: CompletionFlags, recv: bool) -> bool {
        let stream = if recv { self.attr.recv_completion_flags } else { self.attr.request_completion_flags };
        !flags.contains(CompletionFlags::UNSIGNALLED) || stream.contains(CompletionFlags::UNSIGNALLED)
    }

    /// The `DAT_INVALID_STATE_EP_*` subtype of the current state.
    pub(crate) fn state_subtype(&self) -> Subtype {
        match self.state() {
            EpState::Unconnected => Subtype::InvalidStateEpUnconnected,
            EpState::Reserved => Subtype::InvalidStateEpReserved,
            EpState::PassiveConnectionPending => Subtype::InvalidStateEpPassconnpending,
            EpState::ActiveConnectionPending => Subtype::InvalidStateEpActconnpending,
            EpState::TentativeConnectionPending => Subtype::InvalidStateEpTentconnpending,
            EpState::Connected => Subtype::InvalidStateEpConnected,
            EpState::DisconnectPending => Subtype::InvalidStateEpDiscpending,
            EpState::Disconnected => Subtype::InvalidStateEpDisconnected,
            EpState::CompletionPending => Subtype::InvalidStateEpComplpending,
        }
    }

    pub(crate) fn streams(&self) -> Streams {
        Streams::new(self.ia, self.recv_evd, self.request_evd, self.connect_evd, &self.attr, self.srq)
            .holding(self.lane_holds)
    }
}

/// The EP's streams as they attach to EVDs.
pub(crate) struct Streams {
    pub(crate) ia: IaHandle,
    pub(crate) recv: (EvdHandle, NotifyMode),
    pub(crate) request: (EvdHandle, NotifyMode),
    pub(crate) connect: EvdHandle,
    /// The EP's holds on the lanes of the `recv` and `request` EVDs.
    pub(crate) holds: LaneHolds,
}

impl Streams {
    pub(crate) fn new(
        ia: IaHandle,
        recv: EvdHandle,
        request: EvdHandle,
        connect: EvdHandle,
        attr: &EpAttr,
        srq: SrqHandle,
    ) -> Streams {
        let recv_mode = if srq.is_null() {
            NotifyMode::of(attr.recv_completion_flags)
        } else if attr.recv_completion_flags.contains(CompletionFlags::SOLICITED_WAIT) {
            NotifyMode::Solicited
        } else {
            // dat_ep_create_with_srq(3DAT): "completions of all Recv DTO
            // posted to SRQ complete with Signal".
            NotifyMode::Threshold
        };
        let request = (request, NotifyMode::of(attr.request_completion_flags));
        Streams { ia, recv: (recv, recv_mode), request, connect, holds: LaneHolds::default() }
    }

    /// These streams, carrying the lane holds `holds`.
    pub(crate) fn holding(self, holds: LaneHolds) -> Streams {
        Streams { holds, ..self }
    }
}

impl EpAttr {
    /// These attributes for a UD EP: no message beyond one packet
    /// ([`UD_MAX_MESSAGE`](crate::backend::UD_MAX_MESSAGE)).
    pub(crate) fn for_datagrams(self) -> EpAttr {
        EpAttr { max_message_size: self.max_message_size.min(crate::backend::UD_MAX_MESSAGE), ..self }
    }

    /// The attributes an EP gets when the consumer gives none: what the
    /// device allows, kept small.
    pub fn provider_default(ia: &IaAttr) -> EpAttr {
        EpAttr {
            max_message_size: ia.max_message_size,
            max_rdma_size: ia.max_rdma_size,
            qos: Qos::BEST_EFFORT,
            recv_completion_flags: CompletionFlags::DEFAULT,
            request_completion_flags: CompletionFlags::DEFAULT,
            max_recv_dtos: ia.max_dto_per_ep.min(16),
            max_request_dtos: ia.max_dto_per_ep.min(16),
            max_recv_iov: ia.max_iov_segments_per_dto.min(4),
            max_request_iov: ia.max_iov_segments_per_dto.min(4),
            max_rdma_read_in: ia.max_rdma_read_per_ep_in.min(4),
            max_rdma_read_out: ia.max_rdma_read_per_ep_out.min(4),
        }
    }

    /// These attributes with a zero `max_message_size` or `max_rdma_size`
    /// read as the IA's maximum. The man pages give zero no meaning; OFA's
    /// providers take it as "no limit of the consumer's own", and the
    /// OpenFabrics test programs create their Endpoints so.
    pub(crate) fn resolved(&self, ia: &IaAttr) -> EpAttr {
        let pick = |v: u32, max: u32| if v == 0 { max } else { v };
        EpAttr {
            max_message_size: pick(self.max_message_size, ia.max_message_size),
            max_rdma_size: pick(self.max_rdma_size, ia.max_rdma_size),
            ..*self
        }
    }

    /// Whether the device can give these attributes: `DAT_INVALID_PARAMETER`
    /// for values out of range, `DAT_MODEL_NOT_SUPPORTED` for a QoS it lacks.
    /// `attributes` is the call's parameter that holds them.
    pub(crate) fn check(&self, ia: &IaAttr, attributes: impl Parameter) -> DatResult<()> {
        let recv_ok = [
            CompletionFlags::DEFAULT,
            CompletionFlags::UNSIGNALLED,
            CompletionFlags::SOLICITED_WAIT,
            CompletionFlags::EVD_THRESHOLD,
        ]
        .contains(&self.recv_completion_flags);
        let request_ok = [CompletionFlags::DEFAULT, CompletionFlags::UNSIGNALLED, CompletionFlags::EVD_THRESHOLD]
            .contains(&self.request_completion_flags);
        let in_range = self.max_message_size <= ia.max_message_size
            && self.max_rdma_size <= ia.max_rdma_size
            && self.max_recv_dtos <= ia.max_dto_per_ep
            && self.max_request_dtos <= ia.max_dto_per_ep
            && self.max_recv_iov <= ia.max_iov_segments_per_dto
            && self.max_request_iov <= ia.max_iov_segments_per_dto
            && self.max_rdma_read_in <= ia.max_rdma_read_per_ep_in
            && self.max_rdma_read_out <= ia.max_rdma_read_per_ep_out;
        if !recv_ok || !request_ok || !in_range || !self.qos.is_valid() {
            return Err(DatError::invalid(attributes));
        }
        if self.qos.0 & !ia.qos_supported.0 != 0 {
            return Err(DatError::of(ErrorType::ModelNotSupported));
        }
        Ok(())
    }
}

/// The EPs of a slab as the QPs a CQ's poll completes work of
/// ([`Qps`]): a QP's tag is its EP's handle (`Provider::qp_build`).
pub(crate) struct EpQps<'a, B: Backend, S: SlotsOf<Ep<B>>>(pub(crate) &'a mut Slab<Ep<B>, S>);

impl<B: Backend, S: SlotsOf<Ep<B>>> Qps<B::Qp> for EpQps<'_, B, S> {
    #[inline(always)]
    fn by_tag(&mut self, tag: u64) -> Option<&mut B::Qp> {
        self.0.get_mut(RawHandle::from_bits(tag))?.qp_mut()
    }
}

/// The accounts a DTO completion of an EP settles, apart from its QP
/// ([`Ep::completing`]), and the name its events carry.
pub(crate) struct Settle<'e> {
    request_room: &'e mut Room,
    recv_room: &'e mut Room,
    /// [`Ep::name`].
    pub(crate) name: u64,
}

impl Settle<'_> {
    /// Count a DTO completion a lane took out of the EP's outstanding
    /// work: a receive of its own queue, or the `retired` requests a
    /// request's completion retires (unsignalled ones before it complete
    /// with it). A lane takes only work the EP counted since any reset
    /// (`Backend::qp_reset`), so the room needs no bound here, as it does
    /// in [`Ep::settle_dto`].
    #[inline(always)]
    pub(crate) fn dto(self, recv: bool, retired: u32) {
        if recv {
            self.recv_room.give(1);
        } else {
            self.request_room.give(retired);
        }
    }
}

/// What an EP may still have outstanding on one side: its limit
/// (`max_request_dtos` or `max_recv_dtos`, dat_ep_create(3DAT)) less the
/// work posted and not yet completed. Kept as the room, not the count, so
/// that a post tests it against none and a completion adds to it with no
/// floor to keep. Signed, so that a limit moved by [`Ep::reconfigure`]
/// keeps the outstanding count exact even when it falls below it. A
/// completion of work from before dat_ep_reset(3DAT) forgot it gives
/// back no room beyond the limit ([`Ep::settle_dto`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Room(i64);

impl Room {
    /// Room for `limit`, with nothing outstanding.
    pub(crate) fn new(limit: u32) -> Self {
        Room(i64::from(limit))
    }

    /// Whether a post would exceed the limit.
    #[inline(always)]
    pub(crate) fn full(self) -> bool {
        self.0 <= 0
    }

    /// One more outstanding: a post taken.
    #[inline(always)]
    pub(crate) fn take(&mut self) {
        self.0 = self.0.wrapping_sub(1);
    }

    /// `n` fewer outstanding: a completion settled.
    #[inline(always)]
    pub(crate) fn give(&mut self, n: u32) {
        self.0 = self.0.wrapping_add(i64::from(n));
    }

    /// [`Room::give`], up to `limit` at most.
    fn give_within(&mut self, n: u32, limit: u32) {
        self.0 = self.0.saturating_add(i64::from(n)).min(i64::from(limit));
    }

    /// How many are outstanding under `limit`; none when the transport
    /// completed more than was counted.
    pub(crate) fn outstanding(self, limit: u32) -> u32 {
        u32::try_from(i64::from(limit).saturating_sub(self.0).max(0)).unwrap_or(u32::MAX)
    }

    /// The limit moved from `old` to `new`, with the same work outstanding.
    fn relimit(&mut self, old: u32, new: u32) {
        self.0 = self.0.wrapping_add(i64::from(new) - i64::from(old));
    }
}
