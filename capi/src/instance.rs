//! One registered provider: its `DAT_PROVIDER` table, and the core
//! provider that holds every object opened through it, behind its lock
//! ([`crate::lock`]).
//!
//! A C handle is a word of the instance's [`HandleSpace`] holding the
//! address of this instance's table (`<dat2/dat_redirection.h>`:
//! `DAT_HANDLE_TO_PROVIDER`). The table is the instance's first field, so
//! an entry point finds its instance from any handle it is given.

use std::ffi::CString;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use udat_core::handle::{AnyHandle, CnoHandle, Kind, RawHandle};
use udat_core::types::IaAddress;
use udat_core::{DatError, DatResult, Provider, Subtype};
use udat_wake::notify::Notifier;

use crate::capacity::{Capacity, Heap};
use crate::handle_space::HandleSpace;
use crate::lock::{CallLock, Locked, Threads};
use crate::sys::{
    udat_ext_counters_fn, udat_ext_fn, udat_provider_head, udat_wait_abandon_fn, udat_wait_fn, DAT_COMM, DAT_HANDLE,
    DAT_IA_HANDLE, DAT_PROVIDER,
};
use crate::transport::Transport;

/// The core provider as the C ABI instantiates it: its objects and events
/// on the heap, in the counts of a [`Capacity`].
pub type Core<B> = Provider<B, Heap>;

/// How a query result names an IA to the consumer: libdat2 gives consumers
/// its own small integers, a static registry the provider's pointer.
pub type IaOut = fn(DAT_IA_HANDLE) -> DAT_IA_HANDLE;

/// A socket address at a stable, aligned place, for the `*_ptr` fields of
/// query results and events.
#[derive(Clone, Copy, Default)]
#[repr(C, align(8))]
pub struct Addr(pub IaAddress);

/// What the lock guards.
pub struct State<B: Transport> {
    pub core: Core<B>,
    /// Where the C handles of the core's objects are.
    pub handles: HandleSpace,
    /// Per IA slot: the IA's own address.
    pub ia_addr: Box<[Addr]>,
    /// Per EP slot: local and remote address of the last `dat_ep_query`.
    pub ep_addr: Box<[(Addr, Addr)]>,
    /// Per CR slot: the requester's address of the last `dat_cr_query`.
    pub cr_addr: Box<[Addr]>,
    /// Per PSP slot: the address and communicator the last
    /// `dat_csp_query` of a CSP there reported (CSPs live among the PSPs).
    pub csp_param: Box<[(Addr, DAT_COMM)]>,
    /// Per CNO slot: the descriptors of a CNO of `dat_cno_fd_create`.
    pub cno_fds: Box<[Option<(CnoHandle, Notifier)>]>,
}

impl<B: Transport> State<B> {
    /// Close the descriptors of the CNOs that are gone (freed, or closed
    /// with their IA). A CNO loses its signal as it goes, so nothing
    /// raises a closed descriptor.
    pub fn forget_cnos(&mut self) {
        for slot in self.cno_fds.iter_mut() {
            if slot.as_ref().is_some_and(|(h, _)| self.core.cno_query(*h, udat_core::CNO_FIELD_ALL).is_err()) {
                *slot = None;
            }
        }
    }
}

/// What a registration carries besides its name and `ia_params`.
#[derive(Clone, Copy, Debug)]
pub struct Registration {
    pub dapl_version: (u32, u32),
    pub thread_safe: bool,
    pub ia_out: IaOut,
}

/// The entry points an instance hands out: its provider table, and the
/// extended-op post of `c/ext.h` (`crate::provider_table::entries`).
pub struct Entries {
    /// The `DAT_PROVIDER` table.
    pub table: DAT_PROVIDER,
    /// What the extended-op slot calls with the posts it read.
    pub post: udat_ext_fn,
    /// What it calls with the counters calls it read.
    pub counters: udat_ext_counters_fn,
    /// The steps of `dat_evd_wait` (`c/wait.c`).
    pub evd_wait: udat_wait_fn,
    /// What a cancelled `dat_evd_wait` calls on its way out.
    pub evd_wait_abandon: udat_wait_abandon_fn,
}

