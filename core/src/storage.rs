//! Where a provider keeps its objects and events: memory its owner gives.
//!
//! The core never allocates. A [`Storage`] hands the provider, once, a
//! [`Store`] for the slots of each kind of object and one for the event
//! pool. A store is a run of slots that may grow, up to a limit fixed when
//! it is made, without moving the slots it has (a C handle is a slot's
//! address): [`Inline`] gives arrays fixed at compile time, for bare-metal
//! runtimes and tests; the C ABI gives heap memory reserved at run time
//! and filled as objects are made, so a provider touches only the memory
//! its objects use. Running out is `DAT_INSUFFICIENT_RESOURCES`, never an
//! allocation by the core.

use crate::event::EventSlot;
use crate::handle::Kind;
use crate::slab::Slot;
use crate::store::Store;

/// A source of stores for a [`Provider`](crate::Provider).
pub trait Storage {
    /// Storage for the slots of one kind of object.
    type Slots<T>: Store<Slot<T>>;
    /// Storage for the event pool every EVD queue reserves from.
    type Events: Store<EventSlot>;

    /// The store for objects of `kind`: its limit is as many as the
    /// provider may hold of that kind.
    fn slots<T>(&mut self, kind: Kind) -> Self::Slots<T>;

    /// The store for events: its limit is as many events as may be queued
    /// on all EVDs together.
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
