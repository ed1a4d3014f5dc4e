//! The state of a Common Service Point: its communicator and address; the
//! DAT calls on it are in `crate::call::csp`, and it lives among the PSPs.

use crate::types::IaAddress;

/// `DAT_COMM`: the kind of socket a CSP's address is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Comm {
    /// The address family (`AF_INET`, `AF_INET6`).
    pub domain: i32,
    /// The socket type.
    pub socket_type: i32,
    /// The protocol, 0 for the type's own.
    pub protocol: i32,
}

/// What makes a PSP a CSP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Common {
    pub(crate) comm: Comm,
    pub(crate) address: IaAddress,
}
