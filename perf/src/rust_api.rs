//! Both sides of a connection through udat's Rust API (`udat::Ia`).

use udat::*;

use crate::link::{decode_remote, encode_remote, Done, Hello, Link, Peer, Remote, BUF};

/// Objects and queued events one side holds at most. The provider is
/// built on the opening thread's stack before it moves to the heap: the
/// threads that open sides have room for it (see `main`).
type Room = Inline<64, 4096>;

/// Connection events that count as the peer hanging up.
fn gone(e: &Event) -> bool {
    !matches!(e.number, EventNumber::ConnectionEstablished | EventNumber::UdConnectionEstablished)
}

/// Whether a run's parameters name a UD test.
fn ud(hello: &Hello) -> bool {
    crate::args::Test::from_code(hello.test).is_some_and(crate::args::Test::is_ud)
}

/// One side: an IA, its endpoints, and the registered buffer, which is
/// given up to the IA (the peer writes it; the tests read it through
/// [`Link::buf`], with volatile loads).
pub struct Side<'id, B: Backend> {
    ia: Ia<'id, B, Room>,
    pz: Pz<'id>,
    dto: Evd<'id>,
    conn: Evd<'id>,
    cr: Evd<'id>,
    attr: EpAttr,
    eps: Vec<Ep<'id>>,
    /// The peer of each UD endpoint, once its connection resolved it.
    peers: Vec<Option<UdPeer<'id>>>,
    remotes: Vec<Remote>,
    psp: Option<Psp<'id>>,
    lmr: Lmr<'id>,
    gone: bool,
}

fn err(what: &str) -> impl Fn(DatError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// A `DatResult` as the tests' error.
fn check<T>(what: &str, r: DatResult<T>) -> Result<T, String> {
    r.map_err(err(what))
}

const WAIT_US: u32 = 30_000_000;

/// Open `device` over `backend` for up to `eps` endpoints of `depth`
/// requests and receives each, and run `with` on the side.
pub fn open<B: Backend, R>(
    backend: B,
    device: &str,
    eps: u32,
    depth: u32,
    with: impl for<'id> FnOnce(Side<'id, B>) -> Result<R, String>,
) -> Result<R, String> {
    let opened =
        Ia::open_in(backend, Room::default(), device.as_bytes(), 16, |ia| Ok(Side::new(ia, eps, depth).and_then(with)));
    check("dat_ia_open", opened)?
}

impl<'id, B: Backend> Side<'id, B> {
    fn new(mut ia: Ia<'id, B, Room>, eps: u32, depth: u32) -> Result<Side<'id, B>, String> {
        let pz = check("dat_pz_create", ia.pz_create())?;
        let qlen = (2 * eps * depth + 16).min(4000);
        let dto = check("dat_evd_create", ia.evd_create(qlen, None, EvdFlags::DTO))?;
        let conn = check("dat_evd_create", ia.evd_create(4 * eps + 4, None, EvdFlags::CONNECTION))?;
        let cr = check("dat_evd_create", ia.evd_create(eps + 4, None, EvdFlags::CR))?;
        let ia_attr = check("dat_ia_query", ia.ia_query())?;
        let attr = EpAttr {
            max_request_dtos: depth + 1,
            max_recv_dtos: depth + 1,
            max_rdma_read_out: ia_attr.max_rdma_read_per_ep_out.min(16),
            max_rdma_read_in: ia_attr.max_rdma_read_per_ep_in.min(16),
            ..EpAttr::provider_default(&ia_attr)
        };
        // Atomics need their own remote privilege (the IB extension's).
        let privileges = MemPriv(MemPriv::ALL.0 | MemPriv::REMOTE_ATOMIC.0);
        let lmr = check("dat_lmr_create", ia.lmr_create(vec![0u8; BUF], &pz, privileges).map_err(DatError::from))?;
        let (eps, peers, remotes) = (Vec::new(), Vec::new(), Vec::new());
        Ok(Side { ia, pz, dto, conn, cr, attr, eps, peers, remotes, psp: None, lmr, gone: false })
    }

    fn mine(&self) -> Remote {
        Remote { addr: self.lmr.registered_address(), rkey: self.lmr.rmr_context().unwrap_or(0) }
    }

    /// A new endpoint, UD if `ud`.
    fn new_ep(&mut self, ud: bool) -> Result<usize, String> {
        let (pz, dto, conn) = (&self.pz, &self.dto, &self.conn);
        let ep = if ud {
            check("dat_ep_create (UD)", self.ia.ep_create_ud(pz, dto, dto, conn, Some(&self.attr)))?
        } else {
            check("dat_ep_create", self.ia.ep_create(pz, dto, dto, Some(conn), Some(&self.attr)))?
        };
        self.eps.push(ep);
        self.peers.push(None);
        self.remotes.push(Remote::default());
        Ok(self.eps.len() - 1)
    }

    /// The endpoint a connection event `e` names, and the UD peer it
    /// resolved, kept for the endpoint's sends.
    fn established(&mut self, e: &Event, or: usize) -> usize {
        let at = match e.data {
            EventData::Connection { ep, .. } | EventData::UdConnection { ep, .. } => {
                self.eps.iter().position(|x| x.handle() == ep).unwrap_or(or)
            }
            _ => or,
        };
        if let Some(peer) = self.ia.ud_peer_of(e) {
            self.peers[at] = Some(peer);
        }
        at
    }

    fn target(&self, ep: usize, offset: u64, len: u32) -> RmrTriplet {
        let r = self.remotes[ep];
        RmrTriplet { rmr_context: r.rkey, virtual_address: r.addr + offset, segment_length: len }
    }
}

/// Receives carry this bit in their cookies.
pub const RECV_COOKIE: u64 = 1 << 63;
/// A UD client's goodbyes carry this bit in their cookies.
const GOODBYE_COOKIE: u64 = 1 << 62;

impl<B: Backend> Peer for Side<'_, B> {
    type Addr = IaAddress;

