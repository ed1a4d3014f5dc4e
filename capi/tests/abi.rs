//! The C ABI's handle rules, called through a provider table as libdat2
//! calls it, on the software HCA: a freed handle, a handle of another
//! kind, a null handle and a null out-pointer each get their DAT error and
//! leave everything else intact; unoffered slots answer
//! DAT_NOT_IMPLEMENTED; provider attributes echo the registration.

use std::ffi::CStr;
use std::ptr;

use udat_capi::sys::*;
use udat_capi::Registration;

mod common;
use common::{ty, Rig, REGISTRATION, SOFTHCA};

#[test]
fn freed_handle_is_invalid_handle_and_others_survive() {
    let rig = Rig::new(c"abi-freed", SOFTHCA);
    let t = rig.t();
    let (a, b) = (rig.pz(), rig.pz());
    // SAFETY: handles from this provider, live or freed (a tombstone).
    unsafe {
        assert_eq!(t.pz_free_func.unwrap()(a), DAT_SUCCESS);
        assert_eq!(t.pz_free_func.unwrap()(a), DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ);
        let mut param = DAT_PZ_PARAM::default();
        assert_eq!(ty(t.pz_query_func.unwrap()(a, 0, &mut param)), DAT_INVALID_HANDLE);
        // A new PZ does not take the freed one's handle while older slots
        // are free, and the other PZ is untouched.
        let c = rig.pz();
        assert_ne!(c, a);
        assert_eq!(t.pz_query_func.unwrap()(b, 0, &mut param), DAT_SUCCESS);
        assert_eq!(param.ia_handle, rig.ia);
        assert_eq!(t.pz_free_func.unwrap()(b), DAT_SUCCESS);
        assert_eq!(t.pz_free_func.unwrap()(c), DAT_SUCCESS);
    }
}

#[test]
fn handle_of_another_kind_or_null_is_refused() {
    let rig = Rig::new(c"abi-kind", SOFTHCA);
    let t = rig.t();
    let pz = rig.pz();
    let mut evd = ptr::null_mut();
    // SAFETY: handles from this provider; null where the test says so.
    unsafe {
        let flags = DAT_EVD_DTO_FLAG;
        assert_eq!(t.evd_create_func.unwrap()(rig.ia, 8, ptr::null_mut(), flags, &mut evd), DAT_SUCCESS);
        // An EVD handle where a PZ is asked for, and the reverse.
        assert_eq!(t.pz_free_func.unwrap()(evd), DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ);
        assert_eq!(ty(t.evd_free_func.unwrap()(pz)), DAT_INVALID_HANDLE);
        assert_eq!(ty(t.pz_free_func.unwrap()(ptr::null_mut())), DAT_INVALID_HANDLE);
        // A null out-pointer is the argument's DAT_INVALID_PARAMETER.
        assert_eq!(
            t.pz_create_func.unwrap()(rig.ia, ptr::null_mut()),
            DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG2
        );
        // Both objects are intact.
        let mut kind = 0;
        assert_eq!(t.get_handle_type_func.unwrap()(evd, &mut kind), DAT_SUCCESS);
        assert_eq!(kind, DAT_HANDLE_TYPE_EVD);
        assert_eq!(t.get_handle_type_func.unwrap()(pz, &mut kind), DAT_SUCCESS);
        assert_eq!(kind, DAT_HANDLE_TYPE_PZ);
        assert_eq!(t.evd_free_func.unwrap()(evd), DAT_SUCCESS);
        assert_eq!(t.pz_free_func.unwrap()(pz), DAT_SUCCESS);
    }
}

#[test]
fn unoffered_slots_are_not_implemented() {
    let rig = Rig::new(c"abi-unoffered", SOFTHCA);
    let t = rig.t();
    let mut answer = DAT_FALSE;
    // SAFETY: the slot reads none of its arguments.
    let ret = unsafe { t.ia_ha_related_func.unwrap()(rig.ia, ptr::null_mut(), &mut answer) };
    assert_eq!(ty(ret), DAT_NOT_IMPLEMENTED);
}

