//! What rdma-core's `mlx5dv_init_obj` hands over for a QP, a CQ and an
//! SRQ (`struct mlx5dv_qp`, `mlx5dv_cq` and `mlx5dv_srq` of
//! `<infiniband/mlx5dv.h>`, laid out as there: `udat-softhca`'s tests
//! hold the offsets to the header's), and the one place that turns them
//! into the data path's geometry. Every fact about raw memory the data
//! path relies on is checked here, with an error that names it; the
//! queues check the rest ([`crate::sq::SendQueue::new`] and friends).
//!
//! A control path over rdma-core fills these from `mlx5dv_init_obj`; the
//! software HCA fills them from its own memory the same way, so from
//! "init_obj returned these structs" on, both run the same code.

#![allow(unsafe_code)]

use core::ffi::c_void;
use core::ptr::NonNull;

use crate::cq::CqGeometry;
use crate::mem::DmaBuf;
use crate::rq::RqGeometry;
use crate::sq::SqGeometry;
use crate::Geometry;

/// `struct mlx5dv_qp`'s `sq` and `rq`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct DvWorkQueue {
    /// The ring's first byte.
    pub buf: *mut c_void,
    /// Entries in the ring; 0 for a receive queue the QP does not have.
    pub wqe_cnt: u32,
    /// Bytes per entry.
    pub stride: u32,
}

/// `struct mlx5dv_qp`'s `bf`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct DvBlueFlame {
    /// The BlueFlame register (or the plain doorbell, when `size` is 0).
    pub reg: *mut c_void,
    /// Half the BlueFlame buffer: 256, or 0 when the UAR has none.
    pub size: u32,
}

/// `struct mlx5dv_qp`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct DvQp {
    /// The receive counter, then the send counter (`__be32 *`).
    pub dbrec: *mut u32,
    /// The send queue.
    pub sq: DvWorkQueue,
    /// The receive queue.
    pub rq: DvWorkQueue,
    /// The send queue's doorbell register.
    pub bf: DvBlueFlame,
    /// Which optional fields below rdma-core filled in.
    pub comp_mask: u64,
    /// `off_t`.
    pub uar_mmap_offset: i64,
    /// The TIR number (raw packet QPs only; unused here).
    pub tirn: u32,
    /// The TIS number (raw packet QPs only; unused here).
    pub tisn: u32,
    /// The RQ number (raw packet QPs only; unused here).
    pub rqn: u32,
    /// The SQ number (raw packet QPs only; unused here).
    pub sqn: u32,
    /// The TIR's ICM address (unused here).
    pub tir_icm_addr: u64,
}

/// `struct mlx5dv_cq`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct DvCq {
    /// The CQE ring's first byte.
    pub buf: *mut c_void,
    /// The consumer index, then the arm word (`__be32 *`).
    pub dbrec: *mut u32,
    /// Entries in the ring.
    pub cqe_cnt: u32,
    /// Bytes per entry: 64 or 128.
    pub cqe_size: u32,
    /// The UAR page whose CQ doorbell arms the CQ.
    pub cq_uar: *mut c_void,
    /// The CQ number.
    pub cqn: u32,
    /// Which optional fields rdma-core filled in.
    pub comp_mask: u64,
}

/// `struct mlx5dv_srq`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct DvSrq {
    /// The ring's first byte.
    pub buf: *mut c_void,
    /// The doorbell record (`__be32 *`).
    pub dbrec: *mut u32,
    /// Bytes per WQE.
    pub stride: u32,
    /// The first free WQE of the SRQ's linked list.
    pub head: u32,
    /// The last free WQE of the list.
    pub tail: u32,
    /// Which optional fields rdma-core filled in.
    pub comp_mask: u64,
    /// The SRQ number.
    pub srqn: u32,
}

/// rdma-core allocates queue buffers page-aligned and doorbell records
/// in cache lines; the data path's accesses assume a cache line.
const ALIGN: usize = 64;
/// A doorbell record's bytes: two big-endian 32-bit counters.
const DBREC_BYTES: usize = 8;

