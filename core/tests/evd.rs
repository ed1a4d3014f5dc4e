//! dat_evd_create, dat_evd_free/query/resize/post_se/dequeue/wait(3DAT),
//! dat_evd_enable/disable/set_unwaitable/clear_unwaitable/modify_cno(3DAT),
//! dat_cno_create/free/query/modify_agent/wait(3DAT).
mod common;
use common::*;
use udat_core::backend::ConnOutcome;
use udat_core::types::*;
use udat_core::*;
use udat_testkit::mock::Scheduled;

fn sw_evd(fx: &mut Fx, qlen: u32) -> EvdHandle {
    fx.p.evd_create(fx.ia, qlen, CnoHandle::NULL, EvdFlags::SOFTWARE).unwrap()
}

#[test]
fn dat_evd_create_bad_qlen_or_flags_is_invalid_parameter() {
    let mut fx = Fx::new();
    assert_eq!(ty(fx.p.evd_create(fx.ia, 0, CnoHandle::NULL, EvdFlags::SOFTWARE)), ErrorType::InvalidParameter);
    assert_eq!(ty(fx.p.evd_create(fx.ia, 100_000, CnoHandle::NULL, EvdFlags::SOFTWARE)), ErrorType::InvalidParameter);
    assert_eq!(ty(fx.p.evd_create(fx.ia, 4, CnoHandle::NULL, EvdFlags(0))), ErrorType::InvalidParameter);
    assert_eq!(ty(fx.p.evd_create(fx.ia, 4, CnoHandle::NULL, EvdFlags(0x2))), ErrorType::InvalidParameter);
}

#[test]
fn dat_evd_create_beyond_event_pool_is_insufficient_resources() {
    let mut fx = Fx::new();
    let mut made = Vec::new();
    let e = loop {
        match fx.p.evd_create(fx.ia, 100, CnoHandle::NULL, EvdFlags::SOFTWARE) {
            Ok(h) => made.push(h),
            Err(e) => break e,
        }
    };
    assert_eq!(e.error_type(), ErrorType::InsufficientResources);
    for h in made {
        fx.p.evd_free(h).unwrap();
    }
    sw_evd(&mut fx, 100);
}

#[test]
fn dat_evd_free_refused_while_streams_feed_it() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    let e = fx.p.evd_free(fx.dto_evd).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateEvdInUse));
    assert_eq!(ty(fx.p.evd_free(fx.conn_evd)), ErrorType::InvalidState);
    // The IA feeds its async EVD.
    assert_eq!(ty(fx.p.evd_free(fx.async_evd)), ErrorType::InvalidState);
    let psp = fx.p.psp_create(fx.ia, 5, fx.cr_evd, PspFlags::Consumer).unwrap();
    assert_eq!(ty(fx.p.evd_free(fx.cr_evd)), ErrorType::InvalidState);
    fx.p.ep_free(ep).unwrap();
    fx.p.psp_free(psp).unwrap();
    fx.p.evd_free(fx.dto_evd).unwrap();
    fx.p.evd_free(fx.conn_evd).unwrap();
    fx.p.evd_free(fx.cr_evd).unwrap();
    assert_eq!(ty(fx.p.evd_dequeue(fx.dto_evd)), ErrorType::InvalidHandle);
}

#[test]
fn dat_evd_free_aborts_a_waiter() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 4);
    let wait = fx.p.evd_wait_begin(evd, TIMEOUT_INFINITE, 1).unwrap();
    fx.p.evd_free(evd).unwrap();
    assert_eq!(ty(fx.p.evd_wait_poll(&wait)), ErrorType::Abort);
}

