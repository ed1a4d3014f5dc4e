//! A panic inside an entry point: it never unwinds into C, and it is the
//! last call the provider serves, since it may have left objects
//! half-updated. The panic comes from a transport written for this test,
//! which wraps the software HCA and panics on demand in its CQ poll, or in
//! its shared post while another thread waits for the same Endpoint.

use std::ffi::CString;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use udat_capi::capacity::Capacity;
use udat_capi::instance::Addr;
use udat_capi::sys::*;
use udat_capi::transport::SoftHca;
use udat_capi::{Instance, Registration, Transport};
use udat_core::backend::{
    Backend, Completion, ConnectionManager, CqHead, Cqs, HoldsQp, QpConfig, Qps, RequestOp, SendWr, Sge, Untaken, Wake,
};
use udat_core::handle::CnoHandle;
use udat_core::types::{CompletionFlags, EvdFlags, MemPriv, SrqAttr};
use udat_core::{AsyncEvd, DatResult};

use common::{ty, Rig};

mod common;

/// Taken by each test: the flags below are every instance's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
static PANIC_IN_POLL: AtomicBool = AtomicBool::new(false);
/// Whether the shared post panics; it waits a while first, holding its
/// Endpoint's lock, so that another thread's post comes to wait for it.
static PANIC_IN_SHARED_POST: AtomicBool = AtomicBool::new(false);
/// Raised by the shared post that is about to panic.
static PANICKING_POST_ENTERED: AtomicBool = AtomicBool::new(false);

/// The software HCA, with a CQ poll that panics while `PANIC_IN_POLL`
/// and a shared ordinary request post that panics while
/// `PANIC_IN_SHARED_POST`; its queues are shared (as the software HCA's
/// are) if `SHARED`, else every call of a thread-safe provider takes the
/// provider whole.
struct Panicky<const SHARED: bool>(SoftHca);

type M = SoftHca;

impl<const SHARED: bool> Backend for Panicky<SHARED> {
    type Ia = <M as Backend>::Ia;
    type Pd = <M as Backend>::Pd;
    type Mr = <M as Backend>::Mr;
    type Mw = <M as Backend>::Mw;
    type Cq = <M as Backend>::Cq;
    type Qp = <M as Backend>::Qp;
    type Kept = <M as Backend>::Kept;
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

    fn cm_waiting(&self, ia: &Self::Ia) -> Option<bool> {
        self.0.cm_waiting(ia)
    }

    // The shared data path, the software HCA's but for the panic.
    const SHARED_QUEUES: bool = SHARED && <M as Backend>::SHARED_QUEUES;

    unsafe fn post_one_shared(
        &self,
        qp: &mut Self::Qp,
        op: RequestOp,
        sge: Sge,
        cookie: u64,
        flags: CompletionFlags,
    ) -> bool {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.0.post_one_shared(qp, op, sge, cookie, flags) }
    }
    unsafe fn post_send_shared(&self, qp: &mut Self::Qp, wr: &SendWr<'_>) -> DatResult<()> {
        if PANIC_IN_SHARED_POST.load(Ordering::Relaxed) {
            PANICKING_POST_ENTERED.store(true, Ordering::Release);
            std::thread::sleep(Duration::from_millis(200));
            panic!("a transport bug");
        }
        // SAFETY: as in `post_one_shared`.
        unsafe { self.0.post_send_shared(qp, wr) }
    }
    unsafe fn post_recv_shared(&self, qp: &mut Self::Qp, sges: &[Sge], cookie: u64) -> DatResult<()> {
        // SAFETY: as in `post_one_shared`.
        unsafe { self.0.post_recv_shared(qp, sges, cookie) }
    }
    unsafe fn post_recv_one_shared(&self, qp: &mut Self::Qp, sge: Sge, cookie: u64) -> bool {
        // SAFETY: as in `post_one_shared`.
        unsafe { self.0.post_recv_one_shared(qp, sge, cookie) }
    }
    unsafe fn cq_take_shared<G: HoldsQp<Self::Qp>>(
        &self,
        cq: &mut Self::Cq,
        admit: impl FnOnce(CqHead) -> Option<G>,
    ) -> Result<(Completion, G), Untaken> {
        // SAFETY: as in `post_one_shared`.
        unsafe { self.0.cq_take_shared(cq, admit) }
    }
}

impl<const SHARED: bool> Transport for Panicky<SHARED> {
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
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The word of one thread's provider, and the shard of a thread-safe
    // one, each carry the poison.
    for thread_safe in [false, true] {
        panic_poisons(Registration { thread_safe, ..common::REGISTRATION });
    }
}

