//! DAT 2.0's `dat_cno_fd_create` and `dat_cno_trigger` through the
//! provider table, on the software HCA: the descriptor is readable once
//! the CNO is triggered and not before, `dat_cno_trigger` takes the
//! trigger without blocking, and `dat_cno_free` closes the descriptor.

use std::ptr;
use std::sync::{Mutex, MutexGuard};

use udat_capi::sys::*;

mod common;
use common::{ty, Rig, SOFTHCA};

/// The tests of this file one at a time: each asks whether a descriptor
/// number it saw closed is still open, and a descriptor the other opens
/// meanwhile may take that number.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether `fd` is readable within `ms` milliseconds.
fn readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut p, 1, ms) };
    rc == 1 && p.revents & libc::POLLIN != 0
}

fn post_se(t: &DAT_PROVIDER, evd: DAT_EVD_HANDLE, pointer: usize) {
    let mut event = DAT_EVENT { event_number: DAT_SOFTWARE_EVENT, ..Default::default() };
    event.event_data.software_event_data.pointer = pointer as DAT_PVOID;
    // SAFETY: a live EVD and a software event.
    assert_eq!(unsafe { t.evd_post_se_func.unwrap()(evd, &event) }, DAT_SUCCESS);
}

#[test]
fn a_cno_descriptor_is_readable_exactly_while_a_trigger_waits() {
    let _one = one_at_a_time();
    let rig = Rig::new(c"cno-fd", SOFTHCA);
    let t = rig.t();
    let (mut fd, mut cno, mut evd) = (-1, ptr::null_mut(), ptr::null_mut());
    // SAFETY: a live IA and valid out-pointers.
    unsafe {
        assert_eq!(
            t.cno_fd_create_func.unwrap()(rig.ia, ptr::null_mut(), &mut cno),
            DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG2
        );
        assert_eq!(t.cno_fd_create_func.unwrap()(rig.ia, &mut fd, &mut cno), DAT_SUCCESS);
        assert!(fd >= 0);
        assert_eq!(t.evd_create_func.unwrap()(rig.ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &mut evd), DAT_SUCCESS);
    }
    assert!(!readable(fd, 0), "nothing happened yet");
    let mut which = ptr::null_mut();
    // SAFETY: a live CNO and a valid out-pointer.
    assert_eq!(ty(unsafe { t.cno_trigger_func.unwrap()(cno, &mut which) }), DAT_QUEUE_EMPTY);
    post_se(t, evd, 1);
    post_se(t, evd, 2);
    assert!(readable(fd, 1000), "a trigger makes the descriptor readable");
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(readable(fd, 0), "and keeps it readable for a consumer that looks late");
    // SAFETY: as above.
    assert_eq!(unsafe { t.cno_trigger_func.unwrap()(cno, &mut which) }, DAT_SUCCESS);
    assert_eq!(which, evd);
    assert!(!readable(fd, 0), "the trigger was taken");
    // SAFETY: as above.
    assert_eq!(ty(unsafe { t.cno_trigger_func.unwrap()(cno, &mut which) }), DAT_QUEUE_EMPTY);
    // The events wait on the EVD, one trigger for both.
    for want in [1, 2] {
        let mut event = DAT_EVENT::default();
        // SAFETY: a live EVD and a valid out-pointer.
        assert_eq!(unsafe { t.evd_dequeue_func.unwrap()(evd, &mut event) }, DAT_SUCCESS);
        // SAFETY: a software event carries a pointer.
        assert_eq!(unsafe { event.event_data.software_event_data.pointer } as usize, want);
    }
    // Freeing is refused while an EVD is tied, then closes the descriptor,
    // which leaves the consumer's epoll set.
    post_se(t, evd, 3);
    // SAFETY: live handles and a valid epoll event.
    unsafe {
        let epoll = libc::epoll_create1(0);
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: 7 };
        assert_eq!(libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut ev), 0);
        assert_eq!(libc::epoll_wait(epoll, &mut ev, 1, 0), 1);
        assert_eq!(ty(t.cno_free_func.unwrap()(cno)), DAT_INVALID_STATE);
        assert_eq!(t.evd_free_func.unwrap()(evd), DAT_SUCCESS);
        assert_eq!(t.cno_free_func.unwrap()(cno), DAT_SUCCESS);
        assert_eq!(libc::fcntl(fd, libc::F_GETFD), -1, "the descriptor is closed");
        assert_eq!(libc::epoll_wait(epoll, &mut ev, 1, 0), 0, "and gone from the epoll set");
        libc::close(epoll);
    }
}

#[test]
fn closing_the_ia_closes_its_cno_descriptors() {
    let _one = one_at_a_time();
    let rig = Rig::new(c"cno-fd-close", SOFTHCA);
    let (mut fd, mut cno) = (-1, ptr::null_mut());
    // SAFETY: a live IA and valid out-pointers.
    assert_eq!(unsafe { rig.t().cno_fd_create_func.unwrap()(rig.ia, &mut fd, &mut cno) }, DAT_SUCCESS);
    // SAFETY: `fd` is open.
    assert_ne!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1);
    drop(rig);
    // SAFETY: any number may be asked about.
    assert_eq!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1);
}
