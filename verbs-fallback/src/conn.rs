//! rdma_cm's connection machine, below both the IA's own thread
//! (`progress`) and the consumer's calls (`cm`): the state the two share
//! under one lock ([`CmState`]), each QP's connection half ([`Conn`]),
//! and the thread's steps. It reads the channel's events ([`drain`]),
//! moves the QPs through RTR and RTS as they call for, answers a DREQ,
//! and gives up on connects whose time ran out ([`expire`]). An event is
//! acknowledged as soon as it is copied.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use udat_core::{
    backend::{AhAttr, ConnOutcome, Grh, PrivateData, UdPeer},
    types::IaAddress,
    DatResult,
};

use crate::addr;
use crate::qp_shared::{QpShared, QP_ACCESS};
use crate::status::{dat_error, errno};
use crate::sys;
use crate::sys::rdma_cm_event_type as ev;
use crate::tunables::Tunables;

/// How long address and route resolution may take.
pub(crate) const RESOLVE_MS: i32 = 2000;
/// IB CM reject reason `IB_CM_REJ_CONSUMER_DEFINED`: the peer's consumer
/// said no (a port nobody listens on is `IB_CM_REJ_INVALID_SERVICE_ID`).
const REJ_CONSUMER_DEFINED: i32 = 28;

/// What a UD connect sends before the consumer's private data: its QP's
/// number, big-endian (a SIDR request has no field for it: IBTA Vol. 1
/// §12.11.1), and the length of the consumer's data, which the peer
/// would not know otherwise (rdma_cm pads a SIDR request's private data
/// to its full 180 bytes).
pub(crate) const UD_REQUEST_HEADER: usize = 5;
/// What a UD accept sends before the consumer's private data: its length
/// (a SIDR reply's is padded to 136 bytes).
pub(crate) const UD_REPLY_HEADER: usize = 1;
/// The SIDR reply status of a consumer's rejection (`IB_SIDR_REJECT`,
/// IBTA Vol. 1 Table 119), which rdma_cm reports as UNREACHABLE.
const SIDR_REJECT: i32 = 2;

/// What the consumer's calls and the thread share.
pub(crate) struct CmState {
    /// The IA's rdma_cm ids, by address.
    pub ids: HashMap<usize, Owner>,
    /// The connection half of each QP of the IA, by the QP's address.
    pub conns: HashMap<usize, Conn>,
    /// Finished events, for the core.
    pub events: VecDeque<Ready>,
    /// A deadline was set since the timer was last armed.
    pub rearm: bool,
    /// What RC QPs are given (read at IA open).
    pub tunables: Tunables,
}

// SAFETY: the raw pointers are rdma_cm ids and verbs QPs, which
// librdmacm and libibverbs let any thread use. They are used only under
// the mutex that holds the state (`progress::CmShared`), and leave the
// state (under it) before they are destroyed.
unsafe impl Send for CmState {}

/// Where a QP's connection stands, as rdma_cm drives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Idle,
    /// Active side: resolving the address and route, then connecting.
    Connecting,
    /// Passive side: accepted, waiting for ESTABLISHED.
    Accepting,
    Established,
    Closed,
}

/// Who an rdma_cm id belongs to.
pub(crate) enum Owner {
    /// The connection of the QP with this key ([`key`]).
    Qp(usize),
    /// A listener; requests it receives carry this tag.
    Listener(u64),
    /// A request not yet accepted or rejected.
    Request,
    /// A UD connect of a QP, resolving one peer.
    UdConnect(UdConnect),
}

/// A UD connect under way: the QP it resolves a peer for, when it gives
/// up, what it sends, and where to.
#[derive(Clone)]
pub(crate) struct UdConnect {
    pub key: usize,
    pub qp_num: u32,
    pub tag: u64,
    pub deadline: Option<Instant>,
    pub private_data: Vec<u8>,
    pub remote: IaAddress,
}

