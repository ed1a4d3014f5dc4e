/*
 * The byte oracle for udat's mlx5 data path: rdma-core's own inline
 * helpers from <infiniband/mlx5dv.h>, and the header's structs for the
 * segments that have no helper. Nothing here touches a device.
 */
#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <infiniband/mlx5dv.h>

void oracle_ctrl_seg(uint8_t out[16], uint16_t pi, uint8_t opcode, uint8_t opmod, uint32_t qpn,
                     uint8_t fm_ce_se, uint8_t ds, uint32_t imm)
{
	/* mlx5dv_set_ctrl_seg leaves bytes 9-10 alone: start from zero, as rdma-core does. */
	memset(out, 0, 16);
	mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)out, pi, opcode, opmod, qpn, fm_ce_se, ds, 0, htobe32(imm));
}

void oracle_x86_ctrl_seg(uint8_t out[16], uint16_t pi, uint8_t opcode, uint8_t opmod, uint32_t qpn,
                         uint8_t fm_ce_se, uint8_t ds, uint32_t imm)
{
	struct mlx5_wqe_ctrl_seg seg __attribute__((aligned(16)));
	mlx5dv_x86_set_ctrl_seg(&seg, pi, opcode, opmod, qpn, fm_ce_se, ds, 0, htobe32(imm));
	memcpy(out, &seg, 16);
}

void oracle_data_seg(uint8_t out[16], uint32_t length, uint32_t lkey, uint64_t addr)
{
	mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)out, length, lkey, (uintptr_t)addr);
}

void oracle_x86_data_seg(uint8_t out[16], uint32_t length, uint32_t lkey, uint64_t addr)
{
	struct mlx5_wqe_data_seg seg __attribute__((aligned(16)));
	mlx5dv_x86_set_data_seg(&seg, length, lkey, (uintptr_t)addr);
	memcpy(out, &seg, 16);
}

void oracle_raddr_seg(uint8_t out[16], uint64_t raddr, uint32_t rkey)
{
	struct mlx5_wqe_raddr_seg seg = { .raddr = htobe64(raddr), .rkey = htobe32(rkey), .reserved = 0 };
	memcpy(out, &seg, sizeof(seg));
}

void oracle_atomic_seg(uint8_t out[16], uint64_t swap_add, uint64_t compare)
{
	struct mlx5_wqe_atomic_seg seg = { .swap_add = htobe64(swap_add), .compare = htobe64(compare) };
	memcpy(out, &seg, sizeof(seg));
}

void oracle_inline_header(uint8_t out[4], uint32_t byte_count)
{
	struct mlx5_wqe_inl_data_seg seg = { .byte_count = htobe32(byte_count | MLX5_INLINE_SEG) };
	memcpy(out, &seg, sizeof(seg));
}

void oracle_srq_next_seg(uint8_t out[16], uint16_t next)
{
	struct mlx5_wqe_srq_next_seg seg;
	memset(&seg, 0, sizeof(seg));
	seg.next_wqe_index = htobe16(next);
	memcpy(out, &seg, sizeof(seg));
}

/*
 * The segments after the control segment of a WQE that binds a memory
 * window (len != 0) or frees it (len == 0), set field by field through
 * the header's structs and enums: the UMR control segment, the mkey
 * context and, for a bind, one KLM entry padded to 64 bytes. A type 2
 * window's bind names the QP `qpn` (rdma-core's set_umr_mkey_seg). The
 * bytes written: 176 for a bind, 112 for a free.
 */
size_t oracle_umr_bind(uint8_t out[176], uint32_t rkey, uint32_t lkey, uint64_t addr, uint32_t len,
		       int remote_read, int remote_write, int type2, uint32_t qpn)
{
	struct mlx5_wqe_umr_ctrl_seg ctrl;
	struct mlx5_wqe_mkey_context_seg mkey;
	union {
		struct mlx5_wqe_umr_klm_seg klm;
		uint8_t bytes[64];
	} data;
	uint64_t mask = MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY;

	memset(&ctrl, 0, sizeof(ctrl));
	memset(&mkey, 0, sizeof(mkey));
	memset(&data, 0, sizeof(data));
	ctrl.flags = MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET | MLX5_WQE_UMR_CTRL_FLAG_INLINE;
	/* Type 1, or a free: the window is bound to no QP. */
	mkey.qpn_mkey = htobe32((rkey & 0xff) | ((!type2 || !len) ? 0xffffff00u : qpn << 8));
	if (len) {
		ctrl.klm_octowords = htobe16(4);
		mask |= MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN | MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR |
			MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE |
			MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ |
			MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE | MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC;
		if (remote_read)
			mkey.access_flags |= MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ;
		if (remote_write)
			mkey.access_flags |= MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE;
		mkey.start_addr = htobe64(addr);
		mkey.len = htobe64(len);
		data.klm.byte_count = htobe32(len);
		data.klm.mkey = htobe32(lkey);
		data.klm.address = htobe64(addr);
	} else {
		mkey.free = MLX5_WQE_MKEY_CONTEXT_FREE;
	}
	ctrl.mkey_mask = htobe64(mask);
	memcpy(out, &ctrl, sizeof(ctrl));
	memcpy(out + sizeof(ctrl), &mkey, sizeof(mkey));
	if (!len)
		return sizeof(ctrl) + sizeof(mkey);
	memcpy(out + sizeof(ctrl) + sizeof(mkey), &data, sizeof(data));
	return sizeof(ctrl) + sizeof(mkey) + sizeof(data);
}

