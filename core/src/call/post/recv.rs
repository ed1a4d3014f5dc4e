//! The ordinary receive: dat_ep_post_recv(3DAT) and dat_srq_post_recv(3DAT)
//! with every rule judged and the exact error, for both doors
//! ([`Door::ep_post_recv`](super::door::Door::ep_post_recv) and
//! [`Door::srq_post_recv`](super::door::Door::srq_post_recv)).

use super::door::Hand;
use super::rule::{check_recv, check_srq_recv, Checked, Refusal};
use crate::backend::{Backend, Sge, MAX_SGE};
use crate::error::DatResult;
use crate::handle::RawHandle;
use crate::object::ep::Ep;
use crate::object::lmr::Lmr;
use crate::object::srq::Srq;
use crate::slab::{Slab, SlotsOf};
use crate::store::FixedVec;
use crate::types::{CompletionFlags, LmrTriplet};

/// A receive with `cookie` on the EP `h`, `ep`, judged by [`check_recv`]
/// (each refusal its `DAT_RETURN`), its segments translated through
/// `lmrs`; then `hand` posts it, and an EP that counts hands its counters
/// the bytes. Out of line: the doors try the receive's lane first.
#[cold]
#[inline(never)]
pub(crate) fn recv_checked<B: Backend, L: SlotsOf<Lmr<B>>>(
    ep: &mut Ep<B>,
    h: RawHandle,
    lmrs: &Slab<Lmr<B>, L>,
    iov: &[LmrTriplet],
    flags: CompletionFlags,
    cookie: u64,
    mut hand: impl Hand<B>,
) -> DatResult<()> {
    let Checked { sges, total } = check_recv::<_, _, FixedVec<Sge, MAX_SGE>>(ep, lmrs, iov, flags)?;
    let qp = ep.qp_mut().ok_or(Refusal::NotReady)?;
    hand.post_recv(qp, &sges, cookie)?;
    ep.recv_room.take();
    if ep.counting {
        hand.posted_recv(h, total);
    }
    Ok(())
}

/// A receive with `cookie` on the SRQ `s`, judged by [`check_srq_recv`],
/// its segments translated through `lmrs`; then `hand` posts it. Out of
/// line, as [`recv_checked`].
#[cold]
#[inline(never)]
pub(crate) fn srq_recv_checked<B: Backend, L: SlotsOf<Lmr<B>>>(
    s: &mut Srq<B>,
    lmrs: &Slab<Lmr<B>, L>,
    iov: &[LmrTriplet],
    cookie: u64,
    mut hand: impl Hand<B>,
) -> DatResult<()> {
    let Checked { sges, .. } = check_srq_recv::<_, _, FixedVec<Sge, MAX_SGE>>(s, lmrs, iov)?;
    hand.srq_post_recv(&mut s.srq, &sges, cookie)?;
    s.outstanding += 1;
    Ok(())
}
