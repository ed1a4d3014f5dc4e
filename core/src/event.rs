//! Events and the fixed pool their queues live in.
//!
//! Every EVD reserves its queue length from one shared pool of event
//! slots when it is created or resized, so an EVD can always hold the
//! `evd_min_qlen` events it was promised, and a full pool is reported as
//! `DAT_INSUFFICIENT_RESOURCES` at create time rather than as a lost event
//! later. Each queue is a FIFO threaded through the pool.

use crate::handle::{AhHandle, AnyHandle, CrHandle, EpHandle, EvdHandle, PspHandle, RmrHandle};
use crate::store::{Store, Vacant};
use crate::types::{DtoOp, DtoStatus};

/// `DAT_EVENT_NUMBER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum EventNumber {
    /// A data transfer completed.
    #[doc(alias = "DAT_DTO_COMPLETION_EVENT")]
    DtoCompletion = 0x00001,
    /// An RMR bind completed (dat_rmr_bind(3DAT)).
    #[doc(alias = "DAT_RMR_BIND_COMPLETION_EVENT")]
    RmrBindCompletion = 0x01001,
    /// A connection request arrived at a PSP or RSP.
    #[doc(alias = "DAT_CONNECTION_REQUEST_EVENT")]
    ConnectionRequest = 0x02001,
    /// The EP's connection is up.
    #[doc(alias = "DAT_CONNECTION_EVENT_ESTABLISHED")]
    ConnectionEstablished = 0x04001,
    /// The peer rejected the EP's request (dat_cr_reject(3DAT)).
    #[doc(alias = "DAT_CONNECTION_EVENT_PEER_REJECTED")]
    ConnectionPeerRejected = 0x04002,
    /// The request was refused by other than the peer, such as for want of a listener.
    #[doc(alias = "DAT_CONNECTION_EVENT_NON_PEER_REJECTED")]
    ConnectionNonPeerRejected = 0x04003,
    /// An accept (dat_cr_accept(3DAT)) did not complete.
    #[doc(alias = "DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR")]
    ConnectionAcceptCompletionError = 0x04004,
    /// The connection was torn down (dat_ep_disconnect(3DAT), by either side).
    #[doc(alias = "DAT_CONNECTION_EVENT_DISCONNECTED")]
    ConnectionDisconnected = 0x04005,
    /// The connection failed.
    #[doc(alias = "DAT_CONNECTION_EVENT_BROKEN")]
    ConnectionBroken = 0x04006,
    /// The connection attempt ran out of time (dat_ep_connect(3DAT)).
    #[doc(alias = "DAT_CONNECTION_EVENT_TIMED_OUT")]
    ConnectionTimedOut = 0x04007,
    /// No route leads to the peer.
    #[doc(alias = "DAT_CONNECTION_EVENT_UNREACHABLE")]
    ConnectionUnreachable = 0x04008,
    /// An EVD had no room for an event.
    #[doc(alias = "DAT_ASYNC_ERROR_EVD_OVERFLOW")]
    AsyncEvdOverflow = 0x08001,
    /// The device failed; the IA is unusable.
    #[doc(alias = "DAT_ASYNC_ERROR_IA_CATASTROPHIC")]
    AsyncIaCatastrophic = 0x08002,
    /// An EP's connection broke outside any call.
    #[doc(alias = "DAT_ASYNC_ERROR_EP_BROKEN")]
    AsyncEpBroken = 0x08003,
    /// A transport timer expired.
    #[doc(alias = "DAT_ASYNC_ERROR_TIMED_OUT")]
    AsyncTimedOut = 0x08004,
    /// The provider failed internally.
    #[doc(alias = "DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR")]
    AsyncProviderInternalError = 0x08005,
    /// An event the consumer posted (dat_evd_post_se(3DAT)).
    #[doc(alias = "DAT_SOFTWARE_EVENT")]
    Software = 0x10001,
    // The IB extension's UD connection events (`DAT_IB_EVENT_NUMBER`, from
    // `DAT_IB_EXTENSION_RANGE_BASE`).
    /// A UD connection request arrived at a PSP.
    #[doc(alias = "DAT_IB_UD_CONNECTION_REQUEST_EVENT")]
    UdConnectionRequest = 0x40001,
    /// A UD connection is set up: the event carries the peer's address
    /// handle.
    #[doc(alias = "DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED")]
    UdConnectionEstablished = 0x40002,
    /// The peer rejected a UD connection request.
    #[doc(alias = "DAT_IB_UD_CONNECTION_REJECT_EVENT")]
    UdConnectionReject = 0x40003,
    /// A UD connection could not be set up.
    #[doc(alias = "DAT_IB_UD_CONNECTION_ERROR_EVENT")]
    UdConnectionError = 0x40004,
}