/// A registered provider.
#[repr(C)]
pub struct Instance<B: Transport> {
    /// First, so the provider word of a handle is this instance's address.
    pub table: DAT_PROVIDER,
    /// Second, as `udat_provider_head` of `c/ext.h` says: the entry the
    /// extended-op slot calls with the posts it read from its `va_list`.
    pub post: udat_ext_fn,
    /// Third: the entry it calls with the counters calls it read.
    pub counters: udat_ext_counters_fn,
    /// Then the steps of `dat_evd_wait`, and what a cancelled one calls,
    /// as `udat_provider_head` says (`c/wait.c`).
    pub evd_wait: udat_wait_fn,
    pub evd_wait_abandon: udat_wait_abandon_fn,
    /// The name it is registered under (`device_name` points here).
    pub name: CString,
    /// The backend's IA name: a verbs device or the software HCA.
    pub device: CString,
    /// The registration's version and thread-safety, echoed by
    /// `dat_ia_query` so libdat2 finds the registration again on close.
    pub dapl_version: (u32, u32),
    pub thread_safe: bool,
    pub ia_out: IaOut,
    /// An entry point panicked: its objects may be half-updated, so the
    /// instance serves no further call (`DAT_INTERNAL_ERROR`).
    pub poisoned: AtomicBool,
    pub state: Locked<State<B>>,
    /// Whether posts and dequeues share the state: a thread-safe
    /// registration over a transport whose queues allow it.
    pub shares: bool,
    /// Per IA slot: when, on the clock of [`Instance::now_us`], an empty
    /// shared dequeue of an EVD of that IA next makes an exclusive one,
    /// which looks at the IA's connection events (at most every
    /// [`udat_core::CM_LOOK_US`], as the exclusive dequeue itself looks),
    /// over a transport that cannot tell whether one waits
    /// ([`udat_core::Backend::cm_waiting`]).
    pub cm_look_us: Box<[AtomicU64]>,
}

// `c/ext.c` and `c/wait.c` reach `post`, `counters` and the wait's steps
// as `udat_provider_head` lays them out; the fields before them are the
// same for every transport.
const _: () = assert!(
    core::mem::offset_of!(Instance<udat_verbs::Verbs>, post) == core::mem::offset_of!(udat_provider_head, post)
        && core::mem::offset_of!(Instance<udat_verbs::Verbs>, counters)
            == core::mem::offset_of!(udat_provider_head, counters)
        && core::mem::offset_of!(Instance<udat_verbs::Verbs>, evd_wait)
            == core::mem::offset_of!(udat_provider_head, evd_wait)
        && core::mem::offset_of!(Instance<udat_verbs::Verbs>, evd_wait_abandon)
            == core::mem::offset_of!(udat_provider_head, evd_wait_abandon)
);

impl<B: Transport> Instance<B> {
    /// The lock of an EP, SRQ or EVD for a call of a provider that shares
    /// ([`udat_core::shared`]) that may panic holding it, which then
    /// poisons the instance; a lane takes [`crate::lock::LaneLock`].
    #[inline(always)]
    pub fn call_lock(&'static self) -> CallLock {
        CallLock { poisoned: &self.poisoned }
    }

