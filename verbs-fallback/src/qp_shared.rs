//! The part of a QP that its posts and its CQs share ([`QpShared`]):
//! the rings of what is outstanding, in which a completion's `wr_id`
//! finds its DAT cookie, the flushes of what is outstanding, and the
//! QP's own state transitions. It knows neither the CQs, the device nor
//! the connection manager: a CQ finds it by QP number (`cq`), and the
//! QP's posts and its connection are `qp`'s.

use std::cell::{Cell, UnsafeCell};
use std::rc::Rc;

use udat_core::{
    backend::Completion,
    types::{DtoOp, DtoStatus},
    DatResult,
};

use crate::ring::Ring;
use crate::srq::SrqShared;
use crate::status::check;
use crate::sys;

/// The QP admits every remote operation; each LMR's and RMR's own
/// privileges decide what a peer may do.
pub(crate) const QP_ACCESS: u32 = sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
    | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
    | sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0
    | sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0;

/// A posted send-queue request: what its completion reports.
#[derive(Clone, Copy)]
pub(crate) struct SendSlot {
    pub cookie: u64,
    pub length: u32,
    pub op: DtoOp,
    pub notify: bool,
    pub signalled: bool,
}

impl SendSlot {
    /// What a slot of the ring holds until a request takes it.
    pub const EMPTY: SendSlot = SendSlot { cookie: 0, length: 0, op: DtoOp::Send, notify: false, signalled: false };
}

/// The requests and receives a QP has outstanding. A receive's slot is
/// emptied when it completes out of post order, and leaves the ring when
/// those before it have.
#[derive(Default)]
pub(crate) struct Rings {
    pub sends: Ring<SendSlot>,
    pub recvs: Ring<Option<u64>>,
}

impl Rings {
    /// The cookie of the outstanding receive `seq`, which completed.
    #[inline(always)]
    fn take_recv(&mut self, seq: u64) -> Option<u64> {
        let cookie = self.recvs.get_mut(seq)?.take()?;
        // Receives complete in post order: the oldest leaves, and with it
        // any that completed before it.
        while let Some(None) = self.recvs.front() {
            self.recvs.pop_front();
        }
        Some(cookie)
    }
}

/// The part of a QP that CQs reach. Its connection's half is the IA's
/// connection manager's (`conn::Conn`).
pub(crate) struct QpShared {
    pub qp: *mut sys::ibv_qp,
    pub tag: u64,
    /// Used by one thread at a time, in [`QpShared::rings`] alone.
    rings: UnsafeCell<Rings>,
    pub srq: Option<Rc<SrqShared>>,
    pub rdma_read_in: u8,
    pub rdma_read_out: u8,
    /// Whether the QP was moved to ERROR since it last went to INIT: a
    /// post then makes the device flush it at once (`qp::Qp::finish_post`).
    pub errored: Cell<bool>,
    /// A UD QP: ready to send and receive from creation on, each peer
    /// resolved by an rdma_cm id of its own, its receives complete as
    /// `DtoOp::ReceiveUd`.
    pub ud: bool,
}

impl QpShared {
    /// The shared part of `qp`, a QP of the device `device` that takes
    /// its receives from `srq` if one is given, with the RDMA reads it
    /// asked for in each direction, clamped to the device's limits.
    pub fn new(
        qp: *mut sys::ibv_qp,
        device: &sys::ibv_device_attr,
        rings: Rings,
        srq: Option<Rc<SrqShared>>,
        (rdma_read_in, rdma_read_out): (u32, u32),
        tag: u64,
    ) -> QpShared {
        let clamp = |v: u32, limit: i32| v.min(limit.max(0) as u32).min(u32::from(u8::MAX)) as u8;
        QpShared {
            qp,
            tag,
            rings: UnsafeCell::new(rings),
            srq,
            rdma_read_in: clamp(rdma_read_in, device.max_qp_rd_atom),
            rdma_read_out: clamp(rdma_read_out, device.max_qp_init_rd_atom),
            errored: Cell::new(false),
            ud: false,
        }
    }

    /// What a receive of this QP completes as.
    pub fn recv_op(&self) -> DtoOp {
        if self.ud {
            DtoOp::ReceiveUd
        } else {
            DtoOp::Receive
        }
    }

    /// The QP's rings, for the length of `f`.
    #[inline(always)]
    pub fn rings<R>(&self, f: impl FnOnce(&mut Rings) -> R) -> R {
        // SAFETY: one thread at a time uses a QP: the provider's, or in a
        // provider shared among threads the one holding the lock of the
        // QP's EP (`Backend::SHARED_QUEUES`; `QpShared` is not `Sync`).
        // This is the only place that reaches `rings`, and none of the
        // closures given to it (in this module and in `qp`'s posts) calls
        // it again, so no other reference to the rings exists while `f`
        // runs.
        f(unsafe { &mut *self.rings.get() })
    }

    /// Retire the send with sequence `seq`: its slot, and how many
    /// requests this completion retires.
    #[inline(always)]
    pub fn take_send(&self, seq: u64) -> Option<(SendSlot, u32)> {
        self.rings(|r| r.sends.take_through(seq))
    }

