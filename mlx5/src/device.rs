//! The control path under the data path.
//!
//! Everything that is not posting or polling goes through a [`Device`]:
//! opening it, protection domains, memory registration, creating queues
//! (which hands back their memory and geometry), QP state changes and
//! connection management, and blocking. On a ConnectX that is rdma-core
//! (libibverbs, mlx5dv, rdma_cm); for tests, examples and benches it is
//! the software HCA of `udat-softhca`.

use udat_core::backend::{AhAttr, ConnectionManager, Control, WaitFds, Wake};
use udat_core::types::SrqAttr;
use udat_core::DatResult;

use crate::cq::CqGeometry;
use crate::doorbell::Register;
use crate::rq::{RecvSlot, RqGeometry};
use crate::slots::SlotStorage;
use crate::sq::{SendSlot, SqGeometry};
use crate::wqe::AddressVector;

/// The shape of a QP the backend asks the device for.
#[derive(Debug)]
pub struct QpSpec<'a, D: Device + ?Sized> {
    /// The protection domain.
    pub pd: &'a D::Pd,
    /// None: the EP has no EVD for this stream, and no CQE is written.
    pub send_cq: Option<&'a D::Cq>,
    /// The CQ of receive completions; None as for `send_cq`.
    pub recv_cq: Option<&'a D::Cq>,
    /// The SRQ the QP receives from, if any.
    pub srq: Option<&'a D::Srq>,
    /// WQEBBs the send ring must hold.
    pub sq_wqebbs: u32,
    /// Receives the receive ring must hold.
    pub max_recv_wr: u32,
    /// Segments one receive WQE must hold.
    pub max_recv_sge: u32,
    /// Most RDMA reads and atomics the peer may have in flight against the
    /// QP (the responder resources).
    pub max_rdma_read_in: u32,
    /// Most RDMA reads and atomics the QP may have in flight (the
    /// initiator depth).
    pub max_rdma_read_out: u32,
    /// Echoed in connection events.
    pub tag: u64,
    /// An `IBV_QPT_UD` QP, ready to send once made (no connection moves
    /// it), with the Q_Key `udat_core::backend::UD_QKEY`.
    pub ud: bool,
}

/// A QP as the device made it: its control handle and its queues.
#[derive(Debug)]
pub struct QpParts<D: Device + ?Sized> {
    /// The control path's handle of the QP.
    pub qp: D::Qp,
    /// The send queue's memory and doorbell.
    pub sq: SqGeometry<D::Register>,
    /// Room for the send queue's work-request table.
    pub send_slots: D::SendSlots,
    /// None when the QP receives from an SRQ.
    pub rq: Option<(RqGeometry, D::RecvSlots)>,
}

/// A CQ as the device made it.
#[derive(Debug)]
pub struct CqParts<D: Device + ?Sized> {
    /// The control path's handle of the CQ.
    pub cq: D::Cq,
    /// The CQ's memory and doorbells.
    pub geometry: CqGeometry<D::Register>,
}

/// An SRQ as the device made it.
#[derive(Debug)]
pub struct SrqParts<D: Device + ?Sized> {
    /// The control path's handle of the SRQ.
    pub srq: D::Srq,
    /// The SRQ number, which CQEs of its receives carry.
    pub srqn: u32,
    /// The SRQ's memory.
    pub geometry: RqGeometry,
    /// Room for its work-request table.
    pub slots: D::RecvSlots,
}

/// An mlx5 device's control path.
pub trait Device {
    /// An open device.
    type Ia;
    /// A QP's control handle.
    type Qp;
    /// The connection manager, which the backend hands to the core
    /// ([`udat_core::Backend::cm`]): the device itself, or one it is made
    /// with (udat-verbs's rdma_cm for the ConnectX control path).
    type Cm: ConnectionManager<Ia = Self::Ia>;
    /// The control calls, which the backend hands to the core
    /// ([`udat_core::Backend::control`]): the device itself, or ones it
    /// is made with (udat-verbs's rdma-core control for the ConnectX
    /// control path).
    type Control: Control<Ia = Self::Ia, Pd = Self::Pd, Mr = Self::Mr>;
    /// A protection domain.
    type Pd;
    /// A memory registration.
    type Mr;
    /// A memory window, of type 1 or 2.
    type Mw;
    /// A CQ's control handle.
    type Cq;
    /// An SRQ's control handle.
    type Srq;
    /// The control path's half of a UD address handle (on a ConnectX,
    /// the `ibv_ah` that `ibv_destroy_ah` takes).
    type Ah;
    /// A doorbell register (UAR page or BlueFlame buffer).
    type Register: Register;
    /// Storage for one [`SendSlot`] per send WQEBB.
    type SendSlots: SlotStorage<SendSlot>;
    /// Storage for one [`RecvSlot`] per receive WQE.
    type RecvSlots: SlotStorage<RecvSlot>;

