//! Shared receive queues: a receive's `wr_id` is its slot here. The SRQ's
//! receives complete in any order (each to the QP whose message took it),
//! so free slots wait on a stack; there are as many as the SRQ holds
//! receives, made when it is made or resized, so a post never allocates.

use std::cell::RefCell;
use std::rc::Rc;

use udat_core::{backend::Sge, types::SrqAttr, DatError, DatResult, ErrorType};

use crate::status::{check, dat_error, errno};
use crate::sys;
use crate::wr::{ibv_sges, RECV};

/// A shared receive queue.
pub struct Srq(pub(crate) Rc<SrqShared>);

pub(crate) struct SrqShared {
    pub srq: *mut sys::ibv_srq,
    slots: RefCell<Slots>,
}

#[derive(Default)]
struct Slots {
    /// The cookie of the receive in each slot; `None` when it is free.
    cookies: Vec<Option<u64>>,
    /// The free slots.
    free: Vec<usize>,
}

impl Slots {
    /// Room for `n` receives in all.
    fn grow_to(&mut self, n: usize) {
        let had = self.cookies.len();
        if n > had {
            self.cookies.resize(n, None);
            self.free.reserve(n - had);
            self.free.extend((had..n).rev());
        }
    }
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
        let mut slots = Slots::default();
        // The device may make room for more than asked for, and says so.
        slots.grow_to(init.attr.max_wr.max(attr.max_recv_dtos) as usize);
        Ok(SrqShared { srq, slots: RefCell::new(slots) })
    }

    pub fn resize(&self, max_recv_dtos: u32) -> DatResult<()> {
        let mut attr = sys::ibv_srq_attr { max_wr: max_recv_dtos, max_sge: 0, srq_limit: 0 };
        // SAFETY: the SRQ is live.
        check(unsafe { sys::ibv_modify_srq(self.srq, &mut attr, sys::ibv_srq_attr_mask::IBV_SRQ_MAX_WR as i32) })?;
        self.slots.borrow_mut().grow_to(max_recv_dtos as usize);
        Ok(())
    }

    /// Post a receive into `sges`; `DAT_INSUFFICIENT_RESOURCES` when the
    /// SRQ holds as many as it was made for, as a full queue of the
    /// device would answer. The slot is taken only once the device took
    /// the receive, so a refused post leaves no trace.
    pub fn post_recv(&self, sges: &[Sge], cookie: u64) -> DatResult<()> {
        let (sg_list, num_sge) = ibv_sges(sges)?;
        let slot = {
            let mut slots = self.slots.borrow_mut();
            let Some(&slot) = slots.free.last() else { return Err(DatError::of(ErrorType::InsufficientResources)) };
            slots.cookies[slot] = Some(cookie);
            slot
        };
        let mut wr = sys::ibv_recv_wr { wr_id: slot as u64 | RECV, next: std::ptr::null_mut(), sg_list, num_sge };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the SRQ is live; `wr` and the segments it points at
        // outlive the call, which only reads them.
        let rc = unsafe { sys::post_srq_recv(self.srq, &mut wr, &mut bad) };
        let mut slots = self.slots.borrow_mut();
        if rc != 0 {
            slots.cookies[slot] = None;
            return Err(dat_error(rc));
        }
        slots.free.pop();
        Ok(())
    }

    /// The cookie in `slot`, freeing it.
    pub fn take(&self, slot: u64) -> Option<u64> {
        let mut slots = self.slots.borrow_mut();
        let i = usize::try_from(slot).ok()?;
        let cookie = slots.cookies.get_mut(i)?.take()?;
        // Within the capacity `grow_to` reserved: one entry per slot.
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
