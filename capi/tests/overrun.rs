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
use std::ptr;

use common::{ok, ty, Rig, SOFTHCA};
use udat_capi::sys::*;

const CONN_QUAL: u64 = 7301;
const EPS: usize = 8;
const WRITES: u64 = 16;
const BYTES: u32 = 64;

#[test]
fn eight_endpoints_overrunning_one_evds_cq_through_the_c_abi() {
    // Declared before the rig, so it outlives the IA that registers it.
    let mut buf = Box::new([0u8; 2 * 4096]);
    let name = c"udat_overrun";
    let p = Rig::new(name, SOFTHCA);
    let (t, async_evd) = (p.t(), p.async_evd);
    let pz = p.pz();
    let cr_evd = p.evd(8, DAT_EVD_CR_FLAG);
    p.psp(CONN_QUAL, cr_evd);
    let (_, lmr_context, rmr_context) = p.lmr(pz, &mut buf[..], DAT_MEM_PRIV_ALL_FLAG);
    let base = buf.as_ptr() as u64;
    let local = DAT_LMR_TRIPLET { lmr_context, virtual_address: base, segment_length: BYTES };
    let remote = DAT_RMR_TRIPLET { rmr_context, virtual_address: base + 4096, segment_length: BYTES };

    let shared = p.evd(1, DAT_EVD_DTO_FLAG);
    let (recv, client_conn) = (p.evd(8, DAT_EVD_DTO_FLAG), p.evd(2 * EPS as i32, DAT_EVD_CONNECTION_FLAG));
    let (server_dto, server_conn) = (p.evd(64, DAT_EVD_DTO_FLAG), p.evd(4 * EPS as i32, DAT_EVD_CONNECTION_FLAG));
    // A connection of its own EVDs, beside those that overrun.
    let (by_dto, by_conn) = (p.evd(64, DAT_EVD_DTO_FLAG), p.evd(8, DAT_EVD_CONNECTION_FLAG));
    let bystander = p.ep(pz, by_dto, by_dto, by_conn);
    p.connect(bystander, p.ep(pz, server_dto, server_dto, server_conn), CONN_QUAL, cr_evd);
    assert_eq!(p.next(by_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    let mut clients = Vec::new();
    for _ in 0..EPS {
        let client = p.ep(pz, recv, shared, client_conn);
        p.connect(client, p.ep(pz, server_dto, server_dto, server_conn), CONN_QUAL, cr_evd);
        assert_eq!(p.next(client_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
        clients.push(client);
    }

    let mut posted = BTreeSet::new();
    for (i, &client) in clients.iter().enumerate() {
        for w in 0..WRITES {
            let cookie = (i as u64) << 8 | w;
            match p.write(client, local, &remote, cookie) {
                DAT_SUCCESS => assert!(posted.insert(cookie)),
                ret => assert_ne!(ty(ret), DAT_INTERNAL_ERROR, "write {cookie:#x}: {ret:#x}"),
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
    }
    // The first IA closes (abruptly) as the rig drops.
}
