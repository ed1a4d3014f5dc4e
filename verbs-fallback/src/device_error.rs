//! Device errors: rdma-core's asynchronous events (ibv_get_async_event(3))
//! of an IA's objects, as the core's [`CmEvent`]s.
//!
//! | verbs event | core event |
//! | --- | --- |
//! | `IBV_EVENT_QP_FATAL`, `IBV_EVENT_QP_REQ_ERR`, `IBV_EVENT_QP_ACCESS_ERR` | [`CmEvent::QpError`] with the QP's tag |
//! | `IBV_EVENT_CQ_ERR` (an overrun) | [`CmEvent::CqError`] with the CQ's tag |
//! | `IBV_EVENT_PORT_ERR` on the IA's port | [`CmEvent::PortDown`] |
//! | `IBV_EVENT_DEVICE_FATAL` | [`CmEvent::Catastrophic`] |
//!
//! The rest are read, acknowledged and dropped: `COMM_EST` is rdma_cm's,
//! the core reports a QP on an SRQ broken itself (`QP_LAST_WQE_REACHED`),
//! and DAT has no event for a port coming up or a changed address.
//!
//! One device context serves every IA of the process on that device
//! (rdma_get_devices(3) hands out the same contexts), so an event one IA
//! reads may belong to another: every event read goes to one mailbox of
//! the process, and each IA claims from it what names its own QPs and
//! CQs, and once each the events of its port and device. The connection
//! manager's thread of each IA (`progress`) reads the context's events as
//! they come ([`arrived`]) and raises the flag of every IA of the device,
//! which a wait sleeps on; an event is also read before its QP or CQ is
//! destroyed: ibv_destroy_qp(3) and ibv_destroy_cq(3) wait for every
//! event of the object to be acknowledged. The consumer's calls look at
//! one atomic ([`DeviceErrors::poll`]): a dequeue makes no system call
//! for device errors, and takes no lock unless one came.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use udat_core::backend::CmEvent;
use udat_core::DatResult;
use udat_wake::Flag;

use crate::sys;

/// What an event names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Element {
    Qp(usize),
    Cq(usize),
    Port(u8),
    Device,
}

/// An event read from a device context and not yet claimed.
#[derive(Clone, Copy, Debug)]
struct Unclaimed {
    ctx: usize,
    /// Its place among all events read in the process.
    seq: u64,
    element: Element,
}

struct Mailbox {
    events: VecDeque<Unclaimed>,
    next_seq: u64,
    /// The flag of each open IA, by its device context.
    flags: Vec<(usize, Arc<Flag>)>,
    /// Where `next_seq` is published, to be read without the lock: the
    /// process's mailbox publishes it in [`KEPT_SO_FAR`], which its IAs
    /// read; a mailbox of the tests elsewhere, so that it never moves what
    /// the process's IAs see.
    published: &'static AtomicU64,
}

static MAILBOX: Mutex<Mailbox> =
    Mutex::new(Mailbox { events: VecDeque::new(), next_seq: 0, flags: Vec::new(), published: &KEPT_SO_FAR });

/// The mailbox's `next_seq`, to be read without its lock: it moves only
/// when an event is kept.
static KEPT_SO_FAR: AtomicU64 = AtomicU64::new(0);

/// Events kept for their IAs: past this, the oldest go (events of objects
/// already gone, or of a port no IA opened).
const KEPT: usize = 1024;

fn mailbox() -> MutexGuard<'static, Mailbox> {
    // The mailbox holds plain values: a panic while it was held leaves
    // nothing half-written that matters.
    MAILBOX.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What `event` names, if it is one the core hears of.
fn element(event: &sys::ibv_async_event) -> Option<Element> {
    use sys::ibv_event_type as t;
    // SAFETY: each arm reads the union member ibv_get_async_event(3)
    // documents for that event type.
    unsafe {
        match event.event_type {
            t::IBV_EVENT_QP_FATAL | t::IBV_EVENT_QP_REQ_ERR | t::IBV_EVENT_QP_ACCESS_ERR => {
                Some(Element::Qp(event.element.qp as usize))
            }
            t::IBV_EVENT_CQ_ERR => Some(Element::Cq(event.element.cq as usize)),
            t::IBV_EVENT_PORT_ERR => u8::try_from(event.element.port_num).ok().map(Element::Port),
            t::IBV_EVENT_DEVICE_FATAL => Some(Element::Device),
            _ => None,
        }
    }
}

