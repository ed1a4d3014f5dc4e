//! `cargo xtask perf [-- ARGS...]`: udat-perf beside OFA dapl and
//! perftest on soft-RoCE. It builds udat-perf and udat's libdat2 plug-in
//! (release) and runs `perf/rxe.sh` where an rxe device is: udat-perf in
//! loopback with `--compare`, with a `dat.conf` that names the plug-in
//! and OFA's cma provider.
//!
//! With no arguments it runs the default rows below, each through every
//! API in turn in each of three rounds, then perftest's matching program
//! (medians reported: the guest is noisy), and ends with one table: a
//! line per row, a column per API and perftest. With some, it runs
//! `udat-perf loopback ARGS --compare` once. A run that fails (an API
//! that could not measure, perftest that gave nothing to compare with)
//! fails the command, once the others have run.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::run;

/// What each default row measures through, in this order in each round:
/// udat's Rust API, libudat.a, udat's plug-in through libdat2, OFA's cma
/// provider through libdat2 (`perf/rxe.sh` names the `dat.conf` lines).
const APIS: &str = "--api rust,c,dat2:udat:udat-server,dat2:ofa:ofa-server";

/// Rounds of each default row.
const ROUNDS: &str = "--rounds 3";

/// A default row: udat-perf's options, and the figure of its side-by-side
/// table that the summary keeps.
struct Row {
    args: &'static str,
    figure: &'static str,
}

/// Small-message latency of each operation, RDMA-write bandwidth at
/// 64 KiB, and the message rate of 64-byte RDMA writes (posted while the
/// send queue has room, a completion asked for every 32, reaped as they
/// come). A latency row takes 20000 iterations, 0.7 to 1.6 s of the
/// guest's time: 2000 took 40 to 150 ms, a few of the host's scheduler
/// slices, and its median moved with whatever the host did in them, by a
/// fifth or more from one program to the next.
const DEFAULT: [Row; 5] = [
    Row { args: "-t write_lat -n 20000", figure: "p50 µs" },
    Row { args: "-t send_lat -n 20000", figure: "p50 µs" },
    Row { args: "-t read_lat -n 20000", figure: "p50 µs" },
    Row { args: "-t write_bw -s 65536 -n 2000", figure: "MB/s" },
    Row { args: "-t write_bw -s 64 -n 20000", figure: "Mops/s" },
];

/// Seconds the guest may take for the default rows.
const GUEST_TIMEOUT: &str = "2400";

/// The script run on the RDMA device.
const SCRIPT: &str = "perf/rxe.sh";

/// Build udat-perf and the plug-in (release); the plug-in's absolute
/// path, for `dat.conf`, and udat-perf's. The plug-in is built on its
/// own, as released: together with udat-perf it would take on the
/// software HCA that udat-perf's libudat.a has.
fn build() -> Result<(String, String), String> {
    run("cargo", &["build", "--release", "-p", "udat-dapl"])?;
    run("cargo", &["build", "--release", "-p", "udat-perf"])?;
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_string());
    let path = |file: &str| -> Result<String, String> {
        let p = format!("{target}/release/{file}");
        let p = std::fs::canonicalize(&p).map_err(|e| format!("{p}: {e}"))?;
        Ok(p.to_string_lossy().into_owned())
    };
    Ok((path("libudat_dapl.so")?, path("udat-perf")?))
}

/// Run `perf/rxe.sh` with `runs` on the RDMA device, its output streamed
/// through; what it printed, whether it succeeded, and the seconds it
/// took.
fn guest(runs: &[String]) -> Result<(Vec<String>, bool, f64), String> {
    let (plugin, exe) = build()?;
    let xtask = std::env::current_exe().map_err(|e| format!("xtask: {e}"))?;
    let mut args = vec!["softroce", "--timeout", GUEST_TIMEOUT, "--", "sh", SCRIPT, &plugin, &exe];
    args.extend(runs.iter().map(String::as_str));
    eprintln!("xtask: {}", args.join(" "));
    let started = std::time::Instant::now();
    let mut child = Command::new(xtask)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("softroce: {e}"))?;
    let mut lines = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            // A guest's serial console ends lines with CR LF.
            let line = line.trim_end_matches('\r').to_string();
            println!("{line}");
            lines.push(line);
        }
    }
    let status = child.wait().map_err(|e| format!("softroce: {e}"))?;
    let seconds = started.elapsed().as_secs_f64();
    eprintln!("xtask: the guest's runs took {seconds:.0} s");
    Ok((lines, status.success(), seconds))
}

pub fn perf(args: &[String]) -> Result<(), String> {
    let args: Vec<String> = args.iter().filter(|a| *a != "--").cloned().collect();
    if !args.is_empty() {
        let (_, ok, _) = guest(&[args.join(" ")])?;
        return if ok { Ok(()) } else { Err(format!("{SCRIPT} failed on the RDMA device; its output is above")) };
    }
    let runs: Vec<String> = DEFAULT.iter().map(|r| format!("{} {APIS} {ROUNDS}", r.args)).collect();
    let (lines, ok, seconds) = guest(&runs)?;
    println!("\n{}", summary(&lines));
    println!(
        "(`cargo xtask perf`: {} rows, three interleaved rounds each, {seconds:.0} s in the guest)",
        DEFAULT.len()
    );
    if ok {
        Ok(())
    } else {
        Err(format!("a run failed on the RDMA device ({SCRIPT}); its output is above"))
    }
}

