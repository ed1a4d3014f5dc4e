//! The fast path: segments checked once ([`Segments`]), an endpoint
//! checked once for a run of posts ([`Poster`]), and requests kept for
//! it ([`Kept`]), so that a post pays only for what can change between
//! posts: its cookie and the room. The rules and errors are those of the
//! ordinary posts (the core's [`udat_core::poster`] says which check is
//! made when); the segments are the IA's tokens, for sends and RDMA writes,
//! which only read them.
//!
//! ```
//! use udat::*;
//! use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
//!
//! Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
//!     let pz = ia.pz_create()?;
//!     let dto = ia.evd_create(8, None, EvdFlags::DTO)?;
//!     let ep = ia.ep_create(&pz, &dto, &dto, None, None)?;
//!     let (_lmr, seg) = ia.lmr_create_seg(vec![7u8; 64], &pz)?;
//!     let segs = ia.segments(&pz, &[seg.local()])?;
//!     assert_eq!(segs.len(), 64);
//!     // An EP that never connected has nothing to post on.
//!     assert_eq!(ia.poster(&ep).unwrap_err().error_type(), ErrorType::InvalidState);
//!     Ok(())
//! })?;
//! # Ok::<(), DatError>(())
//! ```

use std::marker::PhantomData;

use udat_core::poster::{self as core_poster, Access};
use udat_core::types::{CompletionFlags, RmrTriplet};
use udat_core::{DatResult, RequestOp, Storage};

use crate::memory::Local;
use crate::object::{Brand, Ep, Pz};
use crate::{Backend, Ia};

/// Local segments checked once against their LMRs, for sends and RDMA
/// writes on EPs of one PZ: [`Ia::segments`].
#[derive(Clone, Debug)]
pub struct Segments<'id> {
    checked: core_poster::Segments,
    _brand: Brand<'id>,
}

impl Segments<'_> {
    /// Bytes the segments cover.
    pub fn len(&self) -> u64 {
        self.checked.len()
    }

    /// Whether they cover none.
    pub fn is_empty(&self) -> bool {
        self.checked.is_empty()
    }
}

/// An EP borrowed for a run of posts: [`Ia::poster`]. The IA makes no
/// progress while it lasts.
#[derive(Debug)]
pub struct Poster<'p, 'id, B: Backend, S: Storage> {
    ep: core_poster::Poster<'p, B, S>,
    _brand: Brand<'id>,
}

impl<'id, B: Backend, S: Storage> Ia<'id, B, S> {
    /// Check `iov` once, for sends and RDMA writes on EPs of `pz`. The
    /// errors are the posts' own: a segment of a freed LMR or of another
    /// PZ is `DAT_PROTECTION_VIOLATION`, a range outside its LMR
    /// `DAT_INVALID_PARAMETER`, a missing privilege
    /// `DAT_PRIVILEGES_VIOLATION`.
    pub fn segments(&self, pz: &Pz<'id>, iov: &[Local<'_, 'id>]) -> DatResult<Segments<'id>> {
        let checked = self.provider.segments(pz.handle(), Local::triplets(iov), Access::Read)?;
        Ok(Segments { checked, _brand: PhantomData })
    }

    /// Borrow `ep` for a run of posts: its handle and state are checked
    /// here, once (dat_ep_post_send(3DAT): "The operation is valid for the
    /// Endpoint in the DAT_EP_STATE_CONNECTED and
    /// DAT_EP_STATE_DISCONNECTED states").
    pub fn poster(&mut self, ep: &Ep<'id>) -> DatResult<Poster<'_, 'id, B, S>> {
        Ok(Poster { ep: self.provider.poster(ep.handle())?, _brand: PhantomData })
    }
}

/// A request kept for a run of posts: [`Poster::keep_send`],
/// [`Poster::keep_rdma_write`].
pub struct Kept<'id, B: Backend> {
    kept: core_poster::Kept<B>,
    _brand: Brand<'id>,
}

impl<B: Backend> std::fmt::Debug for Kept<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.kept.fmt(f)
    }
}

impl<B: Backend> Clone for Kept<'_, B> {
    fn clone(&self) -> Self {
        Kept { kept: self.kept.clone(), _brand: PhantomData }
    }
}

impl<'id, B: Backend, S: Storage> Poster<'_, 'id, B, S> {
    /// Keep dat_ep_post_send(3DAT) of `segs` for [`Poster::post`]: checked
    /// and, where the transport can, built once, so that each post pays
    /// only for its cookie and the room (the core's
    /// [`Poster::keep`](udat_core::poster::Poster::keep)).
    pub fn keep_send(&self, segs: &Segments<'id>, flags: CompletionFlags) -> Kept<'id, B> {
        self.keep(segs, RequestOp::Send, flags)
    }

    /// Keep dat_ep_post_rdma_write(3DAT) of `segs` into the peer's
    /// `remote` for [`Poster::post`], as [`Poster::keep_send`] keeps a
    /// send.
    pub fn keep_rdma_write(&self, segs: &Segments<'id>, remote: &RmrTriplet, flags: CompletionFlags) -> Kept<'id, B> {
        self.keep(segs, RequestOp::RdmaWrite { remote: *remote }, flags)
    }

    fn keep(&self, segs: &Segments<'id>, op: RequestOp, flags: CompletionFlags) -> Kept<'id, B> {
        Kept { kept: self.ep.keep(&segs.checked, op, flags), _brand: PhantomData }
    }

    /// Post `kept` with `cookie`: what the post it keeps would do, with
    /// every error of its page.
    #[inline]
    pub fn post(&mut self, kept: &Kept<'id, B>, cookie: u64) -> DatResult<()> {
        self.ep.post(&kept.kept, cookie)
    }
}
