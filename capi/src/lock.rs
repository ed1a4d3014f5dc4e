//! How the threads of a provider take turns.
//!
//! A provider's state is behind a reader-writer lock split into shards,
//! one cache line each. Every call that may change more than one object —
//! the control path, waits, frees, and whatever the data path cannot
//! finish alone — takes every shard for writing ([`Locked::lock`]): it has
//! the provider to itself. A post or a dequeue of a thread-safe provider
//! takes only its thread's shard for reading ([`Locked::share`]), so posts
//! and dequeues of different threads never write a line another thread
//! reads, and then the lock of its own Endpoint, SRQ or EVD ([`ObjLocks`]): the
//! rules of `udat_core::shared`. A thread-safe provider over a transport
//! whose queues are not to be shared has one shard: one lock around every
//! call, as a mutex would be.
//!
//! A provider registered `nonthreadsafe` is entered by one thread at a
//! time by its consumer's contract (dat_ia_query(3DAT): "The Provider
//! Library is not required to be thread safe"). It keeps only
//! a guard against a consumer who breaks that contract, one word
//! ([`Threads::One`]): a call takes it with one atomic exchange and lets it
//! go with a plain store. The same word says whether a call panicked, so
//! the call that takes it learns both at once.

use std::alloc::{alloc_zeroed, handle_alloc_error, Layout};
use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::lock_api::RawRwLock as _;
use parking_lot::RawRwLock;

/// Shards of a thread-safe provider: enough that threads seldom share one
/// on the machines udat runs on, few enough that taking them all for the
/// control path stays cheap. A power of two, so a thread finds its own
/// with a mask.
const SHARDS: usize = 16;
const _: () = assert!(SHARDS.is_power_of_two());

/// How long a call that shares spins for a call that has the provider to
/// itself before it sleeps: longer than most control calls take.
const SPINS: u32 = 1 << 14;

/// The turn a contending data path is owed, per nanosecond an
/// [`Exclusive`] held it back: twice, so that a thread making and freeing
/// objects in a loop takes at most a third of the time from threads that
/// post and dequeue, which are what the provider is for. (With as long
/// again, the turns come so often that a posting thread spends as much
/// of its turn on the cache lines the control call left as on its own
/// calls.)
const TURN_PER_HOLD: u64 = 2;

/// The longest turn the data path is owed: a control call that held the
/// provider longer (a device slow to answer) delays the next one by this
/// at most.
const MAX_TURN: Duration = Duration::from_millis(1);

/// How the control path and a contending data path take turns, alone on
/// a cache line: the sharing calls waiting for an [`Exclusive`], and until
/// when the next [`Locked::lock`] lets them be.
#[repr(align(64))]
struct Turns {
    waiting: AtomicU32,
    /// When the [`Exclusive`] now held took the provider (nanoseconds
    /// after `epoch`); written by its holder only.
    since: AtomicU64,
    /// Nanoseconds after `epoch`; 0 for no turn owed.
    owed_until: AtomicU64,
    epoch: Instant,
}

impl Turns {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

/// Who may enter a provider at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// One thread at a time, by the consumer's contract (a provider
    /// registered `nonthreadsafe`): the state is behind one word.
    One,
    /// Any thread, one call at a time: one shard.
    Many,
    /// Any thread; posts and dequeues of different objects at once: the
    /// sharded lock.
    Sharing,
}

/// The word of a [`Threads::One`] provider: nobody in it.
const FREE: u32 = 0;
/// A call is in it.
const HELD: u32 = 1;
/// Nobody is in it, and a call panicked in it: its objects may be
/// half-updated.
const POISONED: u32 = 2;

/// One shard, alone on its cache line.
#[repr(align(64))]
struct Shard(RawRwLock);

