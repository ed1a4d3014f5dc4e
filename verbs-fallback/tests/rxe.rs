//! udat over a real RDMA device: soft-RoCE in CI, through
//! `cargo xtask softroce`, which names the device in `UDAT_RDMA_DEVICE`.
//! Without a device every test fails and says so.

use std::time::{Duration, Instant};

use udat_core::types::*;
use udat_core::*;
use udat_testkit::suite::{Fabric, Rig, PATIENCE, PORT};
use udat_verbs::Verbs;

struct Rxe;

impl Fabric for Rxe {
    type B = Verbs;
    const MEMORY_WINDOWS: bool = true;
    /// Soft-RoCE, or whichever device `UDAT_RDMA_DEVICE` names, sizes it.
    const SMALLEST_CQ: Option<usize> = None;

    fn backend() -> Verbs {
        Verbs::new()
    }

    fn device() -> String {
        device()
    }

    /// udat-verbs refuses remote invalidation on soft-RoCE, which does
    /// not invalidate as DAT requires (its IA's `remote_invalidation`).
    fn remote_invalidation() -> bool {
        !device().starts_with("rxe")
    }

    /// UD over `wr.ud` and rdma_cm's RDMA_PS_UDP, on every device.
    fn ud() -> bool {
        true
    }
}

fn device() -> String {
    std::env::var("UDAT_RDMA_DEVICE").unwrap_or_else(|_| {
        panic!("no RDMA device: run these tests through `cargo xtask softroce -- ...` (UDAT_RDMA_DEVICE is unset)")
    })
}

udat_testkit::transport_suite!(Rxe);

#[path = "rxe/progress.rs"]
mod progress;

