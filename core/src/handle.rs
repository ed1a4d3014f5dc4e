//! Handles: a slot index plus a generation, typed per object kind.
//!
//! A handle never aliases: freeing an object bumps its slot's generation, so
//! a handle kept past `dat_*_free` is refused with `DAT_INVALID_HANDLE` even
//! after the slot holds a new object (dat_srq_free(3DAT): "If the Provider
//! detects the use of a deleted object handle, it should return
//! DAT_INVALID_HANDLE. The Provider should avoid assigning the used handle
//! as long as possible"; slots are reused oldest-first for that reason).

/// The kind of object a handle names. Values are `DAT_HANDLE_TYPE` of
/// `<dat2/udat.h>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Kind {
    /// A connection request.
    #[doc(alias = "DAT_HANDLE_TYPE_CR")]
    Cr = 0,
    /// An endpoint.
    #[doc(alias = "DAT_HANDLE_TYPE_EP")]
    Ep = 1,
    /// An event dispatcher.
    #[doc(alias = "DAT_HANDLE_TYPE_EVD")]
    Evd = 2,
    /// An interface adapter.
    #[doc(alias = "DAT_HANDLE_TYPE_IA")]
    Ia = 3,
    /// A local memory region.
    #[doc(alias = "DAT_HANDLE_TYPE_LMR")]
    Lmr = 4,
    /// A public service point.
    #[doc(alias = "DAT_HANDLE_TYPE_PSP")]
    Psp = 5,
    /// A protection zone.
    #[doc(alias = "DAT_HANDLE_TYPE_PZ")]
    Pz = 6,
    /// A remote memory region.
    #[doc(alias = "DAT_HANDLE_TYPE_RMR")]
    Rmr = 7,
    /// A reserved service point.
    #[doc(alias = "DAT_HANDLE_TYPE_RSP")]
    Rsp = 8,
    /// A consumer notification object.
    #[doc(alias = "DAT_HANDLE_TYPE_CNO")]
    Cno = 9,
    /// A shared receive queue.
    #[doc(alias = "DAT_HANDLE_TYPE_SRQ")]
    Srq = 10,
    /// A common service point (DAT 2.0). CSPs live among the PSPs, and
    /// their handles are of kind [`Kind::Psp`]; dat_get_handle_type
    /// answers this kind for them.
    #[doc(alias = "DAT_HANDLE_TYPE_CSP")]
    Csp = 11,
}

/// Slot index and generation. Generation 0 is never live, so the all-zero
/// value is the null handle (`DAT_HANDLE_NULL`).
#[derive(Clone, Copy, Debug, Default, Eq, PartialOrd, Ord)]
pub struct RawHandle {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

/// Equal when both fields are: compared as the one word of
/// [`RawHandle::to_bits`], which the compiler loads and compares once
/// rather than field by field (a post and a dequeue each compare one).
impl PartialEq for RawHandle {
    #[inline(always)]
    fn eq(&self, other: &RawHandle) -> bool {
        self.to_bits() == other.to_bits()
    }
}

/// Hashes the word [`PartialEq`] compares, so equal handles hash alike.
impl core::hash::Hash for RawHandle {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.to_bits().hash(state);
    }
}

impl RawHandle {
    /// `DAT_HANDLE_NULL`.
    pub const NULL: RawHandle = RawHandle { index: 0, generation: 0 };

    /// Whether this is `DAT_HANDLE_NULL`.
    pub const fn is_null(self) -> bool {
        self.generation == 0
    }

    /// Pack into 64 bits (index low, generation high): what a backend echoes
    /// back as a tag in completions and connection events.
    pub const fn to_bits(self) -> u64 {
        (self.generation as u64) << 32 | self.index as u64
    }

    /// Unpack [`RawHandle::to_bits`].
    pub const fn from_bits(bits: u64) -> RawHandle {
        RawHandle { index: bits as u32, generation: (bits >> 32) as u32 }
    }

    /// The slot index.
    pub const fn index(self) -> u32 {
        self.index
    }

    /// The generation.
    pub const fn generation(self) -> u32 {
        self.generation
    }
}