/// The connection half of a QP, which the IA's connection manager keeps
/// from the QP's creation to its destruction: what moving the QP takes,
/// and where its connection stands.
pub(crate) struct Conn {
    qp: *mut sys::ibv_qp,
    pub tag: u64,
    pub ud: bool,
    srq: bool,
    /// RDMA reads in and out, clamped to the device's limits.
    reads: (u8, u8),
    /// The rdma_cm id of the current connection (null when none).
    pub id: *mut sys::rdma_cm_id,
    pub phase: Phase,
    /// When a connect gives up.
    pub deadline: Option<Instant>,
    /// Private data of a connect, sent once the route is resolved.
    pub private_data: Vec<u8>,
    /// The rdma_cm ids of the UD peers resolved through this QP: kept
    /// until the QP is reset or goes.
    pub ud_ids: Vec<*mut sys::rdma_cm_id>,
}

impl Conn {
    /// The connection half of `qp`, with no connection yet.
    pub fn of(qp: &QpShared) -> Conn {
        Conn {
            qp: qp.qp,
            tag: qp.tag,
            ud: qp.ud,
            srq: qp.srq.is_some(),
            reads: (qp.rdma_read_in, qp.rdma_read_out),
            id: std::ptr::null_mut(),
            phase: Phase::Idle,
            deadline: None,
            private_data: Vec::new(),
            ud_ids: Vec::new(),
        }
    }
}

/// What names a QP's [`Conn`]: its address, unique while it lives.
pub(crate) fn key(qp: *mut sys::ibv_qp) -> usize {
    qp as usize
}

/// A finished event, waiting for the core: a
/// [`CmEvent`](udat_core::backend::CmEvent) whose request, if any, is
/// still a bare id.
pub(crate) enum Ready {
    Request {
        listener: u64,
        id: *mut sys::rdma_cm_id,
        /// A UD request: the requester's QP number and private data.
        ud: Option<(u32, PrivateData)>,
        remote: IaAddress,
        remote_port: u64,
        private_data: PrivateData,
    },
    Conn {
        tag: u64,
        outcome: ConnOutcome,
        private_data: PrivateData,
    },
    UdEstablished {
        tag: u64,
        peer: UdPeer,
        remote: IaAddress,
        passive: bool,
        private_data: PrivateData,
    },
    Catastrophic,
}

impl Ready {
    /// The QP it is about, for an event of a connection.
    fn tag(&self) -> Option<u64> {
        match self {
            Ready::Conn { tag, .. } | Ready::UdEstablished { tag, .. } => Some(*tag),
            _ => None,
        }
    }
}

/// Forget and destroy `id`. Every event read on it was acknowledged
/// under the lock the caller holds, so the destruction waits for none.
pub(crate) fn destroy_id(state: &mut CmState, id: *mut sys::rdma_cm_id) {
    state.ids.remove(&(id as usize));
    // SAFETY: `id` is live and every event read on it was acknowledged;
    // the kernel drops events not yet read.
    unsafe { sys::rdma_destroy_id(id) };
}

/// Destroy the QP's current rdma_cm id, if it has one, and a UD QP's ids
/// of its peers and of its connects under way.
pub(crate) fn release(state: &mut CmState, key: usize) {
    let Some(conn) = state.conns.get_mut(&key) else { return };
    let id = std::mem::replace(&mut conn.id, std::ptr::null_mut());
    let ud_ids = std::mem::take(&mut conn.ud_ids);
    let ud = conn.ud;
    if !id.is_null() {
        destroy_id(state, id);
    }
    for id in ud_ids {
        destroy_id(state, id);
    }
    if ud {
        let connecting: Vec<usize> = state
            .ids
            .iter()
            .filter_map(|(&id, o)| matches!(o, Owner::UdConnect(c) if c.key == key).then_some(id))
            .collect();
        for id in connecting {
            destroy_id(state, id as *mut sys::rdma_cm_id);
        }
    }
}

/// Drop the queued events of the QP with `tag`: as the kernel drops the
/// unread events of an id destroyed, so the events a connection finished
/// but the core did not take go with it.
pub(crate) fn purge(state: &mut CmState, tag: u64) {
    state.events.retain(|e| e.tag() != Some(tag));
}

pub(crate) fn conn_param(conn: &Conn, private_data: &[u8], t: &Tunables) -> sys::rdma_conn_param {
    sys::rdma_conn_param {
        private_data: private_data.as_ptr().cast(),
        private_data_len: private_data.len().min(u8::MAX as usize) as u8,
        responder_resources: conn.reads.0,
        initiator_depth: conn.reads.1,
        flow_control: 1,
        retry_count: t.ack_retry,
        rnr_retry_count: t.rnr_retry,
        srq: u8::from(conn.srq),
        // SAFETY: the QP is live while its `Conn` is kept.
        qp_num: unsafe { (*conn.qp).qp_num },
    }
}