/* A CQE written through the header's structs: a success CQE through
 * struct mlx5_cqe64, then the error fields through struct mlx5_err_cqe. */
void oracle_cqe(uint8_t out[64], uint8_t opcode, uint8_t owner, uint8_t se, uint32_t qpn, uint8_t send_opcode,
                uint16_t wqe_counter, uint32_t byte_cnt, uint32_t imm, uint32_t srqn, uint8_t syndrome,
                uint8_t vendor_syndrome)
{
	struct mlx5_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	cqe.srqn_uidx = htobe32(srqn & 0xffffff);
	cqe.imm_inval_pkey = htobe32(imm);
	cqe.byte_cnt = htobe32(byte_cnt);
	cqe.sop_drop_qpn = htobe32(((uint32_t)send_opcode << 24) | (qpn & 0xffffff));
	cqe.wqe_counter = htobe16(wqe_counter);
	cqe.op_own = (uint8_t)((opcode << 4) | ((se & 1) << 1));
	mlx5dv_set_cqe_owner(&cqe, owner);
	if (opcode == MLX5_CQE_REQ_ERR || opcode == MLX5_CQE_RESP_ERR) {
		struct mlx5_err_cqe *err = (struct mlx5_err_cqe *)&cqe;
		err->syndrome = syndrome;
		err->vendor_err_synd = vendor_syndrome;
	}
	memcpy(out, &cqe, sizeof(cqe));
}

/* The getters, over raw CQE bytes. */
uint8_t oracle_cqe_owner(uint8_t cqe[64]) { return mlx5dv_get_cqe_owner((struct mlx5_cqe64 *)cqe); }
uint8_t oracle_cqe_opcode(uint8_t cqe[64]) { return mlx5dv_get_cqe_opcode((struct mlx5_cqe64 *)cqe); }
uint8_t oracle_cqe_se(uint8_t cqe[64]) { return mlx5dv_get_cqe_se((struct mlx5_cqe64 *)cqe); }
uint8_t oracle_cqe_format(uint8_t cqe[64]) { return mlx5dv_get_cqe_format((struct mlx5_cqe64 *)cqe); }

/* Layout facts of the header, by name. */
void oracle_datagram_seg(uint8_t out[48], uint32_t qkey, uint32_t dqpn, uint8_t ext, uint8_t stat_rate_sl,
                         uint8_t fl_mlid, uint16_t rlid, uint8_t rmac[6], uint8_t tclass, uint8_t hop_limit,
                         uint32_t grh_gid_fl, uint8_t rgid[16])
{
	/* The helper leaves reserved0 alone: start from zero, as rdma-core's
	 * provider copies a zeroed vector from the AH. It writes the whole
	 * 64-bit key: a UD Q_Key is its high half, where the provider writes
	 * key.qkey.qkey (qp.c, set_datagram_seg). */
	memset(out, 0, 48);
	mlx5dv_set_dgram_seg((struct mlx5_wqe_datagram_seg *)out, (uint64_t)qkey << 32, dqpn, ext, stat_rate_sl, fl_mlid,
	                     rlid, rmac, tclass, hop_limit, grh_gid_fl, rgid);
}

