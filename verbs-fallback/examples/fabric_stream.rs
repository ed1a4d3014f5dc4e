//! A stream of RDMA writes and sends between two hosts, broken on
//! purpose: the survivor's account of what happens when the peer machine
//! dies or the cable is cut. Run by `tests/fabric/run.sh` under
//! `cargo xtask fabric`, which carries out the faults it asks for.
//!
//! ```text
//! fabric_stream server [--port P]
//! fabric_stream client ADDRESS --fault kill-peer|cut [--port P]
//! ```
//!
//! The server accepts connections one after another, each with receives
//! posted, until a message says `done`. The client keeps `OUTSTANDING`
//! signalled posts in flight (4 KiB RDMA writes, every tenth a 64-byte
//! send) with `RECEIVES` receives of its own posted, and asks for the
//! fault once `BEFORE_FAULT` posts have completed. It goes on posting
//! until the connection event comes, then checks what the survivor must
//! see: every post and every receive completes exactly once, in post
//! order, successful or with an error or a flush; the EP is
//! DISCONNECTED; and everything frees. It prints how long the connection
//! event and the last completion took after the fault. After a cut it
//! asks for the cable back, connects again and streams `AFTER` posts that
//! must all succeed.

use std::time::{Duration, Instant};

use udat_core::types::*;
use udat_core::*;
use udat_verbs::{ipv4, Verbs};

type P = Provider<Verbs, Inline<16, 1024>>;

const PORT: u64 = 18700;
const OUTSTANDING: u64 = 32;
const RECEIVES: u64 = 16;
const BEFORE_FAULT: usize = 200;
const AFTER: u64 = 100;
const BUF: usize = 1 << 16;
/// What the survivor must hear within, after a fault.
const BOUND: Duration = Duration::from_secs(60);

struct Side {
    p: Box<P>,
    ia: IaHandle,
    pz: PzHandle,
    req: EvdHandle,
    recv: EvdHandle,
    conn: EvdHandle,
    cr: EvdHandle,
    buf: Vec<u8>,
    lmr: LmrCreated,
}

type Fail = Box<dyn std::error::Error>;

impl Side {
    fn open() -> Result<Side, Fail> {
        let device = std::env::var("UDAT_RDMA_DEVICE").map_err(|_| "UDAT_RDMA_DEVICE is unset")?;
        let mut p: Box<P> = Box::new(Provider::new(Verbs::new()));
        let (ia, _) = p.ia_open(device.as_bytes(), AsyncEvd::Create { min_qlen: 8 })?;
        let pz = p.pz_create(ia)?;
        let req = p.evd_create(ia, 256, CnoHandle::NULL, EvdFlags::DTO)?;
        let recv = p.evd_create(ia, 256, CnoHandle::NULL, EvdFlags::DTO)?;
        let conn = p.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::CONNECTION)?;
        let cr = p.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::CR)?;
        let buf = vec![0u8; BUF];
        let region = MemType::Virtual { address: buf.as_ptr() as u64, length: BUF as u64 };
        // SAFETY: `buf` moves into the Side below `p`, so the provider and
        // its registrations are dropped before it; the example reads it only
        // after the DTOs that write it have completed.
        let lmr = unsafe { p.lmr_create(ia, region, pz, MemPriv::ALL)? };
        Ok(Side { p, ia, pz, req, recv, conn, cr, buf, lmr })
    }

    fn ep(&mut self) -> DatResult<EpHandle> {
        let attr = EpAttr {
            max_request_dtos: OUTSTANDING as u32,
            max_recv_dtos: 64,
            ..EpAttr::provider_default(&self.p.ia_query(self.ia)?.1)
        };
        self.p.ep_create(self.ia, self.pz, self.recv, self.req, self.conn, Some(&attr))
    }

    fn seg(&self, offset: usize, len: usize) -> LmrTriplet {
        LmrTriplet {
            virtual_address: self.buf.as_ptr() as u64 + offset as u64,
            segment_length: len as u32,
            lmr_context: self.lmr.lmr_context,
        }
    }

    /// Our buffer as the peer writes into it: address, rmr_context.
    fn describe(&self) -> [u8; 12] {
        let mut d = [0; 12];
        d[..8].copy_from_slice(&(self.buf.as_ptr() as u64).to_le_bytes());
        d[8..].copy_from_slice(&self.lmr.rmr_context.unwrap_or(0).to_le_bytes());
        d
    }

    fn close(mut self) -> Result<(), Fail> {
        self.p.lmr_free(self.lmr.lmr)?;
        for evd in [self.req, self.recv, self.conn, self.cr] {
            self.p.evd_free(evd)?;
        }
        self.p.pz_free(self.pz)?;
        self.p.ia_close(self.ia, CloseFlags::Graceful)?;
        Ok(())
    }
}

