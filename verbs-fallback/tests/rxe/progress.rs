//! Connections progress while the consumer makes no DAT call (it
//! sleeps, or blocks in a barrier as MPI's start-up does): the request
//! leaves, the peer's accept or reject comes back, a connect times out,
//! and the finished event waits for the consumer's next DAT call. Each
//! requester here makes no DAT call between its `dat_ep_connect` and the
//! moment its IA's connection-event descriptor (the second of its wait
//! descriptors) is readable; the peer is another provider, on a thread of
//! its own.

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use udat_core::types::*;
use udat_core::*;
use udat_testkit::suite::{Rig, PATIENCE, PORT};

use super::{device, open_fds, resident_kib, Rxe};

/// What the passive side does with the request it receives.
#[derive(Clone, Copy)]
enum Answer {
    Accept,
    Reject,
    /// Take nothing: the request is never looked at.
    Ignore,
}

/// A provider on a thread of its own, listening on `qual`. It sends its
/// IA's address once it listens; then, unless it ignores requests, the
/// private data of the request it took and answered, and (on accept) once
/// it saw the connection established; then it does what its test asked of
/// it on an accepted connection. It lives until `finish` says so.
struct Peer {
    address: IaAddress,
    heard: mpsc::Receiver<Vec<u8>>,
    finish: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Peer {
    fn start(qual: u64, answer: Answer) -> Peer {
        Peer::start_then(qual, answer, |_, _| {})
    }

    /// A peer that, once it answered, runs `then` on its provider and its
    /// side of the connection.
    fn start_then(qual: u64, answer: Answer, then: impl FnOnce(&mut Rig<Rxe>, EpHandle) + Send + 'static) -> Peer {
        let (address_tx, address_rx) = mpsc::channel();
        let (heard_tx, heard) = mpsc::channel();
        let (finish, finish_rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let mut rig = Rig::<Rxe>::new();
            let server = rig.side();
            let psp = rig.p.psp_create(rig.ia, qual, rig.cr_evd, PspFlags::Consumer).unwrap();
            address_tx.send(rig.address()).unwrap();
            if let Answer::Accept | Answer::Reject = answer {
                let cr = match rig.expect(rig.cr_evd, EventNumber::ConnectionRequest).data {
                    EventData::CrArrival { cr, .. } => cr,
                    other => panic!("{other:?}"),
                };
                let data = rig.p.cr_private_data(cr).unwrap().to_vec();
                if let Answer::Accept = answer {
                    rig.p.cr_accept(cr, server.ep, b"welcome").unwrap();
                    rig.expect(server.conn, EventNumber::ConnectionEstablished);
                } else {
                    rig.p.cr_reject(cr, b"not now").unwrap();
                }
                heard_tx.send(data).unwrap();
            }
            then(&mut rig, server.ep);
            let _ = finish_rx.recv_timeout(PATIENCE * 3);
            rig.p.ep_disconnect(server.ep, CloseFlags::Abrupt).ok();
            rig.p.psp_free(psp).unwrap();
        });
        match address_rx.recv_timeout(PATIENCE) {
            Ok(address) => Peer { address, heard, finish, thread },
            Err(_) => panic!("the peer never listened: {:?}", thread.join().map_err(|e| e.downcast::<String>())),
        }
    }

    /// What the peer heard, within PATIENCE; its panic if it failed.
    fn heard(self) -> (Vec<u8>, Peer) {
        match self.heard.recv_timeout(PATIENCE * 2) {
            Ok(data) => (data, self),
            Err(_) => {
                let _ = self.finish.send(());
                panic!(
                    "the peer got no request while the requester made no DAT call: {:?}",
                    self.thread.join().map_err(|e| e.downcast::<String>())
                );
            }
        }
    }

    fn end(self) {
        let _ = self.finish.send(());
        self.thread.join().expect("the peer");
    }
}

/// Private data as a passive side sees it, less the zeros the transport
/// pads it with.
fn unpadded(data: &[u8]) -> &[u8] {
    let end = data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    &data[..end]
}

