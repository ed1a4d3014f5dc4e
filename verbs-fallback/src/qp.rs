//! Queue pairs as the core holds them: creation, posting, address
//! handles, and the QP's connection half that rdma_cm drives
//! ([`QpConn`]). The rings that turn work-request ids back into DAT
//! cookies, and the state transitions, are the part the QP shares with
//! its CQs (`qp_shared`).
//!
//! A send's `wr_id` is its sequence number on the QP, whose low bits are
//! its slot in the send ring ([`Ring`]). Send completions of an RC QP
//! arrive in post order, so a completion for sequence `s` also retires
//! every unsignalled request posted before `s`: they succeeded (a failed
//! one would have produced its own completion first). A receive's `wr_id`
//! has bit 63 set: its sequence number on the QP, or its slot in the SRQ.
//!
//! A post writes the request's slot, then on soft-RoCE writes the entry
//! into the queue rdma_rxe maps (`rxe`), and elsewhere builds its
//! `ibv_send_wr` or `ibv_recv_wr` on the stack from the checked request
//! and calls the provider through the entry point kept when the QP was
//! made; only once the queue or the provider took it does the slot become
//! outstanding, so a refused post leaves no trace.

use std::mem::MaybeUninit;
use std::rc::Rc;

use udat_core::{
    backend::{AhAttr, QpType, RequestOp, SendWr, Sge, UdDest},
    types::{CompletionFlags, DtoOp, RmrTriplet},
    DatError, DatResult, ErrorType,
};

use crate::cm;
use crate::cq::CqShared;
use crate::device::{Ia, IaShared};
use crate::qp_shared::{QpShared, Rings, SendSlot};
use crate::ring::Ring;
use crate::rxe;
use crate::srq::{Srq, SrqShared};
use crate::status::{dat_error, errno};
use crate::sys;
use crate::wr::{ibv_sges, RECV};

/// The inline data a QP asks for; sends that fit go inline.
const INLINE: u32 = 64;

/// The shared part of `qp`, a QP of `ia` (see [`QpShared::new`]),
/// whose device errors `ia` reports with `tag` from here on.
fn shared_of(
    qp: *mut sys::ibv_qp,
    ia: &IaShared,
    rings: Rings,
    srq: Option<Rc<SrqShared>>,
    reads: (u32, u32),
    tag: u64,
) -> QpShared {
    ia.errors.name_qp(qp, tag);
    QpShared::new(qp, &ia.device, rings, srq, reads, tag)
}

