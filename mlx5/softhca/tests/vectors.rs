//! udat-mlx5's bytes against rdma-core's: every WQE segment and CQE field
//! the data path writes or reads, compared with what `mlx5dv.h`'s inline
//! helpers and structs produce (compiled in C by this crate's build), over
//! random inputs; and every layout fact the data path relies on, checked
//! against the header.

use proptest::prelude::*;
use udat_core::types::MemPriv;
use udat_mlx5::cq::{CompletionQueue, CqGeometry};
use udat_mlx5::cqe::{field, CqeOpcode, Syndrome};
use udat_mlx5::doorbell::CQ_DOORBELL;
use udat_mlx5::mw;
mod common;

use common::SYNDROMES;
use udat_mlx5::sq::{Op, SendQueue, SendSlot, Sge, SqGeometry};
use udat_mlx5::testing::{Memory, Recorder};
use udat_mlx5::wqe::{self, atomic, av, ctrl, data, fm_ce_se, opcode, raddr, srq_next};
use udat_softhca::oracle::{self, CqeFields, Helper};

fn layout(name: &str) -> usize {
    oracle::layout(name).unwrap_or_else(|| panic!("the oracle knows no {name}")) as usize
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ctrl_seg_matches_both_rdma_core_helpers(
        pi: u16, opc: u8, opmod: u8, qpn in 0u32..1 << 24, flags: u8, ds: u8, imm: u32,
    ) {
        let ours = wqe::ctrl_seg(pi, opc, opmod, qpn, ds, flags, imm);
        prop_assert_eq!(ours, oracle::ctrl_seg(Helper::Scalar, pi, opc, opmod, qpn, flags, ds, imm));
        prop_assert_eq!(ours, oracle::ctrl_seg(Helper::X86, pi, opc, opmod, qpn, flags, ds, imm));
    }

    #[test]
    fn data_seg_matches_both_rdma_core_helpers(length: u32, lkey: u32, addr: u64) {
        let ours = wqe::data_seg(length, lkey, addr);
        prop_assert_eq!(ours, oracle::data_seg(Helper::Scalar, length, lkey, addr));
        prop_assert_eq!(ours, oracle::data_seg(Helper::X86, length, lkey, addr));
    }

    /// A window bind's UMR segments, byte for byte as the header's structs
    /// lay them out; a zero length is the free. A type 2 window's bind
    /// names its QP, its free none.
    #[test]
    fn a_window_bind_matches_the_header_structs(
        rkey: u32, lkey: u32, addr: u64, len in prop_oneof![Just(0u32), 1u32..], read: bool, write: bool,
        qpn in prop::option::of(0u32..1 << 24),
    ) {
        let privileges = MemPriv(
            if read { MemPriv::REMOTE_READ.0 } else { 0 } | if write { MemPriv::REMOTE_WRITE.0 } else { 0 },
        );
        let bind = (len != 0).then_some(mw::Bind { lkey, addr, len, privileges, qpn });
        let (body, n) = mw::bind_body(rkey, bind.as_ref());
        let ours: Vec<u8> = body[..n].iter().flat_map(|s| wqe::seg_bytes(*s)).collect();
        let expected = oracle::umr_bind(oracle::UmrBind {
            rkey, lkey, addr, len, remote_read: read, remote_write: write, qpn,
        });
        prop_assert_eq!(ours, expected);
    }

    /// A send with invalidate is a send whose control segment carries the
    /// key to invalidate in its immediate, in network order (rdma-core's
    /// `send_ieth` for `IBV_WR_SEND_WITH_INV`), written over a slot
    /// poisoned with 0xa5: the control segment as both `mlx5dv.h`
    /// helpers build it, then the data segment.
    #[test]
    fn a_send_with_invalidate_matches_rdma_core(
        rkey: u32, len in 1u32..1 << 20, lkey: u32, addr: u64, pi_start in 0u16..64, signalled: bool,
    ) {
        let flags = if signalled { fm_ce_se::CQ_UPDATE } else { 0 };
        let (wqe, qpn, pi) = sq_wqe(pi_start, Op::SendInval(rkey), &[Sge { addr, length: len, lkey }], flags);
        let ds = 2;
        prop_assert_eq!(&wqe[..16], &oracle::ctrl_seg(Helper::Scalar, pi, opcode::SEND_INVAL, 0, qpn, flags, ds, rkey)[..]);
        prop_assert_eq!(&wqe[..16], &oracle::ctrl_seg(Helper::X86, pi, opcode::SEND_INVAL, 0, qpn, flags, ds, rkey)[..]);
        prop_assert_eq!(&wqe[16..32], &oracle::data_seg(Helper::Scalar, len, lkey, addr)[..]);
    }

    /// A UD send (`SendQueue::send_ud`), written over a ring poisoned
    /// with 0xa5 and across its end: the control segment of a SEND of
    /// five units as both `mlx5dv.h` helpers build it, the datagram
    /// segment as `mlx5dv_set_dgram_seg` builds it, then the data segment.
    #[test]
    fn a_ud_send_matches_rdma_core(
        qkey: u32, dqpn in 0u32..1 << 24, rlid: u16, tclass: u8, hop_limit: u8, grh_gid_fl: u32, rgid: [u8; 16],
        len in 1u32..4096, lkey: u32, addr: u64, pi_start in 0u16..128, signalled: bool,
    ) {
        let av = wqe::AddressVector {
            qkey, dqpn, extended: true, rlid, tclass, hop_limit, grh_gid_fl, rgid, ..Default::default()
        };
        let flags = if signalled { fm_ce_se::CQ_UPDATE } else { 0 };
        let (wqe, qpn, pi) = ud_wqe(pi_start, &av, Sge { addr, length: len, lkey }, flags);
        let ds = 5;
        prop_assert_eq!(&wqe[..16], &oracle::ctrl_seg(Helper::Scalar, pi, opcode::SEND, 0, qpn, flags, ds, 0)[..]);
        prop_assert_eq!(&wqe[..16], &oracle::ctrl_seg(Helper::X86, pi, opcode::SEND, 0, qpn, flags, ds, 0)[..]);
        prop_assert_eq!(&wqe[16..64], &oracle::datagram_seg(&av)[..]);
        prop_assert_eq!(&wqe[64..80], &oracle::data_seg(Helper::Scalar, len, lkey, addr)[..]);
    }

    #[test]
    fn raddr_seg_matches_the_header_struct(addr: u64, rkey: u32) {
        prop_assert_eq!(wqe::raddr_seg(addr, rkey), oracle::raddr_seg(addr, rkey));
    }

    #[test]
    fn atomic_seg_matches_the_header_struct(swap_add: u64, compare: u64) {
        prop_assert_eq!(wqe::atomic_seg(swap_add, compare), oracle::atomic_seg(swap_add, compare));
    }

    #[test]
    fn inline_header_matches_the_header_struct(len in 0u32..1 << 31) {
        prop_assert_eq!(wqe::inline_header(len), oracle::inline_header(len));
    }

    #[test]
    fn datagram_seg_matches_the_header_helper(
        qkey: u32,
        dqpn in 0u32..1 << 24,
        extended: bool,
        stat_rate_sl: u8,
        fl_mlid: u8,
        rlid: u16,
        rmac: [u8; 6],
        tclass: u8,
        hop_limit: u8,
        grh_gid_fl: u32,
        rgid: [u8; 16],
    ) {
        let v = wqe::AddressVector {
            qkey, dqpn, extended, stat_rate_sl, fl_mlid, rlid, rmac, tclass, hop_limit, grh_gid_fl, rgid,
        };
        prop_assert_eq!(wqe::datagram_seg(&v), oracle::datagram_seg(&v));
    }

    #[test]
    fn srq_next_seg_matches_the_header_struct(next: u16) {
        prop_assert_eq!(wqe::srq_next_seg(next), oracle::srq_next_seg(next));
    }

    /// A CQE built through `struct mlx5_cqe64` / `struct mlx5_err_cqe` and
    /// placed where the consumer index points reads back field for field;
    /// rdma-core's getters agree on owner, opcode and solicited.
    #[test]
    fn cqe_fields_read_as_the_header_writes_them(
        opc in prop::sample::select(vec![0u8, 1, 2, 3, 4, 13, 14]),
        se in 0u8..2, qpn in 0u32..1 << 24, send_opcode: u8, wqe_counter: u16,
        byte_cnt: u32, imm: u32, srqn in 0u32..1 << 24, syndrome: u8, vendor: u8,
        laps in 0u32..3, index in 0u32..8,
    ) {
        let cnt = 8u32;
        let ci = laps * cnt + index;
        let owner = u8::from(ci & cnt != 0);
        let f = CqeFields { opcode: opc, owner, se, qpn, send_opcode, wqe_counter, byte_cnt, imm, srqn,
            syndrome, vendor_syndrome: vendor };
        let bytes = oracle::cqe(f);
        let (g_owner, g_opcode, g_se, g_format) = oracle::cqe_getters(&bytes);
        prop_assert_eq!((g_owner, g_opcode, g_se, g_format), (owner, opc, se, 0));

        let mem = Memory::new(cnt as usize * 64);
        let rec = Memory::new(64);
        for i in 0..cnt as usize {
            mem.write(i * 64 + 63, &[0xf0]);
        }
        let mut cq = CompletionQueue::new(CqGeometry {
            cqn: 1, buf: mem.share(), cqe_cnt: cnt, cqe_size: 64, dbrec: rec.share(), uar: Recorder::default(),
        }).unwrap();
        // Walk the consumer index to `ci` over CQEs of the right owner.
        for i in 0..ci {
            let filler = oracle::cqe(CqeFields { owner: u8::from(i & cnt != 0), ..CqeFields::default() });
            mem.write((i % cnt) as usize * 64, &filler);
            prop_assert!(cq.poll().is_some());
        }
        // The same CQE with the other owner bit is the device's.
        let stale = oracle::cqe(CqeFields { owner: owner ^ 1, ..f });
        mem.write((ci % cnt) as usize * 64, &stale);
        prop_assert!(cq.poll().is_none());
        mem.write((ci % cnt) as usize * 64, &bytes);
        let cqe = cq.poll().expect("a CQE of the right owner is software's");
        prop_assert_eq!(cqe.opcode, CqeOpcode::from(opc));
        prop_assert_eq!(cqe.solicited, se == 1);
        prop_assert_eq!(cqe.qpn, qpn);
        prop_assert_eq!(cqe.send_opcode, send_opcode);
        prop_assert_eq!(cqe.wqe_counter, wqe_counter);
        // A successful requester CQE of anything but an RDMA read (0x10)
        // or an atomic (0x11, 0x12) is read from its last word alone.
        let last_word_only = opc == 0 && !matches!(send_opcode, 0x10..=0x12);
        let rest = if last_word_only { (0, 0, 0) } else { (byte_cnt, imm, srqn) };
        prop_assert_eq!((cqe.byte_cnt, cqe.imm, cqe.srqn), rest);
        if cqe.is_error() {
            prop_assert_eq!(cqe.syndrome, Syndrome::from(syndrome));
            prop_assert_eq!(cqe.vendor_syndrome, vendor);
        }
    }
}

