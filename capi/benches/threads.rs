//! One thread against two: posting and reaping on separate Endpoints of
//! one thread-safe provider through the C ABI, on the software HCA.
//!
//! Each worker owns a connected pair of Endpoints with an EVD of its own
//! and repeats: post 16 RDMA writes of 64 bytes, then dequeue their 16
//! completions. The figure is DAT calls (posts and dequeues) per second,
//! for one worker alone and for two workers on two threads at once; their
//! ratio is what the provider lets two threads gain. Two groups:
//!
//! - "end to end": the software HCA executes each WQE inside its
//!   doorbell, on the posting thread, so its work, which a ConnectX does
//!   in hardware, is in the figures; doorbells of different QPs run at
//!   once, each under its QPs' and CQs' locks;
//! - "the provider alone": the doorbells are deferred (the registers make
//!   the MMIO stores a ConnectX's `Uar` makes, to a stand-in page) and the
//!   HCA runs the posted WQEs between the timed phases: the workers post
//!   their bursts together, timed; the HCA runs them, untimed; the workers
//!   dequeue the completions together, timed. Workers start each phase at
//!   a spinning barrier, and a phase lasts as long as its slowest worker.
//!   Beside one and two threads on one provider, two threads on two
//!   providers, which share nothing but the machine: what this machine
//!   lets two threads gain at most;
//! - "one EP, two threads": one worker's EP, end to end, with a thread
//!   that posts the writes and another that dequeues their completions,
//!   so that the two meet at the EP's lock (a post takes it; a dequeue
//!   takes the EVD's, then the EP's of the CQE): what a collision costs
//!   a lane, which declines a held lock and takes the ordinary call;
//! - "beside the control path": one worker, end to end, alone and while a
//!   second thread runs control cycles on the same IA (a PZ, an LMR, a
//!   DTO EVD and two EPs created, the EPs connected and disconnected,
//!   everything freed). What the worker keeps of its rate is what the
//!   control path leaves the data path; the control thread's cycles a
//!   second are printed beside it.
//!
//! `cargo bench -p udat-capi --bench threads`

#[path = "../tests/common/mod.rs"]
mod common;

use std::ffi::CStr;
use std::hint::black_box;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{ok, ty, SOFTHCA};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use udat_capi::sys::*;
use udat_capi::transport::SoftHca;
use udat_capi::Instance;

const NAMES: [&CStr; 2] = [c"bench-threads", c"bench-threads-other"];
const CONN_QUAL: u64 = 4321;
/// The control thread's listener.
const CONTROL_QUAL: u64 = 4322;
/// Writes posted before their completions are reaped, end to end.
const BURST: usize = 16;
/// Writes posted in each phase of "the provider alone": enough that a
/// phase (about 10 µs) dwarfs the workers' skew at its start.
const SPLIT_BURST: usize = 128;
const BYTES: u32 = 64;

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
        self.post(BURST);
        self.reap(BURST);
        2 * BURST as u64
    }

    /// `n` RDMA writes.
    fn post(&self, n: usize) {
        for i in 0..n {
            ok(self.write(i as u64), "dat_ep_post_rdma_write");
        }
    }

    /// `n` RDMA writes, each tried again while the EP has as many
    /// outstanding as it takes (another thread reaps them).
    fn post_as_reaped(&self, n: usize) {
        for i in 0..n {
            loop {
                match self.write(i as u64) {
                    DAT_SUCCESS => break,
                    ret => assert_eq!(ty(ret), DAT_INSUFFICIENT_RESOURCES, "dat_ep_post_rdma_write: {ret:#x}"),
                }
                std::hint::spin_loop();
            }
        }
    }

    /// One RDMA write of `cookie`.
    fn write(&self, cookie: u64) -> DAT_RETURN {
        let mut local = self.local;
        // SAFETY: live handles, a triplet in a live LMR, a remote triplet
        // of the peer's LMR.
        unsafe {
            self.t.ep_post_rdma_write_func.unwrap()(
                self.ep,
                1,
                &mut local,
                DAT_DTO_COOKIE { as_64: cookie },
                &self.remote,
                DAT_COMPLETION_DEFAULT_FLAG,
            )
        }
    }

    /// The completions of a burst of `n`.
    fn reap(&self, n: usize) {
        let t = self.t;
        let mut reaped = 0;
        while reaped < n {
            let mut event = DAT_EVENT::default();
            // SAFETY: a live EVD and a valid out-pointer.
            match unsafe { t.evd_dequeue_func.unwrap()(self.evd, &mut event) } {
                DAT_SUCCESS => reaped += 1,
                ret => assert_eq!(ty(ret), DAT_QUEUE_EMPTY, "dat_evd_dequeue: {ret:#x}"),
            }
            black_box(&event);
        }
    }
}