/// The peer process is killed (`kill -9`) while RDMA writes stream into
/// it: the survivor hears the connection go, every write it posted
/// completes exactly once, and everything frees cleanly.
#[test]
fn a_peer_killed_mid_transfer_leaves_the_survivor_whole() {
    const OUTSTANDING: u64 = 32;
    let peer_port = PORT + 9;
    let exe = std::env::current_exe().unwrap();
    let example = exe.parent().and_then(|d| d.parent()).unwrap().join("examples/rdma_write_pingpong");
    assert!(example.exists(), "{} is missing: build the examples first (`cargo xtask test` does)", example.display());
    let peer = std::process::Command::new(&example)
        .args(["server", "--device", &device(), "--port", &peer_port.to_string(), "--iters", "100000000"])
        .args(["--sizes", "64"])
        .spawn()
        .expect("starting the peer");
    let mut peer = Some(Killed(peer));

    let mut rig = Rig::<Rxe>::new();
    let mut attr = EpAttr::provider_default(&rig.attr);
    attr.max_request_dtos = OUTSTANDING as u32;
    let client = rig.side_with(Some(&attr));
    let local = rig.buf(4096, MemPriv::ALL);
    let mut me = [0u8; 16];
    me[..8].copy_from_slice(&(local.mem.as_ptr() as u64).to_le_bytes());
    me[8..12].copy_from_slice(&local.lmr.rmr_context.unwrap().to_le_bytes());
    me[12..].copy_from_slice(&4096u32.to_le_bytes());
    let address = rig.address();
    let start = Instant::now();
    loop {
        rig.p
            .ep_connect(client.ep, &address, peer_port, 10_000_000, &me, Qos::BEST_EFFORT, ConnectFlags::DEFAULT)
            .unwrap();
        if rig.next(client.conn).number == EventNumber::ConnectionEstablished {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "the peer never listened");
        rig.p.ep_reset(client.ep).unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
    let theirs = rig.p.ep_private_data(client.ep).unwrap();
    let remote = RmrTriplet {
        virtual_address: u64::from_le_bytes(theirs[..8].try_into().unwrap()),
        rmr_context: u32::from_le_bytes(theirs[8..12].try_into().unwrap()),
        segment_length: 4096,
    };

    // Stream zeroed 4 KB writes (the peer waits for a nonzero byte), keep
    // OUTSTANDING in flight, and kill the peer after 200 have landed;
    // go on posting until the connection is seen to go.
    let (mut posted, mut completed) = (0u64, Vec::new());
    let gone = loop {
        while posted - (completed.len() as u64) < OUTSTANDING {
            rig.write(client.ep, local.seg(0, 4096), posted, remote).unwrap();
            posted += 1;
        }
        if let Ok(e) = rig.p.evd_dequeue(client.conn) {
            break e.number;
        }
        match rig.p.evd_dequeue(client.dto) {
            Ok(Event { data: EventData::Dto { cookie, status, .. }, .. }) => completed.push((cookie, status)),
            Ok(other) => panic!("{other:?}"),
            Err(_) => {}
        }
        if completed.len() >= 200 {
            drop(peer.take());
        }
        assert!(start.elapsed() < PATIENCE * 3, "no disconnect after the peer was killed");
    };
    assert!(peer.is_none(), "the connection went before the peer was killed: {gone:?}");
    assert!(matches!(gone, EventNumber::ConnectionDisconnected | EventNumber::ConnectionBroken), "{gone:?}");
    while completed.len() < posted as usize {
        match rig.dto(client.dto) {
            (cookie, status, _, DtoOp::RdmaWrite) => completed.push((cookie, status)),
            other => panic!("{other:?}"),
        }
    }
    assert!(rig.p.evd_dequeue(client.dto).is_err(), "a write completed twice");
    let cookies: Vec<u64> = completed.iter().map(|c| c.0).collect();
    assert_eq!(cookies, (0..posted).collect::<Vec<_>>());
    let failed = completed.iter().filter(|c| c.1 != DtoStatus::Success).count();
    assert!(
        completed.iter().all(|c| matches!(c.1, DtoStatus::Success | DtoStatus::Flushed | DtoStatus::Transport)),
        "{completed:?}"
    );
    println!("{posted} writes: {} succeeded, {failed} flushed or failed", posted as usize - failed);
    rig.p.ep_free(client.ep).unwrap();
    rig.p.lmr_free(local.lmr.lmr).unwrap();
}

/// A child process that is killed (SIGKILL) and reaped when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// dat_ep_reset straight after an abrupt disconnect, with DTOs the device
/// may not have flushed yet: the reset waits for nothing, every DTO
/// posted before it completes exactly once and in post order (flushed if
/// the device had not said so by then), and the EP connects again and
/// moves data with no completion of the old connection on the new one.
#[test]
fn a_reset_straight_after_a_disconnect_loses_no_dto_and_the_ep_connects_again() {
    const SENDS: u64 = 8;
    const RECVS: u64 = 8;
    let mut rig = Rig::<Rxe>::new();
    let mut attr = EpAttr::provider_default(&rig.attr);
    attr.max_request_dtos = SENDS as u32;
    attr.max_recv_dtos = RECVS as u32;
    let (client, server) = (rig.side_with(Some(&attr)), rig.side_with(Some(&attr)));
    rig.connect(client, server, PORT + 11, b"", b"");
    let src = rig.buf(4096, MemPriv::ALL);
    let dst = rig.buf(4096, MemPriv::ALL);
    for cookie in 0..RECVS {
        rig.p.ep_post_recv(client.ep, &[dst.seg(0, 64)], 100 + cookie, CompletionFlags::DEFAULT).unwrap();
    }
    // The server posts no receive: the sends wait for one until flushed.
    for cookie in 0..SENDS {
        rig.p.ep_post_request(client.ep, &[src.seg(0, 64)], cookie, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    }
    rig.p.ep_disconnect(client.ep, CloseFlags::Abrupt).unwrap();
    rig.p.ep_reset(client.ep).unwrap();

    let (mut requests, mut recvs) = (Vec::new(), Vec::new());
    for _ in 0..SENDS + RECVS {
        let (cookie, status, _, op) = rig.dto(client.dto);
        match op {
            DtoOp::Receive => recvs.push((cookie, status)),
            _ => requests.push((cookie, status)),
        }
    }
    let expected: Vec<_> = (0..SENDS).map(|c| (c, DtoStatus::Flushed)).collect();
    assert_eq!(requests, expected, "sends no receive ever met");
    let expected: Vec<_> = (0..RECVS).map(|c| (100 + c, DtoStatus::Flushed)).collect();
    assert_eq!(recvs, expected);
    std::thread::sleep(Duration::from_millis(20));
    assert!(rig.p.evd_dequeue(client.dto).is_err(), "a DTO completed twice");

    rig.expect(server.conn, EventNumber::ConnectionDisconnected);
    rig.p.ep_reset(server.ep).unwrap();
    while rig.p.evd_dequeue(client.conn).is_ok() {}
    rig.connect(client, server, PORT + 12, b"again", b"");
    rig.p.ep_post_recv(server.ep, &[dst.seg(0, 64)], 7, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_request(client.ep, &[src.seg(0, 64)], 77, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(rig.dto(client.dto), (77, DtoStatus::Success, 64, DtoOp::Send));
    assert_eq!(rig.dto(server.dto), (7, DtoStatus::Success, 64, DtoOp::Receive));
    assert!(rig.p.evd_dequeue(client.dto).is_err(), "an old completion reached the new connection");
}

/// On soft-RoCE an RC QP's posts write, and a CQ's polls read, the
/// queues rdma_rxe maps, found in librxe's QP and CQ (`rxe.rs`): a
/// librxe that keeps them elsewhere fails here, rather than quietly
/// posting and polling through librxe. Requests of each kind, inline and
/// gathered, and receives complete as DAT says.
#[test]
fn on_soft_roce_posts_write_the_queues_in_place() {
    assert!(device().starts_with("rxe"), "this test is for soft-RoCE; UDAT_RDMA_DEVICE names {}", device());
    let mut rig = Rig::<Rxe>::new();
    let mut attr = EpAttr::provider_default(&rig.attr);
    attr.max_recv_iov = 2;
    attr.max_request_iov = 2;
    let (client, server) = (rig.side_with(Some(&attr)), rig.side_with(Some(&attr)));
    rig.connect(client, server, PORT + 13, b"", b"");
    let (found, missed) = udat_verbs::rxe_queues_found();
    assert!(found >= 4 && missed == 0, "QPs and CQs in place: {found}, through librxe: {missed}");
    let mut src = rig.buf(8192, MemPriv::ALL);
    let dst = rig.buf(8192, MemPriv::ALL);
    let back = rig.buf(4096, MemPriv::ALL);
    for (i, b) in src.mem.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    rig.p.ep_post_recv(server.ep, &[dst.seg(0, 32), dst.seg(4096, 4064)], 1, CompletionFlags::DEFAULT).unwrap();
    rig.p.ep_post_recv(server.ep, &[dst.seg(0, 64)], 2, CompletionFlags::DEFAULT).unwrap();
    // A send gathered from two segments, then one inline.
    rig.p
        .ep_post_request(client.ep, &[src.seg(0, 32), src.seg(32, 4064)], 10, RequestOp::Send, CompletionFlags::DEFAULT)
        .unwrap();
    assert_eq!(rig.dto(client.dto), (10, DtoStatus::Success, 4096, DtoOp::Send));
    assert_eq!(rig.dto(server.dto), (1, DtoStatus::Success, 4096, DtoOp::Receive));
    assert!(dst.mem[..32] == src.mem[..32] && dst.mem[4096..8160] == src.mem[32..4096], "the send's bytes scattered");
    rig.p.ep_post_request(client.ep, &[src.seg(100, 40)], 11, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(rig.dto(client.dto), (11, DtoStatus::Success, 40, DtoOp::Send));
    assert_eq!(rig.dto(server.dto), (2, DtoStatus::Success, 40, DtoOp::Receive));
    assert_eq!(dst.mem[..40], src.mem[100..140], "the inline send's bytes");
    // An RDMA write, inline, and 4 KiB read back.
    rig.write(client.ep, src.seg(200, 48), 12, dst.remote(0, 48)).unwrap();
    assert_eq!(rig.dto(client.dto), (12, DtoStatus::Success, 48, DtoOp::RdmaWrite));
    assert_eq!(dst.mem[..48], src.mem[200..248], "the inline write's bytes");
    rig.read(client.ep, back.seg(0, 4096), 13, dst.remote(4096, 4096)).unwrap();
    assert_eq!(rig.dto(client.dto), (13, DtoStatus::Success, 4096, DtoOp::RdmaRead));
    assert_eq!(back.mem[..], dst.mem[4096..], "the read's bytes");
}

/// Set in the child that [`a_registration_past_rlimit_memlock_is_insufficient_resources`]
/// starts: the half of the test that runs under the lowered limit.
const MEMLOCK_CHILD: &str = "UDAT_TEST_MEMLOCK_CHILD";
/// The locked-memory limit of that child.
const MEMLOCK_LIMIT: u64 = 64 * 1024;
/// `CAP_IPC_LOCK` of `<linux/capability.h>`: locking memory past the limit.
const CAP_IPC_LOCK: libc::c_ulong = 14;

/// Running out of locked memory at registration is
/// DAT_INSUFFICIENT_RESOURCES with DAT_RESOURCE_MEMORY (dat_lmr_create(3DAT):
/// "The operation failed due to resource limitations") and one line on
/// stderr naming RLIMIT_MEMLOCK, never a crash or a hang; the IA goes on
/// registering what fits. The test runs itself again in a child whose
/// limit is 64 KiB and which cannot lock past it (it loses CAP_IPC_LOCK,
/// which the guest's root otherwise has).
#[test]
fn a_registration_past_rlimit_memlock_is_insufficient_resources() {
    if std::env::var_os(MEMLOCK_CHILD).is_some() {
        return registrations_under_a_low_memlock_limit();
    }
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args(["a_registration_past_rlimit_memlock_is_insufficient_resources", "--exact", "--nocapture"]);
    child.env(MEMLOCK_CHILD, "1");
    // SAFETY: between fork and exec the closure makes two system calls
    // and touches no memory of the parent's but its own locals.
    unsafe {
        child.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: MEMLOCK_LIMIT, rlim_max: MEMLOCK_LIMIT };
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Root keeps CAP_IPC_LOCK across exec unless the bounding set
            // loses it; a process that is not root has it not at all, and
            // may fail to drop it here.
            libc::prctl(libc::PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0);
            Ok(())
        });
    }
    let start = Instant::now();
    let out = child.output().expect("running the test under a low RLIMIT_MEMLOCK");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(out.status.success(), "the child failed ({}) after {:?}", out.status, start.elapsed());
    assert!(stdout.contains("1 passed"), "the child ran no test");
    let told: Vec<&str> = stderr.lines().filter(|l| l.contains("RLIMIT_MEMLOCK")).collect();
    assert_eq!(told.len(), 1, "one line names the limit: {stderr}");
    assert!(told[0].contains(&format!("limited to {MEMLOCK_LIMIT} bytes")), "{}", told[0]);
}

/// The child's half: two registrations past the limit fail alike, one
/// within it succeeds.
fn registrations_under_a_low_memlock_limit() {
    let mut rig = Rig::<Rxe>::new();
    let big: &'static [u8] = Box::leak(vec![0u8; 4 << 20].into_boxed_slice());
    let region = MemType::Virtual { address: big.as_ptr() as u64, length: big.len() as u64 };
    for _ in 0..2 {
        // SAFETY: the memory is leaked, so it outlives any registration,
        // and no DTO names it.
        let err = unsafe { rig.p.lmr_create(rig.ia, region, rig.pz, MemPriv::ALL) }.map(|c| c.lmr).unwrap_err();
        assert_eq!((err.error_type(), err.subtype()), (ErrorType::InsufficientResources, Subtype::ResourceMemory));
    }
    let small = rig.buf(4096, MemPriv::ALL);
    rig.p.lmr_free(small.lmr.lmr).unwrap();
}

/// dat_ia_close(3DAT): "The abrupt close does a phased, cascading destroy.
/// All DAT Objects associated with an IA instance are destroyed." On a
/// device that is everything the IA holds of it: its completion channel,
/// its connection manager's thread, rdma_cm channel, timer and eventfds,
/// its listeners' and connections' rdma_cm ids, its QPs, CQs,
/// registrations and PD. An IA opened and closed over
/// and over, abruptly with a connection up and writes in flight or
/// gracefully with nothing made, leaves the process's descriptors as they
/// were and its resident set where the first cycles left it (a cycle that
/// kept anything of the device's, a QP's rings or an IA's channels, would
/// add tens of KiB or a descriptor each time).
#[test]
fn an_ia_opened_and_closed_over_and_over_gives_back_what_it_held() {
    const WARM_UP: u64 = 2;
    const CYCLES: u64 = 100;
    const RSS_SLACK_KIB: u64 = 512;
    let mut rig = Rig::<Rxe>::new();
    for _ in 0..WARM_UP {
        close_a_connected_ia_abruptly(&mut rig);
        close_an_empty_ia_gracefully(&mut rig);
    }
    let (fds, rss) = (open_fds(), resident_kib());
    for _ in 0..CYCLES {
        close_a_connected_ia_abruptly(&mut rig);
        close_an_empty_ia_gracefully(&mut rig);
    }
    assert_eq!(open_fds(), fds, "descriptors after {CYCLES} more cycles");
    let grown = resident_kib().saturating_sub(rss);
    assert!(grown <= RSS_SLACK_KIB, "the resident set grew by {grown} KiB over {CYCLES} cycles");
}

/// An IA of `rig`'s provider with a connection on it (both sides its
/// own) and writes in flight, closed abruptly.
fn close_a_connected_ia_abruptly(rig: &mut Rig<Rxe>) {
    let (ia, _) = rig.p.ia_open(device().as_bytes(), AsyncEvd::Create { min_qlen: 8 }).unwrap();
    let address = rig.p.ia_query(ia).unwrap().1.ia_address;
    let pz = rig.p.pz_create(ia).unwrap();
    let mem = vec![0u8; 8192];
    let region = MemType::Virtual { address: mem.as_ptr() as u64, length: mem.len() as u64 };
    // SAFETY: the IA is closed abruptly, deregistering `mem`, before `mem`
    // is dropped at the end of this function; nothing reads it.
    let lmr = unsafe { rig.p.lmr_create(ia, region, pz, MemPriv::ALL) }.unwrap();
    let dto = rig.p.evd_create(ia, 16, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let conn = rig.p.evd_create(ia, 4, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
    let cr_evd = rig.p.evd_create(ia, 4, CnoHandle::NULL, EvdFlags::CR).unwrap();
    let client = rig.p.ep_create(ia, pz, dto, dto, conn, None).unwrap();
    let server = rig.p.ep_create(ia, pz, dto, dto, conn, None).unwrap();
    let qual = PORT + 40;
    rig.p.psp_create(ia, qual, cr_evd, PspFlags::Consumer).unwrap();
    rig.p.ep_connect(client, &address, qual, 10_000_000, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT).unwrap();
    let cr = match rig.expect(cr_evd, EventNumber::ConnectionRequest).data {
        EventData::CrArrival { cr, .. } => cr,
        other => panic!("{other:?}"),
    };
    rig.p.cr_accept(cr, server, b"").unwrap();
    rig.expect(conn, EventNumber::ConnectionEstablished);
    rig.expect(conn, EventNumber::ConnectionEstablished);
    let local = LmrTriplet { virtual_address: mem.as_ptr() as u64, segment_length: 4096, lmr_context: lmr.lmr_context };
    let remote = RmrTriplet {
        virtual_address: local.virtual_address + 4096,
        segment_length: 4096,
        rmr_context: lmr.rmr_context.unwrap(),
    };
    for cookie in 0..4 {
        rig.write(client, local, cookie, remote).unwrap();
    }
    rig.p.ia_close(ia, CloseFlags::Abrupt).unwrap();
}

/// An IA of `rig`'s provider with nothing made on it, closed gracefully.
fn close_an_empty_ia_gracefully(rig: &mut Rig<Rxe>) {
    let (ia, _) = rig.p.ia_open(device().as_bytes(), AsyncEvd::Create { min_qlen: 8 }).unwrap();
    rig.p.ia_close(ia, CloseFlags::Graceful).unwrap();
}

/// The descriptors this process has open (proc(5), /proc/self/fd).
fn open_fds() -> usize {
    // The directory's own descriptor is among those listed while it is read.
    std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").count() - 1
}

/// This process's resident set, in KiB (proc(5), /proc/self/statm: its
/// second field, in pages).
fn resident_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("statm's resident pages");
    // SAFETY: no pointers; the page size.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64 / 1024
}
