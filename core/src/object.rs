//! The objects' state and each object's own rules, one module per DAT
//! object, beneath the provider that holds them and the DAT calls on
//! them: nothing here reaches the provider, so the calls
//! (`crate::call::ep`, `crate::call::lmr`, ..., and the posts of
//! `crate::call::post`) build on these modules and never the other way
//! round.

pub(crate) mod ah;
pub(crate) mod cno;
pub(crate) mod cr;
pub(crate) mod csp;
pub(crate) mod ep;
pub(crate) mod evd;
pub(crate) mod ia;
pub(crate) mod lmr;
pub(crate) mod owned;
pub(crate) mod psp;
pub(crate) mod pz;
pub(crate) mod rmr;
pub(crate) mod rsp;
pub(crate) mod srq;
