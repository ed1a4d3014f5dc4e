//! dat_ia_open, dat_ia_query, dat_ia_close.

use std::ptr;

use udat_core::handle::{EvdHandle, IaHandle, Kind};
use udat_core::types::{CloseFlags, IaAttr};
use udat_core::{AsyncEvd, AsyncEvdRef, DatError, ErrorType};

use super::{locked_on, with, Arg, Entered};
use crate::instance::Addr;
use crate::sys::*;
use crate::transport::Transport;
use crate::{debug, registry};

/// The provider-specific attributes `dat_ia_query` reports: the path MTU
/// under the name OFA's providers give it (`DAT_IB_TRANSPORT_MTU`; dtestsrq
/// sizes its messages from it; 1024 is the RoCE MTU of a 1500-byte
/// Ethernet link and fits every InfiniBand link), and which of the IB
/// extension's operations the device performs (dtestx reads these); and
/// `UDAT_TRANSPORT`, the transport in use: `verbs`, `softhca`, or `mlx5`
/// (the direct path on a ConnectX; an `mlx5` registration in a build
/// without it, and an `auto` one, say `verbs`); and `DAT_COUNTERS`
/// (`DAT_IB_ATTR_COUNTERS`), the IB extension's counters, which dtestx
/// looks for before it queries them (`super::counters`).
struct NamedAttrs([DAT_NAMED_ATTR; 7]);

// SAFETY: the attributes point at static, immutable strings.
unsafe impl Sync for NamedAttrs {}

const fn named(name: &'static core::ffi::CStr, value: &'static core::ffi::CStr) -> DAT_NAMED_ATTR {
    DAT_NAMED_ATTR { name: name.as_ptr(), value: value.as_ptr() }
}

/// The [`NamedAttrs`] of a transport, by whether it has atomics, then by
/// whether it has UD EPs (`DAT_IB_UD`, as OFA's scm and ucm providers
/// advertise them).
macro_rules! attrs {
    ($name:ident, $transport:literal) => {
        static $name: [[NamedAttrs; 2]; 2] = [
    [attrs!(@ $transport, c"FALSE", c"FALSE"), attrs!(@ $transport, c"FALSE", c"TRUE")],
    [attrs!(@ $transport, c"TRUE", c"FALSE"), attrs!(@ $transport, c"TRUE", c"TRUE")],
        ];
    };
    (@ $transport:literal, $atomics:literal, $ud:literal) => {
        NamedAttrs([
            named(c"DAT_IB_TRANSPORT_MTU", c"1024"),
            named(c"DAT_IB_IMMED_DATA", c"TRUE"),
            named(c"DAT_IB_CMP_AND_SWAP", $atomics),
            named(c"DAT_IB_FETCH_AND_ADD", $atomics),
            named(c"DAT_IB_UD", $ud),
            named(c"UDAT_TRANSPORT", $transport),
            named(c"DAT_COUNTERS", c"TRUE"),
        ])
    };
}

attrs!(VERBS, c"verbs");
attrs!(SOFTHCA, c"softhca");
attrs!(MLX5, c"mlx5");

fn attrs_of<B: Transport>(atomics: bool, ud: bool) -> &'static NamedAttrs {
    let of = match B::NAME.to_bytes() {
        b"softhca" => &SOFTHCA,
        b"mlx5" => &MLX5,
        _ => &VERBS,
    };
    &of[usize::from(atomics)][usize::from(ud)]
}

/// `DAT_EVD_ASYNC_EXISTS` of `<dat2/dat.h>`.
const ASYNC_EXISTS: usize = 1;

/// dat_ia_open(3DAT), as libdat2 and the static registry call it: the
/// instance is the one registered under `name`.
pub(crate) unsafe fn ia_open<B: Transport>(
    name: Arg<1, DAT_NAME_PTR>,
    async_evd_qlen: Arg<2, DAT_COUNT>,
    async_evd: Arg<3, *mut DAT_EVD_HANDLE>,
    ia_out: Arg<4, *mut DAT_IA_HANDLE>,
) -> DAT_RETURN {
    let name = match name.name() {
        Ok(name) => name,
        Err(e) => return e.to_raw(),
    };
    let Some(instance) = registry::find::<B>(&name) else {
        let e = DatError::of(ErrorType::ProviderNotFound);
        debug::say(format_args!("dat_ia_open: {e}: no provider {name:?} of this transport"));
        return e.to_raw();
    };
    let ret = locked_on(instance, |cx| {
        let evd_slot = async_evd.out()?;
        let ia_slot = ia_out.out()?;
        let how = if evd_slot.is_null() {
            AsyncEvd::Create { min_qlen: async_evd_qlen.count()? }
        } else if *evd_slot as usize == ASYNC_EXISTS {
            AsyncEvd::Exists
        } else {
            AsyncEvd::Use(EvdHandle::from_raw(cx.raw(*evd_slot, Kind::Evd)?))
        };
        let (ia, evd) = cx.state.core.ia_open(instance.device.as_bytes(), how)?;
        if super::counters::started_at_open() {
            cx.state.core.counters_start(ia)?;
        }
        let (_, attr) = cx.state.core.ia_query(ia)?;
        cx.state.ia_addr[ia.raw().index() as usize] = Addr(attr.ia_address);
        if matches!(how, AsyncEvd::Create { .. }) {
            *evd_slot = cx.state.ptr(evd);
        }
        *ia_slot = cx.state.ptr(ia);
        Ok(())
    });
    if let Some(Err(e)) = DatError::from_raw(ret) {
        debug::say(format_args!("dat_ia_open of {:?} ({:?}): {e}", instance.name, instance.device));
    }
    ret
}