#[test]
fn provider_attributes_echo_the_registration() {
    let rig = Rig::new(c"abi-echo", SOFTHCA);
    let mut attr = DAT_PROVIDER_ATTR::default();
    // SAFETY: a live IA and valid out-pointers.
    let ret =
        unsafe { rig.t().ia_query_func.unwrap()(rig.ia, ptr::null_mut(), 0, ptr::null_mut(), u64::MAX, &mut attr) };
    assert_eq!(ret, DAT_SUCCESS);
    // SAFETY: the provider wrote a NUL-terminated name, and its named
    // attributes are static strings.
    unsafe {
        assert_eq!(CStr::from_ptr(attr.provider_name.as_ptr()), c"abi-echo");
        assert_eq!(CStr::from_ptr(rig.t().device_name), c"abi-echo");
        let named = std::slice::from_raw_parts(attr.provider_specific_attr, attr.num_provider_specific_attr as usize);
        assert!(named.iter().any(|a| CStr::from_ptr(a.name) == c"DAT_IB_TRANSPORT_MTU"));
        // The transport in use is named.
        let transport = named.iter().find(|a| CStr::from_ptr(a.name) == c"UDAT_TRANSPORT").unwrap();
        assert_eq!(CStr::from_ptr(transport.value), c"softhca");
    }
    assert_eq!((attr.dapl_version_major, attr.dapl_version_minor, attr.is_thread_safe), (2, 0, DAT_TRUE));
}

#[test]
fn a_handle_into_slots_not_made_yet_is_invalid_handle() {
    let rig = Rig::new(c"abi-unmade", SOFTHCA);
    let (a, b) = (rig.pz(), rig.pz());
    // Handles of one generation lie a word apart: ten words past the last
    // one made is a handle no object has had.
    let stride = b as usize - a as usize;
    assert_eq!(stride, size_of::<usize>());
    let unmade = (b as usize + 10 * stride) as DAT_PZ_HANDLE;
    let (null, mut ep) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: the IA is live; the PZ argument, a secondary handle, is
    // checked by its address alone, never read.
    unsafe {
        let ret = rig.t().ep_create_func.unwrap()(rig.ia, unmade, null, null, null, ptr::null(), &mut ep);
        assert_eq!(ret, DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ);
        assert_eq!(rig.t().pz_free_func.unwrap()(a), DAT_SUCCESS);
        assert_eq!(rig.t().pz_free_func.unwrap()(b), DAT_SUCCESS);
    }
}

#[test]
fn a_stale_handle_stays_dead_through_a_million_cycles() {
    let rig = Rig::new(c"abi-stale", SOFTHCA);
    let t = rig.t();
    let stale = rig.pz();
    // SAFETY: handles from this provider, live or freed.
    unsafe {
        assert_eq!(t.pz_free_func.unwrap()(stale), DAT_SUCCESS);
        for cycle in 0..1_000_000 {
            let pz = rig.pz();
            let ret = t.pz_free_func.unwrap()(stale);
            assert_eq!(ret, DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ, "cycle {cycle}");
            assert_eq!(t.pz_free_func.unwrap()(pz), DAT_SUCCESS);
        }
    }
}

#[test]
fn a_handle_kept_past_its_provider_removal_is_refused_when_it_comes_back() {
    let name = c"abi-removed";
    let rig = Rig::new(name, SOFTHCA);
    let (table, stale) = (rig.table, rig.pz());
    drop(rig);
    // The same name and parameters take the instance back; the old IA's
    // PZ handle still resolves to its table and is refused there.
    let rig = Rig::new(name, SOFTHCA);
    assert_eq!(rig.table, table);
    let pz = rig.pz();
    // SAFETY: handles from this provider's instance, live or freed.
    unsafe {
        assert_eq!(rig.t().pz_free_func.unwrap()(stale), DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_PZ);
        assert_eq!(rig.t().pz_free_func.unwrap()(pz), DAT_SUCCESS);
    }
}

