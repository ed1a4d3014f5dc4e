//! Verbs outcomes in DAT terms: work-completion statuses and errnos.

use crate::sys::ibv_wc_status as wc;
use udat_core::{types::DtoStatus, DatError, ErrorType, Subtype};

/// `ibv_wc_status` to `DAT_DTO_COMPLETION_STATUS`: the one table, with
/// a success, nearly every completion, decided by one compare.
#[inline(always)]
pub fn dto_status(status: wc::Type) -> DtoStatus {
    if status == wc::IBV_WC_SUCCESS {
        return DtoStatus::Success;
    }
    dto_error(status)
}

/// [`dto_status`] of a failure.
#[cold]
fn dto_error(status: wc::Type) -> DtoStatus {
    match status {
        wc::IBV_WC_SUCCESS => DtoStatus::Success,
        wc::IBV_WC_WR_FLUSH_ERR => DtoStatus::Flushed,
        wc::IBV_WC_LOC_LEN_ERR => DtoStatus::LocalLength,
        wc::IBV_WC_LOC_QP_OP_ERR | wc::IBV_WC_LOC_EEC_OP_ERR => DtoStatus::LocalEp,
        wc::IBV_WC_LOC_PROT_ERR | wc::IBV_WC_LOC_ACCESS_ERR | wc::IBV_WC_LOC_RDD_VIOL_ERR => DtoStatus::LocalProtection,
        wc::IBV_WC_MW_BIND_ERR => DtoStatus::RmrOperationFailed,
        wc::IBV_WC_BAD_RESP_ERR => DtoStatus::BadResponse,
        wc::IBV_WC_REM_ACCESS_ERR => DtoStatus::RemoteAccess,
        wc::IBV_WC_REM_INV_REQ_ERR
        | wc::IBV_WC_REM_OP_ERR
        | wc::IBV_WC_REM_INV_RD_REQ_ERR
        | wc::IBV_WC_REM_ABORT_ERR => DtoStatus::RemoteResponder,
        wc::IBV_WC_RNR_RETRY_EXC_ERR => DtoStatus::ReceiverNotReady,
        // Retry exhaustion, timeouts, fatal and general errors: the
        // transport failed.
        _ => DtoStatus::Transport,
    }
}

/// An errno from a verbs or rdma_cm call, as a DAT error.
pub fn dat_error(errno: i32) -> DatError {
    let ty = match errno {
        libc::ENOMEM | libc::ENOSPC | libc::EAGAIN | libc::EMFILE | libc::ENFILE => ErrorType::InsufficientResources,
        libc::EADDRINUSE => ErrorType::ConnQualInUse,
        libc::EINVAL | libc::ERANGE => ErrorType::InvalidParameter,
        libc::EOPNOTSUPP | libc::ENOSYS => ErrorType::ModelNotSupported,
        libc::EACCES | libc::EPERM => ErrorType::PrivilegesViolation,
        libc::ENODEV | libc::ENXIO => ErrorType::ProviderNotFound,
        libc::EADDRNOTAVAIL | libc::EAFNOSUPPORT => ErrorType::InvalidAddress,
        // A registration of memory the process does not map.
        libc::EFAULT => ErrorType::ProtectionViolation,
        libc::EINTR => ErrorType::InterruptedCall,
        _ => ErrorType::InternalError,
    };
    DatError::of(ty)
}

/// A registration of `length` bytes refused with `errno` because the
/// process may lock no more memory: `DAT_INSUFFICIENT_RESOURCES` with
/// `DAT_RESOURCE_MEMORY` (dat_lmr_create(3DAT): "The operation failed due
/// to resource limitations"), and one line on stderr, the first time in
/// the process, naming the limit and how to raise it. `None` when the
/// failure is not that.
///
/// The kernel pins a registration's pages and counts them against
/// `RLIMIT_MEMLOCK` unless the process has `CAP_IPC_LOCK`; past the limit
/// `ibv_reg_mr` fails with `ENOMEM` (with `EPERM` or `EAGAIN` on some
/// drivers and kernels). A process whose limit is infinite is refused for
/// some other reason, left to [`dat_error`].
pub fn memlock_exceeded(errno: i32, length: u64) -> Option<DatError> {
    if !matches!(errno, libc::ENOMEM | libc::EPERM | libc::EAGAIN) {
        return None;
    }
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid out-parameter for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    static TOLD: std::sync::Once = std::sync::Once::new();
    TOLD.call_once(|| {
        eprintln!(
            "udat: registering {length} bytes failed ({}): locked memory is limited to {} bytes (RLIMIT_MEMLOCK); \
             raise it with `ulimit -l` or `prlimit --memlock`",
            std::io::Error::from_raw_os_error(errno),
            limit.rlim_cur,
        );
    });
    Some(DatError::new(ErrorType::InsufficientResources, Subtype::ResourceMemory))
}

/// The errno of the last failed call.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// A call that returns 0 or an errno (the `ibv_*` convention).
pub fn check(rc: i32) -> Result<(), DatError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(dat_error(if rc > 0 { rc } else { errno() }))
    }
}

/// A call that returns 0 or -1 with errno set (the `rdma_*` convention).
pub fn check_errno(rc: i32) -> Result<(), DatError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(dat_error(errno()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_a_dat_meaning() {
        assert_eq!(dto_status(wc::IBV_WC_SUCCESS), DtoStatus::Success);
        assert_eq!(dto_status(wc::IBV_WC_WR_FLUSH_ERR), DtoStatus::Flushed);
        assert_eq!(dto_status(wc::IBV_WC_REM_ACCESS_ERR), DtoStatus::RemoteAccess);
        assert_eq!(dto_status(wc::IBV_WC_LOC_PROT_ERR), DtoStatus::LocalProtection);
        assert_eq!(dto_status(wc::IBV_WC_RNR_RETRY_EXC_ERR), DtoStatus::ReceiverNotReady);
        assert_eq!(dto_status(wc::IBV_WC_RETRY_EXC_ERR), DtoStatus::Transport);
        assert_eq!(dto_status(wc::IBV_WC_MW_BIND_ERR), DtoStatus::RmrOperationFailed);
        assert_eq!(dto_status(9999), DtoStatus::Transport);
    }

    #[test]
    fn errnos_map_to_dat_types() {
        assert_eq!(dat_error(libc::EADDRINUSE).error_type(), ErrorType::ConnQualInUse);
        assert_eq!(dat_error(libc::ENOMEM).error_type(), ErrorType::InsufficientResources);
        assert_eq!(dat_error(libc::EIO).error_type(), ErrorType::InternalError);
    }

    #[test]
    fn only_an_errno_of_exhaustion_can_mean_the_locked_memory_limit() {
        // The limit itself is lowered on rxe (`tests/rxe.rs`), where the
        // kernel enforces it; here no limit need be read at all.
        assert_eq!(memlock_exceeded(libc::EFAULT, 4096), None);
        assert_eq!(memlock_exceeded(libc::EINVAL, 4096), None);
    }
}
