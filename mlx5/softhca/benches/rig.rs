//! A connected pair on the software HCA, driven through the DAT API, with
//! doorbells deferred so that a measured post costs what it would on a
//! ConnectX: the software HCA executes the WQEs only at `complete`.

use std::hint::black_box;

use udat_core::poster::{Access, Poster, Segments};
use udat_core::types::*;
use udat_core::Inline;
#[path = "../tests/common/mod.rs"]
mod common;

use common::SoftFabric;
use udat_testkit::suite::{self, Buf, Side};

/// Posts between drains: within the EP's request limit and the EVD.
pub const BATCH: u64 = 16;

pub struct Rig {
    rig: suite::Rig<SoftFabric>,
    client: Side,
    server: Side,
    src: Buf,
    dst: Buf,
    /// What the posts name, made once so a measured post holds the DAT
    /// call alone: 64 bytes and 4 KiB of `src`, and as much of `dst`.
    local: [LmrTriplet; 2],
    remote: [RmrTriplet; 2],
}

#[derive(Clone, Copy, Debug)]
pub enum Post {
    /// A 64-byte RDMA write, carried inline.
    WriteInline,
    /// A 4 KiB RDMA write, gathered by the HCA.
    Write,
    /// A 64-byte send, inline.
    Send,
}

impl Default for Rig {
    fn default() -> Rig {
        let mut rig = suite::Rig::<SoftFabric>::new();
        let (client, server) = rig.pair();
        let src = rig.buf(4096, MemPriv::ALL);
        let dst = rig.buf(4096 * BATCH as usize, MemPriv::ALL);
        rig.p.backend_mut().device().defer_doorbells();
        let local = [src.seg(0, 64), src.seg(0, 4096)];
        let remote = [dst.remote(0, 64), dst.remote(0, 4096)];
        Rig { rig, client, server, src, dst, local, remote }
    }
}

impl Rig {
    /// Give the server a receive for each of `n` sends.
    pub fn receives(&mut self, n: u64) {
        for i in 0..n {
            let seg = self.dst.seg(i as usize * 64, 64);
            self.rig.p.ep_post_recv(self.server.ep, &[seg], i, CompletionFlags::DEFAULT).unwrap();
        }
    }

    #[inline(always)]
    pub fn post(&mut self, kind: Post, cookie: u64) {
        let p = &mut self.rig.p;
        let (ep, [small, large], [near, far]) = (self.client.ep, &self.local, &self.remote);
        let flags = CompletionFlags::DEFAULT;
        let r = match kind {
            Post::WriteInline => p.ep_post_rdma_write(ep, core::slice::from_ref(small), cookie, near, flags),
            Post::Write => p.ep_post_rdma_write(ep, core::slice::from_ref(large), cookie, far, flags),
            Post::Send => p.ep_post_send(ep, core::slice::from_ref(small), cookie, flags),
        };
        black_box(r).unwrap();
    }

    /// Let the software HCA execute what was posted.
    pub fn execute(&mut self) {
        self.rig.p.backend_mut().device().release();
    }

    /// One completion of the client as a DAT event.
    #[inline(always)]
    pub fn reap(&mut self) -> u64 {
        match black_box(self.rig.p.evd_dequeue(self.client.dto)) {
            Ok(e) => e.number as u64,
            Err(e) => panic!("no completion: {e:?}"),
        }
    }

    /// The source of a `kind` post, checked once; and its remote buffer.
    pub fn segments(&self, kind: Post) -> (Segments, RmrTriplet) {
        let len = if let Post::Write = kind { 4096 } else { 64 };
        let segs = self.rig.p.segments(self.rig.pz, &[self.src.seg(0, len)], Access::Read).unwrap();
        (segs, self.dst.remote(0, len))
    }

    /// The client's EP, borrowed for a run of posts.
    pub fn poster(&mut self) -> Poster<'_, <SoftFabric as suite::Fabric>::B, Inline<64, 4096>> {
        self.rig.p.poster(self.client.ep).unwrap()
    }

    /// Drain the server's receive completions.
    pub fn drain_server(&mut self) {
        while self.rig.p.evd_dequeue(self.server.dto).is_ok() {}
    }
}
