//! DAT return codes: `DAT_RETURN` of `<dat2/dat_error.h>`, bit for bit.
//!
//! A `DAT_RETURN` is `class (bits 31–30) | type (29–16) | subtype (15–0)`.
//! Errors carry `DAT_CLASS_ERROR`; success is `0`. [`DatError::to_raw`] gives
//! the value a C consumer sees, so the C ABI maps errors 1:1.

use core::fmt;

use crate::signature::{signature, Parameter};

/// `DAT_CLASS_ERROR`: set on every error return.
pub const CLASS_ERROR: u32 = 0x8000_0000;
/// `DAT_TYPE_MASK`.
pub const TYPE_MASK: u32 = 0x3fff_0000;
/// `DAT_SUBTYPE_MASK`.
pub const SUBTYPE_MASK: u32 = 0x0000_ffff;
/// `DAT_SUCCESS`.
pub const SUCCESS: u32 = 0;

/// `DAT_RETURN_TYPE`: the major kind of an error (the `DAT_GET_TYPE` bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ErrorType {
    /// The operation was aborted.
    #[doc(alias = "DAT_ABORT")]
    Abort = 0x0001_0000,
    /// The connection qualifier is taken by another PSP or RSP (dat_psp_create(3DAT)).
    #[doc(alias = "DAT_CONN_QUAL_IN_USE")]
    ConnQualInUse = 0x0002_0000,
    /// The provider ran out of a resource; the subtype says which.
    #[doc(alias = "DAT_INSUFFICIENT_RESOURCES")]
    InsufficientResources = 0x0003_0000,
    /// The provider or its transport failed in a way no other type describes.
    #[doc(alias = "DAT_INTERNAL_ERROR")]
    InternalError = 0x0004_0000,
    /// A handle names no live object of its kind; the subtype says which handle.
    #[doc(alias = "DAT_INVALID_HANDLE")]
    InvalidHandle = 0x0005_0000,
    /// An argument is out of range; the subtype gives its position.
    #[doc(alias = "DAT_INVALID_PARAMETER")]
    InvalidParameter = 0x0006_0000,
    /// An object is in a state the call refuses; the subtype names the state.
    #[doc(alias = "DAT_INVALID_STATE")]
    InvalidState = 0x0007_0000,
    /// A length or a segment count exceeds what the object allows.
    #[doc(alias = "DAT_LENGTH_ERROR")]
    LengthError = 0x0008_0000,
    /// The provider does not support the requested model (for example an upcall policy).
    #[doc(alias = "DAT_MODEL_NOT_SUPPORTED")]
    ModelNotSupported = 0x0009_0000,
    /// No registered provider has the name (dat_ia_open(3DAT)).
    #[doc(alias = "DAT_PROVIDER_NOT_FOUND")]
    ProviderNotFound = 0x000a_0000,
    /// An access exceeded the privileges of its memory region; the subtype says which access.
    #[doc(alias = "DAT_PRIVILEGES_VIOLATION")]
    PrivilegesViolation = 0x000b_0000,
    /// An access crossed protection zones; the subtype says which access.
    #[doc(alias = "DAT_PROTECTION_VIOLATION")]
    ProtectionViolation = 0x000c_0000,
    /// The EVD holds no event (dat_evd_dequeue(3DAT)).
    #[doc(alias = "DAT_QUEUE_EMPTY")]
    QueueEmpty = 0x000d_0000,
    /// The queue has no room for another entry.
    #[doc(alias = "DAT_QUEUE_FULL")]
    QueueFull = 0x000e_0000,
    /// The timeout passed before the wait was satisfied (dat_evd_wait(3DAT), dat_cno_wait(3DAT)).
    #[doc(alias = "DAT_TIMEOUT_EXPIRED")]
    TimeoutExpired = 0x000f_0000,
    /// A provider is already registered under the name.
    #[doc(alias = "DAT_PROVIDER_ALREADY_REGISTERED")]
    ProviderAlreadyRegistered = 0x0010_0000,
    /// The provider still has open IAs.
    #[doc(alias = "DAT_PROVIDER_IN_USE")]
    ProviderInUse = 0x0011_0000,
    /// An address is unsupported, unreachable or malformed; the subtype says which.
    #[doc(alias = "DAT_INVALID_ADDRESS")]
    InvalidAddress = 0x0012_0000,
    /// A wait was interrupted (dat_evd_wait(3DAT), dat_cno_wait(3DAT)).
    #[doc(alias = "DAT_INTERRUPTED_CALL")]
    InterruptedCall = 0x0013_0000,
    /// No free connection qualifier was found (dat_psp_create_any(3DAT)).
    #[doc(alias = "DAT_CONN_QUAL_UNAVAILABLE")]
    ConnQualUnavailable = 0x0014_0000,
    /// The operation is not allowed on a reserved LMR.
    #[doc(alias = "DAT_RESERVED_LMR")]
    ReservedLmr = 0x0015_0000,
    /// The port is in use.
    #[doc(alias = "DAT_PORT_IN_USE")]
    PortInUse = 0x0016_0000,
    /// The transport does not support the communication asked for.
    #[doc(alias = "DAT_COMM_NOT_SUPPORTED")]
    CommNotSupported = 0x0017_0000,
    /// The provider does not implement the call.
    #[doc(alias = "DAT_NOT_IMPLEMENTED")]
    NotImplemented = 0x3fff_0000,
}

