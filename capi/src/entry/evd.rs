//! The EVD calls, the DAT_EVENT layout, and the blocking wait.

use std::ptr;

use udat_core::backend::{Completion, Shared, Untaken, Wake};
use udat_core::counters::evd::Counter as evd_counter;
use udat_core::handle::{CnoHandle, EvdHandle, IaHandle, Kind};
use udat_core::shared::SlotLock;
use udat_core::types::{DtoOp, DtoStatus, EvdFlags};
use udat_core::{DatError, DatResult, ErrorType, EvdWait, Event, EventData, EventNumber, Passed, WaitStep};

use super::{enter, guarded_on, leave_door, not_taken, with, Arg, Entered, LaneHandle};
use crate::debug;
use crate::instance::{invalid, Instance, State};
use crate::lock::{Exclusive, LaneLock};
use crate::sys::*;
use crate::transport::Transport;

/// The longest a waiter sleeps outside the lock before it looks again: a
/// bound on a wake-up another waiter took first.
const SLICE_US: u64 = 10_000;
/// How long a wait on a transport with no descriptor sleeps between looks.
const BLIND_SLICE_US: u64 = 1_000;

/// dat_evd_create(3DAT).
pub(crate) unsafe fn evd_create<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    qlen: Arg<2, DAT_COUNT>,
    cno: Arg<3, DAT_CNO_HANDLE>,
    flags: Arg<4, DAT_EVD_FLAGS>,
    evd_out: Arg<5, *mut DAT_EVD_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let qlen = qlen.count()?;
            let cno = CnoHandle::from_raw(cx.raw_or_null(cno, Kind::Cno)?);
            let slot = evd_out.out()?;
            let evd = cx.state.core.evd_create(IaHandle::from_raw(raw), qlen, cno, EvdFlags(flags.0))?;
            let h = cx.state.ptr(evd);
            cx.state.core.evd_name(evd, h as usize as u64)?;
            *slot = h;
            Ok(())
        })
    }
}