/// The WQE the send queue writes for `op` over `sges` with `flags` after
/// `before` one-block WQEs, into a ring poisoned with 0xa5; with its QP
/// number and its index.
fn sq_wqe(before: u16, op: Op, sges: &[Sge], flags: u8) -> (Vec<u8>, u32, u16) {
    const WQEBBS: u32 = 128;
    const QPN: u32 = 0x4242;
    let (ring, record) = (Memory::new(WQEBBS as usize * wqe::WQEBB_BYTES), Memory::new(64));
    ring.write(0, &vec![0xa5; WQEBBS as usize * wqe::WQEBB_BYTES]);
    let g = SqGeometry {
        qpn: QPN,
        buf: ring.share(),
        wqe_cnt: WQEBBS,
        stride: 64,
        dbrec: record.share(),
        bf: Recorder::default(),
        bf_size: 0,
    };
    let mut sq = SendQueue::new(g, vec![SendSlot::EMPTY; WQEBBS as usize]).unwrap();
    for _ in 0..before {
        sq.post(Op::Send, &[], 0, SendSlot::EMPTY).unwrap();
    }
    sq.post(op, sges, flags, SendSlot::EMPTY).unwrap();
    sq.ring();
    drop(sq);
    (ring.read(usize::from(before) * wqe::WQEBB_BYTES, wqe::WQEBB_BYTES), QPN, before)
}

