//! RDMA-write ping-pong latency through udat, in the manner of
//! perftest's `ib_write_lat`: each side writes a message into the
//! other's buffer and spins on the message's last byte for the reply.
//!
//! ```text
//! rdma_write_pingpong server [--device rxe0] [--port 18600] [--iters 1000] [--sizes 2,64,1024,4096]
//! rdma_write_pingpong client ADDRESS [same options]
//! ```
//!
//! As with `ib_write_lat`, both sides must be given the same iterations
//! and sizes.
//!
//! The device defaults to `UDAT_RDMA_DEVICE` (set by `cargo xtask
//! softroce`). Buffers are exchanged in the connection's private data:
//! address, rmr_context and length. The client prints one row per
//! message size: one-way latency (half the round trip) in microseconds.

use std::time::{Duration, Instant};

use udat_core::types::*;
use udat_core::*;
use udat_verbs::{ipv4, Verbs};

type P = Provider<Verbs, Inline<16, 256>>;

const BUF: usize = 1 << 16;
const WARMUP: usize = 100;

struct Args {
    server: bool,
    address: Option<[u8; 4]>,
    device: String,
    port: u64,
    iters: usize,
    sizes: Vec<usize>,
}

fn args() -> Result<Args, String> {
    let usage = "usage: rdma_write_pingpong server|client ADDRESS [--device D] [--port P] [--iters N] [--sizes a,b,..]";
    let mut it = std::env::args().skip(1);
    let server = match it.next().as_deref() {
        Some("server") => true,
        Some("client") => false,
        _ => return Err(usage.into()),
    };
    let mut a = Args {
        server,
        address: None,
        device: std::env::var("UDAT_RDMA_DEVICE").unwrap_or_else(|_| "rxe0".into()),
        port: 18600,
        iters: 1000,
        sizes: vec![2, 64, 1024, 4096],
    };
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--device" => a.device = value()?,
            "--port" => a.port = value()?.parse().map_err(|_| usage)?,
            "--iters" => a.iters = value()?.parse().map_err(|_| usage)?,
            "--sizes" => {
                a.sizes = value()?.split(',').map(|s| s.parse()).collect::<Result<_, _>>().map_err(|_| usage)?;
            }
            address if !a.server && a.address.is_none() => {
                let ip: std::net::Ipv4Addr = address.parse().map_err(|_| format!("bad address {address}"))?;
                a.address = Some(ip.octets());
            }
            _ => return Err(usage.into()),
        }
    }
    if !a.server && a.address.is_none() {
        return Err(usage.into());
    }
    if a.sizes.iter().any(|&s| s == 0 || s > BUF) {
        return Err(format!("sizes must be in 1..={BUF}"));
    }
    Ok(a)
}

/// The endpoint and what it needs.
struct Node {
    p: Box<P>,
    ia: IaHandle,
    ep: EpHandle,
    dto: EvdHandle,
    conn: EvdHandle,
    cr: EvdHandle,
    buf: Vec<u8>,
    lmr: LmrCreated,
}

