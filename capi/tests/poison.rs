//! A panic inside an entry point: it never unwinds into C, and it is the
//! last call the provider serves, since it may have left objects
//! half-updated. The panic comes from a transport written for this test,
//! which wraps the software HCA and panics in its CQ poll on demand.

use std::ffi::CString;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use udat_capi::capacity::Capacity;
use udat_capi::sys::*;
use udat_capi::transport::SoftHca;
use udat_capi::{Instance, Registration, Transport};
use udat_core::backend::{Backend, Completion, ConnectionManager, Cqs, QpConfig, Qps, SendWr, Sge, Wake};
use udat_core::handle::CnoHandle;
use udat_core::types::{CompletionFlags, EvdFlags, MemPriv, SrqAttr};
use udat_core::{AsyncEvd, DatResult};

mod common;

static PANIC_IN_POLL: AtomicBool = AtomicBool::new(false);

/// The software HCA, with a CQ poll that panics while `PANIC_IN_POLL`.
struct Panicky(SoftHca);

type M = SoftHca;

impl Backend for Panicky {
    type Ia = <M as Backend>::Ia;
    type Pd = <M as Backend>::Pd;
    type Mr = <M as Backend>::Mr;
    type Mw = <M as Backend>::Mw;
    type Cq = <M as Backend>::Cq;
    type Qp = <M as Backend>::Qp;
    type Srq = <M as Backend>::Srq;
    type Ah = <M as Backend>::Ah;
    type Cm = <M as Backend>::Cm;
    type Control = <M as Backend>::Control;

    fn cm(&mut self) -> &mut Self::Cm {
        self.0.cm()
    }
    fn cm_qp(qp: &mut Self::Qp) -> &mut <Self::Cm as ConnectionManager>::Qp {
        M::cm_qp(qp)
    }
    fn control(&mut self) -> &mut Self::Control {
        self.0.control()
    }

    fn mw_alloc(&mut self, pd: &Self::Pd) -> DatResult<Self::Mw> {
        self.0.mw_alloc(pd)
    }
    fn mw_free(&mut self, mw: Self::Mw) {
        self.0.mw_free(mw)
    }
    fn cq_create(&mut self, ia: &mut Self::Ia, min_entries: u32, tag: u64) -> DatResult<Self::Cq> {
        self.0.cq_create(ia, min_entries, tag)
    }
    fn cq_failed(&mut self, cq: &mut Self::Cq) {
        self.0.cq_failed(cq)
    }
    fn cq_resize(&mut self, cq: &mut Self::Cq, min_entries: u32) -> DatResult<()> {
        self.0.cq_resize(cq, min_entries)
    }
    fn cq_destroy(&mut self, cq: Self::Cq) {
        self.0.cq_destroy(cq)
    }
    fn cq_poll(&mut self, cq: &mut Self::Cq, qps: &mut impl Qps<Self::Qp>, out: &mut [Completion]) -> usize {
        assert!(!PANIC_IN_POLL.load(Ordering::Relaxed), "a transport bug");
        self.0.cq_poll(cq, qps, out)
    }
    fn qp_create(&mut self, config: &QpConfig<'_, Self>, tag: u64) -> DatResult<Self::Qp> {
        let config = QpConfig {
            pd: config.pd,
            send_cq: config.send_cq,
            recv_cq: config.recv_cq,
            srq: config.srq,
            max_send_wr: config.max_send_wr,
            max_recv_wr: config.max_recv_wr,
            max_send_sge: config.max_send_sge,
            max_recv_sge: config.max_recv_sge,
            max_rdma_read_in: config.max_rdma_read_in,
            max_rdma_read_out: config.max_rdma_read_out,
            qp_type: config.qp_type,
        };
        self.0.qp_create(&config, tag)
    }
    fn qp_destroy(&mut self, qp: Self::Qp, cqs: &mut impl Cqs<Self::Cq>) {
        self.0.qp_destroy(qp, cqs)
    }
    fn qp_reset(&mut self, qp: &mut Self::Qp, cqs: &mut impl Cqs<Self::Cq>) -> DatResult<()> {
        self.0.qp_reset(qp, cqs)
    }
    fn post_send(&mut self, qp: &mut Self::Qp, wr: &SendWr<'_>) -> DatResult<()> {
        self.0.post_send(qp, wr)
    }
    fn post_recv(&mut self, qp: &mut Self::Qp, sges: &[Sge], cookie: u64) -> DatResult<()> {
        self.0.post_recv(qp, sges, cookie)
    }
    fn post_bind(
        &mut self,
        qp: &mut Self::Qp,
        mw: &mut Self::Mw,
        mr: Option<&Self::Mr>,
        sge: Sge,
        privileges: MemPriv,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<u32> {
        self.0.post_bind(qp, mw, mr, sge, privileges, cookie, flags)
    }
    fn srq_create(&mut self, pd: &Self::Pd, attr: &SrqAttr) -> DatResult<Self::Srq> {
        self.0.srq_create(pd, attr)
    }
    fn srq_resize(&mut self, srq: &mut Self::Srq, max_recv_dtos: u32) -> DatResult<()> {
        self.0.srq_resize(srq, max_recv_dtos)
    }
    fn srq_destroy(&mut self, srq: Self::Srq) {
        self.0.srq_destroy(srq)
    }
    fn srq_post_recv(&mut self, srq: &mut Self::Srq, sges: &[Sge], cookie: u64) -> DatResult<()> {
        self.0.srq_post_recv(srq, sges, cookie)
    }
    fn now_us(&mut self) -> u64 {
        self.0.now_us()
    }
    fn block(&mut self, ia: &mut Self::Ia, cqs: &mut impl Cqs<Self::Cq>, timeout_us: Option<u64>) -> Wake {
        self.0.block(ia, cqs, timeout_us)
    }
    fn wait_fds(&self, ia: &Self::Ia) -> udat_core::backend::WaitFds {
        self.0.wait_fds(ia)
    }
}

impl Transport for Panicky {
    const NAME: &'static std::ffi::CStr = c"softhca";