impl EventNumber {
    /// The EVD stream flag an event of this number needs on its EVD.
    pub const fn stream(self) -> crate::types::EvdFlags {
        use crate::types::EvdFlags;
        match self {
            EventNumber::DtoCompletion => EvdFlags::DTO,
            EventNumber::RmrBindCompletion => EvdFlags::RMR_BIND,
            EventNumber::ConnectionRequest | EventNumber::UdConnectionRequest => EvdFlags::CR,
            EventNumber::Software => EvdFlags::SOFTWARE,
            EventNumber::AsyncEvdOverflow
            | EventNumber::AsyncIaCatastrophic
            | EventNumber::AsyncEpBroken
            | EventNumber::AsyncTimedOut
            | EventNumber::AsyncProviderInternalError => EvdFlags::ASYNC,
            _ => EvdFlags::CONNECTION,
        }
    }
}

/// The event-type-specific part of `DAT_EVENT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventData {
    /// `DAT_DTO_COMPLETION_EVENT_DATA`; `imm` is the immediate data of a
    /// receive that carried some (an IB extension operation), else 0.
    Dto {
        /// The EP the work request was posted on.
        ep: EpHandle,
        /// The cookie the work request was posted with.
        cookie: u64,
        /// How it ended.
        status: DtoStatus,
        /// Bytes moved; for a receive, the bytes that arrived.
        transferred_length: u32,
        /// What the work request was.
        op: DtoOp,
        /// The immediate data, or 0.
        imm: u32,
    },
    /// `DAT_RMR_BIND_COMPLETION_EVENT_DATA`.
    RmrBind {
        /// The RMR bound or unbound.
        rmr: RmrHandle,
        /// The cookie the bind was posted with.
        cookie: u64,
        /// How it ended.
        status: DtoStatus,
    },
    /// `DAT_CR_ARRIVAL_EVENT_DATA`. `psp` is null for a Reserved Service
    /// Point, which is gone once it has produced its request.
    CrArrival {
        /// The PSP the request arrived at; null for an RSP.
        psp: PspHandle,
        /// The connection qualifier the requester asked for.
        conn_qual: u64,
        /// The request, to accept or reject.
        cr: CrHandle,
    },
    /// `DAT_CONNECTION_EVENT_DATA`. The private data stays with the EP
    /// (dat_evd_dequeue(3DAT): valid until the EP is freed or reset).
    Connection {
        /// The EP whose connection changed.
        ep: EpHandle,
        /// Bytes of private data the peer sent.
        private_data_size: u32,
    },
    /// A UD connection's event: `DAT_CONNECTION_EVENT_DATA` with the
    /// extension's `DAT_IB_EXTENSION_EVENT_DATA`. The private data stays
    /// with the address handle until dat_ib_ud_ah_free.
    UdConnection {
        /// The UD EP.
        ep: EpHandle,
        /// The peer's address handle (null for a rejection or an error).
        ah: AhHandle,
        /// The peer's QP number.
        remote_qpn: u32,
        /// Bytes of private data the peer sent.
        private_data_size: u32,
        /// Whether the EP accepted (`DAT_IB_UD_PASSIVE_REMOTE_AH`) rather
        /// than connected (`DAT_IB_UD_REMOTE_AH`).
        passive: bool,
    },
    /// `DAT_ASYNCH_ERROR_EVENT_DATA`.
    AsyncError {
        /// The object the error concerns, if one.
        handle: Option<AnyHandle>,
        /// The provider's reason code.
        reason: u32,
    },
    /// `DAT_SOFTWARE_EVENT_DATA`: the consumer's pointer, opaque.
    Software {
        /// The value given to dat_evd_post_se(3DAT).
        pointer: u64,
    },
}