    fn addr_of(ip: [u8; 4]) -> IaAddress {
        udat_verbs::ipv4(ip, 0)
    }

    /// The IA's address, for a client in the same process.
    fn address(&self) -> Result<IaAddress, String> {
        Ok(check("dat_ia_query", self.ia.ia_query())?.ia_address)
    }

    /// Listen on `port`.
    fn listen(&mut self, port: u64) -> Result<(), String> {
        self.psp = Some(check("dat_psp_create", self.ia.psp_create(port, &self.cr, PspFlags::Consumer))?);
        Ok(())
    }

    /// Accept the first connection request, with `recvs` receives posted
    /// on its endpoint first; the client's parameters.
    fn accept(&mut self, recvs: &dyn Fn(&Hello) -> u32) -> Result<Hello, String> {
        let cr = loop {
            let e = check("waiting for a connection request", self.ia.evd_wait(&self.cr, WAIT_US, 1))?.0;
            if let Some(cr) = self.ia.cr_of(&e) {
                break cr;
            }
        };
        let hello = Hello::decode(check("dat_cr_query", self.ia.cr_private_data(&cr))?)
            .ok_or("the connection request is not udat-perf's")?;
        let index = self.new_ep(ud(&hello))?;
        self.remotes[index] = Remote { addr: hello.buf, rkey: hello.rkey };
        for i in 0..recvs(&hello) {
            self.recv(index, 0, crate::args::MAX_SIZE, RECV_COOKIE | u64::from(i))?;
        }
        let me = encode_remote(self.mine());
        check("dat_cr_accept", self.ia.cr_accept(cr, &self.eps[index], &me).map_err(DatError::from))?;
        let e = check("waiting for the connection", self.ia.evd_wait(&self.conn, WAIT_US, 1))?.0;
        if gone(&e) {
            return Err(format!("the connection did not come up: {:?}", e.number));
        }
        self.established(&e, index);
        Ok(hello)
    }

    /// Start connecting a new endpoint to `server`, with `recvs` receives
    /// posted on it first.
    fn connect(&mut self, server: IaAddress, port: u64, hello: Hello, recvs: u32) -> Result<(), String> {
        let index = self.new_ep(ud(&hello))?;
        for i in 0..recvs {
            self.recv(index, 0, crate::args::MAX_SIZE, RECV_COOKIE | u64::from(i))?;
        }
        let me = self.mine();
        let data = Hello { buf: me.addr, rkey: me.rkey, ..hello }.encode();
        let flags = ConnectFlags::DEFAULT;
        let ep = &self.eps[index];
        check("dat_ep_connect", self.ia.ep_connect(ep, &server, port, WAIT_US, &data, Qos::BEST_EFFORT, flags))
    }

    /// Wait for every endpoint connecting to be connected; learn the
    /// server's buffer.
    fn connected(&mut self) -> Result<(), String> {
        for i in 0..self.eps.len() {
            let e = check("waiting for the connection", self.ia.evd_wait(&self.conn, WAIT_US, 1))?.0;
            if gone(&e) {
                return Err(format!("the connection did not come up: {:?}", e.number));
            }
            let at = self.established(&e, i);
            let data = match &self.peers[at] {
                Some(peer) => check("the UD connection's private data", self.ia.ud_connection(&self.eps[at], peer))?.0,
                None => check("dat_ep_query", self.ia.ep_private_data(&self.eps[at]))?,
            };
            self.remotes[at] = decode_remote(data).ok_or("the server's answer is not udat-perf's")?;
        }
        Ok(())
    }
}