/// The descriptor of `rig`'s IA that is readable while its connection
/// manager holds finished events.
fn cm_fd(rig: &Rig<Rxe>) -> i32 {
    rig.p.wait_fds(rig.ia).unwrap().0[1]
}

/// Sleep, with no DAT call, until `fd` is readable; how long it took.
fn await_readable(fd: i32) -> Duration {
    let start = Instant::now();
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd of ours.
    let rc = unsafe { libc::poll(&mut pfd, 1, PATIENCE.as_millis() as i32) };
    assert_eq!(rc, 1, "no connection event within {PATIENCE:?} while the consumer made no DAT call");
    start.elapsed()
}

/// The requester connects and sleeps outside DAT; its peer sees the
/// request, accepts and sees DAT_CONNECTION_EVENT_ESTABLISHED; then the
/// requester wakes and its own ESTABLISHED, with the peer's private data,
/// is already there for a dequeue that does not wait.
#[test]
fn a_requester_that_sleeps_outside_dat_is_accepted_and_then_finds_its_established_event() {
    let qual = PORT + 60;
    let peer = Peer::start(qual, Answer::Accept);
    let mut rig = Rig::<Rxe>::new();
    let client = rig.side();
    let fd = cm_fd(&rig);
    let c = &mut rig.p;
    c.ep_connect(client.ep, &peer.address, qual, 10_000_000, b"hello", Qos::BEST_EFFORT, ConnectFlags::DEFAULT)
        .unwrap();
    // No DAT call from here until the peer saw the connection established.
    let (seen, peer) = peer.heard();
    assert_eq!(unpadded(&seen), b"hello");
    await_readable(fd);
    let e = rig.p.evd_dequeue(client.conn).expect("the requester's own ESTABLISHED, waiting for it");
    assert_eq!(e.number, EventNumber::ConnectionEstablished, "{e:?}");
    assert_eq!(unpadded(rig.p.ep_private_data(client.ep).unwrap()), b"welcome");
    assert_eq!(rig.state(client.ep), EpState::Connected);
    rig.p.ep_disconnect(client.ep, CloseFlags::Abrupt).unwrap();
    peer.end();
}

/// The peer rejects a request whose requester sleeps outside DAT: the
/// rejection is there, with the peer's private data, when it wakes.
#[test]
fn a_reject_completes_while_the_requester_makes_no_dat_call() {
    let qual = PORT + 61;
    let peer = Peer::start(qual, Answer::Reject);
    let mut rig = Rig::<Rxe>::new();
    let client = rig.side();
    let fd = cm_fd(&rig);
    let c = &mut rig.p;
    c.ep_connect(client.ep, &peer.address, qual, 10_000_000, b"may I", Qos::BEST_EFFORT, ConnectFlags::DEFAULT)
        .unwrap();
    let (seen, peer) = peer.heard();
    assert_eq!(unpadded(&seen), b"may I");
    await_readable(fd);
    let e = rig.p.evd_dequeue(client.conn).expect("the rejection, waiting for the requester");
    assert_eq!(e.number, EventNumber::ConnectionPeerRejected, "{e:?}");
    assert_eq!(rig.state(client.ep), EpState::Disconnected);
    peer.end();
}

/// A connect to a peer that never answers, with a 300 ms timeout, and a
/// requester that sleeps outside DAT: the connect gives up on its own,
/// not before its time, and DAT_CONNECTION_EVENT_TIMED_OUT waits for it.
#[test]
fn a_connect_times_out_while_the_requester_makes_no_dat_call() {
    const TIMEOUT: Duration = Duration::from_millis(300);
    let qual = PORT + 62;
    let peer = Peer::start(qual, Answer::Ignore);
    let mut rig = Rig::<Rxe>::new();
    let client = rig.side();
    let fd = cm_fd(&rig);
    let us = TIMEOUT.as_micros() as u32;
    let start = Instant::now();
    let c = &mut rig.p;
    c.ep_connect(client.ep, &peer.address, qual, us, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT).unwrap();
    await_readable(fd);
    let waited = start.elapsed();
    assert!(waited >= TIMEOUT, "the connect gave up after {waited:?}, before its {TIMEOUT:?}");
    let e = rig.p.evd_dequeue(client.conn).expect("the timeout, waiting for the requester");
    assert_eq!(e.number, EventNumber::ConnectionTimedOut, "{e:?}");
    assert_eq!(rig.state(client.ep), EpState::Disconnected);
    peer.end();
}

