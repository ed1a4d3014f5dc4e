//! The cost of the DAT layer itself: one post, and one completion turned
//! into a DAT event, over a backend that does nothing.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};

mod null_rig;
use null_rig::with_rig;

fn dat_layer(c: &mut Criterion) {
    with_rig(|rig| dat_layer_on(c, rig));
}

fn dat_layer_on(c: &mut Criterion, rig: &mut null_rig::Rig<'_, '_>) {
    c.bench_function("post_send (1 segment)", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                rig.post();
            }
            let took = start.elapsed();
            for _ in 0..iters {
                black_box(rig.reap());
            }
            took
        })
    });
    c.bench_function("completion to event (evd_dequeue)", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let batch = left.min(1024);
                for _ in 0..batch {
                    rig.post();
                }
                let start = Instant::now();
                for _ in 0..batch {
                    black_box(rig.reap());
                }
                took += start.elapsed();
                left -= batch;
            }
            took
        })
    });
}

criterion_group!(benches, dat_layer);
criterion_main!(benches);
