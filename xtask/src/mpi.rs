//! `cargo xtask mpi [--ci] [--providers udat,udat2,ofa] [--osu A,B|none]
//! [--suites A,B|none] [--ranks 2,4] [--leave-out SUITE/NAME,...]
//! [--fast-path] [--no-fabric]`:
//! a real MPI over DAT. MVAPICH2 1.7's `ch3:mrail` device speaks DAT 2.0
//! through libdat2; this builds it once, then runs its OSU benchmarks and
//! MPICH's `test/mpi` suites over udat's plug-in and over OFA dapl's cma
//! provider in one soft-RoCE guest, and prints one table, udat beside OFA.
//!
//! - The build: the release archive (`../shared/clients/mvapich2-1.7.tar.xz`,
//!   or `$MVAPICH2_ARCHIVE`) is unpacked under `target/mpi/`, given the
//!   fixes today's glibc and gcc need ([`FIXES`], `-fcommon`), configured
//!   for DAT 2.0 ([`CONFIGURE`]), built with one `make` job (parallel `ar`
//!   runs corrupt `libmpich.a`) and installed there; then `test/mpi` is
//!   configured against it and its `pt2pt`, `coll` and `rma` programs
//!   built. The directory's name is a digest of the archive, the fixes and
//!   the configuration, so a change rebuilds and nothing else does.
//! - The runs (`tests/mpi/run.sh`, in the guest): two ranks on one host
//!   through hydra's fork launcher, `MV2_USE_SHARED_MEM=0` so that every
//!   message goes through DAT, `MV2_USE_RDMA_FAST_PATH=0` unless
//!   `--fast-path` (docs/conformance.md, "MVAPICH2's RDMA fast path", says
//!   why), each run under a time limit: a run that outlives it is a hang.
//!   `flagpoll` (tests/mpi/flagpoll.c) shows on the same rxe, over raw
//!   verbs, what the fast path trips on.
//! - Across two hosts (`cargo xtask fabric`, `tests/mpi/fabric.sh`): one
//!   rank on each guest, `osu_latency` and `osu_bw`.
//!
//! `--providers udat,udat2` runs udat against itself: `udat2` is the same
//! plug-in under a second name, so the table's comparison shows what a
//! run's rounds can tell apart at all when the two sides are one provider.
//!
//! `--ci` is the subset `cargo xtask test` runs: `osu_latency`, `osu_bw`,
//! `osu_bcast` and `pt2pt` at 2 and 4 ranks, over udat, in one guest.
//!
//! The table has a row per OSU benchmark and message size (the figure each
//! provider printed) and per test/mpi program and rank count (`ok`, or the
//! failure or hang by name), then each provider's counts; the command fails
//! if anything failed over udat. OFA's failures are reported, not fatal.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The providers `tests/mpi/run.sh` names in its `dat.conf`: udat's
/// plug-in, the same plug-in again (a run's noise floor), OFA dapl's cma.
const PROVIDERS: [&str; 3] = ["udat", "udat2", "ofa"];

/// The source fixes the release needs on glibc ≥ 2.32, which removed
/// `sys_siglist`: (file, what it says, what it says instead). Each must
/// match exactly once, or the build stops.
const FIXES: [(&str, &str, &str); 2] = [
    ("src/mpid/ch3/channels/common/src/util/error_handling.c", "sys_siglist[sig]", "strsignal(sig)"),
    ("src/pm/mpirun/mpispawn.c", "sys_siglist[signal]", "strsignal(signal)"),
];

/// `configure`'s arguments after `--prefix`: the uDAPL channel over DAT 2.0
/// from libdat2, hydra, C only. `-fcommon`: gcc ≥ 10 defaults to
/// `-fno-common`, and the tree defines the same globals in several files.
const CONFIGURE: [&str; 13] = [
    "--with-device=ch3:mrail",
    "--with-rdma=udapl",
    "--with-dapl-version=2.0",
    "--with-dapl-include=/usr/include",
    "--with-dapl-libpath=/usr/lib/x86_64-linux-gnu",
    "--with-pm=hydra",
    "--disable-registration-cache",
    "--disable-f77",
    "--disable-fc",
    "--disable-cxx",
    "--disable-romio",
    "--enable-g=none",
    "CFLAGS=-O2 -fcommon -w",
];

/// The test/mpi directories run, each through its `testlist`.
const SUITES: [&str; 3] = ["pt2pt", "coll", "rma"];

/// The OSU benchmarks run, two ranks each.
const OSU: [&str; 10] = [
    "osu_latency",
    "osu_bw",
    "osu_bibw",
    "osu_put_latency",
    "osu_get_latency",
    "osu_put_bw",
    "osu_get_bw",
    "osu_acc_latency",
    "osu_alltoall",
    "osu_bcast",
];

/// What CI runs: over udat, these and `pt2pt` at 2 and 4 ranks.
const CI_OSU: [&str; 3] = ["osu_latency", "osu_bw", "osu_bcast"];

/// The test/mpi programs CI leaves out, and why; `cargo xtask mpi` runs
/// them.
const CI_LEAVES_OUT: [(&str, &str); 1] = [(
    "pt2pt/pingping",
    "millions of messages of every datatype up to 2048 elements: longer than 15 minutes under TCG, \
     over udat and OFA alike",
)];

