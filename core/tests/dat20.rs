//! The calls DAT 2.0 added beside the uDAPL 1.2 pages (`<dat2/dat.h>`,
//! `<dat2/udat.h>`): dat_ep_post_send_with_invalidate,
//! dat_rmr_create_for_ep, dat_ep_post_rdma_read_to_rmr, dat_lmr_create of
//! `DAT_MEM_TYPE_SHARED_VIRTUAL`, and the Common Service Point:
//! dat_csp_create, dat_csp_query, dat_csp_free, dat_ep_common_connect.
mod common;
use common::*;
use udat_core::types::*;
use udat_core::*;

/// An RMR of `DAT_RMR_SCOPE_EP` bound through `ep` over the fixture's LMR
/// with `privileges`, its bind completed; its context.
fn window_of(fx: &mut Fx, ep: EpHandle, privileges: MemPriv) -> (RmrHandle, u32) {
    let rmr = fx.p.rmr_create_for_ep(fx.pz).unwrap();
    let context =
        fx.p.rmr_bind(rmr, fx.lmr.lmr, &fx.seg(0, 1024), privileges, ep, 7, CompletionFlags::DEFAULT).unwrap();
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    let bound = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert_eq!(bound.number, EventNumber::RmrBindCompletion, "{bound:?}");
    (rmr, context)
}

/// A send with invalidate is a send (its rules, its completion) that
/// hands the transport the key; with the flag false it is a plain send
/// and the key is not looked at. Flags are its fifth argument.
#[test]
fn dat_ep_post_send_with_invalidate_is_a_send_that_names_the_key() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_request(ep, &[fx.seg(0, 16)], 1, RequestOp::SendInvalidate { rkey: 0x4242 }, CompletionFlags::DEFAULT)
        .unwrap();
    assert_eq!(fx.p.backend_mut().invalidates, Some(0x4242));
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert_eq!(
        ev.data,
        EventData::Dto { ep, cookie: 1, status: DtoStatus::Success, transferred_length: 16, op: DtoOp::Send, imm: 0 }
    );
    fx.p.backend_mut().invalidates = None;
    fx.p.ep_post_request(ep, &[fx.seg(0, 16)], 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(fx.p.backend_mut().invalidates, None, "no invalidation without the flag");
    assert_eq!(fx.p.backend_mut().pending_sends(ep), 1);

    let bad_flags = CompletionFlags(0x40);
    let e =
        fx.p.ep_post_request(ep, &[fx.seg(0, 16)], 3, RequestOp::SendInvalidate { rkey: 1 }, bad_flags).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidParameter, Subtype::InvalidArg5));
    let e =
        fx.p.ep_post_request(ep, &[fx.seg(0, 16)], 3, RequestOp::SendInvalidate { rkey: 1 }, CompletionFlags::DEFAULT)
            .map(|_| ());
    assert_eq!(e, Ok(()), "the solicited-wait flag and the rest of a send's are admitted");
    let unconnected = fx.ep();
    let refused = fx.p.ep_post_request(
        unconnected,
        &[fx.seg(0, 16)],
        4,
        RequestOp::SendInvalidate { rkey: 1 },
        CompletionFlags::DEFAULT,
    );
    assert_eq!(ty(refused), ErrorType::InvalidState);
    let outside = fx.seg(BUF_LEN - 8, 16);
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[outside], 5, RequestOp::SendInvalidate { rkey: 1 }, CompletionFlags::DEFAULT)),
        ErrorType::InvalidParameter
    );
    fx.p.ep_free(unconnected).unwrap();
    assert_eq!(
        ty(fx.p.ep_post_request(unconnected, &[], 6, RequestOp::SendInvalidate { rkey: 1 }, CompletionFlags::DEFAULT)),
        ErrorType::InvalidHandle
    );
    assert_eq!(fx.p.backend_mut().pending_sends(ep), 2, "refused posts left nothing behind");
}

