//! Where a provider keeps its objects and events: memory its owner gives.
//!
//! The core never allocates. A [`Storage`] hands the provider, once, a run
//! of vacant slots for each kind of object and for the event pool; the
//! provider never asks again, so its capacity is what the storage gave.
//! [`Inline`] is storage fixed at compile time (arrays, for bare-metal
//! runtimes and tests); the C ABI gives heap memory sized at run time.
//! Running out is `DAT_INSUFFICIENT_RESOURCES`, never an allocation.

use crate::event::EventSlot;
use crate::handle::Kind;
use crate::slab::Slot;

/// A source of slot storage for a [`Provider`](crate::Provider).
pub trait Storage {
    /// Storage for the slots of one kind of object.
    type Slots<T>: AsRef<[Slot<T>]> + AsMut<[Slot<T>]>;
    /// Storage for the event pool every EVD queue reserves from.
    type Events: AsRef<[EventSlot]> + AsMut<[EventSlot]>;

    /// Vacant slots for objects of `kind`: as many as the provider may
    /// hold of that kind.
    fn slots<T>(&mut self, kind: Kind) -> Self::Slots<T>;

    /// Vacant event slots: as many events as may be queued on all EVDs
    /// together.
    fn events(&mut self) -> Self::Events;
}

/// Storage inside the provider itself: `N` objects of each kind and `E`
/// events on all EVDs, fixed at compile time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inline<const N: usize, const E: usize>;

impl<const N: usize, const E: usize> Storage for Inline<N, E> {
    type Slots<T> = [Slot<T>; N];
    type Events = [EventSlot; E];

    fn slots<T>(&mut self, _: Kind) -> [Slot<T>; N] {
        [const { Slot::VACANT }; N]
    }

    fn events(&mut self) -> [EventSlot; E] {
        [EventSlot::VACANT; E]
    }
}
