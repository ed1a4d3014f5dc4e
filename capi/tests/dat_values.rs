//! udat-core's values held to Debian's `<dat2/udat.h>`, through the
//! bindings udat-capi's build script generates: a mismatch fails these
//! tests, not a C consumer at run time.
use udat_capi::sys::*;
use udat_core::types::*;
use udat_core::*;

#[test]
fn dat_return_types_match_the_header() {
    let pairs: [(ErrorType, u32); 24] = [
        (ErrorType::Abort, DAT_ABORT),
        (ErrorType::ConnQualInUse, DAT_CONN_QUAL_IN_USE),
        (ErrorType::InsufficientResources, DAT_INSUFFICIENT_RESOURCES),
        (ErrorType::InternalError, DAT_INTERNAL_ERROR),
        (ErrorType::InvalidHandle, DAT_INVALID_HANDLE),
        (ErrorType::InvalidParameter, DAT_INVALID_PARAMETER),
        (ErrorType::InvalidState, DAT_INVALID_STATE),
        (ErrorType::LengthError, DAT_LENGTH_ERROR),
        (ErrorType::ModelNotSupported, DAT_MODEL_NOT_SUPPORTED),
        (ErrorType::ProviderNotFound, DAT_PROVIDER_NOT_FOUND),
        (ErrorType::PrivilegesViolation, DAT_PRIVILEGES_VIOLATION),
        (ErrorType::ProtectionViolation, DAT_PROTECTION_VIOLATION),
        (ErrorType::QueueEmpty, DAT_QUEUE_EMPTY),
        (ErrorType::QueueFull, DAT_QUEUE_FULL),
        (ErrorType::TimeoutExpired, DAT_TIMEOUT_EXPIRED),
        (ErrorType::ProviderAlreadyRegistered, DAT_PROVIDER_ALREADY_REGISTERED),
        (ErrorType::ProviderInUse, DAT_PROVIDER_IN_USE),
        (ErrorType::InvalidAddress, DAT_INVALID_ADDRESS),
        (ErrorType::InterruptedCall, DAT_INTERRUPTED_CALL),
        (ErrorType::ConnQualUnavailable, DAT_CONN_QUAL_UNAVAILABLE),
        (ErrorType::ReservedLmr, DAT_RESERVED_LMR),
        (ErrorType::PortInUse, DAT_PORT_IN_USE),
        (ErrorType::CommNotSupported, DAT_COMM_NOT_SUPPORTED),
        (ErrorType::NotImplemented, DAT_NOT_IMPLEMENTED),
    ];
    for (ours, theirs) in pairs {
        assert_eq!(ours as u32, theirs, "{ours:?}");
    }
    assert_eq!(error::CLASS_ERROR, DAT_CLASS_ERROR);
    assert_eq!(error::TYPE_MASK, DAT_TYPE_MASK);
    assert_eq!(error::SUBTYPE_MASK, DAT_SUBTYPE_MASK);
}

