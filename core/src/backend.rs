//! The transport under the core.
//!
//! The core owns every rule of the DAT specification; a backend never
//! decides whether a call is legal. It creates and destroys transport
//! objects, posts work, reports completions and connection events, and
//! blocks until something happens. The core drives it the way smoltcp's
//! sockets drive a `phy::Device`: generically, with no `dyn` on the data
//! path.
//!
//! Tags: the core hands the backend a 64-bit tag (a packed handle) with
//! every QP, CQ and listener; the backend echoes it in completions,
//! connection events and device errors. A tag whose object is gone is
//! ignored, which is how stale completions of a destroyed QP are filtered.
//!
//! Obligations of an implementation:
//! - every posted work request completes exactly once through
//!   [`Backend::cq_poll`], with success, an error, or
//!   [`DtoStatus::Flushed`] once the QP has been disconnected; flushes come
//!   in post order;
//! - a request posted with [`CompletionFlags::SUPPRESS`] that succeeds
//!   produces no completion; the next completion of that QP's send queue
//!   carries it in [`Completion::retired`];
//! - after [`ConnectionManager::disconnect`], a `Disconnected` connection event for
//!   the QP may or may not follow; the core ignores it once the EP is
//!   already disconnected;
//! - device errors (a QP or CQ in error, a port down, a device failure)
//!   arrive through [`ConnectionManager::poll_cm`] as [`CmEvent`]s, and a wait
//!   wakes for them as for connection events;
//! - once the core has called [`Backend::cq_failed`], `cq_poll` of that
//!   CQ hands out what it still holds, then [`DtoStatus::Flushed`] for each
//!   work request still outstanding on a QP reporting to it, once each:
//!   the device writes no more completions there.

use crate::error::DatResult;
use crate::types::{CompletionFlags, DtoOp, DtoStatus, IaAddress, IaAttr, MemPriv, RmrTriplet, SrqAttr};

/// Most private data a connection event can carry.
pub const MAX_PRIVATE_DATA: usize = 196;

/// Connection private data.
pub type PrivateData = crate::store::FixedVec<u8, MAX_PRIVATE_DATA>;

/// Most scatter/gather entries one work request may have.
pub const MAX_SGE: usize = 16;

/// A translated local segment: what the transport puts on the wire. Laid
/// out as verbs' `struct ibv_sge`, so a transport over libibverbs hands the
/// segments to the device as they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Sge {
    /// The first byte, a virtual address inside the registration.
    pub addr: u64,
    /// Bytes in the segment.
    pub length: u32,
    /// The local key of the registration that covers the segment.
    pub lkey: u32,
}

/// The request half of a work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestOp {
    /// The segments go to a receive the peer posted
    /// (dat_ep_post_send(3DAT)).
    Send,
    /// The segments are written to the peer's memory
    /// (dat_ep_post_rdma_write(3DAT)).
    RdmaWrite {
        /// The peer's memory.
        remote: RmrTriplet,
    },
    /// The peer's memory is read into the segments
    /// (dat_ep_post_rdma_read(3DAT)).
    RdmaRead {
        /// The peer's memory.
        remote: RmrTriplet,
    },
    /// An RDMA write whose immediate data consumes a receive at the peer.
    RdmaWriteImm {
        /// The peer's memory.
        remote: RmrTriplet,
        /// Carried by the completion of the peer's receive.
        imm: u32,
    },
    /// Compare the 8 bytes at `remote` with `compare`, write `swap` if
    /// equal; the old value lands in the one 8-byte local segment.
    CompareSwap {
        /// The peer's 8 bytes.
        remote: RmrTriplet,
        /// The value expected there.
        compare: u64,
        /// The value written if the expected one is there.
        swap: u64,
    },
    /// Add `add` to the 8 bytes at `remote`; the old value lands locally.
    FetchAdd {
        /// The peer's 8 bytes.
        remote: RmrTriplet,
        /// The addend.
        add: u64,
    },
    /// A send that also invalidates the peer's window `rkey`
    /// (dat_ep_post_send_with_invalidate of `<dat2/dat.h>`; verbs'
    /// `IBV_WR_SEND_WITH_INV`): the receive it consumes completes as
    /// [`DtoOp::ReceiveWithInvalidate`] carrying `rkey`.
    SendInvalidate {
        /// The peer's context to invalidate.
        rkey: u32,
    },
}

/// The transport service of a QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected: one peer, every DTO of DAT (verbs'
    /// `IBV_QPT_RC`).
    #[default]
    Rc,
    /// Unreliable datagram: sends to any peer an address handle names, no
    /// RDMA (the IB extension's `DAT_IB_SERVICE_TYPE_UD`; verbs'
    /// `IBV_QPT_UD`).
    Ud,
}

/// The global route of an address (verbs' `struct ibv_global_route`):
/// needed by every address on RoCE, and across subnets on InfiniBand.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grh {
    /// The peer's GID.
    pub dgid: [u8; 16],
    /// The index of the local GID the datagram leaves from.
    pub sgid_index: u8,
    /// Routers the datagram may cross.
    pub hop_limit: u8,
    /// The traffic class.
    pub traffic_class: u8,
    /// The flow label (20 bits).
    pub flow_label: u32,
}

