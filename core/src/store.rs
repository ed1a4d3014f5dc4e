//! A run of places that may grow without moving the ones it has, and the
//! value its new places start as: what the slabs, the event pool and the
//! transports' queue tables are built on. A [`Storage`](crate::Storage)
//! hands the provider its stores.

/// A vector of at most `N` items stored inline: the core's only growable
/// container, and it never allocates.
pub use heapless::Vec as FixedVec;

/// A value a store's new places start as.
pub trait Vacant: Sized {
    /// An empty place.
    const VACANT: Self;

    /// [`Vacant::VACANT`], made where it is written. A large constant is
    /// copied whole from where the program keeps it; a kind whose empty
    /// value leaves most of its bytes unset (an `Option`'s payload) builds
    /// it here from its parts, so that a store growing by one place
    /// writes only those.
    #[inline(always)]
    fn vacant() -> Self {
        Self::VACANT
    }
}

/// A store's promise that it may be read past its items
/// ([`Store::READ_TO_POWER_OF_TWO`]), which only `unsafe` code makes.
#[derive(Clone, Copy, Debug)]
pub struct ReadsToPowerOfTwo(());

impl ReadsToPowerOfTwo {
    /// The promise.
    ///
    /// # Safety
    /// The store that makes it keeps, for as long as it lives, the places
    /// from [`Store::first`] up to its limit rounded up to a power of two
    /// (at least 2) allocated and readable, each past
    /// [`Store::items`] all zero bytes until [`Store::grow`] makes it;
    /// [`Store::first_mut`] is the same place.
    #[allow(unsafe_code)]
    pub const unsafe fn promise() -> Self {
        ReadsToPowerOfTwo(())
    }
}

/// A run of `X`s that may grow at its end, up to [`Store::limit`], and
/// never moves the ones it has.
pub trait Store<X> {
    /// The places so far.
    fn items(&self) -> &[X];
    /// The places so far, mutably.
    fn items_mut(&mut self) -> &mut [X];
    /// Add one vacant place at the end: `false` when the store is at its
    /// limit.
    fn grow(&mut self) -> bool;
    /// The most places the store holds.
    fn limit(&self) -> usize;
    /// [`limit`](Self::limit), where the store's type fixes it (an
    /// array's length): a keyed slab over it names a key's slot with a
    /// constant mask ([`Slab::key_slot`](crate::slab::Slab::key_slot)).
    const FIXED_LIMIT: Option<usize> = None;

    /// Whether the places from [`first`](Self::first) up to the limit
    /// rounded up to a power of two (at least 2) may all be read, those
    /// past [`items`](Self::items) as zero bytes until the store grows
    /// over them, as the store promises ([`ReadsToPowerOfTwo`]): a slab
    /// over such a store judges a slot below that bound by the slot's
    /// live byte alone, with no test against the places made so far
    /// ([`Slab::named_live_mut`](crate::slab::Slab::named_live_mut)).
    const READ_TO_POWER_OF_TWO: Option<ReadsToPowerOfTwo> = None;

    /// The first place, as [`items`](Self::items) begins.
    #[inline(always)]
    fn first(&self) -> *const X {
        self.items().as_ptr()
    }

    /// The first place, as [`items_mut`](Self::items_mut) begins.
    #[inline(always)]
    fn first_mut(&mut self) -> *mut X {
        self.items_mut().as_mut_ptr()
    }
}

impl<X, const N: usize> Store<X> for [X; N] {
    #[inline(always)]
    fn items(&self) -> &[X] {
        self
    }

    #[inline(always)]
    fn items_mut(&mut self) -> &mut [X] {
        self
    }

    /// An array has all its places from the start.
    fn grow(&mut self) -> bool {
        false
    }

    fn limit(&self) -> usize {
        N
    }

    const FIXED_LIMIT: Option<usize> = Some(N);
}
