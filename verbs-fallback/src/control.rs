//! What a control path under another data path reuses of udat-verbs:
//! the core's control calls over rdma-core, [`RdmaCore`] (opening a
//! device, protection domains, registrations), windows and SRQs, an RC
//! QP's states, and the rdma_cm connection manager, [`RdmaCm`], which
//! connects any QP that lends it its [`QpConn`] ([`CmQp`]). udat-verbs's
//! own backend is made of the same parts, and so is udat-connectx, the
//! ConnectX control path under udat's mlx5 data path.

use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Instant;

use udat_core::backend::{CmEvent, ConnectionManager, Registration, Wake};
use udat_core::types::{IaAddress, IaAttr, MemPriv, SrqAttr};
use udat_core::{Control, DatError, DatResult, ErrorType};

use crate::cm::{self, ConnReq, Listener};
use crate::device::{Ia, IaShared};
use crate::memory::{Mr, Pd, Window};
use crate::qp::Qp;
pub use crate::qp::QpConn;
use crate::srq::{Srq, SrqShared};
use crate::status::{dat_error, errno};
use crate::sys;

/// rdma-core's devices, protection domains and registrations as the
/// core's control calls, for udat-verbs and for a control path that
/// drives only some devices (udat-connectx: those of rdma-core's mlx5
/// provider).
pub struct RdmaCore {
    /// Whether a device just opened is one the control path drives.
    accepts: fn(&Ia) -> bool,
}

impl RdmaCore {
    /// Control calls that open any device.
    pub fn new() -> RdmaCore {
        RdmaCore::only(|_| true)
    }

    /// Control calls that open only a device `accepts`: any other is
    /// closed again and refused with `DAT_PROVIDER_NOT_FOUND`, as a
    /// device that is not there.
    pub fn only(accepts: fn(&Ia) -> bool) -> RdmaCore {
        RdmaCore { accepts }
    }
}

impl Default for RdmaCore {
    fn default() -> RdmaCore {
        RdmaCore::new()
    }
}

impl Control for RdmaCore {
    type Ia = Ia;
    type Pd = Pd;
    type Mr = Mr;

    /// Open `name` (`mlx5_0`, `rxe0`, `mlx5_0:2` for a port), if the
    /// control path drives its device.
    fn ia_open(&mut self, name: &[u8]) -> DatResult<(Ia, IaAttr)> {
        let (ia, attr) = Ia::open(name)?;
        if !(self.accepts)(&ia) {
            return Err(DatError::of(ErrorType::ProviderNotFound));
        }
        Ok((ia, attr))
    }

    fn ia_close(&mut self, ia: Ia) {
        drop(ia);
    }

    fn pd_alloc(&mut self, ia: &mut Ia) -> DatResult<Pd> {
        Pd::alloc(ia)
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
}

/// rdma_cm as the core's connection manager, for QPs of type `Q`. Each
/// IA's connections progress on a thread of the IA's own (see the
/// crate's `progress` module); this hands the core what they finished,
/// and keeps the core's clock.
pub struct RdmaCm<Q> {
    clock: Clock,
    _qp: PhantomData<fn(&mut Q)>,
}

impl<Q> RdmaCm<Q> {
    /// A connection manager whose clock starts now.
    pub fn new() -> RdmaCm<Q> {
        RdmaCm { clock: Clock::new(), _qp: PhantomData }
    }

    /// Microseconds since it was made.
    pub fn now_us(&self) -> u64 {
        self.clock.now_us()
    }

    /// Block on `ia`'s completion channel, finished connection events and
    /// async events until something may be ready or `timeout_us` passes;
    /// and whether a CQ event woke it.
    pub fn sleep(&self, ia: &Ia, timeout_us: Option<u64>) -> (Wake, bool) {
        ia.0.sleep(timeout_us)
    }
}

/// Microseconds since the backend was made: the core's clock.
struct Clock(Instant);

impl Clock {
    fn new() -> Clock {
        Clock(Instant::now())
    }

