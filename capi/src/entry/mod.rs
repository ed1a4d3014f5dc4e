//! The bodies of the entry points of `struct dat_provider`, generic over
//! the transport. The `extern "C"` slots are generated from
//! `entries.list` (see [`crate::provider_table`]) and hand each body its arguments
//! as [`Arg`]s that know their position. A body finds its instance from
//! its first handle, takes the lock, turns C arguments into core values,
//! and returns the core's `DAT_RETURN`. No entry point unwinds into C: a
//! panic is `DAT_INTERNAL_ERROR`.
//!
//! # Safety
//! Every body has one contract, the DAT call's: it is reached through the
//! table of the provider its first handle points at (libdat2 and the
//! static registry dispatch so), and every pointer argument is null or
//! valid for its type as the man page describes it.
#![allow(clippy::missing_safety_doc)]

use std::num::NonZeroU64;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use crate::lock::Exclusive;

use udat_core::handle::{Kind, RawHandle};
use udat_core::{DatError, DatResult, ErrorType};

use crate::handle_space::HandleSpace;
use crate::instance::{invalid, Core, Instance, State};
use crate::sys::{DAT_HANDLE, DAT_NOT_IMPLEMENTED, DAT_RETURN, DAT_SUCCESS};
use crate::transport::Transport;

pub mod arg;
pub mod cno;
pub mod context;
pub mod counters;
pub mod cr;
pub mod csp;
pub mod ep;
pub mod evd;
pub mod ia;
pub mod ib;
pub mod lmr;
pub mod psp;
pub mod pz;
pub mod query;
pub mod rmr;
pub mod rsp;
pub mod srq;
pub mod ud;

pub use arg::{name, Arg, AsHandle};

/// The `DAT_RETURN` of a result.
#[inline(always)]
pub(crate) fn ret(r: DatResult<()>) -> DAT_RETURN {
    match r {
        Ok(()) => DAT_SUCCESS,
        Err(e) => e.to_raw(),
    }
}

/// Run `f`, the body of an exported function that reaches no instance,
/// without letting a panic cross into C.
pub fn guarded(f: impl FnOnce() -> DAT_RETURN) -> DAT_RETURN {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| DatError::of(ErrorType::InternalError).to_raw())
}

/// Run `f` on `instance` without letting a panic cross into C. A panic may
/// have left the instance's objects half-updated, so it is the last call
/// the instance serves: every later one is `DAT_INTERNAL_ERROR`.
#[inline(always)]
pub(crate) fn guarded_on<B: Transport>(instance: &Instance<B>, f: impl FnOnce() -> DatResult<()>) -> DAT_RETURN {
    if instance.poisoned.load(Ordering::Relaxed) {
        return DatError::of(ErrorType::InternalError).to_raw();
    }
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => ret(r),
        Err(_) => {
            instance.poison();
            DatError::of(ErrorType::InternalError).to_raw()
        }
    }
}

