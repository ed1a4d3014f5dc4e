//! Connection management through rdma_cm, with the QP kept apart from
//! the rdma_cm id.
//!
//! DAT creates an EP's QP before any connection and lets receives be
//! posted on it, and a passive side accepts on an EP of its choosing. So
//! QPs are plain verbs QPs, created in INIT, and udat moves them through
//! RTR and RTS itself with the attributes `rdma_init_qp_attr` computes
//! for the connection and the IA's tunables ([`to_cm_state`]): the
//! active side on CONNECT_RESPONSE (then `rdma_establish`), the passive
//! side to RTR before `rdma_accept` and to RTS on ESTABLISHED.
//!
//! The consumer's calls are here: listen, connect, accept, reject,
//! disconnect, reset, and `poll`, which hands the core what is finished.
//! The IA's own thread (`progress`) takes the steps that the channel's
//! events and the connects' deadlines call for (`conn`). Both work on
//! [`CmState`] under its lock.

use std::rc::Rc;
use std::time::{Duration, Instant};

use udat_core::{
    backend::{AhAttr, CmEvent, Grh, PrivateData, UdPeer},
    types::IaAddress,
    DatError, DatResult, ErrorType,
};

use crate::addr;
use crate::conn::{
    conn_param, destroy_id, key, purge, release, to_cm_state, CmState, Conn, Owner, Phase, Ready, UdConnect,
    RESOLVE_MS, UD_REPLY_HEADER, UD_REQUEST_HEADER,
};
use crate::device::IaShared;
use crate::qp_shared::QpShared;
use crate::status::{check_errno, dat_error, errno};
use crate::sys;

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

/// Start keeping the connection half of `qp`, a QP of `ia`.
pub(crate) fn register(ia: &IaShared, qp: &QpShared) {
    ia.cm().lock().conns.insert(key(qp.qp), Conn::of(qp));
}

/// The QP `qp` of `ia` is about to be destroyed: destroy its ids, and
/// forget it. The thread never reaches it again.
pub(crate) fn forget(ia: &IaShared, qp: *mut sys::ibv_qp) {
    let mut cm = ia.cm().lock();
    let state = &mut *cm;
    if let Some(conn) = state.conns.get(&key(qp)) {
        let tag = conn.tag;
        release(state, key(qp));
        purge(state, tag);
    }
    state.conns.remove(&key(qp));
}

/// Forget the connection of `qp`, of `ia`, and the events it left
/// unread: its next connection starts from nothing.
pub(crate) fn reset(ia: &IaShared, qp: *mut sys::ibv_qp) {
    let mut cm = ia.cm().lock();
    let state = &mut *cm;
    let Some(conn) = state.conns.get_mut(&key(qp)) else { return };
    conn.phase = Phase::Idle;
    conn.deadline = None;
    let tag = conn.tag;
    release(state, key(qp));
    purge(state, tag);
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
    state: &mut CmState,
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
        destroy_id(state, id);
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

/// The conn of `qp` in `state`, or `DAT_INTERNAL_ERROR` for a QP whose
/// creation never registered it.
fn conn_of(state: &mut CmState, qp: *mut sys::ibv_qp) -> DatResult<&mut Conn> {
    state.conns.get_mut(&key(qp)).ok_or(DatError::of(ErrorType::InternalError))
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
    let state = &mut *cm;
    let conn = conn_of(state, qp)?;
    if conn.ud {
        let tag = conn.tag;
        return ud_connect(ia, state, (qp, tag), (&mut src, &mut dst), *remote, private_data, deadline);
    }
    let tag = conn.tag;
    release(state, key(qp));
    purge(state, tag);
    let id = create_id(ia, sys::rdma_port_space::RDMA_PS_TCP)?;
    state.ids.insert(id as usize, Owner::Qp(key(qp)));
    let conn = conn_of(state, qp)?;
    conn.id = id;
    // SAFETY: `id` is live; both addresses are valid sockaddrs.
    let rc = unsafe { sys::rdma_resolve_addr(id, (&raw mut src).cast(), (&raw mut dst).cast(), RESOLVE_MS) };
    if rc != 0 {
        let e = errno();
        release(state, key(qp));
        return Err(dat_error(e));
    }
    conn.phase = Phase::Connecting;
    conn.deadline = deadline;
    conn.private_data = private_data.to_vec();
    state.rearm |= deadline.is_some();
    Ok(())
}

/// A UD connect of the QP `qp` (tag `tag`): one more peer, through an id
/// of its own (`RDMA_PS_UDP`: a SIDR request and reply, IBTA Vol. 1
/// §12.11).
fn ud_connect(
    ia: &IaShared,
    state: &mut CmState,
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
    state.ids.insert(id as usize, Owner::UdConnect(connect));
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
        destroy_id(state, id);
        return Err(dat_error(e));
    }
    state.rearm |= deadline.is_some();
    Ok(())
}

pub(crate) fn accept(request: &mut ConnReq, ia: &IaShared, qp: *mut sys::ibv_qp, private_data: &[u8]) -> DatResult<()> {
    let id = request.id;
    if id.is_null() {
        return Err(DatError::of(ErrorType::InvalidState));
    }
    let mut cm = ia.cm().lock();
    let state = &mut *cm;
    let tunables = state.tunables;
    let conn = conn_of(state, qp)?;
    if let Some((peer_qpn, peer_data)) = request.ud.take() {
        if !conn.ud {
            request.ud = Some((peer_qpn, peer_data));
            return Err(DatError::invalid_arg(2));
        }
        return ud_accept(request, ia, state, qp, (peer_qpn, peer_data), private_data);
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
    release(state, key(qp));
    purge(state, tag);
    let conn = conn_of(state, qp)?;
    conn.id = id;
    conn.phase = Phase::Accepting;
    state.ids.insert(id as usize, Owner::Qp(key(qp)));
    request.id = std::ptr::null_mut();
    Ok(())
}

/// Answer a UD request: a SIDR reply with the QP's number, and the peer's
/// address made here, for rdma_cm reports nothing more to a passive UD id.
/// The id stays with the QP.
fn ud_accept(
    request: &mut ConnReq,
    ia: &IaShared,
    state: &mut CmState,
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
    state.ids.remove(&(id as usize));
    let conn = conn_of(state, qp)?;
    conn.ud_ids.push(id);
    let tag = conn.tag;
    request.id = std::ptr::null_mut();
    state.events.push_back(Ready::UdEstablished { tag, peer, remote, passive: true, private_data: peer_data });
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
        let state = &mut *cm;
        let Some(conn) = state.conns.get_mut(&key(qp.qp)) else { return };
        if !conn.id.is_null() && matches!(conn.phase, Phase::Connecting | Phase::Accepting | Phase::Established) {
            // SAFETY: `id` is live. Disconnecting an id that never
            // connected fails harmlessly.
            unsafe { sys::rdma_disconnect(conn.id) };
        }
        conn.phase = Phase::Closed;
        conn.deadline = None;
        if !graceful {
            let tag = conn.tag;
            release(state, key(qp.qp));
            purge(state, tag);
        }
    }
    qp.break_off();
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
