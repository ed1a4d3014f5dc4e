//! One thread against two: posting and reaping on separate Endpoints of
//! one provider through the C ABI, on the software HCA.
//!
//! Each worker owns a connected pair of Endpoints with an EVD of its own
//! and repeats: post 16 RDMA writes of 64 bytes, then dequeue their 16
//! completions. The figure is DAT calls (posts and dequeues) per second,
//! for one worker alone and for two workers on two threads at once; their
//! ratio is what the provider lets two threads gain.
//!
//! `cargo bench -p udat-capi --bench threads`

use std::ffi::CStr;
use std::hint::black_box;
use std::ptr;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use udat_capi::registry::{self, Registration};
use udat_capi::sys::*;

const NAME: &CStr = c"bench-threads";
const CONN_QUAL: u64 = 4321;
/// Writes posted before their completions are reaped.
const BURST: usize = 16;
const BYTES: u32 = 64;

fn same(ia: DAT_IA_HANDLE) -> DAT_IA_HANDLE {
    ia
}

fn ok(ret: DAT_RETURN, what: &str) {
    assert_eq!(ret, DAT_SUCCESS, "{what}: {ret:#x}");
}

/// A connected pair: the worker posts on `ep`, whose completions reach
/// `evd`.
struct Worker {
    t: &'static DAT_PROVIDER,
    ep: DAT_EP_HANDLE,
    evd: DAT_EVD_HANDLE,
    local: DAT_LMR_TRIPLET,
    remote: DAT_RMR_TRIPLET,
}

// SAFETY: the handles name objects of a provider registered thread-safe,
// whose entry points serialise access to its state; `run` gives each
// worker to one thread at a time.
unsafe impl Send for Worker {}
// SAFETY: as above: a shared `Worker` is only ever used by the one thread
// `run` hands it to.
unsafe impl Sync for Worker {}

impl Worker {
    /// One burst: `BURST` posts, then their completions; DAT calls made.
    fn burst(&self) -> u64 {
        let t = self.t;
        for i in 0..BURST {
            let cookie = DAT_DTO_COOKIE { as_64: i as u64 };
            let mut local = self.local;
            // SAFETY: live handles, a triplet in a live LMR, a remote
            // triplet of the peer's LMR.
            let ret = unsafe {
                t.ep_post_rdma_write_func.unwrap()(
                    self.ep,
                    1,
                    &mut local,
                    cookie,
                    &self.remote,
                    DAT_COMPLETION_DEFAULT_FLAG,
                )
            };
            ok(ret, "dat_ep_post_rdma_write");
        }
        let mut reaped = 0;
        while reaped < BURST {
            let mut event = DAT_EVENT::default();
            // SAFETY: a live EVD and a valid out-pointer.
            match unsafe { t.evd_dequeue_func.unwrap()(self.evd, &mut event) } {
                DAT_SUCCESS => reaped += 1,
                ret => assert_eq!(ret & 0x3fff_0000, DAT_QUEUE_EMPTY, "dat_evd_dequeue: {ret:#x}"),
            }
            black_box(&event);
        }
        2 * BURST as u64
    }
}

/// The provider, an IA, and `n` workers.
struct Rig {
    table: *const DAT_PROVIDER,
    ia: DAT_IA_HANDLE,
    workers: Vec<Worker>,
    _memory: Vec<Box<[u8; 2 * 4096]>>,
}