/// dat_ia_close(3DAT).
pub(crate) unsafe fn ia_close<B: Transport>(ia: Arg<1, DAT_IA_HANDLE>, flags: Arg<2, DAT_CLOSE_FLAGS>) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            let flags = CloseFlags::from_raw(flags.0).ok_or(flags.invalid())?;
            cx.state.core.ia_close(IaHandle::from_raw(raw), flags)?;
            cx.state.forget_cnos();
            Ok(())
        })
    }
}

/// dat_ia_query(3DAT). Every field of a structure given is filled,
/// whatever its mask asks.
pub(crate) unsafe fn ia_query<B: Transport>(
    ia: Arg<1, DAT_IA_HANDLE>,
    async_evd: Arg<2, *mut DAT_EVD_HANDLE>,
    ia_mask: Arg<3, DAT_IA_ATTR_MASK>,
    ia_attr: Arg<4, *mut DAT_IA_ATTR>,
    provider_mask: Arg<5, DAT_PROVIDER_ATTR_MASK>,
    provider_attr: Arg<6, *mut DAT_PROVIDER_ATTR>,
) -> DAT_RETURN {
    // SAFETY: dispatched on `ia`'s provider word.
    unsafe {
        with::<B>(ia, Kind::Ia, |cx, raw| {
            // dat_ia_query(3DAT): the attributes a mask asks for go to "a
            // Consumer-allocated structure that the Provider fills": none
            // there is DAT_INVALID_PARAMETER. A zero mask asks for nothing.
            if ia_mask.0 != 0 && ia_attr.0.is_null() {
                return Err(ia_attr.invalid());
            }
            if provider_mask.0 != 0 && provider_attr.0.is_null() {
                return Err(provider_attr.invalid());
            }
            let ia = IaHandle::from_raw(raw);
            let (evd, attr) = cx.state.core.ia_query(ia)?;
            if let Some(slot) = async_evd.out_or_null()? {
                *slot = match evd {
                    AsyncEvdRef::Handle(h) => cx.state.ptr(h),
                    AsyncEvdRef::OutOfScope => ASYNC_EXISTS as DAT_EVD_HANDLE,
                };
            }
            if let Some(a) = ia_attr.out_or_null()? {
                let addr = ptr::addr_of_mut!(cx.state.ia_addr[raw.index() as usize]).cast();
                fill_ia_attr(a, &attr, addr);
            }
            if let Some(p) = provider_attr.out_or_null()? {
                fill_provider_attr(cx, p, &attr);
            }
            Ok(())
        })
    }
}

