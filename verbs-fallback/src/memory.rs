//! Protection domains and what is made in them: memory registrations
//! and memory windows.

use std::rc::Rc;

use udat_core::{backend::Registration, types::MemPriv, DatError, DatResult, ErrorType};

use crate::device::IaShared;
use crate::status::{self, dat_error, errno};
use crate::sys;

/// A protection domain.
pub struct Pd {
    pub(crate) pd: *mut sys::ibv_pd,
    pub(crate) ia: Rc<IaShared>,
}

impl Pd {
    /// Register `length` bytes at `address` in this PD.
    pub fn register(&self, address: u64, length: u64, privileges: MemPriv) -> DatResult<Registration<Mr>> {
        let len = usize::try_from(length).map_err(|_| DatError::of(ErrorType::LengthError))?;
        let flags = access(privileges, self.ia.has_memory_windows());
        // SAFETY: the PD is live. The kernel pins and checks the range; a
        // range the process does not map fails with EFAULT.
        let mr = unsafe { sys::ibv_reg_mr(self.pd, address as *mut _, len, flags) };
        if mr.is_null() {
            let errno = errno();
            return Err(status::memlock_exceeded(errno, length).unwrap_or_else(|| dat_error(errno)));
        }
        // SAFETY: `mr` was just registered.
        let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
        Ok(Registration { mr: Mr(mr), lkey, rkey, address, length })
    }

    pub(crate) fn on(ia: &Rc<IaShared>) -> DatResult<Pd> {
        // SAFETY: the context is open.
        let pd = unsafe { sys::ibv_alloc_pd(ia.ctx) };
        if pd.is_null() {
            return Err(dat_error(errno()));
        }
        Ok(Pd { pd, ia: ia.clone() })
    }

    /// A memory window of this PD of `kind`, unbound.
    pub fn window(&self, kind: sys::ibv_mw_type::Type) -> DatResult<Window> {
        // SAFETY: the PD is live.
        let mw = unsafe { sys::alloc_mw(self.pd, kind) };
        if mw.is_null() {
            return Err(DatError::of(ErrorType::ModelNotSupported));
        }
        Ok(Window(mw))
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: the core frees a PD only when nothing uses it.
        unsafe { sys::ibv_dealloc_pd(self.pd) };
    }
}

/// A memory registration.
pub struct Mr(pub(crate) *mut sys::ibv_mr);

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: the core frees an LMR only when no RMR is bound to it.
        unsafe { sys::ibv_dereg_mr(self.0) };
    }
}

/// A memory window (`ibv_alloc_mw`).
pub struct Window(pub(crate) *mut sys::ibv_mw);

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: the window is live until here.
        unsafe { sys::dealloc_mw(self.0) };
    }
}

/// `DAT_MEM_PRIV_FLAGS` as verbs access flags. Verbs requires local write
/// for remote write; remote access is granted only when asked for.
pub(crate) fn access(privileges: MemPriv, mw_bind: bool) -> i32 {
    use sys::ibv_access_flags as a;
    let mut flags = a(0);
    if privileges.contains(MemPriv::LOCAL_WRITE) || privileges.contains(MemPriv::REMOTE_WRITE) {
        flags |= a::IBV_ACCESS_LOCAL_WRITE;
    }
    if privileges.contains(MemPriv::REMOTE_WRITE) {
        flags |= a::IBV_ACCESS_REMOTE_WRITE;
    }
    if privileges.contains(MemPriv::REMOTE_READ) {
        flags |= a::IBV_ACCESS_REMOTE_READ;
    }
    if privileges.contains(MemPriv::REMOTE_ATOMIC) {
        // Verbs requires local write for remote atomics too.
        flags |= a::IBV_ACCESS_REMOTE_ATOMIC | a::IBV_ACCESS_LOCAL_WRITE;
    }
    if mw_bind {
        flags |= a::IBV_ACCESS_MW_BIND;
    }
    flags.0 as i32
}
