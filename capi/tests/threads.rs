//! A thread-safe provider's data path from several threads at once: posts
//! on different Endpoints and dequeues on different EVDs run with the
//! provider shared, posts and reaps on one Endpoint from different threads
//! take its lock, receives are posted and reaped beside the sends that
//! fill them, two threads post to one SRQ, the IB extension's atomics
//! are posted from two threads, and the control path runs between them. Every DTO
//! completes exactly once, with its own cookie, in post order on its
//! Endpoint.
//!
//! On the software HCA unless `UDAT_THREADS_IA` names other `ia_params`:
//! `cargo xtask test` runs these tests on soft-RoCE too, with `verbs rxe0`
//! (one at a time: both listen on one connection qualifier).

mod common;

use std::collections::BTreeSet;
use std::ffi::CStr;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::{ok, ty, Rig, SOFTHCA};
use udat_capi::sys::*;

const CONN_QUAL: u64 = 7001;
const BYTES: u32 = 64;
/// Requests an Endpoint has in flight at most (the default
/// `max_request_dtos` is larger).
const WINDOW: usize = 8;

/// A provider with a PZ, a connect EVD and a listener on `CONN_QUAL`.
struct Provider {
    rig: Rig,
    pz: DAT_PZ_HANDLE,
    conn_evd: DAT_EVD_HANDLE,
    cr_evd: DAT_EVD_HANDLE,
}

// SAFETY: the handles name objects of a provider registered thread-safe;
// its entry points may be called from any thread.
unsafe impl Sync for Provider {}

/// A connected pair of Endpoints with an EVD of their own, and a buffer
/// registered for both.
struct Pair {
    ep: DAT_EP_HANDLE,
    evd: DAT_EVD_HANDLE,
    /// The EP connected to `ep`, with an EVD of its own.
    peer: DAT_EP_HANDLE,
    peer_evd: DAT_EVD_HANDLE,
    /// The SRQ the peer receives from, or null.
    srq: DAT_SRQ_HANDLE,
    local: DAT_LMR_TRIPLET,
    remote: DAT_RMR_TRIPLET,
    _buf: Box<[u8; 2 * 4096]>,
}

// SAFETY: as for `Provider`; the buffer is only ever touched by the HCA.
unsafe impl Sync for Pair {}

impl Provider {
    fn open(name: &'static CStr) -> Provider {
        let params = std::env::var("UDAT_THREADS_IA").unwrap_or_else(|_| SOFTHCA.to_string());
        let rig = Rig::new(name, &params);
        let pz = rig.pz();
        let cr_evd = rig.evd(8, DAT_EVD_CR_FLAG);
        let conn_evd = rig.evd(8, DAT_EVD_CONNECTION_FLAG);
        rig.psp(CONN_QUAL, cr_evd);
        Provider { rig, pz, conn_evd, cr_evd }
    }

    fn t(&self) -> &DAT_PROVIDER {
        self.rig.t()
    }

    fn next(&self, evd: DAT_EVD_HANDLE) -> DAT_EVENT {
        self.rig.next(evd)
    }

    fn pair(&self) -> Pair {
        self.pair_with(None)
    }

