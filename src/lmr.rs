//! Memory registration: dat_lmr_create(3DAT), dat_lmr_free(3DAT),
//! dat_lmr_query(3DAT); and the Remote Memory Regions bound in it:
//! dat_rmr_create(3DAT), dat_rmr_bind(3DAT), dat_rmr_free(3DAT),
//! dat_rmr_query(3DAT).

use std::marker::PhantomData;
use std::ptr::NonNull;

use udat_core::types::{CompletionFlags, LmrTriplet, MemPriv, MemType, RmrTriplet};
use udat_core::{DatError, DatResult, ErrorType, LmrHandle, LmrParam, RmrParam, Storage, LMR_FIELD_ALL, RMR_FIELD_ALL};

use crate::memory::{Buffer, Local, Seg, Target};
use crate::object::{Brand, Ep, Pz, Refused, Rmr};
use crate::{Backend, Ia};

/// A Local Memory Region: memory registered with the IA
/// ([`Ia::lmr_create`], [`Ia::lmr_create_seg`]).
#[derive(Debug, PartialEq, Eq)]
pub struct Lmr<'id> {
    handle: LmrHandle,
    lmr_context: u32,
    rmr_context: Option<u32>,
    address: u64,
    length: u64,
    /// Whether the memory was handed back as a [`Seg`].
    kept: bool,
    _brand: Brand<'id>,
}

impl<'id> Lmr<'id> {
    /// The DAT handle, to compare with those queries and events carry.
    pub fn handle(&self) -> LmrHandle {
        self.handle
    }

    /// The context local segments name the LMR by.
    pub fn lmr_context(&self) -> u32 {
        self.lmr_context
    }

    /// The context a peer names the LMR by; `None` without remote
    /// privileges (dat_lmr_create(3DAT): "If mem_privileges does not
    /// specify remote Read and Write privileges, rmr_context is not
    /// generated").
    pub fn rmr_context(&self) -> Option<u32> {
        self.rmr_context
    }

    /// The first byte the registration covers.
    pub fn registered_address(&self) -> u64 {
        self.address
    }

    /// Bytes the registration covers.
    pub fn registered_size(&self) -> u64 {
        self.length
    }

    /// `length` bytes from `offset`, for the transport to read (a send's or
    /// an RDMA write's source). A range outside the LMR is
    /// `DAT_INVALID_PARAMETER`, as the post would say (dat_ep_post_send(3DAT)).
    pub fn local(&self, offset: u64, length: u32) -> DatResult<Local<'_, 'id>> {
        Ok(Local::new(self.triplet(offset, length)?))
    }

    /// `length` bytes from `offset`, for the transport to write (where a
    /// receive or an RDMA read lands): memory given up to the IA only; the
    /// kept memory of [`Ia::lmr_create_seg`] is written through its
    /// [`Seg`]s (`DAT_PRIVILEGES_VIOLATION` here).
    pub fn target(&self, offset: u64, length: u32) -> DatResult<Target<'_, 'id>> {
        if self.kept {
            return Err(DatError::of(ErrorType::PrivilegesViolation));
        }
        Ok(Target::new(self.triplet(offset, length)?))
    }

    /// `length` bytes from `offset` as a peer names them in an RDMA read or
    /// write: `None` without remote privileges, or outside the LMR.
    pub fn remote(&self, offset: u64, length: u32) -> Option<RmrTriplet> {
        let local = self.triplet(offset, length).ok()?;
        Some(RmrTriplet {
            rmr_context: self.rmr_context?,
            virtual_address: local.virtual_address,
            segment_length: length,
        })
    }

    /// The triplet of `length` bytes from `offset`, inside the LMR.
    fn triplet(&self, offset: u64, length: u32) -> DatResult<LmrTriplet> {
        let inside = offset.checked_add(u64::from(length)).is_some_and(|end| end <= self.length);
        if !inside {
            return Err(DatError::of(ErrorType::InvalidParameter));
        }
        Ok(LmrTriplet { virtual_address: self.address + offset, segment_length: length, lmr_context: self.lmr_context })
    }
}

