//! The IB extension's data transfers: RDMA write with immediate data,
//! compare-and-swap and fetch-and-add (`<dat2/dat_ib_extensions.h>`).
mod common;
use common::*;
use udat_core::backend::RequestOp;
use udat_core::shared::Spin;
use udat_core::types::*;
use udat_core::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

fn flags() -> CompletionFlags {
    CompletionFlags::DEFAULT
}

#[test]
fn rdma_write_with_immediate_completes_both_sides_with_the_data() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 64)], 7, flags()).unwrap();
    fx.p.ep_post_request(
        ep,
        &[fx.seg(64, 32)],
        8,
        RequestOp::RdmaWriteImm { remote: fx.remote(32), imm: 0x1111 },
        flags(),
    )
    .unwrap();
    assert!(fx.p.backend_mut().complete_send(ep, DtoStatus::Success));
    // The peer's write consumes the receive: 32 bytes, its immediate data.
    assert!(fx.p.backend_mut().complete_recv_imm(ep, 32, 0x7777));
    let events = fx.drain(fx.dto_evd);
    let got: Vec<_> = events
        .iter()
        .map(|e| match e.data {
            EventData::Dto { cookie, status, transferred_length, op, imm, .. } => {
                (cookie, status, transferred_length, op, imm)
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [(8, DtoStatus::Success, 32, DtoOp::RdmaWriteImm, 0), (7, DtoStatus::Success, 32, DtoOp::ReceiveImm, 0x7777)]
    );
    assert!(DtoOp::ReceiveImm.is_recv() && DtoOp::ReceiveImm.is_extension() && !DtoOp::Receive.is_extension());
}

#[test]
fn rdma_write_with_immediate_follows_the_rdma_write_rules() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let e = fx
        .p
        .ep_post_request(ep, &[fx.seg(0, 64)], 1, RequestOp::RdmaWriteImm { remote: fx.remote(32), imm: 1 }, flags())
        .unwrap_err();
    assert_eq!(e.error_type(), ErrorType::LengthError);
    let unconnected = fx.ep();
    let e =
        fx.p.ep_post_request(
            unconnected,
            &[fx.seg(0, 8)],
            1,
            RequestOp::RdmaWriteImm { remote: fx.remote(8), imm: 1 },
            flags(),
        )
        .unwrap_err();
    assert_eq!(e.error_type(), ErrorType::InvalidState);
    assert_eq!(fx.p.backend().pending_sends(ep), 0);
}

#[test]
fn atomics_complete_with_their_own_operation() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_request(
        ep,
        &[fx.seg(0, 8)],
        3,
        RequestOp::CompareSwap { remote: fx.remote(8), compare: 1, swap: 2 },
        flags(),
    )
    .unwrap();
    fx.p.ep_post_request(ep, &[fx.seg(8, 8)], 4, RequestOp::FetchAdd { remote: fx.remote(8), add: 5 }, flags())
        .unwrap();
    assert!(fx.p.backend_mut().complete_send(ep, DtoStatus::Success));
    assert!(fx.p.backend_mut().complete_send(ep, DtoStatus::Success));
    let ops: Vec<_> = fx
        .drain(fx.dto_evd)
        .iter()
        .map(|e| match e.data {
            EventData::Dto { cookie, op, transferred_length, .. } => (cookie, op, transferred_length),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ops, [(3, DtoOp::CompareSwap, 8), (4, DtoOp::FetchAdd, 8)]);
}

#[test]
fn an_atomic_needs_eight_aligned_bytes_and_a_writable_result() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let remote = fx.remote(8);
    // The old value takes exactly 8 local bytes.
    let e = fx.p.ep_post_request(ep, &[fx.seg(0, 4)], 1, RequestOp::FetchAdd { remote, add: 1 }, flags()).unwrap_err();
    assert_eq!(e.error_type(), ErrorType::LengthError);
    let e =
        fx.p.ep_post_request(ep, &[fx.seg(0, 16)], 1, RequestOp::CompareSwap { remote, compare: 1, swap: 2 }, flags())
            .unwrap_err();
    assert_eq!(e.error_type(), ErrorType::LengthError);
    // The target is 8 bytes, naturally aligned.
    let short = RmrTriplet { segment_length: 4, ..remote };
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 1, RequestOp::FetchAdd { remote: short, add: 1 }, flags())),
        ErrorType::LengthError
    );
    let odd = RmrTriplet { virtual_address: remote.virtual_address + 4, ..remote };
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 1, RequestOp::FetchAdd { remote: odd, add: 1 }, flags())),
        ErrorType::InvalidParameter
    );
    // The result is written locally: local write, like an RDMA read.
    let ro = fx.lmr_of_64(0x8000, fx.pz, MemPriv::LOCAL_READ);
    let ro_seg = LmrTriplet { virtual_address: 0x8000, segment_length: 8, lmr_context: ro.lmr_context };
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[ro_seg], 1, RequestOp::CompareSwap { remote, compare: 1, swap: 2 }, flags())),
        ErrorType::PrivilegesViolation
    );
    assert_eq!(fx.p.backend().pending_sends(ep), 0);
}

