//! The ConnectX control path under udat's mlx5 data path (feature
//! `connectx`): rdma-core creates every object, `mlx5dv_init_obj` hands
//! over the queues, and the data path drives them from there.
//!
//! - Device detection: `mlx5dv_is_supported`; any other device is
//!   refused at `ia_open`.
//! - CQs: `ibv_create_cq` on the IA's completion channel, never polled by
//!   rdma-core; the data path arms them itself and [`Device::cq_event`]
//!   reads and acknowledges their events. A CQ's number rides in its
//!   `cq_context`, which `ibv_get_cq_event` hands back.
//! - QPs: `mlx5dv_create_qp` with scatter-to-CQE off (the data path reads
//!   every completion from the CQE, never data scattered into it), one
//!   WQEBB a work request, so the ring holds the WQEBBs the data path asks
//!   for. State changes and rdma_cm are udat-verbs's own (its `cm` module).
//! - SRQs: `ibv_create_srq`, handed over with the WQE count it was made
//!   with (`tail + 1`).
//!
//! rdma-core's mlx5 provider would clean a QP's CQEs out of its CQs when
//! the QP goes to RESET or is destroyed (`__mlx5_cq_clean`), from a
//! consumer index it never advanced; it leaves alone a CQ that
//! `mlx5dv_init_obj` has described (`MLX5_CQ_FLAGS_DV_OWNED`), and the data
//! path forgets the QP's CQEs itself. Every CQ here is described before
//! any QP reports to it.
//!
//! Everything here past `mlx5dv_init_obj` is the code the software HCA
//! runs through (`udat_mlx5::dv`); what only a ConnectX can show is listed
//! in README ("The mlx5 data path: what is verified where").

use std::ptr::NonNull;
use std::rc::Rc;

use udat_core::backend::{CmEvent, ConnectionManager, Registration, WaitFds, Wake};
use udat_core::types::{IaAddress, IaAttr, MemPriv, SrqAttr};
use udat_core::{DatError, DatResult, ErrorType};
use udat_mlx5::cq::{CompletionQueue, CqGeometry};
use udat_mlx5::device::{CqParts, Device, QpParts, QpSpec, SrqParts};
use udat_mlx5::doorbell::{Uar, CQ_DOORBELL};
use udat_mlx5::dv::{self, DvCq, DvQp, DvSrq};
use udat_mlx5::rq::RecvSlot;
use udat_mlx5::sq::SendSlot;

use crate::cm::{self, ConnReq, Listener};
use crate::device::IaShared;
use crate::qp::{QpShared, Rings};
use crate::srq::SrqShared;
use crate::status::{dat_error, errno};
use crate::sys::{self, mlx5dv};
use crate::{Clock, Ia, Mr, Pd, Srq, Window};

/// udat's mlx5 data path's control path on a ConnectX.
pub struct ConnectX {
    clock: Clock,
}

impl ConnectX {
    /// A control path that has opened no device yet: each `ia_open`
    /// opens one.
    pub fn new() -> ConnectX {
        ConnectX { clock: Clock::new() }
    }
}

impl Default for ConnectX {
    fn default() -> ConnectX {
        ConnectX::new()
    }
}

/// A CQ made by rdma-core for the data path, and its IA.
pub struct Cq(Rc<CqShared>, Rc<IaShared>);

impl Drop for Cq {
    fn drop(&mut self) {
        self.1.errors.unname_cq(self.0.cq);
    }
}

struct CqShared {
    cq: *mut sys::ibv_cq,
    /// The context the CQ is on.
    ctx: *mut sys::ibv_context,
}

impl Drop for CqShared {
    fn drop(&mut self) {
        // SAFETY: no QP reports here any more (each holds an Rc), and
        // every event was acknowledged when it was read; reading the
        // device's async events acknowledges those of the CQ.
        unsafe {
            crate::device_error::cq_going(self.ctx, self.cq);
            sys::ibv_destroy_cq(self.cq);
        }
    }
}

/// A QP made by rdma-core for the data path.
pub struct Qp {
    shared: Rc<QpShared>,
    ia: Rc<IaShared>,
    /// A CQ of its own for a stream the EP has no EVD for, drained at
    /// reset, so the flushes of one connection never overflow it.
    private: Option<CompletionQueue<Uar>>,
    /// The CQs it reports to, kept until it is gone (fields drop after
    /// `drop` destroys the QP).
    _cqs: [Rc<CqShared>; 2],
}