#[test]
fn dat_evd_query_reports_qlen_state_flags_and_cno() {
    let mut fx = Fx::new();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    let evd = fx.p.evd_create(fx.ia, 6, cno, EvdFlags::SOFTWARE | EvdFlags::DTO).unwrap();
    let q = fx.p.evd_query(evd, EVD_FIELD_ALL).unwrap();
    assert_eq!((q.evd_qlen, q.cno, q.evd_flags, q.ia), (6, cno, EvdFlags::SOFTWARE | EvdFlags::DTO, fx.ia));
    assert_eq!(q.evd_state.0 & 0x0f, EvdState::ENABLED | EvdState::WAITABLE);
    fx.p.evd_disable(evd).unwrap();
    fx.p.evd_set_unwaitable(evd).unwrap();
    let q = fx.p.evd_query(evd, EVD_FIELD_ALL).unwrap();
    assert_eq!(q.evd_state.0 & 0x0f, EvdState::DISABLED | EvdState::UNWAITABLE);
    assert_eq!(ty(fx.p.evd_query(evd, 0x20)), ErrorType::InvalidParameter);
}

#[test]
fn dat_evd_post_se_full_queue_is_queue_full_and_not_queued() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 2);
    fx.p.evd_post_se(evd, 1).unwrap();
    fx.p.evd_post_se(evd, 2).unwrap();
    assert_eq!(ty(fx.p.evd_post_se(evd, 3)), ErrorType::QueueFull);
    // "The queue overflow condition does takes place and, therefore, the
    // asynchronous Event Dispatcher is not effected."
    assert_eq!(ty(fx.p.evd_dequeue(fx.async_evd)), ErrorType::QueueEmpty);
    let got: Vec<_> = fx.drain(evd).into_iter().map(|e| e.data).collect();
    assert_eq!(got, [EventData::Software { pointer: 1 }, EventData::Software { pointer: 2 }]);
}

#[test]
fn dat_evd_post_se_needs_a_software_evd() {
    let mut fx = Fx::new();
    assert_eq!(ty(fx.p.evd_post_se(fx.dto_evd, 1)), ErrorType::InvalidParameter);
}

#[test]
fn dat_evd_dequeue_empty_is_queue_empty() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 2);
    assert_eq!(ty(fx.p.evd_dequeue(evd)), ErrorType::QueueEmpty);
}

#[test]
fn dat_evd_dequeue_while_waiter_is_invalid_state() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 2);
    fx.p.evd_post_se(evd, 1).unwrap();
    let wait = fx.p.evd_wait_begin(evd, 1000, 2).unwrap();
    let e = fx.p.evd_dequeue(evd).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateEvdWaiter));
    fx.p.evd_wait_end(&wait);
    assert!(fx.p.evd_dequeue(evd).is_ok());
}

#[test]
fn dat_evd_wait_second_waiter_is_invalid_state() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 2);
    let _first = fx.p.evd_wait_begin(evd, TIMEOUT_INFINITE, 1).unwrap();
    assert_eq!(ty(fx.p.evd_wait_begin(evd, TIMEOUT_INFINITE, 1)), ErrorType::InvalidState);
}

#[test]
fn dat_evd_wait_threshold_out_of_range_is_invalid_parameter() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 4);
    assert_eq!(ty(fx.p.evd_wait(evd, 0, 0)), ErrorType::InvalidParameter);
    assert_eq!(ty(fx.p.evd_wait(evd, 0, 5)), ErrorType::InvalidParameter);
}

#[test]
fn dat_evd_wait_times_out_below_threshold_and_dequeues_nothing() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 4);
    fx.p.evd_post_se(evd, 1).unwrap();
    assert_eq!(ty(fx.p.evd_wait(evd, 500, 2)), ErrorType::TimeoutExpired);
    assert_eq!(fx.p.evd_count(evd), Ok(1));
    assert_eq!(fx.p.backend().clock(), 500);
    // The waiter place is free again.
    assert!(fx.p.evd_dequeue(evd).is_ok());
}

#[test]
fn dat_evd_wait_returns_at_threshold_with_nmore() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    for cookie in 1..=3 {
        fx.p.ep_post_request(ep, &[fx.seg(0, 8)], cookie, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    }
    for at in [100, 200, 300] {
        fx.p.backend_mut().schedule(at, Scheduled::Send(ep, DtoStatus::Success));
    }
    let (ev, nmore) = fx.p.evd_wait(fx.dto_evd, TIMEOUT_INFINITE, 3).unwrap();
    assert_eq!(dtos(&[ev]), [(1, DtoStatus::Success)]);
    // "If the operation return value is DAT_SUCCESS, the nmore value is at
    // least the value of (threshold -1)."
    assert_eq!(nmore, 2);
    assert_eq!(fx.p.backend().clock(), 300);
}

