//! Events: dat_evd_create(3DAT), dat_evd_free(3DAT),
//! dat_evd_dequeue(3DAT), dat_evd_wait(3DAT), dat_evd_post_se(3DAT),
//! dat_evd_query(3DAT), dat_evd_resize(3DAT), dat_evd_modify_cno(3DAT),
//! dat_evd_enable(3DAT), dat_evd_disable(3DAT),
//! dat_evd_set_unwaitable(3DAT), dat_evd_clear_unwaitable(3DAT); and the
//! notification objects EVDs signal: dat_cno_create(3DAT),
//! dat_cno_free(3DAT), dat_cno_wait(3DAT), dat_cno_query(3DAT), and DAT
//! 2.0's `dat_cno_fd_create` and `dat_cno_trigger`.

use std::os::fd::RawFd;

use udat_core::types::EvdFlags;
use udat_core::{
    CnoHandle, CnoParam, DatError, DatResult, ErrorType, EvdHandle, EvdParam, Event, EventData, Passed, Storage,
    CNO_FIELD_ALL, EVD_FIELD_ALL,
};

use crate::memory::Seg;
use crate::object::{Cno, Cr, Evd, Refused};
use crate::{Backend, Ia};
use udat_wake::notify::Notifier;

impl<'id, B: Backend, S: Storage> Ia<'id, B, S> {
    /// `event`, whose DTO, if it wrote local memory, is complete: its
    /// cookie goes back in place, its segment to [`Ia::take_seg`], and
    /// its hold on a dequeue lane ends.
    fn complete(&mut self, event: &mut Event) {
        let Some(loan) = self.lent.complete(&mut event.data) else { return };
        if let Some((ep, recv)) = loan.lane {
            self.provider.ep_release_lane(ep, recv);
        }
        if let Some(seg) = loan.seg {
            self.returned = Some(seg);
        }
    }

