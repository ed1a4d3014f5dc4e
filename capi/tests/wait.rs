//! A thread waiting on the software HCA lets every other thread in: the
//! provider's lock is let go while it sleeps, so another thread's call
//! completes, and an event it posts wakes the waiter.

use std::ptr;
use std::sync::mpsc;
use std::time::Duration;

use udat_capi::sys::*;

mod common;
use common::{Rig, SOFTHCA};

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
    let rig = Rig::new(c"wait-others", SOFTHCA);
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
        // SAFETY: the slot of a live provider table, on a live EVD.
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
        // SAFETY: the slot of a live provider table, on a live EVD.
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

/// A thread blocked in `dat_evd_wait` with no timeout.
struct Waiter {
    /// Its return code.
    woken: mpsc::Receiver<DAT_RETURN>,
    id: libc::pthread_t,
    /// Dropped, lets the thread end: until then its id stays valid.
    _release: mpsc::Sender<()>,
}

/// Start a [`Waiter`] on `evd`.
fn waiter(table: Sent, evd: Sent) -> Waiter {
    let (done, woken) = mpsc::channel();
    let (id_tx, id) = mpsc::channel();
    let (release, held) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        // SAFETY: the calling thread's own id.
        let _ = id_tx.send(unsafe { libc::pthread_self() });
        // SAFETY: the table and EVD outlive the test's wait for this
        // thread; the out-pointers are valid.
        let t = unsafe { &*(table.handle() as *const DAT_PROVIDER) };
        let (mut event, mut nmore) = (DAT_EVENT::default(), 0);
        // SAFETY: the slot of a live provider table, on a live EVD.
        let ret = unsafe { t.evd_wait_func.unwrap()(evd.handle(), u32::MAX, 1, &mut event, &mut nmore) };
        let _ = done.send(ret);
        let _ = held.recv();
    });
    let id = id.recv().expect("the waiter's id");
    // Let it go to sleep.
    std::thread::sleep(Duration::from_millis(50));
    Waiter { woken, id, _release: release }
}

#[test]
fn freeing_the_evd_or_closing_the_ia_wakes_the_waiter_with_abort() {
    let rig = Rig::new(c"wait-abort", SOFTHCA);
    let t = rig.t();
    let table = Sent(rig.table as usize);
    // dat_evd_wait(3DAT): "DAT_ABORT: The operation was aborted because IA
    // was closed or EVD was destroyed".
    let evd = rig.evd(4, DAT_EVD_DTO_FLAG);
    let w = waiter(table, Sent(evd as usize));
    // SAFETY: an EVD of this provider, with nothing tied to it.
    assert_eq!(unsafe { t.evd_free_func.unwrap()(evd) }, DAT_SUCCESS);
    assert_eq!(w.woken.recv_timeout(Duration::from_secs(20)), Ok(DAT_CLASS_ERROR | DAT_ABORT));

    // dat_ia_close(3DAT): "All direct waiters on all EVDs are also
    // unblocked and return with DAT_ABORT."
    let (mut async_evd, mut ia) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: the registered name and valid out-pointers.
    let ret = unsafe { t.ia_open_func.unwrap()(c"wait-abort".as_ptr().cast_mut(), 8, &mut async_evd, &mut ia) };
    assert_eq!(ret, DAT_SUCCESS);
    let evd = common::evd(t, ia, 4, DAT_EVD_DTO_FLAG);
    let w = waiter(table, Sent(evd as usize));
    // SAFETY: an IA of this provider.
    assert_eq!(unsafe { t.ia_close_func.unwrap()(ia, DAT_CLOSE_ABRUPT_FLAG) }, DAT_SUCCESS);
    assert_eq!(w.woken.recv_timeout(Duration::from_secs(20)), Ok(DAT_CLASS_ERROR | DAT_ABORT));
}

extern "C" fn ignore(_: libc::c_int) {}

#[test]
fn a_signal_interrupts_a_wait() {
    // A handler without SA_RESTART, so the sleep returns EINTR.
    // SAFETY: a zeroed sigaction with a handler that does nothing.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &act, ptr::null_mut()), 0);
    }
    let rig = Rig::new(c"wait-signal", SOFTHCA);
    let evd = rig.evd(4, DAT_EVD_DTO_FLAG);
    let w = waiter(Sent(rig.table as usize), Sent(evd as usize));
    // A signal that lands while the waiter looks, rather than sleeps, is
    // not an interruption: send until one lands in the sleep.
    for _ in 0..2000 {
        // SAFETY: the waiter thread lives until `w` is dropped.
        unsafe { libc::pthread_kill(w.id, libc::SIGUSR1) };
        match w.woken.recv_timeout(Duration::from_millis(10)) {
            Ok(ret) => {
                assert_eq!(ret, DAT_CLASS_ERROR | DAT_INTERRUPTED_CALL);
                return;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(e) => panic!("{e}"),
        }
    }
    panic!("the wait was never interrupted");
}