/// The two WQEBBs of a UD send to `av` posted after `before` sends on a
/// ring of 128 poisoned with 0xa5, the second read from the ring's start
/// when the first is its last; the QP number and the WQE's index.
fn ud_wqe(before: u16, av: &wqe::AddressVector, sge: Sge, flags: u8) -> (Vec<u8>, u32, u16) {
    const WQEBBS: u32 = 128;
    const QPN: u32 = 0x4343;
    let (ring, record) = (Memory::new(WQEBBS as usize * wqe::WQEBB_BYTES), Memory::new(64));
    ring.write(0, &vec![0xa5; WQEBBS as usize * wqe::WQEBB_BYTES]);
    let g = SqGeometry {
        qpn: QPN,
        buf: ring.share(),
        wqe_cnt: WQEBBS,
        stride: 64,
        dbrec: record.share(),
        bf: Recorder::default(),
        bf_size: 0,
    };
    let mut sq = SendQueue::new(g, vec![SendSlot::EMPTY; WQEBBS as usize]).unwrap();
    for _ in 0..before {
        sq.post(Op::Send, &[], 0, SendSlot::EMPTY).unwrap();
        sq.ring();
        sq.retire(sq.pi().wrapping_sub(1));
    }
    sq.send_ud(av, &[sge], flags, SendSlot::EMPTY).unwrap();
    drop(sq);
    let block = |i: u16| ring.read(usize::from(i % WQEBBS as u16) * wqe::WQEBB_BYTES, wqe::WQEBB_BYTES);
    ([block(before), block(before + 1)].concat(), QPN, before)
}

