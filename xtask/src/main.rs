//! Project automation.
//!
//! Each command first installs what it needs and is missing ([`setup`]),
//! so a fresh Debian 12 machine needs only Rust: CI (`.ci/run`) runs
//! `cargo xtask setup`, then `cargo xtask test`.
//!
//! - `cargo xtask setup`: install what the commands below need (Debian
//!   packages, clippy, rustfmt, the bare-metal target, nightly with Miri,
//!   cargo-fuzz, the minimum Rust version), each piece only when it is
//!   missing (see [`setup`]).
//! - `cargo xtask install [--prefix DIR]`: build the release artifacts and
//!   install them and their pkg-config files under DIR (`/usr/local`),
//!   then print the `dat.conf` line for the plug-in (see [`install`]).
//! - `cargo xtask test`: everything CI runs — formatting, the libraries
//!   on the minimum Rust version ([`msrv`]), clippy with warnings as
//!   errors, the documentation (private items too) with warnings as
//!   errors, the workspace tests, the bare-metal build of udat-core with
//!   its no-allocator check, Miri over udat-core, and udat-verbs's tests on soft-RoCE
//!   (through `softroce`), the C ABI's artifacts and C examples
//!   ([`capi`]), a minute of each fuzz target
//!   (`fuzz/`, from the corpus there), the fully static C example on
//!   soft-RoCE under strace, the two event loops, udat-perf through every
//!   API and OFA dapl beside perftest on soft-RoCE, a minute of the soak on the software HCA and
//!   one on soft-RoCE ([`soak`]), the OpenFabrics DAPL test programs against
//!   the plug-in on soft-RoCE (`tests/peers/run.sh`), and the same
//!   programs between two soft-RoCE hosts (`tests/fabric/run.sh`, through
//!   `fabric`), and MVAPICH2 over the plug-in on soft-RoCE: `osu_latency`,
//!   `osu_bw`, `osu_bcast` and MPICH's `pt2pt` tests ([`mpi::ci`]).
//! - `cargo xtask capi`: the C ABI's checks alone ([`capi`]).
//! - `cargo xtask icount [--json PATH]`: instructions per DAT operation
//!   through the Rust API and the C ABI, from callgrind (see [`icount`]).
//! - `cargo xtask icount-rxe [--json PATH]`: instructions per post,
//!   dequeue and registration on soft-RoCE, udat's plug-in beside OFA
//!   dapl's cma provider, from callgrind (see [`icount_rxe`]).
//! - `cargo xtask softroce [--timeout SECS] -- COMMAND...`: run a command
//!   where a soft-RoCE device exists (see [`softroce`]).
//! - `cargo xtask fabric [--timeout SECS] -- COMMAND...`: run a command on
//!   two soft-RoCE guests joined by a cable it can cut (see [`fabric`]).
//! - `cargo xtask perf [-- ARGS...]`: udat-perf through udat's APIs and
//!   OFA dapl through libdat2, beside perftest on soft-RoCE (see [`perf`]).
//! - `cargo xtask mpi [--ci] [--providers udat,ofa] [--fast-path]
//!   [--no-fabric]`: MVAPICH2, built once, runs the OSU benchmarks and
//!   MPICH's test suites over udat's plug-in and OFA dapl's cma provider
//!   on soft-RoCE, and across two hosts; one table (see [`mpi`]).
//! - `cargo xtask soak [--minutes N]`: traffic, object churn, connects,
//!   abrupt closes and CQ overruns on several threads, N minutes on the
//!   software HCA and N on rxe, checked for lost or repeated completions
//!   and for drift (see [`soak`]).

mod capi;
mod entries;
mod fabric;
mod icount;
mod icount_rxe;
mod install;
mod mpi;
mod msrv;
mod perf;
mod setup;
mod soak;
mod softroce;

use std::io::{BufRead, BufReader};
use std::process::{exit, Command, Stdio};

const USAGE: &str =
    "usage: cargo xtask setup|test|install|capi|entries|icount|icount-rxe|softroce|fabric|perf|soak|mpi";

fn main() {
    let task = std::env::args().nth(1).unwrap_or_default();
    let args: Vec<String> = std::env::args().skip(2).collect();
    if let Err(e) = dispatch(&task, &args) {
        eprintln!("xtask: {e}");
        exit(1);
    }
}

