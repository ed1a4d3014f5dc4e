//! The lanes against their ordinary calls: twin providers built by the
//! same calls, one posting and dequeuing through the lane first (the
//! ordinary call only where the lane did not take it), the other through
//! the ordinary call alone (its transport declines every lane, so that
//! the ordinary call's own try of the lane takes nothing). A lane never
//! takes what the ordinary call refuses, and the twins answer and hold
//! the same throughout.
mod common;
use std::num::NonZeroU64;

use common::*;
use udat_core::backend::RequestOp;
use udat_core::slab::word_of;
use udat_core::types::*;
use udat_core::*;

/// The state an EP starts a case in.
#[derive(Clone, Copy, Debug, PartialEq)]
enum EpCase {
    Unconnected,
    Connecting,
    Connected,
    Disconnected,
    /// Connected, its one request slot and its one receive slot taken.
    Full,
    /// Connected, and admitting unsignalled requests.
    Unsignalled,
    /// Freed: the handle is stale.
    Freed,
}

/// The segment a case posts.
#[derive(Clone, Copy, Debug)]
enum SegCase {
    Good,
    Empty,
    /// A context no LMR has.
    Unknown,
    /// Past the end of its LMR.
    Outside,
    /// An LMR of another PZ.
    OtherPz,
    /// An LMR the HCA may read but not write.
    ReadOnly,
}

#[derive(Clone, Copy, Debug)]
enum OpCase {
    Send,
    Write {
        remote: u32,
    },
    Read {
        remote: u32,
    },
    /// The IB extension's write with immediate data.
    WriteImm {
        remote: u32,
    },
}

const EPS: [EpCase; 7] = [
    EpCase::Unconnected,
    EpCase::Connecting,
    EpCase::Connected,
    EpCase::Disconnected,
    EpCase::Full,
    EpCase::Unsignalled,
    EpCase::Freed,
];
const SEGS: [SegCase; 6] =
    [SegCase::Good, SegCase::Empty, SegCase::Unknown, SegCase::Outside, SegCase::OtherPz, SegCase::ReadOnly];
const OPS: [OpCase; 7] = [
    OpCase::Send,
    OpCase::Write { remote: 64 },
    OpCase::Write { remote: 8 },
    OpCase::Read { remote: 64 },
    OpCase::Read { remote: 128 },
    OpCase::WriteImm { remote: 64 },
    OpCase::WriteImm { remote: 8 },
];
const FLAGS: [u32; 6] = [
    CompletionFlags::DEFAULT.0,
    CompletionFlags::SUPPRESS.0,
    CompletionFlags::UNSIGNALLED.0,
    CompletionFlags::SOLICITED_WAIT.0,
    CompletionFlags::BARRIER_FENCE.0,
    0x80,
];

/// Whether case `n` of a grid runs: every one natively; under Miri, which
/// runs each case some thousand times slower, one in 17, a stride that
/// still reaches every value of every axis.
fn runs(n: usize) -> bool {
    !cfg!(miri) || n % 17 == 0
}