/// A QP as the core holds it.
pub struct Qp {
    pub(crate) conn: QpConn,
    send_cq: Rc<CqShared>,
    recv_cq: Rc<CqShared>,
    /// The QP, as a post hands it to the provider.
    raw: *mut sys::ibv_qp,
    /// The provider's post entry points, read once.
    entries: sys::PostEntries,
    /// On soft-RoCE, the QP's queues as rdma_rxe maps them, which a post
    /// writes in place of librxe's entry points (`rxe`).
    direct: Option<rxe::Queues>,
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
            None => CqShared::create(ia.ctx, std::ptr::null_mut(), entries.max(1), ia.rxe()).map(Rc::new),
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
        let mut shared = shared_of(
            qp,
            ia,
            Rings {
                // Room for every request the QP takes, so a post never
                // grows them.
                sends: Ring::new(cap.max_send_wr as usize, SendSlot::EMPTY),
                recvs: Ring::new(if srq_ptr.is_null() { cap.max_recv_wr as usize } else { 0 }, None),
            },
            spec.srq,
            (spec.rdma_read_in, spec.rdma_read_out),
            spec.tag,
        );
        shared.ud = spec.qp_type == QpType::Ud;
        let shared = Rc::new(shared);
        // SAFETY: `qp` was just created.
        let num = unsafe { (*qp).qp_num };
        send_cq.qps.insert(num, shared.clone());
        recv_cq.qps.insert(num, shared.clone());
        // SAFETY: `qp` is live.
        let entries = unsafe { sys::PostEntries::of(qp) };
        let direct = if ia.rxe() && spec.qp_type == QpType::Rc {
            // SAFETY: `qp` is a live QP of rdma_rxe, made just above.
            unsafe { rxe::Queues::find(qp, &cap, !srq_ptr.is_null()) }
        } else {
            None
        };
        let qp = Qp {
            conn: QpConn::of(shared, ia.clone()),
            send_cq,
            recv_cq,
            raw: qp,
            entries,
            direct,
            max_inline: cap.max_inline_data,
        };
        qp.conn.init()?;
        Ok(qp)
    }

    /// Post `wr`, of any kind (`ibv_post_send`).
    #[inline(always)]
    pub(crate) fn post_send(&mut self, wr: &SendWr<'_>) -> DatResult<()> {
        let sges = ibv_sges(wr.sges)?;
        self.send(wr.op, sges, wr.length, wr.cookie, wr.flags)
    }

    /// Post the request `op` of the one segment `sge`, which is the
    /// request's `length`; the lane's post, made of scalars.
    #[inline(always)]
    pub(crate) fn post_one(&mut self, op: RequestOp, sge: Sge, cookie: u64, flags: CompletionFlags) -> bool {
        let sges = (std::ptr::from_ref(&sge).cast::<sys::ibv_sge>().cast_mut(), 1);
        self.send(op, sges, sge.length, cookie, flags).is_ok()
    }

    /// Post the request `op` of the segments `sg_list` (`(list, count)`),
    /// `length` bytes in all: its `ibv_send_wr` built on the stack, its
    /// slot written, and made outstanding once the provider took it.
    #[inline(always)]
    fn send(
        &mut self,
        op: RequestOp,
        (sg_list, num_sge): (*mut sys::ibv_sge, i32),
        length: u32,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        use sys::ibv_send_flags as f;
        use sys::ibv_wr_opcode as o;
        // The remote buffer (none for a send) and an atomic's operands:
        // compare and swap, or the addend alone.
        let (opcode, dto, imm, remote, atomic) = match op {
            RequestOp::Send => (o::IBV_WR_SEND, DtoOp::Send, 0, None, None),
            RequestOp::SendInvalidate { rkey } if self.conn.ia.remote_invalidation() => {
                (o::IBV_WR_SEND_WITH_INV, DtoOp::Send, rkey, None, None)
            }
            RequestOp::SendInvalidate { .. } => return Err(DatError::of(ErrorType::ModelNotSupported)),
            RequestOp::RdmaWrite { remote } => (o::IBV_WR_RDMA_WRITE, DtoOp::RdmaWrite, 0, Some(remote), None),
            RequestOp::RdmaRead { remote } => (o::IBV_WR_RDMA_READ, DtoOp::RdmaRead, 0, Some(remote), None),
            RequestOp::RdmaWriteImm { remote, imm } => {
                (o::IBV_WR_RDMA_WRITE_WITH_IMM, DtoOp::RdmaWriteImm, imm.to_be(), Some(remote), None)
            }
            RequestOp::CompareSwap { remote, compare, swap } => {
                (o::IBV_WR_ATOMIC_CMP_AND_SWP, DtoOp::CompareSwap, 0, Some(remote), Some((compare, swap)))
            }
            RequestOp::FetchAdd { remote, add } => {
                (o::IBV_WR_ATOMIC_FETCH_AND_ADD, DtoOp::FetchAdd, 0, Some(remote), Some((add, 0)))
            }
        };
        let mut send_flags = send_flags(flags, dto == DtoOp::Send);
        let reads_back = matches!(dto, DtoOp::RdmaRead | DtoOp::CompareSwap | DtoOp::FetchAdd);
        if !reads_back && length <= self.max_inline && length > 0 {
            send_flags |= f::IBV_SEND_INLINE.0;
        }
        let signalled = !flags.contains(CompletionFlags::SUPPRESS);
        let notify = !flags.contains(CompletionFlags::UNSIGNALLED);
        let slot = SendSlot { cookie, length, op: dto, notify, signalled };
        let Some(seq) = self.conn.shared.rings(|r| r.sends.stage(slot)) else { return Err(full()) };
        let rc = match (&self.direct, atomic) {
            // SAFETY: `sg_list` holds `num_sge` segments (a caller's
            // `ibv_sges`, or one `Sge`) of registered, readable memory; the
            // core posts to a QP from one thread at a time.
            (Some(queues), None) => unsafe {
                let sges = std::slice::from_raw_parts(sg_list, num_sge as usize);
                let remote = remote.map_or((0, 0), |r| (r.virtual_address, r.rmr_context));
                queues.post_send(seq, opcode, send_flags, imm, remote, sges)
            },
            // An atomic's operands are more than an address and a key:
            // librxe writes it.
            _ => self.post_wr(seq, opcode, send_flags, imm, operands(remote, atomic), (sg_list, num_sge)),
        };
        self.finish_post(rc, |r| r.sends.commit())
    }

    /// Hand the request numbered `seq` to the provider's `post_send`, as
    /// an `ibv_send_wr` built on the stack; its errno, or 0.
    #[inline(always)]
    fn post_wr(
        &self,
        seq: u64,
        opcode: sys::ibv_wr_opcode::Type,
        send_flags: u32,
        imm: u32,
        wr: sys::ibv_send_wr__bindgen_ty_2,
        (sg_list, num_sge): (*mut sys::ibv_sge, i32),
    ) -> i32 {
        let mut swr = MaybeUninit::<sys::ibv_send_wr>::uninit();
        let p = swr.as_mut_ptr();
        // SAFETY: each field written is in `swr`. Left unwritten are the
        // bind and TSO operands (`__bindgen_anon_2`), which providers read
        // only for `IBV_WR_BIND_MW` and `IBV_WR_TSO`, opcodes not made here.
        unsafe {
            (&raw mut (*p).wr_id).write(seq);
            (&raw mut (*p).next).write(std::ptr::null_mut());
            (&raw mut (*p).sg_list).write(sg_list);
            (&raw mut (*p).num_sge).write(num_sge);
            (&raw mut (*p).opcode).write(opcode);
            (&raw mut (*p).send_flags).write(send_flags);
            (&raw mut (*p).__bindgen_anon_1).write(sys::ibv_send_wr__bindgen_ty_1 { imm_data: imm });
            (&raw mut (*p).wr).write(wr);
            (&raw mut (*p).qp_type).write(Default::default());
        }
        let mut bad = MaybeUninit::uninit();
        // SAFETY: the QP is live and the entry point is its provider's;
        // `swr`, whose fields the opcode has the provider read are written,
        // and the segments it points at outlive the call, which only reads
        // them and may write `bad`.
        unsafe { (self.entries.post_send)(self.raw, p, bad.as_mut_ptr()) }
    }

    /// A send of the UD QP to `dest` through `ah` (`wr.ud`); it completes
    /// as `DtoOp::SendUd`.
    pub(crate) fn post_send_ud(&mut self, ah: &Ah, dest: UdDest, wr: &SendWr<'_>) -> DatResult<()> {
        use sys::ibv_send_flags as f;
        if !self.conn.shared.ud || wr.op != RequestOp::Send {
            return Err(DatError::of(ErrorType::ModelNotSupported));
        }
        let (sg_list, num_sge) = ibv_sges(wr.sges)?;
        let mut send_flags = send_flags(wr.flags, true);
        if wr.length <= self.max_inline && wr.length > 0 {
            send_flags |= f::IBV_SEND_INLINE.0;
        }
        let signalled = !wr.flags.contains(CompletionFlags::SUPPRESS);
        let notify = !wr.flags.contains(CompletionFlags::UNSIGNALLED);
        let slot = SendSlot { cookie: wr.cookie, op: DtoOp::SendUd, length: wr.length, notify, signalled };
        let Some(seq) = self.conn.shared.rings(|r| r.sends.stage(slot)) else { return Err(full()) };
        let mut swr = sys::ibv_send_wr {
            wr_id: seq,
            next: std::ptr::null_mut(),
            sg_list,
            num_sge,
            opcode: sys::ibv_wr_opcode::IBV_WR_SEND,
            send_flags,
            __bindgen_anon_1: Default::default(),
            wr: sys::ibv_send_wr__bindgen_ty_2 {
                ud: sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
                    ah: ah.0,
                    remote_qpn: dest.remote_qpn,
                    remote_qkey: dest.qkey,
                },
            },
            qp_type: Default::default(),
            __bindgen_anon_2: Default::default(),
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP and the AH are live; `swr` and the segments it
        // points at outlive the call, which only reads them.
        let rc = unsafe { (self.entries.post_send)(self.raw, &mut swr, &mut bad) };
        self.finish_post(rc, |r| r.sends.commit())
    }

    /// Post a receive into `sges` (`ibv_post_recv`).
    #[inline(always)]
    pub(crate) fn post_recv(&mut self, sges: &[Sge], cookie: u64) -> DatResult<()> {
        let sges = ibv_sges(sges)?;
        self.recv(sges, cookie)
    }

    /// Post a receive into the one segment `sge`; the lane's post.
    #[inline(always)]
    pub(crate) fn post_recv_one(&mut self, sge: Sge, cookie: u64) -> bool {
        let sges = (std::ptr::from_ref(&sge).cast::<sys::ibv_sge>().cast_mut(), 1);
        self.recv(sges, cookie).is_ok()
    }

    /// Post a receive into `sg_list`, as [`Qp::send`] posts a request.
    #[inline(always)]
    fn recv(&mut self, (sg_list, num_sge): (*mut sys::ibv_sge, i32), cookie: u64) -> DatResult<()> {
        let Some(seq) = self.conn.shared.rings(|r| r.recvs.stage(Some(cookie))) else { return Err(full()) };
        let rc = match &self.direct {
            Some(queues) => {
                // SAFETY: `sg_list` holds `num_sge` segments (a caller's
                // `ibv_sges`, or one `Sge`).
                let sges = unsafe { std::slice::from_raw_parts(sg_list, num_sge as usize) };
                queues.post_recv(seq | RECV, sges)
            }
            None => {
                let mut rwr = sys::ibv_recv_wr { wr_id: seq | RECV, next: std::ptr::null_mut(), sg_list, num_sge };
                let mut bad = std::ptr::null_mut();
                // SAFETY: the QP is live and the entry point is its
                // provider's; `rwr` and the segments it points at outlive
                // the call, which only reads them.
                unsafe { (self.entries.post_recv)(self.raw, &mut rwr, &mut bad) }
            }
        };
        self.finish_post(rc, |r| r.recvs.commit())
    }

    /// Stage a send slot for a bind of `cookie`: its sequence number, and
    /// the send flags `flags` ask for.
    fn stage_bind(&mut self, cookie: u64, flags: CompletionFlags) -> DatResult<(u64, u32)> {
        let signalled = !flags.contains(CompletionFlags::SUPPRESS);
        let notify = !flags.contains(CompletionFlags::UNSIGNALLED);
        let slot = SendSlot { cookie, op: DtoOp::BindMw, length: 0, notify, signalled };
        let seq = self.conn.shared.rings(|r| r.sends.stage(slot)).ok_or_else(full)?;
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
        let (seq, send_flags) = self.stage_bind(cookie, flags)?;
        let mut bind = sys::ibv_mw_bind {
            wr_id: seq,
            send_flags,
            bind_info: sys::ibv_mw_bind_info { mr, addr, length, mw_access_flags: access },
        };
        // SAFETY: the QP, MW and MR are live.
        let rc = unsafe { sys::bind_mw(self.raw, mw, &mut bind) };
        self.finish_post(rc, |r| r.sends.commit())?;
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
        let (seq, send_flags) = self.stage_bind(cookie, flags)?;
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
        let rc = unsafe { (self.entries.post_send)(self.raw, &mut swr, &mut bad) };
        self.finish_post(rc, |r| r.sends.commit())?;
        Ok(next)
    }

    /// After a post: once the provider took it (`rc` 0), `commit` makes
    /// its staged slot outstanding; a refused post's slot is simply
    /// overwritten by the next, so it leaves no trace.
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
    fn finish_post(&mut self, rc: i32, commit: impl FnOnce(&mut Rings)) -> DatResult<()> {
        if rc != 0 {
            return Err(refused(rc));
        }
        let shared = &*self.conn.shared;
        shared.rings(commit);
        if shared.errored.get() {
            self.flush_again();
        }
        Ok(())
    }

    /// A post's flush, out of the way of a post on a live connection.
    #[cold]
    #[inline(never)]
    fn flush_again(&self) {
        self.conn.shared.break_off();
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
        self.conn.shared.flush_sends(|c| self.send_cq.stash(c));
        self.conn.shared.flush_recvs(|c| self.recv_cq.stash(c));
        let reset = self.conn.reset();
        if reset.is_err() {
            // The QP may be left in RESET, whose receives librxe refuses
            // (IBTA C10-97.2.1); it leaves RESET nowhere else, so a QP
            // writing its queues in place never posts in that state.
            self.direct = None;
        }
        reset
    }
}

