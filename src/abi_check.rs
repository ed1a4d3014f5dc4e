//! udat's values held to Debian's `<dat2/udat.h>`, through the bindings
//! the build script generates: a mismatch fails the build's tests, not a C
//! consumer at run time.
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code, clippy::all)]

#[allow(unused_imports)]
mod dat2 {
    include!(concat!(env!("OUT_DIR"), "/dat2.rs"));
}

use dat2::*;
use udat_core::types::*;
use udat_core::*;

#[test]
fn dat_return_types_match_the_header() {
    let pairs: [(ErrorType, u32); 24] = [
        (ErrorType::Abort, dat_return_type::DAT_ABORT as u32),
        (ErrorType::ConnQualInUse, dat_return_type::DAT_CONN_QUAL_IN_USE as u32),
        (ErrorType::InsufficientResources, dat_return_type::DAT_INSUFFICIENT_RESOURCES as u32),
        (ErrorType::InternalError, dat_return_type::DAT_INTERNAL_ERROR as u32),
        (ErrorType::InvalidHandle, dat_return_type::DAT_INVALID_HANDLE as u32),
        (ErrorType::InvalidParameter, dat_return_type::DAT_INVALID_PARAMETER as u32),
        (ErrorType::InvalidState, dat_return_type::DAT_INVALID_STATE as u32),
        (ErrorType::LengthError, dat_return_type::DAT_LENGTH_ERROR as u32),
        (ErrorType::ModelNotSupported, dat_return_type::DAT_MODEL_NOT_SUPPORTED as u32),
        (ErrorType::ProviderNotFound, dat_return_type::DAT_PROVIDER_NOT_FOUND as u32),
        (ErrorType::PrivilegesViolation, dat_return_type::DAT_PRIVILEGES_VIOLATION as u32),
        (ErrorType::ProtectionViolation, dat_return_type::DAT_PROTECTION_VIOLATION as u32),
        (ErrorType::QueueEmpty, dat_return_type::DAT_QUEUE_EMPTY as u32),
        (ErrorType::QueueFull, dat_return_type::DAT_QUEUE_FULL as u32),
        (ErrorType::TimeoutExpired, dat_return_type::DAT_TIMEOUT_EXPIRED as u32),
        (ErrorType::ProviderAlreadyRegistered, dat_return_type::DAT_PROVIDER_ALREADY_REGISTERED as u32),
        (ErrorType::ProviderInUse, dat_return_type::DAT_PROVIDER_IN_USE as u32),
        (ErrorType::InvalidAddress, dat_return_type::DAT_INVALID_ADDRESS as u32),
        (ErrorType::InterruptedCall, dat_return_type::DAT_INTERRUPTED_CALL as u32),
        (ErrorType::ConnQualUnavailable, dat_return_type::DAT_CONN_QUAL_UNAVAILABLE as u32),
        (ErrorType::ReservedLmr, dat_return_type::DAT_RESERVED_LMR as u32),
        (ErrorType::PortInUse, dat_return_type::DAT_PORT_IN_USE as u32),
        (ErrorType::CommNotSupported, dat_return_type::DAT_COMM_NOT_SUPPORTED as u32),
        (ErrorType::NotImplemented, dat_return_type::DAT_NOT_IMPLEMENTED as u32),
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
        (Subtype::NoSubtype, dat_return_subtype::DAT_NO_SUBTYPE as u32),
        (Subtype::SubInterrupted, dat_return_subtype::DAT_SUB_INTERRUPTED as u32),
        (Subtype::ResourceMemory, dat_return_subtype::DAT_RESOURCE_MEMORY as u32),
        (Subtype::ResourceDevice, dat_return_subtype::DAT_RESOURCE_DEVICE as u32),
        (Subtype::ResourceTep, dat_return_subtype::DAT_RESOURCE_TEP as u32),
        (Subtype::ResourceTevd, dat_return_subtype::DAT_RESOURCE_TEVD as u32),
        (Subtype::ResourceProtectionDomain, dat_return_subtype::DAT_RESOURCE_PROTECTION_DOMAIN as u32),
        (Subtype::ResourceMemoryRegion, dat_return_subtype::DAT_RESOURCE_MEMORY_REGION as u32),
        (Subtype::ResourceErrorHandler, dat_return_subtype::DAT_RESOURCE_ERROR_HANDLER as u32),
        (Subtype::ResourceCredits, dat_return_subtype::DAT_RESOURCE_CREDITS as u32),
        (Subtype::ResourceSrq, dat_return_subtype::DAT_RESOURCE_SRQ as u32),
        (Subtype::InvalidHandleIa, dat_return_subtype::DAT_INVALID_HANDLE_IA as u32),
        (Subtype::InvalidHandleEp, dat_return_subtype::DAT_INVALID_HANDLE_EP as u32),
        (Subtype::InvalidHandleLmr, dat_return_subtype::DAT_INVALID_HANDLE_LMR as u32),
        (Subtype::InvalidHandleRmr, dat_return_subtype::DAT_INVALID_HANDLE_RMR as u32),
        (Subtype::InvalidHandlePz, dat_return_subtype::DAT_INVALID_HANDLE_PZ as u32),
        (Subtype::InvalidHandlePsp, dat_return_subtype::DAT_INVALID_HANDLE_PSP as u32),
        (Subtype::InvalidHandleRsp, dat_return_subtype::DAT_INVALID_HANDLE_RSP as u32),
        (Subtype::InvalidHandleCr, dat_return_subtype::DAT_INVALID_HANDLE_CR as u32),
        (Subtype::InvalidHandleCno, dat_return_subtype::DAT_INVALID_HANDLE_CNO as u32),
        (Subtype::InvalidHandleEvdCr, dat_return_subtype::DAT_INVALID_HANDLE_EVD_CR as u32),
        (Subtype::InvalidHandleEvdRequest, dat_return_subtype::DAT_INVALID_HANDLE_EVD_REQUEST as u32),
        (Subtype::InvalidHandleEvdRecv, dat_return_subtype::DAT_INVALID_HANDLE_EVD_RECV as u32),
        (Subtype::InvalidHandleEvdConn, dat_return_subtype::DAT_INVALID_HANDLE_EVD_CONN as u32),
        (Subtype::InvalidHandleEvdAsync, dat_return_subtype::DAT_INVALID_HANDLE_EVD_ASYNC as u32),
        (Subtype::InvalidHandleSrq, dat_return_subtype::DAT_INVALID_HANDLE_SRQ as u32),
        (Subtype::InvalidHandleCsp, dat_return_subtype::DAT_INVALID_HANDLE_CSP as u32),
        (Subtype::InvalidHandle1, dat_return_subtype::DAT_INVALID_HANDLE1 as u32),
        (Subtype::InvalidHandle2, dat_return_subtype::DAT_INVALID_HANDLE2 as u32),
        (Subtype::InvalidHandle3, dat_return_subtype::DAT_INVALID_HANDLE3 as u32),
        (Subtype::InvalidHandle4, dat_return_subtype::DAT_INVALID_HANDLE4 as u32),
        (Subtype::InvalidHandle5, dat_return_subtype::DAT_INVALID_HANDLE5 as u32),
        (Subtype::InvalidHandle6, dat_return_subtype::DAT_INVALID_HANDLE6 as u32),
        (Subtype::InvalidHandle7, dat_return_subtype::DAT_INVALID_HANDLE7 as u32),
        (Subtype::InvalidHandle8, dat_return_subtype::DAT_INVALID_HANDLE8 as u32),
        (Subtype::InvalidHandle9, dat_return_subtype::DAT_INVALID_HANDLE9 as u32),
        (Subtype::InvalidHandle10, dat_return_subtype::DAT_INVALID_HANDLE10 as u32),
        (Subtype::InvalidArg1, dat_return_subtype::DAT_INVALID_ARG1 as u32),
        (Subtype::InvalidArg2, dat_return_subtype::DAT_INVALID_ARG2 as u32),
        (Subtype::InvalidArg3, dat_return_subtype::DAT_INVALID_ARG3 as u32),
        (Subtype::InvalidArg4, dat_return_subtype::DAT_INVALID_ARG4 as u32),
        (Subtype::InvalidArg5, dat_return_subtype::DAT_INVALID_ARG5 as u32),
        (Subtype::InvalidArg6, dat_return_subtype::DAT_INVALID_ARG6 as u32),
        (Subtype::InvalidArg7, dat_return_subtype::DAT_INVALID_ARG7 as u32),
        (Subtype::InvalidArg8, dat_return_subtype::DAT_INVALID_ARG8 as u32),
        (Subtype::InvalidArg9, dat_return_subtype::DAT_INVALID_ARG9 as u32),
        (Subtype::InvalidArg10, dat_return_subtype::DAT_INVALID_ARG10 as u32),
        (Subtype::InvalidStateEpUnconnected, dat_return_subtype::DAT_INVALID_STATE_EP_UNCONNECTED as u32),
        (Subtype::InvalidStateEpActconnpending, dat_return_subtype::DAT_INVALID_STATE_EP_ACTCONNPENDING as u32),
        (Subtype::InvalidStateEpPassconnpending, dat_return_subtype::DAT_INVALID_STATE_EP_PASSCONNPENDING as u32),
        (Subtype::InvalidStateEpTentconnpending, dat_return_subtype::DAT_INVALID_STATE_EP_TENTCONNPENDING as u32),
        (Subtype::InvalidStateEpConnected, dat_return_subtype::DAT_INVALID_STATE_EP_CONNECTED as u32),
        (Subtype::InvalidStateEpDisconnected, dat_return_subtype::DAT_INVALID_STATE_EP_DISCONNECTED as u32),
        (Subtype::InvalidStateEpReserved, dat_return_subtype::DAT_INVALID_STATE_EP_RESERVED as u32),
        (Subtype::InvalidStateEpComplpending, dat_return_subtype::DAT_INVALID_STATE_EP_COMPLPENDING as u32),
        (Subtype::InvalidStateEpDiscpending, dat_return_subtype::DAT_INVALID_STATE_EP_DISCPENDING as u32),
        (Subtype::InvalidStateEpProvidercontrol, dat_return_subtype::DAT_INVALID_STATE_EP_PROVIDERCONTROL as u32),
        (Subtype::InvalidStateEpNotready, dat_return_subtype::DAT_INVALID_STATE_EP_NOTREADY as u32),
        (Subtype::InvalidStateEpRecvWatermark, dat_return_subtype::DAT_INVALID_STATE_EP_RECV_WATERMARK as u32),
        (Subtype::InvalidStateEpPz, dat_return_subtype::DAT_INVALID_STATE_EP_PZ as u32),
        (Subtype::InvalidStateEpEvdRequest, dat_return_subtype::DAT_INVALID_STATE_EP_EVD_REQUEST as u32),
        (Subtype::InvalidStateEpEvdRecv, dat_return_subtype::DAT_INVALID_STATE_EP_EVD_RECV as u32),
        (Subtype::InvalidStateEpEvdConnect, dat_return_subtype::DAT_INVALID_STATE_EP_EVD_CONNECT as u32),
        (Subtype::InvalidStateEpUnconfigured, dat_return_subtype::DAT_INVALID_STATE_EP_UNCONFIGURED as u32),
        (Subtype::InvalidStateEpUnconfreserved, dat_return_subtype::DAT_INVALID_STATE_EP_UNCONFRESERVED as u32),
        (Subtype::InvalidStateEpUnconfpassive, dat_return_subtype::DAT_INVALID_STATE_EP_UNCONFPASSIVE as u32),
        (Subtype::InvalidStateEpUnconftentative, dat_return_subtype::DAT_INVALID_STATE_EP_UNCONFTENTATIVE as u32),
        (Subtype::InvalidStateCnoInUse, dat_return_subtype::DAT_INVALID_STATE_CNO_IN_USE as u32),
        (Subtype::InvalidStateCnoDead, dat_return_subtype::DAT_INVALID_STATE_CNO_DEAD as u32),
        (Subtype::InvalidStateEvdOpen, dat_return_subtype::DAT_INVALID_STATE_EVD_OPEN as u32),
        (Subtype::InvalidStateEvdEnabled, dat_return_subtype::DAT_INVALID_STATE_EVD_ENABLED as u32),
        (Subtype::InvalidStateEvdDisabled, dat_return_subtype::DAT_INVALID_STATE_EVD_DISABLED as u32),
        (Subtype::InvalidStateEvdWaitable, dat_return_subtype::DAT_INVALID_STATE_EVD_WAITABLE as u32),
        (Subtype::InvalidStateEvdUnwaitable, dat_return_subtype::DAT_INVALID_STATE_EVD_UNWAITABLE as u32),
        (Subtype::InvalidStateEvdInUse, dat_return_subtype::DAT_INVALID_STATE_EVD_IN_USE as u32),
        (Subtype::InvalidStateEvdConfigNotify, dat_return_subtype::DAT_INVALID_STATE_EVD_CONFIG_NOTIFY as u32),
        (Subtype::InvalidStateEvdConfigSolicited, dat_return_subtype::DAT_INVALID_STATE_EVD_CONFIG_SOLICITED as u32),
        (Subtype::InvalidStateEvdConfigThreshold, dat_return_subtype::DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD as u32),
        (Subtype::InvalidStateEvdWaiter, dat_return_subtype::DAT_INVALID_STATE_EVD_WAITER as u32),
        (Subtype::InvalidStateEvdAsync, dat_return_subtype::DAT_INVALID_STATE_EVD_ASYNC as u32),
        (Subtype::InvalidStateIaInUse, dat_return_subtype::DAT_INVALID_STATE_IA_IN_USE as u32),
        (Subtype::InvalidStateLmrInUse, dat_return_subtype::DAT_INVALID_STATE_LMR_IN_USE as u32),
        (Subtype::InvalidStateLmrFree, dat_return_subtype::DAT_INVALID_STATE_LMR_FREE as u32),
        (Subtype::InvalidStatePzInUse, dat_return_subtype::DAT_INVALID_STATE_PZ_IN_USE as u32),
        (Subtype::InvalidStatePzFree, dat_return_subtype::DAT_INVALID_STATE_PZ_FREE as u32),
        (Subtype::InvalidStateSrqOperational, dat_return_subtype::DAT_INVALID_STATE_SRQ_OPERATIONAL as u32),
        (Subtype::InvalidStateSrqError, dat_return_subtype::DAT_INVALID_STATE_SRQ_ERROR as u32),
        (Subtype::InvalidStateSrqInUse, dat_return_subtype::DAT_INVALID_STATE_SRQ_IN_USE as u32),
        (Subtype::InvalidStateSrqShutdown, dat_return_subtype::DAT_INVALID_STATE_SRQ_SHUTDOWN as u32),
        (Subtype::PrivilegesRead, dat_return_subtype::DAT_PRIVILEGES_READ as u32),
        (Subtype::PrivilegesWrite, dat_return_subtype::DAT_PRIVILEGES_WRITE as u32),
        (Subtype::PrivilegesRdmaRead, dat_return_subtype::DAT_PRIVILEGES_RDMA_READ as u32),
        (Subtype::PrivilegesRdmaWrite, dat_return_subtype::DAT_PRIVILEGES_RDMA_WRITE as u32),
        (Subtype::ProtectionRead, dat_return_subtype::DAT_PROTECTION_READ as u32),
        (Subtype::ProtectionWrite, dat_return_subtype::DAT_PROTECTION_WRITE as u32),
        (Subtype::ProtectionRdmaRead, dat_return_subtype::DAT_PROTECTION_RDMA_READ as u32),
        (Subtype::ProtectionRdmaWrite, dat_return_subtype::DAT_PROTECTION_RDMA_WRITE as u32),
        (Subtype::InvalidAddressUnsupported, dat_return_subtype::DAT_INVALID_ADDRESS_UNSUPPORTED as u32),
        (Subtype::InvalidAddressUnreachable, dat_return_subtype::DAT_INVALID_ADDRESS_UNREACHABLE as u32),
        (Subtype::InvalidAddressMalformed, dat_return_subtype::DAT_INVALID_ADDRESS_MALFORMED as u32),
        (Subtype::NameNotRegistered, dat_return_subtype::DAT_NAME_NOT_REGISTERED as u32),
        (Subtype::MajorNotFound, dat_return_subtype::DAT_MAJOR_NOT_FOUND as u32),
        (Subtype::MinorNotFound, dat_return_subtype::DAT_MINOR_NOT_FOUND as u32),
        (Subtype::ThreadSafetyNotFound, dat_return_subtype::DAT_THREAD_SAFETY_NOT_FOUND as u32),
    ];
    assert_eq!(pairs.len(), Subtype::ALL.len());
    for (ours, theirs) in pairs {
        assert_eq!(ours as u32, theirs, "{ours:?}");
    }
}