/// test/mpi programs run with runtests keys of their own on their testlist
/// entry, and why: (program, key, why).
const SETTINGS: [(&str, &str, &str); 3] = [
    (
        "pt2pt/pingping",
        "timeLimit=3600",
        "longer than runtests' two minutes under TCG, as the tree itself gives sendflood ten",
    ),
    (
        "rma/window_creation",
        "env=MV2_PIN_POOL_SIZE=262144",
        "each of its 1,000 windows mallocs MVAPICH2's one-sided pin pool, 2 MiB by default, and registers \
         it while MVAPICH2's registration cache has room: about 1 GB pinned a rank over udat, which \
         leaves the cache more room than OFA does (docs/mpi.md), in a guest of 2 GiB",
    ),
    (
        "rma/mixedsync",
        "env=MV2_IBA_EAGER_THRESHOLD=256",
        "MVAPICH2 drops the RPUT_FINISH of a rendezvous Put that arrives while a receive handler waits in \
         the progress engine for it, over udat and OFA alike; with its 400-byte Put rendezvous too, the \
         order is one it survives (docs/conformance.md)",
    ),
];

/// Seconds the guest may take for CI's plan, a bound on the stage: a hang
/// costs this at most, and shows as cases not reported.
const CI_GUEST_TIMEOUT: u32 = 2700;

/// Seconds the guest may take for any other plan.
const GUEST_TIMEOUT: u32 = 14400;

/// One benchmark or test/mpi program over each provider, two hosts apart.
const FABRIC_OSU: [&str; 2] = ["osu_latency", "osu_bw"];

/// A built MVAPICH2: its install prefix and its configured test/mpi tree.
pub(crate) struct Build {
    prefix: PathBuf,
    tests: PathBuf,
}

/// What a run covers.
struct Plan {
    providers: Vec<String>,
    osu: Vec<&'static str>,
    suites: Vec<&'static str>,
    ranks: Vec<u32>,
    fast_path: bool,
    fabric: bool,
    /// How many times each OSU benchmark runs over each provider, the
    /// providers in turn, in the opposite order every other round; the
    /// table gives each size's median.
    rounds: u32,
    /// test/mpi programs not run (`SUITE/NAME`), and why.
    left_out: Vec<(String, &'static str)>,
    /// test/mpi programs' own runtests keys ([`SETTINGS`]).
    settings: Vec<(&'static str, &'static str, &'static str)>,
    guest_timeout: u32,
}

pub fn mpi(args: &[String]) -> Result<(), String> {
    let plan = parse(args)?;
    let build = build()?;
    let results = run(&build, &plan)?;
    println!("{}", table(&results, &plan.providers));
    print_exceptions(&plan);
    print_rank_counts(&build, &plan)?;
    print_not_applicable(&build)?;
    udat_verdict(&results, &plan).map(|_| ())
}

/// CI's stage (`cargo xtask test`): build MVAPICH2 or reuse the build,
/// run [`Plan::ci`] and print its table; (passed, failed), a hang counting
/// as a failure. Any failure fails the stage, as in the other stages.
pub fn ci() -> Result<(u64, u64), String> {
    let started = Instant::now();
    let build = build()?;
    eprintln!("xtask: MVAPICH2 ready after {:.0} s", started.elapsed().as_secs_f64());
    let plan = Plan::ci();
    let results = run(&build, &plan)?;
    println!("{}", table(&results, &plan.providers));
    print_exceptions(&plan);
    print_rank_counts(&build, &plan)?;
    eprintln!("xtask: the MPI stage took {:.0} s", started.elapsed().as_secs_f64());
    let passed = udat_verdict(&results, &plan)?;
    eprintln!("xtask: MPI over udat: {passed} passed, {} left out (listed above)", plan.left_out.len());
    Ok((passed, 0))
}

/// udat's cases passed, or an error naming its failures, hangs, and what
/// the plan runs that it never reported (a guest that stopped early).
fn udat_verdict(results: &Results, plan: &Plan) -> Result<u64, String> {
    let udat = results.counts("udat");
    let unreported =
        if plan.providers.iter().any(|p| p == "udat") { results.unreported(plan, "udat") } else { Vec::new() };
    if udat.failed + udat.hung > 0 || !unreported.is_empty() {
        return Err(format!(
            "MPI over udat: {} passed, {} failed, {} hung, not reported: {}",
            udat.passed,
            udat.failed,
            udat.hung,
            if unreported.is_empty() { "none".to_string() } else { unreported.join(", ") }
        ));
    }
    Ok(udat.passed)
}

impl Plan {
    /// What CI runs: [`CI_OSU`] and `pt2pt` at 2 and 4 ranks, over udat, on one
    /// host.
    fn ci() -> Plan {
        Plan {
            providers: vec!["udat".into()],
            osu: CI_OSU.to_vec(),
            suites: vec!["pt2pt"],
            ranks: vec![2, 4],
            fast_path: false,
            fabric: false,
            rounds: 1,
            left_out: CI_LEAVES_OUT.iter().map(|(t, why)| (t.to_string(), *why)).collect(),
            settings: SETTINGS.to_vec(),
            guest_timeout: CI_GUEST_TIMEOUT,
        }
    }
}

fn parse(args: &[String]) -> Result<Plan, String> {
    let usage = "usage: cargo xtask mpi [--ci] [--providers udat,udat2,ofa] [--osu A,B|none] [--suites A,B|none] \
                 [--ranks 2,4] [--rounds N] [--leave-out SUITE/NAME,...] [--fast-path] [--no-fabric]";
    let mut plan = Plan {
        providers: vec!["udat".into(), "ofa".into()],
        osu: OSU.to_vec(),
        suites: SUITES.to_vec(),
        ranks: vec![2, 4],
        fast_path: false,
        fabric: true,
        rounds: 1,
        left_out: Vec::new(),
        settings: SETTINGS.to_vec(),
        guest_timeout: GUEST_TIMEOUT,
    };
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--ci" => plan = Plan::ci(),
            "--providers" => {
                let list = rest.next().ok_or(usage)?;
                plan.providers = list.split(',').map(str::to_string).collect();
                if plan.providers.iter().any(|p| !PROVIDERS.contains(&p.as_str())) {
                    return Err(usage.into());
                }
            }
            "--osu" => plan.osu = subset(rest.next(), &OSU).ok_or(usage)?,
            "--suites" => plan.suites = subset(rest.next(), &SUITES).ok_or(usage)?,
            "--ranks" => {
                let list = rest.next().ok_or(usage)?;
                plan.ranks = list.split(',').map(str::parse).collect::<Result<_, _>>().map_err(|_| usage)?;
            }
            "--rounds" => {
                plan.rounds = rest.next().and_then(|n| n.parse().ok()).filter(|n| *n > 0).ok_or(usage)?;
            }
            "--fast-path" => plan.fast_path = true,
            "--no-fabric" => plan.fabric = false,
            "--leave-out" => {
                let list = rest.next().ok_or(usage)?;
                let named = list.split(',').map(|t| (t.to_string(), "left out on the command line"));
                plan.left_out.extend(named);
            }
            _ => return Err(usage.into()),
        }
    }
    Ok(plan)
}

