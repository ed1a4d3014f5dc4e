//! Fixed-capacity, generation-checked object storage.
//!
//! A handle is a slot index and the slot's generation, which every free
//! bumps: a stale handle is refused, never taken for the slot's new object
//! (the C ABI puts the generation into its handle values the same way). A
//! new object takes a slot never used before while there is room, and only
//! then the slot freed longest ago. The objects of one owner (an IA's
//! PZs, say) can be listed through their slots ([`Members`]), so that the
//! owner visits its own and never walks the slab.

use core::marker::PhantomData;
use core::num::NonZeroU64;
use core::sync::atomic::AtomicU8;

use crate::handle::RawHandle;
use crate::place::Place;
#[cfg(doc)]
use crate::shared::SlotLock;
use crate::store::{Store, Vacant};

/// One slot of a [`Slab`]: its generation, and the object while it lives.
///
/// A slab's slots live in a [`Store`] its owner gives (an array for a
/// fixed capacity, or memory the caller reserved once); the slab writes a
/// slot the first time it hands it out.
///
/// The object is behind a cell, and whether it lives is kept beside it:
/// a caller that shares the provider among threads lets each object be
/// changed by the one thread holding its lock ([`Slab::get_shared`]),
/// while other threads read the other objects, and any slot's generation.
/// That lock is a word the slot keeps for the caller ([`Slab::live_locked`]),
/// so that the look-up which finds the object also finds its lock.
pub struct Slot<T> {
    value: Place<T>,
    /// What the slab's owner calls the object living here
    /// ([`Slab::call`]), never 0; 0 while it has given none, and while the
    /// slot is free: a look-up handed a name that is not 0 knows the slot
    /// holds the object so called by one compare ([`Slab::called_mut`]).
    name: u64,
    /// The generation a live handle must carry.
    generation: u32,
    /// Whether `value` holds an object.
    live: bool,
    /// The word of the lock that a caller sharing the slab takes before it
    /// changes the object ([`SlotLock`]); the slab never reads or writes it.
    lock: AtomicU8,
    /// While free, the next slot in the FIFO of freed slots; while live
    /// in a listed slab, the next member of its owner's list (`NONE` at
    /// either tail).
    next: u32,
    /// While live in a listed slab, the previous member (`NONE` at the
    /// head).
    prev: u32,
}

impl<T: core::fmt::Debug> core::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Slot").field("generation", &self.generation).field("live", &self.live).finish()
    }
}

impl<T> Vacant for Slot<T> {
    const VACANT: Slot<T> = Slot {
        generation: 1,
        live: false,
        lock: AtomicU8::new(0),
        next: NONE,
        prev: NONE,
        name: 0,
        value: Place::VACANT,
    };

    #[inline(always)]
    fn vacant() -> Slot<T> {
        Slot {
            generation: 1,
            live: false,
            lock: AtomicU8::new(0),
            next: NONE,
            prev: NONE,
            name: 0,
            value: Place::vacant(),
        }
    }
}

impl<T> Slot<T> {
    /// The object, through a shared slot.
    #[inline(always)]
    fn value(&self) -> Option<&T> {
        self.value.get()
    }

    /// The object, through an exclusive slot.
    #[inline(always)]
    fn value_mut(&mut self) -> &mut Option<T> {
        self.value.get_mut()
    }

    /// The object, mutably, judged by `live`: a byte to compare, where
    /// the value's own `None` may be a niche of a word that the test must
    /// build in a register.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn live_value_mut(&mut self) -> Option<&mut T> {
        if !self.live {
            return None;
        }
        debug_assert!(self.value.get_mut().is_some(), "a live slot holds its object");
        // SAFETY: `live` is true exactly while the place holds an object:
        // only this module reaches the place, and it sets `live` right
        // after it stores an object and clears it right after it takes
        // one out (`insert`, `insert_at_any`, `remove_any`).
        Some(unsafe { self.value.get_mut().as_mut().unwrap_unchecked() })
    }

    /// [`Slot::live_value_mut`] through a shared slot.
    ///
    /// # Safety
    /// As [`Place::get_shared`].
    #[inline(always)]
    #[allow(unsafe_code, clippy::mut_from_ref)]
    unsafe fn live_value_shared(&self) -> Option<&mut T> {
        if !self.live {
            return None;
        }
        // SAFETY: the caller's promise, and the slot is live.
        Some(unsafe { self.live_value_unchecked() })
    }

    /// The object of a slot found live, through a shared slot: a look-up
    /// that takes the object's lock judges `live` before it, where the
    /// slot's address is at hand, not again after.
    ///
    /// # Safety
    /// As [`Place::get_shared`], and `live` is true. (The place holds an
    /// object while `live` is true (`live_value_mut`), and `live` is
    /// changed only through `&mut` to the slab, which no sharer has: a
    /// slot found live stays live while the slab is shared.)
    #[inline(always)]
    #[allow(unsafe_code, clippy::mut_from_ref)]
    unsafe fn live_value_unchecked(&self) -> &mut T {
        debug_assert!(self.live);
        // SAFETY: the caller's promise.
        unsafe { self.value.get_shared().unwrap_unchecked() }
    }
}

impl<T> Slot<T> {
    /// A slot as a store gives it, and as the slab takes it on first use.
    /// Each use of the constant is a slot of its own, as intended.
    #[allow(clippy::declare_interior_mutable_const)]
    pub const VACANT: Slot<T> = <Slot<T> as Vacant>::VACANT;
}

const NONE: u32 = u32::MAX;

/// The objects of one owner in a [`Slab`], listed through their slots
/// (newest first): the owner finds its own without walking the slab.
/// Kept by the owner and handed to the slab at each insert and remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Members {
    head: u32,
    len: u32,
}

impl Members {
    /// No objects.
    pub const EMPTY: Members = Members { head: NONE, len: 0 };

    /// How many objects are listed.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for Members {
    fn default() -> Self {
        Members::EMPTY
    }
}

/// Storage a slab of `T` can live in.
pub trait SlotsOf<T>: Store<Slot<T>> {}

impl<T, S: Store<Slot<T>>> SlotsOf<T> for S {}

/// Slots of `T` in store `S`, which the slab's owner provides.
///
/// A new object takes a slot never used before while the store has room,
/// and only then the slot freed longest ago: a freed handle stays dead for
/// as long as the capacity allows (dat_srq_free(3DAT): "The Provider
/// should avoid assigning the used handle as long as possible").
#[derive(Debug)]
pub struct Slab<T, S> {
    slots: S,
    /// Slots below this have been handed out at least once.
    fresh: u32,
    free_head: u32,
    free_tail: u32,
    len: usize,
    capacity: u32,
    /// Filled by [`Slab::insert_at`], in slots the owner picks, rather
    /// than by [`Slab::insert`] from the free FIFO.
    keyed: bool,
    /// The low bits of a key that name a slot (see [`Slab::key_slot`]).
    key_mask: u32,
    /// The bits of a lane's word that name a slot ([`Slab::slot_of`]):
    /// `key_mask` above [`WORD_SHIFT`].
    word_mask: usize,
    /// Every object is a member of its owner's [`Members`]: it comes and
    /// goes through [`Slab::insert_member`] and [`Slab::remove_member`].
    listed: bool,
    _objects: PhantomData<T>,
}

