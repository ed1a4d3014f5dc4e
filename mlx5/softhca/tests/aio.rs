//! Event-loop waiting through the Rust API on the software HCA: the CNO
//! descriptor of `Ia::cno_fd_create`, and `udat::aio` awaiting it from a
//! tokio task (udat's `tokio` feature).

use std::time::Duration;

use udat::*;
use udat_mlx5::Mlx5;
use udat_softhca::SoftHca;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

fn readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

fn softhca_ia() -> Ia<Mlx5<SoftHca>> {
    Ia::open(Mlx5::new(SoftHca::new()), b"mlx5_soft0", 8).unwrap()
}

#[test]
fn a_transport_with_nothing_to_sleep_on_has_no_cno_descriptor() {
    let mut ia: Ia<MockBackend> = Ia::open(MockBackend::new(), MOCK_IA_NAME, 4).unwrap();
    assert_eq!(ia.cno_fd_create().unwrap_err().error_type(), ErrorType::NotImplemented);
}

#[test]
fn a_connect_timeout_wakes_the_descriptor_with_no_call_in_between() {
    let mut ia = softhca_ia();
    let h = ia.handle();
    let (cno, fd) = ia.cno_fd_create().unwrap();
    let pz = ia.pz_create(h).unwrap();
    let dto = ia.evd_create(h, 4, CnoHandle::NULL, EvdFlags::DTO).unwrap();
    let conn = ia.evd_create(h, 4, cno, EvdFlags::CONNECTION).unwrap();
    let ep = ia.ep_create(h, pz, dto, dto, conn, None).unwrap();
    // Nobody has this address: the attempt times out after 50 ms, and
    // only the transport's timer can say so.
    let nowhere = udat_verbs::ipv4([10, 9, 9, 9], 0);
    ia.ep_connect(ep, &nowhere, 77, 50_000, &[], Qos::BEST_EFFORT, ConnectFlags::DEFAULT).unwrap();
    assert!(!readable(fd, 10), "nothing yet");
    assert!(readable(fd, 2_000), "the timeout wakes the descriptor");
    assert_eq!(ia.cno_trigger(cno), Ok(conn));
    assert_eq!(ia.evd_dequeue(conn).unwrap().number, EventNumber::ConnectionTimedOut);
    assert!(!readable(fd, 0));
    ia.ep_free(ep).unwrap();
    ia.evd_free(conn).unwrap();
    ia.cno_free(cno).unwrap();
    // SAFETY: any number may be asked about.
    assert_eq!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1, "cno_free closes the descriptor");
}

mod with_tokio {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build().unwrap()
    }

    #[test]
    fn an_async_cno_needs_a_runtime() {
        let mut ia = softhca_ia();
        assert_eq!(ia.cno_async().unwrap_err().error_type(), ErrorType::InsufficientResources);
    }

    #[test]
    fn an_awaited_event_arrives_once_and_an_untied_evd_is_refused() {
        runtime().block_on(async {
            let mut ia = softhca_ia();
            let h = ia.handle();
            let cno = ia.cno_async().unwrap();
            let tied = ia.evd_create(h, 4, cno.handle(), EvdFlags::SOFTWARE).unwrap();
            let untied = ia.evd_create(h, 4, CnoHandle::NULL, EvdFlags::SOFTWARE).unwrap();
            assert_eq!(cno.event(&mut ia, untied).await.unwrap_err().error_type(), ErrorType::InvalidState);
            ia.evd_post_se(tied, 5).unwrap();
            assert_eq!(cno.event(&mut ia, tied).await.unwrap().data, EventData::Software { pointer: 5 });
            // Nothing more: the await must pend, not spin or invent one.
            let pending = tokio::time::timeout(Duration::from_millis(50), cno.event(&mut ia, tied)).await;
            assert!(pending.is_err());
            assert!(cno.wakeups() <= 1, "woke {} times", cno.wakeups());
        });
    }
}