    /// Whether threads may post on different QPs at once: each QP's
    /// doorbell register is its own (no two QPs share a BlueFlame buffer,
    /// whose halves each QP's send queue alternates on its own), and the
    /// registers may be used from any thread. The backend's shared data
    /// path ([`udat_core::Backend::SHARED_QUEUES`]) is on only then.
    const SHARED_QUEUES: bool = false;

    /// The connection manager.
    fn cm(&mut self) -> &mut Self::Cm;
    /// The connection manager's half of `qp`.
    fn cm_qp(qp: &mut Self::Qp) -> &mut <Self::Cm as ConnectionManager>::Qp;
    /// The control calls.
    fn control(&mut self) -> &mut Self::Control;

    /// A type 1 memory window of `pd`, unbound, and its key
    /// (`ibv_alloc_mw`); the data path binds it ([`crate::mw`]).
    fn mw_alloc(&mut self, pd: &Self::Pd) -> DatResult<(Self::Mw, u32)>;
    /// A type 2 memory window of `pd`, unbound, and its key
    /// (`ibv_alloc_mw` of `IBV_MW_TYPE_2`); the data path binds it to a QP
    /// ([`crate::mw`]). A device without them refuses with
    /// `DAT_MODEL_NOT_SUPPORTED`.
    fn mw_alloc_for_ep(&mut self, _pd: &Self::Pd) -> DatResult<(Self::Mw, u32)> {
        Err(udat_core::DatError::of(udat_core::ErrorType::ModelNotSupported))
    }
    /// Free the window: its key stops working, bound or not.
    fn mw_free(&mut self, mw: Self::Mw);

    /// A CQ of at least `min_entries`, every CQE invalid, created for
    /// polling by the data path (no compression).
    fn cq_create(&mut self, ia: &mut Self::Ia, min_entries: u32, tag: u64) -> DatResult<CqParts<Self>>;
    /// Destroy the CQ; its memory is no longer the data path's.
    fn cq_destroy(&mut self, cq: Self::Cq);
    /// A CQ event (the CQ number) taken since the last call, if any.
    fn cq_event(&mut self, ia: &mut Self::Ia) -> Option<u32>;

    /// An RC QP in INIT (receives may be posted), with scatter-to-CQE off.
    fn qp_create(&mut self, spec: &QpSpec<'_, Self>) -> DatResult<QpParts<Self>>;
    /// Destroy the QP; the device writes no CQE for it afterwards.
    fn qp_destroy(&mut self, qp: Self::Qp);
    /// Through RESET back to INIT: the device's indices restart at zero.
    fn qp_reset(&mut self, qp: &mut Self::Qp) -> DatResult<()>;
    /// The QP number.
    fn qpn(&self, qp: &Self::Qp) -> u32;

    /// A UD address handle in `pd` for `attr`, and the address vector the
    /// data path copies into each send (on a ConnectX, `ibv_create_ah`
    /// then `mlx5dv_init_obj` with `MLX5DV_OBJ_AH`). A device without UD
    /// refuses with `DAT_MODEL_NOT_SUPPORTED`.
    fn ah_create(&mut self, _pd: &Self::Pd, _attr: &AhAttr) -> DatResult<(Self::Ah, AddressVector)> {
        Err(udat_core::DatError::of(udat_core::ErrorType::ModelNotSupported))
    }
    /// Release an address handle (`ibv_destroy_ah`).
    fn ah_destroy(&mut self, _ah: Self::Ah) {}

    /// An SRQ of `attr`'s shape, handed over with its memory.
    fn srq_create(&mut self, pd: &Self::Pd, attr: &SrqAttr) -> DatResult<SrqParts<Self>>;
    /// Destroy the SRQ.
    fn srq_destroy(&mut self, srq: Self::Srq);

    /// As [`Backend::now_us`](udat_core::Backend::now_us).
    fn now_us(&mut self) -> u64;
    /// As [`Backend::coarse_now_us`](udat_core::Backend::coarse_now_us).
    fn coarse_now_us(&mut self) -> u64 {
        self.now_us()
    }
    /// Block until an armed CQ's event or a connection event may be ready.
    fn block(&mut self, ia: &mut Self::Ia, timeout_us: Option<u64>) -> Wake;
    /// What [`Backend::wait_fds`](udat_core::Backend::wait_fds) reports.
    fn wait_fds(&self, _ia: &Self::Ia) -> WaitFds {
        WaitFds::NONE
    }
    /// What [`Backend::cm_waiting`](udat_core::Backend::cm_waiting) answers.
    #[inline(always)]
    fn cm_waiting(&self, _ia: &Self::Ia) -> Option<bool> {
        None
    }
}
