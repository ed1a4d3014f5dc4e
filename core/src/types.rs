//! Flags, enumerations and attribute records of the DAT API, with the
//! numeric values of `<dat2/dat.h>` and `<dat2/udat.h>`.

macro_rules! flags {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $flag:ident = $value:expr,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name(pub u32);

        impl $name {
            $($(#[$fdoc])* pub const $flag: $name = $name($value);)*
            /// Every flag this type defines.
            pub const ALL_BITS: u32 = 0 $(| $value)*;

            /// Whether every bit of `other` is set.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether any bit of `other` is set.
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            /// Whether only defined bits are set.
            pub const fn is_valid(self) -> bool {
                self.0 & !Self::ALL_BITS == 0
            }
        }

        impl core::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                $name(self.0 | rhs.0)
            }
        }
    };
}

flags!(
    /// `DAT_MEM_PRIV_FLAGS`.
    MemPriv {
        /// `DAT_MEM_PRIV_NONE_FLAG`
        NONE = 0x00,
        /// `DAT_MEM_PRIV_LOCAL_READ_FLAG`
        LOCAL_READ = 0x01,
        /// `DAT_MEM_PRIV_REMOTE_READ_FLAG`
        REMOTE_READ = 0x02,
        /// `DAT_MEM_PRIV_LOCAL_WRITE_FLAG`
        LOCAL_WRITE = 0x10,
        /// `DAT_MEM_PRIV_REMOTE_WRITE_FLAG`
        REMOTE_WRITE = 0x20,
        /// `DAT_IB_MEM_PRIV_REMOTE_ATOMIC` (`<dat2/dat_ib_extensions.h>`):
        /// the target of a peer's compare-and-swap or fetch-and-add.
        REMOTE_ATOMIC = 0x40,
    }
);

/// What a post's local segments are for: read by the HCA (a send, or an
/// RDMA write's source) or written by it (a receive, an RDMA read's
/// destination, an atomic's result); the one local privilege each needs
/// of its LMR ([`Access::privilege`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The HCA reads the segments: they need local read privilege.
    Read = 0,
    /// The HCA writes the segments: they need local write privilege.
    Write = 1,
}

impl Access {
    /// The privilege the segments need of their LMRs.
    pub const fn privilege(self) -> MemPriv {
        match self {
            Access::Read => MemPriv::LOCAL_READ,
            Access::Write => MemPriv::LOCAL_WRITE,
        }
    }
}

impl MemPriv {
    /// `DAT_MEM_PRIV_ALL_FLAG`.
    pub const ALL: MemPriv = MemPriv(0x33);
    /// Both remote privileges.
    pub const REMOTE: MemPriv = MemPriv(0x22);
}

flags!(
    /// `DAT_COMPLETION_FLAGS`: per-post flags and the EP's completion-stream
    /// configuration.
    CompletionFlags {
        /// `DAT_COMPLETION_DEFAULT_FLAG`
        DEFAULT = 0x00,
        /// `DAT_COMPLETION_SUPPRESS_FLAG`: no event for a successful completion.
        SUPPRESS = 0x01,
        /// `DAT_COMPLETION_SOLICITED_WAIT_FLAG`
        SOLICITED_WAIT = 0x02,
        /// `DAT_COMPLETION_UNSIGNALLED_FLAG`: the event does not notify.
        UNSIGNALLED = 0x04,
        /// `DAT_COMPLETION_BARRIER_FENCE_FLAG`
        BARRIER_FENCE = 0x08,
        /// `DAT_COMPLETION_EVD_THRESHOLD_FLAG` (EP attribute only)
        EVD_THRESHOLD = 0x10,
    }
);

flags!(
    /// `DAT_EVD_FLAGS`: which event streams may feed an EVD.
    EvdFlags {
        /// `DAT_EVD_SOFTWARE_FLAG`
        SOFTWARE = 0x001,
        /// `DAT_EVD_CR_FLAG`
        CR = 0x010,
        /// `DAT_EVD_DTO_FLAG`
        DTO = 0x020,
        /// `DAT_EVD_CONNECTION_FLAG`
        CONNECTION = 0x040,
        /// `DAT_EVD_RMR_BIND_FLAG`
        RMR_BIND = 0x080,
        /// `DAT_EVD_ASYNC_FLAG`
        ASYNC = 0x100,
    }
);

