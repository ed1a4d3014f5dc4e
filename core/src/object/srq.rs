//! The state of a Shared Receive Queue and its own rules; the DAT calls on it are in
//! `crate::call::srq`.

use crate::backend::Backend;
use crate::handle::{IaHandle, PzHandle};
use crate::types::SrqAttr;

pub(crate) struct Srq<B: Backend> {
    pub(crate) ia: IaHandle,
    pub(crate) pz: PzHandle,
    pub(crate) srq: B::Srq,
    pub(crate) attr: SrqAttr,
    /// EPs receiving from it.
    pub(crate) ep_refs: u32,
    /// Receives posted and not yet completed.
    pub(crate) outstanding: u32,
    pub(crate) context: u64,
}
