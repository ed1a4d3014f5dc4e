//! The provider: every object of every open IA, and the progress engine
//! that turns backend completions and connection events into DAT events.
//!
//! The core has no thread (docs/design.md, "Progress: connections on their
//! own, data where the consumer calls"): events are pulled from the
//! backend when the consumer dequeues, waits or posts; a transport whose
//! connections progress on their own queues them until then.

use core::mem::MaybeUninit;
use core::ptr::addr_of_mut;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::backend::{Backend, CmEvent, Completion, ConnOutcome, ConnReq, ConnectionManager, PrivateData};
use crate::counts::{self, CountTable, SlotCounts};
use crate::error::{DatError, DatResult, Subtype};
use crate::event::{Event, EventData, EventNumber, EventPool};
use crate::handle::*;
use crate::object::ah::Ah;
use crate::object::cno::Cno;
use crate::object::cr::Cr;
use crate::object::ep::{Ep, EpQps, Reached};
use crate::object::evd::{Arrival, Evd, EvdCqs};
use crate::object::ia::Ia;
use crate::object::lmr::Lmr;
use crate::object::psp::Psp;
use crate::object::pz::Pz;
use crate::object::rmr::Rmr;
use crate::object::rsp::Rsp;
use crate::object::srq::Srq;
use crate::slab::Slab;
use crate::storage::{Inline, Storage};
use crate::types::{DtoOp, DtoStatus, EpState};

/// Stamps never given before in the process: each PZ takes one when it is
/// made and another each time one of its LMRs is freed, so that segments
/// a poster checked are taken as checked only on an EP of the zone they
/// were checked in, of the provider that checked them, and only while
/// none of the zone's LMRs was freed since (see `poster`). One word of 64
/// bits, where a count of frees of 32 could come round again; even, so
/// that segments keep a stamp and what they are for (the bit of their
/// `Access`) in one word, which a post compares once; never 0, which no
/// zone has.
static STAMPS: AtomicU64 = AtomicU64::new(2);

/// A stamp never given before (see [`STAMPS`]); even.
pub(crate) fn new_stamp() -> u64 {
    STAMPS.fetch_add(2, Ordering::Relaxed)
}

/// The EVD of a provider over `B`: its CQ is the backend's.
type EvdOf<B> = Evd<<B as Backend>::Cq>;

/// All DAT objects of one provider instance over backend `B`, in storage
/// `S`: by default 64 objects of each kind and 1,024 queued events in all,
/// inline.
pub struct Provider<B: Backend, S: Storage = Inline<64, 1024>> {
    pub(crate) backend: B,
    pub(crate) ias: Slab<Ia<B>, S::Slots<Ia<B>>>,
    pub(crate) pzs: Slab<Pz<B>, S::Slots<Pz<B>>>,
    pub(crate) lmrs: Slab<Lmr<B>, S::Slots<Lmr<B>>>,
    pub(crate) rmrs: Slab<Rmr<B>, S::Slots<Rmr<B>>>,
    pub(crate) evds: Slab<EvdOf<B>, S::Slots<EvdOf<B>>>,
    pub(crate) cnos: Slab<Cno, S::Slots<Cno>>,
    pub(crate) eps: Slab<Ep<B>, S::Slots<Ep<B>>>,
    pub(crate) psps: Slab<Psp<B>, S::Slots<Psp<B>>>,
    pub(crate) rsps: Slab<Rsp<B>, S::Slots<Rsp<B>>>,
    pub(crate) crs: Slab<Cr<B>, S::Slots<Cr<B>>>,
    pub(crate) srqs: Slab<Srq<B>, S::Slots<Srq<B>>>,
    /// The address handles of UD EPs, listed by EP.
    pub(crate) ahs: Slab<Ah<B>, S::Slots<Ah<B>>>,
    pub(crate) events: EventPool<S::Events>,
    /// The EPs' and the EVDs' counters, beside their slabs.
    pub(crate) ep_counts: CountTable<{ counts::ep::COUNT }, S::Slots<SlotCounts<{ counts::ep::COUNT }>>>,
    pub(crate) evd_counts: CountTable<{ counts::evd::COUNT }, S::Slots<SlotCounts<{ counts::evd::COUNT }>>>,
    /// Where a CQ poll puts its completions: kept, so that no poll clears
    /// a buffer first.
    pub(crate) polled: [Completion; POLL_BATCH],
    /// The last `lmr_context` handed out (see `lmr`).
    pub(crate) lmr_sequence: u32,
}