impl ErrorType {
    /// Every type the header defines.
    pub const ALL: [ErrorType; 24] = [
        ErrorType::Abort,
        ErrorType::ConnQualInUse,
        ErrorType::InsufficientResources,
        ErrorType::InternalError,
        ErrorType::InvalidHandle,
        ErrorType::InvalidParameter,
        ErrorType::InvalidState,
        ErrorType::LengthError,
        ErrorType::ModelNotSupported,
        ErrorType::ProviderNotFound,
        ErrorType::PrivilegesViolation,
        ErrorType::ProtectionViolation,
        ErrorType::QueueEmpty,
        ErrorType::QueueFull,
        ErrorType::TimeoutExpired,
        ErrorType::ProviderAlreadyRegistered,
        ErrorType::ProviderInUse,
        ErrorType::InvalidAddress,
        ErrorType::InterruptedCall,
        ErrorType::ConnQualUnavailable,
        ErrorType::ReservedLmr,
        ErrorType::PortInUse,
        ErrorType::CommNotSupported,
        ErrorType::NotImplemented,
    ];

    /// The type whose bits these are (`DAT_GET_TYPE(raw)`), if the header defines it.
    pub fn from_raw(raw: u32) -> Option<ErrorType> {
        let bits = raw & TYPE_MASK;
        Self::ALL.iter().copied().find(|t| *t as u32 == bits)
    }

    /// The C name (what `dat_strerror` gives as the major message).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorType::Abort => "DAT_ABORT",
            ErrorType::ConnQualInUse => "DAT_CONN_QUAL_IN_USE",
            ErrorType::InsufficientResources => "DAT_INSUFFICIENT_RESOURCES",
            ErrorType::InternalError => "DAT_INTERNAL_ERROR",
            ErrorType::InvalidHandle => "DAT_INVALID_HANDLE",
            ErrorType::InvalidParameter => "DAT_INVALID_PARAMETER",
            ErrorType::InvalidState => "DAT_INVALID_STATE",
            ErrorType::LengthError => "DAT_LENGTH_ERROR",
            ErrorType::ModelNotSupported => "DAT_MODEL_NOT_SUPPORTED",
            ErrorType::ProviderNotFound => "DAT_PROVIDER_NOT_FOUND",
            ErrorType::PrivilegesViolation => "DAT_PRIVILEGES_VIOLATION",
            ErrorType::ProtectionViolation => "DAT_PROTECTION_VIOLATION",
            ErrorType::QueueEmpty => "DAT_QUEUE_EMPTY",
            ErrorType::QueueFull => "DAT_QUEUE_FULL",
            ErrorType::TimeoutExpired => "DAT_TIMEOUT_EXPIRED",
            ErrorType::ProviderAlreadyRegistered => "DAT_PROVIDER_ALREADY_REGISTERED",
            ErrorType::ProviderInUse => "DAT_PROVIDER_IN_USE",
            ErrorType::InvalidAddress => "DAT_INVALID_ADDRESS",
            ErrorType::InterruptedCall => "DAT_INTERRUPTED_CALL",
            ErrorType::ConnQualUnavailable => "DAT_CONN_QUAL_UNAVAILABLE",
            ErrorType::ReservedLmr => "DAT_RESERVED_LMR",
            ErrorType::PortInUse => "DAT_PORT_IN_USE",
            ErrorType::CommNotSupported => "DAT_COMM_NOT_SUPPORTED",
            ErrorType::NotImplemented => "DAT_NOT_IMPLEMENTED",
        }
    }
}

