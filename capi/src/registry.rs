//! The providers registered in this process, by name.
//!
//! libdat2 finds a provider's table by name and calls its `ia_open_func`
//! with that name; the static registry does the same. Both come here to
//! find the instance behind the name.

use std::any::TypeId;
use std::ffi::{CStr, CString};

use parking_lot::Mutex;
use udat_core::{DatError, DatResult, ErrorType};
use udat_verbs::Verbs;

use crate::instance::{IaOut, Instance, Transport};
use crate::sys::DAT_PROVIDER;
use crate::transport::{self, Model, Params};

struct Entry {
    name: CString,
    ty: TypeId,
    /// The instance's address (its table's).
    table: usize,
    free: unsafe fn(usize),
}

static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// What a registration carries besides its name and `ia_params`.
#[derive(Clone, Copy, Debug)]
pub struct Registration {
    pub dapl_version: (u32, u32),
    pub thread_safe: bool,
    pub ia_out: IaOut,
}

/// # Safety
/// `table` came from `Box::into_raw` of an `Instance<B>` and is freed once.
unsafe fn free<B: Transport>(table: usize) {
    // SAFETY: by the contract.
    drop(unsafe { Box::from_raw(table as *mut Instance<B>) });
}

fn insert<B: Transport>(name: &CStr, params: &Params<'_>, reg: Registration) -> DatResult<*const DAT_PROVIDER> {
    let device = CString::new(params.device).map_err(|_| DatError::invalid_arg(1))?;
    let inst = Instance::<B>::new(name.to_owned(), device, params.capacity, &reg)?;
    let table = Box::into_raw(inst) as usize;
    ENTRIES.lock().push(Entry { name: name.to_owned(), ty: TypeId::of::<B>(), table, free: free::<B> });
    Ok(table as *const DAT_PROVIDER)
}

/// Register `name` for the transport and device `params` names; the
/// table to hand to libdat2 (or to dispatch through).
pub fn add(name: &CStr, params: &str, reg: Registration) -> DatResult<*const DAT_PROVIDER> {
    if ENTRIES.lock().iter().any(|e| e.name.as_c_str() == name) {
        return Err(DatError::of(ErrorType::ProviderAlreadyRegistered));
    }
    let params = transport::parse(params).ok_or(DatError::of(ErrorType::ProviderNotFound))?;
    let capacity = params.capacity.with_env().map_err(|e| {
        eprintln!("udat: {}: {e}", name.to_string_lossy());
        DatError::of(ErrorType::InvalidParameter)
    })?;
    let params = Params { capacity, ..params };
    let device = params.device;
    match params.kind {
        transport::Kind::Verbs => insert::<Verbs>(name, &params, reg),
        transport::Kind::Mlx5 => {
            // The ConnectX control path (mlx5dv) is not built yet: the
            // device runs on the verbs path, which drives any HCA.
            eprintln!(
                "udat: {}: the mlx5 direct path has no ConnectX control path yet; {device} runs on udat-verbs",
                name.to_string_lossy()
            );
            insert::<Verbs>(name, &params, reg)
        }
        transport::Kind::Model => insert::<Model>(name, &params, reg),
    }
}

/// Unregister the provider whose table this is and free it. Handles of its
/// objects must not be used afterwards (libdat2 removes a provider only
/// when no IA of it is open).
pub fn remove(table: *const DAT_PROVIDER) -> bool {
    let entry = {
        let mut entries = ENTRIES.lock();
        let Some(i) = entries.iter().position(|e| e.table == table as usize) else { return false };
        entries.remove(i)
    };
    // SAFETY: the entry held the only record of this instance, just taken.
    unsafe { (entry.free)(entry.table) };
    true
}

/// The table registered under `name`.
pub fn table(name: &CStr) -> Option<*const DAT_PROVIDER> {
    ENTRIES.lock().iter().find(|e| e.name.as_c_str() == name).map(|e| e.table as *const DAT_PROVIDER)
}

/// The names registered, in order.
pub fn names() -> Vec<CString> {
    ENTRIES.lock().iter().map(|e| e.name.clone()).collect()
}

/// The instance of transport `B` registered under `name`.
pub fn find<B: Transport>(name: &CStr) -> Option<&'static Instance<B>> {
    let entries = ENTRIES.lock();
    let e = entries.iter().find(|e| e.name.as_c_str() == name && e.ty == TypeId::of::<B>())?;
    // SAFETY: an entry of type `B` records a live `Instance<B>`, freed only
    // by `remove`, after which libdat2 no longer calls into it.
    Some(unsafe { &*(e.table as *const Instance<B>) })
}