    /// A call panicked in the instance: it serves no further call
    /// (`poisoned`), and no thread shares its state again
    /// ([`Locked::poison_shares`]).
    pub fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
        self.state.poison_shares();
    }

    /// A new instance, at its final address: handles point into it. Its
    /// table is `B`'s for a provider that shares or not, as it does
    /// (`crate::provider_table::entries`).
    pub fn new(name: CString, device: CString, capacity: Capacity, reg: &Registration) -> DatResult<Box<Self>> {
        let core = Provider::with_storage(B::create(&capacity)?, Heap(capacity));
        let state = State {
            core,
            handles: HandleSpace::new(&capacity)?,
            ia_addr: vec![Addr::default(); capacity.ias as usize].into_boxed_slice(),
            ep_addr: vec![(Addr::default(), Addr::default()); capacity.eps as usize].into_boxed_slice(),
            cr_addr: vec![Addr::default(); capacity.crs as usize].into_boxed_slice(),
            csp_param: vec![(Addr::default(), DAT_COMM::default()); capacity.psps as usize].into_boxed_slice(),
            cno_fds: std::iter::repeat_with(|| None).take(capacity.cnos as usize).collect(),
        };
        let shares = reg.thread_safe && B::SHARED_QUEUES;
        let entries = crate::provider_table::entries::<B>(shares);
        let threads = if shares { Threads::Sharing } else { Threads::One };
        let mut instance = Box::new(Instance {
            table: entries.table,
            post: entries.post,
            counters: entries.counters,
            evd_wait: entries.evd_wait,
            evd_wait_abandon: entries.evd_wait_abandon,
            name,
            device,
            dapl_version: reg.dapl_version,
            thread_safe: reg.thread_safe,
            ia_out: reg.ia_out,
            poisoned: AtomicBool::new(false),
            state: Locked::new(state, threads),
            shares,
            cm_look_us: (0..capacity.ias).map(|_| AtomicU64::new(0)).collect(),
        });
        instance.table.device_name = instance.name.as_ptr();
        let word = ptr::addr_of!(instance.table) as usize;
        instance.state.lock().handles.set_word(word);
        Ok(instance)
    }

    /// Microseconds on `CLOCK_MONOTONIC_COARSE`, which may lag a scheduler
    /// tick and costs no system call: an empty shared dequeue over a
    /// transport that cannot tell whether a connection event waits reads it
    /// on every call (see [`udat_core::Backend::coarse_now_us`]).
    pub fn now_us() -> u64 {
        udat_wake::coarse_now_us()
    }

    /// Whether an empty shared dequeue of an EVD of the IA in slot `ia` is
    /// to make an exclusive one now, which pulls the IA's connection
    /// events: true at most once every [`udat_core::CM_LOOK_US`] across the
    /// provider's threads. The exclusive dequeue keeps its own clock per
    /// IA, so two looks are at most twice that apart.
    pub fn cm_look_due(&self, ia: u32) -> bool {
        let Some(next) = self.cm_look_us.get(ia as usize) else { return true };
        let now = Self::now_us();
        let due = next.load(Ordering::Relaxed);
        now >= due
            && next.compare_exchange(due, now + udat_core::CM_LOOK_US, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// The instance a handle of this transport belongs to.
    ///
    /// # Safety
    /// `h` is a handle an instance of `B` handed out (libdat2 and the
    /// static registry dispatch on the handle's own provider word, the
    /// static registry once [`crate::handle_space::issued`] holds, so an entry
    /// point of `B` only ever sees such handles first).
    #[inline(always)]
    pub unsafe fn of(h: DAT_HANDLE) -> &'static Instance<B> {
        // SAFETY: by the contract, `h` is a handle word (written atomically)
        // holding the address of an `Instance<B>`, and instances are never
        // freed.
        unsafe { &*((*(h as *const AtomicUsize)).load(Ordering::Relaxed) as *const Instance<B>) }
    }
}

/// The `DAT_INVALID_HANDLE` subtype for a kind.
pub fn invalid(kind: Kind) -> DatError {
    let sub = match kind {
        Kind::Ia => Subtype::InvalidHandleIa,
        Kind::Pz => Subtype::InvalidHandlePz,
        Kind::Lmr => Subtype::InvalidHandleLmr,
        Kind::Rmr => Subtype::InvalidHandleRmr,
        Kind::Evd => Subtype::NoSubtype,
        Kind::Cno => Subtype::InvalidHandleCno,
        Kind::Ep => Subtype::InvalidHandleEp,
        Kind::Psp => Subtype::InvalidHandlePsp,
        Kind::Rsp => Subtype::InvalidHandleRsp,
        Kind::Cr => Subtype::InvalidHandleCr,
        Kind::Srq => Subtype::InvalidHandleSrq,
        Kind::Csp => Subtype::InvalidHandleCsp,
    };
    DatError::invalid_handle(sub)
}

impl<B: Transport> State<B> {
    /// The core handle a C handle of `kind` names, checked: it must be a
    /// handle word of this very provider, of this kind, whose slot holds a
    /// live object of the generation that names this word. Nothing is
    /// read through `h`.
    #[inline(always)]
    pub fn raw(&self, h: DAT_HANDLE, kind: Kind) -> DatResult<RawHandle> {
        self.handles
            .resolve(
                h,
                kind,
                #[inline(always)]
                |index| self.core.live_generation(kind, index),
            )
            .ok_or(invalid(kind))
    }

    /// Like [`State::raw`], but `DAT_HANDLE_NULL` is the null handle.
    pub fn raw_or_null(&self, h: DAT_HANDLE, kind: Kind) -> DatResult<RawHandle> {
        if h.is_null() {
            Ok(RawHandle::NULL)
        } else {
            self.raw(h, kind)
        }
    }

    /// The C handle of a core handle; null for the null handle.
    #[inline(always)]
    pub fn ptr(&self, h: impl Into<AnyHandle>) -> DAT_HANDLE {
        let h = h.into();
        self.handles.handle(h.kind, h.raw)
    }
}
