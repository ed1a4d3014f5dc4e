//! dat_ep_post_send(3DAT), dat_ep_post_recv(3DAT),
//! dat_ep_post_rdma_read(3DAT), dat_ep_post_rdma_write(3DAT), and the
//! completion rules: every DTO completes once, flushes in post order.
mod common;
use std::cell::Cell;
use std::num::NonZeroU64;
use std::sync::atomic::AtomicU8;

use common::*;
use udat_core::backend::{ConnOutcome, Shared, Untaken};
use udat_core::shared::{SlotLock, Spin};
use udat_core::slab::word_of;
use udat_core::types::*;
use udat_core::*;

#[test]
fn dat_ep_post_send_completes_on_the_request_evd() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_request(ep, &[fx.seg(0, 10), fx.seg(100, 20)], 42, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert_eq!(ev.number, EventNumber::DtoCompletion);
    assert_eq!(
        ev.data,
        EventData::Dto { ep, cookie: 42, status: DtoStatus::Success, transferred_length: 30, op: DtoOp::Send, imm: 0 }
    );
}

#[test]
fn dat_ep_post_send_zero_segments_is_a_zero_byte_message() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_request(ep, &[], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    // A zero-length segment's other fields are irrelevant.
    let junk = LmrTriplet { virtual_address: 0, segment_length: 0, lmr_context: 0xdead };
    fx.p.ep_post_request(ep, &[junk], 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(fx.p.backend().pending_sends(ep), 2);
}

#[test]
fn dat_ep_post_send_valid_only_in_connected_or_disconnected() {
    let mut fx = Fx::new();
    let seg = fx.seg(0, 8);
    let idle = fx.ep();
    let e = fx.p.ep_post_request(idle, &[seg], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateEpUnconnected));
    let pending = fx.ep_connecting();
    assert_eq!(
        ty(fx.p.ep_post_request(pending, &[seg], 1, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::InvalidState
    );
    assert_eq!(
        ty(fx.p.ep_post_request(
            pending,
            &[seg],
            1,
            RequestOp::RdmaWrite { remote: fx.remote(8) },
            CompletionFlags::DEFAULT
        )),
        ErrorType::InvalidState
    );
    assert_eq!(
        ty(fx.p.ep_post_request(
            pending,
            &[seg],
            1,
            RequestOp::RdmaRead { remote: fx.remote(8) },
            CompletionFlags::DEFAULT
        )),
        ErrorType::InvalidState
    );
    assert_eq!(fx.p.backend().pending_sends(pending), 0);
}

#[test]
fn dat_ep_post_send_in_disconnected_is_flushed_at_once() {
    let mut fx = Fx::new();
    let ep = fx.ep_disconnected();
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 7, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_request(
        ep,
        &[fx.seg(0, 8)],
        8,
        RequestOp::RdmaWrite { remote: fx.remote(8) },
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    fx.p.ep_post_request(
        ep,
        &[fx.seg(0, 8)],
        9,
        RequestOp::RdmaRead { remote: fx.remote(8) },
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    assert_eq!(
        dtos(&fx.drain(fx.dto_evd)),
        [(7, DtoStatus::Flushed), (8, DtoStatus::Flushed), (9, DtoStatus::Flushed)]
    );
}

#[test]
fn dat_ep_post_recv_in_disconnected_is_flushed_at_once() {
    let mut fx = Fx::new();
    let ep = fx.ep_disconnected();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 3, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(3, DtoStatus::Flushed)]);
}

#[test]
fn dat_ep_post_recv_valid_in_every_state() {
    let mut fx = Fx::new();
    let seg = fx.seg(0, 8);
    for ep in [fx.ep(), fx.ep_connecting(), fx.ep_connected(), fx.ep_disconnected()] {
        fx.p.ep_post_recv(ep, &[seg], 1, CompletionFlags::DEFAULT).unwrap();
    }
}

#[test]
fn dat_ep_post_recv_completes_with_length_or_length_error() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 16)], 1, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 16)], 2, CompletionFlags::DEFAULT).unwrap();
    fx.p.backend_mut().complete_recv(ep, 12);
    fx.p.backend_mut().complete_recv(ep, 17);
    let evs = fx.drain(fx.dto_evd);
    assert!(matches!(
        evs[0].data,
        EventData::Dto { cookie: 1, status: DtoStatus::Success, transferred_length: 12, op: DtoOp::Receive, .. }
    ));
    // "If the size of an incoming message is larger than the size of the
    // local_iov, the reported status ... is DAT_DTO_LENGTH_ERROR."
    assert!(matches!(evs[1].data, EventData::Dto { cookie: 2, status: DtoStatus::LocalLength, .. }));
}

