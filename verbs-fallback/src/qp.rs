//! Queue pairs: creation, state transitions, posting, and the rings that
//! turn work-request ids back into DAT cookies.
//!
//! A send's `wr_id` is its sequence number on the QP. Send completions of
//! an RC QP arrive in post order, so a completion for sequence `s` also
//! retires every unsignalled request posted before `s`: they succeeded
//! (a failed one would have produced its own completion first). A
//! receive's `wr_id` has bit 63 set: its sequence number on the QP, or its
//! slot in the SRQ.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use udat_core::{
    backend::{AhAttr, Completion, QpType, RequestOp, SendWr, Sge, UdDest},
    types::{CompletionFlags, DtoOp, DtoStatus},
    DatError, DatResult, ErrorType,
};

use crate::cq::CqShared;
use crate::device::IaShared;
use crate::ring::Ring;
use crate::srq::SrqShared;
use crate::status::{check, dat_error, errno};
use crate::sys;
use crate::wr::{ibv_sges, RECV};
use crate::{cm, Ia, Srq};

/// The inline data a QP asks for; sends that fit go inline.
const INLINE: u32 = 64;

/// The QP admits every remote operation; each LMR's and RMR's own
/// privileges decide what a peer may do.
pub(crate) const QP_ACCESS: u32 = sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
    | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
    | sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0
    | sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0;

/// A posted send-queue request.
#[derive(Clone, Copy)]
pub(crate) struct SendSlot {
    seq: u64,
    pub cookie: u64,
    pub op: DtoOp,
    pub length: u32,
    pub notify: bool,
    signalled: bool,
}

impl SendSlot {
    /// What a slot of the ring holds until a request takes it.
    const EMPTY: SendSlot = SendSlot { seq: 0, cookie: 0, op: DtoOp::Send, length: 0, notify: false, signalled: false };
}

#[derive(Default)]
pub(crate) struct Rings {
    next_send: u64,
    sends: Ring<SendSlot>,
    next_recv: u64,
    recvs: VecDeque<(u64, u64)>,
}

/// The part of a QP that CQs reach. Its connection's half is the IA's
/// connection manager's (`cm::Conn`).
pub(crate) struct QpShared {
    pub qp: *mut sys::ibv_qp,
    pub tag: u64,
    rings: RefCell<Rings>,
    pub srq: Option<Rc<SrqShared>>,
    pub rdma_read_in: u8,
    pub rdma_read_out: u8,
    /// Whether the QP was moved to ERROR since it last went to INIT: a
    /// post then makes the device flush it at once (`Qp::settle_post`).
    errored: Cell<bool>,
    /// A UD QP: ready to send and receive from creation on, each peer
    /// resolved by an rdma_cm id of its own, its receives complete as
    /// `DtoOp::ReceiveUd`.
    pub ud: bool,
}

