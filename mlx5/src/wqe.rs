//! Send WQE segments (PRM "Send WQE Format"; `struct mlx5_wqe_*_seg` in
//! `mlx5dv.h`).
//!
//! A WQE is a run of 16-byte segments (the unit of the control segment's
//! `ds` count) in 64-byte basic blocks (WQEBBs): a control segment, then a
//! remote-address segment for RDMA and atomics, an atomic segment for
//! atomics, then data segments or one inline segment. Each helper returns
//! one segment's bytes; [`crate::sq`] places them in the ring and writes the
//! control segment last. Every field is written whole, reserved bytes
//! included: a ring slot still holds the WQE before it.

use core::ops::Range;

use static_assertions::const_assert_eq;

/// One WQE basic block (`MLX5_SEND_WQE_BB`).
#[doc(alias = "MLX5_SEND_WQE_BB")]
pub const WQEBB_BYTES: usize = 64;
/// One `ds` unit: the size of every fixed segment.
pub const SEG_BYTES: usize = 16;
const_assert_eq!(WQEBB_BYTES, 4 * SEG_BYTES);

/// Bit 31 of an inline segment's byte count (`MLX5_INLINE_SEG`).
#[doc(alias = "MLX5_INLINE_SEG")]
pub const INLINE_SEG: u32 = 0x8000_0000;

/// The lkey that ends a receive scatter list shorter than the WQE
/// (`MLX5_INVALID_LKEY`).
#[doc(alias = "MLX5_INVALID_LKEY")]
pub const INVALID_LKEY: u32 = 0x100;

/// Send opcodes (`MLX5_OPCODE_*`).
pub mod opcode {
    #[doc(alias = "MLX5_OPCODE_RDMA_WRITE")]
    pub const RDMA_WRITE: u8 = 0x08;
    #[doc(alias = "MLX5_OPCODE_RDMA_WRITE_IMM")]
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    #[doc(alias = "MLX5_OPCODE_SEND")]
    pub const SEND: u8 = 0x0a;
    #[doc(alias = "MLX5_OPCODE_SEND_IMM")]
    pub const SEND_IMM: u8 = 0x0b;
    #[doc(alias = "MLX5_OPCODE_RDMA_READ")]
    pub const RDMA_READ: u8 = 0x10;
    #[doc(alias = "MLX5_OPCODE_ATOMIC_CS")]
    pub const ATOMIC_CS: u8 = 0x11;
    #[doc(alias = "MLX5_OPCODE_ATOMIC_FA")]
    pub const ATOMIC_FA: u8 = 0x12;
}

/// Bits of the control segment's `fm_ce_se` byte (`MLX5_WQE_CTRL_*`).
pub mod fm_ce_se {
    /// Raise a solicited event at the responder.
    #[doc(alias = "MLX5_WQE_CTRL_SOLICITED")]
    pub const SOLICITED: u8 = 1 << 1;
    /// Write a CQE when the WQE completes: a signalled WQE.
    #[doc(alias = "MLX5_WQE_CTRL_CQ_UPDATE")]
    pub const CQ_UPDATE: u8 = 2 << 2;
    /// Wait for earlier RDMA reads and atomics before this WQE.
    #[doc(alias = "MLX5_WQE_CTRL_FENCE")]
    pub const FENCE: u8 = 4 << 5;
}

/// Field offsets of the control segment (`struct mlx5_wqe_ctrl_seg`).
pub mod ctrl {
    use super::Range;
    /// be32: opmod (31–24), WQE index (23–8), opcode (7–0).
    pub const OPMOD_IDX_OPCODE: Range<usize> = 0..4;
    /// be32: QP number (31–8), WQE size in 16-byte units (7–0).
    pub const QPN_DS: Range<usize> = 4..8;
    pub const SIGNATURE: usize = 8;
    /// be16 `dci_stream_channel_id`, zero on RC.
    pub const STREAM: Range<usize> = 9..11;
    pub const FM_CE_SE: usize = 11;
    /// The immediate, in network order.
    pub const IMM: Range<usize> = 12..16;
}

/// Field offsets of the remote-address segment (`struct mlx5_wqe_raddr_seg`).
pub mod raddr {
    use super::Range;
    pub const RADDR: Range<usize> = 0..8;
    pub const RKEY: Range<usize> = 8..12;
    pub const RESERVED: Range<usize> = 12..16;
}