/// `DAT_RETURN_SUBTYPE` of `<dat2/dat_error.h>`, in the header's order (the
/// values are the C enum's implicit ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Subtype {
    /// No further detail.
    #[doc(alias = "DAT_NO_SUBTYPE")]
    NoSubtype = 0,
    /// A wait was interrupted by a signal.
    #[doc(alias = "DAT_SUB_INTERRUPTED")]
    SubInterrupted = 1,
    /// Out of memory.
    #[doc(alias = "DAT_RESOURCE_MEMORY")]
    ResourceMemory = 2,
    /// Out of device resources.
    #[doc(alias = "DAT_RESOURCE_DEVICE")]
    ResourceDevice = 3,
    /// No room for another endpoint.
    #[doc(alias = "DAT_RESOURCE_TEP")]
    ResourceTep = 4,
    /// No room for another event dispatcher or for its events.
    #[doc(alias = "DAT_RESOURCE_TEVD")]
    ResourceTevd = 5,
    /// No room for another protection zone.
    #[doc(alias = "DAT_RESOURCE_PROTECTION_DOMAIN")]
    ResourceProtectionDomain = 6,
    /// No room for another memory region.
    #[doc(alias = "DAT_RESOURCE_MEMORY_REGION")]
    ResourceMemoryRegion = 7,
    /// No room for another error handler.
    #[doc(alias = "DAT_RESOURCE_ERROR_HANDLER")]
    ResourceErrorHandler = 8,
    /// Out of flow-control credits.
    #[doc(alias = "DAT_RESOURCE_CREDITS")]
    ResourceCredits = 9,
    /// No room for another shared receive queue.
    #[doc(alias = "DAT_RESOURCE_SRQ")]
    ResourceSrq = 10,
    /// The IA handle.
    #[doc(alias = "DAT_INVALID_HANDLE_IA")]
    InvalidHandleIa = 11,
    /// The EP handle.
    #[doc(alias = "DAT_INVALID_HANDLE_EP")]
    InvalidHandleEp = 12,
    /// The LMR handle.
    #[doc(alias = "DAT_INVALID_HANDLE_LMR")]
    InvalidHandleLmr = 13,
    /// The RMR handle.
    #[doc(alias = "DAT_INVALID_HANDLE_RMR")]
    InvalidHandleRmr = 14,
    /// The PZ handle.
    #[doc(alias = "DAT_INVALID_HANDLE_PZ")]
    InvalidHandlePz = 15,
    /// The PSP handle.
    #[doc(alias = "DAT_INVALID_HANDLE_PSP")]
    InvalidHandlePsp = 16,
    /// The RSP handle.
    #[doc(alias = "DAT_INVALID_HANDLE_RSP")]
    InvalidHandleRsp = 17,
    /// The CR handle.
    #[doc(alias = "DAT_INVALID_HANDLE_CR")]
    InvalidHandleCr = 18,
    /// The CNO handle.
    #[doc(alias = "DAT_INVALID_HANDLE_CNO")]
    InvalidHandleCno = 19,
    /// The EVD handle meant for connection requests.
    #[doc(alias = "DAT_INVALID_HANDLE_EVD_CR")]
    InvalidHandleEvdCr = 20,
    /// The EVD handle meant for request completions.
    #[doc(alias = "DAT_INVALID_HANDLE_EVD_REQUEST")]
    InvalidHandleEvdRequest = 21,
    /// The EVD handle meant for receive completions.
    #[doc(alias = "DAT_INVALID_HANDLE_EVD_RECV")]
    InvalidHandleEvdRecv = 22,
    /// The EVD handle meant for connection events.
    #[doc(alias = "DAT_INVALID_HANDLE_EVD_CONN")]
    InvalidHandleEvdConn = 23,
    /// The EVD handle meant for asynchronous events.
    #[doc(alias = "DAT_INVALID_HANDLE_EVD_ASYNC")]
    InvalidHandleEvdAsync = 24,
    /// The SRQ handle.
    #[doc(alias = "DAT_INVALID_HANDLE_SRQ")]
    InvalidHandleSrq = 25,
    /// The CSP handle.
    #[doc(alias = "DAT_INVALID_HANDLE_CSP")]
    InvalidHandleCsp = 26,
    /// The handle in the first argument.
    #[doc(alias = "DAT_INVALID_HANDLE1")]
    InvalidHandle1 = 27,
    /// The handle in the second argument.
    #[doc(alias = "DAT_INVALID_HANDLE2")]
    InvalidHandle2 = 28,
    /// The handle in the third argument.
    #[doc(alias = "DAT_INVALID_HANDLE3")]
    InvalidHandle3 = 29,
    /// The handle in the fourth argument.
    #[doc(alias = "DAT_INVALID_HANDLE4")]
    InvalidHandle4 = 30,
    /// The handle in the fifth argument.
    #[doc(alias = "DAT_INVALID_HANDLE5")]
    InvalidHandle5 = 31,
    /// The handle in the sixth argument.
    #[doc(alias = "DAT_INVALID_HANDLE6")]
    InvalidHandle6 = 32,
    /// The handle in the seventh argument.
    #[doc(alias = "DAT_INVALID_HANDLE7")]
    InvalidHandle7 = 33,
    /// The handle in the eighth argument.
    #[doc(alias = "DAT_INVALID_HANDLE8")]
    InvalidHandle8 = 34,
    /// The handle in the ninth argument.
    #[doc(alias = "DAT_INVALID_HANDLE9")]
    InvalidHandle9 = 35,
    /// The handle in the tenth argument.
    #[doc(alias = "DAT_INVALID_HANDLE10")]
    InvalidHandle10 = 36,
    /// The first argument.
    #[doc(alias = "DAT_INVALID_ARG1")]
    InvalidArg1 = 37,
    /// The second argument.
    #[doc(alias = "DAT_INVALID_ARG2")]
    InvalidArg2 = 38,
    /// The third argument.
    #[doc(alias = "DAT_INVALID_ARG3")]
    InvalidArg3 = 39,
    /// The fourth argument.
    #[doc(alias = "DAT_INVALID_ARG4")]
    InvalidArg4 = 40,
    /// The fifth argument.
    #[doc(alias = "DAT_INVALID_ARG5")]
    InvalidArg5 = 41,
    /// The sixth argument.
    #[doc(alias = "DAT_INVALID_ARG6")]
    InvalidArg6 = 42,
    /// The seventh argument.
    #[doc(alias = "DAT_INVALID_ARG7")]
    InvalidArg7 = 43,
    /// The eighth argument.
    #[doc(alias = "DAT_INVALID_ARG8")]
    InvalidArg8 = 44,
    /// The ninth argument.
    #[doc(alias = "DAT_INVALID_ARG9")]
    InvalidArg9 = 45,
    /// The tenth argument.
    #[doc(alias = "DAT_INVALID_ARG10")]
    InvalidArg10 = 46,
    /// The EP is unconnected (`DAT_EP_STATE_UNCONNECTED`).
    #[doc(alias = "DAT_INVALID_STATE_EP_UNCONNECTED")]
    InvalidStateEpUnconnected = 47,
    /// The EP has an active connection pending (`DAT_EP_STATE_ACTIVE_CONNECTION_PENDING`).
    #[doc(alias = "DAT_INVALID_STATE_EP_ACTCONNPENDING")]
    InvalidStateEpActconnpending = 48,
    /// The EP has a passive connection pending (`DAT_EP_STATE_PASSIVE_CONNECTION_PENDING`).
    #[doc(alias = "DAT_INVALID_STATE_EP_PASSCONNPENDING")]
    InvalidStateEpPassconnpending = 49,
    /// The EP has a tentative connection pending (`DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING`).
    #[doc(alias = "DAT_INVALID_STATE_EP_TENTCONNPENDING")]
    InvalidStateEpTentconnpending = 50,
    /// The EP is connected (`DAT_EP_STATE_CONNECTED`).
    #[doc(alias = "DAT_INVALID_STATE_EP_CONNECTED")]
    InvalidStateEpConnected = 51,
    /// The EP is disconnected (`DAT_EP_STATE_DISCONNECTED`).
    #[doc(alias = "DAT_INVALID_STATE_EP_DISCONNECTED")]
    InvalidStateEpDisconnected = 52,
    /// The EP is reserved for an RSP (`DAT_EP_STATE_RESERVED`).
    #[doc(alias = "DAT_INVALID_STATE_EP_RESERVED")]
    InvalidStateEpReserved = 53,
    /// The EP's connection awaits completion (`DAT_EP_STATE_COMPLETION_PENDING`).
    #[doc(alias = "DAT_INVALID_STATE_EP_COMPLPENDING")]
    InvalidStateEpComplpending = 54,
    /// The EP has a disconnect pending (`DAT_EP_STATE_DISCONNECT_PENDING`).
    #[doc(alias = "DAT_INVALID_STATE_EP_DISCPENDING")]
    InvalidStateEpDiscpending = 55,
    /// The EP is under the provider's control.
    #[doc(alias = "DAT_INVALID_STATE_EP_PROVIDERCONTROL")]
    InvalidStateEpProvidercontrol = 56,
    /// The EP has no transport queue to post to yet.
    #[doc(alias = "DAT_INVALID_STATE_EP_NOTREADY")]
    InvalidStateEpNotready = 57,
    /// The EP's receive watermark forbids the call (dat_ep_set_watermark(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_EP_RECV_WATERMARK")]
    InvalidStateEpRecvWatermark = 58,
    /// The EP's PZ forbids the call.
    #[doc(alias = "DAT_INVALID_STATE_EP_PZ")]
    InvalidStateEpPz = 59,
    /// The EP's request EVD forbids the call.
    #[doc(alias = "DAT_INVALID_STATE_EP_EVD_REQUEST")]
    InvalidStateEpEvdRequest = 60,
    /// The EP's receive EVD forbids the call.
    #[doc(alias = "DAT_INVALID_STATE_EP_EVD_RECV")]
    InvalidStateEpEvdRecv = 61,
    /// The EP's connection EVD forbids the call.
    #[doc(alias = "DAT_INVALID_STATE_EP_EVD_CONNECT")]
    InvalidStateEpEvdConnect = 62,
    /// The EP lacks the EVDs to connect (`DAT_EP_STATE_UNCONFIGURED_UNCONNECTED`).
    #[doc(alias = "DAT_INVALID_STATE_EP_UNCONFIGURED")]
    InvalidStateEpUnconfigured = 63,
    /// The EP is reserved and lacks the EVDs to connect (`DAT_EP_STATE_UNCONFIGURED_RESERVED`).
    #[doc(alias = "DAT_INVALID_STATE_EP_UNCONFRESERVED")]
    InvalidStateEpUnconfreserved = 64,
    /// The EP has a passive connection pending and lacks its EVDs (`DAT_EP_STATE_UNCONFIGURED_PASSIVE`).
    #[doc(alias = "DAT_INVALID_STATE_EP_UNCONFPASSIVE")]
    InvalidStateEpUnconfpassive = 65,
    /// The EP has a tentative connection pending and lacks its EVDs (`DAT_EP_STATE_UNCONFIGURED_TENTATIVE`).
    #[doc(alias = "DAT_INVALID_STATE_EP_UNCONFTENTATIVE")]
    InvalidStateEpUnconftentative = 66,
    /// EVDs still feed the CNO (dat_cno_free(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_CNO_IN_USE")]
    InvalidStateCnoInUse = 67,
    /// The CNO can no longer be waited on.
    #[doc(alias = "DAT_INVALID_STATE_CNO_DEAD")]
    InvalidStateCnoDead = 68,
    /// The EVD is open.
    #[doc(alias = "DAT_INVALID_STATE_EVD_OPEN")]
    InvalidStateEvdOpen = 69,
    /// The EVD is enabled (dat_evd_enable(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_EVD_ENABLED")]
    InvalidStateEvdEnabled = 70,
    /// The EVD is disabled (dat_evd_disable(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_EVD_DISABLED")]
    InvalidStateEvdDisabled = 71,
    /// The EVD is waitable (dat_evd_set_waitable(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_EVD_WAITABLE")]
    InvalidStateEvdWaitable = 72,
    /// The EVD is unwaitable (dat_evd_set_unwaitable(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_EVD_UNWAITABLE")]
    InvalidStateEvdUnwaitable = 73,
    /// An EP, PSP, RSP or SRQ still uses the EVD (dat_evd_free(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_EVD_IN_USE")]
    InvalidStateEvdInUse = 74,
    /// The EVD's notification setup forbids the call.
    #[doc(alias = "DAT_INVALID_STATE_EVD_CONFIG_NOTIFY")]
    InvalidStateEvdConfigNotify = 75,
    /// The EVD's solicited-event setup forbids the call.
    #[doc(alias = "DAT_INVALID_STATE_EVD_CONFIG_SOLICITED")]
    InvalidStateEvdConfigSolicited = 76,
    /// The EVD's threshold setup forbids the call.
    #[doc(alias = "DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD")]
    InvalidStateEvdConfigThreshold = 77,
    /// Another thread already waits on the EVD (dat_evd_wait(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_EVD_WAITER")]
    InvalidStateEvdWaiter = 78,
    /// The EVD is an async EVD, which the call cannot take.
    #[doc(alias = "DAT_INVALID_STATE_EVD_ASYNC")]
    InvalidStateEvdAsync = 79,
    /// The IA still holds objects (dat_ia_close(3DAT), graceful).
    #[doc(alias = "DAT_INVALID_STATE_IA_IN_USE")]
    InvalidStateIaInUse = 80,
    /// An RMR is still bound to the LMR (dat_lmr_free(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_LMR_IN_USE")]
    InvalidStateLmrInUse = 81,
    /// The LMR is already freed.
    #[doc(alias = "DAT_INVALID_STATE_LMR_FREE")]
    InvalidStateLmrFree = 82,
    /// Objects still belong to the PZ (dat_pz_free(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_PZ_IN_USE")]
    InvalidStatePzInUse = 83,
    /// The PZ is already freed.
    #[doc(alias = "DAT_INVALID_STATE_PZ_FREE")]
    InvalidStatePzFree = 84,
    /// The SRQ is operational.
    #[doc(alias = "DAT_INVALID_STATE_SRQ_OPERATIONAL")]
    InvalidStateSrqOperational = 85,
    /// The SRQ is in error.
    #[doc(alias = "DAT_INVALID_STATE_SRQ_ERROR")]
    InvalidStateSrqError = 86,
    /// EPs still use the SRQ (dat_srq_free(3DAT)).
    #[doc(alias = "DAT_INVALID_STATE_SRQ_IN_USE")]
    InvalidStateSrqInUse = 87,
    /// The SRQ is shut down.
    #[doc(alias = "DAT_INVALID_STATE_SRQ_SHUTDOWN")]
    InvalidStateSrqShutdown = 88,
    /// A local read lacked the privilege.
    #[doc(alias = "DAT_PRIVILEGES_READ")]
    PrivilegesRead = 89,
    /// A local write lacked the privilege.
    #[doc(alias = "DAT_PRIVILEGES_WRITE")]
    PrivilegesWrite = 90,
    /// An RDMA read lacked the privilege.
    #[doc(alias = "DAT_PRIVILEGES_RDMA_READ")]
    PrivilegesRdmaRead = 91,
    /// An RDMA write lacked the privilege.
    #[doc(alias = "DAT_PRIVILEGES_RDMA_WRITE")]
    PrivilegesRdmaWrite = 92,
    /// A local read crossed protection zones.
    #[doc(alias = "DAT_PROTECTION_READ")]
    ProtectionRead = 93,
    /// A local write crossed protection zones.
    #[doc(alias = "DAT_PROTECTION_WRITE")]
    ProtectionWrite = 94,
    /// An RDMA read crossed protection zones.
    #[doc(alias = "DAT_PROTECTION_RDMA_READ")]
    ProtectionRdmaRead = 95,
    /// An RDMA write crossed protection zones.
    #[doc(alias = "DAT_PROTECTION_RDMA_WRITE")]
    ProtectionRdmaWrite = 96,
    /// The address family is not supported.
    #[doc(alias = "DAT_INVALID_ADDRESS_UNSUPPORTED")]
    InvalidAddressUnsupported = 97,
    /// No route reaches the address.
    #[doc(alias = "DAT_INVALID_ADDRESS_UNREACHABLE")]
    InvalidAddressUnreachable = 98,
    /// The address is malformed.
    #[doc(alias = "DAT_INVALID_ADDRESS_MALFORMED")]
    InvalidAddressMalformed = 99,
    /// No provider is registered under the name (dat_ia_open(3DAT)).
    #[doc(alias = "DAT_NAME_NOT_REGISTERED")]
    NameNotRegistered = 100,
    /// No provider of the requested major version.
    #[doc(alias = "DAT_MAJOR_NOT_FOUND")]
    MajorNotFound = 101,
    /// No provider of the requested minor version.
    #[doc(alias = "DAT_MINOR_NOT_FOUND")]
    MinorNotFound = 102,
    /// No provider of the requested thread safety.
    #[doc(alias = "DAT_THREAD_SAFETY_NOT_FOUND")]
    ThreadSafetyNotFound = 103,
}