/// A value behind the sharded lock.
pub struct Locked<T> {
    /// Of a [`Threads::One`] provider: [`FREE`], [`HELD`] or [`POISONED`].
    word: AtomicU32,
    alone: bool,
    shards: Box<[Shard]>,
    turns: Box<Turns>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through the guards. An `Exclusive`
// holds every shard for writing, so it is the only one, and the value
// moves between threads only as a whole, through it. A `Sharing` holds a
// shard for reading, which excludes every `Exclusive`, and hands out `&T`
// only, and `share` is unsafe: its callers, the entry points that share a
// provider over a transport whose queues allow it
// (`Backend::SHARED_QUEUES`), change through it only what sits behind a
// cell of an object whose lock they hold (`udat_core::shared`). In
// udat-verbs that includes a QP's rings, a CQ's queues and an SRQ's slot
// table, each a `RefCell` reached under exactly one EP's, EVD's or SRQ's
// lock; its reference counts are only ever changed under an `Exclusive`,
// and no entry point hands any of its reference-counted parts out of a
// guard.
unsafe impl<T> Sync for Locked<T> {}
// SAFETY: as above; the value moves between threads only as a whole.
unsafe impl<T> Send for Locked<T> {}

impl<T> Locked<T> {
    /// `value` behind the lock for `threads`: one word, one shard, or
    /// sharded.
    pub fn new(value: T, threads: Threads) -> Self {
        let n = if threads == Threads::Sharing { SHARDS } else { 1 };
        let shards = (0..n).map(|_| Shard(RawRwLock::INIT)).collect();
        let turns = Turns {
            waiting: AtomicU32::new(0),
            since: AtomicU64::new(0),
            owed_until: AtomicU64::new(0),
            epoch: Instant::now(),
        };
        Locked {
            word: AtomicU32::new(FREE),
            alone: threads == Threads::One,
            shards,
            turns: Box::new(turns),
            value: UnsafeCell::new(value),
        }
    }

    /// Whether the value is behind one word ([`Threads::One`]), whose
    /// guard says whether a call panicked ([`Locked::enter`]).
    #[inline(always)]
    pub fn alone(&self) -> bool {
        self.alone
    }

    /// The value, to this thread alone, for a call of a [`Threads::One`]
    /// provider: `None` once a call panicked in it (the word is
    /// `POISONED`, and stays so). Of any other provider, as
    /// [`Locked::lock`]: its caller asks about panics elsewhere.
    ///
    /// A guard it returns never carries a poison, so that where it is let
    /// go the word is stored free with no test.
    #[inline(always)]
    pub fn enter(&self) -> Option<Exclusive<'_, T>> {
        if !self.alone {
            self.lock_shards();
        } else {
            let prev = self.word.swap(HELD, Ordering::Acquire);
            if prev != FREE && !self.enter_slow(prev) {
                return None;
            }
        }
        Some(Exclusive { locked: self, poison: false })
    }

    /// [`Locked::enter`] where the word was not free: poisoned (put back,
    /// and `false`), or held by a thread the consumer let in against its
    /// contract (waited for, and `true` once this thread holds it).
    #[cold]
    #[inline(never)]
    fn enter_slow(&self, prev: u32) -> bool {
        let poisoned = match prev {
            POISONED => true,
            _ => self.take_word(),
        };
        if poisoned {
            self.word.store(POISONED, Ordering::Release);
        }
        !poisoned
    }