#[test]
fn dat_evd_wait_threshold_must_be_one_for_unsignalled_streams() {
    let mut fx = Fx::new();
    let mut attr = fx.attr();
    attr.request_completion_flags = CompletionFlags::UNSIGNALLED;
    attr.recv_completion_flags = CompletionFlags::UNSIGNALLED;
    let _ep = fx.ep_with(Some(&attr));
    let e = fx.p.evd_wait_begin(fx.dto_evd, 10, 2).unwrap_err();
    assert_eq!(e.error_type(), ErrorType::InvalidState);
    let w = fx.p.evd_wait_begin(fx.dto_evd, 10, 1).unwrap();
    fx.p.evd_wait_end(&w);
}

#[test]
fn dat_evd_wait_on_unwaitable_is_invalid_state() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 2);
    fx.p.evd_set_unwaitable(evd).unwrap();
    let e = fx.p.evd_wait(evd, 10, 1).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateEvdUnwaitable));
    // Events still arrive and can be dequeued.
    fx.p.evd_post_se(evd, 9).unwrap();
    assert!(fx.p.evd_dequeue(evd).is_ok());
    fx.p.evd_clear_unwaitable(evd).unwrap();
    fx.p.evd_post_se(evd, 10).unwrap();
    assert!(fx.p.evd_wait(evd, 10, 1).is_ok());
}

#[test]
fn dat_evd_set_unwaitable_wakes_a_blocked_waiter_with_invalid_state() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 2);
    let wait = fx.p.evd_wait_begin(evd, TIMEOUT_INFINITE, 1).unwrap();
    assert!(matches!(fx.p.evd_wait_poll(&wait), Ok(WaitStep::Pending { .. })));
    fx.p.evd_set_unwaitable(evd).unwrap();
    assert_eq!(ty(fx.p.evd_wait_poll(&wait)), ErrorType::InvalidState);
    fx.p.evd_clear_unwaitable(evd).unwrap();
    assert!(fx.p.evd_wait_begin(evd, 0, 1).is_ok());
}

#[test]
fn dat_evd_wait_with_nothing_to_come_is_interrupted_not_hung() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 2);
    assert_eq!(ty(fx.p.evd_wait(evd, TIMEOUT_INFINITE, 1)), ErrorType::InterruptedCall);
    assert!(fx.p.evd_dequeue(evd).is_err_and(|e| e.error_type() == ErrorType::QueueEmpty));
}

#[test]
fn dat_evd_resize_below_queued_count_is_invalid_state() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 4);
    for i in 0..3 {
        fx.p.evd_post_se(evd, i).unwrap();
    }
    assert_eq!(ty(fx.p.evd_resize(evd, 2)), ErrorType::InvalidState);
    assert_eq!(fx.p.evd_query(evd, 0).unwrap().evd_qlen, 4);
    fx.p.evd_resize(evd, 3).unwrap();
    assert_eq!(ty(fx.p.evd_post_se(evd, 4)), ErrorType::QueueFull);
    fx.p.evd_resize(evd, 8).unwrap();
    fx.p.evd_post_se(evd, 4).unwrap();
    // "Resizing of Event Dispatcher event queue should not cause any ...
    // current events on the event queue to be lost."
    let got: Vec<_> = fx.drain(evd).into_iter().map(|e| e.data).collect();
    assert_eq!(got.len(), 4);
    assert_eq!(ty(fx.p.evd_resize(evd, 0)), ErrorType::InvalidParameter);
}