impl Subtype {
    /// Every subtype, in value order.
    pub const ALL: [Subtype; 104] = [
        Subtype::NoSubtype,
        Subtype::SubInterrupted,
        Subtype::ResourceMemory,
        Subtype::ResourceDevice,
        Subtype::ResourceTep,
        Subtype::ResourceTevd,
        Subtype::ResourceProtectionDomain,
        Subtype::ResourceMemoryRegion,
        Subtype::ResourceErrorHandler,
        Subtype::ResourceCredits,
        Subtype::ResourceSrq,
        Subtype::InvalidHandleIa,
        Subtype::InvalidHandleEp,
        Subtype::InvalidHandleLmr,
        Subtype::InvalidHandleRmr,
        Subtype::InvalidHandlePz,
        Subtype::InvalidHandlePsp,
        Subtype::InvalidHandleRsp,
        Subtype::InvalidHandleCr,
        Subtype::InvalidHandleCno,
        Subtype::InvalidHandleEvdCr,
        Subtype::InvalidHandleEvdRequest,
        Subtype::InvalidHandleEvdRecv,
        Subtype::InvalidHandleEvdConn,
        Subtype::InvalidHandleEvdAsync,
        Subtype::InvalidHandleSrq,
        Subtype::InvalidHandleCsp,
        Subtype::InvalidHandle1,
        Subtype::InvalidHandle2,
        Subtype::InvalidHandle3,
        Subtype::InvalidHandle4,
        Subtype::InvalidHandle5,
        Subtype::InvalidHandle6,
        Subtype::InvalidHandle7,
        Subtype::InvalidHandle8,
        Subtype::InvalidHandle9,
        Subtype::InvalidHandle10,
        Subtype::InvalidArg1,
        Subtype::InvalidArg2,
        Subtype::InvalidArg3,
        Subtype::InvalidArg4,
        Subtype::InvalidArg5,
        Subtype::InvalidArg6,
        Subtype::InvalidArg7,
        Subtype::InvalidArg8,
        Subtype::InvalidArg9,
        Subtype::InvalidArg10,
        Subtype::InvalidStateEpUnconnected,
        Subtype::InvalidStateEpActconnpending,
        Subtype::InvalidStateEpPassconnpending,
        Subtype::InvalidStateEpTentconnpending,
        Subtype::InvalidStateEpConnected,
        Subtype::InvalidStateEpDisconnected,
        Subtype::InvalidStateEpReserved,
        Subtype::InvalidStateEpComplpending,
        Subtype::InvalidStateEpDiscpending,
        Subtype::InvalidStateEpProvidercontrol,
        Subtype::InvalidStateEpNotready,
        Subtype::InvalidStateEpRecvWatermark,
        Subtype::InvalidStateEpPz,
        Subtype::InvalidStateEpEvdRequest,
        Subtype::InvalidStateEpEvdRecv,
        Subtype::InvalidStateEpEvdConnect,
        Subtype::InvalidStateEpUnconfigured,
        Subtype::InvalidStateEpUnconfreserved,
        Subtype::InvalidStateEpUnconfpassive,
        Subtype::InvalidStateEpUnconftentative,
        Subtype::InvalidStateCnoInUse,
        Subtype::InvalidStateCnoDead,
        Subtype::InvalidStateEvdOpen,
        Subtype::InvalidStateEvdEnabled,
        Subtype::InvalidStateEvdDisabled,
        Subtype::InvalidStateEvdWaitable,
        Subtype::InvalidStateEvdUnwaitable,
        Subtype::InvalidStateEvdInUse,
        Subtype::InvalidStateEvdConfigNotify,
        Subtype::InvalidStateEvdConfigSolicited,
        Subtype::InvalidStateEvdConfigThreshold,
        Subtype::InvalidStateEvdWaiter,
        Subtype::InvalidStateEvdAsync,
        Subtype::InvalidStateIaInUse,
        Subtype::InvalidStateLmrInUse,
        Subtype::InvalidStateLmrFree,
        Subtype::InvalidStatePzInUse,
        Subtype::InvalidStatePzFree,
        Subtype::InvalidStateSrqOperational,
        Subtype::InvalidStateSrqError,
        Subtype::InvalidStateSrqInUse,
        Subtype::InvalidStateSrqShutdown,
        Subtype::PrivilegesRead,
        Subtype::PrivilegesWrite,
        Subtype::PrivilegesRdmaRead,
        Subtype::PrivilegesRdmaWrite,
        Subtype::ProtectionRead,
        Subtype::ProtectionWrite,
        Subtype::ProtectionRdmaRead,
        Subtype::ProtectionRdmaWrite,
        Subtype::InvalidAddressUnsupported,
        Subtype::InvalidAddressUnreachable,
        Subtype::InvalidAddressMalformed,
        Subtype::NameNotRegistered,
        Subtype::MajorNotFound,
        Subtype::MinorNotFound,
        Subtype::ThreadSafetyNotFound,
    ];