/// Completions taken from a CQ in one poll.
const POLL_BATCH: usize = 16;

macro_rules! lookup {
    ($get:ident, $slab:ident, $handle:ty, $obj:ty, $sub:ident) => {
        pub(crate) fn $get(&self, h: $handle) -> DatResult<&$obj> {
            self.$slab.get(h.0).ok_or(DatError::invalid_handle(Subtype::$sub))
        }
    };
    ($get:ident, $get_mut:ident, $slab:ident, $handle:ty, $obj:ty, $sub:ident) => {
        lookup!($get, $slab, $handle, $obj, $sub);

        pub(crate) fn $get_mut(&mut self, h: $handle) -> DatResult<&mut $obj> {
            self.$slab.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::$sub))
        }
    };
}

/// The tag of a Reserved Service Point's listener has this bit set in its
/// index half, so one tag space serves PSPs and RSPs.
const RSP_TAG_BIT: u64 = 1 << 31;

pub(crate) fn psp_tag(h: PspHandle) -> u64 {
    h.0.to_bits()
}

pub(crate) fn rsp_tag(h: RspHandle) -> u64 {
    h.0.to_bits() | RSP_TAG_BIT
}

impl<B: Backend, S: Storage> core::fmt::Debug for Provider<B, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Provider")
            .field("ias", &self.ias.len())
            .field("pzs", &self.pzs.len())
            .field("lmrs", &self.lmrs.len())
            .field("rmrs", &self.rmrs.len())
            .field("evds", &self.evds.len())
            .field("cnos", &self.cnos.len())
            .field("eps", &self.eps.len())
            .field("psps", &self.psps.len())
            .field("rsps", &self.rsps.len())
            .field("crs", &self.crs.len())
            .field("srqs", &self.srqs.len())
            .field("unreserved_events", &self.events.unreserved())
            .finish()
    }
}

impl<B: Backend, S: Storage + Default> Provider<B, S> {
    /// A provider with no IA open, over `backend`, in storage of the
    /// default size.
    pub fn new(backend: B) -> Self {
        Self::with_storage(backend, S::default())
    }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// A provider with no IA open, over `backend`, holding what `storage`
    /// gives it room for.
    pub fn with_storage(backend: B, storage: S) -> Self {
        let mut slot = MaybeUninit::uninit();
        Self::init_in(&mut slot, backend, storage);
        // SAFETY: `init_in` wrote every field.
        #[allow(unsafe_code)]
        unsafe {
            slot.assume_init()
        }
    }

