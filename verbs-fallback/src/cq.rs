//! Completion queues: polling, translating work completions into the
//! core's terms, and a stash for completions taken early.
//!
//! Completions are taken early in two places: a blocking wait arms the CQ
//! and polls once more to close the race with a completion that arrived
//! before the arming (never past what the CQ holds), and an abrupt
//! disconnect polls until the QP's flushes are all in. Either way they
//! wait in the stash, in order, for the next [`CqShared::poll`].
//!
//! A dequeue's lane, and a dequeue of a provider shared among threads,
//! take one work completion at a time ([`CqShared::take`]); one they
//! cannot settle alone waits, untranslated, in a second queue that every
//! ordinary poll empties first, after the stash.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::mem::MaybeUninit;
use std::rc::Rc;

use udat_core::{
    backend::{Completion, CqHead, Untaken},
    types::{DtoOp, DtoStatus},
    DatError, DatResult,
};

use crate::qp_shared::QpShared;
use crate::rxe;
use crate::status::{dat_error, dto_status, errno};
use crate::sys;
use crate::wr::RECV;

/// How many work completions one `ibv_poll_cq` call takes.
const BATCH: usize = 16;

/// Hashes a QP number with one multiply: QP numbers are device-assigned
/// small integers, not attacker-chosen keys, and a poll looks one up per
/// work completion, where SipHash would cost more than the rest of it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpnHasher(u64);

impl Hasher for QpnHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(FIBONACCI);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ u64::from(n)).wrapping_mul(FIBONACCI);
    }
}

/// 2^64 divided by the golden ratio: a multiplier that spreads sequential
/// keys over the high bits.
const FIBONACCI: u64 = 0x9e37_79b9_7f4a_7c15;

/// The QPs reporting to a CQ, by QP number.
type QpMap = HashMap<u32, Rc<QpShared>, BuildHasherDefault<QpnHasher>>;

/// The QPs reporting to a CQ, by QP number, and the last one a work
/// completion named: a CQ's completions tend to come from one QP in a
/// row, so most look-ups are one compare (rdma-core's mlx5 provider keeps
/// its `cur_rsc` for the same reason).
pub(crate) struct QpTable {
    map: RefCell<QpMap>,
    /// The number of the last QP found, and that QP as `map` holds it;
    /// [`NO_QP`] and null when none.
    last: Cell<(u32, *const QpShared)>,
}

/// The bits of a QP number: 24 (the BTH's DestQP field, InfiniBand
/// Architecture Specification vol. 1, 9.2).
const QPN: u32 = 0x00ff_ffff;

/// A number no QP has, outside [`QPN`]: a look-up then compares the
/// number alone.
const NO_QP: u32 = u32::MAX;

impl Default for QpTable {
    fn default() -> QpTable {
        QpTable { map: RefCell::default(), last: Cell::new((NO_QP, std::ptr::null())) }
    }
}

impl QpTable {
    /// `qp` reports here as `num`.
    pub fn insert(&self, num: u32, qp: Rc<QpShared>) {
        let num = num & QPN;
        self.forget_last(num);
        self.map.borrow_mut().insert(num, qp);
    }

    /// QP `num` reports here no more. Only `qp::Qp`'s drop calls
    /// this, which needs the QP's owner, never while a poll of the CQ
    /// holds a QP [`QpTable::find`] gave it.
    pub fn remove(&self, num: u32) {
        let num = num & QPN;
        self.forget_last(num);
        self.map.borrow_mut().remove(&num);
    }

    fn forget_last(&self, num: u32) {
        if self.last.get().0 == num {
            self.last.set((NO_QP, std::ptr::null()));
        }
    }

    /// The QP numbered `num`, if it reports here.
    #[inline(always)]
    pub fn find(&self, num: u32) -> Option<&QpShared> {
        let num = num & QPN;
        let (last, qp) = self.last.get();
        if last == num {
            // SAFETY: `num` is not `NO_QP`, and any other number is kept
            // only with the QP the map holds for it (`remove` and `insert`
            // forget it with its entry), which lives at least as long as
            // `self` is borrowed (`remove`).
            return Some(unsafe { &*qp });
        }
        self.find_in_map(num)
    }