    fn now_us(&self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

impl<Q> Default for RdmaCm<Q> {
    fn default() -> RdmaCm<Q> {
        RdmaCm::new()
    }
}

/// A QP whose connection [`RdmaCm`] drives.
pub trait CmQp {
    /// The QP's states and rdma_cm id.
    fn conn(&self) -> &QpConn;
}

impl CmQp for Qp {
    fn conn(&self) -> &QpConn {
        &self.conn
    }
}

impl<Q: CmQp> ConnectionManager for RdmaCm<Q> {
    type Ia = Ia;
    type Qp = Q;
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
        qp: &mut Q,
        remote: &IaAddress,
        conn_qual: u64,
        private_data: &[u8],
        timeout_us: Option<u64>,
    ) -> DatResult<()> {
        let c = qp.conn();
        cm::connect(&c.ia, c.shared.qp, remote, conn_qual, private_data, timeout_us)
    }

    fn accept(&mut self, request: &mut ConnReq, qp: &mut Q, private_data: &[u8]) -> DatResult<()> {
        let c = qp.conn();
        cm::accept(request, &c.ia, c.shared.qp, private_data)
    }

    fn reject(&mut self, request: ConnReq, private_data: &[u8]) {
        cm::reject(request, private_data);
    }

    fn disconnect(&mut self, qp: &mut Q, graceful: bool) {
        let c = qp.conn();
        cm::disconnect(&c.ia, &c.shared, graceful);
    }

    fn poll_cm(&mut self, ia: &mut Ia) -> Option<CmEvent<ConnReq>> {
        cm::poll(&ia.0)
    }
}

impl Ia {
    /// Open the device `name` (`mlx5_0`, `rxe0`, `mlx5_0:2` for a port).
    pub fn open(name: &[u8]) -> DatResult<(Ia, IaAttr)> {
        let (ia, attr) = IaShared::open(name)?;
        Ok((Ia(Rc::new(ia)), attr))
    }

    /// The device context.
    pub fn context(&self) -> *mut sys::ibv_context {
        self.0.ctx
    }

    /// The completion channel every CQ of the IA reports its events to.
    pub fn comp_channel(&self) -> *mut sys::ibv_comp_channel {
        self.0.comp
    }

    /// Report `cq`'s async errors with `tag`.
    pub fn name_cq(&self, cq: *mut sys::ibv_cq, tag: u64) {
        self.0.errors.name_cq(cq, tag);
    }

    /// Stop reporting `cq`'s async errors.
    pub fn unname_cq(&self, cq: *mut sys::ibv_cq) {
        self.0.errors.unname_cq(cq);
    }
}

impl Pd {
    /// A protection domain on `ia`.
    pub fn alloc(ia: &Ia) -> DatResult<Pd> {
        Pd::on(&ia.0)
    }

    /// The verbs PD.
    pub fn as_ptr(&self) -> *mut sys::ibv_pd {
        self.pd
    }

    /// The IA the PD is on.
    pub fn ia(&self) -> Ia {
        Ia(self.ia.clone())
    }
}

impl Window {
    /// The window's remote key.
    pub fn rkey(&self) -> u32 {
        // SAFETY: the window is live while `self` is.
        unsafe { (*self.0).rkey }
    }
}

impl Srq {
    /// An SRQ of `attr`'s shape on `pd`.
    pub fn create(pd: &Pd, attr: &SrqAttr) -> DatResult<Srq> {
        Ok(Srq(Rc::new(SrqShared::create(pd.pd, attr)?)))
    }

    /// The verbs SRQ.
    pub fn as_ptr(&self) -> *mut sys::ibv_srq {
        self.0.srq
    }
}

/// Stop expecting async events of `cq`, which is about to be destroyed.
///
/// # Safety
/// `ctx` is the open context of the CQ.
pub unsafe fn forget_cq(ctx: *mut sys::ibv_context, cq: *mut sys::ibv_cq) {
    // SAFETY: the caller's promise.
    unsafe { crate::device_error::cq_going(ctx, cq) }
}

/// The DAT error of the errno a verbs call just left.
pub fn last_error() -> DatError {
    dat_error(errno())
}

/// The DAT error of a verbs call's negative or positive errno return.
pub fn error_of(rc: i32) -> DatError {
    dat_error(rc.abs())
}
