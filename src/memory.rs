//! Memory the transport may touch, and the segments posts name in it.
//!
//! A registration takes a [`Buffer`]: memory handed to udat, which no safe
//! code reaches while the transport may. It comes back in one of two ways,
//! chosen when the LMR is made:
//!
//! - **given up** ([`Ia::lmr_create`]): the IA holds the memory until the
//!   LMR is freed, and the program names parts of it with [`Local`] (for
//!   the transport to read) and [`Target`] (for it to write) tokens. Remote
//!   privileges are for this memory only: a peer may write it at any time.
//! - **kept** ([`Ia::lmr_create_seg`]): local privileges only, and the
//!   memory is handed back at once as a [`Seg`], which owns its bytes
//!   (`&[u8]`, `&mut [u8]`) and splits into smaller `Seg`s. A receive or an
//!   RDMA read into a `Seg` takes it, and its completion hands it back
//!   ([`Ia::take_seg`]): nothing can read it while the transport may write
//!   it.
//!
//! A send or an RDMA write only reads its segments: a [`Local`] borrows the
//! `Seg` or the `Lmr` it comes from for as long as it is used. Bytes changed
//! before the DTO completes may or may not be the ones that go out
//! (dat_ep_post_send(3DAT): "A Consumer cannot modify the local_iov or
//! its content until the DTO is completed"), but no Rust rule is broken.
//!
//! [`Ia::lmr_create`]: crate::Ia::lmr_create
//! [`Ia::lmr_create_seg`]: crate::Ia::lmr_create_seg
//! [`Ia::take_seg`]: crate::Ia::take_seg

use std::alloc::{self, Layout};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};

use udat_core::types::LmrTriplet;

use crate::object::Brand;

/// Memory handed to udat for a registration: owned, and at an address
/// that does not move until it is dropped.
///
/// Made from a `Vec<u8>`, a `Box<[u8]>`, a `&'static mut [u8]`, or
/// [`Buffer::aligned`] for memory on a boundary of the program's choice
/// (a page, a cache line).
pub struct Buffer {
    ptr: NonNull<u8>,
    len: usize,
    owner: Owner,
}

/// How a [`Buffer`]'s memory is given back when it is dropped.
enum Owner {
    /// `Box<[u8]>` of `len` bytes.
    Boxed,
    /// `std::alloc` with this layout.
    Aligned(Layout),
    /// Nothing to give back: the memory lives as long as the program.
    Static,
}

// SAFETY: a Buffer owns its bytes as a `Box<[u8]>` does: nothing else
// reaches them, so moving it or sharing `&Buffer` between threads is as
// safe as for a `Box<[u8]>`.
unsafe impl Send for Buffer {}
// SAFETY: as for Send; `&Buffer` only reads.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// `len` zeroed bytes whose first is a multiple of `align`: `None`
    /// when `align` is not a power of two, `len` is zero, or the size
    /// overflows.
    pub fn aligned(len: usize, align: usize) -> Option<Buffer> {
        let layout = Layout::from_size_align(len, align).ok().filter(|l| l.size() != 0)?;
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(ptr) else { alloc::handle_alloc_error(layout) };
        Some(Buffer { ptr, len, owner: Owner::Aligned(layout) })
    }

    /// The first byte, as the transport sees it.
    pub(crate) fn address(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// The first byte, for the segments of kept memory.
    pub(crate) fn start(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl From<Box<[u8]>> for Buffer {
    fn from(b: Box<[u8]>) -> Buffer {
        let len = b.len();
        // A raw pointer from here on: moving a `Box` would assert it is
        // unique and invalidate pointers into it that the segments hold.
        let ptr = NonNull::new(Box::into_raw(b).cast::<u8>()).unwrap_or(NonNull::dangling());
        Buffer { ptr, len, owner: Owner::Boxed }
    }
}

impl From<Vec<u8>> for Buffer {
    fn from(v: Vec<u8>) -> Buffer {
        Buffer::from(v.into_boxed_slice())
    }
}

impl From<&'static mut [u8]> for Buffer {
    fn from(s: &'static mut [u8]) -> Buffer {
        let len = s.len();
        Buffer { ptr: NonNull::from(s).cast(), len, owner: Owner::Static }
    }
}

impl Deref for Buffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` initialised bytes that the Buffer owns.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` is the only way in.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        match self.owner {
            // SAFETY: `ptr` and `len` came from `Box::into_raw` of a
            // `Box<[u8]>`, which is given back once.
            Owner::Boxed => drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) }),
            // SAFETY: allocated by `alloc_zeroed` with this layout.
            Owner::Aligned(layout) => unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) },
            Owner::Static => {}
        }
    }
}

impl core::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Buffer").field("address", &self.ptr).field("len", &self.len).finish()
    }
}

