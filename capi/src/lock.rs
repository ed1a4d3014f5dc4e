//! How the threads of a provider take turns.
//!
//! A provider's state is behind a reader-writer lock split into shards,
//! one cache line and one word each. Every call that may change more than
//! one object — the control path, waits, frees, and whatever the data path
//! cannot finish alone — takes every shard for writing ([`Locked::lock`]):
//! it has the provider to itself. A post or a dequeue of a thread-safe
//! provider takes only its thread's shard for reading ([`Locked::share`]),
//! so posts and dequeues of different threads never write a line another
//! thread reads, and then the lock of its own Endpoint, SRQ or EVD
//! ([`LaneLock`], [`CallLock`]), on the word of the object's slot: the
//! rules of `udat_core::shared`.
//!
//! A provider that does not share ([`Threads::One`]) is behind one word
//! instead: a call takes it with one atomic exchange and lets it go with a
//! plain store, and the same word says whether a call panicked, so the
//! call that takes it learns both at once. A provider registered
//! `nonthreadsafe` is entered by one thread at a time by its consumer's
//! contract (dat_ia_query(3DAT): "The Provider Library is not required to
//! be thread safe"), so for it the word is only a guard against a
//! consumer who breaks that contract; a thread-safe provider over a
//! transport whose queues are not to be shared waits on it for its turn,
//! one call at a time, as on a mutex.

use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use udat_core::shared::SlotLock;

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
    /// One call at a time: the state is behind one word, which a thread
    /// waits for. A provider registered `nonthreadsafe` (one thread at a
    /// time by its consumer's contract) and a thread-safe one over a
    /// transport whose queues are not to be shared.
    One,
    /// Any thread; posts and dequeues of different objects at once: the
    /// sharded lock.
    Sharing,
}

/// The word of a provider that does not share: nobody in it.
const FREE: u32 = 0;
/// A call is in it.
const HELD: u32 = 1;
/// Nobody is in it, and a call panicked in it: its objects may be
/// half-updated.
const POISONED: u32 = 2;

/// One shard, alone on its cache line: one word, the number of calls
/// sharing the value through it, [`WRITER`] while an [`Exclusive`] holds
/// it, and [`POISON`] once a call panicked. A sharer takes it with one
/// atomic add and lets it go with one atomic subtract, and the add's
/// answer says both whether a holder is in and whether the provider is
/// poisoned. The word is the only one either touches, so every change of
/// it is ordered with every other (one atomic's modification order), and
/// a sharer and an exclusive holder never both think they have it.
#[repr(align(64))]
struct Shard(AtomicU32);

/// The bit of a [`Shard`]'s word that an [`Exclusive`] holds.
const WRITER: u32 = 1 << 31;
/// The bit of every shard's word once a call panicked
/// ([`Locked::poison_shares`]): no sharer is let in again.
const POISON: u32 = 1 << 30;
/// The bits of a [`Shard`]'s word that count the sharers, far fewer than
/// 2^30 threads.
const SHARERS: u32 = !(WRITER | POISON);

impl Shard {
    /// Count this thread in, unless an [`Exclusive`] holds the shard or
    /// waits for it to drain, or the provider is poisoned: then undone,
    /// and `false`.
    #[inline(always)]
    fn try_share(&self) -> bool {
        if self.0.fetch_add(1, Ordering::Acquire) & !SHARERS == 0 {
            return true;
        }
        self.0.fetch_sub(1, Ordering::Relaxed);
        false
    }

    /// Count this thread out.
    ///
    /// # Safety
    /// The thread counted itself in ([`Shard::try_share`] said `true`).
    #[inline(always)]
    unsafe fn unshare(&self) {
        self.0.fetch_sub(1, Ordering::Release);
    }

    /// Take the shard for an [`Exclusive`]: the bit, once no other holds
    /// it, which turns every new sharer away; then wait for the sharers
    /// already in to leave (a post or a dequeue each).
    fn lock_exclusive(&self) {
        while self.0.fetch_or(WRITER, Ordering::Acquire) & WRITER != 0 {
            backoff_while(|| self.0.load(Ordering::Relaxed) & WRITER != 0);
        }
        backoff_while(|| self.0.load(Ordering::Acquire) & SHARERS != 0);
    }