fn flags(signal: bool) -> CompletionFlags {
    if signal {
        CompletionFlags::DEFAULT
    } else {
        CompletionFlags::SUPPRESS
    }
}

impl<B: Backend> Link for Side<'_, B> {
    fn buf(&self) -> *mut u8 {
        self.lmr.registered_address() as *mut u8
    }

    #[inline]
    fn write(&mut self, ep: usize, local: u64, len: u32, remote: u64, cookie: u64, signal: bool) -> Result<(), String> {
        let (iov, to) = (check("dat_ep_post_rdma_write", self.lmr.local(local, len))?, self.target(ep, remote, len));
        check("dat_ep_post_rdma_write", self.ia.ep_post_rdma_write(&self.eps[ep], &[iov], cookie, &to, flags(signal)))
    }

    /// An RDMA read always asks for its completion: the Rust API refuses
    /// to suppress one, as nothing else would say when the memory it
    /// writes is the program's again. A run's count of completions is by
    /// cookie, so the extra ones retire nothing twice.
    #[inline]
    fn read(&mut self, ep: usize, local: u64, len: u32, remote: u64, cookie: u64, _signal: bool) -> Result<(), String> {
        let (iov, from) = (check("dat_ep_post_rdma_read", self.lmr.target(local, len))?, self.target(ep, remote, len));
        let r = self.ia.ep_post_rdma_read(&self.eps[ep], &[iov], cookie, &from, CompletionFlags::DEFAULT);
        check("dat_ep_post_rdma_read", r)
    }

    #[inline]
    fn send(&mut self, ep: usize, local: u64, len: u32, cookie: u64, signal: bool) -> Result<(), String> {
        let iov = check("dat_ep_post_send", self.lmr.local(local, len))?;
        if let Some(peer) = &self.peers[ep] {
            let r = self.ia.ep_post_send_ud(&self.eps[ep], &[iov], peer, cookie, flags(signal));
            return check("dat_ib_post_send_ud", r);
        }
        check("dat_ep_post_send", self.ia.ep_post_send(&self.eps[ep], &[iov], cookie, flags(signal)))
    }

    #[inline]
    fn recv(&mut self, ep: usize, local: u64, len: u32, cookie: u64) -> Result<(), String> {
        let iov = check("dat_ep_post_recv", self.lmr.target(local, len))?;
        check("dat_ep_post_recv", self.ia.ep_post_recv(&self.eps[ep], &[iov], cookie, CompletionFlags::DEFAULT))
    }

    fn fetch_add(&mut self, ep: usize, local: u64, remote: u64, cookie: u64) -> Result<(), String> {
        let (iov, to) = (check("dat_ib_post_fetch_and_add", self.lmr.target(local, 8))?, self.target(ep, remote, 8));
        let r = self.ia.ep_post_fetch_add(&self.eps[ep], 1, &iov, cookie, &to, CompletionFlags::DEFAULT);
        check("dat_ib_post_fetch_and_add", r)
    }

    #[inline]
    fn poll(&mut self) -> Result<Option<Done>, String> {
        match self.ia.evd_dequeue(&self.dto) {
            Ok(Event { data: EventData::Dto { ep, cookie, status, transferred_length, .. }, .. }) => {
                let at = self.eps.iter().position(|e| e.handle() == ep).unwrap_or(0);
                Ok(Some(Done { ep: at, cookie, ok: status == DtoStatus::Success, len: transferred_length }))
            }
            Ok(other) => Err(format!("unexpected event {:?}", other.number)),
            Err(e) if e.error_type() == ErrorType::QueueEmpty => Ok(None),
            Err(e) => Err(format!("dat_evd_dequeue: {e}")),
        }
    }

    fn peer_gone(&mut self) -> bool {
        if !self.gone {
            self.gone = self.ia.evd_dequeue(&self.conn).is_ok_and(|e| gone(&e));
        }
        self.gone
    }

    /// A UD endpoint says goodbye with 1-byte datagrams
    /// ([`GOODBYE_LEN`](crate::run::GOODBYE_LEN)), three in case one finds
    /// no receive posted, each sent once the last completed.
    fn close(&mut self) {
        for ep in 0..self.eps.len() {
            if self.peers[ep].is_none() {
                continue;
            }
            for k in 0..3 {
                let cookie = GOODBYE_COOKIE | k;
                if self.send(ep, crate::link::OUT, 1, cookie, true).is_err() {
                    break;
                }
                loop {
                    match self.poll() {
                        Ok(Some(d)) if d.cookie == cookie => break,
                        Ok(_) => {}
                        Err(_) => return,
                    }
                }
            }
        }
        for ep in &self.eps {
            let _ = self.ia.ep_disconnect(ep, CloseFlags::Graceful);
        }
        if let Some(psp) = self.psp.take() {
            let _ = self.ia.psp_free(psp);
        }
    }
}
