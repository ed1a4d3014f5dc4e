//! Device errors as DAT asynchronous events (`udat_core::device_error`):
//! a QP or CQ in error, a port down, a failed device. Each leaves every
//! other object of the provider as it was.

mod common;

use common::*;
use udat_core::types::*;
use udat_core::*;

/// The async EVD's next event: its number, the handle it names, and the
/// reason.
fn async_error(fx: &mut Fx) -> (EventNumber, Option<AnyHandle>, u32) {
    let e = fx.p.evd_dequeue(fx.async_evd).expect("an asynchronous event");
    match e.data {
        EventData::AsyncError { handle, reason } => (e.number, handle, reason),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_qp_error_breaks_the_connection_flushes_its_dtos_and_names_the_ep_on_the_async_evd() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let bystander = fx.ep_connected();
    fx.p.ep_post_request(ep, &[fx.seg(0, 8)], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.backend_mut().qp_error(ep);
    // dat.h: DAT_EP_TRANSFER_TO_ERROR, the EP's transport went to error.
    assert_eq!(async_error(&mut fx), (EventNumber::AsyncEpBroken, Some(ep.into()), 0));
    assert_eq!(fx.state(ep), EpState::Disconnected);
    let conn: Vec<_> = fx.drain(fx.conn_evd).iter().map(|e| e.number).collect();
    assert_eq!(conn, [EventNumber::ConnectionBroken]);
    assert_eq!(dtos(&fx.drain(fx.dto_evd)), [(1, DtoStatus::Flushed)]);
    assert_eq!(fx.state(bystander), EpState::Connected);
    assert!(fx.p.evd_dequeue(fx.async_evd).is_err(), "one event");
}

#[test]
fn a_qp_error_of_an_ep_with_no_connection_is_only_reported() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    fx.p.backend_mut().qp_error(ep);
    assert_eq!(async_error(&mut fx), (EventNumber::AsyncEpBroken, Some(ep.into()), 0));
    assert_eq!(fx.state(ep), EpState::Unconnected);
    assert!(fx.drain(fx.conn_evd).is_empty());
}

#[test]
fn a_qp_error_of_a_freed_ep_is_ignored() {
    let mut fx = Fx::new();
    let ep = fx.ep();
    fx.p.ep_free(ep).unwrap();
    fx.p.backend_mut().qp_error(ep);
    let _ = fx.p.evd_dequeue(fx.dto_evd);
    assert!(fx.p.evd_dequeue(fx.async_evd).is_err());
}

#[test]
fn a_cq_error_is_evd_overflow_and_breaks_each_ep_that_feeds_the_evd_once() {
    let mut fx = Fx::new();
    let (a, b) = (fx.ep_connected(), fx.ep_connected());
    // An EP on other EVDs carries on.
    let other_dto = fx.p.evd_create(fx.ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let other = fx.p.ep_create(fx.ia, fx.pz, other_dto, other_dto, fx.conn_evd, None).unwrap();
    fx.establish(other);
    fx.p.ep_post_request(a, &[fx.seg(0, 8)], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.p.ep_post_request(b, &[fx.seg(0, 8)], 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert!(fx.p.backend_mut().cq_error(fx.dto_evd));
    // Soft-RoCE repeats it for every completion it loses.
    assert!(fx.p.backend_mut().cq_error(fx.dto_evd));
    // dat.h: DAT_EVD_OVERFLOW_ERROR.
    assert_eq!(async_error(&mut fx), (EventNumber::AsyncEvdOverflow, Some(fx.dto_evd.into()), 0));
    assert!(fx.p.evd_dequeue(fx.async_evd).is_err(), "one event for the EVD");
    assert_eq!(
        (fx.state(a), fx.state(b), fx.state(other)),
        (EpState::Disconnected, EpState::Disconnected, EpState::Connected)
    );
    let broken = fx.drain(fx.conn_evd);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken.iter().all(|e| e.number == EventNumber::ConnectionBroken));
    let mut flushed = dtos(&fx.drain(fx.dto_evd));
    flushed.sort_by_key(|(cookie, _)| *cookie);
    assert_eq!(flushed, [(1, DtoStatus::Flushed), (2, DtoStatus::Flushed)]);
    fx.p.ep_post_request(other, &[fx.seg(0, 8)], 3, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert!(fx.p.backend_mut().complete_send(other, DtoStatus::Success));
    assert_eq!(dtos(&fx.drain(other_dto)), [(3, DtoStatus::Success)]);
}

#[test]
fn a_cq_error_of_a_freed_evd_is_ignored() {
    let mut fx = Fx::new();
    let evd = fx.p.evd_create(fx.ia, 8, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    assert!(fx.p.backend_mut().cq_error(evd));
    fx.p.evd_free(evd).unwrap();
    let _ = fx.p.evd_dequeue(fx.dto_evd);
    assert!(fx.p.evd_dequeue(fx.async_evd).is_err());
}

#[test]
fn a_port_down_is_an_ia_error_of_another_kind_and_breaks_nothing() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    fx.p.backend_mut().port_down();
    // dat.h: DAT_IA_OTHER_ERROR, not DAT_IA_CATASTROPHIC_ERROR.
    assert_eq!(async_error(&mut fx), (EventNumber::AsyncIaCatastrophic, Some(fx.ia.into()), 1));
    assert_eq!(fx.state(ep), EpState::Connected);
}

#[test]
fn a_device_failure_is_catastrophic_with_its_reason() {
    let mut fx = Fx::new();
    fx.p.backend_mut().catastrophe();
    assert_eq!(async_error(&mut fx), (EventNumber::AsyncIaCatastrophic, Some(fx.ia.into()), 0));
}
