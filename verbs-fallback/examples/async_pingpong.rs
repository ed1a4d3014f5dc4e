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

use tokio::runtime::Runtime;
use udat::aio::AsyncCno;
use udat::{
    Backend, CloseFlags, CompletionFlags, ConnectFlags, DatError, DatResult, DtoStatus, Ep, ErrorType, Evd, EvdFlags,
    Event, EventData, EventNumber, Ia, PspFlags, Qos, Seg,
};

const CONN_QUAL: u64 = 4545;
const SIZE: usize = 64;

/// One side: an IA with an EP whose EVDs feed its async CNO, and the two
/// halves of its registered buffer: what it sends, and what it receives
/// into (taken by the receive posted, given back by its completion).
struct Side<'id, B: Backend> {
    ia: Ia<'id, B>,
    cno: AsyncCno<'id>,
    ep: Ep<'id>,
    dto: Evd<'id>,
    conn: Evd<'id>,
    send: Seg<'id>,
    recv: Option<Seg<'id>>,
}

impl<'id, B: Backend> Side<'id, B> {
    /// The side of `ia`, in a task of a tokio runtime.
    fn new(mut ia: Ia<'id, B>) -> DatResult<Side<'id, B>> {
        let cno = ia.cno_async()?;
        let pz = ia.pz_create()?;
        let dto = ia.evd_create(16, Some(cno.cno()), EvdFlags::DTO)?;
        let conn = ia.evd_create(4, Some(cno.cno()), EvdFlags::CONNECTION)?;
        let ep = ia.ep_create(&pz, &dto, &dto, Some(&conn), None)?;
        let (_lmr, buf) = ia.lmr_create_seg(vec![0u8; 2 * SIZE], &pz)?;
        let (send, recv) = buf.split_at(SIZE).map_err(|_| DatError::of(ErrorType::InternalError))?;
        Ok(Side { ia, cno, ep, dto, conn, send, recv: Some(recv) })
    }

    fn post_recv(&mut self, cookie: u64) -> DatResult<()> {
        let seg = self.recv.take().ok_or(DatError::of(ErrorType::InvalidState))?;
        self.ia.ep_post_recv_seg(&self.ep, seg, cookie, CompletionFlags::DEFAULT).map_err(|refused| {
            self.recv = Some(refused.object);
            refused.error
        })
    }

    fn post_send(&mut self, value: u32, cookie: u64) -> DatResult<()> {
        self.send[..4].copy_from_slice(&value.to_le_bytes());
        self.ia.ep_post_send(&self.ep, &[self.send.local()], cookie, CompletionFlags::DEFAULT)
    }

    /// Await the completion of `cookie` on the DTO EVD.
    async fn completion(&mut self, cookie: u64) -> DatResult<()> {
        let e = self.cno.event(&mut self.ia, &self.dto).await?;
        match e.data {
            EventData::Dto { cookie: c, status: DtoStatus::Success, .. } if c == cookie => {
                if let Some(seg) = self.ia.take_seg() {
                    self.recv = Some(seg);
                }
                Ok(())
            }
            other => {
                eprintln!("async_pingpong: completion {other:?}, expected cookie {cookie}");
                Err(DatError::of(ErrorType::InternalError))
            }
        }
    }

    /// What the last receive brought, once its completion gave it back.
    fn received(&self) -> Option<u32> {
        Some(u32::from_le_bytes(self.recv.as_ref()?.get(..4)?.try_into().ok()?))
    }

    /// Await the peer's disconnect (or ours) on the connection EVD.
    async fn disconnected(&mut self) -> DatResult<()> {
        let e = self.cno.event(&mut self.ia, &self.conn).await?;
        if e.number != EventNumber::ConnectionDisconnected {
            return Err(DatError::of(ErrorType::InvalidState));
        }
        Ok(())
    }

    fn close(self) -> DatResult<()> {
        Ok(self.ia.close(CloseFlags::Abrupt)?)
    }
}

fn broken((e, event): (DatError, Option<Event>)) -> DatError {
    eprintln!("async_pingpong: the connection did not come up: {e} {event:?}");
    e
}

async fn server<B: Backend>(mut s: Side<'_, B>, rounds: u32) -> DatResult<Side<'_, B>> {
    let cr_evd = s.ia.evd_create(4, Some(s.cno.cno()), EvdFlags::CR)?;
    let psp = s.ia.psp_create(CONN_QUAL, &cr_evd, PspFlags::Consumer)?;
    let cr = s.cno.request(&mut s.ia, &cr_evd).await?;
    s.post_recv(0)?;
    s.ia.cr_accept(cr, &s.ep, &[])?;
    s.cno.established(&mut s.ia, &s.conn).await.map_err(broken)?;
    for round in 0..rounds {
        s.completion(0).await?;
        let ping = s.received();
        if ping != Some(round) {
            eprintln!("async_pingpong: server got {ping:?} in round {round}");
            return Err(DatError::of(ErrorType::InternalError));
        }
        s.post_recv(0)?;
        s.post_send(round, 1)?;
        s.completion(1).await?;
    }
    s.disconnected().await?;
    s.ia.psp_free(psp)?;
    Ok(s)
}

async fn client<B: Backend>(mut c: Side<'_, B>, rounds: u32, server: udat::IaAddress) -> DatResult<Side<'_, B>> {
    c.ia.ep_connect(&c.ep, &server, CONN_QUAL, 5_000_000, &[], Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
    c.cno.established(&mut c.ia, &c.conn).await.map_err(broken)?;
    for round in 0..rounds {
        c.post_recv(2)?;
        c.post_send(round, 3)?;
        c.completion(3).await?;
        c.completion(2).await?;
        if c.received() != Some(round) {
            eprintln!("async_pingpong: client got {:?} back in round {round}", c.received());
            return Err(DatError::of(ErrorType::InternalError));
        }
    }
    c.ia.ep_disconnect(&c.ep, CloseFlags::Graceful)?;
    c.disconnected().await?;
    Ok(c)
}

/// Both sides, each over a backend `make` makes, in one task of `runtime`.
fn pingpong<B: Backend>(runtime: &Runtime, make: impl Fn() -> B, devices: [&str; 2], rounds: u32) -> DatResult<()> {
    Ia::open(make(), devices[0].as_bytes(), 8, |server_ia| {
        Ia::open(make(), devices[1].as_bytes(), 8, |client_ia| {
            runtime.block_on(async {
                let s = Side::new(server_ia)?;
                let c = Side::new(client_ia)?;
                let address = s.ia.ia_query()?.ia_address;
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
            })
        })
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let device = args.next().or_else(|| std::env::var("UDAT_RDMA_DEVICE").ok()).unwrap_or_else(|| "rxe0".into());
    let rounds = args.next().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().expect("a tokio runtime");
    let result = if device == "softhca" {
        let hca = udat_softhca::SoftHca::new();
        pingpong(&runtime, || udat_mlx5::Mlx5::<_>::new(hca.clone()), ["mlx5_soft0", "mlx5_soft1"], rounds)
    } else {
        pingpong(&runtime, udat_verbs::Verbs::new, [&*device, &*device], rounds)
    };
    if let Err(e) = result {
        eprintln!("async_pingpong on {device}: {e}");
        std::process::exit(1);
    }
}
