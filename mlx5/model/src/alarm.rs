//! The software HCA's wake-up: a timerfd per IA, readable when the IA has
//! connection or CQ events queued (set to fire at once) or when its
//! earliest connect timer runs out. It is what an event loop sleeps on
//! for the model, as it sleeps on the completion and rdma_cm channels of
//! a verbs device.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The descriptor, owned by the IA.
#[derive(Debug)]
pub(crate) struct Alarm(OwnedFd);

impl Alarm {
    pub fn new() -> Option<Alarm> {
        // SAFETY: no pointers; a new descriptor or -1.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        // SAFETY: `fd` was just created and is owned by nobody else.
        (fd >= 0).then(|| Alarm(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Make the alarm `fd` (an [`Alarm`]'s, still open) fire in `us`
/// microseconds, at once for 0, or not at all.
pub(crate) fn set(fd: RawFd, us: Option<u64>) {
    let mut expiries = 0u64;
    // SAFETY: reads at most 8 bytes into `expiries`; the descriptor is
    // non-blocking. An expiry already counted is taken, so the descriptor
    // reports only what is set now.
    unsafe { libc::read(fd, (&raw mut expiries).cast(), 8) };
    let ns = us.map_or(0, |us| us.saturating_mul(1000).max(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec {
            tv_sec: (ns / 1_000_000_000).min(i64::MAX as u64) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: `spec` is a valid itimerspec; the old value is not asked for.
    unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) };
}