    /// [`QpTable::find`] through the map, keeping what it finds.
    #[inline(never)]
    fn find_in_map(&self, num: u32) -> Option<&QpShared> {
        let qp = Rc::as_ptr(self.map.borrow().get(&num)?);
        self.last.set((num, qp));
        // SAFETY: as in `find`: the map holds it.
        Some(unsafe { &*qp })
    }

    /// Each QP reporting here.
    pub fn each(&self, mut f: impl FnMut(&QpShared)) {
        for qp in self.map.borrow().values() {
            f(qp);
        }
    }
}

/// What a CQ's polls hand out before the device's own completions.
#[derive(Default)]
struct Early {
    /// Completions taken early, in order.
    stash: VecDeque<Completion>,
    /// Work completions a lane or a shared dequeue took and left for the
    /// ordinary poll: they come after the stash.
    held: VecDeque<sys::ibv_wc>,
}

pub(crate) struct CqShared {
    pub cq: *mut sys::ibv_cq,
    /// The context the CQ is on.
    ctx: *mut sys::ibv_context,
    /// The provider's `poll_cq`, read once (`sys::PostEntries`).
    poll_cq: sys::PollCq,
    /// On soft-RoCE, the CQ's queue as rdma_rxe maps it, which a poll
    /// reads in place of `poll_cq` (`rxe`); found again after a resize,
    /// which maps a new one.
    ring: Cell<Option<rxe::CqRing>>,
    /// Used by one thread at a time, in [`CqShared::early`] alone.
    early: UnsafeCell<Early>,
    /// The QPs reporting here, by QP number.
    pub qps: QpTable,
    /// Whether a notification is requested and not yet delivered.
    pub armed: Cell<bool>,
}

impl CqShared {
    /// A CQ of at least `entries` on `ctx`, whose device is soft-RoCE's if
    /// `rxe`, notifying `channel` (possibly null).
    pub fn create(
        ctx: *mut sys::ibv_context,
        channel: *mut sys::ibv_comp_channel,
        entries: u32,
        rxe: bool,
    ) -> DatResult<Self> {
        let entries = i32::try_from(entries.max(1)).map_err(|_| DatError::invalid_arg(2))?;
        // SAFETY: `ctx` is open and `channel` (possibly null) belongs to it.
        let cq = unsafe { sys::ibv_create_cq(ctx, entries, std::ptr::null_mut(), channel, 0) };
        if cq.is_null() {
            return Err(dat_error(errno()));
        }
        Ok(CqShared {
            cq,
            ctx,
            // SAFETY: the CQ was just created.
            poll_cq: unsafe { sys::poll_cq_entry(cq) },
            // SAFETY: the CQ was just created, on rdma_rxe if `rxe`.
            ring: Cell::new(if rxe { unsafe { rxe::CqRing::find(cq) } } else { None }),
            early: UnsafeCell::new(Early::default()),
            qps: QpTable::default(),
            armed: Cell::new(false),
        })
    }

    /// The stash and the held work completions, for the length of `f`.
    #[inline(always)]
    fn early<R>(&self, f: impl FnOnce(&mut Early) -> R) -> R {
        // SAFETY: one thread at a time uses a CQ: the provider's, or in a
        // provider shared among threads the one holding the lock of the
        // CQ's EVD (`Backend::SHARED_QUEUES`; `CqShared` is not `Sync`).
        // This is the only place that reaches `early`, and none of the
        // closures given to it (all in this module) calls it again, so no
        // other reference to it exists while `f` runs.
        f(unsafe { &mut *self.early.get() })
    }

    /// Whether anything waits to be handed out before the device's
    /// completions.
    #[inline(always)]
    fn has_early(&self) -> bool {
        self.early(|e| !e.stash.is_empty() || !e.held.is_empty())
    }

