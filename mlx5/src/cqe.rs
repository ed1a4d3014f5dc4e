//! The 64-byte CQE (PRM "Completion Queue Entry Format"; `struct
//! mlx5_cqe64` and `struct mlx5_err_cqe` in `mlx5dv.h`), and what its
//! opcodes and syndromes mean in DAT terms.

use crate::wqe::opcode;
use udat_core::types::DtoStatus;

/// Field offsets of a 64-byte CQE.
pub mod field {
    use core::ops::Range;
    /// be32: the SRQ number (23–0) of a receive from an SRQ.
    pub const SRQN: Range<usize> = 32..36;
    /// A UD receive: the GRH flags (bits 29–28), the sender's service
    /// level (27–24) and QP number (23–0) (`flags_rqpn`).
    pub const FLAGS_RQPN: Range<usize> = 24..28;
    /// be32: the immediate of a receive with immediate.
    pub const IMM: Range<usize> = 36..40;
    /// be32: bytes received (responder) or read (requester).
    pub const BYTE_CNT: Range<usize> = 44..48;
    /// Error CQEs: the vendor syndrome.
    pub const VENDOR_SYNDROME: usize = 54;
    /// Error CQEs: the syndrome.
    pub const SYNDROME: usize = 55;
    /// be32: the send opcode (31–24) of a requester CQE, the QP number (23–0).
    pub const SOP_DROP_QPN: Range<usize> = 56..60;
    /// be16: the index of the WQE (its first WQEBB) the CQE completes.
    pub const WQE_COUNTER: Range<usize> = 60..62;
    /// The signature byte, which the data path does not check.
    pub const SIGNATURE: usize = 62;
    /// Opcode (7–4), format (3–2), solicited (1), owner (0).
    pub const OP_OWN: usize = 63;
}

/// Bytes of the CQE the data path reads.
pub const CQE_BYTES: usize = 64;