/// Where a datagram goes (verbs' `struct ibv_ah_attr`): what the connection
/// manager learned of a UD peer, from which the transport makes an address
/// handle ([`Backend::ah_create`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AhAttr {
    /// The peer's port LID (InfiniBand; 0 on RoCE).
    pub dlid: u16,
    /// The service level.
    pub sl: u8,
    /// The local port the datagram leaves from.
    pub port_num: u8,
    /// The global route; on RoCE always present.
    pub grh: Option<Grh>,
}

/// The far end of a UD connection, as the connection manager reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdPeer {
    /// Its address.
    pub ah: AhAttr,
    /// Its QP number.
    pub qpn: u32,
    /// The Q_Key its QP accepts.
    pub qkey: u32,
}

/// What a UD send names beside its address handle (verbs' `wr.ud`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdDest {
    /// The destination QP.
    pub remote_qpn: u32,
    /// The Q_Key the destination QP checks.
    pub qkey: u32,
}

/// The Q_Key of every UD QP udat makes, and the one it sends with, as OFA
/// dapl's `DAT_UD_QKEY`: DAT has no call that sets one.
pub const UD_QKEY: u32 = 0x7865_4321;

/// The bytes of the Global Routing Header that lead every datagram in a
/// UD receive buffer: ibv_post_recv(3), "the Global Routing Header (GRH)
/// of the incoming message will be placed in the first 40 bytes of the
/// buffer(s) ... in all cases, the actual data of the incoming message will
/// start at an offset of 40 bytes".
pub const GRH_BYTES: u32 = 40;

/// The largest message a UD send carries: a datagram is one packet
/// (IBTA Vol. 1, chapter 9, unreliable datagram service), and 4096 bytes
/// is the largest path MTU. A UD EP's `max_message_size` is no larger.
pub const UD_MAX_MESSAGE: u32 = 4096;

/// A send-queue work request.
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    /// What the request does, with its remote operands.
    pub op: RequestOp,
    /// The local segments, translated.
    pub sges: &'a [Sge],
    /// Bytes the segments cover, as the core summed them (at most the
    /// EP's message or RDMA size, so it fits).
    pub length: u32,
    /// Echoed in the completion.
    pub cookie: u64,
    /// `SUPPRESS`, `SOLICITED_WAIT`, `UNSIGNALLED`, `BARRIER_FENCE`.
    pub flags: CompletionFlags,
}

/// A memory registration as the backend made it.
#[derive(Debug)]
pub struct Registration<M> {
    /// The transport's own object for the registration.
    pub mr: M,
    /// The key local segments name the registration by.
    pub lkey: u32,
    /// The key a remote peer uses; meaningful only with remote privileges.
    pub rkey: u32,
    /// The range registered, `[address, address + length)`: it may be
    /// larger than the one asked for, and must not wrap (a registration
    /// that does is refused with `DAT_INTERNAL_ERROR`).
    pub address: u64,
    /// Bytes registered from `address`.
    pub length: u64,
}

/// One completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The QP's tag.
    pub tag: u64,
    /// The cookie of the work request.
    pub cookie: u64,
    /// How the work request ended.
    pub status: DtoStatus,
    /// What the work request was.
    pub op: DtoOp,
    /// Bytes moved; for a receive, the bytes that arrived.
    pub transferred_length: u32,
    /// The immediate data of a [`DtoOp::ReceiveImm`] or
    /// [`DtoOp::ReceiveMsgImm`], the context the peer invalidated for a
    /// [`DtoOp::ReceiveWithInvalidate`], the sender's QP number for a
    /// [`DtoOp::ReceiveUd`]; 0 otherwise.
    pub imm: u32,
    /// Work requests this completion retires: 1, plus any suppressed
    /// successes posted before it on the same send queue.
    pub retired: u32,
    /// Whether the event notifies (is not `UNSIGNALLED`).
    pub notify: bool,
}

impl Completion {
    /// A placeholder for poll buffers.
    pub const EMPTY: Completion = Completion {
        tag: 0,
        cookie: 0,
        status: DtoStatus::Success,
        op: DtoOp::Send,
        transferred_length: 0,
        imm: 0,
        retired: 1,
        notify: true,
    };
}

/// What a call on a shared provider came to ([`crate::shared`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shared<T> {
    /// The call was made; its result.
    Done(T),
    /// Nothing to take.
    Empty,
    /// Nothing to take, and the connection events of the object's IA are
    /// to be looked at now, which only an exclusive call does: make the
    /// call again through `&mut`. The caller's clock counted the look as
    /// made; nothing else was changed.
    Look,
    /// The call needs the provider to itself: make it again through
    /// `&mut`. Nothing was changed.
    NeedsExclusive,
}

/// Why a dequeue's lane took nothing from a CQ ([`Backend::cq_lane`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Untaken {
    /// The CQ holds nothing: [`Backend::cq_poll`] would now find nothing
    /// and change nothing.
    Empty,
    /// An entry the lane leaves to [`Backend::cq_poll`], or one `accept`
    /// refused; or a transport with no lane. The ordinary dequeue decides.
    Declined,
}

/// What the next CQE of a CQ is for, as [`Backend::cq_lane`] and
/// [`Backend::cq_take_shared`] show it before they take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqHead {
    /// The QP's tag.
    pub tag: u64,
    /// Whether the CQE is a receive's, done or failed.
    pub recv: bool,
    /// Whether the transport vouches that the QP lives
    /// ([`CqHead::of_live_qp`]).
    live: bool,
}