/// The bits of a lane's word below those that name its slot
/// ([`Slab::slot_of`]): a lane's word is the byte offset of a handle in an
/// array of pointer-sized words (the C ABI's handle space), whose slot is
/// its index there, masked.
pub const WORD_SHIFT: u32 = size_of::<usize>().trailing_zeros();

/// The word that names slot `index` ([`Slab::slot_of`]): the byte offset
/// of the `index`th pointer-sized word.
#[inline(always)]
pub const fn word_of(index: u32) -> usize {
    (index as usize) << WORD_SHIFT
}

/// The low bits of a key that name one of `capacity` slots: as many as
/// the highest slot needs.
const fn key_mask_of(capacity: u32) -> u32 {
    u32::MAX >> (if capacity < 2 { 2 } else { capacity } - 1).leading_zeros()
}

impl<T, S: Store<Slot<T>>> Slab<T, S> {
    /// An empty slab over `slots`. An index must fit below `u32::MAX`:
    /// slots past that are never used.
    pub fn new(slots: S) -> Self {
        Self::with_limit(slots, NONE as usize - 1)
    }

    /// [`Slab::new`], using no more than `limit` of the slots (for objects
    /// whose index must fit fewer bits).
    pub fn with_limit(slots: S, limit: usize) -> Self {
        let capacity = slots.limit().min(limit).min(NONE as usize - 1) as u32;
        let key_mask = key_mask_of(capacity);
        Slab {
            word_mask: (key_mask as usize) << WORD_SHIFT,
            slots,
            fresh: 0,
            free_head: NONE,
            free_tail: NONE,
            len: 0,
            capacity,
            keyed: false,
            key_mask,
            listed: false,
            _objects: PhantomData,
        }
    }

    /// An empty slab over `slots` whose owner picks each object's slot
    /// ([`Slab::insert_at`]); [`Slab::insert`] refuses.
    pub fn keyed(slots: S) -> Self {
        Slab { keyed: true, ..Self::new(slots) }
    }

    /// This slab, with every object listed among its owner's
    /// ([`Members`]); plain [`Slab::insert`], [`Slab::insert_at`] and
    /// [`Slab::remove`] refuse, as they would leave a list behind.
    pub fn listed(self) -> Self {
        Slab { listed: true, ..self }
    }

    /// How many objects the slab can hold.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Store `value`; `Err(value)` when every slot is taken.
    pub fn insert(&mut self, value: T) -> Result<RawHandle, T> {
        if self.listed {
            return Err(value);
        }
        self.insert_any(value)
    }

    /// [`Slab::insert`], listed or not.
    fn insert_any(&mut self, value: T) -> Result<RawHandle, T> {
        if self.keyed {
            return Err(value);
        }
        let index = match self.take_fresh() {
            Some(index) => index,
            None => {
                let index = self.free_head;
                let Some(slot) = self.slots.items_mut().get_mut(index as usize) else {
                    return Err(value);
                };
                self.free_head = slot.next;
                if self.free_head == NONE {
                    self.free_tail = NONE;
                }
                slot.next = NONE;
                index
            }
        };
        let Some(slot) = self.slots.items_mut().get_mut(index as usize) else {
            return Err(value);
        };
        *slot.value_mut() = Some(value);
        slot.live = true;
        self.len += 1;
        Ok(RawHandle { index, generation: slot.generation })
    }

    /// The slot a 32-bit key names in a keyed slab: its low bits, as many
    /// as the capacity needs. A key whose slot is past the capacity names
    /// none.
    #[inline(always)]
    pub fn key_slot(&self, key: u32) -> u32 {
        debug_assert!(self.keyed, "a key names a slot of a keyed slab");
        // A keyed slab holds as many slots as its store (`keyed`): where
        // the store's type fixes that number, the mask is a constant, and
        // for a power of two the slot is known to be inside the store.
        let mask = match S::FIXED_LIMIT {
            Some(limit) => key_mask_of(limit.min(NONE as usize - 1) as u32),
            None => self.key_mask,
        };
        debug_assert_eq!(mask, self.key_mask);
        key & mask
    }

    /// Store `value` in slot `index` of a keyed slab; `Err(value)` when the
    /// slot is taken or past the capacity.
    pub fn insert_at(&mut self, index: u32, value: T) -> Result<RawHandle, T> {
        if self.listed {
            return Err(value);
        }
        self.insert_at_any(index, value, |value| value)
    }

    /// [`Slab::insert_at`], listed or not, the object made by `make` from
    /// `part` once slot `index` is known to be free: it is built where it
    /// is stored, not moved there whole. `Err(part)` when the slot is
    /// taken or past the capacity.
    #[inline(always)]
    fn insert_at_any<A>(&mut self, index: u32, part: A, make: impl FnOnce(A) -> T) -> Result<RawHandle, A> {
        if !self.keyed || index >= self.capacity {
            return Err(part);
        }
        while self.fresh <= index {
            if self.take_fresh().is_none() {
                return Err(part);
            }
        }
        let Some(slot) = self.slots.items_mut().get_mut(index as usize) else { return Err(part) };
        if slot.live {
            return Err(part);
        }
        *slot.value_mut() = Some(make(part));
        slot.live = true;
        self.len += 1;
        Ok(RawHandle { index, generation: slot.generation })
    }

    /// A slot never used before, if the store has room for one. It is as
    /// the store made it, [`Slot::VACANT`] (no other slot can be made
    /// outside this module), so it is not written again here.
    #[inline]
    fn take_fresh(&mut self) -> Option<u32> {
        if self.fresh >= self.capacity {
            return None;
        }
        let index = self.fresh;
        if self.slots.items().len() <= index as usize && !self.slots.grow() {
            return None;
        }
        self.fresh += 1;
        Some(index)
    }

    /// The slots handed out so far: what a walk visits. A look-up by
    /// index reads the store's slots whole ([`Slab::indexed`]).
    #[inline(always)]
    fn used(&self) -> &[Slot<T>] {
        let items = self.slots.items();
        items.get(..self.fresh as usize).unwrap_or(items)
    }

    /// Every slot of the store, for a look-up by index: one never handed
    /// out is as the store made it, vacant (`Slot::VACANT`), so it answers
    /// `None` as a freed one does, and no bound but the store's is needed.
    #[inline(always)]
    fn indexed(&self) -> &[Slot<T>] {
        self.slots.items()
    }

    #[inline(always)]
    fn slot(&self, h: RawHandle) -> Option<&Slot<T>> {
        self.indexed().get(h.index as usize).filter(|s| s.generation == h.generation && s.live)
    }

    /// The live object `h` names.
    #[inline]
    pub fn get(&self, h: RawHandle) -> Option<&T> {
        self.slot(h)?.value()
    }

