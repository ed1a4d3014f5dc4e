//! One place of a table whose owner may share it among threads: a value
//! or none, behind a cell. The thread holding the lock of a value's owner
//! changes that value through the shared table ([`Place::get_shared`]),
//! while other threads read the other places. The core's slabs and the
//! mlx5 data path's queue tables are made of places.

// The cell behind `Place::get_shared`: the crate's one unsafe access,
// which the slabs' shared lookups hand on under the same contract.
#![allow(unsafe_code)]

use core::cell::UnsafeCell;

use crate::store::Vacant;

/// A value or none, changed through a shared reference only by the one
/// thread its owner's lock admits.
pub struct Place<T>(UnsafeCell<Option<T>>);

impl<T> Vacant for Place<T> {
    const VACANT: Place<T> = Place(UnsafeCell::new(None));

    #[inline(always)]
    fn vacant() -> Place<T> {
        Place(UnsafeCell::new(None))
    }
}

impl<T> Place<T> {
    /// The value, through a shared place.
    #[inline(always)]
    pub fn get(&self) -> Option<&T> {
        // SAFETY: a `&mut` to the value exists only through `&mut self`
        // (excluded by this borrow) or through `get_shared`, whose caller
        // promises that no other access to the value overlaps.
        unsafe { (*self.0.get()).as_ref() }
    }

    /// The value, through an exclusive place.
    #[inline(always)]
    pub fn get_mut(&mut self) -> &mut Option<T> {
        self.0.get_mut()
    }

    /// The value, mutably, through a shared place.
    ///
    /// # Safety
    /// For as long as the reference lives, nothing else reads or writes
    /// the value: the caller holds a lock that every other access to it
    /// takes, and no `&mut` to the place exists.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_shared(&self) -> Option<&mut T> {
        // SAFETY: by the contract, this is the only access to the value
        // while the reference lives; the cell makes it mutable behind a
        // shared reference.
        unsafe { (*self.0.get()).as_mut() }
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for Place<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.get().fmt(f)
    }
}