#[test]
fn segment_layouts_match_the_header() {
    let checks: &[(&str, usize)] = &[
        ("ctrl.size", wqe::SEG_BYTES),
        ("ctrl.opmod_idx_opcode", ctrl::OPMOD_IDX_OPCODE.start),
        ("ctrl.qpn_ds", ctrl::QPN_DS.start),
        ("ctrl.signature", ctrl::SIGNATURE),
        ("ctrl.dci_stream_channel_id", ctrl::STREAM.start),
        ("ctrl.fm_ce_se", ctrl::FM_CE_SE),
        ("ctrl.imm", ctrl::IMM.start),
        ("raddr.size", wqe::SEG_BYTES),
        ("raddr.raddr", raddr::RADDR.start),
        ("raddr.rkey", raddr::RKEY.start),
        ("raddr.reserved", raddr::RESERVED.start),
        ("data.size", wqe::SEG_BYTES),
        ("data.byte_count", data::BYTE_COUNT.start),
        ("data.lkey", data::LKEY.start),
        ("data.addr", data::ADDR.start),
        ("atomic.size", wqe::SEG_BYTES),
        ("atomic.swap_add", atomic::SWAP_ADD.start),
        ("atomic.compare", atomic::COMPARE.start),
        ("inl.size", 4),
        ("av.size", wqe::DATAGRAM_BYTES),
        ("av.qkey", av::QKEY.start),
        ("av.key_reserved", av::KEY_RESERVED.start),
        ("av.dqp_dct", av::DQP_DCT.start),
        ("av.stat_rate_sl", av::STAT_RATE_SL),
        ("av.fl_mlid", av::FL_MLID),
        ("av.rlid", av::RLID.start),
        ("av.reserved0", av::RESERVED0.start),
        ("av.rmac", av::RMAC.start),
        ("av.tclass", av::TCLASS),
        ("av.hop_limit", av::HOP_LIMIT),
        ("av.grh_gid_fl", av::GRH_GID_FL.start),
        ("av.rgid", av::RGID.start),
        ("srq_next.size", wqe::SEG_BYTES),
        ("srq_next.next_wqe_index", srq_next::NEXT_WQE_INDEX.start),
        ("srq_next.signature", srq_next::SIGNATURE),
        ("cqe.size", udat_mlx5::cqe::CQE_BYTES),
        ("cqe.flags_rqpn", field::FLAGS_RQPN.start),
        ("cqe.srqn_uidx", field::SRQN.start),
        ("cqe.imm_inval_pkey", field::IMM.start),
        ("cqe.byte_cnt", field::BYTE_CNT.start),
        ("cqe.sop_drop_qpn", field::SOP_DROP_QPN.start),
        ("cqe.wqe_counter", field::WQE_COUNTER.start),
        ("cqe.signature", field::SIGNATURE),
        ("cqe.op_own", field::OP_OWN),
        ("err.vendor_err_synd", field::VENDOR_SYNDROME),
        ("err.syndrome", field::SYNDROME),
        ("err.s_wqe_opcode_qpn", field::SOP_DROP_QPN.start),
        ("err.wqe_counter", field::WQE_COUNTER.start),
    ];
    for (name, ours) in checks {
        assert_eq!(layout(name), *ours, "{name}");
    }
}