#[test]
fn dto_evd_overflow_is_reported_on_the_async_evd() {
    let mut fx = Fx::new();
    let conn = fx.p.evd_create(fx.ia, 1, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
    let ep = fx.p.ep_create(fx.ia, fx.pz, fx.dto_evd, fx.dto_evd, conn, None).unwrap();
    fx.connect(ep);
    fx.p.backend_mut().conn_event(ep, udat_core::backend::ConnOutcome::Established, b"");
    fx.p.backend_mut().conn_event(ep, udat_core::backend::ConnOutcome::Disconnected, b"");
    // The second connection event finds the one-slot EVD full.
    let ev = fx.p.evd_dequeue(fx.async_evd).unwrap();
    assert_eq!(ev.number, EventNumber::AsyncEvdOverflow);
    assert_eq!(ev.data, EventData::AsyncError { handle: Some(conn.into()), reason: 0 });
    assert_eq!(fx.p.evd_dequeue(conn).unwrap().number, EventNumber::ConnectionEstablished);
}

#[test]
fn completions_stay_in_the_cq_while_the_evd_is_full() {
    let mut fx = Fx::new();
    let small = fx.p.evd_create(fx.ia, 2, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let ep = fx.p.ep_create(fx.ia, fx.pz, small, small, fx.conn_evd, None).unwrap();
    for i in 0..4 {
        fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], i, CompletionFlags::DEFAULT).unwrap();
    }
    fx.p.ep_free(ep).unwrap_or_else(|_| unreachable!());
    // Four flushes, an EVD of two: none lost, none overflowed.
    let got = dtos(&fx.drain(small));
    assert_eq!(got.len(), 2);
    assert_eq!(ty(fx.p.evd_dequeue(fx.async_evd)), ErrorType::QueueEmpty);
}

#[test]
fn dat_evd_modify_cno_moves_the_tie() {
    let mut fx = Fx::new();
    let a = fx.p.cno_create(fx.ia, None).unwrap();
    let b = fx.p.cno_create(fx.ia, None).unwrap();
    let evd = fx.p.evd_create(fx.ia, 2, a, EvdFlags::SOFTWARE).unwrap();
    assert_eq!(ty(fx.p.cno_free(a)), ErrorType::InvalidState);
    fx.p.evd_modify_cno(evd, b).unwrap();
    fx.p.cno_free(a).unwrap();
    assert_eq!(ty(fx.p.cno_free(b)), ErrorType::InvalidState);
    fx.p.evd_modify_cno(evd, CnoHandle::NULL).unwrap();
    fx.p.cno_free(b).unwrap();
    assert_eq!(ty(fx.p.evd_modify_cno(evd, b)), ErrorType::InvalidHandle);
}

#[test]
fn dat_cno_wait_returns_the_notifying_evd() {
    let mut fx = Fx::new();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    let evd = fx.p.evd_create(fx.ia, 2, cno, EvdFlags::SOFTWARE).unwrap();
    fx.p.evd_post_se(evd, 1).unwrap();
    assert_eq!(fx.p.cno_wait(cno, 100), Ok(evd));
    // "On a timeout ... DAT_QUEUE_EMPTY".
    assert_eq!(ty(fx.p.cno_wait(cno, 100)), ErrorType::QueueEmpty);
}

#[test]
fn dat_evd_disable_stops_cno_notification() {
    let mut fx = Fx::new();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    let evd = fx.p.evd_create(fx.ia, 4, cno, EvdFlags::SOFTWARE).unwrap();
    fx.p.evd_disable(evd).unwrap();
    fx.p.evd_post_se(evd, 1).unwrap();
    assert_eq!(ty(fx.p.cno_wait(cno, 10)), ErrorType::QueueEmpty);
    fx.p.evd_enable(evd).unwrap();
    fx.p.evd_post_se(evd, 2).unwrap();
    assert_eq!(fx.p.cno_wait(cno, 10), Ok(evd));
}