#[test]
fn ep_states_match_the_header() {
    use dat_ep_state as s;
    let pairs = [
        (EpState::Unconnected, s::DAT_EP_STATE_UNCONNECTED),
        (EpState::Reserved, s::DAT_EP_STATE_RESERVED),
        (EpState::PassiveConnectionPending, s::DAT_EP_STATE_PASSIVE_CONNECTION_PENDING),
        (EpState::ActiveConnectionPending, s::DAT_EP_STATE_ACTIVE_CONNECTION_PENDING),
        (EpState::TentativeConnectionPending, s::DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING),
        (EpState::Connected, s::DAT_EP_STATE_CONNECTED),
        (EpState::DisconnectPending, s::DAT_EP_STATE_DISCONNECT_PENDING),
        (EpState::Disconnected, s::DAT_EP_STATE_DISCONNECTED),
        (EpState::CompletionPending, s::DAT_EP_STATE_COMPLETION_PENDING),
    ];
    for (ours, theirs) in pairs {
        assert_eq!(ours as u32, theirs as u32, "{ours:?}");
    }
}

#[test]
fn event_numbers_match_the_header() {
    use dat_event_number as n;
    let pairs = [
        (EventNumber::DtoCompletion, n::DAT_DTO_COMPLETION_EVENT),
        (EventNumber::RmrBindCompletion, n::DAT_RMR_BIND_COMPLETION_EVENT),
        (EventNumber::ConnectionRequest, n::DAT_CONNECTION_REQUEST_EVENT),
        (EventNumber::ConnectionEstablished, n::DAT_CONNECTION_EVENT_ESTABLISHED),
        (EventNumber::ConnectionPeerRejected, n::DAT_CONNECTION_EVENT_PEER_REJECTED),
        (EventNumber::ConnectionNonPeerRejected, n::DAT_CONNECTION_EVENT_NON_PEER_REJECTED),
        (EventNumber::ConnectionAcceptCompletionError, n::DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR),
        (EventNumber::ConnectionDisconnected, n::DAT_CONNECTION_EVENT_DISCONNECTED),
        (EventNumber::ConnectionBroken, n::DAT_CONNECTION_EVENT_BROKEN),
        (EventNumber::ConnectionTimedOut, n::DAT_CONNECTION_EVENT_TIMED_OUT),
        (EventNumber::ConnectionUnreachable, n::DAT_CONNECTION_EVENT_UNREACHABLE),
        (EventNumber::AsyncEvdOverflow, n::DAT_ASYNC_ERROR_EVD_OVERFLOW),
        (EventNumber::AsyncIaCatastrophic, n::DAT_ASYNC_ERROR_IA_CATASTROPHIC),
        (EventNumber::AsyncEpBroken, n::DAT_ASYNC_ERROR_EP_BROKEN),
        (EventNumber::AsyncTimedOut, n::DAT_ASYNC_ERROR_TIMED_OUT),
        (EventNumber::AsyncProviderInternalError, n::DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR),
        (EventNumber::Software, n::DAT_SOFTWARE_EVENT),
    ];
    for (ours, theirs) in pairs {
        assert_eq!(ours as u32, theirs as u32, "{ours:?}");
    }
}

