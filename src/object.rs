//! The typed objects of an IA, and what a refused free gives back.
//!
//! Each object is its handle with the IA's brand: the lifetime `'id` that
//! [`Ia::open`](crate::Ia::open) gives its closure, different for every
//! IA, so the compiler refuses an object of one IA in a call on another.
//! An object is not `Clone`: freeing it takes it, and a refused free hands
//! it back in [`Refused`]. Dropping one frees nothing by itself: the IA's
//! close does, as dat_ia_close(3DAT) says it destroys "all of the objects
//! of the IA".

use std::marker::PhantomData;

use udat_core::{
    CnoHandle, CrHandle, DatError, EpHandle, EvdHandle, PspHandle, PzHandle, RmrHandle, RspHandle, SrqHandle,
};

/// The brand of an IA: invariant in `'id`, so that two IAs' brands never
/// unify.
pub(crate) type Brand<'id> = PhantomData<fn(&'id ()) -> &'id ()>;

macro_rules! object {
    ($(#[$doc:meta])* $name:ident($handle:ty)) => {
        $(#[$doc])*
        #[derive(Debug, PartialEq, Eq)]
        pub struct $name<'id> {
            handle: $handle,
            _brand: Brand<'id>,
        }

        impl<'id> $name<'id> {
            pub(crate) fn new(handle: $handle) -> Self {
                $name { handle, _brand: PhantomData }
            }

            /// The DAT handle, to compare with those events carry.
            pub fn handle(&self) -> $handle {
                self.handle
            }
        }
    };
}

object!(
    /// A Protection Zone: dat_pz_create(3DAT).
    Pz(PzHandle)
);
object!(
    /// A Remote Memory Region: dat_rmr_create(3DAT).
    Rmr(RmrHandle)
);
object!(
    /// An Event Dispatcher: dat_evd_create(3DAT).
    Evd(EvdHandle)
);
object!(
    /// A Consumer Notification Object: dat_cno_create(3DAT).
    Cno(CnoHandle)
);
object!(
    /// An Endpoint: dat_ep_create(3DAT).
    Ep(EpHandle)
);
object!(
    /// A Public Service Point: dat_psp_create(3DAT).
    Psp(PspHandle)
);
object!(
    /// A Reserved Service Point: dat_rsp_create(3DAT).
    Rsp(RspHandle)
);
object!(
    /// A Shared Receive Queue: dat_srq_create(3DAT).
    Srq(SrqHandle)
);
object!(
    /// A Connection Request, from a `DAT_CONNECTION_REQUEST_EVENT`
    /// ([`Ia::cr_of`](crate::Ia::cr_of)).
    Cr(CrHandle)
);

/// A call that DAT refused, with what it was given back.
pub struct Refused<T> {
    /// The refusal: the `DAT_RETURN` of the call.
    pub error: DatError,
    /// What the call was given, intact.
    pub object: T,
}

impl<T> Refused<T> {
    pub(crate) fn new(error: DatError, object: T) -> Self {
        Refused { error, object }
    }
}

impl<T> From<Refused<T>> for DatError {
    fn from(r: Refused<T>) -> DatError {
        r.error
    }
}

impl<T> core::fmt::Debug for Refused<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Refused").field("error", &self.error).finish_non_exhaustive()
    }
}

impl<T> core::fmt::Display for Refused<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(&self.error, f)
    }
}

impl<T> std::error::Error for Refused<T> {}
