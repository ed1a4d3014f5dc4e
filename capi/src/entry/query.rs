//! The IB extension's fast provider query (`<dat2/dat_ib_extensions.h>`
//! 2.0.8): `dat_ib_open_query(name, &ia, ia_mask, &ia_attr, pr_mask,
//! &pr_attr)` "Given IA name, open appropriate provider for fast attribute
//! query", and `dat_ib_close_query(ia)`.
//!
//! The open's handle is the provider's name: libdat2's
//! `dat_extension_op` reads it from the `va_list`, finds the provider
//! registered under it, and calls that provider's extended-op slot with
//! the name as the handle (libudat.a's does the same). `c/ext.c` reads the
//! rest and calls [`open_query`], which the registry installs there. The
//! IA it opens is an ordinary one of the provider, its handle the
//! provider's own (libdat2 hands it to the consumer unconverted), and
//! `dat_ib_close_query` closes it abruptly, as OFA's provider does; the
//! attributes' pointers (the IA address, the provider's named attributes)
//! stay valid until then.

use std::ffi::c_char;
use std::ptr;

use udat_core::{DatError, ErrorType, Subtype};

use super::guarded;
use crate::registry;
use crate::sys::*;

/// The queue length of the async EVD the query's IA gets.
const ASYNC_QLEN: DAT_COUNT = 8;

extern "C" {
    /// `c/ext.c`: where its open-query case finds [`open_query`].
    fn udat_ext_set_open_query(f: udat_open_query_fn);
}

/// Hand [`open_query`] to `c/ext.c`, before the first provider is
/// registered.
pub(crate) fn install() {
    // SAFETY: `c/ext.c` stores the pointer atomically; the function lives
    // as long as the program.
    unsafe { udat_ext_set_open_query(Some(open_query)) };
}

/// `dat_ib_open_query` of the provider registered as `name`: open an IA
/// of it, fill the attributes the masks ask for as `dat_ia_query` does,
/// and hand the IA back in `*ia`. Arguments count as `dat_extension_op`'s
/// (the name is 3).
///
/// # Safety
/// The pointers are null or valid for their types (`name` is read no
/// further than a name's longest).
pub unsafe extern "C" fn open_query(
    name: *const c_char,
    ia: *mut DAT_IA_HANDLE,
    ia_mask: DAT_IA_ATTR_MASK,
    ia_attr: *mut DAT_IA_ATTR,
    provider_mask: DAT_PROVIDER_ATTR_MASK,
    provider_attr: *mut DAT_PROVIDER_ATTR,
) -> DAT_RETURN {
    guarded(|| {
        let cname = match super::name(name, 3) {
            Ok(n) => n,
            Err(e) => return e.to_raw(),
        };
        if ia.is_null() {
            return DatError::invalid_arg(4).to_raw();
        }
        let Some(table) = registry::table(&cname) else {
            return DatError::of(ErrorType::ProviderNotFound).to_raw();
        };
        // SAFETY: registered tables are never freed, and every slot is
        // filled.
        let (open, query, close) = unsafe { ((*table).ia_open_func, (*table).ia_query_func, (*table).ia_close_func) };
        let (Some(open), Some(query), Some(close)) = (open, query, close) else {
            return DatError::of(ErrorType::InternalError).to_raw();
        };
        let mut opened: DAT_IA_HANDLE = ptr::null_mut();
        let mut async_evd: DAT_EVD_HANDLE = ptr::null_mut();
        // SAFETY: the provider's own entry points, with the caller's name
        // and our out-pointers.
        let ret = unsafe { open(cname.as_ptr().cast_mut(), ASYNC_QLEN, &mut async_evd, &mut opened) };
        if ret != DAT_SUCCESS {
            return ret;
        }
        // dat_ia_query(3DAT)'s rules for the masks and the structures
        // (arguments 3-6 of the query are 5-8 here).
        // SAFETY: as above; the structures are the caller's.
        let ret = unsafe { query(opened, ptr::null_mut(), ia_mask, ia_attr, provider_mask, provider_attr) };
        if ret != DAT_SUCCESS {
            // SAFETY: the IA just opened.
            unsafe { close(opened, DAT_CLOSE_ABRUPT_FLAG) };
            return renumbered(ret);
        }
        // SAFETY: checked non-null above.
        unsafe { *ia = opened };
        DAT_SUCCESS
    })
}

/// A `DAT_INVALID_PARAMETER` of the inner `dat_ia_query` numbered as the
/// open query's arguments: the query's argument n is the open's n + 2.
fn renumbered(ret: DAT_RETURN) -> DAT_RETURN {
    let (first, last) = (Subtype::InvalidArg1 as u16, Subtype::InvalidArg10 as u16);
    match DatError::from_raw(ret) {
        Some(Err(e)) if e.error_type() == ErrorType::InvalidParameter => {
            let sub = e.subtype() as u16;
            if (first..=last).contains(&sub) {
                DatError::invalid_arg((sub - first) as u8 + 3).to_raw()
            } else {
                ret
            }
        }
        _ => ret,
    }
}