/// IAs closed abruptly with connects in flight, at every stage (resolving,
/// the request on the wire, a request waiting for a core that never takes
/// it), and nothing dequeued: each close returns, and after many cycles
/// the process has the threads, descriptors and memory it had (a cycle
/// that kept a connection manager's thread, its descriptors, an rdma_cm
/// id or the channel would show).
#[test]
fn an_ia_closed_with_connects_in_flight_leaks_nothing_and_does_not_hang() {
    const WARM_UP: u64 = 2;
    const CYCLES: u64 = 60;
    const RSS_SLACK_KIB: u64 = 512;
    let mut rig = Rig::<Rxe>::new();
    for cycle in 0..WARM_UP {
        close_with_connects_in_flight(&mut rig, cycle);
    }
    let (tasks, fds, rss) = (threads(), open_fds(), resident_kib());
    for cycle in 0..CYCLES {
        close_with_connects_in_flight(&mut rig, cycle);
    }
    // A thread joined may still be listed for a moment, until the kernel
    // has reaped it.
    let start = Instant::now();
    while threads() != tasks && start.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(threads(), tasks, "threads after {CYCLES} more cycles");
    assert_eq!(open_fds(), fds, "descriptors after {CYCLES} more cycles");
    let grown = resident_kib().saturating_sub(rss);
    assert!(grown <= RSS_SLACK_KIB, "the resident set grew by {grown} KiB over {CYCLES} cycles");
}