#[test]
fn dat_ep_post_rdma_write_larger_than_remote_is_length_error() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let r = fx.p.ep_post_request(
        ep,
        &[fx.seg(0, 64)],
        1,
        RequestOp::RdmaWrite { remote: fx.remote(63) },
        CompletionFlags::DEFAULT,
    );
    assert_eq!(ty(r), ErrorType::LengthError);
    fx.p.ep_post_request(
        ep,
        &[fx.seg(0, 64)],
        1,
        RequestOp::RdmaWrite { remote: fx.remote(64) },
        CompletionFlags::DEFAULT,
    )
    .unwrap();
}

#[test]
fn dat_ep_post_rdma_read_remote_larger_than_local_is_length_error() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let r = fx.p.ep_post_request(
        ep,
        &[fx.seg(0, 32)],
        1,
        RequestOp::RdmaRead { remote: fx.remote(33) },
        CompletionFlags::DEFAULT,
    );
    assert_eq!(ty(r), ErrorType::LengthError);
    fx.p.ep_post_request(
        ep,
        &[fx.seg(0, 32)],
        1,
        RequestOp::RdmaRead { remote: fx.remote(32) },
        CompletionFlags::DEFAULT,
    )
    .unwrap();
}

#[test]
fn dat_ep_post_segment_outside_its_lmr_is_invalid_parameter() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let over = fx.seg(BUF_LEN - 8, 9);
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[over], 1, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::InvalidParameter
    );
    let below = LmrTriplet { virtual_address: BUF - 1, ..fx.seg(0, 4) };
    assert_eq!(ty(fx.p.ep_post_recv(ep, &[below], 1, CompletionFlags::DEFAULT)), ErrorType::InvalidParameter);
    // Below the region by less than its length: the offset wraps, and so
    // would its sum with the length.
    let wraps = LmrTriplet { virtual_address: BUF - 16, ..fx.seg(0, 32) };
    assert_eq!(ty(fx.p.ep_post_recv(ep, &[wraps], 1, CompletionFlags::DEFAULT)), ErrorType::InvalidParameter);
    assert_eq!(fx.p.ep_get_status(ep), Ok((EpState::Connected, true, true)));
}

#[test]
fn dat_ep_post_lmr_of_another_pz_is_protection_violation() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let (_, seg) = fx.another_zone();
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[seg], 1, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::ProtectionViolation
    );
    let bogus = LmrTriplet { lmr_context: 0x1234_5678, ..fx.seg(0, 8) };
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[bogus], 1, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::ProtectionViolation
    );
}

#[test]
fn dat_ep_post_missing_local_privilege_is_privileges_violation() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let ro_seg = fx.seg_of_64(0x8000, fx.pz, MemPriv::LOCAL_READ);
    let wo_seg = fx.seg_of_64(0x9000, fx.pz, MemPriv::LOCAL_WRITE);
    // Send and RDMA write read local memory; receive and RDMA read write it.
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[wo_seg], 1, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::PrivilegesViolation
    );
    assert_eq!(
        ty(fx.p.ep_post_request(
            ep,
            &[wo_seg],
            1,
            RequestOp::RdmaWrite { remote: fx.remote(8) },
            CompletionFlags::DEFAULT
        )),
        ErrorType::PrivilegesViolation
    );
    assert_eq!(ty(fx.p.ep_post_recv(ep, &[ro_seg], 1, CompletionFlags::DEFAULT)), ErrorType::PrivilegesViolation);
    assert_eq!(
        ty(fx.p.ep_post_request(
            ep,
            &[ro_seg],
            1,
            RequestOp::RdmaRead { remote: fx.remote(8) },
            CompletionFlags::DEFAULT
        )),
        ErrorType::PrivilegesViolation
    );
    fx.p.ep_post_request(ep, &[ro_seg], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_recv(ep, &[wo_seg], 1, CompletionFlags::DEFAULT).unwrap();
}

#[test]
fn dat_ep_post_region_of_another_pz_is_protection_before_privileges() {
    // The region breaks both rules; the PZ's is reported, the first the
    // DTO pages give. Its privilege alone would be granted on its own PZ.
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let pz2 = fx.p.pz_create(fx.ia).unwrap();
    let ro = fx.lmr_of_64(0x8000, pz2, MemPriv::LOCAL_READ);
    let seg = LmrTriplet { virtual_address: 0x8000, segment_length: 8, lmr_context: ro.lmr_context };
    assert_eq!(ty(fx.p.ep_post_recv(ep, &[seg], 1, CompletionFlags::DEFAULT)), ErrorType::ProtectionViolation);
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[seg], 1, RequestOp::RdmaRead { remote: fx.remote(8) }, CompletionFlags::DEFAULT)),
        ErrorType::ProtectionViolation
    );
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &[seg], 1, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::ProtectionViolation
    );
}

