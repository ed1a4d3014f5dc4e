//! The consumer calls of `<dat2/udat.h>` a C side makes, from either
//! library that exports them: libudat.a, linked into this binary, or
//! libdat2, loaded on first use, which in turn loads the provider that
//! `dat.conf` names (udat's plug-in, OFA dapl's, any other). A side is
//! generic over the library, so a post through libudat.a stays a direct
//! call and one through libdat2 is the indirect call a program linked
//! with `-ldat2` makes through its PLT.

use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

use udat_capi::sys::{self, *};

/// Declares the calls once: the trait, its implementation by the linked
/// libudat.a, and the table of libdat2's addresses with its
/// implementation.
macro_rules! calls {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        /// A library of DAT consumer calls.
        ///
        /// # Safety
        /// Each call is the C function of the same name, with its contract.
        pub unsafe trait Dat: Copy + Send + 'static {
            $(
                /// The C function of this name.
                ///
                /// # Safety
                /// As the DAT page of the call says.
                #[allow(clippy::too_many_arguments, reason = "the C function's")]
                unsafe fn $name(self, $($arg: $ty),*) -> DAT_RETURN;
            )*
            /// `dat_ib_post_fetch_and_add` of `<dat2/dat_ib_extensions.h>`.
            ///
            /// # Safety
            /// As `dat_extension_op` with `DAT_IB_FETCH_AND_ADD_OP`.
            unsafe fn fetch_and_add(
                self,
                ep: DAT_EP_HANDLE,
                add: u64,
                local: *mut DAT_LMR_TRIPLET,
                cookie: u64,
                remote: *const DAT_RMR_TRIPLET,
                flags: DAT_COMPLETION_FLAGS,
            ) -> DAT_RETURN;
        }

        // SAFETY: the functions are udat_capi::sys's declarations of
        // libudat.a's own.
        unsafe impl Dat for Libudat {
            $(
                #[inline(always)]
                #[allow(clippy::too_many_arguments, reason = "the C function's")]
                unsafe fn $name(self, $($arg: $ty),*) -> DAT_RETURN {
                    // SAFETY: the caller's contract.
                    unsafe { sys::$name($($arg),*) }
                }
            )*

            #[inline(always)]
            unsafe fn fetch_and_add(
                self,
                ep: DAT_EP_HANDLE,
                add: u64,
                local: *mut DAT_LMR_TRIPLET,
                cookie: u64,
                remote: *const DAT_RMR_TRIPLET,
                flags: DAT_COMPLETION_FLAGS,
            ) -> DAT_RETURN {
                // SAFETY: the caller's contract; the arguments as the
                // extension's macro passes them (the cookie, an 8-byte
                // union, as its 64 bits).
                unsafe {
                    sys::dat_extension_op(ep, DAT_IB_FETCH_AND_ADD_OP as DAT_EXTENDED_OP, add, local, cookie, remote, flags)
                }
            }
        }

        /// libdat2's addresses of the calls.
        pub struct Table {
            $($name: unsafe extern "C" fn($($ty),*) -> DAT_RETURN,)*
            dat_extension_op: unsafe extern "C" fn(DAT_HANDLE, DAT_EXTENDED_OP, ...) -> DAT_RETURN,
        }

        impl Table {
            /// The addresses of the calls in the library `lib`.
            fn resolve(lib: *mut c_void) -> Result<Table, String> {
                Ok(Table {
                    // SAFETY: each symbol is the C function whose type the
                    // field has (libdat2 implements <dat2/udat.h>).
                    $($name: unsafe {
                        std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) -> DAT_RETURN>(
                            symbol(lib, concat!(stringify!($name), "\0"))?,
                        )
                    },)*
                    // SAFETY: as above.
                    dat_extension_op: unsafe {
                        std::mem::transmute::<
                            *mut c_void,
                            unsafe extern "C" fn(DAT_HANDLE, DAT_EXTENDED_OP, ...) -> DAT_RETURN,
                        >(symbol(lib, "dat_extension_op\0")?)
                    },
                })
            }
        }

        // SAFETY: the table holds libdat2's functions of these names.
        unsafe impl Dat for Libdat2 {
            $(
                #[inline(always)]
                #[allow(clippy::too_many_arguments, reason = "the C function's")]
                unsafe fn $name(self, $($arg: $ty),*) -> DAT_RETURN {
                    // SAFETY: the caller's contract.
                    unsafe { (self.0.$name)($($arg),*) }
                }
            )*

            #[inline(always)]
            unsafe fn fetch_and_add(
                self,
                ep: DAT_EP_HANDLE,
                add: u64,
                local: *mut DAT_LMR_TRIPLET,
                cookie: u64,
                remote: *const DAT_RMR_TRIPLET,
                flags: DAT_COMPLETION_FLAGS,
            ) -> DAT_RETURN {
                // SAFETY: as libudat.a's.
                unsafe {
                    (self.0.dat_extension_op)(ep, DAT_IB_FETCH_AND_ADD_OP as DAT_EXTENDED_OP, add, local, cookie, remote, flags)
                }
            }
        }
    };
}