    /// A pair whose peer receives from `srq`, if there is one.
    fn pair_with(&self, srq: Option<DAT_SRQ_HANDLE>) -> Pair {
        let (t, rig) = (self.t(), &self.rig);
        let mut buf = Box::new([0u8; 2 * 4096]);
        let (_, lmr_context, rmr_context) = self.lmr(&mut buf[..]);
        let evd = rig.evd(64, DAT_EVD_DTO_FLAG);
        let a = rig.ep(self.pz, evd, evd, self.conn_evd);
        let peer_evd = rig.evd(64, DAT_EVD_DTO_FLAG);
        let b = match srq {
            None => rig.ep(self.pz, peer_evd, peer_evd, self.conn_evd),
            Some(srq) => {
                // `a`'s attributes, which are the defaults.
                let (mut param, mut b) = (DAT_EP_PARAM::default(), ptr::null_mut());
                let (ia, pz, conn) = (rig.ia, self.pz, self.conn_evd);
                // SAFETY: live handles of this provider and valid out-pointers.
                unsafe {
                    // `DAT_EP_FIELD_ALL`, a macro of <dat2/dat.h>.
                    ok(t.ep_query_func.unwrap()(a, 0x7fff_ffff, &mut param), "dat_ep_query");
                    let attr = &param.ep_attr;
                    let create = t.ep_create_with_srq_func.unwrap();
                    ok(create(ia, pz, peer_evd, peer_evd, conn, srq, attr, &mut b), "ep b with the SRQ");
                }
                b
            }
        };
        rig.connect(a, b, CONN_QUAL, self.cr_evd);
        self.next(self.conn_evd);
        self.next(self.conn_evd);
        let base = buf.as_ptr() as u64;
        Pair {
            ep: a,
            evd,
            peer: b,
            peer_evd,
            srq: srq.unwrap_or(ptr::null_mut()),
            local: DAT_LMR_TRIPLET { lmr_context, virtual_address: base, segment_length: BYTES },
            remote: DAT_RMR_TRIPLET { rmr_context, virtual_address: base + 4096, segment_length: BYTES },
            _buf: buf,
        }
    }

    /// `buf` registered in the PZ with every privilege, the IB
    /// extension's remote atomics too: the LMR and its two contexts.
    fn lmr(&self, buf: &mut [u8]) -> (DAT_LMR_HANDLE, DAT_LMR_CONTEXT, DAT_RMR_CONTEXT) {
        self.rig.lmr(self.pz, buf, DAT_MEM_PRIV_ALL_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC)
    }

    /// An RDMA write of `pair` with `cookie`; `DAT_INSUFFICIENT_RESOURCES`
    /// when the EP has its fill of requests.
    fn write(&self, pair: &Pair, cookie: u64) -> DAT_RETURN {
        self.rig.write(pair.ep, pair.local, &pair.remote, cookie)
    }

    /// A send of `pair`'s first 64 bytes with `cookie`.
    fn send(&self, pair: &Pair, cookie: u64) -> DAT_RETURN {
        let mut local = pair.local;
        // SAFETY: live handles, a triplet inside a live LMR.
        unsafe {
            self.t().ep_post_send_func.unwrap()(
                pair.ep,
                1,
                &mut local,
                DAT_DTO_COOKIE { as_64: cookie },
                DAT_COMPLETION_DEFAULT_FLAG,
            )
        }
    }

    /// A receive on `pair`'s peer into the buffer's second half.
    fn recv(&self, pair: &Pair, cookie: u64) -> DAT_RETURN {
        let mut local = DAT_LMR_TRIPLET { virtual_address: pair.remote.virtual_address, ..pair.local };
        // SAFETY: live handles, a triplet inside a live LMR.
        unsafe {
            self.t().ep_post_recv_func.unwrap()(
                pair.peer,
                1,
                &mut local,
                DAT_DTO_COOKIE { as_64: cookie },
                DAT_COMPLETION_DEFAULT_FLAG,
            )
        }
    }

    /// A receive on `pair`'s SRQ into the buffer's second half.
    fn srq_recv(&self, pair: &Pair, cookie: u64) -> DAT_RETURN {
        let mut local = DAT_LMR_TRIPLET { virtual_address: pair.remote.virtual_address, ..pair.local };
        // SAFETY: a live SRQ, a triplet inside a live LMR.
        unsafe { self.t().srq_post_recv_func.unwrap()(pair.srq, 1, &mut local, DAT_DTO_COOKIE { as_64: cookie }) }
    }