    /// Take the word of a [`Threads::One`] provider, waiting out a thread
    /// in it; whether a call had panicked in it.
    fn take_word(&self) -> bool {
        let mut spins = 0u32;
        loop {
            match self.word.swap(HELD, Ordering::Acquire) {
                HELD => {}
                prev => return prev == POISONED,
            }
            if spins < SPINS {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// The value, to this thread alone: every shard, for writing, in
    /// order (so two callers never hold part of it each), or the word. A
    /// poisoned provider's too: its guard keeps the poison.
    #[inline(always)]
    pub fn lock(&self) -> Exclusive<'_, T> {
        if self.alone {
            let poison = self.take_word();
            return Exclusive { locked: self, poison };
        }
        self.lock_shards();
        Exclusive { locked: self, poison: false }
    }

    /// Every shard, for writing, in order, of a provider that is not
    /// [`Threads::One`].
    #[inline(always)]
    fn lock_shards(&self) {
        match &*self.shards {
            [only] => only.0.lock_exclusive(),
            shards => {
                self.wait_turn();
                for shard in shards {
                    shard.0.lock_exclusive();
                }
                self.turns.since.store(self.turns.now(), Ordering::Relaxed);
            }
        }
    }

    /// Let the sharing calls have the turn the last [`Exclusive`] owes
    /// them, if any.
    #[cold]
    fn wait_turn(&self) {
        let until = self.turns.owed_until.load(Ordering::Relaxed);
        if until == 0 {
            return;
        }
        let mut spins = 0u32;
        while self.turns.now() < until {
            if spins < SPINS {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        self.turns.owed_until.store(0, Ordering::Relaxed);
    }

    /// Let every shard go, or the word, poisoned if `poison`. If sharing
    /// calls waited, they are owed a turn ([`TURN_PER_HOLD`]) of the hold
    /// that ends.
    ///
    /// # Safety
    /// The caller holds every shard for writing, or the word.
    #[inline(always)]
    unsafe fn unlock_all(&self, poison: bool) {
        if self.alone {
            self.word.store(if poison { POISONED } else { FREE }, Ordering::Release);
            return;
        }
        match &*self.shards {
            // SAFETY: the caller holds the shard for writing.
            [only] => unsafe { only.0.unlock_exclusive() },
            shards => {
                if self.turns.waiting.load(Ordering::Relaxed) != 0 {
                    let now = self.turns.now();
                    let held = now.saturating_sub(self.turns.since.load(Ordering::Relaxed));
                    let turn = (TURN_PER_HOLD * held).min(MAX_TURN.as_nanos() as u64);
                    self.turns.owed_until.store(now + turn, Ordering::Relaxed);
                }
                for shard in shards.iter().rev() {
                    // SAFETY: the caller holds every shard for writing.
                    unsafe { shard.0.unlock_exclusive() };
                }
            }
        }
    }

    /// The value, shared with other threads that share it: this thread's
    /// shard, for reading.
    ///
    /// # Safety
    /// What the threads sharing the value do to it through `&T` is only
    /// what `udat_core::shared` allows: each changes only what sits behind
    /// a cell of an object whose lock it holds.
    #[inline(always)]
    pub unsafe fn share(&self) -> Sharing<'_, T> {
        // The number of shards is a power of two (one, or `SHARDS`).
        let shard = &self.shards[thread_index() & (self.shards.len() - 1)];
        if !shard.0.try_lock_shared() {
            self.wait_shared(shard);
        }
        Sharing { locked: self, shard }
    }

    /// Take `shard` for reading behind an [`Exclusive`]: counted as
    /// waiting, spinning a while, then asleep.
    #[cold]
    #[inline(never)]
    fn wait_shared(&self, shard: &Shard) {
        self.turns.waiting.fetch_add(1, Ordering::Relaxed);
        let mut spins = 0u32;
        while !shard.0.try_lock_shared() {
            if spins == SPINS {
                shard.0.lock_shared();
                break;
            }
            std::hint::spin_loop();
            spins += 1;
        }
        self.turns.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A number for each thread, handed out in the order threads first share
/// a provider, so that threads fall on different shards.
#[inline(always)]
fn thread_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    INDEX.with(|i| {
        if i.get() == usize::MAX {
            i.set(NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS);
        }
        i.get()
    })
}

/// The value, held by one thread alone.
pub struct Exclusive<'a, T> {
    locked: &'a Locked<T>,
    /// Of a [`Threads::One`] provider: a call panicked holding it, so the
    /// word is let go poisoned.
    poison: bool,
}

impl<T> Exclusive<'_, T> {
    /// Run `f` with the lock let go (a sleep), and take it again, even if
    /// `f` panics.
    pub fn unlocked<R>(guard: &mut Self, f: impl FnOnce() -> R) -> R {
        struct Relock<'g, 'b, T>(&'g mut Exclusive<'b, T>);
        impl<T> Drop for Relock<'_, '_, T> {
            fn drop(&mut self) {
                // Held again by the guard, which lets it go, with a poison
                // another call left meanwhile.
                let again = self.0.locked.lock();
                self.0.poison |= again.poison;
                std::mem::forget(again);
            }
        }
        // SAFETY: the guard holds every shard for writing, or the word;
        // `Relock` takes them again before the guard is used or dropped.
        unsafe { guard.locked.unlock_all(guard.poison) };
        let _relock = Relock(guard);
        f()
    }

    /// A call panicked holding the guard: a provider of [`Threads::One`]
    /// refuses every later call ([`Locked::enter`]).
    pub fn poison(guard: &mut Self) {
        guard.poison = true;
    }
}

impl<T> Deref for Exclusive<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: every shard is held for writing: no other guard exists.
        unsafe { &*self.locked.value.get() }
    }
}

impl<T> DerefMut for Exclusive<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes this the only borrow.
        unsafe { &mut *self.locked.value.get() }
    }
}

impl<T> Drop for Exclusive<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: this guard holds every shard for writing, or the word.
        unsafe { self.locked.unlock_all(self.poison) };
    }
}

/// The value, shared by the threads that hold a shard for reading.
pub struct Sharing<'a, T> {
    locked: &'a Locked<T>,
    shard: &'a Shard,
}

impl<T> Deref for Sharing<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: a shard held for reading excludes every `Exclusive`, the
        // only guard that hands out `&mut T`.
        unsafe { &*self.locked.value.get() }
    }
}