/// The receive a peer's send with invalidate consumed completes as
/// `DAT_DTO_RECEIVE_WITH_INVALIDATE` with the context, and the window of
/// that context the receiving EP bound is unbound: its LMR may go. A
/// context bound through another EP is left alone.
#[test]
fn dat_ep_post_send_with_invalidate_unbinds_the_window_at_the_receiver() {
    let mut fx = Fx::new();
    let (ep, other) = (fx.ep_connected(), fx.ep_connected());
    let (rmr, context) = window_of(&mut fx, ep, MemPriv::REMOTE_WRITE);
    let (theirs, their_context) = window_of(&mut fx, other, MemPriv::REMOTE_WRITE);
    for e in [ep, other] {
        fx.p.ep_post_recv(e, &[fx.seg(2048, 64)], 9, CompletionFlags::DEFAULT).unwrap();
    }
    fx.p.backend_mut().complete_recv_invalidate(other, 32, context);
    fx.p.backend_mut().complete_recv_invalidate(ep, 32, context);
    let wrong_ep = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert!(matches!(wrong_ep.data, EventData::Dto { op: DtoOp::ReceiveWithInvalidate, imm, .. } if imm == context));
    let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert_eq!(
        ev.data,
        EventData::Dto {
            ep,
            cookie: 9,
            status: DtoStatus::Success,
            transferred_length: 32,
            op: DtoOp::ReceiveWithInvalidate,
            imm: context,
        }
    );
    assert_eq!(fx.p.rmr_query(rmr, RMR_FIELD_ALL).unwrap().rmr_context, None, "unbound by the peer");
    assert_eq!(fx.p.rmr_query(theirs, RMR_FIELD_ALL).unwrap().rmr_context, Some(their_context), "not this EP's");
    fx.p.rmr_free(theirs).unwrap();
    fx.p.lmr_free(fx.lmr.lmr).unwrap();
    fx.p.rmr_free(rmr).unwrap();
}

/// dat_rmr_create_for_ep: an RMR of `DAT_RMR_SCOPE_EP`. It binds only
/// while unbound (IBA o10-36.2.2), only the EP it is bound through
/// unbinds it, and there is nothing to unbind while it is unbound; each
/// refusal leaves the binding as it was. dat_rmr_create's RMR is of
/// `DAT_RMR_SCOPE_PZ` and rebinds at will. A transport without type 2
/// windows refuses with `DAT_MODEL_NOT_SUPPORTED`, and holds nothing.
#[test]
fn dat_rmr_create_for_ep_binds_from_unbound_through_one_ep() {
    let mut fx = Fx::new();
    let (ep, other) = (fx.ep_connected(), fx.ep_connected());
    let read = MemPriv::REMOTE_READ;
    let nothing = LmrTriplet::default();
    let rmr = fx.p.rmr_create_for_ep(fx.pz).unwrap();
    let unbind = |fx: &mut Fx, through| {
        fx.p.rmr_bind(rmr, LmrHandle::NULL, &nothing, read, through, 1, CompletionFlags::DEFAULT)
    };
    assert_eq!(ty(unbind(&mut fx, ep)), ErrorType::InvalidState, "nothing to invalidate");
    assert_eq!(fx.p.rmr_query(rmr, RMR_FIELD_ALL).unwrap().scope, RmrScope::Ep);
    let seg = fx.seg(0, 64);
    let context = fx.p.rmr_bind(rmr, fx.lmr.lmr, &seg, read, ep, 2, CompletionFlags::DEFAULT).unwrap();
    let again = fx.p.rmr_bind(rmr, fx.lmr.lmr, &seg, read, ep, 3, CompletionFlags::DEFAULT);
    assert_eq!(ty(again), ErrorType::InvalidState, "bound: invalidate first");
    let e = unbind(&mut fx, other).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidParameter, Subtype::InvalidArg4));
    assert_eq!(fx.p.rmr_query(rmr, RMR_FIELD_ALL).unwrap().rmr_context, Some(context), "still bound");
    unbind(&mut fx, ep).unwrap();
    assert_eq!(fx.p.rmr_query(rmr, RMR_FIELD_ALL).unwrap().rmr_context, None);
    fx.p.rmr_bind(rmr, fx.lmr.lmr, &seg, read, other, 4, CompletionFlags::DEFAULT).unwrap();
    fx.p.rmr_free(rmr).unwrap();

    let pz_wide = fx.p.rmr_create(fx.pz).unwrap();
    assert_eq!(fx.p.rmr_query(pz_wide, RMR_FIELD_ALL).unwrap().scope, RmrScope::Pz);
    for cookie in 5..7 {
        fx.p.rmr_bind(pz_wide, fx.lmr.lmr, &seg, read, ep, cookie, CompletionFlags::DEFAULT).unwrap();
    }
    fx.p.rmr_free(pz_wide).unwrap();

    let mws = fx.p.backend_mut().live_mws;
    fx.p.backend_mut().type2_windows = false;
    assert_eq!(ty(fx.p.rmr_create_for_ep(fx.pz)), ErrorType::ModelNotSupported);
    assert_eq!(fx.p.backend_mut().live_mws, mws);
    assert_eq!(ty(fx.p.pz_free(fx.pz)), ErrorType::InvalidState);
    let stale = fx.p.rmr_create_for_ep(PzHandle::NULL).unwrap_err();
    assert_eq!((stale.error_type(), stale.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandlePz));
}

