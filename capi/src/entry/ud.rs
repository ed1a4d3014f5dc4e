//! The IB extension's UD calls (`<dat2/dat_ib_extensions.h>` 2.0.2 and
//! 2.0.9): `dat_ib_post_send_ud`, `dat_ib_ud_cm_free` and
//! `dat_ib_ud_ah_free`, which `c/ext.c` reads from the `va_list` of
//! `dat_extension_op`, and the extension data of the UD events. Argument
//! numbers in errors count as `dat_extension_op` does: the EP is 1, the
//! operation 2.
//!
//! The `ah` of a `DAT_IB_ADDR_HANDLE` is udat's address handle, not an
//! `ibv_ah`: its value is the handle's bits, generation included, so a
//! freed one is refused, and no pointer the consumer hands back is ever
//! followed. A connection event's `context`, the CM object
//! `dat_ib_ud_cm_free` takes, is the same value.

use std::ptr;

use udat_core::handle::{AhHandle, EpHandle, Kind, RawHandle};
use udat_core::types::{CompletionFlags, DtoStatus};
use udat_core::{DatError, DatResult, Door, ErrorType, Event, EventData, EventNumber, PostOp};

use super::arg::iov;
use super::{exclusive_on, Arg, Entered};
use crate::instance::{invalid, Instance};
use crate::sys::*;
use crate::transport::Transport;

/// Whether `op` is one of the UD operations this module serves.
pub(crate) fn serves(op: DAT_IB_OP) -> bool {
    matches!(op, DAT_IB_UD_SEND_OP | DAT_IB_UD_CM_FREE_OP | DAT_IB_UD_AH_FREE_OP)
}

/// The address handle and remote QP number of the consumer's
/// `DAT_IB_ADDR_HANDLE`: null or misaligned is `DAT_INVALID_PARAMETER` of
/// its argument.
///
/// # Safety
/// A non-null pointer points at a readable `DAT_IB_ADDR_HANDLE`.
unsafe fn ah_in<const N: u8>(p: Arg<N, *const DAT_IB_ADDR_HANDLE>) -> DatResult<(AhHandle, u32)> {
    // SAFETY: by the contract.
    let a = unsafe { p.input() }?;
    Ok((AhHandle::from_raw(RawHandle::from_bits(a.ah as u64)), a.qpn))
}

/// `udat_provider_head.post` for a UD operation on the EP `h`. A provider
/// that shares its state among threads takes it whole here: a UD send
/// reads the EP's address handles, which a free on another thread changes.
///
/// # Safety
/// The pointers of `p` are null or point at what the operation reads.
pub(crate) unsafe fn post<B: Transport>(h: DAT_HANDLE, p: &udat_ext_post) -> DAT_RETURN {
    if h.is_null() {
        return invalid(Kind::Ep).to_raw();
    }
    // SAFETY: `h` is non-null and dispatched to this transport; a cookie
    // and a CM context are 64 bits, whichever member the consumer set.
    let (instance, cookie, cm) = unsafe { (Instance::<B>::of(h), p.cookie.as_64, p.cm.as_64) };
    exclusive_on(instance, h, Kind::Ep, |cx, raw| {
        let (core, ep) = (&mut cx.state.core, EpHandle::from_raw(raw));
        // SAFETY: the consumer's triplets and address handle (the call's
        // contract).
        unsafe {
            match p.op {
                DAT_IB_UD_SEND_OP => {
                    let local = iov(Arg::<3, _>(p.segments), Arg::<4, _>(p.local.cast_mut()))?;
                    let (ah, qpn) = ah_in(Arg::<5, _>(p.ah))?;
                    core.ep_post_request(
                        ep,
                        local,
                        cookie,
                        PostOp::SendUd { ah, remote_qpn: qpn },
                        CompletionFlags(p.flags),
                    )
                }
                DAT_IB_UD_CM_FREE_OP => core.ud_cm_free(ep, AhHandle::from_raw(RawHandle::from_bits(cm))),
                DAT_IB_UD_AH_FREE_OP => core.ud_ah_free(ep, ah_in(Arg::<3, _>(p.ah))?.0),
                _ => Err(DatError::of(ErrorType::NotImplemented)),
            }
        }
    })
}

