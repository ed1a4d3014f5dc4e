//! Instruction counts of the mlx5 path under the DAT API, for callgrind:
//! `mlx5_icount OP K` does OP K times inside `measured_*` functions, and
//! `cargo xtask icount` collects only inside them
//! (`--toggle-collect`), so setup and the software HCA's execution are not
//! counted. OP: write_inline, write, send (posts), dequeue_one (one CQE
//! waiting at each dequeue: post one, execute, dequeue it) and
//! dequeue_batch16 (post 16, execute, dequeue each of them); and the posts
//! again through the fast path (`udat_core::poster`): write_inline_fast,
//! write_fast, send_fast.

mod rig;
use std::hint::black_box;

use rig::{with_rig, Post, Rig, BATCH};
use udat::poster::{Poster, Segments};
use udat::{Backend, CompletionFlags, DatResult, Event, RmrTriplet, Storage};

/// One post, its result handed to the caller, which tests it uncounted.
#[inline(never)]
fn measured_post(rig: &mut Rig<'_, '_>, kind: Post, cookie: u64) -> DatResult<()> {
    rig.post(kind, cookie)
}

/// One post of the fast path, its result handed to the caller as
/// `measured_post`'s is.
#[inline(never)]
fn measured_fast_post<'id, B: Backend, S: Storage>(
    poster: &mut Poster<'_, 'id, B, S>,
    kind: Post,
    segs: &Segments<'id>,
    remote: &RmrTriplet,
    cookie: u64,
) -> DatResult<()> {
    match kind {
        Post::Send => poster.send(segs, cookie, CompletionFlags::DEFAULT),
        Post::WriteInline | Post::Write => poster.rdma_write(segs, cookie, remote, CompletionFlags::DEFAULT),
    }
}

/// One dequeue, its event handed to the caller whole, as any consumer
/// gets it (the caller looks at it, uncounted).
#[inline(never)]
fn measured_completion(rig: &mut Rig<'_, '_>) -> DatResult<Event> {
    rig.dequeue()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let op = args.next().unwrap_or_default();
    let k: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let kind = match op.trim_end_matches("_fast") {
        "write_inline" | "dequeue_one" | "dequeue_batch16" => Post::WriteInline,
        "write" => Post::Write,
        "send" => Post::Send,
        _ => {
            eprintln!("usage: mlx5_icount write_inline|write|send[_fast]|dequeue_one|dequeue_batch16 K");
            std::process::exit(2);
        }
    };
    let fast = op.ends_with("_fast");
    let dequeue = op.starts_with("dequeue");
    let batch = if op == "dequeue_one" { 1 } else { BATCH };
    with_rig(|rig| {
        let mut left = k;
        while left > 0 {
            let n = left.min(batch);
            if let Post::Send = kind {
                rig.receives(n);
            }
            if fast {
                let (segs, remote) = rig.segments(kind);
                let mut poster = rig.poster();
                for i in 0..n {
                    black_box(measured_fast_post(&mut poster, kind, &segs, &remote, i)).expect("a post");
                }
            } else {
                for i in 0..n {
                    let posted = if dequeue { rig.post(kind, i) } else { measured_post(rig, kind, i) };
                    black_box(posted).expect("a post");
                }
            }
            rig.execute();
            for _ in 0..n {
                if dequeue {
                    black_box(measured_completion(rig)).expect("a completion");
                } else {
                    rig.reap();
                }
            }
            rig.drain_server();
            left -= n;
        }
    });
}