macro_rules! enum_with_unknown {
    ($(#[$m:meta])* pub enum $name:ident { $($(#[$vm:meta])* $variant:ident = $value:expr,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vm])* $variant,)*
            /// A value this crate does not know.
            Unknown(u8),
        }

        impl From<u8> for $name {
            #[inline(always)]
            fn from(value: u8) -> $name {
                match value {
                    $($value => $name::$variant,)*
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for u8 {
            fn from(value: $name) -> u8 {
                match value {
                    $($name::$variant => $value,)*
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}

enum_with_unknown! {
    /// CQE opcodes (`MLX5_CQE_*`).
    pub enum CqeOpcode {
        /// A send-queue WQE completed.
        #[doc(alias = "MLX5_CQE_REQ")]
        Req = 0,
        /// A receive consumed by an RDMA write with immediate.
        #[doc(alias = "MLX5_CQE_RESP_WR_IMM")]
        RespWriteImm = 1,
        /// A receive of a send.
        #[doc(alias = "MLX5_CQE_RESP_SEND")]
        RespSend = 2,
        /// A receive of a send with immediate.
        #[doc(alias = "MLX5_CQE_RESP_SEND_IMM")]
        RespSendImm = 3,
        /// A receive of a send with invalidate.
        #[doc(alias = "MLX5_CQE_RESP_SEND_INV")]
        RespSendInv = 4,
        /// A send-queue WQE failed; the syndrome says why.
        #[doc(alias = "MLX5_CQE_REQ_ERR")]
        ReqErr = 13,
        /// A receive failed; the syndrome says why.
        #[doc(alias = "MLX5_CQE_RESP_ERR")]
        RespErr = 14,
        /// Never written by the device: the initial opcode of every CQE.
        #[doc(alias = "MLX5_CQE_INVALID")]
        Invalid = 15,
    }
}

enum_with_unknown! {
    /// Error CQE syndromes (`MLX5_CQE_SYNDROME_*`).
    pub enum Syndrome {
        /// A message longer than the receive, or than the port allows.
        #[doc(alias = "MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR")]
        LocalLength = 0x01,
        /// The local QP found the WQE inconsistent.
        #[doc(alias = "MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR")]
        LocalQpOp = 0x02,
        /// A local segment's key or privileges forbid the access.
        #[doc(alias = "MLX5_CQE_SYNDROME_LOCAL_PROT_ERR")]
        LocalProtection = 0x04,
        /// Flushed: the QP went to the error state before the WQE ran.
        #[doc(alias = "MLX5_CQE_SYNDROME_WR_FLUSH_ERR")]
        WrFlush = 0x05,
        /// A memory-window bind failed.
        #[doc(alias = "MLX5_CQE_SYNDROME_MW_BIND_ERR")]
        MwBind = 0x06,
        /// The responder's answer was not what the request expects.
        #[doc(alias = "MLX5_CQE_SYNDROME_BAD_RESP_ERR")]
        BadResponse = 0x10,
        /// A local access violation while serving an incoming request.
        #[doc(alias = "MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR")]
        LocalAccess = 0x11,
        /// The responder found the request invalid.
        #[doc(alias = "MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR")]
        RemoteInvalidRequest = 0x12,
        /// The responder refused access: a bad key, range or privilege.
        #[doc(alias = "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR")]
        RemoteAccess = 0x13,
        /// The responder could not carry the operation out.
        #[doc(alias = "MLX5_CQE_SYNDROME_REMOTE_OP_ERR")]
        RemoteOp = 0x14,
        /// The transport retries ran out: the peer did not answer.
        #[doc(alias = "MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR")]
        TransportRetryExceeded = 0x15,
        /// The receiver-not-ready retries ran out: the peer had no receive posted.
        #[doc(alias = "MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR")]
        RnrRetryExceeded = 0x16,
        /// The responder aborted the operation.
        #[doc(alias = "MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR")]
        RemoteAborted = 0x22,
    }
}

impl Syndrome {
    /// The DAT status of a WQE that completed with this syndrome: the one
    /// table.
    pub fn dto_status(self) -> DtoStatus {
        match self {
            Syndrome::WrFlush => DtoStatus::Flushed,
            Syndrome::LocalLength => DtoStatus::LocalLength,
            Syndrome::LocalQpOp => DtoStatus::LocalEp,
            Syndrome::LocalProtection | Syndrome::LocalAccess => DtoStatus::LocalProtection,
            Syndrome::MwBind => DtoStatus::RmrOperationFailed,
            Syndrome::BadResponse => DtoStatus::BadResponse,
            Syndrome::RemoteAccess => DtoStatus::RemoteAccess,
            Syndrome::RemoteInvalidRequest | Syndrome::RemoteOp | Syndrome::RemoteAborted => DtoStatus::RemoteResponder,
            Syndrome::RnrRetryExceeded => DtoStatus::ReceiverNotReady,
            // Retry exhaustion and anything the device may add later: the
            // transport failed.
            Syndrome::TransportRetryExceeded | Syndrome::Unknown(_) => DtoStatus::Transport,
        }
    }
}

/// A CQE as the data path reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    /// What the CQE reports.
    pub opcode: CqeOpcode,
    /// The QP the CQE belongs to.
    pub qpn: u32,
    /// The index of the WQE (its first WQEBB) the CQE completes.
    pub wqe_counter: u16,
    /// Bytes received (responder) or read (requester).
    pub byte_cnt: u32,
    /// The immediate, in host order.
    pub imm: u32,
    /// For an SRQ receive, the SRQ.
    pub srqn: u32,
    /// Error CQEs only.
    pub syndrome: Syndrome,
    /// Error CQEs only: the vendor's own syndrome.
    pub vendor_syndrome: u8,
    /// Requester CQEs: the opcode of the WQE.
    pub send_opcode: u8,
    /// Whether the sender asked for a solicited event.
    pub solicited: bool,
}

/// Where the words [`Cqe::from_words`] reads start: every field the data
/// path reads lies in the CQE's last 32 bytes.
pub const TAIL: usize = 32;

/// Where the CQE's last word starts: the QP number, the WQE counter and
/// the opcode and owner, all a successful requester CQE needs.
pub const LAST_WORD: usize = 56;

/// Whether a CQE whose last word is `last` needs the words before it: all
/// but a successful requester CQE of a send or an RDMA write do (as in
/// rdma-core's `mlx5_parse_cqe`, whose requester case reads the byte
/// count only for RDMA reads and atomics).
#[inline(always)]
pub fn needs_middle(last: u64) -> bool {
    let bytes = last.to_ne_bytes();
    let send_opcode = bytes[field::SOP_DROP_QPN.start - LAST_WORD];
    bytes[field::OP_OWN - LAST_WORD] >> 4 != u8::from(CqeOpcode::Req)
        || matches!(send_opcode, opcode::RDMA_READ | opcode::ATOMIC_CS | opcode::ATOMIC_FA)
}

/// A QP number as a CQE carries it: the `sop_drop_qpn` word, read in
/// memory order, with the `sop_drop` byte cleared. Two compare equal
/// exactly when their QP numbers do, so a CQ that keeps the last QP's
/// word knows a run of that QP's CQEs without swapping bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpnWord(u32);

impl QpnWord {
    /// The word a CQE of QP `qpn` (24 bits) carries; one of a wider
    /// number is no CQE's.
    #[inline(always)]
    pub const fn of(qpn: u32) -> Self {
        QpnWord(qpn.to_be())
    }

    /// The QP number.
    #[inline(always)]
    pub const fn qpn(self) -> u32 {
        u32::from_be(self.0)
    }
}

/// A CQE's last word ([`LAST_WORD`]), its bytes in memory order: the QP
/// number, the WQE counter and the opcode, which is all a dequeue needs
/// to decide whether a CQE is one it settles alone, and all a successful
/// requester CQE reports (the completion takes the rest from the send
/// slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head(pub u64);

impl Head {
    #[inline(always)]
    fn byte(self, at: usize) -> u8 {
        self.0.to_ne_bytes()[at - LAST_WORD]
    }

    #[inline(always)]
    fn opcode(self) -> u8 {
        self.byte(field::OP_OWN) >> 4
    }

    /// Whether the CQE is no request's: a request's, done or failed
    /// (`REQ`, `REQ_ERR`), goes to its QP's send CQ, a receive's (a
    /// responder opcode) to its receive CQ.
    #[inline(always)]
    pub fn is_receive(self) -> bool {
        let op = self.opcode();
        op != u8::from(CqeOpcode::Req) && op != u8::from(CqeOpcode::ReqErr)
    }

    /// The QP the CQE belongs to, as the device wrote its number.
    #[inline(always)]
    pub fn qpn_word(self) -> QpnWord {
        let at = field::SOP_DROP_QPN.start;
        QpnWord(u32::from_ne_bytes([0, self.byte(at + 1), self.byte(at + 2), self.byte(at + 3)]))
    }

    /// The index of the WQE (its first WQEBB) the CQE completes.
    #[inline(always)]
    pub fn wqe_counter(self) -> u16 {
        u16::from_be_bytes([self.byte(field::WQE_COUNTER.start), self.byte(field::WQE_COUNTER.start + 1)])
    }

    /// What a CQE without error reports done: a send-queue WQE
    /// (`MLX5_CQE_REQ`), or a receive filled (one of the responder
    /// opcodes, `RESP_WR_IMM` to `RESP_SEND_INV`); `None` for an error, a
    /// resize or an opcode the device never writes.
    #[inline(always)]
    pub fn done(self) -> Option<Done> {
        match self.opcode() {
            op if op == u8::from(CqeOpcode::Req) => Some(Done::Request),
            op if (u8::from(CqeOpcode::RespWriteImm)..=u8::from(CqeOpcode::RespSendInv)).contains(&op) => {
                Some(Done::Receive)
            }
            _ => None,
        }
    }
}

/// What a successful CQE completes ([`Head::done`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// A send-queue WQE.
    Request,
    /// A receive.
    Receive,
}

impl Cqe {
    /// The CQE whose bytes 32–55 are `middle` and 56–63 `last`, each word
    /// holding its bytes in memory order. Where [`needs_middle`] says no,
    /// pass zeros for `middle`: the byte count, immediate, SRQ number and
    /// syndromes then read as zero.
    #[inline(always)]
    pub fn from_words(middle: [u64; 3], last: u64) -> Cqe {
        let [a, b, c] = middle.map(u64::to_ne_bytes);
        let d = last.to_ne_bytes();
        let tail: [u8; 32] = core::array::from_fn(|i| [a, b, c, d][i / 8][i % 8]);
        let be32 = |at: usize| {
            u32::from_be_bytes([tail[at - TAIL], tail[at - TAIL + 1], tail[at - TAIL + 2], tail[at - TAIL + 3]])
        };
        let op_own = tail[field::OP_OWN - TAIL];
        let sop_drop_qpn = be32(field::SOP_DROP_QPN.start);
        let counter = field::WQE_COUNTER.start - TAIL;
        Cqe {
            opcode: CqeOpcode::from(op_own >> 4),
            qpn: sop_drop_qpn & 0x00ff_ffff,
            wqe_counter: u16::from_be_bytes([tail[counter], tail[counter + 1]]),
            byte_cnt: be32(field::BYTE_CNT.start),
            imm: be32(field::IMM.start),
            srqn: be32(field::SRQN.start) & 0x00ff_ffff,
            syndrome: Syndrome::from(tail[field::SYNDROME - TAIL]),
            vendor_syndrome: tail[field::VENDOR_SYNDROME - TAIL],
            send_opcode: (sop_drop_qpn >> 24) as u8,
            solicited: op_own & 0x2 != 0,
        }
    }

    /// Whether the CQE reports an error.
    pub fn is_error(&self) -> bool {
        matches!(self.opcode, CqeOpcode::ReqErr | CqeOpcode::RespErr)
    }

    /// Whether the CQE completes a send-queue WQE.
    pub fn is_requester(&self) -> bool {
        matches!(self.opcode, CqeOpcode::Req | CqeOpcode::ReqErr)
    }

    /// The DAT status.
    pub fn status(&self) -> DtoStatus {
        if self.is_error() {
            self.syndrome.dto_status()
        } else {
            DtoStatus::Success
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The head whose opcode is `op`, the rest zero.
    fn head_of(op: u8) -> Head {
        let mut bytes = [0u8; 8];
        bytes[field::OP_OWN - LAST_WORD] = op << 4;
        Head(u64::from_ne_bytes(bytes))
    }

    /// A request's CQE, done or failed, is no receive's; a receive's,
    /// done or failed, is; and a done CQE is a receive's exactly when
    /// `done` says so, as a lane reads it.
    #[test]
    fn a_receive_is_a_responder_opcode_done_or_failed() {
        for op in [CqeOpcode::Req, CqeOpcode::ReqErr] {
            assert!(!head_of(op.into()).is_receive(), "{op:?}");
        }
        assert!(head_of(CqeOpcode::RespErr.into()).is_receive());
        for op in 0..16 {
            if let Some(done) = head_of(op).done() {
                assert_eq!(head_of(op).is_receive(), done == Done::Receive, "opcode {op}");
            }
        }
    }

    /// A head's QP number word is the QP's, whatever the `sop_drop` byte
    /// and the rest of the word hold, and another QP's differs.
    #[test]
    fn a_heads_qp_number_word_names_its_qp_alone() {
        let head = |sop_drop: u8, qpn: u32, rest: [u8; 4]| {
            let mut bytes = [0u8; 8];
            bytes[..4].copy_from_slice(&((u32::from(sop_drop) << 24) | qpn).to_be_bytes());
            bytes[4..].copy_from_slice(&rest);
            Head(u64::from_ne_bytes(bytes))
        };
        for qpn in [0, 1, 0x12_3456, 0xff_ffff] {
            let word = head(0xa5, qpn, [0xff; 4]).qpn_word();
            assert_eq!(word, QpnWord::of(qpn), "QP {qpn:#x}");
            assert_eq!(word, head(0, qpn, [0; 4]).qpn_word());
            assert_eq!(word.qpn(), qpn);
            assert_ne!(word, QpnWord::of(qpn ^ 0x80_0001));
        }
        assert_ne!(head(0xff, 0xff_ffff, [0xff; 4]).qpn_word(), QpnWord::of(u32::MAX), "no CQE's");
    }
}