    /// The cookie of the next completion on `evd` of `ep`, if one is there.
    fn reap_of(&self, evd: DAT_EVD_HANDLE, ep: DAT_EP_HANDLE) -> Option<u64> {
        let mut event = DAT_EVENT::default();
        // SAFETY: a live EVD and a valid out-pointer.
        match unsafe { self.t().evd_dequeue_func.unwrap()(evd, &mut event) } {
            DAT_SUCCESS => {
                assert_eq!(event.event_number, DAT_DTO_COMPLETION_EVENT);
                // SAFETY: a DTO completion event's data.
                let dto = unsafe { event.event_data.dto_completion_event_data };
                assert_eq!(dto.status, DAT_DTO_SUCCESS);
                assert_eq!(dto.ep_handle, ep, "the event names its EP");
                assert_eq!(dto.transfered_length, BYTES);
                // SAFETY: the cookie is 64 bits.
                Some(unsafe { dto.user_cookie.as_64 })
            }
            ret => {
                assert_eq!(ty(ret), DAT_QUEUE_EMPTY, "dat_evd_dequeue: {ret:#x}");
                None
            }
        }
    }

    /// The cookie of the next completion on `pair`'s EVD, if one is there.
    fn reap(&self, pair: &Pair) -> Option<u64> {
        self.reap_of(pair.evd, pair.ep)
    }
}

/// The control path's calls, over and over, until `stop`: objects made
/// and freed, queries, while other threads post and reap.
fn churn(p: &Provider, stop: &AtomicBool) -> u64 {
    let (t, rig) = (p.t(), &p.rig);
    let mut rounds = 0;
    let mut buf = vec![0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        let (lmr, _, _) = p.lmr(&mut buf);
        let evd = rig.evd(8, DAT_EVD_DTO_FLAG);
        let ep = rig.ep(p.pz, evd, evd, p.conn_evd);
        rig.attr();
        // SAFETY: live handles of this provider.
        unsafe {
            ok(t.lmr_free_func.unwrap()(lmr), "churn LMR free");
            ok(t.ep_free_func.unwrap()(ep), "churn EP free");
            ok(t.evd_free_func.unwrap()(evd), "churn EVD free");
        }
        rounds += 1;
    }
    rounds
}

/// Post `n` writes on `pair` with cookies `0..n`, never more than
/// `WINDOW` in flight, reaping as it goes; every cookie comes back once,
/// in order.
fn post_and_reap(p: &Provider, pair: &Pair, n: u64) {
    let (mut posted, mut reaped) = (0u64, 0u64);
    while reaped < n {
        while posted < n && posted - reaped < WINDOW as u64 {
            ok(p.write(pair, posted), "dat_ep_post_rdma_write");
            posted += 1;
        }
        if let Some(cookie) = p.reap(pair) {
            assert_eq!(cookie, reaped, "completions come in post order");
            reaped += 1;
        }
    }
}

#[test]
fn posts_and_dequeues_on_separate_endpoints_run_from_many_threads_beside_the_control_path() {
    let p = Provider::open(c"threads-separate");
    let pairs: Vec<Pair> = (0..3).map(|_| p.pair()).collect();
    let stop = AtomicBool::new(false);
    let churned = std::thread::scope(|s| {
        let churn = s.spawn(|| churn(&p, &stop));
        let workers: Vec<_> = pairs.iter().map(|pair| s.spawn(|| post_and_reap(&p, pair, 5_000))).collect();
        for w in workers {
            w.join().expect("a worker");
        }
        stop.store(true, Ordering::Relaxed);
        churn.join().expect("the control path")
    });
    assert!(churned > 0, "the control path ran while the workers did");
    // Each pair's EP is idle again and its EVD empty.
    for pair in &pairs {
        assert_eq!(p.reap(pair), None);
    }
}

