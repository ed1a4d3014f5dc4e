//! Calls on a handle of any kind, and the slots of features udat does not
//! have, which answer `DAT_NOT_IMPLEMENTED`.

use udat_core::handle::{AnyHandle, Kind, RawHandle};
use udat_core::{DatError, ErrorType};

use super::{guarded_on, out};
use crate::instance::{invalid, Instance, Transport};
use crate::sys::*;

/// Run `f` on a handle whose kind its header tells.
///
/// # Safety
/// As [`super::with`].
unsafe fn with_any<B: Transport>(
    h: DAT_HANDLE,
    f: impl FnOnce(&mut super::Cx<B>, AnyHandle) -> udat_core::DatResult<()>,
) -> DAT_RETURN {
    if h.is_null() {
        return DatError::invalid_handle(udat_core::Subtype::NoSubtype).to_raw();
    }
    // SAFETY: `h` is non-null and dispatched to this transport.
    let inst = unsafe { Instance::<B>::of(h) };
    guarded_on(inst, || {
        let mut cx = super::Cx { inst, st: inst.state.lock() };
        // The region `h` points into tells its kind.
        let kind = cx.st.handles.kind_of(h).ok_or(invalid(Kind::Ia))?;
        let raw: RawHandle = cx.raw(h, kind)?;
        f(&mut cx, AnyHandle { kind, raw })
    })
}

/// dat_set_consumer_context(3DAT).
pub unsafe extern "C" fn set_consumer_context<B: Transport>(h: DAT_HANDLE, context: DAT_CONTEXT) -> DAT_RETURN {
    // SAFETY: dispatched on `h`'s provider word; a context is 64 bits.
    unsafe { with_any::<B>(h, |cx, any| cx.st.core.set_consumer_context(any, context.as_64)) }
}

/// dat_get_consumer_context(3DAT).
pub unsafe extern "C" fn get_consumer_context<B: Transport>(h: DAT_HANDLE, context: *mut DAT_CONTEXT) -> DAT_RETURN {
    // SAFETY: dispatched on `h`'s provider word.
    unsafe {
        with_any::<B>(h, |cx, any| {
            let slot = out(context, 2)?;
            slot.as_64 = cx.st.core.get_consumer_context(any)?;
            Ok(())
        })
    }
}

/// dat_get_handle_type(3DAT).
pub unsafe extern "C" fn get_handle_type<B: Transport>(h: DAT_HANDLE, kind: *mut DAT_HANDLE_TYPE) -> DAT_RETURN {
    // SAFETY: dispatched on `h`'s provider word.
    unsafe {
        with_any::<B>(h, |cx, any| {
            let slot = out(kind, 2)?;
            *slot = cx.st.core.get_handle_type(any)? as DAT_HANDLE_TYPE;
            Ok(())
        })
    }
}

fn not_implemented() -> DAT_RETURN {
    DatError::of(ErrorType::NotImplemented).to_raw()
}

/// dat_csp_create(3DAT): Common Service Points are not offered.
pub unsafe extern "C" fn csp_create(
    _: DAT_IA_HANDLE,
    _: *mut DAT_COMM,
    _: DAT_IA_ADDRESS_PTR,
    _: DAT_EVD_HANDLE,
    _: *mut DAT_CSP_HANDLE,
) -> DAT_RETURN {
    not_implemented()
}

/// dat_csp_query(3DAT): not offered.
pub unsafe extern "C" fn csp_query(_: DAT_CSP_HANDLE, _: DAT_CSP_PARAM_MASK, _: *mut DAT_CSP_PARAM) -> DAT_RETURN {
    not_implemented()
}

/// dat_csp_free(3DAT): not offered.
pub unsafe extern "C" fn csp_free(_: DAT_CSP_HANDLE) -> DAT_RETURN {
    not_implemented()
}

/// dat_ep_common_connect(3DAT): not offered (no CSPs).
pub unsafe extern "C" fn ep_common_connect(
    _: DAT_EP_HANDLE,
    _: DAT_IA_ADDRESS_PTR,
    _: DAT_TIMEOUT,
    _: DAT_COUNT,
    _: DAT_PVOID,
) -> DAT_RETURN {
    not_implemented()
}

/// dat_rmr_create_for_ep(3DAT): type 2 windows are not offered.
pub unsafe extern "C" fn rmr_create_for_ep(_: DAT_PZ_HANDLE, _: *mut DAT_RMR_HANDLE) -> DAT_RETURN {
    not_implemented()
}

/// dat_ep_post_send_with_invalidate(3DAT): not offered.
pub unsafe extern "C" fn ep_post_send_with_invalidate(
    _: DAT_EP_HANDLE,
    _: DAT_COUNT,
    _: *mut DAT_LMR_TRIPLET,
    _: DAT_DTO_COOKIE,
    _: DAT_COMPLETION_FLAGS,
    _: DAT_BOOLEAN,
    _: DAT_RMR_CONTEXT,
) -> DAT_RETURN {
    not_implemented()
}

/// dat_ep_post_rdma_read_to_rmr(3DAT): not offered.
pub unsafe extern "C" fn ep_post_rdma_read_to_rmr(
    _: DAT_EP_HANDLE,
    _: *const DAT_RMR_TRIPLET,
    _: DAT_DTO_COOKIE,
    _: *const DAT_RMR_TRIPLET,
    _: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    not_implemented()
}

/// dat_cno_fd_create(3DAT): not offered.
pub unsafe extern "C" fn cno_fd_create(_: DAT_IA_HANDLE, _: *mut DAT_FD, _: *mut DAT_CNO_HANDLE) -> DAT_RETURN {
    not_implemented()
}

/// dat_cno_trigger(3DAT): not offered.
pub unsafe extern "C" fn cno_trigger(_: DAT_CNO_HANDLE, _: *mut DAT_EVD_HANDLE) -> DAT_RETURN {
    not_implemented()
}

/// dat_ia_ha_related(3DAT): high availability is not offered.
pub unsafe extern "C" fn ia_ha_related(_: DAT_IA_HANDLE, _: DAT_NAME_PTR, _: *mut DAT_BOOLEAN) -> DAT_RETURN {
    not_implemented()
}
