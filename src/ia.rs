//! The Interface Adapter: dat_ia_open(3DAT), dat_ia_close(3DAT),
//! dat_ia_query(3DAT); and its Protection Zones: dat_pz_create(3DAT),
//! dat_pz_free(3DAT), dat_pz_query(3DAT).

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use udat_core::types::{CloseFlags, IaAttr};
use udat_core::{
    AsyncEvd, DatResult, EpHandle, EvdHandle, IaHandle, Inline, LmrHandle, Named, Provider, PzParam, Storage,
    PZ_FIELD_ALL,
};

use crate::memory::Buffer;
use crate::object::{Brand, Ep, Evd, Pz, Refused};
use crate::post::Lent;
use crate::Backend;
use udat_wake::notify::Notifier;

/// An open Interface Adapter and everything created on it.
///
/// `'id` is the IA's brand: [`Ia::open`] runs a closure on a new one, and
/// every object the IA makes carries it, so the compiler keeps the objects
/// of one IA out of the calls of another and inside the closure. `S` is
/// where the objects and events live: by default [`Inline`] room for 64
/// objects of each kind and 1,024 queued events, fixed at compile time;
/// any [`Storage`] with [`Ia::open_in`]. Nothing is allocated after the
/// open but the IA's records of memory and of DTOs in flight, which grow to
/// the most the program had at once.
///
/// Dropping the IA closes it abruptly if [`Ia::close`] did not (every
/// object left freed, all memory deregistered), and only then drops the
/// memory it held. Kept memory ([`Seg`](crate::Seg)s) lives until `open`
/// returns, whatever was freed before.
pub struct Ia<'id, B: Backend, S: Storage = Inline<64, 1024>> {
    pub(crate) provider: Box<Provider<B, S>>,
    pub(crate) ia: IaHandle,
    async_evd: Evd<'id>,
    /// Whether [`Ia::close`] has not closed it: what dropping it reads.
    open: bool,
    /// The descriptors of the CNOs made by [`Ia::cno_fd_create`].
    pub(crate) notifiers: Vec<(udat_core::CnoHandle, Notifier)>,
    /// The memory given up to every live LMR.
    pub(crate) memory: Vec<(LmrHandle, Buffer)>,
    /// Kept memory, which [`Ia::open`] holds too.
    pub(crate) kept: Arc<Mutex<Kept>>,
    /// The DTOs in flight that write local memory.
    pub(crate) lent: Lent<'id>,
    /// The segment the last such DTO's completion gave back.
    pub(crate) returned: Option<crate::Seg<'id>>,
    _brand: Brand<'id>,
}

impl<B: Backend> Ia<'_, B> {
    /// dat_ia_open(3DAT): open the IA `name` of `backend`, with a provider
    /// async EVD of at least `async_evd_qlen` events, and run `with` on it.
    ///
    /// `with` owns the IA, which is closed abruptly when dropped unless
    /// [`Ia::close`] closed it. Every object of it is branded with the
    /// lifetime `'id` of this call, so none can leave `with` or reach
    /// another IA. What `with` returns is returned; a refused open is its
    /// error.
    ///
    /// ```
    /// use udat::{CloseFlags, Ia};
    /// use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
    ///
    /// let name = Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
    ///     let name = ia.ia_query()?.adapter_name;
    ///     ia.close(CloseFlags::Graceful)?;
    ///     Ok(name)
    /// })?;
    /// # let _ = name;
    /// # Ok::<(), udat::DatError>(())
    /// ```
    pub fn open<R>(
        backend: B,
        name: &[u8],
        async_evd_qlen: u32,
        with: impl for<'id> FnOnce(Ia<'id, B>) -> DatResult<R>,
    ) -> DatResult<R> {
        Ia::open_in(backend, Inline, name, async_evd_qlen, with)
    }
}

impl<B: Backend, S: Storage> Ia<'_, B, S> {
    /// [`Ia::open`], with the objects and events in `storage`: running out
    /// of room is `DAT_INSUFFICIENT_RESOURCES`.
    ///
    /// ```
    /// use udat::{ErrorType, Ia, Inline};
    /// use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
    ///
    /// // Two objects of each kind, 16 events.
    /// Ia::open_in(MockBackend::new(), Inline::<2, 16>, MOCK_IA_NAME, 4, |mut ia| {
    ///     let _a = ia.pz_create()?;
    ///     let _b = ia.pz_create()?;
    ///     assert_eq!(ia.pz_create().unwrap_err().error_type(), ErrorType::InsufficientResources);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), udat::DatError>(())
    /// ```
    pub fn open_in<R>(
        backend: B,
        storage: S,
        name: &[u8],
        async_evd_qlen: u32,
        with: impl for<'id> FnOnce(Ia<'id, B, S>) -> DatResult<R>,
    ) -> DatResult<R> {
        // Built in its box: an inline storage is too large to pass
        // through the stack of a thread in a debug build.
        let mut slot = Box::new_uninit();
        Provider::init_in(&mut slot, backend, storage);
        // SAFETY: `init_in` wrote the whole provider.
        let mut provider: Box<Provider<B, S>> = unsafe { slot.assume_init() };
        let (ia, async_evd) = provider.ia_open(name, AsyncEvd::Create { min_qlen: async_evd_qlen })?;
        let kept = Arc::new(Mutex::new(Kept::default()));
        let done = with(Ia {
            provider,
            ia,
            async_evd: Evd::new(async_evd),
            open: true,
            notifiers: Vec::new(),
            memory: Vec::new(),
            kept: Arc::clone(&kept),
            lent: Lent::default(),
            returned: None,
            _brand: PhantomData,
        });
        // No `Seg` of the IA's brand is left: its kept memory may go.
        drop(kept);
        done
    }
}