macro_rules! evd_call {
    ($(#[$doc:meta])* $name:ident => $method:ident) => {
        $(#[$doc])*
        pub(crate) unsafe fn $name<B: Transport>(evd: Arg<1, DAT_EVD_HANDLE>) -> DAT_RETURN {
            // SAFETY: dispatched on `evd`'s provider word.
            unsafe { with::<B>(evd, Kind::Evd, |cx, raw| cx.state.core.$method(EvdHandle::from_raw(raw))) }
        }
    };
}

evd_call!(/// dat_evd_free(3DAT).
    evd_free => evd_free);
evd_call!(/// dat_evd_enable(3DAT).
    evd_enable => evd_enable);
evd_call!(/// dat_evd_disable(3DAT).
    evd_disable => evd_disable);
evd_call!(/// dat_evd_set_unwaitable(3DAT).
    evd_set_unwaitable => evd_set_unwaitable);
evd_call!(/// dat_evd_clear_unwaitable(3DAT).
    evd_clear_unwaitable => evd_clear_unwaitable);

/// dat_evd_query(3DAT).
pub(crate) unsafe fn evd_query<B: Transport>(
    evd: Arg<1, DAT_EVD_HANDLE>,
    m: Arg<2, DAT_EVD_PARAM_MASK>,
    param: Arg<3, *mut DAT_EVD_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `evd`'s provider word.
    unsafe {
        with::<B>(evd, Kind::Evd, |cx, raw| {
            let slot = param.out()?;
            let p = cx.state.core.evd_query(EvdHandle::from_raw(raw), m.0)?;
            slot.ia_handle = (cx.instance.ia_out)(cx.state.ptr(p.ia));
            slot.evd_qlen = p.evd_qlen.min(i32::MAX as u32) as DAT_COUNT;
            slot.evd_state = p.evd_state.0;
            slot.cno_handle = cx.state.ptr(p.cno);
            slot.evd_flags = p.evd_flags.0;
            Ok(())
        })
    }
}

/// dat_evd_modify_cno(3DAT).
pub(crate) unsafe fn evd_modify_cno<B: Transport>(
    evd: Arg<1, DAT_EVD_HANDLE>,
    cno: Arg<2, DAT_CNO_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `evd`'s provider word.
    unsafe {
        with::<B>(evd, Kind::Evd, |cx, raw| {
            let cno = CnoHandle::from_raw(cx.raw_or_null(cno, Kind::Cno)?);
            cx.state.core.evd_modify_cno(EvdHandle::from_raw(raw), cno)
        })
    }
}

/// dat_evd_resize(3DAT).
pub(crate) unsafe fn evd_resize<B: Transport>(evd: Arg<1, DAT_EVD_HANDLE>, qlen: Arg<2, DAT_COUNT>) -> DAT_RETURN {
    // SAFETY: dispatched on `evd`'s provider word.
    unsafe {
        with::<B>(evd, Kind::Evd, |cx, raw| {
            let qlen = qlen.count()?;
            cx.state.core.evd_resize(EvdHandle::from_raw(raw), qlen)
        })
    }
}

/// dat_evd_post_se(3DAT).
pub(crate) unsafe fn evd_post_se<B: Transport>(
    evd: Arg<1, DAT_EVD_HANDLE>,
    event: Arg<2, *const DAT_EVENT>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `evd`'s provider word.
    unsafe {
        with::<B>(evd, Kind::Evd, |cx, raw| {
            let se = &event.input()?;
            // "DAT_INVALID_PARAMETER: ... the event is not a software event"
            if se.event_number != DAT_SOFTWARE_EVENT {
                return Err(event.invalid());
            }
            let pointer = se.event_data.software_event_data.pointer as u64;
            cx.state.core.evd_post_se(EvdHandle::from_raw(raw), pointer)
        })
    }
}

/// dat_evd_dequeue(3DAT). A provider that shares its state among threads
/// (`SHARES`, which its own table's slot carries) first tries the dequeue
/// with the state shared and only this EVD locked
/// ([`udat_core::shared`]); what that cannot settle alone, and an empty
/// EVD when a look at connection events is due, takes the exclusive path.
///
/// The exclusive path of a provider that does not share calls nothing
/// where its lane takes a completion: every other way out is a jump to
/// code out of line that takes over the held lock, so no value of the
/// lane lives across a call (which would cost saved registers and moves
/// on every dequeue). That code is `extern "C"`, never called from C: a
/// call from this `extern "C"` function to one that may unwind keeps a
/// landing pad to abort in, and is no jump.
#[inline(always)]
pub(crate) unsafe fn evd_dequeue<B: Transport, const SHARES: bool>(
    evd: Arg<1, DAT_EVD_HANDLE>,
    event: Arg<2, *mut DAT_EVENT>,
) -> DAT_RETURN {
    let h = evd.0;
    if h.is_null() {
        return invalid(Kind::Evd).to_raw();
    }
    // SAFETY: a non-null handle dispatched to this transport.
    let instance = unsafe { Instance::<B>::of(h) };
    debug_assert_eq!(instance.shares, SHARES, "the slot of the instance's own table");
    if SHARES {
        // Where the transport cannot tell whether a connection event
        // waits, the exclusive path looks once a millisecond.
        return match dequeue_shared(instance, h, event, &LaneLock, |ia| instance.cm_look_due(ia)) {
            Shared::Done(ret) => ret,
            Shared::Look => dequeue_shared_exclusive(instance, h, event),
            Shared::Empty | Shared::NeedsExclusive => dequeue_shared_waiting(instance, h, event),
        };
    }
    // SAFETY: a provider that does not share has the lock of one word
    // (`Instance::new`: only one that shares is `Threads::Sharing`).
    match unsafe { instance.state.try_take_word() } {
        // SAFETY: as above.
        Some(state) => unsafe { dequeue_entered::<B, false>(instance, state, h, event) },
        None => dequeue_contended(instance, h, event),
    }
}

/// The exclusive dequeue on `h`, a non-null EVD handle of `instance`,
/// whose state `state` holds: the lane, and where it takes nothing, the
/// ordinary dequeue ([`dequeue_ordinary`]) or the answer for an empty EVD
/// ([`dequeue_empty`]), out of line.
///
/// # Safety
/// `SHARES` is whether `instance` shares its state (`Instance::shares`).
#[inline(always)]
unsafe fn dequeue_entered<B: Transport, const SHARES: bool>(
    instance: &'static Instance<B>,
    mut state: Exclusive<'static, State<B>>,
    h: DAT_EVD_HANDLE,
    event: Arg<2, *mut DAT_EVENT>,
) -> DAT_RETURN {
    let State { core, handles, .. } = &mut *state;
    // A NULL or misaligned `event` is the ordinary call's to refuse.
    let Ok(slot) = event.out() else {
        Exclusive::hand_over(state);
        // SAFETY: the lock is handed over.
        return unsafe { dequeue_ordinary_held(instance, h, event) };
    };
    let evd = LaneHandle::new(h, handles, Kind::Evd);
    let Some(name) = evd.name() else {
        Exclusive::hand_over(state);
        // SAFETY: the lock is handed over.
        return unsafe { dequeue_ordinary_held(instance, h, event) };
    };
    let taken = core.lane_dequeue_cq(
        evd.word(),
        name,
        // The EVD's own handle is `h` itself; one `evd_create` did not name
        // (the async EVD dat_ia_open made) is judged by its slot and
        // generation.
        |slot, g, name| evd.names(slot, g, name),
        #[inline(always)]
        |_, c, name| write_lane_event(h, c, name, slot),
    );
    match taken {
        Ok(extension) => {
            // SAFETY: the caller's contract.
            unsafe { leave_door::<B, SHARES>(state) };
            match extension {
                None => DAT_SUCCESS,
                Some(extension) => extension_written(extension, slot),
            }
        }
        // SAFETY: the caller's contract.
        Err(Untaken::Empty) => {
            Exclusive::hand_over(state);
            // SAFETY: the caller's contract; the lock is handed over.
            unsafe { dequeue_empty::<B, SHARES>(instance, h, event) }
        }
        Err(Untaken::Declined) => {
            Exclusive::hand_over(state);
            // SAFETY: the lock is handed over.
            unsafe { dequeue_ordinary_held(instance, h, event) }
        }
    }
}

/// The dequeue of a provider that shares, where its lane settled
/// nothing: the shared dequeue again, waiting for the locks the lane
/// declined held ([`LaneLock`]), and where that settles nothing either,
/// the exclusive dequeue.
#[cold]
#[inline(never)]
extern "C" fn dequeue_shared_waiting<B: Transport>(
    instance: &'static Instance<B>,
    h: DAT_EVD_HANDLE,
    event: Arg<2, *mut DAT_EVENT>,
) -> DAT_RETURN {
    // The lane asked no clock (it found no look due, or asked none before
    // it declined), so this one may.
    match dequeue_shared(instance, h, event, &instance.call_lock(), |ia| instance.cm_look_due(ia)) {
        Shared::Done(ret) => ret,
        _ => dequeue_shared_exclusive(instance, h, event),
    }
}

/// The exclusive dequeue of a provider that shares, where its shared
/// dequeue settled nothing.
#[cold]
#[inline(never)]
extern "C" fn dequeue_shared_exclusive<B: Transport>(
    instance: &'static Instance<B>,
    h: DAT_EVD_HANDLE,
    event: Arg<2, *mut DAT_EVENT>,
) -> DAT_RETURN {
    let Some(state) = enter(instance) else { return DatError::of(ErrorType::InternalError).to_raw() };
    // SAFETY: only the dequeue of a provider that shares comes here.
    unsafe { dequeue_entered::<B, true>(instance, state, h, event) }
}

/// The dequeue of a provider that does not share, whose word was not
/// free: held by another thread (against the consumer's contract), or
/// poisoned by a panic. Entered as every call enters it, then the
/// ordinary dequeue.
#[cold]
#[inline(never)]
extern "C" fn dequeue_contended<B: Transport>(
    instance: &'static Instance<B>,
    h: DAT_EVD_HANDLE,
    event: Arg<2, *mut DAT_EVENT>,
) -> DAT_RETURN {
    let Some(state) = enter(instance) else { return DatError::of(ErrorType::InternalError).to_raw() };
    dequeue_ordinary(instance, state, h, event)
}

/// A dequeue on `h` whose lane found the CQ of its EVD empty:
/// `DAT_QUEUE_EMPTY`, without the ordinary dequeue's look-ups and its
/// `catch_unwind`, unless a look at connection events is due
/// ([`udat_core::Provider::lane_dequeue_empty`]).
///
/// # Safety
/// `SHARES` is whether `instance` shares its state (`Instance::shares`),
/// and this thread holds its lock, handed over
/// ([`Exclusive::hand_over`]).
#[cold]
#[inline(never)]
unsafe extern "C" fn dequeue_empty<B: Transport, const SHARES: bool>(
    instance: &'static Instance<B>,
    h: DAT_EVD_HANDLE,
    event: Arg<2, *mut DAT_EVENT>,
) -> DAT_RETURN {
    // SAFETY: the caller's contract: this thread holds the lock, handed
    // over.
    let mut state = unsafe { instance.state.held() };
    let evd = state.handles.lane_slot(h, Kind::Evd);
    match state.core.lane_dequeue_empty(evd) {
        Passed::Empty => {
            // SAFETY: the caller's contract.
            unsafe { leave_door::<B, SHARES>(state) };
            DatError::of(ErrorType::QueueEmpty).to_raw()
        }
        Passed::Ordinary => dequeue_ordinary(instance, state, h, event),
    }
}

/// [`dequeue_ordinary`] of a dequeue whose lock this thread holds,
/// handed over ([`Exclusive::hand_over`]).
///
/// # Safety
/// This thread holds `instance`'s lock, handed over.
#[cold]
#[inline(never)]
unsafe extern "C" fn dequeue_ordinary_held<B: Transport>(
    instance: &'static Instance<B>,
    h: DAT_EVD_HANDLE,
    event: Arg<2, *mut DAT_EVENT>,
) -> DAT_RETURN {
    // SAFETY: the caller's contract.
    dequeue_ordinary(instance, unsafe { instance.state.held() }, h, event)
}

/// The ordinary dequeue, where the lane did not take the call: the judge
/// of every error.
#[cold]
#[inline(never)]
extern "C" fn dequeue_ordinary<B: Transport>(
    instance: &'static Instance<B>,
    state: Exclusive<'static, State<B>>,
    h: DAT_EVD_HANDLE,
    event: Arg<2, *mut DAT_EVENT>,
) -> DAT_RETURN {
    let ordinary = move |cx: &mut Entered<B>, raw| {
        let slot = event.out()?;
        let e = cx.state.core.evd_dequeue_ordinary(EvdHandle::from_raw(raw))?;
        write_event(cx, h, &e, slot);
        Ok(())
    };
    not_taken(Entered { instance, state }, h, Kind::Evd, ordinary)
}

/// The dequeue of a provider that shares its state, a lane with the state
/// shared that takes the locks of this EVD and of the EP it settles for:
/// its answer (an empty EVD's among them) as [`Shared::Done`], or what
/// settled nothing, for a lock taken through the call's lock or for the
/// exclusive path, which then decides (a bad handle or pointer among it). Only the dequeue of a provider that shares
/// holds it (`SHARES`). Like every lane it runs outside `catch_unwind`
/// ([`lane_or`](super::lane_or)).
#[inline(always)]
fn dequeue_shared<B: Transport, L: SlotLock>(
    instance: &'static Instance<B>,
    h: DAT_EVD_HANDLE,
    event: Arg<2, *mut DAT_EVENT>,
    lock: &L,
    look_due: impl FnOnce(u32) -> bool,
) -> Shared<DAT_RETURN> {
    let Ok(slot) = event.out() else { return Shared::NeedsExclusive };
    // SAFETY: the provider shares (only its slot calls this), so its lock
    // is `Threads::Sharing`'s; the dequeue changes only the EVD and the
    // EPs whose locks it takes below (`udat_core::shared`). A poisoned
    // provider lets no sharer in, and a poisoned object lock no holder.
    let Some(state) = (unsafe { instance.state.share() }) else { return Shared::NeedsExclusive };
    let named = LaneHandle::new(h, &state.handles, Kind::Evd);
    let Some(name) = named.name() else { return Shared::NeedsExclusive };
    // SAFETY: the state is shared, never held exclusively meanwhile; the
    // dequeue takes the EVD's lock, then the EP's, each as it finds the
    // object, through the lock every shared call of the C ABI takes.
    let taken = unsafe {
        state.core.evd_dequeue_shared(
            named.word(),
            name,
            #[inline(always)]
            |slot, g, name| named.names(slot, g, name),
            lock,
            // The IB extension's record is written under the locks: it is
            // rare, and its answer then need not outlive them.
            #[inline(always)]
            |_, c, name| {
                if let Some(extension) = write_lane_event(h, c, name, slot) {
                    extension_written(extension, slot);
                }
            },
            look_due,
        )
    };
    match taken {
        Shared::Done(()) => Shared::Done(DAT_SUCCESS),
        Shared::Empty => Shared::Done(DatError::of(ErrorType::QueueEmpty).to_raw()),
        Shared::Look => Shared::Look,
        Shared::NeedsExclusive => Shared::NeedsExclusive,
    }
}

// `c/wait.c` keeps a wait's `EvdWait` in its record between steps.
const _: () = assert!(
    std::mem::size_of::<EvdWait>() <= std::mem::size_of::<[DAT_UINT64; 4]>()
        && std::mem::align_of::<EvdWait>() <= std::mem::align_of::<DAT_UINT64>()
);

/// `udat_provider_head.evd_wait`: one step of dat_evd_wait(3DAT), which
/// `c/wait.c`'s `udat_evd_wait` fills the table's slot with. The first
/// step begins the wait; a step that finds nothing asks the thread to
/// sleep on the transport's descriptors (`block`), in C, where a
/// cancellation finds no frame of ours, and the next step looks again.
///
/// # Safety
/// `evd` is null or a handle of this transport's table; `wait` is
/// `udat_evd_wait`'s record, zeroed before the first step.
pub(crate) unsafe extern "C" fn evd_wait_step<B: Transport>(
    evd: DAT_EVD_HANDLE,
    timeout: DAT_TIMEOUT,
    threshold: DAT_COUNT,
    event: *mut DAT_EVENT,
    nmore: *mut DAT_COUNT,
    wait: *mut udat_wait,
) -> DAT_RETURN {
    let (evd, timeout, threshold) = (Arg::<1, _>(evd), Arg::<2, _>(timeout), Arg::<3, _>(threshold));
    let (event, nmore) = (Arg::<4, _>(event), Arg::<5, _>(nmore));
    // SAFETY: `udat_evd_wait` passes its own record, used by this thread only.
    let w = unsafe { &mut *wait };
    let state = w.state.as_mut_ptr().cast::<EvdWait>();
    if w.begun != 0 {
        // SAFETY: the first step wrote the wait there (size and alignment
        // asserted above).
        let begun = unsafe { state.read() };
        // SAFETY: non-null (the first step checked it) and of this transport.
        let instance = unsafe { Instance::<B>::of(evd.0) };
        // The EVD may be gone since the last step: `evd_wait_poll` says
        // DAT_ABORT then, so the handle is not judged again.
        return guarded_on(instance, || {
            let mut cx = Entered { instance, state: instance.state.lock() };
            let (slot, nmore) = (event.out()?, nmore.out()?);
            let h = begun.evd();
            cx.state.core.count_evd(h, evd_counter::WAIT_BLOCKED);
            match u32::try_from(w.woke).unwrap_or(UDAT_WOKE_TIMEOUT) {
                UDAT_WOKE_INTERRUPTED => {
                    cx.state.core.evd_wait_end(&begun);
                    return Err(DatError::of(ErrorType::InterruptedCall));
                }
                // A transport with no descriptor is looked at again after
                // each slice, as if it had something.
                UDAT_WOKE_ACTIVITY => cx.state.core.count_evd(h, evd_counter::WAIT_NOTIFY),
                _ if w.nfds == 0 => cx.state.core.count_evd(h, evd_counter::WAIT_NOTIFY),
                _ => {}
            }
            wait_steps(&mut cx, evd.0, &begun, slot, nmore, w)
        });
    }
    // SAFETY: dispatched on `evd`'s provider word.
    unsafe {
        with::<B>(evd, Kind::Evd, |cx, raw| {
            let (slot, nmore) = (event.out()?, nmore.out()?);
            let threshold = threshold.count()?;
            let begun = cx.state.core.evd_wait_begin(EvdHandle::from_raw(raw), timeout.0, threshold)?;
            // SAFETY: room and alignment for it (asserted above).
            state.write(begun);
            w.begun = 1;
            wait_steps(cx, evd.0, &begun, slot, nmore, w)
        })
    }
}

/// Poll the wait until it ends or the thread must sleep: then `w` says on
/// what, and for how long.
fn wait_steps<B: Transport>(
    cx: &mut Entered<B>,
    evd: DAT_EVD_HANDLE,
    wait: &EvdWait,
    slot: &mut DAT_EVENT,
    nmore: &mut DAT_COUNT,
    w: &mut udat_wait,
) -> DatResult<()> {
    loop {
        match cx.state.core.evd_wait_poll(wait)? {
            WaitStep::Ready { event, nmore: more } => {
                write_event(cx, evd, &event, slot);
                *nmore = more.min(i32::MAX as u32) as DAT_COUNT;
                return Ok(());
            }
            WaitStep::TimedOut { nmore: more } => {
                *nmore = more.min(i32::MAX as u32) as DAT_COUNT;
                return Err(DatError::of(ErrorType::TimeoutExpired));
            }
            WaitStep::Pending { timeout_us } => {
                let ia = cx.state.core.evd_query(wait.evd(), udat_core::EVD_FIELD_ALL)?.ia;
                // The CQs are armed under the lock: look once more before
                // sleeping.
                if cx.state.core.block(ia, Some(0)).map_err(|_| DatError::of(ErrorType::Abort))? == Wake::Activity {
                    cx.state.core.count_evd(wait.evd(), evd_counter::WAIT_BLOCKED);
                    cx.state.core.count_evd(wait.evd(), evd_counter::WAIT_NOTIFY);
                    continue;
                }
                let fds = cx.state.core.wait_fds(ia).map_err(|_| DatError::of(ErrorType::Abort))?;
                let slice = if fds.is_empty() { BLIND_SLICE_US } else { SLICE_US };
                let us = timeout_us.map_or(slice, |t| t.min(slice));
                w.nfds = 0;
                for fd in fds.iter() {
                    w.fds[w.nfds as usize] = pollfd { fd, events: libc::POLLIN, revents: 0 };
                    w.nfds += 1;
                }
                w.timeout_ms = us.div_ceil(1000) as i32;
                w.block = 1;
                return Ok(());
            }
        }
    }
}

/// `udat_provider_head.evd_wait_abandon`: a wait whose thread was
/// cancelled while it slept gives up the EVD's waiter place.
///
/// # Safety
/// As [`evd_wait_step`], from the cleanup handler of `udat_evd_wait`.
pub(crate) unsafe extern "C" fn evd_wait_abandon<B: Transport>(evd: DAT_EVD_HANDLE, wait: *mut udat_wait) {
    // SAFETY: `udat_evd_wait`'s record, as for the steps.
    let w = unsafe { &*wait };
    if w.begun == 0 {
        return;
    }
    // SAFETY: the first step wrote the wait there.
    let begun = unsafe { w.state.as_ptr().cast::<EvdWait>().read() };
    // SAFETY: non-null and of this transport, as for the steps.
    let instance = unsafe { Instance::<B>::of(evd) };
    guarded_on(instance, || {
        instance.state.lock().core.evd_wait_end(&begun);
        Ok(())
    });
}

/// Sleep until the transport of `ia` has something or `timeout_us`
/// passes, without the lock: other threads post, reap, free and close
/// meanwhile. The CQs are armed under the lock, then the thread sleeps on
/// the transport's descriptors for at most a slice of [`SLICE_US`]; a
/// transport without descriptors is looked at again after a slice of
/// [`BLIND_SLICE_US`].
pub(crate) fn sleep<B: Transport>(
    state: &mut Exclusive<'static, State<B>>,
    ia: IaHandle,
    timeout_us: Option<u64>,
) -> DatResult<Wake> {
    if state.core.block(ia, Some(0)).map_err(|_| DatError::of(ErrorType::Abort))? == Wake::Activity {
        return Ok(Wake::Activity);
    }
    let fds = state.core.wait_fds(ia).map_err(|_| DatError::of(ErrorType::Abort))?;
    let blind = fds.is_empty();
    let slice = if blind { BLIND_SLICE_US } else { SLICE_US };
    let us = timeout_us.map_or(slice, |t| t.min(slice));
    let mut pfds = fds.0.map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
    let rc = Exclusive::unlocked(state, || {
        // SAFETY: `pfds` is an array of pollfd entries of its length; poll
        // ignores the entries whose descriptor is negative.
        unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, us.div_ceil(1000) as libc::c_int) }
    });
    if rc < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
        return Ok(Wake::Interrupted);
    }
    // With no descriptor, a slice that ran out may still have let another
    // thread make an event: look again.
    Ok(if rc > 0 || blind { Wake::Activity } else { Wake::Timeout })
}