impl QpShared {
    /// The shared part of `qp`, a QP of `ia` that takes its receives from
    /// `srq` if one is given, with the RDMA reads it asked for in each
    /// direction, clamped to the device's limits.
    pub fn new(
        qp: *mut sys::ibv_qp,
        ia: &IaShared,
        rings: Rings,
        srq: Option<Rc<SrqShared>>,
        (rdma_read_in, rdma_read_out): (u32, u32),
        tag: u64,
    ) -> QpShared {
        let clamp = |v: u32, limit: i32| v.min(limit.max(0) as u32).min(u32::from(u8::MAX)) as u8;
        ia.errors.name_qp(qp, tag);
        QpShared {
            qp,
            tag,
            rings: RefCell::new(rings),
            srq,
            rdma_read_in: clamp(rdma_read_in, ia.device.max_qp_rd_atom),
            rdma_read_out: clamp(rdma_read_out, ia.device.max_qp_init_rd_atom),
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

    /// Retire the send with sequence `seq`: its slot, and how many
    /// requests this completion retires.
    pub fn take_send(&self, seq: u64) -> Option<(SendSlot, u32)> {
        let mut rings = self.rings.borrow_mut();
        // Sequence numbers rise along the ring: one that is not between its
        // ends names no outstanding request.
        let outstanding = match (rings.sends.front(), rings.sends.back()) {
            (Some(first), Some(last)) => (first.seq..=last.seq).contains(&seq),
            _ => false,
        };
        if !outstanding {
            return None;
        }
        let mut retired = 0;
        while let Some(slot) = rings.sends.pop_front() {
            retired += 1;
            if slot.seq == seq {
                return Some((slot, retired));
            }
        }
        None
    }

    /// The operation of the outstanding send with sequence `seq`, left
    /// outstanding.
    pub fn send_op(&self, seq: u64) -> Option<DtoOp> {
        let rings = self.rings.borrow();
        let first = rings.sends.front()?.seq;
        rings.sends.get(usize::try_from(seq.checked_sub(first)?).ok()?).filter(|s| s.seq == seq).map(|s| s.op)
    }

    /// The cookie of the receive `id` (a sequence number, or an SRQ slot).
    pub fn take_recv(&self, id: u64) -> Option<u64> {
        if let Some(srq) = &self.srq {
            return srq.take(id);
        }
        let mut rings = self.rings.borrow_mut();
        let at = rings.recvs.iter().position(|&(seq, _)| seq == id)?;
        rings.recvs.remove(at).map(|(_, cookie)| cookie)
    }

    /// Complete as flushed, on `cq`, every request outstanding in this
    /// QP's queues that report to it (a receive from an SRQ stays with the
    /// SRQ).
    pub fn flush_into(&self, cq: &CqShared) {
        // SAFETY: the QP is live while `self` is; its CQ pointers are
        // fixed at creation.
        let (sends, recvs) = unsafe { ((*self.qp).send_cq == cq.cq, (*self.qp).recv_cq == cq.cq) };
        let mut rings = self.rings.borrow_mut();
        if sends {
            while let Some(slot) = rings.sends.pop_front() {
                cq.stash(flushed(self.tag, slot.cookie, slot.op, slot.notify));
            }
        }
        if recvs && self.srq.is_none() {
            for (_, cookie) in rings.recvs.drain(..) {
                cq.stash(flushed(self.tag, cookie, self.recv_op(), true));
            }
        }
    }

    /// Requests that will still produce a completion.
    fn awaited(&self) -> usize {
        let rings = self.rings.borrow();
        rings.sends.iter().filter(|s| s.signalled).count() + rings.recvs.len()
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

/// A QP as the core holds it.
pub struct Qp {
    conn: QpConn,
    send_cq: Rc<CqShared>,
    recv_cq: Rc<CqShared>,
    max_inline: u32,
}

pub(crate) struct QpSpec<'a> {
    pub ia: &'a Rc<IaShared>,
    pub pd: *mut sys::ibv_pd,
    pub send_cq: Option<Rc<CqShared>>,
    pub recv_cq: Option<Rc<CqShared>>,
    pub srq: Option<Rc<SrqShared>>,
    pub cap: sys::ibv_qp_cap,
    pub rdma_read_in: u32,
    pub rdma_read_out: u32,
    pub tag: u64,
    pub qp_type: QpType,
}

impl Qp {
    /// An RC QP, moved to INIT at once so receives can be posted before
    /// the connection exists (DAT allows them in every state); or a UD
    /// QP, moved to RTS at once.
    pub(crate) fn create(spec: QpSpec<'_>) -> DatResult<Qp> {
        let ia = spec.ia;
        // An EP with no EVD for a stream still needs a CQ: a private one
        // whose completions nobody hears.
        let own_cq = |given: Option<Rc<CqShared>>, entries: u32| match given {
            Some(cq) => Ok(cq),
            None => CqShared::create(ia.ctx, std::ptr::null_mut(), entries.max(1)).map(Rc::new),
        };
        let send_cq = own_cq(spec.send_cq, spec.cap.max_send_wr)?;
        let recv_cq = own_cq(spec.recv_cq, spec.cap.max_recv_wr)?;
        let srq_ptr = spec.srq.as_ref().map_or(std::ptr::null_mut(), |s| s.srq);
        let mut qp = std::ptr::null_mut();
        let mut cap = spec.cap;
        for inline in [INLINE, 0] {
            cap.max_inline_data = inline;
            let mut init = sys::ibv_qp_init_attr {
                qp_context: std::ptr::null_mut(),
                send_cq: send_cq.cq,
                recv_cq: recv_cq.cq,
                srq: srq_ptr,
                cap,
                qp_type: match spec.qp_type {
                    QpType::Rc => sys::ibv_qp_type::IBV_QPT_RC,
                    QpType::Ud => sys::ibv_qp_type::IBV_QPT_UD,
                },
                sq_sig_all: 0,
            };
            // SAFETY: the PD, CQs and SRQ are live and on one context.
            qp = unsafe { sys::ibv_create_qp(spec.pd, &mut init) };
            if !qp.is_null() {
                cap = init.cap;
                break;
            }
        }
        if qp.is_null() {
            return Err(dat_error(errno()));
        }
        let shared = Rc::new(QpShared {
            ud: spec.qp_type == QpType::Ud,
            ..QpShared::new(
                qp,
                ia,
                Rings {
                    // Room for every request the QP takes, so a post never
                    // grows them.
                    sends: Ring::new(cap.max_send_wr as usize, SendSlot::EMPTY),
                    recvs: VecDeque::with_capacity(cap.max_recv_wr as usize),
                    ..Rings::default()
                },
                spec.srq,
                (spec.rdma_read_in, spec.rdma_read_out),
                spec.tag,
            )
        });
        // SAFETY: `qp` was just created.
        let num = unsafe { (*qp).qp_num };
        send_cq.qps.borrow_mut().insert(num, shared.clone());
        recv_cq.qps.borrow_mut().insert(num, shared.clone());
        let qp = Qp { conn: QpConn::of(shared, ia.clone()), send_cq, recv_cq, max_inline: cap.max_inline_data };
        qp.conn.init()?;
        Ok(qp)
    }

    #[inline(always)]
    pub(crate) fn post_send(&mut self, wr: &SendWr<'_>) -> DatResult<()> {
        use sys::ibv_send_flags as f;
        let (sg_list, n) = ibv_sges(wr.sges)?;
        use sys::ibv_wr_opcode as o;
        let (opcode, op, remote) = match wr.op {
            RequestOp::Send => (o::IBV_WR_SEND, DtoOp::Send, None),
            RequestOp::SendInvalidate { .. } if self.conn.ia.remote_invalidation() => {
                (o::IBV_WR_SEND_WITH_INV, DtoOp::Send, None)
            }
            RequestOp::SendInvalidate { .. } => return Err(DatError::of(ErrorType::ModelNotSupported)),
            RequestOp::RdmaWrite { remote } => (o::IBV_WR_RDMA_WRITE, DtoOp::RdmaWrite, Some(remote)),
            RequestOp::RdmaRead { remote } => (o::IBV_WR_RDMA_READ, DtoOp::RdmaRead, Some(remote)),
            RequestOp::RdmaWriteImm { remote, .. } => {
                (o::IBV_WR_RDMA_WRITE_WITH_IMM, DtoOp::RdmaWriteImm, Some(remote))
            }
            RequestOp::CompareSwap { .. } => (o::IBV_WR_ATOMIC_CMP_AND_SWP, DtoOp::CompareSwap, None),
            RequestOp::FetchAdd { .. } => (o::IBV_WR_ATOMIC_FETCH_AND_ADD, DtoOp::FetchAdd, None),
        };
        let signalled = !wr.flags.contains(CompletionFlags::SUPPRESS);
        let mut flags = f(0);
        if signalled {
            flags |= f::IBV_SEND_SIGNALED;
        }
        if wr.flags.contains(CompletionFlags::SOLICITED_WAIT) && op == DtoOp::Send {
            flags |= f::IBV_SEND_SOLICITED;
        }
        if wr.flags.contains(CompletionFlags::BARRIER_FENCE) {
            flags |= f::IBV_SEND_FENCE;
        }
        let reads_back = matches!(op, DtoOp::RdmaRead | DtoOp::CompareSwap | DtoOp::FetchAdd);
        if !reads_back && wr.length <= self.max_inline && wr.length > 0 {
            flags |= f::IBV_SEND_INLINE;
        }
        let notify = !wr.flags.contains(CompletionFlags::UNSIGNALLED);
        let seq = self.push_send(SendSlot { seq: 0, cookie: wr.cookie, op, length: wr.length, notify, signalled })?;
        // SAFETY: plain C data; every field read by the provider is set below.
        let mut swr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
        swr.wr_id = seq;
        swr.sg_list = sg_list;
        swr.num_sge = n;
        swr.opcode = opcode;
        swr.send_flags = flags.0;
        if let Some(r) = remote {
            swr.wr.rdma =
                sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr: r.virtual_address, rkey: r.rmr_context };
        }
        // An atomic's operands: compare and swap, or the addend alone.
        let atomic = match wr.op {
            RequestOp::CompareSwap { remote, compare, swap } => Some((remote, compare, swap)),
            RequestOp::FetchAdd { remote, add } => Some((remote, add, 0)),
            _ => None,
        };
        if let Some((r, compare_add, swap)) = atomic {
            swr.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                remote_addr: r.virtual_address,
                compare_add,
                swap,
                rkey: r.rmr_context,
            };
        }
        match wr.op {
            RequestOp::RdmaWriteImm { imm, .. } => swr.__bindgen_anon_1.imm_data = imm.to_be(),
            RequestOp::SendInvalidate { rkey } => swr.__bindgen_anon_1.invalidate_rkey = rkey,
            _ => {}
        }
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live; `swr` and the segments it points at
        // outlive the call, which only reads them.
        let rc = unsafe { sys::post_send(self.conn.shared.qp, &mut swr, &mut bad) };
        self.settle_post(rc, true)
    }

    /// A send of the UD QP to `dest` through `ah` (`wr.ud`); it completes
    /// as `DtoOp::SendUd`.
    pub(crate) fn post_send_ud(&mut self, ah: &Ah, dest: UdDest, wr: &SendWr<'_>) -> DatResult<()> {
        use sys::ibv_send_flags as f;
        if !self.conn.shared.ud || wr.op != RequestOp::Send {
            return Err(DatError::of(ErrorType::ModelNotSupported));
        }
        let (sg_list, n) = ibv_sges(wr.sges)?;
        let signalled = !wr.flags.contains(CompletionFlags::SUPPRESS);
        let mut flags = f(0);
        if signalled {
            flags |= f::IBV_SEND_SIGNALED;
        }
        if wr.flags.contains(CompletionFlags::SOLICITED_WAIT) {
            flags |= f::IBV_SEND_SOLICITED;
        }
        if wr.length <= self.max_inline && wr.length > 0 {
            flags |= f::IBV_SEND_INLINE;
        }
        let notify = !wr.flags.contains(CompletionFlags::UNSIGNALLED);
        let slot = SendSlot { seq: 0, cookie: wr.cookie, op: DtoOp::SendUd, length: wr.length, notify, signalled };
        let seq = self.push_send(slot)?;
        // SAFETY: plain C data; every field read by the provider is set below.
        let mut swr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
        swr.wr_id = seq;
        swr.sg_list = sg_list;
        swr.num_sge = n;
        swr.opcode = sys::ibv_wr_opcode::IBV_WR_SEND;
        swr.send_flags = flags.0;
        swr.wr.ud = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
            ah: ah.0,
            remote_qpn: dest.remote_qpn,
            remote_qkey: dest.qkey,
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP and the AH are live; `swr` and the segments it
        // points at outlive the call, which only reads them.
        let rc = unsafe { sys::post_send(self.conn.shared.qp, &mut swr, &mut bad) };
        self.settle_post(rc, true)
    }

    pub(crate) fn post_recv(&mut self, sges: &[Sge], cookie: u64) -> DatResult<()> {
        let (sg_list, n) = ibv_sges(sges)?;
        let seq = {
            let mut rings = self.conn.shared.rings.borrow_mut();
            let seq = rings.next_recv;
            rings.next_recv += 1;
            rings.recvs.push_back((seq, cookie));
            seq
        };
        let mut rwr = sys::ibv_recv_wr { wr_id: seq | RECV, next: std::ptr::null_mut(), sg_list, num_sge: n };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live; `rwr` and the segments it points at
        // outlive the call, which only reads them.
        let rc = unsafe { sys::post_recv(self.conn.shared.qp, &mut rwr, &mut bad) };
        self.settle_post(rc, false)
    }

    /// Keep a send slot for a bind of `cookie`: its sequence number, and
    /// the send flags `flags` ask for.
    fn push_bind(&mut self, cookie: u64, flags: CompletionFlags) -> DatResult<(u64, u32)> {
        let signalled = !flags.contains(CompletionFlags::SUPPRESS);
        let notify = !flags.contains(CompletionFlags::UNSIGNALLED);
        let seq = self.push_send(SendSlot { seq: 0, cookie, op: DtoOp::BindMw, length: 0, notify, signalled })?;
        Ok((seq, if signalled { sys::ibv_send_flags::IBV_SEND_SIGNALED.0 } else { 0 }))
    }

    /// Bind the type 1 window `mw` to `(addr, length)` of `mr`, or unbind
    /// it with a length of 0; the window's new rkey.
    pub(crate) fn post_bind(
        &mut self,
        mw: *mut sys::ibv_mw,
        mr: *mut sys::ibv_mr,
        (addr, length): (u64, u64),
        access: u32,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<u32> {
        let (seq, send_flags) = self.push_bind(cookie, flags)?;
        let mut bind = sys::ibv_mw_bind {
            wr_id: seq,
            send_flags,
            bind_info: sys::ibv_mw_bind_info { mr, addr, length, mw_access_flags: access },
        };
        // SAFETY: the QP, MW and MR are live.
        let rc = unsafe { sys::bind_mw(self.conn.shared.qp, mw, &mut bind) };
        self.settle_post(rc, true)?;
        // SAFETY: the provider wrote the window's new key.
        Ok(unsafe { (*mw).rkey })
    }

    /// Bind the type 2 window `mw`, now of key `rkey`, to `length` bytes
    /// at `addr` of `mr` through this QP (`IBV_WR_BIND_MW` posted with
    /// `ibv_post_send`, the window's next key `ibv_inc_rkey`'s), or with
    /// no `mr` invalidate it (`IBV_WR_LOCAL_INV`: a type 2 window is not
    /// unbound by a bind of no bytes, IBA o10-37.2.40). Returns the key
    /// the window answers to after the WQE.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post_bind_type2(
        &mut self,
        mw: *mut sys::ibv_mw,
        rkey: u32,
        mr: Option<*mut sys::ibv_mr>,
        (addr, length): (u64, u64),
        access: u32,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<u32> {
        use sys::ibv_wr_opcode as o;
        let (seq, send_flags) = self.push_bind(cookie, flags)?;
        // SAFETY: plain C data; every field read by the provider is set below.
        let mut swr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
        swr.wr_id = seq;
        swr.send_flags = send_flags;
        let next = match mr {
            Some(mr) => {
                let next = (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff);
                swr.opcode = o::IBV_WR_BIND_MW;
                swr.__bindgen_anon_2.bind_mw = sys::ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
                    mw,
                    rkey: next,
                    bind_info: sys::ibv_mw_bind_info { mr, addr, length, mw_access_flags: access },
                };
                next
            }
            None => {
                swr.opcode = o::IBV_WR_LOCAL_INV;
                swr.__bindgen_anon_1.invalidate_rkey = rkey;
                rkey
            }
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP, MW and MR are live; `swr` outlives the call,
        // which only reads it.
        let rc = unsafe { sys::post_send(self.conn.shared.qp, &mut swr, &mut bad) };
        self.settle_post(rc, true)?;
        Ok(next)
    }

    /// Keep `slot` for the request about to be posted: its sequence
    /// number. `DAT_INSUFFICIENT_RESOURCES` when the QP has as many
    /// requests outstanding as it was made for, as a full send queue of
    /// the device would answer (the core counts requests first, so only
    /// completions it settles late, such as a reset's flushes dequeued
    /// after new posts, can leave the ring fuller than its count).
    #[inline(always)]
    fn push_send(&mut self, mut slot: SendSlot) -> DatResult<u64> {
        let mut rings = self.conn.shared.rings.borrow_mut();
        slot.seq = rings.next_send;
        rings.sends.push_back(slot).map_err(|_| DatError::of(ErrorType::InsufficientResources))?;
        rings.next_send += 1;
        Ok(slot.seq)
    }

    /// After a post: on failure, forget the request it pushed, and give
    /// its sequence number back, so that the numbers of the requests in a
    /// ring stay consecutive (`QpShared::send_op` finds a request by its
    /// distance from the first).
    ///
    /// A request or receive taken by a QP in ERROR is flushed at once
    /// (dat_ep_post_recv(3DAT), in DAT_EP_STATE_DISCONNECTED: "the posted
    /// Recv is immediately flushed to recv_evd_handle";
    /// dat_ep_post_send(3DAT): "the posted Send is immediately flushed to
    /// request_evd_handle"), but a device flushes only when it
    /// looks at the queue: rxe's user-space `post_recv` writes the receive
    /// queue without entering the kernel, so a receive posted after the
    /// disconnect would wait forever. A transition to ERROR, legal from
    /// ERROR (the IBTA's QP state diagram takes every state to Error, and
    /// the kernel's `ib_modify_qp_is_ok` admits it), makes the device
    /// flush what each queue holds, in post order, through the CQ like
    /// any completion: each once, whichever path posted it (lanes and
    /// shared posts end here too). An SRQ belongs to no QP: its receives
    /// wait for the QPs still on it, as they should.
    #[inline(always)]
    fn settle_post(&mut self, rc: i32, send: bool) -> DatResult<()> {
        if rc == 0 {
            if self.conn.shared.errored.get() {
                self.flush_again();
            }
            return Ok(());
        }
        self.forget_post(rc, send)
    }

    /// A post's flush, out of the way of a post on a live connection.
    #[cold]
    #[inline(never)]
    fn flush_again(&self) {
        self.conn.shared.break_off();
    }

    /// The failure half of [`Qp::settle_post`].
    #[cold]
    #[inline(never)]
    fn forget_post(&mut self, rc: i32, send: bool) -> DatResult<()> {
        let mut rings = self.conn.shared.rings.borrow_mut();
        if send {
            rings.sends.pop_back();
            rings.next_send -= 1;
        } else {
            rings.recvs.pop_back();
            rings.next_recv -= 1;
        }
        Err(dat_error(rc))
    }

    /// [`QpShared::break_off`]. Nothing waits for the flushes here, so a
    /// disconnect never sleeps, let alone under the provider's lock.
    pub(crate) fn break_off(&mut self) -> bool {
        self.conn.shared.break_off()
    }

    /// Whether requests are still to be flushed: the CQs are pulled first,
    /// so this is false as soon as the device has flushed them all.
    pub(crate) fn unflushed(&mut self) -> bool {
        self.send_cq.pull();
        self.recv_cq.pull();
        self.conn.shared.awaited() > 0
    }

    /// Back to INIT with empty rings, ready for another connection,
    /// without waiting for the device. A QP moved to RESET drops what it
    /// has not flushed yet, so every request still outstanding once the
    /// CQs are pulled completes here as flushed, after the device's own
    /// completions, in post order: what the device would have said. The
    /// sequence numbers go on rising, so a flush the device writes after
    /// all names no request of the next connection and is dropped.
    pub(crate) fn reset(&mut self) -> DatResult<()> {
        self.break_off();
        self.send_cq.pull();
        self.recv_cq.pull();
        {
            let mut rings = self.conn.shared.rings.borrow_mut();
            let tag = self.conn.shared.tag;
            while let Some(slot) = rings.sends.pop_front() {
                self.send_cq.stash(flushed(tag, slot.cookie, slot.op, slot.notify));
            }
            let op = self.conn.shared.recv_op();
            for (_, cookie) in rings.recvs.drain(..) {
                self.recv_cq.stash(flushed(tag, cookie, op, true));
            }
        }
        self.conn.reset()
    }
}

impl Drop for Qp {
    /// The CQs forget the QP; then `conn` forgets its rdma_cm id and
    /// destroys it.
    fn drop(&mut self) {
        let num = self.conn.number();
        self.send_cq.qps.borrow_mut().remove(&num);
        self.recv_cq.qps.borrow_mut().remove(&num);
    }
}

impl CmQp for Qp {
    fn conn(&self) -> &QpConn {
        &self.conn
    }
}

/// An address handle: where a UD send goes (`ibv_create_ah`).
pub struct Ah(pub(crate) *mut sys::ibv_ah);

impl Ah {
    /// An address handle in `pd` for `attr`.
    pub(crate) fn create(pd: *mut sys::ibv_pd, attr: &AhAttr) -> DatResult<Ah> {
        // SAFETY: plain C data.
        let mut a: sys::ibv_ah_attr = unsafe { std::mem::zeroed() };
        a.dlid = attr.dlid;
        a.sl = attr.sl;
        a.port_num = attr.port_num;
        if let Some(g) = attr.grh {
            a.is_global = 1;
            a.grh.dgid.raw = g.dgid;
            a.grh.sgid_index = g.sgid_index;
            a.grh.hop_limit = g.hop_limit;
            a.grh.traffic_class = g.traffic_class;
            a.grh.flow_label = g.flow_label;
        }
        // SAFETY: `pd` is live; `a` is read during the call only.
        let ah = unsafe { sys::ibv_create_ah(pd, &mut a) };
        if ah.is_null() {
            return Err(dat_error(errno()));
        }
        Ok(Ah(ah))
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: the handle is live and no send of it is outstanding
        // (`Backend::ah_destroy`'s contract).
        unsafe { sys::ibv_destroy_ah(self.0) };
    }
}

/// The completion of a request the device flushed, or would have.
fn flushed(tag: u64, cookie: u64, op: DtoOp, notify: bool) -> Completion {
    Completion { tag, cookie, status: DtoStatus::Flushed, op, transferred_length: 0, imm: 0, retired: 1, notify }
}

/// A QP whose connection [`RdmaCm`](crate::control::RdmaCm) drives.
pub trait CmQp {
    /// The QP's states and rdma_cm id.
    fn conn(&self) -> &QpConn;
}

/// An RC QP's states and rdma_cm id, and the QP itself: dropping it
/// forgets the id and destroys the QP.
pub struct QpConn {
    pub(crate) shared: Rc<QpShared>,
    pub(crate) ia: Rc<IaShared>,
}

impl QpConn {
    /// Take over `qp`, a QP of `ia`'s context made with `srq` if one is
    /// given, with the RDMA reads it asked for in each direction (clamped
    /// to the device's limits); its completions and async events carry
    /// `tag`. The QP is left in RESET: [`QpConn::init`] moves it on.
    ///
    /// # Safety
    /// `qp` is a live RC QP of `ia`'s context that nothing else destroys.
    pub unsafe fn new(qp: *mut sys::ibv_qp, ia: &Ia, srq: Option<&Srq>, reads: (u32, u32), tag: u64) -> QpConn {
        let srq = srq.map(|s| s.0.clone());
        QpConn::of(Rc::new(QpShared::new(qp, &ia.0, Rings::default(), srq, reads, tag)), ia.0.clone())
    }

    /// The QP of `shared`, whose connection the IA's connection manager
    /// keeps from here on.
    pub(crate) fn of(shared: Rc<QpShared>, ia: Rc<IaShared>) -> QpConn {
        cm::register(&ia, &shared);
        QpConn { shared, ia }
    }

    /// Move the QP to INIT on the IA's port: receives may be posted. A
    /// UD QP goes on to RTS.
    pub fn init(&self) -> DatResult<()> {
        if self.shared.ud {
            return self.shared.ready_ud(self.ia.port);
        }
        self.shared.init(self.ia.port)
    }

    /// Forget the connection and go back through RESET to INIT.
    pub fn reset(&self) -> DatResult<()> {
        cm::reset(&self.ia, self.shared.qp);
        self.shared.to_state(sys::ibv_qp_state::IBV_QPS_RESET)?;
        self.init()
    }

    /// The QP number.
    pub fn number(&self) -> u32 {
        // SAFETY: the QP is live while `self` is.
        unsafe { (*self.shared.qp).qp_num }
    }
}

impl Drop for QpConn {
    fn drop(&mut self) {
        cm::forget(&self.ia, self.shared.qp);
        self.ia.qp_going(self.shared.qp);
        // SAFETY: no rdma_cm id refers to the QP any more, the connection
        // manager's thread no longer reaches it, and its async events are
        // acknowledged; nothing else destroys it (`new`).
        unsafe { sys::ibv_destroy_qp(self.shared.qp) };
    }
}
