//! A CQ overrun through the C ABI, as issue 30 found it with a C program
//! on a thread-safe provider over the software HCA: eight Endpoints post
//! 16 RDMA writes each to one DTO EVD of qlen 1, whose CQ holds 64. The
//! 65th completion used to panic the software HCA, the post answered
//! `DAT_INTERNAL_ERROR`, the 64 writes never completed, no async event
//! came, and every later call of the provider answered
//! `DAT_INTERNAL_ERROR`. Now the async EVD hears
//! `DAT_ASYNC_ERROR_EVD_OVERFLOW`, the Endpoints are broken, every write
//! posted completes exactly once (flushed if the CQ lost it), and another
//! Endpoint, EVD and IA of the provider carry on.

mod common;

use std::collections::BTreeSet;
use std::ffi::CStr;
use std::ptr;

use udat_capi::registry::{self, Registration};
use udat_capi::sys::*;

const CONN_QUAL: u64 = 7301;
const EPS: usize = 8;
const WRITES: u64 = 16;
const BYTES: u32 = 64;

fn same(ia: DAT_IA_HANDLE) -> DAT_IA_HANDLE {
    ia
}

fn ok(ret: DAT_RETURN, what: &str) {
    assert_eq!(ret, DAT_SUCCESS, "{what}: {ret:#x}");
}

struct P {
    t: &'static DAT_PROVIDER,
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
}

impl P {
    fn evd(&self, qlen: i32, flags: DAT_EVD_FLAGS) -> DAT_EVD_HANDLE {
        let mut evd = ptr::null_mut();
        // SAFETY: a live IA and a valid out-pointer.
        ok(unsafe { self.t.evd_create_func.unwrap()(self.ia, qlen, ptr::null_mut(), flags, &mut evd) }, "evd");
        evd
    }

    fn ep(&self, recv: DAT_EVD_HANDLE, request: DAT_EVD_HANDLE, conn: DAT_EVD_HANDLE) -> DAT_EP_HANDLE {
        let mut ep = ptr::null_mut();
        // SAFETY: live handles of this provider and a valid out-pointer.
        let ret =
            unsafe { self.t.ep_create_func.unwrap()(self.ia, self.pz, recv, request, conn, ptr::null(), &mut ep) };
        ok(ret, "dat_ep_create");
        ep
    }

    /// The next event of `evd`, within a generous bound.
    fn next(&self, evd: DAT_EVD_HANDLE) -> DAT_EVENT {
        let mut event = DAT_EVENT::default();
        for _ in 0..1_000_000 {
            // SAFETY: a live EVD and a valid out-pointer.
            match unsafe { self.t.evd_dequeue_func.unwrap()(evd, &mut event) } {
                DAT_SUCCESS => return event,
                ret => assert_eq!(ret & 0x3fff_0000, DAT_QUEUE_EMPTY, "dat_evd_dequeue: {ret:#x}"),
            }
        }
        panic!("no event on the EVD");
    }

    fn empty(&self, evd: DAT_EVD_HANDLE) -> bool {
        let mut event = DAT_EVENT::default();
        // SAFETY: a live EVD and a valid out-pointer.
        unsafe { self.t.evd_dequeue_func.unwrap()(evd, &mut event) & 0x3fff_0000 == DAT_QUEUE_EMPTY }
    }

    fn write(&self, ep: DAT_EP_HANDLE, local: DAT_LMR_TRIPLET, remote: &DAT_RMR_TRIPLET, cookie: u64) -> DAT_RETURN {
        let mut local = local;
        // SAFETY: live handles, a triplet inside a live LMR.
        unsafe {
            self.t.ep_post_rdma_write_func.unwrap()(
                ep,
                1,
                &mut local,
                DAT_DTO_COOKIE { as_64: cookie },
                remote,
                DAT_COMPLETION_DEFAULT_FLAG,
            )
        }
    }
}