impl Drop for Qp {
    /// The CQs forget the QP; then `conn` forgets its rdma_cm id and
    /// destroys it.
    fn drop(&mut self) {
        let num = self.conn.number();
        self.send_cq.qps.remove(num);
        self.recv_cq.qps.remove(num);
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

/// The `ibv_send_flags` of a post with the DAT `flags` (of which only
/// `SUPPRESS`, `SOLICITED_WAIT` and `BARRIER_FENCE` reach the device;
/// `SOLICITED_WAIT` only for a send, `solicits`).
#[inline(always)]
fn send_flags(flags: CompletionFlags, solicits: bool) -> u32 {
    use sys::ibv_send_flags as f;
    /// The flags of each combination of the four low DAT bits.
    const TABLE: [u32; 16] = {
        let mut table = [0; 16];
        let mut bits = 0;
        while bits < 16 {
            let (suppress, solicited, fence) = (
                bits & CompletionFlags::SUPPRESS.0 != 0,
                bits & CompletionFlags::SOLICITED_WAIT.0 != 0,
                bits & CompletionFlags::BARRIER_FENCE.0 != 0,
            );
            table[bits as usize] = if suppress { 0 } else { f::IBV_SEND_SIGNALED.0 }
                | if solicited { f::IBV_SEND_SOLICITED.0 } else { 0 }
                | if fence { f::IBV_SEND_FENCE.0 } else { 0 };
            bits += 1;
        }
        table
    };
    let solicited = if solicits { !0 } else { !f::IBV_SEND_SOLICITED.0 };
    TABLE[(flags.0 & 0xf) as usize] & solicited
}

/// A request's remote operands (`ibv_send_wr.wr`): the remote buffer of
/// an RDMA request, with an atomic's compare-or-add and swap operands;
/// zeros for a send, as providers read the first words of `wr` whatever
/// the opcode (rxe reads `wr.rdma.remote_addr` for a send).
#[inline(always)]
fn operands(remote: Option<RmrTriplet>, atomic: Option<(u64, u64)>) -> sys::ibv_send_wr__bindgen_ty_2 {
    match (remote, atomic) {
        (Some(remote), Some((compare_add, swap))) => sys::ibv_send_wr__bindgen_ty_2 {
            atomic: sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                remote_addr: remote.virtual_address,
                compare_add,
                swap,
                rkey: remote.rmr_context,
            },
        },
        (Some(remote), None) => sys::ibv_send_wr__bindgen_ty_2 {
            rdma: sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                remote_addr: remote.virtual_address,
                rkey: remote.rmr_context,
            },
        },
        (None, _) => sys::ibv_send_wr__bindgen_ty_2 {
            ud: sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
                ah: std::ptr::null_mut(),
                remote_qpn: 0,
                remote_qkey: 0,
            },
        },
    }
}