impl EvdFlags {
    /// `DAT_EVD_DEFAULT_FLAG`.
    pub const DEFAULT: EvdFlags = EvdFlags(0x1f0);
}

flags!(
    /// `DAT_QOS`.
    Qos {
        /// `DAT_QOS_BEST_EFFORT`
        BEST_EFFORT = 0x00,
        /// `DAT_QOS_HIGH_THROUGHPUT`
        HIGH_THROUGHPUT = 0x01,
        /// `DAT_QOS_LOW_LATENCY`
        LOW_LATENCY = 0x02,
        /// `DAT_QOS_ECONOMY`
        ECONOMY = 0x04,
        /// `DAT_QOS_PREMIUM`
        PREMIUM = 0x08,
    }
);

flags!(
    /// `DAT_CONNECT_FLAGS`.
    ConnectFlags {
        /// `DAT_CONNECT_DEFAULT_FLAG`
        DEFAULT = 0x00,
        /// `DAT_CONNECT_MULTIPATH_REQUESTED_FLAG`
        MULTIPATH_REQUESTED = 0x01,
        /// `DAT_CONNECT_MULTIPATH_REQUIRED_FLAG`
        MULTIPATH_REQUIRED = 0x02,
    }
);

/// `DAT_CLOSE_FLAGS` for `dat_ia_close` and `dat_ep_disconnect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum CloseFlags {
    /// At once: an IA's objects are freed with it, a connection is torn
    /// down, and work in flight is flushed.
    #[doc(alias = "DAT_CLOSE_ABRUPT_FLAG")]
    Abrupt = 0,
    /// In order: an IA that still has objects is refused
    /// (dat_ia_close(3DAT)); a connection ends after the work in flight
    /// (dat_ep_disconnect(3DAT)).
    #[doc(alias = "DAT_CLOSE_GRACEFUL_FLAG")]
    Graceful = 1,
}

impl CloseFlags {
    /// Decode; `None` for any other value (the pages' `DAT_INVALID_PARAMETER`).
    pub const fn from_raw(raw: u32) -> Option<CloseFlags> {
        match raw {
            0 => Some(CloseFlags::Abrupt),
            1 => Some(CloseFlags::Graceful),
            _ => None,
        }
    }
}

/// `DAT_PSP_FLAGS`: who creates the Endpoint for an arriving request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum PspFlags {
    /// The consumer supplies the Endpoint in dat_cr_accept(3DAT).
    #[doc(alias = "DAT_PSP_CONSUMER_FLAG")]
    Consumer = 0,
    /// The provider creates an Endpoint for each request, reported with the CR.
    #[doc(alias = "DAT_PSP_PROVIDER_FLAG")]
    Provider = 1,
}

impl PspFlags {
    /// Decode; `None` for any other value.
    pub const fn from_raw(raw: u32) -> Option<PspFlags> {
        match raw {
            0 => Some(PspFlags::Consumer),
            1 => Some(PspFlags::Provider),
            _ => None,
        }
    }
}

/// `DAT_EP_STATE`. The nine states of the uDAPL 1.2 Endpoint; the values
/// are those of `<dat2/dat.h>` (which interleaves DAT 2.0's unconfigured
/// states, never entered here).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum EpState {
    /// Created, or reset, and not connected.
    #[doc(alias = "DAT_EP_STATE_UNCONNECTED")]
    Unconnected = 0,
    /// Set aside for an RSP's connection qualifier (dat_rsp_create(3DAT)).
    #[doc(alias = "DAT_EP_STATE_RESERVED")]
    Reserved = 2,
    /// An RSP's reserved EP whose request arrived; awaits accept or reject
    /// (dat_rsp_create(3DAT)).
    #[doc(alias = "DAT_EP_STATE_PASSIVE_CONNECTION_PENDING")]
    PassiveConnectionPending = 4,
    /// Connecting through dat_ep_connect(3DAT).
    #[doc(alias = "DAT_EP_STATE_ACTIVE_CONNECTION_PENDING")]
    ActiveConnectionPending = 6,
    /// Made by the provider for a request a PSP took; awaits accept or reject.
    #[doc(alias = "DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING")]
    TentativeConnectionPending = 7,
    /// Connected; data transfers flow.
    #[doc(alias = "DAT_EP_STATE_CONNECTED")]
    Connected = 9,
    /// A graceful dat_ep_disconnect(3DAT) is under way.
    #[doc(alias = "DAT_EP_STATE_DISCONNECT_PENDING")]
    DisconnectPending = 10,
    /// The connection is over; dat_ep_reset(3DAT) makes it usable again.
    #[doc(alias = "DAT_EP_STATE_DISCONNECTED")]
    Disconnected = 11,
    /// Accepted (dat_cr_accept(3DAT)); the connection is not yet up.
    #[doc(alias = "DAT_EP_STATE_COMPLETION_PENDING")]
    CompletionPending = 12,
}

