//! The fast path (`udat_core::poster`): segments checked once, an
//! endpoint borrowed for a run of posts and requests kept for it give
//! exactly what the ordinary posts give — every error code, every
//! completion — including after an LMR was freed, with segments another
//! provider checked, or with a request another poster kept.
mod common;
use common::*;
use udat_core::poster::{Access, Poster, Segments};
use udat_core::types::*;
use udat_core::*;
use udat_testkit::mock::MockBackend;

/// How the segments of a case stand when the post is made.
#[derive(Clone, Copy, Debug)]
enum Segs {
    Fine,
    None,
    /// One triplet of no bytes: not one segment a lane posts.
    Empty,
    /// Two triplets.
    Two,
    /// Their LMR was freed after they were checked.
    Freed,
    /// Checked for the other access.
    OtherAccess,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Send,
    Write,
    Read,
}

/// Keep `op` of `segs` with `flags` and post it once with `cookie`.
fn once<S: Storage>(
    poster: &mut Poster<'_, MockBackend, S>,
    segs: &Segments,
    cookie: u64,
    op: RequestOp,
    flags: CompletionFlags,
) -> DatResult<()> {
    let kept = poster.keep(segs, op, flags);
    poster.post(&kept, cookie)
}

/// One post both ways, on two fixtures made alike: the results and what
/// the transport was given must be the same.
fn same(op: Op, segs: Segs, flags: CompletionFlags, remote_len: u32) {
    let mut results = Vec::new();
    for fast in [false, true] {
        let mut fx = Fx::new();
        let ep = fx.ep_connected();
        let iov = match segs {
            Segs::None => vec![],
            Segs::Empty => vec![fx.seg(0, 0)],
            Segs::Two => vec![fx.seg(0, 4), fx.seg(16, 4)],
            _ => vec![fx.seg(0, 8)],
        };
        let reads_back = matches!(op, Op::Read) != matches!(segs, Segs::OtherAccess);
        let access = if reads_back { Access::Write } else { Access::Read };
        let checked = fx.p.segments(fx.pz, &iov, access).unwrap();
        if let Segs::Freed = segs {
            fx.p.lmr_free(fx.lmr.lmr).unwrap();
        }
        let remote = RmrTriplet { segment_length: remote_len, ..fx.remote(remote_len) };
        let r = if fast {
            let mut poster = fx.p.poster(ep).unwrap();
            match op {
                Op::Send => once(&mut poster, &checked, 9, RequestOp::Send, flags),
                Op::Write => once(&mut poster, &checked, 9, RequestOp::RdmaWrite { remote }, flags),
                Op::Read => once(&mut poster, &checked, 9, RequestOp::RdmaRead { remote }, flags),
            }
        } else {
            match op {
                Op::Send => fx.p.ep_post_request(ep, &iov, 9, RequestOp::Send, flags),
                Op::Write => fx.p.ep_post_request(ep, &iov, 9, RequestOp::RdmaWrite { remote }, flags),
                Op::Read => fx.p.ep_post_request(ep, &iov, 9, RequestOp::RdmaRead { remote }, flags),
            }
        };
        results.push((r, fx.p.backend().pending_sends(ep)));
    }
    assert_eq!(results[0], results[1], "{op:?} {segs:?} {flags:?} remote {remote_len}");
}

#[test]
fn fast_posts_give_what_ordinary_posts_give() {
    for op in [Op::Send, Op::Write, Op::Read] {
        for segs in [Segs::Fine, Segs::None, Segs::Empty, Segs::Two, Segs::Freed, Segs::OtherAccess] {
            for flags in [CompletionFlags::DEFAULT, CompletionFlags::UNSIGNALLED, CompletionFlags::SOLICITED_WAIT] {
                for remote_len in [4, 8] {
                    same(op, segs, flags, remote_len);
                }
            }
        }
    }
}

