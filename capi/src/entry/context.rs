//! Calls on a handle of any kind.

use udat_core::handle::{AnyHandle, Kind, RawHandle};
use udat_core::DatError;

use super::{locked_on, Arg};
use crate::instance::{invalid, Instance};
use crate::sys::*;
use crate::transport::Transport;

/// Run `f` on a handle whose kind its header tells.
///
/// # Safety
/// As [`super::with`].
pub(crate) unsafe fn with_any<B: Transport>(
    h: DAT_HANDLE,
    f: impl FnOnce(&mut super::Entered<B>, AnyHandle) -> udat_core::DatResult<()>,
) -> DAT_RETURN {
    if h.is_null() {
        return DatError::invalid_handle(udat_core::Subtype::NoSubtype).to_raw();
    }
    // SAFETY: `h` is non-null and dispatched to this transport.
    let instance = unsafe { Instance::<B>::of(h) };
    locked_on(instance, |cx| {
        // The region `h` points into tells its kind.
        let kind = cx.state.handles.kind_of(h).ok_or(invalid(Kind::Ia))?;
        let raw: RawHandle = cx.raw(h, kind)?;
        f(cx, AnyHandle { kind, raw })
    })
}

/// dat_set_consumer_context(3DAT).
pub(crate) unsafe fn set_consumer_context<B: Transport>(
    h: Arg<1, DAT_HANDLE>,
    context: Arg<2, DAT_CONTEXT>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `h`'s provider word; a context is 64 bits.
    unsafe { with_any::<B>(h.0, |cx, any| cx.state.core.set_consumer_context(any, context.0.as_64)) }
}

/// dat_get_consumer_context(3DAT).
pub(crate) unsafe fn get_consumer_context<B: Transport>(
    h: Arg<1, DAT_HANDLE>,
    context: Arg<2, *mut DAT_CONTEXT>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `h`'s provider word.
    unsafe {
        with_any::<B>(h.0, |cx, any| {
            let slot = context.out()?;
            slot.as_64 = cx.state.core.get_consumer_context(any)?;
            Ok(())
        })
    }
}

/// dat_get_handle_type(3DAT).
pub(crate) unsafe fn get_handle_type<B: Transport>(
    h: Arg<1, DAT_HANDLE>,
    kind: Arg<2, *mut DAT_HANDLE_TYPE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `h`'s provider word.
    unsafe {
        with_any::<B>(h.0, |cx, any| {
            let slot = kind.out()?;
            *slot = cx.state.core.get_handle_type(any)? as DAT_HANDLE_TYPE;
            Ok(())
        })
    }
}
