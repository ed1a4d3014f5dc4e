//! udat-testkit: the rigs udat's tests, benches and fuzz targets share,
//! in one crate that is never shipped (`publish = false`, a dev-dependency
//! only).
//!
//! - [`mock`]: a deterministic, scriptable backend, for the core's
//!   conformance tests and the reference model.
//! - [`null`]: a backend that only hands back one completion per post,
//!   for the benches of the DAT layer.
//! - [`suite`]: the transport suite, run on every backend through its
//!   [`suite::Fabric`] and [`transport_suite!`].
//! - [`reference`](mod@reference): the reference model of the DAT rules the core is held
//!   to by a proptest and a fuzz target.

pub mod mock;
pub mod null;
pub mod reference;
pub mod suite;

use udat_core::backend::Backend;
use udat_core::{Provider, Storage};

/// A provider over `backend` with `storage`, built in its box
/// ([`Provider::init_in`]): a rig's inline storage is too large to pass
/// through a test thread's stack in a debug build.
pub fn boxed<B: Backend, S: Storage>(backend: B, storage: S) -> Box<Provider<B, S>> {
    let mut slot = Box::new_uninit();
    Provider::init_in(&mut slot, backend, storage);
    // SAFETY: `init_in` wrote the whole provider.
    unsafe { slot.assume_init() }
}
