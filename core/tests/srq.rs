//! dat_srq_create(3DAT), dat_srq_free(3DAT), dat_srq_post_recv(3DAT),
//! dat_srq_query(3DAT), dat_srq_resize(3DAT), dat_srq_set_lw(3DAT).
mod common;
use common::*;
use udat_core::types::*;
use udat_core::*;

const ATTR: SrqAttr = SrqAttr { max_recv_dtos: 4, max_recv_iov: 2, low_watermark: 0 };

fn srq_ep(fx: &mut Fx, srq: SrqHandle) -> EpHandle {
    let attr = fx.attr();
    fx.p.ep_create_with_srq(fx.ia, fx.pz, fx.dto_evd, fx.dto_evd, fx.conn_evd, srq, &attr).unwrap()
}

#[test]
fn dat_srq_create_attribute_checks() {
    let mut fx = Fx::new();
    let bad = [
        SrqAttr { max_recv_dtos: 0, ..ATTR },
        SrqAttr { max_recv_dtos: 10_000, ..ATTR },
        SrqAttr { max_recv_iov: 100, ..ATTR },
        // "The Consumer must set low_watermark to DAT_SRQ_LW_DEFAULT".
        SrqAttr { low_watermark: 1, ..ATTR },
    ];
    for attr in bad {
        assert_eq!(ty(fx.p.srq_create(fx.ia, fx.pz, &attr)), ErrorType::InvalidParameter, "{attr:?}");
    }
    assert_eq!(ty(fx.p.srq_create(fx.ia, PzHandle::NULL, &ATTR)), ErrorType::InvalidHandle);
    let srq = fx.p.srq_create(fx.ia, fx.pz, &ATTR).unwrap();
    let q = fx.p.srq_query(srq, SRQ_FIELD_ALL).unwrap();
    assert_eq!((q.max_recv_dtos, q.max_recv_iov, q.low_watermark, q.pz), (4, 2, 0, fx.pz));
}

#[test]
fn dat_srq_free_refused_while_an_ep_uses_it() {
    let mut fx = Fx::new();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &ATTR).unwrap();
    let ep = srq_ep(&mut fx, srq);
    let e = fx.p.srq_free(srq).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateSrqInUse));
    // dat_ep_create_with_srq(3DAT): "The relationship between SRQ and EP is
    // not effected by dat_ep_reset."
    fx.p.ep_reset(ep).unwrap();
    assert_eq!(ty(fx.p.srq_free(srq)), ErrorType::InvalidState);
    fx.p.ep_free(ep).unwrap();
    fx.p.srq_free(srq).unwrap();
    assert_eq!(ty(fx.p.srq_query(srq, 0)), ErrorType::InvalidHandle);
}

#[test]
fn dat_srq_post_recv_feeds_any_ep_and_counts_outstanding() {
    let mut fx = Fx::new();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &ATTR).unwrap();
    let a = srq_ep(&mut fx, srq);
    let b = srq_ep(&mut fx, srq);
    for c in 1..=3 {
        fx.p.srq_post_recv(srq, &[fx.seg(0, 64)], c).unwrap();
    }
    assert_eq!(fx.p.srq_query(srq, 0).unwrap().outstanding_dto_count, 3);
    fx.p.backend_mut().complete_recv(a, 10);
    fx.p.backend_mut().complete_recv(b, 20);
    let evs = fx.drain(fx.dto_evd);
    let eps: Vec<_> = evs
        .iter()
        .map(|e| match e.data {
            EventData::Dto { ep, cookie, .. } => (ep, cookie),
            _ => panic!(),
        })
        .collect();
    assert_eq!(eps, [(a, 1), (b, 2)]);
    assert_eq!(fx.p.srq_query(srq, 0).unwrap().outstanding_dto_count, 1);
    assert_eq!(fx.p.ep_recv_query(a), Ok((VALUE_UNKNOWN, VALUE_UNKNOWN)));
}