impl Drop for Qp {
    fn drop(&mut self) {
        cm::release_id(&self.ia, &self.shared);
        self.ia.qp_going(self.shared.qp);
        // SAFETY: no rdma_cm id refers to the QP any more, the data path
        // has dropped its queues, and the QP's async events are
        // acknowledged.
        unsafe { sys::ibv_destroy_qp(self.shared.qp) };
    }
}

impl Qp {
    fn number(&self) -> u32 {
        // SAFETY: the QP is live while `self` is.
        unsafe { (*self.shared.qp).qp_num }
    }

    /// Consume what the QP's own CQ holds.
    fn drain_private(&mut self) {
        if let Some(ring) = self.private.as_mut() {
            while ring.poll().is_some() {}
            ring.update_ci();
        }
    }
}

/// `len` bytes of device register at `reg`.
///
/// # Safety
/// `reg` is null or a register mapping of at least `len` bytes, 8-aligned,
/// that stays mapped while the object it belongs to lives.
unsafe fn register(reg: *mut std::ffi::c_void, len: usize) -> DatResult<Uar> {
    let reg = NonNull::new(reg.cast::<u8>()).ok_or(geometry_error())?;
    // SAFETY: the caller's promise.
    Ok(unsafe { Uar::new(reg, len) })
}

/// The device handed over queues the data path cannot drive.
fn geometry_error() -> DatError {
    DatError::of(ErrorType::ModelNotSupported)
}

/// A geometry `dv` refused, said once on stderr: which fact did not hold.
fn refused(what: &str, e: udat_mlx5::Geometry) -> DatError {
    eprintln!("udat: connectx: the {what} rdma-core made does not fit the mlx5 data path: {e:?}");
    geometry_error()
}

/// `mlx5dv_init_obj` for one object: `fill` points the request at it.
fn init_obj(kind: mlx5dv::mlx5dv_obj_type::Type, fill: impl FnOnce(&mut mlx5dv::mlx5dv_obj)) -> DatResult<()> {
    let mut obj = mlx5dv::mlx5dv_obj::default();
    fill(&mut obj);
    // SAFETY: `obj` names one live object and where its description goes.
    let rc = unsafe { mlx5dv::mlx5dv_init_obj(&mut obj, u64::from(kind)) };
    if rc != 0 {
        return Err(dat_error(rc.abs()));
    }
    Ok(())
}

// udat-mlx5's mirrors of `struct mlx5dv_qp`, `mlx5dv_cq` and `mlx5dv_srq`
// are what init_obj writes: same size and alignment as the header's.
const _: () = {
    use std::mem::{align_of, size_of};
    assert!(size_of::<DvQp>() == size_of::<mlx5dv::mlx5dv_qp>());
    assert!(align_of::<DvQp>() == align_of::<mlx5dv::mlx5dv_qp>());
    assert!(size_of::<DvCq>() == size_of::<mlx5dv::mlx5dv_cq>());
    assert!(align_of::<DvCq>() == align_of::<mlx5dv::mlx5dv_cq>());
    assert!(size_of::<DvSrq>() == size_of::<mlx5dv::mlx5dv_srq>());
    assert!(align_of::<DvSrq>() == align_of::<mlx5dv::mlx5dv_srq>());
    assert!(std::mem::offset_of!(DvQp, bf) == std::mem::offset_of!(mlx5dv::mlx5dv_qp, bf));
    assert!(std::mem::offset_of!(DvQp, sqn) == std::mem::offset_of!(mlx5dv::mlx5dv_qp, sqn));
    assert!(std::mem::offset_of!(DvCq, cqn) == std::mem::offset_of!(mlx5dv::mlx5dv_cq, cqn));
    assert!(std::mem::offset_of!(DvSrq, srqn) == std::mem::offset_of!(mlx5dv::mlx5dv_srq, srqn));
};