#[test]
fn dat_return_subtypes_match_the_header() {
    let pairs: [(Subtype, u32); 104] = [
        (Subtype::NoSubtype, DAT_NO_SUBTYPE),
        (Subtype::SubInterrupted, DAT_SUB_INTERRUPTED),
        (Subtype::ResourceMemory, DAT_RESOURCE_MEMORY),
        (Subtype::ResourceDevice, DAT_RESOURCE_DEVICE),
        (Subtype::ResourceTep, DAT_RESOURCE_TEP),
        (Subtype::ResourceTevd, DAT_RESOURCE_TEVD),
        (Subtype::ResourceProtectionDomain, DAT_RESOURCE_PROTECTION_DOMAIN),
        (Subtype::ResourceMemoryRegion, DAT_RESOURCE_MEMORY_REGION),
        (Subtype::ResourceErrorHandler, DAT_RESOURCE_ERROR_HANDLER),
        (Subtype::ResourceCredits, DAT_RESOURCE_CREDITS),
        (Subtype::ResourceSrq, DAT_RESOURCE_SRQ),
        (Subtype::InvalidHandleIa, DAT_INVALID_HANDLE_IA),
        (Subtype::InvalidHandleEp, DAT_INVALID_HANDLE_EP),
        (Subtype::InvalidHandleLmr, DAT_INVALID_HANDLE_LMR),
        (Subtype::InvalidHandleRmr, DAT_INVALID_HANDLE_RMR),
        (Subtype::InvalidHandlePz, DAT_INVALID_HANDLE_PZ),
        (Subtype::InvalidHandlePsp, DAT_INVALID_HANDLE_PSP),
        (Subtype::InvalidHandleRsp, DAT_INVALID_HANDLE_RSP),
        (Subtype::InvalidHandleCr, DAT_INVALID_HANDLE_CR),
        (Subtype::InvalidHandleCno, DAT_INVALID_HANDLE_CNO),
        (Subtype::InvalidHandleEvdCr, DAT_INVALID_HANDLE_EVD_CR),
        (Subtype::InvalidHandleEvdRequest, DAT_INVALID_HANDLE_EVD_REQUEST),
        (Subtype::InvalidHandleEvdRecv, DAT_INVALID_HANDLE_EVD_RECV),
        (Subtype::InvalidHandleEvdConn, DAT_INVALID_HANDLE_EVD_CONN),
        (Subtype::InvalidHandleEvdAsync, DAT_INVALID_HANDLE_EVD_ASYNC),
        (Subtype::InvalidHandleSrq, DAT_INVALID_HANDLE_SRQ),
        (Subtype::InvalidHandleCsp, DAT_INVALID_HANDLE_CSP),
        (Subtype::InvalidHandle1, DAT_INVALID_HANDLE1),
        (Subtype::InvalidHandle2, DAT_INVALID_HANDLE2),
        (Subtype::InvalidHandle3, DAT_INVALID_HANDLE3),
        (Subtype::InvalidHandle4, DAT_INVALID_HANDLE4),
        (Subtype::InvalidHandle5, DAT_INVALID_HANDLE5),
        (Subtype::InvalidHandle6, DAT_INVALID_HANDLE6),
        (Subtype::InvalidHandle7, DAT_INVALID_HANDLE7),
        (Subtype::InvalidHandle8, DAT_INVALID_HANDLE8),
        (Subtype::InvalidHandle9, DAT_INVALID_HANDLE9),
        (Subtype::InvalidHandle10, DAT_INVALID_HANDLE10),
        (Subtype::InvalidArg1, DAT_INVALID_ARG1),
        (Subtype::InvalidArg2, DAT_INVALID_ARG2),
        (Subtype::InvalidArg3, DAT_INVALID_ARG3),
        (Subtype::InvalidArg4, DAT_INVALID_ARG4),
        (Subtype::InvalidArg5, DAT_INVALID_ARG5),
        (Subtype::InvalidArg6, DAT_INVALID_ARG6),
        (Subtype::InvalidArg7, DAT_INVALID_ARG7),
        (Subtype::InvalidArg8, DAT_INVALID_ARG8),
        (Subtype::InvalidArg9, DAT_INVALID_ARG9),
        (Subtype::InvalidArg10, DAT_INVALID_ARG10),
        (Subtype::InvalidStateEpUnconnected, DAT_INVALID_STATE_EP_UNCONNECTED),
        (Subtype::InvalidStateEpActconnpending, DAT_INVALID_STATE_EP_ACTCONNPENDING),
        (Subtype::InvalidStateEpPassconnpending, DAT_INVALID_STATE_EP_PASSCONNPENDING),
        (Subtype::InvalidStateEpTentconnpending, DAT_INVALID_STATE_EP_TENTCONNPENDING),
        (Subtype::InvalidStateEpConnected, DAT_INVALID_STATE_EP_CONNECTED),
        (Subtype::InvalidStateEpDisconnected, DAT_INVALID_STATE_EP_DISCONNECTED),
        (Subtype::InvalidStateEpReserved, DAT_INVALID_STATE_EP_RESERVED),
        (Subtype::InvalidStateEpComplpending, DAT_INVALID_STATE_EP_COMPLPENDING),
        (Subtype::InvalidStateEpDiscpending, DAT_INVALID_STATE_EP_DISCPENDING),
        (Subtype::InvalidStateEpProvidercontrol, DAT_INVALID_STATE_EP_PROVIDERCONTROL),
        (Subtype::InvalidStateEpNotready, DAT_INVALID_STATE_EP_NOTREADY),
        (Subtype::InvalidStateEpRecvWatermark, DAT_INVALID_STATE_EP_RECV_WATERMARK),
        (Subtype::InvalidStateEpPz, DAT_INVALID_STATE_EP_PZ),
        (Subtype::InvalidStateEpEvdRequest, DAT_INVALID_STATE_EP_EVD_REQUEST),
        (Subtype::InvalidStateEpEvdRecv, DAT_INVALID_STATE_EP_EVD_RECV),
        (Subtype::InvalidStateEpEvdConnect, DAT_INVALID_STATE_EP_EVD_CONNECT),
        (Subtype::InvalidStateEpUnconfigured, DAT_INVALID_STATE_EP_UNCONFIGURED),
        (Subtype::InvalidStateEpUnconfreserved, DAT_INVALID_STATE_EP_UNCONFRESERVED),
        (Subtype::InvalidStateEpUnconfpassive, DAT_INVALID_STATE_EP_UNCONFPASSIVE),
        (Subtype::InvalidStateEpUnconftentative, DAT_INVALID_STATE_EP_UNCONFTENTATIVE),
        (Subtype::InvalidStateCnoInUse, DAT_INVALID_STATE_CNO_IN_USE),
        (Subtype::InvalidStateCnoDead, DAT_INVALID_STATE_CNO_DEAD),
        (Subtype::InvalidStateEvdOpen, DAT_INVALID_STATE_EVD_OPEN),
        (Subtype::InvalidStateEvdEnabled, DAT_INVALID_STATE_EVD_ENABLED),
        (Subtype::InvalidStateEvdDisabled, DAT_INVALID_STATE_EVD_DISABLED),
        (Subtype::InvalidStateEvdWaitable, DAT_INVALID_STATE_EVD_WAITABLE),
        (Subtype::InvalidStateEvdUnwaitable, DAT_INVALID_STATE_EVD_UNWAITABLE),
        (Subtype::InvalidStateEvdInUse, DAT_INVALID_STATE_EVD_IN_USE),
        (Subtype::InvalidStateEvdConfigNotify, DAT_INVALID_STATE_EVD_CONFIG_NOTIFY),
        (Subtype::InvalidStateEvdConfigSolicited, DAT_INVALID_STATE_EVD_CONFIG_SOLICITED),
        (Subtype::InvalidStateEvdConfigThreshold, DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD),
        (Subtype::InvalidStateEvdWaiter, DAT_INVALID_STATE_EVD_WAITER),
        (Subtype::InvalidStateEvdAsync, DAT_INVALID_STATE_EVD_ASYNC),
        (Subtype::InvalidStateIaInUse, DAT_INVALID_STATE_IA_IN_USE),
        (Subtype::InvalidStateLmrInUse, DAT_INVALID_STATE_LMR_IN_USE),
        (Subtype::InvalidStateLmrFree, DAT_INVALID_STATE_LMR_FREE),
        (Subtype::InvalidStatePzInUse, DAT_INVALID_STATE_PZ_IN_USE),
        (Subtype::InvalidStatePzFree, DAT_INVALID_STATE_PZ_FREE),
        (Subtype::InvalidStateSrqOperational, DAT_INVALID_STATE_SRQ_OPERATIONAL),
        (Subtype::InvalidStateSrqError, DAT_INVALID_STATE_SRQ_ERROR),
        (Subtype::InvalidStateSrqInUse, DAT_INVALID_STATE_SRQ_IN_USE),
        (Subtype::InvalidStateSrqShutdown, DAT_INVALID_STATE_SRQ_SHUTDOWN),
        (Subtype::PrivilegesRead, DAT_PRIVILEGES_READ),
        (Subtype::PrivilegesWrite, DAT_PRIVILEGES_WRITE),
        (Subtype::PrivilegesRdmaRead, DAT_PRIVILEGES_RDMA_READ),
        (Subtype::PrivilegesRdmaWrite, DAT_PRIVILEGES_RDMA_WRITE),
        (Subtype::ProtectionRead, DAT_PROTECTION_READ),
        (Subtype::ProtectionWrite, DAT_PROTECTION_WRITE),
        (Subtype::ProtectionRdmaRead, DAT_PROTECTION_RDMA_READ),
        (Subtype::ProtectionRdmaWrite, DAT_PROTECTION_RDMA_WRITE),
        (Subtype::InvalidAddressUnsupported, DAT_INVALID_ADDRESS_UNSUPPORTED),
        (Subtype::InvalidAddressUnreachable, DAT_INVALID_ADDRESS_UNREACHABLE),
        (Subtype::InvalidAddressMalformed, DAT_INVALID_ADDRESS_MALFORMED),
        (Subtype::NameNotRegistered, DAT_NAME_NOT_REGISTERED),
        (Subtype::MajorNotFound, DAT_MAJOR_NOT_FOUND),
        (Subtype::MinorNotFound, DAT_MINOR_NOT_FOUND),
        (Subtype::ThreadSafetyNotFound, DAT_THREAD_SAFETY_NOT_FOUND),
    ];
    assert_eq!(pairs.len(), Subtype::ALL.len());
    for (ours, theirs) in pairs {
        assert_eq!(ours as u32, theirs, "{ours:?}");
    }
}

