//! Both sides of a connection through udat's Rust API (`udat::Ia`).

use udat::*;

use crate::link::{decode_remote, encode_remote, Done, Hello, Link, Peer, Remote, BUF};

/// Objects and queued events one side holds at most. The provider is
/// built on the opening thread's stack before it moves to the heap: the
/// threads that open sides have room for it (see `main`).
type Room = Inline<64, 4096>;

/// Connection events that count as the peer hanging up.
fn gone(e: &Event) -> bool {
    e.number != EventNumber::ConnectionEstablished
}

/// One side: an IA, its endpoints, and the registered buffer.
pub struct Side<B: Backend> {
    ia: Ia<B, Room>,
    pz: PzHandle,
    dto: EvdHandle,
    conn: EvdHandle,
    cr: EvdHandle,
    attr: EpAttr,
    eps: Vec<EpHandle>,
    remotes: Vec<Remote>,
    psp: Option<PspHandle>,
    buf: Box<[u8]>,
    lmr_context: u32,
    rmr_context: u32,
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

impl<B: Backend> Side<B> {
    /// Open `device` over `backend` for up to `eps` endpoints of `depth`
    /// requests and receives each.
    pub fn open(backend: B, device: &str, eps: u32, depth: u32) -> Result<Side<B>, String> {
        let mut ia: Ia<B, Room> = check("dat_ia_open", Ia::open(backend, device.as_bytes(), 16))?;
        let h = ia.handle();
        let pz = check("dat_pz_create", ia.pz_create(h))?;
        let qlen = (2 * eps * depth + 16).min(4000);
        let dto = check("dat_evd_create", ia.evd_create(h, qlen, CnoHandle::NULL, EvdFlags::DTO))?;
        let conn = check("dat_evd_create", ia.evd_create(h, 4 * eps + 4, CnoHandle::NULL, EvdFlags::CONNECTION))?;
        let cr = check("dat_evd_create", ia.evd_create(h, eps + 4, CnoHandle::NULL, EvdFlags::CR))?;
        let ia_attr = check("dat_ia_query", ia.ia_query(h))?.1;
        let attr = EpAttr {
            max_request_dtos: depth + 1,
            max_recv_dtos: depth + 1,
            max_rdma_read_out: ia_attr.max_rdma_read_per_ep_out.min(16),
            max_rdma_read_in: ia_attr.max_rdma_read_per_ep_in.min(16),
            ..EpAttr::provider_default(&ia_attr)
        };
        let buf = vec![0u8; BUF].into_boxed_slice();
        let region = MemType::Virtual { address: buf.as_ptr() as u64, length: BUF as u64 };
        // Atomics need their own remote privilege (the IB extension's).
        let privileges = MemPriv(MemPriv::ALL.0 | MemPriv::REMOTE_ATOMIC.0);
        let lmr = check("dat_lmr_create", ia.lmr_create(h, region, pz, privileges))?;
        Ok(Side {
            ia,
            pz,
            dto,
            conn,
            cr,
            attr,
            eps: Vec::new(),
            remotes: Vec::new(),
            psp: None,
            buf,
            lmr_context: lmr.lmr_context,
            rmr_context: lmr.rmr_context.unwrap_or(0),
            gone: false,
        })
    }

    fn mine(&self) -> Remote {
        Remote { addr: self.buf.as_ptr() as u64, rkey: self.rmr_context }
    }

    fn new_ep(&mut self) -> Result<EpHandle, String> {
        let h = self.ia.handle();
        check("dat_ep_create", self.ia.ep_create(h, self.pz, self.dto, self.dto, self.conn, Some(&self.attr)))
    }

    fn local(&self, offset: u64, len: u32) -> LmrTriplet {
        LmrTriplet {
            lmr_context: self.lmr_context,
            virtual_address: self.buf.as_ptr() as u64 + offset,
            segment_length: len,
        }
    }

    fn target(&self, ep: usize, offset: u64, len: u32) -> RmrTriplet {
        let r = self.remotes[ep];
        RmrTriplet { rmr_context: r.rkey, virtual_address: r.addr + offset, segment_length: len }
    }
}

/// Receives carry this bit in their cookies.
pub const RECV_COOKIE: u64 = 1 << 63;

impl<B: Backend> Peer for Side<B> {
    type Addr = IaAddress;

    fn addr_of(ip: [u8; 4]) -> IaAddress {
        udat_verbs::ipv4(ip, 0)
    }

    /// The IA's address, for a client in the same process.
    fn address(&self) -> Result<IaAddress, String> {
        Ok(check("dat_ia_query", self.ia.ia_query(self.ia.handle()))?.1.ia_address)
    }

    /// Listen on `port`.
    fn listen(&mut self, port: u64) -> Result<(), String> {
        let h = self.ia.handle();
        self.psp = Some(check("dat_psp_create", self.ia.psp_create(h, port, self.cr, PspFlags::Consumer))?);
        Ok(())
    }

