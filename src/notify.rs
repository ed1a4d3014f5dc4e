//! A CNO as a file descriptor: what `dat_cno_fd_create` returns and an
//! event loop (epoll, io_uring, tokio) sleeps on.
//!
//! The descriptor is an epoll instance holding an eventfd, which the core
//! raises when it triggers the CNO ([`Signal`]), and the transport's own
//! descriptors ([`WaitFds`]: a verbs device's completion and rdma_cm
//! channels and its connect timer, the software HCA's alarm), which become
//! readable when the transport has something the core has not pulled yet.
//! It is readable when either is; [`Provider::cno_trigger`] pulls the
//! transport, re-arms it, clears the eventfd and says which EVD triggered
//! the CNO. So a wake-up is either a trigger or transport activity that a
//! trigger call turns into one (or finds was for another CNO's EVDs,
//! whose own descriptors it makes readable).
//!
//! [`Provider::cno_trigger`]: udat_core::Provider::cno_trigger

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use udat_core::backend::WaitFds;
use udat_core::Signal;

/// The descriptors behind one CNO. The CNO must lose its [`Signal`] (or
/// be destroyed) before this is dropped: the signal names the eventfd by
/// number.
#[derive(Debug)]
pub struct Notifier {
    epoll: OwnedFd,
    event: OwnedFd,
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Notifier {
    /// An epoll instance over a new eventfd and `transport`'s descriptors.
    pub fn new(transport: WaitFds) -> io::Result<Notifier> {
        // SAFETY: no pointers; each returns a new descriptor or -1.
        let epoll = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: as above.
        let event = owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        for fd in std::iter::once(event.as_raw_fd()).chain(transport.iter()) {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
            // SAFETY: both descriptors are open; `ev` is a valid event.
            if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Notifier { epoll, event })
    }

    /// The descriptor to sleep on: readable when the CNO may have been
    /// triggered. Never read it; call `cno_trigger`.
    pub fn fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }

    /// The signal to give the CNO.
    pub fn signal(&self) -> Signal {
        Signal { raise, clear, arg: self.event.as_raw_fd() as u64 }
    }
}

/// Make the eventfd `arg` readable.
fn raise(arg: u64) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from `one` to the eventfd the signal names,
    // open while the signal is given (see `Notifier`); a full counter
    // fails with EAGAIN, and it is readable then anyway.
    unsafe { libc::write(arg as RawFd, (&raw const one).cast(), 8) };
}

/// Make the eventfd `arg` unreadable.
fn clear(arg: u64) {
    let mut count = 0u64;
    // SAFETY: reads 8 bytes into `count` from the eventfd the signal
    // names, open as above; non-blocking, so an empty one fails at once.
    unsafe { libc::read(arg as RawFd, (&raw mut count).cast(), 8) };
}
