//! The extension data of the IB extension's UD events
//! (`<dat2/dat_ib_extensions.h>` 2.0.2 and 2.0.9).
//!
//! The `ah` of a `DAT_IB_ADDR_HANDLE` is udat's address handle, not an
//! `ibv_ah`: its value is the handle's bits, generation included. A
//! connection event's `context`, its CM object, is the same value.

use std::ptr;

use udat_core::handle::AhHandle;
use udat_core::types::DtoStatus;
use udat_core::{Event, EventData, EventNumber};

use super::Cx;
use crate::sys::*;
use crate::transport::Transport;

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
pub(crate) fn write_connection<B: Transport>(cx: &mut Cx<B>, e: &Event, out: &mut DAT_EVENT) {
    let EventData::UdConnection { ep, ah, remote_qpn, private_data_size, passive } = e.data else { return };
    let mut record = connection_record(e.number, ah, remote_qpn, passive);
    let (data, remote) = match cx.st.core.ud_connection(ep, ah) {
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
        ep_handle: cx.st.ptr(ep),
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