#[test]
fn dat_ep_post_segment_breaking_several_lmr_rules_reports_the_first() {
    // The pages' order: the LMR's PZ, then the segment's range, then the
    // privilege. Each segment below breaks the rule named and every one
    // after it.
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let pz2 = fx.p.pz_create(fx.ia).unwrap();
    let theirs = fx.lmr_of_64(0x8000, pz2, MemPriv::LOCAL_WRITE);
    let ours = fx.lmr_of_64(0x9000, fx.pz, MemPriv::LOCAL_WRITE);
    let outside =
        |lmr_context, address: u64| LmrTriplet { virtual_address: address + 32, segment_length: 64, lmr_context };
    let send = |fx: &mut Fx, seg| fx.p.ep_post_request(ep, &[seg], 1, RequestOp::Send, CompletionFlags::DEFAULT);
    assert_eq!(ty(send(&mut fx, outside(theirs.lmr_context, 0x8000))), ErrorType::ProtectionViolation);
    assert_eq!(ty(send(&mut fx, outside(ours.lmr_context, 0x9000))), ErrorType::InvalidParameter);
    let inside = LmrTriplet { virtual_address: 0x9000, segment_length: 64, lmr_context: ours.lmr_context };
    assert_eq!(ty(send(&mut fx, inside)), ErrorType::PrivilegesViolation);
}

#[test]
fn dat_ep_post_too_many_segments_is_invalid_parameter() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let max = fx.attr().max_request_iov as usize;
    let iov = vec![fx.seg(0, 1); max + 1];
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &iov, 1, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::InvalidParameter
    );
    fx.p.ep_post_request(ep, &iov[..max], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
}

#[test]
fn dat_ep_post_flag_checks() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let seg = [fx.seg(0, 8)];
    // "The value of DAT_COMPLETION_UNSIGNALLED_FLAG is only valid if the
    // Endpoint Request Completion Flags DAT_COMPLETION_UNSIGNALLED_FLAG."
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &seg, 1, RequestOp::Send, CompletionFlags::UNSIGNALLED)),
        ErrorType::InvalidParameter
    );
    assert_eq!(ty(fx.p.ep_post_recv(ep, &seg, 1, CompletionFlags::UNSIGNALLED)), ErrorType::InvalidParameter);
    // Solicited wait is for sends only; threshold is an EP attribute only.
    let r = fx.p.ep_post_request(
        ep,
        &seg,
        1,
        RequestOp::RdmaWrite { remote: fx.remote(8) },
        CompletionFlags::SOLICITED_WAIT,
    );
    assert_eq!(ty(r), ErrorType::InvalidParameter);
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &seg, 1, RequestOp::Send, CompletionFlags::EVD_THRESHOLD)),
        ErrorType::InvalidParameter
    );
    assert_eq!(ty(fx.p.ep_post_recv(ep, &seg, 1, CompletionFlags::SUPPRESS)), ErrorType::InvalidParameter);
    fx.p.ep_post_request(
        ep,
        &seg,
        1,
        RequestOp::Send,
        CompletionFlags::SOLICITED_WAIT | CompletionFlags::BARRIER_FENCE,
    )
    .unwrap();
}

#[test]
fn a_peer_disconnect_flushes_the_dtos_of_a_consumer_that_only_dequeues() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    for cookie in 1..=3 {
        fx.p.ep_post_recv(ep, &[fx.seg(0, 64)], cookie, CompletionFlags::DEFAULT).unwrap();
    }
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 4, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(ty(fx.p.evd_dequeue(fx.dto_evd)), ErrorType::QueueEmpty);
    // The peer goes away. The consumer's data thread dequeues its DTO EVD
    // only, never the connect EVD.
    fx.p.backend_mut().conn_event(ep, ConnOutcome::Disconnected, b"");
    assert_eq!(ty(fx.p.evd_dequeue(fx.dto_evd)), ErrorType::QueueEmpty);
    fx.p.backend_mut().advance(CM_LOOK_US);
    let mut flushed = Vec::new();
    while let Ok(ev) = fx.p.evd_dequeue(fx.dto_evd) {
        let EventData::Dto { cookie, status, .. } = ev.data else { panic!("{ev:?}") };
        assert_eq!(status, DtoStatus::Flushed);
        flushed.push(cookie);
    }
    // Each DTO once; each queue in post order.
    assert_eq!(flushed.iter().filter(|c| **c <= 3).copied().collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(flushed.iter().filter(|c| **c == 4).count(), 1);
    assert_eq!(flushed.len(), 4);
    fx.p.backend_mut().advance(CM_LOOK_US);
    assert_eq!(ty(fx.p.evd_dequeue(fx.dto_evd)), ErrorType::QueueEmpty);
    assert_eq!(fx.p.ep_get_status(ep).unwrap().0, EpState::Disconnected);
    assert_eq!(fx.p.evd_dequeue(fx.conn_evd).unwrap().number, EventNumber::ConnectionDisconnected);
}