#[test]
fn two_threads_post_on_one_endpoint_while_a_third_reaps_it() {
    let p = Provider::open(c"threads-one-ep");
    let pair = p.pair();
    const EACH: u64 = 4_000;
    let done = AtomicBool::new(false);
    let seen = std::thread::scope(|s| {
        let reaper = s.spawn(|| {
            let mut seen = BTreeSet::new();
            while seen.len() < 2 * EACH as usize {
                match p.reap(&pair) {
                    Some(cookie) => assert!(seen.insert(cookie), "cookie {cookie:#x} completed twice"),
                    None if done.load(Ordering::Relaxed) && seen.len() < 2 * EACH as usize => std::thread::yield_now(),
                    None => {}
                }
            }
            seen
        });
        let posters: Vec<_> = [0u64, 1 << 32]
            .into_iter()
            .map(|base| {
                let (p, pair) = (&p, &pair);
                s.spawn(move || {
                    let mut i = 0;
                    while i < EACH {
                        match p.write(pair, base + i) {
                            DAT_SUCCESS => i += 1,
                            // The EP has its fill of requests: the reaper
                            // makes room.
                            ret if ty(ret) == DAT_INSUFFICIENT_RESOURCES => std::thread::yield_now(),
                            ret => panic!("dat_ep_post_rdma_write: {ret:#x}"),
                        }
                    }
                })
            })
            .collect();
        for poster in posters {
            poster.join().expect("a poster");
        }
        done.store(true, Ordering::Relaxed);
        reaper.join().expect("the reaper")
    });
    let expected: BTreeSet<u64> = (0..EACH).chain((0..EACH).map(|i| (1 << 32) + i)).collect();
    assert_eq!(seen, expected, "every post completed once");
}

#[test]
fn one_thread_receives_while_another_sends_to_it() {
    let p = Provider::open(c"threads-send-recv");
    let pair = p.pair();
    const N: u64 = 3_000;
    let posted = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        // The receiver keeps up to WINDOW receives posted and reaps them.
        s.spawn(|| {
            let (mut next, mut reaped) = (0u64, 0u64);
            while reaped < N {
                while next < N && next - reaped < WINDOW as u64 {
                    ok(p.recv(&pair, next), "dat_ep_post_recv");
                    next += 1;
                    posted.store(next, Ordering::Release);
                }
                if let Some(cookie) = p.reap_of(pair.peer_evd, pair.peer) {
                    assert_eq!(cookie, reaped, "receives complete in post order");
                    reaped += 1;
                }
            }
        });
        // The sender sends only into receives already posted.
        s.spawn(|| {
            let (mut sent, mut reaped) = (0u64, 0u64);
            while reaped < N {
                while sent < posted.load(Ordering::Acquire) && sent - reaped < WINDOW as u64 {
                    ok(p.send(&pair, sent), "dat_ep_post_send");
                    sent += 1;
                }
                if let Some(cookie) = p.reap_of(pair.evd, pair.ep) {
                    assert_eq!(cookie, reaped, "sends complete in post order");
                    reaped += 1;
                }
            }
        });
    });
}