impl Mailbox {
    /// Keep what `event` of the device `ctx` names.
    fn post(&mut self, ctx: usize, event: &sys::ibv_async_event) {
        let Some(element) = element(event) else { return };
        if self.events.len() == KEPT {
            self.events.pop_front();
        }
        self.events.push_back(Unclaimed { ctx, seq: self.next_seq, element });
        self.next_seq += 1;
        self.published.store(self.next_seq, Ordering::Release);
    }

    /// Read and acknowledge every event `ctx` has ready; then, if any was
    /// kept, raise the flag of every IA of `ctx`.
    fn read(&mut self, ctx: *mut sys::ibv_context) {
        let before = self.next_seq;
        loop {
            // SAFETY: a plain C struct; ibv_get_async_event fills it.
            let mut event: sys::ibv_async_event = unsafe { std::mem::zeroed() };
            // SAFETY: `ctx` is open and its async descriptor non-blocking
            // (`watch`), so this returns at once when nothing is ready.
            if unsafe { sys::ibv_get_async_event(ctx, &mut event) } != 0 {
                break;
            }
            self.post(ctx as usize, &event);
            // SAFETY: the event was just read and is acknowledged once.
            unsafe { sys::ibv_ack_async_event(&mut event) };
        }
        if self.next_seq != before {
            self.wake(ctx as usize);
        }
    }

    /// Raise the flag of every IA of the device `ctx`.
    fn wake(&self, ctx: usize) {
        for (_, flag) in self.flags.iter().filter(|(c, _)| *c == ctx) {
            flag.raise();
        }
    }

    /// Drop the events of an object that is about to go, so that another
    /// at its address never claims them.
    fn forget(&mut self, element: Element) {
        self.events.retain(|u| u.element != element);
    }
}

/// Make `ctx`'s async descriptor non-blocking, so that reading it never
/// waits.
///
/// # Safety
/// `ctx` is an open device context.
pub(crate) unsafe fn watch(ctx: *mut sys::ibv_context) {
    // SAFETY: the caller's guarantee; the descriptor is the context's.
    unsafe { crate::fd::nonblocking((*ctx).async_fd) };
}

/// `ctx`'s async descriptor is readable: read what it has (the
/// connection manager's thread).
///
/// # Safety
/// `ctx` is open, and [`watch`]ed.
pub(crate) unsafe fn arrived(ctx: *mut sys::ibv_context) {
    mailbox().read(ctx);
}

/// Read what `ctx` has, then forget the events of the QP at `qp`, which
/// is about to be destroyed.
///
/// # Safety
/// `ctx` is the open context of the QP.
pub(crate) unsafe fn qp_going(ctx: *mut sys::ibv_context, qp: *mut sys::ibv_qp) {
    let mut m = mailbox();
    m.read(ctx);
    m.forget(Element::Qp(qp as usize));
}

/// As [`qp_going`], for the CQ at `cq`.
///
/// # Safety
/// `ctx` is the open context of the CQ.
pub(crate) unsafe fn cq_going(ctx: *mut sys::ibv_context, cq: *mut sys::ibv_cq) {
    let mut m = mailbox();
    m.read(ctx);
    m.forget(Element::Cq(cq as usize));
}

/// The QPs and CQs of one IA that the core named, and where the IA stands
/// among the device's events.
pub(crate) struct DeviceErrors {
    /// Tags by the address of the verbs object.
    qps: RefCell<HashMap<usize, u64>>,
    cqs: RefCell<HashMap<usize, u64>>,
    /// Port and device events from this place on are still this IA's to
    /// report: those before it were read before the IA opened, or were
    /// reported.
    next_wide: Cell<u64>,
    /// The mailbox's `next_seq` when the IA last found nothing of its own
    /// there: while it stands, nothing came since.
    seen: Cell<u64>,
    /// The device context.
    ctx: usize,
    /// Raised when events of the device came, lowered once the IA found
    /// none of its own left.
    flag: Arc<Flag>,
}

