//! The connection manager's own thread, one per IA.
//!
//! A connection must progress while the consumer does something else:
//! real consumers connect to every peer and then block in a barrier, a
//! socket or a lock, with no DAT call (MVAPICH2's `MPI_Init`), and OFA's
//! providers carry the connection on a thread of their own meanwhile. So
//! each IA's rdma_cm event channel belongs to a thread that sleeps in
//! `poll` on it, on a timerfd set to the earliest connect deadline and on
//! an eventfd that stops it. It resolves the address and the route, sends
//! the request, moves the QPs through RTR and RTS, answers a DREQ, moves
//! a disconnected QP to the error state (its DTOs flush whatever the
//! consumer waits on) and gives up on connects whose time ran out
//! (`conn`). It also reads the device context's asynchronous events as
//! they come (`device_error`), so that neither a dequeue nor a post ever
//! asks the device for them. What it finishes, the events the core is to
//! see, it queues;
//! [`CmShared::pending`] and the `ready` eventfd say that the queue holds
//! something, and the core takes it through `poll_cm` in the consumer's
//! next DAT call, or wakes from a wait on the eventfd.
//!
//! The thread and the consumer's calls share [`CmState`] under one
//! mutex: the rdma_cm ids, what each QP's connection is doing, and the
//! queue. Every event is read from the channel and acknowledged under it,
//! so an id destroyed under it has no event outstanding, and a QP whose
//! record left it under it is never touched by the thread again (a QP is
//! destroyed only after that). The data path never takes it: posts and
//! polls reach the QP and CQ without it, and `poll_cm` looks at an atomic
//! before it locks.

use std::collections::{HashMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use udat_core::{DatError, DatResult, ErrorType};
use udat_wake::{Deadline, Flag};

use crate::conn::{self, CmState};
use crate::device_error;
use crate::fd::nonblocking;
use crate::status::{dat_error, errno};
use crate::sys;
use crate::tunables::Tunables;

/// The thread's stack: it runs rdma_cm's and verbs' calls and the state
/// machine, never the consumer's code.
const STACK: usize = 256 * 1024;

/// The connection manager of one IA: the channel, the state, and the
/// descriptors the thread and the consumer wait on.
pub(crate) struct CmShared {
    channel: *mut sys::rdma_event_channel,
    state: Mutex<CmState>,
    /// Raised while `state.events` holds an event.
    ready: Flag,
    /// `state.events` is not empty: a look without the lock.
    pending: AtomicBool,
    /// Stops the thread.
    stop: Flag,
    /// Set to the earliest connect deadline.
    timer: Deadline,
    /// The device context whose asynchronous events the thread reads.
    ctx: *mut sys::ibv_context,
}

// SAFETY: `channel` is an rdma_cm event channel, which librdmacm lets any
// thread use; the thread reads it only under the mutex, and it is
// destroyed when the last owner of `CmShared` drops it, after the thread
// ended. `ctx` is a device context, whose asynchronous events libibverbs
// lets any thread read; the IA closes it only after the thread ended.
// Everything else is Sync already.
unsafe impl Send for CmShared {}
// SAFETY: as above.
unsafe impl Sync for CmShared {}

impl CmShared {
    /// The state, to this thread alone. A thread that panicked while it
    /// held the lock left the state as consistent as any of its steps
    /// does: the lock is taken anyway.
    pub fn lock(&self) -> Cm<'_> {
        let state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Cm { shared: self, state }
    }

    /// The rdma_cm event channel every id of the IA is made on.
    pub fn channel(&self) -> *mut sys::rdma_event_channel {
        self.channel
    }

    /// Whether finished events wait for the core: no lock, no system call.
    #[inline(always)]
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Readable while finished events wait for the core.
    pub fn ready_fd(&self) -> i32 {
        self.ready.fd()
    }
}

impl Drop for CmShared {
    /// The thread has ended: destroy the ids still here (requests the
    /// core never took, and what an IA closed with connects in flight
    /// left), then the channel.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.events.clear();
        state.conns.clear();
        for (id, _) in state.ids.drain() {
            // SAFETY: a live id of this channel; every event read on it was
            // acknowledged, and nothing else holds it any more.
            unsafe { sys::rdma_destroy_id(id as *mut sys::rdma_cm_id) };
        }
        if !self.channel.is_null() {
            // SAFETY: no id is left on the channel.
            unsafe { sys::rdma_destroy_event_channel(self.channel) };
        }
    }
}

/// The state, locked. Dropping it publishes what changed: the queue's
/// being empty or not (to `pending` and the `ready` eventfd), and the
/// earliest deadline (to the timer), if one was set.
pub(crate) struct Cm<'a> {
    shared: &'a CmShared,
    state: MutexGuard<'a, CmState>,
}

impl Deref for Cm<'_> {
    type Target = CmState;

    fn deref(&self) -> &CmState {
        &self.state
    }
}

