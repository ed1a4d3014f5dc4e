//! Storage for the slots a queue keeps beside its ring, one per WQE or
//! WQEBB (what a send or a receive completes), whose length holds still
//! so that a queue checks it once and then indexes it unchecked.

// An unsafe trait and its implementations: the promise the queues'
// unchecked indexing stands on.
#![allow(unsafe_code)]

/// Storage for one `T` per place of a queue's ring, whose length holds
/// still.
///
/// # Safety
/// While nothing but [`AsRef::as_ref`] and [`AsMut::as_mut`] uses the
/// value, every call of them returns a slice of the same length. A queue
/// owns its storage, uses it only through those two, checks the length
/// once when it is made and then reads and stores each slot unchecked.
pub unsafe trait SlotStorage<T>: AsMut<[T]> + AsRef<[T]> {}

// SAFETY: an array's length is its type's `N`.
unsafe impl<T, const N: usize> SlotStorage<T> for [T; N] {}

#[cfg(feature = "alloc")]
// SAFETY: a boxed slice's length is fixed when it is made, and `as_ref`
// and `as_mut` return the whole slice.
unsafe impl<T> SlotStorage<T> for alloc::boxed::Box<[T]> {}

#[cfg(feature = "alloc")]
// SAFETY: a `Vec`'s length changes only through its own `&mut` methods
// (`push`, `truncate`, ...); `as_ref` and `as_mut` return its elements
// and change nothing.
unsafe impl<T> SlotStorage<T> for alloc::vec::Vec<T> {}