#[test]
fn an_empty_evd_is_answered_by_the_lane_only_while_no_look_at_connection_events_is_due() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let raw = fx.dto_evd.raw();
    let empty = |fx: &mut Fx| fx.p.lane_dequeue(fx.dto_evd) == Err(Passed::Empty);
    // The ordinary dequeue of an empty EVD takes a look if one is due;
    // until the next is due, the EVD is answered as empty without it.
    assert_eq!(ty(fx.p.evd_dequeue_ordinary(fx.dto_evd)), ErrorType::QueueEmpty);
    assert!(empty(&mut fx));
    assert_eq!(ty(fx.p.evd_dequeue(fx.dto_evd)), ErrorType::QueueEmpty);
    // A look due: the ordinary dequeue decides, and takes it.
    fx.p.backend_mut().advance(CM_LOOK_US);
    assert!(!empty(&mut fx));
    assert_eq!(ty(fx.p.evd_dequeue_ordinary(fx.dto_evd)), ErrorType::QueueEmpty);
    assert!(empty(&mut fx));
    // A stale handle is never answered.
    let stale = fx.p.lane_dequeue(EvdHandle::from_raw(RawHandle::from_bits(raw.to_bits() + (1 << 32))));
    assert_eq!(stale, Err(Passed::Ordinary));
    // A completion waiting is never answered as empty: the lane takes it,
    // and then the EVD is empty again.
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 9, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    let event = fx.p.lane_dequeue(fx.dto_evd).unwrap();
    assert!(matches!(event.data, EventData::Dto { cookie: 9, status: DtoStatus::Success, .. }), "{event:?}");
    assert!(empty(&mut fx));
    // An EVD that counts has its lane closed: its dequeues are counted by
    // the ordinary call, never answered past it.
    fx.p.counters_start(fx.ia).unwrap();
    assert!(!empty(&mut fx));
    fx.p.counters_stop(fx.ia).unwrap();
    assert!(empty(&mut fx));
}

#[test]
fn an_empty_evd_looks_at_connection_events_exactly_when_the_transport_says_one_waits() {
    let mut fx = Fx::new();
    fx.p.backend_mut().tells_waiting = true;
    let ep = fx.ep_connected();
    let empty = |fx: &mut Fx| fx.p.lane_dequeue(fx.dto_evd) == Err(Passed::Empty);
    for cookie in 1..=2 {
        fx.p.ep_post_recv(ep, &[fx.seg(0, 64)], cookie, CompletionFlags::DEFAULT).unwrap();
    }
    // Nothing waits: the lane answers empty whatever the clock says.
    assert!(empty(&mut fx));
    fx.p.backend_mut().advance(CM_LOOK_US);
    assert!(empty(&mut fx));
    assert_eq!(ty(fx.p.evd_dequeue(fx.dto_evd)), ErrorType::QueueEmpty);
    // The peer goes away: the very next dequeue looks, with the clock
    // where it was, and the receives come back flushed in post order.
    fx.p.backend_mut().conn_event(ep, ConnOutcome::Disconnected, b"");
    assert!(!empty(&mut fx));
    let mut flushed = Vec::new();
    while let Ok(ev) = fx.p.evd_dequeue(fx.dto_evd) {
        let EventData::Dto { cookie, status, .. } = ev.data else { panic!("{ev:?}") };
        assert_eq!(status, DtoStatus::Flushed);
        flushed.push(cookie);
    }
    assert_eq!(flushed, [1, 2]);
    assert_eq!(fx.p.ep_get_status(ep).unwrap().0, EpState::Disconnected);
    // Taken: nothing waits again.
    assert!(empty(&mut fx));
    assert_eq!(fx.p.evd_dequeue(fx.conn_evd).unwrap().number, EventNumber::ConnectionDisconnected);
}

