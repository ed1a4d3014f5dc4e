//! A small reference model of the DAT rules — handles, ties between PZs,
//! LMRs and EPs, the EP states and the data-transfer checks — and a
//! driver that applies a sequence of calls to both the core (on the mock
//! transport) and the model. Every call's outcome must match the model's,
//! and at the end every DTO posted has completed exactly once and the
//! transport holds nothing.
//!
//! Shared by the proptest in udat's `tests/model.rs` and the `core_model`
//! fuzz target, which turns on the `arbitrary` feature for [`Op`].

use crate::mock::{MockBackend, MOCK_IA_NAME};
use std::collections::BTreeMap;
use udat_core::backend::ConnOutcome;
use udat_core::types::*;
use udat_core::*;

pub const N: usize = 16;
type P = Provider<MockBackend, Inline<N, 1024>>;

#[derive(Clone, Debug)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Op {
    CreatePz,
    FreePz(usize),
    CreateLmr(usize),
    FreeLmr(usize),
    CreateEp(usize),
    FreeEp(usize),
    Connect(usize),
    Establish(usize),
    Disconnect(usize, bool),
    Reset(usize),
    PostSend(usize, usize),
    PostRecv(usize, usize),
    CompleteSend(usize),
    CompleteRecv(usize),
    UseStale(usize),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum S {
    Unconnected,
    Pending,
    Connected,
    Disconnected,
}

struct ModelEp {
    h: EpHandle,
    pz: usize,
    state: S,
    sends: u32,
    recvs: u32,
}

/// The reference model: plain vectors, indices into them.
#[derive(Default)]
struct Model {
    pzs: Vec<(PzHandle, u32)>,
    /// (handle, index of its PZ, address)
    lmrs: Vec<(LmrHandle, usize, u64)>,
    eps: Vec<ModelEp>,
    stale: Vec<PzHandle>,
}

const MAX_DTOS: u32 = 4;

fn outcome<T>(r: DatResult<T>) -> Result<(), ErrorType> {
    r.map(|_| ()).map_err(|e| e.error_type())
}

struct World {
    p: Box<P>,
    ia: IaHandle,
    dto: EvdHandle,
    conn: EvdHandle,
    m: Model,
    next_cookie: u64,
    posted: Vec<u64>,
    completed: BTreeMap<u64, u32>,
}