/// `len` bytes at `ptr` as queue memory: `ptr` is not null and aligned.
///
/// # Safety
/// As [`DmaBuf::new`], if `ptr` passes the checks.
unsafe fn span(ptr: *mut c_void, len: usize) -> Result<DmaBuf, Geometry> {
    let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(Geometry::Memory)?;
    if ptr.as_ptr() as usize % ALIGN != 0 || len == 0 {
        return Err(Geometry::Memory);
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { DmaBuf::new(ptr, len) })
}

/// A ring of `cnt` entries of `stride` bytes, with no overflow.
fn ring_bytes(cnt: u32, stride: u32) -> Result<usize, Geometry> {
    (cnt as usize).checked_mul(stride as usize).ok_or(Geometry::Ring)
}

/// The send queue of `qp`, number `qpn`, whose BlueFlame (or doorbell)
/// register the caller has mapped as `bf`.
///
/// # Safety
/// `qp` is what `mlx5dv_init_obj` returned for a live QP (or the same
/// from the software HCA): its buffers and record stay valid, and used
/// only through the returned geometry, while it lives.
pub unsafe fn send_queue<R>(qp: &DvQp, qpn: u32, bf: R) -> Result<SqGeometry<R>, Geometry> {
    if qp.bf.size != 0 && qp.bf.reg.is_null() {
        return Err(Geometry::Memory);
    }
    let len = ring_bytes(qp.sq.wqe_cnt, qp.sq.stride)?;
    // SAFETY: the caller's promise covers the SQ buffer and the record.
    let (buf, dbrec) = unsafe { (span(qp.sq.buf, len)?, span(qp.dbrec.cast(), DBREC_BYTES)?) };
    Ok(SqGeometry { qpn, buf, wqe_cnt: qp.sq.wqe_cnt, stride: qp.sq.stride, dbrec, bf, bf_size: qp.bf.size })
}

/// The receive queue of `qp`; none for a QP that takes its receives from
/// an SRQ (no receive WQEs).
///
/// # Safety
/// As [`send_queue`].
pub unsafe fn recv_queue(qp: &DvQp) -> Result<Option<RqGeometry>, Geometry> {
    if qp.rq.wqe_cnt == 0 {
        return Ok(None);
    }
    let len = ring_bytes(qp.rq.wqe_cnt, qp.rq.stride)?;
    // SAFETY: the caller's promise covers the RQ buffer and the record.
    let (buf, dbrec) = unsafe { (span(qp.rq.buf, len)?, span(qp.dbrec.cast(), DBREC_BYTES)?) };
    Ok(Some(RqGeometry { buf, wqe_cnt: qp.rq.wqe_cnt, stride: qp.rq.stride, dbrec }))
}

/// The CQ of `cq`, whose UAR page (`cq_uar`) the caller has mapped as
/// `uar`.
///
/// # Safety
/// As [`send_queue`], for a live CQ.
pub unsafe fn completion_queue<R>(cq: &DvCq, uar: R) -> Result<CqGeometry<R>, Geometry> {
    if cq.cq_uar.is_null() {
        return Err(Geometry::Memory);
    }
    let len = ring_bytes(cq.cqe_cnt, cq.cqe_size)?;
    // SAFETY: the caller's promise covers the CQ buffer and the record.
    let (buf, dbrec) = unsafe { (span(cq.buf, len)?, span(cq.dbrec.cast(), DBREC_BYTES)?) };
    Ok(CqGeometry { cqn: cq.cqn, buf, cqe_cnt: cq.cqe_cnt, cqe_size: cq.cqe_size, dbrec, uar })
}