impl Node {
    fn open(device: &str) -> DatResult<Node> {
        let mut p: Box<P> = Box::new(Provider::new(Verbs::new()));
        let (ia, _) = p.ia_open(device.as_bytes(), AsyncEvd::Create { min_qlen: 8 })?;
        let pz = p.pz_create(ia)?;
        let dto = p.evd_create(ia, 64, CnoHandle::NULL, EvdFlags::DTO)?;
        let conn = p.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::CONNECTION)?;
        let cr = p.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::CR)?;
        let ep = p.ep_create(ia, pz, dto, dto, conn, None)?;
        let buf = vec![0u8; BUF];
        let region = MemType::Virtual { address: buf.as_ptr() as u64, length: BUF as u64 };
        // SAFETY: `buf` moves into the Node below `p`, so the provider and
        // its registrations are dropped before it; the example reads it only
        // after the DTOs that write it have completed.
        let lmr = unsafe { p.lmr_create(ia, region, pz, MemPriv::ALL)? };
        Ok(Node { p, ia, ep, dto, conn, cr, buf, lmr })
    }

    /// Our buffer, as the peer needs it: address, rmr_context, length.
    fn describe(&self) -> [u8; 16] {
        let mut d = [0; 16];
        d[..8].copy_from_slice(&(self.buf.as_ptr() as u64).to_le_bytes());
        d[8..12].copy_from_slice(&self.lmr.rmr_context.unwrap_or(0).to_le_bytes());
        d[12..].copy_from_slice(&(BUF as u32).to_le_bytes());
        d
    }

    fn wait(&mut self, evd: EvdHandle) -> DatResult<Event> {
        Ok(self.p.evd_wait(evd, 30_000_000, 1)?.0)
    }

    /// Serve one client: accept, then answer each of its pings.
    fn serve(&mut self, port: u64, iters: usize, sizes: &[usize]) -> DatResult<()> {
        let psp = self.p.psp_create(self.ia, port, self.cr, PspFlags::Consumer)?;
        eprintln!("server: listening on port {port}");
        let cr = loop {
            if let EventData::CrArrival { cr, .. } = self.p.evd_wait(self.cr, TIMEOUT_INFINITE, 1)?.0.data {
                break cr;
            }
        };
        let remote = parse_remote(self.p.cr_private_data(cr)?).ok_or(DatError::of(ErrorType::InvalidParameter))?;
        let me = self.describe();
        self.p.cr_accept(cr, self.ep, &me)?;
        self.p.psp_free(psp)?;
        let e = self.wait(self.conn)?;
        if e.number != EventNumber::ConnectionEstablished {
            return Err(DatError::of(ErrorType::InternalError));
        }
        eprintln!("server: connected");
        let mut seq: u8 = 0;
        for &size in sizes {
            for _ in 0..WARMUP + iters {
                seq = seq.wrapping_add(1).max(1);
                if !self.await_message(size, seq)? {
                    return Err(DatError::of(ErrorType::InternalError));
                }
                self.write(&remote, size, seq)?;
            }
        }
        let e = self.wait(self.conn)?;
        eprintln!("server: done ({:?})", e.number);
        Ok(())
    }

    /// Spin until the message of `size` bytes marked `seq` (in its last
    /// byte) has landed; false if the connection went first.
    fn await_message(&mut self, size: usize, seq: u8) -> DatResult<bool> {
        let mut spin: u32 = 0;
        loop {
            spin = spin.wrapping_add(1);
            // SAFETY: `buf` is alive and `size - 1` within it; the device
            // writes into it, and the volatile read sees each new value.
            let last = unsafe { std::ptr::read_volatile(self.buf.as_ptr().add(size - 1)) };
            if last == seq {
                return Ok(true);
            }
            // Looking for events costs a system call (rdma_cm) and a CQ
            // poll: do it now and then, not on every spin.
            if spin % 256 == 0 {
                if let Ok(e) = self.p.evd_dequeue(self.conn) {
                    eprintln!("connection event while waiting: {:?}", e.number);
                    return Ok(false);
                }
                self.reap()?;
            }
            std::hint::spin_loop();
        }
    }

    /// RDMA-write `size` bytes, stamped with `seq`, into the peer.
    fn write(&mut self, remote: &RmrTriplet, size: usize, seq: u8) -> DatResult<()> {
        // Retire finished writes first, so the send queue never fills.
        self.reap()?;
        let out = &mut self.buf[BUF / 2..BUF / 2 + size];
        out[size - 1] = seq;
        let seg = LmrTriplet {
            virtual_address: out.as_ptr() as u64,
            segment_length: size as u32,
            lmr_context: self.lmr.lmr_context,
        };
        let target = RmrTriplet { segment_length: size as u32, ..*remote };
        self.p.ep_post_request(
            self.ep,
            &[seg],
            u64::from(seq),
            RequestOp::RdmaWrite { remote: target },
            CompletionFlags::DEFAULT,
        )
    }

    /// Take finished writes off the DTO EVD; a failed one ends the run.
    fn reap(&mut self) -> DatResult<()> {
        while let Ok(e) = self.p.evd_dequeue(self.dto) {
            if let EventData::Dto { status, .. } = e.data {
                if status != DtoStatus::Success {
                    eprintln!("an RDMA write failed: {status:?}");
                    return Err(DatError::of(ErrorType::InternalError));
                }
            }
        }
        Ok(())
    }

    fn client(&mut self, address: [u8; 4], port: u64, iters: usize, sizes: &[usize]) -> DatResult<()> {
        let me = self.describe();
        let server = ipv4(address, 0);
        let start = Instant::now();
        loop {
            self.p.ep_connect(self.ep, &server, port, 10_000_000, &me, Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
            let e = self.wait(self.conn)?;
            if e.number == EventNumber::ConnectionEstablished {
                break;
            }
            // The server may not be listening yet.
            if start.elapsed() > Duration::from_secs(30) {
                return Err(DatError::of(ErrorType::TimeoutExpired));
            }
            self.p.ep_reset(self.ep)?;
            std::thread::sleep(Duration::from_millis(200));
        }
        let remote = parse_remote(self.p.ep_private_data(self.ep)?).ok_or(DatError::of(ErrorType::InvalidParameter))?;
        println!("RDMA write ping-pong through udat over {} ({iters} iterations per size)", self.describe_device());
        println!("{:>8} {:>12} {:>12} {:>12} {:>12}", "bytes", "t_min[us]", "t_typ[us]", "t_avg[us]", "t_99%[us]");
        let mut seq: u8 = 0;
        for &size in sizes {
            let mut samples = Vec::with_capacity(iters);
            for i in 0..WARMUP + iters {
                seq = seq.wrapping_add(1).max(1);
                let t = Instant::now();
                self.write(&remote, size, seq)?;
                if !self.await_message(size, seq)? {
                    return Err(DatError::of(ErrorType::InternalError));
                }
                if i >= WARMUP {
                    samples.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
                }
            }
            samples.sort_by(f64::total_cmp);
            let avg = samples.iter().sum::<f64>() / samples.len() as f64;
            let pct = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
            println!("{size:>8} {:>12.2} {:>12.2} {avg:>12.2} {:>12.2}", samples[0], pct(0.5), pct(0.99));
        }
        self.p.ep_disconnect(self.ep, CloseFlags::Graceful)?;
        let _ = self.wait(self.conn);
        Ok(())
    }

    fn describe_device(&self) -> String {
        self.p
            .ia_query(self.ia)
            .map(|(_, a)| String::from_utf8_lossy(&a.adapter_name).trim_end_matches('\0').to_string())
            .unwrap_or_default()
    }
}

fn parse_remote(data: &[u8]) -> Option<RmrTriplet> {
    let data = data.get(..16)?;
    Some(RmrTriplet {
        virtual_address: u64::from_le_bytes(data[..8].try_into().ok()?),
        rmr_context: u32::from_le_bytes(data[8..12].try_into().ok()?),
        segment_length: u32::from_le_bytes(data[12..16].try_into().ok()?),
    })
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let result = Node::open(&a.device).and_then(|mut node| match a.address {
        None => node.serve(a.port, a.iters, &a.sizes),
        Some(address) => node.client(address, a.port, a.iters, &a.sizes),
    });
    if let Err(e) = result {
        eprintln!("rdma_write_pingpong: {e:?}");
        std::process::exit(1);
    }
}
