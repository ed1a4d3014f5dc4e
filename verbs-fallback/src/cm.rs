//! Connection management through rdma_cm, with the QP kept apart from
//! the rdma_cm id.
//!
//! DAT creates an EP's QP before any connection and lets receives be
//! posted on it, and a passive side accepts on an EP of its choosing. So
//! QPs are plain verbs QPs, created in INIT, and udat moves them through
//! RTR and RTS itself with the attributes `rdma_init_qp_attr` computes
//! for the connection and the IA's [`Tunables`]: the active side on
//! CONNECT_RESPONSE (then `rdma_establish`), the passive side to RTR
//! before `rdma_accept` and to RTS on ESTABLISHED.
//!
//! Two sides share this module. The consumer's calls (listen, connect,
//! accept, reject, disconnect, reset, and `poll`, which hands the core
//! what is finished) and the IA's own thread (`progress`), which reads
//! the channel's events ([`drain`]) and gives up on connects whose time
//! ran out ([`expire`]). Both work on [`CmState`] under its lock; an
//! event is acknowledged as soon as it is copied.

use std::rc::Rc;
use std::time::{Duration, Instant};

use udat_core::{
    backend::{AhAttr, CmEvent, ConnOutcome, Grh, PrivateData, UdPeer},
    types::IaAddress,
    DatError, DatResult, ErrorType,
};

use crate::addr;
use crate::device::IaShared;
use crate::progress::CmState;
use crate::qp_shared::QpShared;
use crate::status::{check_errno, dat_error, errno};
use crate::sys;
use crate::sys::rdma_cm_event_type as ev;
use crate::tunables::Tunables;

/// How long address and route resolution may take.
const RESOLVE_MS: i32 = 2000;
/// IB CM reject reason `IB_CM_REJ_CONSUMER_DEFINED`: the peer's consumer
/// said no (a port nobody listens on is `IB_CM_REJ_INVALID_SERVICE_ID`).
const REJ_CONSUMER_DEFINED: i32 = 28;

/// What a UD connect sends before the consumer's private data: its QP's
/// number, big-endian (a SIDR request has no field for it: IBTA Vol. 1
/// §12.11.1), and the length of the consumer's data, which the peer
/// would not know otherwise (rdma_cm pads a SIDR request's private data
/// to its full 180 bytes).
const UD_REQUEST_HEADER: usize = 5;
/// What a UD accept sends before the consumer's private data: its length
/// (a SIDR reply's is padded to 136 bytes).
const UD_REPLY_HEADER: usize = 1;
/// The SIDR reply status of a consumer's rejection (`IB_SIDR_REJECT`,
/// IBTA Vol. 1 Table 119), which rdma_cm reports as UNREACHABLE.
const SIDR_REJECT: i32 = 2;
/// The hop limit of a passive side's datagrams, as rdma_cm gives the
/// active side's.
const UD_HOP_LIMIT: u8 = 64;

/// Qualifiers wider than a port fold into the top `PORT_FOLD` ports.
const PORT_FOLD: u64 = 32001;

/// The rdma_cm port of a connection qualifier. A port has 16 bits; a wider
/// qualifier folds into 33534..=65534 by the rule OFA's cma provider
/// uses, so both providers listen and connect on the same port for it
/// (dapltest's limit test listens on 0xaffab1e and up). Two wide
/// qualifiers can share a port: the second listener gets
/// `DAT_CONN_QUAL_IN_USE`.
fn port(conn_qual: u64) -> u16 {
    match u16::try_from(conn_qual) {
        Ok(port) => port,
        Err(_) => (conn_qual % PORT_FOLD + (u64::from(u16::MAX) - PORT_FOLD)) as u16,
    }
}

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