#[test]
fn a_shared_dequeue_of_an_empty_evd_leaves_it_to_the_exclusive_one_exactly_when_it_is_to_look() {
    let mut fx = Fx::new();
    fx.p.backend_mut().tells_waiting = true;
    let ep = fx.ep_connected();
    let raw = fx.dto_evd.raw();
    // `due`: what the caller's clock says of a look at the IA's events.
    let shared = |fx: &Fx, due: bool| {
        // SAFETY: one thread; nothing else reaches the provider meanwhile.
        unsafe {
            fx.p.evd_dequeue_shared(
                word_of(raw.index()),
                NAME,
                |_, g, _| g == raw.generation(),
                &Spin,
                |_, _, _| (),
                |_| due,
            )
        }
    };
    // The transport tells: nothing waits, whatever the clock says.
    assert_eq!(shared(&fx, true), Shared::Empty);
    // An event waits: the exclusive dequeue looks, and takes it.
    fx.p.backend_mut().conn_event(ep, ConnOutcome::Disconnected, b"");
    assert_eq!(shared(&fx, false), Shared::Look);
    assert_eq!(ty(fx.p.evd_dequeue(fx.dto_evd)), ErrorType::QueueEmpty);
    assert_eq!(fx.p.ep_get_status(ep).unwrap().0, EpState::Disconnected);
    assert_eq!(shared(&fx, true), Shared::Empty);
    // A transport that cannot tell: the caller's clock decides.
    fx.p.backend_mut().tells_waiting = false;
    assert_eq!(shared(&fx, false), Shared::Empty);
    assert_eq!(shared(&fx, true), Shared::Look);
}

/// The lane of a layer that names its EPs hands each completion over with
/// the EP's name: a completion of an EP it has not named (one a
/// `DAT_PSP_PROVIDER` PSP made, until its consumer learns it) is left to
/// the ordinary dequeue. (The shared dequeue declines it alike; this
/// transport's shared dequeue takes nothing at all.)
#[test]
fn a_lane_leaves_a_completion_of_an_ep_with_no_name_to_the_ordinary_dequeue() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let evd = fx.dto_evd.raw();
    for cookie in 1..=2 {
        fx.p.ep_post_request(ep, &[fx.seg(0, 8)], cookie, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
        fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    }
    let accept = |slot, g, _| slot == evd.index() && g == evd.generation();
    let lane = |fx: &mut Fx| fx.p.lane_dequeue_cq(word_of(evd.index()), NAME, accept, |_, c, name| (c.cookie, name));
    assert_eq!(lane(&mut fx), Err(Untaken::Declined));
    let event = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert!(matches!(event.data, EventData::Dto { cookie: 1, .. }), "{event:?}");
    fx.p.ep_name(ep, 0x5000).unwrap();
    assert_eq!(lane(&mut fx), Ok((2, 0x5000)));
    assert_eq!(lane(&mut fx), Err(Untaken::Empty));
}

/// A lane handed an EVD's name takes the EVD by that one compare only
/// while its lane is open: shut (an EP holds it), the lane declines the
/// EVD named as any other; open again, it takes it. Another name leaves
/// the EVD to `accept`.
#[test]
fn a_lane_handed_an_evds_name_takes_it_only_while_its_lane_is_open() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let evd = fx.dto_evd.raw();
    fx.p.evd_name(fx.dto_evd, 0x6000).unwrap();
    fx.p.ep_name(ep, 0x5000).unwrap();
    for cookie in 1..=2 {
        fx.p.ep_post_request(ep, &[fx.seg(0, 8)], cookie, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
        fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    }
    let lane = |fx: &mut Fx, name: u64| {
        let name = NonZeroU64::new(name).unwrap();
        fx.p.lane_dequeue_cq(word_of(evd.index()), name, |_, _, _| false, |_, c, _| c.cookie)
    };
    fx.p.ep_hold_lane(ep, false).unwrap();
    assert_eq!(lane(&mut fx, 0x6000), Err(Untaken::Declined));
    fx.p.ep_release_lane(ep, false);
    assert_eq!(lane(&mut fx, 0x6008), Err(Untaken::Declined));
    assert_eq!(lane(&mut fx, 0x6000), Ok(1));
    fx.p.evd_name(fx.dto_evd, 0x6008).unwrap();
    assert_eq!(lane(&mut fx, 0x6000), Err(Untaken::Declined));
    assert_eq!(lane(&mut fx, 0x6008), Ok(2));
}

/// A name no EVD here has: the lanes judge the EVD by `accept`.
const NAME: NonZeroU64 = NonZeroU64::new(0x7000).unwrap();

/// A lock that refuses every take, as a lane's does a held one.
struct Refuse;

// SAFETY: it admits no holder at all.
unsafe impl SlotLock for Refuse {
    type Guard<'w> = ();

    fn take(&self, _: &AtomicU8) -> Option<()> {
        None
    }
}

