//! Send WQE segments (PRM "Send WQE Format"; `struct mlx5_wqe_*_seg` in
//! `mlx5dv.h`).
//!
//! A WQE is a run of 16-byte segments (the unit of the control segment's
//! `ds` count) in 64-byte basic blocks (WQEBBs): a control segment, then a
//! remote-address segment for RDMA and atomics, an atomic segment for
//! atomics, or a datagram segment (the address vector) for UD sends, then
//! data segments or one inline segment. Each helper returns
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
    /// A send that invalidates the peer's window whose key is in the
    /// control segment's immediate (rdma-core's `send_ieth` for
    /// `IBV_WR_SEND_WITH_INV`).
    #[doc(alias = "MLX5_OPCODE_SEND_INVAL")]
    pub const SEND_INVAL: u8 = 0x01;
    /// An RDMA write.
    #[doc(alias = "MLX5_OPCODE_RDMA_WRITE")]
    pub const RDMA_WRITE: u8 = 0x08;
    /// An RDMA write with immediate: consumes a receive at the peer.
    #[doc(alias = "MLX5_OPCODE_RDMA_WRITE_IMM")]
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    /// A send.
    #[doc(alias = "MLX5_OPCODE_SEND")]
    pub const SEND: u8 = 0x0a;
    /// A send with immediate.
    #[doc(alias = "MLX5_OPCODE_SEND_IMM")]
    pub const SEND_IMM: u8 = 0x0b;
    /// An RDMA read.
    #[doc(alias = "MLX5_OPCODE_RDMA_READ")]
    pub const RDMA_READ: u8 = 0x10;
    /// An 8-byte compare-and-swap.
    #[doc(alias = "MLX5_OPCODE_ATOMIC_CS")]
    pub const ATOMIC_CS: u8 = 0x11;
    /// An 8-byte fetch-and-add.
    #[doc(alias = "MLX5_OPCODE_ATOMIC_FA")]
    pub const ATOMIC_FA: u8 = 0x12;
    /// User-mode memory registration: binds a memory window.
    #[doc(alias = "MLX5_OPCODE_UMR")]
    pub const UMR: u8 = 0x25;
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
    /// Wait for the UMR before this WQE: the WQE after a window bind
    /// carries it (rdma-core's `mlx5_post_send`, `IBV_WR_BIND_MW`).
    #[doc(alias = "MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE")]
    pub const INITIATOR_SMALL_FENCE: u8 = 1 << 5;
}

/// Field offsets of the control segment (`struct mlx5_wqe_ctrl_seg`).
pub mod ctrl {
    use super::Range;
    /// be32: opmod (31–24), WQE index (23–8), opcode (7–0).
    pub const OPMOD_IDX_OPCODE: Range<usize> = 0..4;
    /// be32: QP number (31–8), WQE size in 16-byte units (7–0).
    pub const QPN_DS: Range<usize> = 4..8;
    /// The signature byte: zero, as signatures are off.
    pub const SIGNATURE: usize = 8;
    /// be16 `dci_stream_channel_id`, zero on RC.
    pub const STREAM: Range<usize> = 9..11;
    /// Fence mode, completion and solicited bits ([`fm_ce_se`](super::fm_ce_se)).
    pub const FM_CE_SE: usize = 11;
    /// The immediate, in network order.
    pub const IMM: Range<usize> = 12..16;
}

/// Field offsets of the remote-address segment (`struct mlx5_wqe_raddr_seg`).
pub mod raddr {
    use super::Range;
    /// be64: the remote address.
    pub const RADDR: Range<usize> = 0..8;
    /// be32: the remote key.
    pub const RKEY: Range<usize> = 8..12;
    /// Reserved: written as zero.
    pub const RESERVED: Range<usize> = 12..16;
}

/// Field offsets of a data segment (`struct mlx5_wqe_data_seg`).
pub mod data {
    use super::Range;
    /// be32: the segment's length in bytes.
    pub const BYTE_COUNT: Range<usize> = 0..4;
    /// be32: the local key.
    pub const LKEY: Range<usize> = 4..8;
    /// be64: the local address.
    pub const ADDR: Range<usize> = 8..16;
}

