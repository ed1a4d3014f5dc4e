//! libudat.a: udat's providers with a registry of their own, so a C
//! runtime links udat alone: no libdat2, no dat.conf, no dlopen.
//!
//! Provider names are `udat-<transport>-<device>`: `udat-verbs-rxe0`,
//! `udat-mlx5-mlx5_0`, and, in a build with the `softhca` feature,
//! `udat-softhca-mlx5_soft0`. A name is registered the first time an IA is
//! opened under it.
//!
//! The registry calls are here; every other consumer call is generated
//! from udat-capi's `entries.list` into `dispatch.c`, and reaches the
//! provider through its handle.

use std::ffi::{c_char, CStr, CString};
use std::sync::OnceLock;

use udat_capi::registry;
use udat_capi::sys::*;
use udat_capi::Registration;
use udat_core::{DatError, ErrorType, Subtype};

/// The IA handle a consumer of the static registry holds is the
/// provider's own pointer.
fn same(ia: DAT_IA_HANDLE) -> DAT_IA_HANDLE {
    ia
}

/// `ia_params` for a built-in provider name.
fn params(name: &str) -> Option<String> {
    let rest = name.strip_prefix("udat-")?;
    let (transport, device) = rest.split_once('-')?;
    Some(format!("{transport} {device}"))
}

/// The table of the provider `name`, registered with `version` and
/// `thread_safe` if this is the name's first use.
fn provider(name: &CStr, version: (u32, u32), thread_safe: bool) -> Result<*const DAT_PROVIDER, DatError> {
    if let Some(t) = registry::table(name) {
        return Ok(t);
    }
    let Some(params) = name.to_str().ok().and_then(params) else {
        return Err(DatError::of(ErrorType::ProviderNotFound));
    };
    let reg = Registration { dapl_version: version, thread_safe, ia_out: same };
    match udat_capi::register(name, &params, reg) {
        Ok(t) => Ok(t),
        // Another thread registered it meanwhile.
        Err(e) if e.error_type() == ErrorType::ProviderAlreadyRegistered => registry::table(name).ok_or(e),
        Err(e) => Err(e),
    }
}

/// The table of the provider `name` for `dispatch.c`'s `dat_extension_op`
/// (`dat_ib_open_query` names its provider), registered as a
/// `dat_ia_open` of this DAT version would; null if there is none.
///
/// # Safety
/// `name` is a non-null pointer (read no further than a name's longest).
#[no_mangle]
pub unsafe extern "C" fn udat_static_provider(name: *const c_char) -> *const DAT_PROVIDER {
    let found = std::panic::catch_unwind(|| {
        let name = udat_capi::entry::name(name, 3).ok()?;
        provider(&name, (DAT_VERSION_MAJOR, DAT_VERSION_MINOR), false).ok()
    });
    found.ok().flatten().unwrap_or(std::ptr::null())
}

/// dat_ia_openv: open an IA of the provider `name`, registering the name
/// first if this is its first use.
///
/// # Safety
/// As the DAT API: `name` is a NUL-terminated string, the pointers are
/// valid for their types.
#[no_mangle]
pub unsafe extern "C" fn dat_ia_openv(
    name: *const c_char,
    async_evd_qlen: DAT_COUNT,
    async_evd: *mut DAT_EVD_HANDLE,
    ia: *mut DAT_IA_HANDLE,
    dapl_major: DAT_UINT32,
    dapl_minor: DAT_UINT32,
    thread_safety: DAT_BOOLEAN,
) -> DAT_RETURN {
    udat_capi::entry::guarded(|| {
        let cname = match udat_capi::entry::name(name, 1) {
            Ok(n) => n,
            Err(e) => return e.to_raw(),
        };
        if ia.is_null() {
            return DatError::invalid_handle(Subtype::InvalidHandleIa).to_raw();
        }
        let table = match provider(cname.as_c_str(), (dapl_major, dapl_minor), thread_safety == DAT_TRUE) {
            Ok(t) => t,
            Err(e) => return e.to_raw(),
        };
        // SAFETY: registered tables live until removed, which this library
        // never does; every slot is filled.
        let open = unsafe { (*table).ia_open_func };
        match open {
            // SAFETY: the provider's own entry point, with the caller's
            // arguments.
            Some(f) => unsafe { f(name.cast_mut(), async_evd_qlen, async_evd, ia) },
            None => DatError::of(ErrorType::InternalError).to_raw(),
        }
    })
}