/// dat_ep_post_rdma_read_to_rmr: the local RMR context names memory this
/// IA exposes for remote writes (an LMR's, or a bound window's), and the
/// read lands in the LMR under it. A context of nothing is a protection
/// violation, memory a peer may not write a privileges violation, a range
/// outside it an invalid second argument; a window of one EP serves only
/// that EP. The read's own rules are dat_ep_post_rdma_read(3DAT)'s.
#[test]
fn dat_ep_post_rdma_read_to_rmr_reads_into_what_the_context_names() {
    let mut fx = Fx::new();
    let (ep, other) = (fx.ep_connected(), fx.ep_connected());
    let remote = fx.remote(64);
    let post = |fx: &mut Fx, through, local: RmrTriplet| {
        fx.p.ep_post_request(through, &[], 1, PostOp::RdmaReadToRmr { local, remote }, CompletionFlags::DEFAULT)
    };
    let lmr_context = fx.lmr.rmr_context.unwrap();
    let of_lmr = RmrTriplet { virtual_address: BUF + 128, segment_length: 64, rmr_context: lmr_context };
    post(&mut fx, ep, of_lmr).unwrap();
    assert_eq!(fx.p.backend_mut().pending_sends(ep), 1);
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert!(matches!(ev.data, EventData::Dto { op: DtoOp::RdmaRead, transferred_length: 64, .. }), "{ev:?}");

    let unknown = RmrTriplet { rmr_context: 0xdead_0000, ..of_lmr };
    assert_eq!(ty(post(&mut fx, ep, unknown)), ErrorType::ProtectionViolation);
    let outside = RmrTriplet { virtual_address: BUF + BUF_LEN - 32, ..of_lmr };
    let e = post(&mut fx, ep, outside).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidParameter, Subtype::InvalidArg2));
    let short = RmrTriplet { segment_length: 32, ..of_lmr };
    assert_eq!(ty(post(&mut fx, ep, short)), ErrorType::LengthError, "the remote buffer is larger");
    // The local side is the RMR triplet: a segment beside it is an
    // invalid second argument, and a stale EP an invalid handle, with
    // nothing posted.
    let beside = fx.seg(0, 8);
    let e = fx
        .p
        .ep_post_request(ep, &[beside], 1, PostOp::RdmaReadToRmr { local: of_lmr, remote }, CompletionFlags::DEFAULT)
        .unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidParameter, Subtype::InvalidArg2));
    let gone = fx.ep();
    fx.p.ep_free(gone).unwrap();
    let e = post(&mut fx, gone, of_lmr).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandleEp));
    assert_eq!(fx.p.backend_mut().pending_sends(ep), 0, "refused reads left nothing behind");
    // The read's own refusals name this call's arguments: the flags are
    // its fifth (dat_ep_post_rdma_read's sixth).
    let e = fx
        .p
        .ep_post_request(ep, &[], 1, PostOp::RdmaReadToRmr { local: of_lmr, remote }, CompletionFlags::SOLICITED_WAIT)
        .unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidParameter, Subtype::InvalidArg5));
    // A segment past the EP's largest RDMA: its `local_iov`, the second
    // argument (dat_ep_post_rdma_read's third).
    let mut small = fx.attr();
    small.max_rdma_size = 32;
    let narrow = fx.ep_with(Some(&small));
    fx.establish(narrow);
    let e =
        fx.p.ep_post_request(narrow, &[], 1, PostOp::RdmaReadToRmr { local: of_lmr, remote }, CompletionFlags::DEFAULT)
            .unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidParameter, Subtype::InvalidArg2));
    let readable =
        fx.p.mock_lmr_create(
            fx.ia,
            MemType::Virtual { address: 0x40_0000, length: 4096 },
            fx.pz,
            MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_READ,
        )
        .unwrap();
    let not_writable =
        RmrTriplet { virtual_address: 0x40_0000, segment_length: 64, rmr_context: readable.rmr_context.unwrap() };
    assert_eq!(ty(post(&mut fx, ep, not_writable)), ErrorType::PrivilegesViolation);

    let (rmr, context) = window_of(&mut fx, ep, MemPriv::REMOTE_WRITE);
    let of_window = RmrTriplet { virtual_address: BUF + 512, segment_length: 64, rmr_context: context };
    post(&mut fx, ep, of_window).unwrap();
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert!(matches!(ev.data, EventData::Dto { op: DtoOp::RdmaRead, transferred_length: 64, .. }), "{ev:?}");
    assert_eq!(ty(post(&mut fx, other, of_window)), ErrorType::ProtectionViolation, "another EP's window");
    let past_window = RmrTriplet { virtual_address: BUF + 1000, ..of_window };
    assert_eq!(ty(post(&mut fx, ep, past_window)), ErrorType::InvalidParameter, "past the window, inside the LMR");
    let (read_only, read_context) = window_of(&mut fx, ep, MemPriv::REMOTE_READ);
    let of_read_only = RmrTriplet { rmr_context: read_context, ..of_window };
    assert_eq!(ty(post(&mut fx, ep, of_read_only)), ErrorType::PrivilegesViolation);
    assert_eq!(fx.p.backend_mut().pending_sends(ep), 0, "the refused posts left nothing behind");
    let mut stale = ep;
    fx.p.rmr_free(rmr).unwrap();
    fx.p.rmr_free(read_only).unwrap();
    fx.p.ep_disconnect(stale, CloseFlags::Abrupt).unwrap();
    fx.drain(fx.dto_evd);
    fx.p.ep_free(stale).unwrap();
    assert_eq!(ty(post(&mut fx, stale, of_lmr)), ErrorType::InvalidHandle);
    stale = EpHandle::NULL;
    assert_eq!(ty(post(&mut fx, stale, of_lmr)), ErrorType::InvalidHandle);
}

