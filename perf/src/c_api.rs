//! Both sides of a connection through the C ABI of `<dat2/udat.h>`, called
//! as a C program calls it: through libudat.a (udat-static), linked into
//! this binary, or through libdat2 and the provider `dat.conf` names
//! ([`crate::dat`]).

use std::ffi::CString;
use std::ptr;

use udat_capi::sys::*;

use crate::dat::Dat;
use crate::link::{decode_remote, encode_remote, Done, Hello, Link, Peer, Remote, BUF};
use crate::rust_api::RECV_COOKIE;

const WAIT_US: DAT_TIMEOUT = 30_000_000;

/// `DAT_IA_FIELD_ALL` of <dat2/udat.h> (a macro bindgen leaves out).
const IA_FIELD_ALL: DAT_IA_ATTR_MASK = 0x3F_FFFF_FFFF;

fn check(what: &str, ret: DAT_RETURN) -> Result<(), String> {
    if ret == DAT_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: DAT_RETURN {ret:#x}"))
    }
}

fn cookie(v: u64) -> DAT_DTO_COOKIE {
    DAT_DTO_COOKIE { as_64: v }
}

/// One side, as [`crate::rust_api::Side`], through the C ABI of the
/// library `D`.
pub struct CSide<D: Dat> {
    dat: D,
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    dto: DAT_EVD_HANDLE,
    conn: DAT_EVD_HANDLE,
    cr: DAT_EVD_HANDLE,
    attr: DAT_EP_ATTR,
    eps: Vec<DAT_EP_HANDLE>,
    remotes: Vec<Remote>,
    psp: DAT_PSP_HANDLE,
    buf: Box<[u8]>,
    lmr_context: DAT_LMR_CONTEXT,
    rmr_context: DAT_RMR_CONTEXT,
    gone: bool,
}

impl<D: Dat> CSide<D> {
    /// Open the provider `name` of `dat` (`udat-verbs-rxe0` of libudat.a,
    /// a `dat.conf` name of libdat2), thread-safe if `shared` (more than
    /// one thread uses the provider), as `dat_ia_open` does otherwise
    /// (Debian's <dat2/udat_config.h> makes it ask for DAT_FALSE, and
    /// `dat.conf` lines say `nonthreadsafe`).
    pub fn open(dat: D, name: &str, shared: bool, eps: u32, depth: u32) -> Result<CSide<D>, String> {
        let cname = CString::new(name).map_err(|_| "a provider name with a NUL")?;
        let (mut ia, mut async_evd) = (ptr::null_mut(), ptr::null_mut());
        let thread_safe = if shared { DAT_TRUE } else { DAT_FALSE };
        // SAFETY: valid out-pointers and a NUL-terminated name.
        check(&format!("dat_ia_open {name}"), unsafe {
            dat.dat_ia_openv(
                cname.as_ptr().cast_mut(),
                16,
                &mut async_evd,
                &mut ia,
                DAT_VERSION_MAJOR,
                DAT_VERSION_MINOR,
                thread_safe,
            )
        })?;
        let mut s = CSide {
            dat,
            ia,
            pz: ptr::null_mut(),
            dto: ptr::null_mut(),
            conn: ptr::null_mut(),
            cr: ptr::null_mut(),
            attr: DAT_EP_ATTR::default(),
            eps: Vec::new(),
            remotes: Vec::new(),
            psp: ptr::null_mut(),
            buf: vec![0u8; BUF].into_boxed_slice(),
            lmr_context: 0,
            rmr_context: 0,
            gone: false,
        };
        let qlen = (2 * eps * depth + 16).min(4000) as DAT_COUNT;
        // SAFETY: a live IA and valid out-pointers throughout.
        unsafe {
            check("dat_pz_create", dat.dat_pz_create(ia, &mut s.pz))?;
            check("dat_evd_create", dat.dat_evd_create(ia, qlen, ptr::null_mut(), DAT_EVD_DTO_FLAG, &mut s.dto))?;
            let n = (4 * eps + 4) as DAT_COUNT;
            check("dat_evd_create", dat.dat_evd_create(ia, n, ptr::null_mut(), DAT_EVD_CONNECTION_FLAG, &mut s.conn))?;
            check("dat_evd_create", dat.dat_evd_create(ia, n, ptr::null_mut(), DAT_EVD_CR_FLAG, &mut s.cr))?;
            let region = DAT_REGION_DESCRIPTION { for_va: s.buf.as_mut_ptr().cast() };
            let (mut lmr, mut len, mut addr) = (ptr::null_mut(), 0, 0);
            let privileges = DAT_MEM_PRIV_ALL_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC;
            check(
                "dat_lmr_create",
                dat.dat_lmr_create(
                    ia,
                    DAT_MEM_TYPE_VIRTUAL,
                    region,
                    BUF as DAT_VLEN,
                    s.pz,
                    privileges as DAT_MEM_PRIV_FLAGS,
                    DAT_VA_TYPE_VA,
                    &mut lmr,
                    &mut s.lmr_context,
                    &mut s.rmr_context,
                    &mut len,
                    &mut addr,
                ),
            )?;
        }
        s.attr = DAT_EP_ATTR {
            service_type: DAT_SERVICE_TYPE_RC,
            max_recv_dtos: (depth + 1) as DAT_COUNT,
            max_request_dtos: (depth + 1) as DAT_COUNT,
            max_recv_iov: 1,
            max_request_iov: 1,
            max_rdma_read_in: 4,
            max_rdma_read_out: 4,
            qos: DAT_QOS_BEST_EFFORT,
            recv_completion_flags: DAT_COMPLETION_DEFAULT_FLAG,
            request_completion_flags: DAT_COMPLETION_DEFAULT_FLAG,
            ..DAT_EP_ATTR::default()
        };
        Ok(s)
    }

