//! The IB extension's counters through the C ABI on the software HCA:
//! `dat_ib_query_counters`, `dat_ib_start_counter` and
//! `dat_ib_stop_counter` as `c/ext.c` hands them to a provider
//! (`udat_provider_head.counters`), around posts and dequeues made
//! through the provider table as libdat2 makes them; and
//! `dat_ib_open_query`'s body.

mod common;

use std::ptr;

use common::{ok, ty, Rig, SOFTHCA};
use udat_capi::sys::*;

const CONN_QUAL: u64 = 7480;
/// Sends the client posts while counting, and their bytes.
const SENDS: u64 = 3;
const SEND_BYTES: u32 = 100;
/// The server's receive buffers.
const RECV_BYTES: u32 = 256;

/// One counters call on `h`.
fn call(rig: &Rig, h: DAT_HANDLE, c: udat_ext_counters) -> DAT_RETURN {
    // SAFETY: every udat provider's table heads a `udat_provider_head`,
    // whose `counters` takes what `dat_extension_op` would pass
    // (`c/ext.c`).
    let counters = unsafe { (*rig.table.cast::<udat_provider_head>()).counters.unwrap() };
    // SAFETY: a handle of this provider (or garbage it must refuse), and
    // `out`, where set, has room for what the call writes.
    unsafe { counters(h, &c) }
}

/// `dat_ib_query_counters(h, counter, out, reset)`.
fn query(rig: &Rig, h: DAT_HANDLE, counter: u32, out: &mut [u64], reset: bool) -> DAT_RETURN {
    let c = udat_ext_counters {
        op: DAT_IB_QUERY_COUNTERS_OP,
        counter: counter as i32,
        out: out.as_mut_ptr(),
        reset: i32::from(reset),
        type_: 0,
    };
    call(rig, h, c)
}

/// All `n` counters of `h`.
fn all(rig: &Rig, h: DAT_HANDLE, n: u32) -> Vec<u64> {
    let mut out = vec![u64::MAX; n as usize];
    ok(query(rig, h, n, &mut out, false), "dat_ib_query_counters");
    out
}

/// `dat_ib_start_counter(ia, DCNT_IA_LNK)` (`start`) or
/// `dat_ib_stop_counter`.
fn switch(rig: &Rig, h: DAT_HANDLE, start: bool, type_: u32) -> DAT_RETURN {
    let op = if start { DAT_IB_START_COUNTERS_OP } else { DAT_IB_STOP_COUNTERS_OP };
    call(rig, h, udat_ext_counters { op, counter: 0, out: ptr::null_mut(), reset: 0, type_: type_ as i32 })
}