impl<T> Drop for Sharing<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: this guard holds the shard for reading.
        unsafe { self.shard.0.unlock_shared() };
    }
}

/// One lock per object slot (an Endpoint's, an SRQ's or an EVD's), each alone on
/// its cache line, for the data path of a shared provider. A critical
/// section is a post or the settling of one completion, so a waiter spins
/// briefly, then yields.
pub struct ObjLocks {
    locks: Box<[ObjLock]>,
}

#[repr(C, align(64))]
struct ObjLock {
    held: AtomicBool,
}

impl ObjLock {
    /// Take the lock another thread holds: spin briefly, then yield
    /// between tries, reading until it looks free so that the waiters do
    /// not take the line from the holder.
    #[cold]
    #[inline(never)]
    fn contend(&self) {
        let mut spins = 0u32;
        loop {
            while self.held.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            if !self.held.swap(true, Ordering::Acquire) {
                return;
            }
        }
    }
}

impl ObjLocks {
    /// `n` unlocked locks, in zeroed memory: pages are touched only as
    /// objects use their locks.
    pub fn new(n: usize) -> ObjLocks {
        let n = n.max(1);
        let layout = Layout::array::<ObjLock>(n).unwrap_or_else(|_| handle_alloc_error(Layout::new::<ObjLock>()));
        // SAFETY: the layout has a nonzero size (n >= 1).
        let p = unsafe { alloc_zeroed(layout) }.cast::<ObjLock>();
        if p.is_null() {
            handle_alloc_error(layout);
        }
        // Written a slot's lock at a time (`crate::pages`).
        crate::pages::small_pages(p as usize, layout.size());
        // SAFETY: `p` holds `n` zeroed `ObjLock`s, allocated with the
        // global allocator in the layout of `[ObjLock; n]`; all-zero bytes
        // are an unlocked `ObjLock` (an `AtomicBool` is laid out as a
        // `bool`, and 0 is `false`).
        let locks = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) };
        ObjLocks { locks }
    }

    /// Take the lock of slot `index`, for a call on a provider whose
    /// `poisoned` flag says whether a call panicked. `None` for a slot past
    /// the end (the object it names cannot exist), and once the provider
    /// is poisoned: a call that panicked holding a lock may have left its
    /// object half-changed, and sets the flag before it lets the lock go.
    #[inline(always)]
    pub fn lock<'a>(&'a self, index: u32, poisoned: &'a AtomicBool) -> Option<ObjGuard<'a>> {
        let guard = ObjGuard { lock: self.acquire(index)?, poisoned };
        (!poisoned.load(Ordering::Acquire)).then_some(guard)
    }

    /// The lock of slot `index`, taken; `None` for a slot past the end.
    /// One exchange when the lock is free, as it is unless two threads
    /// work on one object.
    #[inline(always)]
    fn acquire(&self, index: u32) -> Option<&ObjLock> {
        let lock = self.locks.get(index as usize)?;
        if lock.held.swap(true, Ordering::Acquire) {
            lock.contend();
        }
        Some(lock)
    }

    /// [`ObjLocks::lock`] for a lane, which runs outside `catch_unwind` and
    /// cannot panic (a panic there would unwind into C and abort the
    /// process), so its guard need not ask whether the thread is
    /// panicking when it lets the lock go.
    #[inline(always)]
    pub fn lock_lane<'a>(&'a self, index: u32, poisoned: &'a AtomicBool) -> Option<LaneGuard<'a>> {
        let guard = LaneGuard { lock: self.acquire(index)? };
        (!poisoned.load(Ordering::Acquire)).then_some(guard)
    }
}

/// A held object lock.
pub struct ObjGuard<'a> {
    lock: &'a ObjLock,
    poisoned: &'a AtomicBool,
}

/// A held object lock of a lane ([`ObjLocks::lock_lane`]).
pub struct LaneGuard<'a> {
    lock: &'a ObjLock,
}

impl Drop for LaneGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}