    /// The subtype with this numeric value, if the header defines one.
    pub fn from_raw(raw: u16) -> Option<Subtype> {
        Self::ALL.get(usize::from(raw)).copied()
    }

    /// The C name of the subtype (what `dat_strerror` gives as the minor message).
    pub const fn name(self) -> &'static str {
        match self {
            Subtype::NoSubtype => "DAT_NO_SUBTYPE",
            Subtype::SubInterrupted => "DAT_SUB_INTERRUPTED",
            Subtype::ResourceMemory => "DAT_RESOURCE_MEMORY",
            Subtype::ResourceDevice => "DAT_RESOURCE_DEVICE",
            Subtype::ResourceTep => "DAT_RESOURCE_TEP",
            Subtype::ResourceTevd => "DAT_RESOURCE_TEVD",
            Subtype::ResourceProtectionDomain => "DAT_RESOURCE_PROTECTION_DOMAIN",
            Subtype::ResourceMemoryRegion => "DAT_RESOURCE_MEMORY_REGION",
            Subtype::ResourceErrorHandler => "DAT_RESOURCE_ERROR_HANDLER",
            Subtype::ResourceCredits => "DAT_RESOURCE_CREDITS",
            Subtype::ResourceSrq => "DAT_RESOURCE_SRQ",
            Subtype::InvalidHandleIa => "DAT_INVALID_HANDLE_IA",
            Subtype::InvalidHandleEp => "DAT_INVALID_HANDLE_EP",
            Subtype::InvalidHandleLmr => "DAT_INVALID_HANDLE_LMR",
            Subtype::InvalidHandleRmr => "DAT_INVALID_HANDLE_RMR",
            Subtype::InvalidHandlePz => "DAT_INVALID_HANDLE_PZ",
            Subtype::InvalidHandlePsp => "DAT_INVALID_HANDLE_PSP",
            Subtype::InvalidHandleRsp => "DAT_INVALID_HANDLE_RSP",
            Subtype::InvalidHandleCr => "DAT_INVALID_HANDLE_CR",
            Subtype::InvalidHandleCno => "DAT_INVALID_HANDLE_CNO",
            Subtype::InvalidHandleEvdCr => "DAT_INVALID_HANDLE_EVD_CR",
            Subtype::InvalidHandleEvdRequest => "DAT_INVALID_HANDLE_EVD_REQUEST",
            Subtype::InvalidHandleEvdRecv => "DAT_INVALID_HANDLE_EVD_RECV",
            Subtype::InvalidHandleEvdConn => "DAT_INVALID_HANDLE_EVD_CONN",
            Subtype::InvalidHandleEvdAsync => "DAT_INVALID_HANDLE_EVD_ASYNC",
            Subtype::InvalidHandleSrq => "DAT_INVALID_HANDLE_SRQ",
            Subtype::InvalidHandleCsp => "DAT_INVALID_HANDLE_CSP",
            Subtype::InvalidHandle1 => "DAT_INVALID_HANDLE1",
            Subtype::InvalidHandle2 => "DAT_INVALID_HANDLE2",
            Subtype::InvalidHandle3 => "DAT_INVALID_HANDLE3",
            Subtype::InvalidHandle4 => "DAT_INVALID_HANDLE4",
            Subtype::InvalidHandle5 => "DAT_INVALID_HANDLE5",
            Subtype::InvalidHandle6 => "DAT_INVALID_HANDLE6",
            Subtype::InvalidHandle7 => "DAT_INVALID_HANDLE7",
            Subtype::InvalidHandle8 => "DAT_INVALID_HANDLE8",
            Subtype::InvalidHandle9 => "DAT_INVALID_HANDLE9",
            Subtype::InvalidHandle10 => "DAT_INVALID_HANDLE10",
            Subtype::InvalidArg1 => "DAT_INVALID_ARG1",
            Subtype::InvalidArg2 => "DAT_INVALID_ARG2",
            Subtype::InvalidArg3 => "DAT_INVALID_ARG3",
            Subtype::InvalidArg4 => "DAT_INVALID_ARG4",
            Subtype::InvalidArg5 => "DAT_INVALID_ARG5",
            Subtype::InvalidArg6 => "DAT_INVALID_ARG6",
            Subtype::InvalidArg7 => "DAT_INVALID_ARG7",
            Subtype::InvalidArg8 => "DAT_INVALID_ARG8",
            Subtype::InvalidArg9 => "DAT_INVALID_ARG9",
            Subtype::InvalidArg10 => "DAT_INVALID_ARG10",
            Subtype::InvalidStateEpUnconnected => "DAT_INVALID_STATE_EP_UNCONNECTED",
            Subtype::InvalidStateEpActconnpending => "DAT_INVALID_STATE_EP_ACTCONNPENDING",
            Subtype::InvalidStateEpPassconnpending => "DAT_INVALID_STATE_EP_PASSCONNPENDING",
            Subtype::InvalidStateEpTentconnpending => "DAT_INVALID_STATE_EP_TENTCONNPENDING",
            Subtype::InvalidStateEpConnected => "DAT_INVALID_STATE_EP_CONNECTED",
            Subtype::InvalidStateEpDisconnected => "DAT_INVALID_STATE_EP_DISCONNECTED",
            Subtype::InvalidStateEpReserved => "DAT_INVALID_STATE_EP_RESERVED",
            Subtype::InvalidStateEpComplpending => "DAT_INVALID_STATE_EP_COMPLPENDING",
            Subtype::InvalidStateEpDiscpending => "DAT_INVALID_STATE_EP_DISCPENDING",
            Subtype::InvalidStateEpProvidercontrol => "DAT_INVALID_STATE_EP_PROVIDERCONTROL",
            Subtype::InvalidStateEpNotready => "DAT_INVALID_STATE_EP_NOTREADY",
            Subtype::InvalidStateEpRecvWatermark => "DAT_INVALID_STATE_EP_RECV_WATERMARK",
            Subtype::InvalidStateEpPz => "DAT_INVALID_STATE_EP_PZ",
            Subtype::InvalidStateEpEvdRequest => "DAT_INVALID_STATE_EP_EVD_REQUEST",
            Subtype::InvalidStateEpEvdRecv => "DAT_INVALID_STATE_EP_EVD_RECV",
            Subtype::InvalidStateEpEvdConnect => "DAT_INVALID_STATE_EP_EVD_CONNECT",
            Subtype::InvalidStateEpUnconfigured => "DAT_INVALID_STATE_EP_UNCONFIGURED",
            Subtype::InvalidStateEpUnconfreserved => "DAT_INVALID_STATE_EP_UNCONFRESERVED",
            Subtype::InvalidStateEpUnconfpassive => "DAT_INVALID_STATE_EP_UNCONFPASSIVE",
            Subtype::InvalidStateEpUnconftentative => "DAT_INVALID_STATE_EP_UNCONFTENTATIVE",
            Subtype::InvalidStateCnoInUse => "DAT_INVALID_STATE_CNO_IN_USE",
            Subtype::InvalidStateCnoDead => "DAT_INVALID_STATE_CNO_DEAD",
            Subtype::InvalidStateEvdOpen => "DAT_INVALID_STATE_EVD_OPEN",
            Subtype::InvalidStateEvdEnabled => "DAT_INVALID_STATE_EVD_ENABLED",
            Subtype::InvalidStateEvdDisabled => "DAT_INVALID_STATE_EVD_DISABLED",
            Subtype::InvalidStateEvdWaitable => "DAT_INVALID_STATE_EVD_WAITABLE",
            Subtype::InvalidStateEvdUnwaitable => "DAT_INVALID_STATE_EVD_UNWAITABLE",
            Subtype::InvalidStateEvdInUse => "DAT_INVALID_STATE_EVD_IN_USE",
            Subtype::InvalidStateEvdConfigNotify => "DAT_INVALID_STATE_EVD_CONFIG_NOTIFY",
            Subtype::InvalidStateEvdConfigSolicited => "DAT_INVALID_STATE_EVD_CONFIG_SOLICITED",
            Subtype::InvalidStateEvdConfigThreshold => "DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD",
            Subtype::InvalidStateEvdWaiter => "DAT_INVALID_STATE_EVD_WAITER",
            Subtype::InvalidStateEvdAsync => "DAT_INVALID_STATE_EVD_ASYNC",
            Subtype::InvalidStateIaInUse => "DAT_INVALID_STATE_IA_IN_USE",
            Subtype::InvalidStateLmrInUse => "DAT_INVALID_STATE_LMR_IN_USE",
            Subtype::InvalidStateLmrFree => "DAT_INVALID_STATE_LMR_FREE",
            Subtype::InvalidStatePzInUse => "DAT_INVALID_STATE_PZ_IN_USE",
            Subtype::InvalidStatePzFree => "DAT_INVALID_STATE_PZ_FREE",
            Subtype::InvalidStateSrqOperational => "DAT_INVALID_STATE_SRQ_OPERATIONAL",
            Subtype::InvalidStateSrqError => "DAT_INVALID_STATE_SRQ_ERROR",
            Subtype::InvalidStateSrqInUse => "DAT_INVALID_STATE_SRQ_IN_USE",
            Subtype::InvalidStateSrqShutdown => "DAT_INVALID_STATE_SRQ_SHUTDOWN",
            Subtype::PrivilegesRead => "DAT_PRIVILEGES_READ",
            Subtype::PrivilegesWrite => "DAT_PRIVILEGES_WRITE",
            Subtype::PrivilegesRdmaRead => "DAT_PRIVILEGES_RDMA_READ",
            Subtype::PrivilegesRdmaWrite => "DAT_PRIVILEGES_RDMA_WRITE",
            Subtype::ProtectionRead => "DAT_PROTECTION_READ",
            Subtype::ProtectionWrite => "DAT_PROTECTION_WRITE",
            Subtype::ProtectionRdmaRead => "DAT_PROTECTION_RDMA_READ",
            Subtype::ProtectionRdmaWrite => "DAT_PROTECTION_RDMA_WRITE",
            Subtype::InvalidAddressUnsupported => "DAT_INVALID_ADDRESS_UNSUPPORTED",
            Subtype::InvalidAddressUnreachable => "DAT_INVALID_ADDRESS_UNREACHABLE",
            Subtype::InvalidAddressMalformed => "DAT_INVALID_ADDRESS_MALFORMED",
            Subtype::NameNotRegistered => "DAT_NAME_NOT_REGISTERED",
            Subtype::MajorNotFound => "DAT_MAJOR_NOT_FOUND",
            Subtype::MinorNotFound => "DAT_MINOR_NOT_FOUND",
            Subtype::ThreadSafetyNotFound => "DAT_THREAD_SAFETY_NOT_FOUND",
        }
    }
}

