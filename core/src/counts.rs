//! The counters' values: the IB extension's counter names in the
//! header's order (`DAT_IA_COUNTERS`, `DAT_EP_COUNTERS`,
//! `DAT_EVD_COUNTERS`), one object's [`Counts`], and the table that keeps
//! the counts of the EPs or EVDs of a provider beside their slab. The
//! calls that start, stop and read them are in `crate::call::counters`.

use crate::backend::{RequestOp, SendWr};
use crate::error::{DatError, DatResult};
use crate::handle::RawHandle;
use crate::signature::signature;
use crate::slab::{Slab, Slot};
use crate::store::Store;
use crate::types::DtoOp;

/// One kind's counters in the header's order: a `Counter` enum whose
/// discriminant is the header's index, and `NAMES`, the header's names.
macro_rules! counters {
    ($prefix:literal: $($name:ident),* $(,)?) => {
        /// A counter, its discriminant the header's index.
        #[allow(non_camel_case_types, missing_docs)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        pub enum Counter {
            $($name),*
        }

        /// The header's names of the counters, by index.
        pub const NAMES: &[&str] = &[$(concat!($prefix, stringify!($name))),*];

        /// How many there are: the header's `*_ALL_COUNTERS`.
        pub const COUNT: usize = NAMES.len();
    };
}

/// `DAT_IA_COUNTERS`.
pub mod ia {
    counters! { "DCNT_IA_":
        PZ_CREATE, PZ_FREE, LMR_CREATE, LMR_FREE, RMR_CREATE, RMR_FREE, PSP_CREATE, PSP_CREATE_ANY, PSP_FREE,
        RSP_CREATE, RSP_FREE, EVD_CREATE, EVD_FREE, EP_CREATE, EP_FREE, SRQ_CREATE, SRQ_FREE, SP_CR, SP_CR_ACCEPTED,
        SP_CR_REJECTED, MEM_ALLOC, MEM_ALLOC_DATA, MEM_FREE, ASYNC_ERROR, ASYNC_QP_ERROR, ASYNC_CQ_ERROR, CM_LISTEN,
        CM_REQ_TX, CM_REQ_RX, CM_REP_TX, CM_REP_RX, CM_RTU_TX, CM_RTU_RX, CM_USER_REJ_TX, CM_USER_REJ_RX,
        CM_ACTIVE_EST, CM_PASSIVE_EST, CM_AH_REQ_TX, CM_AH_REQ_RX, CM_AH_RESOLVED, CM_DREQ_TX, CM_DREQ_RX,
        CM_DREP_TX, CM_DREP_RX, CM_MRA_TX, CM_MRA_RX, CM_REQ_FULLQ_POLL, CM_ERR, CM_ERR_REQ_FULLQ, CM_ERR_REQ_DUP,
        CM_ERR_REQ_RETRY, CM_ERR_REP_DUP, CM_ERR_REP_RETRY, CM_ERR_RTU_DUP, CM_ERR_RTU_RETRY, CM_ERR_REFUSED,
        CM_ERR_RESET, CM_ERR_TIMEOUT, CM_ERR_REJ_TX, CM_ERR_REJ_RX, CM_ERR_DREQ_DUP, CM_ERR_DREQ_RETRY,
        CM_ERR_DREP_DUP, CM_ERR_DREP_RETRY, CM_ERR_MRA_DUP, CM_ERR_MRA_RETRY, CM_ERR_UNEXPECTED, LNK_ERR_RCV,
        LNK_ERR_RCV_REM_PHYS, LNK_ERR_RCV_CONSTRAINT, LNK_ERR_XMT_DISCARDS, LNK_ERR_XMT_CONTRAINT, LNK_ERR_INTEGRITY,
        LNK_ERR_EXC_BUF_OVERRUN, LNK_WARN_RCV_SW_RELAY, LNK_WARN_XMT_WAIT, DIAG_ERR_RQ_RAE, DIAG_ERR_RQ_OOS,
        DIAG_ERR_RQ_RIRE, DIAG_ERR_RQ_UDSDPRD, DIAG_ERR_SQ_RAE, DIAG_ERR_SQ_OOS, DIAG_ERR_SQ_RIRE, DIAG_ERR_SQ_RREE,
        DIAG_ERR_SQ_TREE,
    }
}