/// The connection half of a QP, which the IA's connection manager keeps
/// from the QP's creation to its destruction: what moving the QP takes,
/// and where its connection stands.
pub(crate) struct Conn {
    qp: *mut sys::ibv_qp,
    tag: u64,
    ud: bool,
    srq: bool,
    /// RDMA reads in and out, clamped to the device's limits.
    reads: (u8, u8),
    /// The rdma_cm id of the current connection (null when none).
    id: *mut sys::rdma_cm_id,
    phase: Phase,
    /// When a connect gives up.
    deadline: Option<Instant>,
    /// Private data of a connect, sent once the route is resolved.
    private_data: Vec<u8>,
    /// The rdma_cm ids of the UD peers resolved through this QP: kept
    /// until the QP is reset or goes.
    ud_ids: Vec<*mut sys::rdma_cm_id>,
}

impl Conn {
    fn of(qp: &QpShared) -> Conn {
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

/// A finished event, waiting for the core: a [`CmEvent`] whose request,
/// if any, is still a bare id.
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

/// A service point's rdma_cm ids: one listening on the port of RC
/// connections (`RDMA_PS_TCP`), one on the same port of UD ones
/// (`RDMA_PS_UDP`), where a UD EP's requests arrive.
pub struct Listener {
    id: *mut sys::rdma_cm_id,
    /// Null when the UD port is taken: UD requests to it then go
    /// unanswered, and RC ones are served as ever.
    ud_id: *mut sys::rdma_cm_id,
    ia: Rc<IaShared>,
}

/// A connection request not yet accepted or rejected.
pub struct ConnReq {
    id: *mut sys::rdma_cm_id,
    ia: Rc<IaShared>,
    /// A UD request: the requester's QP number and private data.
    ud: Option<(u32, PrivateData)>,
}

/// Start keeping the connection half of `qp`, a QP of `ia`.
pub(crate) fn register(ia: &IaShared, qp: &QpShared) {
    ia.cm().lock().conns.insert(key(qp.qp), Conn::of(qp));
}

/// The QP `qp` of `ia` is about to be destroyed: destroy its ids, and
/// forget it. The thread never reaches it again.
pub(crate) fn forget(ia: &IaShared, qp: *mut sys::ibv_qp) {
    let mut cm = ia.cm().lock();
    let st = &mut *cm;
    if let Some(conn) = st.conns.get(&key(qp)) {
        let tag = conn.tag;
        release(st, key(qp));
        purge(st, tag);
    }
    st.conns.remove(&key(qp));
}

/// Forget the connection of `qp`, of `ia`, and the events it left
/// unread: its next connection starts from nothing.
pub(crate) fn reset(ia: &IaShared, qp: *mut sys::ibv_qp) {
    let mut cm = ia.cm().lock();
    let st = &mut *cm;
    let Some(conn) = st.conns.get_mut(&key(qp)) else { return };
    conn.phase = Phase::Idle;
    conn.deadline = None;
    let tag = conn.tag;
    release(st, key(qp));
    purge(st, tag);
}

pub(crate) fn listen(ia: &Rc<IaShared>, conn_qual: u64, tag: u64) -> DatResult<Listener> {
    let mut cm = ia.cm().lock();
    let id = listen_on(ia, &mut cm, conn_qual, sys::rdma_port_space::RDMA_PS_TCP)?;
    cm.ids.insert(id as usize, Owner::Listener(tag));
    let mut listener = Listener { id, ud_id: std::ptr::null_mut(), ia: ia.clone() };
    if let Ok(ud_id) = listen_on(ia, &mut cm, conn_qual, sys::rdma_port_space::RDMA_PS_UDP) {
        listener.ud_id = ud_id;
        cm.ids.insert(ud_id as usize, Owner::Listener(tag));
    }
    Ok(listener)
}

/// An id of `ps` listening on the port of `conn_qual`.
fn listen_on(
    ia: &IaShared,
    st: &mut CmState,
    conn_qual: u64,
    ps: sys::rdma_port_space::Type,
) -> DatResult<*mut sys::rdma_cm_id> {
    let mut local = addr::to_storage(&ia.address, port(conn_qual)).ok_or(DatError::of(ErrorType::InvalidAddress))?;
    let id = create_id(ia, ps)?;
    // SAFETY: `id` is live; `local` is a valid sockaddr.
    let mut rc = unsafe { sys::rdma_bind_addr(id, (&raw mut local).cast()) };
    if rc == 0 {
        // SAFETY: `id` is bound.
        rc = unsafe { sys::rdma_listen(id, 128) };
    }
    if let Err(e) = check_errno(rc) {
        destroy_id(st, id);
        return Err(e);
    }
    Ok(id)
}

impl Drop for Listener {
    fn drop(&mut self) {
        let mut cm = self.ia.cm().lock();
        destroy_id(&mut cm, self.id);
        if !self.ud_id.is_null() {
            destroy_id(&mut cm, self.ud_id);
        }
    }
}

impl Drop for ConnReq {
    fn drop(&mut self) {
        if !self.id.is_null() {
            destroy_id(&mut self.ia.cm().lock(), self.id);
        }
    }
}

/// A new id of `ps` on the IA's channel. The caller holds the lock, so
/// the thread reads no event of it before it is known.
fn create_id(ia: &IaShared, ps: sys::rdma_port_space::Type) -> DatResult<*mut sys::rdma_cm_id> {
    let mut id = std::ptr::null_mut();
    // SAFETY: the channel is open; `id` is ours to fill.
    let rc = unsafe { sys::rdma_create_id(ia.cm().channel(), &mut id, std::ptr::null_mut(), ps) };
    check_errno(rc)?;
    Ok(id)
}

/// Forget and destroy `id`. Every event read on it was acknowledged
/// under the lock the caller holds, so the destruction waits for none.
fn destroy_id(st: &mut CmState, id: *mut sys::rdma_cm_id) {
    st.ids.remove(&(id as usize));
    // SAFETY: `id` is live and every event read on it was acknowledged;
    // the kernel drops events not yet read.
    unsafe { sys::rdma_destroy_id(id) };
}

/// Destroy the QP's current rdma_cm id, if it has one, and a UD QP's ids
/// of its peers and of its connects under way.
fn release(st: &mut CmState, key: usize) {
    let Some(conn) = st.conns.get_mut(&key) else { return };
    let id = std::mem::replace(&mut conn.id, std::ptr::null_mut());
    let ud_ids = std::mem::take(&mut conn.ud_ids);
    let ud = conn.ud;
    if !id.is_null() {
        destroy_id(st, id);
    }
    for id in ud_ids {
        destroy_id(st, id);
    }
    if ud {
        let connecting: Vec<usize> = st
            .ids
            .iter()
            .filter_map(|(&id, o)| matches!(o, Owner::UdConnect(c) if c.key == key).then_some(id))
            .collect();
        for id in connecting {
            destroy_id(st, id as *mut sys::rdma_cm_id);
        }
    }
}

/// Drop the queued events of the QP with `tag`: as the kernel drops the
/// unread events of an id destroyed, so the events a connection finished
/// but the core did not take go with it.
fn purge(st: &mut CmState, tag: u64) {
    st.events.retain(|e| e.tag() != Some(tag));
}

fn conn_param(conn: &Conn, private_data: &[u8], t: &Tunables) -> sys::rdma_conn_param {
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
/// the MTU at RTR, the ACK timer and the retry counts at RTS.
fn to_cm_state(conn: &Conn, id: *mut sys::rdma_cm_id, state: sys::ibv_qp_state::Type, t: &Tunables) -> DatResult<()> {
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
            attr.qp_access_flags = crate::qp_shared::QP_ACCESS;
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
            attr.timeout = t.ack_timer;
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

/// The conn of `qp` in `st`, or `DAT_INTERNAL_ERROR` for a QP whose
/// creation never registered it.
fn conn_of(st: &mut CmState, qp: *mut sys::ibv_qp) -> DatResult<&mut Conn> {
    st.conns.get_mut(&key(qp)).ok_or(DatError::of(ErrorType::InternalError))
}

pub(crate) fn connect(
    ia: &IaShared,
    qp: *mut sys::ibv_qp,
    remote: &IaAddress,
    conn_qual: u64,
    private_data: &[u8],
    timeout_us: Option<u64>,
) -> DatResult<()> {
    let deadline = timeout_us.and_then(|t| Instant::now().checked_add(Duration::from_micros(t)));
    let mut dst = addr::to_storage(remote, port(conn_qual)).ok_or(DatError::of(ErrorType::InvalidAddress))?;
    let mut src = addr::to_storage(&ia.address, 0).ok_or(DatError::of(ErrorType::InvalidAddress))?;
    let mut cm = ia.cm().lock();
    let st = &mut *cm;
    let conn = conn_of(st, qp)?;
    if conn.ud {
        let tag = conn.tag;
        return ud_connect(ia, st, (qp, tag), (&mut src, &mut dst), *remote, private_data, deadline);
    }
    let tag = conn.tag;
    release(st, key(qp));
    purge(st, tag);
    let id = create_id(ia, sys::rdma_port_space::RDMA_PS_TCP)?;
    st.ids.insert(id as usize, Owner::Qp(key(qp)));
    let conn = conn_of(st, qp)?;
    conn.id = id;
    // SAFETY: `id` is live; both addresses are valid sockaddrs.
    let rc = unsafe { sys::rdma_resolve_addr(id, (&raw mut src).cast(), (&raw mut dst).cast(), RESOLVE_MS) };
    if rc != 0 {
        let e = errno();
        release(st, key(qp));
        return Err(dat_error(e));
    }
    conn.phase = Phase::Connecting;
    conn.deadline = deadline;
    conn.private_data = private_data.to_vec();
    st.rearm |= deadline.is_some();
    Ok(())
}

/// A UD connect of the QP `qp` (tag `tag`): one more peer, through an id
/// of its own (`RDMA_PS_UDP`: a SIDR request and reply, IBTA Vol. 1
/// §12.11).
fn ud_connect(
    ia: &IaShared,
    st: &mut CmState,
    (qp, tag): (*mut sys::ibv_qp, u64),
    (src, dst): (&mut sys::sockaddr_storage, &mut sys::sockaddr_storage),
    remote: IaAddress,
    private_data: &[u8],
    deadline: Option<Instant>,
) -> DatResult<()> {
    let len = u8::try_from(private_data.len()).map_err(|_| DatError::invalid_arg(6))?;
    // SAFETY: the QP is live while its `Conn` is kept.
    let qp_num = unsafe { (*qp).qp_num };
    let mut data = Vec::with_capacity(UD_REQUEST_HEADER + private_data.len());
    data.extend_from_slice(&qp_num.to_be_bytes());
    data.push(len);
    data.extend_from_slice(private_data);
    let id = create_id(ia, sys::rdma_port_space::RDMA_PS_UDP)?;
    let connect = UdConnect { key: key(qp), qp_num, tag, deadline, private_data: data, remote };
    st.ids.insert(id as usize, Owner::UdConnect(connect));
    // SAFETY: `id` is live; both addresses are valid sockaddrs.
    let rc = unsafe {
        sys::rdma_resolve_addr(
            id,
            (src as *mut sys::sockaddr_storage).cast(),
            (dst as *mut sys::sockaddr_storage).cast(),
            RESOLVE_MS,
        )
    };
    if rc != 0 {
        let e = errno();
        destroy_id(st, id);
        return Err(dat_error(e));
    }
    st.rearm |= deadline.is_some();
    Ok(())
}

/// A UD connect under way: the QP it resolves a peer for, when it gives
/// up, what it sends, and where to.
#[derive(Clone)]
pub(crate) struct UdConnect {
    key: usize,
    qp_num: u32,
    tag: u64,
    deadline: Option<Instant>,
    private_data: Vec<u8>,
    remote: IaAddress,
}

pub(crate) fn accept(request: &mut ConnReq, ia: &IaShared, qp: *mut sys::ibv_qp, private_data: &[u8]) -> DatResult<()> {
    let id = request.id;
    if id.is_null() {
        return Err(DatError::of(ErrorType::InvalidState));
    }
    let mut cm = ia.cm().lock();
    let st = &mut *cm;
    let tunables = st.tunables;
    let conn = conn_of(st, qp)?;
    if let Some((peer_qpn, peer_data)) = request.ud.take() {
        if !conn.ud {
            request.ud = Some((peer_qpn, peer_data));
            return Err(DatError::invalid_arg(2));
        }
        return ud_accept(request, ia, st, qp, (peer_qpn, peer_data), private_data);
    }
    if conn.ud {
        return Err(DatError::invalid_arg(2));
    }
    to_cm_state(conn, id, sys::ibv_qp_state::IBV_QPS_INIT, &tunables)?;
    to_cm_state(conn, id, sys::ibv_qp_state::IBV_QPS_RTR, &tunables)?;
    let mut param = conn_param(conn, private_data, &tunables);
    // SAFETY: `id` is a live request; `param` and the data outlive the call.
    check_errno(unsafe { sys::rdma_accept(id, &mut param) })?;
    let tag = conn.tag;
    release(st, key(qp));
    purge(st, tag);
    let conn = conn_of(st, qp)?;
    conn.id = id;
    conn.phase = Phase::Accepting;
    st.ids.insert(id as usize, Owner::Qp(key(qp)));
    request.id = std::ptr::null_mut();
    Ok(())
}

/// Answer a UD request: a SIDR reply with the QP's number, and the peer's
/// address made here, for rdma_cm reports nothing more to a passive UD id.
/// The id stays with the QP.
fn ud_accept(
    request: &mut ConnReq,
    ia: &IaShared,
    st: &mut CmState,
    qp: *mut sys::ibv_qp,
    (peer_qpn, peer_data): (u32, PrivateData),
    private_data: &[u8],
) -> DatResult<()> {
    let id = request.id;
    let len = u8::try_from(private_data.len()).map_err(|_| DatError::invalid_arg(4))?;
    let mut data = Vec::with_capacity(UD_REPLY_HEADER + private_data.len());
    data.push(len);
    data.extend_from_slice(private_data);
    // SAFETY: plain C data.
    let mut param: sys::rdma_conn_param = unsafe { std::mem::zeroed() };
    param.private_data = data.as_ptr().cast();
    param.private_data_len = data.len().min(u8::MAX as usize) as u8;
    // SAFETY: the QP is live while its `Conn` is kept.
    param.qp_num = unsafe { (*qp).qp_num };
    // SAFETY: `id` is a live request; `param` and the data outlive the call.
    check_errno(unsafe { sys::rdma_accept(id, &mut param) })?;
    // SAFETY: a request's id knows both ends: the GIDs (on RoCE, the
    // IPv4-mapped addresses), the port, and a path on InfiniBand.
    let (dgid, port_num, path, remote) = unsafe {
        let route = &(*id).route;
        let path = (route.num_paths > 0 && !route.path_rec.is_null()).then(|| *route.path_rec);
        (
            route.addr.addr.ibaddr.dgid.raw,
            (*id).port_num,
            path,
            addr::from_sockaddr(&raw const route.addr.__bindgen_anon_2.dst_addr),
        )
    };
    let grh = Grh { dgid, sgid_index: ia.gid_index, hop_limit: UD_HOP_LIMIT, traffic_class: 0, flow_label: 0 };
    let ah = AhAttr {
        dlid: path.map_or(0, |p| u16::from_be(p.dlid)),
        sl: path.map_or(0, |p| p.sl),
        port_num,
        grh: Some(grh),
    };
    let peer = UdPeer { ah, qpn: peer_qpn, qkey: sys::RDMA_UDP_QKEY };
    st.ids.remove(&(id as usize));
    let conn = conn_of(st, qp)?;
    conn.ud_ids.push(id);
    let tag = conn.tag;
    request.id = std::ptr::null_mut();
    st.events.push_back(Ready::UdEstablished { tag, peer, remote, passive: true, private_data: peer_data });
    Ok(())
}

pub(crate) fn reject(request: ConnReq, private_data: &[u8]) {
    if !request.id.is_null() {
        let len = private_data.len().min(u8::MAX as usize) as u8;
        let _cm = request.ia.cm().lock();
        // SAFETY: `id` is a live request; the data outlives the call. A
        // failure leaves nothing to undo: the id is destroyed on drop.
        unsafe { sys::rdma_reject(request.id, private_data.as_ptr().cast(), len) };
    }
}

/// Tear the connection down and flush the QP. A graceful disconnect
/// keeps the id, so its DISCONNECTED event still arrives; an abrupt one
/// destroys it, and with it anything the connection had still to say.
pub(crate) fn disconnect(ia: &IaShared, qp: &QpShared, graceful: bool) {
    {
        let mut cm = ia.cm().lock();
        let st = &mut *cm;
        let Some(conn) = st.conns.get_mut(&key(qp.qp)) else { return };
        if !conn.id.is_null() && matches!(conn.phase, Phase::Connecting | Phase::Accepting | Phase::Established) {
            // SAFETY: `id` is live. Disconnecting an id that never
            // connected fails harmlessly.
            unsafe { sys::rdma_disconnect(conn.id) };
        }
        conn.phase = Phase::Closed;
        conn.deadline = None;
        if !graceful {
            let tag = conn.tag;
            release(st, key(qp.qp));
            purge(st, tag);
        }
    }
    qp.break_off();
}

/// The earliest connect deadline of the IA.
pub(crate) fn next_deadline(st: &CmState) -> Option<Instant> {
    let connects = st.conns.values().filter(|c| c.phase == Phase::Connecting).filter_map(|c| c.deadline);
    let ud = st.ids.values().filter_map(|o| match o {
        Owner::UdConnect(c) => c.deadline,
        _ => None,
    });
    connects.chain(ud).min()
}

/// The next connection event of the IA, if one is ready: the device's
/// errors first, then what the thread finished. With nothing finished,
/// no lock is taken.
pub(crate) fn poll(ia: &Rc<IaShared>) -> Option<CmEvent<ConnReq>> {
    if let Some(error) = ia.device_error() {
        return Some(error);
    }
    let cm = ia.cm();
    if !cm.pending() {
        return None;
    }
    let ready = cm.lock().events.pop_front()?;
    Some(match ready {
        Ready::Request { listener, id, ud, remote, remote_port, private_data } => {
            let is_ud = ud.is_some();
            let request = ConnReq { id, ia: ia.clone(), ud };
            CmEvent::Request { listener, request, remote, remote_port, private_data, ud: is_ud }
        }
        Ready::Conn { tag, outcome, private_data } => CmEvent::Conn { tag, outcome, private_data },
        Ready::UdEstablished { tag, peer, remote, passive, private_data } => {
            CmEvent::UdEstablished { tag, peer, remote, passive, private_data }
        }
        Ready::Catastrophic => CmEvent::Catastrophic,
    })
}

/// The thread's work when the channel is readable: read every event,
/// acknowledge it, and take the step it calls for.
pub(crate) fn drain(st: &mut CmState, channel: *mut sys::rdma_event_channel) {
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
        let connect = match st.ids.get(&(id as usize)) {
            Some(Owner::UdConnect(c)) => Some(c.clone()),
            _ => None,
        };
        let out = match connect {
            Some(c) => ud_dispatch(st, &c, kind, id, status, &ud, private_data),
            None => dispatch(st, kind, id, listen_id, status, private_data),
        };
        if let Some(out) = out {
            st.events.push_back(out);
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
    st: &mut CmState,
    c: &UdConnect,
    kind: ev::Type,
    id: *mut sys::rdma_cm_id,
    status: i32,
    ud: &sys::rdma_ud_param,
    private_data: PrivateData,
) -> Option<Ready> {
    let tag = c.tag;
    let mut failed = |outcome, private_data| {
        destroy_id(st, id);
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
            st.ids.remove(&(id as usize));
            match st.conns.get_mut(&c.key) {
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
pub(crate) fn expire(st: &mut CmState, now: Instant) {
    let ud: Vec<(usize, u64)> = st
        .ids
        .iter()
        .filter_map(|(&id, o)| match o {
            Owner::UdConnect(c) if c.deadline.is_some_and(|d| now >= d) => Some((id, c.tag)),
            _ => None,
        })
        .collect();
    for (id, tag) in ud {
        destroy_id(st, id as *mut sys::rdma_cm_id);
        st.events.push_back(timed_out(tag));
    }
    let rc: Vec<usize> = st
        .conns
        .iter()
        .filter(|(_, c)| c.phase == Phase::Connecting && c.deadline.is_some_and(|d| now >= d))
        .map(|(&key, _)| key)
        .collect();
    for key in rc {
        let Some(conn) = st.conns.get_mut(&key) else { continue };
        conn.phase = Phase::Closed;
        conn.deadline = None;
        let tag = conn.tag;
        release(st, key);
        st.events.push_back(timed_out(tag));
    }
}

fn timed_out(tag: u64) -> Ready {
    Ready::Conn { tag, outcome: ConnOutcome::TimedOut, private_data: PrivateData::new() }
}

/// An event on an id that is not a UD connect's.
fn dispatch(
    st: &mut CmState,
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
        return request(st, id, listen_id, private_data);
    }
    let key = match st.ids.get(&(id as usize)) {
        Some(Owner::Qp(key)) => *key,
        // Events of a request nobody accepted yet, or of a listener.
        _ => return None,
    };
    let tunables = st.tunables;
    let conn = st.conns.get_mut(&key)?;
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
    st: &mut CmState,
    id: *mut sys::rdma_cm_id,
    listen_id: *mut sys::rdma_cm_id,
    private_data: PrivateData,
) -> Option<Ready> {
    let Some(&Owner::Listener(listener)) = st.ids.get(&(listen_id as usize)) else {
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
    st.ids.insert(id as usize, Owner::Request);
    // SAFETY: a request's id knows its peer's address.
    let remote = unsafe { addr::from_sockaddr(&raw const (*id).route.addr.__bindgen_anon_2.dst_addr) };
    let remote_port = u64::from(addr::port(&remote));
    Some(Ready::Request { listener, id, ud, remote, remote_port, private_data })
}

#[cfg(test)]
mod tests {
    use super::port;

    #[test]
    fn a_qualifier_that_fits_is_its_port_and_a_wider_one_folds_into_the_top_ports() {
        assert_eq!(port(0), 0);
        assert_eq!(port(62000), 62000);
        assert_eq!(port(0xffff), 0xffff);
        // 0xaffab1e = 184527646 = 5766 * 32001 + 9880.
        assert_eq!(port(0xaffab1e), 33534 + 9880);
        assert_eq!(port(0x1_0000), 33534 + 1534);
        assert_eq!(port(u64::MAX), 33534 + (u64::MAX % 32001) as u16);
        assert!((0x1_0000..0x1_0000 + 40_000).all(|q| (33534..=65534).contains(&port(q))));
    }
}
