//! Queue memory and a doorbell register for tests of the data path: plain
//! aligned memory stands in for what the device shares, and the register
//! records what is written to it. In this crate's unit tests, and with
//! the `testing` feature, which the software HCA's tests turn on; never
//! in a release artifact.

// Raw memory, as the queues see it.
#![allow(unsafe_code)]

use core::ptr::NonNull;
use std::vec;
use std::vec::Vec;

use crate::doorbell::Register;
use crate::mem::DmaBuf;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

/// Zeroed, cache-line aligned memory, reached only through its pointer
/// once a queue shares it.
pub struct Memory {
    ptr: NonNull<u8>,
    len: usize,
    _lines: Vec<Line>,
}

impl Memory {
    /// `len` bytes, zeroed, 64-byte aligned.
    pub fn new(len: usize) -> Memory {
        let mut lines = vec![Line([0; 64]); len.div_ceil(64)];
        let ptr = NonNull::new(lines.as_mut_ptr().cast::<u8>()).expect("a vector's pointer");
        Memory { ptr, len, _lines: lines }
    }

    /// The memory as a queue's buffer or doorbell record.
    pub fn share(&self) -> DmaBuf {
        // SAFETY: 64-aligned and `len` bytes long; it lives as long as the
        // test keeps `self`, and the test reads it only through `read`.
        unsafe { DmaBuf::new(self.ptr, self.len) }
    }

    /// The bytes at `offset`.
    pub fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        assert!(offset + len <= self.len);
        // SAFETY: inside the memory (asserted); no write is under way.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr().add(offset), len) }.to_vec()
    }

    /// Write `bytes` at `offset`, as the device would.
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.len);
        // SAFETY: inside the memory (asserted); `bytes` is another object.
        unsafe { self.ptr.as_ptr().add(offset).copy_from_nonoverlapping(bytes.as_ptr(), bytes.len()) }
    }
}

/// A register that records each write: its offset and bytes.
#[derive(Debug, Default)]
pub struct Recorder {
    /// Each write's offset and bytes, in order.
    pub writes: Vec<(usize, Vec<u8>)>,
    /// How many times the write-combining buffer was flushed.
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
