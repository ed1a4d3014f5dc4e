// Each test crate that includes this module uses a part of it.
#![allow(dead_code)]

//! A software-HCA provider registered under a name of the test's own, with an
//! IA open on it: called through its table as libdat2 calls it, with the
//! objects a test of the data path makes on the way.

use std::ffi::CStr;
use std::ptr;

use udat_capi::registry;
use udat_capi::sys::*;
use udat_capi::Registration;

fn same(ia: DAT_IA_HANDLE) -> DAT_IA_HANDLE {
    ia
}

/// The registration every test provider has: thread-safe, so a test may
/// call its entry points from any thread.
pub const REGISTRATION: Registration = Registration { dapl_version: (2, 0), thread_safe: true, ia_out: same };

/// The `ia_params` of the software HCA's provider, default capacities.
pub const SOFTHCA: &str = "softhca mlx5_soft0";

/// The type of `ret` (`DAT_GET_TYPE` of <dat2/dat_error.h>): its class and
/// subtype masked off.
pub fn ty(ret: DAT_RETURN) -> DAT_RETURN {
    ret & DAT_TYPE_MASK
}

/// `ret` is `DAT_SUCCESS`, or the test fails naming `what`.
pub fn ok(ret: DAT_RETURN, what: &str) {
    assert_eq!(ret, DAT_SUCCESS, "{what}: {ret:#x}");
}

/// An EVD of `qlen` with `flags` on `ia`, no CNO.
pub fn evd(t: &DAT_PROVIDER, ia: DAT_IA_HANDLE, qlen: i32, flags: DAT_EVD_FLAGS) -> DAT_EVD_HANDLE {
    let mut evd = ptr::null_mut();
    // SAFETY: the slot of a live provider table, a live IA and a valid
    // out-pointer.
    ok(unsafe { t.evd_create_func.unwrap()(ia, qlen, ptr::null_mut(), flags, &mut evd) }, "dat_evd_create");
    evd
}

pub struct Rig {
    pub table: *const DAT_PROVIDER,
    pub ia: DAT_IA_HANDLE,
    /// The IA's async EVD, which `dat_ia_open` made.
    pub async_evd: DAT_EVD_HANDLE,
}

impl Rig {
    /// A provider registered with `params` as its `ia_params`.
    pub fn new(name: &'static CStr, params: &str) -> Rig {
        Rig::registered(name, params, REGISTRATION)
    }

    /// A provider registered with `params` as its `ia_params` and `reg`.
    pub fn registered(name: &'static CStr, params: &str, reg: Registration) -> Rig {
        let table = udat_capi::register(name, params, reg).expect("register the software HCA provider");
        let (mut async_evd, mut ia) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: the table was just registered; the arguments are valid.
        let ret = unsafe { (*table).ia_open_func.unwrap()(name.as_ptr().cast_mut(), 8, &mut async_evd, &mut ia) };
        ok(ret, "dat_ia_open");
        Rig { table, ia, async_evd }
    }

    pub fn t(&self) -> &DAT_PROVIDER {
        // SAFETY: registered until `drop`.
        unsafe { &*self.table }
    }

    pub fn pz(&self) -> DAT_PZ_HANDLE {
        let mut pz = ptr::null_mut();
        // SAFETY: a live IA and a valid out-pointer.
        ok(unsafe { self.t().pz_create_func.unwrap()(self.ia, &mut pz) }, "dat_pz_create");
        pz
    }

    /// An EVD of `qlen` with `flags`, no CNO.
    pub fn evd(&self, qlen: i32, flags: DAT_EVD_FLAGS) -> DAT_EVD_HANDLE {
        evd(self.t(), self.ia, qlen, flags)
    }

    /// `dat_ep_create` in `pz` with the EVDs given (null for none) and
    /// default attributes: the EP, or the call's error.
    pub fn try_ep(
        &self,
        pz: DAT_PZ_HANDLE,
        recv: DAT_EVD_HANDLE,
        request: DAT_EVD_HANDLE,
        conn: DAT_EVD_HANDLE,
    ) -> Result<DAT_EP_HANDLE, DAT_RETURN> {
        let mut ep = ptr::null_mut();
        // SAFETY: handles of this provider or null, and a valid out-pointer.
        match unsafe { self.t().ep_create_func.unwrap()(self.ia, pz, recv, request, conn, ptr::null(), &mut ep) } {
            DAT_SUCCESS => Ok(ep),
            ret => Err(ret),
        }
    }

    /// An EP in `pz` with the EVDs given and default attributes.
    pub fn ep(
        &self,
        pz: DAT_PZ_HANDLE,
        recv: DAT_EVD_HANDLE,
        request: DAT_EVD_HANDLE,
        conn: DAT_EVD_HANDLE,
    ) -> DAT_EP_HANDLE {
        self.try_ep(pz, recv, request, conn).unwrap_or_else(|ret| panic!("dat_ep_create: {ret:#x}"))
    }

