//! Posting DTOs: dat_ep_post_send(3DAT), dat_ep_post_rdma_write(3DAT),
//! dat_ep_post_rdma_read(3DAT), dat_ep_post_recv(3DAT),
//! dat_srq_post_recv(3DAT), and the IB extension's atomics and write with
//! immediate data.
//!
//! The rules and errors are the core's, unchanged; udat adds what makes
//! them safe. The segments are tokens of the IA's registrations
//! ([`Local`], [`Target`], [`Seg`]), never raw triplets. A DTO that
//! writes local memory (a receive, an RDMA read, an atomic) is recorded
//! in the IA's [`Lent`] table under a cookie of udat's: its completion
//! finds the record, gives the consumer's cookie back in the event and, for
//! a [`Seg`], the segment ([`Ia::take_seg`]). Such a DTO must complete with an event, so
//! `DAT_COMPLETION_SUPPRESS_FLAG` is refused on it (`DAT_INVALID_PARAMETER`
//! on the flags): without the event, nothing would say when the memory is
//! the program's again.

use udat_core::types::{CompletionFlags, DtoOp, RmrTriplet};
use udat_core::{DatError, DatResult, Door, EpHandle, EventData, Provider, RequestOp, Storage};

use crate::memory::{Local, Seg, Target};
use crate::object::{Ep, Refused, Srq};
use crate::{Backend, Ia};

/// The DTOs in flight that write local memory, by the cookie udat gave
/// the core for each: the consumer's cookie, and the [`Seg`] it took.
#[derive(Debug, Default)]
pub(crate) struct Lent<'id> {
    loans: Vec<Option<Loan<'id>>>,
    /// Indices of `loans` that hold nothing.
    free: Vec<usize>,
}

#[derive(Debug)]
pub(crate) struct Loan<'id> {
    pub(crate) cookie: u64,
    pub(crate) seg: Option<Seg<'id>>,
    /// The EP, and its stream (`true` for the receive stream), whose
    /// dequeue lane the DTO holds ([`Provider::ep_hold_lane`]): a lane
    /// would hand its completion over with udat's cookie in it. None for
    /// an SRQ's receive, whose completions no lane takes.
    pub(crate) lane: Option<(EpHandle, bool)>,
}

impl<'id> Lent<'id> {
    /// Record a DTO; the cookie to post it with.
    fn lend(&mut self, loan: Loan<'id>) -> u64 {
        match self.free.pop() {
            Some(i) => {
                self.loans[i] = Some(loan);
                i as u64
            }
            None => {
                self.loans.push(Some(loan));
                (self.loans.len() - 1) as u64
            }
        }
    }

    /// Give the DTO posted with `key` the segment it writes.
    fn attach(&mut self, key: u64, seg: Seg<'id>) {
        if let Some(Some(loan)) = self.loans.get_mut(key as usize) {
            loan.seg = Some(seg);
        }
    }

    /// The record of the DTO posted with `key`, now complete.
    fn give_back(&mut self, key: u64) -> Option<Loan<'id>> {
        let i = usize::try_from(key).ok()?;
        let loan = self.loans.get_mut(i)?.take()?;
        self.free.push(i);
        Some(loan)
    }

    /// The record of the DTO a completion of `data` completes, with the
    /// consumer's cookie put back in its place.
    pub(crate) fn complete(&mut self, data: &mut EventData) -> Option<Loan<'id>> {
        let EventData::Dto { op, cookie, .. } = data else { return None };
        if !writes_local(*op) {
            return None;
        }
        let loan = self.give_back(*cookie)?;
        *cookie = loan.cookie;
        Some(loan)
    }
}

/// Whether a DTO of `op` writes the local memory it names.
const fn writes_local(op: DtoOp) -> bool {
    op.is_recv() || matches!(op, DtoOp::RdmaRead | DtoOp::FetchAdd | DtoOp::CompareSwap)
}

/// `flags` for a DTO that writes local memory: refused, as the flags
/// argument `n`, when they suppress its completion.
fn completing(flags: CompletionFlags, n: u8) -> DatResult<CompletionFlags> {
    if flags.contains(CompletionFlags::SUPPRESS) {
        return Err(DatError::invalid_arg(n));
    }
    Ok(flags)
}