impl DeviceErrors {
    /// The errors of an IA on the device context `ctx`.
    pub fn new(ctx: *mut sys::ibv_context) -> DatResult<DeviceErrors> {
        let flag =
            Arc::new(Flag::new().map_err(|e| crate::status::dat_error(e.raw_os_error().unwrap_or(libc::ENOMEM)))?);
        let mut m = mailbox();
        m.flags.push((ctx as usize, flag.clone()));
        Ok(DeviceErrors {
            qps: RefCell::new(HashMap::new()),
            cqs: RefCell::new(HashMap::new()),
            next_wide: Cell::new(m.next_seq),
            seen: Cell::new(m.next_seq),
            ctx: ctx as usize,
            flag,
        })
    }

    /// Readable while a device error may be this IA's: what a wait sleeps
    /// on.
    pub fn fd(&self) -> i32 {
        self.flag.fd()
    }

    /// Errors of the QP at `qp` carry `tag`.
    pub fn name_qp(&self, qp: *mut sys::ibv_qp, tag: u64) {
        self.qps.borrow_mut().insert(qp as usize, tag);
    }

    /// Errors of the CQ at `cq` carry `tag`.
    pub fn name_cq(&self, cq: *mut sys::ibv_cq, tag: u64) {
        self.cqs.borrow_mut().insert(cq as usize, tag);
    }

    /// The QP at `qp` is going.
    pub fn unname_qp(&self, qp: *mut sys::ibv_qp) {
        self.qps.borrow_mut().remove(&(qp as usize));
    }

    /// The CQ at `cq` is going.
    pub fn unname_cq(&self, cq: *mut sys::ibv_cq) {
        self.cqs.borrow_mut().remove(&(cq as usize));
    }

    /// Whether an event of the device came since the IA last found none of
    /// its own: one atomic load.
    #[inline(always)]
    pub fn came(&self) -> bool {
        KEPT_SO_FAR.load(Ordering::Acquire) != self.seen.get()
    }

    /// The next device error of this IA, on port `port`: none, with one
    /// atomic load, while no event came since the IA last looked.
    pub fn poll<R>(&self, port: u8) -> Option<CmEvent<R>> {
        if !self.came() {
            return None;
        }
        let mut m = mailbox();
        let event = self.claim(&mut m, self.ctx, port);
        if event.is_none() {
            self.seen.set(m.next_seq);
            self.flag.clear();
        }
        event
    }

    /// Where the first event of `m` that is this IA's is.
    fn first(&self, m: &Mailbox, ctx: usize, port: u8) -> Option<usize> {
        let (qps, cqs) = (self.qps.borrow(), self.cqs.borrow());
        let wide = self.next_wide.get();
        m.events.iter().position(|u| {
            u.ctx == ctx
                && match u.element {
                    Element::Qp(p) => qps.contains_key(&p),
                    Element::Cq(p) => cqs.contains_key(&p),
                    Element::Port(n) => n == port && u.seq >= wide,
                    Element::Device => u.seq >= wide,
                }
        })
    }

    /// Take the first event of `m` that is this IA's.
    fn claim<R>(&self, m: &mut Mailbox, ctx: usize, port: u8) -> Option<CmEvent<R>> {
        let at = self.first(m, ctx, port)?;
        let (qps, cqs) = (self.qps.borrow(), self.cqs.borrow());
        let u = *m.events.get(at)?;
        match u.element {
            Element::Qp(p) => {
                m.events.remove(at);
                Some(CmEvent::QpError { tag: *qps.get(&p)? })
            }
            Element::Cq(p) => {
                m.events.remove(at);
                Some(CmEvent::CqError { tag: *cqs.get(&p)? })
            }
            // Left for the other IAs of the device.
            Element::Port(_) => {
                self.next_wide.set(u.seq + 1);
                Some(CmEvent::PortDown)
            }
            Element::Device => {
                self.next_wide.set(u.seq + 1);
                Some(CmEvent::Catastrophic)
            }
        }
    }
}