impl ConnectX {
    /// A CQ of at least `entries` on `channel` (none: its events go
    /// nowhere), and what init_obj says of it.
    fn make_cq(
        ia: &IaShared,
        channel: *mut sys::ibv_comp_channel,
        entries: u32,
    ) -> DatResult<(Rc<CqShared>, CqGeometry<Uar>)> {
        let entries = i32::try_from(entries.max(1)).map_err(|_| DatError::invalid_arg(2))?;
        // SAFETY: the context is open and `channel` (possibly null) is its.
        let cq = unsafe { sys::ibv_create_cq(ia.ctx, entries, std::ptr::null_mut(), channel, 0) };
        if cq.is_null() {
            return Err(dat_error(errno()));
        }
        // From here on, dropping `shared` destroys the CQ.
        let shared = CqShared { cq, ctx: ia.ctx };
        let mut dv = DvCq {
            buf: std::ptr::null_mut(),
            dbrec: std::ptr::null_mut(),
            cqe_cnt: 0,
            cqe_size: 0,
            cq_uar: std::ptr::null_mut(),
            cqn: 0,
            comp_mask: 0,
        };
        init_obj(mlx5dv::mlx5dv_obj_type::MLX5DV_OBJ_CQ, |o| {
            o.cq.in_ = cq;
            o.cq.out = (&raw mut dv).cast();
        })?;
        // SAFETY: init_obj described the live CQ: its UAR page stays
        // mapped while the context is open, and the arm doorbell is the 8
        // bytes at CQ_DOORBELL in it.
        let uar = unsafe { register(dv.cq_uar, CQ_DOORBELL + 8) }?;
        // SAFETY: the buffer and record are the CQ's, used only by the
        // data path while `CqShared` keeps the CQ alive.
        let geometry = unsafe { dv::completion_queue(&dv, uar) }.map_err(|e| refused("CQ", e))?;
        // `ibv_get_cq_event` hands back the context: the CQ's number.
        // SAFETY: the CQ is live; `cq_context` is the consumer's field.
        unsafe { (*cq).cq_context = dv.cqn as usize as *mut _ };
        Ok((Rc::new(shared), geometry))
    }
}

impl ConnectionManager for ConnectX {
    type Ia = Ia;
    type Qp = Qp;
    type Listener = Listener;
    type ConnReq = ConnReq;

    fn listen(&mut self, ia: &mut Ia, conn_qual: u64, tag: u64) -> DatResult<Listener> {
        cm::listen(&ia.0, conn_qual, tag)
    }

    fn unlisten(&mut self, listener: Listener) {
        drop(listener);
    }

    fn connect(
        &mut self,
        qp: &mut Qp,
        remote: &IaAddress,
        conn_qual: u64,
        private_data: &[u8],
        timeout_us: Option<u64>,
    ) -> DatResult<()> {
        cm::connect(&qp.ia, &qp.shared, remote, conn_qual, private_data, timeout_us, &self.clock)
    }

    fn accept(&mut self, request: &mut ConnReq, qp: &mut Qp, private_data: &[u8]) -> DatResult<()> {
        cm::accept(request, &qp.ia, &qp.shared, private_data)
    }

    fn reject(&mut self, request: ConnReq, private_data: &[u8]) {
        cm::reject(request, private_data);
    }

    fn disconnect(&mut self, qp: &mut Qp, graceful: bool) {
        cm::disconnect(&qp.ia, &qp.shared, graceful);
    }

    fn poll_cm(&mut self, ia: &mut Ia) -> Option<CmEvent<ConnReq>> {
        cm::poll(&ia.0, self.clock.now_us())
    }
}

impl Device for ConnectX {
    type Pd = Pd;
    type Mr = Mr;
    type Mw = Window;
    type Cq = Cq;
    type Srq = Srq;
    type Register = Uar;
    type SendSlots = Box<[SendSlot]>;
    type RecvSlots = Box<[RecvSlot]>;

    /// Open `name` (`mlx5_0`, or `mlx5_0:2` for a port), a device whose
    /// user-space provider is rdma-core's mlx5.
    fn ia_open(&mut self, name: &[u8]) -> DatResult<(Ia, IaAttr)> {
        let (ia, attr) = IaShared::open(name)?;
        // SAFETY: the context is open, and its device with it.
        if !unsafe { mlx5dv::mlx5dv_is_supported((*ia.ctx).device) } {
            return Err(DatError::of(ErrorType::ProviderNotFound));
        }
        Ok((Ia(Rc::new(ia)), attr))
    }

    fn ia_close(&mut self, ia: Ia) {
        drop(ia);
    }

    fn pd_alloc(&mut self, ia: &mut Ia) -> DatResult<Pd> {
        Pd::alloc(&ia.0)
    }

    fn pd_free(&mut self, pd: Pd) {
        drop(pd);
    }

    fn mr_register(&mut self, pd: &Pd, address: u64, length: u64, privileges: MemPriv) -> DatResult<Registration<Mr>> {
        pd.register(address, length, privileges)
    }

    fn mr_deregister(&mut self, mr: Mr) {
        drop(mr);
    }

    fn mw_alloc(&mut self, pd: &Pd) -> DatResult<(Window, u32)> {
        let window = pd.window()?;
        // SAFETY: the window was just allocated.
        let key = unsafe { (*window.0).rkey };
        Ok((window, key))
    }

