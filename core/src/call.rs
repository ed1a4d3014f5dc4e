//! The DAT calls: one module per object (`ia`, `pz`, `lmr`, `rmr`, `evd`,
//! `cno`, `ep`, `psp`, `rsp`, `cr`, `srq`, and `csp`, whose objects live
//! among the PSPs), each a block of [`Provider`](crate::Provider) methods
//! citing the man pages (or, for DAT 2.0, the header) it implements; the
//! IB extension's UD Endpoints (`ud`) and counters (`counters`); the
//! consumer contexts (`context`); how a transport's own errors become
//! asynchronous events (`device_error`); and every post (`post`).
//!
//! Everything here stands on the provider and the objects beneath it, and
//! nothing beneath reaches up here.

pub(crate) mod cno;
pub(crate) mod context;
pub mod counters;
pub(crate) mod cr;
pub(crate) mod csp;
pub mod device_error;
pub(crate) mod ep;
pub(crate) mod evd;
pub(crate) mod ia;
pub(crate) mod lmr;
pub(crate) mod post;
pub(crate) mod psp;
pub(crate) mod pz;
pub(crate) mod rmr;
pub(crate) mod rsp;
pub(crate) mod srq;
pub(crate) mod ud;
