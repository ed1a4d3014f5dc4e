//! How many objects a provider holds, and the heap storage that holds
//! them.
//!
//! A provider's objects live in slots whose memory is reserved once, when
//! it is registered (inside the consumer's first `dat_ia_open` of its
//! name), and never again; the slots are filled in as objects are made
//! (the operating system maps a page when it is first written), so a
//! provider's resident memory grows with the objects it has made, up to
//! its capacity, not with its capacity from the start. A new object takes
//! a slot never used before while one is left (so that a freed handle
//! stays dead as long as possible), so churn, even of one object at a
//! time, writes every slot of its kind once; docs/c-abi.md has the
//! figures. Creating an object may write a new slot; a post or a dequeue
//! allocates nothing. The counts
//! come from the defaults below, overridden by `key=value` words after
//! the device in `ia_params` (`"verbs rxe0 eps=100000 lmrs=65536"`), and
//! those by the environment variable `UDAT_CAPACITY` in the same form
//! (`eps=100000,lmrs=65536`, commas or spaces). Running out of any kind is
//! `DAT_INSUFFICIENT_RESOURCES`.

use std::alloc::{handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ptr::NonNull;

use udat_core::event::EventSlot;
use udat_core::handle::Kind;
use udat_core::slab::Slot;
use udat_core::store::{ReadsToPowerOfTwo, Store, Vacant};
use udat_core::Storage;

use crate::pages::Zeroed;

/// Objects of each kind and events one provider holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub ias: u32,
    pub pzs: u32,
    pub lmrs: u32,
    pub rmrs: u32,
    pub evds: u32,
    pub cnos: u32,
    pub eps: u32,
    pub psps: u32,
    pub rsps: u32,
    pub crs: u32,
    pub srqs: u32,
    /// Events queued on all EVDs together.
    pub events: u32,
}

impl Default for Capacity {
    /// Sized for storage engines: tens of thousands of connections, each
    /// with its own EVD, and 65,536 registered regions.
    fn default() -> Capacity {
        Capacity {
            ias: 256,
            pzs: 4096,
            lmrs: 65_536,
            rmrs: 65_536,
            evds: 16_384,
            cnos: 4096,
            eps: 16_384,
            psps: 4096,
            rsps: 4096,
            crs: 16_384,
            srqs: 4096,
            events: 1 << 18,
        }
    }
}

/// Most of any one kind. The slots are reserved once when the provider is
/// built, and a failed reservation ends the process, so a count is kept to
/// what a machine can hold: a provider with every kind at this count
/// reserves about 2 GB.
const MOST: u32 = 1 << 20;

impl Capacity {
    /// The count for one kind of object.
    pub fn of(&self, kind: Kind) -> u32 {
        match kind {
            Kind::Ia => self.ias,
            Kind::Pz => self.pzs,
            Kind::Lmr => self.lmrs,
            Kind::Rmr => self.rmrs,
            Kind::Evd => self.evds,
            Kind::Cno => self.cnos,
            Kind::Ep => self.eps,
            Kind::Psp | Kind::Csp => self.psps,
            Kind::Rsp => self.rsps,
            Kind::Cr => self.crs,
            Kind::Srq => self.srqs,
        }
    }

    /// These counts with `words` applied: each `key=value`, the key one of
    /// the field names. `None` names the first word that is not one.
    pub fn with<'a>(mut self, words: impl IntoIterator<Item = &'a str>) -> Result<Capacity, &'a str> {
        for word in words {
            let (key, value) = word.split_once('=').ok_or(word)?;
            let n = value.parse::<u32>().ok().filter(|n| (1..=MOST).contains(n)).ok_or(word)?;
            let field = match key {
                "ias" => &mut self.ias,
                "pzs" => &mut self.pzs,
                "lmrs" => &mut self.lmrs,
                "rmrs" => &mut self.rmrs,
                "evds" => &mut self.evds,
                "cnos" => &mut self.cnos,
                "eps" => &mut self.eps,
                "psps" => &mut self.psps,
                "rsps" => &mut self.rsps,
                "crs" => &mut self.crs,
                "srqs" => &mut self.srqs,
                "events" => &mut self.events,
                _ => return Err(word),
            };
            *field = n;
        }
        Ok(self)
    }

    /// These counts with `UDAT_CAPACITY` applied, if it is set.
    pub fn with_env(self) -> Result<Capacity, String> {
        let Ok(value) = std::env::var("UDAT_CAPACITY") else { return Ok(self) };
        self.with(value.split([',', ' ']).filter(|w| !w.is_empty()))
            .map_err(|w| format!("UDAT_CAPACITY: `{w}` is not a count such as eps=20000"))
    }
}