/// Two threads post bursts of receives to one SRQ at once, then a third
/// sends into them; every receive completes once, with its own cookie,
/// and the SRQ counts each back. (With the SRQ's lock taken out, two
/// posts take one WQE and a receive is lost.)
#[test]
fn two_threads_post_to_one_srq_while_a_third_sends_into_it() {
    let p = Provider::open(c"threads-srq");
    let t = p.t();
    const POSTERS: u64 = 2;
    const BURST: u64 = 256;
    const ROUNDS: u64 = 8;
    const N: u64 = POSTERS * BURST * ROUNDS;
    let mut srq = ptr::null_mut();
    let mut attr = DAT_SRQ_ATTR { max_recv_dtos: (POSTERS * BURST) as i32, max_recv_iov: 1, low_watermark: 0 };
    // SAFETY: live handles of this provider and valid out-pointers.
    unsafe { ok(t.srq_create_func.unwrap()(p.rig.ia, p.pz, &mut attr, &mut srq), "dat_srq_create") };
    let pair = p.pair_with(Some(srq));
    // Each round: both posters post a burst, then the sender fills it. A
    // thread that waits longer than `STALL` for another gives up, and so
    // do the others.
    const STALL: std::time::Duration = std::time::Duration::from_secs(20);
    let (round_open, bursts_posted, abort) = (AtomicU64::new(0), AtomicU64::new(0), AtomicBool::new(false));
    let wait_for = |what: &dyn Fn() -> bool| {
        let since = std::time::Instant::now();
        while !what() {
            if abort.load(Ordering::Acquire) || since.elapsed() > STALL {
                abort.store(true, Ordering::Release);
                return false;
            }
            std::thread::yield_now();
        }
        true
    };
    let received = std::thread::scope(|s| {
        for i in 0..POSTERS {
            let (round_open, bursts_posted, pair, p, wait_for) = (&round_open, &bursts_posted, &pair, &p, &wait_for);
            s.spawn(move || {
                for round in 0..ROUNDS {
                    if !wait_for(&|| round_open.load(Ordering::Acquire) > round) {
                        return;
                    }
                    for k in 0..BURST {
                        ok(p.srq_recv(pair, (round * BURST + k) * POSTERS + i), "dat_srq_post_recv");
                    }
                    bursts_posted.fetch_add(1, Ordering::Release);
                }
            });
        }
        let (mut sent, mut sends_done, mut received) = (0u64, 0u64, BTreeSet::new());
        for round in 1..=ROUNDS {
            round_open.store(round, Ordering::Release);
            if !wait_for(&|| bursts_posted.load(Ordering::Acquire) == round * POSTERS) {
                break;
            }
            let goal = round * POSTERS * BURST;
            let mut progress = std::time::Instant::now();
            while (received.len() as u64) < goal || sends_done < goal {
                while sent < goal && sent - sends_done < WINDOW as u64 {
                    ok(p.send(&pair, sent), "dat_ep_post_send");
                    sent += 1;
                }
                if let Some(cookie) = p.reap(&pair) {
                    assert_eq!(cookie, sends_done, "sends complete in post order");
                    sends_done += 1;
                    progress = std::time::Instant::now();
                }
                if let Some(cookie) = p.reap_of(pair.peer_evd, pair.peer) {
                    assert!(received.insert(cookie), "receive {cookie} completed twice");
                    progress = std::time::Instant::now();
                }
                if progress.elapsed() > STALL {
                    abort.store(true, Ordering::Release);
                    break;
                }
            }
            if abort.load(Ordering::Acquire) {
                break;
            }
        }
        received
    });
    assert_eq!(received, (0..N).collect::<BTreeSet<_>>(), "every receive posted completes");
    let mut param = DAT_SRQ_PARAM::default();
    // SAFETY: a live SRQ and a valid out-pointer.
    unsafe { ok(t.srq_query_func.unwrap()(srq, DAT_SRQ_FIELD_ALL, &mut param), "dat_srq_query") };
    assert_eq!(param.outstanding_dto_count, 0, "the SRQ counts every receive back");
}

/// An atomic on `remote` through the IB extension's post on `pair`'s EP
/// (`op`, with `compare_add` and `swap` as `dat_ib_post_*` take them),
/// the old value landing in the first 8 bytes of its buffer; waits for
/// the completion and returns the old value.
fn atomic(p: &Provider, pair: &Pair, remote: &DAT_RMR_TRIPLET, cookie: u64, op: DAT_IB_OP, operands: [u64; 2]) -> u64 {
    let local = DAT_LMR_TRIPLET { segment_length: 8, ..pair.local };
    let post = udat_ext_post {
        op,
        segments: 1,
        local: &local,
        cookie: DAT_DTO_COOKIE { as_64: cookie },
        remote: &DAT_RMR_TRIPLET { segment_length: 8, ..*remote },
        compare_add: operands[0],
        swap: operands[1],
        immediate: 0,
        flags: DAT_COMPLETION_DEFAULT_FLAG,
        ah: std::ptr::null(),
        cm: DAT_CONTEXT { as_64: 0 },
    };
    // SAFETY: every udat provider's table heads a `udat_provider_head`,
    // whose `post` takes what `dat_extension_op` would pass (`c/ext.c`).
    let ext = unsafe { (*p.rig.table.cast::<udat_provider_head>()).post.unwrap() };
    // SAFETY: a live EP, triplets inside live LMRs.
    ok(unsafe { ext(pair.ep, &post) }, "dat_ib_post_* (an atomic)");
    let event = p.next(pair.evd);
    assert_eq!(event.event_number, DAT_IB_DTO_EVENT as DAT_EVENT_NUMBER, "an IB extension completion");
    // SAFETY: a DTO completion event's data.
    let dto = unsafe { event.event_data.dto_completion_event_data };
    assert_eq!(dto.status, DAT_DTO_SUCCESS);
    // SAFETY: the cookie is 64 bits.
    assert_eq!(unsafe { dto.user_cookie.as_64 }, cookie);
    // SAFETY: the HCA wrote the old value there before the completion.
    unsafe { ptr::read_volatile(pair.local.virtual_address as *const u64) }
}