/// `DAT_DTOS`: the operation a completion reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DtoOp {
    /// A send (dat_ep_post_send(3DAT)).
    #[doc(alias = "DAT_DTO_SEND")]
    Send = 0,
    /// An RDMA write (dat_ep_post_rdma_write(3DAT)).
    #[doc(alias = "DAT_DTO_RDMA_WRITE")]
    RdmaWrite = 1,
    /// An RDMA read (dat_ep_post_rdma_read(3DAT)).
    #[doc(alias = "DAT_DTO_RDMA_READ")]
    RdmaRead = 2,
    /// A receive (dat_ep_post_recv(3DAT), dat_srq_post_recv(3DAT)).
    #[doc(alias = "DAT_DTO_RECEIVE")]
    Receive = 3,
    /// A receive whose send invalidated an RMR.
    #[doc(alias = "DAT_DTO_RECEIVE_WITH_INVALIDATE")]
    ReceiveWithInvalidate = 4,
    /// An RMR bind (dat_rmr_bind(3DAT)).
    #[doc(alias = "DAT_DTO_BIND_MW")]
    BindMw = 5,
    // The IB extension's operations (`DAT_IB_DTOS`, from
    // `DAT_DTO_EXTENSION_BASE`).
    /// An RDMA write with immediate data.
    #[doc(alias = "DAT_IB_DTO_RDMA_WRITE_IMMED")]
    RdmaWriteImm = 8,
    /// A receive consumed by the peer's RDMA write with immediate data.
    #[doc(alias = "DAT_IB_DTO_RECV_IMMED")]
    ReceiveImm = 9,
    /// An 8-byte fetch-and-add at the peer.
    #[doc(alias = "DAT_IB_DTO_FETCH_ADD")]
    FetchAdd = 10,
    /// An 8-byte compare-and-swap at the peer.
    #[doc(alias = "DAT_IB_DTO_CMP_SWAP")]
    CompareSwap = 11,
    /// A receive of a send with immediate data.
    #[doc(alias = "DAT_IB_DTO_RECV_MSG_IMMED")]
    ReceiveMsgImm = 12,
    /// A UD send (`dat_ib_post_send_ud`).
    #[doc(alias = "DAT_IB_DTO_SEND_UD")]
    SendUd = 13,
    /// A receive of a UD EP: the datagram after the 40 bytes of its GRH;
    /// the completion names the sender's QP.
    #[doc(alias = "DAT_IB_DTO_RECV_UD")]
    ReceiveUd = 14,
}

impl DtoOp {
    /// Whether the operation completes on the receive stream.
    pub const fn is_recv(self) -> bool {
        matches!(
            self,
            DtoOp::Receive | DtoOp::ReceiveWithInvalidate | DtoOp::ReceiveImm | DtoOp::ReceiveMsgImm | DtoOp::ReceiveUd
        )
    }

    /// Whether the operation is one of the IB extension's, reported as a
    /// `DAT_IB_DTO_EVENT`.
    pub const fn is_extension(self) -> bool {
        matches!(
            self,
            DtoOp::RdmaWriteImm
                | DtoOp::ReceiveImm
                | DtoOp::FetchAdd
                | DtoOp::CompareSwap
                | DtoOp::ReceiveMsgImm
                | DtoOp::SendUd
                | DtoOp::ReceiveUd
        )
    }
}