/// `DAT_EP_COUNTERS`.
pub mod ep {
    counters! { "DCNT_EP_":
        CONNECT, DISCONNECT, POST_SEND, POST_SEND_DATA, POST_SEND_UD, POST_SEND_UD_DATA, POST_RECV, POST_RECV_DATA,
        POST_WRITE, POST_WRITE_DATA, POST_WRITE_IMM, POST_WRITE_IMM_DATA, POST_READ, POST_READ_DATA, POST_CMP_SWAP,
        POST_FETCH_ADD, RECV, RECV_DATA, RECV_UD, RECV_UD_DATA, RECV_IMM, RECV_IMM_DATA, RECV_RDMA_IMM,
        RECV_RDMA_IMM_DATA,
    }
}

/// `DAT_EVD_COUNTERS`.
pub mod evd {
    counters! { "DCNT_EVD_":
        WAIT, WAIT_BLOCKED, WAIT_NOTIFY, DEQUEUE, DEQUEUE_FOUND, DEQUEUE_NOT_FOUND, DEQUEUE_POLL, DEQUEUE_POLL_FOUND,
        CONN_CALLBACK, DTO_CALLBACK,
    }
}

signature! {
    /// `dat_ib_query_counters`'s parameters, as `dat_extension_op` numbers
    /// them (`<dat2/dat_ib_extensions.h>`).
    pub(crate) enum QueryCounters { DatHandle, Operation, Counter, CountersOut, Reset }
}

/// The counters of one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Counts<const N: usize> {
    values: [u64; N],
}

impl<const N: usize> Counts<N> {
    /// All zero.
    pub(crate) const fn new() -> Self {
        Counts { values: [0; N] }
    }

    /// One more event of counter `i`. Counters run free.
    pub(crate) fn bump(&mut self, i: usize) {
        self.add(i, 1);
    }

    /// `n` more of counter `i` (bytes, say).
    pub(crate) fn add(&mut self, i: usize, n: u64) {
        if let Some(v) = self.values.get_mut(i) {
            *v = v.wrapping_add(n);
        }
    }

    /// Counter `which` into `out[0]`, or every counter into `out` when
    /// `which` is `N` (the header's `*_ALL_COUNTERS`); with `reset`, the
    /// counters read start again from zero.
    pub(crate) fn read(&mut self, which: usize, out: &mut [u64], reset: bool) -> DatResult<()> {
        let (src, dst) = match which {
            w if w == N => (self.values.get_mut(..), out.get_mut(..N)),
            w if w < N => (self.values.get_mut(w..=w), out.get_mut(..1)),
            _ => return Err(DatError::invalid(QueryCounters::Counter)),
        };
        let (Some(src), Some(dst)) = (src, dst) else { return Err(DatError::invalid(QueryCounters::CountersOut)) };
        dst.copy_from_slice(src);
        if reset {
            src.fill(0);
        }
        Ok(())
    }
}

/// The counters of the object of one generation in a slot.
#[derive(Debug)]
pub(crate) struct SlotCounts<const N: usize> {
    generation: u32,
    counts: Counts<N>,
}

/// The counters of the EPs or EVDs of a provider, slot by slot beside
/// their slab (a keyed slab of the same capacity), each marked with the
/// generation of the object it counts for: a new object in a slot starts
/// from zero.
pub(crate) struct CountTable<const N: usize, St: Store<Slot<SlotCounts<N>>>> {
    slab: Slab<SlotCounts<N>, St>,
}

impl<const N: usize, St: Store<Slot<SlotCounts<N>>>> CountTable<N, St> {
    pub(crate) fn new(store: St) -> Self {
        CountTable { slab: Slab::keyed(store) }
    }

    /// The counters of the object `h` names, made (zero) if it has none
    /// yet. Out of line, as every use of the table: the calls that
    /// count keep their ordinary path's code as it was.
    #[inline(never)]
    pub(crate) fn of(&mut self, h: RawHandle) -> Option<&mut Counts<N>> {
        let fresh = SlotCounts { generation: h.generation(), counts: Counts::new() };
        match self.slab.live_mut(h.index()) {
            Some((_, t)) if t.generation != h.generation() => *t = fresh,
            Some(_) => {}
            None => {
                self.slab.insert_at(h.index(), fresh).ok()?;
            }
        }
        self.slab.live_mut(h.index()).map(|(_, t)| &mut t.counts)
    }