/// dat_lmr_create(3DAT) of `DAT_MEM_TYPE_SHARED_VIRTUAL`: "The Provider
/// must check the entire 40 bytes and shall not interpret it as a
/// null-terminated string." LMRs of one cookie name one region, so each
/// gives its length; a cookie that differs in any byte, even past a NUL,
/// names another region. Query reports the cookie.
#[test]
fn dat_lmr_create_shared_virtual_checks_the_whole_cookie() {
    let mut fx = Fx::new();
    let mut cookie = [0u8; 40];
    cookie[..5].copy_from_slice(b"shm-a");
    let shared = |cookie, address, length| MemType::SharedVirtual { cookie, address, length };
    let first = fx.p.mock_lmr_create(fx.ia, shared(cookie, 0x20_0000, 8192), fx.pz, MemPriv::ALL).unwrap();
    let second = fx.p.mock_lmr_create(fx.ia, shared(cookie, 0x30_0000, 8192), fx.pz, MemPriv::ALL).unwrap();
    assert_ne!(first.lmr, second.lmr);
    let e = fx.p.mock_lmr_create(fx.ia, shared(cookie, 0x20_0000, 4096), fx.pz, MemPriv::ALL).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidParameter, Subtype::InvalidArg4));
    let mut past_nul = cookie;
    past_nul[39] = 1;
    let other = fx.p.mock_lmr_create(fx.ia, shared(past_nul, 0x20_0000, 4096), fx.pz, MemPriv::ALL).unwrap();
    let q = fx.p.lmr_query(other.lmr, LMR_FIELD_ALL).unwrap();
    assert_eq!(q.mem_type, shared(past_nul, 0x20_0000, 4096));
    fx.p.lmr_free(first.lmr).unwrap();
    fx.p.lmr_free(second.lmr).unwrap();
    fx.p.mock_lmr_create(fx.ia, shared(cookie, 0x20_0000, 4096), fx.pz, MemPriv::ALL).unwrap();
    let (ia2, _) = fx.p.ia_open(udat_testkit::mock::MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 4 }).unwrap();
    let pz2 = fx.p.pz_create(ia2).unwrap();
    fx.p.mock_lmr_create(ia2, shared(cookie, 0x20_0000, 1024), pz2, MemPriv::ALL).unwrap();
}