#[test]
fn ep_states_match_the_header() {
    let pairs = [
        (EpState::Unconnected, DAT_EP_STATE_UNCONNECTED),
        (EpState::Reserved, DAT_EP_STATE_RESERVED),
        (EpState::PassiveConnectionPending, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING),
        (EpState::ActiveConnectionPending, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING),
        (EpState::TentativeConnectionPending, DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING),
        (EpState::Connected, DAT_EP_STATE_CONNECTED),
        (EpState::DisconnectPending, DAT_EP_STATE_DISCONNECT_PENDING),
        (EpState::Disconnected, DAT_EP_STATE_DISCONNECTED),
        (EpState::CompletionPending, DAT_EP_STATE_COMPLETION_PENDING),
    ];
    for (ours, theirs) in pairs {
        assert_eq!(ours as u32, theirs, "{ours:?}");
    }
}

#[test]
fn event_numbers_match_the_header() {
    let pairs = [
        (EventNumber::DtoCompletion, DAT_DTO_COMPLETION_EVENT),
        (EventNumber::RmrBindCompletion, DAT_RMR_BIND_COMPLETION_EVENT),
        (EventNumber::ConnectionRequest, DAT_CONNECTION_REQUEST_EVENT),
        (EventNumber::ConnectionEstablished, DAT_CONNECTION_EVENT_ESTABLISHED),
        (EventNumber::ConnectionPeerRejected, DAT_CONNECTION_EVENT_PEER_REJECTED),
        (EventNumber::ConnectionNonPeerRejected, DAT_CONNECTION_EVENT_NON_PEER_REJECTED),
        (EventNumber::ConnectionAcceptCompletionError, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR),
        (EventNumber::ConnectionDisconnected, DAT_CONNECTION_EVENT_DISCONNECTED),
        (EventNumber::ConnectionBroken, DAT_CONNECTION_EVENT_BROKEN),
        (EventNumber::ConnectionTimedOut, DAT_CONNECTION_EVENT_TIMED_OUT),
        (EventNumber::ConnectionUnreachable, DAT_CONNECTION_EVENT_UNREACHABLE),
        (EventNumber::AsyncEvdOverflow, DAT_ASYNC_ERROR_EVD_OVERFLOW),
        (EventNumber::AsyncIaCatastrophic, DAT_ASYNC_ERROR_IA_CATASTROPHIC),
        (EventNumber::AsyncEpBroken, DAT_ASYNC_ERROR_EP_BROKEN),
        (EventNumber::AsyncTimedOut, DAT_ASYNC_ERROR_TIMED_OUT),
        (EventNumber::AsyncProviderInternalError, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR),
        (EventNumber::Software, DAT_SOFTWARE_EVENT),
    ];
    for (ours, theirs) in pairs {
        assert_eq!(ours as u32, theirs, "{ours:?}");
    }
}