#[test]
fn a_shared_dequeue_refused_a_lock_leaves_the_look_at_connection_events_to_the_next_call() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let raw = fx.dto_evd.raw();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 64)], 1, CompletionFlags::DEFAULT).unwrap();
    let asked = Cell::new(0);
    let due = |_| {
        asked.set(asked.get() + 1);
        true
    };
    // SAFETY: one thread; nothing else reaches the provider meanwhile.
    let refused = unsafe {
        fx.p.evd_dequeue_shared(word_of(raw.index()), NAME, |_, g, _| g == raw.generation(), &Refuse, |_, _, _| (), due)
    };
    assert_eq!(refused, Shared::NeedsExclusive);
    assert_eq!(asked.get(), 0, "a call that settled nothing for a refused lock asked the clock");
    // The CQ is as empty as before: the next call, given the lock, looks.
    // SAFETY: as above.
    let taken = unsafe {
        fx.p.evd_dequeue_shared(word_of(raw.index()), NAME, |_, g, _| g == raw.generation(), &Spin, |_, _, _| (), due)
    };
    assert_eq!(taken, Shared::Look);
    assert_eq!(asked.get(), 1);
}

#[test]
fn dat_ep_post_bad_flags_name_the_flags_argument() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let seg = [fx.seg(0, 8)];
    let bad = CompletionFlags::EVD_THRESHOLD;
    // dat_ep_post_send(ep, num_segments, local_iov, user_cookie,
    // completion_flags): the flags are argument 5; the RDMA posts take the
    // remote buffer before them, so theirs is argument 6.
    let e = fx.p.ep_post_request(ep, &seg, 1, RequestOp::Send, bad).unwrap_err();
    assert_eq!(e.subtype(), Subtype::InvalidArg5);
    let e = fx.p.ep_post_request(ep, &seg, 1, RequestOp::RdmaWrite { remote: fx.remote(8) }, bad).unwrap_err();
    assert_eq!(e.subtype(), Subtype::InvalidArg6);
    let e = fx.p.ep_post_request(ep, &seg, 1, RequestOp::RdmaRead { remote: fx.remote(8) }, bad).unwrap_err();
    assert_eq!(e.subtype(), Subtype::InvalidArg6);
    let e = fx.p.ep_post_recv(ep, &seg, 1, bad).unwrap_err();
    assert_eq!(e.subtype(), Subtype::InvalidArg5);
}

