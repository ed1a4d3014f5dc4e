//! How an object joins and leaves the lists of the IA that owns it
//! ([`Owned`]), kind by kind through the slabs' slots, so that the calls
//! that must find an IA's objects visit its own and never walk a slab:
//! dat_ia_close(3DAT) counts them (graceful) or frees them (abrupt), a
//! connection request finds its PSP, a new service point checks its
//! qualifier, a CNO finds its EVDs.

use crate::backend::Backend;
use crate::counts::ia;
use crate::handle::{IaHandle, RawHandle};
use crate::object::ia::{Ia, Owned};
use crate::slab::{Members, Slab, Slot};
use crate::store::Store;

/// An object that belongs to one IA for its whole life.
pub(crate) trait OfIa {
    /// The IA it belongs to.
    fn ia(&self) -> IaHandle;
    /// Its kind's list among what an IA owns.
    fn list(owned: &mut Owned) -> &mut Members;
    /// The IA's counters of its kind's creation and free, if it has them
    /// (`DCNT_IA_*_CREATE`, `DCNT_IA_*_FREE`).
    const COUNTED: Option<(ia::Counter, ia::Counter)> = None;
    /// Count with its IA, or not: an EP's and an EVD's counters follow
    /// the IA's ([`crate::call::counters`]).
    fn follow(&mut self, _counting: bool) {}
}

/// Store `value` in `slab`, listed among the objects of its IA, where
/// the slab puts it. `Err` gives it back when the IA is not open or there
/// is no room.
#[inline]
pub(crate) fn insert<B: Backend, T: OfIa, SI, S>(
    ias: &mut Slab<Ia<B>, SI>,
    slab: &mut Slab<T, S>,
    value: T,
) -> Result<RawHandle, T>
where
    SI: Store<Slot<Ia<B>>>,
    S: Store<Slot<T>>,
{
    let Some(ia) = ias.get_mut(value.ia().0) else { return Err(value) };
    let mut value = value;
    value.follow(ia.counting);
    let inserted = slab.insert_member(T::list(&mut ia.owned), value);
    if inserted.is_ok() {
        count_created::<B, T>(ia);
    }
    inserted
}

/// Store the object `make` makes from `part` in slot `index` of keyed
/// `slab`, listed among the objects of IA `ia`, which the object names:
/// it is built in its slot, not moved there whole. `Err(part)` when the
/// IA is not open or the slot is not free.
#[inline(always)]
pub(crate) fn insert_at<B: Backend, T: OfIa, SI, S, A>(
    ias: &mut Slab<Ia<B>, SI>,
    slab: &mut Slab<T, S>,
    ia: IaHandle,
    index: u32,
    part: A,
    make: impl FnOnce(A) -> T,
) -> Result<RawHandle, A>
where
    SI: Store<Slot<Ia<B>>>,
    S: Store<Slot<T>>,
{
    let Some(ia) = ias.get_mut(ia.0) else { return Err(part) };
    let counting = ia.counting;
    let inserted = slab.insert_member_at(
        T::list(&mut ia.owned),
        index,
        part,
        #[inline(always)]
        |part| {
            let mut value = make(part);
            value.follow(counting);
            value
        },
    );
    if inserted.is_ok() {
        count_created::<B, T>(ia);
    }
    inserted
}

/// An object of `T` made in `ia`: its counter, if the IA counts.
#[inline(always)]
fn count_created<B: Backend, T: OfIa>(ia: &mut Ia<B>) {
    if let (true, Some((created, _))) = (ia.counting, T::COUNTED) {
        ia.counts.bump(created as usize);
    }
}

/// Take the object `h` names out of `slab` and out of its IA's list.
/// (An object never outlives its IA: dat_ia_close frees them first.)
#[inline]
pub(crate) fn remove<B: Backend, T: OfIa, SI, S>(
    ias: &mut Slab<Ia<B>, SI>,
    slab: &mut Slab<T, S>,
    h: RawHandle,
) -> Option<T>
where
    SI: Store<Slot<Ia<B>>>,
    S: Store<Slot<T>>,
{
    let ia = ias.get_mut(slab.get(h)?.ia().0)?;
    let removed = slab.remove_member(T::list(&mut ia.owned), h);
    if let (Some(_), true, Some((_, freed))) = (&removed, ia.counting, T::COUNTED) {
        ia.counts.bump(freed as usize);
    }
    removed
}

/// `OfIa` for object types whose `ia` field names their IA.
macro_rules! of_ia {
    ($($module:ident::$ty:ident => $list:ident $(, $created:ident / $freed:ident)?);* $(;)?) => {$(
        impl<B: Backend> OfIa for crate::object::$module::$ty<B> {
            fn ia(&self) -> IaHandle {
                self.ia
            }
            fn list(owned: &mut Owned) -> &mut Members {
                &mut owned.$list
            }
            $(const COUNTED: Option<(ia::Counter, ia::Counter)> = Some((ia::Counter::$created, ia::Counter::$freed));)?
        }
    )*};
}

of_ia! {
    pz::Pz => pzs, PZ_CREATE / PZ_FREE;
    lmr::Lmr => lmrs, LMR_CREATE / LMR_FREE;
    rmr::Rmr => rmrs, RMR_CREATE / RMR_FREE;
    psp::Psp => psps, PSP_CREATE / PSP_FREE;
    rsp::Rsp => rsps, RSP_CREATE / RSP_FREE;
    cr::Cr => crs;
    srq::Srq => srqs, SRQ_CREATE / SRQ_FREE;
}

impl<C> OfIa for crate::object::evd::Evd<C> {
    fn ia(&self) -> IaHandle {
        self.ia
    }
    fn list(owned: &mut Owned) -> &mut Members {
        &mut owned.evds
    }
    const COUNTED: Option<(ia::Counter, ia::Counter)> = Some((ia::Counter::EVD_CREATE, ia::Counter::EVD_FREE));
    fn follow(&mut self, counting: bool) {
        self.set_counting(counting);
    }
}

impl<B: Backend> OfIa for crate::object::ep::Ep<B> {
    fn ia(&self) -> IaHandle {
        self.ia
    }
    fn list(owned: &mut Owned) -> &mut Members {
        &mut owned.eps
    }
    const COUNTED: Option<(ia::Counter, ia::Counter)> = Some((ia::Counter::EP_CREATE, ia::Counter::EP_FREE));
    fn follow(&mut self, counting: bool) {
        self.set_counting(counting);
    }
}

impl OfIa for crate::object::cno::Cno {
    fn ia(&self) -> IaHandle {
        self.ia
    }
    fn list(owned: &mut Owned) -> &mut Members {
        &mut owned.cnos
    }
}