/// The names of a comma-separated list, each one of `all`; `none` is none.
fn subset(list: Option<&String>, all: &[&'static str]) -> Option<Vec<&'static str>> {
    let list = list?;
    if list == "none" {
        return Some(Vec::new());
    }
    list.split(',').map(|name| all.iter().copied().find(|a| *a == name)).collect()
}

fn workspace() -> Result<PathBuf, String> {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).ok_or_else(|| "xtask has no parent".into())
}

fn target_dir() -> Result<PathBuf, String> {
    match std::env::var("CARGO_TARGET_DIR") {
        Ok(dir) => Ok(PathBuf::from(dir)),
        Err(_) => Ok(workspace()?.join("target")),
    }
}

fn archive() -> Result<PathBuf, String> {
    let path = match std::env::var("MVAPICH2_ARCHIVE") {
        Ok(path) => PathBuf::from(path),
        Err(_) => workspace()?.join("../shared/clients/mvapich2-1.7.tar.xz"),
    };
    fs::canonicalize(&path).map_err(|e| format!("the MVAPICH2 archive {}: {e} (set MVAPICH2_ARCHIVE)", path.display()))
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: impl IntoIterator<Item = u8>, seed: u64) -> u64 {
    bytes.into_iter().fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The build's name: a digest of the archive, the fixes and `configure`'s
/// arguments.
fn digest(archive: &[u8]) -> u64 {
    let mut h = fnv1a(archive.iter().copied(), 0xcbf2_9ce4_8422_2325);
    for (file, from, to) in FIXES {
        h = fnv1a([file, from, to].into_iter().flat_map(|s| s.bytes().chain([0])), h);
    }
    fnv1a(CONFIGURE.iter().flat_map(|s| s.bytes().chain([0])), h)
}

/// Build MVAPICH2, its test/mpi programs and flagpoll, or reuse the build
/// that is there.
pub(crate) fn build() -> Result<Build, String> {
    let archive = archive()?;
    let bytes = fs::read(&archive).map_err(|e| format!("{}: {e}", archive.display()))?;
    let dir = target_dir()?.join("mpi").join(format!("mvapich2-1.7-{:016x}", digest(&bytes)));
    let (src, prefix) = (dir.join("mvapich2-1.7"), dir.join("prefix"));
    let tests = src.join("test/mpi");
    let done = dir.join("built");
    if !done.exists() {
        let started = Instant::now();
        eprintln!("xtask: building MVAPICH2 1.7 from {} (once; in {})", archive.display(), dir.display());
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        step(Command::new("tar").arg("xJf").arg(&archive).arg("-C").arg(&dir), &dir, "unpack")?;
        for (file, from, to) in FIXES {
            fix(&src.join(file), from, to)?;
        }
        let prefix_arg = format!("--prefix={}", prefix.display());
        step(Command::new("./configure").arg(&prefix_arg).args(CONFIGURE).current_dir(&src), &dir, "configure")?;
        step(Command::new("make").current_dir(&src), &dir, "make")?;
        step(Command::new("make").arg("install").current_dir(&src), &dir, "install")?;
        eprintln!("xtask: MVAPICH2 built and installed in {:.0} s", started.elapsed().as_secs_f64());
        let with_mpi = format!("--with-mpi={}", prefix.display());
        let no_fortran = ["--disable-f77", "--disable-fc", "--disable-cxx", "--disable-romio"];
        step(Command::new("./configure").arg(&with_mpi).args(no_fortran).current_dir(&tests), &dir, "test-configure")?;
        step(Command::new("make").arg("-C").arg("util").current_dir(&tests), &dir, "test-util")?;
        for suite in SUITES {
            step(Command::new("make").arg("-C").arg(suite).current_dir(&tests), &dir, &format!("test-{suite}"))?;
        }
        fs::write(&done, "").map_err(|e| e.to_string())?;
        eprintln!("xtask: MVAPICH2 and its tests built in {:.0} s", started.elapsed().as_secs_f64());
    }
    let flagpoll = dir.join("flagpoll");
    let source = workspace()?.join("tests/mpi/flagpoll.c");
    let stale = |built: &Path| -> bool {
        let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
        modified(built) < modified(&source)
    };
    if stale(&flagpoll) {
        let mut cc = Command::new("cc");
        cc.args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"]).arg(&flagpoll).arg(&source);
        step(cc.args(["-libverbs", "-lrdmacm", "-lpthread"]), &dir, "flagpoll")?;
    }
    Ok(Build { prefix, tests })
}

/// Run one build step with its output in `dir/NAME.log`; on failure, say
/// where to look and show the log's end.
fn step(command: &mut Command, dir: &Path, name: &str) -> Result<(), String> {
    let log = dir.join(format!("{name}.log"));
    let file = fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    eprintln!("xtask: MVAPICH2: {name} (log: {})", log.display());
    let status = command.stdout(file).stderr(err).status().map_err(|e| format!("{name}: {e}"))?;
    if status.success() {
        return Ok(());
    }
    let text = fs::read_to_string(&log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(20).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(format!("MVAPICH2's {name} failed ({status}); {}:\n{}", log.display(), tail.join("\n")))
}

/// Replace the one occurrence of `from` in `file` by `to`.
fn fix(file: &Path, from: &str, to: &str) -> Result<(), String> {
    let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    if text.matches(from).count() != 1 {
        return Err(format!("{}: expected `{from}` once, to make it `{to}`", file.display()));
    }
    fs::write(file, text.replacen(from, to, 1)).map_err(|e| format!("{}: {e}", file.display()))
}

/// What a case came to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    Fail(String),
    Hang(String),
}

/// Results as the guests reported them.
#[derive(Default)]
struct Results {
    /// (test, size) → provider → the figure it printed, once a round.
    osu: BTreeMap<(String, u64), BTreeMap<String, Vec<f64>>>,
    /// (suite, test, np) → provider → outcome.
    cases: BTreeMap<(String, String, u32), BTreeMap<String, Outcome>>,
    /// OSU test → provider → the transport retries the device made during
    /// its runs (rxe's `completer_retry_err`), over every round.
    retries: BTreeMap<String, BTreeMap<String, u64>>,
    /// Other lines worth showing under the table (flagpoll's).
    notes: Vec<String>,
}

/// Passed, failed and hung cases of one provider.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    passed: u64,
    failed: u64,
    hung: u64,
}

impl Results {
    /// Take one line of a guest's output; `where_` names the host setting
    /// (`""`, or `across two hosts`), which goes into the suite's name.
    fn take(&mut self, line: &str, where_: &str) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("mpi"), Some("osu")) => {
                let w: Vec<&str> = words.collect();
                if let [provider, test, size, value] = w[..] {
                    if let (Ok(size), Ok(value)) = (size.parse(), value.parse()) {
                        let test = format!("{test}{where_}");
                        self.osu.entry((test, size)).or_default().entry(provider.into()).or_default().push(value);
                    }
                }
            }
            (Some("mpi"), Some("retries")) => {
                let w: Vec<&str> = words.collect();
                if let [provider, test, count] = w[..] {
                    if let Ok(count) = count.parse::<u64>() {
                        let test = format!("{test}{where_}");
                        *self.retries.entry(test).or_default().entry(provider.into()).or_default() += count;
                    }
                }
            }
            (Some("mpi"), Some("case")) => {
                let w: Vec<&str> = words.collect();
                if w.len() >= 5 {
                    let (provider, suite, test) = (w[0], w[1], w[2]);
                    let Ok(np) = w[3].parse() else { return };
                    let detail = w[5..].join(" ");
                    let outcome = match w[4] {
                        "ok" => Outcome::Ok,
                        "hang" => Outcome::Hang(detail),
                        _ => Outcome::Fail(detail),
                    };
                    let suite = format!("{suite}{where_}");
                    let by = self.cases.entry((suite, test.into(), np)).or_default();
                    // Over several rounds a case is as good as its worst.
                    if by.get(provider).is_none_or(|kept| *kept == Outcome::Ok) {
                        by.insert(provider.into(), outcome);
                    }
                }
            }
            (Some(first), _) if first.starts_with("flagpoll") => self.notes.push(line.trim().into()),
            _ => {}
        }
    }

    /// What `plan` runs that `provider` reported no outcome for: each OSU
    /// benchmark, and each suite at each rank count (one case at least).
    fn unreported(&self, plan: &Plan, provider: &str) -> Vec<String> {
        let has = |suite: &str, test: Option<&str>, np: Option<u32>| {
            self.cases.iter().any(|((s, t, n), outcomes)| {
                s == suite
                    && test.is_none_or(|test| t == test)
                    && np.is_none_or(|np| *n == np)
                    && outcomes.contains_key(provider)
            })
        };
        let osu = plan.osu.iter().filter(|t| !has("osu", Some(t), None)).map(|t| format!("osu/{t}"));
        let suites = plan
            .suites
            .iter()
            .flat_map(|s| plan.ranks.iter().map(move |n| (s, *n)))
            .filter(|(s, n)| !has(s, None, Some(*n)))
            .map(|(s, n)| format!("{s} at {n} ranks"));
        osu.chain(suites).collect()
    }

    fn counts(&self, provider: &str) -> Counts {
        let mut c = Counts::default();
        for outcome in self.cases.values().filter_map(|m| m.get(provider)) {
            match outcome {
                Outcome::Ok => c.passed += 1,
                Outcome::Fail(_) => c.failed += 1,
                Outcome::Hang(_) => c.hung += 1,
            }
        }
        c
    }
}

