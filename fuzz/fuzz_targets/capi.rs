//! Random sequences of DAT calls through libudat.a's entry points, on the
//! software HCA: live, stale, wrong-kind, misaligned and garbage handles;
//! random counts, lengths and flags; segment arrays that end at a guard
//! page, so that reading one triplet too many faults. Every call must
//! return a DAT code, and every handle udat hands back must be one it
//! issued. Registered memory stays inside the fuzzer's own buffer:
//! registering memory one does not own is outside the API's contract.
#![no_main]

use std::ptr;
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use udat_capi::sys::*;

// libudat.a's entry points (the dispatcher in C and the registry in Rust).
use udat as _;

const PROVIDER: &std::ffi::CStr = c"udat-softhca-mlx5_soft0";
const PAGE: usize = 4096;
const DATA: usize = 16 * PAGE;

/// Memory the fuzzer owns: `data` between two guard pages, and a page of
/// `tail` with a guard page after it.
struct Arena {
    data: usize,
    tail: usize,
}

fn arena() -> &'static Arena {
    static ARENA: OnceLock<Arena> = OnceLock::new();
    ARENA.get_or_init(|| {
        let map = |len: usize| {
            // SAFETY: a fresh anonymous mapping.
            let p = unsafe {
                libc::mmap(ptr::null_mut(), len, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
            };
            assert_ne!(p, libc::MAP_FAILED);
            p as usize
        };
        let open = |at: usize, len: usize| {
            // SAFETY: a part of a mapping made above.
            assert_eq!(unsafe { libc::mprotect(at as *mut _, len, libc::PROT_READ | libc::PROT_WRITE) }, 0);
        };
        let data = map(DATA + 2 * PAGE) + PAGE;
        open(data, DATA);
        let tail = map(2 * PAGE);
        open(tail, PAGE);
        Arena { data, tail }
    })
}

/// A handle argument.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum H {
    /// One of the handles this run has seen, live or not.
    Seen(u8),
    Garbage(u64),
    /// A seen handle plus 1 to 7 bytes.
    Misaligned(u8, u8),
    Null,
}

/// A context argument of a segment.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Ctx {
    Seen(u8),
    Garbage(u32),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Seg {
    ctx: Ctx,
    offset: u16,
    len: u16,
}

/// Where a segment array lies.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Place {
    /// Ending exactly at the guard page.
    AtGuard,
    Misaligned,
    Null,
}

/// The count a post passes with its array.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Count {
    Exact,
    /// More than any work request takes; never read.
    Huge(i32),
    Negative(i8),
}

#[derive(Arbitrary, Debug)]
struct Segs {
    segs: Vec<Seg>,
    place: Place,
    count: Count,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Remote {
    ctx: Ctx,
    offset: u16,
    len: u32,
    wild: bool,
}

#[derive(Arbitrary, Debug)]
enum Op {
    OpenIa,
    CloseIa(H, bool),
    PzCreate(H),
    PzFree(H),
    EvdCreate(H, u8, u8),
    EvdFree(H),
    LmrCreate(H, H, u16, u16, u8),
    LmrFree(H),
    EpCreate(H, H, H, H, H),
    EpFree(H),
    PspCreate(H, u8, H),
    PspFree(H),
    Connect(H, u8, i32),
    Accept(H, H, i32),
    Reject(H),
    Disconnect(H, bool),
    Reset(H),
    Send(H, Segs, u16),
    Recv(H, Segs, u16),
    Write(H, Segs, Remote, u16),
    Read(H, Segs, Remote, u16),
    Dequeue(H),
    Wait(H, u16, i8),
    EpQuery(H),
    EvdQuery(H),
    SetContext(H, u64),
    GetContext(H),
}

const EVD_FLAGS: [DAT_EVD_FLAGS; 6] = [
    DAT_EVD_DTO_FLAG,
    DAT_EVD_CONNECTION_FLAG,
    DAT_EVD_CR_FLAG,
    DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG,
    DAT_EVD_SOFTWARE_FLAG,
    0xffff,
];

#[derive(Default)]
struct Run {
    handles: Vec<DAT_HANDLE>,
    contexts: Vec<u32>,
    ias: Vec<DAT_IA_HANDLE>,
    address: Option<libc::sockaddr_in>,
}

impl Run {
    fn h(&self, h: H) -> DAT_HANDLE {
        let seen = |i: u8| self.handles.get(i as usize % self.handles.len().max(1)).copied();
        match h {
            H::Seen(i) => seen(i).unwrap_or(ptr::null_mut()),
            H::Garbage(v) => v as usize as DAT_HANDLE,
            H::Misaligned(i, by) => seen(i).map_or(ptr::null_mut(), |h| h.wrapping_byte_add(1 + by as usize % 7)),
            H::Null => ptr::null_mut(),
        }
    }

