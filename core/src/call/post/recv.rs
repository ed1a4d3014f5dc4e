//! The exclusive door of a receive: dat_ep_post_recv(3DAT) and
//! dat_srq_post_recv(3DAT).

use super::rule::{check_recv, check_srq_recv, Checked, Refusal};
use crate::backend::{Backend, Sge, MAX_SGE};
use crate::error::{DatError, DatResult, Subtype};
use crate::handle::{EpHandle, SrqHandle};
use crate::object::ep::Ep;
use crate::object::lmr::Lmr;
use crate::object::srq::Srq;
use crate::provider::Provider;
use crate::slab::{Slab, SlotsOf};
use crate::storage::Storage;
use crate::store::FixedVec;
use crate::types::{CompletionFlags, LmrTriplet};

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_ep_post_recv(3DAT): "The operation is valid for all states of the
    /// Endpoint"; in Disconnected the receive is flushed at once. A receive
    /// of one segment tries its lane first ([`Provider::lane_recv`]). An EP that
    /// receives from an SRQ takes no receives of its own
    /// (dat_ep_create_with_srq(3DAT)).
    pub fn ep_post_recv(
        &mut self,
        h: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let raw = h.raw();
        if let [seg] = iov {
            if self.lane_recv(raw.index(), |g| g == raw.generation(), seg, cookie, flags) {
                return Ok(());
            }
        }
        self.ep_post_recv_ordinary(h, iov, cookie, flags)
    }

    /// dat_ep_post_recv(3DAT) without its lane, for a caller that has just
    /// tried the lane itself ([`Provider::lane_recv`]): every rule of the
    /// page, and the exact error.
    pub fn ep_post_recv_ordinary(
        &mut self,
        h: EpHandle,
        iov: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        let Provider { eps, lmrs, backend, ep_counts, .. } = self;
        let ep = eps.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleEp))?;
        let post = |qp: &mut B::Qp, sges: &[Sge]| backend.post_recv(qp, sges, cookie);
        recv_checked(
            ep,
            lmrs,
            iov,
            flags,
            post,
            #[cold]
            #[inline(never)]
            |bytes| ep_counts.posted_recv(h.0, bytes),
        )
    }

    /// dat_srq_post_recv(3DAT): valid in every SRQ state. A receive of
    /// one segment tries its lane first ([`Provider::lane_srq_recv`]).
    pub fn srq_post_recv(&mut self, h: SrqHandle, iov: &[LmrTriplet], cookie: u64) -> DatResult<()> {
        let raw = h.raw();
        if let [seg] = iov {
            if self.lane_srq_recv(raw.index(), |g| g == raw.generation(), seg, cookie) {
                return Ok(());
            }
        }
        self.srq_post_recv_ordinary(h, iov, cookie)
    }

    /// dat_srq_post_recv(3DAT) without its lane, for a caller that has
    /// just tried the lane itself: every rule of the page, and the exact
    /// error.
    pub fn srq_post_recv_ordinary(&mut self, h: SrqHandle, iov: &[LmrTriplet], cookie: u64) -> DatResult<()> {
        let Provider { srqs, lmrs, backend, .. } = self;
        let s = srqs.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleSrq))?;
        srq_recv_checked(s, lmrs, iov, |srq, sges| backend.srq_post_recv(srq, sges, cookie))
    }
}

/// A receive on `ep` judged by [`check_recv`] (each refusal its
/// `DAT_RETURN`), its segments translated through `lmrs`; then `post`
/// hands it to the transport, and an EP that counts hands `counted` its
/// bytes. The same code posts a receive through an exclusive provider and
/// through a shared one.
#[inline(always)]
pub(crate) fn recv_checked<B: Backend, L: SlotsOf<Lmr<B>>>(
    ep: &mut Ep<B>,
    lmrs: &Slab<Lmr<B>, L>,
    iov: &[LmrTriplet],
    flags: CompletionFlags,
    post: impl FnOnce(&mut B::Qp, &[Sge]) -> DatResult<()>,
    counted: impl FnOnce(u64),
) -> DatResult<()> {
    let Checked { sges, total } = check_recv::<_, _, FixedVec<Sge, MAX_SGE>>(ep, lmrs, iov, flags)?;
    let qp = ep.qp_mut().ok_or(Refusal::NotReady)?;
    post(qp, &sges)?;
    ep.recv_outstanding += 1;
    if ep.counting {
        counted(total);
    }
    Ok(())
}

/// A receive on the SRQ `s` judged by [`check_srq_recv`], its segments
/// translated through `lmrs`; then `post` hands it to the transport. The
/// same code posts a receive through an exclusive provider and through a
/// shared one.
#[inline(always)]
pub(crate) fn srq_recv_checked<B: Backend, L: SlotsOf<Lmr<B>>>(
    s: &mut Srq<B>,
    lmrs: &Slab<Lmr<B>, L>,
    iov: &[LmrTriplet],
    post: impl FnOnce(&mut B::Srq, &[Sge]) -> DatResult<()>,
) -> DatResult<()> {
    let Checked { sges, .. } = check_srq_recv::<_, _, FixedVec<Sge, MAX_SGE>>(s, lmrs, iov)?;
    post(&mut s.srq, &sges)?;
    s.outstanding += 1;
    Ok(())
}
