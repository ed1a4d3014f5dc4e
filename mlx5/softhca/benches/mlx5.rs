//! The mlx5 data path under the DAT API on the software HCA: a post (the
//! WQE written and the doorbell rung) and a CQE turned into a DAT event.
//! Doorbells are deferred, so the software HCA's own work is not in the times.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};

mod rig;
use rig::{with_rig, Post, Rig, BATCH};

fn posts(c: &mut Criterion) {
    for (name, kind) in [
        ("mlx5 post: rdma_write 64 B inline", Post::WriteInline),
        ("mlx5 post: rdma_write 4 KiB gathered", Post::Write),
        ("mlx5 post: send 64 B inline", Post::Send),
    ] {
        with_rig(|rig| post(c, rig, name, kind));
    }
    with_rig(|rig| fast_post(c, rig));
    with_rig(|rig| dequeue(c, rig));
}

fn post(c: &mut Criterion, rig: &mut Rig<'_, '_>, name: &str, kind: Post) {
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(BATCH);
                if let Post::Send = kind {
                    rig.receives(n);
                }
                let start = Instant::now();
                for i in 0..n {
                    black_box(rig.post(kind, i)).expect("a post");
                }
                took += start.elapsed();
                rig.execute();
                for _ in 0..n {
                    rig.reap();
                }
                rig.drain_server();
                left -= n;
            }
            took
        })
    });
}

fn fast_post(c: &mut Criterion, rig: &mut Rig<'_, '_>) {
    c.bench_function("mlx5 fast post: rdma_write 4 KiB gathered (kept, Poster)", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            let mut left = iters;
            let (segs, remote) = rig.segments(Post::Write);
            while left > 0 {
                let n = left.min(BATCH);
                let start = Instant::now();
                {
                    let mut poster = rig.poster();
                    let kept = poster.keep_rdma_write(&segs, &remote, udat::CompletionFlags::DEFAULT);
                    for i in 0..n {
                        poster.post(&kept, i).unwrap();
                    }
                }
                took += start.elapsed();
                rig.execute();
                for _ in 0..n {
                    rig.reap();
                }
                left -= n;
            }
            took
        })
    });
}

fn dequeue(c: &mut Criterion, rig: &mut Rig<'_, '_>) {
    c.bench_function("mlx5 CQE to DAT event (evd_dequeue)", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(BATCH);
                for i in 0..n {
                    black_box(rig.post(Post::WriteInline, i)).expect("a post");
                }
                rig.execute();
                let start = Instant::now();
                for _ in 0..n {
                    rig.reap();
                }
                took += start.elapsed();
                left -= n;
            }
            took
        })
    });
}

criterion_group!(benches, posts);
criterion_main!(benches);