#[test]
fn dat_evd_wait_waiter_preempts_the_cno() {
    let mut fx = Fx::new();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    let ep = fx.ep_connected();
    fx.p.evd_modify_cno(fx.dto_evd, cno).unwrap();
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.backend_mut().schedule(50, Scheduled::Send(ep, DtoStatus::Success));
    fx.p.evd_wait(fx.dto_evd, TIMEOUT_INFINITE, 1).unwrap();
    assert_eq!(ty(fx.p.cno_wait(cno, 10)), ErrorType::QueueEmpty);
}

#[test]
fn dat_cno_free_refused_while_tied_or_waited_on() {
    let mut fx = Fx::new();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    let wait = fx.p.cno_wait_begin(cno, TIMEOUT_INFINITE).unwrap();
    let e = fx.p.cno_free(cno).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateCnoInUse));
    let _ = wait;
}

#[test]
fn dat_cno_wait_unblocks_with_null_when_all_evds_are_freed() {
    let mut fx = Fx::new();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    let evd = fx.p.evd_create(fx.ia, 2, cno, EvdFlags::SOFTWARE).unwrap();
    let wait = fx.p.cno_wait_begin(cno, TIMEOUT_INFINITE).unwrap();
    assert!(matches!(fx.p.cno_wait_poll(&wait), Ok(CnoStep::Pending { .. })));
    fx.p.evd_free(evd).unwrap();
    assert_eq!(fx.p.cno_wait_poll(&wait), Ok(CnoStep::Woken(EvdHandle::NULL)));
    fx.p.cno_free(cno).unwrap();
}

#[test]
fn dat_cno_modify_agent_and_query() {
    let mut fx = Fx::new();
    let agent = ProxyAgent { instance_data: 1, function: 2 };
    let cno = fx.p.cno_create(fx.ia, Some(agent)).unwrap();
    assert_eq!(fx.p.cno_query(cno, CNO_FIELD_ALL).unwrap().agent, Some(agent));
    fx.p.cno_modify_agent(cno, None).unwrap();
    assert_eq!(fx.p.cno_query(cno, CNO_FIELD_ALL).unwrap().agent, None);
    assert_eq!(ty(fx.p.cno_query(cno, 0x100)), ErrorType::InvalidParameter);
}

#[test]
fn dat_cno_create_agent_is_invoked_once_per_setting() {
    let mut fx = Fx::new();
    let agent = ProxyAgent { instance_data: 1, function: 2 };
    let cno = fx.p.cno_create(fx.ia, Some(agent)).unwrap();
    let evd = fx.p.evd_create(fx.ia, 4, cno, EvdFlags::SOFTWARE).unwrap();
    fx.p.evd_post_se(evd, 1).unwrap();
    fx.p.evd_post_se(evd, 2).unwrap();
    // "After it is invoked, it is no longer associated with the CNO."
    assert_eq!(fx.p.cno_take_agent_call(cno), Ok(Some((agent, evd))));
    assert_eq!(fx.p.cno_take_agent_call(cno), Ok(None));
    assert_eq!(fx.p.cno_query(cno, 0).unwrap().agent, None);
}

#[test]
fn dat_cno_create_stale_ia_is_invalid_handle() {
    let mut fx = Fx::new();
    let ia = fx.ia;
    fx.p.ia_close(ia, CloseFlags::Abrupt).unwrap();
    assert_eq!(ty(fx.p.cno_create(ia, None)), ErrorType::InvalidHandle);
}

#[test]
fn dat_evd_enable_is_a_noop_when_already_enabled() {
    let mut fx = Fx::new();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    let evd = fx.p.evd_create(fx.ia, 4, cno, EvdFlags::SOFTWARE).unwrap();
    fx.p.evd_enable(evd).unwrap();
    fx.p.evd_enable(evd).unwrap();
    assert_eq!(fx.p.evd_query(evd, 0).unwrap().evd_state.0 & 0x3, EvdState::ENABLED);
    fx.p.evd_post_se(evd, 1).unwrap();
    assert_eq!(fx.p.cno_wait(cno, 10), Ok(evd));
    assert_eq!(ty(fx.p.evd_enable(EvdHandle::NULL)), ErrorType::InvalidHandle);
}