/// The state of `instance`, to this call alone; `None` once a call panicked
/// in it (`DAT_INTERNAL_ERROR`). A provider that does not share learns
/// that from the word it takes ([`crate::lock::Threads::One`]); one that
/// shares from its `poisoned` flag ([`crate::lock::Locked::enter`]).
#[inline(always)]
pub(crate) fn enter<B: Transport>(instance: &'static Instance<B>) -> Option<Exclusive<'static, State<B>>> {
    instance.state.enter(&instance.poisoned)
}

/// A call panicked holding `cx`: the instance serves no further call.
#[cold]
fn poison<B: Transport>(cx: &mut Entered<B>) {
    cx.instance.poison();
    Exclusive::poison(&mut cx.state);
}

/// Run `f` on `instance` under its lock without letting a panic cross into C,
/// as [`guarded_on`]: a panic poisons the instance.
#[inline(always)]
pub(crate) fn locked_on<B: Transport>(
    instance: &'static Instance<B>,
    f: impl FnOnce(&mut Entered<B>) -> DatResult<()>,
) -> DAT_RETURN {
    let Some(state) = enter(instance) else { return DatError::of(ErrorType::InternalError).to_raw() };
    let mut cx = Entered { instance, state };
    guarded_in(&mut cx, f)
}

/// Run `f` in `cx` without letting a panic cross into C: a panic poisons
/// the instance, whose lock `cx` holds.
#[inline(always)]
fn guarded_in<B: Transport>(cx: &mut Entered<B>, f: impl FnOnce(&mut Entered<B>) -> DatResult<()>) -> DAT_RETURN {
    match catch_unwind(AssertUnwindSafe(|| f(cx))) {
        Ok(r) => ret(r),
        Err(_) => {
            poison(cx);
            DatError::of(ErrorType::InternalError).to_raw()
        }
    }
}

/// The context an entry point works in: its instance and the locked state.
pub(crate) struct Entered<B: Transport> {
    pub(crate) instance: &'static Instance<B>,
    pub(crate) state: Exclusive<'static, State<B>>,
}

impl<B: Transport> Entered<B> {
    /// A further handle argument of `kind`, which must belong to the same
    /// provider.
    #[inline(always)]
    pub(crate) fn raw(&self, h: impl AsHandle, kind: Kind) -> DatResult<RawHandle> {
        self.state.raw(h.handle(), kind)
    }

    /// A further handle argument that may be `DAT_HANDLE_NULL`.
    pub(crate) fn raw_or_null(&self, h: impl AsHandle, kind: Kind) -> DatResult<RawHandle> {
        self.state.raw_or_null(h.handle(), kind)
    }
}

/// Run `f` on the instance that owns `h` (a handle of `kind`), under its
/// lock, with `h` resolved.
///
/// # Safety
/// `h` is null or a handle this transport's table was dispatched for.
#[inline(always)]
pub(crate) unsafe fn with<B: Transport>(
    h: Arg<1, DAT_HANDLE>,
    kind: Kind,
    f: impl FnOnce(&mut Entered<B>, RawHandle) -> DatResult<()>,
) -> DAT_RETURN {
    let h = h.0;
    if h.is_null() {
        return invalid(kind).to_raw();
    }
    // SAFETY: `h` is non-null and dispatched to this transport.
    let instance = unsafe { Instance::<B>::of(h) };
    exclusive_on(instance, h, kind, f)
}

/// [`with`] for a non-null handle `h` of `instance`.
#[inline(always)]
pub(crate) fn exclusive_on<B: Transport>(
    instance: &'static Instance<B>,
    h: DAT_HANDLE,
    kind: Kind,
    f: impl FnOnce(&mut Entered<B>, RawHandle) -> DatResult<()>,
) -> DAT_RETURN {
    locked_on(instance, |cx| {
        let raw = cx.raw(h, kind)?;
        f(cx, raw)
    })
}

/// Run `f` on the instance that owns `h` (a non-null handle of `kind`)
/// with its state shared: a post of a provider that shares
/// ([`udat_core::shared`]). `f` takes the lock of the object it changes
/// as it finds it, through [`Instance::call_lock`]; where that lock was
/// refused because a call panicked holding it, the answer is
/// `DAT_INTERNAL_ERROR`, as every later call's.
///
/// # Safety
/// `instance` shares its state (`Instance::shares`); `f` changes only the
/// object whose lock it takes (the contract of `udat_core::shared`'s
/// calls).
#[inline(always)]
pub(crate) unsafe fn shared_on<B: Transport>(
    instance: &'static Instance<B>,
    h: DAT_HANDLE,
    kind: Kind,
    f: impl FnOnce(&Core<B>, RawHandle) -> DatResult<()>,
) -> DAT_RETURN {
    guarded_on(instance, || {
        // SAFETY: the provider shares (the caller's contract), so its lock
        // is `Threads::Sharing`'s; `f` changes only the object whose lock
        // it takes.
        let Some(state) = (unsafe { instance.state.share() }) else {
            return Err(DatError::of(ErrorType::InternalError));
        };
        let raw = state.raw(h, kind)?;
        f(&state.core, raw).map_err(|e| {
            if instance.poisoned.load(Ordering::Acquire) {
                DatError::of(ErrorType::InternalError)
            } else {
                e
            }
        })
    })
}

/// What a lane knows of its first handle: the handle, the slot it would
/// name as a handle of its kind, and how to judge the object living there
/// (see [`udat_core`]'s lanes).
#[derive(Clone, Copy)]
pub(crate) struct LaneHandle<'a> {
    h: DAT_HANDLE,
    handles: &'a HandleSpace,
    kind: Kind,
}

