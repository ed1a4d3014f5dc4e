//! Every test of udat-perf, end to end on the software HCA (loopback in
//! one process): it runs, measures the iterations asked for, and writes
//! JSON and CSV that say so.

use std::process::Command;

fn perf(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_udat-perf")).args(args).output().expect("udat-perf runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "udat-perf {args:?} failed:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

#[test]
fn every_test_runs_on_the_software_hca_and_reports_its_iterations() {
    let tests = ["write_lat", "read_lat", "send_lat", "atomic_lat", "write_bw", "read_bw", "send_bw"];
    for test in tests.into_iter().chain(["ud_send_lat", "ud_send_bw"]) {
        let out = perf(&["loopback", "-d", "softhca", "-t", test, "-n", "64", "-w", "8", "-c", "16", "--json", "-"]);
        let json = out.lines().find(|l| l.starts_with("{\"tool\": \"udat-perf\"")).expect("a JSON line");
        assert!(json.contains(&format!("\"test\": \"{test}\"")), "{json}");
        assert!(json.contains("\"iterations\": 64,"), "{test} did not run 64 iterations: {json}");
        if test.ends_with("_lat") {
            assert!(json.contains("\"p999_us\": "), "{json}");
        }
    }
}

/// The UD tests run through the Rust API only (`--api c` is refused).
#[test]
fn the_c_abi_runs_every_test_too() {
    for test in ["write_lat", "read_lat", "send_lat", "atomic_lat", "write_bw", "read_bw", "send_bw"] {
        let out = perf(&["loopback", "-d", "softhca", "--api", "c", "-t", test, "-n", "32", "-w", "4", "--json", "-"]);
        let json = out.lines().find(|l| l.starts_with("{\"tool\": \"udat-perf\"")).expect("a JSON line");
        assert!(json.contains("\"api\": \"C\"") && json.contains("\"iterations\": 32,"), "{json}");
    }
}

#[test]
fn several_endpoints_a_sweep_and_csv() {
    let out = perf(&["loopback", "-d", "softhca", "-t", "write_bw", "-q", "3", "-s", "4096", "-n", "90", "--csv", "-"]);
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("rust,")).collect();
    assert_eq!(rows.len(), 1, "{out}");
    assert!(rows[0].starts_with("rust,4096,90,"), "{}", rows[0]);
    let out = perf(&["loopback", "-d", "softhca", "-a", "-n", "5", "-w", "1", "--histogram"]);
    assert_eq!(out.lines().filter(|l| l.ends_with(" bytes:")).count(), 23, "{out}");
}

#[test]
fn bad_options_exit_2_with_the_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_udat-perf")).args(["loopback", "-t", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no test nope"));
}

#[test]
fn rounds_report_the_median_of_each_figure() {
    let out =
        perf(&["loopback", "-d", "softhca", "-t", "write_lat", "-n", "40", "-w", "4", "--rounds", "3", "--json", "-"]);
    assert!(out.starts_with("udat-perf write_lat on softhca (rust API, softhca; medians of 3 rounds)"), "{out}");
    let json = out.lines().find(|l| l.starts_with("{\"tool\": \"udat-perf\"")).expect("a JSON line");
    assert!(json.contains("\"rounds\": 3,") && json.contains("\"iterations\": 40,"), "{json}");
}

/// Several APIs in one run: each in turn in every round, a table and a
/// JSON line each, then one table side by side; libdat2's providers
/// cannot reach the software HCA and are refused.
#[test]
fn several_apis_are_measured_in_turn_and_shown_side_by_side() {
    let args = ["loopback", "-d", "softhca", "--api", "rust,c", "-n", "30", "-w", "3", "--rounds", "2", "--json", "-"];
    let out = perf(&args);
    assert!(out.contains("udat-perf write_lat on softhca (rust API, softhca; medians of 2 rounds)"), "{out}");
    assert!(out.contains("udat-perf write_lat on softhca (C API, softhca; medians of 2 rounds)"), "{out}");
    let json: Vec<&str> = out.lines().filter(|l| l.starts_with("{\"tool\": \"udat-perf\"")).collect();
    assert_eq!(json.len(), 2, "{out}");
    assert!(json[0].contains("\"api\": \"rust\"") && json[1].contains("\"api\": \"C\""), "{out}");
    assert!(json.iter().all(|l| l.contains("\"iterations\": 30,")), "{out}");
    assert!(
        out.contains("side by side on softhca (medians of 2 rounds):\n| measure | Rust API | libudat.a |\n"),
        "{out}"
    );
    assert_eq!(out.lines().filter(|l| l.starts_with("| write_lat 2 B, p50 µs | ")).count(), 1, "{out}");
    let refused = Command::new(env!("CARGO_BIN_EXE_udat-perf"))
        .args(["loopback", "-d", "softhca", "--api", "rust,dat2:udat"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
}