    /// Let the shard go.
    ///
    /// # Safety
    /// The caller holds it ([`Shard::lock_exclusive`]).
    unsafe fn unlock_exclusive(&self) {
        self.0.fetch_and(!WRITER, Ordering::Release);
    }
}

/// Wait while `busy`: spin a while, then yield between looks.
#[inline(never)]
fn backoff_while(busy: impl Fn() -> bool) {
    let mut spins = 0u32;
    while busy() {
        if spins < SPINS {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// A value behind the sharded lock.
pub struct Locked<T> {
    /// Of a provider that does not share: [`FREE`], [`HELD`] or
    /// [`POISONED`].
    word: AtomicU32,
    /// Of [`Threads::Sharing`]: the lock is its shards, not the word.
    sharded: bool,
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
    /// `value` behind the lock for `threads`: one word, or sharded.
    pub fn new(value: T, threads: Threads) -> Self {
        let sharded = threads == Threads::Sharing;
        let n = if sharded { SHARDS } else { 0 };
        let shards = (0..n).map(|_| Shard(AtomicU32::new(0))).collect();
        let turns = Turns {
            waiting: AtomicU32::new(0),
            since: AtomicU64::new(0),
            owed_until: AtomicU64::new(0),
            epoch: Instant::now(),
        };
        Locked { word: AtomicU32::new(FREE), sharded, shards, turns: Box::new(turns), value: UnsafeCell::new(value) }
    }

    /// The value, to this thread alone: `None` once a call panicked in it.
    /// The word says so (it is `POISONED`, and stays so); of a sharded
    /// lock, `poisoned`, read once every shard is held, so that a call that
    /// panicked before it let go of its shard is seen.
    ///
    /// A guard it returns never carries a poison, so that where it is let
    /// go the word is stored free with no test.
    #[inline(always)]
    pub fn enter(&self, poisoned: &AtomicBool) -> Option<Exclusive<'_, T>> {
        if self.sharded {
            self.lock_shards();
            if poisoned.load(Ordering::Acquire) {
                // SAFETY: every shard was taken just above.
                unsafe { self.unlock_all(false) };
                return None;
            }
            return Some(Exclusive { locked: self, poison: false });
        }
        // SAFETY: the lock is not sharded.
        unsafe { self.enter_word() }
    }

    /// [`Locked::enter`] of a lock known to be its word, with no test of
    /// which it is: the hot calls of a provider that does not share.
    ///
    /// # Safety
    /// The lock is not [`Threads::Sharing`]'s (whose sharers the word
    /// would not exclude).
    #[inline(always)]
    pub unsafe fn enter_word(&self) -> Option<Exclusive<'_, T>> {
        debug_assert!(!self.sharded, "a lock of one word");
        let prev = self.word.swap(HELD, Ordering::Acquire);
        if prev != FREE && !self.enter_slow(prev) {
            return None;
        }
        Some(Exclusive { locked: self, poison: false })
    }

    /// The guard of the lock this thread holds, handed over
    /// ([`Exclusive::hand_over`]).
    ///
    /// # Safety
    /// This thread holds the lock, through a guard it handed over and has
    /// not taken back.
    #[inline(always)]
    pub unsafe fn held(&self) -> Exclusive<'_, T> {
        Exclusive { locked: self, poison: false }
    }

    /// [`Locked::enter_word`] of a word that is free, in one
    /// compare-and-swap; `None`, the word untouched, if it is not, for the
    /// caller to enter as every call enters, out of line. A hot call whose
    /// every way out but the success is a jump takes it so: the jump
    /// passes on nothing of what was found (a post jumps with its C
    /// arguments alone).
    ///
    /// # Safety
    /// As for [`Locked::enter_word`].
    #[inline(always)]
    pub unsafe fn try_take_word(&self) -> Option<Exclusive<'_, T>> {
        debug_assert!(!self.sharded, "a lock of one word");
        self.word.compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed).ok()?;
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

    /// Take the word, waiting out a thread in it; whether a call had
    /// panicked in it.
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
        if !self.sharded {
            let poison = self.take_word();
            return Exclusive { locked: self, poison };
        }
        self.lock_shards();
        Exclusive { locked: self, poison: false }
    }

    /// Every shard, for writing, in order, of a sharded lock.
    #[inline(always)]
    fn lock_shards(&self) {
        self.wait_turn();
        for shard in &*self.shards {
            shard.lock_exclusive();
        }
        self.turns.since.store(self.turns.now(), Ordering::Relaxed);
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
        if !self.sharded {
            self.word.store(if poison { POISONED } else { FREE }, Ordering::Release);
            return;
        }
        if self.turns.waiting.load(Ordering::Relaxed) != 0 {
            let now = self.turns.now();
            let held = now.saturating_sub(self.turns.since.load(Ordering::Relaxed));
            let turn = (TURN_PER_HOLD * held).min(MAX_TURN.as_nanos() as u64);
            self.turns.owed_until.store(now + turn, Ordering::Relaxed);
        }
        for shard in self.shards.iter().rev() {
            // SAFETY: the caller holds every shard for writing.
            unsafe { shard.unlock_exclusive() };
        }
    }

    /// The value, shared with other threads that share it: this thread's
    /// shard, for reading; `None` once a call panicked in it
    /// ([`Locked::poison_shares`]).
    ///
    /// # Safety
    /// The lock is [`Threads::Sharing`]'s. What the threads sharing the
    /// value do to it through `&T` is only what `udat_core::shared`
    /// allows: each changes only what sits behind a cell of an object
    /// whose lock it holds.
    #[inline(always)]
    pub unsafe fn share(&self) -> Option<Sharing<'_, T>> {
        debug_assert_eq!(self.shards.len(), SHARDS, "a sharded lock");
        // SAFETY: the lock of `Threads::Sharing` has `SHARDS` shards (the
        // caller's contract), and the offset is one of theirs.
        let shard = unsafe { &*self.shards.as_ptr().byte_add(SHARD.get()) };
        // Alone in the shard, with nobody holding or poisoning it: in.
        let before = shard.0.fetch_add(1, Ordering::Acquire);
        if before != 0 && !self.share_busy(shard, before) {
            return None;
        }
        Some(Sharing { locked: self, shard })
    }

    /// [`Locked::share`] where the shard's word was not 0 before this
    /// thread counted itself in (`before`): beside other sharers, it is
    /// in, and moves to another shard for its next call
    /// ([`move_shard`]); with an [`Exclusive`] holding or waiting for
    /// the shard, or the provider poisoned, it counts itself out and
    /// waits ([`Locked::wait_shared`]).
    #[cold]
    #[inline(never)]
    fn share_busy(&self, shard: &Shard, before: u32) -> bool {
        if before & !SHARERS == 0 {
            move_shard();
            return true;
        }
        shard.0.fetch_sub(1, Ordering::Relaxed);
        self.wait_shared(shard)
    }

    /// A call panicked: no sharer is let in from now on ([`Locked::share`]
    /// answers `None`). A sharer already in finishes its call; it holds
    /// the lock of the one object it changes, which a panic under it
    /// poisons ([`CallLock`]).
    pub fn poison_shares(&self) {
        for shard in &*self.shards {
            shard.0.fetch_or(POISON, Ordering::Release);
        }
    }

    /// Take `shard` for reading behind an [`Exclusive`]: counted as
    /// waiting, spinning a while, then yielding between tries, looking
    /// until the holder has let go so that the waiters do not take its
    /// line; `false`, not taken, once the provider is poisoned.
    #[cold]
    #[inline(never)]
    fn wait_shared(&self, shard: &Shard) -> bool {
        self.turns.waiting.fetch_add(1, Ordering::Relaxed);
        let taken = loop {
            backoff_while(|| shard.0.load(Ordering::Relaxed) & !SHARERS == WRITER);
            if shard.0.load(Ordering::Relaxed) & POISON != 0 {
                break false;
            }
            if shard.try_share() {
                break true;
            }
        };
        self.turns.waiting.fetch_sub(1, Ordering::Relaxed);
        taken
    }
}