/// A DAT error: its type and subtype. Small, `Copy`, no strings.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct DatError {
    ty: ErrorType,
    subtype: Subtype,
}

/// The result of every fallible DAT call.
pub type DatResult<T> = Result<T, DatError>;

impl DatError {
    /// An error of `ty` with `subtype`.
    pub const fn new(ty: ErrorType, subtype: Subtype) -> DatError {
        DatError { ty, subtype }
    }

    /// An error of `ty` with no subtype.
    pub const fn of(ty: ErrorType) -> DatError {
        DatError::new(ty, Subtype::NoSubtype)
    }

    /// `DAT_INVALID_HANDLE` with the subtype naming which handle.
    pub const fn invalid_handle(which: Subtype) -> DatError {
        DatError::new(ErrorType::InvalidHandle, which)
    }

    /// `DAT_INVALID_PARAMETER`, `DAT_INVALID_ARGn` for the 1-based argument `n`.
    /// The core itself names the argument of a call's signature instead
    /// (`DatError::invalid`, with the positions of `crate::signature`).
    pub const fn invalid_arg(n: u8) -> DatError {
        let subtype = match n {
            1 => Subtype::InvalidArg1,
            2 => Subtype::InvalidArg2,
            3 => Subtype::InvalidArg3,
            4 => Subtype::InvalidArg4,
            5 => Subtype::InvalidArg5,
            6 => Subtype::InvalidArg6,
            7 => Subtype::InvalidArg7,
            8 => Subtype::InvalidArg8,
            9 => Subtype::InvalidArg9,
            10 => Subtype::InvalidArg10,
            _ => Subtype::NoSubtype,
        };
        DatError::new(ErrorType::InvalidParameter, subtype)
    }