impl CqHead {
    /// The head of a CQE for the QP of `tag`, as the transport found it:
    /// the core judges the tag as it judges any handle.
    #[inline(always)]
    pub const fn new(tag: u64, recv: bool) -> CqHead {
        CqHead { tag, recv, live: false }
    }

    /// The head of a CQE for a QP the transport vouches lives: the core
    /// then takes the EP the tag names without judging it, since it tags
    /// a QP with the handle of the EP that holds it until it destroys it
    /// ([`Backend::qp_create`]); nor does it judge the CQE's stream, since
    /// an EP's EVDs change only with its QP.
    ///
    /// # Safety
    /// `tag` is what [`Backend::qp_create`] was given for a QP of this
    /// transport that [`Backend::qp_destroy`] has not yet taken, and the
    /// CQE is of the CQ that call was given for the CQE's stream: its
    /// `recv_cq` if `recv`, else its `send_cq`.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub const unsafe fn of_live_qp(tag: u64, recv: bool) -> CqHead {
        CqHead { tag, recv, live: true }
    }

    /// Whether the transport vouched that the QP lives
    /// ([`CqHead::of_live_qp`]).
    #[inline(always)]
    pub const fn is_live(self) -> bool {
        self.live
    }
}

/// What a connection attempt or connection came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnOutcome {
    /// The connection is up (`DAT_CONNECTION_EVENT_ESTABLISHED`).
    Established,
    /// The peer refused the request (`DAT_CONNECTION_EVENT_PEER_REJECTED`).
    PeerRejected,
    /// Something other than the peer refused it, such as no listener on
    /// the qualifier (`DAT_CONNECTION_EVENT_NON_PEER_REJECTED`).
    NonPeerRejected,
    /// No route leads to the peer (`DAT_CONNECTION_EVENT_UNREACHABLE`).
    Unreachable,
    /// The attempt ran out of time (`DAT_CONNECTION_EVENT_TIMED_OUT`).
    TimedOut,
    /// An accept did not complete
    /// (`DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR`).
    AcceptError,
    /// The connection was torn down (`DAT_CONNECTION_EVENT_DISCONNECTED`).
    Disconnected,
    /// The connection failed (`DAT_CONNECTION_EVENT_BROKEN`).
    Broken,
}

/// A connection-manager event.
#[derive(Debug)]
pub enum CmEvent<R> {
    /// A request arrived at the listener with `listener` tag.
    Request {
        /// The listener's tag.
        listener: u64,
        /// The transport's request, to accept or reject.
        request: R,
        /// The requester's address.
        remote: IaAddress,
        /// The requester's port (dat_cr_query(3DAT) `remote_port_qual`).
        remote_port: u64,
        /// What the requester sent with the request.
        private_data: PrivateData,
        /// The requester's QP is UD: the request resolves an address,
        /// and an accept answers with the accepting QP's.
        ud: bool,
    },
    /// A UD connection of the QP with `tag` is set up: on the active side
    /// when the peer accepted, on the passive side when the accept
    /// completed. Each connect or accept of a UD QP ends in one.
    UdEstablished {
        /// The QP's tag.
        tag: u64,
        /// The peer.
        peer: UdPeer,
        /// The peer's IA address.
        remote: IaAddress,
        /// Whether the QP accepted (passive) rather than connected.
        passive: bool,
        /// What the peer sent with its request or accept.
        private_data: PrivateData,
    },
    /// The QP with `tag` changed connection state.
    Conn {
        /// The QP's tag.
        tag: u64,
        /// The new state.
        outcome: ConnOutcome,
        /// What the peer sent with it.
        private_data: PrivateData,
    },
    /// The QP with `tag` went to the error state on its own: a local
    /// work-queue catastrophe, an invalid request or a local access error
    /// (verbs' `IBV_EVENT_QP_FATAL`, `IBV_EVENT_QP_REQ_ERR`,
    /// `IBV_EVENT_QP_ACCESS_ERR`). Its connection is gone; the transport
    /// flushes what it holds.
    QpError {
        /// The QP's tag.
        tag: u64,
    },
    /// The CQ with `tag` failed: it overran (verbs' `IBV_EVENT_CQ_ERR`; on
    /// a ConnectX, PRM "Completion Queue Error"). It takes no more
    /// completions, and every QP reporting to it goes to the error state.
    CqError {
        /// The CQ's tag.
        tag: u64,
    },
    /// The port went down (verbs' `IBV_EVENT_PORT_ERR`). Objects stay; the
    /// connections over it fail in their own time.
    PortDown,
    /// The device failed: every QP is gone.
    Catastrophic,
}

/// How a blocking wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Something may have happened: poll again.
    Activity,
    /// The timeout passed.
    Timeout,
    /// A signal interrupted the wait.
    Interrupted,
}

/// Descriptors of an operating system that become readable when a
/// transport may have something for an IA: what an event loop sleeps on
/// instead of [`Backend::block`]. Unused places hold -1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitFds(pub [i32; 4]);

impl WaitFds {
    /// A transport with nothing to sleep on.
    pub const NONE: WaitFds = WaitFds([-1; 4]);