/// A fixture with the case's EP and segment; the same calls every time.
fn world(ep: EpCase, seg: SegCase) -> (Fx, EpHandle, LmrTriplet) {
    let mut fx = Fx::new();
    let h = match ep {
        EpCase::Unconnected => fx.ep(),
        EpCase::Connecting => fx.ep_connecting(),
        EpCase::Connected => fx.ep_connected(),
        EpCase::Disconnected => fx.ep_disconnected(),
        EpCase::Full => {
            let attr = EpAttr { max_request_dtos: 1, max_recv_dtos: 1, ..fx.attr() };
            let h = fx.ep_with(Some(&attr));
            fx.establish(h);
            fx.p.ep_post_request(h, &[fx.seg(0, 8)], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
            fx.p.ep_post_recv(h, &[fx.seg(0, 8)], 1, CompletionFlags::DEFAULT).unwrap();
            h
        }
        EpCase::Unsignalled => {
            // Both streams feed one EVD, so they share its notification mode.
            let unsignalled = CompletionFlags::UNSIGNALLED;
            let attr =
                EpAttr { request_completion_flags: unsignalled, recv_completion_flags: unsignalled, ..fx.attr() };
            let h = fx.ep_with(Some(&attr));
            fx.establish(h);
            h
        }
        EpCase::Freed => {
            let h = fx.ep();
            fx.p.ep_free(h).unwrap();
            h
        }
    };
    let other_pz = fx.p.pz_create(fx.ia).unwrap();
    let region = |address| MemType::Virtual { address, length: BUF_LEN };
    let other = fx.p.mock_lmr_create(fx.ia, region(BUF + BUF_LEN), other_pz, MemPriv::ALL).unwrap();
    let read_only = fx.p.mock_lmr_create(fx.ia, region(BUF + 2 * BUF_LEN), fx.pz, MemPriv::LOCAL_READ).unwrap();
    let at = |created: &LmrCreated, len| LmrTriplet {
        virtual_address: created.registered_address,
        segment_length: len,
        lmr_context: created.lmr_context,
    };
    let seg = match seg {
        SegCase::Good => fx.seg(0, 64),
        SegCase::Empty => fx.seg(0, 0),
        SegCase::Unknown => LmrTriplet { lmr_context: fx.lmr.lmr_context ^ 0x4000, ..fx.seg(0, 64) },
        SegCase::Outside => fx.seg(BUF_LEN - 8, 64),
        SegCase::OtherPz => at(&other, 64),
        SegCase::ReadOnly => at(&read_only, 64),
    };
    // Named as the C ABI names each EP it hands out (a freed one keeps no
    // name: its slot answers none).
    if ep != EpCase::Freed {
        fx.name(h);
    }
    (fx, h, seg)
}

fn request(op: OpCase, fx: &Fx) -> RequestOp {
    match op {
        OpCase::Send => RequestOp::Send,
        OpCase::Write { remote } => RequestOp::RdmaWrite { remote: fx.remote(remote) },
        OpCase::Read { remote } => RequestOp::RdmaRead { remote: fx.remote(remote) },
        OpCase::WriteImm { remote } => RequestOp::RdmaWriteImm { remote: fx.remote(remote), imm: 0x1234 },
    }
}

fn ordinary(fx: &mut Fx, ep: EpHandle, seg: LmrTriplet, op: RequestOp, flags: CompletionFlags) -> DatResult<()> {
    fx.p.ep_post_request(ep, &[seg], 9, op, flags)
}

#[test]
fn the_request_lane_takes_only_what_the_ordinary_post_accepts_and_does_what_it_does() {
    let mut tally = Tally::default();
    for ep_case in EPS {
        for seg_case in SEGS {
            for op_case in OPS {
                for flags in FLAGS.map(CompletionFlags) {
                    tally.case(
                        (ep_case, seg_case),
                        (ep_case, seg_case, op_case, flags),
                        |fx, ep, seg| {
                            let (raw, op) = (ep.raw(), request(op_case, fx));
                            fx.p.lane_request(word_of(raw.index()), lane_name(ep), &seg, 9, || Some(op), flags)
                        },
                        |fx, ep, seg| ordinary(fx, ep, seg, request(op_case, fx), flags),
                        |a, b, ep| a.p.backend().pending_sends(ep) == b.p.backend().pending_sends(ep),
                    );
                }
            }
        }
    }
    let least = if cfg!(miri) { (1, 10) } else { (20, 200) };
    tally.exercised(least);
}

#[test]
fn the_recv_lane_takes_only_what_the_ordinary_post_accepts_and_does_what_it_does() {
    let mut tally = Tally::default();
    for ep_case in EPS {
        for seg_case in SEGS {
            for flags in FLAGS.map(CompletionFlags) {
                tally.case(
                    (ep_case, seg_case),
                    (ep_case, seg_case, flags),
                    |fx, ep, seg| {
                        let raw = ep.raw();
                        fx.p.lane_recv(word_of(raw.index()), lane_name(ep), &seg, 9, flags)
                    },
                    |fx, ep, seg| fx.p.ep_post_recv(ep, &[seg], 9, flags),
                    |a, b, ep| {
                        a.p.backend().pending_recvs(ep) == b.p.backend().pending_recvs(ep)
                            && a.drain(a.dto_evd) == b.drain(b.dto_evd)
                    },
                );
            }
        }
    }
    let least = if cfg!(miri) { (0, 5) } else { (6, 100) };
    tally.exercised(least);
}

/// The cases of a grid that ran, and what came of them.
#[derive(Default)]
struct Tally {
    cases: usize,
    taken: usize,
    refused: usize,
}

impl Tally {
    /// Case `what` of the grid, an EP and a segment of the given cases,
    /// on twin worlds (see [`runs`]): `lane` on
    /// one, then `post` if the lane did not take the call; `post` alone on
    /// the other. The lane takes nothing `post` refuses, both answer the
    /// same, and afterwards the EP's status and what `same` compares are
    /// the same.
    fn case(
        &mut self,
        (ep_case, seg_case): (EpCase, SegCase),
        what: impl core::fmt::Debug,
        lane: impl FnOnce(&mut Fx, EpHandle, LmrTriplet) -> bool,
        post: impl Fn(&mut Fx, EpHandle, LmrTriplet) -> DatResult<()>,
        same: impl FnOnce(&mut Fx, &mut Fx, EpHandle) -> bool,
    ) {
        self.cases += 1;
        if !runs(self.cases) {
            return;
        }
        let ((mut a, ep, seg), (mut b, _, _)) = (world(ep_case, seg_case), world(ep_case, seg_case));
        let taken = lane(&mut a, ep, seg);
        let through_lane = if taken { Ok(()) } else { post(&mut a, ep, seg) };
        b.p.backend_mut().no_lanes = true;
        let alone = post(&mut b, ep, seg);
        b.p.backend_mut().no_lanes = false;
        assert!(!taken || alone.is_ok(), "the lane took {what:?}, which the post refuses: {alone:?}");
        assert_eq!(through_lane, alone, "{what:?}");
        if ep_case != EpCase::Freed {
            assert_eq!(a.p.ep_get_status(ep).unwrap(), b.p.ep_get_status(ep).unwrap(), "{what:?}");
            assert!(same(&mut a, &mut b, ep), "{what:?}: the twins differ");
        }
        if taken {
            self.taken += 1;
        } else if alone.is_err() {
            self.refused += 1;
        }
    }

    /// Both sides of the lane were exercised: at least `least` cases taken
    /// and refused.
    fn exercised(&self, least: (usize, usize)) {
        let Tally { taken, refused, .. } = *self;
        assert!(taken >= least.0 && refused >= least.1, "taken {taken}, refused {refused}");
    }
}

/// A post's lane takes an EP by its name alone: the name of its slot's
/// other generation is refused, and so is an EP not named at all (the
/// ordinary call takes its posts).
#[test]
fn a_lane_refuses_a_handle_of_another_generation() {
    let (mut fx, ep, seg) = world(EpCase::Connected, SegCase::Good);
    let raw = ep.raw();
    let stale = raw.generation().wrapping_add(1);
    let send = || Some(RequestOp::Send);
    // The name of the handle of the slot's other generation.
    let other = NonZeroU64::new(u64::from(stale) << 32 | u64::from(raw.index())).unwrap();
    assert!(!fx.p.lane_request(word_of(raw.index()), other, &seg, 1, send, CompletionFlags::DEFAULT));
    assert!(fx
        .p
        .lane_dequeue(EvdHandle::from_raw(RawHandle::from_bits(
            u64::from(stale) << 32 | u64::from(fx.dto_evd.raw().index())
        )))
        .is_err());
    assert_eq!(fx.p.backend().pending_sends(ep), 0);
    let unnamed = fx.ep_connected();
    let raw = unnamed.raw();
    assert!(!fx.p.lane_request(word_of(raw.index()), lane_name(unnamed), &seg, 1, send, CompletionFlags::DEFAULT));
    assert_eq!(fx.p.backend().pending_sends(unnamed), 0);
    fx.p.ep_post_request(unnamed, &[seg], 1, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
    fx.name(unnamed);
    assert!(fx.p.lane_request(word_of(raw.index()), lane_name(unnamed), &seg, 2, send, CompletionFlags::DEFAULT));
    assert_eq!(fx.p.backend().pending_sends(unnamed), 2);
}

/// An operation that reads as `None` (a remote pointer the ordinary call
/// refuses, for the C ABI) is declined with nothing posted; the same post
/// with its operation read is taken.
#[test]
fn a_lane_declines_an_operation_it_cannot_read() {
    let (mut fx, ep, seg) = world(EpCase::Connected, SegCase::Good);
    let raw = ep.raw();
    let flags = CompletionFlags::DEFAULT;
    assert!(!fx.p.lane_request(word_of(raw.index()), lane_name(ep), &seg, 1, || None, flags));
    assert_eq!(fx.p.backend().pending_sends(ep), 0);
    assert!(fx.p.lane_request(word_of(raw.index()), lane_name(ep), &seg, 1, || Some(RequestOp::Send), flags));
    assert_eq!(fx.p.backend().pending_sends(ep), 1);
}

#[test]
fn the_dequeue_lane_hands_over_exactly_what_the_ordinary_dequeue_does() {
    // A send that succeeds or fails; a receive that fits its buffer or
    // overruns it.
    for (recv, fail) in [(false, false), (false, true), (true, false), (true, true)] {
        let twin = || {
            let (mut fx, ep, seg) = world(EpCase::Connected, SegCase::Good);
            if recv {
                fx.p.ep_post_recv(ep, &[seg], 5, CompletionFlags::DEFAULT).unwrap();
                fx.p.backend_mut().complete_recv(ep, if fail { 4 * seg.segment_length } else { seg.segment_length });
            } else {
                fx.p.ep_post_request(ep, &[seg], 5, RequestOp::Send, CompletionFlags::DEFAULT).unwrap();
                let status = if fail { DtoStatus::LocalLength } else { DtoStatus::Success };
                fx.p.backend_mut().complete_send(ep, status);
            }
            (fx, ep)
        };
        let ((mut a, ep), (mut b, _)) = (twin(), twin());
        let lane = a.p.lane_dequeue(a.dto_evd);
        let alone = b.p.evd_dequeue_ordinary(b.dto_evd);
        let case = (recv, fail);
        let succeeded = |e: &Event| matches!(e.data, EventData::Dto { status: DtoStatus::Success, .. });
        match lane {
            Ok(e) => {
                assert!(succeeded(&e), "the lane took a failure: {case:?} {e:?}");
                assert_eq!(Ok(e), alone, "{case:?}");
            }
            Err(passed) => {
                assert_eq!(passed, Passed::Ordinary, "a completion waits: {case:?}");
                assert!(fail, "the lane refused a plain success: {case:?}");
                assert_eq!(a.p.evd_dequeue_ordinary(a.dto_evd), alone, "{case:?}");
            }
        }
        // Afterwards the twins hold the same: the EP's state, and what is
        // left on the EVDs.
        assert_eq!(a.p.ep_get_status(ep).unwrap(), b.p.ep_get_status(ep).unwrap(), "{case:?}");
        assert_eq!(a.drain(a.dto_evd), b.drain(b.dto_evd), "{case:?}");
        assert_eq!(a.drain(a.conn_evd), b.drain(b.conn_evd), "{case:?}");
    }
}

/// What the lanes of `ep` answer now, each checked against the ordinary
/// call's rules for the EP's state: a write of `seg` (and a receive into
/// it) is taken exactly when the ordinary call would take it. Every lane
/// also asserts, in this debug build, that the EP's post masks are its
/// current ones, so a change that left them stale fails here.
fn probe(fx: &mut Fx, ep: EpHandle, seg: LmrTriplet, flags: CompletionFlags, step: &str) {
    let raw = ep.raw();
    let status = fx.p.ep_get_status(ep).ok().map(|s| s.0);
    let op = RequestOp::RdmaWrite { remote: fx.remote(64) };
    let posts = matches!(status, Some(EpState::Connected | EpState::Disconnected));
    let took = fx.p.lane_request(word_of(raw.index()), lane_name(ep), &seg, 1, || Some(op), flags);
    let ordinary = if took { Ok(()) } else { fx.p.ep_post_request(ep, &[seg], 1, op, flags) };
    assert!(!took || posts, "{step}: the lane posted in {status:?}");
    assert_eq!(took, ordinary.is_ok(), "{step}: the lane and the ordinary write differ ({ordinary:?})");
    let took = fx.p.lane_recv(word_of(raw.index()), lane_name(ep), &seg, 2, flags);
    let ordinary = if took { Ok(()) } else { fx.p.ep_post_recv(ep, &[seg], 2, flags) };
    assert_eq!(took, ordinary.is_ok(), "{step}: the lane and the ordinary receive differ ({ordinary:?})");
    // Settle what was posted, so that no later step runs out of room.
    if status.is_some() && took {
        fx.p.backend_mut().complete_recv(ep, seg.segment_length);
    }
    if let Ok(param) = fx.p.ep_query(ep) {
        fx.drain(param.recv_evd);
    }
}

#[test]
fn the_lanes_follow_every_change_of_an_eps_state_attributes_and_qp() {
    let flags = CompletionFlags::DEFAULT;
    let unsignalled = CompletionFlags::UNSIGNALLED;
    let mut fx = Fx::new();
    let seg = fx.seg(0, 64);
    let ep = fx.ep();
    fx.name(ep);
    probe(&mut fx, ep, seg, flags, "created");
    fx.connect(ep);
    probe(&mut fx, ep, seg, flags, "connect");
    fx.p.backend_mut().conn_event(ep, backend::ConnOutcome::Established, b"");
    fx.drain(fx.conn_evd);
    assert_eq!(fx.state(ep), EpState::Connected);
    probe(&mut fx, ep, seg, flags, "established");
    fx.p.backend_mut().conn_event(ep, backend::ConnOutcome::Disconnected, b"");
    fx.drain(fx.conn_evd);
    assert_eq!(fx.state(ep), EpState::Disconnected);
    probe(&mut fx, ep, seg, flags, "peer disconnect");
    fx.p.ep_reset(ep).unwrap();
    assert_eq!(fx.state(ep), EpState::Unconnected);
    probe(&mut fx, ep, seg, flags, "reset (the QP reset too)");
    // Attributes that admit unsignalled requests and receives.
    let attr = EpAttr { request_completion_flags: unsignalled, recv_completion_flags: unsignalled, ..fx.attr() };
    fx.p.ep_modify(ep, &EpChanges { attr: Some(attr), ..EpChanges::default() }).unwrap();
    probe(&mut fx, ep, seg, unsignalled, "modify");
    fx.establish(ep);
    probe(&mut fx, ep, seg, unsignalled, "connected again, unsignalled");
    fx.p.backend_mut().conn_event(ep, backend::ConnOutcome::Broken, b"");
    fx.drain(fx.conn_evd);
    probe(&mut fx, ep, seg, flags, "broken");
    fx.p.ep_reset(ep).unwrap();
    fx.establish(ep);
    fx.p.ep_disconnect(ep, CloseFlags::Graceful).unwrap();
    probe(&mut fx, ep, seg, flags, "graceful disconnect");
    fx.p.ep_disconnect(ep, CloseFlags::Abrupt).unwrap();
    fx.drain(fx.conn_evd);
    probe(&mut fx, ep, seg, flags, "abrupt disconnect");

    // The passive side: a request accepted on a fresh EP, then established.
    let (_psp, cr) = fx.request(77, PspFlags::Consumer);
    // Its own DTO EVD: the first EP's unsignalled streams set the
    // notification mode of the fixture's.
    let evd = fx.p.evd_create(fx.ia, 32, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let passive = fx.p.ep_create(fx.ia, fx.pz, evd, evd, fx.conn_evd, None).unwrap();
    fx.name(passive);
    fx.p.cr_accept(cr, passive, b"").unwrap();
    probe(&mut fx, passive, seg, flags, "accept");
    fx.p.backend_mut().conn_event(passive, backend::ConnOutcome::Established, b"");
    fx.drain(fx.conn_evd);
    assert_eq!(fx.state(passive), EpState::Connected);
    probe(&mut fx, passive, seg, flags, "accepted, established");

    // A freed LMR's segment, a freed EP, an IA closed abruptly.
    let region = MemType::Virtual { address: BUF + BUF_LEN, length: BUF_LEN };
    let spare = fx.p.mock_lmr_create(fx.ia, region, fx.pz, MemPriv::ALL).unwrap();
    let spare_seg = LmrTriplet { lmr_context: spare.lmr_context, ..fx.seg(BUF_LEN, 64) };
    fx.p.lmr_free(spare.lmr).unwrap();
    probe(&mut fx, passive, spare_seg, flags, "LMR free");
    fx.p.ep_disconnect(passive, CloseFlags::Abrupt).unwrap();
    fx.p.ep_free(passive).unwrap();
    probe(&mut fx, passive, seg, flags, "EP free");
    fx.p.ia_close(fx.ia, CloseFlags::Abrupt).unwrap();
    probe(&mut fx, ep, seg, flags, "abrupt close");
}

/// The SRQ a case posts on.
#[derive(Clone, Copy, Debug)]
enum SrqCase {
    Live,
    /// Its one receive slot taken.
    Full,
    /// Freed: the handle is stale.
    Freed,
}

#[test]
fn the_srq_lane_takes_only_what_the_ordinary_post_accepts_and_does_what_it_does() {
    let (mut cases, mut taken, mut refused) = (0, 0, 0);
    for srq_case in [SrqCase::Live, SrqCase::Full, SrqCase::Freed] {
        for seg_case in SEGS {
            cases += 1;
            if !runs(cases) {
                continue;
            }
            let twin = || {
                let (mut fx, _, seg) = world(EpCase::Unconnected, seg_case);
                let attr = SrqAttr { max_recv_dtos: 1, max_recv_iov: 1, low_watermark: 0 };
                let srq = fx.p.srq_create(fx.ia, fx.pz, &attr).unwrap();
                match srq_case {
                    SrqCase::Live => {}
                    SrqCase::Full => fx.p.srq_post_recv(srq, &[fx.seg(0, 8)], 1).unwrap(),
                    SrqCase::Freed => fx.p.srq_free(srq).unwrap(),
                }
                (fx, srq, seg)
            };
            let ((mut a, srq, seg), (mut b, _, _)) = (twin(), twin());
            let raw = srq.raw();
            let lane = a.p.lane_srq_recv(raw.index(), |g| g == raw.generation(), &seg, 9);
            let through_lane = if lane { Ok(()) } else { a.p.srq_post_recv(srq, &[seg], 9) };
            b.p.backend_mut().no_lanes = true;
            let alone = b.p.srq_post_recv(srq, &[seg], 9);
            let what = (srq_case, seg_case);
            assert!(!lane || alone.is_ok(), "the lane took {what:?}, which the post refuses: {alone:?}");
            assert_eq!(through_lane, alone, "{what:?}");
            assert_eq!(a.p.srq_query(srq, SRQ_FIELD_ALL), b.p.srq_query(srq, SRQ_FIELD_ALL), "{what:?}");
            if lane {
                taken += 1;
            } else if alone.is_err() {
                refused += 1;
            }
        }
    }
    let least = if cfg!(miri) { (0, 0) } else { (1, 10) };
    assert!(taken >= least.0 && refused >= least.1, "taken {taken}, refused {refused}");
}

/// Whether the dequeue lane of `evd` takes the receive completion that
/// `ep` gets now (the ordinary dequeue takes it where the lane does not).
fn lane_takes_a_receive(fx: &mut Fx, ep: EpHandle, evd: EvdHandle) -> bool {
    fx.p.ep_post_recv(ep, &[fx.seg(0, 64)], 3, CompletionFlags::DEFAULT).unwrap();
    assert!(fx.p.backend_mut().complete_recv(ep, 64));
    if fx.p.lane_dequeue(evd).is_ok() {
        return true;
    }
    let event = fx.p.evd_dequeue_ordinary(evd).unwrap();
    assert!(matches!(event.data, EventData::Dto { cookie: 3, status: DtoStatus::Success, .. }));
    false
}

#[test]
fn a_lane_hold_shuts_its_streams_evd_follows_the_stream_and_ends_with_the_ep() {
    let mut fx = Fx::new();
    let other = fx.p.evd_create(fx.ia, 32, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let dto = fx.dto_evd;
    let (held, bystander) = (fx.ep(), fx.ep_connected());
    assert!(lane_takes_a_receive(&mut fx, bystander, dto), "no hold yet");

    fx.p.ep_hold_lane(held, true).unwrap();
    assert!(!lane_takes_a_receive(&mut fx, bystander, dto), "the EVD is held");
    // The request stream's hold is apart from the receive stream's: both
    // streams feed the same EVD here, so one release leaves it held.
    fx.p.ep_hold_lane(held, false).unwrap();
    fx.p.ep_release_lane(held, false);
    assert!(!lane_takes_a_receive(&mut fx, bystander, dto), "the receive hold remains");

    // dat_ep_modify(3DAT) gives the receive stream another EVD: the hold
    // goes with it.
    let changes = EpChanges { recv_evd: Some(other), ..EpChanges::default() };
    fx.p.ep_modify(held, &changes).unwrap();
    assert!(lane_takes_a_receive(&mut fx, bystander, dto), "the hold left with the stream");
    fx.establish(held);
    assert!(!lane_takes_a_receive(&mut fx, held, other), "the hold came with the stream");
    fx.p.ep_release_lane(held, true);
    assert!(lane_takes_a_receive(&mut fx, held, other), "released");
    // A release beyond the holds changes nothing.
    fx.p.ep_release_lane(held, true);
    assert!(lane_takes_a_receive(&mut fx, held, other), "still open");

    // Freeing the EP ends its holds.
    fx.p.ep_hold_lane(held, true).unwrap();
    fx.p.ep_disconnect(held, CloseFlags::Abrupt).unwrap();
    fx.drain(other);
    fx.p.ep_free(held).unwrap();
    let again = fx.p.ep_create(fx.ia, fx.pz, other, fx.dto_evd, fx.conn_evd, None).unwrap();
    fx.drain(fx.conn_evd);
    fx.establish(again);
    assert!(lane_takes_a_receive(&mut fx, again, other), "the freed EP's hold ended");
    assert_eq!(ty(fx.p.ep_hold_lane(held, true)), ErrorType::InvalidHandle);
}
