//! Common Service Point (CSP): dat_csp_create, dat_csp_query,
//! dat_csp_free and dat_ep_common_connect of `<dat2/dat.h>` (DAT 2.0).
//!
//! A CSP listens on a socket address, the port it carries included,
//! rather than on a connection qualifier; dat_ep_common_connect connects
//! to such an address. Every transport under udat listens and connects on
//! an rdma_cm port, and a connection qualifier that fits 16 bits is that
//! port, so a CSP is a PSP (`DAT_PSP_CONSUMER_FLAG`) listening on its
//! address's port, and its requests arrive as a PSP's do
//! (`DAT_CONNECTION_REQUEST_EVENT`, the CSP in `sp_handle`). It lives among
//! the PSPs and shares their qualifiers: a port a PSP, RSP or CSP of the
//! IA listens on is `DAT_PORT_IN_USE`.
//!
//! The addresses are Linux's `sockaddr_in` and `sockaddr_in6` (the
//! `DAT_SOCK_ADDR` of `<dat2/dat_platform_specific.h>`): the family in the
//! first two bytes, in host order, the port in the next two, in network
//! order.

use super::ep::EpConnect;
use crate::backend::Backend;
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{CspHandle, EpHandle, EvdHandle, IaHandle, PspHandle};
use crate::object::csp::{Comm, Common};
use crate::object::psp::Psp;
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;
use crate::types::{ConnectFlags, IaAddress, PspFlags, Qos};

/// `DAT_CSP_FIELD_ALL`.
pub const CSP_FIELD_ALL: u32 = 0x0f;

/// `AF_INET` of Linux.
const AF_INET: i32 = 2;
/// `AF_INET6` of Linux.
const AF_INET6: i32 = 10;
/// `SOCK_STREAM` of Linux.
const SOCK_STREAM: i32 = 1;
/// `IPPROTO_TCP`.
const IPPROTO_TCP: i32 = 6;

/// `DAT_CSP_PARAM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CspParam {
    /// The IA the CSP belongs to.
    pub ia: IaHandle,
    /// The communicator it was created with.
    pub comm: Comm,
    /// The address it listens on, its port included.
    pub address: IaAddress,
    /// The EVD its connection requests go to.
    pub evd: EvdHandle,
}

impl IaAddress {
    /// The address family, for the two families udat knows.
    fn family(&self) -> Option<i32> {
        let family = i32::from(u16::from_ne_bytes([self.bytes[0], self.bytes[1]]));
        matches!(family, AF_INET | AF_INET6).then_some(family)
    }

    /// The port (`sin_port`, `sin6_port`), in host order.
    pub fn port(&self) -> Option<u16> {
        self.family().map(|_| u16::from_be_bytes([self.bytes[2], self.bytes[3]]))
    }

    /// The host part: `sin_addr` or `sin6_addr`.
    fn host(&self) -> &[u8] {
        match self.family() {
            Some(AF_INET) => &self.bytes[4..8],
            Some(_) => &self.bytes[8..24],
            None => &[],
        }
    }
}

