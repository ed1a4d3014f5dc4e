//! Send/receive ping-pong between two IAs of this process, awaited from
//! one tokio task: each side is a future that awaits its connection, its
//! completions and its peer's disconnect through an [`AsyncCno`], and
//! neither blocks a thread nor polls.
//!
//! ```text
//! cargo run -p udat-verbs --example async_pingpong -- [DEVICE] [ROUND_TRIPS]
//! ```
//!
//! DEVICE is a verbs device (`rxe0`, the default, or `UDAT_RDMA_DEVICE`)
//! or `softhca` for the software mlx5 HCA. It prints the round trips, the
//! time they took, and how often each side's task was woken; it fails if
//! a task woke more than three times a round trip (a wake-up per
//! completion and one to spare), which only polling would do.

use std::time::Instant;

use udat::aio::AsyncCno;
use udat::{
    Backend, CloseFlags, ConnectFlags, DatError, DatResult, DtoStatus, ErrorType, EvdFlags, EventData, EventNumber, Ia,
    LmrTriplet, MemPriv, MemType, PspFlags, Qos,
};

const CONN_QUAL: u64 = 4545;
const SIZE: usize = 64;

/// One side: an IA with an EP whose EVDs feed its async CNO.
struct Side<B: Backend> {
    ia: Ia<B>,
    cno: AsyncCno,
    ep: udat::EpHandle,
    dto: udat::EvdHandle,
    conn: udat::EvdHandle,
    buf: Box<[u8; 2 * SIZE]>,
    context: u32,
}

impl<B: Backend> Side<B> {
    fn open(backend: B, device: &str) -> DatResult<Side<B>> {
        let mut ia = Ia::open(backend, device.as_bytes(), 8)?;
        let h = ia.handle();
        let cno = ia.cno_async()?;
        let pz = ia.pz_create(h)?;
        let dto = ia.evd_create(h, 16, cno.handle(), EvdFlags::DTO)?;
        let conn = ia.evd_create(h, 4, cno.handle(), EvdFlags::CONNECTION)?;
        let ep = ia.ep_create(h, pz, dto, dto, conn, None)?;
        let buf = Box::new([0u8; 2 * SIZE]);
        let region = MemType::Virtual { address: buf.as_ptr() as u64, length: buf.len() as u64 };
        let context = ia.lmr_create(h, region, pz, MemPriv::ALL)?.lmr_context;
        Ok(Side { ia, cno, ep, dto, conn, buf, context })
    }

    /// The first half of the buffer is what is sent, the second what is
    /// received.
    fn half(&self, second: bool) -> LmrTriplet {
        let at = if second { SIZE } else { 0 };
        LmrTriplet {
            lmr_context: self.context,
            virtual_address: self.buf.as_ptr() as u64 + at as u64,
            segment_length: SIZE as u32,
        }
    }

    fn post_recv(&mut self, cookie: u64) -> DatResult<()> {
        let iov = [self.half(true)];
        self.ia.ep_post_recv(self.ep, &iov, cookie, udat::CompletionFlags::DEFAULT)
    }

    fn post_send(&mut self, value: u32, cookie: u64) -> DatResult<()> {
        self.buf[..4].copy_from_slice(&value.to_le_bytes());
        let iov = [self.half(false)];
        self.ia.ep_post_send(self.ep, &iov, cookie, udat::CompletionFlags::DEFAULT)
    }

    /// Await the completion of `cookie` on the DTO EVD.
    async fn completion(&mut self, cookie: u64) -> DatResult<()> {
        let e = self.cno.event(&mut self.ia, self.dto).await?;
        match e.data {
            EventData::Dto { cookie: c, status: DtoStatus::Success, .. } if c == cookie => Ok(()),
            other => {
                eprintln!("async_pingpong: completion {other:?}, expected cookie {cookie}");
                Err(DatError::of(ErrorType::InternalError))
            }
        }
    }

    fn received(&self) -> u32 {
        u32::from_le_bytes(self.buf[SIZE..SIZE + 4].try_into().unwrap_or_default())
    }

    /// Await the peer's disconnect (or ours) on the connection EVD.
    async fn disconnected(&mut self) -> DatResult<()> {
        let e = self.cno.event(&mut self.ia, self.conn).await?;
        if e.number != EventNumber::ConnectionDisconnected {
            return Err(DatError::of(ErrorType::InvalidState));
        }
        Ok(())
    }

