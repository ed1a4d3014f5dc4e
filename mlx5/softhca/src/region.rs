//! Queue memory the HCA owns: page-aligned, zeroed allocations shared
//! with the data path through raw pointers only.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// One allocation of queue memory.
#[derive(Debug)]
pub struct Region {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Region {
    pub fn new(len: usize) -> Region {
        let layout = Layout::from_size_align(len.max(64), 4096).expect("queue sizes are small");
        // SAFETY: the layout has a nonzero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Region { ptr, layout }
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// The memory, as `mlx5dv_init_obj` hands a queue's over.
    pub fn as_ptr(&self) -> *mut std::ffi::c_void {
        self.ptr.as_ptr().cast()
    }

    pub fn read(&self, offset: usize, out: &mut [u8]) {
        assert!(offset + out.len() <= self.len());
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: inside the allocation (asserted); volatile because the
            // data path writes it.
            *b = unsafe { self.ptr.as_ptr().add(offset + i).read_volatile() };
        }
    }

    /// Writing takes the region whole: the software HCA writes a queue's memory
    /// (a CQ's) only under that queue's lock.
    pub fn write(&mut self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.len());
        for (i, b) in bytes.iter().enumerate() {
            // SAFETY: inside the allocation (asserted).
            unsafe { self.ptr.as_ptr().add(offset + i).write_volatile(*b) };
        }
    }

    pub fn be32(&self, offset: usize) -> u32 {
        let mut b = [0u8; 4];
        self.read(offset, &mut b);
        u32::from_be_bytes(b)
    }

    pub fn be16(&self, offset: usize) -> u16 {
        let mut b = [0u8; 2];
        self.read(offset, &mut b);
        u16::from_be_bytes(b)
    }

    pub fn be64(&self, offset: usize) -> u64 {
        let mut b = [0u8; 8];
        self.read(offset, &mut b);
        u64::from_be_bytes(b)
    }
}

// SAFETY: a Region owns its allocation as a Box would, and moving it to
// another thread moves that ownership. The memory it hands out is a
// queue's, which the software HCA (under the queue's lock) and the data path
// (under the lock of the queue's owner) reach from different threads with volatile
// accesses in the order the PRM gives: the software HCA writes a CQE's owner
// byte last, the data path reads a CQE only after its owner byte. That is
// how a device and its driver share queue memory, and it relies, as they
// do, on the hardware's ordering of plain stores (x86-64's): under Rust's
// memory model the device's writes and a poller's reads of one CQE race.
// The software HCA is a test device and never in a release artifact.
unsafe impl Send for Region {}

// SAFETY: through a shared Region the software HCA only reads, with volatile
// loads, memory that the data path writes (WQEs, doorbell records,
// consumer indexes): threads of the software HCA that read it at once race with
// nobody but the data path, as the device does (see `Send` above).
// `write` takes `&mut self`, so the software HCA's own writes are never made
// through a shared Region.
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Whether every page of `[address, address + length)` is mapped: the
/// software HCA's stand-in for pinning at registration.
pub fn mapped(address: u64, length: u64) -> bool {
    if length == 0 {
        return true;
    }
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let start = address & !(page - 1);
    let Some(end) = address.checked_add(length) else { return false };
    let pages = (end - start).div_ceil(page) as usize;
    let mut vec = vec![0u8; pages];
    // SAFETY: mincore only reports on the range; `vec` has a byte per page.
    unsafe { libc::mincore(start as *mut libc::c_void, (end - start) as usize, vec.as_mut_ptr()) == 0 }
}

/// Copy `len` bytes between registered memory ranges. An empty copy
/// touches nothing: an empty range's address is never checked and may be
/// null, which `ptr::copy` refuses even for no bytes (as documented for
/// Rust 1.85, the crate's rust-version).
///
/// # Safety
/// Unless `len` is 0, both ranges lie inside live registrations (checked
/// by key, range and privilege) of memory that [`mapped`] found mapped.
pub unsafe fn copy(dst: u64, src: u64, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: the caller's promise: both ranges are mapped memory, so
    // neither address is null; `copy` tolerates overlap.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) }
}