/// Fill a `DAT_EVENT` with the DTO completion `c` that the lane, or a
/// shared dequeue, of the EVD whose C handle is `evd` settled, of the EP
/// named `name`: its C handle ([`udat_core::Provider::ep_name`]; never 0
/// there, since the core leaves a completion of an EP with no name to the
/// ordinary dequeue). An operation of the IB extension still needs its
/// record ([`extension_written`]), written once the provider is let go:
/// the [`Extension`] returned.
#[inline(always)]
fn write_lane_event(evd: DAT_EVD_HANDLE, c: &Completion, name: u64, out: &mut DAT_EVENT) -> Option<Extension> {
    debug_assert_ne!(name, 0, "a lane's completion is of an EP with a name");
    out.event_number = EventNumber::DtoCompletion as DAT_EVENT_NUMBER;
    out.evd_handle = evd;
    write_dto(name as usize as DAT_EP_HANDLE, c.cookie, c.status, c.transferred_length, c.op, out);
    c.op.is_extension().then_some(Extension { status: c.status, op: c.op, imm: c.imm })
}

/// What the IB extension's record of a DTO event is made of
/// ([`write_extension`]). `repr(C)`: [`extension_written`] is `extern "C"`.
#[derive(Clone, Copy)]
#[repr(C)]
struct Extension {
    status: DtoStatus,
    op: DtoOp,
    imm: u32,
}