thread_local! {
    /// This thread's shard, as its byte offset among a sharded lock's
    /// [`SHARDS`] shards, so that taking it is one add. Every thread
    /// starts on the first, and one that finds another sharer in its shard
    /// moves on ([`move_shard`]): threads that share a provider at the
    /// same time spread over the shards, and a thread's call reads the
    /// offset with no test of whether it was handed one.
    static SHARD: Cell<usize> = const { Cell::new(0) };
}

/// Move this thread off its shard, to another: each move steps on by
/// one more shard than the move before it (modulo the others), so that
/// threads that met on one shard go to different ones.
fn move_shard() {
    static MOVES: AtomicUsize = AtomicUsize::new(0);
    let size = std::mem::size_of::<Shard>();
    let step = 1 + MOVES.fetch_add(1, Ordering::Relaxed) % (SHARDS - 1);
    SHARD.set((SHARD.get() / size + step) % SHARDS * size);
}

/// The value, held by one thread alone. `repr(C)`: a hot call hands it to
/// the code out of line that takes over from its lane through an
/// `extern "C"` function, which is known not to unwind, so the call can be
/// a jump.
#[repr(C)]
pub struct Exclusive<'a, T> {
    locked: &'a Locked<T>,
    /// Of a lock of one word: a call panicked holding it, so the word is
    /// let go poisoned.
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

    /// Let the guard go with the lock still held, for code out of line
    /// that takes it back ([`Locked::held`]): a hot call that jumps there
    /// passes on nothing of its guard.
    #[inline(always)]
    pub fn hand_over(guard: Self) {
        debug_assert!(!guard.poison, "a guard handed over carries no poison");
        std::mem::forget(guard);
    }

    /// A call panicked holding the guard: a lock of one word refuses
    /// every later call ([`Locked::enter`]).
    pub fn poison(guard: &mut Self) {
        guard.poison = true;
    }

    /// Let go of a guard of [`Locked::enter_word`], which holds the word,
    /// with no test of which lock it is.
    ///
    /// # Safety
    /// The guard's lock is not [`Threads::Sharing`]'s: of a sharded lock
    /// it would leave the shards held, and every later call would wait.
    #[inline(always)]
    pub unsafe fn leave_word(guard: Self) {
        debug_assert!(!guard.locked.sharded, "a lock of one word");
        let (locked, poison) = (guard.locked, guard.poison);
        std::mem::forget(guard);
        locked.word.store(if poison { POISONED } else { FREE }, Ordering::Release);
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
        unsafe { self.shard.unshare() };
    }
}