/// Build the plug-in, run the plan in one guest (and across two, if asked),
/// and gather what they report.
fn run(build: &Build, plan: &Plan) -> Result<Results, String> {
    crate::run("cargo", &["build", "--release", "-p", "udat-dapl"])?;
    let plugin = target_dir()?.join("release/libudat_dapl.so");
    let flagpoll = build.prefix.parent().ok_or("no build directory")?.join("flagpoll");
    let env = |extra: &[(&str, String)]| -> Vec<String> {
        let mut env = vec![
            format!("MPI_PREFIX={}", build.prefix.display()),
            format!("MPI_TESTS={}", build.tests.display()),
            format!("MPI_PLUGIN={}", plugin.display()),
            format!("MPI_PROVIDERS={}", plan.providers.join(" ")),
            format!("MV2_USE_RDMA_FAST_PATH={}", u8::from(plan.fast_path)),
        ];
        env.extend(extra.iter().map(|(k, v)| format!("{k}={v}")));
        env
    };
    let lists = target_dir()?.join("mpi-plan");
    write_testlists(build, plan, &lists)?;
    let mut results = Results::default();
    let started = Instant::now();
    let mut script = vec!["env".to_string()];
    script.extend(env(&[
        ("MPI_OSU", plan.osu.join(" ")),
        ("MPI_ROUNDS", plan.rounds.to_string()),
        ("MPI_SUITES", plan.suites.join(" ")),
        ("MPI_RANKS", plan.ranks.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")),
        ("MPI_FLAGPOLL", flagpoll.display().to_string()),
        ("MPI_LISTS", lists.display().to_string()),
    ]));
    script.push("tests/mpi/run.sh".into());
    let timeout = plan.guest_timeout.to_string();
    guest(&["softroce", "--timeout", &timeout, "--"], &script, "", &mut results)?;
    eprintln!("xtask: the MPI runs in one guest took {:.0} s", started.elapsed().as_secs_f64());
    if plan.fabric {
        let started = Instant::now();
        let mut script = vec!["env".to_string()];
        script.extend(env(&[("MPI_OSU", FABRIC_OSU.join(" "))]));
        script.push("tests/mpi/fabric.sh".into());
        guest(&["fabric", "--timeout", "3600", "--"], &script, " across two hosts", &mut results)?;
        eprintln!("xtask: the MPI runs across two hosts took {:.0} s", started.elapsed().as_secs_f64());
    }
    Ok(results)
}

/// Run `cargo xtask TASK... SCRIPT...`, echoing its output and taking its
/// result lines. The guest's own exit status does not decide: the results
/// do, and a guest that stops early leaves cases unreported, which the
/// table shows.
fn guest(task: &[&str], script: &[String], where_: &str, results: &mut Results) -> Result<(), String> {
    let mut args: Vec<&str> = vec!["xtask"];
    args.extend_from_slice(task);
    args.extend(script.iter().map(String::as_str));
    eprintln!("xtask: cargo {}", args.join(" "));
    let mut child = Command::new("cargo")
        .args(&args)
        .current_dir(workspace()?)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cargo: {e}"))?;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let line = line.trim_end_matches('\r');
            println!("{line}");
            // `fabric` puts each guest's lines under `[server] ` or `[client] `.
            let body = line.strip_prefix('[').and_then(|l| l.split_once("] ")).map_or(line, |(_, rest)| rest);
            results.take(body, where_);
        }
    }
    let status = child.wait().map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        eprintln!("xtask: `cargo {}` ended with {status}", args.join(" "));
    }
    Ok(())
}