/// Run `task`, after installing what it needs.
fn dispatch(task: &str, args: &[String]) -> Result<(), String> {
    if task == "entries" {
        return match args {
            [] => entries::write(),
            [check] if check == "--check" => entries::check(),
            _ => Err("usage: cargo xtask entries [--check]".to_string()),
        };
    }
    let scope = match task {
        "setup" | "test" => setup::Scope::All,
        "install" | "capi" | "icount" | "icount-rxe" | "softroce" | "fabric" | "perf" | "soak" | "mpi" => {
            setup::Scope::Packages
        }
        _ => return Err(USAGE.to_string()),
    };
    setup::ensure(scope)?;
    match task {
        "test" => test(),
        "install" => install::install(args),
        "capi" => capi::check().map(|n| eprintln!("xtask: {n} C ABI checks passed")),
        "icount" => icount::icount(args),
        "icount-rxe" => icount_rxe::icount_rxe(args),
        "softroce" => softroce::softroce(args),
        "fabric" => fabric::fabric(args),
        "perf" => perf::perf(args),
        "soak" => soak::soak(args),
        "mpi" => mpi::mpi(args),
        // `setup`: the `ensure` above.
        _ => Ok(()),
    }
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: {program} {}", args.join(" "));
    let status = Command::new(program).args(args).status().map_err(|e| format!("{program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

fn output(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        return Err(format!("`{program} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn test() -> Result<(), String> {
    run("cargo", &["fmt", "--all", "--", "--check"])?;
    entries::check()?;
    msrv::check()?;
    run("cargo", &["clippy", "--workspace", "--all-targets", "--all-features", "--", "-D", "warnings"])?;
    // The C artifacts as released: without the software HCA.
    run("cargo", &["clippy", "-p", "udat-capi", "-p", "udat-dapl", "-p", "udat-static", "--", "-D", "warnings"])?;
    docs()?;
    let native = run_tests(&["test", "--workspace", "--all-features"])?;
    bare_metal()?;
    header_free()?;
    let c = capi::check()?;
    // The core, and the mlx5 data path's rings over plain memory.
    let miri = run_tests(&["+nightly", "miri", "test", "-p", "udat-core", "-p", "udat-mlx5"])?;
    let fuzzed = fuzz()?;
    let rxe = rxe_tests()?;
    let threads = threads_on_rxe()?;
    let fully_static = static_on_rxe()?;
    let loops = event_loops_on_rxe()?;
    let perf = perf::check()?;
    // A minute on each transport: the soak's two runs, two checks.
    soak::on_both(1.0)?;
    let soaked = 2;
    let peers = peer_tests()?;
    let across = fabric_tests()?;
    let mpi = mpi::ci()?;
    let passed = native.0
        + c
        + miri.0
        + fuzzed
        + rxe.0
        + threads.0
        + fully_static
        + loops
        + perf
        + soaked
        + peers.0
        + across.0
        + mpi.0;
    let failed = native.1 + miri.1 + rxe.1 + threads.1 + peers.1 + across.1 + mpi.1;
    eprintln!(
        "xtask: all checks passed ({} tests natively, {c} C ABI checks, {} under Miri, {fuzzed} fuzz targets, {} on soft-RoCE, {} thread tests on soft-RoCE, the static binary, {loops} event loops and {perf} udat-perf runs on soft-RoCE, {soaked} soak runs, {} OpenFabrics programs, {} across two hosts, {} MPI cases)",
        native.0, miri.0, rxe.0, threads.0, peers.0, across.0, mpi.0
    );
    println!("tests: {passed} passed, {failed} failed");
    Ok(())
}

/// The documentation of every package, private items included, builds
/// without a warning: no broken intra-doc link (a comment naming a
/// function that was renamed or removed), no bare URL, no unclosed HTML
/// tag. (udat-static, whose library is named `udat` for `libudat.a`, has
/// `doc = false`.)
fn docs() -> Result<(), String> {
    let args = ["doc", "--workspace", "--no-deps", "--document-private-items"];
    eprintln!("xtask: RUSTDOCFLAGS=\"-D warnings\" cargo {}", args.join(" "));
    let status = Command::new("cargo")
        .args(args)
        .env("RUSTDOCFLAGS", "-D warnings")
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`RUSTDOCFLAGS=\"-D warnings\" cargo {}` failed ({status})", args.join(" ")))
    }
}

/// The fuzz targets of `fuzz/`.
const FUZZ_TARGETS: [&str; 2] = ["capi", "core_model"];

/// Run each fuzz target for a minute from the corpus in the repository
/// (what it finds goes to a scratch directory); a crash, hang or leak
/// fails. Returns the number of targets run.
fn fuzz() -> Result<u64, String> {
    for target in FUZZ_TARGETS {
        let scratch = std::env::temp_dir().join(format!("udat-fuzz-{target}"));
        std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
        let corpus = format!("fuzz/corpus/{target}");
        let args = ["+nightly", "fuzz", "run", "--fuzz-dir", "fuzz", "-O", target];
        let scratch = scratch.to_string_lossy();
        let libfuzzer = ["--", "-max_total_time=60", "-rss_limit_mb=2048", "-timeout=10"];
        let all: Vec<&str> = args.into_iter().chain([&*scratch, &corpus]).chain(libfuzzer).collect();
        run("cargo", &all)?;
    }
    Ok(FUZZ_TARGETS.len() as u64)
}

/// Run a cargo test command, echoing its output, and add up the
/// `test result:` lines: (passed, failed).
fn run_tests(args: &[&str]) -> Result<(u64, u64), String> {
    eprintln!("xtask: cargo {}", args.join(" "));
    let mut child =
        Command::new("cargo").args(args).stdout(Stdio::piped()).spawn().map_err(|e| format!("cargo: {e}"))?;
    let (mut passed, mut failed) = (0, 0);
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            // A guest's serial console ends lines with CR LF.
            let line = line.trim_end_matches('\r');
            println!("{line}");
            // `fabric` puts each guest's lines under `[server] ` or `[client] `.
            let body = line.strip_prefix('[').and_then(|l| l.split_once("] ")).map_or(line, |(_, rest)| rest);
            if let Some(rest) = body.strip_prefix("test result: ") {
                passed += count(rest, " passed");
                failed += count(rest, " failed");
            }
        }
    }
    let status = child.wait().map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err(format!("`cargo {}` failed ({status}): {passed} passed, {failed} failed", args.join(" ")));
    }
    Ok((passed, failed))
}

/// udat-verbs's tests on a real device, and the ConnectX control path's
/// refusal of it: built here, run by `softroce` (in the guest when this
/// machine has no RDMA), one guest for both. They need the examples too:
/// one test kills a peer process.
fn rxe_tests() -> Result<(u64, u64), String> {
    run("cargo", &["build", "-p", "udat-verbs", "--examples"])?;
    let verbs = test_binary("udat-verbs", "rxe", &[])?;
    let connectx = test_binary("udat-connectx", "rxe", &[])?;
    let flags = "--test-threads=1 --color=never";
    let script = format!("{verbs} {flags} && {connectx} {flags}");
    let started = std::time::Instant::now();
    let result = run_tests(&["xtask", "softroce", "--", "sh", "-c", &script]);
    eprintln!("xtask: soft-RoCE tests took {:.0} s", started.elapsed().as_secs_f64());
    result
}

/// The C ABI's thread tests (`capi/tests/threads.rs`) on soft-RoCE: a
/// thread-safe provider over udat-verbs, posting and reaping from several
/// threads at once.
fn threads_on_rxe() -> Result<(u64, u64), String> {
    let bin = test_binary("udat-capi", "threads", &[])?;
    let script = format!("UDAT_THREADS_IA='verbs rxe0' {bin} --test-threads=1 --color=never");
    run_tests(&["xtask", "softroce", "--", "sh", "-c", &script])
}

/// The fully static C example (built by [`capi::check`]) on soft-RoCE,
/// through the verbs transport, under strace: it must pass and open no
/// shared object, so no provider is loaded at run time. One check.
fn static_on_rxe() -> Result<u64, String> {
    let exe = capi::STATIC_LOOPBACK;
    let args = ["xtask", "softroce", "--", "strace", "-f", "-e", "trace=open,openat", exe, "udat-verbs-rxe0"];
    eprintln!("xtask: cargo {}", args.join(" "));
    let out = Command::new("cargo").args(args).output().map_err(|e| format!("cargo: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprint!("{text}");
    if !out.status.success() || !text.contains("loopback on udat-verbs-rxe0:") {
        return Err(format!("{exe} failed on soft-RoCE ({})", out.status));
    }
    let opened: Vec<&str> = text.lines().filter(|l| l.contains("open") && l.contains(".so")).collect();
    if !opened.is_empty() {
        return Err(format!("{exe} looked for shared objects at run time:\n{}", opened.join("\n")));
    }
    eprintln!("xtask: {exe} ran on soft-RoCE and opened no shared object");
    Ok(1)
}

/// The two event-loop consumers on soft-RoCE in one guest: the C epoll
/// loop over a CNO descriptor (built by [`capi::check`]) and the async
/// Rust ping-pong on tokio. Each checks its own counts; two checks.
fn event_loops_on_rxe() -> Result<u64, String> {
    run("cargo", &["build", "-p", "udat-verbs", "--example", "async_pingpong"])?;
    let script = format!("{} udat-verbs-rxe0 && target/debug/examples/async_pingpong rxe0 200", capi::EVENT_LOOP);
    let args = ["xtask", "softroce", "--", "sh", "-c", &script];
    eprintln!("xtask: cargo {}", args.join(" "));
    let out = Command::new("cargo").args(args).output().map_err(|e| format!("cargo: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprint!("{text}");
    if !out.status.success()
        || !text.contains("event_loop on udat-verbs-rxe0:")
        || !text.contains("async_pingpong on rxe0:")
    {
        return Err(format!("the event loops failed on soft-RoCE ({})", out.status));
    }
    Ok(2)
}

/// The OpenFabrics DAPL test programs against the plug-in, on soft-RoCE.
fn peer_tests() -> Result<(u64, u64), String> {
    let plugin = std::fs::canonicalize("target/debug/libudat_dapl.so").map_err(|e| format!("the plug-in: {e}"))?;
    let plugin = plugin.to_string_lossy();
    let started = std::time::Instant::now();
    let result = run_tests(&["xtask", "softroce", "--", "tests/peers/run.sh", &plugin]);
    eprintln!("xtask: the OpenFabrics programs took {:.0} s", started.elapsed().as_secs_f64());
    result
}

/// The OpenFabrics DAPL test programs between two soft-RoCE hosts, each
/// host's half of each case counted (`tests/fabric/run.sh`).
fn fabric_tests() -> Result<(u64, u64), String> {
    run("cargo", &["build", "-p", "udat-verbs", "--example", "fabric_stream"])?;
    run("cargo", &["build", "--release", "-p", "udat-perf"])?;
    let plugin = std::fs::canonicalize("target/debug/libudat_dapl.so").map_err(|e| format!("the plug-in: {e}"))?;
    let plugin = plugin.to_string_lossy();
    let started = std::time::Instant::now();
    let result = run_tests(&["xtask", "fabric", "--timeout", "900", "--", "tests/fabric/run.sh", &plugin]);
    eprintln!("xtask: the programs across two hosts took {:.0} s", started.elapsed().as_secs_f64());
    result
}

/// The path of the test executable `name` of `package`, built (with the
/// `extra` arguments) if needed.
fn test_binary(package: &str, name: &str, extra: &[&str]) -> Result<String, String> {
    let mut args = vec!["test", "-p", package, "--test", name, "--no-run", "--message-format=json"];
    args.extend_from_slice(extra);
    let json = output("cargo", &args)?;
    json.lines()
        .filter(|l| l.contains(&format!("\"name\":\"{name}\"")) && l.contains("\"test\":true"))
        .find_map(|l| l.split("\"executable\":\"").nth(1)?.split('"').next().map(str::to_string))
        .ok_or_else(|| format!("cargo built no test executable {name}"))
}

/// The latency example on soft-RoCE: server and client in one guest.
/// The number before `what` in a `test result:` line.
fn count(line: &str, what: &str) -> u64 {
    line.split(';')
        .find_map(|part| part.trim().trim_start_matches("ok. ").trim_start_matches("FAILED. ").strip_suffix(what))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// udat-core and the mlx5 data path build for a target with no operating
/// system and no allocator, and their libraries refer to no allocator
/// symbol.
fn bare_metal() -> Result<(), String> {
    for package in ["udat-core", "udat-mlx5"] {
        run("cargo", &["build", "-p", package, "--release", "--target", "x86_64-unknown-none"])?;
        let rlib = format!("target/x86_64-unknown-none/release/lib{}.rlib", package.replace('-', "_"));
        let symbols = output("nm", &["--undefined-only", "-A", &rlib])?;
        let alloc: Vec<&str> = symbols
            .lines()
            .filter(|l| {
                ["__rust_alloc", "__rust_dealloc", "__rust_realloc", "__rg_alloc", "__rdl_alloc"]
                    .iter()
                    .any(|s| l.contains(s))
            })
            .collect();
        if !alloc.is_empty() {
            return Err(format!("{package} refers to an allocator:\n{}", alloc.join("\n")));
        }
        eprintln!("xtask: {package} built for x86_64-unknown-none with no allocator symbol");
    }
    Ok(())
}

/// The crates whose build scripts read system headers (rdma-core's, the
/// DAT headers) or compile C.
const NEEDS_HEADERS: [&str; 7] =
    ["udat-verbs", "udat-connectx", "udat-softhca", "udat-capi", "udat-static", "bindgen", "cc"];

/// udat-core and udat build and test without system headers: nothing
/// that needs them is among their dependencies, dev-dependencies
/// included.
fn header_free() -> Result<(), String> {
    for package in ["udat-core", "udat"] {
        let tree =
            output("cargo", &["tree", "-p", package, "-e", "normal,build,dev", "--prefix", "none", "--format", "{p}"])?;
        let needs: Vec<&str> = tree
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| NEEDS_HEADERS.contains(name))
            .collect();
        if !needs.is_empty() {
            return Err(format!("{package} depends on crates that need system headers: {needs:?}"));
        }
        eprintln!("xtask: {package} builds and tests without system headers (none of {NEEDS_HEADERS:?} in its tree)");
    }
    Ok(())
}