/// `DAT_INSUFFICIENT_RESOURCES`: the QP has as many requests (or
/// receives) outstanding as it was made for, as a full queue of the
/// device would answer (the core counts them first, so only completions
/// it settles late, such as a reset's flushes dequeued after new posts,
/// can leave a ring fuller than its count).
#[cold]
fn full() -> DatError {
    DatError::of(ErrorType::InsufficientResources)
}

/// A post the provider refused with `rc`.
#[cold]
fn refused(rc: i32) -> DatError {
    dat_error(rc)
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
        QpConn::of(Rc::new(shared_of(qp, &ia.0, Rings::default(), srq, reads, tag)), ia.0.clone())
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

#[cfg(test)]
mod tests {
    use super::send_flags;
    use crate::sys::ibv_send_flags as f;
    use udat_core::types::CompletionFlags as C;

    #[test]
    fn the_device_is_asked_for_what_the_dat_flags_say() {
        let (signaled, solicited, fence) = (f::IBV_SEND_SIGNALED.0, f::IBV_SEND_SOLICITED.0, f::IBV_SEND_FENCE.0);
        assert_eq!(send_flags(C::DEFAULT, true), signaled);
        assert_eq!(send_flags(C::SUPPRESS, true), 0);
        assert_eq!(send_flags(C::UNSIGNALLED, true), signaled, "udat's own: the event does not notify");
        assert_eq!(send_flags(C(C::SOLICITED_WAIT.0 | C::BARRIER_FENCE.0), true), signaled | solicited | fence);
        assert_eq!(send_flags(C::SOLICITED_WAIT, false), signaled, "only a send solicits");
        assert_eq!(send_flags(C(C::SUPPRESS.0 | C::EVD_THRESHOLD.0), true), 0, "an EP attribute, not a post's");
    }
}