    /// The descriptors in use.
    pub fn iter(&self) -> impl Iterator<Item = i32> + '_ {
        self.0.iter().copied().filter(|fd| *fd >= 0)
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

/// The shape of a QP.
#[derive(Debug)]
pub struct QpConfig<'a, B: Backend + ?Sized> {
    /// The protection domain (the EP's PZ).
    pub pd: &'a B::Pd,
    /// The CQ of request completions (the request EVD's), if any.
    pub send_cq: Option<&'a B::Cq>,
    /// The CQ of receive completions (the receive EVD's), if any.
    pub recv_cq: Option<&'a B::Cq>,
    /// The SRQ the QP receives from, if any.
    pub srq: Option<&'a B::Srq>,
    /// Most requests outstanding on the send queue.
    pub max_send_wr: u32,
    /// Most receives outstanding on the receive queue.
    pub max_recv_wr: u32,
    /// Most segments in one request.
    pub max_send_sge: u32,
    /// Most segments in one receive.
    pub max_recv_sge: u32,
    /// Most RDMA reads the peer may have in flight against the QP.
    pub max_rdma_read_in: u32,
    /// Most RDMA reads the QP may have in flight.
    pub max_rdma_read_out: u32,
    /// RC, or UD for an EP of `DAT_IB_SERVICE_TYPE_UD`.
    pub qp_type: QpType,
}

/// The QPs a poll of a CQ may complete work of, each reached by the tag
/// it was made with ([`Backend::qp_create`]). The core holds each QP in
/// its EP, so a transport that keeps a QP's queues in the QP itself
/// finds them here, by the tag its CQE's QP number leads to, with no
/// table of its own.
pub trait Qps<Q> {
    /// The QP made with `tag`, if its EP still holds it.
    fn by_tag(&mut self, tag: u64) -> Option<&mut Q>;
}

/// CQs the core holds in its EVDs, handed to a call that reaches CQs
/// other than the one it polls: every CQ for [`Backend::block`], a QP's
/// own for [`Backend::qp_destroy`] and [`Backend::qp_reset`]. A transport
/// that keeps a CQ's ring in the CQ itself reaches it here, with no table
/// of its own.
pub trait Cqs<C> {
    /// Run `f` on each CQ, once.
    fn each(&mut self, f: impl FnMut(&mut C));
}

/// What a dequeue's lane ([`Backend::cq_lane`]) or a shared dequeue
/// ([`Backend::cq_take_shared`]) is handed back for the EP a CQE is for,
/// while it holds the EP: the EP's QP, whose work the transport then
/// completes.
pub trait HoldsQp<Q> {
    /// The QP.
    fn qp(&mut self) -> &mut Q;
}

/// A transport. See the module documentation for its obligations.
pub trait Backend {
    /// An open device.
    type Ia;
    /// A protection domain: a PZ's transport half.
    type Pd;
    /// A memory registration: an LMR's transport half.
    type Mr;
    /// A memory window: an RMR's transport half.
    type Mw;
    /// A completion queue: an EVD's transport half.
    type Cq;
    /// A queue pair: an EP's transport half.
    type Qp;
    /// A shared receive queue: an SRQ's transport half.
    type Srq;
    /// An address handle: where a UD send goes.
    type Ah;
    /// A request of one segment kept built for one QP, which
    /// [`Backend::post_kept`] posts again with a new cookie
    /// ([`Backend::keep_one`]); its default stands where the transport
    /// built nothing. `()` for a transport that keeps no requests.
    type Kept: Clone + core::fmt::Debug + Default;
    /// The connection manager: rdma_cm's for udat-verbs, itself for a
    /// test backend, its device's for the mlx5 data path.
    type Cm: ConnectionManager<Ia = Self::Ia>;
    /// The control calls: itself for a test backend, rdma-core's for
    /// udat-verbs, its device's for the mlx5 data path.
    type Control: Control<Ia = Self::Ia, Pd = Self::Pd, Mr = Self::Mr>;

    /// The connection manager.
    fn cm(&mut self) -> &mut Self::Cm;
    /// The connection manager's half of `qp`.
    fn cm_qp(qp: &mut Self::Qp) -> &mut <Self::Cm as ConnectionManager>::Qp;
    /// The control calls: devices, protection domains and registrations.
    fn control(&mut self) -> &mut Self::Control;

    /// A new, unbound memory window in `pd` (dat_rmr_create(3DAT)).
    fn mw_alloc(&mut self, pd: &Self::Pd) -> DatResult<Self::Mw>;
    /// Release a memory window (dat_rmr_free(3DAT)).
    fn mw_free(&mut self, mw: Self::Mw);
    /// A new, unbound type 2 memory window in `pd`: bound to the QP that
    /// binds it, unbound by a local or the peer's invalidation
    /// (dat_rmr_create_for_ep of `<dat2/dat.h>`; verbs' `IBV_MW_TYPE_2`).
    /// [`Backend::post_bind`] of such a window with no `mr` invalidates
    /// it. A transport without type 2 windows refuses with
    /// `DAT_MODEL_NOT_SUPPORTED`.
    fn mw_alloc_for_ep(&mut self, _pd: &Self::Pd) -> DatResult<Self::Mw> {
        Err(crate::error::DatError::of(crate::error::ErrorType::ModelNotSupported))
    }