    fn ctx(&self, c: Ctx) -> u32 {
        match c {
            Ctx::Seen(i) => self.contexts.get(i as usize % self.contexts.len().max(1)).copied().unwrap_or(0),
            Ctx::Garbage(v) => v,
        }
    }

    /// Record a handle udat returned: it must be one udat issued.
    fn got(&mut self, h: DAT_HANDLE) {
        if h.is_null() {
            return;
        }
        assert!(udat_capi::handle_space::issued(h), "udat returned a handle it never issued: {h:?}");
        if self.handles.len() < 256 {
            self.handles.push(h);
        }
    }

    /// Lay `s` out as its placement says; returns the array and count.
    fn segs(&self, s: &Segs) -> (*mut DAT_LMR_TRIPLET, DAT_COUNT) {
        let a = arena();
        let segs: Vec<DAT_LMR_TRIPLET> = s
            .segs
            .iter()
            .take(PAGE / size_of::<DAT_LMR_TRIPLET>() - 1)
            .map(|g| DAT_LMR_TRIPLET {
                lmr_context: self.ctx(g.ctx),
                segment_length: u32::from(g.len),
                virtual_address: (a.data + g.offset as usize % DATA) as u64,
            })
            .collect();
        let bytes = segs.len() * size_of::<DAT_LMR_TRIPLET>();
        let at = match s.place {
            Place::AtGuard => a.tail + PAGE - bytes,
            Place::Misaligned => a.tail + PAGE - bytes - 4,
            Place::Null => 0,
        };
        if at != 0 {
            // SAFETY: `at..at + bytes` lies in the tail page, which is ours.
            unsafe { ptr::copy_nonoverlapping(segs.as_ptr().cast::<u8>(), at as *mut u8, bytes) };
        }
        let count = match s.count {
            Count::Exact => segs.len() as DAT_COUNT,
            Count::Huge(n) => 17 + (n & 0x7fff_ffff) % (i32::MAX - 17),
            Count::Negative(n) => -1 - i32::from(n).abs(),
        };
        (at as *mut DAT_LMR_TRIPLET, count)
    }

    fn remote(&self, r: Remote) -> DAT_RMR_TRIPLET {
        let base =
            if r.wild { u64::MAX - u64::from(r.offset) } else { (arena().data + r.offset as usize % DATA) as u64 };
        DAT_RMR_TRIPLET { rmr_context: self.ctx(r.ctx), virtual_address: base, segment_length: r.len }
    }

    fn event(&mut self, e: &DAT_EVENT) {
        // SAFETY: the union member the event number names.
        unsafe {
            match e.event_number {
                DAT_DTO_COMPLETION_EVENT => self.got(e.event_data.dto_completion_event_data.ep_handle),
                DAT_CONNECTION_REQUEST_EVENT => self.got(e.event_data.cr_arrival_event_data.cr_handle),
                DAT_CONNECTION_EVENT_ESTABLISHED
                | DAT_CONNECTION_EVENT_DISCONNECTED
                | DAT_CONNECTION_EVENT_BROKEN
                | DAT_CONNECTION_EVENT_PEER_REJECTED
                | DAT_CONNECTION_EVENT_NON_PEER_REJECTED
                | DAT_CONNECTION_EVENT_UNREACHABLE => self.got(e.event_data.connect_event_data.ep_handle),
                _ => {}
            }
        }
    }

