//! The connect deadlines as a descriptor: a monotonic timerfd armed for
//! the IA's earliest deadline, so that an event loop sleeping on the
//! IA's descriptors wakes when a `dat_ep_connect` times out.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use udat_core::DatResult;

use crate::status::{dat_error, errno};

pub(crate) struct Timer(OwnedFd);

impl Timer {
    pub fn new() -> DatResult<Timer> {
        // SAFETY: no pointers; a new descriptor or -1.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(dat_error(errno()));
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(Timer(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Fire in `us` microseconds (at once for 0), or never.
    pub fn set(&self, us: Option<u64>) {
        // Take an expiry already counted, so that the descriptor reports
        // only the deadline set now.
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into `count`; the descriptor is
        // non-blocking, so an unexpired timer fails with EAGAIN at once.
        unsafe { libc::read(self.fd(), (&raw mut count).cast(), 8) };
        // An all-zero value disarms; "at once" is one nanosecond.
        let ns = us.map_or(0, |us| us.saturating_mul(1000).max(1));
        let value = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000).min(i64::MAX as u64) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: `value` is a valid itimerspec; the old value is not asked for.
        unsafe { libc::timerfd_settime(self.fd(), 0, &value, std::ptr::null_mut()) };
    }
}