/// `AF_INET`, `SOCK_STREAM`, the type's own protocol.
const STREAM: Comm = Comm { domain: 2, socket_type: 1, protocol: 0 };

/// The fixture IA's own address (an `AF_INET` one) with `port`.
fn at_port(fx: &Fx, port: u16) -> IaAddress {
    let (_, attr) = fx.p.ia_query(fx.ia).unwrap();
    let mut address = attr.ia_address;
    address.bytes[2..4].copy_from_slice(&port.to_be_bytes());
    address
}

/// dat_csp_create listens on the port of an address of the IA; a request
/// there arrives as at a PSP, the CSP its service point, and is accepted
/// as any; dat_csp_query reports what it was made with, and
/// dat_get_handle_type `DAT_HANDLE_TYPE_CSP`. A CSP's handle is no PSP's
/// and a PSP's no CSP's. A port a PSP or a CSP of the IA listens on is in
/// use. dat_csp_free stops listening.
#[test]
fn dat_csp_create_listens_on_the_port_of_its_address() {
    let mut fx = Fx::new();
    let address = at_port(&fx, 7000);
    let csp = fx.p.csp_create(fx.ia, &STREAM, &address, fx.cr_evd).unwrap();
    assert!(fx.p.backend_mut().listeners().any(|l| l.conn_qual == 7000));
    let q = fx.p.csp_query(csp, CSP_FIELD_ALL).unwrap();
    assert_eq!(q, CspParam { ia: fx.ia, comm: STREAM, address, evd: fx.cr_evd });
    assert_eq!(fx.p.get_handle_type(csp.into()).unwrap(), Kind::Csp);
    fx.p.backend_mut().incoming(7000, b"hi").unwrap();
    let EventData::CrArrival { psp, conn_qual, cr } = fx.p.evd_dequeue(fx.cr_evd).unwrap().data else {
        panic!("expected a connection request");
    };
    assert_eq!((psp.raw(), conn_qual), (csp.raw(), 7000));
    let ep = fx.ep();
    fx.p.cr_accept(cr, ep, b"").unwrap();

    let as_psp = PspHandle::from_raw(csp.raw());
    let e = fx.p.psp_free(as_psp).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandlePsp));
    assert_eq!(ty(fx.p.psp_query(as_psp, 0)), ErrorType::InvalidHandle);
    let psp = fx.p.psp_create(fx.ia, 7001, fx.cr_evd, PspFlags::Consumer).unwrap();
    let e = fx.p.csp_free(CspHandle::from_raw(psp.raw())).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandleCsp));
    assert_eq!(fx.p.get_handle_type(psp.into()).unwrap(), Kind::Psp);
    for port in [7000, 7001] {
        assert_eq!(ty(fx.p.csp_create(fx.ia, &STREAM, &at_port(&fx, port), fx.cr_evd)), ErrorType::PortInUse);
    }
    assert_eq!(ty(fx.p.psp_create(fx.ia, 7000, fx.cr_evd, PspFlags::Consumer)), ErrorType::ConnQualInUse);

    fx.p.csp_free(csp).unwrap();
    assert!(!fx.p.backend_mut().listeners().any(|l| l.conn_qual == 7000));
    assert_eq!(ty(fx.p.csp_query(csp, CSP_FIELD_ALL)), ErrorType::InvalidHandle);
    assert!(fx.p.backend_mut().listeners().any(|l| l.conn_qual == 7001), "the PSP listens on");
}

