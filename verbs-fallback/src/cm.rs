//! Connection management through rdma_cm, with the QP kept apart from
//! the rdma_cm id.
//!
//! DAT creates an EP's QP before any connection and lets receives be
//! posted on it, and a passive side accepts on an EP of its choosing. So
//! QPs are plain verbs QPs, created in INIT, and udat moves them through
//! RTR and RTS itself with the attributes `rdma_init_qp_attr` computes
//! for the connection: the active side on CONNECT_RESPONSE (then
//! `rdma_establish`), the passive side to RTR before `rdma_accept` and to
//! RTS on ESTABLISHED. Events are read from the IA's channel only when
//! the core asks (no thread), and acknowledged at once after copying.

use std::rc::Rc;

use udat_core::{
    backend::{AhAttr, CmEvent, ConnOutcome, Grh, PrivateData, UdPeer},
    types::IaAddress,
    DatError, DatResult, ErrorType,
};

use crate::addr;
use crate::device::{IaShared, Owner};
use crate::qp::{Phase, QpShared};
use crate::status::{check_errno, dat_error, errno};
use crate::sys;
use crate::sys::rdma_cm_event_type as ev;
use crate::Clock;

/// How long address and route resolution may take.
const RESOLVE_MS: i32 = 2000;
/// IB CM reject reason `IB_CM_REJ_CONSUMER_DEFINED`: the peer's consumer
/// said no (a port nobody listens on is `IB_CM_REJ_INVALID_SERVICE_ID`).
const REJ_CONSUMER_DEFINED: i32 = 28;
/// RNR retries: 7 means they never give up, as DAT consumers expect a
/// receiver to catch up.
const RNR_RETRIES: u8 = 7;
/// Transport retries after an ACK timeout: 6, the most that ends. IBTA
/// gives 7 no special meaning, but rxe takes a `retry_cnt` of 7 as
/// "retry forever" (as it does an RNR retry count of 7), so a QP whose
/// peer died or whose cable was cut would never complete what it has in
/// flight. With rdma_cm's ACK timeout the QP gives up after 7 tries of
/// 4.096 µs × 2^timeout each (README, "Two soft-RoCE hosts").
const RETRIES: u8 = 6;

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

pub(crate) fn listen(ia: &Rc<IaShared>, conn_qual: u64, tag: u64) -> DatResult<Listener> {
    let id = listen_on(ia, conn_qual, sys::rdma_port_space::RDMA_PS_TCP)?;
    let mut listener = Listener { id, ud_id: std::ptr::null_mut(), ia: ia.clone() };
    ia.ids.borrow_mut().insert(id as usize, Owner::Listener(tag));
    if let Ok(ud_id) = listen_on(ia, conn_qual, sys::rdma_port_space::RDMA_PS_UDP) {
        listener.ud_id = ud_id;
        ia.ids.borrow_mut().insert(ud_id as usize, Owner::Listener(tag));
    }
    Ok(listener)
}

/// An id of `ps` listening on the port of `conn_qual`.
fn listen_on(ia: &IaShared, conn_qual: u64, ps: sys::rdma_port_space::Type) -> DatResult<*mut sys::rdma_cm_id> {
    let mut local = addr::to_storage(&ia.address, port(conn_qual)).ok_or(DatError::of(ErrorType::InvalidAddress))?;
    let id = create_id(ia, ps)?;
    // SAFETY: `id` is live; `local` is a valid sockaddr.
    let mut rc = unsafe { sys::rdma_bind_addr(id, (&raw mut local).cast()) };
    if rc == 0 {
        // SAFETY: `id` is bound.
        rc = unsafe { sys::rdma_listen(id, 128) };
    }
    if let Err(e) = check_errno(rc) {
        destroy_id(ia, id);
        return Err(e);
    }
    Ok(id)
}

impl Drop for Listener {
    fn drop(&mut self) {
        destroy_id(&self.ia, self.id);
        if !self.ud_id.is_null() {
            destroy_id(&self.ia, self.ud_id);
        }
    }
}

impl Drop for ConnReq {
    fn drop(&mut self) {
        if !self.id.is_null() {
            destroy_id(&self.ia, self.id);
        }
    }
}

fn create_id(ia: &IaShared, ps: sys::rdma_port_space::Type) -> DatResult<*mut sys::rdma_cm_id> {
    let mut id = std::ptr::null_mut();
    // SAFETY: the channel is open; `id` is ours to fill.
    let rc = unsafe { sys::rdma_create_id(ia.cm, &mut id, std::ptr::null_mut(), ps) };
    check_errno(rc)?;
    Ok(id)
}