    fn create(capacity: &Capacity) -> DatResult<Self> {
        Ok(Panicky(SoftHca::create(capacity)?))
    }
    fn knows(device: &str) -> bool {
        SoftHca::knows(device)
    }
}

#[test]
fn a_panic_is_internal_error_and_the_last_call_the_provider_serves() {
    // The word of one thread's provider, and the shard of a thread-safe
    // one, each carry the poison.
    for thread_safe in [false, true] {
        panic_poisons(Registration { thread_safe, ..common::REGISTRATION });
    }
}

fn panic_poisons(reg: Registration) {
    let name = CString::from(c"poison");
    let device = CString::from(c"mlx5_soft0");
    let instance: &'static Instance<Panicky> =
        Box::leak(Instance::new(name, device, Capacity::default(), &reg).expect("an instance"));
    let (ia, evd) = {
        let mut state = instance.state.lock();
        let (ia, _) = state.core.ia_open(b"mlx5_soft0", AsyncEvd::Create { min_qlen: 8 }).unwrap();
        let evd = state.core.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
        (state.ptr(ia), state.ptr(evd))
    };
    let t = &instance.table;
    let mut event = DAT_EVENT::default();
    let mut pz = ptr::null_mut();
    // SAFETY: handles of this instance; valid out-pointers.
    unsafe {
        assert_eq!(t.evd_dequeue_func.unwrap()(evd, &mut event), DAT_CLASS_ERROR | DAT_QUEUE_EMPTY);
        PANIC_IN_POLL.store(true, Ordering::Relaxed);
        assert_eq!(t.evd_dequeue_func.unwrap()(evd, &mut event), DAT_CLASS_ERROR | DAT_INTERNAL_ERROR);
        PANIC_IN_POLL.store(false, Ordering::Relaxed);
        // The transport is fine again, the provider is not.
        assert_eq!(t.evd_dequeue_func.unwrap()(evd, &mut event), DAT_CLASS_ERROR | DAT_INTERNAL_ERROR);
        assert_eq!(t.pz_create_func.unwrap()(ia, &mut pz), DAT_CLASS_ERROR | DAT_INTERNAL_ERROR);
    }
}
