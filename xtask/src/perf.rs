//! `cargo xtask perf [-- ARGS...]`: udat-perf beside perftest on
//! soft-RoCE. It builds udat-perf (release) and runs it in loopback on
//! the harness's device with `--compare`, so each table has perftest's
//! matching program, run on the same device in the same guest, beside
//! udat. With no arguments it runs the default set below, each in three
//! rounds (udat and perftest in turn, medians reported: the guest is
//! noisy); with some, it runs `udat-perf loopback ARGS --compare` once.
//! A run that fails (perftest gave nothing to compare with) fails the
//! command, once the others have run.

use crate::{run, softroce};

/// The default runs: small-message latency of each operation through the
/// Rust API, RDMA-write latency through the C ABI, and RDMA-write
/// bandwidth at 64 KiB; three rounds each, so that a ratio is not one
/// disturbed run's.
const DEFAULT: [&str; 5] = [
    "-t write_lat -n 2000 --rounds 3",
    "--api c -t write_lat -n 2000 --rounds 3",
    "-t send_lat -n 2000 --rounds 3",
    "-t read_lat -n 2000 --rounds 3",
    "-t write_bw -s 65536 -n 2000 --rounds 3",
];

/// udat-perf as `cargo build --release` leaves it.
fn exe() -> String {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_string());
    format!("{target}/release/udat-perf")
}

/// The shell command that runs each of `runs` in turn and fails if any
/// failed: one that fails does not hide the others' figures.
fn script(runs: &[String]) -> String {
    let exe = exe();
    let each: String = runs.iter().map(|r| format!("{exe} loopback {r} --compare || failed=1; ")).collect();
    format!("failed=0; {each}exit $failed")
}

pub fn perf(args: &[String]) -> Result<(), String> {
    let args: Vec<String> = args.iter().filter(|a| *a != "--").cloned().collect();
    run("cargo", &["build", "--release", "-p", "udat-perf"])?;
    let runs: Vec<String> = if args.is_empty() { DEFAULT.map(String::from).to_vec() } else { vec![args.join(" ")] };
    softroce::softroce(&["--".to_string(), "sh".to_string(), "-c".to_string(), script(&runs)])
}

/// udat-perf on soft-RoCE for CI: a latency and a bandwidth run beside
/// perftest, each writing JSON to standard output, whose iteration counts
/// and perftest rows are checked. Two checks. One round each: CI checks
/// that both tools run and report, not what the ratios are, and three
/// rounds would triple the time in the guest.
pub fn check() -> Result<u64, String> {
    run("cargo", &["build", "--release", "-p", "udat-perf"])?;
    let runs = ["-t write_lat -s 64 -n 300 --json -".to_string(), "-t send_bw -s 4096 -n 300 --json -".to_string()];
    let args = ["xtask", "softroce", "--", "sh", "-c", &script(&runs)];
    eprintln!("xtask: cargo {}", args.join(" "));
    let out = std::process::Command::new("cargo").args(args).output().map_err(|e| format!("cargo: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprint!("{text}");
    let json: Vec<&str> = text.lines().filter(|l| l.starts_with("{\"tool\": \"udat-perf\"")).collect();
    let good = |l: &&str| l.contains("\"iterations\": 300,") && l.contains("\"perftest\": {\"program\": \"ib_");
    if !out.status.success() || json.len() != 2 || !json.iter().all(good) {
        return Err(format!("udat-perf --compare on soft-RoCE did not report both runs ({})", out.status));
    }
    eprintln!("xtask: udat-perf ran beside perftest on soft-RoCE");
    Ok(2)
}