fn destroy_id(ia: &IaShared, id: *mut sys::rdma_cm_id) {
    ia.ids.borrow_mut().remove(&(id as usize));
    // SAFETY: `id` is live and every event on it was acknowledged; the
    // kernel drops events not yet read.
    unsafe { sys::rdma_destroy_id(id) };
}

/// Forget the QP's current rdma_cm id, if it has one, and a UD QP's ids
/// of its peers and of its connects under way.
pub(crate) fn release_id(ia: &IaShared, qp: &QpShared) {
    let id = qp.id.replace(std::ptr::null_mut());
    if !id.is_null() {
        destroy_id(ia, id);
    }
    if qp.ud {
        for id in qp.ud_ids.take() {
            destroy_id(ia, id);
        }
        let connecting: Vec<usize> = ia
            .ids
            .borrow()
            .iter()
            .filter_map(|(&id, o)| matches!(o, Owner::UdConnect(c) if std::ptr::eq(&*c.qp, qp)).then_some(id))
            .collect();
        for id in connecting {
            destroy_id(ia, id as *mut sys::rdma_cm_id);
        }
    }
}

fn conn_param(qp: &QpShared, private_data: &[u8]) -> sys::rdma_conn_param {
    sys::rdma_conn_param {
        private_data: private_data.as_ptr().cast(),
        private_data_len: private_data.len().min(u8::MAX as usize) as u8,
        responder_resources: qp.rdma_read_in,
        initiator_depth: qp.rdma_read_out,
        flow_control: 1,
        retry_count: RETRIES,
        rnr_retry_count: RNR_RETRIES,
        srq: u8::from(qp.srq.is_some()),
        // SAFETY: the QP is live while `qp` is.
        qp_num: unsafe { (*qp.qp).qp_num },
    }
}

pub(crate) fn connect(
    ia: &Rc<IaShared>,
    qp: &Rc<QpShared>,
    remote: &IaAddress,
    conn_qual: u64,
    private_data: &[u8],
    timeout_us: Option<u64>,
    clock: &Clock,
) -> DatResult<()> {
    let deadline = timeout_us.map(|t| clock.now_us().saturating_add(t));
    let mut dst = addr::to_storage(remote, port(conn_qual)).ok_or(DatError::of(ErrorType::InvalidAddress))?;
    let mut src = addr::to_storage(&ia.address, 0).ok_or(DatError::of(ErrorType::InvalidAddress))?;
    if qp.ud {
        return ud_connect(ia, qp, (&mut src, &mut dst), *remote, private_data, deadline, clock);
    }
    release_id(ia, qp);
    let id = create_id(ia, sys::rdma_port_space::RDMA_PS_TCP)?;
    qp.id.set(id);
    ia.ids.borrow_mut().insert(id as usize, Owner::Qp(qp.clone()));
    // SAFETY: `id` is live; both addresses are valid sockaddrs.
    let rc = unsafe { sys::rdma_resolve_addr(id, (&raw mut src).cast(), (&raw mut dst).cast(), RESOLVE_MS) };
    if rc != 0 {
        let e = errno();
        release_id(ia, qp);
        return Err(dat_error(e));
    }
    qp.phase.set(Phase::Connecting);
    qp.deadline.set(deadline);
    *qp.private_data.borrow_mut() = private_data.to_vec();
    ia.arm_timer(clock);
    Ok(())
}

/// A UD connect of the QP `qp`: one more peer, through an id of its own
/// (`RDMA_PS_UDP`: a SIDR request and reply, IBTA Vol. 1 §12.11).
fn ud_connect(
    ia: &Rc<IaShared>,
    qp: &Rc<QpShared>,
    (src, dst): (&mut sys::sockaddr_storage, &mut sys::sockaddr_storage),
    remote: IaAddress,
    private_data: &[u8],
    deadline: Option<u64>,
    clock: &Clock,
) -> DatResult<()> {
    let len = u8::try_from(private_data.len()).map_err(|_| DatError::invalid_arg(6))?;
    let mut data = Vec::with_capacity(UD_REQUEST_HEADER + private_data.len());
    // SAFETY: the QP is live while `qp` is.
    data.extend_from_slice(&unsafe { (*qp.qp).qp_num }.to_be_bytes());
    data.push(len);
    data.extend_from_slice(private_data);
    let id = create_id(ia, sys::rdma_port_space::RDMA_PS_UDP)?;
    let connect = UdConnect { qp: qp.clone(), deadline, private_data: data, remote };
    ia.ids.borrow_mut().insert(id as usize, Owner::UdConnect(Rc::new(connect)));
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
        destroy_id(ia, id);
        return Err(dat_error(e));
    }
    ia.arm_timer(clock);
    Ok(())
}