long oracle_layout(const char *name)
{
#define L(n, v) if (!strcmp(name, n)) return (long)(v)
	L("ctrl.size", sizeof(struct mlx5_wqe_ctrl_seg));
	L("ctrl.opmod_idx_opcode", offsetof(struct mlx5_wqe_ctrl_seg, opmod_idx_opcode));
	L("ctrl.qpn_ds", offsetof(struct mlx5_wqe_ctrl_seg, qpn_ds));
	L("ctrl.signature", offsetof(struct mlx5_wqe_ctrl_seg, signature));
	L("ctrl.dci_stream_channel_id", offsetof(struct mlx5_wqe_ctrl_seg, dci_stream_channel_id));
	L("ctrl.fm_ce_se", offsetof(struct mlx5_wqe_ctrl_seg, fm_ce_se));
	L("ctrl.imm", offsetof(struct mlx5_wqe_ctrl_seg, imm));
	L("raddr.size", sizeof(struct mlx5_wqe_raddr_seg));
	L("raddr.raddr", offsetof(struct mlx5_wqe_raddr_seg, raddr));
	L("raddr.rkey", offsetof(struct mlx5_wqe_raddr_seg, rkey));
	L("raddr.reserved", offsetof(struct mlx5_wqe_raddr_seg, reserved));
	L("data.size", sizeof(struct mlx5_wqe_data_seg));
	L("data.byte_count", offsetof(struct mlx5_wqe_data_seg, byte_count));
	L("data.lkey", offsetof(struct mlx5_wqe_data_seg, lkey));
	L("data.addr", offsetof(struct mlx5_wqe_data_seg, addr));
	L("atomic.size", sizeof(struct mlx5_wqe_atomic_seg));
	L("atomic.swap_add", offsetof(struct mlx5_wqe_atomic_seg, swap_add));
	L("atomic.compare", offsetof(struct mlx5_wqe_atomic_seg, compare));
	L("inl.size", sizeof(struct mlx5_wqe_inl_data_seg));
	L("av.size", sizeof(struct mlx5_wqe_datagram_seg));
	L("av.qkey", offsetof(struct mlx5_wqe_av, key.qkey.qkey));
	L("av.key_reserved", offsetof(struct mlx5_wqe_av, key.qkey.reserved));
	L("av.dqp_dct", offsetof(struct mlx5_wqe_av, dqp_dct));
	L("av.stat_rate_sl", offsetof(struct mlx5_wqe_av, stat_rate_sl));
	L("av.fl_mlid", offsetof(struct mlx5_wqe_av, fl_mlid));
	L("av.rlid", offsetof(struct mlx5_wqe_av, rlid));
	L("av.reserved0", offsetof(struct mlx5_wqe_av, reserved0));
	L("av.rmac", offsetof(struct mlx5_wqe_av, rmac));
	L("av.tclass", offsetof(struct mlx5_wqe_av, tclass));
	L("av.hop_limit", offsetof(struct mlx5_wqe_av, hop_limit));
	L("av.grh_gid_fl", offsetof(struct mlx5_wqe_av, grh_gid_fl));
	L("av.rgid", offsetof(struct mlx5_wqe_av, rgid));
	L("srq_next.size", sizeof(struct mlx5_wqe_srq_next_seg));
	L("srq_next.next_wqe_index", offsetof(struct mlx5_wqe_srq_next_seg, next_wqe_index));
	L("srq_next.signature", offsetof(struct mlx5_wqe_srq_next_seg, signature));
	L("cqe.size", sizeof(struct mlx5_cqe64));
	L("cqe.flags_rqpn", offsetof(struct mlx5_cqe64, flags_rqpn));
	L("cqe.srqn_uidx", offsetof(struct mlx5_cqe64, srqn_uidx));
	L("cqe.imm_inval_pkey", offsetof(struct mlx5_cqe64, imm_inval_pkey));
	L("cqe.byte_cnt", offsetof(struct mlx5_cqe64, byte_cnt));
	L("cqe.sop_drop_qpn", offsetof(struct mlx5_cqe64, sop_drop_qpn));
	L("cqe.wqe_counter", offsetof(struct mlx5_cqe64, wqe_counter));
	L("cqe.signature", offsetof(struct mlx5_cqe64, signature));
	L("cqe.op_own", offsetof(struct mlx5_cqe64, op_own));
	L("err.vendor_err_synd", offsetof(struct mlx5_err_cqe, vendor_err_synd));
	L("err.syndrome", offsetof(struct mlx5_err_cqe, syndrome));
	L("err.s_wqe_opcode_qpn", offsetof(struct mlx5_err_cqe, s_wqe_opcode_qpn));
	L("err.wqe_counter", offsetof(struct mlx5_err_cqe, wqe_counter));
	L("dv_qp.size", sizeof(struct mlx5dv_qp));
	L("dv_qp.dbrec", offsetof(struct mlx5dv_qp, dbrec));
	L("dv_qp.sq.buf", offsetof(struct mlx5dv_qp, sq.buf));
	L("dv_qp.sq.wqe_cnt", offsetof(struct mlx5dv_qp, sq.wqe_cnt));
	L("dv_qp.sq.stride", offsetof(struct mlx5dv_qp, sq.stride));
	L("dv_qp.rq.buf", offsetof(struct mlx5dv_qp, rq.buf));
	L("dv_qp.rq.wqe_cnt", offsetof(struct mlx5dv_qp, rq.wqe_cnt));
	L("dv_qp.rq.stride", offsetof(struct mlx5dv_qp, rq.stride));
	L("dv_qp.bf.reg", offsetof(struct mlx5dv_qp, bf.reg));
	L("dv_qp.bf.size", offsetof(struct mlx5dv_qp, bf.size));
	L("dv_qp.comp_mask", offsetof(struct mlx5dv_qp, comp_mask));
	L("dv_qp.uar_mmap_offset", offsetof(struct mlx5dv_qp, uar_mmap_offset));
	L("dv_qp.sqn", offsetof(struct mlx5dv_qp, sqn));
	L("dv_qp.tir_icm_addr", offsetof(struct mlx5dv_qp, tir_icm_addr));
	L("dv_cq.size", sizeof(struct mlx5dv_cq));
	L("dv_cq.buf", offsetof(struct mlx5dv_cq, buf));
	L("dv_cq.dbrec", offsetof(struct mlx5dv_cq, dbrec));
	L("dv_cq.cqe_cnt", offsetof(struct mlx5dv_cq, cqe_cnt));
	L("dv_cq.cqe_size", offsetof(struct mlx5dv_cq, cqe_size));
	L("dv_cq.cq_uar", offsetof(struct mlx5dv_cq, cq_uar));
	L("dv_cq.cqn", offsetof(struct mlx5dv_cq, cqn));
	L("dv_cq.comp_mask", offsetof(struct mlx5dv_cq, comp_mask));
	L("dv_srq.size", sizeof(struct mlx5dv_srq));
	L("dv_srq.buf", offsetof(struct mlx5dv_srq, buf));
	L("dv_srq.dbrec", offsetof(struct mlx5dv_srq, dbrec));
	L("dv_srq.stride", offsetof(struct mlx5dv_srq, stride));
	L("dv_srq.head", offsetof(struct mlx5dv_srq, head));
	L("dv_srq.tail", offsetof(struct mlx5dv_srq, tail));
	L("dv_srq.comp_mask", offsetof(struct mlx5dv_srq, comp_mask));
	L("dv_srq.srqn", offsetof(struct mlx5dv_srq, srqn));
	L("MLX5_SEND_WQE_BB", MLX5_SEND_WQE_BB);
	L("MLX5_INLINE_SEG", MLX5_INLINE_SEG);
	L("MLX5_EXTENDED_UD_AV", MLX5_EXTENDED_UD_AV);
	L("MLX5_INVALID_LKEY", MLX5_INVALID_LKEY);
	L("MLX5_CQ_DOORBELL", MLX5_CQ_DOORBELL);
	L("MLX5_CQ_DB_REQ_NOT_SOL", MLX5_CQ_DB_REQ_NOT_SOL);
	L("MLX5_RCV_DBR", MLX5_RCV_DBR);
	L("MLX5_SND_DBR", MLX5_SND_DBR);
	L("MLX5_WQE_CTRL_CQ_UPDATE", MLX5_WQE_CTRL_CQ_UPDATE);
	L("MLX5_WQE_CTRL_SOLICITED", MLX5_WQE_CTRL_SOLICITED);
	L("MLX5_WQE_CTRL_FENCE", MLX5_WQE_CTRL_FENCE);
	L("MLX5_OPCODE_RDMA_WRITE", MLX5_OPCODE_RDMA_WRITE);
	L("MLX5_OPCODE_RDMA_WRITE_IMM", MLX5_OPCODE_RDMA_WRITE_IMM);
	L("MLX5_OPCODE_SEND", MLX5_OPCODE_SEND);
	L("MLX5_OPCODE_SEND_IMM", MLX5_OPCODE_SEND_IMM);
	L("MLX5_OPCODE_RDMA_READ", MLX5_OPCODE_RDMA_READ);
	L("MLX5_OPCODE_ATOMIC_CS", MLX5_OPCODE_ATOMIC_CS);
	L("MLX5_OPCODE_ATOMIC_FA", MLX5_OPCODE_ATOMIC_FA);
	L("MLX5_OPCODE_UMR", MLX5_OPCODE_UMR);
	L("MLX5_OPCODE_SEND_INVAL", MLX5_OPCODE_SEND_INVAL);
	L("MLX5_CQE_RESP_SEND_INV", MLX5_CQE_RESP_SEND_INV);
	L("MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE", MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
#undef L
	return -1;
}