/// Move `conn`'s QP through `state` with the attributes rdma_cm computes
/// for the connection of `id`, and the IA's tunables: the RNR timer and
/// the MTU at RTR, the retry counts and (if set) the ACK timer at RTS.
pub(crate) fn to_cm_state(
    conn: &Conn,
    id: *mut sys::rdma_cm_id,
    state: sys::ibv_qp_state::Type,
    t: &Tunables,
) -> DatResult<()> {
    use sys::ibv_qp_attr_mask as m;
    use sys::ibv_qp_state as s;
    // SAFETY: plain C data.
    let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = state;
    let mut mask = 0;
    // SAFETY: `id` is a live rdma_cm id; attr and mask are ours.
    if unsafe { sys::rdma_init_qp_attr(id, &mut attr, &mut mask) } != 0 {
        return Err(dat_error(errno()));
    }
    match state {
        s::IBV_QPS_INIT => {
            // rdma_cm grants remote access from the resources negotiated
            // so far, which at INIT may be none; the LMRs and RMRs decide.
            attr.qp_access_flags = QP_ACCESS;
            mask |= m::IBV_QP_ACCESS_FLAGS.0 as i32;
        }
        s::IBV_QPS_RTR => {
            attr.max_dest_rd_atomic = attr.max_dest_rd_atomic.max(conn.reads.0.max(1));
            attr.min_rnr_timer = t.rnr_timer;
            attr.path_mtu = t.path_mtu(attr.path_mtu);
            mask |= (m::IBV_QP_MIN_RNR_TIMER | m::IBV_QP_PATH_MTU).0 as i32;
        }
        s::IBV_QPS_RTS => {
            attr.max_rd_atomic = attr.max_rd_atomic.max(conn.reads.1.max(1));
            if let Some(timeout) = t.ack_timer {
                attr.timeout = timeout;
            }
            attr.retry_cnt = t.ack_retry;
            attr.rnr_retry = t.rnr_retry;
            mask |= (m::IBV_QP_TIMEOUT | m::IBV_QP_RETRY_CNT | m::IBV_QP_RNR_RETRY).0 as i32;
        }
        _ => {}
    }
    // SAFETY: the QP is live while its `Conn` is kept; `attr` is read
    // during the call only.
    crate::status::check(unsafe { sys::ibv_modify_qp(conn.qp, &mut attr, mask) })
}

/// Move `conn`'s QP to ERROR: the device flushes what it holds, in post
/// order, through its CQs, whichever EVD the consumer waits on.
fn break_off(conn: &Conn) {
    // SAFETY: plain C data.
    let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
    // SAFETY: the QP is live while its `Conn` is kept. libibverbs lets
    // this thread move it while the consumer's posts to it.
    unsafe { sys::ibv_modify_qp(conn.qp, &mut attr, sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32) };
}

/// The earliest connect deadline of the IA.
pub(crate) fn next_deadline(state: &CmState) -> Option<Instant> {
    let connects = state.conns.values().filter(|c| c.phase == Phase::Connecting).filter_map(|c| c.deadline);
    let ud = state.ids.values().filter_map(|o| match o {
        Owner::UdConnect(c) => c.deadline,
        _ => None,
    });
    connects.chain(ud).min()
}

/// The thread's work when the channel is readable: read every event,
/// acknowledge it, and take the step it calls for.
pub(crate) fn drain(state: &mut CmState, channel: *mut sys::rdma_event_channel) {
    loop {
        let mut event = std::ptr::null_mut();
        // SAFETY: the channel is open and non-blocking.
        if unsafe { sys::rdma_get_cm_event(channel, &mut event) } != 0 {
            return;
        }
        // SAFETY: rdma_cm hands a valid event until it is acknowledged.
        let e = unsafe { &*event };
        let (kind, id, listen_id, status) = (e.event, e.id, e.listen_id, e.status);
        // SAFETY: `conn` is the union member of connection events; its
        // private data is readable for its length until the ack. `ud`,
        // that of a UD id's events, begins with the same two fields.
        let (private_data, ud) = unsafe { (copy_private_data(&e.param.conn), e.param.ud) };
        // SAFETY: the event is not used after this.
        unsafe { sys::rdma_ack_cm_event(event) };
        let connect = match state.ids.get(&(id as usize)) {
            Some(Owner::UdConnect(c)) => Some(c.clone()),
            _ => None,
        };
        let out = match connect {
            Some(c) => ud_dispatch(state, &c, kind, id, status, &ud, private_data),
            None => dispatch(state, kind, id, listen_id, status, private_data),
        };
        if let Some(out) = out {
            state.events.push_back(out);
        }
    }
}

