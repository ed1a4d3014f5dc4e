//! Instruction counts of the mlx5 path under the DAT API, for callgrind:
//! `mlx5_icount OP K` does OP K times inside `measured_*` functions, and
//! `cargo xtask icount` collects only inside them
//! (`--toggle-collect`), so setup and the model's execution are not
//! counted. OP: write_inline, write, send, completion.

mod rig;
use rig::{Post, Rig, BATCH};

#[inline(never)]
fn measured_post(rig: &mut Rig, kind: Post, cookie: u64) {
    rig.post(kind, cookie);
}

#[inline(never)]
fn measured_completion(rig: &mut Rig) -> u64 {
    rig.reap()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let op = args.next().unwrap_or_default();
    let k: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let kind = match op.as_str() {
        "write_inline" | "completion" => Post::WriteInline,
        "write" => Post::Write,
        "send" => Post::Send,
        _ => {
            eprintln!("usage: mlx5_icount write_inline|write|send|completion K");
            std::process::exit(2);
        }
    };
    let mut rig = Rig::default();
    let mut left = k;
    while left > 0 {
        let n = left.min(BATCH);
        if let Post::Send = kind {
            rig.receives(n);
        }
        for i in 0..n {
            if op == "completion" {
                rig.post(kind, i);
            } else {
                measured_post(&mut rig, kind, i);
            }
        }
        rig.execute();
        for _ in 0..n {
            if op == "completion" {
                measured_completion(&mut rig);
            } else {
                rig.reap();
            }
        }
        rig.drain_server();
        left -= n;
    }
}