/// `DAT_SUCCESS`, once the record of `extension` is written to the event
/// `out` a lane filled ([`write_lane_event`]).
#[cold]
#[inline(never)]
extern "C" fn extension_written(extension: Extension, out: &mut DAT_EVENT) -> DAT_RETURN {
    write_extension(extension.status, extension.op, extension.imm, out);
    DAT_SUCCESS
}

/// The event data of a DTO completion of the EP whose C handle is `ep`:
/// the fields `DAT_DTO_COMPLETION_EVENT_DATA` defines. An operation of
/// the IB extension also has its record in the extension data
/// ([`write_extension`]), which its callers write. A DTO event of DAT
/// itself leaves the extension data alone: dat_evd_dequeue(3DAT) defines
/// none for it, and OFA dapl does not write it either.
#[inline(always)]
fn write_dto(
    ep: DAT_EP_HANDLE,
    cookie: u64,
    status: DtoStatus,
    transferred_length: u32,
    op: DtoOp,
    out: &mut DAT_EVENT,
) {
    out.event_data.dto_completion_event_data = DAT_DTO_COMPLETION_EVENT_DATA {
        ep_handle: ep,
        user_cookie: DAT_CONTEXT { as_64: cookie },
        status: status as DAT_DTO_COMPLETION_STATUS,
        transfered_length: transferred_length,
        operation: op as DAT_DTOS,
        rmr_context: 0,
    };
}