/// # Safety
/// `conn.private_data` is readable for `conn.private_data_len` bytes, or null.
unsafe fn copy_private_data(conn: &sys::rdma_conn_param) -> PrivateData {
    let mut data = PrivateData::new();
    if !conn.private_data.is_null() {
        // SAFETY: the caller's guarantee.
        let bytes = unsafe { std::slice::from_raw_parts(conn.private_data.cast::<u8>(), conn.private_data_len.into()) };
        let _ = data.extend_from_slice(&bytes[..bytes.len().min(data.capacity())]);
    }
    data
}

/// An event on the id of the UD connect `c`.
fn ud_dispatch(
    state: &mut CmState,
    c: &UdConnect,
    kind: ev::Type,
    id: *mut sys::rdma_cm_id,
    status: i32,
    ud: &sys::rdma_ud_param,
    private_data: PrivateData,
) -> Option<Ready> {
    let tag = c.tag;
    let mut failed = |outcome, private_data| {
        destroy_id(state, id);
        Some(Ready::Conn { tag, outcome, private_data })
    };
    match kind {
        ev::RDMA_CM_EVENT_ADDR_RESOLVED => {
            // SAFETY: `id` is live.
            if unsafe { sys::rdma_resolve_route(id, RESOLVE_MS) } != 0 {
                return failed(ConnOutcome::Unreachable, PrivateData::new());
            }
            None
        }
        ev::RDMA_CM_EVENT_ROUTE_RESOLVED => {
            // SAFETY: plain C data.
            let mut param: sys::rdma_conn_param = unsafe { std::mem::zeroed() };
            param.private_data = c.private_data.as_ptr().cast();
            param.private_data_len = c.private_data.len().min(u8::MAX as usize) as u8;
            param.qp_num = c.qp_num;
            // SAFETY: `id` is live; `param` and the data outlive the call.
            if unsafe { sys::rdma_connect(id, &mut param) } != 0 {
                return failed(ConnOutcome::Unreachable, PrivateData::new());
            }
            None
        }
        ev::RDMA_CM_EVENT_ESTABLISHED => {
            let a = &ud.ah_attr;
            let grh = (a.is_global != 0).then_some(Grh {
                // SAFETY: every bit pattern of the union is a valid byte array.
                dgid: unsafe { a.grh.dgid.raw },
                sgid_index: a.grh.sgid_index,
                hop_limit: a.grh.hop_limit,
                traffic_class: a.grh.traffic_class,
                flow_label: a.grh.flow_label,
            });
            let ah = AhAttr { dlid: a.dlid, sl: a.sl, port_num: a.port_num, grh };
            let peer = UdPeer { ah, qpn: ud.qp_num, qkey: ud.qkey };
            state.ids.remove(&(id as usize));
            match state.conns.get_mut(&c.key) {
                Some(conn) => conn.ud_ids.push(id),
                // SAFETY: the id left the state; its event was acknowledged.
                None => unsafe {
                    sys::rdma_destroy_id(id);
                },
            }
            let private_data = unframed(&private_data, UD_REPLY_HEADER);
            Some(Ready::UdEstablished { tag, peer, remote: c.remote, passive: false, private_data })
        }
        // A SIDR reply that refuses comes as UNREACHABLE with its status;
        // a consumer's rejection carries its private data.
        ev::RDMA_CM_EVENT_UNREACHABLE if status == SIDR_REJECT => failed(ConnOutcome::PeerRejected, private_data),
        ev::RDMA_CM_EVENT_UNREACHABLE if status > 0 => failed(ConnOutcome::NonPeerRejected, PrivateData::new()),
        ev::RDMA_CM_EVENT_ADDR_ERROR
        | ev::RDMA_CM_EVENT_ROUTE_ERROR
        | ev::RDMA_CM_EVENT_UNREACHABLE
        | ev::RDMA_CM_EVENT_CONNECT_ERROR
        | ev::RDMA_CM_EVENT_REJECTED => failed(ConnOutcome::Unreachable, PrivateData::new()),
        _ => None,
    }
}