/// Field offsets of a data segment (`struct mlx5_wqe_data_seg`).
pub mod data {
    use super::Range;
    pub const BYTE_COUNT: Range<usize> = 0..4;
    pub const LKEY: Range<usize> = 4..8;
    pub const ADDR: Range<usize> = 8..16;
}

/// Field offsets of the atomic segment (`struct mlx5_wqe_atomic_seg`).
pub mod atomic {
    use super::Range;
    /// The swap value of a compare-and-swap, the addend of a fetch-and-add.
    pub const SWAP_ADD: Range<usize> = 0..8;
    pub const COMPARE: Range<usize> = 8..16;
}

/// Field offsets of the SRQ next segment (`struct mlx5_wqe_srq_next_seg`).
pub mod srq_next {
    use super::Range;
    pub const NEXT_WQE_INDEX: Range<usize> = 2..4;
    pub const SIGNATURE: usize = 4;
}

/// The control segment. `imm` is the immediate in host order (written in
/// network order); `pi` is the WQE's index, free-running over 16 bits.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn ctrl_seg(pi: u16, opcode: u8, opmod: u8, qpn: u32, ds: u8, flags: u8, imm: u32) -> [u8; SEG_BYTES] {
    let mut seg = [0u8; SEG_BYTES];
    seg[ctrl::OPMOD_IDX_OPCODE]
        .copy_from_slice(&((u32::from(opmod) << 24) | (u32::from(pi) << 8) | u32::from(opcode)).to_be_bytes());
    seg[ctrl::QPN_DS].copy_from_slice(&((qpn << 8) | u32::from(ds)).to_be_bytes());
    seg[ctrl::FM_CE_SE] = flags;
    seg[ctrl::IMM].copy_from_slice(&imm.to_be_bytes());
    seg
}

/// The first eight bytes of a control segment: what the 8-byte doorbell
/// writes to the UAR.
#[inline(always)]
pub fn doorbell_word(ctrl: &[u8; SEG_BYTES]) -> [u8; 8] {
    let mut word = [0u8; 8];
    word.copy_from_slice(&ctrl[..8]);
    word
}

/// The remote-address segment of RDMA and atomic WQEs.
#[inline(always)]
pub fn raddr_seg(raddr: u64, rkey: u32) -> [u8; SEG_BYTES] {
    let mut seg = [0u8; SEG_BYTES];
    seg[raddr::RADDR].copy_from_slice(&raddr.to_be_bytes());
    seg[raddr::RKEY].copy_from_slice(&rkey.to_be_bytes());
    seg
}

/// A data (gather or scatter) segment.
#[inline(always)]
pub fn data_seg(byte_count: u32, lkey: u32, addr: u64) -> [u8; SEG_BYTES] {
    let mut seg = [0u8; SEG_BYTES];
    seg[data::BYTE_COUNT].copy_from_slice(&byte_count.to_be_bytes());
    seg[data::LKEY].copy_from_slice(&lkey.to_be_bytes());
    seg[data::ADDR].copy_from_slice(&addr.to_be_bytes());
    seg
}

/// The atomic segment: compare-and-swap takes both values, fetch-and-add
/// the addend and a zero compare.
#[inline(always)]
pub fn atomic_seg(swap_add: u64, compare: u64) -> [u8; SEG_BYTES] {
    let mut seg = [0u8; SEG_BYTES];
    seg[atomic::SWAP_ADD].copy_from_slice(&swap_add.to_be_bytes());
    seg[atomic::COMPARE].copy_from_slice(&compare.to_be_bytes());
    seg
}

/// The four-byte header of an inline segment; `byte_count` bytes of data
/// follow it.
#[inline(always)]
pub fn inline_header(byte_count: u32) -> [u8; 4] {
    (byte_count | INLINE_SEG).to_be_bytes()
}

/// 16-byte units an inline segment of `len` data bytes takes.
#[inline(always)]
pub const fn inline_ds(len: usize) -> usize {
    (4 + len).div_ceil(SEG_BYTES)
}

/// The next segment at the head of each SRQ WQE: the index of the WQE the
/// device takes after this one.
#[inline(always)]
pub fn srq_next_seg(next_wqe_index: u16) -> [u8; SEG_BYTES] {
    let mut seg = [0u8; SEG_BYTES];
    seg[srq_next::NEXT_WQE_INDEX].copy_from_slice(&next_wqe_index.to_be_bytes());
    seg
}

/// WQEBBs a WQE of `ds` segments occupies.
#[inline(always)]
pub const fn bbs(ds: usize) -> usize {
    (ds * SEG_BYTES).div_ceil(WQEBB_BYTES)
}