    /// The live object `h` names, mutably.
    #[inline]
    pub fn get_mut(&mut self, h: RawHandle) -> Option<&mut T> {
        let slot = self.slots.items_mut().get_mut(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        slot.live_value_mut()
    }

    /// The live object `h` names, mutably, through a shared slab.
    ///
    /// # Safety
    /// For as long as the reference lives, nothing else reads or writes
    /// that object: the caller holds a lock that every other access to it
    /// takes, and no `&mut` to the slab exists. (Other objects of the slab,
    /// and every slot's generation, may be read meanwhile.)
    #[inline(always)]
    #[allow(unsafe_code, clippy::mut_from_ref)]
    pub unsafe fn get_shared(&self, h: RawHandle) -> Option<&mut T> {
        let slot = self.slot(h)?;
        // SAFETY: the caller's promise is the place's.
        unsafe { slot.live_value_shared() }
    }

    /// Whether `h` names a live object.
    pub fn contains(&self, h: RawHandle) -> bool {
        self.slot(h).is_some()
    }

    /// Take the object out; its slot becomes a tombstone with a new
    /// generation and joins the tail of the free FIFO.
    pub fn remove(&mut self, h: RawHandle) -> Option<T> {
        if self.listed {
            return None;
        }
        self.remove_any(h)
    }

    /// [`Slab::remove`], listed or not (a member is unlinked first).
    #[inline(always)]
    fn remove_any(&mut self, h: RawHandle) -> Option<T> {
        let slots = self.slots.items_mut();
        let slot = slots.get_mut(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        let value = slot.value_mut().take()?;
        slot.live = false;
        slot.name = 0;
        // The generation runs 1, 2, …, 2^32 − 1 and back to 1 (0 is the
        // null handle's), so a slot's generation repeats only once the
        // slot has been freed 2^32 − 1 times more: a stale handle is
        // refused through 4,294,967,294 reuses of its slot, at a million
        // reuses a second more than an hour of nothing but that one slot.
        slot.generation = match slot.generation.wrapping_add(1) {
            0 => 1,
            g => g,
        };
        self.len -= 1;
        if self.keyed {
            return Some(value);
        }
        match slots.get_mut(self.free_tail as usize) {
            Some(tail) => tail.next = h.index,
            None => self.free_head = h.index,
        }
        self.free_tail = h.index;
        Some(value)
    }

    /// Store `value`, listed among `members`: [`Slab::insert`] for a
    /// listed slab.
    #[inline]
    pub fn insert_member(&mut self, members: &mut Members, value: T) -> Result<RawHandle, T> {
        let h = self.insert_any(value)?;
        self.link(members, h.index);
        Ok(h)
    }

    /// Store the object `make` makes from `part` in slot `index`, listed
    /// among `members`: [`Slab::insert_at`] for a listed slab, the object
    /// built in its slot. `Err(part)` when the slot is taken or past the
    /// capacity.
    #[inline(always)]
    pub fn insert_member_at<A>(
        &mut self,
        members: &mut Members,
        index: u32,
        part: A,
        make: impl FnOnce(A) -> T,
    ) -> Result<RawHandle, A> {
        let h = self.insert_at_any(index, part, make)?;
        self.link(members, h.index);
        Ok(h)
    }

    /// Take the object `h` names out of the slab and out of `members`, the
    /// list it was inserted into: [`Slab::remove`] for a listed slab.
    #[inline]
    pub fn remove_member(&mut self, members: &mut Members, h: RawHandle) -> Option<T> {
        let slot = self.slots.items().get(h.index as usize)?;
        if !self.listed || !slot.live || slot.generation != h.generation {
            return None;
        }
        let (prev, next) = (slot.prev, slot.next);
        // The head of a list is its first member: a list that is not this
        // object's (empty, or headed elsewhere) is refused untouched.
        if members.is_empty() || (prev == NONE && members.head != h.index) {
            return None;
        }
        let items = self.slots.items_mut();
        match items.get_mut(prev as usize) {
            Some(p) => p.next = next,
            None => members.head = next,
        }
        if let Some(n) = items.get_mut(next as usize) {
            n.prev = prev;
        }
        if let Some(slot) = items.get_mut(h.index as usize) {
            (slot.prev, slot.next) = (NONE, NONE);
        }
        members.len -= 1;
        self.remove_any(h)
    }

    /// Put the new object in slot `index` at the head of `members`.
    fn link(&mut self, members: &mut Members, index: u32) {
        let items = self.slots.items_mut();
        if let Some(old) = items.get_mut(members.head as usize) {
            old.prev = index;
        }
        if let Some(slot) = items.get_mut(index as usize) {
            (slot.prev, slot.next) = (NONE, members.head);
        }
        members.head = index;
        members.len += 1;
    }

    /// The newest object listed in `members`.
    pub fn first_member(&self, members: &Members) -> Option<RawHandle> {
        let slot = self.slots.items().get(members.head as usize)?;
        Some(RawHandle { index: members.head, generation: slot.generation })
    }

    /// The object listed after the live object `h` among its owner's; a
    /// walk that takes it before it visits `h` goes on even if the visit
    /// frees `h`.
    pub fn next_member(&self, h: RawHandle) -> Option<RawHandle> {
        let slot = self.slot(h)?;
        let next = self.slots.items().get(slot.next as usize)?;
        Some(RawHandle { index: slot.next, generation: next.generation })
    }

    /// The objects listed in `members`, newest first, with their handles.
    pub fn members<'a>(&'a self, members: &Members) -> impl Iterator<Item = (RawHandle, &'a T)> + 'a {
        let items = self.slots.items();
        let mut at = members.head;
        core::iter::from_fn(move || {
            let slot = items.get(at as usize)?;
            let h = RawHandle { index: at, generation: slot.generation };
            at = slot.next;
            Some((h, slot.value()?))
        })
    }

    /// The live object in slot `index`, with its handle.
    #[inline]
    pub fn live_at(&self, index: u32) -> Option<(RawHandle, &T)> {
        let slot = self.indexed().get(index as usize)?;
        let value = slot.value()?;
        Some((RawHandle { index, generation: slot.generation }, value))
    }

    /// The live object in slot `index`, mutably, with its generation: a
    /// lane's one look-up, which judges the generation itself. (A slot
    /// never handed out holds no object.) Judged by `live`, a byte to
    /// compare, not by the value's `None`, a niche whose word the test
    /// builds in a register first.
    #[inline(always)]
    pub fn live_mut(&mut self, index: u32) -> Option<(u32, &mut T)> {
        let slot = self.slots.items_mut().get_mut(index as usize)?;
        let generation = slot.generation;
        Some((generation, slot.live_value_mut()?))
    }

    /// The slot that `word` names: its bits above [`WORD_SHIFT`], as many
    /// as the capacity needs ([`Slab::key_slot`]'s). Any word names a
    /// slot.
    #[inline(always)]
    pub fn slot_of(&self, word: usize) -> u32 {
        ((word & self.word_mask) >> WORD_SHIFT) as u32
    }

    /// Where slot `index` ([`Slab::key_slot`]) is: a place the store
    /// reaches whether or not it has made it, read with no test
    /// ([`Store::READ_TO_POWER_OF_TWO`]); otherwise a slot made so far, if
    /// `index` is one.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn place_of(&self, index: u32) -> Option<*const Slot<T>> {
        debug_assert!(index <= self.key_mask);
        if S::READ_TO_POWER_OF_TWO.is_some() {
            // SAFETY: not read here; `index <= key_mask`, below the
            // capacity rounded up to a power of two, at least 2
            // (`key_mask_of`), which the store promises it reaches.
            return Some(unsafe { self.slots.first().add(index as usize) });
        }
        self.slots.items().get(index as usize).map(|s| s as *const Slot<T>)
    }

    /// The slot `word` names ([`Slab::slot_of`]) and its place's byte
    /// offset in the store. Where a slot's size is a whole number of
    /// words, the word masked is scaled to the offset at once, with no
    /// shift.
    #[inline(always)]
    fn word_place(&self, word: usize) -> (u32, usize) {
        const { assert!(size_of::<Slot<T>>() != 0) };
        let masked = word & self.word_mask;
        let index = (masked >> WORD_SHIFT) as u32;
        let offset = if size_of::<Slot<T>>() % (1 << WORD_SHIFT) == 0 {
            masked * (size_of::<Slot<T>>() >> WORD_SHIFT)
        } else {
            index as usize * size_of::<Slot<T>>()
        };
        (index, offset)
    }

    /// The slot `word` names ([`Slab::slot_of`]) and where it is, as
    /// [`Slab::place_of`] finds a slot.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn place_of_word(&self, word: usize) -> Option<(u32, *const Slot<T>)> {
        let (index, offset) = self.word_place(word);
        if S::READ_TO_POWER_OF_TWO.is_some() {
            // SAFETY: not read here; `offset` is the place of slot `index`,
            // at most `key_mask`, as in `place_of`.
            return Some((index, unsafe { self.slots.first().byte_add(offset) }));
        }
        self.slots.items().get(index as usize).map(|s| (index, s as *const Slot<T>))
    }