    fn close(self) -> DatResult<()> {
        self.ia.close(CloseFlags::Abrupt).map_err(|(_, e)| e)
    }
}

fn broken((e, event): (DatError, Option<udat::Event>)) -> DatError {
    eprintln!("async_pingpong: the connection did not come up: {e} {event:?}");
    e
}

async fn server<B: Backend>(mut s: Side<B>, rounds: u32) -> DatResult<Side<B>> {
    let h = s.ia.handle();
    let cr_evd = s.ia.evd_create(h, 4, s.cno.handle(), EvdFlags::CR)?;
    let psp = s.ia.psp_create(h, CONN_QUAL, cr_evd, PspFlags::Consumer)?;
    let cr = s.cno.request(&mut s.ia, cr_evd).await?;
    s.post_recv(0)?;
    s.ia.cr_accept(cr, s.ep, &[])?;
    s.cno.established(&mut s.ia, s.conn).await.map_err(broken)?;
    for round in 0..rounds {
        s.completion(0).await?;
        let ping = s.received();
        if ping != round {
            eprintln!("async_pingpong: server got {ping} in round {round}");
            return Err(DatError::of(ErrorType::InternalError));
        }
        s.post_recv(0)?;
        s.post_send(ping, 1)?;
        s.completion(1).await?;
    }
    s.disconnected().await?;
    s.ia.psp_free(psp)?;
    Ok(s)
}

async fn client<B: Backend>(mut c: Side<B>, rounds: u32, server: udat::IaAddress) -> DatResult<Side<B>> {
    c.ia.ep_connect(c.ep, &server, CONN_QUAL, 5_000_000, &[], Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
    c.cno.established(&mut c.ia, c.conn).await.map_err(broken)?;
    for round in 0..rounds {
        c.post_recv(2)?;
        c.post_send(round, 3)?;
        c.completion(3).await?;
        c.completion(2).await?;
        if c.received() != round {
            eprintln!("async_pingpong: client got {} back in round {round}", c.received());
            return Err(DatError::of(ErrorType::InternalError));
        }
    }
    c.ia.ep_disconnect(c.ep, CloseFlags::Graceful)?;
    c.disconnected().await?;
    Ok(c)
}

/// Both sides, each over a backend `make` makes, in one task.
async fn pingpong<B: Backend>(make: impl Fn() -> B, devices: [&str; 2], rounds: u32) -> DatResult<()> {
    let s = Side::open(make(), devices[0])?;
    let c = Side::open(make(), devices[1])?;
    let address = s.ia.ia_query(s.ia.handle())?.1.ia_address;
    let started = Instant::now();
    let (s, c) = tokio::join!(server(s, rounds), client(c, rounds, address));
    let (s, c) = (s?, c?);
    let took = started.elapsed();
    let most = 3 * u64::from(rounds) + 8;
    if s.cno.wakeups() > most || c.cno.wakeups() > most {
        eprintln!(
            "async_pingpong: a task woke {} / {} times for {rounds} round trips",
            s.cno.wakeups(),
            c.cno.wakeups()
        );
        return Err(DatError::of(ErrorType::InternalError));
    }
    println!(
        "async_pingpong on {}: {rounds} round trips of {SIZE} bytes in {:.3} s ({:.1} µs each); the server's task woke {} times, the client's {}",
        devices[0],
        took.as_secs_f64(),
        took.as_secs_f64() * 1e6 / f64::from(rounds.max(1)),
        s.cno.wakeups(),
        c.cno.wakeups()
    );
    s.close()?;
    c.close()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let device = args.next().or_else(|| std::env::var("UDAT_RDMA_DEVICE").ok()).unwrap_or_else(|| "rxe0".into());
    let rounds = args.next().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().expect("a tokio runtime");
    let result = runtime.block_on(async {
        if device == "softhca" {
            let hca = udat_softhca::SoftHca::new();
            pingpong(|| udat_mlx5::Mlx5::<_>::new(hca.clone()), ["mlx5_soft0", "mlx5_soft1"], rounds).await
        } else {
            pingpong(udat_verbs::Verbs::new, [&*device, &*device], rounds).await
        }
    });
    if let Err(e) = result {
        eprintln!("async_pingpong on {device}: {e}");
        std::process::exit(1);
    }
}