/// `DAT_EVENT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub number: EventNumber,
    /// The EVD the event was dequeued from.
    pub evd: EvdHandle,
    /// The details of its kind.
    pub data: EventData,
}

const EMPTY: Event =
    Event { number: EventNumber::Software, evd: EvdHandle::NULL, data: EventData::Software { pointer: 0 } };

const NONE: u32 = u32::MAX;

/// One EVD's queue: a FIFO of pool slots and its reserved capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventQueue {
    head: u32,
    tail: u32,
    len: u32,
    capacity: u32,
}

impl EventQueue {
    /// Events queued.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether no event is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The reserved length (`evd_qlen`).
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Free room.
    pub fn room(&self) -> u32 {
        self.capacity - self.len
    }
}

/// One slot of an [`EventPool`]'s storage.
#[derive(Debug, Clone, Copy)]
pub struct EventSlot {
    event: Event,
    next: u32,
}

impl Vacant for EventSlot {
    const VACANT: EventSlot = EventSlot { event: EMPTY, next: NONE };
}

impl EventSlot {
    /// A slot as a store gives it.
    pub const VACANT: EventSlot = <EventSlot as Vacant>::VACANT;
}

/// Event slots shared by every EVD of a provider, in a store that the
/// provider's owner gives. A freed slot is taken again before a slot never
/// used, so the pool touches no more of its store than the most events
/// ever queued at once.
#[derive(Debug)]
pub struct EventPool<S> {
    nodes: S,
    free_head: u32,
    /// Slots below this have held an event.
    fresh: u32,
    reserved: u32,
    size: u32,
}

impl<S: Store<EventSlot>> EventPool<S> {
    /// A pool over `nodes`, every slot free.
    pub fn new(nodes: S) -> Self {
        let size = nodes.limit().min(NONE as usize - 1) as u32;
        EventPool { nodes, free_head: NONE, fresh: 0, reserved: 0, size }
    }

    /// A free slot: the one freed last, or one never used.
    fn take(&mut self) -> Option<u32> {
        if let Some(node) = self.nodes.items().get(self.free_head as usize) {
            let index = self.free_head;
            self.free_head = node.next;
            return Some(index);
        }
        if self.fresh >= self.size || (self.nodes.items().len() <= self.fresh as usize && !self.nodes.grow()) {
            return None;
        }
        self.fresh += 1;
        Some(self.fresh - 1)
    }

    /// Events the pool holds.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Slots not yet promised to a queue.
    pub fn unreserved(&self) -> u32 {
        self.size - self.reserved
    }

    /// A queue with `capacity` slots reserved; `None` if the pool cannot
    /// promise them.
    pub fn open(&mut self, capacity: u32) -> Option<EventQueue> {
        if capacity > self.unreserved() {
            return None;
        }
        self.reserved += capacity;
        Some(EventQueue { head: NONE, tail: NONE, len: 0, capacity })
    }

    /// Change the reservation of `q` to `capacity` (not below its length).
    pub fn resize(&mut self, q: &mut EventQueue, capacity: u32) -> bool {
        if capacity < q.len || capacity > self.unreserved() + q.capacity {
            return false;
        }
        self.reserved = self.reserved - q.capacity + capacity;
        q.capacity = capacity;
        true
    }

    /// Drop every event of `q` and give its reservation back.
    pub fn close(&mut self, q: &mut EventQueue) {
        while self.pop(q).is_some() {}
        self.reserved -= q.capacity;
        q.capacity = 0;
    }