impl<'id, B: Backend, S: Storage> Ia<'id, B, S> {
    /// The IA's DAT handle, as events and queries name it.
    pub fn handle(&self) -> IaHandle {
        self.ia
    }

    /// The async EVD `open` created.
    pub fn async_evd(&self) -> &Evd<'id> {
        &self.async_evd
    }

    /// The transport, to read its state.
    pub fn backend(&self) -> &B {
        self.provider.backend()
    }

    /// dat_ia_query(3DAT): the IA's attributes.
    pub fn ia_query(&self) -> DatResult<IaAttr> {
        Ok(self.provider.ia_query(self.ia)?.1)
    }

    /// dat_ia_close(3DAT). A close takes the IA: no call can follow it,
    /// on the IA or on any of its objects. A refused graceful close hands
    /// the IA back with every object intact ([`Refused`]). The memory the
    /// IA held is dropped when [`Ia::open`] returns.
    ///
    /// ```compile_fail
    /// use udat::{CloseFlags, Ia};
    /// use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
    ///
    /// Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
    ///     let pz = ia.pz_create()?;
    ///     ia.close(CloseFlags::Abrupt)?;
    ///     ia.pz_free(pz)?; // the IA is gone
    ///     Ok(())
    /// })?;
    /// # Ok::<(), udat::DatError>(())
    /// ```
    // The refusal hands the IA itself back, as a refused free hands back
    // its object; a close is no hot call, and its error is rare.
    #[allow(clippy::result_large_err)]
    pub fn close(mut self, flags: CloseFlags) -> Result<(), Refused<Self>> {
        if let Err(e) = self.provider.ia_close(self.ia, flags) {
            return Err(Refused::new(e, self));
        }
        self.open = false;
        // The CNOs went with the IA: their descriptors may close.
        self.notifiers.clear();
        Ok(())
    }

    /// `ep` named to the core for a hot call, vouched for.
    #[inline(always)]
    pub(crate) fn ep_named(&self, ep: &Ep<'id>) -> Named<EpHandle> {
        // SAFETY: an `Ep<'id>` stands for a live EP of this IA's provider,
        // of its handle's generation: only `ep_create*` make one, only
        // `ep_free` frees the EP, and it takes the object (a refused free
        // hands it back with the EP intact); the brand `'id` keeps another
        // IA's objects out; and only `close` frees objects otherwise, which
        // takes the IA, so no call is made through it after.
        unsafe { Named::vouched(ep.handle(), true) }
    }

    /// `evd` named to the core for a hot call, as [`Ia::ep_named`].
    #[inline(always)]
    pub(crate) fn evd_named(&self, evd: &Evd<'id>) -> Named<EvdHandle> {
        // SAFETY: as in `ep_named`: only `evd_create` makes an `Evd<'id>`
        // (and `open`, the async EVD, which the IA keeps and lends), and
        // only `evd_free`, which takes it, or `close` frees the EVD.
        unsafe { Named::vouched(evd.handle(), true) }
    }

    /// dat_pz_create(3DAT).
    pub fn pz_create(&mut self) -> DatResult<Pz<'id>> {
        self.provider.pz_create(self.ia).map(Pz::new)
    }

    /// dat_pz_free(3DAT): refused (`DAT_INVALID_STATE`) while an EP, LMR,
    /// RMR or SRQ uses the PZ.
    pub fn pz_free(&mut self, pz: Pz<'id>) -> Result<(), Refused<Pz<'id>>> {
        self.provider.pz_free(pz.handle()).map_err(|e| Refused::new(e, pz))
    }

    /// dat_pz_query(3DAT).
    pub fn pz_query(&self, pz: &Pz<'id>) -> DatResult<PzParam> {
        self.provider.pz_query(pz.handle(), PZ_FIELD_ALL)
    }
}

impl<B: Backend, S: Storage> Drop for Ia<'_, B, S> {
    /// An IA still open is closed abruptly: every object it holds is
    /// destroyed in dependency order and every transport resource released,
    /// before the fields (the memory the IA held among them) are dropped.
    fn drop(&mut self) {
        if self.open {
            // The handle is this IA's own and still open: the abrupt close
            // cannot be refused.
            if self.provider.ia_close(self.ia, CloseFlags::Abrupt).is_err() {
                // Never so, but were the memory still registered, the
                // transport could write it after it is freed: keep it.
                std::mem::forget(std::mem::take(&mut self.memory));
                return;
            }
        }
        lock(&self.kept).deregistered = true;
    }
}

impl<B: Backend, S: Storage> core::fmt::Debug for Ia<'_, B, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ia").field("ia", &self.ia).field("provider", &self.provider).finish_non_exhaustive()
    }
}

/// The kept memory of an IA: the buffers its `Seg`s point into. The IA and
/// [`Ia::open`] both hold it, so it outlives every `Seg` (none outlives
/// `open`'s closure) and is dropped after the IA.
#[derive(Default)]
pub(crate) struct Kept {
    pub(crate) buffers: Vec<Buffer>,
    /// Whether the IA was closed: until then its registrations may be
    /// live, however the IA went (`mem::forget` included).
    deregistered: bool,
}

impl Drop for Kept {
    fn drop(&mut self) {
        if !self.deregistered {
            // The transport could still write it: never free it.
            std::mem::forget(std::mem::take(&mut self.buffers));
        }
    }
}

/// The kept memory, whoever panicked while holding it.
pub(crate) fn lock(kept: &Mutex<Kept>) -> std::sync::MutexGuard<'_, Kept> {
    kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