impl Drop for ObjGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.poisoned.store(true, Ordering::Release);
        }
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharers_exclude_an_exclusive_holder_and_not_each_other() {
        let locked = Locked::new(0u64, Threads::Sharing);
        // SAFETY: the test only reads through the shared value.
        let (a, b) = unsafe { (locked.share(), locked.share()) };
        assert_eq!((*a, *b), (0, 0));
        drop((a, b));
        *locked.lock() += 1;
        let held = locked.lock();
        std::thread::scope(|s| {
            // SAFETY: as above.
            let t = s.spawn(|| *unsafe { locked.share() });
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!t.is_finished(), "a sharer waits for the exclusive holder");
            drop(held);
            assert_eq!(t.join().unwrap(), 1);
        });
    }

    /// A call that had the provider to itself while a sharer waited owes
    /// the sharer a turn: the next such call waits it out (up to
    /// `MAX_TURN`) after it let go, even with nobody holding a shard.
    /// Without a waiter, nothing is owed.
    #[test]
    fn an_exclusive_holder_that_kept_a_sharer_waiting_owes_it_a_turn() {
        let locked = Locked::new(0u64, Threads::Sharing);
        drop(locked.lock());
        assert_eq!(locked.turns.owed_until.load(Ordering::Relaxed), 0, "nobody waited");
        let held = locked.lock();
        let released = std::thread::scope(|s| {
            // SAFETY: the test only reads through the shared value.
            let sharer = s.spawn(|| *unsafe { locked.share() });
            while locked.turns.waiting.load(Ordering::Relaxed) == 0 {
                std::thread::yield_now();
            }
            std::thread::sleep(2 * MAX_TURN);
            let released = Instant::now();
            drop(held);
            assert_eq!(sharer.join().unwrap(), 0);
            released
        });
        assert_eq!(locked.turns.waiting.load(Ordering::Relaxed), 0);
        drop(locked.lock());
        assert!(released.elapsed() >= MAX_TURN, "the next exclusive call waits out the turn");
        assert_eq!(locked.turns.owed_until.load(Ordering::Relaxed), 0, "and the turn is spent");
    }

    #[test]
    fn a_provider_of_one_thread_is_entered_once_at_a_time() {
        let locked = Locked::new(0u64, Threads::One);
        let held = locked.enter().unwrap();
        std::thread::scope(|s| {
            let t = s.spawn(|| *locked.enter().unwrap());
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!t.is_finished(), "a second thread waits for the first");
            drop(held);
            assert_eq!(t.join().unwrap(), 0);
        });
        *locked.enter().unwrap() += 1;
        assert_eq!(*locked.lock(), 1);
    }

    #[test]
    fn a_poisoned_word_refuses_every_later_entry_and_stays_poisoned() {
        let locked = Locked::new(0u64, Threads::One);
        let mut g = locked.enter().unwrap();
        Exclusive::poison(&mut g);
        drop(g);
        assert!(locked.enter().is_none());
        assert!(locked.enter().is_none(), "the refusal keeps the poison");
        // The control path may still take it, and lets it go poisoned.
        let mut g = locked.lock();
        *g += 1;
        drop(g);
        assert!(locked.enter().is_none());
    }

    #[test]
    fn a_poison_survives_a_sleep_without_the_word() {
        let locked = Locked::new(0u64, Threads::One);
        let mut g = locked.enter().unwrap();
        Exclusive::unlocked(&mut g, || {
            let mut other = locked.enter().unwrap();
            Exclusive::poison(&mut other);
        });
        drop(g);
        assert!(locked.enter().is_none());
    }

    #[test]
    fn the_locks_of_the_slots_are_kept_in_small_pages() {
        let locks = ObjLocks::new(16_384);
        let start = locks.locks.as_ptr() as usize;
        for at in [start + 4096, start + std::mem::size_of_val(&*locks.locks) / 2] {
            assert!(crate::pages::in_small_pages(at), "{at:#x}");
        }
    }

    #[test]
    fn an_object_lock_is_held_by_one_thread_at_a_time() {
        let locks = ObjLocks::new(4);
        let poisoned = AtomicBool::new(false);
        let counter = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        let _g = locks.lock(2, &poisoned).unwrap();
                        // A read and a write that would lose updates if two
                        // threads held the lock at once.
                        let v = counter.load(Ordering::Relaxed);
                        counter.store(v + 1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(counter.load(Ordering::Relaxed), 40_000);
        assert!(locks.lock(4, &poisoned).is_none());
    }

    #[test]
    fn a_panic_under_an_object_lock_poisons_and_the_next_holder_gets_none() {
        let locks = ObjLocks::new(1);
        let poisoned = AtomicBool::new(false);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = locks.lock(0, &poisoned).unwrap();
            panic!("half-way through a post");
        }));
        assert!(r.is_err());
        assert!(poisoned.load(Ordering::Relaxed));
        assert!(locks.lock(0, &poisoned).is_none(), "the lock is let go, the object refused");
    }
}
