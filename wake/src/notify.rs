//! A CNO as a file descriptor: what `dat_cno_fd_create` returns and an
//! event loop (epoll, io_uring, tokio) sleeps on.
//!
//! The descriptor is an epoll instance holding an eventfd, which the core
//! raises when it triggers the CNO ([`Signal`]), and the transport's own
//! descriptors ([`WaitFds`]: a verbs device's completion channel and its
//! connection manager's eventfd, the software HCA's alarm), which become
//! readable when the transport has something the core has not pulled yet.
//! It is readable when either is; [`Provider::cno_trigger`] pulls the
//! transport, re-arms it, clears the eventfd and says which EVD triggered
//! the CNO. So a wake-up is either a trigger or transport activity that a
//! trigger call turns into one (or finds was for another CNO's EVDs,
//! whose own descriptors it makes readable).
//!
//! [`Provider::cno_trigger`]: udat_core::Provider::cno_trigger

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::Flag;
use udat_core::backend::WaitFds;
use udat_core::Signal;

/// The descriptors behind one CNO. The CNO must lose its [`Signal`] (or
/// be destroyed) before this is dropped: the signal names the eventfd by
/// number.
#[derive(Debug)]
pub struct Notifier {
    epoll: OwnedFd,
    event: Flag,
}

impl Notifier {
    /// An epoll instance over a new eventfd and `transport`'s descriptors.
    pub fn new(transport: WaitFds) -> io::Result<Notifier> {
        // SAFETY: no pointers; a new descriptor or -1.
        let epoll = crate::owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        let event = Flag::new()?;
        for fd in std::iter::once(event.fd()).chain(transport.iter()) {
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
        Signal { raise, clear, arg: self.event.fd() as u64 }
    }
}

/// Raise the flag whose descriptor is `arg`.
fn raise(arg: u64) {
    // SAFETY: the signal names the notifier's flag, open while the signal
    // is given (see `Notifier`).
    unsafe { crate::raise_fd(arg as RawFd) }
}

/// Clear the flag whose descriptor is `arg`.
fn clear(arg: u64) {
    // SAFETY: as for `raise`.
    unsafe { crate::clear_fd(arg as RawFd) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readable;

    #[test]
    fn readable_while_the_signal_is_raised_or_the_transport_has_work() {
        let transport = Flag::new().unwrap();
        let notifier = Notifier::new(WaitFds([transport.fd(), -1, -1, -1])).unwrap();
        assert!(!readable(notifier.fd()));
        let signal = notifier.signal();
        (signal.raise)(signal.arg);
        assert!(readable(notifier.fd()), "the core's trigger");
        (signal.clear)(signal.arg);
        assert!(!readable(notifier.fd()));
        transport.raise();
        assert!(readable(notifier.fd()), "the transport's descriptor");
        transport.clear();
        assert!(!readable(notifier.fd()));
    }
}