#[test]
fn dat_evd_clear_unwaitable_makes_waits_legal_again() {
    let mut fx = Fx::new();
    let evd = sw_evd(&mut fx, 2);
    fx.p.evd_set_unwaitable(evd).unwrap();
    fx.p.evd_clear_unwaitable(evd).unwrap();
    assert_eq!(fx.p.evd_query(evd, 0).unwrap().evd_state.0 & 0xc, EvdState::WAITABLE);
    fx.p.evd_post_se(evd, 3).unwrap();
    assert_eq!(fx.p.evd_wait(evd, 10, 1).unwrap().0.data, EventData::Software { pointer: 3 });
    assert_eq!(ty(fx.p.evd_clear_unwaitable(EvdHandle::NULL)), ErrorType::InvalidHandle);
}

#[test]
fn dat_cno_query_reports_its_ia_and_no_agent() {
    let mut fx = Fx::new();
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    assert_eq!(fx.p.cno_query(cno, CNO_FIELD_ALL), Ok(CnoParam { ia: fx.ia, agent: None }));
    fx.p.cno_free(cno).unwrap();
    assert_eq!(ty(fx.p.cno_query(cno, CNO_FIELD_ALL)), ErrorType::InvalidHandle);
}

#[test]
fn dat_evd_dequeue_of_a_dto_only_evd_looks_at_connection_events_when_it_finds_nothing() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.ep_post_recv(ep, &[fx.seg(0, 8)], 5, CompletionFlags::DEFAULT).unwrap();
    fx.p.backend_mut().conn_event(ep, ConnOutcome::Disconnected, b"");
    // The CQ has nothing: the dequeue looks at the connection events, and
    // the disconnect flushes the receive.
    let event = fx.p.evd_dequeue(fx.dto_evd).unwrap();
    assert_eq!(dtos(&[event]), [(5, DtoStatus::Flushed)]);
    assert_eq!(fx.state(ep), EpState::Disconnected);
    fx.drain(fx.conn_evd);
    // It looked a moment ago, so the next dequeue that finds nothing
    // leaves a new disconnect for later...
    let other = fx.ep_connected();
    fx.p.ep_post_recv(other, &[fx.seg(0, 8)], 6, CompletionFlags::DEFAULT).unwrap();
    fx.p.backend_mut().conn_event(other, ConnOutcome::Disconnected, b"");
    assert_eq!(ty(fx.p.evd_dequeue(fx.dto_evd)), ErrorType::QueueEmpty);
    assert_eq!(fx.state(other), EpState::Connected);
    // ...but a wait that would block pulls connection events at once.
    let (event, _) = fx.p.evd_wait(fx.dto_evd, 1_000, 1).unwrap();
    assert_eq!(dtos(&[event]), [(6, DtoStatus::Flushed)]);
    assert_eq!(fx.state(other), EpState::Disconnected);
}