#[test]
fn an_unknown_device_registers_nothing() {
    let reg = common::REGISTRATION;
    // `mlx5` refuses any device that is not an mlx5 one.
    let unknown =
        ["softhca mlx5_soft", "softhca mlx5_soft12", "softhca nic0", "verbs no_such_device0", "mlx5 mlx5_soft0"];
    for params in unknown.into_iter().chain(["auto no_such_device0"]) {
        let err = udat_capi::register(c"abi-unknown", params, reg).unwrap_err();
        assert_eq!(err.error_type(), udat_core::ErrorType::ProviderNotFound, "{params}");
    }
    assert!(!udat_capi::registry::names().iter().any(|n| n.as_c_str() == c"abi-unknown"));
}

#[test]
fn ia_query_asking_for_attributes_with_nowhere_to_put_them_is_invalid_parameter() {
    let rig = Rig::new(c"abi-ia-query", SOFTHCA);
    let t = rig.t();
    let (mut attr, mut pattr) = (DAT_IA_ATTR::default(), DAT_PROVIDER_ATTR::default());
    let (evd, ia_attr, p_attr) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    let invalid = |n| DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | n;
    // SAFETY: a live IA; the out-pointers are valid or null.
    unsafe {
        let q = t.ia_query_func.unwrap();
        assert_eq!(q(rig.ia, evd, !0, ia_attr, 0, p_attr), invalid(DAT_INVALID_ARG4));
        assert_eq!(q(rig.ia, evd, 0, ia_attr, !0, p_attr), invalid(DAT_INVALID_ARG6));
        // A zero mask asks for nothing, as libdat2's own calls do.
        assert_eq!(q(rig.ia, evd, 0, ia_attr, !0, &mut pattr), DAT_SUCCESS);
        assert_eq!(q(rig.ia, evd, !0, &mut attr, 0, p_attr), DAT_SUCCESS);
    }
}

