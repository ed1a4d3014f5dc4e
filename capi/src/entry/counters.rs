//! The IB extension's counters (`<dat2/dat_ib_extensions.h>`):
//! `dat_ib_query_counters`, `dat_ib_print_counters`,
//! `dat_ib_start_counter` and `dat_ib_stop_counter`. `c/ext.c` reads
//! their arguments from the `va_list` of `dat_extension_op`; argument
//! numbers in errors count as `dat_extension_op` does (the handle is 1,
//! the operation 2).
//!
//! The counters are the core's ([`udat_core::counters`]): an IA's, an
//! EP's and an EVD's. They count while their IA is started: from
//! `dat_ib_start_counter` on the IA to `dat_ib_stop_counter`, or from
//! `dat_ia_open` when the environment has `UDAT_COUNTERS` set (and not
//! `0`), so that a program that only queries them, as dtestx `-p` does,
//! reads what it did.

use std::io::Write;

use udat_core::counters::{ep, evd, ia};
use udat_core::handle::{AnyHandle, IaHandle, Kind};
use udat_core::{DatError, DatResult};

use super::context::with_any;
use crate::sys::*;
use crate::transport::Transport;

/// The environment variable that starts every IA's counters at open.
pub(crate) const START_AT_OPEN: &str = "UDAT_COUNTERS";

/// Whether the environment asks for counters from `dat_ia_open` on.
pub(crate) fn started_at_open() -> bool {
    std::env::var_os(START_AT_OPEN).is_some_and(|v| !v.is_empty() && v != "0")
}

// The core's counters are the header's, in its order.
const _: () = assert!(
    ia::COUNT == DCNT_IA_ALL_COUNTERS as usize
        && ep::COUNT == DCNT_EP_ALL_COUNTERS as usize
        && evd::COUNT == DCNT_EVD_ALL_COUNTERS as usize
        && ia::Counter::SP_CR as usize == DCNT_IA_SP_CR as usize
        && ia::Counter::ASYNC_CQ_ERROR as usize == DCNT_IA_ASYNC_CQ_ERROR as usize
        && ep::Counter::POST_RECV_DATA as usize == DCNT_EP_POST_RECV_DATA as usize
        && ep::Counter::RECV_RDMA_IMM_DATA as usize == DCNT_EP_RECV_RDMA_IMM_DATA as usize
        && evd::Counter::DEQUEUE_NOT_FOUND as usize == DCNT_EVD_DEQUEUE_NOT_FOUND as usize
        && evd::Counter::DTO_CALLBACK as usize == DCNT_EVD_DTO_CALLBACK as usize
);

/// The header's names of the counters of a handle of `kind`; none for a
/// kind that has no counters.
fn names(kind: Kind) -> Option<&'static [&'static str]> {
    match kind {
        Kind::Ia => Some(ia::NAMES),
        Kind::Ep => Some(ep::NAMES),
        Kind::Evd => Some(evd::NAMES),
        _ => None,
    }
}

/// `udat_provider_head.counters`: one counters call on `h`, an IA, EP or
/// EVD (start and stop: an IA).
pub unsafe extern "C" fn counters<B: Transport>(h: DAT_HANDLE, c: *const udat_ext_counters) -> DAT_RETURN {
    // SAFETY: `c/ext.c` passes the call it filled, on its stack.
    let Some(c) = (unsafe { c.as_ref() }) else { return DAT_INTERNAL_ERROR };
    // SAFETY: `h` is non-null (`c/ext.c` checked) and dispatched to this
    // transport; a query's `out` has room for what it asks (the call's
    // contract, which `query` states).
    unsafe {
        with_any::<B>(h, |cx, any| match c.op {
            DAT_IB_QUERY_COUNTERS_OP => query(&mut cx.state.core, any, c),
            DAT_IB_PRINT_COUNTERS_OP => print(&mut cx.state.core, any, c),
            _ => switch(&mut cx.state.core, any, c),
        })
    }
}

/// The counters `c.counter` asks for of a handle of `kind`: one, or all
/// when it is the kind's `*_ALL_COUNTERS`.
fn wanted(kind: Kind, counter: i32) -> DatResult<(usize, usize)> {
    let all = names(kind).ok_or(DatError::invalid_handle(udat_core::Subtype::NoSubtype))?.len();
    match usize::try_from(counter) {
        Ok(n) if n == all => Ok((n, all)),
        Ok(n) if n < all => Ok((n, 1)),
        _ => Err(DatError::invalid_arg(3)),
    }
}

/// `dat_ib_query_counters(handle, cntr, p_cntrs_out, reset)`: one counter
/// into `*p_cntrs_out`, or all of them into the array it points at.
///
/// # Safety
/// `c.out` is null or points at room for what the call writes.
unsafe fn query<B: Transport>(
    core: &mut udat_core::Provider<B, crate::capacity::Heap>,
    any: AnyHandle,
    c: &udat_ext_counters,
) -> DatResult<()> {
    let (which, len) = wanted(any.kind, c.counter)?;
    if c.out.is_null() {
        return Err(DatError::invalid_arg(4));
    }
    // SAFETY: a non-null `out` has room for `len` counters (the call's
    // contract: one, or the kind's all).
    let out = unsafe { std::slice::from_raw_parts_mut(c.out, len) };
    core.counters_query(any, which, out, c.reset != 0)
}

/// `dat_ib_print_counters(handle, cntr, reset)`: one line per counter on
/// standard output, `name = value`, as OFA's provider prints them.
fn print<B: Transport>(
    core: &mut udat_core::Provider<B, crate::capacity::Heap>,
    any: AnyHandle,
    c: &udat_ext_counters,
) -> DatResult<()> {
    let (which, len) = wanted(any.kind, c.counter)?;
    let names = names(any.kind).unwrap_or_default();
    let mut values = vec![0u64; len];
    core.counters_query(any, which, &mut values, c.reset != 0)?;
    let first = if len == 1 { which } else { 0 };
    let mut out = std::io::stdout().lock();
    for (name, value) in names.iter().skip(first).zip(values) {
        // Output that cannot be written is not the counters' failure.
        let _ = writeln!(out, " udat:{:#x}: {name} = {value}", std::process::id());
    }
    Ok(())
}

/// `dat_ib_start_counter(ia, type)` and `dat_ib_stop_counter(ia, type)`:
/// the header's "Provide IA, call will start sampling running IB
/// counters"; `type` is a `DAT_IA_COUNTER_TYPE` (CM, link, diag). udat
/// samples no port counters, so any of them starts (stops) all the
/// counters of the IA, its EPs and its EVDs.
fn switch<B: Transport>(
    core: &mut udat_core::Provider<B, crate::capacity::Heap>,
    any: AnyHandle,
    c: &udat_ext_counters,
) -> DatResult<()> {
    if any.kind != Kind::Ia {
        return Err(crate::instance::invalid(Kind::Ia));
    }
    if !matches!(u32::try_from(c.type_), Ok(DCNT_IA_CM | DCNT_IA_LNK | DCNT_IA_DIAG)) {
        return Err(DatError::invalid_arg(3));
    }
    let ia = IaHandle::from_raw(any.raw);
    if c.op == DAT_IB_START_COUNTERS_OP {
        core.counters_start(ia)
    } else {
        core.counters_stop(ia)
    }
}