    /// A new CQ of at least `min_entries` entries (dat_evd_create(3DAT));
    /// a [`CmEvent::CqError`] of it carries `tag`.
    fn cq_create(&mut self, ia: &mut Self::Ia, min_entries: u32, tag: u64) -> DatResult<Self::Cq>;
    /// `cq` failed ([`CmEvent::CqError`]): from now on its poll completes
    /// what the QPs reporting to it still hold as flushed (see the module
    /// documentation). A transport whose device still writes the flushes
    /// of a QP in error to such a CQ has nothing to do.
    fn cq_failed(&mut self, _cq: &mut Self::Cq) {}
    /// Give `cq` room for at least `min_entries` entries
    /// (dat_evd_resize(3DAT)).
    fn cq_resize(&mut self, cq: &mut Self::Cq, min_entries: u32) -> DatResult<()>;
    /// Release a CQ (dat_evd_free(3DAT)).
    fn cq_destroy(&mut self, cq: Self::Cq);
    /// Fill `out` with up to `out.len()` completions; return how many.
    /// The QPs whose work they complete are `qps`'.
    fn cq_poll(&mut self, cq: &mut Self::Cq, qps: &mut impl Qps<Self::Qp>, out: &mut [Completion]) -> usize;

    /// A new QP of `config`'s shape, for an EP that has a PZ; its
    /// completions and connection events carry `tag`. The core gives the
    /// handle of the EP that holds the QP, and holds it there until it
    /// hands it to [`Backend::qp_destroy`], with no dequeue between the
    /// EP's free and that ([`CqHead::of_live_qp`] relies on it).
    fn qp_create(&mut self, config: &QpConfig<'_, Self>, tag: u64) -> DatResult<Self::Qp>;
    /// Release a QP (dat_ep_free(3DAT), or dat_ep_modify(3DAT) replacing
    /// it). `cqs` are the CQs it was made with that still exist: what it
    /// left in them must not reach a QP made later.
    fn qp_destroy(&mut self, qp: Self::Qp, cqs: &mut impl Cqs<Self::Cq>);
    /// Make a disconnected QP connectable again (`dat_ep_reset`); `cqs`
    /// as for [`Backend::qp_destroy`]. A completion of the QP's work from
    /// before the reset is discarded, or left to [`Backend::cq_poll`]:
    /// [`Backend::cq_lane`] never takes one, so that the lanes count
    /// only work the EP counted since (`Ep::settle_dto`).
    fn qp_reset(&mut self, qp: &mut Self::Qp, cqs: &mut impl Cqs<Self::Cq>) -> DatResult<()>;
    /// Whether a disconnected QP still owes flushes that a reset would
    /// lose, so that a caller can wait for them before
    /// [`Backend::qp_reset`], and not inside it. A transport whose flushes
    /// are complete by the time a disconnect returns owes none.
    fn qp_unflushed(&mut self, _qp: &mut Self::Qp) -> bool {
        false
    }

    /// Post `wr` on `qp`'s send queue (dat_ep_post_send(3DAT),
    /// dat_ep_post_rdma_read(3DAT), dat_ep_post_rdma_write(3DAT)).
    fn post_send(&mut self, qp: &mut Self::Qp, wr: &SendWr<'_>) -> DatResult<()>;

    /// An address handle in `pd` for `attr` (verbs' `ibv_create_ah`). A
    /// transport without UD refuses with `DAT_MODEL_NOT_SUPPORTED`.
    fn ah_create(&mut self, _pd: &Self::Pd, _attr: &AhAttr) -> DatResult<Self::Ah> {
        Err(crate::error::DatError::of(crate::error::ErrorType::ModelNotSupported))
    }
    /// Release an address handle (verbs' `ibv_destroy_ah`): no send of it
    /// is outstanding.
    fn ah_destroy(&mut self, _ah: Self::Ah) {}
    /// Post the send `wr` (its op is [`RequestOp::Send`]) on the UD QP
    /// `qp`, to `dest` through `ah` (verbs' `ibv_post_send` with `wr.ud`).
    /// It completes as [`DtoOp::SendUd`]; the
    /// receive it consumes as [`DtoOp::ReceiveUd`].
    fn post_send_ud(&mut self, _qp: &mut Self::Qp, _ah: &Self::Ah, _dest: UdDest, _wr: &SendWr<'_>) -> DatResult<()> {
        Err(crate::error::DatError::of(crate::error::ErrorType::ModelNotSupported))
    }

    /// The lane of a request of one local segment (the core's `lane` module):
    /// `true` when the transport took it, `false` when it left no trace,
    /// and the ordinary [`Backend::post_send`] then decides. `sge.length`
    /// is the request's length, never 0 (a lane leaves an empty request to
    /// the ordinary post); the core has checked the request. It must
    /// not panic: callers run it outside any unwinding guard. A transport
    /// may offer no lane at all.
    #[inline(always)]
    fn post_one(
        &mut self,
        _qp: &mut Self::Qp,
        _op: RequestOp,
        _sge: Sge,
        _cookie: u64,
        _flags: CompletionFlags,
    ) -> bool {
        false
    }

    /// `op` of the one segment `sge` with `flags`, built for `qp` once so
    /// that [`Backend::post_kept`] posts it as [`Backend::post_one`]
    /// would, with only the cookie new; `None` where the transport keeps
    /// no such request (the core then posts it through the lane each
    /// time). The core has checked the request as for `post_one`.
    fn keep_one(&self, _qp: &Self::Qp, _op: RequestOp, _sge: Sge, _flags: CompletionFlags) -> Option<Self::Kept> {
        None
    }

    /// Whether the lane of `kept` is short enough to go in line into
    /// every post of a kept request; the others are posted through a call,
    /// so that what their lanes keep in registers does not weigh on it.
    #[inline(always)]
    fn keeps_hot(_kept: &Self::Kept) -> bool {
        false
    }

    /// The lane of a request [`Backend::keep_one`] built for `qp`, with
    /// `cookie`: `true` when the transport took it, `false` when it left
    /// no trace, as [`Backend::post_one`]'s. The core has checked the
    /// request when it was kept, and the EP's room now. It must not
    /// panic.
    #[inline(always)]
    fn post_kept(&mut self, _qp: &mut Self::Qp, _kept: &Self::Kept, _cookie: u64) -> bool {
        false
    }

    /// [`Backend::post_one`] through a shared backend.
    ///
    /// # Safety
    /// As [`Backend::post_send_shared`].
    #[allow(unsafe_code)]
    #[inline(always)]
    unsafe fn post_one_shared(
        &self,
        _qp: &mut Self::Qp,
        _op: RequestOp,
        _sge: Sge,
        _cookie: u64,
        _flags: CompletionFlags,
    ) -> bool {
        false
    }

    /// Whether the transport's queues may be driven from several threads
    /// at once, each queue by one thread at a time, through
    /// [`Backend::post_send_shared`], [`Backend::post_recv_shared`],
    /// [`Backend::srq_post_recv_shared`] and [`Backend::cq_take_shared`] (see [`crate::shared`]). A transport
    /// that says no is only ever driven through `&mut self`.
    const SHARED_QUEUES: bool = false;

    /// [`Backend::post_send`] through a shared backend.
    ///
    /// # Safety
    /// No `&mut self` exists while this runs, and no other thread uses
    /// `qp`'s queues: the caller holds the lock of `qp`'s EP. Only called
    /// when [`Backend::SHARED_QUEUES`] holds.
    #[allow(unsafe_code)]
    unsafe fn post_send_shared(&self, _qp: &mut Self::Qp, _wr: &SendWr<'_>) -> DatResult<()> {
        Err(crate::error::DatError::of(crate::error::ErrorType::InternalError))
    }

    /// [`Backend::post_send_ud`] through a shared backend.
    ///
    /// # Safety
    /// As [`Backend::post_send_shared`].
    #[allow(unsafe_code)]
    unsafe fn post_send_ud_shared(
        &self,
        _qp: &mut Self::Qp,
        _ah: &Self::Ah,
        _dest: UdDest,
        _wr: &SendWr<'_>,
    ) -> DatResult<()> {
        Err(crate::error::DatError::of(crate::error::ErrorType::ModelNotSupported))
    }

    /// [`Backend::post_recv`] through a shared backend.
    ///
    /// # Safety
    /// As [`Backend::post_send_shared`].
    #[allow(unsafe_code)]
    unsafe fn post_recv_shared(&self, _qp: &mut Self::Qp, _sges: &[Sge], _cookie: u64) -> DatResult<()> {
        Err(crate::error::DatError::of(crate::error::ErrorType::InternalError))
    }

    /// [`Backend::srq_post_recv`] through a shared backend.
    ///
    /// # Safety
    /// No `&mut self` exists while this runs, and no other thread uses
    /// `srq`: the caller holds the lock of its SRQ. Only called when
    /// [`Backend::SHARED_QUEUES`] holds.
    #[allow(unsafe_code)]
    unsafe fn srq_post_recv_shared(&self, _srq: &mut Self::Srq, _sges: &[Sge], _cookie: u64) -> DatResult<()> {
        Err(crate::error::DatError::of(crate::error::ErrorType::InternalError))
    }

    /// [`Backend::post_recv_one`] through a shared backend. A transport
    /// may offer no lane at all.
    ///
    /// # Safety
    /// As [`Backend::post_send_shared`].
    #[allow(unsafe_code)]
    #[inline(always)]
    unsafe fn post_recv_one_shared(&self, _qp: &mut Self::Qp, _sge: Sge, _cookie: u64) -> bool {
        false
    }

    /// [`Backend::srq_post_recv_one`] through a shared backend. A
    /// transport may offer no lane at all.
    ///
    /// # Safety
    /// As [`Backend::srq_post_recv_shared`].
    #[allow(unsafe_code)]
    #[inline(always)]
    unsafe fn srq_post_recv_one_shared(&self, _srq: &mut Self::Srq, _sge: Sge, _cookie: u64) -> bool {
        false
    }

    /// Take the next completion of `cq` through a shared backend, if a
    /// shared dequeue can settle it alone: a success, of a QP that is
    /// still there and receives from no SRQ, of a work request that is no
    /// window bind. `admit` is shown what the CQE is for before anything is
    /// taken; it takes the lock of that QP's EP and hands back what the
    /// caller keeps while it settles the completion, which holds the EP's
    /// QP ([`HoldsQp`]), or refuses. It answers as [`Backend::cq_lane`]
    /// does, which a transport may take it by: [`Untaken::Empty`] where
    /// the ordinary poll would find nothing, [`Untaken::Declined`], with
    /// nothing a caller can see changed, for anything else (the dequeue
    /// is then the exclusive one's). Like `cq_lane`, it must not panic:
    /// callers run it outside any unwinding guard.
    ///
    /// # Safety
    /// No `&mut self` exists while this runs, and no other thread uses
    /// `cq`: the caller holds the lock of `cq`'s EVD. What `admit` returns
    /// holds the lock of the EP it was shown. Only called when
    /// [`Backend::SHARED_QUEUES`] holds.
    #[allow(unsafe_code)]
    unsafe fn cq_take_shared<G: HoldsQp<Self::Qp>>(
        &self,
        _cq: &mut Self::Cq,
        _admit: impl FnOnce(CqHead) -> Option<G>,
    ) -> Result<(Completion, G), Untaken> {
        Err(Untaken::Declined)
    }
    /// Post a receive into `sges` on `qp`; its completion carries `cookie`
    /// (dat_ep_post_recv(3DAT)).
    fn post_recv(&mut self, qp: &mut Self::Qp, sges: &[Sge], cookie: u64) -> DatResult<()>;

    /// The lane of a receive of one local segment (the core's `post::lane`),
    /// as [`Backend::post_one`]: `true` when the transport took it,
    /// `false` when it left no trace and [`Backend::post_recv`] decides.
    #[inline(always)]
    fn post_recv_one(&mut self, _qp: &mut Self::Qp, _sge: Sge, _cookie: u64) -> bool {
        false
    }

    /// The lane of a dequeue (the core's `lane` module): the next entry of
    /// `cq`, if it is a success, shown to `accept` ([`CqHead`]) before
    /// anything is consumed. `accept` refuses it, or hands back what the
    /// caller keeps, which holds the QP of the tag ([`HoldsQp`]); nothing
    /// it hands back is kept unless the entry is taken. If the entry
    /// completes a DTO of that QP that is no window bind, and one the lane
    /// can take, it is consumed exactly as [`Backend::cq_poll`] would have
    /// consumed it, and its completion comes back with what `accept`
    /// returned. Otherwise nothing a caller can see has changed (the entry
    /// is where `cq_poll` takes it first), and [`Untaken`] says why:
    /// [`Untaken::Empty`] only where `cq_poll` would find nothing either
    /// (a transport that cannot tell cheaply says [`Untaken::Declined`],
    /// and the ordinary dequeue polls), and [`Untaken::Declined`] where
    /// `accept` refused or the entry is one the transport leaves to
    /// `cq_poll` (an error, an SRQ's receive, a request that retires
    /// others with it). Like [`Backend::post_one`], it must not panic, and
    /// a transport may offer no lane at all.
    #[inline(always)]
    fn cq_lane<G: HoldsQp<Self::Qp>>(
        &mut self,
        _cq: &mut Self::Cq,
        _accept: impl FnOnce(CqHead) -> Option<G>,
    ) -> Result<(Completion, G), Untaken> {
        Err(Untaken::Declined)
    }
    /// Bind `mw` to `sge` of `mr` through `qp`'s send queue and return the
    /// new remote key; with no `mr`, unbind it. The completion carries
    /// `cookie` and op `BindMw`.
    #[allow(clippy::too_many_arguments)]
    fn post_bind(
        &mut self,
        qp: &mut Self::Qp,
        mw: &mut Self::Mw,
        mr: Option<&Self::Mr>,
        sge: Sge,
        privileges: MemPriv,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<u32>;

    /// A new SRQ in `pd` of `attr`'s shape (dat_srq_create(3DAT)).
    fn srq_create(&mut self, pd: &Self::Pd, attr: &SrqAttr) -> DatResult<Self::Srq>;
    /// Give `srq` room for `max_recv_dtos` receives (dat_srq_resize(3DAT)).
    fn srq_resize(&mut self, srq: &mut Self::Srq, max_recv_dtos: u32) -> DatResult<()>;
    /// Release an SRQ (dat_srq_free(3DAT)).
    fn srq_destroy(&mut self, srq: Self::Srq);
    /// Post a receive into `sges` on `srq`; its completion carries
    /// `cookie` (dat_srq_post_recv(3DAT)).
    fn srq_post_recv(&mut self, srq: &mut Self::Srq, sges: &[Sge], cookie: u64) -> DatResult<()>;

    /// The lane of an SRQ's receive of one local segment
    /// (dat_srq_post_recv(3DAT)), as [`Backend::post_recv_one`]: `true`
    /// when the transport took it, `false` when it left no trace and
    /// [`Backend::srq_post_recv`] decides.
    #[inline(always)]
    fn srq_post_recv_one(&mut self, _srq: &mut Self::Srq, _sge: Sge, _cookie: u64) -> bool {
        false
    }

    /// A monotonic clock, in microseconds.
    fn now_us(&mut self) -> u64;
    /// A monotonic clock that may run a scheduler tick behind
    /// [`Backend::now_us`], in microseconds: what an empty dequeue reads
    /// to know whether its look at the connection events is due
    /// ([`crate::CM_LOOK_US`]). A consumer that spins on a dequeue reads
    /// it on every call, so it must cost no system call; the fine clock is
    /// one where the kernel's clock source cannot be read from user space
    /// (HPET, as in a virtual machine with no stable TSC).
    fn coarse_now_us(&mut self) -> u64 {
        self.now_us()
    }
    /// Block until a completion or connection event may be ready on `ia`,
    /// or `timeout_us` passes (`None`: no limit). `cqs` are every CQ the
    /// core holds, which a transport may arm before it blocks.
    fn block(&mut self, ia: &mut Self::Ia, cqs: &mut impl Cqs<Self::Cq>, timeout_us: Option<u64>) -> Wake;

    /// Descriptors that become readable when [`Backend::block`] on `ia`
    /// would find activity, once a `block` with a zero timeout armed the
    /// transport; readable until a `block` takes what they report. A
    /// transport without any cannot be waited on outside `block`.
    fn wait_fds(&self, _ia: &Self::Ia) -> WaitFds {
        WaitFds::NONE
    }

    /// Whether an event of `ia` waits for [`ConnectionManager::poll_cm`],
    /// where the transport can tell with no system call and no lock: one
    /// whose connections progress on a thread of its own, which says with
    /// an atomic when it has finished an event. A dequeue that finds
    /// nothing then looks at the connection events exactly when one waits.
    /// `None` where it cannot tell, as where `poll_cm` itself moves the
    /// connections on: a dequeue that finds nothing looks at most once per
    /// [`crate::CM_LOOK_US`]. It reads and changes nothing, and a shared
    /// dequeue asks it on several threads at once ([`crate::shared`]).
    #[inline(always)]
    fn cm_waiting(&self, _ia: &Self::Ia) -> Option<bool> {
        None
    }
}

/// Opening a device, its protection domains and memory registrations:
/// the control calls of a transport. Each transport implements them
/// once: udat-verbs on rdma-core (`RdmaCore`), for itself and for the
/// ConnectX control path, the software HCA on itself; [`Backend::control`]
/// hands them to the core.
///
/// Memory windows, address handles and SRQs are not among them: making
/// one hands the data path parts of its own (an mlx5 device returns a
/// window with its key, an address vector, an SRQ's rings; udat-verbs's
/// type 1 window keeps a registration its unbinds name), so no one body
/// serves both transports, and each stays a [`Backend`] call.
pub trait Control {
    /// An open device.
    type Ia;
    /// A protection domain: a PZ's transport half.
    type Pd;
    /// A memory registration: an LMR's transport half.
    type Mr;

    /// Open the device `name`; report its limits.
    fn ia_open(&mut self, name: &[u8]) -> DatResult<(Self::Ia, IaAttr)>;
    /// Close a device [`Control::ia_open`] opened.
    fn ia_close(&mut self, ia: Self::Ia);

    /// A new protection domain on `ia` (dat_pz_create(3DAT)).
    fn pd_alloc(&mut self, ia: &mut Self::Ia) -> DatResult<Self::Pd>;
    /// Release a protection domain (dat_pz_free(3DAT)).
    fn pd_free(&mut self, pd: Self::Pd);

    /// Register `[address, address + length)` with `privileges`.
    fn mr_register(
        &mut self,
        pd: &Self::Pd,
        address: u64,
        length: u64,
        privileges: MemPriv,
    ) -> DatResult<Registration<Self::Mr>>;
    /// Release a registration (dat_lmr_free(3DAT)).
    fn mr_deregister(&mut self, mr: Self::Mr);
}

/// A listener of `B`'s connection manager: a PSP's or an RSP's.
pub type Listener<B> = <<B as Backend>::Cm as ConnectionManager>::Listener;
/// An incoming connection request of `B`'s connection manager.
pub type ConnReq<B> = <<B as Backend>::Cm as ConnectionManager>::ConnReq;

/// Listening on connection qualifiers, connecting and accepting QPs, and
/// the events that follow: the calls of a transport's connection manager.
/// Each transport implements them once: udat-verbs on rdma_cm (`RdmaCm`),
/// for itself and for the ConnectX control path, the software HCA on
/// itself; [`Backend::cm`] hands them to the core.
pub trait ConnectionManager {
    /// An open device.
    type Ia;
    /// A QP's connection half.
    type Qp;
    /// A listener on a connection qualifier: a PSP's or an RSP's.
    type Listener;
    /// An incoming connection request not yet accepted or rejected.
    type ConnReq;

    /// Listen on `conn_qual`; requests carry `tag`. `DAT_CONN_QUAL_IN_USE`
    /// if another listener has it.
    fn listen(&mut self, ia: &mut Self::Ia, conn_qual: u64, tag: u64) -> DatResult<Self::Listener>;
    /// Stop listening (dat_psp_free(3DAT), dat_rsp_free(3DAT)).
    fn unlisten(&mut self, listener: Self::Listener);
    /// Start connecting `qp`; the outcome arrives as a [`CmEvent::Conn`].
    fn connect(
        &mut self,
        qp: &mut Self::Qp,
        remote: &IaAddress,
        conn_qual: u64,
        private_data: &[u8],
        timeout_us: Option<u64>,
    ) -> DatResult<()>;
    /// Accept `request` on `qp`; `Established` or `AcceptError` follows.
    fn accept(&mut self, request: &mut Self::ConnReq, qp: &mut Self::Qp, private_data: &[u8]) -> DatResult<()>;
    /// Refuse `request`; the peer sees `private_data` with the rejection.
    fn reject(&mut self, request: Self::ConnReq, private_data: &[u8]);
    /// Tear the connection down; with `graceful` false, flush at once.
    fn disconnect(&mut self, qp: &mut Self::Qp, graceful: bool);
    /// The next connection-manager event of `ia`, if one is ready.
    fn poll_cm(&mut self, ia: &mut Self::Ia) -> Option<CmEvent<Self::ConnReq>>;
}