    /// Fill `out`: stashed completions first, then the device's.
    pub fn poll(&self, out: &mut [Completion]) -> usize {
        let mut n = 0;
        if self.has_early() {
            self.translate_held();
            self.early(|e| {
                while n < out.len() {
                    let Some(c) = e.stash.pop_front() else { break };
                    out[n] = c;
                    n += 1;
                }
            });
        }
        while n < out.len() {
            let got = self.poll_device(&mut out[n..]);
            if got == 0 {
                break;
            }
            n += got;
        }
        n
    }

    /// The device reported the CQ in error (it overran,
    /// `IBV_EVENT_CQ_ERR`): the completions it lost will never come, and
    /// the device may write no flush here either (soft-RoCE drops what
    /// finds the CQ full). Every QP reporting here goes to ERROR, and
    /// after what the device still holds, every request those QPs have
    /// outstanding on this CQ completes here as flushed, once, in post
    /// order; a completion the device writes later names no outstanding
    /// request and is dropped, as after a reset.
    pub fn fail(&self) {
        self.pull();
        self.qps.each(|qp| {
            qp.break_off();
            self.flush(qp);
        });
    }

    /// Complete as flushed, here, every request outstanding in `qp`'s
    /// queues that report here (a receive from an SRQ stays with the
    /// SRQ).
    pub fn flush(&self, qp: &QpShared) {
        // SAFETY: the QP is live while `qp` is; its CQ pointers are fixed
        // at creation.
        let (sends, recvs) = unsafe { ((*qp.qp).send_cq == self.cq, (*qp.qp).recv_cq == self.cq) };
        if sends {
            qp.flush_sends(|c| self.stash(c));
        }
        if recvs {
            qp.flush_recvs(|c| self.stash(c));
        }
    }

    /// Queue `completion` after those already stashed.
    pub fn stash(&self, completion: Completion) {
        self.early(|e| e.stash.push_back(completion));
    }

    /// Move everything the device holds into the stash; whether anything
    /// came. What was stashed before is not news: it waits for the EVD it
    /// belongs to, and counting it would wake a waiter on another EVD of
    /// the IA again and again, to find nothing.
    pub fn pull(&self) -> bool {
        let came = self.translate_held();
        self.pull_at_most(usize::MAX) | came
    }

    /// As [`CqShared::pull`] for a wait, which looks at every CQ of the
    /// IA: the stash is filled no further than the device's CQ holds, and
    /// the rest stays in the device. What a consumer leaves undequeued
    /// then overruns the device's CQ as it would had no wait looked, and
    /// the EVD's overflow is reported (dat_evd_create(3DAT)); a stash
    /// without that bound would take every completion a waiter on another
    /// EVD saw come, and the overflow would never be.
    pub fn pull_within_capacity(&self) -> bool {
        let came = self.translate_held();
        // SAFETY: the CQ is live while `self` is; ibv_resize_cq(3) updates
        // `cqe` under the same one-thread-at-a-time use as this read.
        let capacity = usize::try_from(unsafe { (*self.cq).cqe }).unwrap_or(0);
        let room = capacity.saturating_sub(self.early(|e| e.stash.len()));
        self.pull_at_most(room) | came
    }

    /// Move up to `room` completions from the device into the stash;
    /// whether any came.
    fn pull_at_most(&self, mut room: usize) -> bool {
        let mut came = false;
        let mut buf = [Completion::EMPTY; BATCH];
        while room > 0 {
            let want = room.min(BATCH);
            let got = self.poll_device(&mut buf[..want]);
            self.early(|e| e.stash.extend(buf[..got].iter().copied()));
            came |= got != 0;
            if got < want {
                break;
            }
            room -= got;
        }
        came
    }

    /// Move what lanes and shared dequeues left into the stash,
    /// translated, in the order the device gave it; whether there was any.
    fn translate_held(&self) -> bool {
        self.early(|e| {
            if e.held.is_empty() {
                return false;
            }
            for w in e.held.drain(..) {
                if let Some(c) = self.qps.find(w.qp_num).and_then(|qp| translate(qp, &w)) {
                    e.stash.push_back(c);
                }
            }
            true
        })
    }