#[test]
fn dat_ep_post_beyond_max_dtos_is_insufficient_resources() {
    let mut fx = Fx::new();
    let mut attr = fx.attr();
    attr.max_request_dtos = 2;
    attr.max_recv_dtos = 1;
    let ep = fx.ep_with(Some(&attr));
    fx.establish(ep);
    let seg = [fx.seg(0, 8)];
    fx.p.ep_post_request(ep, &seg, 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_request(ep, &seg, 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &seg, 3, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::InsufficientResources
    );
    fx.p.ep_post_recv(ep, &seg, 4, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(ty(fx.p.ep_post_recv(ep, &seg, 5, CompletionFlags::DEFAULT)), ErrorType::InsufficientResources);
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    fx.drain(fx.dto_evd);
    fx.p.ep_post_request(ep, &seg, 3, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
}

#[test]
fn the_dto_limits_dat_ep_modify_sets_are_the_ones_posts_meet() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let attr = EpAttr { max_request_dtos: 2, max_recv_dtos: 1, ..fx.attr() };
    fx.p.ep_modify(ep, &EpChanges { attr: Some(attr), ..EpChanges::default() }).unwrap();
    fx.establish(ep);
    let seg = [fx.seg(0, 8)];
    fx.p.ep_post_recv(ep, &seg, 1, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(ty(fx.p.ep_post_recv(ep, &seg, 2, CompletionFlags::DEFAULT)), ErrorType::InsufficientResources);
    assert_eq!(fx.p.ep_recv_query(ep), Ok((1, 1)));
    fx.p.ep_post_request(ep, &seg, 3, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_request(ep, &seg, 4, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &seg, 5, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::InsufficientResources
    );
    assert_eq!(fx.p.ep_get_status(ep), Ok((EpState::Connected, false, false)));
    for _ in 0..2 {
        fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    }
    fx.drain(fx.dto_evd);
    assert_eq!(fx.p.ep_get_status(ep), Ok((EpState::Connected, false, true)));
    fx.p.ep_post_request(ep, &seg, 5, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
}

#[test]
fn completions_of_work_a_reset_forgot_leave_the_limit_whole() {
    let mut fx = Fx::new();
    let attr = EpAttr { max_request_dtos: 2, ..fx.attr() };
    let ep = fx.ep_with(Some(&attr));
    fx.establish(ep);
    let seg = [fx.seg(0, 8)];
    for cookie in [1, 2] {
        fx.p.ep_post_request(ep, &seg, cookie, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
        fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    }
    // Both completions wait in the CQ while the EP is reset ("might cause
    // the loss of any completions ... that were not dequeued yet",
    // dat_ep_reset(3DAT)), and are dequeued after it.
    fx.p.ep_disconnect(ep, CloseFlags::Abrupt).unwrap();
    fx.drain(fx.conn_evd);
    fx.p.ep_reset(ep).unwrap();
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(1, DtoStatus::Success), (2, DtoStatus::Success)]);
    fx.establish(ep);
    fx.p.ep_post_request(ep, &seg, 3, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_request(ep, &seg, 4, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(
        ty(fx.p.ep_post_request(ep, &seg, 5, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::InsufficientResources
    );
}

#[test]
fn suppressed_successes_produce_no_event_but_free_their_slot() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let seg = [fx.seg(0, 8)];
    fx.p.ep_post_request(ep, &seg, 1, RequestOp::Send, CompletionFlags::SUPPRESS).unwrap();
    fx.p.ep_post_request(ep, &seg, 2, RequestOp::Send, CompletionFlags::SUPPRESS).unwrap();
    fx.p.ep_post_request(ep, &seg, 3, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    for _ in 0..3 {
        fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    }
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(3, DtoStatus::Success)]);
    assert_eq!(fx.p.ep_get_status(ep), Ok((EpState::Connected, true, true)));
}

#[test]
fn suppressed_failure_is_still_reported() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 1, RequestOp::Send, CompletionFlags::SUPPRESS).unwrap();
    fx.p.backend_mut().complete_send(ep, DtoStatus::Transport);
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(1, DtoStatus::Transport)]);
}

#[test]
fn failed_dto_breaks_the_connection_and_flushes_the_rest_in_order() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    for c in 1..=4 {
        fx.p.ep_post_request(
            ep,
            &[fx.seg(0, 8)],
            c,
            RequestOp::RdmaWrite { remote: fx.remote(8) },
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    }
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    // dat_lmr_free(3DAT): the remote LMR is gone: "DAT_DTO_ERR_REMOTE_ACCESS
    // is reported ... and the connection is broken."
    fx.p.backend_mut().complete_send(ep, DtoStatus::RemoteAccess);
    assert_eq!(
        dtos(&fx.drain(fx.dto_evd)),
        [(1, DtoStatus::Success), (2, DtoStatus::RemoteAccess), (3, DtoStatus::Flushed), (4, DtoStatus::Flushed)]
    );
    assert_eq!(fx.p.evd_dequeue(fx.conn_evd).unwrap().number, EventNumber::ConnectionBroken);
    assert_eq!(fx.state(ep), EpState::Disconnected);
}

#[test]
fn every_posted_dto_completes_exactly_once() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let mut posted = Vec::new();
    for c in 0..12u64 {
        let seg = [fx.seg(0, 8)];
        match c % 3 {
            0 => fx.p.ep_post_request(ep, &seg, c, RequestOp::Send, CompletionFlags::DEFAULT).unwrap(),
            1 => fx.p.ep_post_recv(ep, &seg, c, CompletionFlags::DEFAULT).unwrap(),
            _ => fx
                .p
                .ep_post_request(ep, &seg, c, RequestOp::RdmaRead { remote: fx.remote(8) }, CompletionFlags::DEFAULT)
                .unwrap(),
        }
        posted.push(c);
    }
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    fx.p.backend_mut().complete_recv(ep, 4);
    fx.p.ep_disconnect(ep, CloseFlags::Abrupt).unwrap();
    let mut seen: Vec<u64> = dtos(&fx.drain(fx.dto_evd)).into_iter().map(|(c, _)| c).collect();
    seen.sort();
    assert_eq!(seen, posted);
    assert_eq!(fx.p.backend().queued_completions(), 0);
}

#[test]
fn unsignalled_completions_queue_but_do_not_notify_the_cno() {
    let mut fx = Fx::new();
    let mut attr = fx.attr();
    attr.request_completion_flags = CompletionFlags::UNSIGNALLED;
    attr.recv_completion_flags = CompletionFlags::UNSIGNALLED;
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    let evd = fx.p.evd_create(fx.ia, 8, cno, EvdFlags::DTO).unwrap();
    let ep = fx.p.ep_create(fx.ia, fx.pz, evd, evd, fx.conn_evd, Some(&attr)).unwrap();
    fx.establish(ep);
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 1, RequestOp::Send, CompletionFlags::UNSIGNALLED).unwrap();
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    assert_eq!(ty(fx.p.cno_wait(cno, 10)), ErrorType::QueueEmpty);
    assert_eq!(dtos(&fx.drain(evd)), [(1, DtoStatus::Success)]);
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    assert_eq!(fx.p.cno_wait(cno, 10), Ok(evd));
}