/// The consumer's private data in `framed`, which leads with its length
/// (the last byte of a `header`-byte header).
fn unframed(framed: &[u8], header: usize) -> PrivateData {
    let mut data = PrivateData::new();
    if let Some(&len) = framed.get(header.wrapping_sub(1)) {
        let body = framed.get(header..).unwrap_or(&[]);
        let _ = data.extend_from_slice(&body[..body.len().min(usize::from(len)).min(data.capacity())]);
    }
    data
}

/// The thread's work when the timer fires: every connect whose deadline
/// passed gives up, its id destroyed, and times out.
pub(crate) fn expire(state: &mut CmState, now: Instant) {
    let ud: Vec<(usize, u64)> = state
        .ids
        .iter()
        .filter_map(|(&id, o)| match o {
            Owner::UdConnect(c) if c.deadline.is_some_and(|d| now >= d) => Some((id, c.tag)),
            _ => None,
        })
        .collect();
    for (id, tag) in ud {
        destroy_id(state, id as *mut sys::rdma_cm_id);
        state.events.push_back(timed_out(tag));
    }
    let rc: Vec<usize> = state
        .conns
        .iter()
        .filter(|(_, c)| c.phase == Phase::Connecting && c.deadline.is_some_and(|d| now >= d))
        .map(|(&key, _)| key)
        .collect();
    for key in rc {
        let Some(conn) = state.conns.get_mut(&key) else { continue };
        conn.phase = Phase::Closed;
        conn.deadline = None;
        let tag = conn.tag;
        release(state, key);
        state.events.push_back(timed_out(tag));
    }
}

fn timed_out(tag: u64) -> Ready {
    Ready::Conn { tag, outcome: ConnOutcome::TimedOut, private_data: PrivateData::new() }
}