impl World {
    fn new() -> World {
        let mut p: Box<P> = crate::boxed(MockBackend::new(), Inline);
        let (ia, _) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 16 }).unwrap();
        let dto = p.evd_create(ia, 512, CnoHandle::NULL, EvdFlags::DTO).unwrap();
        let conn = p.evd_create(ia, 256, CnoHandle::NULL, EvdFlags::CONNECTION).unwrap();
        World { p, ia, dto, conn, m: Model::default(), next_cookie: 1, posted: vec![], completed: BTreeMap::new() }
    }

    fn drain(&mut self) {
        while let Ok(ev) = self.p.evd_dequeue(self.dto) {
            if let EventData::Dto { cookie, .. } = ev.data {
                *self.completed.entry(cookie).or_default() += 1;
            }
        }
        while self.p.evd_dequeue(self.conn).is_ok() {}
    }

    fn lmr_ctx(&self, l: usize) -> u32 {
        self.p.lmr_query(self.m.lmrs[l].0, 0).unwrap().lmr_context
    }

    /// Apply `op` to both; return (actual, expected).
    fn step(&mut self, op: &Op) -> Option<(Result<(), ErrorType>, Result<(), ErrorType>)> {
        use ErrorType::*;
        let r = match *op {
            Op::CreatePz => {
                let r = self.p.pz_create(self.ia);
                let want = if self.m.pzs.len() < N { Ok(()) } else { Err(InsufficientResources) };
                if let Ok(h) = r {
                    self.m.pzs.push((h, 0));
                }
                (outcome(r), want)
            }
            Op::FreePz(i) => {
                let i = i.checked_rem(self.m.pzs.len())?;
                let (h, refs) = self.m.pzs[i];
                let want = if refs == 0 { Ok(()) } else { Err(InvalidState) };
                let r = outcome(self.p.pz_free(h));
                if r.is_ok() {
                    self.m.pzs.remove(i);
                    self.m.stale.push(h);
                    for l in &mut self.m.lmrs {
                        if l.1 > i {
                            l.1 -= 1;
                        }
                    }
                    for e in &mut self.m.eps {
                        if e.pz > i {
                            e.pz -= 1;
                        }
                    }
                }
                (r, want)
            }
            Op::CreateLmr(i) => {
                let i = i.checked_rem(self.m.pzs.len())?;
                let region = MemType::Virtual { address: 0x1000 * (i as u64 + 1), length: 0x1000 };
                // SAFETY: the mock backend never reads or writes the memory
                // it registers.
                let r = unsafe { self.p.lmr_create(self.ia, region, self.m.pzs[i].0, MemPriv::ALL) };
                let want = if self.m.lmrs.len() < N { Ok(()) } else { Err(InsufficientResources) };
                if let Ok(c) = r {
                    self.m.lmrs.push((c.lmr, i, c.registered_address));
                    self.m.pzs[i].1 += 1;
                }
                (outcome(r), want)
            }
            Op::FreeLmr(l) => {
                let l = l.checked_rem(self.m.lmrs.len())?;
                let r = outcome(self.p.lmr_free(self.m.lmrs[l].0));
                if r.is_ok() {
                    let (_, pz, _) = self.m.lmrs.remove(l);
                    self.m.pzs[pz].1 -= 1;
                }
                (r, Ok(()))
            }
            Op::CreateEp(i) => {
                let i = i.checked_rem(self.m.pzs.len())?;
                let (_, ia_attr) = self.p.ia_query(self.ia).unwrap();
                let mut attr = EpAttr::provider_default(&ia_attr);
                attr.max_request_dtos = MAX_DTOS;
                attr.max_recv_dtos = MAX_DTOS;
                let r = self.p.ep_create(self.ia, self.m.pzs[i].0, self.dto, self.dto, self.conn, Some(&attr));
                let want = if self.m.eps.len() < N { Ok(()) } else { Err(InsufficientResources) };
                if let Ok(h) = r {
                    self.m.eps.push(ModelEp { h, pz: i, state: S::Unconnected, sends: 0, recvs: 0 });
                    self.m.pzs[i].1 += 1;
                }
                (outcome(r), want)
            }
            Op::FreeEp(e) => {
                let e = e.checked_rem(self.m.eps.len())?;
                let r = outcome(self.p.ep_free(self.m.eps[e].h));
                if r.is_ok() {
                    let ep = self.m.eps.remove(e);
                    self.m.pzs[ep.pz].1 -= 1;
                }
                (r, Ok(()))
            }
            Op::Connect(e) => {
                let e = e.checked_rem(self.m.eps.len())?;
                let ep = &mut self.m.eps[e];
                let want = if ep.state == S::Unconnected { Ok(()) } else { Err(InvalidState) };
                let r = outcome(self.p.ep_connect(
                    ep.h,
                    &IaAddress::default(),
                    1,
                    TIMEOUT_INFINITE,
                    b"",
                    Qos::BEST_EFFORT,
                    ConnectFlags::DEFAULT,
                ));
                if r.is_ok() {
                    ep.state = S::Pending;
                }
                (r, want)
            }
            Op::Establish(e) => {
                let e = e.checked_rem(self.m.eps.len())?;
                let ep = &mut self.m.eps[e];
                self.p.backend_mut().conn_event(ep.h, ConnOutcome::Established, b"");
                if ep.state == S::Pending {
                    ep.state = S::Connected;
                }
                let _ = self.p.evd_dequeue(self.conn);
                (Ok(()), Ok(()))
            }
            Op::Disconnect(e, graceful) => {
                let e = e.checked_rem(self.m.eps.len())?;
                let ep = &mut self.m.eps[e];
                let flags = if graceful { CloseFlags::Graceful } else { CloseFlags::Abrupt };
                let want = if ep.state == S::Unconnected { Err(InvalidState) } else { Ok(()) };
                let r = outcome(self.p.ep_disconnect(ep.h, flags));
                // A graceful disconnect completes when its event is pulled.
                let _ = self.p.evd_dequeue(self.conn);
                if r.is_ok() {
                    ep.state = S::Disconnected;
                    ep.sends = 0;
                    ep.recvs = 0;
                }
                (r, want)
            }
            Op::Reset(e) => {
                let e = e.checked_rem(self.m.eps.len())?;
                let ep = &mut self.m.eps[e];
                let want = match ep.state {
                    S::Unconnected | S::Disconnected => Ok(()),
                    _ => Err(InvalidState),
                };
                let r = outcome(self.p.ep_reset(ep.h));
                if r.is_ok() {
                    ep.state = S::Unconnected;
                }
                (r, want)
            }
            Op::PostSend(e, l) | Op::PostRecv(e, l) => {
                let e = e.checked_rem(self.m.eps.len())?;
                let l = l.checked_rem(self.m.lmrs.len())?;
                let seg =
                    [LmrTriplet { virtual_address: self.m.lmrs[l].2, segment_length: 8, lmr_context: self.lmr_ctx(l) }];
                let send = matches!(op, Op::PostSend(..));
                let cookie = self.next_cookie;
                self.next_cookie += 1;
                let ep = &mut self.m.eps[e];
                let same_pz = self.m.lmrs[l].1 == ep.pz;
                let count = if send { ep.sends } else { ep.recvs };
                let want = if send && !matches!(ep.state, S::Connected | S::Disconnected) {
                    Err(InvalidState)
                } else if !same_pz {
                    Err(ProtectionViolation)
                } else if count >= MAX_DTOS && ep.state != S::Disconnected {
                    Err(InsufficientResources)
                } else {
                    Ok(())
                };
                let r = if send {
                    outcome(self.p.ep_post_request(ep.h, &seg, cookie, RequestOp::Send, CompletionFlags::DEFAULT))
                } else {
                    outcome(self.p.ep_post_recv(ep.h, &seg, cookie, CompletionFlags::DEFAULT))
                };
                if r.is_ok() {
                    self.posted.push(cookie);
                    // In Disconnected the post is flushed at once.
                    if ep.state != S::Disconnected {
                        if send {
                            ep.sends += 1;
                        } else {
                            ep.recvs += 1;
                        }
                    }
                }
                (r, want)
            }
            Op::CompleteSend(e) | Op::CompleteRecv(e) => {
                let e = e.checked_rem(self.m.eps.len())?;
                let ep = &mut self.m.eps[e];
                let send = matches!(op, Op::CompleteSend(..));
                let done = if send {
                    self.p.backend_mut().complete_send(ep.h, DtoStatus::Success)
                } else {
                    self.p.backend_mut().complete_recv(ep.h, 4)
                };
                let pending = if send { &mut ep.sends } else { &mut ep.recvs };
                assert_eq!(done, *pending > 0, "the transport holds what the model says");
                *pending = pending.saturating_sub(1);
                (Ok(()), Ok(()))
            }
            Op::UseStale(i) => {
                let i = i.checked_rem(self.m.stale.len())?;
                (outcome(self.p.pz_query(self.m.stale[i], 0)), Err(InvalidHandle))
            }
        };
        self.drain();
        Some(r)
    }
}