    /// [`CountTable::of`] through a shared provider, for counters made
    /// already (an EP's are made when it starts counting).
    ///
    /// # Safety
    /// As [`Slab::live_shared`]: the caller holds the lock of the object
    /// `h` names.
    #[allow(unsafe_code, clippy::mut_from_ref)]
    #[inline(never)]
    pub(crate) unsafe fn of_shared(&self, h: RawHandle) -> Option<&mut Counts<N>> {
        // SAFETY: forwarded contract.
        let (_, t) = unsafe { self.slab.live_shared(h.index()) }?;
        (t.generation == h.generation()).then_some(&mut t.counts)
    }

    /// One more event of counter `i` of the object `h` names.
    #[cold]
    #[inline(never)]
    pub(crate) fn bump(&mut self, h: RawHandle, i: usize) {
        if let Some(counts) = self.of(h) {
            counts.bump(i);
        }
    }
}

impl<St: Store<Slot<SlotCounts<{ ep::COUNT }>>>> CountTable<{ ep::COUNT }, St> {
    /// The request `wr` posted on the EP `h`.
    #[cold]
    #[inline(never)]
    pub(crate) fn posted(&mut self, h: RawHandle, wr: &SendWr<'_>) {
        if let Some(counts) = self.of(h) {
            counts.posted(&wr.op, u64::from(wr.length));
        }
    }

    /// [`CountTable::posted`] through a shared provider.
    ///
    /// # Safety
    /// As [`CountTable::of_shared`].
    #[allow(unsafe_code)]
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn posted_shared(&self, h: RawHandle, wr: &SendWr<'_>) {
        // SAFETY: forwarded contract.
        if let Some(counts) = unsafe { self.of_shared(h) } {
            counts.posted(&wr.op, u64::from(wr.length));
        }
    }

    /// A receive of `bytes` posted on the EP `h`.
    #[cold]
    #[inline(never)]
    pub(crate) fn posted_recv(&mut self, h: RawHandle, bytes: u64) {
        if let Some(counts) = self.of(h) {
            counts.posted_recv(bytes);
        }
    }

    /// [`CountTable::posted_recv`] through a shared provider.
    ///
    /// # Safety
    /// As [`CountTable::of_shared`].
    #[allow(unsafe_code)]
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn posted_recv_shared(&self, h: RawHandle, bytes: u64) {
        // SAFETY: forwarded contract.
        if let Some(counts) = unsafe { self.of_shared(h) } {
            counts.posted_recv(bytes);
        }
    }
}

impl Counts<{ ep::COUNT }> {
    /// A request of `bytes` posted: its kind's count and bytes.
    fn posted(&mut self, op: &RequestOp, bytes: u64) {
        let (n, data) = match op {
            RequestOp::Send | RequestOp::SendInvalidate { .. } => (ep::Counter::POST_SEND, ep::Counter::POST_SEND_DATA),
            RequestOp::RdmaWrite { .. } => (ep::Counter::POST_WRITE, ep::Counter::POST_WRITE_DATA),
            RequestOp::RdmaWriteImm { .. } => (ep::Counter::POST_WRITE_IMM, ep::Counter::POST_WRITE_IMM_DATA),
            RequestOp::RdmaRead { .. } => (ep::Counter::POST_READ, ep::Counter::POST_READ_DATA),
            RequestOp::CompareSwap { .. } => return self.bump(ep::Counter::POST_CMP_SWAP as usize),
            RequestOp::FetchAdd { .. } => return self.bump(ep::Counter::POST_FETCH_ADD as usize),
        };
        self.bump(n as usize);
        self.add(data as usize, bytes);
    }

    /// A receive of `bytes` posted.
    fn posted_recv(&mut self, bytes: u64) {
        self.bump(ep::Counter::POST_RECV as usize);
        self.add(ep::Counter::POST_RECV_DATA as usize, bytes);
    }

    /// A receive completed successfully as `op` with `bytes`: a message
    /// (`DCNT_EP_RECV`), one with immediate data (`DCNT_EP_RECV_IMM`), or
    /// one that a peer's RDMA write with immediate data consumed
    /// (`DCNT_EP_RECV_RDMA_IMM`).
    #[cold]
    pub(crate) fn received(&mut self, op: DtoOp, bytes: u32) {
        let (n, data) = match op {
            DtoOp::ReceiveMsgImm => (ep::Counter::RECV_IMM, ep::Counter::RECV_IMM_DATA),
            DtoOp::ReceiveImm => (ep::Counter::RECV_RDMA_IMM, ep::Counter::RECV_RDMA_IMM_DATA),
            _ => (ep::Counter::RECV, ep::Counter::RECV_DATA),
        };
        self.bump(n as usize);
        self.add(data as usize, u64::from(bytes));
    }
}