/// `DAT_DTO_COMPLETION_STATUS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DtoStatus {
    /// The transfer completed.
    #[doc(alias = "DAT_DTO_SUCCESS")]
    Success = 0,
    /// The EP was disconnected before the transfer ran.
    #[doc(alias = "DAT_DTO_ERR_FLUSHED")]
    Flushed = 1,
    /// A local segment was too short, or the message too long.
    #[doc(alias = "DAT_DTO_ERR_LOCAL_LENGTH")]
    LocalLength = 2,
    /// The local EP failed the transfer.
    #[doc(alias = "DAT_DTO_ERR_LOCAL_EP")]
    LocalEp = 3,
    /// A local segment is outside its LMR, or lacks the privilege.
    #[doc(alias = "DAT_DTO_ERR_LOCAL_PROTECTION")]
    LocalProtection = 4,
    /// The peer answered with something unexpected.
    #[doc(alias = "DAT_DTO_ERR_BAD_RESPONSE")]
    BadResponse = 5,
    /// The peer refused access to its memory (RMR context, range or privileges).
    #[doc(alias = "DAT_DTO_ERR_REMOTE_ACCESS")]
    RemoteAccess = 6,
    /// The peer failed the operation.
    #[doc(alias = "DAT_DTO_ERR_REMOTE_RESPONDER")]
    RemoteResponder = 7,
    /// The transport failed, for example by running out of retries.
    #[doc(alias = "DAT_DTO_ERR_TRANSPORT")]
    Transport = 8,
    /// The peer had no receive posted, and retries ran out.
    #[doc(alias = "DAT_DTO_ERR_RECEIVER_NOT_READY")]
    ReceiverNotReady = 9,
    /// Only part of a packet arrived.
    #[doc(alias = "DAT_DTO_ERR_PARTIAL_PACKET")]
    PartialPacket = 10,
    /// An RMR bind failed.
    #[doc(alias = "DAT_RMR_OPERATION_FAILED")]
    RmrOperationFailed = 11,
}

/// `DAT_MEM_TYPE` of `dat_lmr_create`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemType {
    /// `DAT_MEM_TYPE_VIRTUAL`: a contiguous range of the consumer's memory.
    Virtual {
        /// The first byte.
        address: u64,
        /// Bytes in the range.
        length: u64,
    },
    /// `DAT_MEM_TYPE_LMR`: the memory of an existing LMR.
    Lmr(crate::handle::LmrHandle),
    /// `DAT_MEM_TYPE_SHARED_VIRTUAL`: a shared range named by a 40-byte cookie.
    SharedVirtual {
        /// Names the shared memory; every LMR of one cookie shares it.
        cookie: [u8; 40],
        /// The first byte.
        address: u64,
        /// Bytes in the range.
        length: u64,
    },
}

/// `DAT_LMR_TRIPLET`: a local buffer segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct LmrTriplet {
    /// The first byte, inside the LMR.
    pub virtual_address: u64,
    /// Bytes in the segment.
    pub segment_length: u32,
    /// The context of the LMR that covers the segment (dat_lmr_create(3DAT)).
    pub lmr_context: u32,
}

/// `DAT_RMR_TRIPLET`: a remote buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct RmrTriplet {
    /// The first byte, in the peer's address space.
    pub virtual_address: u64,
    /// Bytes in the buffer.
    pub segment_length: u32,
    /// The context the peer's RMR bind or LMR registration gave.
    pub rmr_context: u32,
}

/// A transport address (`struct sockaddr` storage, opaque to the core).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IaAddress {
    /// The `sockaddr` bytes, room for a `sockaddr_in6`.
    pub bytes: [u8; 28],
}