/// Field offsets of the atomic segment (`struct mlx5_wqe_atomic_seg`).
pub mod atomic {
    use super::Range;
    /// The swap value of a compare-and-swap, the addend of a fetch-and-add.
    pub const SWAP_ADD: Range<usize> = 0..8;
    /// The compare value of a compare-and-swap; zero for a fetch-and-add.
    pub const COMPARE: Range<usize> = 8..16;
}

/// Field offsets of the SRQ next segment (`struct mlx5_wqe_srq_next_seg`).
pub mod srq_next {
    use super::Range;
    /// be16: the index of the next WQE on the SRQ's free list.
    pub const NEXT_WQE_INDEX: Range<usize> = 2..4;
    /// The signature byte: zero, as signatures are off.
    pub const SIGNATURE: usize = 4;
}

/// A segment as the two 64-bit words that store it: each word holds its
/// eight bytes in memory order, so a native store of the words lays the
/// segment out byte for byte as the PRM draws it. The data path builds
/// WQEs in words, in registers, and stores whole WQEBBs.
pub type SegWords = [u64; 2];

/// Two big-endian 32-bit fields as one word, `first` at the lower address.
#[inline(always)]
pub(crate) const fn be32_pair(first: u32, second: u32) -> u64 {
    be64(((first as u64) << 32) | second as u64)
}

/// A big-endian 64-bit field as one word.
#[inline(always)]
pub(crate) const fn be64(value: u64) -> u64 {
    value.to_be()
}

/// The bytes of a segment, in memory order.
#[inline(always)]
pub fn seg_bytes(words: SegWords) -> [u8; SEG_BYTES] {
    let (a, b) = (words[0].to_ne_bytes(), words[1].to_ne_bytes());
    core::array::from_fn(|i| if i < 8 { a[i] } else { b[i - 8] })
}

/// The control segment. `imm` is the immediate in host order (written in
/// network order); `pi` is the WQE's index, free-running over 16 bits.
/// The signature and stream id are zero: `fm_ce_se` is the last byte of
/// the big-endian word at [`ctrl::SIGNATURE`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub const fn ctrl_words(pi: u16, opcode: u8, opmod: u8, qpn: u32, ds: u8, flags: u8, imm: u32) -> SegWords {
    let opmod_idx_opcode = ((opmod as u32) << 24) | ((pi as u32) << 8) | opcode as u32;
    [be32_pair(opmod_idx_opcode, (qpn << 8) | ds as u32), be32_pair(flags as u32, imm)]
}

/// The control segment's first word, of a WQE with no opmod, whose
/// second field, `qpn << 8 | ds`, the caller keeps made: as
/// [`ctrl_words`] makes it.
#[inline(always)]
pub const fn ctrl_head(pi: u16, opcode: u8, qpn_ds: u32) -> u64 {
    be64(((pi as u64) << 40) | ((opcode as u64) << 32) | qpn_ds as u64)
}

/// The word of a control segment's second field alone, `qpn << 8 | ds`,
/// in its place in the segment's first word: what a queue keeps made for
/// [`ctrl_head_with`].
#[inline(always)]
pub const fn qpn_ds_word(qpn_ds: u32) -> u64 {
    be64(qpn_ds as u64)
}

/// [`ctrl_head`] from the second field's word as [`qpn_ds_word`] made it:
/// the index and opcode are the only field made per WQE, in 32 bits.
#[inline(always)]
pub const fn ctrl_head_with(pi: u16, opcode: u8, qpn_ds_word: u64) -> u64 {
    // The index and opcode are the segment's first four bytes, big-endian,
    // whatever the host's order: one 32-bit swap on a little-endian host.
    let [a, b, c, d] = (((pi as u32) << 8) | opcode as u32).to_be_bytes();
    u64::from_ne_bytes([a, b, c, d, 0, 0, 0, 0]) | qpn_ds_word
}

/// The control segment's second word: no signature or stream id, then
/// `fm_ce_se` and the immediate (host order), as [`ctrl_words`] makes it.
#[inline(always)]
pub const fn ctrl_tail(flags: u8, imm: u32) -> u64 {
    be32_pair(flags as u32, imm)
}

/// The control segment's bytes (see [`ctrl_words`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn ctrl_seg(pi: u16, opcode: u8, opmod: u8, qpn: u32, ds: u8, flags: u8, imm: u32) -> [u8; SEG_BYTES] {
    seg_bytes(ctrl_words(pi, opcode, opmod, qpn, ds, flags, imm))
}