#[test]
fn constants_match_the_header() {
    let checks: &[(&str, u64)] = &[
        ("MLX5_SEND_WQE_BB", wqe::WQEBB_BYTES as u64),
        ("MLX5_INLINE_SEG", u64::from(wqe::INLINE_SEG)),
        ("MLX5_EXTENDED_UD_AV", u64::from(av::EXTENDED)),
        ("MLX5_INVALID_LKEY", u64::from(wqe::INVALID_LKEY)),
        ("MLX5_CQ_DOORBELL", CQ_DOORBELL as u64),
        ("MLX5_CQ_DB_REQ_NOT_SOL", u64::from(udat_mlx5::cq::REQ_NOT_SOL)),
        ("MLX5_RCV_DBR", udat_mlx5::rq::RCV_DBR as u64),
        ("MLX5_SND_DBR", udat_mlx5::sq::SND_DBR as u64),
        ("MLX5_WQE_CTRL_CQ_UPDATE", u64::from(fm_ce_se::CQ_UPDATE)),
        ("MLX5_WQE_CTRL_SOLICITED", u64::from(fm_ce_se::SOLICITED)),
        ("MLX5_WQE_CTRL_FENCE", u64::from(fm_ce_se::FENCE)),
        ("MLX5_OPCODE_RDMA_WRITE", u64::from(opcode::RDMA_WRITE)),
        ("MLX5_OPCODE_RDMA_WRITE_IMM", u64::from(opcode::RDMA_WRITE_IMM)),
        ("MLX5_OPCODE_SEND", u64::from(opcode::SEND)),
        ("MLX5_OPCODE_SEND_IMM", u64::from(opcode::SEND_IMM)),
        ("MLX5_OPCODE_RDMA_READ", u64::from(opcode::RDMA_READ)),
        ("MLX5_OPCODE_ATOMIC_CS", u64::from(opcode::ATOMIC_CS)),
        ("MLX5_OPCODE_ATOMIC_FA", u64::from(opcode::ATOMIC_FA)),
        ("MLX5_OPCODE_UMR", u64::from(opcode::UMR)),
        ("MLX5_OPCODE_SEND_INVAL", u64::from(opcode::SEND_INVAL)),
        ("MLX5_CQE_RESP_SEND_INV", u64::from(u8::from(CqeOpcode::RespSendInv))),
        ("MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE", u64::from(fm_ce_se::INITIATOR_SMALL_FENCE)),
    ];
    for (name, ours) in checks {
        assert_eq!(layout(name) as u64, *ours, "{name}");
    }
}

