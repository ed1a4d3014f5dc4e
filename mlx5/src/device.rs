//! The control path under the data path.
//!
//! Everything that is not posting or polling goes through a [`Device`]:
//! opening it, protection domains, memory registration, creating queues
//! (which hands back their memory and geometry), QP state changes and
//! connection management, and blocking. On a ConnectX that is rdma-core
//! (libibverbs, mlx5dv, rdma_cm); for tests, examples and benches it is
//! the software HCA of `udat-mlx5-model`.

use udat_core::backend::{CmEvent, Registration, WaitFds, Wake};
use udat_core::types::{IaAddress, IaAttr, MemPriv, SrqAttr};
use udat_core::DatResult;

use crate::cq::CqGeometry;
use crate::doorbell::Register;
use crate::rq::{RecvSlot, RqGeometry};
use crate::sq::{SendSlot, SqGeometry};

/// The shape of a QP the backend asks the device for.
#[derive(Debug)]
pub struct QpSpec<'a, D: Device + ?Sized> {
    pub pd: &'a D::Pd,
    /// None: the EP has no EVD for this stream, and no CQE is written.
    pub send_cq: Option<&'a D::Cq>,
    pub recv_cq: Option<&'a D::Cq>,
    pub srq: Option<&'a D::Srq>,
    /// WQEBBs the send ring must hold.
    pub sq_wqebbs: u32,
    pub max_recv_wr: u32,
    pub max_recv_sge: u32,
    pub max_rdma_read_in: u32,
    pub max_rdma_read_out: u32,
    /// Echoed in connection events.
    pub tag: u64,
}

/// A QP as the device made it: its control handle and its queues.
#[derive(Debug)]
pub struct QpParts<D: Device + ?Sized> {
    pub qp: D::Qp,
    pub sq: SqGeometry<D::Register>,
    pub send_slots: D::SendSlots,
    /// None when the QP receives from an SRQ.
    pub rq: Option<(RqGeometry, D::RecvSlots)>,
}

/// A CQ as the device made it.
#[derive(Debug)]
pub struct CqParts<D: Device + ?Sized> {
    pub cq: D::Cq,
    pub geometry: CqGeometry<D::Register>,
}

/// An SRQ as the device made it.
#[derive(Debug)]
pub struct SrqParts<D: Device + ?Sized> {
    pub srq: D::Srq,
    pub srqn: u32,
    pub geometry: RqGeometry,
    pub slots: D::RecvSlots,
}

/// An mlx5 device's control path.
pub trait Device {
    type Ia;
    type Pd;
    type Mr;
    /// A type 1 memory window.
    type Mw;
    type Cq;
    type Qp;
    type Srq;
    type Listener;
    type ConnReq;
    /// A doorbell register (UAR page or BlueFlame buffer).
    type Register: Register;
    /// Storage for one [`SendSlot`] per send WQEBB.
    type SendSlots: AsMut<[SendSlot]> + AsRef<[SendSlot]>;
    /// Storage for one [`RecvSlot`] per receive WQE.
    type RecvSlots: AsMut<[RecvSlot]> + AsRef<[RecvSlot]>;

    /// Whether threads may post on different QPs at once: each QP's
    /// doorbell register is its own (no two QPs share a BlueFlame buffer,
    /// whose halves each QP's send queue alternates on its own), and the
    /// registers may be used from any thread. The backend's shared data
    /// path ([`udat_core::Backend::SHARED_QUEUES`]) is on only then.
    const SHARED_QUEUES: bool = false;

    fn ia_open(&mut self, name: &[u8]) -> DatResult<(Self::Ia, IaAttr)>;
    fn ia_close(&mut self, ia: Self::Ia);
    fn pd_alloc(&mut self, ia: &mut Self::Ia) -> DatResult<Self::Pd>;
    fn pd_free(&mut self, pd: Self::Pd);
    fn mr_register(
        &mut self,
        pd: &Self::Pd,
        address: u64,
        length: u64,
        privileges: MemPriv,
    ) -> DatResult<Registration<Self::Mr>>;
    fn mr_deregister(&mut self, mr: Self::Mr);
    /// A type 1 memory window of `pd`, unbound, and its key
    /// (`ibv_alloc_mw`); the data path binds it ([`crate::mw`]).
    fn mw_alloc(&mut self, pd: &Self::Pd) -> DatResult<(Self::Mw, u32)>;
    /// Free the window: its key stops working, bound or not.
    fn mw_free(&mut self, mw: Self::Mw);

    /// A CQ of at least `min_entries`, every CQE invalid, created for
    /// polling by the data path (no compression).
    fn cq_create(&mut self, ia: &mut Self::Ia, min_entries: u32) -> DatResult<CqParts<Self>>;
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

    fn srq_create(&mut self, pd: &Self::Pd, attr: &SrqAttr) -> DatResult<SrqParts<Self>>;
    fn srq_destroy(&mut self, srq: Self::Srq);

    fn listen(&mut self, ia: &mut Self::Ia, conn_qual: u64, tag: u64) -> DatResult<Self::Listener>;
    fn unlisten(&mut self, listener: Self::Listener);
    fn connect(
        &mut self,
        qp: &mut Self::Qp,
        remote: &IaAddress,
        conn_qual: u64,
        private_data: &[u8],
        timeout_us: Option<u64>,
    ) -> DatResult<()>;
    fn accept(&mut self, request: &mut Self::ConnReq, qp: &mut Self::Qp, private_data: &[u8]) -> DatResult<()>;
    fn reject(&mut self, request: Self::ConnReq, private_data: &[u8]);
    /// Tear the connection down; the QP goes to ERROR and the device
    /// flushes what it holds.
    fn disconnect(&mut self, qp: &mut Self::Qp, graceful: bool);
    fn poll_cm(&mut self, ia: &mut Self::Ia) -> Option<CmEvent<Self::ConnReq>>;
    fn now_us(&mut self) -> u64;
    /// Block until an armed CQ's event or a connection event may be ready.
    fn block(&mut self, ia: &mut Self::Ia, timeout_us: Option<u64>) -> Wake;
    /// What [`Backend::wait_fds`](udat_core::Backend::wait_fds) reports.
    fn wait_fds(&self, _ia: &Self::Ia) -> WaitFds {
        WaitFds::NONE
    }
}
