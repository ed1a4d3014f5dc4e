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
}

fn device() -> String {
    std::env::var("UDAT_RDMA_DEVICE").unwrap_or_else(|_| {
        panic!("no RDMA device: run these tests through `cargo xtask softroce -- ...` (UDAT_RDMA_DEVICE is unset)")
    })
}

udat_testkit::transport_suite!(Rxe);

/// The ConnectX control path takes only a device that rdma-core's mlx5
/// provider drives (`mlx5dv_is_supported`): soft-RoCE is refused at open,
/// before any object is made.
#[cfg(feature = "connectx")]
#[test]
fn the_connectx_control_path_refuses_a_device_mlx5dv_does_not_drive() {
    use udat_mlx5::Device;
    let mut cx = udat_verbs::connectx::ConnectX::new();
    let opened = cx.ia_open(device().as_bytes()).map(|_| ());
    assert_eq!(opened.map_err(|e| e.error_type()), Err(ErrorType::ProviderNotFound));
    let mut verbs = Verbs::new();
    assert!(verbs.ia_open(device().as_bytes()).is_ok(), "the same device opens on udat-verbs");
}

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
            rig.p
                .ep_post_rdma_write(client.ep, &[local.seg(0, 4096)], posted, &remote, CompletionFlags::DEFAULT)
                .unwrap();
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
        rig.p.ep_post_send(client.ep, &[src.seg(0, 64)], cookie, CompletionFlags::DEFAULT).unwrap();
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
    rig.p.ep_post_send(client.ep, &[src.seg(0, 64)], 77, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(rig.dto(client.dto), (77, DtoStatus::Success, 64, DtoOp::Send));
    assert_eq!(rig.dto(server.dto), (7, DtoStatus::Success, 64, DtoOp::Receive));
    assert!(rig.p.evd_dequeue(client.dto).is_err(), "an old completion reached the new connection");
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
    let big = vec![0u8; 4 << 20];
    let region = MemType::Virtual { address: big.as_ptr() as u64, length: big.len() as u64 };
    for _ in 0..2 {
        let err = rig.p.lmr_create(rig.ia, region, rig.pz, MemPriv::ALL).map(|c| c.lmr).unwrap_err();
        assert_eq!((err.error_type(), err.subtype()), (ErrorType::InsufficientResources, Subtype::ResourceMemory));
    }
    let small = rig.buf(4096, MemPriv::ALL);
    rig.p.lmr_free(small.lmr.lmr).unwrap();
}
