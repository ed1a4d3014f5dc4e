//! A connected pair on the software HCA, driven through udat's Rust API,
//! with doorbells deferred so that a measured post costs what it would on
//! a ConnectX: the software HCA executes the WQEs only at `execute`.

use std::hint::black_box;

use udat::poster::{Poster, Segments};
use udat::*;
use udat_mlx5::Mlx5;
use udat_softhca::SoftHca;

/// Posts between drains: within the EP's request limit and the EVD.
pub const BATCH: u64 = 16;

const PORT: u64 = 18515;
const WAIT_US: u32 = 20_000_000;

pub type Room = Inline<64, 4096>;
pub type Hca = Mlx5<SoftHca>;

#[derive(Clone, Copy, Debug)]
pub enum Post {
    /// A 64-byte RDMA write, carried inline.
    WriteInline,
    /// A 4 KiB RDMA write, gathered by the HCA.
    Write,
    /// A 64-byte send, inline.
    Send,
}

/// One side of the connection: its EP and EVDs.
struct Side<'id> {
    ep: Ep<'id>,
    dto: Evd<'id>,
    conn: Evd<'id>,
}

pub struct Rig<'l, 'id> {
    ia: Ia<'id, Hca, Room>,
    hca: SoftHca,
    pz: Pz<'id>,
    client: Side<'id>,
    server: Side<'id>,
    /// Where the server's receives land.
    dst: &'l Lmr<'id>,
    /// What the posts name, made once so a measured post holds the DAT
    /// call alone: 64 bytes and 4 KiB of the source, and as much of `dst`.
    local: [Local<'l, 'id>; 2],
    remote: [RmrTriplet; 2],
}

fn side<'id>(ia: &mut Ia<'id, Hca, Room>, pz: &Pz<'id>) -> DatResult<Side<'id>> {
    let dto = ia.evd_create(128, None, EvdFlags::DTO | EvdFlags::RMR_BIND)?;
    let conn = ia.evd_create(8, None, EvdFlags::CONNECTION)?;
    let ep = ia.ep_create(pz, &dto, &dto, Some(&conn), None)?;
    Ok(Side { ep, dto, conn })
}

/// The next event on `evd`, which must be `want`.
fn expect<'id>(ia: &mut Ia<'id, Hca, Room>, evd: &Evd<'id>, want: EventNumber) -> DatResult<Event> {
    let (event, _) = ia.evd_wait(evd, WAIT_US, 1)?;
    if event.number != want {
        return Err(DatError::of(ErrorType::InvalidState));
    }
    Ok(event)
}

/// Run `bench` on a client and a server connected through a PSP.
pub fn with_rig<R>(bench: impl for<'l, 'id> FnOnce(&mut Rig<'l, 'id>) -> R) -> R {
    let hca = SoftHca::new();
    Ia::open_in(Mlx5::new(hca.clone()), Room::default(), b"mlx5_soft0", 8, |mut ia| {
        let pz = ia.pz_create()?;
        let cr_evd = ia.evd_create(8, None, EvdFlags::CR)?;
        let (client, server) = (side(&mut ia, &pz)?, side(&mut ia, &pz)?);
        let psp = ia.psp_create(PORT, &cr_evd, PspFlags::Consumer)?;
        let address = ia.ia_query()?.ia_address;
        ia.ep_connect(&client.ep, &address, PORT, WAIT_US, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
        let request = expect(&mut ia, &cr_evd, EventNumber::ConnectionRequest)?;
        let cr = ia.cr_of(&request).ok_or(DatError::of(ErrorType::InvalidState))?;
        ia.cr_accept(cr, &server.ep, b"")?;
        expect(&mut ia, &client.conn, EventNumber::ConnectionEstablished)?;
        expect(&mut ia, &server.conn, EventNumber::ConnectionEstablished)?;
        ia.psp_free(psp)?;
        let src = ia.lmr_create(vec![0u8; 4096], &pz, MemPriv::ALL)?;
        let dst = ia.lmr_create(vec![0u8; 4096 * BATCH as usize], &pz, MemPriv::ALL)?;
        hca.defer_doorbells();
        let local = [src.local(0, 64)?, src.local(0, 4096)?];
        let no_rmr = || DatError::of(ErrorType::InternalError);
        let remote = [dst.remote(0, 64).ok_or_else(no_rmr)?, dst.remote(0, 4096).ok_or_else(no_rmr)?];
        Ok(bench(&mut Rig { ia, hca, pz, client, server, dst: &dst, local, remote }))
    })
    .expect("a connected pair on the software HCA")
}

impl<'l, 'id> Rig<'l, 'id> {
    /// Give the server a receive for each of `n` sends.
    pub fn receives(&mut self, n: u64) {
        for i in 0..n {
            let target = self.dst.target(i * 64, 64).unwrap();
            self.ia.ep_post_recv(&self.server.ep, &[target], i, CompletionFlags::DEFAULT).unwrap();
        }
    }

    #[inline(always)]
    pub fn post(&mut self, kind: Post, cookie: u64) -> DatResult<()> {
        let (ep, [small, large], [near, far]) = (&self.client.ep, &self.local, &self.remote);
        let flags = CompletionFlags::DEFAULT;
        match kind {
            Post::WriteInline => self.ia.ep_post_rdma_write(ep, core::slice::from_ref(small), cookie, near, flags),
            Post::Write => self.ia.ep_post_rdma_write(ep, core::slice::from_ref(large), cookie, far, flags),
            Post::Send => self.ia.ep_post_send(ep, core::slice::from_ref(small), cookie, flags),
        }
    }

    /// Let the software HCA execute what was posted.
    pub fn execute(&mut self) {
        self.hca.release();
    }

    /// The client's next event.
    #[inline(always)]
    pub fn dequeue(&mut self) -> DatResult<Event> {
        self.ia.evd_dequeue(&self.client.dto)
    }

    /// One completion of the client as a DAT event.
    #[inline(always)]
    pub fn reap(&mut self) -> u64 {
        match black_box(self.dequeue()) {
            Ok(e) => e.number as u64,
            Err(e) => panic!("no completion: {e:?}"),
        }
    }

    /// The source of a `kind` post, checked once; and its remote buffer.
    pub fn segments(&self, kind: Post) -> (Segments<'id>, RmrTriplet) {
        let at = if let Post::Write = kind { 1 } else { 0 };
        (self.ia.segments(&self.pz, &self.local[at..=at]).unwrap(), self.remote[at])
    }

    /// The client's EP, borrowed for a run of posts.
    pub fn poster(&mut self) -> Poster<'_, 'id, Hca, Room> {
        self.ia.poster(&self.client.ep).unwrap()
    }

    /// Drain the server's receive completions.
    pub fn drain_server(&mut self) {
        while self.ia.evd_dequeue(&self.server.dto).is_ok() {}
    }
}
