//! What a real consumer relies on, through the provider table as libdat2
//! calls it: MVAPICH2 1.7's uDAPL channel (`src/mpid/ch3/channels/mrail/
//! src/udapl/` of `../shared/clients/mvapich2-1.7.tar.xz`), its calls with
//! its arguments in its order, two ranks on one software HCA, or on the
//! device `UDAT_CONSUMER_IA` names (`verbs rxe0` on soft-RoCE). The core's
//! tests hold each call's rules; this one holds the sequence. As in
//! MVAPICH2, the client rank makes no DAT call between its connect and
//! the server's wait for the request: over rdma_cm the connection must
//! progress without it.

mod common;

use std::ptr;

use common::{ok, ty, REGISTRATION, SOFTHCA};
use udat_capi::registry;
use udat_capi::sys::*;

/// `RDMA_DEFAULT_MAX_CQ_SIZE`, `DAPL_DEFAULT_MIN_EVD_SIZE`,
/// `DAPL_DEFAULT_ASYNC_EVD_SIZE` (udapl_param.h).
const MAX_CQ_SIZE: i32 = 6000;
const MIN_EVD_SIZE: i32 = 256;
const ASYNC_EVD_SIZE: i32 = 8;
/// `rdma_default_max_recv_wqe`, `rdma_default_max_send_wqe`,
/// `rdma_default_max_sg_list`, `DAPL_DEFAULT_MAX_RDMA_IN`/`_OUT`.
const MAX_RECV_WQE: i32 = 128;
const MAX_SEND_WQE: i32 = 64;
const MAX_SG_LIST: i32 = 20;
const MAX_RDMA_IN_OUT: i32 = 4;
/// `DAT_IA_ALL` of <dat2/udat.h> (a macro, so not in the bindings).
const IA_ALL: DAT_IA_ATTR_MASK = 0x3f_ffff_ffff;
/// `DAT_TIMEOUT_INFINITE`.
const TIMEOUT_INFINITE: DAT_TIMEOUT = !0;
/// The mask of its on-demand server's `dat_ep_query` (rdma_udapl_init.c).
const EP_PARAM_MASK: DAT_EP_PARAM_MASK = 0xffff;
/// Well within what a wait of the software HCA needs.
const WAIT_US: u32 = 5_000_000;

/// One rank's objects, as `rdma_iba_hca_init` makes them.
struct Rank {
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    cq: DAT_EVD_HANDLE,
    creq: DAT_EVD_HANDLE,
    conn: DAT_EVD_HANDLE,
    psp: DAT_PSP_HANDLE,
    service_id: DAT_CONN_QUAL,
    /// `MPIDI_CH3I_RDMA_util_get_ia_addr`: `sizeof (DAT_SOCK_ADDR)` bytes
    /// of `ia_address_ptr`, which it hands its peers through PMI.
    address: DAT_SOCK_ADDR,
    attr: DAT_IA_ATTR,
    /// `dat_psp_create` calls until one succeeded.
    psp_tries: u32,
}

fn rank(t: &DAT_PROVIDER, name: &std::ffi::CStr, first_qual: DAT_CONN_QUAL) -> Rank {
    let (mut ia, mut async_evd) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: a registered provider's slots, valid pointers throughout.
    unsafe {
        let open = t.ia_open_func.unwrap()(name.as_ptr().cast_mut(), ASYNC_EVD_SIZE, &mut async_evd, &mut ia);
        ok(open, "dat_ia_open");
        let (mut queried, mut attr) = (ptr::null_mut(), DAT_IA_ATTR::default());
        // "0, /* provider attr mask */ NULL); /* provider attr */"
        let query = t.ia_query_func.unwrap()(ia, &mut queried, IA_ALL, &mut attr, 0, ptr::null_mut());
        ok(query, "dat_ia_query");
        assert_eq!(queried, async_evd, "the async EVD dat_ia_open made");
        let address = ptr::read_unaligned(attr.ia_address_ptr);
        let mut pz = ptr::null_mut();
        ok(t.pz_create_func.unwrap()(ia, &mut pz), "dat_pz_create");
        let evd = |qlen: i32, flags| {
            let mut evd = ptr::null_mut();
            let qlen = qlen.min(attr.max_evd_qlen);
            ok(t.evd_create_func.unwrap()(ia, qlen, ptr::null_mut(), flags, &mut evd), "dat_evd_create");
            evd
        };
        let (cq, creq, conn) = (
            evd(MAX_CQ_SIZE, DAT_EVD_DTO_FLAG),
            evd(MIN_EVD_SIZE, DAT_EVD_CR_FLAG),
            evd(MIN_EVD_SIZE, DAT_EVD_CONNECTION_FLAG),
        );
        // "while(ret != DAT_SUCCESS){ ... service_id[pg_rank][i] += 1024;"
        let (mut psp, mut service_id, mut psp_tries) = (ptr::null_mut(), first_qual, 1);
        loop {
            let ret = t.psp_create_func.unwrap()(ia, service_id, creq, DAT_PSP_CONSUMER_FLAG, &mut psp);
            if ret == DAT_SUCCESS {
                break;
            }
            assert_eq!(ty(ret), DAT_CONN_QUAL_IN_USE, "dat_psp_create of {service_id}: {ret:#x}");
            assert!(psp_tries < 64, "no free qualifier");
            service_id += 1024;
            psp_tries += 1;
        }
        Rank { ia, pz, cq, creq, conn, psp, service_id, address, attr, psp_tries }
    }
}