/// An IA with a listener, one EP connecting to it and one to a qualifier
/// nobody listens on, closed abruptly after `cycle % 4` × 5 ms.
fn close_with_connects_in_flight(rig: &mut Rig<Rxe>, cycle: u64) {
    let (ia, _) = rig.p.ia_open(device().as_bytes(), AsyncEvd::Create { min_qlen: 8 }).unwrap();
    let address = rig.p.ia_query(ia).unwrap().1.ia_address;
    let pz = rig.p.pz_create(ia).unwrap();
    let dto = rig.p.evd_create(ia, 16, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let conn = rig.p.evd_create(ia, 4, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
    let cr_evd = rig.p.evd_create(ia, 4, CnoHandle::NULL, EvdFlags::CR).unwrap();
    let qual = PORT + 63;
    rig.p.psp_create(ia, qual, cr_evd, PspFlags::Consumer).unwrap();
    for to in [qual, PORT + 64] {
        let ep = rig.p.ep_create(ia, pz, dto, dto, conn, None).unwrap();
        rig.p.ep_connect(ep, &address, to, 10_000_000, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT).unwrap();
    }
    std::thread::sleep(Duration::from_millis(5 * (cycle % 4)));
    let start = Instant::now();
    rig.p.ia_close(ia, CloseFlags::Abrupt).unwrap();
    assert!(start.elapsed() < PATIENCE, "dat_ia_close took {:?}", start.elapsed());
}

/// This process's threads (proc(5), /proc/self/task).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").expect("/proc/self/task").count()
}

/// The connection manager's thread also reads the device's errors, and a
/// consumer asleep in `dat_evd_wait` with no timeout on its async EVD
/// hears of them: the receive EVD (qlen 1) of an EP with many receives
/// posted overruns when a peer, on a thread of its own, sends into them
/// after the consumer fell asleep. The wait returns
/// DAT_ASYNC_ERROR_EVD_OVERFLOW naming that EVD, whichever woke it first:
/// the CQ's notification (every CQ of the IA is armed for a wait), after
/// which the overrun may not yet have been read, or the IA's device-error
/// flag, which alone can wake it then. The peer sends one at a time,
/// `APART` apart, so that the waiter wakes for each and looks at the
/// CQ before the next comes: what it looks at stays the EVD's to dequeue,
/// and still the CQ overruns (a wait that took every completion it saw
/// into a store of its own left the device's CQ empty, and the overflow
/// never came). A wait that never returns fails the test loudly, from a
/// watchdog, after three PATIENCEs.
#[test]
fn a_wait_with_no_timeout_on_the_async_evd_wakes_when_a_cq_overruns() {
    const RECEIVES: u64 = 32;
    /// How long the peer waits after it is told the consumer is about to
    /// sleep before it sends.
    const LATER: Duration = Duration::from_millis(500);
    /// How long the peer waits between two sends.
    const APART: Duration = Duration::from_millis(50);
    let qual = PORT + 65;
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let peer = Peer::start_then(qual, Answer::Accept, move |rig, ep| {
        let src = rig.buf(64, MemPriv::ALL);
        go_rx.recv_timeout(PATIENCE).expect("the consumer never said it sleeps");
        std::thread::sleep(LATER);
        // The consumer's EP breaks as its CQ overruns: the sends that find
        // it broken fail, which is no concern of this test.
        for cookie in 0..RECEIVES {
            if rig.p.ep_post_request(ep, &[src.seg(0, 64)], cookie, RequestOp::Send, CompletionFlags::DEFAULT).is_err()
            {
                break;
            }
            std::thread::sleep(APART);
        }
    });

    let mut rig = Rig::<Rxe>::new();
    let dst = rig.buf(64 * RECEIVES as usize, MemPriv::ALL);
    let recv_evd = rig.p.evd_create(rig.ia, 1, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let request_evd = rig.p.evd_create(rig.ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let conn = rig.p.evd_create(rig.ia, 8, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
    let attr = EpAttr { max_recv_dtos: RECEIVES as u32, ..EpAttr::provider_default(&rig.attr) };
    let ep = rig.p.ep_create(rig.ia, rig.pz, recv_evd, request_evd, conn, Some(&attr)).unwrap();
    let mut posted = 0;
    for cookie in 0..RECEIVES {
        let seg = dst.seg(64 * cookie as usize, 64);
        if rig.p.ep_post_recv(ep, &[seg], cookie, CompletionFlags::DEFAULT).is_ok() {
            posted += 1;
        }
    }
    assert!(posted > 1, "{posted} receives posted to an EP whose receive EVD holds 1");
    rig.p.ep_connect(ep, &peer.address, qual, 10_000_000, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT).unwrap();
    rig.expect(conn, EventNumber::ConnectionEstablished);
    let async_evd = match rig.p.ia_query(rig.ia).unwrap().0 {
        AsyncEvdRef::Handle(evd) => evd,
        other => panic!("{other:?}"),
    };

    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(PATIENCE * 3).is_err() {
            // Written to the descriptor itself: the harness captures
            // `eprintln!` of a test's threads, and would lose it on exit.
            let _ = writeln!(
                std::io::stderr(),
                "a_wait_with_no_timeout_on_the_async_evd_wakes_when_a_cq_overruns: dat_evd_wait \
                 still asleep after {:?}: the overrun did not wake it",
                PATIENCE * 3
            );
            std::process::exit(1);
        }
    });
    go_tx.send(()).unwrap();
    let start = Instant::now();
    let waited = rig.p.evd_wait(async_evd, TIMEOUT_INFINITE, 1);
    done_tx.send(()).unwrap();
    watchdog.join().unwrap();
    let (e, _) = waited.expect("dat_evd_wait on the async EVD");
    assert!(start.elapsed() >= LATER, "woken after {:?}, before the peer sent", start.elapsed());
    assert_eq!(e.number, EventNumber::AsyncEvdOverflow, "{e:?}");
    assert!(matches!(e.data, EventData::AsyncError { handle: Some(h), .. } if h == recv_evd.into()), "{e:?}");
    rig.expect(conn, EventNumber::ConnectionBroken);

    peer.end();
    rig.p.ep_free(ep).unwrap();
    for evd in [recv_evd, request_evd, conn] {
        rig.p.evd_free(evd).unwrap();
    }
}