    /// `dat_lmr_create` of `buf` in `pz` with `privileges`: the LMR and its
    /// two contexts, or the call's error. `buf` must outlive the LMR (the
    /// IA's close frees it at the latest).
    pub fn try_lmr(
        &self,
        pz: DAT_PZ_HANDLE,
        buf: &mut [u8],
        privileges: DAT_MEM_PRIV_FLAGS,
    ) -> Result<(DAT_LMR_HANDLE, DAT_LMR_CONTEXT, DAT_RMR_CONTEXT), DAT_RETURN> {
        let (mut lmr, mut lmr_context, mut rmr_context) = (ptr::null_mut(), 0, 0);
        let region = DAT_REGION_DESCRIPTION { for_va: buf.as_mut_ptr().cast() };
        // SAFETY: a live IA and PZ, a buffer its caller keeps for the
        // LMR's life, valid out-pointers and null optional ones.
        let ret = unsafe {
            self.t().lmr_create_func.unwrap()(
                self.ia,
                DAT_MEM_TYPE_VIRTUAL,
                region,
                buf.len() as u64,
                pz,
                privileges,
                DAT_VA_TYPE_VA,
                &mut lmr,
                &mut lmr_context,
                &mut rmr_context,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        match ret {
            DAT_SUCCESS => Ok((lmr, lmr_context, rmr_context)),
            ret => Err(ret),
        }
    }

    /// `buf` registered in `pz` with `privileges`: the LMR and its two
    /// contexts.
    pub fn lmr(
        &self,
        pz: DAT_PZ_HANDLE,
        buf: &mut [u8],
        privileges: DAT_MEM_PRIV_FLAGS,
    ) -> (DAT_LMR_HANDLE, DAT_LMR_CONTEXT, DAT_RMR_CONTEXT) {
        self.try_lmr(pz, buf, privileges).unwrap_or_else(|ret| panic!("dat_lmr_create: {ret:#x}"))
    }

    /// The IA's attributes (`dat_ia_query`).
    pub fn attr(&self) -> DAT_IA_ATTR {
        let mut attr = DAT_IA_ATTR::default();
        // SAFETY: a live IA and a valid out-pointer.
        let ret = unsafe {
            self.t().ia_query_func.unwrap()(self.ia, ptr::null_mut(), u64::MAX, &mut attr, 0, ptr::null_mut())
        };
        ok(ret, "dat_ia_query");
        attr
    }

    /// A listener on `qual` whose requests arrive on `cr_evd`.
    pub fn psp(&self, qual: u64, cr_evd: DAT_EVD_HANDLE) -> DAT_PSP_HANDLE {
        let mut psp = ptr::null_mut();
        // SAFETY: live handles of this provider and a valid out-pointer.
        let ret = unsafe { self.t().psp_create_func.unwrap()(self.ia, qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &mut psp) };
        ok(ret, "dat_psp_create");
        psp
    }

    /// `client` connects to this IA's listener on `qual`, whose request
    /// arrives on `cr_evd` and is accepted on `server`. The connection
    /// events go to the two EPs' connect EVDs.
    pub fn connect(&self, client: DAT_EP_HANDLE, server: DAT_EP_HANDLE, qual: u64, cr_evd: DAT_EVD_HANDLE) {
        let t = self.t();
        let attr = self.attr();
        let (qos, flags) = (DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
        // SAFETY: a live EP, the IA's own address.
        let ret = unsafe {
            t.ep_connect_func.unwrap()(client, attr.ia_address_ptr, qual, u32::MAX, 0, ptr::null_mut(), qos, flags)
        };
        ok(ret, "dat_ep_connect");
        let request = self.next(cr_evd);
        assert_eq!(request.event_number, DAT_CONNECTION_REQUEST_EVENT);
        // SAFETY: a CR arrival's data.
        let cr = unsafe { request.event_data.cr_arrival_event_data.cr_handle };
        // SAFETY: a live CR and EP.
        ok(unsafe { t.cr_accept_func.unwrap()(cr, server, 0, ptr::null_mut()) }, "dat_cr_accept");
    }

    /// The next event of `evd`, within a generous bound.
    pub fn next(&self, evd: DAT_EVD_HANDLE) -> DAT_EVENT {
        let mut event = DAT_EVENT::default();
        for _ in 0..10_000_000 {
            // SAFETY: a live EVD and a valid out-pointer.
            match unsafe { self.t().evd_dequeue_func.unwrap()(evd, &mut event) } {
                DAT_SUCCESS => return event,
                ret => assert_eq!(ty(ret), DAT_QUEUE_EMPTY, "dat_evd_dequeue: {ret:#x}"),
            }
            std::thread::yield_now();
        }
        panic!("no event on the EVD");
    }

    /// Whether `evd` has no event to dequeue.
    pub fn empty(&self, evd: DAT_EVD_HANDLE) -> bool {
        let mut event = DAT_EVENT::default();
        // SAFETY: a live EVD and a valid out-pointer.
        match unsafe { self.t().evd_dequeue_func.unwrap()(evd, &mut event) } {
            DAT_SUCCESS => false,
            ret => {
                assert_eq!(ty(ret), DAT_QUEUE_EMPTY, "dat_evd_dequeue: {ret:#x}");
                true
            }
        }
    }

    /// An RDMA write on `ep` of `local` to `remote`, with `cookie`.
    pub fn write(
        &self,
        ep: DAT_EP_HANDLE,
        local: DAT_LMR_TRIPLET,
        remote: &DAT_RMR_TRIPLET,
        cookie: u64,
    ) -> DAT_RETURN {
        let mut local = local;
        // SAFETY: a live EP of this provider, triplets inside live LMRs.
        unsafe {
            self.t().ep_post_rdma_write_func.unwrap()(
                ep,
                1,
                &mut local,
                DAT_DTO_COOKIE { as_64: cookie },
                remote,
                DAT_COMPLETION_DEFAULT_FLAG,
            )
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // SAFETY: the IA is open; no thread uses the provider any more.
        ok(unsafe { self.t().ia_close_func.unwrap()(self.ia, DAT_CLOSE_ABRUPT_FLAG) }, "dat_ia_close");
        assert!(registry::remove(self.table));
    }
}