/// The IB extension's posts are posts like the others: two threads on
/// two EPs fetch-and-add on one counter, and every old value comes back
/// once; then a compare-and-swap takes the counter only when it holds
/// the value compared.
#[test]
fn two_threads_fetch_and_add_on_one_counter_through_the_extension() {
    let p = Provider::open(c"threads-atomics");
    let (a, b) = (p.pair(), p.pair());
    const N: u64 = 1_000;
    let counter = a.remote;
    // SAFETY: the counter's 8 bytes are `a`'s buffer, which the HCA alone
    // touches until the threads are done.
    unsafe { ptr::write_volatile(counter.virtual_address as *mut u64, 0) };
    let olds = std::thread::scope(|s| {
        let threads: Vec<_> = [&a, &b]
            .into_iter()
            .map(|pair| {
                let p = &p;
                s.spawn(move || {
                    (0..N).map(|k| atomic(p, pair, &counter, k, DAT_IB_FETCH_AND_ADD_OP, [1, 0])).collect::<Vec<_>>()
                })
            })
            .collect();
        threads.into_iter().flat_map(|t| t.join().unwrap()).collect::<BTreeSet<_>>()
    });
    assert_eq!(olds, (0..2 * N).collect::<BTreeSet<_>>(), "each old value once");
    // SAFETY: as above; both threads are done.
    let now = || unsafe { ptr::read_volatile(counter.virtual_address as *const u64) };
    assert_eq!(now(), 2 * N);
    assert_eq!(atomic(&p, &b, &counter, N, DAT_IB_CMP_AND_SWAP_OP, [2 * N + 1, 7]), 2 * N, "the old value");
    assert_eq!(now(), 2 * N, "compared unequal: left alone");
    assert_eq!(atomic(&p, &a, &counter, N, DAT_IB_CMP_AND_SWAP_OP, [2 * N, 7]), 2 * N, "the old value");
    assert_eq!(now(), 7, "compared equal: swapped");
}

/// A failure is not the shared dequeue's to settle: it goes to the
/// exclusive path, which reports it with its status and breaks the
/// connection (dat_ep_post_rdma_write(3DAT), dat_lmr_free(3DAT)); what
/// was posted after it is flushed, in order, each once.
#[test]
fn a_failed_write_on_a_shared_provider_reports_its_error_and_breaks_the_connection() {
    let p = Provider::open(c"threads-failure");
    let pair = p.pair();
    let mut bad = pair.remote;
    bad.rmr_context ^= 0x00ff_ff00;
    let mut local = pair.local;
    // SAFETY: live handles, a triplet inside a live LMR; the remote
    // context names no region, which the HCA refuses.
    let ret = unsafe {
        p.t().ep_post_rdma_write_func.unwrap()(
            pair.ep,
            1,
            &mut local,
            DAT_DTO_COOKIE { as_64: 0 },
            &bad,
            DAT_COMPLETION_DEFAULT_FLAG,
        )
    };
    ok(ret, "the bad write is posted");
    ok(p.write(&pair, 1), "a write behind it");
    let mut statuses = Vec::new();
    for _ in 0..10_000_000 {
        let mut event = DAT_EVENT::default();
        // SAFETY: a live EVD and a valid out-pointer.
        if unsafe { p.t().evd_dequeue_func.unwrap()(pair.evd, &mut event) } == DAT_SUCCESS {
            // SAFETY: a DTO completion event's data.
            let dto = unsafe { event.event_data.dto_completion_event_data };
            // SAFETY: the cookie is 64 bits.
            statuses.push((unsafe { dto.user_cookie.as_64 }, dto.status));
            if statuses.len() == 2 {
                break;
            }
        }
        std::thread::yield_now();
    }
    assert_eq!(statuses, [(0, DAT_DTO_ERR_REMOTE_ACCESS), (1, DAT_DTO_ERR_FLUSHED)]);
    let broken = p.next(p.conn_evd);
    assert_eq!(broken.event_number, DAT_CONNECTION_EVENT_BROKEN);
}