#[test]
fn an_argument_error_names_the_argument_by_its_place_in_the_call() {
    let rig = Rig::new(c"abi-positions", SOFTHCA);
    let t = rig.t();
    let invalid = |n| DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | n;
    let pz = rig.pz();
    let (mut evd, mut ep) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: live handles of this provider; pointers valid, null or
    // misaligned where the test says so (misaligned ones are never
    // dereferenced: refusing them is what is tested).
    unsafe {
        assert_eq!(
            t.evd_create_func.unwrap()(rig.ia, -1, ptr::null_mut(), DAT_EVD_DTO_FLAG, &mut evd),
            invalid(DAT_INVALID_ARG2)
        );
        assert_eq!(t.evd_create_func.unwrap()(rig.ia, 8, ptr::null_mut(), DAT_EVD_DTO_FLAG, &mut evd), DAT_SUCCESS);
        let create = t.ep_create_func.unwrap();
        assert_eq!(create(rig.ia, pz, evd, evd, ptr::null_mut(), ptr::null(), &mut ep), DAT_SUCCESS);

        // A null event pointer is argument 2 of a dequeue, even of an EVD
        // the lane would answer as empty (the first dequeue takes the look
        // at connection events, so the next finds none due).
        let dequeue = t.evd_dequeue_func.unwrap();
        let mut event = DAT_EVENT::default();
        assert_eq!(ty(dequeue(evd, &mut event)), DAT_QUEUE_EMPTY);
        assert_eq!(dequeue(evd, ptr::null_mut()), invalid(DAT_INVALID_ARG2));
        assert_eq!(ty(dequeue(evd, &mut event)), DAT_QUEUE_EMPTY);

        // A null remote triplet is argument 5 of an RDMA write, before
        // anything else is looked at.
        let write = t.ep_post_rdma_write_func.unwrap();
        let cookie = DAT_DTO_COOKIE { as_64: 1 };
        assert_eq!(write(ep, 0, ptr::null_mut(), cookie, ptr::null(), 0), invalid(DAT_INVALID_ARG5));
        // A negative segment count is argument 2.
        let remote = DAT_RMR_TRIPLET::default();
        assert_eq!(write(ep, -1, ptr::null_mut(), cookie, &remote, 0), invalid(DAT_INVALID_ARG2));

        // A misaligned out-pointer the call may be given as null is its
        // own argument's error, not a write through it.
        let mut words = [0u64; 2];
        let odd = words.as_mut_ptr().cast::<u8>().add(1).cast::<DAT_BOOLEAN>();
        let mut state = 0;
        let status = t.ep_get_status_func.unwrap();
        assert_eq!(status(ep, &mut state, odd, ptr::null_mut()), invalid(DAT_INVALID_ARG3));
        assert_eq!(status(ep, &mut state, ptr::null_mut(), odd), invalid(DAT_INVALID_ARG4));
        assert_eq!(words, [0, 0]);
        // Each out-pointer may be null (the page lists no error for it).
        let (mut recv_idle, mut request_idle) = (7, 7);
        assert_eq!(status(ep, ptr::null_mut(), &mut recv_idle, &mut request_idle), DAT_SUCCESS);
        assert_eq!((recv_idle, request_idle), (DAT_TRUE, DAT_TRUE));

        // The syncs take their array before its count.
        let sync = t.lmr_sync_rdma_read_func.unwrap();
        assert_eq!(sync(rig.ia, ptr::null(), 1), invalid(DAT_INVALID_ARG2));
        assert_eq!(sync(rig.ia, ptr::null(), u64::MAX), invalid(DAT_INVALID_ARG3));

        // Flags.
        assert_eq!(t.ep_disconnect_func.unwrap()(ep, 7), invalid(DAT_INVALID_ARG2));
        let mut psp = ptr::null_mut();
        assert_eq!(t.psp_create_func.unwrap()(rig.ia, 77, evd, 9, &mut psp), invalid(DAT_INVALID_ARG4));

        // A structure passed in: a negative count in it is the structure's
        // argument.
        let mut srq = ptr::null_mut();
        let mut attr = DAT_SRQ_ATTR { max_recv_dtos: 4, max_recv_iov: -1, low_watermark: 0 };
        assert_eq!(t.srq_create_func.unwrap()(rig.ia, pz, &mut attr, &mut srq), invalid(DAT_INVALID_ARG3));

        // Private data longer than any IA takes is its size argument,
        // refused before a slice of it exists.
        let to = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes([127, 0, 0, 1]) },
            sin_zero: [0; 8],
        };
        let to = ptr::addr_of!(to).cast_mut().cast::<DAT_SOCK_ADDR>();
        let connect = t.ep_connect_func.unwrap();
        let (qos, flags) = (DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
        assert_eq!(connect(ep, to, 77, 1000, i32::MAX, ptr::null_mut(), qos, flags), invalid(DAT_INVALID_ARG5));
        assert_eq!(connect(ep, to, 77, 1000, 4, ptr::null_mut(), qos, flags), invalid(DAT_INVALID_ARG6));
        assert_eq!(connect(ep, ptr::null_mut(), 77, 1000, 0, ptr::null_mut(), qos, flags), invalid(DAT_INVALID_ARG2));

        // Everything made is intact.
        assert_eq!(t.ep_free_func.unwrap()(ep), DAT_SUCCESS);
        assert_eq!(t.evd_free_func.unwrap()(evd), DAT_SUCCESS);
        assert_eq!(t.pz_free_func.unwrap()(pz), DAT_SUCCESS);
    }
}

#[test]
fn a_freed_lmr_s_contexts_do_not_come_back_through_a_million_registrations() {
    let rig = Rig::new(c"abi-contexts", SOFTHCA);
    let t = rig.t();
    let pz = rig.pz();
    let buf = vec![0u8; 4096];
    let region = DAT_REGION_DESCRIPTION { for_va: buf.as_ptr().cast_mut().cast() };
    let privileges = DAT_MEM_PRIV_ALL_FLAG;
    let register = || {
        let (mut lmr, mut lmr_context, mut rmr_context) = (ptr::null_mut(), 0, 0);
        let (mut len, mut addr) = (0, 0);
        // SAFETY: a live IA and PZ, a buffer this test owns, valid
        // out-pointers.
        let ret = unsafe {
            t.lmr_create_func.unwrap()(
                rig.ia,
                DAT_MEM_TYPE_VIRTUAL,
                region,
                4096,
                pz,
                privileges,
                DAT_VA_TYPE_VA,
                &mut lmr,
                &mut lmr_context,
                &mut rmr_context,
                &mut len,
                &mut addr,
            )
        };
        assert_eq!(ret, DAT_SUCCESS);
        (lmr, lmr_context, rmr_context)
    };
    // SAFETY: LMR handles from this provider.
    let free = |lmr| assert_eq!(unsafe { t.lmr_free_func.unwrap()(lmr) }, DAT_SUCCESS);
    let (lmr, stale_lmr_context, stale_rmr_context) = register();
    free(lmr);
    for cycle in 0..1_000_000 {
        let (lmr, lmr_context, rmr_context) = register();
        assert_ne!(lmr_context, stale_lmr_context, "cycle {cycle}");
        assert_ne!(rmr_context, stale_rmr_context, "cycle {cycle}");
        free(lmr);
    }
    // SAFETY: a live PZ.
    assert_eq!(unsafe { t.pz_free_func.unwrap()(pz) }, DAT_SUCCESS);
}

