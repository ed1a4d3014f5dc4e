//! Non-blocking descriptors, as udat-verbs makes the IA's completion
//! channel, its rdma_cm event channel and the device context's
//! asynchronous events: a read of one never waits, and a wait sleeps in
//! `poll`.

/// Make `fd` non-blocking.
///
/// # Safety
/// `fd` is an open descriptor.
pub(crate) unsafe fn nonblocking(fd: i32) {
    // SAFETY: F_GETFL/F_SETFL on an open descriptor.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}