#[test]
fn dat_srq_post_recv_checks_like_a_receive() {
    let mut fx = Fx::new();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &ATTR).unwrap();
    let seg = fx.seg(0, 8);
    assert_eq!(ty(fx.p.srq_post_recv(srq, &[seg; 3], 1)), ErrorType::InvalidParameter);
    let (_, foreign) = fx.another_zone();
    assert_eq!(ty(fx.p.srq_post_recv(srq, &[foreign], 1)), ErrorType::ProtectionViolation);
    for c in 0..4 {
        fx.p.srq_post_recv(srq, &[seg], c).unwrap();
    }
    assert_eq!(ty(fx.p.srq_post_recv(srq, &[seg], 5)), ErrorType::InsufficientResources);
}

#[test]
fn dat_srq_resize_below_outstanding_is_invalid_state() {
    let mut fx = Fx::new();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &ATTR).unwrap();
    for c in 0..3 {
        fx.p.srq_post_recv(srq, &[fx.seg(0, 8)], c).unwrap();
    }
    assert_eq!(ty(fx.p.srq_resize(srq, 2)), ErrorType::InvalidState);
    assert_eq!(ty(fx.p.srq_resize(srq, 0)), ErrorType::InvalidParameter);
    fx.p.srq_resize(srq, 3).unwrap();
    assert_eq!(fx.p.srq_query(srq, 0).unwrap().max_recv_dtos, 3);
}

#[test]
fn dat_srq_set_lw_above_max_is_invalid_parameter_else_not_supported() {
    let mut fx = Fx::new();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &ATTR).unwrap();
    assert_eq!(ty(fx.p.srq_set_lw(srq, 5)), ErrorType::InvalidParameter);
    assert_eq!(ty(fx.p.srq_set_lw(srq, 2)), ErrorType::ModelNotSupported);
}

#[test]
fn srq_ep_flush_on_disconnect_leaves_srq_buffers_alone() {
    let mut fx = Fx::new();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &ATTR).unwrap();
    let ep = srq_ep(&mut fx, srq);
    fx.establish(ep);
    fx.p.srq_post_recv(srq, &[fx.seg(0, 8)], 1).unwrap();
    fx.p.ep_disconnect(ep, CloseFlags::Abrupt).unwrap();
    assert!(dtos(&fx.drain(fx.dto_evd)).is_empty());
    assert_eq!(fx.p.srq_query(srq, 0).unwrap().outstanding_dto_count, 1);
}

#[test]
fn an_srq_ep_losing_its_connection_reports_ep_broken_on_the_async_evd() {
    let mut fx = Fx::new();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &ATTR).unwrap();
    let ep = srq_ep(&mut fx, srq);
    let plain = fx.ep();
    fx.establish(ep);
    fx.establish(plain);
    fx.p.ep_disconnect(plain, CloseFlags::Abrupt).unwrap();
    assert!(fx.drain(fx.async_evd).is_empty(), "an EP without an SRQ raises nothing");
    // The peer closes: DISCONNECTED on the connect EVD, then EP_BROKEN.
    fx.p.backend_mut().conn_event(ep, udat_core::backend::ConnOutcome::Disconnected, b"");
    assert_eq!(fx.p.evd_dequeue(fx.conn_evd).map(|e| e.number), Ok(EventNumber::ConnectionDisconnected));
    let ev = fx.p.evd_dequeue(fx.async_evd).unwrap();
    assert_eq!(ev.number, EventNumber::AsyncEpBroken);
    assert_eq!(ev.data, EventData::AsyncError { handle: Some(ep.into()), reason: 0 });
    fx.p.ep_free(ep).unwrap();
}

#[test]
fn dat_srq_query_mask_outside_all_is_invalid_parameter() {
    let mut fx = Fx::new();
    let srq = fx.p.srq_create(fx.ia, fx.pz, &ATTR).unwrap();
    assert_eq!(ty(fx.p.srq_query(srq, 0x100)), ErrorType::InvalidParameter);
    let q = fx.p.srq_query(srq, SRQ_FIELD_ALL).unwrap();
    assert_eq!((q.ia, q.outstanding_dto_count, q.available_dto_count), (fx.ia, 0, VALUE_UNKNOWN));
}
