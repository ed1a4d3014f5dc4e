//! Memory windows: a bind is a UMR WQE in the send queue.
//!
//! A type 1 window (`dat_rmr_create`'s) is an mkey of its own; a type 2
//! window (DAT 2.0's `dat_rmr_create_for_ep`) is one too, and its bind
//! also names the QP it binds to, whose connection alone reaches it. A
//! type 2 window is unbound (invalidated) by the same free WQE as a type
//! 1 window, which names no QP (rdma-core's `set_umr_mkey_seg`: "type ==
//! IBV_MW_TYPE_1 || !bind_info->length" gives `0xFFFFFF00`), or by the
//! peer's send with invalidate. Binding it posts a WQE of opcode `UMR` whose
//! control segment carries the window's current key in its immediate,
//! then three segments (`mlx5dv.h`): the UMR control segment, which says
//! which fields of the mkey change; the mkey context, with the window's
//! next key, its range and its remote access; and one KLM entry, the
//! registration the window opens onto. An unbind marks the mkey free and
//! carries no KLM. The WQE after a bind is fenced until the bind is done
//! ([`crate::wqe::fm_ce_se::INITIATOR_SMALL_FENCE`]). The field values
//! follow rdma-core's `set_bind_wr` in `providers/mlx5/qp.c`.

use udat_core::types::MemPriv;

use crate::wqe::{be32_pair, be64, SegWords};

/// `flags` of the UMR control segment (`MLX5_WQE_UMR_CTRL_FLAG_*`).
pub mod umr_flags {
    /// The KLM entries follow inline in the WQE.
    #[doc(alias = "MLX5_WQE_UMR_CTRL_FLAG_INLINE")]
    pub const INLINE: u8 = 1 << 7;
    /// The translation offset field is valid.
    #[doc(alias = "MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET")]
    pub const TRANSLATION_OFFSET: u8 = 1 << 4;
}

/// `mkey_mask` of the UMR control segment: the mkey fields the WQE sets
/// (`MLX5_WQE_UMR_CTRL_MKEY_MASK_*`).
pub mod mkey_mask {
    /// Set the mkey's length.
    #[doc(alias = "MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN")]
    pub const LEN: u64 = 1 << 0;
    /// Set the mkey's start address.
    #[doc(alias = "MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR")]
    pub const START_ADDR: u64 = 1 << 6;
    /// Set the mkey's key byte (the window's next key).
    #[doc(alias = "MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY")]
    pub const MKEY: u64 = 1 << 13;
    /// Set the mkey's local write access.
    #[doc(alias = "MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE")]
    pub const ACCESS_LOCAL_WRITE: u64 = 1 << 18;
    /// Set the mkey's remote read access.
    #[doc(alias = "MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ")]
    pub const ACCESS_REMOTE_READ: u64 = 1 << 19;
    /// Set the mkey's remote write access.
    #[doc(alias = "MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE")]
    pub const ACCESS_REMOTE_WRITE: u64 = 1 << 20;
    /// Set the mkey's atomic access.
    #[doc(alias = "MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC")]
    pub const ACCESS_ATOMIC: u64 = 1 << 21;
    /// Set the mkey's free bit (bound or unbound).
    #[doc(alias = "MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE")]
    pub const FREE: u64 = 1 << 29;
}

/// `access_flags` of the mkey context (`MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_*`).
pub mod access {
    /// The peer may read through the window.
    #[doc(alias = "MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ")]
    pub const REMOTE_READ: u8 = 1 << 4;
    /// The peer may write through the window.
    #[doc(alias = "MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE")]
    pub const REMOTE_WRITE: u8 = 1 << 5;
}

/// `free` of the mkey context: the window is unbound
/// (`MLX5_WQE_MKEY_CONTEXT_FREE`).
#[doc(alias = "MLX5_WQE_MKEY_CONTEXT_FREE")]
pub const MKEY_FREE: u8 = 1 << 6;

