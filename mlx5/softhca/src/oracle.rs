//! rdma-core's `mlx5dv.h` as a byte oracle: its inline helpers and
//! structs, compiled in C by this crate's build (`oracle/mlx5dv_oracle.c`).
//! The data path is tested against these bytes; nothing here runs on the
//! data path.

use std::ffi::CString;
use std::os::raw::{c_char, c_long};

extern "C" {
    fn oracle_ctrl_seg(out: *mut u8, pi: u16, opcode: u8, opmod: u8, qpn: u32, fm_ce_se: u8, ds: u8, imm: u32);
    fn oracle_x86_ctrl_seg(out: *mut u8, pi: u16, opcode: u8, opmod: u8, qpn: u32, fm_ce_se: u8, ds: u8, imm: u32);
    fn oracle_data_seg(out: *mut u8, length: u32, lkey: u32, addr: u64);
    fn oracle_x86_data_seg(out: *mut u8, length: u32, lkey: u32, addr: u64);
    fn oracle_raddr_seg(out: *mut u8, raddr: u64, rkey: u32);
    fn oracle_atomic_seg(out: *mut u8, swap_add: u64, compare: u64);
    fn oracle_inline_header(out: *mut u8, byte_count: u32);
    fn oracle_srq_next_seg(out: *mut u8, next: u16);
    fn oracle_datagram_seg(
        out: *mut u8,
        qkey: u32,
        dqpn: u32,
        ext: u8,
        stat_rate_sl: u8,
        fl_mlid: u8,
        rlid: u16,
        rmac: *const u8,
        tclass: u8,
        hop_limit: u8,
        grh_gid_fl: u32,
        rgid: *const u8,
    );
    fn oracle_umr_bind(
        out: *mut u8,
        rkey: u32,
        lkey: u32,
        addr: u64,
        len: u32,
        remote_read: i32,
        remote_write: i32,
        type2: i32,
        qpn: u32,
    ) -> usize;
    fn oracle_cqe(
        out: *mut u8,
        opcode: u8,
        owner: u8,
        se: u8,
        qpn: u32,
        send_opcode: u8,
        wqe_counter: u16,
        byte_cnt: u32,
        imm: u32,
        srqn: u32,
        syndrome: u8,
        vendor_syndrome: u8,
    );
    fn oracle_cqe_owner(cqe: *mut u8) -> u8;
    fn oracle_cqe_opcode(cqe: *mut u8) -> u8;
    fn oracle_cqe_se(cqe: *mut u8) -> u8;
    fn oracle_cqe_format(cqe: *mut u8) -> u8;
    fn oracle_layout(name: *const c_char) -> c_long;
}

/// Which `mlx5dv.h` helper builds a segment.
#[derive(Clone, Copy, Debug)]
pub enum Helper {
    /// `mlx5dv_set_*_seg`
    Scalar,
    /// `mlx5dv_x86_set_*_seg` (SSSE3 shuffles)
    X86,
}

#[allow(clippy::too_many_arguments)]
pub fn ctrl_seg(helper: Helper, pi: u16, opcode: u8, opmod: u8, qpn: u32, fm_ce_se: u8, ds: u8, imm: u32) -> [u8; 16] {
    let mut out = [0xa5u8; 16];
    // SAFETY: the helper writes exactly the 16 bytes of `out`.
    unsafe {
        match helper {
            Helper::Scalar => oracle_ctrl_seg(out.as_mut_ptr(), pi, opcode, opmod, qpn, fm_ce_se, ds, imm),
            Helper::X86 => oracle_x86_ctrl_seg(out.as_mut_ptr(), pi, opcode, opmod, qpn, fm_ce_se, ds, imm),
        }
    }
    out
}

pub fn data_seg(helper: Helper, length: u32, lkey: u32, addr: u64) -> [u8; 16] {
    let mut out = [0xa5u8; 16];
    // SAFETY: the helper writes exactly the 16 bytes of `out`.
    unsafe {
        match helper {
            Helper::Scalar => oracle_data_seg(out.as_mut_ptr(), length, lkey, addr),
            Helper::X86 => oracle_x86_data_seg(out.as_mut_ptr(), length, lkey, addr),
        }
    }
    out
}

pub fn raddr_seg(raddr: u64, rkey: u32) -> [u8; 16] {
    let mut out = [0xa5u8; 16];
    // SAFETY: writes the 16 bytes of `out`.
    unsafe { oracle_raddr_seg(out.as_mut_ptr(), raddr, rkey) };
    out
}