/// The lock of an object (an Endpoint's, an SRQ's or an EVD's) for the
/// data path of a shared provider, on the word the object's slot in the
/// core keeps for it ([`SlotLock`]): the look-up that finds the object
/// takes it. A critical section is a post or the settling of one
/// completion, so a waiter spins briefly, then yields. The word is free,
/// held, or, once a call panicked holding it, poisoned for good, so that
/// the object it may have left half-changed is refused by the same
/// exchange that takes the lock.
///
/// This one is a lane's, which runs outside `catch_unwind` and cannot
/// panic (a panic there would unwind into C and abort the process), so
/// its guard need not ask whether the thread is panicking when it lets
/// the lock go; and which never waits: a lock another thread holds is
/// declined, and the call's ordinary path, which waits, decides.
/// [`CallLock`] is every other call's.
#[derive(Clone, Copy)]
pub struct LaneLock;

/// [`LaneLock`] for a call that may panic holding the lock, on a provider
/// whose `poisoned` flag says whether a call panicked. A panic under the
/// guard sets the flag, then poisons the lock as it lets it go, so that a
/// thread that is refused the lock, or takes the provider next, finds the
/// flag set.
#[derive(Clone, Copy)]
pub struct CallLock {
    pub poisoned: &'static AtomicBool,
}

const OBJ_FREE: u8 = 0;
const OBJ_HELD: u8 = 1;
const OBJ_POISONED: u8 = 2;