/// The SRQ of `srq`, of `wqe_cnt` WQEs (what it was created with:
/// `mlx5dv_srq` carries the stride, not the count).
///
/// # Safety
/// As [`send_queue`], for a live SRQ.
pub unsafe fn shared_recv_queue(srq: &DvSrq, wqe_cnt: u32) -> Result<RqGeometry, Geometry> {
    let len = ring_bytes(wqe_cnt, srq.stride)?;
    // SAFETY: the caller's promise covers the SRQ buffer and its record.
    let (buf, dbrec) = unsafe { (span(srq.buf, len)?, span(srq.dbrec.cast(), DBREC_BYTES)?) };
    Ok(RqGeometry { buf, wqe_cnt, stride: srq.stride, dbrec })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(64))]
    struct Mem([u8; 512]);

    fn qp(sq: *mut c_void, dbrec: *mut u32, rq_cnt: u32) -> DvQp {
        DvQp {
            dbrec,
            sq: DvWorkQueue { buf: sq, wqe_cnt: 4, stride: 64 },
            rq: DvWorkQueue { buf: sq, wqe_cnt: rq_cnt, stride: 16 },
            bf: DvBlueFlame { reg: sq, size: 256 },
            comp_mask: 0,
            uar_mmap_offset: 0,
            tirn: 0,
            tisn: 0,
            rqn: 0,
            sqn: 0,
            tir_icm_addr: 0,
        }
    }

    #[test]
    fn init_obj_s_structs_become_the_queues_geometry() {
        let mut ring = Mem([0; 512]);
        let mut rec = Mem([0; 512]);
        let (sq, dbrec) = (ring.0.as_mut_ptr().cast(), rec.0.as_mut_ptr().cast());
        // SAFETY: both spans are this test's, alive to its end.
        let g = unsafe { send_queue(&qp(sq, dbrec, 0), 7, ()) }.unwrap();
        assert_eq!((g.qpn, g.wqe_cnt, g.stride, g.bf_size, g.buf.len(), g.dbrec.len()), (7, 4, 64, 256, 256, 8));
        // SAFETY: as above.
        assert!(unsafe { recv_queue(&qp(sq, dbrec, 0)) }.unwrap().is_none(), "an SRQ's QP has no RQ");
        // SAFETY: as above.
        let rq = unsafe { recv_queue(&qp(sq, dbrec, 8)) }.unwrap().unwrap();
        assert_eq!((rq.wqe_cnt, rq.stride, rq.buf.len()), (8, 16, 128));
        let cq = DvCq { buf: sq, dbrec, cqe_cnt: 8, cqe_size: 64, cq_uar: sq, cqn: 3, comp_mask: 0 };
        // SAFETY: as above.
        let c = unsafe { completion_queue(&cq, ()) }.unwrap();
        assert_eq!((c.cqn, c.cqe_cnt, c.buf.len()), (3, 8, 512));
        let srq = DvSrq { buf: sq, dbrec, stride: 32, head: 0, tail: 7, comp_mask: 0, srqn: 9 };
        // SAFETY: as above.
        assert_eq!(unsafe { shared_recv_queue(&srq, 8) }.unwrap().buf.len(), 256);
    }

    #[test]
    fn null_or_misaligned_memory_is_refused_by_name() {
        let mut ring = Mem([0; 512]);
        let mut rec = Mem([0; 512]);
        let (sq, dbrec) = (ring.0.as_mut_ptr().cast::<c_void>(), rec.0.as_mut_ptr().cast::<u32>());
        let misaligned = sq.cast::<u8>().wrapping_add(8).cast::<c_void>();
        // SAFETY: every case is refused before a span is made.
        unsafe {
            assert_eq!(send_queue(&qp(core::ptr::null_mut(), dbrec, 0), 1, ()).err(), Some(Geometry::Memory));
            assert_eq!(send_queue(&qp(sq, core::ptr::null_mut(), 0), 1, ()).err(), Some(Geometry::Memory));
            assert_eq!(send_queue(&qp(misaligned, dbrec, 0), 1, ()).err(), Some(Geometry::Memory));
            let mut no_bf = qp(sq, dbrec, 0);
            no_bf.bf.reg = core::ptr::null_mut();
            assert_eq!(send_queue(&no_bf, 1, ()).err(), Some(Geometry::Memory));
            let cq =
                DvCq { buf: sq, dbrec, cqe_cnt: 8, cqe_size: 64, cq_uar: core::ptr::null_mut(), cqn: 3, comp_mask: 0 };
            assert_eq!(completion_queue(&cq, ()).err(), Some(Geometry::Memory));
        }
    }
}