    /// [`Provider::with_storage`], built in `slot`, where it is to live. A
    /// provider of inline storage holds every kind's slots and is large
    /// (over half a MiB for `Inline<64, 4096>`): returned by value, a debug
    /// build copies it on the stack on its way to its box, which a thread
    /// of 2 MiB may not have room for. Here each part is made alone and
    /// moved into its place.
    #[allow(unsafe_code)]
    pub fn init_in(slot: &mut MaybeUninit<Self>, backend: B, mut storage: S) -> &mut Self {
        let p = slot.as_mut_ptr();
        // SAFETY: `p` is valid for writes of a `Provider` (it is `slot`'s
        // memory), and each field is written once through a raw place of
        // its own, so no reference to uninitialized memory is made. Every
        // field of the struct is written (the pattern below checks the
        // list), before `assume_init_mut`.
        unsafe {
            addr_of_mut!((*p).backend).write(backend);
            addr_of_mut!((*p).ias).write(Slab::new(storage.slots(Kind::Ia)));
            addr_of_mut!((*p).pzs).write(Slab::new(storage.slots(Kind::Pz)).listed());
            addr_of_mut!((*p).lmrs).write(Slab::keyed(storage.slots(Kind::Lmr)).listed());
            addr_of_mut!((*p).rmrs).write(Slab::new(storage.slots(Kind::Rmr)).listed());
            addr_of_mut!((*p).evds).write(Slab::new(storage.slots(Kind::Evd)).listed());
            addr_of_mut!((*p).cnos).write(Slab::new(storage.slots(Kind::Cno)).listed());
            addr_of_mut!((*p).eps).write(Slab::new(storage.slots(Kind::Ep)).listed());
            addr_of_mut!((*p).psps).write(Slab::new(storage.slots(Kind::Psp)).listed());
            addr_of_mut!((*p).rsps).write(Slab::new(storage.slots(Kind::Rsp)).listed());
            addr_of_mut!((*p).crs).write(Slab::new(storage.slots(Kind::Cr)).listed());
            addr_of_mut!((*p).srqs).write(Slab::new(storage.slots(Kind::Srq)).listed());
            // An address handle has no DAT handle type: there are as many
            // as Endpoints, one a peer of a UD EP.
            addr_of_mut!((*p).ahs).write(Slab::new(storage.slots(Kind::Ep)).listed());
            addr_of_mut!((*p).events).write(EventPool::new(storage.events()));
            addr_of_mut!((*p).ep_counts).write(CountTable::new(storage.slots(Kind::Ep)));
            addr_of_mut!((*p).evd_counts).write(CountTable::new(storage.slots(Kind::Evd)));
            addr_of_mut!((*p).polled).write([Completion::EMPTY; POLL_BATCH]);
            addr_of_mut!((*p).lmr_sequence).write(0);
        }
        // SAFETY: every field was written above.
        let provider = unsafe { slot.assume_init_mut() };
        // The writes above name every field: this pattern, which names each
        // and has no `..`, stops compiling when a field is added.
        let Provider {
            backend: _,
            ias: _,
            pzs: _,
            lmrs: _,
            rmrs: _,
            evds: _,
            cnos: _,
            eps: _,
            psps: _,
            rsps: _,
            crs: _,
            srqs: _,
            ahs: _,
            events: _,
            ep_counts: _,
            evd_counts: _,
            polled: _,
            lmr_sequence: _,
        } = provider;
        provider
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend, mutably (tests script it through this).
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The generation of the live object of `kind` in slot `index`; `None`
    /// when the slot holds none. Inlined, so that a caller that names the
    /// kind pays for one slab's look-up, not a match over eleven.
    #[inline(always)]
    pub fn live_generation(&self, kind: Kind, index: u32) -> Option<u32> {
        match kind {
            Kind::Ia => self.ias.generation(index),
            Kind::Pz => self.pzs.generation(index),
            Kind::Lmr => self.lmrs.generation(index),
            Kind::Rmr => self.rmrs.generation(index),
            Kind::Evd => self.evds.generation(index),
            Kind::Cno => self.cnos.generation(index),
            Kind::Ep => self.eps.generation(index),
            Kind::Psp | Kind::Csp => self.psps.generation(index),
            Kind::Rsp => self.rsps.generation(index),
            Kind::Cr => self.crs.generation(index),
            Kind::Srq => self.srqs.generation(index),
        }
    }

    /// What an event loop sleeps on for `ia`'s transport (see
    /// [`Backend::wait_fds`]).
    pub fn wait_fds(&self, ia: IaHandle) -> DatResult<crate::backend::WaitFds> {
        Ok(self.backend.wait_fds(&self.ia(ia)?.dev))
    }

    /// Block in the backend until `ia`'s transport has something or
    /// `timeout_us` passes: the sleep between the steps of a wait begun with
    /// [`Provider::evd_wait_begin`] or [`Provider::cno_wait_begin`].
    pub fn block(&mut self, ia: IaHandle, timeout_us: Option<u64>) -> DatResult<crate::backend::Wake> {
        let Provider { ias, evds, backend, .. } = self;
        let i = ias.get_mut(ia.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleIa))?;
        Ok(backend.block(&mut i.dev, &mut EvdCqs::all(evds), timeout_us))
    }