#[test]
fn eight_endpoints_overrunning_one_evds_cq_through_the_c_abi() {
    let name: &'static CStr = c"udat_overrun";
    let reg = Registration { dapl_version: (2, 0), thread_safe: true, ia_out: same };
    let table = registry::add(name, common::MODEL, reg).expect("register the provider");
    // SAFETY: registered until the end of the test.
    let t: &'static DAT_PROVIDER = unsafe { &*table };
    let (mut async_evd, mut ia, mut pz, mut psp) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: a registered provider and valid out-pointers.
    unsafe {
        ok(t.ia_open_func.unwrap()(name.as_ptr().cast_mut(), 8, &mut async_evd, &mut ia), "dat_ia_open");
        ok(t.pz_create_func.unwrap()(ia, &mut pz), "dat_pz_create");
    }
    let p = P { t, ia, pz };
    let cr_evd = p.evd(8, DAT_EVD_CR_FLAG);
    // SAFETY: live handles and a valid out-pointer.
    ok(unsafe { t.psp_create_func.unwrap()(ia, CONN_QUAL, cr_evd, DAT_PSP_CONSUMER_FLAG, &mut psp) }, "psp");
    let mut buf = Box::new([0u8; 2 * 4096]);
    let (mut lmr, mut lmr_context, mut rmr_context) = (ptr::null_mut(), 0, 0);
    let region = DAT_REGION_DESCRIPTION { for_va: buf.as_mut_ptr().cast() };
    // SAFETY: a buffer that outlives its registration; valid out-pointers.
    let ret = unsafe {
        t.lmr_create_func.unwrap()(
            ia,
            DAT_MEM_TYPE_VIRTUAL,
            region,
            buf.len() as u64,
            pz,
            DAT_MEM_PRIV_ALL_FLAG,
            DAT_VA_TYPE_VA,
            &mut lmr,
            &mut lmr_context,
            &mut rmr_context,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    ok(ret, "dat_lmr_create");
    let base = buf.as_ptr() as u64;
    let local = DAT_LMR_TRIPLET { lmr_context, virtual_address: base, segment_length: BYTES };
    let remote = DAT_RMR_TRIPLET { rmr_context, virtual_address: base + 4096, segment_length: BYTES };
    let mut attr = DAT_IA_ATTR::default();
    // SAFETY: a live IA and valid out-pointers.
    ok(unsafe { t.ia_query_func.unwrap()(ia, ptr::null_mut(), u64::MAX, &mut attr, 0, ptr::null_mut()) }, "query");

    let shared = p.evd(1, DAT_EVD_DTO_FLAG);
    let (recv, client_conn) = (p.evd(8, DAT_EVD_DTO_FLAG), p.evd(2 * EPS as i32, DAT_EVD_CONNECTION_FLAG));
    let (server_dto, server_conn) = (p.evd(64, DAT_EVD_DTO_FLAG), p.evd(4 * EPS as i32, DAT_EVD_CONNECTION_FLAG));
    let connect = |client: DAT_EP_HANDLE, server: DAT_EP_HANDLE| {
        let (qos, flags) = (DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
        // SAFETY: live EPs, the IA's own address.
        let ret = unsafe {
            t.ep_connect_func.unwrap()(client, attr.ia_address_ptr, CONN_QUAL, u32::MAX, 0, ptr::null_mut(), qos, flags)
        };
        ok(ret, "dat_ep_connect");
        let request = p.next(cr_evd);
        // SAFETY: a CR arrival's data.
        let cr = unsafe { request.event_data.cr_arrival_event_data.cr_handle };
        // SAFETY: a live CR and EP.
        ok(unsafe { t.cr_accept_func.unwrap()(cr, server, 0, ptr::null_mut()) }, "dat_cr_accept");
    };
    // A connection of its own EVDs, beside those that overrun.
    let (by_dto, by_conn) = (p.evd(64, DAT_EVD_DTO_FLAG), p.evd(8, DAT_EVD_CONNECTION_FLAG));
    let bystander = p.ep(by_dto, by_dto, by_conn);
    connect(bystander, p.ep(server_dto, server_dto, server_conn));
    assert_eq!(p.next(by_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    let mut clients = Vec::new();
    for _ in 0..EPS {
        let client = p.ep(recv, shared, client_conn);
        connect(client, p.ep(server_dto, server_dto, server_conn));
        assert_eq!(p.next(client_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
        clients.push(client);
    }

    let mut posted = BTreeSet::new();
    for (i, &client) in clients.iter().enumerate() {
        for w in 0..WRITES {
            let cookie = (i as u64) << 8 | w;
            match p.write(client, local, &remote, cookie) {
                DAT_SUCCESS => assert!(posted.insert(cookie)),
                ret => assert_ne!(ret & 0x3fff_0000, DAT_INTERNAL_ERROR, "write {cookie:#x}: {ret:#x}"),
            }
        }
    }
    assert!(posted.len() > 64, "the CQ of 64 is overrun: {} posted", posted.len());

    let overflow = p.next(async_evd);
    assert_eq!(overflow.event_number, DAT_ASYNC_ERROR_EVD_OVERFLOW);
    // SAFETY: an async error's data.
    assert_eq!(unsafe { overflow.event_data.asynch_error_event_data.dat_handle }, shared);
    let mut broken = BTreeSet::new();
    for _ in 0..EPS {
        let e = p.next(client_conn);
        assert_eq!(e.event_number, DAT_CONNECTION_EVENT_BROKEN);
        // SAFETY: a connection event's data.
        assert!(broken.insert(unsafe { e.event_data.connect_event_data.ep_handle } as usize));
    }
    assert_eq!(broken, clients.iter().map(|&ep| ep as usize).collect());
    let mut completed = BTreeSet::new();
    while completed.len() < posted.len() {
        let e = p.next(shared);
        assert_eq!(e.event_number, DAT_DTO_COMPLETION_EVENT);
        // SAFETY: a DTO completion's data.
        let dto = unsafe { e.event_data.dto_completion_event_data };
        assert!(matches!(dto.status, DAT_DTO_SUCCESS | DAT_DTO_ERR_FLUSHED), "{:#x}", dto.status);
        // SAFETY: the cookie is 64 bits.
        let cookie = unsafe { dto.user_cookie.as_64 };
        assert!(completed.insert(cookie), "{cookie:#x} completed twice");
    }
    assert_eq!(completed, posted);
    assert!(p.empty(shared), "nothing more");
    assert!(p.empty(async_evd), "one async event");

    // The rest of the provider carries on: the other connection...
    ok(p.write(bystander, local, &remote, 7), "a write on the other connection");
    let e = p.next(by_dto);
    // SAFETY: a DTO completion's data.
    let dto = unsafe { e.event_data.dto_completion_event_data };
    // SAFETY: a cookie is 64 bits, whichever member was set.
    let cookie = unsafe { dto.user_cookie.as_64 };
    assert_eq!((dto.status, cookie), (DAT_DTO_SUCCESS, 7));
    // ...and another IA.
    let (mut evd2, mut ia2, mut pz2) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: a registered provider and valid out-pointers.
    unsafe {
        ok(t.ia_open_func.unwrap()(name.as_ptr().cast_mut(), 8, &mut evd2, &mut ia2), "a second dat_ia_open");
        ok(t.pz_create_func.unwrap()(ia2, &mut pz2), "dat_pz_create on the second IA");
        ok(t.pz_free_func.unwrap()(pz2), "dat_pz_free");
        ok(t.ia_close_func.unwrap()(ia2, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close of the second IA");
        ok(t.ia_close_func.unwrap()(ia, DAT_CLOSE_ABRUPT_FLAG), "dat_ia_close");
    }
    assert!(registry::remove(table));
}