    /// [`Slab::place_of_word`], for a look-up that borrows the slab
    /// mutably.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn place_of_word_mut(&mut self, word: usize) -> Option<(u32, *mut Slot<T>)> {
        let (index, offset) = self.word_place(word);
        if S::READ_TO_POWER_OF_TWO.is_some() {
            // SAFETY: as in `place_of_word`.
            return Some((index, unsafe { self.slots.first_mut().byte_add(offset) }));
        }
        self.slots.items_mut().get_mut(index as usize).map(|s| (index, s as *mut Slot<T>))
    }

    /// The live object in the slot `word` names ([`Slab::slot_of`]),
    /// mutably, with that slot and its generation: the look-up of a
    /// lane, whose C handle's byte offset is its word. Over a store that
    /// reads the capacity rounded up to a power of two
    /// ([`Store::READ_TO_POWER_OF_TWO`]) the slot's live byte alone judges
    /// it, with no test of the slot against the slots made so far.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub fn named_live_mut(&mut self, word: usize) -> Option<(u32, u32, &mut T)> {
        let (index, slot) = self.place_of_word_mut(word)?;
        // SAFETY: `place_of_word_mut` gives a place of the store, made or
        // not: a slot, or zero bytes, in which `live` (a `bool`) is false.
        // Only a made slot is ever live, so one that is holds its object
        // and is borrowed, as the slab is, mutably.
        unsafe {
            if !core::ptr::addr_of!((*slot).live).read() {
                return None;
            }
            let slot = &mut *slot;
            Some((index, slot.generation, slot.live_value_mut().unwrap_unchecked()))
        }
    }

    /// Call the object living in slot `index` `name` (0: no name), so
    /// that a look-up handed `name` finds it by one compare
    /// ([`Slab::called_mut`]). `false`, and nothing changed, where the
    /// slot holds no object. The name goes with the object.
    pub fn call(&mut self, index: u32, name: u64) -> bool {
        match self.slots.items_mut().get_mut(index as usize) {
            Some(slot) if slot.live => {
                slot.name = name;
                true
            }
            _ => false,
        }
    }

    /// The object living in the slot `word` names ([`Slab::slot_of`]),
    /// mutably, with that slot and its generation, if it is called `name`
    /// ([`Slab::call`]): one compare, the slot's name being 0 while it is
    /// free or was never made ([`Store::READ_TO_POWER_OF_TWO`]'s places
    /// read as zeros), and never 0 otherwise.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub fn called_mut(&mut self, word: usize, name: NonZeroU64) -> Option<(u32, u32, &mut T)> {
        let (index, slot) = self.place_of_word_mut(word)?;
        // SAFETY: `place_of_word_mut` gives a place of the store, made or
        // not: a slot, or zero bytes, in which `name` is 0. A slot is named
        // only while it holds its object (`call`, `remove_any`), so one
        // called `name`, which is not 0, holds it, borrowed as the slab is,
        // mutably.
        unsafe {
            if core::ptr::addr_of!((*slot).name).read() != name.get() {
                return None;
            }
            let slot = &mut *slot;
            Some((index, slot.generation, slot.value_mut().as_mut().unwrap_unchecked()))
        }
    }

    /// [`Slab::live_locked`] of the object [`Slab::called_mut`] finds, with
    /// its slot.
    ///
    /// # Safety
    /// As [`Slab::live_locked`].
    #[inline(always)]
    #[allow(unsafe_code, clippy::mut_from_ref, clippy::type_complexity)]
    pub unsafe fn called_locked<'s, G>(
        &'s self,
        word: usize,
        name: NonZeroU64,
        lock: impl FnOnce(&'s AtomicU8) -> Option<G>,
    ) -> Option<(G, u32, u32, &'s mut T)> {
        let (index, slot) = self.place_of_word(word)?;
        // SAFETY: as in `called_mut`: a slot called `name` holds its
        // object; then as in `live_locked`.
        unsafe {
            if core::ptr::addr_of!((*slot).name).read() != name.get() {
                return None;
            }
            let slot = &*slot;
            let held = lock(&slot.lock)?;
            Some((held, index, slot.generation, slot.live_value_unchecked()))
        }
    }

    /// The live object of a key ([`Slab::key_slot`]), with its handle, as
    /// [`Slab::live_at`] finds it; over a store that reads the capacity
    /// rounded up to a power of two, with no test of the slot against the
    /// slots made so far ([`Slab::named_live_mut`]).
    #[inline(always)]
    #[allow(unsafe_code)]
    pub fn keyed_live_at(&self, key: u32) -> Option<(RawHandle, &T)> {
        let index = self.key_slot(key);
        let slot = self.place_of(index)?;
        // SAFETY: as in `named_live_mut`, borrowed as the slab is.
        unsafe {
            if !core::ptr::addr_of!((*slot).live).read() {
                return None;
            }
            let slot = &*slot;
            Some((RawHandle { index, generation: slot.generation }, slot.value().unwrap_unchecked()))
        }
    }

    /// The object in slot `index`, mutably, with its generation, taken
    /// without a test: for a caller that vouches the object lives
    /// ([`Named::vouched`](crate::Named::vouched)).
    ///
    /// # Safety
    /// Slot `index` holds an object.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub unsafe fn vouched_mut(&mut self, index: u32) -> (u32, &mut T) {
        debug_assert!(self.slots.items().get(index as usize).is_some_and(|s| s.live), "a vouched slot is live");
        // SAFETY: the caller's promise: the slot exists and holds an object.
        let slot = unsafe { self.slots.items_mut().get_unchecked_mut(index as usize) };
        // SAFETY: as above; `live` is true exactly while the place holds an
        // object (`Slot::live_value_mut`).
        (slot.generation, unsafe { slot.value_mut().as_mut().unwrap_unchecked() })
    }

    /// [`Slab::live_mut`] through a shared slab.
    ///
    /// # Safety
    /// As [`Slab::get_shared`]: for as long as the reference lives,
    /// nothing else reads or writes that object.
    #[inline(always)]
    #[allow(unsafe_code, clippy::mut_from_ref)]
    pub unsafe fn live_shared(&self, index: u32) -> Option<(u32, &mut T)> {
        let slot = self.slots.items().get(index as usize)?;
        // SAFETY: the caller's promise is the place's.
        let value = unsafe { slot.live_value_shared()? };
        Some((slot.generation, value))
    }

    /// [`Slab::live_shared`] once `lock` has taken the slot's lock word
    /// (`None`: not taken, and the object is not read), with what `lock`
    /// handed back: the look-up that finds the object finds its lock. A
    /// slot holding no object takes no lock.
    ///
    /// # Safety
    /// As [`Slab::get_shared`], with the lock `lock` takes as the one
    /// every other access to the object takes.
    #[inline(always)]
    #[allow(unsafe_code, clippy::mut_from_ref)]
    pub unsafe fn live_locked<'s, G>(
        &'s self,
        index: u32,
        lock: impl FnOnce(&'s AtomicU8) -> Option<G>,
    ) -> Option<(G, u32, &'s mut T)> {
        let slot = self.slots.items().get(index as usize).filter(|s| s.live)?;
        let held = lock(&slot.lock)?;
        // SAFETY: the caller's promise is the place's, its lock is held,
        // and the slot is live.
        let value = unsafe { slot.live_value_unchecked() };
        Some((held, slot.generation, value))
    }

    /// [`Slab::live_locked`] of the slot `word` names ([`Slab::slot_of`]),
    /// found as [`Slab::named_live_mut`] finds it, with that slot.
    ///
    /// # Safety
    /// As [`Slab::live_locked`].
    #[inline(always)]
    #[allow(unsafe_code, clippy::mut_from_ref, clippy::type_complexity)]
    pub unsafe fn named_live_locked<'s, G>(
        &'s self,
        word: usize,
        lock: impl FnOnce(&'s AtomicU8) -> Option<G>,
    ) -> Option<(G, u32, u32, &'s mut T)> {
        let (index, slot) = self.place_of_word(word)?;
        // SAFETY: as in `named_live_mut`: a place of the store, made or
        // not, in which `live` is false unless it holds its object; then
        // as in `live_locked`.
        unsafe {
            if !core::ptr::addr_of!((*slot).live).read() {
                return None;
            }
            let slot = &*slot;
            let held = lock(&slot.lock)?;
            Some((held, index, slot.generation, slot.live_value_unchecked()))
        }
    }

    /// [`Slab::get_shared`] once `lock` has taken the slot's lock word, as
    /// [`Slab::live_locked`]; a stale handle, or one of a slot holding no
    /// object, takes no lock.
    ///
    /// # Safety
    /// As [`Slab::live_locked`].
    #[inline(always)]
    #[allow(unsafe_code, clippy::mut_from_ref)]
    pub unsafe fn get_locked<'s, G>(
        &'s self,
        h: RawHandle,
        lock: impl FnOnce(&'s AtomicU8) -> Option<G>,
    ) -> Option<(G, &'s mut T)> {
        let slot = self.indexed().get(h.index as usize).filter(|s| s.generation == h.generation && s.live)?;
        let held = lock(&slot.lock)?;
        // SAFETY: as in `live_locked`.
        let value = unsafe { slot.live_value_unchecked() };
        Some((held, value))
    }

    /// [`Slab::live_locked`] of slot `index`, which the caller vouches
    /// holds an object ([`Slab::vouched_mut`]): only the lock is taken.
    ///
    /// # Safety
    /// As [`Slab::live_locked`], and slot `index` holds an object.
    #[inline(always)]
    #[allow(unsafe_code, clippy::mut_from_ref)]
    pub unsafe fn vouched_locked<'s, G>(
        &'s self,
        index: u32,
        lock: impl FnOnce(&'s AtomicU8) -> Option<G>,
    ) -> Option<(G, u32, &'s mut T)> {
        debug_assert!(self.indexed().get(index as usize).is_some_and(|s| s.live), "a vouched slot is live");
        // SAFETY: the caller's promise: the slot exists and is live.
        let slot = unsafe { self.indexed().get_unchecked(index as usize) };
        let held = lock(&slot.lock)?;
        // SAFETY: as in `live_locked`: the caller's promise, the lock held,
        // and the slot live.
        let value = unsafe { slot.live_value_unchecked() };
        Some((held, slot.generation, value))
    }

    /// The generation of the object living in slot `index`; `None` for a
    /// free slot or one never handed out.
    #[inline(always)]
    pub fn generation(&self, index: u32) -> Option<u32> {
        self.indexed().get(index as usize).filter(|s| s.live).map(|s| s.generation)
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no object is live.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first live object at slot `from` or after for which `pred`
    /// holds: walk with `from = h.index() + 1` to visit each once, even
    /// while the walk frees what it finds.
    pub fn find_from(&self, from: u32, mut pred: impl FnMut(&T) -> bool) -> Option<RawHandle> {
        let slots = self.used().get(from as usize..)?;
        slots.iter().zip(from..).find_map(|(s, index)| {
            let v = s.value()?;
            pred(v).then_some(RawHandle { index, generation: s.generation })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ReadsToPowerOfTwo;

    #[test]
    fn stale_handle_refused_after_reuse() {
        let mut slab = Slab::new([Slot::<u32>::VACANT; 1]);
        let a = slab.insert(7).unwrap();
        assert_eq!(slab.remove(a), Some(7));
        let b = slab.insert(8).unwrap();
        assert_eq!(a.index, b.index);
        assert_eq!(slab.get(a), None);
        assert_eq!(slab.remove(a), None);
        assert_eq!(slab.get(b), Some(&8));
    }

    /// A handle stays stale through a million reuses of its slot, the
    /// floor dat_srq_free(3DAT)'s "avoid assigning the used handle as long
    /// as possible" is held to here (one slot, so every insert reuses it).
    /// Miri, which interprets every step, runs 1,000 reuses instead.
    #[test]
    fn a_stale_handle_is_refused_through_a_million_reuses_of_its_slot() {
        let reuses = if cfg!(miri) { 1_000 } else { 1_000_000 };
        let mut slab = Slab::new([Slot::<u32>::VACANT; 1]);
        let stale = slab.insert(0).unwrap();
        slab.remove(stale).unwrap();
        for reuse in 1..=reuses {
            let h = slab.insert(reuse).unwrap();
            assert_eq!(h.index, stale.index);
            assert!(slab.get(stale).is_none() && !slab.contains(stale), "reuse {reuse}");
            assert_eq!(slab.remove(stale), None, "reuse {reuse}");
            assert_eq!(slab.remove(h), Some(reuse));
        }
        assert_eq!(slab.slots[0].generation, stale.generation + reuses + 1);
    }

    /// The arithmetic of the generation: it skips 0, the null handle's, and
    /// comes back to a value only after 2^32 − 1 frees of its slot.
    #[test]
    fn the_generation_wraps_past_zero_after_two_to_the_32_minus_one_frees() {
        let mut slab = Slab::new([Slot::<u32>::VACANT; 1]);
        let first = slab.insert(1).unwrap();
        assert_eq!(first.generation, 1);
        slab.remove(first).unwrap();
        // As if the slot had been freed 2^32 − 3 times more.
        slab.slots[0].generation = u32::MAX;
        let last = slab.insert(2).unwrap();
        assert_eq!(last.generation, u32::MAX);
        assert!(slab.get(first).is_none());
        slab.remove(last).unwrap();
        let again = slab.insert(3).unwrap();
        assert_eq!((again.generation, again.is_null()), (1, false));
        assert_eq!(slab.get(first), Some(&3), "the 2^32 − 1st free brings generation 1 back");
        assert!(slab.get(last).is_none());
    }

    #[test]
    fn full_slab_hands_the_value_back() {
        let mut slab = Slab::new([const { Slot::<u32>::VACANT }; 2]);
        slab.insert(1).unwrap();
        slab.insert(2).unwrap();
        assert_eq!(slab.insert(3), Err(3));
        assert_eq!(slab.len(), 2);
    }

    #[test]
    fn slots_are_reused_oldest_first() {
        let mut slab = Slab::new([const { Slot::<u32>::VACANT }; 3]);
        let h: [RawHandle; 3] = core::array::from_fn(|i| slab.insert(i as u32).unwrap());
        slab.remove(h[1]);
        slab.remove(h[0]);
        assert_eq!(slab.insert(10).unwrap().index, 1);
        assert_eq!(slab.insert(11).unwrap().index, 0);
    }

    #[test]
    fn null_handle_never_live() {
        let mut slab = Slab::new([const { Slot::<u32>::VACANT }; 2]);
        slab.insert(1).unwrap();
        assert!(slab.get(RawHandle::NULL).is_none());
    }

    /// A store that grows one place at a time, as the C ABI's does.
    struct Growing(crate::store::FixedVec<Slot<u32>, 4>);

    impl Store<Slot<u32>> for Growing {
        fn items(&self) -> &[Slot<u32>] {
            &self.0
        }
        fn items_mut(&mut self) -> &mut [Slot<u32>] {
            &mut self.0
        }
        fn grow(&mut self) -> bool {
            self.0.push(Slot::VACANT).is_ok()
        }
        fn limit(&self) -> usize {
            4
        }
    }

    #[test]
    fn a_growing_store_grows_only_for_a_slot_never_used() {
        let mut slab = Slab::new(Growing(crate::store::FixedVec::new()));
        assert_eq!((slab.capacity(), slab.slots.0.len()), (4, 0));
        let a = slab.insert(1).unwrap();
        let b = slab.insert(2).unwrap();
        assert_eq!(slab.slots.0.len(), 2);
        // A freed slot waits while never-used ones remain.
        slab.remove(a);
        let c = slab.insert(3).unwrap();
        let d = slab.insert(4).unwrap();
        assert_eq!((c.index, d.index, slab.slots.0.len()), (2, 3, 4));
        // The store is full: the slot freed first comes back, with a new
        // generation, and the old handle stays dead.
        let e = slab.insert(5).unwrap();
        assert_eq!(e.index, a.index);
        assert_eq!((slab.get(a), slab.get(e), slab.get(b)), (None, Some(&5), Some(&2)));
        assert_eq!(slab.insert(6), Err(6));
        assert_eq!(slab.generation(3), Some(1));
    }

    /// What a loop that makes and frees one object at a time touches: a
    /// slot never used before at each turn until there are none, then the
    /// slot freed longest ago. The slots written are bounded by the
    /// capacity, not by the turns, and each is written in turn before any
    /// comes back (the resident memory docs/c-abi.md states).
    #[test]
    fn a_create_free_loop_touches_every_slot_once_then_no_more() {
        let mut slab = Slab::new(Growing(crate::store::FixedVec::new()));
        let mut indices = [0u32; 12];
        for (turn, index) in indices.iter_mut().enumerate() {
            let h = slab.insert(turn as u32).unwrap();
            *index = h.index;
            slab.remove(h).unwrap();
            assert_eq!(slab.slots.0.len(), (turn + 1).min(4), "turn {turn}");
        }
        assert_eq!(indices, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn a_keyed_slab_fills_the_slots_its_owner_picks() {
        let mut slab = Slab::keyed(Growing(crate::store::FixedVec::new()));
        assert_eq!(slab.insert(1), Err(1));
        let a = slab.insert_at(2, 10).unwrap();
        assert_eq!((a.index, slab.slots.0.len()), (2, 3));
        assert_eq!(slab.insert_at(2, 11), Err(11));
        assert_eq!(slab.insert_at(4, 12), Err(12));
        assert_eq!(slab.remove(a), Some(10));
        let b = slab.insert_at(2, 13).unwrap();
        assert_eq!((b.index, b.generation), (2, a.generation + 1));
        assert_eq!((slab.get(a), slab.get(b), slab.len()), (None, Some(&13), 1));
    }

    /// A keyed slab over an array masks a key by a constant: the low bits
    /// the highest slot needs. Where the array's length is not a power of
    /// two, a key whose slot lies past it names nothing.
    #[test]
    fn a_keyed_slab_over_an_array_names_a_keys_slot_by_its_low_bits() {
        let mut slab = Slab::keyed([Slot::<u32>::VACANT; 5]);
        assert_eq!([0, 4, 5, 9, 13, 0xffff_fffc].map(|key| slab.key_slot(key)), [0, 4, 5, 1, 5, 4]);
        slab.insert_at(slab.key_slot(12), 7).unwrap();
        assert_eq!(slab.live_at(slab.key_slot(0x104)).map(|(_, v)| *v), Some(7));
        assert_eq!(slab.live_at(slab.key_slot(13)), None);
        assert_eq!(slab.insert_at(slab.key_slot(13), 8), Err(8));
    }

    /// Threads change their own objects through one shared slab at once
    /// while another reads every slot's generation: what the C ABI's
    /// shared data path does, and what Miri checks for races and aliasing.
    /// A value the test shares among threads as the C ABI shares its
    /// provider.
    struct AcrossThreads<T>(T);

    impl<T> AcrossThreads<T> {
        /// The value; a method, so that a closure captures the wrapper.
        fn get(&self) -> &T {
            &self.0
        }
    }

    // SAFETY: the threads of the test reach the value only as
    // `get_shared`'s contract allows: each its own object, and nothing
    // holds the value mutably meanwhile.
    #[allow(unsafe_code)]
    unsafe impl<T> Sync for AcrossThreads<T> {}

    #[test]
    #[allow(unsafe_code)]
    fn objects_change_through_a_shared_slab_while_generations_are_read() {
        let mut slab = Slab::new([const { Slot::<u64>::VACANT }; 4]);
        let handles: [RawHandle; 3] = core::array::from_fn(|i| slab.insert(i as u64).unwrap());
        let shared = &AcrossThreads(slab);
        std::thread::scope(|s| {
            for h in &handles[..2] {
                s.spawn(move || {
                    for _ in 0..100 {
                        // SAFETY: each thread reaches only its own object,
                        // and nothing holds the slab mutably.
                        *unsafe { shared.get().get_shared(*h) }.unwrap() += 10;
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..100 {
                    assert_eq!(shared.get().generation(handles[2].index), Some(handles[2].generation));
                    assert_eq!(shared.get().get(handles[2]), Some(&2));
                }
            });
        });
        let slab = shared.get();
        assert_eq!((slab.get(handles[0]), slab.get(handles[1])), (Some(&1000), Some(&1001)));
        // SAFETY: no other access to the slab is left.
        assert!(unsafe { slab.get_shared(RawHandle { index: 3, generation: 1 }) }.is_none(), "a free slot");
    }

    #[test]
    #[allow(unsafe_code)]
    fn threads_on_one_object_take_turns_at_the_word_its_slot_keeps() {
        use crate::shared::{SlotLock, Spin};
        let mut slab = Slab::new([const { Slot::<u64>::VACANT }; 4]);
        let h = slab.insert(0).unwrap();
        let shared = &AcrossThreads(slab);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(move || {
                    for _ in 0..1_000 {
                        // SAFETY: every access to the object takes its word
                        // through `Spin`, and nothing holds the slab mutably.
                        let (_held, v) = unsafe { shared.get().get_locked(h, |w| Spin.take(w)) }.unwrap();
                        // A read and a write that would lose updates if two
                        // threads held the object at once.
                        let n = *v;
                        *v = n + 1;
                    }
                });
            }
        });
        let slab = shared.get();
        assert_eq!(slab.get(h), Some(&4_000));
        // A lock refused reads nothing, and a stale handle takes no lock.
        // SAFETY: one thread.
        unsafe {
            assert!(slab.live_locked(h.index, |_| None::<()>).is_none());
            let stale = RawHandle { index: h.index, generation: h.generation + 1 };
            assert!(slab.get_locked(stale, |_| -> Option<()> { panic!("a stale handle's lock is taken") }).is_none());
            let (held, generation, v) = slab.live_locked(h.index, |w| Spin.take(w)).unwrap();
            assert_eq!((generation, *v), (h.generation, 4_000));
            let word = |w: &AtomicU8| Some(w.load(core::sync::atomic::Ordering::Relaxed));
            assert_eq!(slab.live_locked(h.index, word).map(|(w, ..)| w), Some(1), "held");
            drop(held);
            assert_eq!(slab.live_locked(h.index, word).map(|(w, ..)| w), Some(0), "let go");
            assert!(slab.live_locked(3, |w| Spin.take(w)).is_none(), "a free slot holds nothing");
            let no_lock = |_: &AtomicU8| -> Option<()> { panic!("a free slot's lock is taken") };
            assert!(slab.live_locked(3, no_lock).is_none(), "nor takes its lock");
            // A handle whose generation a slot with no object carries (slot
            // 3 was never handed out) takes that slot's lock only while it
            // finds nothing, and one past the store takes none.
            let vacant = RawHandle { index: 3, generation: 1 };
            assert!(slab.get_locked(vacant, |w| Spin.take(w)).is_none());
            assert_eq!(slab.slots.items()[3].lock.load(core::sync::atomic::Ordering::Relaxed), 0, "let go");
            let past = RawHandle { index: 4, generation: 1 };
            assert!(slab.get_locked(past, |_| -> Option<()> { panic!("a lock past the store") }).is_none());
        }
    }

    #[test]
    fn only_a_live_slot_has_a_generation() {
        let mut slab = Slab::new([const { Slot::<u32>::VACANT }; 3]);
        let a = slab.insert(1).unwrap();
        slab.insert(2).unwrap();
        assert_eq!(slab.generation(a.index), Some(a.generation));
        slab.remove(a);
        assert_eq!(slab.generation(a.index), None);
        assert_eq!(slab.generation(2), None);
        let b = slab.insert(3).unwrap();
        assert_eq!((b.index, slab.generation(b.index)), (2, Some(1)));
        let c = slab.insert(4).unwrap();
        assert_eq!((c.index, slab.generation(c.index)), (a.index, Some(a.generation + 1)));
    }

    /// Members come and go in any order, and each owner's list holds
    /// exactly its own, newest first, whatever slots they take.
    #[test]
    fn members_are_listed_per_owner_through_any_removal_order() {
        let mut slab = Slab::new([const { Slot::<u32>::VACANT }; 6]).listed();
        let (mut a, mut b) = (Members::EMPTY, Members::EMPTY);
        let listed = |slab: &Slab<u32, _>, m: &Members| slab.members(m).map(|(_, v)| *v).collect::<std::vec::Vec<_>>();
        let a1 = slab.insert_member(&mut a, 1).unwrap();
        let b1 = slab.insert_member(&mut b, 10).unwrap();
        let a2 = slab.insert_member(&mut a, 2).unwrap();
        let a3 = slab.insert_member(&mut a, 3).unwrap();
        assert_eq!((listed(&slab, &a), listed(&slab, &b)), (std::vec![3, 2, 1], std::vec![10]));
        // The middle, the head, the tail.
        assert_eq!(slab.remove_member(&mut a, a2), Some(2));
        assert_eq!(listed(&slab, &a), [3, 1]);
        assert_eq!(slab.remove_member(&mut a, a3), Some(3));
        assert_eq!((listed(&slab, &a), a.len()), (std::vec![1], 1));
        let a4 = slab.insert_member(&mut a, 4).unwrap();
        assert_eq!(a4.index, 4, "a never-used slot before a freed one");
        assert_eq!(slab.remove_member(&mut a, a1), Some(1));
        assert_eq!(listed(&slab, &a), [4]);
        // A stale handle is refused and leaves the list alone.
        assert_eq!(slab.remove_member(&mut a, a1), None);
        assert_eq!(slab.remove_member(&mut b, b1), Some(10));
        assert!(b.is_empty() && slab.first_member(&b).is_none());
        assert_eq!((slab.first_member(&a), slab.next_member(a4), slab.len()), (Some(a4), None, 1));
        // Another owner's list, or an empty one, is refused and left as it is.
        let mut empty = Members::EMPTY;
        assert_eq!((slab.remove_member(&mut empty, a4), empty), (None, Members::EMPTY));
        let mut b2 = Members::EMPTY;
        let b3 = slab.insert_member(&mut b2, 9).unwrap();
        assert_eq!(slab.remove_member(&mut b2, a4), None);
        assert_eq!(slab.members(&b2).map(|(h, _)| h).collect::<std::vec::Vec<_>>(), [b3]);
        assert_eq!(slab.remove_member(&mut b2, b3), Some(9));
        // Plain insert and remove would leave a list behind: refused.
        assert_eq!(slab.insert(5), Err(5));
        assert_eq!(slab.remove(a4), None);
        assert_eq!(slab.remove_member(&mut a, a4), Some(4));
        assert!(a.is_empty());
    }

    /// Slots freed from one owner's list and reused by another's are
    /// listed by the new owner only.
    #[test]
    fn a_reused_slot_belongs_to_its_new_owner_only() {
        let mut slab = Slab::new([const { Slot::<u32>::VACANT }; 2]).listed();
        let (mut a, mut b) = (Members::EMPTY, Members::EMPTY);
        let x = slab.insert_member(&mut a, 1).unwrap();
        let y = slab.insert_member(&mut a, 2).unwrap();
        slab.remove_member(&mut a, x).unwrap();
        let z = slab.insert_member(&mut b, 3).unwrap();
        assert_eq!(z.index, x.index);
        assert_eq!(slab.members(&a).map(|(h, _)| h).collect::<std::vec::Vec<_>>(), [y]);
        assert_eq!(slab.members(&b).map(|(h, _)| h).collect::<std::vec::Vec<_>>(), [z]);
    }

    /// A store of `N` places, zero bytes until made, that makes at most
    /// `limit` of them and promises reads up to `limit` rounded up to a
    /// power of two ([`Store::READ_TO_POWER_OF_TWO`]), as the C ABI's
    /// reservation does: `N` is at least that.
    struct ZeroedTo<X, const N: usize> {
        places: [core::mem::MaybeUninit<X>; N],
        len: usize,
        limit: usize,
    }

    impl<X, const N: usize> ZeroedTo<X, N> {
        fn new(limit: usize) -> Self {
            assert!(limit.max(2).next_power_of_two() <= N);
            ZeroedTo { places: [const { core::mem::MaybeUninit::zeroed() }; N], len: 0, limit }
        }
    }

    #[allow(unsafe_code)]
    impl<X, const N: usize> Drop for ZeroedTo<X, N> {
        fn drop(&mut self) {
            for place in &mut self.places[..self.len] {
                // SAFETY: the first `len` places hold values (`grow`),
                // each dropped only here.
                unsafe { place.assume_init_drop() };
            }
        }
    }

    #[allow(unsafe_code)]
    impl<X: Vacant, const N: usize> Store<X> for ZeroedTo<X, N> {
        fn items(&self) -> &[X] {
            // SAFETY: the first `len` places hold values (`grow`).
            unsafe { core::slice::from_raw_parts(self.places.as_ptr().cast(), self.len) }
        }

        fn items_mut(&mut self) -> &mut [X] {
            // SAFETY: as for `items`.
            unsafe { core::slice::from_raw_parts_mut(self.places.as_mut_ptr().cast(), self.len) }
        }

        fn grow(&mut self) -> bool {
            let Some(place) = self.places.get_mut(self.len).filter(|_| self.len < self.limit) else { return false };
            place.write(X::vacant());
            self.len += 1;
            true
        }

        fn limit(&self) -> usize {
            self.limit
        }

        // SAFETY: `new` checks that the `N` places, zeroed, reach the limit
        // rounded up to a power of two; only `grow` writes one.
        const READ_TO_POWER_OF_TWO: Option<ReadsToPowerOfTwo> = Some(unsafe { ReadsToPowerOfTwo::promise() });

        fn first(&self) -> *const X {
            self.places.as_ptr().cast()
        }

        fn first_mut(&mut self) -> *mut X {
            self.places.as_mut_ptr().cast()
        }
    }

    /// A lane's word names its slot by its bits above `WORD_SHIFT`, over
    /// a store that reads past its places as over one that does not; a
    /// slot the store has not made, or one freed, holds nothing; a word's
    /// high bits are never a slot of their own, nor its low ones.
    #[test]
    #[allow(unsafe_code)]
    fn a_word_names_the_slot_of_its_bits_above_a_words_and_a_slot_not_made_holds_nothing() {
        fn check<S: Store<Slot<T>>, T: Copy + PartialEq + core::fmt::Debug>(mut slab: Slab<T, S>, ten: T, eleven: T) {
            let word = |index: u32| (index as usize) << WORD_SHIFT;
            let a = slab.insert(ten).unwrap();
            let b = slab.insert(eleven).unwrap();
            assert_eq!(slab.slot_of(word(b.index | 0x80)), b.index, "a capacity of 5 takes 3 bits");
            assert_eq!(slab.slot_of(word(b.index) | 1), b.index, "nor the bits below a word");
            let found = slab.named_live_mut(word(b.index)).map(|(s, g, v)| (s, g, *v));
            assert_eq!(found, Some((b.index, b.generation, eleven)));
            // The shared look-up: its slot, generation and object, taken
            // if `takes`.
            let locked = |slab: &Slab<T, S>, word: usize, takes: bool| {
                // SAFETY: one thread, and no other reference to the slab's
                // objects lives while the one found does.
                let found = unsafe { slab.named_live_locked(word, |_| takes.then_some(())) };
                found.map(|(_, s, g, v)| (s, g, *v))
            };
            assert_eq!(locked(&slab, word(b.index) | 5, true), Some((b.index, b.generation, eleven)));
            assert_eq!(locked(&slab, word(b.index), false), None, "lock refused");
            let found = slab.named_live_mut(word(a.index | 0x40) | 3).map(|(s, _, v)| (s, *v));
            assert_eq!(found, Some((a.index, ten)));
            for never_made in 2..8 {
                assert!(slab.named_live_mut(word(never_made)).is_none(), "slot {never_made}");
                assert_eq!(locked(&slab, word(never_made), true), None);
            }
            slab.remove(a).unwrap();
            assert!(slab.named_live_mut(word(a.index)).is_none(), "freed");
            assert_eq!(locked(&slab, word(a.index), true), None, "freed");
        }
        // A slot of a whole number of words, and one of no such size.
        check(Slab::new(ZeroedTo::<_, 8>::new(5)), 10u64, 11);
        check(Slab::new([const { Slot::<u64>::VACANT }; 5]), 10u64, 11);
        check(Slab::new(ZeroedTo::<_, 8>::new(5)), [10u8; 3], [11; 3]);
        check(Slab::new([const { Slot::<[u8; 3]>::VACANT }; 5]), [10u8; 3], [11; 3]);
    }

    /// A key finds its LMR by its low bits over a store that reads past
    /// its places as over one that does not, and a key of a slot not made
    /// finds none.
    #[test]
    fn a_key_finds_the_live_object_of_its_slot_alone() {
        fn check<S: Store<Slot<u32>>>(mut slab: Slab<u32, S>) {
            let h = slab.insert_at(3, 7).unwrap();
            assert_eq!(slab.keyed_live_at(0x1230 | 3).map(|(h, v)| (h, *v)), Some((h, 7)));
            for other in [0, 1, 2, 4, 7] {
                assert!(slab.keyed_live_at(other).is_none(), "key {other}");
            }
        }
        check(Slab::keyed(ZeroedTo::<_, 8>::new(5)));
        check(Slab::keyed([const { Slot::<u32>::VACANT }; 5]));
    }

    /// An object called by a name is found by it alone: not by another
    /// name, not once freed, and not the slot's next object by the old
    /// one; a slot holding nothing takes no name.
    #[test]
    fn a_word_finds_the_object_its_slot_calls_by_the_name_alone() {
        fn check<S: Store<Slot<u64>>>(mut slab: Slab<u64, S>) {
            let name = |n: u64| NonZeroU64::new(n).unwrap();
            let word = |index: u32| word_of(index) | 3;
            let a = slab.insert(7).unwrap();
            assert_eq!(slab.called_mut(word(a.index), name(9)), None, "not yet called");
            assert!(slab.call(a.index, 9));
            assert!(!slab.call(a.index + 1, 9), "no object to call");
            let found = slab.called_mut(word(a.index), name(9)).map(|(s, g, v)| (s, g, *v));
            assert_eq!(found, Some((a.index, a.generation, 7)));
            assert_eq!(slab.called_mut(word(a.index), name(8)), None, "another name");
            for never_made in 1..8 {
                assert_eq!(slab.called_mut(word(never_made), name(9)), None, "slot {never_made}");
            }
            slab.remove(a).unwrap();
            assert_eq!(slab.called_mut(word(a.index), name(9)), None, "freed");
            // Fresh slots are taken first: the freed one comes back last.
            let b = (0..5).map(|_| slab.insert(8).unwrap()).find(|b| b.index == a.index).unwrap();
            assert_eq!(slab.called_mut(word(b.index), name(9)), None, "the old name");
            slab.call(b.index, 10);
            assert_eq!(slab.called_mut(word(b.index), name(10)).map(|(_, _, v)| *v), Some(8));
        }
        check(Slab::new(ZeroedTo::<_, 8>::new(5)));
        check(Slab::new([const { Slot::<u64>::VACANT }; 5]));
    }
}