/// The provider, an IA, and `n` workers.
struct Rig {
    rig: common::Rig,
    workers: Vec<Worker>,
    _memory: Vec<Box<[u8; 2 * 4096]>>,
}

// SAFETY: the handles name objects of a provider registered thread-safe,
// whose entry points serialise access to its state; the workers are used
// as `run` says.
unsafe impl Sync for Rig {}

/// The software HCA under a provider: whether its doorbells are deferred,
/// and a run of what they published.
struct Hca {
    defer: Box<dyn Fn(bool) + Sync>,
    release: Box<dyn Fn() + Sync>,
}

impl Hca {
    fn of(ia: DAT_IA_HANDLE) -> Hca {
        // SAFETY: `ia` is a live IA handle of a software-HCA provider.
        let instance = unsafe { Instance::<SoftHca>::of(ia) };
        let hca = instance.state.lock().core.backend_mut().device().clone();
        let released = hca.clone();
        Hca { defer: Box::new(move |on| hca.set_deferred(on)), release: Box::new(move || released.release()) }
    }
}

impl Rig {
    fn new(name: &'static CStr, n: usize) -> Rig {
        let rig = common::Rig::new(name, SOFTHCA);
        // SAFETY: registered until the rig drops.
        let t: &'static DAT_PROVIDER = unsafe { &*rig.table };
        let ia = rig.ia;
        let pz = rig.pz();
        let (cr_evd, conn_evd) = (rig.evd(4, DAT_EVD_CR_FLAG), rig.evd(4, DAT_EVD_CONNECTION_FLAG));
        rig.psp(CONN_QUAL, cr_evd);
        // The default attributes, with room for a phase's requests.
        let probe = rig.ep(pz, ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        let mut param = DAT_EP_PARAM::default();
        // SAFETY: a live EP and a valid out-pointer.
        ok(unsafe { t.ep_query_func.unwrap()(probe, u64::MAX, &mut param) }, "dat_ep_query");
        // SAFETY: a live EP.
        ok(unsafe { t.ep_free_func.unwrap()(probe) }, "dat_ep_free");
        let mut ep_attr = param.ep_attr;
        ep_attr.max_request_dtos = SPLIT_BURST as i32;
        let mut workers = Vec::new();
        let mut memory = Vec::new();
        for _ in 0..n {
            let evd = rig.evd(2 * SPLIT_BURST as i32, DAT_EVD_DTO_FLAG);
            let (mut a, mut b) = (ptr::null_mut(), ptr::null_mut());
            // SAFETY: live handles of this provider, valid attributes and
            // out-pointers.
            unsafe {
                ok(t.ep_create_func.unwrap()(ia, pz, evd, evd, conn_evd, &ep_attr, &mut a), "dat_ep_create");
                ok(t.ep_create_func.unwrap()(ia, pz, evd, evd, conn_evd, &ep_attr, &mut b), "dat_ep_create");
            }
            let mut buf = Box::new([0u8; 2 * 4096]);
            let (_, lmr_context, rmr_context) = rig.lmr(pz, &mut buf[..], DAT_MEM_PRIV_ALL_FLAG);
            rig.connect(a, b, CONN_QUAL, cr_evd);
            rig.next(conn_evd);
            rig.next(conn_evd);
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
        Rig { rig, workers, _memory: memory }
    }
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

/// `bursts` bursts of `w` split between two threads: this one reaps the
/// completions of the writes the other posts; the time taken.
fn run_split_ep(w: &Worker, bursts: u64) -> Duration {
    let n = bursts as usize * BURST;
    let start = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| w.post_as_reaped(n));
        w.reap(n);
    });
    start.elapsed()
}