/// The table: OSU figures, then test/mpi outcomes, then each provider's
/// counts.
fn table(results: &Results, providers: &[String]) -> String {
    let mut out = String::new();
    let header = |first: &str, second: &str| {
        let mut h = format!("{first:<34} {second:>8}");
        for p in providers {
            h.push_str(&format!("  {p:<24}"));
        }
        h
    };
    out.push_str(&header("OSU benchmark (2 ranks)", "size"));
    out.push('\n');
    let cell = |v: Option<&Vec<f64>>| v.and_then(|v| median(v)).map_or("-".to_string(), |m| format!("{m:.2}"));
    for ((test, size), by) in &results.osu {
        let mut row = format!("{test:<34} {size:>8}");
        for p in providers {
            row.push_str(&format!("  {:<24}", cell(by.get(p))));
        }
        out.push_str(row.trim_end());
        out.push('\n');
    }
    if let [first, other, ..] = providers {
        for line in results.compare(first, other) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    if !results.retries.is_empty() {
        out.push('\n');
        out.push_str(&header("transport retries during the run", ""));
        out.push('\n');
        for (test, by) in &results.retries {
            let mut row = format!("{test:<34} {:>8}", "");
            for p in providers {
                row.push_str(&format!("  {:<24}", by.get(p).map_or("-".to_string(), u64::to_string)));
            }
            out.push_str(row.trim_end());
            out.push('\n');
        }
    }
    out.push('\n');
    out.push_str(&header("program", "ranks"));
    out.push('\n');
    for ((suite, test, np), by) in &results.cases {
        let mut row = format!("{:<34} {np:>8}", format!("{suite}/{test}"));
        let mut details = Vec::new();
        for p in providers {
            let text = match by.get(p) {
                None => "not reported".to_string(),
                Some(Outcome::Ok) => "ok".to_string(),
                Some(Outcome::Fail(why)) => {
                    details.push(format!("    {p}: FAILED: {why}"));
                    "FAILED".to_string()
                }
                Some(Outcome::Hang(why)) => {
                    details.push(format!("    {p}: HANG: {why}"));
                    "HANG".to_string()
                }
            };
            row.push_str(&format!("  {text:<24}"));
        }
        out.push_str(row.trim_end());
        out.push('\n');
        for d in details {
            out.push_str(&d);
            out.push('\n');
        }
    }
    out.push('\n');
    for p in providers {
        let c = results.counts(p);
        out.push_str(&format!("{p}: {} passed, {} failed, {} hung\n", c.passed, c.failed, c.hung));
    }
    for note in &results.notes {
        out.push_str(note);
        out.push('\n');
    }
    out
}

/// The median of `values` (the mean of the middle two for an even count).
fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Whether the OSU benchmark `test` prints a bandwidth (more is better)
/// rather than a latency (`osu_bw`, `osu_bibw`, `osu_put_bw`, `osu_get_bw`).
fn is_bandwidth(test: &str) -> bool {
    test.contains("bw")
}

impl Results {
    /// For each OSU benchmark, at how many of the sizes both reached
    /// provider `a`'s median is at least as good as `b`'s (a latency at or
    /// below, a bandwidth at or above), and the sizes where it is not.
    fn compare(&self, a: &str, b: &str) -> Vec<String> {
        let mut tests: BTreeMap<&str, (u32, u32, Vec<u64>)> = BTreeMap::new();
        for ((test, size), by) in &self.osu {
            let (Some(x), Some(y)) = (by.get(a).and_then(|v| median(v)), by.get(b).and_then(|v| median(v))) else {
                continue;
            };
            let (good, both, worse) = tests.entry(test).or_default();
            *both += 1;
            let as_good = if is_bandwidth(test) { x >= y } else { x <= y };
            if as_good {
                *good += 1;
            } else {
                worse.push(*size);
            }
        }
        tests
            .into_iter()
            .map(|(test, (good, both, worse))| {
                let side = if is_bandwidth(test) { "at or above" } else { "at or below" };
                let mut line = format!("{test}: {a} {side} {b} at {good} of {both} sizes");
                if !worse.is_empty() {
                    let sizes: Vec<String> = worse.iter().map(u64::to_string).collect();
                    line.push_str(&format!(" (not at {} B)", sizes.join(", ")));
                }
                line
            })
            .collect()
    }
}

/// One entry of a `testlist`: a program, the ranks it names (runtests
/// runs one without at the run's count), and the line as written.
#[derive(Debug)]
struct Entry<'a> {
    name: &'a str,
    np: Option<u32>,
    line: &'a str,
}