impl DerefMut for Cm<'_> {
    fn deref_mut(&mut self) -> &mut CmState {
        &mut self.state
    }
}

impl Drop for Cm<'_> {
    fn drop(&mut self) {
        let shared = self.shared;
        if std::mem::take(&mut self.state.rearm) {
            let now = Instant::now();
            let wait = conn::next_deadline(&self.state).map(|d| {
                // Round up: the timer never fires before the deadline.
                let ns = d.saturating_duration_since(now).as_nanos();
                ns.div_ceil(1000).min(u128::from(u64::MAX)) as u64
            });
            shared.timer.set(wait);
        }
        let waiting = !self.state.events.is_empty();
        if waiting != shared.pending.load(Ordering::Relaxed) {
            shared.pending.store(waiting, Ordering::Release);
            if waiting {
                shared.ready.raise();
            } else {
                shared.ready.clear();
            }
        }
    }
}

/// An IA's connection manager and its thread. Dropping it stops and
/// joins the thread, then destroys the ids left and the channel.
pub(crate) struct Progress {
    shared: Arc<CmShared>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// A new event channel, and its thread, started; the thread reads the
    /// asynchronous events of `ctx`, whose descriptor does not block
    /// (`device_error::watch`).
    pub fn start(ctx: *mut sys::ibv_context) -> DatResult<Progress> {
        let descriptor = |e: std::io::Error| dat_error(e.raw_os_error().unwrap_or(libc::ENOMEM));
        let (ready, stop, timer) =
            (Flag::new().map_err(descriptor)?, Flag::new().map_err(descriptor)?, Deadline::new().map_err(descriptor)?);
        // SAFETY: no preconditions.
        let channel = unsafe { sys::rdma_create_event_channel() };
        if channel.is_null() {
            return Err(dat_error(errno()));
        }
        // SAFETY: the channel is open; its descriptor is its own.
        unsafe { nonblocking((*channel).fd) };
        let state = CmState {
            ids: HashMap::new(),
            conns: HashMap::new(),
            events: VecDeque::new(),
            rearm: false,
            tunables: Tunables::DEFAULT,
        };
        let shared = Arc::new(CmShared {
            channel,
            state: Mutex::new(state),
            ready,
            pending: AtomicBool::new(false),
            stop,
            timer,
            ctx,
        });
        let thread = spawn(shared.clone())?;
        Ok(Progress { shared, thread: Some(thread) })
    }

    /// The connection manager.
    pub fn cm(&self) -> &CmShared {
        &self.shared
    }

    /// Stop the thread and wait for it to end.
    pub fn stop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.shared.stop.raise();
            // A thread that panicked has ended all the same.
            let _ = thread.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Start the thread of `shared`, with every signal blocked: a signal sent
/// to the process goes to one of the consumer's threads, where it
/// interrupts a wait (`DAT_INTERRUPTED_CALL`) or runs the consumer's
/// handler, never to this one.
fn spawn(shared: Arc<CmShared>) -> DatResult<JoinHandle<()>> {
    // SAFETY: plain C data, filled by sigfillset.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are ours; a new thread inherits the caller's mask,
    // which is put back at once.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    let thread = std::thread::Builder::new().name("udat-cm".into()).stack_size(STACK).spawn(move || run(&shared));
    // SAFETY: the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    thread.map_err(|_| DatError::of(ErrorType::InsufficientResources))
}

/// The thread: sleep until the channel or the device context has events,
/// the timer fires or the stop flag is raised; take what came, the
/// channel's under the lock.
fn run(shared: &CmShared) {
    // SAFETY: the channel and the context are open until the thread ends.
    let (channel_fd, async_fd) = unsafe { ((*shared.channel).fd, (*shared.ctx).async_fd) };
    let mut fds = [channel_fd, shared.timer.fd(), shared.stop.fd(), async_fd].map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    loop {
        for f in &mut fds {
            f.revents = 0;
        }
        // SAFETY: `fds` is an array of pollfd of its length.
        if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) } < 0 {
            // EINTR cannot come (every signal is blocked) and nothing else
            // is transient but ENOMEM: look again.
            continue;
        }
        if fds[2].revents != 0 {
            return;
        }
        // A descriptor in error would wake the thread at once, forever:
        // it is left out from then on (poll skips a negative one), after
        // whatever it still had is taken below.
        for i in [0, 1, 3] {
            if fds[i].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                fds[i].fd = -1;
            }
        }
        if fds[3].revents != 0 {
            // SAFETY: the context is open and watched (`Progress::start`).
            unsafe { device_error::arrived(shared.ctx) };
        }
        let mut cm = shared.lock();
        if fds[1].revents != 0 {
            cm.rearm = true;
            conn::expire(&mut cm, Instant::now());
        }
        if fds[0].revents != 0 {
            conn::drain(&mut cm, shared.channel);
        }
    }
}