#[test]
fn dto_status_and_ops_match_the_header() {
    let statuses = [
        (DtoStatus::Success, DAT_DTO_SUCCESS),
        (DtoStatus::Flushed, DAT_DTO_ERR_FLUSHED),
        (DtoStatus::LocalLength, DAT_DTO_ERR_LOCAL_LENGTH),
        (DtoStatus::LocalEp, DAT_DTO_ERR_LOCAL_EP),
        (DtoStatus::LocalProtection, DAT_DTO_ERR_LOCAL_PROTECTION),
        (DtoStatus::BadResponse, DAT_DTO_ERR_BAD_RESPONSE),
        (DtoStatus::RemoteAccess, DAT_DTO_ERR_REMOTE_ACCESS),
        (DtoStatus::RemoteResponder, DAT_DTO_ERR_REMOTE_RESPONDER),
        (DtoStatus::Transport, DAT_DTO_ERR_TRANSPORT),
        (DtoStatus::ReceiverNotReady, DAT_DTO_ERR_RECEIVER_NOT_READY),
        (DtoStatus::PartialPacket, DAT_DTO_ERR_PARTIAL_PACKET),
        (DtoStatus::RmrOperationFailed, DAT_RMR_OPERATION_FAILED),
    ];
    for (ours, theirs) in statuses {
        assert_eq!(ours as u32, theirs, "{ours:?}");
    }
    let ops = [
        (DtoOp::Send, DAT_DTO_SEND),
        (DtoOp::RdmaWrite, DAT_DTO_RDMA_WRITE),
        (DtoOp::RdmaRead, DAT_DTO_RDMA_READ),
        (DtoOp::Receive, DAT_DTO_RECEIVE),
        (DtoOp::ReceiveWithInvalidate, DAT_DTO_RECEIVE_WITH_INVALIDATE),
        (DtoOp::BindMw, DAT_DTO_BIND_MW),
    ];
    for (ours, theirs) in ops {
        assert_eq!(ours as u32, theirs, "{ours:?}");
    }
}