/// Serve connections until a message says `done`.
fn serve(port: u64) -> Result<(), Fail> {
    let mut s = Side::open()?;
    let psp = s.p.psp_create(s.ia, port, s.cr, PspFlags::Consumer)?;
    println!("server: listening on port {port}");
    let mut ep: Option<EpHandle> = None;
    loop {
        if let Ok(e) = s.p.evd_dequeue(s.cr) {
            if let EventData::CrArrival { cr, .. } = e.data {
                // A new connection replaces the one before, which a cut
                // cable may have left connected on this side.
                if let Some(old) = ep.take() {
                    s.p.ep_free(old)?;
                    while s.p.evd_dequeue(s.recv).is_ok() {}
                    while s.p.evd_dequeue(s.conn).is_ok() {}
                }
                let new = s.ep()?;
                for i in 0..64u64 {
                    s.p.ep_post_recv(new, &[s.seg(i as usize * 64, 64)], i, CompletionFlags::DEFAULT)?;
                }
                let me = s.describe();
                s.p.cr_accept(cr, new, &me)?;
                ep = Some(new);
                println!("server: accepted a connection");
            }
        }
        if let Ok(e) = s.p.evd_dequeue(s.recv) {
            if let EventData::Dto { cookie, status: DtoStatus::Success, .. } = e.data {
                if s.buf[cookie as usize * 64..][..4] == *b"done" {
                    println!("server: done");
                    break;
                }
            }
        }
        if let Ok(e) = s.p.evd_dequeue(s.conn) {
            println!("server: {:?}", e.number);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    if let Some(ep) = ep {
        // The client disconnects once its `done` has completed: had this
        // side disconnected first, the client's QP could have been moved
        // to ERROR before the acknowledgement of `done` reached it, and
        // the send flushed though it was delivered.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            match s.p.evd_wait(s.conn, 1_000_000, 1) {
                Ok((e, _)) if matches!(e.data, EventData::Connection { ep: of, .. } if of == ep) => break,
                _ => {}
            }
        }
        let _ = s.p.ep_disconnect(ep, CloseFlags::Graceful);
        s.p.ep_free(ep)?;
    }
    s.p.psp_free(psp)?;
    s.close()
}