#[test]
fn stale_completions_of_a_freed_ep_are_dropped() {
    let mut fx = Fx::new();
    let one = fx.p.evd_create(fx.ia, 1, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let ep = fx.p.ep_create(fx.ia, fx.pz, one, one, fx.conn_evd, None).unwrap();
    fx.establish(ep);
    for c in 1..=2 {
        fx.p.ep_post_request(ep, &[fx.seg(0, 8)], c, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
        fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
    }
    // Freeing pulls what fits; the second completion stays in the CQ,
    // a completion of an EP that no longer exists.
    fx.p.ep_free(ep).unwrap();
    assert_eq!(fx.p.backend().queued_completions(), 1);
    let got = dtos(&fx.drain(one));
    assert_eq!(got, [(1, DtoStatus::Success)]);
    assert_eq!(fx.p.backend().queued_completions(), 0);
}

#[test]
fn dat_ep_post_stale_ep_is_invalid_handle() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    fx.p.ep_free(ep).unwrap();
    let e = fx.p.ep_post_request(ep, &[], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidHandle, Subtype::InvalidHandleEp));
}

/// The shared receive posts (the C ABI's, for a thread-safe provider)
/// refuse every receive as the exclusive posts do, and their lanes, which
/// the mock's shared transport does not offer, decline without a trace.
/// The mock has no shared queues, so a receive every rule admits reaches its
/// shared transport, which refuses it as internal.
#[test]
fn the_shared_receive_posts_answer_as_the_exclusive_ones() {
    const SRQ: SrqAttr = SrqAttr { max_recv_dtos: 4, max_recv_iov: 2, low_watermark: 0 };
    let world = || {
        let mut fx = Fx::new();
        let ep = fx.ep_connected();
        let srq = fx.p.srq_create(fx.ia, fx.pz, &SRQ).unwrap();
        (fx, ep, srq)
    };
    let cases = |fx: &Fx| {
        let stranger = LmrTriplet { lmr_context: fx.seg(0, 8).lmr_context ^ 0x5a5a, ..fx.seg(0, 8) };
        let past = LmrTriplet { virtual_address: BUF + BUF_LEN - 4, ..fx.seg(0, 8) };
        [
            (vec![fx.seg(0, 8)], CompletionFlags::DEFAULT),
            (vec![fx.seg(0, 8), fx.seg(8, 8)], CompletionFlags::DEFAULT),
            (vec![fx.seg(0, 8)], CompletionFlags(1 << 20)),
            (vec![stranger], CompletionFlags::DEFAULT),
            (vec![past], CompletionFlags::DEFAULT),
            (vec![fx.seg(0, 8); 64], CompletionFlags::DEFAULT),
        ]
    };
    let transport = Err(DatError::of(ErrorType::InternalError));
    let ((mut exclusive, a, sa), (mut shared, b, sb)) = (world(), world());
    let b_name = shared.name(b);
    let (mut refused, mut posted) = (0, 0);
    for ((iov, f), (iov2, f2)) in cases(&exclusive).into_iter().zip(cases(&shared)) {
        let want = exclusive.p.ep_post_recv(a, &iov, 1, f);
        (refused, posted) = if want.is_ok() { (refused, posted + 1) } else { (refused + 1, posted) };
        // SAFETY: one thread: no `&mut` to the provider exists while the
        // door lives, and nothing else uses the EP or the SRQ.
        let mut door = unsafe { shared.p.locked(Spin) };
        assert!(!door.lane_recv(word_of(b.raw().index()), b_name, &iov2[0], 1, f2), "{iov2:?} {f2:?}");
        let got = door.ep_post_recv(b, &iov2, 1, f2);
        assert_eq!(got, if want.is_ok() { transport } else { want }, "{iov:?} {f:?}");
        let want = exclusive.p.srq_post_recv(sa, &iov, 2);
        // SAFETY: as above.
        let mut door = unsafe { shared.p.locked(Spin) };
        assert!(!door.lane_srq_recv(sb.raw().index(), |_| true, &iov2[0], 2));
        let got = door.srq_post_recv(sb, &iov2, 2);
        assert_eq!(got, if want.is_ok() { transport } else { want }, "srq {iov:?}");
        (refused, posted) = if want.is_ok() { (refused, posted + 1) } else { (refused + 1, posted) };
    }
    assert!(refused >= 6 && posted >= 3, "the cases cover both answers: {refused} refused, {posted} posted");
    assert_eq!(shared.p.backend().pending_recvs(b), 0);
}