/// `DAT_EP_ATTR`: the attributes an Endpoint is created or modified with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EpAttr {
    /// Most bytes in one send or receive.
    pub max_message_size: u32,
    /// Most bytes in one RDMA read or write.
    pub max_rdma_size: u32,
    /// The quality of service asked of the transport.
    pub qos: Qos,
    /// The completion flags the receive stream allows.
    pub recv_completion_flags: CompletionFlags,
    /// The completion flags the request stream allows.
    pub request_completion_flags: CompletionFlags,
    /// Most receives outstanding.
    pub max_recv_dtos: u32,
    /// Most requests (sends, RDMA, binds) outstanding.
    pub max_request_dtos: u32,
    /// Most segments in one receive.
    pub max_recv_iov: u32,
    /// Most segments in one request.
    pub max_request_iov: u32,
    /// Most RDMA reads the peer may have in flight against this EP.
    pub max_rdma_read_in: u32,
    /// Most RDMA reads this EP may have in flight.
    pub max_rdma_read_out: u32,
}

/// `DAT_SRQ_ATTR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SrqAttr {
    /// Most receives posted at once.
    pub max_recv_dtos: u32,
    /// Most segments in one receive.
    pub max_recv_iov: u32,
    /// The low watermark of posted receives (dat_srq_set_lw(3DAT)).
    pub low_watermark: u32,
}

/// `DAT_IA_ATTR` and the parts of `DAT_PROVIDER_ATTR` the rules depend on.
/// The backend reports the device's limits; the core lowers the object
/// counts to its own capacities.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IaAttr {
    /// The device's name, NUL-padded.
    pub adapter_name: [u8; 32],
    /// The vendor's name, NUL-padded.
    pub vendor_name: [u8; 32],
    /// Major hardware version.
    pub hardware_version_major: u32,
    /// Minor hardware version.
    pub hardware_version_minor: u32,
    /// Major firmware version.
    pub firmware_version_major: u32,
    /// Minor firmware version.
    pub firmware_version_minor: u32,
    /// The IA's own address, the one peers connect to.
    pub ia_address: IaAddress,
    /// Most EPs.
    pub max_eps: u32,
    /// Most work requests outstanding on one EP queue.
    pub max_dto_per_ep: u32,
    /// Most RDMA reads a peer may have in flight against one EP.
    pub max_rdma_read_per_ep_in: u32,
    /// Most RDMA reads one EP may have in flight.
    pub max_rdma_read_per_ep_out: u32,
    /// Most EVDs.
    pub max_evds: u32,
    /// Most events one EVD holds.
    pub max_evd_qlen: u32,
    /// Most segments in one work request.
    pub max_iov_segments_per_dto: u32,
    /// Most LMRs.
    pub max_lmrs: u32,
    /// Most bytes one LMR registers.
    pub max_lmr_block_size: u64,
    /// Highest address an LMR may cover.
    pub max_lmr_virtual_address: u64,
    /// Most PZs.
    pub max_pzs: u32,
    /// Most bytes in one send or receive.
    pub max_message_size: u32,
    /// Most bytes in one RDMA read or write.
    pub max_rdma_size: u32,
    /// Most RMRs.
    pub max_rmrs: u32,
    /// Most SRQs.
    pub max_srqs: u32,
    /// Most receives one SRQ holds.
    pub max_recv_per_srq: u32,
    /// Provider attribute `max_private_data_size` (at least 64).
    pub max_private_data_size: u32,
    /// Provider attribute `dat_qos_supported`.
    pub qos_supported: Qos,
    /// Whether the transport has memory windows (RMRs).
    pub rmr_supported: bool,
    /// Whether an SRQ and its EPs may use different PZs
    /// (`srq_ep_pz_difference_supported`).
    pub srq_ep_pz_difference_supported: bool,
    /// Whether the transport lets the local HCA read every registered
    /// region, whatever its privileges. InfiniBand and RoCE do
    /// (ibv_reg_mr(3): "Local read access is always enabled for the MR"),
    /// so there an LMR always has `DAT_MEM_PRIV_LOCAL_READ_FLAG`, and a
    /// send from a region registered only for local write is legal, as
    /// the OpenFabrics test programs expect.
    pub local_read_implied: bool,
    /// Whether the transport performs the IB extension's atomics
    /// (compare-and-swap, fetch-and-add on 8 aligned bytes).
    pub atomics: bool,
    /// Whether the transport has the IB extension's UD EPs
    /// (`DAT_IB_SERVICE_TYPE_UD`, `dat_ib_post_send_ud`).
    pub ud: bool,
}
