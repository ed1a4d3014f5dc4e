//! The DAT 2.0 calls of the provider table on the software HCA, as a
//! consumer of `<dat2/udat.h>` reaches them: dat_rmr_create_for_ep with
//! dat_ep_post_send_with_invalidate, dat_ep_post_rdma_read_to_rmr,
//! dat_lmr_create of `DAT_MEM_TYPE_SHARED_VIRTUAL`, and the Common Service
//! Point with dat_ep_common_connect. The core's tests hold
//! the rest of each call's rules (`core/tests/dat20.rs`).

mod common;

use std::ptr;

use common::{ok, ty, Rig, SOFTHCA};
use udat_capi::sys::*;

const CONN_QUAL: u64 = 7420;

/// The full return code of an argument error: class, type and subtype.
fn invalid_arg(subtype: DAT_RETURN) -> DAT_RETURN {
    DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | subtype
}

/// Two connected EPs of `rig` in `pz`, each with one EVD for its DTOs and
/// binds and one for its connection: (client, client DTO EVD, server,
/// server DTO EVD).
fn pair(rig: &Rig, pz: DAT_PZ_HANDLE) -> (DAT_EP_HANDLE, DAT_EVD_HANDLE, DAT_EP_HANDLE, DAT_EVD_HANDLE) {
    let cr_evd = rig.evd(4, DAT_EVD_CR_FLAG);
    rig.psp(CONN_QUAL, cr_evd);
    let flags = DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG;
    let (client_dto, server_dto) = (rig.evd(16, flags), rig.evd(16, flags));
    let (client_conn, server_conn) = (rig.evd(4, DAT_EVD_CONNECTION_FLAG), rig.evd(4, DAT_EVD_CONNECTION_FLAG));
    let client = rig.ep(pz, client_dto, client_dto, client_conn);
    let server = rig.ep(pz, server_dto, server_dto, server_conn);
    rig.connect(client, server, CONN_QUAL, cr_evd);
    assert_eq!(rig.next(client_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    assert_eq!(rig.next(server_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    (client, client_dto, server, server_dto)
}

/// A window of `DAT_RMR_SCOPE_EP` bound through the server's EP is
/// reached by its peer until the peer's send with invalidate: the
/// server's receive completes as `DAT_DTO_RECEIVE_WITH_INVALIDATE` with
/// the context in `rmr_context`, and the window is unbound. An
/// invalidate flag other than `DAT_TRUE` or `DAT_FALSE` is
/// `DAT_INVALID_ARG6` and posts nothing.
#[test]
fn a_send_with_invalidate_through_the_table_unbinds_the_peers_window() {
    let (mut local, mut target) = (vec![0u8; 4096], vec![0u8; 4096]);
    let rig = Rig::new(c"dat20-invalidate", SOFTHCA);
    let t = rig.t();
    let pz = rig.pz();
    let (client, client_dto, server, server_dto) = pair(&rig, pz);
    let mut provider = DAT_PROVIDER_ATTR::default();
    // SAFETY: a live IA and a valid out-pointer.
    let ret = unsafe { t.ia_query_func.unwrap()(rig.ia, ptr::null_mut(), 0, ptr::null_mut(), u64::MAX, &mut provider) };
    ok(ret, "dat_ia_query");
    assert_eq!(provider.rmr_scope_supported, DAT_RMR_SCOPE_ANY, "RMRs of a PZ and of an EP");
    let (_, local_context, _) = rig.lmr(pz, &mut local, DAT_MEM_PRIV_ALL_FLAG);
    let (target_lmr, target_context, _) = rig.lmr(pz, &mut target, DAT_MEM_PRIV_ALL_FLAG);
    let mut rmr = ptr::null_mut();
    // SAFETY: a live PZ and a valid out-pointer.
    ok(unsafe { t.rmr_create_for_ep_func.unwrap()(pz, &mut rmr) }, "dat_rmr_create_for_ep");
    let window =
        DAT_LMR_TRIPLET { lmr_context: target_context, virtual_address: target.as_ptr() as u64, segment_length: 1024 };
    let mut context = 0;
    // SAFETY: live handles of this provider, a valid triplet and out-pointer.
    let ret = unsafe {
        t.rmr_bind_func.unwrap()(
            rmr,
            target_lmr,
            &window,
            DAT_MEM_PRIV_REMOTE_WRITE_FLAG,
            DAT_VA_TYPE_VA,
            server,
            DAT_RMR_COOKIE { as_64: 1 },
            DAT_COMPLETION_DEFAULT_FLAG,
            &mut context,
        )
    };
    ok(ret, "dat_rmr_bind");
    assert_eq!(rig.next(server_dto).event_number, DAT_RMR_BIND_COMPLETION_EVENT);
    let mut param = DAT_RMR_PARAM::default();
    // SAFETY: a live RMR and a valid out-pointer.
    ok(unsafe { t.rmr_query_func.unwrap()(rmr, DAT_RMR_FIELD_ALL, &mut param) }, "dat_rmr_query");
    assert_eq!((param.rmr_scope, param.rmr_context), (DAT_RMR_SCOPE_EP, context));

    let mut inbox = DAT_LMR_TRIPLET {
        lmr_context: local_context,
        virtual_address: local.as_ptr() as u64 + 2048,
        segment_length: 64,
    };
    // SAFETY: a live EP and a segment of a live LMR.
    let ret = unsafe {
        t.ep_post_recv_func.unwrap()(server, 1, &mut inbox, DAT_DTO_COOKIE { as_64: 2 }, DAT_COMPLETION_DEFAULT_FLAG)
    };
    ok(ret, "dat_ep_post_recv");
    let mut message =
        DAT_LMR_TRIPLET { lmr_context: local_context, virtual_address: local.as_ptr() as u64, segment_length: 16 };
    let send = |invalidate: DAT_BOOLEAN, message: &mut DAT_LMR_TRIPLET| {
        // SAFETY: a live EP and a segment of a live LMR.
        unsafe {
            t.ep_post_send_with_invalidate_func.unwrap()(
                client,
                1,
                message,
                DAT_DTO_COOKIE { as_64: 3 },
                DAT_COMPLETION_DEFAULT_FLAG,
                invalidate,
                context,
            )
        }
    };
    assert_eq!(send(2, &mut message), invalid_arg(DAT_INVALID_ARG6));
    ok(send(DAT_TRUE, &mut message), "dat_ep_post_send_with_invalidate");
    let sent = rig.next(client_dto);
    // SAFETY: a DTO completion's data.
    let sent = unsafe { sent.event_data.dto_completion_event_data };
    // SAFETY: a cookie is 64 bits, whichever member was set.
    let cookie = unsafe { sent.user_cookie.as_64 };
    assert_eq!((sent.status, sent.operation, cookie), (DAT_DTO_SUCCESS, DAT_DTO_SEND, 3));
    let received = rig.next(server_dto);
    assert_eq!(received.event_number, DAT_DTO_COMPLETION_EVENT);
    // SAFETY: a DTO completion's data.
    let received = unsafe { received.event_data.dto_completion_event_data };
    assert_eq!(received.operation, DAT_DTO_RECEIVE_WITH_INVALIDATE);
    assert_eq!((received.status, received.transfered_length, received.rmr_context), (DAT_DTO_SUCCESS, 16, context));
    // SAFETY: a live RMR and a valid out-pointer.
    ok(unsafe { t.rmr_query_func.unwrap()(rmr, DAT_RMR_FIELD_ALL, &mut param) }, "dat_rmr_query");
    assert_eq!(param.rmr_context, 0, "unbound");
    // SAFETY: a live LMR, no RMR bound to it any more; a live RMR.
    unsafe {
        ok(t.lmr_free_func.unwrap()(target_lmr), "dat_lmr_free");
        ok(t.rmr_free_func.unwrap()(rmr), "dat_rmr_free");
    }
}

/// dat_ep_post_rdma_read_to_rmr reads the peer's memory into the local
/// memory an LMR's RMR context names; a null local triplet is
/// `DAT_INVALID_ARG2`, a null remote one `DAT_INVALID_ARG4`, a stale EP
/// `DAT_INVALID_HANDLE`.
#[test]
fn rdma_read_to_rmr_through_the_table() {
    let (mut sink, mut source) = (vec![0u8; 4096], vec![0u8; 4096]);
    source[..64].copy_from_slice(&[0x5a; 64]);
    let rig = Rig::new(c"dat20-read-to-rmr", SOFTHCA);
    let t = rig.t();
    let pz = rig.pz();
    let (client, client_dto, _, _) = pair(&rig, pz);
    let (_, _, sink_context) = rig.lmr(pz, &mut sink, DAT_MEM_PRIV_ALL_FLAG);
    let (_, _, source_context) = rig.lmr(pz, &mut source, DAT_MEM_PRIV_ALL_FLAG);
    let local =
        DAT_RMR_TRIPLET { rmr_context: sink_context, virtual_address: sink.as_ptr() as u64 + 128, segment_length: 64 };
    let remote =
        DAT_RMR_TRIPLET { rmr_context: source_context, virtual_address: source.as_ptr() as u64, segment_length: 64 };
    let read = |ep, local: *const DAT_RMR_TRIPLET, remote: *const DAT_RMR_TRIPLET| {
        // SAFETY: the triplets are null or valid; the EP is under test.
        unsafe {
            t.ep_post_rdma_read_to_rmr_func.unwrap()(
                ep,
                local,
                DAT_DTO_COOKIE { as_64: 9 },
                remote,
                DAT_COMPLETION_DEFAULT_FLAG,
            )
        }
    };
    assert_eq!(read(client, ptr::null(), &remote), invalid_arg(DAT_INVALID_ARG2));
    assert_eq!(read(client, &local, ptr::null()), invalid_arg(DAT_INVALID_ARG4));
    ok(read(client, &local, &remote), "dat_ep_post_rdma_read_to_rmr");
    let done = rig.next(client_dto);
    // SAFETY: a DTO completion's data.
    let done = unsafe { done.event_data.dto_completion_event_data };
    assert_eq!((done.status, done.operation, done.transfered_length), (DAT_DTO_SUCCESS, DAT_DTO_RDMA_READ, 64));
    assert_eq!(&sink[128..192], &[0x5a; 64]);
    let unknown = DAT_RMR_TRIPLET { rmr_context: sink_context ^ 0xff00_0000, ..local };
    assert_eq!(ty(read(client, &unknown, &remote)), DAT_PROTECTION_VIOLATION);
    // SAFETY: a live EP.
    ok(unsafe { t.ep_disconnect_func.unwrap()(client, DAT_CLOSE_ABRUPT_FLAG) }, "dat_ep_disconnect");
    // SAFETY: a disconnected EP.
    ok(unsafe { t.ep_free_func.unwrap()(client) }, "dat_ep_free");
    assert_eq!(ty(read(client, &local, &remote)), DAT_INVALID_HANDLE);
}

/// dat_lmr_create of `DAT_MEM_TYPE_SHARED_VIRTUAL` through the table:
/// the C ABI hands the core the cookie's 40 bytes, whatever they hold, so
/// the core's rules apply as they are; a null cookie is
/// `DAT_INVALID_ARG3`. dat_lmr_query reports the type, address and
/// length.
#[test]
fn shared_virtual_lmrs_through_the_table() {
    let mem = vec![0u8; 8192];
    let rig = Rig::new(c"dat20-shared", SOFTHCA);
    let t = rig.t();
    let pz = rig.pz();
    let mut cookie: [libc::c_char; 40] = [0; 40];
    cookie[0] = b'x' as libc::c_char;
    let create = |id: DAT_LMR_COOKIE, length: u64| {
        let region = DAT_REGION_DESCRIPTION {
            for_shared_memory: DAT_SHARED_MEMORY { virtual_address: mem.as_ptr() as DAT_PVOID, shared_memory_id: id },
        };
        let mut lmr = ptr::null_mut();
        // SAFETY: a live IA and PZ, a region the test keeps, a valid
        // out-pointer and null optional ones.
        let ret = unsafe {
            t.lmr_create_func.unwrap()(
                rig.ia,
                DAT_MEM_TYPE_SHARED_VIRTUAL,
                region,
                length,
                pz,
                DAT_MEM_PRIV_ALL_FLAG,
                DAT_VA_TYPE_VA,
                &mut lmr,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        (ret, lmr)
    };
    assert_eq!(create(ptr::null_mut(), 8192).0, invalid_arg(DAT_INVALID_ARG3));
    let (ret, first) = create(&mut cookie, 8192);
    ok(ret, "dat_lmr_create (shared)");
    let (ret, second) = create(&mut cookie, 8192);
    ok(ret, "dat_lmr_create (shared, same cookie)");
    assert_ne!(first, second);
    assert_eq!(create(&mut cookie, 4096).0, invalid_arg(DAT_INVALID_ARG4));
    cookie[39] = 1;
    let (ret, other) = create(&mut cookie, 4096);
    ok(ret, "dat_lmr_create (shared, a cookie that differs past its NUL)");
    let mut param = DAT_LMR_PARAM::default();
    // SAFETY: a live LMR and a valid out-pointer.
    ok(unsafe { t.lmr_query_func.unwrap()(other, DAT_LMR_FIELD_ALL, &mut param) }, "dat_lmr_query");
    assert_eq!((param.mem_type, param.length), (DAT_MEM_TYPE_SHARED_VIRTUAL, 4096));
    // SAFETY: the member the query wrote for this type.
    let shared = unsafe { param.region_desc.for_shared_memory };
    assert_eq!(shared.virtual_address as usize, mem.as_ptr() as usize);
    assert!(shared.shared_memory_id.is_null());
}

/// DAT 2.0's Common Service Point through the table: dat_csp_create on
/// the IA's address and a port, dat_ep_common_connect to it, the request
/// arriving with the CSP as its service point; dat_csp_query and
/// dat_get_handle_type; a freed CSP, a PSP's handle and null arguments
/// refused.
#[test]
fn a_common_service_point_through_the_table() {
    let rig = Rig::new(c"dat20-csp", SOFTHCA);
    let t = rig.t();
    let pz = rig.pz();
    let cr_evd = rig.evd(4, DAT_EVD_CR_FLAG);
    let (client_conn, server_conn) = (rig.evd(4, DAT_EVD_CONNECTION_FLAG), rig.evd(4, DAT_EVD_CONNECTION_FLAG));
    let dto = rig.evd(8, DAT_EVD_DTO_FLAG);
    let (client, server) = (rig.ep(pz, dto, dto, client_conn), rig.ep(pz, dto, dto, server_conn));
    // SAFETY: the IA's address is a sockaddr_in on the software HCA.
    let mut address = unsafe { *rig.attr().ia_address_ptr.cast::<libc::sockaddr_in>() };
    assert_eq!(i32::from(address.sin_family), libc::AF_INET);
    address.sin_port = 7421u16.to_be();
    let address_ptr = ptr::addr_of_mut!(address).cast::<DAT_SOCK_ADDR>();
    let mut comm = DAT_COMM { domain: libc::AF_INET, type_: libc::SOCK_STREAM, protocol: 0 };
    let create = |comm: *mut DAT_COMM, address: DAT_IA_ADDRESS_PTR| {
        let mut csp = ptr::null_mut();
        // SAFETY: a live IA and EVD; the communicator and address are null
        // or valid; a valid out-pointer.
        let ret = unsafe { t.csp_create_func.unwrap()(rig.ia, comm, address, cr_evd, &mut csp) };
        (ret, csp)
    };
    assert_eq!(create(ptr::null_mut(), address_ptr).0, invalid_arg(DAT_INVALID_ARG2));
    assert_eq!(create(&mut comm, ptr::null_mut()).0, invalid_arg(DAT_INVALID_ARG3));
    let (ret, csp) = create(&mut comm, address_ptr);
    ok(ret, "dat_csp_create");

    let mut param = DAT_CSP_PARAM {
        ia_handle: ptr::null_mut(),
        comm: ptr::null_mut(),
        address_ptr: ptr::null_mut(),
        evd_handle: ptr::null_mut(),
    };
    // SAFETY: a live CSP and a valid out-pointer.
    ok(unsafe { t.csp_query_func.unwrap()(csp, DAT_CSP_FIELD_ALL, &mut param) }, "dat_csp_query");
    assert_eq!((param.ia_handle, param.evd_handle), (rig.ia, cr_evd));
    // SAFETY: the query points at what the provider keeps for the CSP.
    let (kept_comm, kept_address) = unsafe { (*param.comm, *param.address_ptr.cast::<libc::sockaddr_in>()) };
    assert_eq!((kept_comm.domain, kept_comm.type_, kept_comm.protocol), (libc::AF_INET, libc::SOCK_STREAM, 0));
    assert_eq!((kept_address.sin_port, kept_address.sin_addr.s_addr), (address.sin_port, address.sin_addr.s_addr));
    let mut kind = 0;
    // SAFETY: a live handle and a valid out-pointer.
    ok(unsafe { t.get_handle_type_func.unwrap()(csp, &mut kind) }, "dat_get_handle_type");
    assert_eq!(kind, DAT_HANDLE_TYPE_CSP);

    // SAFETY: a live EP, an address and private data the test keeps.
    let ret =
        unsafe { t.ep_common_connect_func.unwrap()(client, address_ptr, u32::MAX, 2, b"hi".as_ptr() as DAT_PVOID) };
    ok(ret, "dat_ep_common_connect");
    let request = rig.next(cr_evd);
    assert_eq!(request.event_number, DAT_CONNECTION_REQUEST_EVENT);
    // SAFETY: a CR arrival's data.
    let arrival = unsafe { request.event_data.cr_arrival_event_data };
    // SAFETY: the union's CSP member, which the CSP's request sets.
    assert_eq!((unsafe { arrival.sp_handle.csp_handle }, arrival.conn_qual), (csp, 7421));
    // SAFETY: a live CR and EP.
    ok(unsafe { t.cr_accept_func.unwrap()(arrival.cr_handle, server, 0, ptr::null_mut()) }, "dat_cr_accept");
    assert_eq!(rig.next(client_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    assert_eq!(rig.next(server_conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);

    let psp = rig.psp(7422, cr_evd);
    // SAFETY: live handles of this provider, of the wrong kind for the call.
    unsafe {
        assert_eq!(ty(t.psp_free_func.unwrap()(csp)), DAT_INVALID_HANDLE);
        assert_eq!(t.csp_free_func.unwrap()(psp), DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CSP);
        ok(t.csp_free_func.unwrap()(csp), "dat_csp_free");
        assert_eq!(t.csp_free_func.unwrap()(csp), DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CSP);
    }
}