/// The `qpn_mkey` bits of a type 1 window: bound to no QP.
const ANY_QP: u32 = 0xffff_ff00;

/// Segments after the control segment: UMR control (3), mkey context (4)
/// and one KLM entry padded to 64 bytes (4).
pub const MAX_BODY: usize = 11;

/// What a bind opens: `len` bytes at `addr` of the registration `lkey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bind {
    /// The key of the registration the window opens onto.
    pub lkey: u32,
    /// The window's first byte, inside the registration.
    pub addr: u64,
    /// Bytes in the window.
    pub len: u32,
    /// The remote privileges the window grants.
    pub privileges: MemPriv,
    /// The QP a type 2 window binds to; `None` for a type 1 window.
    pub qpn: Option<u32>,
}

/// The window's next key: the same mkey, its low 8 bits advanced
/// (`ibv_inc_rkey`), so the old key stops working at the bind.
#[inline]
pub fn next_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// The UMR control segment.
pub fn umr_ctrl_words(bind: bool) -> [SegWords; 3] {
    let flags = umr_flags::TRANSLATION_OFFSET | umr_flags::INLINE;
    let mut mask = mkey_mask::FREE | mkey_mask::MKEY;
    // KLM entries in 16-byte units, rounded up to eight entries:
    // rdma-core's `get_klm_octo`.
    let mut klm_octowords = 0u64;
    if bind {
        klm_octowords = 4;
        mask |= mkey_mask::LEN
            | mkey_mask::START_ADDR
            | mkey_mask::ACCESS_LOCAL_WRITE
            | mkey_mask::ACCESS_REMOTE_READ
            | mkey_mask::ACCESS_REMOTE_WRITE
            | mkey_mask::ACCESS_ATOMIC;
    }
    [[be64((u64::from(flags) << 56) | (klm_octowords << 16)), be64(mask)], [0; 2], [0; 2]]
}

/// The mkey context: the window's next key, and for a bind its range,
/// access and (type 2) QP; for an unbind the free mark.
pub fn mkey_words(rkey: u32, bind: Option<&Bind>) -> [SegWords; 4] {
    let Some(b) = bind else {
        let qpn_mkey = ANY_QP | (rkey & 0xff);
        return [[be32_pair(u32::from(MKEY_FREE) << 24, qpn_mkey), 0], [0; 2], [0; 2], [0; 2]];
    };
    let qpn_mkey = b.qpn.map_or(ANY_QP, |qpn| qpn << 8) | (rkey & 0xff);
    let mut flags = 0u8;
    if b.privileges.contains(MemPriv::REMOTE_READ) {
        flags |= access::REMOTE_READ;
    }
    if b.privileges.contains(MemPriv::REMOTE_WRITE) {
        flags |= access::REMOTE_WRITE;
    }
    [[be32_pair(u32::from(flags) << 8, qpn_mkey), 0], [be64(b.addr), be64(u64::from(b.len))], [0; 2], [0; 2]]
}

/// The KLM entry: the registration under the window, padded to 64 bytes.
pub fn klm_words(bind: &Bind) -> [SegWords; 4] {
    [[be32_pair(bind.len, bind.lkey), be64(bind.addr)], [0; 2], [0; 2], [0; 2]]
}

/// Every segment after the control segment of the WQE that binds (or,
/// with no `bind`, unbinds) a window to key `rkey`; the count used.
pub fn bind_body(rkey: u32, bind: Option<&Bind>) -> ([SegWords; MAX_BODY], usize) {
    let mut body = [[0; 2]; MAX_BODY];
    let parts = umr_ctrl_words(bind.is_some()).into_iter().chain(mkey_words(rkey, bind));
    let mut n = 0;
    for (slot, seg) in body.iter_mut().zip(parts.chain(bind.map(klm_words).into_iter().flatten())) {
        *slot = seg;
        n += 1;
    }
    (body, n)
}