/// A barrier the workers spin at, so that they start a phase within
/// nanoseconds of each other.
struct Spin {
    n: usize,
    arrived: AtomicUsize,
    round: AtomicUsize,
}

impl Spin {
    fn new(n: usize) -> Spin {
        Spin { n, arrived: AtomicUsize::new(0), round: AtomicUsize::new(0) }
    }

    fn wait(&self) {
        let round = self.round.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.round.store(round + 1, Ordering::Release);
        } else {
            while self.round.load(Ordering::Acquire) == round {
                std::hint::spin_loop();
            }
        }
    }
}

/// `bursts` bursts on each of `workers`, one thread each, the HCAs running
/// the WQEs between the posting and the reaping phase: the time the
/// phases took, each as long as its slowest worker.
fn run_split(workers: &[&Worker], hcas: &[&Hca], bursts: u64) -> Duration {
    let spin = Spin::new(workers.len());
    let times: Vec<Vec<[Duration; 2]>> = std::thread::scope(|s| {
        let threads: Vec<_> = workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let spin = &spin;
                s.spawn(move || {
                    let mut times = Vec::with_capacity(bursts as usize);
                    for _ in 0..bursts {
                        spin.wait();
                        let start = Instant::now();
                        w.post(SPLIT_BURST);
                        let posted = start.elapsed();
                        spin.wait();
                        if i == 0 {
                            for hca in hcas {
                                (hca.release)();
                            }
                        }
                        spin.wait();
                        let start = Instant::now();
                        w.reap(SPLIT_BURST);
                        times.push([posted, start.elapsed()]);
                    }
                    times
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("a worker")).collect()
    });
    (0..bursts as usize)
        .map(|b| {
            let slowest = |phase: usize| times.iter().map(|t| t[b][phase]).max().unwrap_or_default();
            slowest(0) + slowest(1)
        })
        .sum()
}

/// A second thread's control cycles on the rig's IA, until `stop`: a PZ,
/// an LMR, a DTO EVD and two EPs, the EPs connected to each other through
/// a PSP of its own and disconnected, everything freed; cycles counted
/// in `cycles`.
fn control(rig: &Rig, stop: &AtomicBool, cycles: &AtomicU64) {
    let (r, t) = (&rig.rig, rig.rig.t());
    let mut buf = vec![0u8; 4096];
    let (cr_evd, conn_evd) = (r.evd(4, DAT_EVD_CR_FLAG), r.evd(8, DAT_EVD_CONNECTION_FLAG));
    let psp = r.psp(CONTROL_QUAL, cr_evd);
    while !stop.load(Ordering::Relaxed) {
        let pz = r.pz();
        let (lmr, _, _) = r.lmr(pz, &mut buf, DAT_MEM_PRIV_ALL_FLAG);
        let evd = r.evd(16, DAT_EVD_DTO_FLAG);
        let (a, b) = (r.ep(pz, evd, evd, conn_evd), r.ep(pz, evd, evd, conn_evd));
        r.connect(a, b, CONTROL_QUAL, cr_evd);
        r.next(conn_evd);
        r.next(conn_evd);
        // SAFETY: live handles of this provider; the buffer outlives the
        // LMR.
        unsafe {
            ok(t.ep_disconnect_func.unwrap()(a, DAT_CLOSE_ABRUPT_FLAG), "dat_ep_disconnect");
            r.next(conn_evd);
            r.next(conn_evd);
            for ep in [a, b] {
                ok(t.ep_free_func.unwrap()(ep), "dat_ep_free");
            }
            ok(t.evd_free_func.unwrap()(evd), "dat_evd_free");
            ok(t.lmr_free_func.unwrap()(lmr), "dat_lmr_free");
            ok(t.pz_free_func.unwrap()(pz), "dat_pz_free");
        }
        cycles.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: live handles of this provider.
    unsafe {
        ok(t.psp_free_func.unwrap()(psp), "dat_psp_free");
        for evd in [cr_evd, conn_evd] {
            ok(t.evd_free_func.unwrap()(evd), "dat_evd_free");
        }
    }
}

/// [`run`] for one worker while another thread runs [`control`] cycles;
/// the worker's time, and the control cycles done meanwhile.
fn run_beside_control(rig: &Rig, bursts: u64) -> (Duration, u64) {
    let (stop, cycles) = (AtomicBool::new(false), AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| control(rig, &stop, &cycles));
        // The control thread is under way before the clock starts.
        while cycles.load(Ordering::Relaxed) == 0 {
            std::hint::spin_loop();
        }
        let start = cycles.load(Ordering::Relaxed);
        let took = run(&rig.workers[..1], bursts);
        stop.store(true, Ordering::Relaxed);
        (took, cycles.load(Ordering::Relaxed) - start)
    })
}

