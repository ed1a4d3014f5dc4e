//! The software HCA's wake-up, what an event loop sleeps on for the model
//! as it sleeps on the completion and rdma_cm channels of a verbs device:
//! per IA, an eventfd readable while the IA has connection or CQ events
//! queued, and a timerfd readable once its earliest connect timer runs
//! out. Events come and go with every connection, so they take the
//! eventfd, whose write and read are cheap; a timer set to fire at once
//! would cost a timer interrupt each time.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The descriptors, owned by the IA.
#[derive(Debug)]
pub(crate) struct Alarm {
    queued: OwnedFd,
    timer: OwnedFd,
}

/// An [`Alarm`]'s descriptors, as the HCA sets them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AlarmFds {
    queued: RawFd,
    timer: RawFd,
}

impl Alarm {
    pub fn new() -> Option<Alarm> {
        // SAFETY: no pointers; a new descriptor or -1.
        let queued = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        // SAFETY: `queued` was just created and is owned by nobody else.
        let queued = (queued >= 0).then(|| unsafe { OwnedFd::from_raw_fd(queued) })?;
        // SAFETY: no pointers; a new descriptor or -1.
        let timer = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        // SAFETY: `timer` was just created and is owned by nobody else.
        let timer = (timer >= 0).then(|| unsafe { OwnedFd::from_raw_fd(timer) })?;
        Some(Alarm { queued, timer })
    }

    pub fn fds(&self) -> AlarmFds {
        AlarmFds { queued: self.queued.as_raw_fd(), timer: self.timer.as_raw_fd() }
    }
}

impl AlarmFds {
    /// The descriptors an event loop polls.
    pub fn both(self) -> [RawFd; 2] {
        [self.queued, self.timer]
    }

    /// Make the events descriptor readable, or not (its [`Alarm`] still
    /// open).
    pub fn set_queued(self, queued: bool) {
        let mut count = 1u64;
        // SAFETY: writes or reads 8 bytes of `count`; the descriptor is
        // non-blocking. A write makes the counter nonzero (readable); a
        // read takes it back to zero.
        unsafe {
            if queued {
                libc::write(self.queued, (&raw const count).cast(), 8);
            } else {
                libc::read(self.queued, (&raw mut count).cast(), 8);
            }
        }
    }

    /// Make the timer fire in `us` microseconds, or not at all.
    pub fn set_timer(self, us: Option<u64>) {
        let mut expiries = 0u64;
        // SAFETY: reads at most 8 bytes into `expiries`; the descriptor is
        // non-blocking. An expiry already counted is taken, so the
        // descriptor reports only what is set now.
        unsafe { libc::read(self.timer, (&raw mut expiries).cast(), 8) };
        let ns = us.map_or(0, |us| us.saturating_mul(1000).max(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000).min(i64::MAX as u64) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: `spec` is a valid itimerspec; the old value is not asked
        // for.
        unsafe { libc::timerfd_settime(self.timer, 0, &spec, std::ptr::null_mut()) };
    }
}