/// The remote-address segment of RDMA and atomic WQEs.
#[inline(always)]
pub const fn raddr_words(raddr: u64, rkey: u32) -> SegWords {
    [be64(raddr), be32_pair(rkey, 0)]
}

/// The remote-address segment's bytes.
#[inline(always)]
pub fn raddr_seg(raddr: u64, rkey: u32) -> [u8; SEG_BYTES] {
    seg_bytes(raddr_words(raddr, rkey))
}

/// A data (gather or scatter) segment.
#[inline(always)]
pub const fn data_words(byte_count: u32, lkey: u32, addr: u64) -> SegWords {
    [be32_pair(byte_count, lkey), be64(addr)]
}

/// A data segment's bytes.
#[inline(always)]
pub fn data_seg(byte_count: u32, lkey: u32, addr: u64) -> [u8; SEG_BYTES] {
    seg_bytes(data_words(byte_count, lkey, addr))
}

/// The atomic segment: compare-and-swap takes both values, fetch-and-add
/// the addend and a zero compare.
#[inline(always)]
pub const fn atomic_words(swap_add: u64, compare: u64) -> SegWords {
    [be64(swap_add), be64(compare)]
}

/// The atomic segment's bytes.
#[inline(always)]
pub fn atomic_seg(swap_add: u64, compare: u64) -> [u8; SEG_BYTES] {
    seg_bytes(atomic_words(swap_add, compare))
}

/// The four-byte header of an inline segment; `byte_count` bytes of data
/// follow it.
#[inline(always)]
pub fn inline_header(byte_count: u32) -> [u8; 4] {
    (byte_count | INLINE_SEG).to_be_bytes()
}

/// The word of an inline segment that holds its header: the header, then
/// the first four data bytes (zero here; the data is copied over them).
#[inline(always)]
pub const fn inline_words(byte_count: u32) -> u64 {
    be32_pair(byte_count | INLINE_SEG, 0)
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

/// Bytes of the datagram segment of a UD send: the address vector,
/// three 16-byte units.
pub const DATAGRAM_BYTES: usize = 48;

/// Byte ranges of the datagram segment (`struct mlx5_wqe_datagram_seg`,
/// whose one member is `struct mlx5_wqe_av`; PRM "Datagram Segment").
pub mod av {
    use core::ops::Range;

    /// The Q_Key the receiver checks (`key.qkey.qkey`).
    pub const QKEY: Range<usize> = 0..4;
    /// The rest of the 64-bit key, zero for UD.
    pub const KEY_RESERVED: Range<usize> = 4..8;
    /// The destination QP number, with [`EXTENDED`] in its top bit.
    pub const DQP_DCT: Range<usize> = 8..12;
    /// Static rate (high nibble) and service level (low nibble).
    pub const STAT_RATE_SL: usize = 12;
    /// Force loopback and the source LID's path bits.
    pub const FL_MLID: usize = 13;
    /// The destination LID (zero on Ethernet).
    pub const RLID: Range<usize> = 14..16;
    /// Reserved.
    pub const RESERVED0: Range<usize> = 16..20;
    /// The next hop's MAC address (Ethernet).
    pub const RMAC: Range<usize> = 20..26;
    /// The GRH traffic class.
    pub const TCLASS: usize = 26;
    /// The GRH hop limit.
    pub const HOP_LIMIT: usize = 27;
    /// The GRH flags, source GID index and flow label.
    pub const GRH_GID_FL: Range<usize> = 28..32;
    /// The destination GID.
    pub const RGID: Range<usize> = 32..48;
    /// `MLX5_EXTENDED_UD_AV`: the vector is the 48-byte extended one,
    /// with the GRH fields (rdma-core's `set_datagram_seg` always sets it).
    pub const EXTENDED: u32 = 1 << 31;
}

/// Where a UD send goes: the fields of `struct mlx5_wqe_av`, in host
/// order. On RoCE every vector carries a GRH (`grh_gid_fl`, `rgid`,
/// `rmac`): rxe and a ConnectX on Ethernet drop a UD send without one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddressVector {
    /// The Q_Key the receiving QP must hold.
    pub qkey: u32,
    /// The destination QP number (24 bits).
    pub dqpn: u32,
    /// Whether the vector is the extended one ([`av::EXTENDED`]).
    pub extended: bool,
    /// Static rate and service level.
    pub stat_rate_sl: u8,
    /// Force loopback and path bits.
    pub fl_mlid: u8,
    /// The destination LID.
    pub rlid: u16,
    /// The next hop's MAC address.
    pub rmac: [u8; 6],
    /// The GRH traffic class.
    pub tclass: u8,
    /// The GRH hop limit.
    pub hop_limit: u8,
    /// The GRH flags, source GID index and flow label, as one word.
    pub grh_gid_fl: u32,
    /// The destination GID.
    pub rgid: [u8; 16],
}