    /// One work completion from the device into `wc`, if it has one; read
    /// where [`CqShared::poll_into`] wrote it.
    #[inline(always)]
    fn poll_one<'w>(&self, wc: &'w mut MaybeUninit<sys::ibv_wc>) -> Option<&'w sys::ibv_wc> {
        if self.poll_into(std::slice::from_mut(wc)) == 0 {
            return None;
        }
        // SAFETY: `poll_into` wrote the one entry.
        Some(unsafe { wc.assume_init_ref() })
    }

    /// The next completion, for a dequeue's lane and a shared dequeue
    /// alike (`Backend::cq_lane`, `Backend::cq_take_shared`): one work
    /// completion taken from the device and shown to `admit` before it is
    /// translated, settled here if it is a success of a QP that receives
    /// from no SRQ and no window bind's, and `admit` hands back its
    /// holder. Any other is held for the next poll, which takes it first,
    /// as it would have found it on the device (untranslated, or a bind's
    /// translated, in the stash, since translating it retired it); one of a
    /// QP no longer here, or that completes nothing, is dropped, as `poll`
    /// drops it. Nothing is taken while earlier completions wait; the
    /// device's CQ found empty with nothing waiting is [`Untaken::Empty`]:
    /// an ordinary poll would find nothing either, short of a completion
    /// the device writes meanwhile, which the next poll finds as it would
    /// have after this one.
    ///
    /// The caller is the only thread using this CQ (it holds its EVD's
    /// lock, or the provider), and what `admit` returns holds the QP's EP
    /// (its lock, in a shared provider), so the QP's rings are this
    /// thread's while it translates.
    #[inline(always)]
    pub fn take<G>(&self, admit: impl FnOnce(CqHead) -> Option<G>) -> Result<(Completion, G), Untaken> {
        if self.has_early() {
            return Err(Untaken::Declined);
        }
        let mut wc = MaybeUninit::uninit();
        let w = self.poll_one(&mut wc).ok_or(Untaken::Empty)?;
        let qp = self.qps.find(w.qp_num).ok_or(Untaken::Declined)?;
        let recv = w.wr_id & RECV != 0;
        let hold = |w: &sys::ibv_wc| {
            self.early(|e| e.held.push_back(*w));
            Untaken::Declined
        };
        // A failure breaks the connection, and an SRQ's receives are shared
        // with other EPs' QPs: both are for the ordinary poll.
        if w.status != sys::ibv_wc_status::IBV_WC_SUCCESS || (recv && qp.srq.is_some()) {
            return Err(hold(w));
        }
        // SAFETY: the table holds a QP only while its `Qp` lives (its drop,
        // in `qp_destroy`, takes it out of both CQs' tables), and its tag is
        // the one `qp_create` was given. A receive's completion (its work
        // request's id has `RECV`) comes to the QP's receive CQ, any other
        // to its send CQ, each the CQ `qp_create` was given.
        let head = unsafe { CqHead::of_live_qp(qp.tag, recv) };
        let Some(admitted) = admit(head) else { return Err(hold(w)) };
        let c = translate(qp, w).ok_or(Untaken::Declined)?;
        // A bind's completion changes its window: the ordinary poll's too,
        // which finds it first in the stash (translating it retired it).
        if c.op == DtoOp::BindMw {
            self.stash(c);
            return Err(Untaken::Declined);
        }
        Ok((c, admitted))
    }

    /// One `ibv_poll_cq` of at most `out.len()` (and [`BATCH`]) entries,
    /// translated; completions of QPs no longer here are dropped.
    fn poll_device(&self, out: &mut [Completion]) -> usize {
        // Left uninitialised: an empty poll, the common case, should not
        // pay for clearing 16 work completions.
        let mut wc = [const { MaybeUninit::<sys::ibv_wc>::uninit() }; BATCH];
        let got = self.poll_into(&mut wc[..out.len().min(BATCH)]);
        // SAFETY: `poll_into` wrote the first `got` entries.
        let wc = unsafe { std::slice::from_raw_parts(wc.as_ptr().cast::<sys::ibv_wc>(), got) };
        let mut n = 0;
        for w in wc {
            let Some(qp) = self.qps.find(w.qp_num) else { continue };
            if let Some(c) = translate(qp, w) {
                out[n] = c;
                n += 1;
            }
        }
        n
    }

    /// Up to `wc.len()` work completions from the device into `wc`: read
    /// from rdma_rxe's queue, or through the provider's `poll_cq`; how
    /// many.
    #[inline(always)]
    fn poll_into(&self, wc: &mut [MaybeUninit<sys::ibv_wc>]) -> usize {
        if let Some(ring) = self.ring.get() {
            return ring.poll(wc);
        }
        let want = wc.len() as i32;
        // SAFETY: the CQ is live while `self` is, the entry point is its
        // provider's, and `wc` has room for `want`.
        unsafe { (self.poll_cq)(self.cq, want, wc.as_mut_ptr().cast()) }.clamp(0, want) as usize
    }

    pub fn resize(&self, entries: u32) -> DatResult<()> {
        let entries = i32::try_from(entries.max(1)).map_err(|_| DatError::invalid_arg(2))?;
        // SAFETY: the CQ is live.
        let resized = crate::status::check(unsafe { sys::ibv_resize_cq(self.cq, entries) });
        if self.ring.get().is_some() {
            // librxe mapped a new queue (or, failing, none), and unmapped
            // the one kept.
            // SAFETY: the CQ is live, on rdma_rxe, and no poll runs: the
            // caller holds the CQ as a poll does.
            self.ring.set(unsafe { rxe::CqRing::find(self.cq) });
        }
        resized
    }
}