/// Where the handle spaces are, for `dispatch.c`'s inline check of a
/// first argument.
#[no_mangle]
pub static udat_handle_spaces: &udat_capi::handle_space::Spaces = &udat_capi::handle_space::SPACES;

/// The names this library can open: the software HCA (in a build with
/// it), and each verbs device present, through udat-verbs.
fn available() -> Vec<CString> {
    let mut names = Vec::new();
    if cfg!(feature = "softhca") {
        names.push(CString::from(c"udat-softhca-mlx5_soft0"));
    }
    for dev in udat_capi::transport::verbs_devices() {
        if let Ok(name) = CString::new(format!("udat-verbs-{dev}")) {
            names.push(name);
        }
    }
    for name in registry::names() {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// dat_registry_list_providers.
///
/// # Safety
/// `entries` is writable; `list` holds `max` pointers to writable
/// `DAT_PROVIDER_INFO`s.
#[no_mangle]
pub unsafe extern "C" fn dat_registry_list_providers(
    max: DAT_COUNT,
    entries: *mut DAT_COUNT,
    list: *mut *mut DAT_PROVIDER_INFO,
) -> DAT_RETURN {
    udat_capi::entry::guarded(|| {
        if entries.is_null() {
            return DatError::invalid_arg(2).to_raw();
        }
        let names = available();
        if max <= 0 {
            // SAFETY: checked non-null above.
            unsafe { *entries = names.len() as DAT_COUNT };
            // dat_registry_list_providers(3DAT): a zero max_to_return asks for
            // the count and returns DAT_INVALID_PARAMETER.
            return DatError::invalid_arg(1).to_raw();
        }
        if list.is_null() {
            return DatError::invalid_arg(3).to_raw();
        }
        let n = names.len().min(max as usize);
        for (i, name) in names.iter().take(n).enumerate() {
            // SAFETY: the caller's array holds `max` pointers to infos.
            let Some(info) = (unsafe { (*list.add(i)).as_mut() }) else {
                return DatError::invalid_arg(3).to_raw();
            };
            udat_capi::entry::ia::set_name(&mut info.ia_name, name.as_bytes());
            info.dapl_version_major = DAT_VERSION_MAJOR;
            info.dapl_version_minor = DAT_VERSION_MINOR;
            info.is_thread_safe = DAT_FALSE;
        }
        // SAFETY: checked non-null above.
        unsafe { *entries = n as DAT_COUNT };
        0
    })
}

/// Names by value: the return types, and the subtypes.
type Names = (Vec<(u32, CString)>, Vec<(u32, CString)>);

fn strings() -> &'static Names {
    static STRINGS: OnceLock<Names> = OnceLock::new();
    STRINGS.get_or_init(|| {
        let c = |s: &str| CString::new(s).unwrap_or_default();
        let mut major: Vec<_> = ErrorType::ALL.iter().map(|t| (*t as u32, c(t.name()))).collect();
        major.push((0, c("DAT_SUCCESS")));
        let minor = Subtype::ALL.iter().map(|s| (*s as u32, c(s.name()))).collect();
        (major, minor)
    })
}

/// dat_strerror: the names of a return value's type and subtype.
///
/// # Safety
/// The out-pointers are writable.
#[no_mangle]
pub unsafe extern "C" fn dat_strerror(
    value: DAT_RETURN,
    major: *mut *const c_char,
    minor: *mut *const c_char,
) -> DAT_RETURN {
    udat_capi::entry::guarded(|| {
        if major.is_null() {
            return DatError::invalid_arg(2).to_raw();
        }
        if minor.is_null() {
            return DatError::invalid_arg(3).to_raw();
        }
        let (majors, minors) = strings();
        let ty = value & 0x3fff_0000;
        let sub = value & 0xffff;
        let (Some(ma), Some(mi)) = (majors.iter().find(|(v, _)| *v == ty), minors.iter().find(|(v, _)| *v == sub))
        else {
            return DatError::invalid_arg(1).to_raw();
        };
        // SAFETY: checked non-null above; the strings are static.
        unsafe {
            *major = ma.1.as_ptr();
            *minor = mi.1.as_ptr();
        }
        0
    })
}