fn panic_poisons(reg: Registration) {
    let name = CString::from(c"poison");
    let device = CString::from(c"mlx5_soft0");
    let instance: &'static Instance<Panicky<false>> =
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

#[test]
fn a_shared_post_waiting_for_an_endpoint_whose_holder_panicked_is_refused() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let name = CString::from(c"poison-shared");
    let device = CString::from(c"mlx5_soft0");
    let reg = Registration { thread_safe: true, ..common::REGISTRATION };
    let instance: &'static Instance<Panicky<true>> =
        Box::leak(Instance::new(name, device, Capacity::default(), &reg).expect("an instance"));
    // Opened as dat_ia_open opens one, address and all; the provider is
    // in no registry, which dat_ia_open looks in.
    let (ia, async_evd) = {
        let mut state = instance.state.lock();
        let (ia, async_evd) = state.core.ia_open(b"mlx5_soft0", AsyncEvd::Create { min_qlen: 8 }).unwrap();
        let (_, attr) = state.core.ia_query(ia).unwrap();
        state.ia_addr[ia.raw().index() as usize] = Addr(attr.ia_address);
        (state.ptr(ia), state.ptr(async_evd))
    };
    // The helpers of the other tests, on this provider's table; it is in
    // no registry, and it ends poisoned, so nothing closes it.
    let rig = std::mem::ManuallyDrop::new(Rig { table: &instance.table, ia, async_evd });
    let pz = rig.pz();
    let (cr_evd, conn_evd) = (rig.evd(8, DAT_EVD_CR_FLAG), rig.evd(8, DAT_EVD_CONNECTION_FLAG));
    let (evd, peer_evd) = (rig.evd(64, DAT_EVD_DTO_FLAG), rig.evd(64, DAT_EVD_DTO_FLAG));
    let (a, b) = (rig.ep(pz, evd, evd, conn_evd), rig.ep(pz, peer_evd, peer_evd, conn_evd));
    rig.psp(7001, cr_evd);
    rig.connect(a, b, 7001, cr_evd);
    rig.next(conn_evd);
    rig.next(conn_evd);
    let buf: &'static mut [u8] = Box::leak(Box::new([0u8; 8192]));
    let base = buf.as_ptr() as u64;
    let (_, lmr_context, rmr_context) = rig.lmr(pz, buf, DAT_MEM_PRIV_ALL_FLAG);
    let local = DAT_LMR_TRIPLET { lmr_context, virtual_address: base, segment_length: 64 };
    let remote = DAT_RMR_TRIPLET { rmr_context, virtual_address: base + 4096, segment_length: 64 };
    let t = &instance.table;
    // A write of one segment takes the shared lane, not the panicking post.
    assert_eq!(rig.write(a, local, &remote, 1), DAT_SUCCESS);
    assert_eq!(rig.next(evd).event_number, DAT_DTO_COMPLETION_EVENT);

    PANIC_IN_SHARED_POST.store(true, Ordering::Relaxed);
    let table = Table(&instance.table, a);
    let (panicked, waited) = std::thread::scope(|s| {
        // Two segments: the ordinary shared post, which panics holding
        // `a`'s lock.
        let panicking = s.spawn(move || {
            let (t, a) = table.parts();
            let mut two = [local, DAT_LMR_TRIPLET { virtual_address: base + 64, ..local }];
            // SAFETY: live handles, triplets inside a live LMR.
            unsafe {
                t.ep_post_send_func.unwrap()(
                    a,
                    2,
                    two.as_mut_ptr(),
                    DAT_DTO_COOKIE { as_64: 2 },
                    DAT_COMPLETION_DEFAULT_FLAG,
                )
            }
        });
        while !PANICKING_POST_ENTERED.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        // Inside the provider beside the panicking post, it waits for
        // `a`'s lock (or, arriving after the panic, is turned away at
        // the door): refused either way, never served nor left waiting.
        let waiting = s.spawn(move || {
            let (t, a) = table.parts();
            let mut one = local;
            // SAFETY: as above.
            unsafe {
                t.ep_post_rdma_write_func.unwrap()(
                    a,
                    1,
                    &mut one,
                    DAT_DTO_COOKIE { as_64: 3 },
                    &remote,
                    DAT_COMPLETION_DEFAULT_FLAG,
                )
            }
        });
        (panicking.join().unwrap(), waiting.join().unwrap())
    });
    PANIC_IN_SHARED_POST.store(false, Ordering::Relaxed);
    assert_eq!(panicked, DAT_CLASS_ERROR | DAT_INTERNAL_ERROR);
    assert_eq!(waited, DAT_CLASS_ERROR | DAT_INTERNAL_ERROR);
    // The provider serves nothing more: not `a`, not `b`, not a dequeue.
    assert_eq!(ty(rig.write(a, local, &remote, 4)), DAT_INTERNAL_ERROR);
    assert_eq!(ty(rig.write(b, local, &remote, 5)), DAT_INTERNAL_ERROR);
    let mut event = DAT_EVENT::default();
    // SAFETY: a handle of this instance and a valid out-pointer.
    assert_eq!(ty(unsafe { t.evd_dequeue_func.unwrap()(evd, &mut event) }), DAT_INTERNAL_ERROR);
}

/// A provider table and an Endpoint of its provider, handed to the
/// threads of a test.
#[derive(Clone, Copy)]
struct Table(&'static DAT_PROVIDER, DAT_EP_HANDLE);

// SAFETY: the table is not written once made, and the provider is
// thread-safe: it serves the Endpoint's calls from any thread.
unsafe impl Send for Table {}
// SAFETY: as for `Send`.
unsafe impl Sync for Table {}

impl Table {
    /// The table and the Endpoint, on the thread that calls this.
    fn parts(self) -> (&'static DAT_PROVIDER, DAT_EP_HANDLE) {
        (self.0, self.1)
    }
}
