//! A thread waiting on the software HCA lets every other thread in: the
//! provider's lock is let go while it sleeps, so another thread's call
//! completes, and an event it posts wakes the waiter.

use std::ptr;
use std::sync::mpsc;
use std::time::Duration;

use udat_capi::sys::*;

mod common;
use common::{Rig, MODEL};

/// A handle sent to another thread of the test.
#[derive(Clone, Copy)]
struct Sent(usize);

impl Sent {
    fn handle(self) -> DAT_HANDLE {
        self.0 as DAT_HANDLE
    }
}

#[test]
fn a_wait_on_the_software_hca_does_not_hold_other_threads_out() {
    let rig = Rig::new(c"wait-others", MODEL);
    let t = rig.t();
    let mut evd = ptr::null_mut();
    // SAFETY: a live IA and a valid out-pointer.
    let ret = unsafe { t.evd_create_func.unwrap()(rig.ia, 4, ptr::null_mut(), DAT_EVD_SOFTWARE_FLAG, &mut evd) };
    assert_eq!(ret, DAT_SUCCESS);
    let (evd, table) = (Sent(evd as usize), Sent(rig.table as usize));
    let (done, woken) = mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: the table and EVD outlive the test's wait for this
        // thread; the out-pointers are valid.
        let t = unsafe { &*(table.handle() as *const DAT_PROVIDER) };
        let (mut event, mut nmore) = (DAT_EVENT::default(), 0);
        let ret = unsafe { t.evd_wait_func.unwrap()(evd.handle(), u32::MAX, 1, &mut event, &mut nmore) };
        // SAFETY: a software event carries a pointer.
        let _ = done.send((ret, unsafe { event.event_data.software_event_data.pointer } as usize));
    });
    // Let the waiter go to sleep, then post from this thread: the post
    // must not wait for the waiter, and its event must wake it.
    std::thread::sleep(Duration::from_millis(50));
    let (posted_tx, posted) = mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: as above; the event is a software event.
        let t = unsafe { &*(table.handle() as *const DAT_PROVIDER) };
        let mut event = DAT_EVENT { event_number: DAT_SOFTWARE_EVENT, ..Default::default() };
        event.event_data.software_event_data.pointer = 7 as DAT_PVOID;
        let _ = posted_tx.send(unsafe { t.evd_post_se_func.unwrap()(evd.handle(), &event) });
    });
    let limit = Duration::from_secs(20);
    let (posted, woken) = (posted.recv_timeout(limit), woken.recv_timeout(limit));
    if posted.is_err() || woken.is_err() {
        // A thread is stuck inside the provider: closing the IA would wait
        // for it too.
        std::mem::forget(rig);
        panic!("stuck: the post returned {posted:?}, the waiter {woken:?}");
    }
    assert_eq!(posted, Ok(DAT_SUCCESS));
    assert_eq!(woken, Ok((DAT_SUCCESS, 7)));
}