    fn mw_free(&mut self, mw: Window) {
        drop(mw);
    }

    fn cq_create(&mut self, ia: &mut Ia, min_entries: u32, tag: u64) -> DatResult<CqParts<Self>> {
        let (cq, geometry) = ConnectX::make_cq(&ia.0, ia.0.comp, min_entries)?;
        ia.0.errors.name_cq(cq.cq, tag);
        Ok(CqParts { cq: Cq(cq, ia.0.clone()), geometry })
    }

    fn cq_destroy(&mut self, cq: Cq) {
        drop(cq);
    }

    fn cq_event(&mut self, ia: &mut Ia) -> Option<u32> {
        let mut cq = std::ptr::null_mut();
        let mut context = std::ptr::null_mut();
        // SAFETY: the channel is open and non-blocking.
        if unsafe { sys::ibv_get_cq_event(ia.0.comp, &mut cq, &mut context) } != 0 {
            return None;
        }
        // SAFETY: `cq` is the live CQ the event names.
        unsafe { sys::ibv_ack_cq_events(cq, 1) };
        Some(context as usize as u32)
    }

    fn qp_create(&mut self, spec: &QpSpec<'_, Self>) -> DatResult<QpParts<Self>> {
        let ia = &spec.pd.ia;
        // A stream with no EVD still needs a CQ: one of the QP's own, big
        // enough for the flushes of everything it can hold.
        let mut private = None;
        let mut own = |given: Option<&Cq>| -> DatResult<Rc<CqShared>> {
            if let Some(cq) = given {
                return Ok(cq.0.clone());
            }
            if let Some((cq, _)) = &private {
                return Ok(Rc::clone(cq));
            }
            let entries = spec.sq_wqebbs.saturating_add(spec.max_recv_wr);
            let (cq, geometry) = ConnectX::make_cq(ia, std::ptr::null_mut(), entries)?;
            let ring = CompletionQueue::new(geometry).map_err(|e| refused("CQ", e))?;
            private = Some((cq.clone(), ring));
            Ok(cq)
        };
        let cqs = [own(spec.send_cq)?, own(spec.recv_cq)?];
        let mut attr = sys::ibv_qp_init_attr_ex {
            send_cq: cqs[0].cq,
            recv_cq: cqs[1].cq,
            srq: spec.srq.map_or(std::ptr::null_mut(), |s| s.0.srq),
            // One WQEBB a request (a control and a data segment, and room
            // for the remote-address and atomic ones), so the ring holds
            // at least the WQEBBs asked for. The data path sizes each WQE
            // itself, inline data included (at most a BlueFlame half,
            // `udat_mlx5::backend::MAX_INLINE`): `max_inline_data` sizes
            // only rdma-core's own WQEs, and this QP posts none.
            cap: sys::ibv_qp_cap {
                max_send_wr: spec.sq_wqebbs,
                max_recv_wr: if spec.srq.is_some() { 0 } else { spec.max_recv_wr.max(1) },
                max_send_sge: 1,
                max_recv_sge: spec.max_recv_sge.max(1),
                max_inline_data: 0,
            },
            qp_type: sys::ibv_qp_type::IBV_QPT_RC,
            comp_mask: sys::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD,
            pd: spec.pd.pd,
            ..Default::default()
        };
        let mut mlx5 = mlx5dv::mlx5dv_qp_init_attr {
            comp_mask: u64::from(mlx5dv::mlx5dv_qp_init_attr_mask::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS),
            create_flags: mlx5dv::mlx5dv_qp_create_flags::MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE,
            ..Default::default()
        };
        // SAFETY: the PD, CQs and SRQ are live and on this context.
        let raw = unsafe { mlx5dv::mlx5dv_create_qp(ia.ctx, &mut attr, &mut mlx5) };
        if raw.is_null() {
            return Err(dat_error(errno()));
        }
        let srq = spec.srq.map(|s| s.0.clone());
        let reads = (spec.max_rdma_read_in, spec.max_rdma_read_out);
        let shared = Rc::new(QpShared::new(raw, ia, Rings::default(), srq, reads, spec.tag));
        // From here on, dropping `qp` destroys the QP.
        let qp = Qp { shared, ia: ia.clone(), private: private.map(|(_, ring)| ring), _cqs: cqs };
        // SAFETY: plain C data, every pointer null.
        let mut dv: DvQp = unsafe { std::mem::zeroed() };
        init_obj(mlx5dv::mlx5dv_obj_type::MLX5DV_OBJ_QP, |o| {
            o.qp.in_ = raw;
            o.qp.out = (&raw mut dv).cast();
        })?;
        if dv.sq.wqe_cnt < spec.sq_wqebbs {
            return Err(refused("send queue", udat_mlx5::Geometry::Ring));
        }
        // BlueFlame alternates between two halves of `size` bytes; with
        // no BlueFlame, the doorbell is one 8-byte register.
        let bf_len = if dv.bf.size == 0 { 8 } else { 2 * dv.bf.size as usize };
        // SAFETY: init_obj described the live QP: its BlueFlame register
        // stays mapped while the context is open.
        let bf = unsafe { register(dv.bf.reg, bf_len) }?;
        // SAFETY: the rings and the record are the QP's, used only by the
        // data path while `qp` keeps the QP alive.
        let (sq, rq) = unsafe { (dv::send_queue(&dv, qp.number(), bf), dv::recv_queue(&dv)) };
        let sq = sq.map_err(|e| refused("send queue", e))?;
        let rq = match (rq.map_err(|e| refused("receive queue", e))?, spec.srq) {
            (Some(g), None) => {
                let slots = vec![RecvSlot::default(); g.wqe_cnt as usize].into_boxed_slice();
                Some((g, slots))
            }
            (None, Some(_)) => None,
            _ => return Err(refused("receive queue", udat_mlx5::Geometry::Ring)),
        };
        qp.shared.init(ia.port)?;
        let send_slots = vec![SendSlot::EMPTY; sq.wqe_cnt as usize].into_boxed_slice();
        Ok(QpParts { qp, sq, send_slots, rq })
    }