/// Copy a name into a fixed C string field, NUL-terminated.
pub fn set_name(dst: &mut [libc::c_char], src: &[u8]) {
    let n = src.iter().position(|&b| b == 0).unwrap_or(src.len()).min(dst.len().saturating_sub(1));
    for (d, &s) in dst.iter_mut().zip(&src[..n]) {
        *d = s as libc::c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}

fn int(v: u32) -> DAT_COUNT {
    v.min(i32::MAX as u32) as DAT_COUNT
}

fn fill_ia_attr(a: &mut DAT_IA_ATTR, attr: &IaAttr, addr: DAT_IA_ADDRESS_PTR) {
    set_name(&mut a.adapter_name, &attr.adapter_name);
    set_name(&mut a.vendor_name, &attr.vendor_name);
    a.hardware_version_major = attr.hardware_version_major;
    a.hardware_version_minor = attr.hardware_version_minor;
    a.firmware_version_major = attr.firmware_version_major;
    a.firmware_version_minor = attr.firmware_version_minor;
    a.ia_address_ptr = addr;
    a.max_eps = int(attr.max_eps);
    a.max_dto_per_ep = int(attr.max_dto_per_ep);
    a.max_rdma_read_per_ep_in = int(attr.max_rdma_read_per_ep_in);
    a.max_rdma_read_per_ep_out = int(attr.max_rdma_read_per_ep_out);
    a.max_evds = int(attr.max_evds);
    a.max_evd_qlen = int(attr.max_evd_qlen);
    a.max_iov_segments_per_dto = int(attr.max_iov_segments_per_dto);
    a.max_lmrs = int(attr.max_lmrs);
    a.max_lmr_block_size = attr.max_lmr_block_size.min(u64::from(u32::MAX)) as DAT_SEG_LENGTH;
    a.max_lmr_virtual_address = attr.max_lmr_virtual_address;
    a.max_pzs = int(attr.max_pzs);
    a.max_message_size = attr.max_message_size;
    a.max_rdma_size = attr.max_rdma_size;
    a.max_rmrs = int(attr.max_rmrs);
    a.max_rmr_target_address = attr.max_lmr_virtual_address;
    a.max_srqs = int(attr.max_srqs);
    a.max_ep_per_srq = int(attr.max_eps);
    a.max_recv_per_srq = int(attr.max_recv_per_srq);
    a.max_iov_segments_per_rdma_read = int(attr.max_iov_segments_per_dto);
    a.max_iov_segments_per_rdma_write = int(attr.max_iov_segments_per_dto);
    a.max_rdma_read_in = int(attr.max_rdma_read_per_ep_in);
    a.max_rdma_read_out = int(attr.max_rdma_read_per_ep_out);
    a.max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
    a.max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
    a.zb_supported = DAT_FALSE;
    // The IB extension: immediate data and, where the device has them,
    // atomics (`dat_extension_op`, see `entry::ib`).
    a.extension_supported = DAT_EXTENSION_IB;
    a.extension_version = DAT_IB_EXTENSION_VERSION as DAT_COUNT;
    a.num_transport_attr = 0;
    a.transport_attr = ptr::null_mut();
    a.num_vendor_attr = 0;
    a.vendor_attr = ptr::null_mut();
}

fn fill_provider_attr<B: Transport>(cx: &Entered<B>, p: &mut DAT_PROVIDER_ATTR, attr: &IaAttr) {
    // dat_ia_close in libdat2 rebuilds the registration key from the name
    // and these three fields; they echo the registration.
    set_name(&mut p.provider_name, cx.instance.name.as_bytes());
    p.provider_version_major = 0;
    p.provider_version_minor = 1;
    p.dapl_version_major = cx.instance.dapl_version.0;
    p.dapl_version_minor = cx.instance.dapl_version.1;
    p.is_thread_safe = if cx.instance.thread_safe { DAT_TRUE } else { DAT_FALSE };
    p.lmr_mem_types_supported = DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR;
    p.iov_ownership_on_return = DAT_IOV_CONSUMER;
    p.dat_qos_supported = attr.qos_supported.0;
    p.completion_flags_supported = udat_core::types::CompletionFlags::ALL_BITS;
    p.max_private_data_size = int(attr.max_private_data_size);
    p.supports_multipath = DAT_FALSE;
    p.ep_creator = DAT_PSP_CREATES_EP_NEVER;
    p.pz_support = DAT_PZ_UNIQUE;
    p.optimal_buffer_alignment = 256;
    for row in p.evd_stream_merging_supported.iter_mut() {
        for cell in row.iter_mut() {
            *cell = DAT_TRUE;
        }
    }
    p.srq_supported = if attr.max_srqs > 0 { DAT_TRUE } else { DAT_FALSE };
    p.srq_watermarks_supported = 0;
    p.srq_ep_pz_difference_supported = if attr.srq_ep_pz_difference_supported { DAT_TRUE } else { DAT_FALSE };
    p.srq_info_supported = 0;
    p.ep_recv_info_supported = 0;
    p.lmr_sync_req = DAT_FALSE;
    p.dto_async_return_guaranteed = DAT_FALSE;
    p.rdma_write_for_rdma_read_req = DAT_FALSE;
    p.rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
    // dat_rmr_create's RMRs are of the PZ, dat_rmr_create_for_ep's of one
    // EP (on a device with type 2 windows: the software HCA, a ConnectX,
    // rxe).
    p.rmr_scope_supported = DAT_RMR_SCOPE_ANY;
    p.is_signal_safe = DAT_FALSE;
    p.ha_supported = DAT_FALSE;
    p.ha_loadbalancing = 0;
    let named = attrs_of::<B>(attr.atomics, attr.ud);
    p.num_provider_specific_attr = named.0.len() as DAT_COUNT;
    // Consumers only read through this pointer (`DAT_NAMED_ATTR *` is not
    // const in the header).
    p.provider_specific_attr = named.0.as_ptr().cast_mut();
}