/// Every syndrome of `mlx5dv.h` has its DAT status, by the one table.
#[test]
fn every_syndrome_has_its_dat_status() {
    for &(raw, status) in SYNDROMES {
        let syndrome = Syndrome::from(raw);
        assert_eq!(syndrome.dto_status(), status, "syndrome {raw:#x}");
        assert_eq!(u8::from(syndrome), raw, "syndrome {raw:#x} round-trips");
    }
}

/// `udat_mlx5::dv`'s mirrors of what `mlx5dv_init_obj` fills are the
/// header's structs, field for field.
#[test]
fn init_obj_structs_are_laid_out_as_the_header_s() {
    use std::mem::{offset_of, size_of};
    use udat_mlx5::dv::{DvCq, DvQp, DvSrq};
    let checks: &[(&str, usize)] = &[
        ("dv_qp.size", size_of::<DvQp>()),
        ("dv_qp.dbrec", offset_of!(DvQp, dbrec)),
        ("dv_qp.sq.buf", offset_of!(DvQp, sq.buf)),
        ("dv_qp.sq.wqe_cnt", offset_of!(DvQp, sq.wqe_cnt)),
        ("dv_qp.sq.stride", offset_of!(DvQp, sq.stride)),
        ("dv_qp.rq.buf", offset_of!(DvQp, rq.buf)),
        ("dv_qp.rq.wqe_cnt", offset_of!(DvQp, rq.wqe_cnt)),
        ("dv_qp.rq.stride", offset_of!(DvQp, rq.stride)),
        ("dv_qp.bf.reg", offset_of!(DvQp, bf.reg)),
        ("dv_qp.bf.size", offset_of!(DvQp, bf.size)),
        ("dv_qp.comp_mask", offset_of!(DvQp, comp_mask)),
        ("dv_qp.uar_mmap_offset", offset_of!(DvQp, uar_mmap_offset)),
        ("dv_qp.sqn", offset_of!(DvQp, sqn)),
        ("dv_qp.tir_icm_addr", offset_of!(DvQp, tir_icm_addr)),
        ("dv_cq.size", size_of::<DvCq>()),
        ("dv_cq.buf", offset_of!(DvCq, buf)),
        ("dv_cq.dbrec", offset_of!(DvCq, dbrec)),
        ("dv_cq.cqe_cnt", offset_of!(DvCq, cqe_cnt)),
        ("dv_cq.cqe_size", offset_of!(DvCq, cqe_size)),
        ("dv_cq.cq_uar", offset_of!(DvCq, cq_uar)),
        ("dv_cq.cqn", offset_of!(DvCq, cqn)),
        ("dv_cq.comp_mask", offset_of!(DvCq, comp_mask)),
        ("dv_srq.size", size_of::<DvSrq>()),
        ("dv_srq.buf", offset_of!(DvSrq, buf)),
        ("dv_srq.dbrec", offset_of!(DvSrq, dbrec)),
        ("dv_srq.stride", offset_of!(DvSrq, stride)),
        ("dv_srq.head", offset_of!(DvSrq, head)),
        ("dv_srq.tail", offset_of!(DvSrq, tail)),
        ("dv_srq.comp_mask", offset_of!(DvSrq, comp_mask)),
        ("dv_srq.srqn", offset_of!(DvSrq, srqn)),
    ];
    for (name, ours) in checks {
        assert_eq!(layout(name), *ours, "{name}");
    }
}