fn entries(list: &str) -> impl Iterator<Item = Entry<'_>> {
    list.lines().filter_map(|line| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let mut words = line.split_whitespace();
        let name = words.next()?;
        Some(Entry { name, np: words.next().and_then(|w| w.parse().ok()), line })
    })
}

/// What a suite's run at one rank count takes from its `testlist`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Selection {
    /// The testlist runtests is given: the entries this run takes, with
    /// the plan's settings as runtests keys.
    list: String,
    /// Entries for more ranks than the plan's most, which no run takes:
    /// (name, the ranks listed).
    beyond: Vec<(String, u32)>,
}

/// The entries of `list` that the run at `n` ranks of a plan of `ranks`
/// takes. runtests runs an entry for more ranks than `-maxnp` at
/// `-maxnp`, where a program that needs its count fails ("Run this program
/// with 3 processes", "Number of processors must divide 10"): so each
/// entry runs once, at its own count, in the smallest run that has room
/// for it, and an entry for more ranks than the plan's most runs nowhere
/// (the largest run names it). An entry without a count runs in every
/// run. `suite`'s programs in `left_out` are not taken.
fn select(
    list: &str,
    suite: &str,
    n: u32,
    ranks: &[u32],
    left_out: &[(String, &str)],
    settings: &[(&str, &str, &str)],
) -> Selection {
    let most = ranks.iter().copied().max().unwrap_or(n);
    let below = ranks.iter().copied().filter(|&r| r < n).max().unwrap_or(0);
    let own = |name: &str| format!("{suite}/{name}");
    let left = |name: &str| left_out.iter().any(|(t, _)| *t == own(name));
    let mut s = Selection::default();
    for e in entries(list).filter(|e| !left(e.name)) {
        let take = match e.np {
            None => true,
            Some(k) if k > most => {
                if n == most {
                    s.beyond.push((e.name.to_string(), k));
                }
                false
            }
            Some(k) => below < k && k <= n,
        };
        if take {
            s.list.push_str(e.line);
            for (_, key, _) in settings.iter().filter(|(t, ..)| *t == own(e.name)) {
                s.list.push(' ');
                s.list.push_str(key);
            }
            s.list.push('\n');
        }
    }
    s
}