impl AddressVector {
    /// The vector rdma-core's mlx5 provider builds for `attr`
    /// (`mlx5_create_ah` in `providers/mlx5/verbs.c`): the service level in
    /// the low nibble of `stat_rate_sl`, the LID, and for a global route
    /// the extended vector with `grh_gid_fl` = 1 << 30 (a GRH follows) |
    /// the source GID index << 20 | the flow label. The Q_Key and the
    /// destination QP are each send's (`mlx5dv_set_dgram_seg`).
    pub fn of(attr: &udat_core::backend::AhAttr) -> AddressVector {
        let mut v = AddressVector { stat_rate_sl: attr.sl & 0x0f, rlid: attr.dlid, ..AddressVector::default() };
        if let Some(g) = attr.grh {
            v.extended = true;
            v.tclass = g.traffic_class;
            v.hop_limit = g.hop_limit;
            v.grh_gid_fl = 1 << 30 | u32::from(g.sgid_index) << 20 | (g.flow_label & 0x000f_ffff);
            v.rgid = g.dgid;
        }
        v
    }
}

/// The datagram segment as the six words that store it (see
/// [`SegWords`]).
#[inline(always)]
pub const fn datagram_words(v: &AddressVector) -> [SegWords; 3] {
    let dqp = (v.dqpn & 0x00ff_ffff) | if v.extended { av::EXTENDED } else { 0 };
    let lid = ((v.stat_rate_sl as u32) << 24) | ((v.fl_mlid as u32) << 16) | v.rlid as u32;
    let m = v.rmac;
    let mac_head = u32::from_be_bytes([m[0], m[1], m[2], m[3]]);
    let mac_tail = ((m[4] as u32) << 24) | ((m[5] as u32) << 16) | ((v.tclass as u32) << 8) | v.hop_limit as u32;
    let g = v.rgid;
    [
        [be32_pair(v.qkey, 0), be32_pair(dqp, lid)],
        [be32_pair(0, mac_head), be32_pair(mac_tail, v.grh_gid_fl)],
        [
            u64::from_ne_bytes([g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]]),
            u64::from_ne_bytes([g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]]),
        ],
    ]
}

/// The datagram segment's bytes.
#[inline(always)]
pub fn datagram_seg(v: &AddressVector) -> [u8; DATAGRAM_BYTES] {
    let w = datagram_words(v);
    let segs = [seg_bytes(w[0]), seg_bytes(w[1]), seg_bytes(w[2])];
    core::array::from_fn(|i| segs[i / SEG_BYTES][i % SEG_BYTES])
}

/// WQEBBs a WQE of `ds` segments occupies.
#[inline(always)]
pub const fn bbs(ds: usize) -> usize {
    (ds * SEG_BYTES).div_ceil(WQEBB_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The control words a lane makes from its kept `qpn << 8` are the
    /// ones `ctrl_words` makes from the QP number.
    #[test]
    fn a_control_segment_from_kept_fields_is_the_whole_one() {
        for (pi, opcode, qpn, ds, flags) in
            [(0, opcode::RDMA_WRITE, 0x1234, 3, fm_ce_se::CQ_UPDATE), (0xfffe, opcode::SEND, 0xab_cdef, 2, 0)]
        {
            let whole = ctrl_words(pi, opcode, 0, qpn, ds, flags, 0);
            assert_eq!([ctrl_head(pi, opcode, qpn << 8 | u32::from(ds)), ctrl_tail(flags, 0)], whole);
            assert_eq!(ctrl_head_with(pi, opcode, qpn_ds_word(qpn << 8 | u32::from(ds))), whole[0]);
        }
    }
}