/// The attributes of its "else" branch (`rdma_udapl_priv.c`): requests
/// unsignalled, receives signalled, both streams on the rank's one DTO EVD.
fn ep(t: &DAT_PROVIDER, r: &Rank) -> DAT_EP_HANDLE {
    let a = &r.attr;
    let attr = DAT_EP_ATTR {
        service_type: DAT_SERVICE_TYPE_RC,
        // `max_mtu_size` is a macro for this field: it sets 2048 first and
        // the IA's maximum after.
        max_message_size: a.max_message_size,
        max_rdma_size: a.max_rdma_size,
        qos: DAT_QOS_BEST_EFFORT,
        recv_completion_flags: DAT_COMPLETION_DEFAULT_FLAG,
        request_completion_flags: DAT_COMPLETION_UNSIGNALLED_FLAG,
        max_recv_dtos: MAX_RECV_WQE.min(a.max_dto_per_ep),
        max_request_dtos: MAX_SEND_WQE.min(a.max_dto_per_ep),
        max_recv_iov: MAX_SG_LIST.min(a.max_iov_segments_per_dto),
        max_request_iov: MAX_SG_LIST.min(a.max_iov_segments_per_dto),
        max_rdma_read_in: MAX_RDMA_IN_OUT,
        max_rdma_read_out: MAX_RDMA_IN_OUT,
        srq_soft_hw: 0,
        max_rdma_read_iov: 0,
        max_rdma_write_iov: 0,
        ep_transport_specific_count: 0,
        ep_transport_specific: ptr::null_mut(),
        ep_provider_specific_count: 0,
        ep_provider_specific: ptr::null_mut(),
    };
    let mut ep = ptr::null_mut();
    // SAFETY: live handles of this provider and valid pointers.
    let ret = unsafe { t.ep_create_func.unwrap()(r.ia, r.pz, r.cq, r.cq, r.conn, &attr, &mut ep) };
    ok(ret, "dat_ep_create (\"Could not create EP\")");
    ep
}

/// `dat_evd_wait` with a threshold of 1, as every wait of the channel.
fn wait(t: &DAT_PROVIDER, evd: DAT_EVD_HANDLE) -> DAT_EVENT {
    let (mut event, mut nmore) = (DAT_EVENT::default(), 0);
    // SAFETY: a live EVD and valid out-pointers.
    ok(unsafe { t.evd_wait_func.unwrap()(evd, WAIT_US, 1, &mut event, &mut nmore) }, "dat_evd_wait");
    event
}

/// A DTO completion of `cq` (`MPIDI_CH3I_MRAILI_Cq_poll` asserts that
/// every event there is one): its cookie and transferred length.
fn completion(t: &DAT_PROVIDER, cq: DAT_EVD_HANDLE) -> (u64, DAT_SEG_LENGTH) {
    let e = wait(t, cq);
    assert_eq!(e.event_number, DAT_DTO_COMPLETION_EVENT);
    // SAFETY: a DTO completion's data.
    let d = unsafe { e.event_data.dto_completion_event_data };
    assert_eq!(d.status, DAT_DTO_SUCCESS);
    // SAFETY: the cookies here are integers.
    (unsafe { d.user_cookie.as_64 }, d.transfered_length)
}