/// Memory reserved once for `limit` values and filled as they are
/// needed: it never moves (a C handle is a slot's address), and a
/// provider's resident memory grows with the slots written so far, not
/// with the reservation.
pub struct Reserved<X> {
    /// A zeroed mapping of the bytes of `limit` values rounded up to a
    /// power of two; `None` when those are 0 bytes (no values, or values
    /// of no size).
    memory: Option<Zeroed>,
    /// The first value's place: the start of `memory`, aligned to the
    /// page and so to any `X` (`Zeroed::new` refuses an alignment above
    /// the page size), or a dangling, aligned pointer without it. Kept
    /// apart from `memory` so that a look-up, on every post and dequeue,
    /// need not ask which.
    base: NonNull<X>,
    /// Values made so far, the first of the reservation; never more than
    /// `limit`.
    len: usize,
    limit: usize,
    /// The reservation owns `X`s (it drops them).
    _x: PhantomData<X>,
}

impl<X> Reserved<X> {
    /// The reservation is a mapping of its own ([`Zeroed`]): pages the
    /// operating system makes resident only when written, yet never
    /// uninitialised, so a garbage C handle that points past the slots
    /// made so far reads zeros (no provider word) and is refused. It holds
    /// `limit` rounded up to a power of two, the places a slot index
    /// masked as a handle's slot is ([`HandleSpace`](crate::handle_space::HandleSpace))
    /// may name, so that a look-up reads any of them
    /// ([`Store::READ_TO_POWER_OF_TWO`]).
    fn new(limit: u32) -> Self {
        let limit = limit as usize;
        let reach = limit.max(2).next_power_of_two();
        let layout = Layout::array::<X>(reach).unwrap_or_else(|_| handle_alloc_error(Layout::new::<X>()));
        let memory = match layout.size() {
            0 => None,
            _ => Some(Zeroed::new(layout).unwrap_or_else(|| handle_alloc_error(layout))),
        };
        let base = memory.as_ref().map_or(NonNull::dangling(), |m| m.as_non_null().cast::<X>());
        Reserved { memory, base, len: 0, limit, _x: PhantomData }
    }
}

// SAFETY: a `Reserved` owns its values and the memory that holds them, as
// a `Vec` does, and `base` points into that memory alone (or at no bytes):
// it moves between threads as a `Vec<X>` would, with its values.
unsafe impl<X: Send> Send for Reserved<X> {}
// SAFETY: as above; `&Reserved` hands out only `&X`s (`items`).
unsafe impl<X: Sync> Sync for Reserved<X> {}

impl<X> std::fmt::Debug for Reserved<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reserved").field("len", &self.len).field("limit", &self.limit).finish()
    }
}

impl<X> Drop for Reserved<X> {
    /// The values made drop in place; then the mapping goes.
    fn drop(&mut self) {
        let values = std::ptr::slice_from_raw_parts_mut(self.base.as_ptr(), self.len);
        // SAFETY: the first `len` places hold values `grow` wrote, each
        // dropped only here, once; nothing refers to them any more.
        unsafe { std::ptr::drop_in_place(values) };
        drop(self.memory.take());
    }
}

impl<X: Vacant> Store<X> for Reserved<X> {
    #[inline(always)]
    fn items(&self) -> &[X] {
        // SAFETY: the first `len` places of the reservation hold values
        // (`grow`), aligned (`base`), borrowed as `self` is.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.len) }
    }

    #[inline(always)]
    fn items_mut(&mut self) -> &mut [X] {
        // SAFETY: as for `items`; `&mut self` makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr(), self.len) }
    }