/// The IB extension reports its operations as DAT_IB_DTO_EVENT, the kind
/// in the extension data, which holds nothing else.
#[inline(never)]
fn write_extension(status: DtoStatus, op: DtoOp, imm: u32, out: &mut DAT_EVENT) {
    out.event_number = DAT_IB_DTO_EVENT as DAT_EVENT_NUMBER;
    out.event_extension_data = [0; 8];
    let ext = match op {
        DtoOp::SendUd | DtoOp::ReceiveUd => super::ud::dto_record(op == DtoOp::ReceiveUd, status, imm),
        _ => DAT_IB_EXTENSION_EVENT_DATA {
            type_: ib_ext_type(op),
            status: if status == DtoStatus::Success { DAT_OP_SUCCESS } else { DAT_IB_OP_ERR },
            val: dat_ib_extension_event_data__bindgen_ty_1 { immed: DAT_IB_IMMED_DATA { data: imm } },
            ..Default::default()
        },
    };
    // SAFETY: the extension data is 64 bytes of 8-byte alignment, room
    // for the record (asserted below).
    unsafe { ptr::write(out.event_extension_data.as_mut_ptr().cast(), ext) };
}

const _: () = assert!(
    size_of::<DAT_IB_EXTENSION_EVENT_DATA>() <= size_of::<[DAT_UINT64; 8]>()
        && align_of::<DAT_IB_EXTENSION_EVENT_DATA>() <= align_of::<DAT_UINT64>()
);