impl Rig {
    fn new(n: usize) -> Rig {
        let reg = Registration { dapl_version: (2, 0), thread_safe: true, ia_out: same };
        let table = registry::add(NAME, "model mlx5_model0", reg).expect("register the model provider");
        // SAFETY: registered until the rig drops.
        let t: &'static DAT_PROVIDER = unsafe { &*table };
        let (mut async_evd, mut ia, mut pz) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        let (mut cr_evd, mut conn_evd, mut psp) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        let mut attr = DAT_IA_ATTR::default();
        let mut workers = Vec::new();
        let mut memory = Vec::new();
        // SAFETY: every call gets live handles of this provider and valid
        // out-pointers.
        unsafe {
            ok(t.ia_open_func.unwrap()(NAME.as_ptr().cast_mut(), 8, &mut async_evd, &mut ia), "dat_ia_open");
            ok(t.ia_query_func.unwrap()(ia, ptr::null_mut(), u64::MAX, &mut attr, 0, ptr::null_mut()), "query");
            ok(t.pz_create_func.unwrap()(ia, &mut pz), "dat_pz_create");
            ok(t.evd_create_func.unwrap()(ia, 4, ptr::null_mut(), DAT_EVD_CR_FLAG, &mut cr_evd), "CR EVD");
            ok(t.evd_create_func.unwrap()(ia, 4, ptr::null_mut(), DAT_EVD_CONNECTION_FLAG, &mut conn_evd), "conn EVD");
            ok(t.psp_create_func.unwrap()(ia, CONN_QUAL, cr_evd, DAT_PSP_CONSUMER_FLAG, &mut psp), "dat_psp_create");
            for _ in 0..n {
                let mut evd = ptr::null_mut();
                ok(
                    t.evd_create_func.unwrap()(ia, 2 * BURST as i32, ptr::null_mut(), DAT_EVD_DTO_FLAG, &mut evd),
                    "DTO EVD",
                );
                let (mut a, mut b) = (ptr::null_mut(), ptr::null_mut());
                ok(t.ep_create_func.unwrap()(ia, pz, evd, evd, conn_evd, ptr::null(), &mut a), "dat_ep_create");
                ok(t.ep_create_func.unwrap()(ia, pz, evd, evd, conn_evd, ptr::null(), &mut b), "dat_ep_create");
                let mut buf = Box::new([0u8; 2 * 4096]);
                let region = DAT_REGION_DESCRIPTION { for_va: buf.as_mut_ptr().cast() };
                let (mut lmr, mut lmr_context, mut rmr_context) = (ptr::null_mut(), 0, 0);
                ok(
                    t.lmr_create_func.unwrap()(
                        ia,
                        DAT_MEM_TYPE_VIRTUAL,
                        region,
                        buf.len() as u64,
                        pz,
                        DAT_MEM_PRIV_ALL_FLAG,
                        DAT_VA_TYPE_VA,
                        &mut lmr,
                        &mut lmr_context,
                        &mut rmr_context,
                        ptr::null_mut(),
                        ptr::null_mut(),
                    ),
                    "dat_lmr_create",
                );
                let qos = DAT_QOS_BEST_EFFORT;
                let flags = DAT_CONNECT_DEFAULT_FLAG;
                let addr = attr.ia_address_ptr;
                ok(
                    t.ep_connect_func.unwrap()(
                        a,
                        addr,
                        CONN_QUAL,
                        u32::MAX, // DAT_TIMEOUT_INFINITE
                        0,
                        ptr::null_mut(),
                        qos,
                        flags,
                    ),
                    "connect",
                );
                let request = next(t, cr_evd);
                let cr = request.event_data.cr_arrival_event_data.cr_handle;
                ok(t.cr_accept_func.unwrap()(cr, b, 0, ptr::null_mut()), "dat_cr_accept");
                next(t, conn_evd);
                next(t, conn_evd);
                let base = buf.as_ptr() as u64;
                workers.push(Worker {
                    t,
                    ep: a,
                    evd,
                    local: DAT_LMR_TRIPLET { lmr_context, virtual_address: base, segment_length: BYTES },
                    remote: DAT_RMR_TRIPLET { rmr_context, virtual_address: base + 4096, segment_length: BYTES },
                });
                memory.push(buf);
            }
        }
        Rig { table, ia, workers, _memory: memory }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // SAFETY: the IA is open; nothing uses the workers any more.
        unsafe { ok((*self.table).ia_close_func.unwrap()(self.ia, DAT_CLOSE_ABRUPT_FLAG), "dat_ia_close") };
        assert!(registry::remove(self.table));
    }
}

/// The next event of `evd`, polled for.
fn next(t: &DAT_PROVIDER, evd: DAT_EVD_HANDLE) -> DAT_EVENT {
    let mut event = DAT_EVENT::default();
    for _ in 0..1_000_000 {
        // SAFETY: a live EVD and a valid out-pointer.
        match unsafe { t.evd_dequeue_func.unwrap()(evd, &mut event) } {
            DAT_SUCCESS => return event,
            ret => assert_eq!(ret & 0x3fff_0000, DAT_QUEUE_EMPTY, "dat_evd_dequeue: {ret:#x}"),
        }
    }
    panic!("no event on the EVD");
}

/// `bursts` bursts on each of `workers`, one thread each; the time taken.
fn run(workers: &[Worker], bursts: u64) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for w in workers {
            s.spawn(move || {
                for _ in 0..bursts {
                    black_box(w.burst());
                }
            });
        }
    });
    start.elapsed()
}

fn threads(c: &mut Criterion) {
    let rig = Rig::new(2);
    let mut group = c.benchmark_group("posting and reaping on separate EPs of one provider");
    group.sample_size(10).measurement_time(Duration::from_secs(4));
    for n in [1usize, 2] {
        group.throughput(Throughput::Elements(2 * BURST as u64 * n as u64));
        group.bench_function(format!("{n} thread(s)"), |b| {
            b.iter_custom(|bursts| run(&rig.workers[..n], bursts));
        });
    }
    group.finish();
}

criterion_group!(benches, threads);
criterion_main!(benches);