    fn qp_destroy(&mut self, qp: Qp) {
        drop(qp);
    }

    fn qp_reset(&mut self, qp: &mut Qp) -> DatResult<()> {
        cm::release_id(&qp.ia, &qp.shared);
        qp.drain_private();
        qp.shared.to_state(sys::ibv_qp_state::IBV_QPS_RESET)?;
        qp.shared.phase.set(crate::qp::Phase::Idle);
        qp.shared.init(qp.ia.port)
    }

    fn qpn(&self, qp: &Qp) -> u32 {
        qp.number()
    }

    fn srq_create(&mut self, pd: &Pd, attr: &SrqAttr) -> DatResult<SrqParts<Self>> {
        let srq = Srq(Rc::new(SrqShared::create(pd.pd, attr)?));
        let mut dv = DvSrq {
            buf: std::ptr::null_mut(),
            dbrec: std::ptr::null_mut(),
            stride: 0,
            head: 0,
            tail: 0,
            comp_mask: u64::from(mlx5dv::mlx5dv_srq_comp_mask::MLX5DV_SRQ_MASK_SRQN),
            srqn: 0,
        };
        init_obj(mlx5dv::mlx5dv_obj_type::MLX5DV_OBJ_SRQ, |o| {
            o.srq.in_ = srq.0.srq;
            o.srq.out = (&raw mut dv).cast();
        })?;
        // A fresh SRQ's free WQEs run from 0 to `tail`: all of them.
        let srqn_given = dv.comp_mask & u64::from(mlx5dv::mlx5dv_srq_comp_mask::MLX5DV_SRQ_MASK_SRQN) != 0;
        if dv.head != 0 || !srqn_given {
            return Err(refused("SRQ", udat_mlx5::Geometry::Ring));
        }
        let wqe_cnt = dv.tail.checked_add(1).ok_or_else(|| refused("SRQ", udat_mlx5::Geometry::Ring))?;
        // SAFETY: the ring and record are the SRQ's, used only by the data
        // path while `srq` keeps it alive.
        let geometry = unsafe { dv::shared_recv_queue(&dv, wqe_cnt) }.map_err(|e| refused("SRQ", e))?;
        let slots = vec![RecvSlot::default(); wqe_cnt as usize].into_boxed_slice();
        Ok(SrqParts { srq, srqn: dv.srqn, geometry, slots })
    }

    fn srq_destroy(&mut self, srq: Srq) {
        drop(srq);
    }

    fn now_us(&mut self) -> u64 {
        self.clock.now_us()
    }

    /// The data path has armed its CQs; their events are read by
    /// [`Device::cq_event`].
    fn block(&mut self, ia: &mut Ia, timeout_us: Option<u64>) -> Wake {
        ia.0.sleep(&self.clock, timeout_us).0
    }

    fn wait_fds(&self, ia: &Ia) -> WaitFds {
        ia.wait_fds()
    }
}
