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
    backend::{CmEvent, ConnOutcome, PrivateData},
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

/// A listening rdma_cm id.
pub struct Listener {
    id: *mut sys::rdma_cm_id,
    ia: Rc<IaShared>,
}

/// A connection request not yet accepted or rejected.
pub struct ConnReq {
    id: *mut sys::rdma_cm_id,
    ia: Rc<IaShared>,
}

pub(crate) fn listen(ia: &Rc<IaShared>, conn_qual: u64, tag: u64) -> DatResult<Listener> {
    let mut local = addr::to_storage(&ia.address, port(conn_qual)).ok_or(DatError::of(ErrorType::InvalidAddress))?;
    let id = create_id(ia)?;
    let listener = Listener { id, ia: ia.clone() };
    // SAFETY: `id` is live; `local` is a valid sockaddr.
    check_errno(unsafe { sys::rdma_bind_addr(id, (&raw mut local).cast()) })?;
    // SAFETY: `id` is bound.
    check_errno(unsafe { sys::rdma_listen(id, 128) })?;
    ia.ids.borrow_mut().insert(id as usize, Owner::Listener(tag));
    Ok(listener)
}

impl Drop for Listener {
    fn drop(&mut self) {
        destroy_id(&self.ia, self.id);
    }
}

impl Drop for ConnReq {
    fn drop(&mut self) {
        if !self.id.is_null() {
            destroy_id(&self.ia, self.id);
        }
    }
}

fn create_id(ia: &IaShared) -> DatResult<*mut sys::rdma_cm_id> {
    let mut id = std::ptr::null_mut();
    // SAFETY: the channel is open; `id` is ours to fill.
    let rc = unsafe { sys::rdma_create_id(ia.cm, &mut id, std::ptr::null_mut(), sys::rdma_port_space::RDMA_PS_TCP) };
    check_errno(rc)?;
    Ok(id)
}

fn destroy_id(ia: &IaShared, id: *mut sys::rdma_cm_id) {
    ia.ids.borrow_mut().remove(&(id as usize));
    // SAFETY: `id` is live and every event on it was acknowledged; the
    // kernel drops events not yet read.
    unsafe { sys::rdma_destroy_id(id) };
}

/// Forget the QP's current rdma_cm id, if it has one.
pub(crate) fn release_id(ia: &IaShared, qp: &QpShared) {
    let id = qp.id.replace(std::ptr::null_mut());
    if !id.is_null() {
        destroy_id(ia, id);
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
    release_id(ia, qp);
    let id = create_id(ia)?;
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
            _ => None,
        })
        .min()
}

/// The next connection event of the IA, if one is ready.
pub(crate) fn poll(ia: &Rc<IaShared>, now_us: u64) -> Option<CmEvent<ConnReq>> {
    if let Some(error) = ia.device_error() {
        return Some(error);
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
        // private data is readable for its length until the ack.
        let private_data = unsafe { copy_private_data(&e.param.conn) };
        // SAFETY: the event is not used after this.
        unsafe { sys::rdma_ack_cm_event(event) };
        if let Some(out) = dispatch(ia, kind, id, listen_id, status, private_data) {
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

/// A connect whose deadline passed gives up: its id is destroyed.
fn expire(ia: &IaShared, now_us: u64) -> Option<CmEvent<ConnReq>> {
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
        let request = ConnReq { id, ia: ia.clone() };
        let listener = listener?; // a listener already gone: the request is destroyed
        ia.ids.borrow_mut().insert(id as usize, Owner::Request);
        // SAFETY: a request's id knows its peer's address.
        let remote = unsafe { addr::from_sockaddr(&raw const (*id).route.addr.__bindgen_anon_2.dst_addr) };
        let remote_port = u64::from(addr::port(&remote));
        return Some(CmEvent::Request { listener, request, remote, remote_port, private_data, ud: false });
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