/// dat_ep_post_recv(3DAT), in Disconnected: "the posted Recv is
/// immediately flushed", and dat_ep_post_send(3DAT) likewise, on a shared
/// provider too, whose posts take the EP's lock and never the EVD's: once
/// both sides are Disconnected, a receive posted on either side and a
/// send complete flushed within two seconds, each once.
#[test]
fn dtos_posted_in_disconnected_on_a_shared_provider_complete_flushed_at_once() {
    let p = Provider::open(c"threads-disconnected");
    let pair = p.pair();
    // SAFETY: a live, connected EP.
    ok(unsafe { p.t().ep_disconnect_func.unwrap()(pair.ep, DAT_CLOSE_GRACEFUL_FLAG) }, "dat_ep_disconnect");
    for _ in 0..2 {
        assert_eq!(p.next(p.conn_evd).event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
    }
    let mut local = DAT_LMR_TRIPLET { virtual_address: pair.remote.virtual_address, ..pair.local };
    let (cookie, flags) = (DAT_DTO_COOKIE { as_64: 1 }, DAT_COMPLETION_DEFAULT_FLAG);
    // SAFETY: a live EP and a triplet inside a live LMR.
    let ret = unsafe { p.t().ep_post_recv_func.unwrap()(pair.ep, 1, &mut local, cookie, flags) };
    ok(ret, "a receive on the active side");
    ok(p.send(&pair, 2), "a send on the active side");
    ok(p.recv(&pair, 3), "a receive on the passive side");
    let flushed = |evd: DAT_EVD_HANDLE, n: usize| {
        let start = std::time::Instant::now();
        let mut seen = Vec::new();
        while seen.len() < n {
            let mut event = DAT_EVENT::default();
            // SAFETY: a live EVD and a valid out-pointer.
            match unsafe { p.t().evd_dequeue_func.unwrap()(evd, &mut event) } {
                DAT_SUCCESS => {
                    // SAFETY: a DTO completion event's data.
                    let dto = unsafe { event.event_data.dto_completion_event_data };
                    // SAFETY: a cookie is 64 bits, whichever member was set.
                    seen.push((unsafe { dto.user_cookie.as_64 }, dto.status));
                }
                ret => assert_eq!(ty(ret), DAT_QUEUE_EMPTY, "dat_evd_dequeue: {ret:#x}"),
            }
            let waited = start.elapsed();
            assert!(waited < std::time::Duration::from_secs(2), "after {waited:?} only {seen:?} of {n} completed");
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut event = DAT_EVENT::default();
        // SAFETY: a live EVD and a valid out-pointer.
        let again = unsafe { p.t().evd_dequeue_func.unwrap()(evd, &mut event) };
        assert_eq!(ty(again), DAT_QUEUE_EMPTY, "a DTO completed twice");
        seen.sort_unstable();
        seen
    };
    assert_eq!(flushed(pair.evd, 2), [(1, DAT_DTO_ERR_FLUSHED), (2, DAT_DTO_ERR_FLUSHED)]);
    assert_eq!(flushed(pair.peer_evd, 1), [(3, DAT_DTO_ERR_FLUSHED)]);
}