/// A dequeue of a DTO-only EVD with nothing queued and no CNO takes the
/// next completion straight from the transport; with a CNO tied the events
/// pass through the queue. Either way they come in completion order with
/// their accounts settled, and a failed DTO still breaks the connection,
/// flushing the rest behind it.
#[test]
fn dat_evd_dequeue_gives_completions_in_order_with_or_without_a_cno() {
    let mut seen = Vec::new();
    for with_cno in [false, true] {
        let mut fx = Fx::new();
        if with_cno {
            let cno = fx.p.cno_create(fx.ia, None).unwrap();
            fx.p.evd_modify_cno(fx.dto_evd, cno).unwrap();
        }
        let ep = fx.ep_connected();
        for cookie in 1..=4 {
            fx.p.ep_post_request(ep, &[fx.seg(0, 8)], cookie, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
        }
        assert!(fx.p.backend_mut().complete_send(ep, DtoStatus::Success));
        assert!(fx.p.backend_mut().complete_send(ep, DtoStatus::Success));
        let first = fx.p.evd_dequeue(fx.dto_evd).unwrap();
        assert_eq!(dtos(&[first]), [(1, DtoStatus::Success)]);
        assert_eq!(fx.p.ep_get_status(ep).unwrap(), (EpState::Connected, true, false));
        // The third fails: the fourth is flushed, the connection breaks.
        assert!(fx.p.backend_mut().complete_send(ep, DtoStatus::LocalProtection));
        let rest = fx.drain(fx.dto_evd);
        assert_eq!(dtos(&rest), [(2, DtoStatus::Success), (3, DtoStatus::LocalProtection), (4, DtoStatus::Flushed)]);
        assert_eq!(fx.state(ep), EpState::Disconnected);
        let conn = fx.drain(fx.conn_evd);
        assert_eq!(conn.iter().map(|e| e.number).collect::<Vec<_>>(), [EventNumber::ConnectionBroken]);
        seen.push((first, rest));
    }
    assert_eq!(seen[0], seen[1]);
}

thread_local! {
    static SIGNALS: std::cell::Cell<(u32, u32)> = const { std::cell::Cell::new((0, 0)) };
}

fn raise(_: u64) {
    SIGNALS.with(|s| s.set((s.get().0 + 1, s.get().1)));
}

fn clear(_: u64) {
    SIGNALS.with(|s| s.set((s.get().0, s.get().1 + 1)));
}

/// Raises and clears so far in this thread.
fn signals() -> (u32, u32) {
    SIGNALS.with(|s| s.get())
}

fn signalled_cno(fx: &mut Fx) -> CnoHandle {
    SIGNALS.with(|s| s.set((0, 0)));
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    fx.p.cno_signal(cno, Some(Signal { raise, clear, arg: 0 })).unwrap();
    cno
}

#[test]
fn a_signalled_cno_raises_once_per_trigger_taken() {
    let mut fx = Fx::new();
    let cno = signalled_cno(&mut fx);
    let evd = fx.p.evd_create(fx.ia, 8, cno, EvdFlags::SOFTWARE).unwrap();
    assert_eq!(ty(fx.p.cno_trigger(cno)), ErrorType::QueueEmpty);
    assert_eq!(signals(), (0, 0));
    for i in 0..3 {
        fx.p.evd_post_se(evd, i).unwrap();
    }
    assert_eq!(signals(), (1, 0), "three events, one raise");
    assert_eq!(fx.p.cno_trigger(cno), Ok(evd));
    assert_eq!(signals(), (1, 1));
    assert_eq!(ty(fx.p.cno_trigger(cno)), ErrorType::QueueEmpty);
    fx.p.evd_post_se(evd, 4).unwrap();
    assert_eq!(signals(), (2, 1));
    assert_eq!(fx.drain(evd).len(), 4);
    assert_eq!(fx.p.cno_trigger(cno), Ok(evd), "the trigger outlives the events");
    assert_eq!(ty(fx.p.cno_trigger(CnoHandle::NULL)), ErrorType::InvalidHandle);
}

#[test]
fn a_completion_reaches_a_signalled_cno_through_cno_trigger() {
    let mut fx = Fx::new();
    let cno = signalled_cno(&mut fx);
    let ep = fx.ep_connected();
    fx.p.evd_modify_cno(fx.dto_evd, cno).unwrap();
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 7, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert!(fx.p.backend_mut().complete_send(ep, DtoStatus::Success));
    // Nothing pulled the CQ yet: the trigger does.
    assert_eq!(signals(), (0, 0));
    assert_eq!(fx.p.cno_trigger(cno), Ok(fx.dto_evd));
    assert_eq!(signals(), (1, 1));
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(7, DtoStatus::Success)]);
}