/// Kept memory of an LMR ([`Ia::lmr_create_seg`](crate::Ia::lmr_create_seg)):
/// owns its bytes, as a `Box<[u8]>` would, and splits into smaller `Seg`s.
/// The bytes stay allocated until [`Ia::open`](crate::Ia::open) returns,
/// which no `Seg` outlives (it carries the IA's brand).
///
/// A receive or an RDMA read into it ([`Ia::ep_post_recv_seg`],
/// [`Ia::ep_post_rdma_read_seg`]) takes it; the DTO's completion gives it
/// back ([`Ia::take_seg`]). A send or an RDMA write names it through
/// [`Seg::local`].
///
/// [`Ia::ep_post_recv_seg`]: crate::Ia::ep_post_recv_seg
/// [`Ia::ep_post_rdma_read_seg`]: crate::Ia::ep_post_rdma_read_seg
/// [`Ia::take_seg`]: crate::Ia::take_seg
pub struct Seg<'id> {
    ptr: NonNull<u8>,
    /// At most `u32::MAX`, a DAT segment's most.
    len: u32,
    lmr_context: u32,
    _brand: Brand<'id>,
}

// SAFETY: a Seg is the only way to its bytes (Segs of one buffer never
// overlap, and the IA that holds the buffer does not touch them), so it
// moves and shares between threads as a `Box<[u8]>` does.
unsafe impl Send for Seg<'_> {}
// SAFETY: as for Send; `&Seg` only reads.
unsafe impl Sync for Seg<'_> {}

impl<'id> Seg<'id> {
    /// The whole of `memory`, `len` bytes, registered with `lmr_context`.
    pub(crate) fn whole(memory: &Buffer, len: u32, lmr_context: u32) -> Seg<'id> {
        debug_assert_eq!(memory.len(), len as usize);
        Seg { ptr: memory.start(), len, lmr_context, _brand: PhantomData }
    }

    /// Bytes in the segment.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segment for a send or an RDMA write's source: the transport
    /// reads it.
    pub fn local(&self) -> Local<'_, 'id> {
        Local::new(self.triplet())
    }

    /// `len` bytes from `offset` of the segment, for the transport to
    /// read: `None` past its end.
    pub fn local_part(&self, offset: usize, len: usize) -> Option<Local<'_, 'id>> {
        if offset.checked_add(len)? > self.len() {
            return None;
        }
        let virtual_address = self.ptr.as_ptr() as u64 + offset as u64;
        let segment_length = u32::try_from(len).ok()?;
        Some(Local::new(LmrTriplet { virtual_address, segment_length, lmr_context: self.lmr_context }))
    }

    /// Split in two at byte `at`: `[0, at)` and `[at, len)`. A split past
    /// the end gives the segment back.
    pub fn split_at(self, at: usize) -> Result<(Seg<'id>, Seg<'id>), Seg<'id>> {
        let Some(at) = u32::try_from(at).ok().filter(|&at| at <= self.len) else { return Err(self) };
        // SAFETY: `at <= len`, inside the segment.
        let tail = unsafe { self.ptr.add(at as usize) };
        let right = Seg { ptr: tail, len: self.len - at, lmr_context: self.lmr_context, _brand: PhantomData };
        Ok((Seg { len: at, ..self }, right))
    }

    /// The triplet a DTO that writes the segment names.
    pub(crate) fn triplet(&self) -> LmrTriplet {
        LmrTriplet {
            virtual_address: self.ptr.as_ptr() as u64,
            segment_length: self.len,
            lmr_context: self.lmr_context,
        }
    }
}

impl Deref for Seg<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` lies in a buffer the IA holds until
        // `Ia::open` returns, which the Seg does not outlive (its brand);
        // no other Seg overlaps it, and no DTO writes it while the Seg
        // exists (a DTO that writes it owns it until its completion gives
        // it back).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len()) }
    }
}

impl DerefMut for Seg<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` is the only way in.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len()) }
    }
}

impl core::fmt::Debug for Seg<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Seg").field("address", &self.ptr).field("len", &self.len).finish()
    }
}

/// A local segment the transport reads: the source of a send or an RDMA
/// write. Made by [`Seg::local`] or [`Lmr::local`](crate::Lmr::local), and
/// borrows what it was made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct Local<'a, 'id> {
    triplet: LmrTriplet,
    _from: PhantomData<(&'a (), Brand<'id>)>,
}

/// A local segment the transport writes: where a receive or an RDMA read
/// lands. Made by [`Lmr::target`](crate::Lmr::target), in memory given up
/// to the IA, which no safe code reads while it is registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct Target<'a, 'id> {
    triplet: LmrTriplet,
    _from: PhantomData<(&'a (), Brand<'id>)>,
}

macro_rules! segment {
    ($name:ident) => {
        impl<'id> $name<'_, 'id> {
            pub(crate) fn new(triplet: LmrTriplet) -> Self {
                $name { triplet, _from: PhantomData }
            }

            /// The DAT triplet, as the C API would pass it.
            pub fn triplet(&self) -> LmrTriplet {
                self.triplet
            }

            /// The triplets of `segments`, as the core takes them.
            #[inline(always)]
            pub(crate) fn triplets(segments: &[Self]) -> &[LmrTriplet] {
                // SAFETY: the type is `repr(transparent)` over an
                // `LmrTriplet` (its other field is a zero-sized marker), so
                // a slice of it is a slice of triplets of the same length.
                unsafe { std::slice::from_raw_parts(segments.as_ptr().cast(), segments.len()) }
            }
        }
    };
}
segment!(Local);
segment!(Target);
