//! What a test needs of a connection, whichever API carries it: post to
//! an endpoint, take completions, watch for the peer's disconnect. The
//! buffer of a side is registered once: its first half is where the peer
//! writes and sends, its second half what this side writes and sends.

use crate::args::MAX_SIZE;

/// Bytes of a side's registered buffer.
pub const BUF: usize = 2 * MAX_SIZE as usize;
/// Where the half this side sends from begins.
pub const OUT: u64 = MAX_SIZE as u64;

/// A completion, as the tests see it.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    pub ep: usize,
    pub cookie: u64,
    pub ok: bool,
    /// Bytes a receive took (a UD receive's 40-byte GRH included).
    pub len: u32,
}

/// The peer's buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Remote {
    pub addr: u64,
    pub rkey: u32,
}

/// The run's parameters, as the client hands them to the server in its
/// connection request, with the client's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    pub test: u8,
    pub all: bool,
    pub size: u32,
    pub iters: u32,
    pub warmup: u32,
    pub duration_ms: u32,
    pub eps: u32,
    pub buf: u64,
    pub rkey: u32,
}

const MAGIC: u32 = 0x7564_7066;
pub const HELLO_BYTES: usize = 40;

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_BYTES] {
        let mut b = [0u8; HELLO_BYTES];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = self.test;
        b[5] = u8::from(self.all);
        b[8..12].copy_from_slice(&self.size.to_le_bytes());
        b[12..16].copy_from_slice(&self.iters.to_le_bytes());
        b[16..20].copy_from_slice(&self.warmup.to_le_bytes());
        b[20..24].copy_from_slice(&self.duration_ms.to_le_bytes());
        b[24..28].copy_from_slice(&self.eps.to_le_bytes());
        b[28..36].copy_from_slice(&self.buf.to_le_bytes());
        b[36..40].copy_from_slice(&self.rkey.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Option<Hello> {
        let word = |at: usize| Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?));
        if word(0)? != MAGIC {
            return None;
        }
        Some(Hello {
            test: *b.get(4)?,
            all: *b.get(5)? != 0,
            size: word(8)?,
            iters: word(12)?,
            warmup: word(16)?,
            duration_ms: word(20)?,
            eps: word(24)?,
            buf: u64::from_le_bytes(b.get(28..36)?.try_into().ok()?),
            rkey: word(36)?,
        })
    }
}

/// A server's answer: its buffer.
pub fn encode_remote(r: Remote) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..8].copy_from_slice(&r.addr.to_le_bytes());
    b[8..].copy_from_slice(&r.rkey.to_le_bytes());
    b
}

pub fn decode_remote(b: &[u8]) -> Option<Remote> {
    Some(Remote {
        addr: u64::from_le_bytes(b.get(..8)?.try_into().ok()?),
        rkey: u32::from_le_bytes(b.get(8..12)?.try_into().ok()?),
    })
}

/// The operations of the tests on one side's endpoints. Offsets are into
/// the local buffer and the peer's.
pub trait Link {
    /// The local buffer.
    fn buf(&self) -> *mut u8;
    fn write(&mut self, ep: usize, local: u64, len: u32, remote: u64, cookie: u64, signal: bool) -> Result<(), String>;
    fn read(&mut self, ep: usize, local: u64, len: u32, remote: u64, cookie: u64, signal: bool) -> Result<(), String>;
    fn send(&mut self, ep: usize, local: u64, len: u32, cookie: u64, signal: bool) -> Result<(), String>;
    fn recv(&mut self, ep: usize, local: u64, len: u32, cookie: u64) -> Result<(), String>;
    fn fetch_add(&mut self, ep: usize, local: u64, remote: u64, cookie: u64) -> Result<(), String>;
    /// The next completion, if one is there.
    fn poll(&mut self) -> Result<Option<Done>, String>;
    /// Whether a connection event (the peer's disconnect) has come.
    fn peer_gone(&mut self) -> bool;
    /// Disconnect every endpoint.
    fn close(&mut self);
}

/// A side that connects: the calls around [`Link`]'s, which differ by API
/// only in their types.
pub trait Peer: Link {
    /// How the API names the server's address.
    type Addr: Copy + Send + 'static;
    /// The address of IPv4 `ip`.
    fn addr_of(ip: [u8; 4]) -> Self::Addr;
    /// This side's address, for a client in the same process.
    fn address(&self) -> Result<Self::Addr, String>;
    fn listen(&mut self, port: u64) -> Result<(), String>;
    /// Accept the next connection request, with `recvs` receives posted
    /// on its endpoint first; the client's parameters.
    fn accept(&mut self, recvs: &dyn Fn(&Hello) -> u32) -> Result<Hello, String>;
    /// Start connecting a new endpoint, with `recvs` receives posted first.
    fn connect(&mut self, server: Self::Addr, port: u64, hello: Hello, recvs: u32) -> Result<(), String>;
    /// Wait until every endpoint connecting is connected.
    fn connected(&mut self) -> Result<(), String>;
}

/// Read the byte at `offset` of a buffer the device writes into.
///
/// # Safety
/// `buf` is a live side's buffer and `offset < BUF`.
pub unsafe fn peek(buf: *mut u8, offset: u64) -> u8 {
    // SAFETY: the caller's guarantee; volatile, since the device writes it.
    unsafe { buf.add(offset as usize).read_volatile() }
}

/// Write the byte at `offset` of the local buffer.
///
/// # Safety
/// As [`peek`].
pub unsafe fn poke(buf: *mut u8, offset: u64, value: u8) {
    // SAFETY: the caller's guarantee.
    unsafe { buf.add(offset as usize).write_volatile(value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_goes_through_private_data_whole() {
        let h = Hello {
            test: 3,
            all: true,
            size: 4096,
            iters: 7,
            warmup: 2,
            duration_ms: 0,
            eps: 4,
            buf: 1 << 40,
            rkey: 9,
        };
        assert_eq!(Hello::decode(&h.encode()), Some(h));
        assert_eq!(Hello::decode(&[0; HELLO_BYTES]), None);
        assert_eq!(Hello::decode(&h.encode()[..20]), None);
        let r = Remote { addr: 77, rkey: 5 };
        let back = decode_remote(&encode_remote(r)).unwrap();
        assert_eq!((back.addr, back.rkey), (77, 5));
    }
}