    /// The cookie of the receive `id` (a sequence number, or an SRQ slot).
    #[inline(always)]
    pub fn take_recv(&self, id: u64) -> Option<u64> {
        if let Some(srq) = &self.srq {
            return srq.take(id);
        }
        self.rings(|r| r.take_recv(id))
    }

    /// Every outstanding request, as flushed, to `to`, in post order.
    pub fn flush_sends(&self, mut to: impl FnMut(Completion)) {
        while let Some(slot) = self.rings(|r| r.sends.pop_front()) {
            to(flushed(self.tag, slot.cookie, slot.op, slot.notify));
        }
    }

    /// Every outstanding receive of the QP's own queue, as flushed, to
    /// `to`, in post order.
    pub fn flush_recvs(&self, mut to: impl FnMut(Completion)) {
        if self.srq.is_some() {
            return;
        }
        while let Some(cookie) = self.rings(|r| r.recvs.pop_front()) {
            if let Some(cookie) = cookie {
                to(flushed(self.tag, cookie, self.recv_op(), true));
            }
        }
    }

    /// Requests that will still produce a completion.
    pub fn awaited(&self) -> usize {
        self.rings(|r| r.sends.iter().filter(|s| s.signalled).count() + r.recvs.iter().filter(|c| c.is_some()).count())
    }

    pub fn modify(&self, attr: &mut sys::ibv_qp_attr, mask: i32) -> DatResult<()> {
        // SAFETY: the QP is live while `self` is.
        check(unsafe { sys::ibv_modify_qp(self.qp, attr, mask) })
    }

    /// Move to ERROR: the device flushes what is outstanding, in post
    /// order, and the flushes reach their CQs like any completion.
    pub fn break_off(&self) -> bool {
        let broken = self.to_state(sys::ibv_qp_state::IBV_QPS_ERR).is_ok();
        self.errored.set(self.errored.get() || broken);
        broken
    }

    /// RESET to INIT on `port`, admitting every remote operation.
    pub fn init(&self, port: u8) -> DatResult<()> {
        use sys::ibv_qp_attr_mask as m;
        // SAFETY: plain C data.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
        attr.port_num = port;
        attr.pkey_index = 0;
        attr.qp_access_flags = QP_ACCESS;
        let mask = m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS;
        self.modify(&mut attr, mask.0 as i32)?;
        self.errored.set(false);
        Ok(())
    }

    /// RESET through INIT and RTR to RTS on `port`, as a UD QP: it takes
    /// datagrams of the Q_Key rdma_cm gives every UD id
    /// (`RDMA_UDP_QKEY`, which a SIDR reply announces whatever the accept
    /// says), and sends to any peer an address handle names.
    pub fn ready_ud(&self, port: u8) -> DatResult<()> {
        use sys::ibv_qp_attr_mask as m;
        // SAFETY: plain C data.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
        attr.port_num = port;
        attr.pkey_index = 0;
        attr.qkey = sys::RDMA_UDP_QKEY;
        let mask = m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_QKEY;
        self.modify(&mut attr, mask.0 as i32)?;
        self.to_state(sys::ibv_qp_state::IBV_QPS_RTR)?;
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_RTS;
        attr.sq_psn = 0;
        self.modify(&mut attr, (m::IBV_QP_STATE | m::IBV_QP_SQ_PSN).0 as i32)?;
        self.errored.set(false);
        Ok(())
    }

    /// Move to `state`.
    pub fn to_state(&self, state: sys::ibv_qp_state::Type) -> DatResult<()> {
        // SAFETY: plain C data.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = state;
        self.modify(&mut attr, sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32)
    }
}

/// The completion of a request the device flushed, or would have.
fn flushed(tag: u64, cookie: u64, op: DtoOp, notify: bool) -> Completion {
    Completion { tag, cookie, status: DtoStatus::Flushed, op, transferred_length: 0, imm: 0, retired: 1, notify }
}

#[cfg(test)]
mod tests {
    use super::{Ring, Rings};

    #[test]
    fn a_receive_leaves_once_those_before_it_have_and_each_completes_once() {
        let mut r = Rings { recvs: Ring::new(4, None), ..Rings::default() };
        for cookie in [100, 101, 102] {
            let seq = r.recvs.stage(Some(cookie)).expect("room");
            assert_eq!(seq, cookie - 100);
            r.recvs.commit();
        }
        assert_eq!(r.take_recv(1), Some(101), "out of post order");
        assert_eq!(r.take_recv(1), None, "once");
        assert_eq!(r.recvs.front(), Some(&Some(100)), "the oldest still waits");
        assert_eq!(r.take_recv(0), Some(100));
        assert_eq!(r.recvs.front(), Some(&Some(102)), "both left");
        assert_eq!(r.take_recv(2), Some(102));
        assert_eq!(r.recvs.front(), None, "empty");
        assert_eq!((r.take_recv(3), r.take_recv(0)), (None, None), "never posted; stale");
        assert_eq!(r.recvs.stage(Some(103)), Some(3), "numbers go on rising");
    }
}