/// The extension record of a UD connection event: `DAT_IB_UD_REMOTE_AH`
/// or `DAT_IB_UD_PASSIVE_REMOTE_AH` with the peer's address handle for an
/// established connection, `DAT_IB_UD_CONNECT_REJECT` or
/// `DAT_IB_UD_CONNECT_ERROR` otherwise. The header: "When
/// dat_event->event_number >= DAT_IB_EXTENSION_BASE_RANGE then
/// dat_event->extension_data == DAT_IB_EXTENSION_EVENT_DATA type".
fn connection_record(number: EventNumber, ah: AhHandle, remote_qpn: u32, passive: bool) -> DAT_IB_EXTENSION_EVENT_DATA {
    let (type_, status) = match number {
        EventNumber::UdConnectionEstablished if passive => (DAT_IB_UD_PASSIVE_REMOTE_AH, DAT_OP_SUCCESS),
        EventNumber::UdConnectionEstablished => (DAT_IB_UD_REMOTE_AH, DAT_OP_SUCCESS),
        EventNumber::UdConnectionReject => (DAT_IB_UD_CONNECT_REJECT, DAT_IB_OP_ERR),
        _ => (DAT_IB_UD_CONNECT_ERROR, DAT_IB_OP_ERR),
    };
    let bits = if ah.is_null() { 0 } else { ah.raw().to_bits() };
    DAT_IB_EXTENSION_EVENT_DATA {
        type_,
        status,
        __bindgen_anon_1: dat_ib_extension_event_data__bindgen_ty_2 {
            remote_ah: DAT_IB_ADDR_HANDLE { ah: bits as usize as *mut ibv_ah, qpn: remote_qpn, ..Default::default() },
        },
        context: DAT_CONTEXT { as_64: bits },
        ..Default::default()
    }
}

/// Fill `out` from a UD connection event of the core: the connection
/// event data, with the private data the connection carried, and the
/// extension record.
pub(crate) fn write_connection<B: Transport>(cx: &mut Entered<B>, e: &Event, out: &mut DAT_EVENT) {
    let EventData::UdConnection { ep, ah, remote_qpn, private_data_size, passive } = e.data else { return };
    let mut record = connection_record(e.number, ah, remote_qpn, passive);
    let (data, remote) = match cx.state.core.ud_connection(ep, ah) {
        Ok((d, remote)) if private_data_size > 0 => (d.as_ptr() as DAT_PVOID, remote),
        Ok((_, remote)) => (ptr::null_mut(), remote),
        Err(_) => (ptr::null_mut(), Default::default()),
    };
    // SAFETY: `remote_ah` is the member this record holds; a
    // `DAT_SOCK_ADDR6` is the 28 bytes of a `sockaddr_in6`, as the
    // address.
    unsafe {
        let to = ptr::addr_of_mut!(record.__bindgen_anon_1.remote_ah.ia_addr).cast::<u8>();
        ptr::copy_nonoverlapping(remote.bytes.as_ptr(), to, remote.bytes.len().min(size_of::<DAT_SOCK_ADDR6>()));
    }
    out.event_data.connect_event_data = DAT_CONNECTION_EVENT_DATA {
        ep_handle: cx.state.ptr(ep),
        private_data_size: private_data_size as DAT_COUNT,
        private_data: data,
    };
    // SAFETY: the extension data is 64 bytes of 8-byte alignment, room
    // for the record (asserted in `evd`).
    unsafe { ptr::write(out.event_extension_data.as_mut_ptr().cast(), record) };
}

/// The extension record of a UD DTO's completion: `DAT_IB_UD_SEND`, or
/// `DAT_IB_UD_RECV` naming the sender's QP in `remote_ah`.
pub(crate) fn dto_record(recv: bool, status: DtoStatus, source_qpn: u32) -> DAT_IB_EXTENSION_EVENT_DATA {
    DAT_IB_EXTENSION_EVENT_DATA {
        type_: if recv { DAT_IB_UD_RECV } else { DAT_IB_UD_SEND },
        status: if status == DtoStatus::Success { DAT_OP_SUCCESS } else { DAT_IB_OP_ERR },
        __bindgen_anon_1: dat_ib_extension_event_data__bindgen_ty_2 {
            remote_ah: DAT_IB_ADDR_HANDLE { ah: ptr::null_mut(), qpn: source_qpn, ..Default::default() },
        },
        ..Default::default()
    }
}