/// A connected pair on `rig`, each EP with its own DTO EVD; connection
/// events taken. (client, client DTO EVD, server, server DTO EVD).
fn pair(rig: &Rig, pz: DAT_PZ_HANDLE) -> (DAT_EP_HANDLE, DAT_EVD_HANDLE, DAT_EP_HANDLE, DAT_EVD_HANDLE) {
    let cr_evd = rig.evd(4, DAT_EVD_CR_FLAG);
    rig.psp(CONN_QUAL, cr_evd);
    let (client_dto, server_dto) = (rig.evd(16, DAT_EVD_DTO_FLAG), rig.evd(16, DAT_EVD_DTO_FLAG));
    let (client_conn, server_conn) = (rig.evd(4, DAT_EVD_CONNECTION_FLAG), rig.evd(4, DAT_EVD_CONNECTION_FLAG));
    let client = rig.ep(pz, client_dto, client_dto, client_conn);
    let server = rig.ep(pz, server_dto, server_dto, server_conn);
    rig.connect(client, server, CONN_QUAL, cr_evd);
    assert_eq!(rig.next(client_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    assert_eq!(rig.next(server_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    (client, client_dto, server, server_dto)
}

/// One dequeue of `evd`: its event, or `None` when it is empty.
fn dequeue(rig: &Rig, evd: DAT_EVD_HANDLE) -> Option<DAT_EVENT> {
    let mut event = DAT_EVENT::default();
    // SAFETY: a live EVD and a valid out-pointer.
    match unsafe { rig.t().evd_dequeue_func.unwrap()(evd, &mut event) } {
        DAT_SUCCESS => Some(event),
        ret => {
            assert_eq!(ty(ret), DAT_QUEUE_EMPTY, "dat_evd_dequeue: {ret:#x}");
            None
        }
    }
}

/// A send of `len` bytes from `seg` on `ep`.
fn send(rig: &Rig, ep: DAT_EP_HANDLE, seg: DAT_LMR_TRIPLET, len: u32, cookie: u64) {
    let mut seg = DAT_LMR_TRIPLET { segment_length: len, ..seg };
    let flags = DAT_COMPLETION_DEFAULT_FLAG;
    // SAFETY: a live EP; the segment lies in a live LMR.
    let ret = unsafe { rig.t().ep_post_send_func.unwrap()(ep, 1, &mut seg, DAT_DTO_COOKIE { as_64: cookie }, flags) };
    ok(ret, "dat_ep_post_send");
}

/// Started counters count exactly what was done: the client's sends and
/// their bytes, the server's receives posted and completed, and each
/// EVD's dequeues, found, empty and polled; a single counter reads alone;
/// a query with reset reads, then zeroes; stopped counters hold still
/// while the EPs go on posting and the EVDs dequeuing.
#[test]
fn started_counters_count_posts_completions_and_dequeues_exactly() {
    let (mut client_buf, mut server_buf) = (vec![7u8; 4096], vec![0u8; 4096]);
    let rig = Rig::new(c"counters-exact", SOFTHCA);
    let pz = rig.pz();
    let (client, client_dto, server, server_dto) = pair(&rig, pz);
    let (_, client_ctx, _) = rig.lmr(pz, &mut client_buf, DAT_MEM_PRIV_ALL_FLAG);
    let (_, server_ctx, _) = rig.lmr(pz, &mut server_buf, DAT_MEM_PRIV_ALL_FLAG);
    let client_seg =
        DAT_LMR_TRIPLET { lmr_context: client_ctx, virtual_address: client_buf.as_ptr() as u64, segment_length: 0 };
    // Nothing counts before the start.
    assert!(all(&rig, client, DCNT_EP_ALL_COUNTERS).iter().all(|&v| v == 0));
    ok(switch(&rig, rig.ia, true, DCNT_IA_LNK), "dat_ib_start_counter");

    for i in 0..SENDS {
        let mut seg = DAT_LMR_TRIPLET {
            lmr_context: server_ctx,
            virtual_address: server_buf.as_ptr() as u64 + i * u64::from(RECV_BYTES),
            segment_length: RECV_BYTES,
        };
        // SAFETY: a live EP; the segment lies in a live LMR.
        let ret = unsafe { rig.t().ep_post_recv_func.unwrap()(server, 1, &mut seg, DAT_DTO_COOKIE { as_64: i }, 0) };
        ok(ret, "dat_ep_post_recv");
    }
    for i in 0..SENDS {
        send(&rig, client, client_seg, SEND_BYTES, i);
    }
    // The software HCA ran the sends at the doorbell: each dequeue finds
    // one, then the EVD is empty.
    for _ in 0..SENDS {
        let event = dequeue(&rig, client_dto).expect("a send's completion");
        assert_eq!(event.event_number, DAT_DTO_COMPLETION_EVENT);
        let event = dequeue(&rig, server_dto).expect("a receive's completion");
        // SAFETY: a DTO completion's data.
        assert_eq!(unsafe { event.event_data.dto_completion_event_data.transfered_length }, SEND_BYTES);
    }
    assert!(dequeue(&rig, client_dto).is_none());

    let client_counts = all(&rig, client, DCNT_EP_ALL_COUNTERS);
    let mut expected = vec![0u64; DCNT_EP_ALL_COUNTERS as usize];
    expected[DCNT_EP_POST_SEND as usize] = SENDS;
    expected[DCNT_EP_POST_SEND_DATA as usize] = SENDS * u64::from(SEND_BYTES);
    assert_eq!(client_counts, expected, "the client EP");
    let mut expected = vec![0u64; DCNT_EP_ALL_COUNTERS as usize];
    expected[DCNT_EP_POST_RECV as usize] = SENDS;
    expected[DCNT_EP_POST_RECV_DATA as usize] = SENDS * u64::from(RECV_BYTES);
    expected[DCNT_EP_RECV as usize] = SENDS;
    expected[DCNT_EP_RECV_DATA as usize] = SENDS * u64::from(SEND_BYTES);
    assert_eq!(all(&rig, server, DCNT_EP_ALL_COUNTERS), expected, "the server EP");
    let mut expected = vec![0u64; DCNT_EVD_ALL_COUNTERS as usize];
    expected[DCNT_EVD_DEQUEUE as usize] = SENDS + 1;
    expected[DCNT_EVD_DEQUEUE_FOUND as usize] = SENDS;
    expected[DCNT_EVD_DEQUEUE_NOT_FOUND as usize] = 1;
    expected[DCNT_EVD_DEQUEUE_POLL as usize] = SENDS + 1;
    expected[DCNT_EVD_DEQUEUE_POLL_FOUND as usize] = SENDS;
    expected[DCNT_EVD_DTO_CALLBACK as usize] = SENDS;
    assert_eq!(all(&rig, client_dto, DCNT_EVD_ALL_COUNTERS), expected, "the client's DTO EVD");

    // One counter goes to the first place of `out`, and nothing else is
    // written.
    let mut one = [u64::MAX; 2];
    ok(query(&rig, client, DCNT_EP_POST_SEND_DATA, &mut one, false), "one counter");
    assert_eq!(one, [SENDS * u64::from(SEND_BYTES), u64::MAX]);

    // Reset: this query reads them, the next reads zero.
    let mut out = vec![0u64; DCNT_EP_ALL_COUNTERS as usize];
    ok(query(&rig, client, DCNT_EP_ALL_COUNTERS, &mut out, true), "query with reset");
    assert_eq!(out, client_counts);
    assert!(all(&rig, client, DCNT_EP_ALL_COUNTERS).iter().all(|&v| v == 0), "reset to zero");

    // Stopped: posts and dequeues go on, the counters hold.
    ok(switch(&rig, rig.ia, false, DCNT_IA_LNK), "dat_ib_stop_counter");
    let evd_before = all(&rig, client_dto, DCNT_EVD_ALL_COUNTERS);
    let mut seg = DAT_LMR_TRIPLET {
        lmr_context: server_ctx,
        virtual_address: server_buf.as_ptr() as u64,
        segment_length: RECV_BYTES,
    };
    // SAFETY: a live EP; the segment lies in a live LMR.
    ok(unsafe { rig.t().ep_post_recv_func.unwrap()(server, 1, &mut seg, DAT_DTO_COOKIE { as_64: 9 }, 0) }, "recv");
    send(&rig, client, client_seg, SEND_BYTES, 9);
    assert!(dequeue(&rig, client_dto).is_some());
    assert!(dequeue(&rig, server_dto).is_some());
    assert!(dequeue(&rig, client_dto).is_none());
    assert!(all(&rig, client, DCNT_EP_ALL_COUNTERS).iter().all(|&v| v == 0), "a stopped EP");
    assert_eq!(all(&rig, client_dto, DCNT_EVD_ALL_COUNTERS), evd_before, "a stopped EVD");
}

/// The IA counts the objects made and freed on it while started, EPs and
/// EVDs made after the start count from birth, and a stopped IA holds.
#[test]
fn an_ia_counts_its_objects_and_new_ones_count_from_birth() {
    let rig = Rig::new(c"counters-ia", SOFTHCA);
    ok(switch(&rig, rig.ia, true, DCNT_IA_CM), "dat_ib_start_counter");
    let pz = rig.pz();
    let evd = rig.evd(4, DAT_EVD_DTO_FLAG);
    // SAFETY: a live PZ.
    ok(unsafe { rig.t().pz_free_func.unwrap()(rig.pz()) }, "dat_pz_free");
    let ep = rig.ep(pz, evd, evd, ptr::null_mut());
    assert!(dequeue(&rig, evd).is_none());
    let ia = all(&rig, rig.ia, DCNT_IA_ALL_COUNTERS);
    assert_eq!(ia[DCNT_IA_PZ_CREATE as usize], 2);
    assert_eq!(ia[DCNT_IA_PZ_FREE as usize], 1);
    assert_eq!(ia[DCNT_IA_EVD_CREATE as usize], 1);
    assert_eq!(ia[DCNT_IA_EP_CREATE as usize], 1);
    assert_eq!(ia.iter().sum::<u64>(), 5, "nothing else: {ia:?}");
    let evd_counts = all(&rig, evd, DCNT_EVD_ALL_COUNTERS);
    assert_eq!((evd_counts[DCNT_EVD_DEQUEUE as usize], evd_counts[DCNT_EVD_DEQUEUE_NOT_FOUND as usize]), (1, 1));
    // SAFETY: a live EP.
    ok(unsafe { rig.t().ep_free_func.unwrap()(ep) }, "dat_ep_free");
    ok(switch(&rig, rig.ia, false, DCNT_IA_DIAG), "dat_ib_stop_counter");
    rig.pz();
    let ia = all(&rig, rig.ia, DCNT_IA_ALL_COUNTERS);
    assert_eq!((ia[DCNT_IA_EP_FREE as usize], ia[DCNT_IA_PZ_CREATE as usize]), (1, 2), "the PZ after the stop");
}

/// Bad handles and arguments get their DAT errors and write nothing: a
/// handle of a kind without counters, a stale or null handle, a counter
/// past the kind's, no place to write, a start on an EP, an unknown
/// counter type.
#[test]
fn bad_counters_calls_get_dat_errors() {
    let rig = Rig::new(c"counters-bad", SOFTHCA);
    let pz = rig.pz();
    let evd = rig.evd(4, DAT_EVD_DTO_FLAG);
    let mut out = [u64::MAX; 1];
    assert_eq!(ty(query(&rig, pz, 0, &mut out, false)), DAT_INVALID_HANDLE, "a PZ has no counters");
    assert_eq!(ty(query(&rig, evd, DCNT_EVD_ALL_COUNTERS + 1, &mut out, false)), DAT_INVALID_PARAMETER);
    assert_eq!(query(&rig, evd, u32::MAX, &mut out, false), DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
    assert_eq!(out, [u64::MAX], "nothing written");
    let null = udat_ext_counters { op: DAT_IB_QUERY_COUNTERS_OP, counter: 0, out: ptr::null_mut(), reset: 0, type_: 0 };
    assert_eq!(call(&rig, evd, null), DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG4);
    let ep = rig.ep(pz, evd, evd, ptr::null_mut());
    assert_eq!(switch(&rig, ep, true, DCNT_IA_LNK), DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA);
    assert_eq!(ty(switch(&rig, rig.ia, true, 7)), DAT_INVALID_PARAMETER);
    // SAFETY: a live EVD.
    ok(unsafe { rig.t().ep_free_func.unwrap()(ep) }, "dat_ep_free");
    assert_eq!(ty(query(&rig, ep, 0, &mut out, false)), DAT_INVALID_HANDLE, "a freed EP");
}

/// `dat_ib_open_query`'s body opens an IA of the named provider and fills
/// the attributes as `dat_ia_query` does: the IA's address, the
/// extension, and `DAT_COUNTERS` among the provider's attributes. An
/// unknown name, a null name and a null IA pointer get their errors.
#[test]
fn open_query_fills_the_attributes_of_an_ia_it_opens() {
    let rig = Rig::new(c"counters-query", SOFTHCA);
    let (mut ia, mut attr, mut provider) = (ptr::null_mut(), DAT_IA_ATTR::default(), DAT_PROVIDER_ATTR::default());
    let open = |name: *const core::ffi::c_char, ia: *mut DAT_IA_HANDLE, attr, provider| {
        // SAFETY: the pointers are null or valid.
        unsafe { udat_capi::entry::query::open_query(name, ia, u64::MAX, attr, u64::MAX, provider) }
    };
    ok(open(c"counters-query".as_ptr(), &mut ia, &mut attr, &mut provider), "dat_ib_open_query");
    assert!(!ia.is_null() && ia != rig.ia, "an IA of its own");
    assert!(!attr.ia_address_ptr.is_null(), "dtestx prints the address");
    assert_eq!(attr.extension_supported, DAT_EXTENSION_IB);
    // SAFETY: the provider's attributes point at static strings.
    let names: Vec<String> = (0..provider.num_provider_specific_attr as usize)
        .map(|i| unsafe {
            let a = *provider.provider_specific_attr.add(i);
            std::ffi::CStr::from_ptr(a.name).to_string_lossy().into_owned()
        })
        .collect();
    assert!(names.iter().any(|n| n == "DAT_COUNTERS"), "{names:?}");
    // dat_ib_close_query closes it abruptly, as `c/ext.c` does.
    // SAFETY: the IA just opened.
    ok(unsafe { rig.t().ia_close_func.unwrap()(ia, DAT_CLOSE_ABRUPT_FLAG) }, "dat_ib_close_query");

    let mut other = ptr::null_mut();
    assert_eq!(ty(open(c"no-such-provider".as_ptr(), &mut other, &mut attr, &mut provider)), DAT_PROVIDER_NOT_FOUND);
    let null_name = open(ptr::null(), &mut other, &mut attr, &mut provider);
    assert_eq!(null_name, DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
    let null_ia = open(c"counters-query".as_ptr(), ptr::null_mut(), &mut attr, &mut provider);
    assert_eq!(null_ia, DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG4);
    let no_attr = open(c"counters-query".as_ptr(), &mut other, ptr::null_mut(), &mut provider);
    assert_eq!(no_attr, DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG6, "the IA attributes' place");
    assert!(other.is_null(), "no IA handed out");
}
