//! The providers registered in this process, by name.
//!
//! libdat2 finds a provider's table by name and calls its `ia_open_func`
//! with that name; the static registry does the same. Both come here to
//! find the instance behind the name.
//!
//! An instance is never freed: a removed provider's instance is kept,
//! unlisted, so that a handle a consumer kept past the removal still leads
//! to a table that refuses it, and a registration of the same name and
//! parameters later takes it back. Its handles stay dead across that, since
//! the instance's slots keep their generations.

use std::any::TypeId;
use std::ffi::{CStr, CString};
use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use udat_core::{DatError, DatResult, ErrorType};
use udat_verbs::Verbs;

use crate::instance::{Instance, Registration};
use crate::sys::DAT_PROVIDER;
use crate::transport::Transport;
use crate::transport::{self, Params};

struct Entry {
    name: CString,
    ty: TypeId,
    /// The `ia_params` and registration it was made with.
    params: String,
    version: (u32, u32, bool),
    /// The instance's address (its table's).
    table: usize,
    /// Listed: registered and not removed since.
    listed: bool,
}

static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn insert<B: Transport>(
    name: &CStr,
    raw: &str,
    params: &Params<'_>,
    reg: Registration,
) -> DatResult<*const DAT_PROVIDER> {
    if !B::knows(params.device) {
        return Err(DatError::of(ErrorType::ProviderNotFound));
    }
    let version = (reg.dapl_version.0, reg.dapl_version.1, reg.thread_safe);
    let mut entries = ENTRIES.lock();
    if let Some(e) = entries.iter_mut().find(|e| {
        !e.listed
            && e.name.as_c_str() == name
            && e.ty == TypeId::of::<B>()
            && e.params == raw
            && e.version == version
            // SAFETY: an entry of type `B` records an `Instance<B>`, never
            // freed.
            && !unsafe { &*(e.table as *const Instance<B>) }.poisoned.load(Ordering::Relaxed)
    }) {
        e.listed = true;
        return Ok(e.table as *const DAT_PROVIDER);
    }
    let device = CString::new(params.device).map_err(|_| DatError::invalid_arg(1))?;
    let instance = Instance::<B>::new(name.to_owned(), device, params.capacity, &reg)?;
    // Never freed: see the module documentation.
    let table = Box::into_raw(instance) as usize;
    entries.push(Entry {
        name: name.to_owned(),
        ty: TypeId::of::<B>(),
        params: raw.to_owned(),
        version,
        table,
        listed: true,
    });
    Ok(table as *const DAT_PROVIDER)
}

/// Register `name` for the transport and device `params` names
/// ([`crate::register`]).
pub(crate) fn add(name: &CStr, params: &str, reg: Registration) -> DatResult<*const DAT_PROVIDER> {
    if ENTRIES.lock().iter().any(|e| e.listed && e.name.as_c_str() == name) {
        return Err(DatError::of(ErrorType::ProviderAlreadyRegistered));
    }
    let raw = params;
    let params = transport::parse(params).ok_or(DatError::of(ErrorType::ProviderNotFound))?;
    let capacity = params.capacity.with_env().map_err(|e| {
        eprintln!("udat: {}: {e}", name.to_string_lossy());
        DatError::of(ErrorType::InvalidParameter)
    })?;
    let params = Params { capacity, ..params };
    let device = params.device;
    match params.kind {
        transport::Kind::Verbs => insert::<Verbs>(name, raw, &params, reg),
        transport::Kind::Mlx5 if !transport::is_mlx5(device) => {
            eprintln!("udat: {}: {device} is not an mlx5 device; `verbs` or `auto` drives it", name.to_string_lossy());
            Err(DatError::of(ErrorType::ProviderNotFound))
        }
        #[cfg(feature = "connectx")]
        transport::Kind::Mlx5 => insert::<transport::ConnectX>(name, raw, &params, reg),
        // Without the ConnectX control path (feature `connectx`) an mlx5
        // device runs on the verbs path, which drives any HCA, and
        // `dat_ia_query` says so (`UDAT_TRANSPORT`).
        #[cfg(not(feature = "connectx"))]
        transport::Kind::Mlx5 => {
            eprintln!(
                "udat: {}: this build has no ConnectX control path (feature `connectx`); {device} runs on udat-verbs",
                name.to_string_lossy()
            );
            insert::<Verbs>(name, raw, &params, reg)
        }
        #[cfg(feature = "connectx")]
        transport::Kind::Auto if transport::is_mlx5(device) => insert::<transport::ConnectX>(name, raw, &params, reg),
        transport::Kind::Auto => insert::<Verbs>(name, raw, &params, reg),
        #[cfg(feature = "softhca")]
        transport::Kind::SoftHca => insert::<transport::SoftHca>(name, raw, &params, reg),
        #[cfg(not(feature = "softhca"))]
        transport::Kind::SoftHca => {
            eprintln!("udat: {}: this build has no software HCA (feature `softhca`)", name.to_string_lossy());
            Err(DatError::of(ErrorType::ProviderNotFound))
        }
    }
}

/// Unregister the provider whose table this is. Its instance stays (see
/// the module documentation); its handles are refused from now on only as
/// far as they name no live object, so libdat2 removes a provider when no
/// IA of it is open.
pub fn remove(table: *const DAT_PROVIDER) -> bool {
    let mut entries = ENTRIES.lock();
    match entries.iter_mut().find(|e| e.listed && e.table == table as usize) {
        Some(e) => {
            e.listed = false;
            true
        }
        None => false,
    }
}

/// The table registered under `name`.
pub fn table(name: &CStr) -> Option<*const DAT_PROVIDER> {
    ENTRIES.lock().iter().find(|e| e.listed && e.name.as_c_str() == name).map(|e| e.table as *const DAT_PROVIDER)
}

/// The names registered, in order.
pub fn names() -> Vec<CString> {
    ENTRIES.lock().iter().filter(|e| e.listed).map(|e| e.name.clone()).collect()
}

/// The instance of transport `B` registered under `name`.
pub fn find<B: Transport>(name: &CStr) -> Option<&'static Instance<B>> {
    let entries = ENTRIES.lock();
    let e = entries.iter().find(|e| e.listed && e.name.as_c_str() == name && e.ty == TypeId::of::<B>())?;
    // SAFETY: an entry of type `B` records an `Instance<B>`, never freed.
    Some(unsafe { &*(e.table as *const Instance<B>) })
}