/// dat_rmr_bind's DAT 2.0 `lmr_handle` is checked before anything else
/// the bind names: a freed LMR's handle beside a live LMR's triplet binds
/// nothing (`DAT_INVALID_HANDLE`, `DAT_INVALID_HANDLE_LMR`). The core's
/// tests hold the rest of the rule (`dat_rmr_bind_names_the_live_lmr_of_its_triplet`).
#[test]
fn dat_rmr_bind_refuses_an_lmr_handle_that_is_not_its_triplets() {
    let rig = Rig::new(c"abi-rmr-lmr", SOFTHCA);
    let t = rig.t();
    let pz = rig.pz();
    let (mut live_buf, mut freed_buf) = (vec![0u8; 4096], vec![0u8; 4096]);
    let (live, context, _) = rig.lmr(pz, &mut live_buf, DAT_MEM_PRIV_ALL_FLAG);
    let (freed, _, _) = rig.lmr(pz, &mut freed_buf, DAT_MEM_PRIV_ALL_FLAG);
    // SAFETY: a live LMR of this provider.
    assert_eq!(unsafe { t.lmr_free_func.unwrap()(freed) }, DAT_SUCCESS);
    let mut rmr = ptr::null_mut();
    // SAFETY: a live PZ and a valid out-pointer.
    assert_eq!(unsafe { t.rmr_create_func.unwrap()(pz, &mut rmr) }, DAT_SUCCESS);
    let triplet =
        DAT_LMR_TRIPLET { lmr_context: context, virtual_address: live_buf.as_ptr() as u64, segment_length: 64 };
    let bind = |lmr| {
        let mut rmr_context = 0;
        // SAFETY: live RMR, a handle under test, a valid triplet and
        // out-pointer; no EP (the LMR is checked first).
        unsafe {
            t.rmr_bind_func.unwrap()(
                rmr,
                lmr,
                &triplet,
                DAT_MEM_PRIV_REMOTE_READ_FLAG,
                DAT_VA_TYPE_VA,
                ptr::null_mut(),
                DAT_RMR_COOKIE { as_64: 1 },
                DAT_COMPLETION_DEFAULT_FLAG,
                &mut rmr_context,
            )
        }
    };
    let of = |ret: DAT_RETURN| (ty(ret), ret & DAT_SUBTYPE_MASK);
    assert_eq!(of(bind(freed)), (DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR), "a freed LMR's handle");
    assert_eq!(of(bind(rmr.cast())), (DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR), "an RMR's handle");
    // With its own LMR the bind gets as far as the EP, which is missing.
    assert_eq!(of(bind(live)), (DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP));
}