#[test]
fn atomics_on_a_transport_without_them_are_not_implemented() {
    let mut backend = MockBackend::new();
    backend.attr.atomics = false;
    let mut p: Box<P> = udat_testkit::boxed(backend, Inline);
    let (ia, _) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Exists).unwrap();
    assert!(!p.ia_query(ia).unwrap().1.atomics);
    let pz = p.pz_create(ia).unwrap();
    let evd = p.evd_create(ia, 8, CnoHandle::NULL, EvdFlags::DTO | EvdFlags::CONNECTION).unwrap();
    let lmr = p.mock_lmr_create(ia, MemType::Virtual { address: BUF, length: BUF_LEN }, pz, MemPriv::ALL).unwrap();
    let ep = p.ep_create(ia, pz, evd, evd, EvdHandle::NULL, None).unwrap();
    let remote = IaAddress::default();
    p.ep_connect(ep, &remote, 1, 1000, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT).unwrap();
    p.backend_mut().conn_event(ep, backend::ConnOutcome::Established, b"");
    let _ = p.evd_dequeue(evd);
    let local = LmrTriplet { virtual_address: BUF, segment_length: 8, lmr_context: lmr.lmr_context };
    let target = RmrTriplet { virtual_address: 0x9000, segment_length: 8, rmr_context: 1 };
    assert_eq!(
        ty(p.ep_post_request(ep, &[local], 1, RequestOp::FetchAdd { remote: target, add: 1 }, flags())),
        ErrorType::NotImplemented
    );
    // Immediate data needs no atomics.
    p.ep_post_request(ep, &[local], 2, RequestOp::RdmaWriteImm { remote: target, imm: 9 }, flags()).unwrap();
}

#[test]
fn remote_atomic_privilege_makes_an_lmr_remotely_reachable() {
    let mut fx = Fx::new();
    let region = MemType::Virtual { address: 0x8000, length: 64 };
    let lmr =
        fx.p.mock_lmr_create(fx.ia, region, fx.pz, MemPriv(MemPriv::LOCAL_WRITE.0 | MemPriv::REMOTE_ATOMIC.0)).unwrap();
    assert!(lmr.rmr_context.is_some(), "an atomic target needs an RMR context");
    let q = fx.p.lmr_query(lmr.lmr, LMR_FIELD_ALL).unwrap();
    assert!(q.mem_privileges.contains(MemPriv::REMOTE_ATOMIC));
}

/// The shared request post (the C ABI's, for a thread-safe provider)
/// refuses every request as the exclusive post does: the same rules, in
/// the same order, from the same row of the request's kind. The mock has
/// no shared queues, so a request that every rule admits reaches its
/// shared transport, which refuses it as internal.
#[test]
fn the_shared_request_post_answers_as_the_exclusive_one() {
    let cases = |fx: &Fx| {
        let (seg, remote) = (fx.seg(0, 8), fx.remote(8));
        let unaligned = RmrTriplet { virtual_address: remote.virtual_address + 1, ..remote };
        [
            (vec![seg], RequestOp::Send, flags()),
            (vec![seg], RequestOp::Send, CompletionFlags(1 << 20)),
            (vec![seg], RequestOp::RdmaWrite { remote: fx.remote(4) }, flags()),
            (vec![fx.seg(0, 4)], RequestOp::RdmaRead { remote }, flags()),
            (vec![seg, fx.seg(8, 8)], RequestOp::RdmaWriteImm { remote: fx.remote(16), imm: 3 }, flags()),
            (vec![seg], RequestOp::CompareSwap { remote, compare: 1, swap: 2 }, flags()),
            (vec![seg], RequestOp::FetchAdd { remote: unaligned, add: 1 }, flags()),
            (vec![fx.seg(0, 4)], RequestOp::FetchAdd { remote, add: 1 }, flags()),
        ]
    };
    let (mut exclusive, mut shared) = (Fx::new(), Fx::new());
    let (a, b) = (exclusive.ep_connected(), shared.ep_connected());
    let (mut rejected, mut posted) = (0, 0);
    for ((iov, op, f), (iov2, op2, f2)) in cases(&exclusive).into_iter().zip(cases(&shared)) {
        let want = exclusive.p.ep_post_request(a, &iov, 1, op, f);
        // SAFETY: one thread: no `&mut` to the provider exists while this
        // runs, and nothing else uses the EP.
        let got = unsafe { shared.p.locked(Spin) }.ep_post_request(b, &iov2, 1, op2, f2);
        let transport = Err(DatError::of(ErrorType::InternalError));
        assert_eq!(got, if want.is_ok() { transport } else { want }, "{op:?}");
        if want.is_ok() {
            posted += 1
        } else {
            rejected += 1
        }
    }
    assert!(rejected >= 4 && posted >= 2, "the cases cover both answers: {rejected} refused, {posted} posted");
    assert_eq!((exclusive.p.backend().pending_sends(a), shared.p.backend().pending_sends(b)), (posted, 0));
}