/// The `DAT_IB_EXT_TYPE` of an extension operation's completion.
fn ib_ext_type(op: DtoOp) -> DAT_IB_EXT_TYPE {
    match op {
        DtoOp::RdmaWriteImm => DAT_IB_RDMA_WRITE_IMMED,
        DtoOp::ReceiveImm => DAT_IB_RDMA_WRITE_IMMED_DATA,
        DtoOp::ReceiveMsgImm => DAT_IB_RECV_IMMED_DATA,
        DtoOp::CompareSwap => DAT_IB_CMP_AND_SWAP,
        _ => DAT_IB_FETCH_AND_ADD,
    }
}

/// Fill a `DAT_EVENT` from a core event taken from the EVD whose C handle
/// is `evd`. Pointers in it (private data, addresses) point into the
/// provider and stay valid as the spec says.
#[inline(always)]
pub(crate) fn write_event<B: Transport>(cx: &mut Entered<B>, evd: DAT_EVD_HANDLE, e: &Event, out: &mut DAT_EVENT) {
    out.event_number = e.number as DAT_EVENT_NUMBER;
    out.evd_handle = evd;
    out.event_extension_data = [0; 8];
    match e.data {
        EventData::Dto { ep, cookie, status, transferred_length, op, imm } => {
            if status != DtoStatus::Success {
                debug::say(format_args!("{op:?} of EP {ep:?} (cookie {cookie:#x}) completed: {status:?}"));
            }
            write_dto(cx.state.ptr(ep), cookie, status, transferred_length, op, out);
            if op.is_extension() {
                write_extension(status, op, imm, out);
            }
            // The context the peer invalidated (its completion carries it
            // where an immediate goes). Only this door sees such a
            // receive: the lanes and the shared dequeue leave it here.
            if op == DtoOp::ReceiveWithInvalidate {
                out.event_data.dto_completion_event_data.rmr_context = imm;
            }
        }
        EventData::RmrBind { rmr, cookie, status } => {
            out.event_data.rmr_completion_event_data = DAT_RMR_BIND_COMPLETION_EVENT_DATA {
                rmr_handle: cx.state.ptr(rmr),
                user_cookie: DAT_CONTEXT { as_64: cookie },
                status: status as DAT_DTO_COMPLETION_STATUS,
            };
        }
        EventData::CrArrival { psp, conn_qual, cr } => {
            let ia = cx.state.core.evd_query(e.evd, udat_core::EVD_FIELD_ALL).map(|p| p.ia).unwrap_or_default();
            let addr = ptr::addr_of_mut!(cx.state.ia_addr[ia.raw().index() as usize]).cast();
            out.event_data.cr_arrival_event_data = DAT_CR_ARRIVAL_EVENT_DATA {
                sp_handle: DAT_SP_HANDLE { psp_handle: cx.state.ptr(psp) },
                local_ia_address_ptr: addr,
                conn_qual,
                cr_handle: cx.state.ptr(cr),
                truncate_flag: DAT_FALSE,
            };
        }
        EventData::Connection { ep, private_data_size } => {
            if e.number != EventNumber::ConnectionEstablished {
                debug::say(format_args!("connection of EP {ep:?}: {:?}", e.number));
            }
            let data = match cx.state.core.ep_private_data(ep) {
                Ok(d) if private_data_size > 0 => d.as_ptr() as DAT_PVOID,
                _ => ptr::null_mut(),
            };
            out.event_data.connect_event_data = DAT_CONNECTION_EVENT_DATA {
                ep_handle: cx.state.ptr(ep),
                private_data_size: private_data_size as DAT_COUNT,
                private_data: data,
            };
        }
        EventData::UdConnection { .. } => super::ud::write_connection(cx, e, out),
        EventData::AsyncError { handle, reason } => {
            let h = match handle {
                Some(h) if h.kind == Kind::Ia => (cx.instance.ia_out)(cx.state.ptr(h)),
                Some(h) => cx.state.ptr(h),
                None => ptr::null_mut(),
            };
            out.event_data.asynch_error_event_data =
                DAT_ASYNCH_ERROR_EVENT_DATA { dat_handle: h, reason: reason as DAT_COUNT };
        }
        EventData::Software { pointer } => {
            out.event_data.software_event_data = DAT_SOFTWARE_EVENT_DATA { pointer: pointer as DAT_PVOID };
        }
    }
}