/// A dequeue's lane knows its EVD by the handle the EVD was made with: a
/// stale handle whose slot a live DTO EVD took again is refused as an
/// unknown one is, and the live EVD's own handle still dequeues.
#[test]
fn a_stale_evd_handle_is_refused_by_the_dequeue_of_the_evd_in_its_slot() {
    // Room for the async EVD and one more: every EVD made takes the slot
    // of the one freed before it.
    let rig = Rig::new(c"abi-stale-evd", "softhca mlx5_soft0 evds=2");
    let t = rig.t();
    let stale = rig.evd(8, DAT_EVD_DTO_FLAG);
    let mut event = DAT_EVENT::default();
    // SAFETY: handles from this provider, live or freed; a valid
    // out-pointer.
    unsafe {
        let unknown = t.evd_dequeue_func.unwrap()(ptr::null_mut(), &mut event);
        assert_eq!(ty(unknown), DAT_INVALID_HANDLE);
        assert_eq!(t.evd_free_func.unwrap()(stale), DAT_SUCCESS);
        for cycle in 0..1000 {
            let evd = rig.evd(8, DAT_EVD_DTO_FLAG);
            assert_ne!(evd, stale);
            assert_eq!(t.evd_dequeue_func.unwrap()(stale, &mut event), unknown, "cycle {cycle}");
            assert_eq!(ty(t.evd_dequeue_func.unwrap()(evd, &mut event)), DAT_QUEUE_EMPTY, "cycle {cycle}");
            assert_eq!(t.evd_free_func.unwrap()(evd), DAT_SUCCESS);
        }
    }
}

/// A post's lane knows its EP by the handle the EP was made with: a stale
/// handle whose slot a live EP took again is refused by a receive's lane
/// and a request's as an unknown one is, and the live EP's own handle
/// posts its receive (and gets its request judged by its state); on a
/// provider of one thread and on a thread-safe one, whose lanes differ.
#[test]
fn a_stale_ep_handle_is_refused_by_the_posts_to_the_ep_in_its_slot() {
    stale_ep_handle(c"abi-stale-ep-one", false);
    stale_ep_handle(c"abi-stale-ep-shared", true);
}

fn stale_ep_handle(name: &'static CStr, thread_safe: bool) {
    // Room for one EP: every EP made takes the slot of the one freed
    // before it.
    let rig = Rig::registered(name, "softhca mlx5_soft0 eps=1", Registration { thread_safe, ..REGISTRATION });
    let t = rig.t();
    let pz = rig.pz();
    let evd = rig.evd(8, DAT_EVD_DTO_FLAG);
    let mut buf = vec![0u8; 64];
    let (_, lmr_context, rmr_context) = rig.lmr(pz, &mut buf, DAT_MEM_PRIV_ALL_FLAG);
    let at = buf.as_ptr() as u64;
    let mut seg = DAT_LMR_TRIPLET { lmr_context, virtual_address: at, segment_length: 64 };
    let remote = DAT_RMR_TRIPLET { rmr_context, virtual_address: at, segment_length: 64 };
    let (cookie, flags) = (DAT_DTO_COOKIE { as_64: 7 }, DAT_COMPLETION_DEFAULT_FLAG);
    let unknown = DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP;
    let stale = rig.ep(pz, evd, evd, ptr::null_mut());
    // SAFETY: handles from this provider, live or freed; triplets inside
    // a live LMR.
    unsafe {
        assert_eq!(t.ep_free_func.unwrap()(stale), DAT_SUCCESS);
        for cycle in 0..1000 {
            let ep = rig.ep(pz, evd, evd, ptr::null_mut());
            assert_ne!(ep, stale);
            let recv = t.ep_post_recv_func.unwrap();
            let write = t.ep_post_rdma_write_func.unwrap();
            assert_eq!(recv(stale, 1, &mut seg, cookie, flags), unknown, "{name:?} cycle {cycle}");
            assert_eq!(write(stale, 1, &mut seg, cookie, &remote, flags), unknown, "{name:?} cycle {cycle}");
            assert_eq!(recv(ep, 1, &mut seg, cookie, flags), DAT_SUCCESS, "{name:?} cycle {cycle}");
            assert_eq!(ty(write(ep, 1, &mut seg, cookie, &remote, flags)), DAT_INVALID_STATE, "{name:?} cycle {cycle}");
            assert_eq!(t.ep_free_func.unwrap()(ep), DAT_SUCCESS, "{name:?} cycle {cycle}");
            // The receive's flush, if the free made one.
            while !rig.empty(evd) {}
        }
    }
}

