//! # udat
//!
//! A Rust implementation of the DAT/uDAPL RDMA API (Direct Access
//! Transport) for latency-critical trading and storage engines.
//!
//! The examples here run on the mock backend of udat's test kit; a
//! program opens a real transport the same way (`udat_verbs::Verbs` and a
//! device name such as `rxe0`):
//!
//! ```
//! use udat::{Ia, CloseFlags, EvdFlags, CnoHandle};
//! use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
//!
//! let mut ia: Ia<MockBackend> = Ia::open(MockBackend::new(), MOCK_IA_NAME, 8)?;
//! let h = ia.handle();
//! let pz = ia.pz_create(h)?;
//! let evd = ia.evd_create(h, 16, CnoHandle::NULL, EvdFlags::SOFTWARE)?;
//! ia.evd_post_se(evd, 7)?;
//! assert_eq!(ia.evd_dequeue(evd)?.data, udat::EventData::Software { pointer: 7 });
//! ia.evd_free(evd)?;
//! ia.pz_free(pz)?;
//! ia.close(CloseFlags::Graceful).map_err(|(_, e)| e)?;
//! # Ok::<(), udat::DatError>(())
//! ```
//!
//! [`Ia`] is an open Interface Adapter: it owns the provider that holds
//! every DAT object of the IA, closes it abruptly when dropped (nothing
//! leaks), and gives the whole DAT API through `Deref` to
//! [`udat_core::Provider`], whose methods are named for the DAT calls and
//! cite their man pages. Every call returns `Result<_, DatError>`; the
//! error carries the exact `DAT_RETURN` of `<dat2/dat_error.h>`.
//!
//! Handles are plain values, checked on every use: a handle whose object
//! was freed is refused with `DAT_INVALID_HANDLE`, even after its slot
//! holds a new object. They are meaningful only to the `Ia` that made them.

#![warn(missing_docs)]

use core::ops::{Deref, DerefMut};

pub use udat_core::backend::{self, Backend};
pub use udat_core::types::*;
pub use udat_core::*;

#[cfg(feature = "tokio")]
pub mod aio;
pub mod notify;

use notify::Notifier;

/// An open Interface Adapter and everything created on it.
///
/// `S` is where its objects and events live: by default [`Inline`] room
/// for 64 objects of each kind and 1,024 queued events, fixed at compile
/// time (`Ia<B, Inline<N, E>>` for other sizes), or any [`Storage`] given
/// to [`Ia::open_in`]. Nothing is allocated after the open.
pub struct Ia<B: Backend, S: Storage = Inline<64, 1024>> {
    provider: Box<Provider<B, S>>,
    ia: IaHandle,
    async_evd: EvdHandle,
    open: bool,
    /// The descriptors of the CNOs made by [`Ia::cno_fd_create`].
    notifiers: Vec<(CnoHandle, Notifier)>,
}

impl<B: Backend, S: Storage> Ia<B, S> {
    /// dat_ia_open(3DAT): open the IA `name` of `backend`, with a provider
    /// async EVD of at least `async_evd_qlen` events.
    pub fn open(backend: B, name: &[u8], async_evd_qlen: u32) -> DatResult<Self>
    where
        S: Default,
    {
        Self::open_in(backend, S::default(), name, async_evd_qlen)
    }

    /// [`Ia::open`], with the objects and events in `storage`: running out
    /// of room is `DAT_INSUFFICIENT_RESOURCES`.
    ///
    /// ```
    /// use udat::{ErrorType, Ia, Inline};
    /// use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
    ///
    /// // Two objects of each kind, 16 events.
    /// let mut ia = Ia::open_in(MockBackend::new(), Inline::<2, 16>, MOCK_IA_NAME, 4)?;
    /// let h = ia.handle();
    /// ia.pz_create(h)?;
    /// ia.pz_create(h)?;
    /// assert_eq!(ia.pz_create(h).unwrap_err().error_type(), ErrorType::InsufficientResources);
    /// # Ok::<(), udat::DatError>(())
    /// ```
    pub fn open_in(backend: B, storage: S, name: &[u8], async_evd_qlen: u32) -> DatResult<Self> {
        let mut provider = Box::new(Provider::with_storage(backend, storage));
        let (ia, async_evd) = provider.ia_open(name, AsyncEvd::Create { min_qlen: async_evd_qlen })?;
        Ok(Ia { provider, ia, async_evd, open: true, notifiers: Vec::new() })
    }

    /// The IA's handle, for the calls that take one.
    pub fn handle(&self) -> IaHandle {
        self.ia
    }

    /// The async EVD `open` created.
    pub fn async_evd(&self) -> EvdHandle {
        self.async_evd
    }

    /// DAT 2.0's `dat_cno_fd_create`: a CNO, and a descriptor that is
    /// readable when it may have been triggered, for an event loop to
    /// sleep on. When it is, [`Provider::cno_trigger`] says which EVD
    /// triggered the CNO, or `DAT_QUEUE_EMPTY` when the wake-up was the
    /// transport's for another CNO. The descriptor is the IA's: it stays
    /// open until [`Ia::cno_free`] or the close of the IA.
    ///
    /// A transport with no descriptors (the mock) is
    /// `DAT_NOT_IMPLEMENTED`; a descriptor the system refuses is
    /// `DAT_INSUFFICIENT_RESOURCES`.
    pub fn cno_fd_create(&mut self) -> DatResult<(CnoHandle, std::os::fd::RawFd)> {
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
        Ok((cno, fd))
    }

    /// dat_cno_free(3DAT), closing the descriptor of a CNO made by
    /// [`Ia::cno_fd_create`].
    pub fn cno_free(&mut self, cno: CnoHandle) -> DatResult<()> {
        self.provider.cno_free(cno)?;
        // The CNO is gone, and its signal with it: the descriptors may go.
        self.notifiers.retain(|(c, _)| *c != cno);
        Ok(())
    }

    /// dat_ia_close(3DAT). A refused graceful close gives the IA back with
    /// the error, every object intact.
    pub fn close(mut self, flags: CloseFlags) -> Result<(), (Self, DatError)> {
        match self.provider.ia_close(self.ia, flags) {
            Ok(()) => {
                self.open = false;
                // The CNOs went with the IA: their descriptors may close.
                self.notifiers.clear();
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl<B: Backend, S: Storage> Drop for Ia<B, S> {
    /// An IA still open is closed abruptly: every object it holds is
    /// destroyed in dependency order and every transport resource released.
    fn drop(&mut self) {
        if self.open {
            // The handle is this IA's own and still open: the abrupt close
            // cannot be refused.
            let _ = self.provider.ia_close(self.ia, CloseFlags::Abrupt);
        }
    }
}

impl<B: Backend, S: Storage> Deref for Ia<B, S> {
    type Target = Provider<B, S>;

    fn deref(&self) -> &Self::Target {
        &self.provider
    }
}

impl<B: Backend, S: Storage> DerefMut for Ia<B, S> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.provider
    }
}

impl<B: Backend, S: Storage> core::fmt::Debug for Ia<B, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ia").field("ia", &self.ia).field("provider", &self.provider).finish()
    }
}