    /// Within the reservation, so the values already there stay where
    /// they are.
    fn grow(&mut self) -> bool {
        if self.len >= self.limit {
            return false;
        }
        // SAFETY: place `len` is below `limit`, inside the reservation
        // (or of no size), aligned, and holds no value yet.
        unsafe { self.base.as_ptr().add(self.len).write(X::vacant()) };
        self.len += 1;
        true
    }

    fn limit(&self) -> usize {
        self.limit
    }

    // SAFETY: `new` reserves the limit rounded up to a power of two, at
    // least 2, as a zeroed mapping that lives as long as the store; only
    // `grow` writes a place, and `base` is the first.
    const READ_TO_POWER_OF_TWO: Option<ReadsToPowerOfTwo> = Some(unsafe { ReadsToPowerOfTwo::promise() });

    #[inline(always)]
    fn first(&self) -> *const X {
        self.base.as_ptr()
    }

    #[inline(always)]
    fn first_mut(&mut self) -> *mut X {
        self.base.as_ptr()
    }
}

/// Heap storage of the sizes a [`Capacity`] gives, reserved once.
#[derive(Clone, Copy, Debug)]
pub struct Heap(pub Capacity);

impl Storage for Heap {
    type Slots<T> = Reserved<Slot<T>>;
    type Events = Reserved<EventSlot>;

    fn slots<T>(&mut self, kind: Kind) -> Reserved<Slot<T>> {
        Reserved::new(self.0.of(kind))
    }

    fn events(&mut self) -> Reserved<EventSlot> {
        Reserved::new(self.0.events)
    }
}

/// Heap storage for the mlx5 backend's queue tables: a QP per EP, a CQ per
/// EVD, an SRQ per SRQ, and a QP-number index twice the QPs.
#[cfg(any(feature = "softhca", feature = "connectx"))]
#[derive(Clone, Copy, Debug)]
pub struct QueueHeap(pub Capacity);

#[cfg(any(feature = "softhca", feature = "connectx"))]
impl udat_mlx5::table::Storage for QueueHeap {
    type Slots<T> = Reserved<udat_mlx5::table::Entry<T>>;