impl<'id, B: Backend, S: Storage> Ia<'id, B, S> {
    /// dat_ep_post_send(3DAT) of `iov`.
    #[inline(always)]
    pub fn ep_post_send(
        &mut self,
        ep: &Ep<'id>,
        iov: &[Local<'_, 'id>],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.provider.ep_post_request(self.ep_named(ep), Local::triplets(iov), cookie, RequestOp::Send, flags)
    }

    /// dat_ep_post_rdma_write(3DAT): `iov` into the peer's `remote`.
    #[inline(always)]
    pub fn ep_post_rdma_write(
        &mut self,
        ep: &Ep<'id>,
        iov: &[Local<'_, 'id>],
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.provider.ep_post_request(
            self.ep_named(ep),
            Local::triplets(iov),
            cookie,
            RequestOp::RdmaWrite { remote: *remote },
            flags,
        )
    }

    /// `dat_ib_post_rdma_write_immed`: `iov` into the peer's `remote`, and
    /// `imm` to the receive it consumes.
    #[inline(always)]
    pub fn ep_post_rdma_write_imm(
        &mut self,
        ep: &Ep<'id>,
        iov: &[Local<'_, 'id>],
        cookie: u64,
        remote: &RmrTriplet,
        imm: u32,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.provider.ep_post_request(
            self.ep_named(ep),
            Local::triplets(iov),
            cookie,
            RequestOp::RdmaWriteImm { remote: *remote, imm },
            flags,
        )
    }

    /// dat_ep_post_recv(3DAT) into `iov`, memory given up to the IA.
    pub fn ep_post_recv(
        &mut self,
        ep: &Ep<'id>,
        iov: &[Target<'_, 'id>],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let iov = Target::triplets(iov);
        self.lent_post(cookie, Some((ep.handle(), true)), |p, key| p.ep_post_recv(ep.handle(), iov, key, flags))
            .map(drop)
    }

