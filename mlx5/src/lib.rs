//! udat-mlx5: the direct data path for NVIDIA ConnectX (mlx5) HCAs.
//!
//! Its segment helpers need no device. The control segment of a signalled
//! send, byte for byte as the PRM's "Send WQE Format" lays it out:
//!
//! ```
//! use udat_mlx5::wqe::{ctrl, ctrl_seg, fm_ce_se, opcode};
//!
//! // WQE index 5 on QP 0x1234, two 16-byte units long, no immediate.
//! let seg = ctrl_seg(5, opcode::SEND, 0, 0x1234, 2, fm_ce_se::CQ_UPDATE, 0);
//! assert_eq!(seg[ctrl::OPMOD_IDX_OPCODE], [0x00, 0x00, 0x05, 0x0a]);
//! assert_eq!(seg[ctrl::QPN_DS], [0x00, 0x12, 0x34, 0x02]);
//! assert_eq!(seg[ctrl::SIGNATURE], 0);
//! assert_eq!(seg[ctrl::FM_CE_SE], fm_ce_se::CQ_UPDATE);
//! assert_eq!(seg[ctrl::IMM], [0; 4]);
//! ```
//!
//! Posting writes WQEs into the send queue's ring and rings the doorbell
//! (record, then BlueFlame or the 8-byte UAR write); polling reads CQEs by
//! their owner bit. No system call, no lock, no allocation: the code runs
//! over queue memory and registers a control path hands it, which is
//! rdma-core's `mlx5dv_init_obj` on a ConnectX and the software HCA of
//! `udat-softhca` everywhere else.
//!
//! One file per concern, as rdma-core's provider has: [`wqe`] (segments),
//! [`sq`] (post and doorbell), [`rq`] (receive queues and SRQs), [`cqe`] and
//! [`cq`] (poll, arm), [`doorbell`] (registers), [`barrier`] (ordering),
//! [`mem`] (queue memory), `cpu` (the AVX copy, on x86-64), [`slots`]
//! (what a queue keeps per WQE), [`table`] (queue tables in caller storage),
//! [`dv`] (what `mlx5dv_init_obj` hands over, checked into geometry),
//! [`mw`] (memory window binds), [`kept`] (a WQE kept built).
//! [`device`] is the control path the
//! [`backend::Mlx5`] backend stands on.
//!
//! Before editing, read NVIDIA's "Ethernet Adapters Programmer's Reference
//! Manual" (ConnectX-4 and later): "Send WQE Format", "Completion Queue
//! Entry Format", "Doorbells"; and rdma-core's `providers/mlx5/qp.c` and
//! `cq.c`, which this follows.
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod backend;
pub mod barrier;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(miri)))]
mod cpu;
pub mod cq;
pub mod cqe;
pub mod device;
pub mod doorbell;
pub mod dv;
pub mod kept;
pub mod mem;
pub mod mw;
pub mod rq;
pub mod slots;
pub mod sq;
pub mod table;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod wqe;

#[cfg(any(test, feature = "testing"))]
extern crate std;

#[cfg(feature = "alloc")]
extern crate alloc;

pub use backend::Mlx5;
pub use device::Device;

/// Queue geometry the data path cannot drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Geometry {
    /// A WQE or CQE stride other than the data path writes.
    Stride,
    /// A ring that is not a power of two, or memory that does not match it.
    Ring,
    /// A BlueFlame buffer of neither 0 nor 256 bytes.
    BlueFlame,
    /// A queue buffer, doorbell record or register that is missing (null)
    /// or not aligned to a cache line.
    Memory,
}
