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
