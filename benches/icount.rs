//! Instruction counts of the DAT layer, for callgrind: `icount OP K` runs
//! OP (post or reap) K times after the same setup. Two runs with different
//! K give the instructions per operation with the setup cancelled out
//! (`cargo xtask icount` does that).

use std::hint::black_box;

mod null_rig;
use null_rig::with_rig;

fn main() {
    let mut args = std::env::args().skip(1);
    let op = args.next().unwrap_or_default();
    let k: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    match op.as_str() {
        "post" => with_rig(|rig| {
            for _ in 0..k {
                rig.post();
            }
        }),
        "reap" => with_rig(|rig| {
            for _ in 0..k {
                rig.post();
            }
            for _ in 0..k {
                black_box(rig.reap());
            }
        }),
        "pingpong" => with_rig(|rig| {
            for _ in 0..k {
                rig.post();
                black_box(rig.reap());
            }
        }),
        _ => {
            eprintln!("usage: icount post|reap|pingpong K");
            std::process::exit(2);
        }
    }
}