    /// The connection request of a `DAT_CONNECTION_REQUEST_EVENT`, to
    /// accept or reject.
    pub fn cr_of(&self, event: &Event) -> Option<Cr<'id>> {
        match event.data {
            EventData::CrArrival { cr, .. } => Some(Cr::new(cr)),
            _ => None,
        }
    }

    /// The [`Seg`] that the last completion dequeued or waited for gave
    /// back: that of a receive or an RDMA read into a `Seg`, once, until
    /// the next such completion, which drops it if it was not taken.
    ///
    /// ```
    /// use udat::*;
    /// use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
    ///
    /// Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
    ///     let pz = ia.pz_create()?;
    ///     let dto = ia.evd_create(8, None, EvdFlags::DTO)?;
    ///     let conn = ia.evd_create(8, None, EvdFlags::CONNECTION)?;
    ///     let ep = ia.ep_create(&pz, &dto, &dto, Some(&conn), None)?;
    ///     let (_lmr, seg) = ia.lmr_create_seg(vec![0u8; 64], &pz)?;
    ///     // Connect, then drop the connection: a receive posted now is
    ///     // flushed, and its completion hands the segment back.
    ///     let peer = IaAddress::default();
    ///     ia.ep_connect(&ep, &peer, 1, TIMEOUT_INFINITE, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
    ///     ia.ep_disconnect(&ep, CloseFlags::Abrupt)?;
    ///     ia.ep_post_recv_seg(&ep, seg, 9, CompletionFlags::DEFAULT)?;
    ///     assert!(ia.take_seg().is_none(), "not before its completion");
    ///     let done = ia.evd_dequeue(&dto)?;
    ///     assert!(matches!(done.data, EventData::Dto { cookie: 9, status: DtoStatus::Flushed, .. }));
    ///     assert_eq!(ia.take_seg().map(|seg| seg.len()), Some(64));
    ///     assert!(ia.take_seg().is_none(), "once");
    ///     Ok(())
    /// })?;
    /// # Ok::<(), udat::DatError>(())
    /// ```
    pub fn take_seg(&mut self) -> Option<Seg<'id>> {
        self.returned.take()
    }

    /// dat_evd_create(3DAT): an EVD of at least `min_qlen` events of the
    /// streams `flags` names, tied to `cno` if given.
    pub fn evd_create(&mut self, min_qlen: u32, cno: Option<&Cno<'id>>, flags: EvdFlags) -> DatResult<Evd<'id>> {
        let cno = cno.map_or(CnoHandle::NULL, Cno::handle);
        self.provider.evd_create(self.ia, min_qlen, cno, flags).map(Evd::new)
    }

    /// dat_evd_free(3DAT): refused (`DAT_INVALID_STATE`) while an EP, PSP,
    /// RSP, SRQ or the IA feeds it.
    pub fn evd_free(&mut self, evd: Evd<'id>) -> Result<(), Refused<Evd<'id>>> {
        self.provider.evd_free(evd.handle()).map_err(|e| Refused::new(e, evd))
    }

    /// dat_evd_dequeue(3DAT): the first event, or `DAT_QUEUE_EMPTY`. A
    /// DTO's cookie is the one it was posted with; the [`Seg`] a completed
    /// receive or RDMA read gives back is [`Ia::take_seg`]'s.
    #[inline(always)]
    pub fn evd_dequeue(&mut self, evd: &Evd<'id>) -> DatResult<Event> {
        // The core's lane hands over only completions of DTOs that write
        // no local memory: each lent one holds the lane of its EVD
        // (`Ia::lent_post`). Its events are the core's as they are.
        // An empty EVD is answered as the lane found it, without the
        // ordinary dequeue.
        match self.provider.lane_dequeue(self.evd_named(evd)) {
            Ok(event) => Ok(event),
            Err(Passed::Empty) => Err(DatError::of(ErrorType::QueueEmpty)),
            Err(Passed::Ordinary) => self.evd_dequeue_ordinary(evd),
        }
    }

    /// [`Ia::evd_dequeue`] past the lane: a completion of a DTO that wrote
    /// local memory gives its cookie and segment back.
    #[inline(never)]
    fn evd_dequeue_ordinary(&mut self, evd: &Evd<'id>) -> DatResult<Event> {
        let mut event = self.provider.evd_dequeue_ordinary(evd.handle())?;
        self.complete(&mut event);
        Ok(event)
    }

    /// dat_evd_wait(3DAT): the first event once `threshold` are queued or
    /// within `timeout_us` ([`TIMEOUT_INFINITE`](crate::TIMEOUT_INFINITE)
    /// for none), and how many more are queued.
    pub fn evd_wait(&mut self, evd: &Evd<'id>, timeout_us: u32, threshold: u32) -> DatResult<(Event, u32)> {
        let (mut event, more) = self.provider.evd_wait(evd.handle(), timeout_us, threshold)?;
        self.complete(&mut event);
        Ok((event, more))
    }

    /// dat_evd_post_se(3DAT): queue a software event carrying `pointer`.
    pub fn evd_post_se(&mut self, evd: &Evd<'id>, pointer: u64) -> DatResult<()> {
        self.provider.evd_post_se(evd.handle(), pointer)
    }

    /// dat_evd_query(3DAT).
    pub fn evd_query(&self, evd: &Evd<'id>) -> DatResult<EvdParam> {
        self.provider.evd_query(evd.handle(), EVD_FIELD_ALL)
    }

    /// dat_evd_resize(3DAT).
    pub fn evd_resize(&mut self, evd: &Evd<'id>, min_qlen: u32) -> DatResult<()> {
        self.provider.evd_resize(evd.handle(), min_qlen)
    }

    /// dat_evd_modify_cno(3DAT): tie `evd` to `cno`, or to none.
    pub fn evd_modify_cno(&mut self, evd: &Evd<'id>, cno: Option<&Cno<'id>>) -> DatResult<()> {
        self.provider.evd_modify_cno(evd.handle(), cno.map_or(CnoHandle::NULL, Cno::handle))
    }

    /// dat_evd_enable(3DAT).
    pub fn evd_enable(&mut self, evd: &Evd<'id>) -> DatResult<()> {
        self.provider.evd_enable(evd.handle())
    }

    /// dat_evd_disable(3DAT).
    pub fn evd_disable(&mut self, evd: &Evd<'id>) -> DatResult<()> {
        self.provider.evd_disable(evd.handle())
    }

    /// dat_evd_set_unwaitable(3DAT).
    pub fn evd_set_unwaitable(&mut self, evd: &Evd<'id>) -> DatResult<()> {
        self.provider.evd_set_unwaitable(evd.handle())
    }

    /// dat_evd_clear_unwaitable(3DAT).
    pub fn evd_clear_unwaitable(&mut self, evd: &Evd<'id>) -> DatResult<()> {
        self.provider.evd_clear_unwaitable(evd.handle())
    }

    /// dat_cno_create(3DAT), with no proxy agent.
    pub fn cno_create(&mut self) -> DatResult<Cno<'id>> {
        self.provider.cno_create(self.ia, None).map(Cno::new)
    }

    /// DAT 2.0's `dat_cno_fd_create`: a CNO, and a descriptor that is
    /// readable when it may have been triggered, for an event loop to
    /// sleep on. When it is, [`Ia::cno_trigger`] says which EVD triggered
    /// the CNO, or `DAT_QUEUE_EMPTY` when the wake-up was the transport's
    /// for another CNO. The descriptor is the IA's: it stays open until
    /// [`Ia::cno_free`] or the close of the IA.
    ///
    /// A transport with no descriptors (the mock) is
    /// `DAT_NOT_IMPLEMENTED`; a descriptor the system refuses is
    /// `DAT_INSUFFICIENT_RESOURCES`.
    pub fn cno_fd_create(&mut self) -> DatResult<(Cno<'id>, RawFd)> {
        let transport = self.provider.wait_fds(self.ia)?;
        if transport.is_empty() {
            return Err(DatError::of(ErrorType::NotImplemented));
        }
        let notifier = Notifier::new(transport).map_err(|_| DatError::of(ErrorType::InsufficientResources))?;
        let cno = self.provider.cno_create(self.ia, None)?;
        if let Err(e) = self.provider.cno_signal(cno, Some(notifier.signal())) {
            let _ = self.provider.cno_free(cno);
            return Err(e);
        }
        let fd = notifier.fd();
        self.notifiers.push((cno, notifier));
        Ok((Cno::new(cno), fd))
    }

    /// dat_cno_free(3DAT), closing the descriptor of a CNO made by
    /// [`Ia::cno_fd_create`]: refused (`DAT_INVALID_STATE`) while an EVD is
    /// tied to it.
    pub fn cno_free(&mut self, cno: Cno<'id>) -> Result<(), Refused<Cno<'id>>> {
        if let Err(e) = self.provider.cno_free(cno.handle()) {
            return Err(Refused::new(e, cno));
        }
        // The CNO is gone, and its signal with it: the descriptors may go.
        self.notifiers.retain(|(c, _)| *c != cno.handle());
        Ok(())
    }

    /// dat_cno_wait(3DAT): the EVD that triggered `cno`, within
    /// `timeout_us`.
    pub fn cno_wait(&mut self, cno: &Cno<'id>, timeout_us: u32) -> DatResult<EvdHandle> {
        self.provider.cno_wait(cno.handle(), timeout_us)
    }

    /// DAT 2.0's `dat_cno_trigger`: pull the transport, and the EVD that
    /// triggered `cno` since the last call, or `DAT_QUEUE_EMPTY`.
    pub fn cno_trigger(&mut self, cno: &Cno<'id>) -> DatResult<EvdHandle> {
        self.provider.cno_trigger(cno.handle())
    }

    /// dat_cno_query(3DAT).
    pub fn cno_query(&self, cno: &Cno<'id>) -> DatResult<CnoParam> {
        self.provider.cno_query(cno.handle(), CNO_FIELD_ALL)
    }
}