    /// Accept the first connection request, with `recvs` receives posted
    /// on its endpoint first; the client's parameters.
    fn accept(&mut self, recvs: &dyn Fn(&Hello) -> u32) -> Result<Hello, String> {
        let cr = loop {
            let e = check("waiting for a connection request", self.ia.evd_wait(self.cr, WAIT_US, 1))?.0;
            if let EventData::CrArrival { cr, .. } = e.data {
                break cr;
            }
        };
        let hello = Hello::decode(check("dat_cr_query", self.ia.cr_private_data(cr))?)
            .ok_or("the connection request is not udat-perf's")?;
        let ep = self.new_ep()?;
        let index = self.eps.len();
        self.eps.push(ep);
        self.remotes.push(Remote { addr: hello.buf, rkey: hello.rkey });
        for i in 0..recvs(&hello) {
            self.recv(index, 0, crate::args::MAX_SIZE, RECV_COOKIE | u64::from(i))?;
        }
        let me = encode_remote(self.mine());
        check("dat_cr_accept", self.ia.cr_accept(cr, ep, &me))?;
        let e = check("waiting for the connection", self.ia.evd_wait(self.conn, WAIT_US, 1))?.0;
        if gone(&e) {
            return Err(format!("the connection did not come up: {:?}", e.number));
        }
        Ok(hello)
    }

    /// Start connecting a new endpoint to `server`, with `recvs` receives
    /// posted on it first.
    fn connect(&mut self, server: IaAddress, port: u64, hello: Hello, recvs: u32) -> Result<(), String> {
        let ep = self.new_ep()?;
        let index = self.eps.len();
        self.eps.push(ep);
        self.remotes.push(Remote::default());
        for i in 0..recvs {
            self.recv(index, 0, crate::args::MAX_SIZE, RECV_COOKIE | u64::from(i))?;
        }
        let me = self.mine();
        let data = Hello { buf: me.addr, rkey: me.rkey, ..hello }.encode();
        let flags = ConnectFlags::DEFAULT;
        check("dat_ep_connect", self.ia.ep_connect(ep, &server, port, WAIT_US, &data, Qos::BEST_EFFORT, flags))
    }

    /// Wait for every endpoint connecting to be connected; learn the
    /// server's buffer.
    fn connected(&mut self) -> Result<(), String> {
        for i in 0..self.eps.len() {
            let e = check("waiting for the connection", self.ia.evd_wait(self.conn, WAIT_US, 1))?.0;
            if gone(&e) {
                return Err(format!("the connection did not come up: {:?}", e.number));
            }
            let ep = match e.data {
                EventData::Connection { ep, .. } => ep,
                _ => self.eps[i],
            };
            let at = self.eps.iter().position(|&h| h == ep).unwrap_or(i);
            let data = check("dat_ep_query", self.ia.ep_private_data(ep))?;
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

impl<B: Backend> Link for Side<B> {
    fn buf(&self) -> *mut u8 {
        self.buf.as_ptr().cast_mut()
    }

    #[inline]
    fn write(&mut self, ep: usize, local: u64, len: u32, remote: u64, cookie: u64, signal: bool) -> Result<(), String> {
        let (iov, to) = (self.local(local, len), self.target(ep, remote, len));
        check("dat_ep_post_rdma_write", self.ia.ep_post_rdma_write(self.eps[ep], &[iov], cookie, &to, flags(signal)))
    }

    #[inline]
    fn read(&mut self, ep: usize, local: u64, len: u32, remote: u64, cookie: u64, signal: bool) -> Result<(), String> {
        let (iov, from) = (self.local(local, len), self.target(ep, remote, len));
        check("dat_ep_post_rdma_read", self.ia.ep_post_rdma_read(self.eps[ep], &[iov], cookie, &from, flags(signal)))
    }

    #[inline]
    fn send(&mut self, ep: usize, local: u64, len: u32, cookie: u64, signal: bool) -> Result<(), String> {
        let iov = self.local(local, len);
        check("dat_ep_post_send", self.ia.ep_post_send(self.eps[ep], &[iov], cookie, flags(signal)))
    }

    #[inline]
    fn recv(&mut self, ep: usize, local: u64, len: u32, cookie: u64) -> Result<(), String> {
        let iov = self.local(local, len);
        check("dat_ep_post_recv", self.ia.ep_post_recv(self.eps[ep], &[iov], cookie, CompletionFlags::DEFAULT))
    }

    fn fetch_add(&mut self, ep: usize, local: u64, remote: u64, cookie: u64) -> Result<(), String> {
        let (iov, to) = (self.local(local, 8), self.target(ep, remote, 8));
        let r = self.ia.ep_post_fetch_add(self.eps[ep], 1, &iov, cookie, &to, CompletionFlags::DEFAULT);
        check("dat_ib_post_fetch_and_add", r)
    }

    #[inline]
    fn poll(&mut self) -> Result<Option<Done>, String> {
        match self.ia.evd_dequeue(self.dto) {
            Ok(Event { data: EventData::Dto { ep, cookie, status, .. }, .. }) => {
                let at = self.eps.iter().position(|&h| h == ep).unwrap_or(0);
                Ok(Some(Done { ep: at, cookie, ok: status == DtoStatus::Success }))
            }
            Ok(other) => Err(format!("unexpected event {:?}", other.number)),
            Err(e) if e.error_type() == ErrorType::QueueEmpty => Ok(None),
            Err(e) => Err(format!("dat_evd_dequeue: {e}")),
        }
    }

    fn peer_gone(&mut self) -> bool {
        if !self.gone {
            self.gone = self.ia.evd_dequeue(self.conn).is_ok_and(|e| gone(&e));
        }
        self.gone
    }

    fn close(&mut self) {
        for &ep in &self.eps {
            let _ = self.ia.ep_disconnect(ep, CloseFlags::Graceful);
        }
        if let Some(psp) = self.psp.take() {
            let _ = self.ia.psp_free(psp);
        }
    }
}
