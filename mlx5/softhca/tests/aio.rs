//! Event-loop waiting through the Rust API on the software HCA: the CNO
//! descriptor of `Ia::cno_fd_create`, and `udat::aio` awaiting it from a
//! tokio task (udat's `tokio` feature).
//!
//! These are udat's tests, kept here rather than in udat's `tests/`: they
//! need a transport with descriptors and timers, and udat builds and
//! tests without system headers (`cargo xtask test` checks that none of
//! its dependencies, dev-dependencies included, reads rdma-core's
//! headers), which the software HCA's byte oracle does.

use std::time::Duration;

use udat::*;
use udat_mlx5::Mlx5;
use udat_softhca::SoftHca;

fn readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

/// These tests look at descriptor numbers, which the kernel hands out
/// again as soon as one is closed: they run one at a time, so that no
/// other test's new descriptor takes a number one of them expects closed.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Run `test` on an IA of the software HCA.
fn on_softhca<R>(test: impl for<'id> FnOnce(Ia<'id, Mlx5<SoftHca>>) -> DatResult<R>) -> R {
    Ia::open(Mlx5::new(SoftHca::new()), b"mlx5_soft0", 8, test).unwrap()
}

#[test]
fn a_connect_timeout_wakes_the_descriptor_with_no_call_in_between() {
    let _one = one_at_a_time();
    on_softhca(|mut ia| {
        let (cno, fd) = ia.cno_fd_create()?;
        let pz = ia.pz_create()?;
        let dto = ia.evd_create(4, None, EvdFlags::DTO)?;
        let conn = ia.evd_create(4, Some(&cno), EvdFlags::CONNECTION)?;
        let ep = ia.ep_create(&pz, &dto, &dto, Some(&conn), None)?;
        // Nobody has this address: the attempt times out after 50 ms, and
        // only the transport's timer can say so.
        let nowhere = udat_verbs::ipv4([10, 9, 9, 9], 0);
        ia.ep_connect(&ep, &nowhere, 77, 50_000, &[], Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
        assert!(!readable(fd, 10), "nothing yet");
        assert!(readable(fd, 2_000), "the timeout wakes the descriptor");
        assert_eq!(ia.cno_trigger(&cno), Ok(conn.handle()));
        assert_eq!(ia.evd_dequeue(&conn)?.number, EventNumber::ConnectionTimedOut);
        assert!(!readable(fd, 0));
        ia.ep_free(ep)?;
        ia.evd_free(conn)?;
        ia.cno_free(cno)?;
        // SAFETY: any number may be asked about.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1, "cno_free closes the descriptor");
        Ok(())
    })
}

#[test]
fn dropping_an_open_ia_releases_everything() {
    let _one = one_at_a_time();
    let fd = on_softhca(|mut ia| {
        let (_cno, fd) = ia.cno_fd_create()?;
        let pz = ia.pz_create()?;
        let dto = ia.evd_create(4, None, EvdFlags::DTO)?;
        let _ep = ia.ep_create(&pz, &dto, &dto, None, None)?;
        let (_lmr, _seg) = ia.lmr_create_seg(vec![0u8; 4096], &pz)?;
        // SAFETY: any number may be asked about.
        assert_ne!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1);
        Ok(fd)
    });
    // The IA was dropped open: closed abruptly, its CNO's descriptor with
    // it.
    // SAFETY: any number may be asked about.
    assert_eq!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1, "the drop closed the descriptor");
}

/// `udat::aio`: udat is a dev-dependency here with its `tokio` feature.
mod with_tokio {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build().unwrap()
    }

    #[test]
    fn an_async_cno_needs_a_runtime() {
        let _one = one_at_a_time();
        on_softhca(|mut ia| {
            assert_eq!(ia.cno_async().unwrap_err().error_type(), ErrorType::InsufficientResources);
            Ok(())
        })
    }

    #[test]
    fn an_awaited_event_arrives_once_and_an_untied_evd_is_refused() {
        let _one = one_at_a_time();
        on_softhca(|mut ia| {
            runtime().block_on(async {
                let cno = ia.cno_async()?;
                let tied = ia.evd_create(4, Some(cno.cno()), EvdFlags::SOFTWARE)?;
                let untied = ia.evd_create(4, None, EvdFlags::SOFTWARE)?;
                assert_eq!(cno.event(&mut ia, &untied).await.unwrap_err().error_type(), ErrorType::InvalidState);
                ia.evd_post_se(&tied, 5)?;
                assert_eq!(cno.event(&mut ia, &tied).await?.data, EventData::Software { pointer: 5 });
                // Nothing more: the await must pend, not spin or invent one.
                let pending = tokio::time::timeout(Duration::from_millis(50), cno.event(&mut ia, &tied)).await;
                assert!(pending.is_err());
                assert!(cno.wakeups() <= 1, "woke {} times", cno.wakeups());
                // A CNO an EVD is tied to is not freed (dat_cno_free(3DAT)).
                let cno = cno.free(&mut ia).unwrap_err().object;
                ia.evd_free(tied)?;
                cno.free(&mut ia)?;
                Ok(())
            })
        })
    }
}
