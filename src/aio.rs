//! Waiting from async Rust (the `tokio` feature): a CNO whose descriptor
//! is registered with tokio's reactor ([`AsyncCno`]), so a task awaits
//! an EVD's next event, a connection or a trigger without a thread of its
//! own and without polling. There is no hidden thread: the task that
//! awaits runs the provider's progress when the descriptor wakes it.
//!
//! ```no_run
//! # fn f<B: udat::Backend>(backend: B) -> udat::DatResult<()> {
//! # let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
//! udat::Ia::open(backend, b"mlx5_0", 8, |mut ia| {
//!     rt.block_on(async {
//!         let cno = ia.cno_async()?;
//!         let dto = ia.evd_create(16, Some(cno.cno()), udat::EvdFlags::DTO)?;
//!         let event = cno.event(&mut ia, &dto).await?;
//!         # let _ = event;
//!         Ok(())
//!     })
//! })
//! # }
//! ```

use std::cell::Cell;
use std::os::fd::{FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use udat_core::{DatError, DatResult, ErrorType, EvdHandle, EventNumber, Storage};

use crate::object::{Cno, Cr, Evd};
use crate::{Backend, Event, Ia};

/// A CNO an async task can await; see the module documentation. Tie the
/// EVDs to await to [`AsyncCno::cno`].
#[derive(Debug)]
pub struct AsyncCno<'id> {
    cno: Cno<'id>,
    /// A duplicate of the descriptor the IA owns: tokio's registration
    /// lives and dies with it, whatever becomes of the IA's copy.
    fd: AsyncFd<OwnedFd>,
    /// Times the descriptor woke a task.
    wakeups: Cell<u64>,
}

impl<'id, B: Backend, S: Storage> Ia<'id, B, S> {
    /// A CNO of [`Ia::cno_fd_create`] registered with the tokio reactor of
    /// the calling task (`DAT_INSUFFICIENT_RESOURCES` outside a runtime).
    pub fn cno_async(&mut self) -> DatResult<AsyncCno<'id>> {
        let no_room = DatError::of(ErrorType::InsufficientResources);
        // Registering outside a runtime would panic.
        tokio::runtime::Handle::try_current().map_err(|_| no_room)?;
        let (cno, raw) = self.cno_fd_create()?;
        // SAFETY: `raw` is open (the IA owns it); F_DUPFD_CLOEXEC makes a
        // new descriptor or fails.
        let dup = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 0) };
        let registered = (dup >= 0)
            // SAFETY: `dup` is new and owned by nobody else.
            .then(|| unsafe { OwnedFd::from_raw_fd(dup) })
            // SAFETY: the AsyncFd owns the descriptor, which stays open and
            // the same until it is dropped.
            .and_then(|fd| unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok());
        match registered {
            Some(fd) => Ok(AsyncCno { cno, fd, wakeups: Cell::new(0) }),
            None => {
                let _ = self.cno_free(cno);
                Err(no_room)
            }
        }
    }
}

impl<'id> AsyncCno<'id> {
    /// How many times the descriptor woke a task so far: with nothing
    /// polled in between, at most one per trigger.
    pub fn wakeups(&self) -> u64 {
        self.wakeups.get()
    }

    /// The CNO, for `dat_evd_create` and `dat_evd_modify_cno`.
    pub fn cno(&self) -> &Cno<'id> {
        &self.cno
    }

    /// Free the CNO (dat_cno_free(3DAT)), closing its descriptors; a
    /// refusal gives it back.
    pub fn free<B: Backend, S: Storage>(self, ia: &mut Ia<'id, B, S>) -> Result<(), crate::Refused<Self>> {
        let AsyncCno { cno, fd, wakeups } = self;
        ia.cno_free(cno).map_err(|r| crate::Refused::new(r.error, AsyncCno { cno: r.object, fd, wakeups }))
    }

    /// Wait until the CNO is triggered; the EVD that triggered it, which
    /// dat_cno_wait(3DAT) calls "only a hint": every EVD tied to it may
    /// have events.
    pub async fn triggered<B: Backend, S: Storage>(&self, ia: &mut Ia<'id, B, S>) -> DatResult<EvdHandle> {
        loop {
            match ia.cno_trigger(&self.cno) {
                Err(e) if e.error_type() == ErrorType::QueueEmpty => {}
                done => return done,
            }
            // Readiness is cleared before the next trigger call looks, so
            // a wake-up after that look is kept for the next await.
            let mut ready = self.fd.readable().await.map_err(|_| DatError::of(ErrorType::InternalError))?;
            ready.clear_ready();
            self.wakeups.set(self.wakeups.get() + 1);
        }
    }

    /// The next event of `evd`, an EVD tied to this CNO (otherwise
    /// `DAT_INVALID_STATE`: nothing would wake the task for it).
    pub async fn event<B: Backend, S: Storage>(&self, ia: &mut Ia<'id, B, S>, evd: &Evd<'id>) -> DatResult<Event> {
        if ia.evd_query(evd)?.cno != self.cno.handle() {
            return Err(DatError::of(ErrorType::InvalidState));
        }
        loop {
            match ia.evd_dequeue(evd) {
                Err(e) if e.error_type() == ErrorType::QueueEmpty => {
                    self.triggered(ia).await?;
                }
                done => return done,
            }
        }
    }

    /// The next event of the connection EVD `conn`, which must be
    /// `DAT_CONNECTION_EVENT_ESTABLISHED`: the end of an awaited
    /// `dat_ep_connect` or `dat_cr_accept`. Any other event is returned as
    /// the error `DAT_INVALID_STATE`, with the event.
    pub async fn established<B: Backend, S: Storage>(
        &self,
        ia: &mut Ia<'id, B, S>,
        conn: &Evd<'id>,
    ) -> Result<Event, (DatError, Option<Event>)> {
        match self.event(ia, conn).await {
            Ok(e) if e.number == EventNumber::ConnectionEstablished => Ok(e),
            Ok(e) => Err((DatError::of(ErrorType::InvalidState), Some(e))),
            Err(e) => Err((e, None)),
        }
    }

    /// The next connection request on the CR EVD `cr_evd`.
    pub async fn request<B: Backend, S: Storage>(
        &self,
        ia: &mut Ia<'id, B, S>,
        cr_evd: &Evd<'id>,
    ) -> DatResult<Cr<'id>> {
        loop {
            let event = self.event(ia, cr_evd).await?;
            if let Some(cr) = ia.cr_of(&event) {
                return Ok(cr);
            }
        }
    }
}