#[test]
fn a_fast_post_completes_like_any_other() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let segs = fx.p.segments(fx.pz, &[fx.seg(0, 10), fx.seg(100, 20)], Access::Read).unwrap();
    assert_eq!(segs.len(), 30);
    let mut poster = fx.p.poster(ep).unwrap();
    for cookie in 1..=3 {
        once(&mut poster, &segs, cookie, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    }
    for cookie in 1..=3 {
        fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
        let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
        let want =
            EventData::Dto { ep, cookie, status: DtoStatus::Success, transferred_length: 30, op: DtoOp::Send, imm: 0 };
        assert_eq!(ev.data, want);
    }
}

/// A request kept once posts again and again, each post its own
/// completion with its own cookie: kept built, where the transport's
/// lanes are open, and as a request judged at each post where they are
/// not.
#[test]
fn a_kept_request_posts_again_and_again() {
    for no_lanes in [false, true] {
        let mut fx = Fx::new();
        fx.p.backend_mut().no_lanes = no_lanes;
        let ep = fx.ep_connected();
        let segs = fx.p.segments(fx.pz, &[fx.seg(0, 24)], Access::Read).unwrap();
        let remote = fx.remote(24);
        let mut poster = fx.p.poster(ep).unwrap();
        let kept = poster.keep(&segs, RequestOp::RdmaWrite { remote }, CompletionFlags::DEFAULT);
        assert_eq!(format!("{kept:?}").contains("built: true"), !no_lanes, "{kept:?}");
        for cookie in 1..=3 {
            poster.post(&kept, cookie).unwrap();
        }
        for cookie in 1..=3 {
            fx.p.backend_mut().complete_send(ep, DtoStatus::Success);
            let ev = fx.p.evd_dequeue(fx.dto_evd).unwrap();
            let (status, transferred_length, op) = (DtoStatus::Success, 24, DtoOp::RdmaWrite);
            let want = EventData::Dto { ep, cookie, status, transferred_length, op, imm: 0 };
            assert_eq!(ev.data, want, "no lanes: {no_lanes}");
        }
    }
}

/// A request is kept built for the poster that kept it alone: another
/// poster judges it afresh at each post, on its own EP, after an LMR of
/// its segments was freed too.
#[test]
fn a_request_another_poster_kept_is_judged_again() {
    let mut fx = Fx::new();
    let (a, b) = (fx.ep_connected(), fx.ep_connected());
    let segs = fx.p.segments(fx.pz, &[fx.seg(0, 8)], Access::Read).unwrap();
    let kept = fx.p.poster(a).unwrap().keep(&segs, RequestOp::Send, CompletionFlags::DEFAULT);
    fx.p.poster(b).unwrap().post(&kept, 7).unwrap();
    assert_eq!((fx.p.backend().pending_sends(a), fx.p.backend().pending_sends(b)), (0, 1));
    fx.p.poster(a).unwrap().post(&kept, 8).unwrap();
    assert_eq!(fx.p.backend().pending_sends(a), 1);
    fx.p.lmr_free(fx.lmr.lmr).unwrap();
    assert_eq!(ty(fx.p.poster(a).unwrap().post(&kept, 9)), ErrorType::ProtectionViolation);
    assert_eq!(fx.p.backend().pending_sends(a), 1);
}

/// A connected EP whose attributes `limit` changed from the defaults.
fn connected_with(fx: &mut Fx, limit: impl FnOnce(&mut EpAttr)) -> EpHandle {
    let mut attr = fx.attr();
    limit(&mut attr);
    let ep = fx.ep_with(Some(&attr));
    fx.establish(ep);
    ep
}