/// Take the lock on `word`: one exchange when it is free, as it is unless
/// two threads work on one object; `false` if it is poisoned.
#[inline(always)]
fn take(word: &AtomicU8) -> bool {
    match word.swap(OBJ_HELD, Ordering::Acquire) {
        OBJ_FREE => true,
        prev => contend(word, prev),
    }
}

/// [`take`] where the exchange found `prev`: poisoned (put back, and
/// `false`), or held by another thread, waited for by spinning briefly,
/// then yielding between tries, reading until it looks free so that the
/// waiters do not take the line from the holder.
#[cold]
#[inline(never)]
fn contend(word: &AtomicU8, mut prev: u8) -> bool {
    let mut spins = 0u32;
    loop {
        if prev == OBJ_POISONED {
            word.store(OBJ_POISONED, Ordering::Relaxed);
            return false;
        }
        while word.load(Ordering::Relaxed) == OBJ_HELD {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        prev = word.swap(OBJ_HELD, Ordering::Acquire);
        if prev == OBJ_FREE {
            return true;
        }
    }
}

// SAFETY: the exchange that takes the word admits one holder until the
// guard's release store; a poisoned word admits none. Every shared access
// to an EP, SRQ or EVD of the C ABI takes its lock through `LaneLock` or
// `CallLock`, which agree on the word.
unsafe impl SlotLock for LaneLock {
    type Guard<'w> = LaneGuard<'w>;

    /// One exchange, and no wait: a lane takes a lock that is free, and
    /// declines one another thread holds, or one poisoned, so that its
    /// caller decides on a path that waits ([`CallLock`]). No call is
    /// made, not even one never taken, which would make the lane keep
    /// what it holds across it on the stack (a spin in place of the call
    /// costs more still).
    #[inline(always)]
    fn take<'w>(&self, word: &'w AtomicU8) -> Option<LaneGuard<'w>> {
        match word.swap(OBJ_HELD, Ordering::Acquire) {
            // Made only once taken: a guard made and dropped lets the lock go.
            OBJ_FREE => Some(LaneGuard { word }),
            // Held by another thread: the exchange wrote what was there.
            OBJ_HELD => None,
            // Poisoned: put back.
            _ => {
                word.store(OBJ_POISONED, Ordering::Relaxed);
                None
            }
        }
    }
}

// SAFETY: as for `LaneLock`, whose word it shares.
unsafe impl SlotLock for CallLock {
    type Guard<'w> = CallGuard<'w>;

    #[inline(always)]
    fn take<'w>(&self, word: &'w AtomicU8) -> Option<CallGuard<'w>> {
        // As in `LaneLock::take`.
        take(word).then(|| CallGuard { word, poisoned: self.poisoned })
    }
}

/// A held object lock ([`CallLock`]).
pub struct CallGuard<'w> {
    word: &'w AtomicU8,
    poisoned: &'static AtomicBool,
}

/// A held object lock of a lane ([`LaneLock`]).
pub struct LaneGuard<'w> {
    word: &'w AtomicU8,
}

impl Drop for LaneGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.word.store(OBJ_FREE, Ordering::Release);
    }
}