fn threads(c: &mut Criterion) {
    let rig = Rig::new(NAMES[0], 2);
    let hca = Hca::of(rig.rig.ia);
    let mut group = c.benchmark_group("end to end");
    group.sample_size(10).measurement_time(Duration::from_secs(4));
    for n in [1usize, 2] {
        group.throughput(Throughput::Elements(2 * BURST as u64 * n as u64));
        group.bench_function(format!("{n} thread(s)"), |b| {
            b.iter_custom(|bursts| run(&rig.workers[..n], bursts));
        });
    }
    group.finish();
    let mut group = c.benchmark_group("one EP, two threads");
    group.sample_size(10).measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Elements(2 * BURST as u64));
    group.bench_function("1 thread posts and reaps", |b| b.iter_custom(|bursts| run(&rig.workers[..1], bursts)));
    group.bench_function("1 thread posts, 1 reaps", |b| {
        b.iter_custom(|bursts| run_split_ep(&rig.workers[0], bursts));
    });
    group.finish();
    let mut group = c.benchmark_group("beside the control path");
    group.sample_size(10).measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Elements(2 * BURST as u64));
    group.bench_function("1 thread alone", |b| b.iter_custom(|bursts| run(&rig.workers[..1], bursts)));
    let (mut took, mut cycles) = (Duration::ZERO, 0);
    group.bench_function("1 thread, control cycles beside", |b| {
        b.iter_custom(|bursts| {
            let (t, n) = run_beside_control(&rig, bursts);
            (took, cycles) = (took + t, cycles + n);
            t
        })
    });
    group.finish();
    if !took.is_zero() {
        eprintln!("control cycles beside the worker: {:.0}/s", cycles as f64 / took.as_secs_f64());
    }
    let other = Rig::new(NAMES[1], 1);
    let other_hca = Hca::of(other.rig.ia);
    for h in [&hca, &other_hca] {
        (h.defer)(true);
    }
    let mut group = c.benchmark_group("the provider alone");
    group.sample_size(10).measurement_time(Duration::from_secs(4));
    let (one, two) = (&rig.workers[0], &rig.workers[1]);
    let runs: [(&str, Vec<&Worker>, Vec<&Hca>); 3] = [
        ("1 thread(s)", vec![one], vec![&hca]),
        ("2 thread(s)", vec![one, two], vec![&hca]),
        ("2 thread(s), 2 providers", vec![one, &other.workers[0]], vec![&hca, &other_hca]),
    ];
    for (name, workers, hcas) in &runs {
        group.throughput(Throughput::Elements(2 * SPLIT_BURST as u64 * workers.len() as u64));
        group.bench_function(*name, |b| b.iter_custom(|bursts| run_split(workers, hcas, bursts)));
    }
    group.finish();
    for h in [&hca, &other_hca] {
        (h.defer)(false);
    }
}

criterion_group!(benches, threads);
criterion_main!(benches);
