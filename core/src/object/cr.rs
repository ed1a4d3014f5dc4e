//! The state of a Connection Request and its own rules; the DAT calls on it are in
//! `crate::call::cr`.

use crate::backend::{Backend, ConnReq, PrivateData};
use crate::handle::{EpHandle, IaHandle, PspHandle};
use crate::types::IaAddress;

pub(crate) struct Cr<B: Backend> {
    pub(crate) ia: IaHandle,
    /// The PSP it arrived at; null for an RSP.
    pub(crate) psp: PspHandle,
    pub(crate) conn_qual: u64,
    /// The EP the service point provided, if any.
    pub(crate) local_ep: EpHandle,
    pub(crate) remote: IaAddress,
    pub(crate) remote_port: u64,
    pub(crate) private_data: PrivateData,
    pub(crate) request: ConnReq<B>,
    pub(crate) context: u64,
    /// The requester's QP is UD: only a UD EP may accept it.
    pub(crate) ud: bool,
}