    lookup!(ia, ias, IaHandle, Ia<B>, InvalidHandleIa);
    lookup!(pz, pzs, PzHandle, Pz<B>, InvalidHandlePz);
    lookup!(lmr, lmrs, LmrHandle, Lmr<B>, InvalidHandleLmr);
    lookup!(rmr, rmrs, RmrHandle, Rmr<B>, InvalidHandleRmr);
    lookup!(evd, evd_mut, evds, EvdHandle, EvdOf<B>, NoSubtype);
    lookup!(cno, cno_mut, cnos, CnoHandle, Cno, InvalidHandleCno);
    lookup!(ep, eps, EpHandle, Ep<B>, InvalidHandleEp);
    lookup!(rsp, rsps, RspHandle, Rsp<B>, InvalidHandleRsp);
    lookup!(cr, crs, CrHandle, Cr<B>, InvalidHandleCr);
    lookup!(srq, srq_mut, srqs, SrqHandle, Srq<B>, InvalidHandleSrq);

    /// Queue `event` on `evd` (a null or freed EVD means nobody listens).
    /// A full EVD overflows: the event is lost and the IA's async EVD gets
    /// `DAT_ASYNC_ERROR_EVD_OVERFLOW`.
    pub(crate) fn deliver(&mut self, evd: EvdHandle, number: EventNumber, data: EventData, notify: bool) {
        let Some(e) = self.evds.get_mut(evd.0) else { return };
        if e.counting() && matches!(data, EventData::Connection { .. } | EventData::CrArrival { .. }) {
            self.evd_counts.bump(evd.0, counts::evd::Counter::CONN_CALLBACK as usize);
        }
        let event = Event { number, evd, data };
        match e.arrive(&mut self.events, event, notify) {
            Arrival::Queued(cno) => self.cno_triggered(cno, evd),
            Arrival::Overflowed => {
                let ia = e.ia;
                self.async_event(ia, EventNumber::AsyncEvdOverflow, Some(evd.into()), 0);
            }
        }
    }

    /// An event's arrival on `evd` triggers `cno`, if there is one.
    pub(crate) fn cno_triggered(&mut self, cno: Option<CnoHandle>, evd: EvdHandle) {
        if let Some(c) = cno.and_then(|cno| self.cnos.get_mut(cno.0)) {
            c.trigger(evd);
        }
    }

    /// Queue an asynchronous event on `ia`'s async EVD. An async EVD that is
    /// itself full loses the event.
    pub(crate) fn async_event(&mut self, ia: IaHandle, number: EventNumber, handle: Option<AnyHandle>, reason: u32) {
        let Some(i) = self.ias.get_mut(ia.0) else { return };
        if i.counting {
            // OFA counts the QP's and the CQ's errors apart from the rest.
            i.counts.bump(counts::ia::Counter::ASYNC_ERROR as usize);
            match handle.map(|h| h.kind) {
                Some(Kind::Ep) => i.counts.bump(counts::ia::Counter::ASYNC_QP_ERROR as usize),
                Some(Kind::Evd) => i.counts.bump(counts::ia::Counter::ASYNC_CQ_ERROR as usize),
                _ => {}
            }
        }
        let async_evd = i.async_evd;
        let Some(e) = self.evds.get_mut(async_evd.0) else { return };
        let event = Event { number, evd: async_evd, data: EventData::AsyncError { handle, reason } };
        if let Arrival::Queued(cno) = e.arrive(&mut self.events, event, true) {
            self.cno_triggered(cno, async_evd);
        }
    }

    /// Pull what the backend has for `ia`, and the completions of `evd`'s
    /// queue while it has room.
    pub(crate) fn progress(&mut self, ia: IaHandle, evd: Option<EvdHandle>) {
        self.pump_cm(ia);
        if let Some(evd) = evd {
            self.pump_cq(evd);
        }
    }