    fn mine(&self) -> Remote {
        Remote { addr: self.buf.as_ptr() as u64, rkey: self.rmr_context }
    }

    fn new_ep(&mut self) -> Result<DAT_EP_HANDLE, String> {
        let mut ep = ptr::null_mut();
        // SAFETY: live handles, a valid attribute structure and out-pointer.
        check("dat_ep_create", unsafe {
            self.dat.dat_ep_create(self.ia, self.pz, self.dto, self.dto, self.conn, &self.attr, &mut ep)
        })?;
        Ok(ep)
    }

    fn wait(&self, evd: DAT_EVD_HANDLE, what: &str) -> Result<DAT_EVENT, String> {
        let (mut event, mut nmore) = (DAT_EVENT::default(), 0);
        // SAFETY: a live EVD and valid out-pointers.
        check(what, unsafe { self.dat.dat_evd_wait(evd, WAIT_US, 1, &mut event, &mut nmore) })?;
        Ok(event)
    }

    fn local(&self, offset: u64, len: u32) -> DAT_LMR_TRIPLET {
        DAT_LMR_TRIPLET {
            lmr_context: self.lmr_context,
            virtual_address: self.buf.as_ptr() as u64 + offset,
            segment_length: len,
        }
    }

    fn target(&self, ep: usize, offset: u64, len: u32) -> DAT_RMR_TRIPLET {
        let r = self.remotes[ep];
        DAT_RMR_TRIPLET { rmr_context: r.rkey, virtual_address: r.addr + offset, segment_length: len }
    }
}

impl<D: Dat> Peer for CSide<D> {
    type Addr = libc::sockaddr_in;

