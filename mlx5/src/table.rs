//! The backend's queue tables, in storage its owner gives: slots of queue
//! state, and the index from a CQE's QP number to the QP's route.
//!
//! The data path allocates nothing, so the memory comes from outside, as
//! a [`Store`]: an [`Inline`] array fixed at compile time, or memory the
//! caller reserved once and that fills as queues are made (the C ABI
//! sizes it from the provider's capacities).

use udat_core::place::Place;
use udat_core::store::{Store, Vacant};

/// Which table a [`Storage`] is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Of {
    /// The QP-number index: at least twice as many entries as QPs.
    QpnIndex,
    /// Shared receive queues.
    Srqs,
}

/// One place of a table, [`udat_core::place::Place`] (the core's slabs
/// are made of the same), on a cache line of its own: a queue one thread
/// polls shares none with a queue another thread posts on.
///
/// The table is not the core's `Slab`: the slots here are the backend's
/// own, kept inside handles the core has already checked by generation,
/// so a second check would only cost each post and poll; a slot's number
/// is 16 bits, as the QP-number index stores it; and entries are padded
/// to cache lines, which the core's densely packed slots are not.
#[repr(align(64))]
pub struct Entry<T>(Place<T>);

impl<T> Vacant for Entry<T> {
    const VACANT: Entry<T> = Entry(Place::VACANT);
}

impl<T> Entry<T> {
    #[inline(always)]
    fn get(&self) -> Option<&T> {
        self.0.get()
    }

    #[inline(always)]
    fn get_mut(&mut self) -> &mut Option<T> {
        self.0.get_mut()
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for Entry<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt(f)
    }
}

/// A source of table storage for [`Mlx5`](crate::Mlx5).
pub trait Storage {
    /// The slots of one table of `T`s.
    type Slots<T>: Store<Entry<T>>;

    /// Empty slots for the table `of`.
    fn slots<T>(&mut self, of: Of) -> Self::Slots<T>;
}

/// `N` slots for each table inside the backend: a QP-number index for
/// `N / 2` QPs, and `N` SRQs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inline<const N: usize>;

impl<const N: usize> Storage for Inline<N> {
    type Slots<T> = [Entry<T>; N];

    fn slots<T>(&mut self, _: Of) -> [Entry<T>; N] {
        [const { Entry::VACANT }; N]
    }
}

/// A [`Table`] of `T` in the slots storage `S` gives.
pub type TableIn<T, S> = Table<T, <S as Storage>::Slots<T>>;

/// Most slots a table uses: a slot number is 16 bits.
const MOST: usize = 1 << 16;

/// Values in numbered slots; a freed slot is reused.
#[derive(Debug)]
pub struct Table<T, S> {
    slots: S,
    /// Slots in use are below this.
    high: usize,
    /// Empty slots below `high`: while there are none, an insert takes the
    /// slot at `high` without looking for one.
    holes: usize,
    limit: usize,
    _values: core::marker::PhantomData<T>,
}

impl<T, S: Store<Entry<T>>> Table<T, S> {
    /// A table over `slots`, using at most `limit` of them.
    pub fn new(slots: S, limit: usize) -> Self {
        let limit = slots.limit().min(limit).min(MOST);
        Table { slots, high: 0, holes: 0, limit, _values: core::marker::PhantomData }
    }

    /// Store `value`: its slot, or the value back when the table is full.
    pub fn insert(&mut self, value: T) -> Result<u16, T> {
        let free = match self.holes {
            0 => None,
            _ => self.slots.items().get(..self.high).and_then(|s| s.iter().position(|e| e.get().is_none())),
        };
        let i = match free {
            Some(i) => {
                self.holes -= 1;
                i
            }
            None if self.high < self.limit && (self.slots.items().len() > self.high || self.slots.grow()) => {
                self.high += 1;
                self.high - 1
            }
            None => return Err(value),
        };
        match self.slots.items_mut().get_mut(i) {
            Some(slot) => *slot.get_mut() = Some(value),
            None => return Err(value),
        }
        Ok(i as u16)
    }

    /// The value in `slot`, if any.
    #[inline(always)]
    pub fn get(&self, slot: u16) -> Option<&T> {
        self.slots.items().get(usize::from(slot))?.get()
    }

    /// The value in `slot`, mutably, if any.
    #[inline(always)]
    pub fn get_mut(&mut self, slot: u16) -> Option<&mut T> {
        self.slots.items_mut().get_mut(usize::from(slot))?.get_mut().as_mut()
    }