    /// Append; `Err(event)` when the queue is at its capacity.
    pub fn push(&mut self, q: &mut EventQueue, event: Event) -> Result<(), Event> {
        if q.len >= q.capacity {
            return Err(event);
        }
        // The reservations guarantee a free slot while len < capacity.
        let Some(index) = self.take() else { return Err(event) };
        let Some(node) = self.nodes.items_mut().get_mut(index as usize) else {
            return Err(event);
        };
        *node = EventSlot { event, next: NONE };
        match self.nodes.items_mut().get_mut(q.tail as usize) {
            Some(tail) => tail.next = index,
            None => q.head = index,
        }
        q.tail = index;
        q.len += 1;
        Ok(())
    }

    /// Take the oldest event.
    pub fn pop(&mut self, q: &mut EventQueue) -> Option<Event> {
        let index = q.head;
        let node = self.nodes.items_mut().get_mut(index as usize)?;
        let event = node.event;
        q.head = node.next;
        node.next = self.free_head;
        self.free_head = index;
        if q.head == NONE {
            q.tail = NONE;
        }
        q.len -= 1;
        Some(event)
    }

    /// The oldest event, left in place.
    pub fn peek(&self, q: &EventQueue) -> Option<&Event> {
        self.nodes.items().get(q.head as usize).map(|n| &n.event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(p: u64) -> Event {
        Event { data: EventData::Software { pointer: p }, ..EMPTY }
    }

    #[test]
    fn queues_are_fifo_and_share_the_pool() {
        let mut pool = EventPool::new([EventSlot::VACANT; 4]);
        let mut a = pool.open(2).unwrap();
        let mut b = pool.open(2).unwrap();
        assert!(pool.open(1).is_none());
        pool.push(&mut a, sw(1)).unwrap();
        pool.push(&mut b, sw(10)).unwrap();
        pool.push(&mut a, sw(2)).unwrap();
        assert_eq!(pool.push(&mut a, sw(3)), Err(sw(3)));
        assert_eq!(pool.pop(&mut a), Some(sw(1)));
        pool.push(&mut a, sw(4)).unwrap();
        assert_eq!(pool.pop(&mut a), Some(sw(2)));
        assert_eq!(pool.pop(&mut a), Some(sw(4)));
        assert_eq!(pool.pop(&mut a), None);
        assert_eq!(pool.pop(&mut b), Some(sw(10)));
    }

    /// A store that grows one place at a time, as the C ABI's does.
    struct Growing(crate::store::FixedVec<EventSlot, 8>);

    impl Store<EventSlot> for Growing {
        fn items(&self) -> &[EventSlot] {
            &self.0
        }
        fn items_mut(&mut self) -> &mut [EventSlot] {
            &mut self.0
        }
        fn grow(&mut self) -> bool {
            self.0.push(EventSlot::VACANT).is_ok()
        }
        fn limit(&self) -> usize {
            8
        }
    }

    #[test]
    fn the_pool_reuses_freed_slots_before_growing_its_store() {
        let mut pool = EventPool::new(Growing(crate::store::FixedVec::new()));
        let mut q = pool.open(8).unwrap();
        for round in 0..10 {
            pool.push(&mut q, sw(round)).unwrap();
            pool.push(&mut q, sw(round + 100)).unwrap();
            assert_eq!(pool.pop(&mut q), Some(sw(round)));
            assert_eq!(pool.pop(&mut q), Some(sw(round + 100)));
        }
        // Never more than two queued at once: two places ever made.
        assert_eq!(pool.nodes.0.len(), 2);
    }

    #[test]
    fn resize_never_below_length() {
        let mut pool = EventPool::new([EventSlot::VACANT; 8]);
        let mut q = pool.open(4).unwrap();
        for i in 0..3 {
            pool.push(&mut q, sw(i)).unwrap();
        }
        assert!(!pool.resize(&mut q, 2));
        assert!(pool.resize(&mut q, 8));
        assert!(!pool.resize(&mut q, 9));
        assert_eq!(pool.unreserved(), 0);
        pool.close(&mut q);
        assert_eq!(pool.unreserved(), 8);
    }
}