    fn addr_of(ip: [u8; 4]) -> libc::sockaddr_in {
        libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(ip) },
            sin_zero: [0; 8],
        }
    }

    /// The IA's address, as a `sockaddr` the client connects to.
    fn address(&self) -> Result<libc::sockaddr_in, String> {
        let mut attr = DAT_IA_ATTR::default();
        // SAFETY: a live IA and a valid attribute structure.
        check("dat_ia_query", unsafe {
            self.dat.dat_ia_query(self.ia, ptr::null_mut(), IA_FIELD_ALL, &mut attr, 0, ptr::null_mut())
        })?;
        // SAFETY: the provider points at an IPv4 socket address it owns.
        Ok(unsafe { *attr.ia_address_ptr.cast::<libc::sockaddr_in>() })
    }

    fn listen(&mut self, port: u64) -> Result<(), String> {
        // SAFETY: live handles and a valid out-pointer.
        check("dat_psp_create", unsafe {
            self.dat.dat_psp_create(self.ia, port, self.cr, DAT_PSP_CONSUMER_FLAG, &mut self.psp)
        })
    }

    fn accept(&mut self, recvs: &dyn Fn(&Hello) -> u32) -> Result<Hello, String> {
        let e = self.wait(self.cr, "waiting for a connection request")?;
        if e.event_number != DAT_CONNECTION_REQUEST_EVENT {
            return Err(format!("event {:#x} on the CR EVD", e.event_number));
        }
        // SAFETY: a connection request event carries its CR.
        let cr = unsafe { e.event_data.cr_arrival_event_data.cr_handle };
        let mut param = DAT_CR_PARAM::default();
        // SAFETY: a live CR and a valid out-pointer.
        check("dat_cr_query", unsafe { self.dat.dat_cr_query(cr, DAT_CR_FIELD_ALL as DAT_CR_PARAM_MASK, &mut param) })?;
        // SAFETY: the provider's private data, of the size it says.
        let data = unsafe {
            std::slice::from_raw_parts(param.private_data.cast::<u8>(), param.private_data_size.max(0) as usize)
        };
        let hello = Hello::decode(data).ok_or("the connection request is not udat-perf's")?;
        let ep = self.new_ep()?;
        let index = self.eps.len();
        self.eps.push(ep);
        self.remotes.push(Remote { addr: hello.buf, rkey: hello.rkey });
        for i in 0..recvs(&hello) {
            self.recv(index, 0, crate::args::MAX_SIZE, RECV_COOKIE | u64::from(i))?;
        }
        let mut me = encode_remote(self.mine());
        // SAFETY: a live CR and EP; the data outlives the call.
        check("dat_cr_accept", unsafe {
            self.dat.dat_cr_accept(cr, ep, me.len() as DAT_COUNT, me.as_mut_ptr().cast())
        })?;
        let e = self.wait(self.conn, "waiting for the connection")?;
        if e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED {
            return Err(format!("the connection did not come up: event {:#x}", e.event_number));
        }
        Ok(hello)
    }

    fn connect(&mut self, mut server: libc::sockaddr_in, port: u64, hello: Hello, recvs: u32) -> Result<(), String> {
        let ep = self.new_ep()?;
        let index = self.eps.len();
        self.eps.push(ep);
        self.remotes.push(Remote::default());
        for i in 0..recvs {
            self.recv(index, 0, crate::args::MAX_SIZE, RECV_COOKIE | u64::from(i))?;
        }
        let me = self.mine();
        let mut data = Hello { buf: me.addr, rkey: me.rkey, ..hello }.encode();
        // SAFETY: a live EP; the address and data outlive the call.
        check("dat_ep_connect", unsafe {
            self.dat.dat_ep_connect(
                ep,
                (&raw mut server).cast(),
                port,
                WAIT_US,
                data.len() as DAT_COUNT,
                data.as_mut_ptr().cast(),
                DAT_QOS_BEST_EFFORT,
                DAT_CONNECT_DEFAULT_FLAG,
            )
        })
    }

    fn connected(&mut self) -> Result<(), String> {
        for i in 0..self.eps.len() {
            let e = self.wait(self.conn, "waiting for the connection")?;
            if e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED {
                return Err(format!("the connection did not come up: event {:#x}", e.event_number));
            }
            // SAFETY: a connection event carries its EP and the peer's data.
            let (ep, data) = unsafe {
                let c = e.event_data.connect_event_data;
                (
                    c.ep_handle,
                    std::slice::from_raw_parts(c.private_data.cast::<u8>(), c.private_data_size.max(0) as usize),
                )
            };
            let at = self.eps.iter().position(|&h| h == ep).unwrap_or(i);
            self.remotes[at] = decode_remote(data).ok_or("the server's answer is not udat-perf's")?;
        }
        Ok(())
    }
}

fn flags(signal: bool) -> DAT_COMPLETION_FLAGS {
    if signal {
        DAT_COMPLETION_DEFAULT_FLAG
    } else {
        DAT_COMPLETION_SUPPRESS_FLAG
    }
}

impl<D: Dat> Link for CSide<D> {
    fn buf(&self) -> *mut u8 {
        self.buf.as_ptr().cast_mut()
    }