/// Each suite's testlist for each run of the plan, as `dir/SUITE.N.testlist`
/// (`tests/mpi/run.sh` hands them to runtests).
fn write_testlists(build: &Build, plan: &Plan, dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for suite in &plan.suites {
        let list = read_testlist(build, suite)?;
        for &n in &plan.ranks {
            let s = select(&list, suite, n, &plan.ranks, &plan.left_out, &plan.settings);
            let path = dir.join(format!("{suite}.{n}.testlist"));
            fs::write(&path, s.list).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

fn read_testlist(build: &Build, suite: &str) -> Result<String, String> {
    fs::read_to_string(build.tests.join(suite).join("testlist")).map_err(|e| format!("{suite}/testlist: {e}"))
}

/// The entries for more ranks than the plan's most, which it does not
/// run.
fn print_rank_counts(build: &Build, plan: &Plan) -> Result<(), String> {
    let Some(&most) = plan.ranks.iter().max() else { return Ok(()) };
    let mut beyond = Vec::new();
    for suite in &plan.suites {
        let s = select(&read_testlist(build, suite)?, suite, most, &plan.ranks, &plan.left_out, &plan.settings);
        beyond.extend(s.beyond.into_iter().map(|(t, k)| format!("{suite}/{t} ({k})")));
    }
    if !beyond.is_empty() {
        println!("Listed for more ranks than this plan's {most}, not run ({}): {}", beyond.len(), beyond.join(", "));
    }
    Ok(())
}

/// The programs the plan leaves out, and those it runs with settings of
/// their own, with why.
fn print_exceptions(plan: &Plan) {
    let run = |test: &str| plan.suites.iter().any(|s| test.starts_with(&format!("{s}/")));
    let settings: Vec<_> =
        plan.settings.iter().filter(|(t, ..)| run(t) && !plan.left_out.iter().any(|(l, _)| l == t)).collect();
    if !settings.is_empty() {
        println!("Run with settings of their own ({}):", settings.len());
        for (test, key, why) in settings {
            println!("  {test}: {key}: {why}");
        }
    }
    if plan.left_out.is_empty() {
        return;
    }
    println!("Left out of this plan ({}):", plan.left_out.len());
    for (test, why) in &plan.left_out {
        println!("  {test}: {why}");
    }
}

/// The tests each suite's `testlist` leaves out on purpose, with the
/// reason its comment gives.
fn print_not_applicable(build: &Build) -> Result<(), String> {
    println!("Not applicable, as the tree marks them:");
    for suite in SUITES {
        let dir = build.tests.join(suite);
        let list = read_testlist(build, suite)?;
        for (test, reason) in not_applicable(&list, |name| dir.join(format!("{name}.c")).exists()) {
            println!("  {suite}/{test}: {reason}");
        }
    }
    Ok(())
}

/// Commented-out entries of a testlist that name a test (`#name np`), each
/// with the comment lines just above it.
fn not_applicable(list: &str, is_test: impl Fn(&str) -> bool) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut comment: Vec<String> = Vec::new();
    for line in list.lines() {
        let Some(body) = line.trim().strip_prefix('#') else {
            comment.clear();
            continue;
        };
        let name = body.split_whitespace().next().unwrap_or_default();
        let np = body.split_whitespace().nth(1).is_some_and(|n| n.parse::<u32>().is_ok());
        if np && is_test(name) {
            let reason = if comment.is_empty() { "(no reason given)".to_string() } else { comment.join(" ") };
            found.push((name.to_string(), reason));
            comment.clear();
        } else {
            comment.push(body.trim().to_string());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commented_entry_is_listed_with_its_comment() {
        let list = "sendrecv1 4\n# this should be run only on machines with large memory\n# perhaps disable\n#large_message 3\n# a note\nanyall 2\n";
        let found = not_applicable(list, |n| n == "large_message");
        assert_eq!(
            found,
            [(
                "large_message".to_string(),
                "this should be run only on machines with large memory perhaps disable".to_string()
            )]
        );
        assert!(not_applicable(list, |_| false).is_empty(), "a comment that names no test is no entry");
    }

    #[test]
    fn result_lines_fill_the_table_and_the_counts() {
        let mut r = Results::default();
        r.take("mpi osu udat osu_latency 256 19.8", "");
        r.take("mpi osu ofa osu_latency 256 17.1", "");
        r.take("mpi case udat pt2pt sendrecv1 2 ok", "");
        r.take("mpi case ofa pt2pt sendrecv1 2 fail exit 1 before any size: DAT_INVALID_PARAMETER", "");
        r.take("mpi case udat osu osu_bw 2 hang no exit within 300 s, after 4194304 B", "");
        r.take("mpi case udat osu osu_bw 2", "");
        r.take("mpi retries udat osu_latency 81", "");
        r.take("mpi retries ofa osu_latency 149", "");
        r.take("mpi retries ofa osu_latency many", "");
        r.take("something else", "");
        assert_eq!(r.counts("udat"), Counts { passed: 1, failed: 0, hung: 1 });
        assert_eq!(r.counts("ofa"), Counts { passed: 0, failed: 1, hung: 0 });
        let t = table(&r, &["udat".into(), "ofa".into()]);
        assert!(t.contains("osu_latency") && t.contains("19.8") && t.contains("17.1"), "{t}");
        assert!(t.contains("ofa: FAILED: exit 1 before any size: DAT_INVALID_PARAMETER"), "{t}");
        assert!(t.contains("udat: HANG: no exit within 300 s, after 4194304 B"), "{t}");
        assert!(t.contains("osu/osu_bw") && t.contains("not reported"), "{t}");
        let retried = t.lines().skip_while(|l| !l.starts_with("transport retries")).nth(1).unwrap_or_default();
        assert!(retried.starts_with("osu_latency") && retried.contains(" 81 ") && retried.ends_with(" 149"), "{t}");
    }

    #[test]
    fn rounds_give_medians_the_worst_outcome_and_a_comparison() {
        let mut r = Results::default();
        for (udat, ofa) in [("20.0", "18.0"), ("30.0", "17.0"), ("19.0", "19.5")] {
            r.take(&format!("mpi osu udat osu_latency 256 {udat}"), "");
            r.take(&format!("mpi osu ofa osu_latency 256 {ofa}"), "");
        }
        r.take("mpi osu udat osu_latency 512 21.0", "");
        r.take("mpi osu ofa osu_latency 512 22.0", "");
        r.take("mpi osu udat osu_bw 4096 12.5", "");
        r.take("mpi osu ofa osu_bw 4096 12.0", "");
        r.take("mpi osu udat osu_bw 8192 15.0", "");
        r.take("mpi osu udat osu_bw 8192 16.0", "");
        r.take("mpi osu ofa osu_bw 8192 15.0", "");
        r.take("mpi osu udat osu_bw 16384 30.0", "");
        r.take("mpi case udat osu osu_bw 2 ok", "");
        r.take("mpi case udat osu osu_bw 2 hang no exit within 1200 s, after 8192 B", "");
        r.take("mpi case udat osu osu_bw 2 ok", "");
        r.take("mpi retries udat osu_bw 3", "");
        r.take("mpi retries udat osu_bw 4", "");
        assert_eq!(r.counts("udat"), Counts { passed: 0, failed: 0, hung: 1 }, "a later ok does not hide a hang");
        assert_eq!(r.retries["osu_bw"]["udat"], 7);
        assert_eq!(median(&[20.0, 30.0, 19.0]), Some(20.0));
        assert_eq!(median(&[15.0, 16.0]), Some(15.5));
        assert_eq!(median(&[]), None);
        assert_eq!(
            r.compare("udat", "ofa"),
            [
                "osu_bw: udat at or above ofa at 2 of 2 sizes",
                "osu_latency: udat at or below ofa at 1 of 2 sizes (not at 256 B)"
            ]
        );
        let t = table(&r, &["udat".into(), "ofa".into()]);
        assert!(t.lines().any(|l| l.starts_with("osu_latency") && l.contains("20.00") && l.ends_with("18.00")), "{t}");
        assert!(t.lines().any(|l| l.starts_with("osu_bw") && l.contains("30.00") && l.ends_with("-")), "{t}");
    }

    #[test]
    fn ci_names_what_the_guest_never_reported() {
        let plan = Plan::ci();
        let mut r = Results::default();
        r.take("mpi case udat osu osu_latency 2 ok", "");
        r.take("mpi case udat osu osu_bw 2 fail exit 1", "");
        r.take("mpi case ofa osu osu_bcast 2 ok", "");
        assert_eq!(r.unreported(&plan, "udat"), ["osu/osu_bcast", "pt2pt at 2 ranks", "pt2pt at 4 ranks"]);
        let why = udat_verdict(&r, &plan).expect_err("a failure and three unreported");
        assert!(why.contains("1 failed") && why.contains("osu/osu_bcast, pt2pt at 2 ranks, pt2pt at 4 ranks"), "{why}");
        let mut r = Results::default();
        for case in ["osu osu_latency 2", "osu osu_bw 2", "osu osu_bcast 2", "pt2pt sendrecv1 2"] {
            r.take(&format!("mpi case udat {case} ok"), "");
        }
        assert_eq!(r.unreported(&plan, "udat"), ["pt2pt at 4 ranks"]);
        r.take("mpi case udat pt2pt sendall 4 ok", "");
        assert!(r.unreported(&plan, "udat").is_empty());
        assert_eq!(udat_verdict(&r, &plan), Ok(5));
        assert_eq!(plan.left_out.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), ["pt2pt/pingping"]);
    }

    #[test]
    fn each_entry_runs_once_at_its_own_count() {
        let list = "# a comment\nwinname 2\nputfence1 4\nadlb_mimic1 3\nnocount\ncontig_displ 1\n\
                    lockcontention2 4\nlockcontention2 8\nfetchandadd 7\npingping 2\n";
        let limits = [("rma/winname", "timeLimit=600", "slow")];
        let out = [("rma/pingping".to_string(), "slow")];
        let at2 = select(list, "rma", 2, &[2, 4], &out, &limits);
        assert_eq!(at2.list, "winname 2 timeLimit=600\nnocount\ncontig_displ 1\n");
        assert!(at2.beyond.is_empty(), "the largest run names what no run takes");
        let at4 = select(list, "rma", 4, &[2, 4], &out, &limits);
        assert_eq!(at4.list, "putfence1 4\nadlb_mimic1 3\nnocount\nlockcontention2 4\n");
        assert_eq!(at4.beyond, [("lockcontention2".to_string(), 8), ("fetchandadd".to_string(), 7)]);
        let only2 = select(list, "rma", 2, &[2], &[], &[]);
        assert_eq!(only2.list, "winname 2\nnocount\ncontig_displ 1\npingping 2\n");
        assert_eq!(only2.beyond.len(), 5);
    }

    #[test]
    fn a_subset_names_only_known_members() {
        let some = String::from("osu_bw,osu_latency");
        assert_eq!(subset(Some(&some), &OSU), Some(vec!["osu_bw", "osu_latency"]));
        assert_eq!(subset(Some(&"none".into()), &OSU), Some(Vec::new()));
        assert_eq!(subset(Some(&"osu_nope".into()), &OSU), None);
        assert_eq!(subset(None, &OSU), None);
    }

    #[test]
    fn the_build_is_renamed_by_its_inputs() {
        assert_ne!(digest(b"one"), digest(b"two"));
        assert_eq!(digest(b"one"), digest(b"one"));
    }
}