    pub(crate) fn pump_cq(&mut self, evd: EvdHandle) {
        loop {
            let Provider { evds, eps, backend, polled, .. } = self;
            let Some(e) = evds.get_mut(evd.0) else { return };
            let want = (e.queue().room() as usize).min(POLL_BATCH);
            let Some(cq) = e.cq_mut() else { return };
            if want == 0 {
                return;
            }
            let got = backend.cq_poll(cq, &mut EpQps(eps), &mut polled[..want]).min(want);
            for i in 0..got {
                let Some(&c) = self.polled.get(i) else { break };
                self.complete(&c);
            }
            if got < want {
                return;
            }
        }
    }

    pub(crate) fn pump_cm(&mut self, ia: IaHandle) {
        loop {
            let Provider { ias, backend, .. } = self;
            let Some(i) = ias.get_mut(ia.0) else { return };
            let Some(event) = backend.cm().poll_cm(&mut i.dev) else { return };
            self.on_cm(ia, event);
        }
    }

    /// Route one completion to its EVD and settle the EP's accounts.
    pub(crate) fn complete(&mut self, c: &Completion) {
        // With no EVD to hand it to directly, the event is always queued.
        let _ = self.complete_to(c, EvdHandle::NULL);
    }

    /// Settle one completion: the EP's accounts, then its event, which is
    /// returned instead of queued when it is for `direct` (a dequeue of
    /// that EVD with nothing queued before it), then the connection a
    /// failure breaks.
    #[inline]
    pub(crate) fn complete_to(&mut self, c: &Completion, direct: EvdHandle) -> Option<Event> {
        let ep_h = EpHandle(RawHandle::from_bits(c.tag));
        // A completion of a freed EP (a stale CQE) has nowhere to go.
        let ep = self.eps.get_mut(ep_h.0)?;
        let failed = !matches!(c.status, DtoStatus::Success | DtoStatus::Flushed);
        let connected = matches!(ep.state(), EpState::Connected | EpState::DisconnectPending);
        let routed = match c.op {
            DtoOp::BindMw => {
                ep.settle_dto(false, c.retired);
                let evd = ep.request_evd;
                let rmr_h = RmrHandle(RawHandle::from_bits(c.cookie));
                match self
                    .rmrs
                    .get_mut(rmr_h.0)
                    .and_then(|r| r.in_flight.complete(ep_h, c.status == DtoStatus::Success))
                {
                    Some(cookie) => {
                        if c.status != DtoStatus::Success {
                            self.rmr_unbind(rmr_h);
                        }
                        let data = EventData::RmrBind { rmr: rmr_h, cookie, status: c.status };
                        Some((evd, EventNumber::RmrBindCompletion, data))
                    }
                    None => None,
                }
            }
            op => {
                let recv = op.is_recv();
                // A receive of an SRQ counts on the SRQ.
                match if recv { self.srqs.get_mut(ep.srq.0) } else { None } {
                    Some(srq) => srq.outstanding = srq.outstanding.saturating_sub(1),
                    None => ep.settle_dto(recv, c.retired),
                }
                let (evd, _) = ep.dto_stream(recv);
                let data = EventData::Dto {
                    ep: ep_h,
                    cookie: c.cookie,
                    status: c.status,
                    transferred_length: c.transferred_length,
                    op,
                    imm: c.imm,
                };
                if ep.counting {
                    self.count_completion(ep_h, evd, op, c);
                }
                if op == DtoOp::ReceiveWithInvalidate && c.status == DtoStatus::Success {
                    self.rmr_invalidated(ep_h, c.imm);
                }
                Some((evd, EventNumber::DtoCompletion, data))
            }
        };
        let handed = match routed {
            Some((evd, number, data)) if evd == direct && !direct.is_null() => Some(Event { number, evd, data }),
            Some((evd, number, data)) => {
                self.deliver(evd, number, data, c.notify);
                None
            }
            None => None,
        };
        // A failed DTO breaks the connection (dat_lmr_free(3DAT): "...
        // DAT_DTO_ERR_REMOTE_ACCESS is reported ... and the connection is
        // broken"); every later DTO is flushed by the transport.
        if failed && connected {
            self.ep_lost(ep_h, EventNumber::ConnectionBroken);
        }
        handed
    }