/// An event on an id that is not a UD connect's.
fn dispatch(
    state: &mut CmState,
    kind: ev::Type,
    id: *mut sys::rdma_cm_id,
    listen_id: *mut sys::rdma_cm_id,
    status: i32,
    private_data: PrivateData,
) -> Option<Ready> {
    if kind == ev::RDMA_CM_EVENT_DEVICE_REMOVAL {
        return Some(Ready::Catastrophic);
    }
    if kind == ev::RDMA_CM_EVENT_CONNECT_REQUEST {
        return request(state, id, listen_id, private_data);
    }
    let key = match state.ids.get(&(id as usize)) {
        Some(Owner::Qp(key)) => *key,
        // Events of a request nobody accepted yet, or of a listener.
        _ => return None,
    };
    let tunables = state.tunables;
    let conn = state.conns.get_mut(&key)?;
    let tag = conn.tag;
    let event = |outcome, private_data| Some(Ready::Conn { tag, outcome, private_data });
    let failed = |conn: &mut Conn| {
        let outcome = if conn.phase == Phase::Accepting { ConnOutcome::AcceptError } else { ConnOutcome::Unreachable };
        conn.phase = Phase::Closed;
        event(outcome, PrivateData::new())
    };
    match kind {
        ev::RDMA_CM_EVENT_ADDR_RESOLVED if conn.phase == Phase::Connecting => {
            // SAFETY: `id` is live.
            if unsafe { sys::rdma_resolve_route(id, RESOLVE_MS) } != 0 {
                return failed(conn);
            }
            None
        }
        ev::RDMA_CM_EVENT_ROUTE_RESOLVED if conn.phase == Phase::Connecting => {
            let data = std::mem::take(&mut conn.private_data);
            let mut param = conn_param(conn, &data, &tunables);
            let started = to_cm_state(conn, id, sys::ibv_qp_state::IBV_QPS_INIT, &tunables).is_ok()
                // SAFETY: `id` is live; `param` and the data outlive the call.
                && unsafe { sys::rdma_connect(id, &mut param) } == 0;
            if started {
                None
            } else {
                failed(conn)
            }
        }
        ev::RDMA_CM_EVENT_CONNECT_RESPONSE if conn.phase == Phase::Connecting => {
            // RTR and RTS, then the RTU the passive side waits for.
            let ready = to_cm_state(conn, id, sys::ibv_qp_state::IBV_QPS_RTR, &tunables).is_ok()
                && to_cm_state(conn, id, sys::ibv_qp_state::IBV_QPS_RTS, &tunables).is_ok()
                // SAFETY: `id` is live and its QP ready to send.
                && unsafe { sys::rdma_establish(id) } == 0;
            if !ready {
                // SAFETY: `id` is live; the peer learns the attempt failed.
                unsafe { sys::rdma_reject(id, std::ptr::null(), 0) };
                return failed(conn);
            }
            conn.phase = Phase::Established;
            conn.deadline = None;
            event(ConnOutcome::Established, private_data)
        }
        ev::RDMA_CM_EVENT_ESTABLISHED if conn.phase == Phase::Accepting => {
            if to_cm_state(conn, id, sys::ibv_qp_state::IBV_QPS_RTS, &tunables).is_err() {
                // SAFETY: `id` is live.
                unsafe { sys::rdma_disconnect(id) };
                return failed(conn);
            }
            conn.phase = Phase::Established;
            event(ConnOutcome::Established, PrivateData::new())
        }
        ev::RDMA_CM_EVENT_REJECTED if conn.phase == Phase::Connecting => {
            conn.phase = Phase::Closed;
            if status == REJ_CONSUMER_DEFINED {
                event(ConnOutcome::PeerRejected, private_data)
            } else {
                event(ConnOutcome::NonPeerRejected, PrivateData::new())
            }
        }
        ev::RDMA_CM_EVENT_ADDR_ERROR
        | ev::RDMA_CM_EVENT_ROUTE_ERROR
        | ev::RDMA_CM_EVENT_UNREACHABLE
        | ev::RDMA_CM_EVENT_CONNECT_ERROR
        | ev::RDMA_CM_EVENT_REJECTED
            if matches!(conn.phase, Phase::Connecting | Phase::Accepting) =>
        {
            failed(conn)
        }
        ev::RDMA_CM_EVENT_DISCONNECTED => {
            // Answer the peer's DREQ (our own disconnect's answer lands
            // here too), and flush the QP now: its DTOs complete whatever
            // the consumer is waiting on.
            // SAFETY: `id` is live.
            unsafe { sys::rdma_disconnect(id) };
            conn.phase = Phase::Closed;
            break_off(conn);
            event(ConnOutcome::Disconnected, PrivateData::new())
        }
        _ => None,
    }
}

/// A connection request on the listener `listen_id`, whose own id is `id`.
fn request(
    state: &mut CmState,
    id: *mut sys::rdma_cm_id,
    listen_id: *mut sys::rdma_cm_id,
    private_data: PrivateData,
) -> Option<Ready> {
    let Some(&Owner::Listener(listener)) = state.ids.get(&(listen_id as usize)) else {
        // The listener is gone: nobody takes the request.
        // SAFETY: the request's id is ours alone; its event was acknowledged.
        unsafe { sys::rdma_destroy_id(id) };
        return None;
    };
    // SAFETY: a request's id is live; its port space is set.
    let ud = unsafe { (*id).ps } == sys::rdma_port_space::RDMA_PS_UDP;
    // A UD request leads with the requester's QP number and the length of
    // its consumer's data (`UD_REQUEST_HEADER`).
    let (ud, private_data) = if ud {
        let qpn = private_data.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let data = unframed(&private_data, UD_REQUEST_HEADER);
        (Some((qpn.unwrap_or(0), data.clone())), data)
    } else {
        (None, private_data)
    };
    state.ids.insert(id as usize, Owner::Request);
    // SAFETY: a request's id knows its peer's address.
    let remote = unsafe { addr::from_sockaddr(&raw const (*id).route.addr.__bindgen_anon_2.dst_addr) };
    let remote_port = u64::from(addr::port(&remote));
    Some(Ready::Request { listener, id, ud, remote, remote_port, private_data })
}