    /// `DAT_INVALID_PARAMETER` for the argument `p` of its call, at the
    /// position its page's synopsis gives it.
    pub(crate) fn invalid(p: impl Parameter) -> DatError {
        DatError::invalid_arg(p.position())
    }

    /// `DAT_INVALID_STATE` with a subtype.
    pub const fn invalid_state(subtype: Subtype) -> DatError {
        DatError::new(ErrorType::InvalidState, subtype)
    }

    /// The major type.
    pub const fn error_type(self) -> ErrorType {
        self.ty
    }

    /// The subtype.
    pub const fn subtype(self) -> Subtype {
        self.subtype
    }

    /// The `DAT_RETURN` value a C consumer sees.
    pub const fn to_raw(self) -> u32 {
        CLASS_ERROR | self.ty as u32 | self.subtype as u32
    }

    /// Decode a `DAT_RETURN`. `Ok(())` for `DAT_SUCCESS`; `None` for a value
    /// the header does not define (the class bit is ignored, as
    /// `DAT_GET_TYPE` ignores it).
    pub fn from_raw(raw: u32) -> Option<Result<(), DatError>> {
        if raw & (TYPE_MASK | SUBTYPE_MASK) == SUCCESS {
            return Some(Ok(()));
        }
        let ty = ErrorType::from_raw(raw)?;
        let subtype = Subtype::from_raw((raw & SUBTYPE_MASK) as u16)?;
        Some(Err(DatError::new(ty, subtype)))
    }
}

