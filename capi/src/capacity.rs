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

use udat_core::event::EventSlot;
use udat_core::handle::Kind;
use udat_core::slab::Slot;
use udat_core::store::{Store, Vacant};
use udat_core::Storage;

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

/// Most of any one kind. The slots are written once when the provider is
/// built, and a failed allocation ends the process, so a count is kept to
/// what a machine can hold: a provider with every kind at this count
/// takes about 2 GB.
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

/// Heap memory reserved once for `limit` values and filled as they are
/// needed: it never moves (a C handle is a slot's address), and a
/// provider's resident memory grows with the slots written so far, not
/// with the reservation.
#[derive(Debug)]
pub struct Reserved<X> {
    items: Vec<X>,
    limit: usize,
}

impl<X> Reserved<X> {
    /// The reservation is zeroed memory: pages the operating system maps
    /// only when written, yet never uninitialised, so a garbage C handle
    /// that points past the slots made so far reads zeros (no provider
    /// word) and is refused.
    fn new(limit: u32) -> Self {
        let limit = limit as usize;
        let items = match std::alloc::Layout::array::<X>(limit) {
            Ok(layout) if layout.size() != 0 => {
                // SAFETY: a layout of nonzero size.
                let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<X>();
                if ptr.is_null() {
                    std::alloc::handle_alloc_error(layout);
                }
                // Written a slot at a time (`crate::pages`).
                crate::pages::small_pages(ptr as usize, layout.size());
                // SAFETY: allocated by the global allocator with the layout
                // of `limit` values of `X`; no value is initialised yet.
                unsafe { Vec::from_raw_parts(ptr, 0, limit) }
            }
            _ => Vec::with_capacity(limit),
        };
        Reserved { items, limit }
    }
}

impl<X: Vacant> Store<X> for Reserved<X> {
    #[inline(always)]
    fn items(&self) -> &[X] {
        &self.items
    }

    #[inline(always)]
    fn items_mut(&mut self) -> &mut [X] {
        &mut self.items
    }

    /// Within the reservation (`limit` at most its capacity), so the
    /// values already there stay where they are.
    fn grow(&mut self) -> bool {
        if self.items.len() >= self.limit {
            return false;
        }
        self.items.push(X::VACANT);
        true
    }

    fn limit(&self) -> usize {
        self.limit
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
            Of::Qps => self.0.eps,
            Of::QpnIndex => self.0.eps.saturating_mul(2).next_power_of_two(),
            Of::Cqs => self.0.evds,
            Of::Srqs => self.0.srqs,
        };
        Reserved::new(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