#[test]
fn dto_status_and_ops_match_the_header() {
    use dat_dto_completion_status as st;
    let statuses = [
        (DtoStatus::Success, st::DAT_DTO_SUCCESS),
        (DtoStatus::Flushed, st::DAT_DTO_ERR_FLUSHED),
        (DtoStatus::LocalLength, st::DAT_DTO_ERR_LOCAL_LENGTH),
        (DtoStatus::LocalEp, st::DAT_DTO_ERR_LOCAL_EP),
        (DtoStatus::LocalProtection, st::DAT_DTO_ERR_LOCAL_PROTECTION),
        (DtoStatus::BadResponse, st::DAT_DTO_ERR_BAD_RESPONSE),
        (DtoStatus::RemoteAccess, st::DAT_DTO_ERR_REMOTE_ACCESS),
        (DtoStatus::RemoteResponder, st::DAT_DTO_ERR_REMOTE_RESPONDER),
        (DtoStatus::Transport, st::DAT_DTO_ERR_TRANSPORT),
        (DtoStatus::ReceiverNotReady, st::DAT_DTO_ERR_RECEIVER_NOT_READY),
        (DtoStatus::PartialPacket, st::DAT_DTO_ERR_PARTIAL_PACKET),
        (DtoStatus::RmrOperationFailed, st::DAT_RMR_OPERATION_FAILED),
    ];
    for (ours, theirs) in statuses {
        assert_eq!(ours as u32, theirs as u32, "{ours:?}");
    }
    use dat_dtos as op;
    let ops = [
        (DtoOp::Send, op::DAT_DTO_SEND),
        (DtoOp::RdmaWrite, op::DAT_DTO_RDMA_WRITE),
        (DtoOp::RdmaRead, op::DAT_DTO_RDMA_READ),
        (DtoOp::Receive, op::DAT_DTO_RECEIVE),
        (DtoOp::ReceiveWithInvalidate, op::DAT_DTO_RECEIVE_WITH_INVALIDATE),
        (DtoOp::BindMw, op::DAT_DTO_BIND_MW),
    ];
    for (ours, theirs) in ops {
        assert_eq!(ours as u32, theirs as u32, "{ours:?}");
    }
}