#[test]
fn the_outstanding_limit_holds_on_the_fast_path() {
    let mut fx = Fx::new();
    let ep = connected_with(&mut fx, |attr| attr.max_request_dtos = 2);
    let segs = fx.p.segments(fx.pz, &[fx.seg(0, 8)], Access::Read).unwrap();
    let mut poster = fx.p.poster(ep).unwrap();
    once(&mut poster, &segs, 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    once(&mut poster, &segs, 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    assert_eq!(
        ty(once(&mut poster, &segs, 3, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::InsufficientResources
    );
}

#[test]
fn the_segment_limit_holds_on_the_fast_path() {
    let mut fx = Fx::new();
    let ep = connected_with(&mut fx, |attr| attr.max_request_iov = 1);
    let iov = [fx.seg(0, 4), fx.seg(16, 4)];
    let ordinary = fx.p.ep_post_request(ep, &iov, 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap_err();
    assert_eq!(ordinary.error_type(), ErrorType::InvalidParameter);
    let two = fx.p.segments(fx.pz, &iov, Access::Read).unwrap();
    let one = fx.p.segments(fx.pz, &iov[..1], Access::Read).unwrap();
    let mut poster = fx.p.poster(ep).unwrap();
    assert_eq!(once(&mut poster, &two, 1, RequestOp::Send, CompletionFlags::DEFAULT), Err(ordinary));
    once(&mut poster, &one, 2, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
}

#[test]
fn an_endpoint_is_borrowed_only_in_a_state_that_posts() {
    let mut fx = Fx::new();
    let idle = fx.ep();
    let e = fx.p.poster(idle).unwrap_err();
    assert_eq!((e.error_type(), e.subtype()), (ErrorType::InvalidState, Subtype::InvalidStateEpUnconnected));
    let ep = fx.ep_connected();
    fx.p.ep_free(ep).unwrap();
    assert_eq!(ty(fx.p.poster(ep)), ErrorType::InvalidHandle);
}

#[test]
fn segments_another_provider_checked_are_checked_again() {
    let a = Fx::new();
    let mut b = Fx::new();
    // The same context names an LMR in both providers; only `a` checked.
    let segs = a.p.segments(a.pz, &[a.seg(0, 8)], Access::Read).unwrap();
    let ep = b.ep_connected();
    b.p.lmr_free(b.lmr.lmr).unwrap();
    let mut poster = b.p.poster(ep).unwrap();
    assert_eq!(
        ty(once(&mut poster, &segs, 1, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::ProtectionViolation
    );
}

#[test]
fn segments_of_another_zone_are_checked_again() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    let (pz2, seg) = fx.another_zone();
    let segs = fx.p.segments(pz2, &[seg], Access::Read).unwrap();
    let mut poster = fx.p.poster(ep).unwrap();
    assert_eq!(
        ty(once(&mut poster, &segs, 2, RequestOp::Send, CompletionFlags::DEFAULT)),
        ErrorType::ProtectionViolation
    );
    assert_eq!(fx.p.backend().pending_sends(ep), 0);
}

#[test]
fn segments_checked_for_one_use_are_checked_again_for_the_other() {
    let mut fx = Fx::new();
    let ep = fx.ep_connected();
    // An LMR the HCA may read and not write: fine for a write's source,
    // not for a read's destination (dat_ep_post_rdma_read(3DAT)).
    let seg = fx.seg_of_64(0x8000, fx.pz, MemPriv::LOCAL_READ);
    let segs = fx.p.segments(fx.pz, &[seg], Access::Read).unwrap();
    let remote = fx.remote(8);
    let mut poster = fx.p.poster(ep).unwrap();
    let e = once(&mut poster, &segs, 1, RequestOp::RdmaRead { remote }, CompletionFlags::DEFAULT).unwrap_err();
    assert_eq!(e.error_type(), ErrorType::PrivilegesViolation);
    once(&mut poster, &segs, 2, RequestOp::RdmaWrite { remote }, CompletionFlags::DEFAULT).unwrap();
}

#[test]
fn segments_are_checked_as_a_post_checks_them() {
    let fx = Fx::new();
    let outside = LmrTriplet { segment_length: 8, ..fx.seg(BUF_LEN - 4, 8) };
    assert_eq!(ty(fx.p.segments(fx.pz, &[outside], Access::Read)), ErrorType::InvalidParameter);
    let unknown = LmrTriplet { lmr_context: 0xdead_0001, ..fx.seg(0, 8) };
    assert_eq!(ty(fx.p.segments(fx.pz, &[unknown], Access::Read)), ErrorType::ProtectionViolation);
    let too_many = vec![fx.seg(0, 8); 17];
    let e = fx.p.segments(fx.pz, &too_many, Access::Read).unwrap_err();
    assert_eq!(e.subtype(), Subtype::InvalidArg2);
}