/// One table of the default rows: the side-by-side tables' header, and
/// from each the line of the row's figure, in the order of [`DEFAULT`].
fn summary(lines: &[String]) -> String {
    let mut t = String::new();
    let header = lines.iter().position(|l| l.starts_with("| measure |"));
    if let Some(at) = header {
        for l in &lines[at..(at + 2).min(lines.len())] {
            t.push_str(l);
            t.push('\n');
        }
    }
    // A row's lines follow its own header, so rows are told apart by test
    // and size.
    for row in &DEFAULT {
        let (test, size) = test_and_size(row.args);
        let key = format!("| {test} {size} B, {} |", row.figure);
        match lines.iter().find(|l| l.starts_with(&key)) {
            Some(l) => t.push_str(l),
            None => t.push_str(&format!("{key} no figures (see above) |")),
        }
        t.push('\n');
    }
    t
}

/// A row's test and message size, as udat-perf labels its lines (2 bytes
/// for latency, unless the row says otherwise).
fn test_and_size(args: &str) -> (&str, &str) {
    let words: Vec<&str> = args.split_whitespace().collect();
    let after = |flag: &str| words.iter().position(|w| *w == flag).and_then(|i| words.get(i + 1)).copied();
    (after("-t").unwrap_or("write_lat"), after("-s").unwrap_or("2"))
}

/// udat-perf on soft-RoCE for CI: a latency run through every API (the
/// Rust API, libudat.a, udat's plug-in and OFA's provider through
/// libdat2) and a bandwidth run through the Rust API, beside perftest,
/// each writing JSON to standard output, whose iteration counts and
/// perftest rows are checked: a check per API and run. One round each:
/// CI checks that every API and both tools run and report, not what the
/// ratios are, and three rounds would triple the time in the guest.
pub fn check() -> Result<u64, String> {
    let runs = [format!("-t write_lat -s 64 -n 300 {APIS} --json -"), "-t send_bw -s 4096 -n 300 --json -".to_string()];
    let expected = ["rust", "C", "dat2:udat", "dat2:ofa", "rust"];
    let (lines, ok, _) = guest(&runs)?;
    let json: Vec<&String> = lines.iter().filter(|l| l.starts_with("{\"tool\": \"udat-perf\"")).collect();
    let good = |l: &&String, api: &str| {
        l.contains(&format!("\"api\": \"{api}\","))
            && l.contains("\"iterations\": 300,")
            && l.contains("\"perftest\": {\"program\": \"ib_")
    };
    let all = json.len() == expected.len() && json.iter().zip(expected).all(|(l, api)| good(l, api));
    if !ok || !all {
        return Err(format!(
            "udat-perf --compare on soft-RoCE did not report all {} runs (it reported {})",
            expected.len(),
            json.len()
        ));
    }
    eprintln!("xtask: udat-perf ran through every API beside OFA dapl and perftest on soft-RoCE");
    Ok(expected.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_keeps_each_row_s_figure_in_order_and_names_a_missing_one() {
        let lines: Vec<String> = [
            "udat-perf write_lat on rxe0 (rust API, verbs; medians of 3 rounds)",
            "| measure | Rust API | libudat.a | perftest |",
            "| --- | ---: | ---: | ---: |",
            "| write_lat 2 B, p50 µs | 40.00 (1.00) | 41.00 (1.02) | 40.00 |",
            "| measure | Rust API | libudat.a | perftest |",
            "| --- | ---: | ---: | ---: |",
            "| read_lat 2 B, p50 µs | 80.00 (1.00) | 81.00 (1.01) | 80.00 |",
            "| write_bw 65536 B, MB/s | 30.00 (1.00) | 29.00 (0.97) | 30.00 |",
            "| write_bw 65536 B, Mops/s | 0.000458 (1.00) | 0.000443 (0.97) | 0.000458 |",
            "| write_bw 64 B, MB/s | 1.00 (0.50) | 1.00 (0.50) | 2.00 |",
            "| write_bw 64 B, Mops/s | 0.0164 (0.50) | 0.0164 (0.50) | 0.0328 |",
        ]
        .map(String::from)
        .to_vec();
        let t = summary(&lines);
        let rows: Vec<&str> = t.lines().collect();
        assert_eq!(rows.len(), 2 + DEFAULT.len(), "{t}");
        assert_eq!(rows[0], "| measure | Rust API | libudat.a | perftest |");
        assert_eq!(rows[2], "| write_lat 2 B, p50 µs | 40.00 (1.00) | 41.00 (1.02) | 40.00 |");
        assert_eq!(rows[3], "| send_lat 2 B, p50 µs | no figures (see above) |");
        assert!(rows[4].starts_with("| read_lat 2 B,") && rows[5].starts_with("| write_bw 65536 B, MB/s |"), "{t}");
        assert_eq!(rows[6], "| write_bw 64 B, Mops/s | 0.0164 (0.50) | 0.0164 (0.50) | 0.0328 |");
        assert_eq!(test_and_size("-t write_bw -s 64 -n 20000"), ("write_bw", "64"));
        assert_eq!(test_and_size("-n 20"), ("write_lat", "2"));
    }
}