/// Ask `cargo xtask fabric` for a fault and wait until it is done.
fn fault(word: &str) -> Result<(), Fail> {
    let ctl = std::path::PathBuf::from(std::env::var("UDAT_FABRIC_CTL").map_err(|_| "not under `cargo xtask fabric`")?);
    std::fs::write(ctl.join("request.tmp"), word)?;
    std::fs::rename(ctl.join("request.tmp"), ctl.join("request"))?;
    while ctl.join("request").exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Connect to the server, retrying while it is not there yet.
fn connect(s: &mut Side, address: [u8; 4], port: u64) -> Result<(EpHandle, RmrTriplet), Fail> {
    let start = Instant::now();
    let server = ipv4(address, 0);
    loop {
        let ep = s.ep()?;
        for i in 0..RECEIVES {
            s.p.ep_post_recv(ep, &[s.seg(BUF / 2 + i as usize * 64, 64)], i, CompletionFlags::DEFAULT)?;
        }
        let me = s.describe();
        s.p.ep_connect(ep, &server, port, 10_000_000, &me, Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
        let e = s.p.evd_wait(s.conn, 20_000_000, 1)?.0;
        if e.number == EventNumber::ConnectionEstablished {
            let theirs = s.p.ep_private_data(ep)?;
            let remote = RmrTriplet {
                virtual_address: u64::from_le_bytes(theirs[..8].try_into()?),
                rmr_context: u32::from_le_bytes(theirs[8..12].try_into()?),
                segment_length: 4096,
            };
            return Ok((ep, remote));
        }
        s.p.ep_free(ep)?;
        while s.p.evd_dequeue(s.recv).is_ok() {}
        if start.elapsed() > BOUND {
            return Err(format!("no connection within {} s: {:?}", BOUND.as_secs(), e.number).into());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// What one stream saw.
#[derive(Default)]
struct Account {
    posted: u64,
    /// Each request's cookie and status, in completion order.
    requests: Vec<(u64, DtoStatus)>,
    receives: Vec<(u64, DtoStatus)>,
    event: Option<EventNumber>,
}

/// Post `count` requests (or until the connection goes, with `fault`
/// asked for after `BEFORE_FAULT` completions) and gather every
/// completion; the time the fault was done.
fn stream(
    s: &mut Side,
    ep: EpHandle,
    remote: &RmrTriplet,
    count: u64,
    fault_word: Option<&str>,
) -> Result<(Account, Option<Instant>), Fail> {
    let mut a = Account::default();
    let mut faulted: Option<Instant> = None;
    let start = Instant::now();
    let reap = |s: &mut Side, a: &mut Account| {
        while let Ok(e) = s.p.evd_dequeue(s.req) {
            if let EventData::Dto { cookie, status, .. } = e.data {
                a.requests.push((cookie, status));
            }
        }
    };
    while a.event.is_none() && a.posted < count {
        while a.posted - (a.requests.len() as u64) < OUTSTANDING && a.posted < count {
            let cookie = a.posted;
            if cookie % 10 == 9 {
                s.p.ep_post_request(ep, &[s.seg(0, 64)], cookie, RequestOp::Send, CompletionFlags::DEFAULT)?;
            } else {
                s.p.ep_post_request(
                    ep,
                    &[s.seg(4096, 4096)],
                    cookie,
                    RequestOp::RdmaWrite { remote: *remote },
                    CompletionFlags::DEFAULT,
                )?;
            }
            a.posted += 1;
        }
        reap(s, &mut a);
        if let Ok(e) = s.p.evd_dequeue(s.conn) {
            a.event = Some(e.number);
        }
        if let Some(word) = fault_word {
            if faulted.is_none() && a.requests.len() >= BEFORE_FAULT {
                fault(word)?;
                println!("client: {word} after {} completions", a.requests.len());
                faulted = Some(Instant::now());
            }
        }
        if start.elapsed() > BOUND * 2 {
            return Err("the stream neither ended nor broke".into());
        }
    }
    // Every post completes, however the connection ended.
    let deadline = Instant::now() + BOUND;
    while (a.requests.len() as u64) < a.posted && Instant::now() < deadline {
        reap(s, &mut a);
        if a.event.is_none() {
            if let Ok(e) = s.p.evd_dequeue(s.conn) {
                a.event = Some(e.number);
            }
        }
    }
    Ok((a, faulted))
}

/// Check the survivor's account of a broken stream, print it, free the EP.
fn settle(s: &mut Side, ep: EpHandle, mut a: Account, faulted: Instant) -> Result<(), Fail> {
    let event_at = faulted.elapsed();
    let gone = a.event.ok_or("no connection event after the fault")?;
    if !matches!(gone, EventNumber::ConnectionDisconnected | EventNumber::ConnectionBroken) {
        return Err(format!("the connection ended with {gone:?}").into());
    }
    let (state, _, _) = s.p.ep_get_status(ep)?;
    if state != EpState::Disconnected {
        return Err(format!("the EP is {state:?} after {gone:?}, not DISCONNECTED").into());
    }
    // The receives flush once the EP is disconnected.
    let deadline = Instant::now() + BOUND;
    while (a.receives.len() as u64) < RECEIVES && Instant::now() < deadline {
        if let Ok(Event { data: EventData::Dto { cookie, status, .. }, .. }) = s.p.evd_dequeue(s.recv) {
            a.receives.push((cookie, status));
        }
    }
    let last_at = faulted.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    if s.p.evd_dequeue(s.req).is_ok() || s.p.evd_dequeue(s.recv).is_ok() {
        return Err("a DTO completed twice".into());
    }
    let cookies: Vec<u64> = a.requests.iter().map(|r| r.0).collect();
    if cookies != (0..a.posted).collect::<Vec<_>>() {
        return Err(format!("{} of {} posts completed, or out of order", cookies.len(), a.posted).into());
    }
    let received: Vec<u64> = a.receives.iter().map(|r| r.0).collect();
    if received != (0..RECEIVES).collect::<Vec<_>>() {
        return Err(format!("receives completed as {received:?}").into());
    }
    let ok = |status: &DtoStatus| matches!(status, DtoStatus::Success | DtoStatus::Flushed | DtoStatus::Transport);
    if let Some(bad) = a.requests.iter().chain(&a.receives).find(|r| !ok(&r.1)) {
        return Err(format!("a completion with {:?}", bad.1).into());
    }
    let count = |v: &[(u64, DtoStatus)], status: DtoStatus| v.iter().filter(|r| r.1 == status).count();
    println!(
        "client: {gone:?} {:.2} s after the fault; every completion {:.2} s after it",
        event_at.as_secs_f64(),
        last_at.as_secs_f64()
    );
    println!(
        "client: {} posts completed once each, in order: {} succeeded, {} failed in transport, {} flushed; \
         {} receives flushed; the EP is DISCONNECTED",
        a.posted,
        count(&a.requests, DtoStatus::Success),
        count(&a.requests, DtoStatus::Transport),
        count(&a.requests, DtoStatus::Flushed),
        count(&a.receives, DtoStatus::Flushed),
    );
    if last_at > BOUND {
        return Err(format!("the survivor took {:.1} s, more than {} s", last_at.as_secs_f64(), BOUND.as_secs()).into());
    }
    s.p.ep_free(ep)?;
    Ok(())
}

fn client(address: [u8; 4], port: u64, word: &str) -> Result<(), Fail> {
    let mut s = Side::open()?;
    let (ep, remote) = connect(&mut s, address, port)?;
    println!("client: connected; streaming");
    let (a, faulted) = stream(&mut s, ep, &remote, u64::MAX, Some(word))?;
    settle(&mut s, ep, a, faulted.ok_or("the stream ended before the fault")?)?;
    if word == "cut" {
        fault("restore")?;
        println!("client: the cable is back; connecting again");
        let (ep, remote) = connect(&mut s, address, port)?;
        let (a, _) = stream(&mut s, ep, &remote, AFTER, None)?;
        if a.event.is_some() || a.requests.len() as u64 != AFTER || a.requests.iter().any(|r| r.1 != DtoStatus::Success)
        {
            return Err(format!("the new connection: {:?}, {} of {AFTER} posts", a.event, a.requests.len()).into());
        }
        s.buf[..4].copy_from_slice(b"done");
        s.p.ep_post_request(ep, &[s.seg(0, 64)], AFTER, RequestOp::Send, CompletionFlags::DEFAULT)?;
        match s.p.evd_wait(s.req, 10_000_000, 1)?.0.data {
            EventData::Dto { status: DtoStatus::Success, .. } => {}
            other => return Err(format!("the last send: {other:?}").into()),
        }
        println!("client: {AFTER} posts on the new connection succeeded");
        s.p.ep_disconnect(ep, CloseFlags::Graceful)?;
        let _ = s.p.evd_wait(s.conn, 10_000_000, 1);
        s.p.ep_free(ep)?;
    }
    s.close()?;
    println!("client: everything freed");
    Ok(())
}

fn main() {
    let usage = "usage: fabric_stream server [--port P] | client ADDRESS --fault kill-peer|cut [--port P]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port = args.iter().position(|a| a == "--port").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(PORT);
    let result = match args.first().map(String::as_str) {
        Some("server") => serve(port),
        Some("client") => {
            let address = args.get(1).and_then(|a| a.parse::<std::net::Ipv4Addr>().ok()).map(|a| a.octets());
            let word = args.iter().position(|a| a == "--fault").and_then(|i| args.get(i + 1));
            match (address, word.map(String::as_str)) {
                (Some(address), Some(word @ ("kill-peer" | "cut"))) => client(address, port, word),
                _ => Err(usage.into()),
            }
        }
        _ => Err(usage.into()),
    };
    if let Err(e) = result {
        eprintln!("fabric_stream: {e}");
        std::process::exit(1);
    }
}
