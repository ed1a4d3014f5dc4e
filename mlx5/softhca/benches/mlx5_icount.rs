//! Instruction counts of the mlx5 path under the DAT API, for callgrind:
//! `mlx5_icount OP K` does OP K times inside `measured_*` functions, and
//! `cargo xtask icount` collects only inside them
//! (`--toggle-collect`), so setup and the software HCA's execution are not
//! counted. OP: write_inline, write, send (posts), dequeue_one (one CQE
//! waiting at each dequeue: post one, execute, dequeue it) and
//! dequeue_batch16 (post 16, execute, dequeue each of them); and the posts
//! again through the fast path (`udat_core::poster`): write_inline_fast,
//! write_fast, send_fast (each a request kept for a `Poster`, posted
//! again).

mod rig;
use std::hint::black_box;

use rig::{with_rig, Post, Rig, BATCH};
use udat::poster::{Kept, Poster};
use udat::{Backend, CompletionFlags, DatResult, Event, Storage};

/// Each kind, at its place (`Post as usize`): a `const` index names a
/// kind where an enum cannot be a const parameter.
const KINDS: [Post; 3] = [Post::WriteInline, Post::Write, Post::Send];

// `post_as` picks a kind's function by `kind as usize`:
// each kind sits at its own place.
const _: () = {
    let mut i = 0;
    while i < KINDS.len() {
        assert!(KINDS[i] as usize == i);
        i += 1;
    }
};

/// One post of the kind `KINDS[K]`, its result handed to the caller,
/// which tests it uncounted. Each kind is counted in a function of its
/// own, as a consumer's call site posts one kind: a function that chose
/// among them would count the choice, and the registers of the kinds not
/// taken.
#[inline(never)]
fn measured_post<const K: usize>(rig: &mut Rig<'_, '_>, cookie: u64) -> DatResult<()> {
    rig.post(KINDS[K], cookie)
}

/// One post of the fast path: a request kept for the poster, its
/// result handed to the caller as `measured_post`'s is. The request says
/// its kind, so one function counts them all.
#[inline(never)]
fn measured_fast_post<'id, B: Backend, S: Storage>(
    poster: &mut Poster<'_, 'id, B, S>,
    kept: &Kept<'id, B>,
    cookie: u64,
) -> DatResult<()> {
    poster.post(kept, cookie)
}

/// The counted post of `kind`: its `measured_post`.
fn post_as(kind: Post) -> fn(&mut Rig<'_, '_>, u64) -> DatResult<()> {
    [measured_post::<0>, measured_post::<1>, measured_post::<2>][kind as usize]
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
                let kept = match kind {
                    Post::Send => poster.keep_send(&segs, CompletionFlags::DEFAULT),
                    Post::WriteInline | Post::Write => poster.keep_rdma_write(&segs, &remote, CompletionFlags::DEFAULT),
                };
                for i in 0..n {
                    black_box(measured_fast_post(&mut poster, &kept, i)).expect("a post");
                }
            } else {
                let post = post_as(kind);
                for i in 0..n {
                    let posted = if dequeue { rig.post(kind, i) } else { post(rig, i) };
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
