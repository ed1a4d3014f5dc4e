//! The software HCA's wake-up, what an event loop sleeps on for the software HCA
//! as it sleeps on a verbs device's completion channel and connection events:
//! per IA, a [`Flag`] raised while the IA has connection or CQ events
//! queued, and a [`Deadline`] at its earliest connect timer. Events come
//! and go with every connection, so they take the eventfd, whose raise and
//! clear are cheap; a timer set to fire at once would cost a timer
//! interrupt each time.

use std::os::fd::RawFd;

use udat_wake::{Deadline, Flag};

/// The descriptors, owned by the IA.
#[derive(Debug)]
pub(crate) struct Alarm {
    queued: Flag,
    timer: Deadline,
}

/// An [`Alarm`]'s descriptors, as the HCA sets them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AlarmFds {
    queued: RawFd,
    timer: RawFd,
}

impl Alarm {
    pub fn new() -> Option<Alarm> {
        Some(Alarm { queued: Flag::new().ok()?, timer: Deadline::new().ok()? })
    }

    pub fn fds(&self) -> AlarmFds {
        AlarmFds { queued: self.queued.fd(), timer: self.timer.fd() }
    }
}

impl AlarmFds {
    /// The descriptors an event loop polls.
    pub fn both(self) -> [RawFd; 2] {
        [self.queued, self.timer]
    }

    /// Make the events descriptor readable, or not (its [`Alarm`] still
    /// open: the HCA forgets the IA before the IA's close drops it).
    pub fn set_queued(self, queued: bool) {
        // SAFETY: the descriptor is an `Alarm`'s flag, open while the HCA
        // knows the IA.
        unsafe {
            if queued {
                udat_wake::raise_fd(self.queued);
            } else {
                udat_wake::clear_fd(self.queued);
            }
        }
    }

    /// Make the timer fire in `us` microseconds, or not at all.
    pub fn set_timer(self, us: Option<u64>) {
        // SAFETY: the descriptor is an `Alarm`'s deadline, open as above.
        unsafe { udat_wake::set_fd(self.timer, us) }
    }
}