macro_rules! typed_handle {
    ($(#[$doc:meta])* $name:ident, $kind:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub(crate) RawHandle);

        impl $name {
            /// `DAT_HANDLE_NULL` of this kind.
            pub const NULL: $name = $name(RawHandle::NULL);
            /// The kind this handle names.
            pub const KIND: Kind = $kind;

            /// Whether this is `DAT_HANDLE_NULL`.
            pub const fn is_null(self) -> bool {
                self.0.is_null()
            }

            /// The untyped handle.
            pub const fn raw(self) -> RawHandle {
                self.0
            }

            /// Retype a raw handle (checked on use, like any handle).
            pub const fn from_raw(raw: RawHandle) -> $name {
                $name(raw)
            }
        }

        impl From<$name> for AnyHandle {
            fn from(h: $name) -> AnyHandle {
                AnyHandle { kind: $kind, raw: h.0 }
            }
        }
    };
}

typed_handle!(/// An open Interface Adapter.
    IaHandle, Kind::Ia);
typed_handle!(/// A Protection Zone.
    PzHandle, Kind::Pz);
typed_handle!(/// A Local Memory Region.
    LmrHandle, Kind::Lmr);
typed_handle!(/// A Remote Memory Region.
    RmrHandle, Kind::Rmr);
typed_handle!(/// An Event Dispatcher.
    EvdHandle, Kind::Evd);
typed_handle!(/// A Consumer Notification Object.
    CnoHandle, Kind::Cno);
typed_handle!(/// An Endpoint.
    EpHandle, Kind::Ep);
typed_handle!(/// A Public Service Point.
    PspHandle, Kind::Psp);
typed_handle!(/// A Reserved Service Point.
    RspHandle, Kind::Rsp);
typed_handle!(/// A Connection Request.
    CrHandle, Kind::Cr);
typed_handle!(/// A Shared Receive Queue.
    SrqHandle, Kind::Srq);
typed_handle!(/// A Common Service Point: a PSP that listens on a socket address
    /// (DAT 2.0), so its handle is of the PSPs' kind.
    CspHandle, Kind::Psp);

/// How a hot call names its object: by a handle the core judges (stale,
/// garbage and null handles refused), or by one whose object the caller
/// vouches is alive, which the look-up then takes without a test. The
/// Rust API vouches for the objects it holds: a typed object stands for
/// its object's life, since only its free takes it and its brand ends
/// with its IA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named<H> {
    handle: H,
    vouched: bool,
}

impl<H: Copy> Named<H> {
    /// `handle`, judged by the core.
    #[inline(always)]
    pub const fn judged(handle: H) -> Named<H> {
        Named { handle, vouched: false }
    }

    /// `handle`, vouched for if `vouched`, judged if not.
    ///
    /// # Safety
    /// If `vouched`, the object `handle` names lives, with that handle's
    /// generation, in the provider this is handed to, for the whole call.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub const unsafe fn vouched(handle: H, vouched: bool) -> Named<H> {
        Named { handle, vouched }
    }

    /// The handle.
    #[inline(always)]
    pub const fn handle(self) -> H {
        self.handle
    }

    /// Whether the caller vouched that the object lives ([`Named::vouched`]).
    #[inline(always)]
    pub const fn is_vouched(self) -> bool {
        self.vouched
    }
}

impl From<EpHandle> for Named<EpHandle> {
    #[inline(always)]
    fn from(h: EpHandle) -> Named<EpHandle> {
        Named::judged(h)
    }
}

impl From<EvdHandle> for Named<EvdHandle> {
    #[inline(always)]
    fn from(h: EvdHandle) -> Named<EvdHandle> {
        Named::judged(h)
    }
}

/// A UD address handle of the IB extension: the `ah` of a
/// `DAT_IB_ADDR_HANDLE`. It is no DAT object (it has no
/// `DAT_HANDLE_TYPE`), so it has no [`Kind`]; like every handle it carries
/// a generation, so a freed one is refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AhHandle(pub(crate) RawHandle);

impl AhHandle {
    /// No address handle.
    pub const NULL: AhHandle = AhHandle(RawHandle::NULL);

    /// Whether this is the null handle.
    pub const fn is_null(self) -> bool {
        self.0.is_null()
    }

    /// The untyped handle.
    pub const fn raw(self) -> RawHandle {
        self.0
    }

    /// Retype a raw handle (checked on use, like any handle).
    pub const fn from_raw(raw: RawHandle) -> AhHandle {
        AhHandle(raw)
    }
}

/// A handle of any kind: what `dat_get_handle_type` and the consumer-context
/// calls take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AnyHandle {
    /// The kind of object.
    pub kind: Kind,
    /// Its slot and generation.
    pub raw: RawHandle,
}