pub fn atomic_seg(swap_add: u64, compare: u64) -> [u8; 16] {
    let mut out = [0xa5u8; 16];
    // SAFETY: writes the 16 bytes of `out`.
    unsafe { oracle_atomic_seg(out.as_mut_ptr(), swap_add, compare) };
    out
}

pub fn inline_header(byte_count: u32) -> [u8; 4] {
    let mut out = [0xa5u8; 4];
    // SAFETY: writes the 4 bytes of `out`.
    unsafe { oracle_inline_header(out.as_mut_ptr(), byte_count) };
    out
}

/// What a window bind opens, for [`umr_bind`].
#[derive(Clone, Copy, Debug)]
pub struct UmrBind {
    pub rkey: u32,
    pub lkey: u32,
    pub addr: u64,
    /// 0: the free.
    pub len: u32,
    pub remote_read: bool,
    pub remote_write: bool,
    /// The QP a type 2 window binds to; `None` for type 1.
    pub qpn: Option<u32>,
}

/// The segments after the control segment of a window bind (or, with
/// `len` 0, free): the bytes the header's structs hold.
pub fn umr_bind(b: UmrBind) -> Vec<u8> {
    let mut out = [0xa5u8; 176];
    let (read, write) = (i32::from(b.remote_read), i32::from(b.remote_write));
    let (type2, qpn) = (i32::from(b.qpn.is_some()), b.qpn.unwrap_or(0));
    // SAFETY: writes at most the 176 bytes of `out` and says how many.
    let n = unsafe { oracle_umr_bind(out.as_mut_ptr(), b.rkey, b.lkey, b.addr, b.len, read, write, type2, qpn) };
    out[..n.min(176)].to_vec()
}

/// `mlx5dv_set_dgram_seg` of the vector `v`.
pub fn datagram_seg(v: &udat_mlx5::wqe::AddressVector) -> [u8; 48] {
    let mut out = [0xa5u8; 48];
    // SAFETY: writes the 48 bytes of `out`; reads 6 bytes of `rmac` and 16
    // of `rgid`, which are that long.
    unsafe {
        oracle_datagram_seg(
            out.as_mut_ptr(),
            v.qkey,
            v.dqpn,
            u8::from(v.extended),
            v.stat_rate_sl,
            v.fl_mlid,
            v.rlid,
            v.rmac.as_ptr(),
            v.tclass,
            v.hop_limit,
            v.grh_gid_fl,
            v.rgid.as_ptr(),
        )
    };
    out
}

pub fn srq_next_seg(next: u16) -> [u8; 16] {
    let mut out = [0xa5u8; 16];
    // SAFETY: writes the 16 bytes of `out`.
    unsafe { oracle_srq_next_seg(out.as_mut_ptr(), next) };
    out
}

/// The fields of a CQE, to build through the header's structs.
#[derive(Clone, Copy, Debug, Default)]
pub struct CqeFields {
    pub opcode: u8,
    pub owner: u8,
    pub se: u8,
    pub qpn: u32,
    pub send_opcode: u8,
    pub wqe_counter: u16,
    pub byte_cnt: u32,
    pub imm: u32,
    pub srqn: u32,
    pub syndrome: u8,
    pub vendor_syndrome: u8,
}

pub fn cqe(f: CqeFields) -> [u8; 64] {
    let mut out = [0xa5u8; 64];
    // SAFETY: writes the 64 bytes of `out`.
    unsafe {
        oracle_cqe(
            out.as_mut_ptr(),
            f.opcode,
            f.owner,
            f.se,
            f.qpn,
            f.send_opcode,
            f.wqe_counter,
            f.byte_cnt,
            f.imm,
            f.srqn,
            f.syndrome,
            f.vendor_syndrome,
        )
    };
    out
}

/// `mlx5dv_get_cqe_owner`, `_opcode`, `_se`, `_format` of a CQE.
pub fn cqe_getters(cqe: &[u8; 64]) -> (u8, u8, u8, u8) {
    let mut copy = *cqe;
    let p = copy.as_mut_ptr();
    // SAFETY: each getter reads one byte of the 64.
    unsafe { (oracle_cqe_owner(p), oracle_cqe_opcode(p), oracle_cqe_se(p), oracle_cqe_format(p)) }
}

/// A size, offset or constant of `mlx5dv.h` by name (`"ctrl.qpn_ds"`,
/// `"MLX5_OPCODE_SEND"`); None for a name the oracle does not know.
pub fn layout(name: &str) -> Option<i64> {
    let name = CString::new(name).ok()?;
    // SAFETY: a NUL-terminated string the call only reads.
    let v = unsafe { oracle_layout(name.as_ptr()) };
    (v >= 0).then_some(v as i64)
}