/// What a CSP cannot listen on is refused, and nothing listens: a
/// communicator of no family udat knows, or of another family than the
/// address (`DAT_INVALID_ARG2`); one that is not a TCP stream
/// (`DAT_MODEL_NOT_SUPPORTED`); an address with port 0, of another host
/// or of no family udat knows (`DAT_INVALID_ADDRESS`); an EVD that takes
/// no connection requests, a stale IA (`DAT_INVALID_HANDLE`). The
/// wildcard host listens on the IA. An IA's abrupt close frees its CSPs.
#[test]
fn dat_csp_create_refuses_what_it_cannot_listen_on() {
    let mut fx = Fx::new();
    let address = at_port(&fx, 7200);
    let create = |fx: &mut Fx, comm: Comm, address: IaAddress, evd| fx.p.csp_create(fx.ia, &comm, &address, evd);
    let cr_evd = fx.cr_evd;
    for comm in [Comm { domain: 99, ..STREAM }, Comm { domain: 10, ..STREAM }] {
        let e = create(&mut fx, comm, address, cr_evd).unwrap_err();
        assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidParameter, Subtype::InvalidArg2), "{comm:?}");
    }
    for comm in [Comm { socket_type: 2, ..STREAM }, Comm { protocol: 17, ..STREAM }] {
        assert_eq!(ty(create(&mut fx, comm, address, cr_evd)), ErrorType::ModelNotSupported, "{comm:?}");
    }
    let mut elsewhere = address;
    elsewhere.bytes[7] ^= 0xff;
    let mut no_family = address;
    no_family.bytes[0] = 99;
    for bad in [at_port(&fx, 0), elsewhere, no_family] {
        assert_eq!(ty(create(&mut fx, STREAM, bad, cr_evd)), ErrorType::InvalidAddress, "{bad:?}");
    }
    let dto_evd = fx.dto_evd;
    assert_eq!(ty(create(&mut fx, STREAM, address, dto_evd)), ErrorType::InvalidHandle);
    assert_eq!(fx.p.backend_mut().listeners().count(), 0, "nothing listens");

    let mut wildcard = address;
    wildcard.bytes[4..8].fill(0);
    let csp = create(&mut fx, STREAM, wildcard, cr_evd).unwrap();
    assert_eq!(ty(fx.p.csp_query(csp, CSP_FIELD_ALL << 1)), ErrorType::InvalidParameter);
    let ia = fx.ia;
    fx.p.ia_close(ia, CloseFlags::Abrupt).unwrap();
    assert_eq!(fx.p.backend_mut().listeners().count(), 0, "closed with its IA");
    assert_eq!(ty(fx.p.csp_create(ia, &STREAM, &address, cr_evd)), ErrorType::InvalidHandle);
}

/// dat_ep_common_connect is dat_ep_connect(3DAT) to the port the address
/// carries: the qualifier the transport dials is that port. Port 0 is
/// `DAT_INVALID_ADDRESS`; the timeout is the third argument, the private
/// data the fourth; the EP must be Unconnected.
#[test]
fn dat_ep_common_connect_dials_the_port_of_its_address() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let address = at_port(&fx, 7100);
    fx.p.ep_common_connect(ep, &address, TIMEOUT_INFINITE, b"hello").unwrap();
    assert_eq!(fx.state(ep), EpState::ActiveConnectionPending);
    let (qual, data) = fx.p.backend_mut().last_connect.clone().unwrap();
    assert_eq!((qual, &data[..]), (7100, &b"hello"[..]));
    let q = fx.p.ep_query(ep).unwrap();
    assert_eq!((q.remote_ia_address, q.remote_port_qual), (address, 7100));
    assert_eq!(ty(fx.p.ep_common_connect(ep, &address, TIMEOUT_INFINITE, b"")), ErrorType::InvalidState);

    let other = fx.ep();
    assert_eq!(ty(fx.p.ep_common_connect(other, &at_port(&fx, 0), TIMEOUT_INFINITE, b"")), ErrorType::InvalidAddress);
    let e = fx.p.ep_common_connect(other, &address, 0, b"").unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidParameter, Subtype::InvalidArg3));
    let e = fx.p.ep_common_connect(other, &address, TIMEOUT_INFINITE, &[0; 197]).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidParameter, Subtype::InvalidArg4));
    assert_eq!(fx.state(other), EpState::Unconnected);
    fx.p.ep_free(other).unwrap();
    assert_eq!(ty(fx.p.ep_common_connect(other, &address, TIMEOUT_INFINITE, b"")), ErrorType::InvalidHandle);
}