    #[inline]
    fn write(&mut self, ep: usize, local: u64, len: u32, remote: u64, k: u64, signal: bool) -> Result<(), String> {
        let (mut iov, to) = (self.local(local, len), self.target(ep, remote, len));
        // SAFETY: a live EP; the triplets outlive the call.
        check("dat_ep_post_rdma_write", unsafe {
            self.dat.dat_ep_post_rdma_write(self.eps[ep], 1, &mut iov, cookie(k), &to, flags(signal))
        })
    }

    #[inline]
    fn read(&mut self, ep: usize, local: u64, len: u32, remote: u64, k: u64, signal: bool) -> Result<(), String> {
        let (mut iov, from) = (self.local(local, len), self.target(ep, remote, len));
        // SAFETY: as above.
        check("dat_ep_post_rdma_read", unsafe {
            self.dat.dat_ep_post_rdma_read(self.eps[ep], 1, &mut iov, cookie(k), &from, flags(signal))
        })
    }

    #[inline]
    fn send(&mut self, ep: usize, local: u64, len: u32, k: u64, signal: bool) -> Result<(), String> {
        let mut iov = self.local(local, len);
        // SAFETY: as above.
        check("dat_ep_post_send", unsafe {
            self.dat.dat_ep_post_send(self.eps[ep], 1, &mut iov, cookie(k), flags(signal))
        })
    }

    #[inline]
    fn recv(&mut self, ep: usize, local: u64, len: u32, k: u64) -> Result<(), String> {
        let mut iov = self.local(local, len);
        // SAFETY: as above.
        check("dat_ep_post_recv", unsafe {
            self.dat.dat_ep_post_recv(self.eps[ep], 1, &mut iov, cookie(k), DAT_COMPLETION_DEFAULT_FLAG)
        })
    }

    fn fetch_add(&mut self, ep: usize, local: u64, remote: u64, k: u64) -> Result<(), String> {
        let (mut iov, to) = (self.local(local, 8), self.target(ep, remote, 8));
        // SAFETY: a live EP; the triplets outlive the call.
        check("dat_ib_post_fetch_and_add", unsafe {
            self.dat.fetch_and_add(self.eps[ep], 1, &mut iov, k, &to, DAT_COMPLETION_DEFAULT_FLAG)
        })
    }

    #[inline]
    fn poll(&mut self) -> Result<Option<Done>, String> {
        let mut e = DAT_EVENT::default();
        // SAFETY: a live EVD and a valid out-pointer.
        let ret = unsafe { self.dat.dat_evd_dequeue(self.dto, &mut e) };
        if ret & 0x3fff_0000 == DAT_QUEUE_EMPTY {
            return Ok(None);
        }
        check("dat_evd_dequeue", ret)?;
        // SAFETY: a DTO event (the IB extension's too) begins with the DTO
        // completion data.
        let d = unsafe { e.event_data.dto_completion_event_data };
        let at = self.eps.iter().position(|&h| h == d.ep_handle).unwrap_or(0);
        // SAFETY: the cookie is the 64 bits given with the request.
        let k = unsafe { d.user_cookie.as_64 };
        Ok(Some(Done { ep: at, cookie: k, ok: d.status == DAT_DTO_SUCCESS, len: d.transfered_length }))
    }

    fn peer_gone(&mut self) -> bool {
        if !self.gone {
            let mut e = DAT_EVENT::default();
            // SAFETY: a live EVD and a valid out-pointer.
            self.gone = unsafe { self.dat.dat_evd_dequeue(self.conn, &mut e) } == DAT_SUCCESS
                && e.event_number != DAT_CONNECTION_EVENT_ESTABLISHED;
        }
        self.gone
    }

    fn close(&mut self) {
        for &ep in &self.eps {
            // SAFETY: a live EP.
            unsafe { self.dat.dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG) };
        }
    }
}

impl<D: Dat> Drop for CSide<D> {
    fn drop(&mut self) {
        // SAFETY: the IA is open; an abrupt close frees everything on it.
        unsafe { self.dat.dat_ia_close(self.ia, DAT_CLOSE_ABRUPT_FLAG) };
    }
}