#[test]
fn flags_and_handle_types_match_the_header() {
    assert_eq!(MemPriv::LOCAL_READ.0, DAT_MEM_PRIV_LOCAL_READ_FLAG);
    assert_eq!(MemPriv::REMOTE_READ.0, DAT_MEM_PRIV_REMOTE_READ_FLAG);
    assert_eq!(MemPriv::LOCAL_WRITE.0, DAT_MEM_PRIV_LOCAL_WRITE_FLAG);
    assert_eq!(MemPriv::REMOTE_WRITE.0, DAT_MEM_PRIV_REMOTE_WRITE_FLAG);
    assert_eq!(MemPriv::ALL.0, DAT_MEM_PRIV_ALL_FLAG);
    assert_eq!(CompletionFlags::SUPPRESS.0, DAT_COMPLETION_SUPPRESS_FLAG);
    assert_eq!(CompletionFlags::SOLICITED_WAIT.0, DAT_COMPLETION_SOLICITED_WAIT_FLAG);
    assert_eq!(CompletionFlags::UNSIGNALLED.0, DAT_COMPLETION_UNSIGNALLED_FLAG);
    assert_eq!(CompletionFlags::BARRIER_FENCE.0, DAT_COMPLETION_BARRIER_FENCE_FLAG);
    assert_eq!(CompletionFlags::EVD_THRESHOLD.0, DAT_COMPLETION_EVD_THRESHOLD_FLAG);
    assert_eq!(EvdFlags::SOFTWARE.0, DAT_EVD_SOFTWARE_FLAG);
    assert_eq!(EvdFlags::CR.0, DAT_EVD_CR_FLAG);
    assert_eq!(EvdFlags::DTO.0, DAT_EVD_DTO_FLAG);
    assert_eq!(EvdFlags::CONNECTION.0, DAT_EVD_CONNECTION_FLAG);
    assert_eq!(EvdFlags::RMR_BIND.0, DAT_EVD_RMR_BIND_FLAG);
    assert_eq!(EvdFlags::ASYNC.0, DAT_EVD_ASYNC_FLAG);
    assert_eq!(EvdFlags::DEFAULT.0, DAT_EVD_DEFAULT_FLAG);
    assert_eq!(CloseFlags::Graceful as u32, DAT_CLOSE_GRACEFUL_FLAG);
    assert_eq!(PspFlags::Provider as u32, DAT_PSP_PROVIDER_FLAG);
    let kinds = [
        (Kind::Cr, DAT_HANDLE_TYPE_CR),
        (Kind::Ep, DAT_HANDLE_TYPE_EP),
        (Kind::Evd, DAT_HANDLE_TYPE_EVD),
        (Kind::Ia, DAT_HANDLE_TYPE_IA),
        (Kind::Lmr, DAT_HANDLE_TYPE_LMR),
        (Kind::Psp, DAT_HANDLE_TYPE_PSP),
        (Kind::Pz, DAT_HANDLE_TYPE_PZ),
        (Kind::Rmr, DAT_HANDLE_TYPE_RMR),
        (Kind::Rsp, DAT_HANDLE_TYPE_RSP),
        (Kind::Cno, DAT_HANDLE_TYPE_CNO),
        (Kind::Srq, DAT_HANDLE_TYPE_SRQ),
    ];
    for (ours, theirs) in kinds {
        assert_eq!(ours as u32, theirs, "{ours:?}");
    }
    assert_eq!(PZ_FIELD_ALL, DAT_PZ_FIELD_ALL);
    assert_eq!(PSP_FIELD_ALL, DAT_PSP_FIELD_ALL);
    assert_eq!(RSP_FIELD_ALL, DAT_RSP_FIELD_ALL);
    assert_eq!(CR_FIELD_ALL, DAT_CR_FIELD_ALL);
    assert_eq!(SRQ_FIELD_ALL, DAT_SRQ_FIELD_ALL);
    assert_eq!(EVD_FIELD_ALL, DAT_EVD_FIELD_ALL);
    assert_eq!(RMR_FIELD_ALL, DAT_RMR_FIELD_ALL);
    assert_eq!(LMR_FIELD_ALL, DAT_LMR_FIELD_ALL);
}