#[test]
fn flags_and_handle_types_match_the_header() {
    use dat_mem_priv_flags as m;
    assert_eq!(MemPriv::LOCAL_READ.0, m::DAT_MEM_PRIV_LOCAL_READ_FLAG as u32);
    assert_eq!(MemPriv::REMOTE_READ.0, m::DAT_MEM_PRIV_REMOTE_READ_FLAG as u32);
    assert_eq!(MemPriv::LOCAL_WRITE.0, m::DAT_MEM_PRIV_LOCAL_WRITE_FLAG as u32);
    assert_eq!(MemPriv::REMOTE_WRITE.0, m::DAT_MEM_PRIV_REMOTE_WRITE_FLAG as u32);
    assert_eq!(MemPriv::ALL.0, m::DAT_MEM_PRIV_ALL_FLAG as u32);
    use dat_completion_flags as c;
    assert_eq!(CompletionFlags::SUPPRESS.0, c::DAT_COMPLETION_SUPPRESS_FLAG as u32);
    assert_eq!(CompletionFlags::SOLICITED_WAIT.0, c::DAT_COMPLETION_SOLICITED_WAIT_FLAG as u32);
    assert_eq!(CompletionFlags::UNSIGNALLED.0, c::DAT_COMPLETION_UNSIGNALLED_FLAG as u32);
    assert_eq!(CompletionFlags::BARRIER_FENCE.0, c::DAT_COMPLETION_BARRIER_FENCE_FLAG as u32);
    assert_eq!(CompletionFlags::EVD_THRESHOLD.0, c::DAT_COMPLETION_EVD_THRESHOLD_FLAG as u32);
    use dat_evd_flags as e;
    assert_eq!(EvdFlags::SOFTWARE.0, e::DAT_EVD_SOFTWARE_FLAG as u32);
    assert_eq!(EvdFlags::CR.0, e::DAT_EVD_CR_FLAG as u32);
    assert_eq!(EvdFlags::DTO.0, e::DAT_EVD_DTO_FLAG as u32);
    assert_eq!(EvdFlags::CONNECTION.0, e::DAT_EVD_CONNECTION_FLAG as u32);
    assert_eq!(EvdFlags::RMR_BIND.0, e::DAT_EVD_RMR_BIND_FLAG as u32);
    assert_eq!(EvdFlags::ASYNC.0, e::DAT_EVD_ASYNC_FLAG as u32);
    assert_eq!(EvdFlags::DEFAULT.0, e::DAT_EVD_DEFAULT_FLAG as u32);
    assert_eq!(CloseFlags::Graceful as u32, dat_close_flags::DAT_CLOSE_GRACEFUL_FLAG as u32);
    assert_eq!(PspFlags::Provider as u32, dat_psp_flags::DAT_PSP_PROVIDER_FLAG as u32);
    use dat_handle_type as h;
    let kinds = [
        (Kind::Cr, h::DAT_HANDLE_TYPE_CR),
        (Kind::Ep, h::DAT_HANDLE_TYPE_EP),
        (Kind::Evd, h::DAT_HANDLE_TYPE_EVD),
        (Kind::Ia, h::DAT_HANDLE_TYPE_IA),
        (Kind::Lmr, h::DAT_HANDLE_TYPE_LMR),
        (Kind::Psp, h::DAT_HANDLE_TYPE_PSP),
        (Kind::Pz, h::DAT_HANDLE_TYPE_PZ),
        (Kind::Rmr, h::DAT_HANDLE_TYPE_RMR),
        (Kind::Rsp, h::DAT_HANDLE_TYPE_RSP),
        (Kind::Cno, h::DAT_HANDLE_TYPE_CNO),
        (Kind::Srq, h::DAT_HANDLE_TYPE_SRQ),
    ];
    for (ours, theirs) in kinds {
        assert_eq!(ours as u32, theirs as u32, "{ours:?}");
    }
    assert_eq!(PZ_FIELD_ALL, dat_pz_param_mask::DAT_PZ_FIELD_ALL as u32);
    assert_eq!(PSP_FIELD_ALL, dat_psp_param_mask::DAT_PSP_FIELD_ALL as u32);
    assert_eq!(RSP_FIELD_ALL, dat_rsp_param_mask::DAT_RSP_FIELD_ALL as u32);
    assert_eq!(CR_FIELD_ALL, dat_cr_param_mask::DAT_CR_FIELD_ALL as u32);
    assert_eq!(SRQ_FIELD_ALL, dat_srq_param_mask::DAT_SRQ_FIELD_ALL as u32);
    assert_eq!(EVD_FIELD_ALL, dat_evd_param_mask::DAT_EVD_FIELD_ALL as u32);
    assert_eq!(RMR_FIELD_ALL, dat_rmr_param_mask::DAT_RMR_FIELD_ALL as u32);
    assert_eq!(LMR_FIELD_ALL, dat_lmr_param_mask::DAT_LMR_FIELD_ALL as u32);
}