    fn op(&mut self, op: &Op) {
        let a = arena();
        let data = a.data as *mut libc::c_void;
        let cookie = DAT_DTO_COOKIE { as_64: 7 };
        // SAFETY: every pointer passed is null, one of the arena's, or a
        // local; handles are anything at all, which is the point.
        unsafe {
            match *op {
                Op::OpenIa => {
                    let (mut evd, mut ia) = (ptr::null_mut(), ptr::null_mut());
                    if dat_ia_openv(PROVIDER.as_ptr().cast_mut(), 8, &mut evd, &mut ia, 2, 0, DAT_TRUE) == 0 {
                        self.got(ia);
                        self.got(evd);
                        self.ias.push(ia);
                        let mut attr = DAT_IA_ATTR::default();
                        let mut pattr = DAT_PROVIDER_ATTR::default();
                        if dat_ia_query(ia, ptr::null_mut(), !0, &mut attr, !0, &mut pattr) == 0 {
                            let sa = attr.ia_address_ptr.cast::<libc::sockaddr_in>();
                            self.address = sa.as_ref().copied();
                        }
                    }
                }
                Op::CloseIa(h, abrupt) => {
                    let flags = if abrupt { DAT_CLOSE_ABRUPT_FLAG } else { DAT_CLOSE_GRACEFUL_FLAG };
                    dat_ia_close(self.h(h), flags);
                }
                Op::PzCreate(ia) => {
                    let mut pz = ptr::null_mut();
                    if dat_pz_create(self.h(ia), &mut pz) == 0 {
                        self.got(pz);
                    }
                }
                Op::PzFree(h) => {
                    dat_pz_free(self.h(h));
                }
                Op::EvdCreate(ia, qlen, flags) => {
                    let mut evd = ptr::null_mut();
                    let flags = EVD_FLAGS[flags as usize % EVD_FLAGS.len()];
                    if dat_evd_create(self.h(ia), i32::from(qlen), ptr::null_mut(), flags, &mut evd) == 0 {
                        self.got(evd);
                    }
                }
                Op::EvdFree(h) => {
                    dat_evd_free(self.h(h));
                }
                Op::LmrCreate(ia, pz, offset, len, privs) => {
                    let offset = offset as usize % DATA;
                    let len = (len as usize).min(DATA - offset) as u64;
                    let region = DAT_REGION_DESCRIPTION { for_va: data.wrapping_byte_add(offset) };
                    let (mut lmr, mut lctx, mut rctx, mut size, mut addr) = (ptr::null_mut(), 0, 0, 0, 0);
                    let ret = dat_lmr_create(
                        self.h(ia),
                        DAT_MEM_TYPE_VIRTUAL,
                        region,
                        len,
                        self.h(pz),
                        DAT_MEM_PRIV_FLAGS::from(privs),
                        DAT_VA_TYPE_VA,
                        &mut lmr,
                        &mut lctx,
                        &mut rctx,
                        &mut size,
                        &mut addr,
                    );
                    if ret == 0 {
                        self.got(lmr);
                        self.contexts.push(lctx);
                        self.contexts.push(rctx);
                    }
                }
                Op::LmrFree(h) => {
                    dat_lmr_free(self.h(h));
                }
                Op::EpCreate(ia, pz, recv, req, conn) => {
                    let mut ep = ptr::null_mut();
                    let ret = dat_ep_create(
                        self.h(ia),
                        self.h(pz),
                        self.h(recv),
                        self.h(req),
                        self.h(conn),
                        ptr::null(),
                        &mut ep,
                    );
                    if ret == 0 {
                        self.got(ep);
                    }
                }
                Op::EpFree(h) => {
                    dat_ep_free(self.h(h));
                }
                Op::PspCreate(ia, qual, evd) => {
                    let mut psp = ptr::null_mut();
                    let qual = 20_000 + u64::from(qual % 4);
                    if dat_psp_create(self.h(ia), qual, self.h(evd), DAT_PSP_CONSUMER_FLAG, &mut psp) == 0 {
                        self.got(psp);
                    }
                }
                Op::PspFree(h) => {
                    dat_psp_free(self.h(h));
                }
                Op::Connect(ep, qual, pd_len) => {
                    let mut to = self.address.unwrap_or(libc::sockaddr_in {
                        sin_family: libc::AF_INET as u16,
                        sin_port: 0,
                        sin_addr: libc::in_addr { s_addr: 0x0100_000a },
                        sin_zero: [0; 8],
                    });
                    let qual = 20_000 + u64::from(qual % 4);
                    dat_ep_connect(
                        self.h(ep),
                        (&mut to as *mut libc::sockaddr_in).cast(),
                        qual,
                        1_000_000,
                        pd_len,
                        data,
                        DAT_QOS_BEST_EFFORT,
                        DAT_CONNECT_DEFAULT_FLAG,
                    );
                }
                Op::Accept(cr, ep, pd_len) => {
                    dat_cr_accept(self.h(cr), self.h(ep), pd_len, data);
                }
                Op::Reject(cr) => {
                    dat_cr_reject(self.h(cr), 0, ptr::null_mut());
                }
                Op::Disconnect(ep, abrupt) => {
                    let flags = if abrupt { DAT_CLOSE_ABRUPT_FLAG } else { DAT_CLOSE_GRACEFUL_FLAG };
                    dat_ep_disconnect(self.h(ep), flags);
                }
                Op::Reset(ep) => {
                    dat_ep_reset(self.h(ep));
                }
                Op::Send(ep, ref s, flags) => {
                    let (segs, n) = self.segs(s);
                    dat_ep_post_send(self.h(ep), n, segs, cookie, DAT_COMPLETION_FLAGS::from(flags));
                }
                Op::Recv(ep, ref s, flags) => {
                    let (segs, n) = self.segs(s);
                    dat_ep_post_recv(self.h(ep), n, segs, cookie, DAT_COMPLETION_FLAGS::from(flags));
                }
                Op::Write(ep, ref s, r, flags) => {
                    let (segs, n) = self.segs(s);
                    let r = self.remote(r);
                    dat_ep_post_rdma_write(self.h(ep), n, segs, cookie, &r, DAT_COMPLETION_FLAGS::from(flags));
                }
                Op::Read(ep, ref s, r, flags) => {
                    let (segs, n) = self.segs(s);
                    let r = self.remote(r);
                    dat_ep_post_rdma_read(self.h(ep), n, segs, cookie, &r, DAT_COMPLETION_FLAGS::from(flags));
                }
                Op::Dequeue(evd) => {
                    let mut e = DAT_EVENT::default();
                    if dat_evd_dequeue(self.h(evd), &mut e) == 0 {
                        self.event(&e);
                    }
                }
                Op::Wait(evd, timeout, threshold) => {
                    let (mut e, mut more) = (DAT_EVENT::default(), 0);
                    let timeout = u32::from(timeout % 1000);
                    if dat_evd_wait(self.h(evd), timeout, i32::from(threshold), &mut e, &mut more) == 0 {
                        self.event(&e);
                    }
                }
                Op::EpQuery(ep) => {
                    let mut p = DAT_EP_PARAM::default();
                    dat_ep_query(self.h(ep), !0, &mut p);
                }
                Op::EvdQuery(evd) => {
                    let mut p = DAT_EVD_PARAM::default();
                    dat_evd_query(self.h(evd), !0, &mut p);
                }
                Op::SetContext(h, v) => {
                    dat_set_consumer_context(self.h(h), DAT_CONTEXT { as_64: v });
                }
                Op::GetContext(h) => {
                    let mut c = DAT_CONTEXT { as_64: 0 };
                    dat_get_consumer_context(self.h(h), &mut c);
                }
            }
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut run = Run::default();
    for op in ops.iter().take(64) {
        run.op(op);
    }
    // Nothing outlives the run: its IAs close, and their objects with them.
    for ia in std::mem::take(&mut run.ias) {
        // SAFETY: an IA handle this run opened, closed or not.
        unsafe { dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG) };
    }
});
