//! libudat_dapl.so: udat's providers for libdat2.
//!
//! A `dat.conf` line names the library and, in `ia_params`, the transport
//! and device:
//!
//! ```text
//! udat-rxe0 u2.0 nonthreadsafe default /path/libudat_dapl.so dapl.2.0 "verbs rxe0" ""
//! udat-softhca u2.0 nonthreadsafe default /path/libudat_dapl.so dapl.2.0 "softhca mlx5_soft0" ""
//! ```
//!
//! libdat2 calls [`dat_provider_init`] when a consumer first opens the
//! name, and [`dat_provider_fini`] when the last IA of it is closed. The
//! library exports these two symbols and nothing else, so it never shadows
//! libdat2's own.

use std::ffi::{c_char, CStr};

use udat_capi::registry;
use udat_capi::sys::*;
use udat_capi::Registration;

extern "C" {
    fn dat_registry_add_provider(provider: *const DAT_PROVIDER, info: *const DAT_PROVIDER_INFO) -> DAT_RETURN;
    fn dat_registry_remove_provider(provider: *const DAT_PROVIDER, info: *const DAT_PROVIDER_INFO) -> DAT_RETURN;
    fn dats_get_ia_handle(handle: DAT_IA_HANDLE, ia: *mut DAT_IA_HANDLE) -> DAT_RETURN;
}

/// The most IA handles libdat2's handle vector is searched for.
const IA_HANDLES: usize = 4096;

/// libdat2 gives consumers a small integer for an IA and keeps the
/// provider's pointer in a vector: find the integer that maps to `ia`.
fn consumer_ia(ia: DAT_IA_HANDLE) -> DAT_IA_HANDLE {
    for i in 0..IA_HANDLES {
        let mut p: DAT_IA_HANDLE = std::ptr::null_mut();
        // SAFETY: libdat2 reads the vector under its lock and writes `p`.
        if unsafe { dats_get_ia_handle(i as DAT_IA_HANDLE, &mut p) } == 0 && p == ia {
            return i as DAT_IA_HANDLE;
        }
    }
    ia
}

/// The provider name of libdat2's info: NUL-terminated within its array,
/// or no name.
fn ia_name(info: &DAT_PROVIDER_INFO) -> Option<&CStr> {
    // SAFETY: `c_char` and `u8` have one layout; the array is the info's.
    let bytes = unsafe { std::slice::from_raw_parts(info.ia_name.as_ptr().cast::<u8>(), info.ia_name.len()) };
    CStr::from_bytes_until_nul(bytes).ok()
}

/// Called by libdat2 after it loads the library for the dat.conf line
/// `info` describes; registers a provider under exactly that name.
///
/// # Safety
/// `info` points at libdat2's provider info; `params` is null or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn dat_provider_init(info: *const DAT_PROVIDER_INFO, params: *const c_char) {
    // No panic unwinds into libdat2.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: by the contract.
        let Some(info) = (unsafe { info.as_ref() }) else { return };
        let Some(name) = ia_name(info) else { return };
        // SAFETY: by the contract.
        let params = if params.is_null() { "" } else { unsafe { CStr::from_ptr(params) }.to_str().unwrap_or("") };
        let reg = Registration {
            dapl_version: (info.dapl_version_major, info.dapl_version_minor),
            thread_safe: info.is_thread_safe == DAT_TRUE,
            ia_out: consumer_ia,
        };
        let table = match udat_capi::register(name, params, reg) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("udat: cannot register {}: ia_params {params:?}: {e:?}", name.to_string_lossy());
                return;
            }
        };
        // SAFETY: the table is never freed.
        if unsafe { dat_registry_add_provider(table, info) } != 0 {
            registry::remove(table);
        }
    }));
}

/// Called by libdat2 before it unloads the library.
///
/// # Safety
/// `info` points at libdat2's provider info.
#[no_mangle]
pub unsafe extern "C" fn dat_provider_fini(info: *const DAT_PROVIDER_INFO) {
    // No panic unwinds into libdat2.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: by the contract.
        let Some(info) = (unsafe { info.as_ref() }) else { return };
        let Some(name) = ia_name(info) else { return };
        if let Some(table) = registry::table(name) {
            // SAFETY: the table is the one registered under this name.
            unsafe { dat_registry_remove_provider(table, info) };
            registry::remove(table);
        }
    }));
}
