//! Shared receive queues: a receive's `wr_id` is its slot here.

use std::cell::RefCell;

use udat_core::{backend::Sge, types::SrqAttr, DatResult};

use crate::status::{check, dat_error, errno};
use crate::sys;
use crate::wr::{ibv_sges, RECV};

pub(crate) struct SrqShared {
    pub srq: *mut sys::ibv_srq,
    slots: RefCell<Slots>,
}

#[derive(Default)]
struct Slots {
    cookies: Vec<Option<u64>>,
    free: Vec<usize>,
}

impl SrqShared {
    pub fn create(pd: *mut sys::ibv_pd, attr: &SrqAttr) -> DatResult<SrqShared> {
        let mut init = sys::ibv_srq_init_attr {
            srq_context: std::ptr::null_mut(),
            attr: sys::ibv_srq_attr { max_wr: attr.max_recv_dtos, max_sge: attr.max_recv_iov, srq_limit: 0 },
        };
        // SAFETY: the PD is live; `init` is ours.
        let srq = unsafe { sys::ibv_create_srq(pd, &mut init) };
        if srq.is_null() {
            return Err(dat_error(errno()));
        }
        Ok(SrqShared { srq, slots: RefCell::new(Slots::default()) })
    }

    pub fn resize(&self, max_recv_dtos: u32) -> DatResult<()> {
        let mut attr = sys::ibv_srq_attr { max_wr: max_recv_dtos, max_sge: 0, srq_limit: 0 };
        // SAFETY: the SRQ is live.
        check(unsafe { sys::ibv_modify_srq(self.srq, &mut attr, sys::ibv_srq_attr_mask::IBV_SRQ_MAX_WR as i32) })
    }

    pub fn post_recv(&self, sges: &[Sge], cookie: u64) -> DatResult<()> {
        let (sg_list, n) = ibv_sges(sges)?;
        let slot = {
            let mut slots = self.slots.borrow_mut();
            match slots.free.pop() {
                Some(i) => {
                    slots.cookies[i] = Some(cookie);
                    i
                }
                None => {
                    slots.cookies.push(Some(cookie));
                    slots.cookies.len() - 1
                }
            }
        };
        let mut wr = sys::ibv_recv_wr { wr_id: slot as u64 | RECV, next: std::ptr::null_mut(), sg_list, num_sge: n };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the SRQ is live; `wr` and the segments it points at
        // outlive the call, which only reads them.
        let rc = unsafe { sys::post_srq_recv(self.srq, &mut wr, &mut bad) };
        if rc != 0 {
            self.take(slot as u64);
            return Err(dat_error(rc));
        }
        Ok(())
    }

    /// The cookie in `slot`, freeing it.
    pub fn take(&self, slot: u64) -> Option<u64> {
        let mut slots = self.slots.borrow_mut();
        let i = usize::try_from(slot).ok()?;
        let cookie = slots.cookies.get_mut(i)?.take()?;
        slots.free.push(i);
        Some(cookie)
    }
}

impl Drop for SrqShared {
    fn drop(&mut self) {
        // SAFETY: no QP uses the SRQ any more (each holds an Rc).
        unsafe { sys::ibv_destroy_srq(self.srq) };
    }
}