    /// The value in `slot`, mutably, through a shared table.
    ///
    /// # Safety
    /// For as long as the reference lives nothing else reaches this
    /// entry: the caller holds the lock that every other access to it
    /// takes, and no `&mut` to the table exists.
    #[inline(always)]
    #[allow(unsafe_code, clippy::mut_from_ref)]
    pub unsafe fn get_shared(&self, slot: u16) -> Option<&mut T> {
        let entry = self.slots.items().get(usize::from(slot))?;
        // SAFETY: the caller's promise is the place's.
        unsafe { entry.0.get_shared() }
    }

    /// Take the value out of `slot`, leaving it free.
    pub fn remove(&mut self, slot: u16) -> Option<T> {
        let value = self.slots.items_mut().get_mut(usize::from(slot))?.get_mut().take()?;
        self.holes += 1;
        Some(value)
    }

    /// Every value in the table, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let high = self.high;
        self.slots.items_mut().iter_mut().take(high).filter_map(|e| e.get_mut().as_mut())
    }
}

/// Where a CQE's QP number leads: the QP's tag, by which the poller
/// reaches the QP's queues through their owner, and what a shared poll
/// reads without reaching the QP (which another thread may be posting on):
/// whether it receives from an SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The QP number CQEs carry.
    pub qpn: u32,
    /// Whether the QP receives from an SRQ.
    pub srq: bool,
    /// The QP's tag, echoed in its completions.
    pub tag: u64,
}

impl Route {
    /// A route no CQE takes: a CQE's QP number has 24 bits.
    pub const NONE: Route = Route { qpn: u32::MAX, srq: false, tag: 0 };
}

/// QP number → [`Route`], open addressing with linear probing over a power
/// of two of entries, indexed by the number's low bits: QP numbers handed
/// out in sequence each land in their own entry, so a lookup is one load
/// and one compare. Kept at most half full.
#[derive(Debug)]
pub struct QpnIndex<S> {
    entries: S,
    mask: usize,
    len: usize,
}

impl<S: Store<Entry<Route>>> QpnIndex<S> {
    /// An empty index over the largest power of two of the entries
    /// `entries` can hold, every one of them made at once (a lookup probes
    /// anywhere).
    pub fn new(mut entries: S) -> Self {
        while entries.items().len() < entries.limit() && entries.grow() {}
        let n = entries.items().len();
        let size: usize = if n == 0 { 0 } else { 1 << n.ilog2() };
        QpnIndex { entries, mask: size.wrapping_sub(1), len: 0 }
    }

    /// How many QPs the index takes while staying half full.
    pub fn capacity(&self) -> usize {
        self.mask.wrapping_add(1) / 2
    }

    #[inline(always)]
    fn home(&self, qpn: u32) -> usize {
        qpn as usize & self.mask
    }

    /// Where QP `qpn` leads.
    #[inline(always)]
    pub fn route(&self, qpn: u32) -> Option<Route> {
        let entries = self.entries.items();
        let mut i = self.home(qpn);
        loop {
            match entries.get(i)?.get() {
                Some(route) if route.qpn == qpn => return Some(*route),
                Some(_) => i = (i + 1) & self.mask,
                None => return None,
            }
        }
    }

    /// Every QP's route.
    pub fn routes(&self) -> impl Iterator<Item = &Route> {
        self.entries.items().iter().filter_map(Entry::get)
    }

    /// Record `route`; `false` when the index is as full as it may be.
    pub fn insert(&mut self, route: Route) -> bool {
        if self.len >= self.capacity() {
            return false;
        }
        let mut i = self.home(route.qpn);
        let mask = self.mask;
        let entries = self.entries.items_mut();
        while let Some(Some(r)) = entries.get(i).map(Entry::get) {
            if r.qpn == route.qpn {
                break;
            }
            i = (i + 1) & mask;
        }
        let Some(entry) = entries.get_mut(i).map(Entry::get_mut) else { return false };
        if entry.is_none() {
            self.len += 1;
        }
        *entry = Some(route);
        true
    }