impl Drop for CqShared {
    fn drop(&mut self) {
        // SAFETY: no QP reports here any more (each holds an Rc), and
        // every notification was acknowledged when it was read; reading
        // the device's async events acknowledges those of the CQ.
        unsafe {
            crate::device_error::cq_going(self.ctx, self.cq);
            sys::ibv_destroy_cq(self.cq);
        }
    }
}

/// A work completion in the core's terms; `None` if it belongs to no
/// request udat posted. Inlined into each poll, so that a dequeue's
/// completion goes from the work completion to its caller in registers.
#[inline(always)]
fn translate(qp: &QpShared, w: &sys::ibv_wc) -> Option<Completion> {
    let status = dto_status(w.status);
    if w.wr_id & RECV != 0 {
        let cookie = qp.take_recv(w.wr_id & !RECV)?;
        let with_imm = w.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_IMM != 0;
        let (op, imm) = if w.opcode == sys::ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM {
            // SAFETY: the union holds the immediate for this opcode.
            (DtoOp::ReceiveImm, u32::from_be(unsafe { w.__bindgen_anon_1.imm_data }))
        } else if with_imm {
            // SAFETY: IBV_WC_WITH_IMM says the union holds the immediate.
            (DtoOp::ReceiveMsgImm, u32::from_be(unsafe { w.__bindgen_anon_1.imm_data }))
        } else if w.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_INV != 0 {
            // SAFETY: IBV_WC_WITH_INV says the union holds the key.
            (DtoOp::ReceiveWithInvalidate, unsafe { w.__bindgen_anon_1.invalidated_rkey })
        } else if qp.ud {
            // A UD receive names its sender's QP.
            (DtoOp::ReceiveUd, w.src_qp)
        } else {
            (DtoOp::Receive, 0)
        };
        let transferred_length = if status == DtoStatus::Success { w.byte_len } else { 0 };
        return Some(Completion { tag: qp.tag, cookie, status, op, transferred_length, imm, retired: 1, notify: true });
    }
    let (slot, retired) = qp.take_send(w.wr_id)?;
    // byte_len is defined for receives only; a request moved what it named.
    let transferred_length = if status == DtoStatus::Success { slot.length } else { 0 };
    Some(Completion {
        tag: qp.tag,
        cookie: slot.cookie,
        status,
        op: slot.op,
        transferred_length,
        imm: 0,
        retired,
        notify: slot.notify,
    })
}