/// A lane takes its slot from the handle's address masked to the kind's
/// slots, and knows its object by the handle the object keeps: a handle
/// of another kind, whose address masks onto a live object (every slot
/// holds one here), is refused as an unknown one is, and the completion
/// waiting on the EVD is left for the EVD's own handle; on a provider of
/// one thread and on a thread-safe one.
#[test]
fn a_handle_of_another_kind_is_refused_by_the_lanes_of_the_objects_its_address_masks_onto() {
    other_kind(c"abi-other-kind-one", false, 7431);
    other_kind(c"abi-other-kind-shared", true, 7432);
}

fn other_kind(name: &'static CStr, thread_safe: bool, qual: u64) {
    // Two EPs and four EVDs (the async EVD, the DTO EVD, the connection
    // EVD and the CR EVD): each kind's slots all live.
    let rig = Rig::registered(name, "softhca mlx5_soft0 eps=2 evds=4", Registration { thread_safe, ..REGISTRATION });
    let t = rig.t();
    let pz = rig.pz();
    let cr_evd = rig.evd(4, DAT_EVD_CR_FLAG);
    let psp = rig.psp(qual, cr_evd);
    let dto = rig.evd(16, DAT_EVD_DTO_FLAG);
    let conn = rig.evd(4, DAT_EVD_CONNECTION_FLAG);
    let (client, server) = (rig.ep(pz, dto, dto, conn), rig.ep(pz, dto, dto, conn));
    rig.connect(client, server, qual, cr_evd);
    for _ in 0..2 {
        assert_eq!(rig.next(conn).event_number, DAT_CONNECTION_EVENT_ESTABLISHED);
    }
    let (mut local, mut target) = (vec![0u8; 64], vec![0u8; 64]);
    let (lmr, lmr_context, _) = rig.lmr(pz, &mut local, DAT_MEM_PRIV_ALL_FLAG);
    let (_, _, rmr_context) = rig.lmr(pz, &mut target, DAT_MEM_PRIV_ALL_FLAG);
    let mut seg = DAT_LMR_TRIPLET { lmr_context, virtual_address: local.as_ptr() as u64, segment_length: 64 };
    let remote = DAT_RMR_TRIPLET { rmr_context, virtual_address: target.as_ptr() as u64, segment_length: 64 };
    let (cookie, flags) = (DAT_DTO_COOKIE { as_64: 7 }, DAT_COMPLETION_DEFAULT_FLAG);
    let mut event = DAT_EVENT::default();
    // SAFETY: handles from this provider, of the kinds the test says;
    // triplets inside live LMRs; a valid out-pointer.
    unsafe {
        assert_eq!(t.ep_post_rdma_write_func.unwrap()(client, 1, &mut seg, cookie, &remote, flags), DAT_SUCCESS);
        let not_eps = [pz, dto, conn, cr_evd, psp, lmr, rig.ia];
        for h in not_eps {
            let recv = t.ep_post_recv_func.unwrap()(h, 1, &mut seg, cookie, flags);
            assert_eq!(ty(recv), DAT_INVALID_HANDLE, "{name:?}: a receive on {h:?}: {recv:#x}");
            let write = t.ep_post_rdma_write_func.unwrap()(h, 1, &mut seg, cookie, &remote, flags);
            assert_eq!(ty(write), DAT_INVALID_HANDLE, "{name:?}: a write on {h:?}: {write:#x}");
        }
        // The write's completion waits on the DTO EVD: no other kind's
        // handle takes it.
        for h in [pz, client, server, psp, lmr, rig.ia] {
            let ret = t.evd_dequeue_func.unwrap()(h, &mut event);
            assert_eq!(ty(ret), DAT_INVALID_HANDLE, "{name:?}: a dequeue on {h:?}: {ret:#x}");
        }
        let done = rig.next(dto);
        assert_eq!(done.event_number, DAT_DTO_COMPLETION_EVENT);
        let dto_data = done.event_data.dto_completion_event_data;
        assert_eq!((dto_data.ep_handle, dto_data.user_cookie.as_64), (client, 7), "{name:?}");
        assert_eq!(t.ep_post_recv_func.unwrap()(server, 1, &mut seg, cookie, flags), DAT_SUCCESS, "{name:?}");
    }
}