    /// dat_ep_post_recv(3DAT) into `seg`, which its completion gives back
    /// ([`Ia::take_seg`]); a refused post gives it back at once.
    ///
    /// ```
    /// # use udat::*;
    /// # use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
    /// # Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
    /// # let (pz, other_pz) = (ia.pz_create()?, ia.pz_create()?);
    /// # let dto = ia.evd_create(8, None, EvdFlags::DTO)?;
    /// let ep = ia.ep_create(&other_pz, &dto, &dto, None, None)?;
    /// let (_lmr, seg) = ia.lmr_create_seg(vec![0u8; 256], &pz)?;
    /// // The LMR is of another PZ than the EP: the receive is refused
    /// // (dat_ep_post_recv(3DAT)), and the segment comes back.
    /// let refused = ia.ep_post_recv_seg(&ep, seg, 1, CompletionFlags::DEFAULT).unwrap_err();
    /// assert_eq!(refused.error.error_type(), ErrorType::ProtectionViolation);
    /// assert_eq!(refused.object.len(), 256);
    /// # Ok(()) })?;
    /// # Ok::<(), DatError>(())
    /// ```
    pub fn ep_post_recv_seg(
        &mut self,
        ep: &Ep<'id>,
        seg: Seg<'id>,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<(), Refused<Seg<'id>>> {
        let iov = [seg.triplet()];
        self.seg_post(cookie, Some((ep.handle(), true)), seg, |p, key| p.ep_post_recv(ep.handle(), &iov, key, flags))
    }

    /// dat_ep_post_rdma_read(3DAT): the peer's `remote` into `iov`, memory
    /// given up to the IA.
    pub fn ep_post_rdma_read(
        &mut self,
        ep: &Ep<'id>,
        iov: &[Target<'_, 'id>],
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let (iov, flags) = (Target::triplets(iov), completing(flags, 6)?);
        self.lent_post(cookie, Some((ep.handle(), false)), |p, key| {
            p.ep_post_request(ep.handle(), iov, key, RequestOp::RdmaRead { remote: *remote }, flags)
        })
        .map(drop)
    }

    /// dat_ep_post_rdma_read(3DAT): the peer's `remote` into `seg`, which
    /// its completion gives back ([`Ia::take_seg`]); a refused post gives
    /// it back at once.
    pub fn ep_post_rdma_read_seg(
        &mut self,
        ep: &Ep<'id>,
        seg: Seg<'id>,
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> Result<(), Refused<Seg<'id>>> {
        let flags = match completing(flags, 6) {
            Ok(flags) => flags,
            Err(e) => return Err(Refused::new(e, seg)),
        };
        let iov = [seg.triplet()];
        self.seg_post(cookie, Some((ep.handle(), false)), seg, |p, key| {
            p.ep_post_request(ep.handle(), &iov, key, RequestOp::RdmaRead { remote: *remote }, flags)
        })
    }

    /// `dat_ib_post_fetch_and_add`: add `add` to the peer's 8 bytes at
    /// `remote`, their old value into `local`.
    pub fn ep_post_fetch_add(
        &mut self,
        ep: &Ep<'id>,
        add: u64,
        local: &Target<'_, 'id>,
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let (local, flags) = (local.triplet(), completing(flags, 6)?);
        self.lent_post(cookie, Some((ep.handle(), false)), |p, key| {
            p.ep_post_request(ep.handle(), &[local], key, RequestOp::FetchAdd { remote: *remote, add }, flags)
        })
        .map(drop)
    }

    /// `dat_ib_post_cmp_and_swap`: swap the peer's 8 bytes at `remote` for
    /// `swap` if they equal `compare`, their old value into `local`.
    #[allow(clippy::too_many_arguments)]
    pub fn ep_post_compare_swap(
        &mut self,
        ep: &Ep<'id>,
        compare: u64,
        swap: u64,
        local: &Target<'_, 'id>,
        cookie: u64,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let (local, flags) = (local.triplet(), completing(flags, 7)?);
        self.lent_post(cookie, Some((ep.handle(), false)), |p, key| {
            p.ep_post_request(
                ep.handle(),
                &[local],
                key,
                RequestOp::CompareSwap { remote: *remote, compare, swap },
                flags,
            )
        })
        .map(drop)
    }

    /// dat_srq_post_recv(3DAT) into `iov`, memory given up to the IA.
    pub fn srq_post_recv(&mut self, srq: &Srq<'id>, iov: &[Target<'_, 'id>], cookie: u64) -> DatResult<()> {
        let iov = Target::triplets(iov);
        self.lent_post(cookie, None, |p, key| p.srq_post_recv(srq.handle(), iov, key)).map(drop)
    }

    /// dat_srq_post_recv(3DAT) into `seg`, which its completion (on the EP
    /// that consumed the receive) gives back ([`Ia::take_seg`]).
    pub fn srq_post_recv_seg(&mut self, srq: &Srq<'id>, seg: Seg<'id>, cookie: u64) -> Result<(), Refused<Seg<'id>>> {
        let iov = [seg.triplet()];
        self.seg_post(cookie, None, seg, |p, key| p.srq_post_recv(srq.handle(), &iov, key))
    }

    /// Post a DTO that writes local memory under a cookie of the
    /// [`Lent`] table, holding the dequeue lane of `lane` (an EP and its
    /// stream) until it completes: the cookie; a refused post takes its
    /// record back.
    fn lent_post(
        &mut self,
        cookie: u64,
        lane: Option<(EpHandle, bool)>,
        post: impl FnOnce(&mut Provider<B, S>, u64) -> DatResult<()>,
    ) -> DatResult<u64> {
        let key = self.lent.lend(Loan { cookie, seg: None, lane });
        match post(&mut self.provider, key) {
            Ok(()) => {
                if let Some((ep, recv)) = lane {
                    // The post took the EP: it is live, and the hold cannot fail.
                    let held = self.provider.ep_hold_lane(ep, recv);
                    debug_assert!(held.is_ok());
                }
                Ok(key)
            }
            Err(e) => {
                self.lent.give_back(key);
                Err(e)
            }
        }
    }

    /// [`Ia::lent_post`] of a DTO that writes `seg`: the completion gives
    /// it back, or the refusal does at once.
    fn seg_post(
        &mut self,
        cookie: u64,
        lane: Option<(EpHandle, bool)>,
        seg: Seg<'id>,
        post: impl FnOnce(&mut Provider<B, S>, u64) -> DatResult<()>,
    ) -> Result<(), Refused<Seg<'id>>> {
        match self.lent_post(cookie, lane, post) {
            Ok(key) => {
                self.lent.attach(key, seg);
                Ok(())
            }
            Err(e) => Err(Refused::new(e, seg)),
        }
    }
}