impl fmt::Debug for DatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.ty.name(), self.subtype.name())
    }
}

impl fmt::Display for DatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl core::error::Error for DatError {}

signature! {
    /// dat_strerror(3DAT)'s parameters.
    pub(crate) enum Strerror { Return, MajorMessage, MinorMessage }
}

/// `dat_strerror(3DAT)`: the major and minor message of a return code.
///
/// "If an undefined DAT_RETURN value was passed as the return parameter, the
/// operation fails with DAT_INVALID_PARAMETER returned. The operation succeeds
/// when DAT_SUCCESS is passed in as the return parameter."
pub fn strerror(raw: u32) -> DatResult<(&'static str, &'static str)> {
    match DatError::from_raw(raw) {
        Some(Ok(())) => Ok(("DAT_SUCCESS", Subtype::NoSubtype.name())),
        Some(Err(e)) => Ok((e.ty.name(), e.subtype.name())),
        None => Err(DatError::invalid(Strerror::Return)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_round_trip_for_every_type_and_subtype() {
        for ty in ErrorType::ALL {
            for sub in Subtype::ALL {
                let e = DatError::new(ty, sub);
                assert_eq!(DatError::from_raw(e.to_raw()), Some(Err(e)));
            }
        }
    }

    #[test]
    fn dat_strerror_refuses_undefined_values() {
        // The return code is the first argument: DAT_INVALID_ARG1.
        let refused = Err(DatError::new(ErrorType::InvalidParameter, Subtype::InvalidArg1));
        assert_eq!(strerror(0x0018_0000), refused);
        assert_eq!(strerror(0x0007_ffff), refused);
        assert_eq!(strerror(SUCCESS), Ok(("DAT_SUCCESS", "DAT_NO_SUBTYPE")));
        let e = DatError::invalid_state(Subtype::InvalidStateEvdInUse);
        assert_eq!(strerror(e.to_raw()), Ok(("DAT_INVALID_STATE", "DAT_INVALID_STATE_EVD_IN_USE")));
    }
}