/// Apply `ops` to the core and the model; the first disagreement, or a
/// DTO that did not complete exactly once, or a transport object left
/// behind.
pub fn check(ops: &[Op]) -> Result<(), String> {
    let mut w = World::new();
    for (n, op) in ops.iter().enumerate() {
        if let Some((actual, expected)) = w.step(op) {
            if actual != expected {
                return Err(format!("step {n} {op:?}: {actual:?}, the model says {expected:?}"));
            }
        }
    }
    // Tear down the EPs; every DTO posted completes exactly once.
    let eps: Vec<_> = w.m.eps.iter().map(|e| e.h).collect();
    for h in eps {
        w.p.ep_free(h).map_err(|e| format!("ep_free: {e:?}"))?;
    }
    w.drain();
    for cookie in &w.posted {
        let times = w.completed.get(cookie).copied().unwrap_or(0);
        if times != 1 {
            return Err(format!("cookie {cookie} completed {times} times"));
        }
    }
    if w.completed.len() != w.posted.len() {
        return Err(format!("{} completions for {} posts", w.completed.len(), w.posted.len()));
    }
    w.p.ia_close(w.ia, CloseFlags::Abrupt).map_err(|e| format!("ia_close: {e:?}"))?;
    let b = w.p.backend();
    let live = (b.live_pds, b.live_mrs, b.live_qps(), b.live_cqs());
    if live != (0, 0, 0, 0) {
        return Err(format!("the transport still holds (PDs, MRs, QPs, CQs) {live:?}"));
    }
    Ok(())
}