impl Drop for CallGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let state = if std::thread::panicking() {
            self.poisoned.store(true, Ordering::Release);
            OBJ_POISONED
        } else {
            OBJ_FREE
        };
        self.word.store(state, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharers_exclude_an_exclusive_holder_and_not_each_other() {
        let locked = Locked::new(0u64, Threads::Sharing);
        // SAFETY: the test only reads through the shared value.
        let (a, b) = unsafe { (locked.share().unwrap(), locked.share().unwrap()) };
        assert_eq!((*a, *b), (0, 0));
        drop((a, b));
        *locked.lock() += 1;
        let held = locked.lock();
        std::thread::scope(|s| {
            // SAFETY: as above.
            let t = s.spawn(|| *unsafe { locked.share() }.unwrap());
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!t.is_finished(), "a sharer waits for the exclusive holder");
            drop(held);
            assert_eq!(t.join().unwrap(), 1);
        });
    }

    /// A thread that finds another sharer in its shard is let in, and
    /// takes another shard from its next call on.
    #[test]
    fn a_sharer_that_meets_another_in_its_shard_moves_to_another() {
        let locked = Locked::new(0u64, Threads::Sharing);
        let count = |offset: usize| locked.shards[offset / std::mem::size_of::<Shard>()].0.load(Ordering::Relaxed);
        let first = SHARD.get();
        // SAFETY: the test only reads through the shared value.
        let (a, b) = unsafe { (locked.share().unwrap(), locked.share().unwrap()) };
        assert_eq!(count(first), 2, "both in the thread's shard");
        let moved = SHARD.get();
        assert_ne!(moved, first, "the second moved the thread on");
        drop((a, b));
        // SAFETY: as above.
        let c = unsafe { locked.share() }.unwrap();
        assert_eq!((count(first), count(moved)), (0, 1), "the next call takes the new shard");
        drop(c);
        assert_eq!(count(moved), 0);
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
            let sharer = s.spawn(|| *unsafe { locked.share() }.unwrap());
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
        let held = locked.enter(&AtomicBool::new(false)).unwrap();
        std::thread::scope(|s| {
            let t = s.spawn(|| *locked.enter(&AtomicBool::new(false)).unwrap());
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!t.is_finished(), "a second thread waits for the first");
            drop(held);
            assert_eq!(t.join().unwrap(), 0);
        });
        *locked.enter(&AtomicBool::new(false)).unwrap() += 1;
        assert_eq!(*locked.lock(), 1);
    }

    #[test]
    fn a_thread_safe_provider_that_does_not_share_lets_in_one_call_at_a_time() {
        let locked = Locked::new(0u64, Threads::One);
        let poisoned = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        // SAFETY: the lock of `Threads::One` is its word.
                        let mut g = unsafe { locked.enter_word() }.unwrap();
                        // A read, a yield and a write: another thread in
                        // between would lose an increment.
                        let v = *g;
                        std::thread::yield_now();
                        *g = v + 1;
                        // SAFETY: as above.
                        unsafe { Exclusive::leave_word(g) };
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..1000 {
                    *locked.enter(&poisoned).unwrap() += 1;
                }
            });
        });
        assert_eq!(*locked.lock(), 5000);
        let mut g = locked.enter(&poisoned).unwrap();
        Exclusive::poison(&mut g);
        drop(g);
        // SAFETY: as above.
        assert!(unsafe { locked.enter_word() }.is_none(), "the word keeps the poison");
    }

    #[test]
    fn a_poisoned_word_refuses_every_later_entry_and_stays_poisoned() {
        let locked = Locked::new(0u64, Threads::One);
        let mut g = locked.enter(&AtomicBool::new(false)).unwrap();
        Exclusive::poison(&mut g);
        drop(g);
        assert!(locked.enter(&AtomicBool::new(false)).is_none());
        assert!(locked.enter(&AtomicBool::new(false)).is_none(), "the refusal keeps the poison");
        // The control path may still take it, and lets it go poisoned.
        let mut g = locked.lock();
        *g += 1;
        drop(g);
        assert!(locked.enter(&AtomicBool::new(false)).is_none());
    }

    #[test]
    fn a_poison_survives_a_sleep_without_the_word() {
        let locked = Locked::new(0u64, Threads::One);
        let mut g = locked.enter(&AtomicBool::new(false)).unwrap();
        Exclusive::unlocked(&mut g, || {
            let mut other = locked.enter(&AtomicBool::new(false)).unwrap();
            Exclusive::poison(&mut other);
        });
        drop(g);
        assert!(locked.enter(&AtomicBool::new(false)).is_none());
    }

    /// A provider's flag, for a test of its own.
    fn flag() -> &'static AtomicBool {
        Box::leak(Box::new(AtomicBool::new(false)))
    }

    #[test]
    fn an_object_lock_is_held_by_one_thread_at_a_time() {
        let words: [AtomicU8; 2] = Default::default();
        let lock = CallLock { poisoned: flag() };
        let counter = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (words, counter) = (&words, &counter);
                s.spawn(move || {
                    for _ in 0..10_000 {
                        // Lanes and calls exclude each other on one word; a
                        // lane declines a held lock, and tries again.
                        let _g: (Option<LaneGuard>, Option<CallGuard>) = if t % 2 == 0 {
                            let lane = loop {
                                match LaneLock.take(&words[1]) {
                                    Some(g) => break g,
                                    None => std::hint::spin_loop(),
                                }
                            };
                            (Some(lane), None)
                        } else {
                            (None, Some(lock.take(&words[1]).unwrap()))
                        };
                        // A read and a write that would lose updates if two
                        // threads held the lock at once.
                        let v = counter.load(Ordering::Relaxed);
                        counter.store(v + 1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(counter.load(Ordering::Relaxed), 40_000);
        assert_eq!(words[0].load(Ordering::Relaxed), OBJ_FREE, "another object's word is untouched");
        assert_eq!(words[1].load(Ordering::Relaxed), OBJ_FREE, "and this one let go");
    }

    #[test]
    fn a_panic_under_an_object_lock_poisons_it_and_the_next_holder_gets_none() {
        let words: [AtomicU8; 2] = Default::default();
        let lock = CallLock { poisoned: flag() };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = lock.take(&words[0]).unwrap();
            panic!("half-way through a post");
        }));
        assert!(r.is_err());
        assert!(lock.poisoned.load(Ordering::Relaxed), "the provider's flag is set");
        assert!(lock.take(&words[0]).is_none(), "the object is refused");
        assert!(LaneLock.take(&words[0]).is_none(), "by a lane too");
        assert!(lock.take(&words[0]).is_none(), "and stays refused");
        assert!(lock.take(&words[1]).is_some(), "another object's lock is not");
    }

    #[test]
    fn a_lane_declines_a_held_object_lock_without_waiting_and_leaves_it_held() {
        let word = AtomicU8::new(OBJ_FREE);
        let lock = CallLock { poisoned: flag() };
        let held = lock.take(&word).unwrap();
        assert!(LaneLock.take(&word).is_none(), "held by a call");
        assert_eq!(word.load(Ordering::Relaxed), OBJ_HELD, "and still held");
        drop(held);
        assert_eq!(word.load(Ordering::Relaxed), OBJ_FREE, "let go by its holder alone");
        let lane = LaneLock.take(&word).expect("free");
        assert!(LaneLock.take(&word).is_none(), "held by a lane");
        drop(lane);
        assert_eq!(word.load(Ordering::Relaxed), OBJ_FREE);
    }

    #[test]
    fn a_poisoned_object_lock_refuses_a_thread_that_waited_for_it() {
        let word = AtomicU8::new(OBJ_FREE);
        let lock = CallLock { poisoned: flag() };
        let held = lock.take(&word).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| lock.take(&word).is_none() && lock.poisoned.load(Ordering::Acquire));
            std::thread::sleep(std::time::Duration::from_millis(20));
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _held = held;
                panic!("half-way through a post");
            }));
            assert!(r.is_err());
            assert!(waiter.join().unwrap(), "the waiter is refused once the holder panicked, and finds the flag set");
        });
    }

    #[test]
    fn a_poisoned_sharded_lock_lets_no_sharer_in_and_still_lets_the_control_path() {
        let locked = Locked::new(0u64, Threads::Sharing);
        // SAFETY: the test only reads through the shared value.
        let inside = unsafe { locked.share() }.unwrap();
        locked.poison_shares();
        // SAFETY: as above.
        assert!(unsafe { locked.share() }.is_none(), "no new sharer");
        assert_eq!(*inside, 0, "one already in finishes");
        drop(inside);
        *locked.lock() += 1;
        assert_eq!(*locked.lock(), 1, "the control path drains and takes every shard");
        // SAFETY: as above.
        assert!(unsafe { locked.share() }.is_none(), "and the poison outlives it");
        let held = locked.lock();
        std::thread::scope(|s| {
            // SAFETY: as above.
            let waiter = s.spawn(|| unsafe { locked.share() }.is_none());
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(held);
            assert!(waiter.join().unwrap(), "a sharer is refused while the holder is in, too");
        });
    }
}
