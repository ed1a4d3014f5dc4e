//! The state of a Public Service Point and its own rules; the DAT calls on it are in
//! `crate::call::psp`.

use crate::backend::{Backend, Listener};
use crate::handle::{EvdHandle, IaHandle};
use crate::object::csp::Common;
use crate::types::PspFlags;

pub(crate) struct Psp<B: Backend> {
    pub(crate) ia: IaHandle,
    pub(crate) conn_qual: u64,
    pub(crate) evd: EvdHandle,
    pub(crate) flags: PspFlags,
    /// The socket address of a Common Service Point (DAT 2.0's CSPs live
    /// among the PSPs); `None` for a PSP.
    pub(crate) common: Option<Common>,
    pub(crate) listener: Option<Listener<B>>,
    pub(crate) context: u64,
}