calls! {
    dat_ia_openv(name: DAT_NAME_PTR, qlen: DAT_COUNT, async_evd: *mut DAT_EVD_HANDLE, ia: *mut DAT_IA_HANDLE,
        major: DAT_UINT32, minor: DAT_UINT32, thread_safe: DAT_BOOLEAN);
    dat_ia_close(ia: DAT_IA_HANDLE, flags: DAT_CLOSE_FLAGS);
    dat_ia_query(ia: DAT_IA_HANDLE, async_evd: *mut DAT_EVD_HANDLE, ia_mask: DAT_IA_ATTR_MASK, ia_attr: *mut DAT_IA_ATTR,
        provider_mask: DAT_PROVIDER_ATTR_MASK, provider_attr: *mut DAT_PROVIDER_ATTR);
    dat_pz_create(ia: DAT_IA_HANDLE, pz: *mut DAT_PZ_HANDLE);
    dat_evd_create(ia: DAT_IA_HANDLE, qlen: DAT_COUNT, cno: DAT_CNO_HANDLE, flags: DAT_EVD_FLAGS,
        evd: *mut DAT_EVD_HANDLE);
    dat_lmr_create(ia: DAT_IA_HANDLE, kind: DAT_MEM_TYPE, region: DAT_REGION_DESCRIPTION, length: DAT_VLEN,
        pz: DAT_PZ_HANDLE, privileges: DAT_MEM_PRIV_FLAGS, va_type: DAT_VA_TYPE, lmr: *mut DAT_LMR_HANDLE,
        lmr_context: *mut DAT_LMR_CONTEXT, rmr_context: *mut DAT_RMR_CONTEXT, registered_length: *mut DAT_VLEN,
        registered_address: *mut DAT_VADDR);
    dat_ep_create(ia: DAT_IA_HANDLE, pz: DAT_PZ_HANDLE, recv_evd: DAT_EVD_HANDLE, request_evd: DAT_EVD_HANDLE,
        connect_evd: DAT_EVD_HANDLE, attr: *const DAT_EP_ATTR, ep: *mut DAT_EP_HANDLE);
    dat_evd_wait(evd: DAT_EVD_HANDLE, timeout: DAT_TIMEOUT, threshold: DAT_COUNT, event: *mut DAT_EVENT,
        nmore: *mut DAT_COUNT);
    dat_evd_dequeue(evd: DAT_EVD_HANDLE, event: *mut DAT_EVENT);
    dat_psp_create(ia: DAT_IA_HANDLE, conn_qual: DAT_CONN_QUAL, evd: DAT_EVD_HANDLE, flags: DAT_PSP_FLAGS,
        psp: *mut DAT_PSP_HANDLE);
    dat_cr_query(cr: DAT_CR_HANDLE, mask: DAT_CR_PARAM_MASK, param: *mut DAT_CR_PARAM);
    dat_cr_accept(cr: DAT_CR_HANDLE, ep: DAT_EP_HANDLE, size: DAT_COUNT, data: DAT_PVOID);
    dat_ep_connect(ep: DAT_EP_HANDLE, address: DAT_IA_ADDRESS_PTR, conn_qual: DAT_CONN_QUAL, timeout: DAT_TIMEOUT,
        size: DAT_COUNT, data: DAT_PVOID, qos: DAT_QOS, flags: DAT_CONNECT_FLAGS);
    dat_ep_disconnect(ep: DAT_EP_HANDLE, flags: DAT_CLOSE_FLAGS);
    dat_ep_post_rdma_write(ep: DAT_EP_HANDLE, count: DAT_COUNT, local: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE,
        remote: *const DAT_RMR_TRIPLET, flags: DAT_COMPLETION_FLAGS);
    dat_ep_post_rdma_read(ep: DAT_EP_HANDLE, count: DAT_COUNT, local: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE,
        remote: *const DAT_RMR_TRIPLET, flags: DAT_COMPLETION_FLAGS);
    dat_ep_post_send(ep: DAT_EP_HANDLE, count: DAT_COUNT, local: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE,
        flags: DAT_COMPLETION_FLAGS);
    dat_ep_post_recv(ep: DAT_EP_HANDLE, count: DAT_COUNT, local: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE,
        flags: DAT_COMPLETION_FLAGS);
}

/// libudat.a's consumer calls, linked into this binary: udat's own
/// registry of providers, named `udat-<transport>-<device>`.
#[derive(Clone, Copy)]
pub struct Libudat;

/// libdat2's consumer calls: providers by their `dat.conf` names.
#[derive(Clone, Copy)]
pub struct Libdat2(&'static Table);

/// The library libdat2 is, as its Debian package installs it.
const LIBDAT2: &CStr = c"libdat2.so.2";

impl Libdat2 {
    /// libdat2, loaded by the first call.
    pub fn load() -> Result<Libdat2, String> {
        static LOADED: OnceLock<Result<Table, String>> = OnceLock::new();
        let table = LOADED.get_or_init(|| {
            // SAFETY: a NUL-terminated name. RTLD_GLOBAL: the providers
            // libdat2 loads call back into it (`dat_registry_add_provider`),
            // and OFA's do not name libdat2 among the libraries they need.
            let lib = unsafe { libc::dlopen(LIBDAT2.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
            if lib.is_null() {
                return Err(format!("{} did not load: {} (Debian's libdat2-2)", LIBDAT2.to_string_lossy(), dlerror()));
            }
            Table::resolve(lib)
        });
        table.as_ref().map(Libdat2).map_err(Clone::clone)
    }
}

/// The address of `name` (NUL-terminated) in `lib`.
fn symbol(lib: *mut c_void, name: &str) -> Result<*mut c_void, String> {
    // SAFETY: a handle dlopen returned and a NUL-terminated name.
    let at = unsafe { libc::dlsym(lib, name.as_ptr().cast()) };
    if at.is_null() {
        return Err(format!("{} has no {}: {}", LIBDAT2.to_string_lossy(), name.trim_end_matches('\0'), dlerror()));
    }
    Ok(at)
}

/// The dynamic linker's last error.
fn dlerror() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated message it owns
    // until the next call, copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "no reason given".into()
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}