impl<'a> LaneHandle<'a> {
    /// The handle `h`, taken as one of `kind` of `handles`, with no test
    /// that it is one, which [`LaneHandle::names`] makes.
    #[inline(always)]
    pub(crate) fn new(h: DAT_HANDLE, handles: &'a HandleSpace, kind: Kind) -> Self {
        LaneHandle { h, handles, kind }
    }

    /// Its slot ([`HandleSpace::lane_slot`]).
    #[inline(always)]
    pub(crate) fn index(self) -> u32 {
        self.handles.lane_slot(self.h, self.kind)
    }

    /// Its byte offset in the space ([`HandleSpace::lane_word`]), which a
    /// core's lane takes for the slot (`udat_core::Slab::slot_of`), masked
    /// there.
    #[inline(always)]
    pub(crate) fn word(self) -> usize {
        self.handles.lane_word(self.h)
    }

    /// The handle as the name of the object it names (see
    /// [`LaneHandle::names`]), if it is not null.
    #[inline(always)]
    pub(crate) fn name(self) -> Option<NonZeroU64> {
        NonZeroU64::new(self.h as usize as u64)
    }

    /// Whether the handle names the object living in slot `slot` at
    /// `generation` whose name is `name` (the C handle it was made with,
    /// 0 if none: see `udat_core::Provider::ep_name` and `evd_name`). An
    /// object that keeps this very handle is the one it names, with no
    /// generation to judge: a slot's next object is made with a name of
    /// its own, or none; and a name is a handle of the object's kind, so
    /// no value of another kind, or none at all, equals it.
    #[inline(always)]
    pub(crate) fn names(self, slot: u32, generation: u32, name: u64) -> bool {
        name == self.h as usize as u64 || self.matches_generation(slot, generation)
    }

    /// Whether the handle is one of its kind, of slot `slot`, and names
    /// the object living there at `generation`.
    #[inline(always)]
    pub(crate) fn matches_generation(self, slot: u32, generation: u32) -> bool {
        let Some((index, word)) = self.handles.slot_of(self.h, self.kind) else { return false };
        index == slot && self.handles.matches_generation(self.kind, word, generation)
    }
}

