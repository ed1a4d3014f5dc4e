//! What the software HCA's tests and benches share: the software HCA as
//! a transport of the suite, test memory, a recording register, and the
//! syndrome table.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

use udat_core::types::DtoStatus;
use udat_mlx5::doorbell::Register;
use udat_mlx5::mem::DmaBuf;
use udat_mlx5::Mlx5;
use udat_softhca::SoftHca;

/// The software HCA under udat-mlx5, as a transport of the suite.
pub struct SoftFabric;

impl crate::suite::Fabric for SoftFabric {
    type B = Mlx5<SoftHca>;
    const MEMORY_WINDOWS: bool = true;
    /// The software HCA's smallest CQ (`SoftHca`'s `cq_create`).
    const SMALLEST_CQ: Option<usize> = Some(64);

    fn backend() -> Mlx5<SoftHca> {
        Mlx5::new(SoftHca::new())
    }

    fn device() -> String {
        "mlx5_soft0".into()
    }
}

/// Every syndrome of `mlx5dv.h` and the DAT status it means, plus one the
/// header does not name.
pub const SYNDROMES: &[(u8, DtoStatus)] = &[
    (0x01, DtoStatus::LocalLength),
    (0x02, DtoStatus::LocalEp),
    (0x04, DtoStatus::LocalProtection),
    (0x05, DtoStatus::Flushed),
    (0x06, DtoStatus::RmrOperationFailed),
    (0x10, DtoStatus::BadResponse),
    (0x11, DtoStatus::LocalProtection),
    (0x12, DtoStatus::RemoteResponder),
    (0x13, DtoStatus::RemoteAccess),
    (0x14, DtoStatus::RemoteResponder),
    (0x15, DtoStatus::Transport),
    (0x16, DtoStatus::ReceiverNotReady),
    (0x22, DtoStatus::RemoteResponder),
    (0x7f, DtoStatus::Transport),
];

/// 64-aligned test memory, zeroed.
pub struct Mem {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Mem {
    pub fn new(len: usize) -> Mem {
        let layout = Layout::from_size_align(len, 64).unwrap();
        // SAFETY: nonzero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }).unwrap();
        Mem { ptr, layout }
    }

    pub fn share(&self) -> DmaBuf {
        // SAFETY: the allocation outlives every DmaBuf of a test (each test
        // drops its queues first) and is reached only through raw pointers.
        unsafe { DmaBuf::new(self.ptr, self.layout.size()) }
    }

    pub fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.layout.size());
        // SAFETY: inside the allocation (asserted).
        unsafe { self.ptr.as_ptr().add(offset).copy_from_nonoverlapping(bytes.as_ptr(), bytes.len()) }
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// A register that records what is written to it.
#[derive(Default)]
pub struct Recorder {
    pub writes: Vec<(usize, Vec<u8>)>,
    pub flushes: usize,
}

impl Register for Recorder {
    fn write64(&mut self, offset: usize, value: [u8; 8]) {
        self.writes.push((offset, value.to_vec()));
    }
    fn write_block(&mut self, offset: usize, block: &[u64; 8]) {
        self.writes.push((offset, block.iter().flat_map(|w| w.to_ne_bytes()).collect()));
    }
    fn flush(&mut self) {
        self.flushes += 1;
    }
    /// It records a write at any offset.
    fn span(&self) -> usize {
        usize::MAX
    }
}
