//! Consumer notification objects.

use udat_core::backend::Wake;
use udat_core::handle::{CnoHandle, IaHandle, Kind};
use udat_core::{CnoStep, DatError, DatResult, ErrorType, ProxyAgent};

use super::evd::sleep;
use super::{with, Arg};
use crate::sys::*;
use crate::transport::Transport;
use udat_wake::notify::Notifier;

fn agent(a: &DAT_OS_WAIT_PROXY_AGENT) -> Option<ProxyAgent> {
    let function = a.proxy_agent_func? as usize as u64;
    Some(ProxyAgent { instance_data: a.instance_data as u64, function })
}

fn agent_out(a: Option<ProxyAgent>) -> DAT_OS_WAIT_PROXY_AGENT {
    match a {
        Some(a) => DAT_OS_WAIT_PROXY_AGENT {
            instance_data: a.instance_data as DAT_PVOID,
            // SAFETY: `function` was a `DAT_AGENT_FUNC` the consumer gave.
            proxy_agent_func: unsafe { std::mem::transmute::<usize, DAT_AGENT_FUNC>(a.function as usize) },
        },
        None => DAT_OS_WAIT_PROXY_AGENT { instance_data: std::ptr::null_mut(), proxy_agent_func: None },
    }
}

/// dat_cno_create(3DAT).
pub(crate) unsafe fn cno_create<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    proxy: Arg<2, DAT_OS_WAIT_PROXY_AGENT>,
    cno_out: Arg<3, *mut DAT_CNO_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let slot = cno_out.out()?;
            let cno = cx.state.core.cno_create(IaHandle::from_raw(raw), agent(&proxy.0))?;
            *slot = cx.state.ptr(cno);
            Ok(())
        })
    }
}

/// dat_cno_modify_agent(3DAT).
pub(crate) unsafe fn cno_modify_agent<B: Transport>(
    cno: Arg<1, DAT_CNO_HANDLE>,
    proxy: Arg<2, DAT_OS_WAIT_PROXY_AGENT>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `cno`'s provider word.
    unsafe {
        with::<B>(cno, Kind::Cno, |cx, raw| cx.state.core.cno_modify_agent(CnoHandle::from_raw(raw), agent(&proxy.0)))
    }
}

/// dat_cno_query(3DAT).
pub(crate) unsafe fn cno_query<B: Transport>(
    cno: Arg<1, DAT_CNO_HANDLE>,
    m: Arg<2, DAT_CNO_PARAM_MASK>,
    param: Arg<3, *mut DAT_CNO_PARAM>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `cno`'s provider word.
    unsafe {
        with::<B>(cno, Kind::Cno, |cx, raw| {
            let slot = param.out()?;
            let p = cx.state.core.cno_query(CnoHandle::from_raw(raw), m.0)?;
            slot.ia_handle = (cx.instance.ia_out)(cx.state.ptr(p.ia));
            slot.proxy_type = DAT_PROXY_TYPE_AGENT;
            slot.proxy.agent = agent_out(p.agent);
            Ok(())
        })
    }
}

/// dat_cno_free(3DAT); the descriptor of a CNO of `dat_cno_fd_create`
/// is closed with it (and leaves any epoll set it is in).
pub(crate) unsafe fn cno_free<B: Transport>(cno: Arg<1, DAT_CNO_HANDLE>) -> DAT_RETURN {
    // SAFETY: dispatched on `cno`'s provider word.
    unsafe {
        with::<B>(cno, Kind::Cno, |cx, raw| {
            cx.state.core.cno_free(CnoHandle::from_raw(raw))?;
            cx.state.forget_cnos();
            Ok(())
        })
    }
}

/// DAT 2.0's `dat_cno_fd_create`: a CNO with no proxy agent, and a
/// descriptor readable when it may have been triggered (`udat_wake::notify`
/// says how). The descriptor belongs to the CNO: `dat_cno_free` or the
/// close of the IA closes it. A transport with nothing to sleep on is
/// `DAT_NOT_IMPLEMENTED`.
pub(crate) unsafe fn cno_fd_create<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    fd_out: Arg<2, *mut DAT_FD>,
    cno_out: Arg<3, *mut DAT_CNO_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let fd_slot = fd_out.out()?;
            let cno_slot = cno_out.out()?;
            let ia = IaHandle::from_raw(raw);
            let transport = cx.state.core.wait_fds(ia)?;
            if transport.is_empty() {
                return Err(DatError::of(ErrorType::NotImplemented));
            }
            let notifier = Notifier::new(transport).map_err(|_| DatError::of(ErrorType::InsufficientResources))?;
            let cno = cx.state.core.cno_create(ia, None)?;
            let at = cno.raw().index() as usize;
            if at >= cx.state.cno_fds.len() {
                let _ = cx.state.core.cno_free(cno);
                return Err(DatError::of(ErrorType::InsufficientResources));
            }
            cx.state.core.cno_signal(cno, Some(notifier.signal()))?;
            *fd_slot = notifier.fd();
            cx.state.cno_fds[at] = Some((cno, notifier));
            *cno_slot = cx.state.ptr(cno);
            Ok(())
        })
    }
}

/// DAT 2.0's `dat_cno_trigger`: the EVD that triggered `cno`, without
/// blocking; `DAT_QUEUE_EMPTY` when nothing did.
pub(crate) unsafe fn cno_trigger<B: Transport>(
    cno: Arg<1, DAT_CNO_HANDLE>,
    evd_out: Arg<2, *mut DAT_EVD_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `cno`'s provider word.
    unsafe {
        with::<B>(cno, Kind::Cno, |cx, raw| {
            let slot = evd_out.out()?;
            let evd = cx.state.core.cno_trigger(CnoHandle::from_raw(raw))?;
            *slot = cx.state.ptr(evd);
            Ok(())
        })
    }
}

/// dat_cno_wait(3DAT), sleeping outside the lock like dat_evd_wait.
pub(crate) unsafe fn cno_wait<B: Transport>(
    cno: Arg<1, DAT_CNO_HANDLE>,
    timeout: Arg<2, DAT_TIMEOUT>,
    evd_out: Arg<3, *mut DAT_EVD_HANDLE>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `cno`'s provider word.
    unsafe {
        with::<B>(cno, Kind::Cno, |cx, raw| -> DatResult<()> {
            let slot = evd_out.out()?;
            let h = CnoHandle::from_raw(raw);
            let ia = cx.state.core.cno_query(h, udat_core::CNO_FIELD_ALL)?.ia;
            let wait = cx.state.core.cno_wait_begin(h, timeout.0)?;
            loop {
                match cx.state.core.cno_wait_poll(&wait)? {
                    CnoStep::Woken(evd) => {
                        *slot = cx.state.ptr(evd);
                        return Ok(());
                    }
                    CnoStep::Pending { timeout_us } => match sleep(&mut cx.state, ia, timeout_us) {
                        Ok(Wake::Interrupted) => {
                            cx.state.core.cno_wait_end(&wait);
                            return Err(DatError::of(ErrorType::InterruptedCall));
                        }
                        Ok(_) => {}
                        // The IA went away while the thread slept.
                        Err(_) => {
                            *slot = std::ptr::null_mut();
                            return Ok(());
                        }
                    },
                }
            }
        })
    }
}
