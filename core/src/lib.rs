//! # udat-core
//!
//! The DAT/uDAPL object model with no allocator and no operating system:
//! every object of the uDAPL 1.2 specification (IA, PZ, LMR, RMR, EVD, CNO,
//! EP, PSP, RSP, CR, SRQ) and DAT 2.0's CSP, their states, their ties and
//! their error codes, over a [`Backend`] that does the transport.
//!
//! A [`Provider`] over the mock backend of udat's test kit, holding the
//! rule of dat_pz_free(3DAT) that a PZ still in use is not freed:
//!
//! ```
//! use udat_core::types::{CloseFlags, MemPriv, MemType};
//! use udat_core::{AsyncEvd, Inline, Provider, Subtype};
//! use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
//!
//! let mut p: Box<Provider<MockBackend, Inline<8, 64>>> = Box::new(Provider::new(MockBackend::new()));
//! let (ia, _async_evd) = p.ia_open(MOCK_IA_NAME, AsyncEvd::Create { min_qlen: 8 })?;
//! let pz = p.pz_create(ia)?;
//! let region = MemType::Virtual { address: 0x10_0000, length: 4096 };
//! // SAFETY: the mock backend never reads or writes the memory it is given.
//! let lmr = unsafe { p.lmr_create(ia, region, pz, MemPriv::ALL)? };
//!
//! assert_eq!(p.pz_free(pz).unwrap_err().subtype(), Subtype::InvalidStatePzInUse);
//! p.lmr_free(lmr.lmr)?;
//! p.pz_free(pz)?;
//! p.ia_close(ia, CloseFlags::Graceful)?;
//! # Ok::<(), udat_core::DatError>(())
//! ```
//!
//! ```text
//!  consumer ──> Provider<B, S> ──> B: Backend (mlx5 direct, verbs, udat-testkit's mock)
//!               handles · rules · event queues
//! ```
//!
//! - [`slab`]: object slots; handles carry a generation, so a stale handle
//!   is refused with `DAT_INVALID_HANDLE`, never aliased.
//! - [`storage`]: the memory the slots and events live in, given by the
//!   provider's owner (arrays, or memory allocated once by the C ABI).
//! - `call`: the DAT calls, one module per object, each citing the man
//!   pages (or, for DAT 2.0, the header) it implements, with the IB
//!   extension's UD Endpoints and [`counters`]; `call::evd` holds the
//!   dequeue's hot half, and `call::post` every post, with its doors
//!   (exclusive, lane, [`shared`], [`poster`]). Beneath them the
//!   `provider` and its progress engine, and beneath that `object`, each
//!   object's state and own rules, which reaches neither the calls nor
//!   the provider.
//! - [`event`]: `DAT_EVENT` and the pool every EVD queue reserves from.
//! - [`backend`]: what a transport must do, and promise.
//! - [`device_error`]: a transport's own errors (a QP or CQ in error, a
//!   port down, a failed device) as DAT asynchronous events.
//! - [`error`]: `DAT_RETURN`, bit for bit as `<dat2/dat_error.h>` has it.
//! - `signature`: each DAT call's parameters in its page's order, which
//!   give `DAT_INVALID_ARGn` its `n`; every call declares its own.
//!
//! The crate never panics on consumer input: every bad handle, length, flag
//! or state is an `Err` with the code the man page gives, and leaves every
//! other object as it was. Progress is pulled: completions and connection
//! events reach the EVDs when the consumer dequeues, waits or posts; no
//! thread runs behind its back.
//!
//! `unsafe` is denied here except where one contract needs it, each
//! place allowing it by name: the cell of a [`place`], through which the
//! thread holding an object's lock changes it in a shared provider, and
//! the calls that reach objects that way (the [`shared`] posts, the
//! shared dequeue, the shared counts, the backend's shared methods),
//! whose caller vouches for that lock, and a provider built field by
//! field where it is to live ([`Provider::init_in`]). Registering memory
//! is an `unsafe fn` ([`Provider::lmr_create`]): the transport will read
//! and write what it names, so its caller vouches for that memory, and
//! every other call stays safe.
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_debug_implementations, rust_2018_idioms)]
#![warn(missing_docs)]

pub mod backend;
mod call;
mod counts;
pub mod error;
pub mod event;
pub mod handle;
mod object;
pub mod place;
mod provider;
mod signature;
pub mod slab;
pub mod storage;
pub mod store;
pub mod types;

#[cfg(test)]
extern crate std;

pub use store::FixedVec;

pub use backend::{Backend, ConnectionManager, Control, RequestOp};
pub use call::cno::{CnoParam, CnoStep, CnoWait, CNO_FIELD_ALL};
pub use call::cr::{CrParam, CR_FIELD_ALL};
pub use call::csp::{CspParam, CSP_FIELD_ALL};
pub use call::ep::{EpChanges, EpParam, VALUE_UNKNOWN};
pub use call::evd::{EvdParam, EvdState, EvdWait, Passed, WaitStep, CM_LOOK_US, EVD_FIELD_ALL};
pub use call::ia::{AsyncEvd, AsyncEvdRef};
pub use call::lmr::{LmrCreated, LmrParam, LMR_FIELD_ALL};
pub use call::post::door::{Door, Locked};
pub use call::post::{poster, shared, PostOp};
pub use call::psp::{PspParam, ANY_CONN_QUAL, PSP_FIELD_ALL};
pub use call::pz::{PzParam, PZ_FIELD_ALL};
pub use call::rmr::{RmrParam, RMR_FIELD_ALL};
pub use call::rsp::{RspParam, RSP_FIELD_ALL};
pub use call::srq::{SrqParam, SRQ_FIELD_ALL};
pub use call::{counters, device_error};
pub use error::{DatError, DatResult, ErrorType, Subtype};
pub use event::{Event, EventData, EventNumber};
pub use handle::{
    AhHandle, AnyHandle, CnoHandle, CrHandle, CspHandle, EpHandle, EvdHandle, IaHandle, Kind, LmrHandle, Named,
    PspHandle, PzHandle, RawHandle, RmrHandle, RspHandle, SrqHandle,
};
pub use object::cno::{ProxyAgent, Signal};
pub use object::csp::Comm;
pub use object::evd::TIMEOUT_INFINITE;
pub use object::ia::MAX_IA_NAME;
pub use object::rmr::RmrScope;
pub use object::rmr::BINDS_IN_FLIGHT;
pub use provider::Provider;
pub use storage::{Inline, Storage};
