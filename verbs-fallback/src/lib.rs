//! udat-verbs: the `udat_core::Backend` over libibverbs and librdmacm, for
//! any HCA and for soft-RoCE (rdma_rxe).
//!
//! This crate is being built: the bindings, the backend and the soft-RoCE
//! test harness arrive with the verbs work. Until then udat has no
//! hardware backend, and says so in its README.
