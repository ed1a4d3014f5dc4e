//! `dat_extension_op` of libudat.a as a C consumer calls it, its
//! arguments in a `va_list`: `dat_ib_open_query` names its provider by
//! name with a null handle (registered on first use, as `dat_ia_open`
//! registers it), `dat_ib_close_query` closes what it opened, and the
//! counters read what the IA did. Bad handles and arguments get their DAT
//! errors.

use std::ffi::{c_char, c_int};
use std::ptr;

use udat_capi::sys::*;

// libudat.a's consumer functions (this crate's `dispatch.c` and `lib.rs`).
extern "C" {
    fn dat_extension_op(handle: DAT_HANDLE, op: DAT_EXTENDED_OP, ...) -> DAT_RETURN;
    fn dat_ia_openv(
        name: *const c_char,
        qlen: DAT_COUNT,
        async_evd: *mut DAT_EVD_HANDLE,
        ia: *mut DAT_IA_HANDLE,
        major: DAT_UINT32,
        minor: DAT_UINT32,
        thread_safe: DAT_BOOLEAN,
    ) -> DAT_RETURN;
    fn dat_ia_close(ia: DAT_IA_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN;
    fn dat_pz_create(ia: DAT_IA_HANDLE, pz: *mut DAT_PZ_HANDLE) -> DAT_RETURN;
}

// Keep the library's objects: the test calls them only through C.
use udat as _;

const PROVIDER: &core::ffi::CStr = c"udat-softhca-mlx5_soft0";

fn ty(ret: DAT_RETURN) -> DAT_RETURN {
    ret & DAT_TYPE_MASK
}

/// `dat_ib_open_query(name, &ia, all, &ia_attr, all, &provider_attr)`.
fn open_query(
    name: *const c_char,
    ia: *mut DAT_IA_HANDLE,
    attr: *mut DAT_IA_ATTR,
    provider: *mut DAT_PROVIDER_ATTR,
) -> DAT_RETURN {
    // SAFETY: the header's macro's arguments, in its order and types; the
    // pointers are null or valid.
    unsafe {
        dat_extension_op(
            ptr::null_mut(),
            DAT_IB_OPEN_QUERY_OP as DAT_EXTENDED_OP,
            name,
            ia,
            u64::MAX as DAT_IA_ATTR_MASK,
            attr,
            u64::MAX as DAT_PROVIDER_ATTR_MASK,
            provider,
        )
    }
}

/// The open query hands out an IA of the named provider with its
/// attributes, and the close query closes it; an unknown name, a null
/// name, a null IA pointer and a null or garbage handle for the close
/// get their errors.
#[test]
fn open_and_close_query_through_dat_extension_op() {
    let (mut ia, mut attr, mut provider) = (ptr::null_mut(), DAT_IA_ATTR::default(), DAT_PROVIDER_ATTR::default());
    assert_eq!(open_query(PROVIDER.as_ptr(), &mut ia, &mut attr, &mut provider), DAT_SUCCESS);
    assert!(!ia.is_null() && !attr.ia_address_ptr.is_null());
    assert!(provider.num_provider_specific_attr > 0);
    // SAFETY: the close query's arguments.
    let close = |h: DAT_HANDLE| unsafe { dat_extension_op(h, DAT_IB_CLOSE_QUERY_OP as DAT_EXTENDED_OP) };
    assert_eq!(close(ia), DAT_SUCCESS);
    assert_eq!(ty(close(ia)), DAT_INVALID_HANDLE, "closed already");
    assert_eq!(ty(close(ptr::null_mut())), DAT_INVALID_HANDLE);
    let mut word = 0usize;
    assert_eq!(ty(close(ptr::addr_of_mut!(word).cast())), DAT_INVALID_HANDLE, "garbage");

    let mut other = ptr::null_mut();
    assert_eq!(ty(open_query(c"udat-nosuch-x".as_ptr(), &mut other, &mut attr, &mut provider)), DAT_PROVIDER_NOT_FOUND);
    assert_eq!(open_query(ptr::null(), &mut other, &mut attr, &mut provider), DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
    let null_ia = open_query(PROVIDER.as_ptr(), ptr::null_mut(), &mut attr, &mut provider);
    assert_eq!(null_ia, DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG4);
    assert!(other.is_null());
}

/// The counters through `dat_extension_op`: started on the IA, a PZ made
/// is one `DCNT_IA_PZ_CREATE`, read alone and with all; stopped, the
/// next PZ is not counted; a null handle is refused.
#[test]
fn counters_through_dat_extension_op() {
    let (mut async_evd, mut ia) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: a name, valid out-pointers.
    let ret = unsafe { dat_ia_openv(PROVIDER.as_ptr(), 8, &mut async_evd, &mut ia, 2, 0, DAT_FALSE) };
    assert_eq!(ret, DAT_SUCCESS);
    let op = |h: DAT_HANDLE, op: DAT_IB_OP, counter: c_int, out: *mut u64| {
        // SAFETY: the counters macros' arguments: an int, then (query) a
        // pointer, then (query, print) an int reset; start and stop take
        // their type as the int.
        unsafe {
            match op {
                DAT_IB_QUERY_COUNTERS_OP => dat_extension_op(h, op as DAT_EXTENDED_OP, counter, out, 0 as c_int),
                DAT_IB_PRINT_COUNTERS_OP => dat_extension_op(h, op as DAT_EXTENDED_OP, counter, 0 as c_int),
                _ => dat_extension_op(h, op as DAT_EXTENDED_OP, counter),
            }
        }
    };
    let mut pz = ptr::null_mut();
    assert_eq!(op(ia, DAT_IB_START_COUNTERS_OP, DCNT_IA_CM as c_int, ptr::null_mut()), DAT_SUCCESS);
    // SAFETY: a live IA, a valid out-pointer.
    assert_eq!(unsafe { dat_pz_create(ia, &mut pz) }, DAT_SUCCESS);
    let mut one = [u64::MAX; 1];
    assert_eq!(op(ia, DAT_IB_QUERY_COUNTERS_OP, DCNT_IA_PZ_CREATE as c_int, one.as_mut_ptr()), DAT_SUCCESS);
    assert_eq!(one, [1]);
    assert_eq!(op(ia, DAT_IB_PRINT_COUNTERS_OP, DCNT_IA_ALL_COUNTERS as c_int, ptr::null_mut()), DAT_SUCCESS);
    assert_eq!(op(ia, DAT_IB_STOP_COUNTERS_OP, DCNT_IA_CM as c_int, ptr::null_mut()), DAT_SUCCESS);
    // SAFETY: as above.
    assert_eq!(unsafe { dat_pz_create(ia, &mut pz) }, DAT_SUCCESS);
    let mut all = vec![u64::MAX; DCNT_IA_ALL_COUNTERS as usize];
    assert_eq!(op(ia, DAT_IB_QUERY_COUNTERS_OP, DCNT_IA_ALL_COUNTERS as c_int, all.as_mut_ptr()), DAT_SUCCESS);
    assert_eq!((all[DCNT_IA_PZ_CREATE as usize], all.iter().sum::<u64>()), (1, 1), "the stopped IA held");
    let null = op(ptr::null_mut(), DAT_IB_QUERY_COUNTERS_OP, 0, one.as_mut_ptr());
    assert_eq!(ty(null), DAT_INVALID_HANDLE);
    // SAFETY: the IA is open.
    assert_eq!(unsafe { dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG) }, DAT_SUCCESS);
}