/// Run a hot call on `h`, a non-null handle of `kind` of `instance`, a
/// provider that does not share, under the provider's lock: its lane
/// first; if the lane did not take the call, the ordinary call, out of
/// line, which decides the exact `DAT_RETURN`.
///
/// The lane runs outside `catch_unwind`, whose closure would put every
/// argument in memory: a lane cannot panic (it indexes nothing unchecked
/// that is not masked, and branches to "not taken" instead of failing).
/// The ordinary call is guarded as [`guarded_on`] guards every call.
///
/// # Safety
/// `instance` does not share its state (`Instance::shares`), so its lock
/// is its word.
#[inline(always)]
pub(crate) unsafe fn lane_or<B: Transport>(
    instance: &'static Instance<B>,
    h: DAT_HANDLE,
    kind: Kind,
    lane: impl FnOnce(&mut Core<B>, LaneHandle<'_>) -> bool,
    ordinary: impl FnOnce(&mut Entered<B>, RawHandle) -> DatResult<()>,
) -> DAT_RETURN {
    // SAFETY: the caller's contract.
    let Some(mut state) = (unsafe { enter_door(instance) }) else {
        return DatError::of(ErrorType::InternalError).to_raw();
    };
    let State { core, handles, .. } = &mut *state;
    if lane(core, LaneHandle::new(h, handles, kind)) {
        // SAFETY: the caller's contract.
        unsafe { leave_door::<B, false>(state) };
        return DAT_SUCCESS;
    }
    // The context is made only where the lane did not take the call: made
    // before the lane, it would live in memory, stored on every call.
    not_taken(Entered { instance, state }, h, kind, ordinary)
}

/// The state of `instance`, a provider that does not share, for a hot
/// call of its door: its word, with no test of which lock it is.
///
/// # Safety
/// `instance` does not share its state (`Instance::shares`).
#[inline(always)]
unsafe fn enter_door<B: Transport>(instance: &'static Instance<B>) -> Option<Exclusive<'static, State<B>>> {
    debug_assert!(!instance.shares, "the door of a provider that does not share");
    // SAFETY: a provider that does not share has the lock of one word
    // (`Instance::new`: only one that shares is `Threads::Sharing`).
    unsafe { instance.state.enter_word() }
}

/// Let go of what [`enter_door`], or of a provider that shares (`SHARES`)
/// [`enter`], returned.
///
/// # Safety
/// `SHARES` is whether the provider shares its state (`Instance::shares`).
#[inline(always)]
unsafe fn leave_door<B: Transport, const SHARES: bool>(state: Exclusive<'static, State<B>>) {
    if SHARES {
        drop(state);
    } else {
        // SAFETY: the caller's contract: a provider that does not share
        // has the lock of one word.
        unsafe { Exclusive::leave_word(state) };
    }
}

/// The ordinary call, where its lane did not take it, guarded as
/// [`guarded_on`] guards every call: a panic poisons the provider.
#[cold]
#[inline(never)]
fn not_taken<B: Transport>(
    mut cx: Entered<B>,
    h: DAT_HANDLE,
    kind: Kind,
    ordinary: impl FnOnce(&mut Entered<B>, RawHandle) -> DatResult<()>,
) -> DAT_RETURN {
    guarded_in(&mut cx, |cx| {
        let raw = cx.raw(h, kind)?;
        ordinary(cx, raw)
    })
}

/// [`lane_or`] for a provider that shares: the lane with the state
/// shared, which takes `h`'s object's lock as it finds the object
/// ([`crate::lock::LaneLock`]); if it did not take the call, the
/// ordinary shared call ([`shared_on`]), out of line.
///
/// # Safety
/// `instance` shares its state (`Instance::shares`) and `h` is a non-null
/// handle of it; `lane` and `ordinary` change only the object whose lock
/// they take (the contract of `udat_core::shared`'s calls).
#[inline(always)]
pub(crate) unsafe fn shared_lane_or<B: Transport>(
    instance: &'static Instance<B>,
    h: DAT_HANDLE,
    kind: Kind,
    lane: impl FnOnce(&Core<B>, LaneHandle<'_>) -> bool,
    ordinary: impl FnOnce(&Core<B>, RawHandle) -> DatResult<()>,
) -> DAT_RETURN {
    // A poisoned provider lets no sharer in, and a poisoned object lock no
    // holder (`crate::lock`): the ordinary call then refuses.
    // SAFETY: the provider shares (the caller's contract), so its lock is
    // `Threads::Sharing`'s; the lane changes only the object whose lock it
    // takes.
    if let Some(state) = unsafe { instance.state.share() } {
        if lane(&state.core, LaneHandle::new(h, &state.handles, kind)) {
            return DAT_SUCCESS;
        }
    }
    // SAFETY: forwarded contract.
    unsafe { shared_not_taken(instance, h, kind, ordinary) }
}

/// The ordinary shared call, where its lane did not take it, or the call
/// has none.
///
/// # Safety
/// As [`shared_on`].
#[cold]
#[inline(never)]
pub(crate) unsafe fn shared_not_taken<B: Transport>(
    instance: &'static Instance<B>,
    h: DAT_HANDLE,
    kind: Kind,
    ordinary: impl FnOnce(&Core<B>, RawHandle) -> DatResult<()>,
) -> DAT_RETURN {
    // SAFETY: forwarded contract.
    unsafe { shared_on(instance, h, kind, ordinary) }
}

/// What a slot udat does not offer answers.
pub(crate) fn not_offered() -> DAT_RETURN {
    DAT_NOT_IMPLEMENTED
}