#[test]
fn events_queued_before_the_tie_or_the_enable_trigger_the_cno() {
    let mut fx = Fx::new();
    let cno = signalled_cno(&mut fx);
    let evd = fx.p.evd_create(fx.ia, 8, CnoHandle::NULL, EvdFlags::SOFTWARE).unwrap();
    fx.p.evd_post_se(evd, 1).unwrap();
    fx.p.evd_modify_cno(evd, cno).unwrap();
    assert_eq!(signals(), (1, 0));
    assert_eq!(fx.p.cno_trigger(cno), Ok(evd));
    fx.p.evd_disable(evd).unwrap();
    fx.p.evd_post_se(evd, 2).unwrap();
    assert_eq!(signals(), (1, 1), "a disabled EVD triggers nothing");
    fx.p.evd_enable(evd).unwrap();
    assert_eq!(signals(), (2, 1));
    assert_eq!(fx.p.cno_trigger(cno), Ok(evd));
    fx.drain(evd);
    // An empty EVD tied anew triggers nothing.
    fx.p.evd_modify_cno(evd, CnoHandle::NULL).unwrap();
    fx.p.evd_modify_cno(evd, cno).unwrap();
    assert_eq!(ty(fx.p.cno_trigger(cno)), ErrorType::QueueEmpty);
}

#[test]
fn a_retied_evd_leaves_its_trigger_on_the_old_cno() {
    let mut fx = Fx::new();
    let a = signalled_cno(&mut fx);
    let b = fx.p.cno_create(fx.ia, None).unwrap();
    let evd = fx.p.evd_create(fx.ia, 8, a, EvdFlags::SOFTWARE).unwrap();
    fx.p.evd_post_se(evd, 1).unwrap();
    fx.p.evd_modify_cno(evd, b).unwrap();
    // dat_evd_modify_cno(3DAT): "the Consumer must be prepared to collect
    // a notification event on the EVD's old CNO as well as the new one."
    assert_eq!(fx.p.cno_trigger(a), Ok(evd));
    assert_eq!(fx.p.cno_trigger(b), Ok(evd));
    fx.p.evd_post_se(evd, 2).unwrap();
    assert_eq!(ty(fx.p.cno_trigger(a)), ErrorType::QueueEmpty);
    assert_eq!(signals(), (1, 1));
}

#[test]
fn a_signal_given_to_a_triggered_cno_is_raised_at_once() {
    let mut fx = Fx::new();
    SIGNALS.with(|s| s.set((0, 0)));
    let cno = fx.p.cno_create(fx.ia, None).unwrap();
    let evd = fx.p.evd_create(fx.ia, 8, cno, EvdFlags::SOFTWARE).unwrap();
    fx.p.evd_post_se(evd, 1).unwrap();
    fx.p.cno_signal(cno, Some(Signal { raise, clear, arg: 0 })).unwrap();
    assert_eq!(signals(), (1, 0));
    // Taking the signal away clears what it raised.
    fx.p.cno_signal(cno, None).unwrap();
    assert_eq!(signals(), (1, 1));
    assert_eq!(fx.p.cno_trigger(cno), Ok(evd));
    assert_eq!(signals(), (1, 1));
}

#[test]
fn an_async_error_and_a_connection_event_reach_a_signalled_cno_through_cno_trigger() {
    let mut fx = Fx::new();
    let cno = signalled_cno(&mut fx);
    fx.p.evd_modify_cno(fx.async_evd, cno).unwrap();
    let conn = fx.p.evd_create(fx.ia, 1, cno, EvdFlags::CONNECTION).unwrap();
    let ep = fx.p.ep_create(fx.ia, fx.pz, fx.dto_evd, fx.dto_evd, conn, None).unwrap();
    fx.connect(ep);
    fx.p.backend_mut().conn_event(ep, udat_core::backend::ConnOutcome::Established, b"");
    fx.p.backend_mut().conn_event(ep, udat_core::backend::ConnOutcome::Disconnected, b"");
    // Both wait in the transport until a trigger pulls them: the first
    // connection event triggers the CNO, the second overflows the EVD.
    assert_eq!(signals(), (0, 0));
    assert_eq!(fx.p.cno_trigger(cno), Ok(conn));
    assert_eq!(signals(), (1, 1));
    assert_eq!(fx.p.evd_dequeue(fx.async_evd).unwrap().number, EventNumber::AsyncEvdOverflow);
    assert_eq!(fx.p.evd_dequeue(conn).unwrap().number, EventNumber::ConnectionEstablished);
}