impl Drop for DeviceErrors {
    /// The IA is closing: its flag is raised no more.
    fn drop(&mut self) {
        mailbox().flags.retain(|(_, flag)| !Arc::ptr_eq(flag, &self.flag));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic event, as ibv_get_async_event(3) would hand it over.
    fn event(kind: sys::ibv_event_type::Type, element: sys::ibv_async_event__bindgen_ty_1) -> sys::ibv_async_event {
        sys::ibv_async_event { element, event_type: kind }
    }

    fn qp(addr: usize) -> sys::ibv_async_event__bindgen_ty_1 {
        sys::ibv_async_event__bindgen_ty_1 { qp: addr as *mut sys::ibv_qp }
    }

    fn cq(addr: usize) -> sys::ibv_async_event__bindgen_ty_1 {
        sys::ibv_async_event__bindgen_ty_1 { cq: addr as *mut sys::ibv_cq }
    }

    fn port(n: i32) -> sys::ibv_async_event__bindgen_ty_1 {
        sys::ibv_async_event__bindgen_ty_1 { port_num: n }
    }

    fn errors() -> DeviceErrors {
        DeviceErrors {
            qps: RefCell::default(),
            cqs: RefCell::default(),
            next_wide: Cell::new(0),
            seen: Cell::new(0),
            ctx: 1,
            flag: Arc::new(Flag::new().expect("an eventfd")),
        }
    }

    /// Where the tests' own mailboxes publish: tests run side by side, and
    /// one of them watches the process's mailbox.
    static UNWATCHED: AtomicU64 = AtomicU64::new(0);

    fn mailbox() -> Mailbox {
        Mailbox { events: VecDeque::new(), next_seq: 0, flags: Vec::new(), published: &UNWATCHED }
    }

    type Event = Option<CmEvent<()>>;

    fn same(a: Event, b: Event) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    #[test]
    fn qp_errors_name_the_qps_tag_and_cq_errors_the_cqs() {
        use sys::ibv_event_type as t;
        let (ia, mut m) = (errors(), mailbox());
        ia.name_qp(0x1000 as *mut _, 7);
        ia.name_cq(0x2000 as *mut _, 9);
        for kind in [t::IBV_EVENT_QP_FATAL, t::IBV_EVENT_QP_REQ_ERR, t::IBV_EVENT_QP_ACCESS_ERR] {
            m.post(1, &event(kind, qp(0x1000)));
            assert!(same(ia.claim(&mut m, 1, 1), Some(CmEvent::QpError { tag: 7 })), "event type {kind}");
        }
        m.post(1, &event(t::IBV_EVENT_CQ_ERR, cq(0x2000)));
        assert!(same(ia.claim(&mut m, 1, 1), Some(CmEvent::CqError { tag: 9 })));
        assert!(ia.claim::<()>(&mut m, 1, 1).is_none(), "each event once");
        assert!(m.events.is_empty());
    }

    #[test]
    fn events_dat_has_no_word_for_are_dropped() {
        use sys::ibv_event_type as t;
        let (ia, mut m) = (errors(), mailbox());
        ia.name_qp(0x1000 as *mut _, 7);
        for kind in [t::IBV_EVENT_COMM_EST, t::IBV_EVENT_QP_LAST_WQE_REACHED, t::IBV_EVENT_SQ_DRAINED] {
            m.post(1, &event(kind, qp(0x1000)));
        }
        m.post(1, &event(t::IBV_EVENT_PORT_ACTIVE, port(1)));
        m.post(1, &event(t::IBV_EVENT_LID_CHANGE, port(1)));
        assert!(m.events.is_empty());
        assert!(ia.claim::<()>(&mut m, 1, 1).is_none());
    }

    #[test]
    fn an_ia_claims_only_its_own_objects_and_leaves_the_rest_for_the_others() {
        use sys::ibv_event_type as t;
        let (a, b, mut m) = (errors(), errors(), mailbox());
        a.name_qp(0x1000 as *mut _, 1);
        b.name_qp(0x3000 as *mut _, 2);
        // B's event is read first, by A.
        m.post(1, &event(t::IBV_EVENT_QP_FATAL, qp(0x3000)));
        m.post(1, &event(t::IBV_EVENT_QP_FATAL, qp(0x1000)));
        assert!(same(a.claim(&mut m, 1, 1), Some(CmEvent::QpError { tag: 1 })));
        assert!(a.claim::<()>(&mut m, 1, 1).is_none());
        assert!(a.first(&m, 1, 1).is_none() && b.first(&m, 1, 1).is_some(), "B's wait does not sleep on it");
        assert!(same(b.claim(&mut m, 1, 1), Some(CmEvent::QpError { tag: 2 })));
        // The same address on another device is another QP.
        m.post(2, &event(t::IBV_EVENT_QP_FATAL, qp(0x1000)));
        assert!(a.claim::<()>(&mut m, 1, 1).is_none());
    }

    #[test]
    fn port_and_device_events_reach_every_ia_of_the_device_once() {
        use sys::ibv_event_type as t;
        let (a, b, mut m) = (errors(), errors(), mailbox());
        m.post(1, &event(t::IBV_EVENT_PORT_ERR, port(2)));
        m.post(1, &event(t::IBV_EVENT_PORT_ERR, port(1)));
        m.post(1, &event(t::IBV_EVENT_DEVICE_FATAL, port(0)));
        for ia in [&a, &b] {
            assert!(same(ia.claim(&mut m, 1, 1), Some(CmEvent::PortDown)), "only port 1's");
            assert!(same(ia.claim(&mut m, 1, 1), Some(CmEvent::Catastrophic)));
            assert!(ia.claim::<()>(&mut m, 1, 1).is_none());
        }
    }

    #[test]
    fn a_destroyed_objects_events_never_reach_its_successor_at_the_same_address() {
        use sys::ibv_event_type as t;
        let (ia, mut m) = (errors(), mailbox());
        m.post(1, &event(t::IBV_EVENT_CQ_ERR, cq(0x2000)));
        m.forget(Element::Cq(0x2000));
        ia.name_cq(0x2000 as *mut _, 4);
        assert!(ia.claim::<()>(&mut m, 1, 1).is_none());
    }

    #[test]
    fn the_mailbox_keeps_a_bounded_number_of_unclaimed_events() {
        let mut m = mailbox();
        for i in 0..KEPT + 10 {
            m.post(1, &event(sys::ibv_event_type::IBV_EVENT_QP_FATAL, qp(0x1000 + i)));
        }
        assert_eq!(m.events.len(), KEPT);
        assert_eq!(m.events.front().map(|u| u.element), Some(Element::Qp(0x1000 + 10)));
    }

    fn readable(fd: i32) -> bool {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd, ours.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn an_ia_looks_with_no_lock_until_an_event_of_its_device_came_and_its_flag_says_so() {
        use sys::ibv_event_type as t;
        // Contexts no real device has, in the process's one mailbox.
        let (ctx, other) = (0x5a00 as *mut sys::ibv_context, 0x5b00 as *mut sys::ibv_context);
        let (a, b) = (DeviceErrors::new(ctx).unwrap(), DeviceErrors::new(other).unwrap());
        a.name_qp(0x1000 as *mut _, 7);
        assert!(a.poll::<()>(1).is_none() && !readable(a.fd()));
        {
            let mut m = super::mailbox();
            m.post(ctx as usize, &event(t::IBV_EVENT_QP_FATAL, qp(0x1000)));
            m.wake(ctx as usize);
        }
        assert!(readable(a.fd()), "a wait of the IA wakes");
        assert!(!readable(b.fd()), "an IA of another device sleeps on");
        assert!(same(a.poll(1), Some(CmEvent::QpError { tag: 7 })));
        assert!(readable(a.fd()), "lowered only once nothing of the IA's is left");
        assert!(a.poll::<()>(1).is_none());
        assert!(!readable(a.fd()));
        assert_eq!(a.seen.get(), KEPT_SO_FAR.load(Ordering::Acquire));
        drop(a);
        assert!(!super::mailbox().flags.iter().any(|(c, _)| *c == ctx as usize), "a closed IA's flag is gone");
    }
}