fn registered(t: &DAT_PROVIDER, r: &Rank, buf: &mut [u8]) -> (DAT_LMR_HANDLE, DAT_LMR_CONTEXT, DAT_RMR_CONTEXT) {
    let (mut lmr, mut lkey, mut rkey, mut size, mut addr) = (ptr::null_mut(), 0, 0, 0, 0);
    let region = DAT_REGION_DESCRIPTION { for_va: buf.as_mut_ptr().cast() };
    // SAFETY: the buffer outlives the LMR (freed below), valid pointers.
    let ret = unsafe {
        t.lmr_create_func.unwrap()(
            r.ia,
            DAT_MEM_TYPE_VIRTUAL,
            region,
            buf.len() as u64,
            r.pz,
            DAT_MEM_PRIV_ALL_FLAG,
            DAT_VA_TYPE_VA,
            &mut lmr,
            &mut lkey,
            &mut rkey,
            &mut size,
            &mut addr,
        )
    };
    ok(ret, "dat_lmr_create (\"cannot create lmr\")");
    (lmr, lkey, rkey)
}

/// MPI_Init to MPI_Finalize of two ranks over the software HCA: the IA
/// and its EVDs, a PSP on `1024 + getpid() + i` retried 1024 higher while
/// the qualifier is taken, EPs whose receives are signalled and whose
/// requests are not on one EVD, the connection with the rank in private
/// data, sends, RDMA writes and a fenced RDMA read signalled by default,
/// and the teardown, which frees registrations with a receive still
/// posted, disconnects gracefully on both sides, and closes gracefully.
#[test]
fn mvapich2_udapl_channel_from_init_to_finalize() {
    let name = c"consumer-mvapich2";
    let params = std::env::var("UDAT_CONSUMER_IA").unwrap_or_else(|_| SOFTHCA.to_string());
    let table = udat_capi::register(name, &params, REGISTRATION).expect("register the provider");
    // SAFETY: registered until the end of the test.
    let t = unsafe { &*table };
    let qual = 1024 + u64::from(std::process::id());
    // Both ranks of this process start from the same qualifier: the
    // second finds it taken and moves on, as MVAPICH2's loop expects.
    let ranks = [rank(t, name, qual), rank(t, name, qual)];
    assert_eq!((ranks[0].service_id, ranks[0].psp_tries), (qual, 1));
    assert_eq!((ranks[1].service_id, ranks[1].psp_tries), (qual + 1024, 2));
    let eps = [ep(t, &ranks[0]), ep(t, &ranks[1])];

    // rdma_iba_enable_connections: rank 1 is the client of rank 0, with its
    // rank as private data, to the address rank 0 published.
    let (server, client) = (&ranks[0], &ranks[1]);
    let me: i32 = 1;
    let mut address = server.address;
    // SAFETY: live handles; the private data is `sizeof (int)` bytes.
    let ret = unsafe {
        t.ep_connect_func.unwrap()(
            eps[1],
            &mut address,
            server.service_id,
            TIMEOUT_INFINITE,
            std::mem::size_of::<i32>() as i32,
            ptr::from_ref(&me).cast_mut().cast(),
            DAT_QOS_BEST_EFFORT,
            DAT_CONNECT_DEFAULT_FLAG,
        )
    };
    ok(ret, "dat_ep_connect");
    // conn_server: the request names the PSP and its qualifier, and its
    // private data names the client's rank.
    let request = wait(t, server.creq);
    assert_eq!(request.event_number, DAT_CONNECTION_REQUEST_EVENT);
    // SAFETY: a request's data.
    let arrival = unsafe { request.event_data.cr_arrival_event_data };
    // SAFETY: the PSP member of the union is the one set for a PSP.
    assert_eq!((arrival.conn_qual, unsafe { arrival.sp_handle.psp_handle }), (server.service_id, server.psp));
    let mut cr_param = DAT_CR_PARAM::default();
    // SAFETY: a live CR and a valid out-pointer.
    ok(
        unsafe { t.cr_query_func.unwrap()(arrival.cr_handle, DAT_CR_FIELD_PRIVATE_DATA, &mut cr_param) },
        "dat_cr_query",
    );
    assert!(cr_param.private_data_size >= 4);
    // SAFETY: at least four bytes of private data, valid until the accept.
    assert_eq!(unsafe { cr_param.private_data.cast::<i32>().read_unaligned() }, me);
    // SAFETY: a live CR and EP, no private data.
    ok(unsafe { t.cr_accept_func.unwrap()(arrival.cr_handle, eps[0], 0, ptr::null_mut()) }, "dat_cr_accept");
    for (r, side) in [(client, "active"), (server, "passive")] {
        let e = wait(t, r.conn);
        assert_eq!(e.event_number, DAT_CONNECTION_EVENT_ESTABLISHED, "{side} side");
        if side == "passive" {
            // Its on-demand server tells the accept it made (size 0) from
            // a peer's accept of its own request (the peer's rank).
            // SAFETY: a connection event's data.
            assert_eq!(unsafe { e.event_data.connect_event_data.private_data_size }, 0);
        }
    }
    let mut param = DAT_EP_PARAM::default();
    // SAFETY: a live EP and a valid out-pointer.
    ok(unsafe { t.ep_query_func.unwrap()(eps[0], EP_PARAM_MASK, &mut param) }, "dat_ep_query");
    assert_eq!(param.ep_state, DAT_EP_STATE_CONNECTED);

    // MRAILI_Init_vc preposts receives; eager sends and the RDMA fast
    // path's writes are signalled (DAT_COMPLETION_DEFAULT_FLAG) on the
    // EP whose requests are unsignalled; a one-sided get may be fenced.
    let (mut server_buf, mut client_buf) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    client_buf.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let (server_lmr, server_lkey, server_rkey) = registered(t, server, &mut server_buf);
    let (client_lmr, client_lkey, _) = registered(t, client, &mut client_buf);
    let seg = |buf: &[u8], at: usize, len: usize, lkey| DAT_LMR_TRIPLET {
        virtual_address: buf.as_ptr() as u64 + at as u64,
        segment_length: len as u32,
        lmr_context: lkey,
    };
    let remote = |at: usize, len: usize| DAT_RMR_TRIPLET {
        virtual_address: server_buf.as_ptr() as u64 + at as u64,
        segment_length: len as u32,
        rmr_context: server_rkey,
    };
    let cookie = |c: u64| DAT_DTO_COOKIE { as_64: c };
    // SAFETY: live EPs, segments inside live LMRs, valid pointers.
    unsafe {
        let mut unsignalled_recv = seg(&server_buf, 0, 64, server_lkey);
        let ret =
            t.ep_post_recv_func.unwrap()(eps[0], 1, &mut unsignalled_recv, cookie(9), DAT_COMPLETION_UNSIGNALLED_FLAG);
        assert_eq!(ty(ret), DAT_INVALID_PARAMETER, "an unsignalled receive on a signalled stream");
        for c in 1..=2 {
            let mut recv = seg(&server_buf, 4096 * c as usize, 4096, server_lkey);
            ok(t.ep_post_recv_func.unwrap()(eps[0], 1, &mut recv, cookie(c), DAT_COMPLETION_DEFAULT_FLAG), "recv");
        }
        let mut send = seg(&client_buf, 0, 1000, client_lkey);
        ok(t.ep_post_send_func.unwrap()(eps[1], 1, &mut send, cookie(10), DAT_COMPLETION_DEFAULT_FLAG), "send");
        let mut write = seg(&client_buf, 16384, 8192, client_lkey);
        let to = remote(16384, 8192);
        ok(t.ep_post_rdma_write_func.unwrap()(eps[1], 1, &mut write, cookie(11), &to, 0), "rdma write");
        let mut read = seg(&client_buf, 32768, 512, client_lkey);
        let from = remote(16384, 512);
        let fence = DAT_COMPLETION_BARRIER_FENCE_FLAG;
        ok(t.ep_post_rdma_read_func.unwrap()(eps[1], 1, &mut read, cookie(12), &from, fence), "rdma read");
    }
    assert_eq!(completion(t, server.cq), (1, 1000));
    let mut requests = [completion(t, client.cq), completion(t, client.cq), completion(t, client.cq)];
    requests.sort_unstable();
    assert_eq!(requests, [(10, 1000), (11, 8192), (12, 512)]);
    assert_eq!(server_buf[4096..5096], client_buf[..1000]);
    assert_eq!(server_buf[16384..24576], client_buf[16384..24576]);
    assert_eq!(client_buf[32768..33280], client_buf[16384..16896]);

    // MPIDI_CH3I_RDMA_finalize: registrations go first, with receive 2
    // still posted; then a graceful disconnect by each side and one
    // DISCONNECTED for each EP it disconnected; then the frees, and a
    // graceful close that succeeds.
    // SAFETY: live handles of this provider, each freed once.
    unsafe {
        ok(t.lmr_free_func.unwrap()(server_lmr), "dat_lmr_free");
        ok(t.lmr_free_func.unwrap()(client_lmr), "dat_lmr_free");
        for ep in eps {
            ok(t.ep_disconnect_func.unwrap()(ep, DAT_CLOSE_GRACEFUL_FLAG), "dat_ep_disconnect");
        }
        for r in &ranks {
            let e = wait(t, r.conn);
            assert_eq!(e.event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
        }
        for (r, ep) in ranks.iter().zip(eps) {
            ok(t.ep_free_func.unwrap()(ep), "dat_ep_free");
            ok(t.psp_free_func.unwrap()(r.psp), "dat_psp_free");
            for evd in [r.conn, r.creq, r.cq] {
                ok(t.evd_free_func.unwrap()(evd), "dat_evd_free");
            }
            ok(t.pz_free_func.unwrap()(r.pz), "dat_pz_free");
            ok(t.ia_close_func.unwrap()(r.ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close graceful");
        }
    }
    assert!(registry::remove(table));
}

/// `DAT_EP_FIELD_PZ_HANDLE`, `_RECV_EVD_HANDLE`, `_REQUEST_EVD_HANDLE`,
/// `_CONNECT_EVD_HANDLE` (macros, so not in the bindings).
const EP_FIELD_PZ_AND_EVDS: DAT_EP_PARAM_MASK = 0x80 | 0x100 | 0x200 | 0x400;

/// An EP that a `DAT_PSP_PROVIDER` PSP made has no handle until
/// dat_cr_query(3DAT) gives it one; its completions then carry that
/// handle, the receive's and the send's alike, however the dequeue takes
/// them (the lane takes only an EP named by its handle).
#[test]
fn the_completions_of_an_ep_the_provider_made_carry_the_handle_dat_cr_query_gave() {
    let name = c"consumer-psp-provider";
    let params = std::env::var("UDAT_CONSUMER_IA").unwrap_or_else(|_| SOFTHCA.to_string());
    let table = udat_capi::register(name, &params, REGISTRATION).expect("register the provider");
    // SAFETY: registered until the end of the test.
    let t = unsafe { &*table };
    let qual = 3 * 1024 + u64::from(std::process::id());
    let (server, client) = (rank(t, name, qual), rank(t, name, qual + 100_000));
    let client_ep = ep(t, &client);
    let (mut psp, mut psp_qual) = (ptr::null_mut(), server.service_id + 1);
    // SAFETY: live handles of this provider and valid pointers throughout.
    unsafe {
        while ty(t.psp_create_func.unwrap()(server.ia, psp_qual, server.creq, DAT_PSP_PROVIDER_FLAG, &mut psp))
            == DAT_CONN_QUAL_IN_USE
        {
            psp_qual += 1024;
        }
        assert!(!psp.is_null(), "dat_psp_create with DAT_PSP_PROVIDER_FLAG");
        let mut address = server.address;
        let connect = t.ep_connect_func.unwrap()(
            client_ep,
            &mut address,
            psp_qual,
            TIMEOUT_INFINITE,
            0,
            ptr::null_mut(),
            DAT_QOS_BEST_EFFORT,
            DAT_CONNECT_DEFAULT_FLAG,
        );
        ok(connect, "dat_ep_connect");
    }
    let request = wait(t, server.creq);
    assert_eq!(request.event_number, DAT_CONNECTION_REQUEST_EVENT);
    // SAFETY: a request's data.
    let cr = unsafe { request.event_data.cr_arrival_event_data.cr_handle };
    let mut cr_param = DAT_CR_PARAM::default();
    // SAFETY: a live CR and a valid out-pointer.
    ok(unsafe { t.cr_query_func.unwrap()(cr, DAT_CR_FIELD_ALL, &mut cr_param) }, "dat_cr_query");
    let server_ep = cr_param.local_ep_handle;
    assert!(!server_ep.is_null(), "the EP the provider made");
    let mut param = DAT_EP_PARAM {
        pz_handle: server.pz,
        recv_evd_handle: server.cq,
        request_evd_handle: server.cq,
        connect_evd_handle: server.conn,
        ..DAT_EP_PARAM::default()
    };
    // SAFETY: live handles and valid pointers.
    unsafe {
        ok(t.ep_modify_func.unwrap()(server_ep, EP_FIELD_PZ_AND_EVDS, &mut param), "dat_ep_modify");
        ok(t.cr_accept_func.unwrap()(cr, server_ep, 0, ptr::null_mut()), "dat_cr_accept");
    }
    for r in [&client, &server] {
        assert_eq!(wait(t, r.conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    }
    let (mut server_buf, mut client_buf) = (vec![0u8; 8192], vec![7u8; 8192]);
    let (server_lmr, server_lkey, _) = registered(t, &server, &mut server_buf);
    let (client_lmr, client_lkey, _) = registered(t, &client, &mut client_buf);
    let seg = |buf: &[u8], len: usize, lkey| DAT_LMR_TRIPLET {
        virtual_address: buf.as_ptr() as u64,
        segment_length: len as u32,
        lmr_context: lkey,
    };
    let cookie = |c: u64| DAT_DTO_COOKIE { as_64: c };
    // dat_evd_dequeue, the call whose lane takes a completion.
    let dequeue = |evd| {
        let mut e = DAT_EVENT::default();
        let mut tries = 0;
        // SAFETY: a live EVD and a valid out-pointer.
        while ty(unsafe { t.evd_dequeue_func.unwrap()(evd, &mut e) }) == DAT_QUEUE_EMPTY {
            tries += 1;
            assert!(tries < 10_000_000, "no completion");
        }
        assert_eq!(e.event_number, DAT_DTO_COMPLETION_EVENT);
        // SAFETY: a DTO completion's data.
        let d = unsafe { e.event_data.dto_completion_event_data };
        assert_eq!(d.status, DAT_DTO_SUCCESS);
        // SAFETY: the cookies here are integers.
        (d.ep_handle, unsafe { d.user_cookie.as_64 })
    };
    // Each way twice: a receive and a send of the EP the provider made.
    for round in 0..2 {
        // SAFETY: live EPs, segments inside live LMRs, valid pointers.
        unsafe {
            let mut recv = seg(&server_buf, 4096, server_lkey);
            ok(t.ep_post_recv_func.unwrap()(server_ep, 1, &mut recv, cookie(1), DAT_COMPLETION_DEFAULT_FLAG), "recv");
            let mut send = seg(&client_buf, 100, client_lkey);
            let flags = DAT_COMPLETION_SUPPRESS_FLAG;
            ok(t.ep_post_send_func.unwrap()(client_ep, 1, &mut send, cookie(2), flags), "send");
        }
        assert_eq!(dequeue(server.cq), (server_ep, 1), "round {round}: the receive");
        // SAFETY: as above.
        unsafe {
            let mut recv = seg(&client_buf, 4096, client_lkey);
            ok(t.ep_post_recv_func.unwrap()(client_ep, 1, &mut recv, cookie(3), DAT_COMPLETION_DEFAULT_FLAG), "recv");
            let mut send = seg(&server_buf, 100, server_lkey);
            ok(t.ep_post_send_func.unwrap()(server_ep, 1, &mut send, cookie(4), DAT_COMPLETION_DEFAULT_FLAG), "send");
        }
        assert_eq!(dequeue(server.cq), (server_ep, 4), "round {round}: the send");
        assert_eq!(dequeue(client.cq), (client_ep, 3), "round {round}: the peer's receive");
    }
    // SAFETY: live handles of this provider, each freed once.
    unsafe {
        ok(t.lmr_free_func.unwrap()(server_lmr), "dat_lmr_free");
        ok(t.lmr_free_func.unwrap()(client_lmr), "dat_lmr_free");
        for ep in [client_ep, server_ep] {
            ok(t.ep_free_func.unwrap()(ep), "dat_ep_free");
        }
        ok(t.psp_free_func.unwrap()(psp), "dat_psp_free");
        for r in [&server, &client] {
            ok(t.psp_free_func.unwrap()(r.psp), "dat_psp_free");
            for evd in [r.conn, r.creq, r.cq] {
                ok(t.evd_free_func.unwrap()(evd), "dat_evd_free");
            }
            ok(t.pz_free_func.unwrap()(r.pz), "dat_pz_free");
            ok(t.ia_close_func.unwrap()(r.ia, DAT_CLOSE_ABRUPT_FLAG), "dat_ia_close");
        }
    }
    assert!(registry::remove(table));
}