/// A UD connect under way: the QP it resolves a peer for, when it gives
/// up, what it sends, and where to.
pub(crate) struct UdConnect {
    pub qp: Rc<QpShared>,
    pub deadline: Option<u64>,
    private_data: Vec<u8>,
    remote: IaAddress,
}

/// A UD request a QP accepted: the event the next look at the connection
/// events reports.
pub(crate) struct UdAccepted {
    tag: u64,
    peer: UdPeer,
    remote: IaAddress,
    private_data: PrivateData,
}

pub(crate) fn accept(
    request: &mut ConnReq,
    ia: &Rc<IaShared>,
    qp: &Rc<QpShared>,
    private_data: &[u8],
) -> DatResult<()> {
    let id = request.id;
    if id.is_null() {
        return Err(DatError::of(ErrorType::InvalidState));
    }
    if let Some((peer_qpn, peer_data)) = request.ud.take() {
        if !qp.ud {
            request.ud = Some((peer_qpn, peer_data));
            return Err(DatError::invalid_arg(2));
        }
        return ud_accept(request, ia, qp, (peer_qpn, peer_data), private_data);
    }
    if qp.ud {
        return Err(DatError::invalid_arg(2));
    }
    qp.to_cm_state(id, sys::ibv_qp_state::IBV_QPS_INIT)?;
    qp.to_cm_state(id, sys::ibv_qp_state::IBV_QPS_RTR)?;
    let mut param = conn_param(qp, private_data);
    // SAFETY: `id` is a live request; `param` and the data outlive the call.
    check_errno(unsafe { sys::rdma_accept(id, &mut param) })?;
    release_id(ia, qp);
    qp.id.set(id);
    qp.phase.set(Phase::Accepting);
    ia.ids.borrow_mut().insert(id as usize, Owner::Qp(qp.clone()));
    request.id = std::ptr::null_mut();
    Ok(())
}

/// Answer a UD request: a SIDR reply with the QP's number, and the peer's
/// address made here, for rdma_cm reports nothing more to a passive UD id.
/// The id stays with the QP.
fn ud_accept(
    request: &mut ConnReq,
    ia: &Rc<IaShared>,
    qp: &Rc<QpShared>,
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
    // SAFETY: the QP is live while `qp` is.
    param.qp_num = unsafe { (*qp.qp).qp_num };
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
    ia.ids.borrow_mut().remove(&(id as usize));
    qp.ud_ids.borrow_mut().push(id);
    request.id = std::ptr::null_mut();
    ia.ud_accepted.borrow_mut().push_back(UdAccepted { tag: qp.tag, peer, remote, private_data: peer_data });
    Ok(())
}

pub(crate) fn reject(request: ConnReq, private_data: &[u8]) {
    if !request.id.is_null() {
        let len = private_data.len().min(u8::MAX as usize) as u8;
        // SAFETY: `id` is a live request; the data outlives the call. A
        // failure leaves nothing to undo: the id is destroyed on drop.
        unsafe { sys::rdma_reject(request.id, private_data.as_ptr().cast(), len) };
    }
}

/// Tear the connection down and flush the QP. A graceful disconnect
/// keeps the id, so its DISCONNECTED event still arrives; an abrupt one
/// destroys it, and with it anything the connection had still to say.
pub(crate) fn disconnect(ia: &IaShared, qp: &QpShared, graceful: bool) {
    let id = qp.id.get();
    if !id.is_null() && matches!(qp.phase.get(), Phase::Connecting | Phase::Accepting | Phase::Established) {
        // SAFETY: `id` is live. Disconnecting an id that never connected
        // fails harmlessly.
        unsafe { sys::rdma_disconnect(id) };
    }
    qp.phase.set(Phase::Closed);
    qp.deadline.set(None);
    if !graceful {
        release_id(ia, qp);
    }
    qp.break_off();
}

/// The earliest connect deadline of the IA.
pub(crate) fn next_deadline(ia: &IaShared) -> Option<u64> {
    ia.ids
        .borrow()
        .values()
        .filter_map(|o| match o {
            Owner::Qp(qp) if qp.phase.get() == Phase::Connecting => qp.deadline.get(),
            Owner::UdConnect(c) => c.deadline,
            _ => None,
        })
        .min()
}