    fn slots<T>(&mut self, of: udat_mlx5::table::Of) -> Reserved<udat_mlx5::table::Entry<T>> {
        use udat_mlx5::table::Of;
        let n = match of {
            Of::QpnIndex => self.0.eps.saturating_mul(2).next_power_of_two(),
            Of::Srqs => self.0.srqs,
        };
        Reserved::new(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The core's slab of a kind takes a lane's word (`HandleSpace::lane_word`)
    /// to the slot its handle names, whatever the count of the kind and
    /// the handle's generation, so that a lane masks a handle once; and
    /// it reads the slots past those made, up to the mask, as none live.
    /// Over slots of a whole number of words, which the slab scales with
    /// no shift, and over slots of another size.
    #[test]
    fn a_lanes_word_names_its_handles_slot_in_the_slab_of_its_kind() {
        use crate::handle_space::HandleSpace;
        use udat_core::handle::RawHandle;
        use udat_core::slab::{Slab, WORD_SHIFT};
        fn check<T: Copy + PartialEq + std::fmt::Debug>(nine: T) {
            for cap in [Capacity::default(), Capacity::default().with(["eps=1", "evds=3", "lmrs=5"]).unwrap()] {
                let mut space = HandleSpace::new(&cap).unwrap();
                space.set_word(0x1234_5670);
                for kind in [Kind::Ep, Kind::Evd, Kind::Lmr] {
                    let n = cap.of(kind);
                    let mut slab: Slab<T, Reserved<Slot<T>>> = Slab::new(Reserved::new(n));
                    for index in [0, n - 1] {
                        for generation in [1u64, 7, 1 << 20] {
                            let h = space.handle(kind, RawHandle::from_bits(generation << 32 | u64::from(index)));
                            assert_eq!(slab.slot_of(space.lane_word(h)), index, "{kind:?} {index} {generation}");
                            assert_eq!(space.lane_slot(h, kind), index);
                        }
                    }
                    for slot in [0, n - 1, n.max(2).next_power_of_two() - 1, u32::MAX] {
                        let word = (slot as usize) << WORD_SHIFT;
                        assert!(slab.named_live_mut(word).is_none(), "{kind:?}: nothing made");
                    }
                    let made = slab.insert(nine).unwrap();
                    let word = (made.index() as usize) << WORD_SHIFT;
                    assert_eq!(slab.named_live_mut(word).map(|(s, _, v)| (s, *v)), Some((made.index(), nine)));
                }
            }
        }
        check(9u64);
        check(9u32);
    }

    #[test]
    fn words_override_the_defaults() {
        let c = Capacity::default().with(["eps=100000", "lmrs=7"]).unwrap();
        assert_eq!((c.eps, c.lmrs, c.evds), (100_000, 7, Capacity::default().evds));
    }

    #[test]
    fn a_bad_word_is_named() {
        assert_eq!(Capacity::default().with(["eps=0"]), Err("eps=0"));
        assert_eq!(Capacity::default().with(["eps=-1"]), Err("eps=-1"));
        assert_eq!(Capacity::default().with(["cars=3"]), Err("cars=3"));
        assert_eq!(Capacity::default().with(["eps"]), Err("eps"));
        assert_eq!(Capacity::default().with(["eps=99999999999"]), Err("eps=99999999999"));
    }

    #[test]
    fn heap_storage_has_the_counts() {
        let cap = Capacity::default().with(["eps=3", "events=5"]).unwrap();
        let mut heap = Heap(cap);
        assert_eq!(heap.slots::<u8>(Kind::Ep).limit(), 3);
        assert_eq!(heap.slots::<u8>(Kind::Lmr).limit(), 65_536);
        let mut events = heap.events();
        assert_eq!((events.limit(), events.items().len()), (5, 0));
        assert!((0..5).all(|_| events.grow()));
        assert!(!events.grow(), "a store grows no further than its reservation");
    }

    #[test]
    fn a_reservation_is_kept_in_small_pages() {
        // Megabytes: stretches a huge page could back.
        let mut store = Reserved::<Slot<[u64; 8]>>::new(1 << 17);
        assert!(store.grow());
        let start = store.items().as_ptr() as usize;
        let bytes = std::mem::size_of::<Slot<[u64; 8]>>() * store.limit();
        for at in [start + 4096, start + bytes / 2] {
            assert!(crate::pages::in_small_pages(at), "{at:#x}");
        }
    }

    /// Cache-aligned, as the slots and queue entries are: the global
    /// allocator would write zeros over all of a zeroed block of these.
    #[repr(align(64))]
    struct Wide([u8; 64]);

    impl Vacant for Wide {
        const VACANT: Wide = Wide([0; 64]);
    }

    #[test]
    fn a_reservation_is_resident_only_where_written() {
        let mut store = Reserved::<Wide>::new(1 << 16);
        let memory = store.memory.as_ref().expect("4 MiB of values");
        let (start, len) = (memory.as_non_null().as_ptr() as usize, memory.len());
        assert_eq!(crate::pages::resident_pages(start, len), 0, "a fresh reservation");
        assert!(store.grow() && store.grow());
        assert!(store.items().iter().all(|w| w.0 == [0; 64]));
        assert_eq!(crate::pages::resident_pages(start, len), 1, "the page of the two values");
    }

    #[test]
    fn values_of_no_size_need_no_mapping() {
        struct Nothing;
        impl Vacant for Nothing {
            const VACANT: Nothing = Nothing;
        }
        let mut store = Reserved::<Nothing>::new(3);
        assert!(store.memory.is_none());
        assert!((0..3).all(|_| store.grow()));
        assert!(!store.grow());
        assert_eq!(store.items().len(), 3);
    }

    #[test]
    fn the_values_made_are_dropped_with_the_reservation() {
        use std::rc::Rc;
        struct Counted(Option<Rc<()>>);
        impl Vacant for Counted {
            const VACANT: Counted = Counted(None);
        }
        let rc = Rc::new(());
        let mut store = Reserved::<Counted>::new(4);
        assert!(store.grow() && store.grow());
        for c in store.items_mut() {
            c.0 = Some(Rc::clone(&rc));
        }
        assert_eq!(Rc::strong_count(&rc), 3);
        drop(store);
        assert_eq!(Rc::strong_count(&rc), 1);
    }
}