    /// The connection of `ep` is gone: it is Disconnected, the transport
    /// flushes what is outstanding, and the connect EVD hears `number`.
    pub(crate) fn ep_lost(&mut self, ep_h: EpHandle, number: EventNumber) {
        let Provider { eps, backend, .. } = self;
        let Some(ep) = eps.get_mut(ep_h.0) else { return };
        ep.connection_moves(|c| c.lose());
        if let Some(qp) = ep.qp_mut() {
            backend.cm().disconnect(B::cm_qp(qp), false);
        }
        let (evd, ia, on_srq) = (ep.connect_evd, ep.ia, !ep.srq.is_null());
        let size =
            if number == EventNumber::ConnectionPeerRejected { ep.connection().private_data.len() as u32 } else { 0 };
        self.deliver(evd, number, EventData::Connection { ep: ep_h, private_data_size: size }, true);
        // An EP on an SRQ takes no more of its buffers once flushed: the
        // transport's "last WQE reached" event, which DAT providers report
        // as EP_BROKEN on the IA's async EVD (dtestsrq frees the EP on it).
        if on_srq {
            self.async_event(ia, EventNumber::AsyncEpBroken, Some(ep_h.into()), 0);
        }
    }

    fn on_cm(&mut self, ia: IaHandle, event: CmEvent<ConnReq<B>>) {
        match event {
            CmEvent::Request { listener, request, remote, remote_port, private_data, ud } => {
                self.on_request(ia, listener, request, (remote, remote_port, private_data), ud)
            }
            CmEvent::UdEstablished { tag, peer, remote, passive, private_data } => {
                self.on_ud_established(EpHandle(RawHandle::from_bits(tag)), (peer, remote), passive, private_data)
            }
            CmEvent::Conn { tag, outcome, private_data } => {
                self.on_conn(EpHandle(RawHandle::from_bits(tag)), outcome, private_data)
            }
            device_error => self.on_device_error(ia, device_error),
        }
    }

    fn on_conn(&mut self, ep_h: EpHandle, outcome: ConnOutcome, private_data: PrivateData) {
        let Some(ep) = self.eps.get_mut(ep_h.0) else { return };
        if ep.ud {
            return self.on_ud_failed(ep_h, outcome, private_data);
        }
        match ep.connection_moves(|c| c.take(outcome, private_data)) {
            Some(Reached::Established { private_data_size }) => {
                let evd = ep.connect_evd;
                let data = EventData::Connection { ep: ep_h, private_data_size };
                self.deliver(evd, EventNumber::ConnectionEstablished, data, true);
            }
            Some(Reached::Lost(number)) => self.ep_lost(ep_h, number),
            None => {}
        }
    }

    fn on_request(
        &mut self,
        ia: IaHandle,
        listener: u64,
        request: ConnReq<B>,
        (remote, remote_port, private_data): (crate::types::IaAddress, u64, PrivateData),
        ud: bool,
    ) {
        let raw = RawHandle::from_bits(listener & !RSP_TAG_BIT);
        // An RSP holds an RC EP for its request: a UD request finds no
        // listener there (OFA dapl resolves UD peers through PSPs only).
        let accepted = if listener & RSP_TAG_BIT != 0 && ud {
            Err(request)
        } else if listener & RSP_TAG_BIT != 0 {
            self.rsp_request(ia, RspHandle(raw), request, remote, remote_port, private_data)
        } else {
            self.psp_request(ia, PspHandle(raw), request, (remote, remote_port, private_data), ud)
        };
        // No Service Point, or no room for the request: refuse it as if
        // nobody listened (dat_psp_free(3DAT)).
        if let Err(request) = accepted {
            self.backend.cm().reject(request, &[]);
        }
    }
}