impl<'id, B: Backend, S: Storage> Ia<'id, B, S> {
    /// dat_lmr_create(3DAT) of memory given up to the IA, in `pz`, with
    /// any privileges, remote ones included.
    ///
    /// No safe code reads or writes the memory while it is registered: the
    /// program names it in posts with [`Lmr::local`] and [`Lmr::target`],
    /// hands [`Lmr::remote`] to a peer, and has the memory back from
    /// [`Ia::lmr_free`]. A refused registration gives the memory back.
    ///
    /// ```
    /// use udat::{Ia, MemPriv};
    /// use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
    ///
    /// Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
    ///     let pz = ia.pz_create()?;
    ///     let lmr = ia.lmr_create(vec![0u8; 4096], &pz, MemPriv::ALL)?;
    ///     assert!(lmr.remote(0, 64).is_some(), "a peer may write it");
    ///     let memory = ia.lmr_free(lmr)?.expect("nothing else holds it");
    ///     assert_eq!(memory.len(), 4096);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), udat::DatError>(())
    /// ```
    pub fn lmr_create(
        &mut self,
        memory: impl Into<Buffer>,
        pz: &Pz<'id>,
        privileges: MemPriv,
    ) -> Result<Lmr<'id>, Refused<Buffer>> {
        let (lmr, memory) = self.register(memory.into(), pz, privileges, false)?;
        self.memory.push((lmr.handle, memory));
        Ok(lmr)
    }

    /// dat_lmr_create(3DAT) of memory the program keeps, in `pz`, with
    /// local read and write privileges: the LMR, and its memory as one
    /// [`Seg`] to split and post, which stays allocated until
    /// [`Ia::open`] returns. A refused registration gives the memory back;
    /// more bytes than a segment may have (`u32::MAX`) are
    /// `DAT_INVALID_PARAMETER` on the length.
    ///
    /// ```
    /// use udat::Ia;
    /// use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};
    ///
    /// Ia::open(MockBackend::new(), MOCK_IA_NAME, 8, |mut ia| {
    ///     let pz = ia.pz_create()?;
    ///     let (lmr, mut seg) = ia.lmr_create_seg(vec![0u8; 4096], &pz)?;
    ///     seg[..5].copy_from_slice(b"hello");
    ///     let (head, _tail) = seg.split_at(64).expect("64 <= 4096");
    ///     assert_eq!(&head[..5], b"hello");
    ///     assert_eq!(head.local().triplet().lmr_context, lmr.lmr_context());
    ///     Ok(())
    /// })?;
    /// # Ok::<(), udat::DatError>(())
    /// ```
    pub fn lmr_create_seg(
        &mut self,
        memory: impl Into<Buffer>,
        pz: &Pz<'id>,
    ) -> Result<(Lmr<'id>, Seg<'id>), Refused<Buffer>> {
        let memory = memory.into();
        let Ok(len) = u32::try_from(memory.len()) else {
            return Err(Refused::new(DatError::invalid_arg(4), memory));
        };
        let (lmr, memory) = self.register(memory, pz, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE, true)?;
        let seg = Seg::whole(&memory, len, lmr.lmr_context);
        crate::ia::lock(&self.kept).buffers.push(memory);
        Ok((lmr, seg))
    }

    /// dat_lmr_create(3DAT) of `length` bytes at `address`, memory udat
    /// does not own (a huge-page mapping, a device's), given up to the IA
    /// as [`Ia::lmr_create`]'s is, with any privileges. [`Ia::lmr_free`]
    /// gives nothing back.
    ///
    /// # Safety
    ///
    /// From this call until the LMR is freed or the IA is closed (for an
    /// IA leaked rather than dropped, forever), `address..address + length`
    /// stays allocated, and the program makes no reference to any of its
    /// bytes: the transport, and with remote privileges a peer, may write
    /// them at any time.
    pub unsafe fn lmr_create_raw(
        &mut self,
        address: NonNull<u8>,
        length: usize,
        pz: &Pz<'id>,
        privileges: MemPriv,
    ) -> DatResult<Lmr<'id>> {
        let region = MemType::Virtual { address: address.as_ptr() as u64, length: length as u64 };
        // SAFETY: the caller's contract is the core's: the memory stays
        // allocated while registered, and no reference reaches it.
        let made = unsafe { self.provider.lmr_create(self.ia, region, pz.handle(), privileges)? };
        Ok(Lmr {
            handle: made.lmr,
            lmr_context: made.lmr_context,
            rmr_context: made.rmr_context,
            address: made.registered_address,
            length: made.registered_size,
            kept: false,
            _brand: PhantomData,
        })
    }

    fn register(
        &mut self,
        memory: Buffer,
        pz: &Pz<'id>,
        privileges: MemPriv,
        kept: bool,
    ) -> Result<(Lmr<'id>, Buffer), Refused<Buffer>> {
        let region = MemType::Virtual { address: memory.address(), length: memory.len() as u64 };
        // SAFETY: the caller gives `memory` to the IA, which holds it until
        // the LMR is freed (given-up memory) or until `Ia::open` returns
        // (kept memory), and deregisters it first (or never frees it), so
        // it stays allocated while registered. Safe code
        // reaches its bytes only through a `Seg` (kept memory, with local
        // privileges only), which a DTO that writes it takes until its
        // completion; or not at all (given-up memory).
        let made = match unsafe { self.provider.lmr_create(self.ia, region, pz.handle(), privileges) } {
            Ok(made) => made,
            Err(e) => return Err(Refused::new(e, memory)),
        };
        // A transport may register more than asked (dat_lmr_create(3DAT)'s
        // registered_size); then a peer, or a segment inside the LMR, could
        // reach memory around the buffer. None of udat's does; refuse one.
        if (made.registered_address, made.registered_size) != (memory.address(), memory.len() as u64) {
            // The LMR is new: nothing is bound to it, so the free holds.
            let _ = self.provider.lmr_free(made.lmr);
            return Err(Refused::new(DatError::of(ErrorType::ModelNotSupported), memory));
        }
        let lmr = Lmr {
            handle: made.lmr,
            lmr_context: made.lmr_context,
            rmr_context: made.rmr_context,
            address: made.registered_address,
            length: made.registered_size,
            kept,
            _brand: PhantomData,
        };
        Ok((lmr, memory))
    }

    /// dat_lmr_free(3DAT): "The LMR cannot be destroyed if it is in use by
    /// an RMR" (`DAT_INVALID_STATE`). Given-up memory comes back; kept
    /// memory stays with its [`Seg`]s until [`Ia::open`] returns.
    pub fn lmr_free(&mut self, lmr: Lmr<'id>) -> Result<Option<Buffer>, Refused<Lmr<'id>>> {
        if let Err(e) = self.provider.lmr_free(lmr.handle) {
            return Err(Refused::new(e, lmr));
        }
        let at = self.memory.iter().position(|(h, _)| *h == lmr.handle);
        Ok(at.map(|i| self.memory.swap_remove(i).1))
    }

    /// dat_lmr_query(3DAT).
    pub fn lmr_query(&self, lmr: &Lmr<'id>) -> DatResult<LmrParam> {
        self.provider.lmr_query(lmr.handle, LMR_FIELD_ALL)
    }

    /// dat_rmr_create(3DAT): an RMR in `pz`, to bind later.
    pub fn rmr_create(&mut self, pz: &Pz<'id>) -> DatResult<Rmr<'id>> {
        self.provider.rmr_create(pz.handle()).map(Rmr::new)
    }

    /// dat_rmr_bind(3DAT): bind `rmr` to `segment` of `lmr` (memory given
    /// up to the IA) with remote `privileges`, through `ep`; the new
    /// `rmr_context` a peer names it by. The bind completes as a
    /// `DAT_RMR_BIND_COMPLETION_EVENT` with `cookie`.
    #[allow(clippy::too_many_arguments)]
    pub fn rmr_bind(
        &mut self,
        rmr: &Rmr<'id>,
        lmr: &Lmr<'id>,
        segment: Target<'_, 'id>,
        privileges: MemPriv,
        ep: &Ep<'id>,
        cookie: u64,
        flags: CompletionFlags,
    ) -> DatResult<u32> {
        let triplet = segment.triplet();
        self.provider.rmr_bind(rmr.handle(), lmr.handle, &triplet, privileges, ep.handle(), cookie, flags)
    }

    /// dat_rmr_free(3DAT).
    pub fn rmr_free(&mut self, rmr: Rmr<'id>) -> Result<(), Refused<Rmr<'id>>> {
        self.provider.rmr_free(rmr.handle()).map_err(|e| Refused::new(e, rmr))
    }

    /// dat_rmr_query(3DAT).
    pub fn rmr_query(&self, rmr: &Rmr<'id>) -> DatResult<RmrParam> {
        self.provider.rmr_query(rmr.handle(), RMR_FIELD_ALL)
    }
}
