//! The state of a Reserved Service Point and its own rules; the DAT calls on it are in
//! `crate::call::rsp`.

use crate::backend::{Backend, Listener};
use crate::handle::{EpHandle, EvdHandle, IaHandle};

pub(crate) struct Rsp<B: Backend> {
    pub(crate) ia: IaHandle,
    pub(crate) conn_qual: u64,
    pub(crate) evd: EvdHandle,
    pub(crate) ep: EpHandle,
    pub(crate) listener: Option<Listener<B>>,
    pub(crate) context: u64,
}