/// The next connection event of the IA, if one is ready.
pub(crate) fn poll(ia: &Rc<IaShared>, now_us: u64) -> Option<CmEvent<ConnReq>> {
    if let Some(error) = ia.device_error() {
        return Some(error);
    }
    if let Some(a) = ia.ud_accepted.borrow_mut().pop_front() {
        let UdAccepted { tag, peer, remote, private_data } = a;
        return Some(CmEvent::UdEstablished { tag, peer, remote, passive: true, private_data });
    }
    if let Some(expired) = expire(ia, now_us) {
        return Some(expired);
    }
    loop {
        let mut event = std::ptr::null_mut();
        // SAFETY: the channel is open and non-blocking.
        if unsafe { sys::rdma_get_cm_event(ia.cm, &mut event) } != 0 {
            return None;
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
        let owner = match ia.ids.borrow().get(&(id as usize)) {
            Some(Owner::UdConnect(c)) => Some(c.clone()),
            _ => None,
        };
        let out = match owner {
            Some(c) => ud_dispatch(ia, &c, kind, id, status, &ud, private_data),
            None => dispatch(ia, kind, id, listen_id, status, private_data),
        };
        if let Some(out) = out {
            return Some(out);
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
    ia: &Rc<IaShared>,
    c: &UdConnect,
    kind: ev::Type,
    id: *mut sys::rdma_cm_id,
    status: i32,
    ud: &sys::rdma_ud_param,
    private_data: PrivateData,
) -> Option<CmEvent<ConnReq>> {
    let tag = c.qp.tag;
    let failed = |outcome, private_data| {
        destroy_id(ia, id);
        Some(CmEvent::Conn { tag, outcome, private_data })
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
            // SAFETY: the QP is live while `c` holds it.
            param.qp_num = unsafe { (*c.qp.qp).qp_num };
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
            ia.ids.borrow_mut().remove(&(id as usize));
            c.qp.ud_ids.borrow_mut().push(id);
            let private_data = unframed(&private_data, UD_REPLY_HEADER);
            Some(CmEvent::UdEstablished { tag, peer, remote: c.remote, passive: false, private_data })
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

/// A connect whose deadline passed gives up: its id is destroyed.
fn expire(ia: &IaShared, now_us: u64) -> Option<CmEvent<ConnReq>> {
    let ud = ia.ids.borrow().iter().find_map(|(&id, o)| match o {
        Owner::UdConnect(c) if c.deadline.is_some_and(|d| now_us >= d) => Some((id, c.qp.tag)),
        _ => None,
    });
    if let Some((id, tag)) = ud {
        destroy_id(ia, id as *mut sys::rdma_cm_id);
        return Some(CmEvent::Conn { tag, outcome: ConnOutcome::TimedOut, private_data: PrivateData::new() });
    }
    let qp = ia.ids.borrow().values().find_map(|o| match o {
        Owner::Qp(qp) if qp.phase.get() == Phase::Connecting && qp.deadline.get().is_some_and(|d| now_us >= d) => {
            Some(qp.clone())
        }
        _ => None,
    })?;
    qp.phase.set(Phase::Closed);
    qp.deadline.set(None);
    release_id(ia, &qp);
    Some(CmEvent::Conn { tag: qp.tag, outcome: ConnOutcome::TimedOut, private_data: PrivateData::new() })
}

fn dispatch(
    ia: &Rc<IaShared>,
    kind: ev::Type,
    id: *mut sys::rdma_cm_id,
    listen_id: *mut sys::rdma_cm_id,
    status: i32,
    private_data: PrivateData,
) -> Option<CmEvent<ConnReq>> {
    if kind == ev::RDMA_CM_EVENT_DEVICE_REMOVAL {
        return Some(CmEvent::Catastrophic);
    }
    if kind == ev::RDMA_CM_EVENT_CONNECT_REQUEST {
        let listener = match ia.ids.borrow().get(&(listen_id as usize)) {
            Some(Owner::Listener(tag)) => Some(*tag),
            _ => None,
        };
        // SAFETY: a request's id is live; its port space is set.
        let ud = unsafe { (*id).ps } == sys::rdma_port_space::RDMA_PS_UDP;
        // A UD request leads with the requester's QP number and the
        // length of its consumer's data (`UD_REQUEST_HEADER`).
        let (ud, private_data) = if ud {
            let qpn = private_data.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            let data = unframed(&private_data, UD_REQUEST_HEADER);
            (Some((qpn.unwrap_or(0), data.clone())), data)
        } else {
            (None, private_data)
        };
        let is_ud = ud.is_some();
        let request = ConnReq { id, ia: ia.clone(), ud };
        let listener = listener?; // a listener already gone: the request is destroyed
        ia.ids.borrow_mut().insert(id as usize, Owner::Request);
        // SAFETY: a request's id knows its peer's address.
        let remote = unsafe { addr::from_sockaddr(&raw const (*id).route.addr.__bindgen_anon_2.dst_addr) };
        let remote_port = u64::from(addr::port(&remote));
        return Some(CmEvent::Request { listener, request, remote, remote_port, private_data, ud: is_ud });
    }
    let qp = match ia.ids.borrow().get(&(id as usize)) {
        Some(Owner::Qp(qp)) => qp.clone(),
        // Events of a request nobody accepted yet, or of a listener.
        _ => return None,
    };
    let conn = |outcome, private_data| Some(CmEvent::Conn { tag: qp.tag, outcome, private_data });
    let failed = |qp: &QpShared| {
        let outcome =
            if qp.phase.get() == Phase::Accepting { ConnOutcome::AcceptError } else { ConnOutcome::Unreachable };
        qp.phase.set(Phase::Closed);
        outcome
    };
    match kind {
        ev::RDMA_CM_EVENT_ADDR_RESOLVED if qp.phase.get() == Phase::Connecting => {
            // SAFETY: `id` is live.
            if unsafe { sys::rdma_resolve_route(id, RESOLVE_MS) } != 0 {
                return conn(failed(&qp), PrivateData::new());
            }
            None
        }
        ev::RDMA_CM_EVENT_ROUTE_RESOLVED if qp.phase.get() == Phase::Connecting => {
            let data = qp.private_data.take();
            let mut param = conn_param(&qp, &data);
            let started = qp.to_cm_state(id, sys::ibv_qp_state::IBV_QPS_INIT).is_ok()
                // SAFETY: `id` is live; `param` and the data outlive the call.
                && unsafe { sys::rdma_connect(id, &mut param) } == 0;
            if started {
                None
            } else {
                conn(failed(&qp), PrivateData::new())
            }
        }
        ev::RDMA_CM_EVENT_CONNECT_RESPONSE if qp.phase.get() == Phase::Connecting => {
            let ready = qp.to_cm_state(id, sys::ibv_qp_state::IBV_QPS_RTR).is_ok()
                && qp.to_cm_state(id, sys::ibv_qp_state::IBV_QPS_RTS).is_ok()
                // SAFETY: `id` is live and its QP ready to send.
                && unsafe { sys::rdma_establish(id) } == 0;
            if !ready {
                // SAFETY: `id` is live; the peer learns the attempt failed.
                unsafe { sys::rdma_reject(id, std::ptr::null(), 0) };
                return conn(failed(&qp), PrivateData::new());
            }
            qp.phase.set(Phase::Established);
            qp.deadline.set(None);
            conn(ConnOutcome::Established, private_data)
        }
        ev::RDMA_CM_EVENT_ESTABLISHED if qp.phase.get() == Phase::Accepting => {
            if qp.to_cm_state(id, sys::ibv_qp_state::IBV_QPS_RTS).is_err() {
                // SAFETY: `id` is live.
                unsafe { sys::rdma_disconnect(id) };
                return conn(failed(&qp), PrivateData::new());
            }
            qp.phase.set(Phase::Established);
            conn(ConnOutcome::Established, PrivateData::new())
        }
        ev::RDMA_CM_EVENT_REJECTED if qp.phase.get() == Phase::Connecting => {
            qp.phase.set(Phase::Closed);
            if status == REJ_CONSUMER_DEFINED {
                conn(ConnOutcome::PeerRejected, private_data)
            } else {
                conn(ConnOutcome::NonPeerRejected, PrivateData::new())
            }
        }
        ev::RDMA_CM_EVENT_ADDR_ERROR
        | ev::RDMA_CM_EVENT_ROUTE_ERROR
        | ev::RDMA_CM_EVENT_UNREACHABLE
        | ev::RDMA_CM_EVENT_CONNECT_ERROR
        | ev::RDMA_CM_EVENT_REJECTED
            if matches!(qp.phase.get(), Phase::Connecting | Phase::Accepting) =>
        {
            conn(failed(&qp), PrivateData::new())
        }
        ev::RDMA_CM_EVENT_DISCONNECTED => {
            // Answer the peer's DREQ; our own disconnect's answer lands here too.
            // SAFETY: `id` is live.
            unsafe { sys::rdma_disconnect(id) };
            qp.phase.set(Phase::Closed);
            conn(ConnOutcome::Disconnected, PrivateData::new())
        }
        _ => None,
    }
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