signature! {
    /// dat_csp_create's parameters (`<dat2/dat.h>`, DAT 2.0).
    pub(crate) enum CspCreate { IaHandle, Communicator, Address, EvdHandle, CspHandle }

    /// dat_csp_query's parameters (`<dat2/dat.h>`, DAT 2.0).
    pub(crate) enum CspQuery { CspHandle, CspParamMask, CspParam }

    /// dat_ep_common_connect's parameters (`<dat2/dat.h>`, DAT 2.0).
    pub(crate) enum EpCommonConnect { EpHandle, RemoteIaAddress, Timeout, PrivateDataSize, PrivateData }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_csp_create: listen on `address` of `ia`, its port included, for
    /// sockets of `comm`; requests arrive on `evd` (which takes connection
    /// requests, as a PSP's). The address is the IA's own, or the
    /// wildcard of its family.
    ///
    /// Errors: a `comm` of no family udat knows, or of another family
    /// than `address`, is `DAT_INVALID_ARG2`; one that is not a stream of
    /// TCP's port space (the port space of rdma_cm's `RDMA_PS_TCP`, which
    /// every udat transport listens in) is `DAT_MODEL_NOT_SUPPORTED`; an
    /// address of no family udat knows, with port 0, or of another host
    /// is `DAT_INVALID_ADDRESS`; a port the IA listens on already is
    /// `DAT_PORT_IN_USE`.
    pub fn csp_create(
        &mut self,
        ia: IaHandle,
        comm: &Comm,
        address: &IaAddress,
        evd: EvdHandle,
    ) -> DatResult<CspHandle> {
        let own = self.ia(ia)?.attr.ia_address;
        if !matches!(comm.domain, AF_INET | AF_INET6) || address.family().is_some_and(|f| f != comm.domain) {
            return Err(DatError::invalid(CspCreate::Communicator));
        }
        if comm.socket_type != SOCK_STREAM || !matches!(comm.protocol, 0 | IPPROTO_TCP) {
            return Err(DatError::of(ErrorType::ModelNotSupported));
        }
        let port = address.port().filter(|p| *p != 0).ok_or(DatError::of(ErrorType::InvalidAddress))?;
        let wildcard = address.host().iter().all(|b| *b == 0);
        if !wildcard && (address.family() != own.family() || address.host() != own.host()) {
            return Err(DatError::of(ErrorType::InvalidAddress));
        }
        if self.conn_qual_taken(ia, u64::from(port)) {
            return Err(DatError::of(ErrorType::PortInUse));
        }
        let common = Common { comm: *comm, address: *address };
        self.sp_create(ia, u64::from(port), evd, PspFlags::Consumer, Some(common)).map(|h| CspHandle(h.0))
    }

    /// dat_csp_query.
    pub fn csp_query(&self, csp: CspHandle, mask: u32) -> DatResult<CspParam> {
        let (p, common) = self.csp(csp)?;
        if mask & !CSP_FIELD_ALL != 0 {
            return Err(DatError::invalid(CspQuery::CspParamMask));
        }
        Ok(CspParam { ia: p.ia, comm: common.comm, address: common.address, evd: p.evd })
    }

    /// dat_csp_free: stop listening. Connection Requests already
    /// delivered live on, as a PSP's (dat_psp_free(3DAT)).
    pub fn csp_free(&mut self, csp: CspHandle) -> DatResult<()> {
        self.csp(csp)?;
        self.psp_destroy(PspHandle(csp.0));
        Ok(())
    }

    /// The CSP `h` names, and what makes it one.
    fn csp(&self, h: CspHandle) -> DatResult<(&Psp<B>, Common)> {
        let p = self.psps.get(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleCsp))?;
        p.common.map(|c| (p, c)).ok_or(DatError::invalid_handle(Subtype::InvalidHandleCsp))
    }

    /// dat_ep_common_connect: dat_ep_connect(3DAT) to the port `remote`
    /// carries (the connection qualifier is that port), with the default
    /// quality of service and flags. An address of no family udat knows,
    /// or with port 0, is `DAT_INVALID_ADDRESS`; every other rule is
    /// dat_ep_connect(3DAT)'s, its arguments numbered as this call has
    /// them (the timeout third, the private data fourth), and so are the
    /// events.
    pub fn ep_common_connect(
        &mut self,
        ep: EpHandle,
        remote: &IaAddress,
        timeout_us: u32,
        private_data: &[u8],
    ) -> DatResult<()> {
        self.ep(ep)?;
        let port = remote.port().filter(|p| *p != 0).ok_or(DatError::of(ErrorType::InvalidAddress))?;
        let connected = self.ep_connect(
            ep,
            remote,
            u64::from(port),
            timeout_us,
            private_data,
            Qos::BEST_EFFORT,
            ConnectFlags::DEFAULT,
        );
        // dat_ep_connect(3DAT)'s refusals of the arguments this call
        // passes on, renumbered as this call has them.
        const TIMEOUT: Subtype = DatError::invalid_arg(EpConnect::Timeout.position()).subtype();
        const PRIVATE_DATA_SIZE: Subtype = DatError::invalid_arg(EpConnect::PrivateDataSize.position()).subtype();
        connected.map_err(|e| match e.subtype() {
            TIMEOUT => DatError::invalid(EpCommonConnect::Timeout),
            PRIVATE_DATA_SIZE => DatError::invalid(EpCommonConnect::PrivateDataSize),
            _ => e,
        })
    }
}
