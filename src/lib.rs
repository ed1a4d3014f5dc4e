//! # udat
//!
//! A Rust implementation of the DAT/uDAPL RDMA API (Direct Access
//! Transport) for latency-critical trading and storage engines, whose safe
//! face this crate is: the compiler keeps every object with its IA, and
//! the transport touches only memory the program gave it.
//!
//! The examples here run on the mock backend of udat's test kit; a
//! program opens a real transport the same way (`udat_verbs::Verbs` and a
//! device name such as `rxe0`, or `udat_mlx5::Mlx5`):
//!
//! ```
//! use udat::{CloseFlags, EventData, EvdFlags, Ia};
//! use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
//!
//! Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
//!     let pz = ia.pz_create()?;
//!     let evd = ia.evd_create(16, None, EvdFlags::SOFTWARE)?;
//!     ia.evd_post_se(&evd, 7)?;
//!     assert_eq!(ia.evd_dequeue(&evd)?.data, EventData::Software { pointer: 7 });
//!     ia.evd_free(evd)?;
//!     ia.pz_free(pz)?;
//!     ia.close(CloseFlags::Graceful)?;
//!     Ok(())
//! })?;
//! # Ok::<(), udat::DatError>(())
//! ```
//!
//! ## Objects
//!
//! [`Ia::open`] opens an Interface Adapter and runs a closure on it. Every
//! object the IA makes ([`Pz`], [`Lmr`], [`Rmr`], [`Evd`], [`Cno`], [`Ep`],
//! [`Psp`], [`Rsp`], [`Srq`], [`Cr`]) carries the closure's lifetime
//! `'id`, which is the IA's alone: an object cannot be used on another IA
//! or outlive the closure. The methods of [`Ia`] are named for the DAT
//! calls and cite their man pages, so C code ports line by line; every one
//! returns `Result<_, DatError>` with the exact `DAT_RETURN` of
//! `<dat2/dat_error.h>`. A free takes the object and gives it back in
//! [`Refused`] when DAT refuses. Dropping an object frees nothing; the IA's
//! close frees what is left, and dropping the IA closes it abruptly.
//!
//! ## Memory
//!
//! What the transport may read or write is memory handed to the IA, for
//! as long as it is registered ([`memory`] says how): a [`Buffer`] made
//! from a `Vec<u8>`, a `Box<[u8]>`, a `&'static mut [u8]` or an aligned
//! allocation of udat's. Memory given up to the IA ([`Ia::lmr_create`])
//! takes any privileges and is named by [`Local`] and [`Target`] segments;
//! kept memory ([`Ia::lmr_create_seg`]) comes back as a [`Seg`] that owns
//! its bytes, and a receive or an RDMA read into a `Seg` takes it until its
//! completion gives it back ([`Ia::take_seg`]):
//!
//! ```
//! use udat::*;
//! use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
//!
//! Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
//!     let pz = ia.pz_create()?;
//!     let dto = ia.evd_create(8, None, EvdFlags::DTO)?;
//!     let conn = ia.evd_create(8, None, EvdFlags::CONNECTION)?;
//!     let ep = ia.ep_create(&pz, &dto, &dto, Some(&conn), None)?;
//!     let (_lmr, seg) = ia.lmr_create_seg(vec![0u8; 64], &pz)?;
//!     // Connect, then drop the connection: a receive posted now is
//!     // flushed, and its completion hands the segment back.
//!     let peer = IaAddress::default();
//!     ia.ep_connect(&ep, &peer, 1, TIMEOUT_INFINITE, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
//!     ia.ep_disconnect(&ep, CloseFlags::Abrupt)?;
//!     ia.ep_post_recv_seg(&ep, seg, 9, CompletionFlags::DEFAULT)?;
//!     let done = ia.evd_dequeue(&dto)?;
//!     assert!(matches!(done.data, EventData::Dto { cookie: 9, status: DtoStatus::Flushed, .. }));
//!     let seg = ia.take_seg().expect("the receive's segment");
//!     assert_eq!(seg.len(), 64);
//!     Ok(())
//! })?;
//! # Ok::<(), udat::DatError>(())
//! ```
//!
//! ## Threads
//!
//! Every call takes the IA by `&mut`: one thread at a time. An `Ia` is
//! `Send` when its transport and storage are, so a program may hand it to
//! a scoped thread (`std::thread::scope`), and the objects, segments and
//! events are `Send` and `Sync`: handles and owned memory, nothing shared
//! behind them. Posts on different EPs from different threads at once want
//! one IA per thread: each has its own provider, queues and transport
//! objects, which is what the C ABI's thread-safe provider gives each
//! object with a lock of its own (`capi/src/lock.rs`). A shared Rust IA
//! would need those locks here too, and the core's shared posts, whose
//! contract (the caller holds the object's lock while the core reaches it
//! through a shared provider) a safe wrapper must keep; it is not offered
//! yet, as an IA per thread costs nothing on the data path.
//!
//! The modules hold: [`memory`] the buffers and segments, [`poster`] the
//! fast path (segments and an EP checked once for a run of posts), and
//! `aio` (the `tokio` feature) awaiting a CNO from async Rust; the
//! descriptor behind `dat_cno_fd_create` is `udat_wake::notify`'s.

#![warn(missing_docs)]

pub use udat_core::backend::{self, Backend};
pub use udat_core::types::*;
pub use udat_core::{
    AhHandle, AnyHandle, CnoHandle, CnoParam, CrHandle, CrParam, DatError, DatResult, EpChanges, EpHandle, EpParam,
    ErrorType, EvdHandle, EvdParam, EvdState, Event, EventData, EventNumber, IaHandle, Inline, Kind, LmrHandle,
    LmrParam, PspHandle, PspParam, PzHandle, PzParam, RmrHandle, RmrParam, RspHandle, RspParam, SrqHandle, SrqParam,
    Storage, Subtype, ANY_CONN_QUAL, TIMEOUT_INFINITE,
};

#[cfg(feature = "tokio")]
pub mod aio;
mod ep;
mod evd;
mod ia;
mod lmr;
pub mod memory;
mod object;
mod post;
pub mod poster;
mod ud;

pub use ia::Ia;
pub use lmr::Lmr;
pub use memory::{Buffer, Local, Seg, Target};
pub use object::{Cno, Cr, Ep, Evd, Psp, Pz, Refused, Rmr, Rsp, Srq};
pub use ud::UdPeer;
