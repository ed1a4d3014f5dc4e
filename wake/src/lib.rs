//! udat-wake: the descriptors udat hands an event loop (epoll, io_uring,
//! tokio) to sleep on, one wrapper each.
//!
//! - [`Flag`], an eventfd: readable while something waits to be pulled.
//!   The software HCA raises one while an IA has events queued; a CNO's
//!   descriptor holds one the core raises when it triggers the CNO.
//! - [`Deadline`], a timerfd on the monotonic clock: readable once a time
//!   has passed. The transports set one to an IA's earliest connect
//!   timeout.
//!
//! - [`notify::Notifier`], an epoll instance: a CNO as a descriptor
//!   (`dat_cno_fd_create`), readable when the core triggered the CNO or
//!   the transport has something to pull.
//! - [`coarse_now_us`], the clock by which a dequeue that finds nothing
//!   decides whether to look for connection events.
//!
//! All are non-blocking and close on exec. Where a descriptor must be
//! named by number (a signal the core calls with a `u64`, or a table that
//! outlives no owner), the `_fd` functions act on it, as `unsafe` as the
//! number's provenance.

#![warn(missing_docs)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub mod notify;

/// A descriptor the kernel just returned, or its error.
fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An eventfd: readable while raised.
#[derive(Debug)]
pub struct Flag(OwnedFd);

impl Flag {
    /// A new flag, lowered.
    pub fn new() -> io::Result<Flag> {
        // SAFETY: no pointers; a new descriptor or -1.
        owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) }).map(Flag)
    }

    /// The descriptor to poll.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Make it readable.
    pub fn raise(&self) {
        // SAFETY: the descriptor is this flag's eventfd, open while `self` is.
        unsafe { raise_fd(self.fd()) }
    }

    /// Make it unreadable.
    pub fn clear(&self) {
        // SAFETY: as for `raise`.
        unsafe { clear_fd(self.fd()) }
    }
}

/// [`Flag::raise`] of the flag whose descriptor is `fd`.
///
/// # Safety
/// `fd` is a [`Flag`]'s descriptor, still open.
pub unsafe fn raise_fd(fd: RawFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from `one` to the eventfd the caller names;
    // the descriptor is non-blocking: a full counter fails with EAGAIN,
    // and is readable then anyway.
    unsafe { libc::write(fd, (&raw const one).cast(), 8) };
}

/// [`Flag::clear`] of the flag whose descriptor is `fd`.
///
/// # Safety
/// As for [`raise_fd`].
pub unsafe fn clear_fd(fd: RawFd) {
    let mut count = 0u64;
    // SAFETY: reads 8 bytes into `count` from the eventfd the caller
    // names; non-blocking, so a lowered flag fails at once.
    unsafe { libc::read(fd, (&raw mut count).cast(), 8) };
}

/// Microseconds on `CLOCK_MONOTONIC_COARSE`, which the vDSO reads from
/// the kernel's last tick with no system call, whatever the clock source:
/// `Backend::coarse_now_us` of every transport. In a guest whose clock
/// source is HPET the fine clock is a system call and an emulated
/// register read on every empty poll.
pub fn coarse_now_us() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec; the clock id is one
    // Linux has had since 2.6.32, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000
}

/// A timerfd on the monotonic clock: readable once the time it was set to
/// has passed, until it is set again.
#[derive(Debug)]
pub struct Deadline(OwnedFd);

impl Deadline {
    /// A new deadline, set to never.
    pub fn new() -> io::Result<Deadline> {
        // SAFETY: no pointers; a new descriptor or -1.
        owned(unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) })
            .map(Deadline)
    }

    /// The descriptor to poll.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Fire in `us` microseconds (at once for 0), or never.
    pub fn set(&self, us: Option<u64>) {
        // SAFETY: the descriptor is this deadline's timerfd, open while
        // `self` is.
        unsafe { set_fd(self.fd(), us) }
    }
}

/// [`Deadline::set`] of the deadline whose descriptor is `fd`.
///
/// # Safety
/// `fd` is a [`Deadline`]'s descriptor, still open.
pub unsafe fn set_fd(fd: RawFd, us: Option<u64>) {
    // Take an expiry already counted, so that the descriptor reports only
    // the time set now.
    let mut expiries = 0u64;
    // SAFETY: reads 8 bytes into `expiries` from the timerfd the caller
    // names; non-blocking, so an unexpired timer fails with EAGAIN at once.
    unsafe { libc::read(fd, (&raw mut expiries).cast(), 8) };
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
    unsafe { libc::timerfd_settime(fd, 0, &value, std::ptr::null_mut()) };
}

/// Whether `fd` polls readable now, for the tests of every wrapper.
#[cfg(test)]
fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd; no wait.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_is_readable_from_its_raise_to_its_clear() {
        let flag = Flag::new().unwrap();
        assert!(!readable(flag.fd()));
        flag.raise();
        flag.raise();
        assert!(readable(flag.fd()));
        flag.clear();
        assert!(!readable(flag.fd()), "one clear lowers any number of raises");
    }

    #[test]
    fn a_deadline_fires_when_set_and_a_new_setting_replaces_the_old() {
        let deadline = Deadline::new().unwrap();
        deadline.set(Some(0));
        let mut p = libc::pollfd { fd: deadline.fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; up to 10 s for a timer set to fire at once.
        assert_eq!(unsafe { libc::poll(&mut p, 1, 10_000) }, 1);
        deadline.set(Some(60_000_000));
        assert!(!readable(deadline.fd()), "an expiry counted before is taken");
        deadline.set(None);
        assert!(!readable(deadline.fd()));
    }
}