    /// Forget QP `qpn`: later entries of its probe run move back into the
    /// hole, so every lookup still ends at its first empty entry.
    pub fn remove(&mut self, qpn: u32) {
        let mask = self.mask;
        let mut hole = self.home(qpn);
        let entries = self.entries.items_mut();
        loop {
            match entries.get(hole).map(Entry::get) {
                Some(Some(r)) if r.qpn == qpn => break,
                Some(Some(_)) => hole = (hole + 1) & mask,
                _ => return,
            }
        }
        let mut i = hole;
        loop {
            i = (i + 1) & mask;
            let Some(Some(&route)) = entries.get(i).map(Entry::get) else { break };
            // An entry may move back to the hole only if its home is not
            // between the hole and it (cyclically).
            let home = route.qpn as usize & mask;
            if (i.wrapping_sub(home) & mask) >= (i.wrapping_sub(hole) & mask) {
                if let Some(e) = entries.get_mut(hole) {
                    *e.get_mut() = Some(route);
                }
                hole = i;
            }
        }
        if let Some(e) = entries.get_mut(hole) {
            *e.get_mut() = None;
        }
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_hands_the_value_back_and_reuses_freed_slots() {
        let mut t: Table<u32, _> = Table::new([const { Entry::VACANT }; 4], 3);
        assert_eq!((t.insert(1), t.insert(2), t.insert(3)), (Ok(0), Ok(1), Ok(2)));
        assert_eq!(t.insert(4), Err(4));
        assert_eq!(t.remove(1), Some(2));
        assert_eq!(t.remove(1), None, "an empty slot is freed once");
        assert_eq!(t.insert(5), Ok(1));
        assert_eq!(t.insert(6), Err(6));
        assert_eq!(t.iter_mut().map(|v| *v).collect::<heapless::Vec<u32, 4>>(), [1, 5, 3]);
    }

    /// Threads change their own entries through one shared table at once
    /// while another reads a third: the mlx5 backend's shared data path,
    /// which Miri checks for races and aliasing.
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
    fn entries_change_through_a_shared_table_while_others_are_read() {
        let mut t: Table<u64, _> = Table::new([const { Entry::VACANT }; 4], 4);
        let slots: [u16; 3] = core::array::from_fn(|i| t.insert(i as u64).unwrap());
        let shared = &AcrossThreads(t);
        std::thread::scope(|s| {
            for &slot in &slots[..2] {
                s.spawn(move || {
                    for _ in 0..100 {
                        // SAFETY: each thread reaches only its own entry,
                        // and nothing holds the table mutably.
                        *unsafe { shared.get().get_shared(slot) }.unwrap() += 10;
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..100 {
                    assert_eq!(shared.get().get(slots[2]), Some(&2));
                }
            });
        });
        let t = shared.get();
        assert_eq!((t.get(slots[0]), t.get(slots[1])), (Some(&1000), Some(&1001)));
    }

    #[test]
    fn qpn_index_finds_every_number_through_collisions_and_removals() {
        let mut index = QpnIndex::new([const { Entry::VACANT }; 16]);
        let tag_of = |index: &QpnIndex<_>, qpn: u32| index.route(qpn).map(|r| r.tag);
        let route = |qpn: u32, tag: u64| Route { qpn, srq: false, tag };
        assert_eq!(index.capacity(), 8);
        // Numbers that share low bits probe past each other.
        let qpns = [0x100, 0x110, 0x120, 0x101, 0x10f, 0x11f, 0x102, 0x130];
        for (tag, &qpn) in qpns.iter().enumerate() {
            assert!(index.insert(route(qpn, tag as u64)));
        }
        assert!(!index.insert(route(0x999, 9)), "more than half full");
        for (tag, &qpn) in qpns.iter().enumerate() {
            assert_eq!(tag_of(&index, qpn), Some(tag as u64));
        }
        index.remove(0x110);
        index.remove(0x10f);
        assert_eq!(tag_of(&index, 0x110), None);
        assert_eq!(tag_of(&index, 0x10f), None);
        for (tag, &qpn) in qpns.iter().enumerate().filter(|(_, &q)| q != 0x110 && q != 0x10f) {
            assert_eq!(tag_of(&index, qpn), Some(tag as u64), "{qpn:#x}");
        }
        assert!(index.insert(route(0x140, 10)));
        assert_eq!(index.route(0x140), Some(route(0x140, 10)));
        assert_eq!(tag_of(&index, 0x555), None);
        let mut all: heapless::Vec<u64, 8> = index.routes().map(|r| r.tag).collect();
        all.sort_unstable();
        assert_eq!(all, [0, 2, 3, 5, 6, 7, 10], "every route left, once");
    }
}
