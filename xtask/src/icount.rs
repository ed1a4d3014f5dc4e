//! `cargo xtask icount [--json PATH] [--eps N]`: instructions per DAT
//! operation, counted by callgrind in release builds, printed as a
//! markdown table and, with `--json`, written as one JSON object from
//! operation key to instructions (`null` where the figure could not be
//! measured).
//!
//! Three benches:
//! - `benches/icount.rs`: the DAT layer over the null backend, through
//!   the Rust API (`rust.null.*`);
//! - `mlx5/softhca/benches/mlx5_icount.rs`: the Rust API over the mlx5 data
//!   path on the software HCA with its doorbells deferred (`rust.mlx5.*`);
//! - `benches/c/icount.c`: the C ABI of `libudat.a` over the mlx5 data path
//!   on the software HCA (`capi.*`), built here with `cc -O2` against a
//!   release `libudat.a` through `target/release/udat.pc`.
//!
//! The C ABI's 4 KiB write post also gives the share of the software HCA's
//! register hooks in it (`capi.mlx5.post.write_4k.softhca_hooks`): its
//! instructions are attributed to their inlined source lines in a build
//! with line tables ([`softhca_hooks`] says how).
//!
//! `cargo xtask icount-rxe` runs the same C program against libdat2 on
//! soft-RoCE (see [`crate::icount_rxe`]).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use crate::{capi, output, run};

/// Connected Endpoints (and LMRs) of the many-Endpoints figure unless
/// `--eps` says otherwise.
const EPS: u32 = 10_000;

/// Where the software HCA's doorbell register hands a write to the software HCA,
/// which executes the rung WQEs there as a ConnectX does in hardware: the
/// C ABI's figures leave these out (callgrind turns collection off on
/// entering one and on again on leaving it; nothing they call matches).
/// The register's stores to its stand-in page through a real `Uar`, the
/// doorbell a ConnectX runs, are counted.
const SOFTHCA_EXECUTION: &str = "udat_softhca::SoftRegister::hca_*";

/// The software HCA's register methods themselves, where they are functions of
/// their own: the doorbell's MMIO stores, counted, unlike the rest of the
/// software HCA. (They are inlined into the post, as a ConnectX's `Uar` is.)
const SOFTHCA_REGISTER: &str = "<udat_softhca::SoftRegister as udat_mlx5::doorbell::Register>";

/// The software HCA's registration and its release, which a ConnectX's
/// control path leaves to the kernel (`ibv_reg_mr`, `ibv_dereg_mr`): the
/// figure of the DAT call that makes one leaves it out, as a post's
/// leaves out [`SOFTHCA_EXECUTION`]. Each is a toggle only for its own
/// call: the bench frees each LMR it registers, and a toggle in the call
/// not collected would turn collection on.
const SOFTHCA_REGISTRATION: [(&str, &str); 2] = [
    ("dat_lmr_create", "<udat_softhca::SoftHca as udat_core::backend::Control>::mr_register"),
    ("dat_lmr_free", "<udat_softhca::SoftHca as udat_core::backend::Control>::mr_deregister"),
];

/// The mlx5 transport's entries for a request post, as callgrind names
/// them: the lane's (`post_one`), a thread-safe provider's and the
/// exclusive one; the last two have the same code, so that the linker may
/// fold them into one, under either name.
const MLX5_POSTS: [&str; 3] = [
    "<udat_mlx5::backend::Mlx5<D,S> as udat_core::backend::Backend>::post_one",
    "<udat_mlx5::backend::Mlx5<D,S> as udat_core::backend::Backend>::post_send_shared",
    "<udat_mlx5::backend::Mlx5<D,S> as udat_core::backend::Backend>::post_send",
];

/// Functions of the software HCA; none may add to a counted figure.
const SOFTHCA: &str = "udat_softhca::";

/// Exit status of the C bench when the provider ran out of objects.
const EXIT_RESOURCES: i32 = 3;

/// One figure: its key, what it measures, and instructions per operation
/// (`None`: not measured, and a line on stderr said why).
pub(crate) struct Figure {
    key: String,
    what: String,
    value: Option<f64>,
}

impl Figure {
    pub(crate) fn new(key: impl Into<String>, what: impl Into<String>, value: Option<f64>) -> Figure {
        Figure { key: key.into(), what: what.into(), value }
    }
}

pub fn icount(args: &[String]) -> Result<(), String> {
    let (json, eps) = parse_args(args)?;
    let mut figures = null_backend()?;
    figures.extend(rust_mlx5()?);
    figures.extend(capi_mlx5(eps)?);
    print_table(&figures);
    if let Some(path) = json {
        std::fs::write(&path, to_json(&figures)).map_err(|e| format!("{path}: {e}"))?;
        eprintln!("xtask: wrote {path}");
    }
    Ok(())
}

/// `--json PATH` and `--eps N`.
fn parse_args(args: &[String]) -> Result<(Option<String>, u32), String> {
    let usage = || "usage: cargo xtask icount [--json PATH] [--eps N]".to_string();
    let (mut json, mut eps) = (None, EPS);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json = Some(args.next().ok_or_else(usage)?.clone()),
            "--eps" => {
                eps = args.next().and_then(|n| n.parse().ok()).filter(|n| *n >= 2 && n % 2 == 0).ok_or_else(usage)?
            }
            _ => return Err(usage()),
        }
    }
    Ok((json, eps))
}

fn print_table(figures: &[Figure]) {
    println!("| key | operation | instructions |");
    println!("| --- | --- | --- |");
    for f in figures {
        let value = f.value.map_or("not measured".to_string(), |v| format!("{v:.1}"));
        println!("| `{}` | {} | {value} |", f.key, f.what);
    }
}

/// One JSON object, keys sorted, one decimal.
pub(crate) fn to_json(figures: &[Figure]) -> String {
    let sorted: BTreeMap<&str, Option<f64>> = figures.iter().map(|f| (f.key.as_str(), f.value)).collect();
    let fields: Vec<String> = sorted
        .iter()
        .map(|(key, value)| format!("  \"{key}\": {}", value.map_or("null".to_string(), |v| format!("{v:.1}"))))
        .collect();
    format!("{{\n{}\n}}\n", fields.join(",\n"))
}

/// What callgrind collected in one run.
struct Profile {
    total: u64,
    /// Per function as callgrind_annotate names it: inclusive cost.
    inclusive: Vec<(String, u64)>,
    /// Per function: self cost.
    own: Vec<(String, u64)>,
}

impl Profile {
    /// Inclusive cost of the functions named exactly `name`.
    fn inclusive_of(&self, name: &str) -> u64 {
        self.inclusive.iter().filter(|(f, _)| function_name(f) == name).map(|(_, n)| n).sum()
    }

    /// Self cost of every function whose name contains `part`.
    /// What the software HCA collected beyond its register's stores: its
    /// execution, which no figure may count.
    fn softhca_own(&self) -> u64 {
        self.own_of(SOFTHCA) - self.own_of(SOFTHCA_REGISTER)
    }

    fn own_of(&self, part: &str) -> u64 {
        self.own.iter().filter(|(f, _)| f.contains(part)).map(|(_, n)| n).sum()
    }
}

/// `file:function [object]` of a callgrind_annotate line, less file and
/// object.
fn function_name(line: &str) -> &str {
    let line = line.rsplit_once(" [").map_or(line, |(f, _)| f);
    line.split_once(':').map_or(line, |(_, f)| f)
}

/// How a callgrind run of a bench ended.
enum Outcome<T> {
    Counted(T),
    /// The bench could not create the objects it needs: its message.
    OutOfObjects(String),
}

/// Run `bin args` under callgrind into `out_file`, collecting only inside
/// functions matching one of `toggles` (everywhere when there is none),
/// with callgrind's `options` besides.
fn callgrind(
    bin: &str,
    args: &[&str],
    toggles: &[&str],
    options: &[&str],
    out_file: &str,
) -> Result<Outcome<u64>, String> {
    let mut argv = vec!["--tool=callgrind".to_string(), format!("--callgrind-out-file={out_file}")];
    argv.extend(toggles.iter().map(|t| format!("--toggle-collect={t}")));
    argv.extend(options.iter().map(|o| o.to_string()));
    argv.push(bin.to_string());
    argv.extend(args.iter().map(|a| a.to_string()));
    let out = Command::new("valgrind").args(&argv).output().map_err(|e| format!("valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(EXIT_RESOURCES) {
        let why = stderr.lines().find(|l| l.contains("insufficient resources")).unwrap_or("out of objects");
        return Ok(Outcome::OutOfObjects(why.to_string()));
    }
    if !out.status.success() {
        return Err(format!("`valgrind {}` failed ({}):\n{stderr}", argv.join(" "), out.status));
    }
    let text = std::fs::read_to_string(out_file).map_err(|e| format!("{out_file}: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .and_then(|v| v.trim().parse().ok())
        .map(Outcome::Counted)
        .ok_or_else(|| format!("{out_file}: no summary line"))
}

/// Instructions of `bin args`, which must run to the end.
fn counted(bin: &str, args: &[&str], toggles: &[&str], out_file: &str) -> Result<u64, String> {
    match callgrind(bin, args, toggles, &[], out_file)? {
        Outcome::Counted(n) => Ok(n),
        Outcome::OutOfObjects(why) => Err(format!("{bin}: {why}")),
    }
}

/// The functions of a callgrind out file with their costs, inclusive or
/// self.
fn annotate(out_file: &str, inclusive: bool) -> Result<Vec<(String, u64)>, String> {
    let mode = format!("--inclusive={}", if inclusive { "yes" } else { "no" });
    let text = output("callgrind_annotate", &[&mode, "--auto=no", "--threshold=100", out_file])?;
    Ok(text.lines().filter_map(annotated_cost).collect())
}

/// The function and cost of one line of callgrind_annotate's function
/// list (`1,234 (5.6%)  file:function [object]`); `None` for any other
/// line, the program's total among them.
pub(crate) fn annotated_cost(line: &str) -> Option<(String, u64)> {
    let (cost, rest) = line.trim_start().split_once(' ')?;
    let cost = cost.replace(',', "").parse().ok()?;
    let name = rest.trim_start().strip_prefix('(')?.split_once(')')?.1.trim();
    (name != "PROGRAM TOTALS").then(|| (name.to_string(), cost))
}

// ---- the DAT layer over the null backend ----

/// The Rust API over a backend that does nothing: what the DAT layer
/// itself costs. Each figure is the difference of two whole-program runs
/// (K and 2K operations) over K, so setup cancels; a dequeue is a loop of
/// post and dequeue less the post.
fn null_backend() -> Result<Vec<Figure>, String> {
    output("cargo", &["bench", "-p", "udat", "--bench", "icount", "--no-run", "--message-format=short"])?;
    let bin = find_bench_binary("icount")?;
    const K: u64 = 10_000;
    let per_op = |op: &str| -> Result<f64, String> {
        let run = |k: u64| counted(&bin, &[op, &k.to_string()], &[], &format!("target/callgrind.{op}.{k}"));
        Ok((run(2 * K)? - run(K)?) as f64 / K as f64)
    };
    let post = per_op("post")?;
    let batched = per_op("reap")? - post;
    let single = per_op("pingpong")? - post;
    Ok(vec![
        Figure::new("rust.null.post.send", "null backend: `ep_post_send`, 1 segment", Some(post)),
        Figure::new(
            "rust.null.dequeue.batch16",
            "null backend: `evd_dequeue`, completions polled 16 at a time",
            Some(batched),
        ),
        Figure::new(
            "rust.null.dequeue.one",
            "null backend: `evd_dequeue`, one completion per poll (ping-pong)",
            Some(single),
        ),
    ])
}

// ---- the Rust API over the mlx5 data path ----

/// Instructions per DAT call through the Rust API on the mlx5 data path
/// over the software HCA with doorbells deferred, counted only inside the
/// bench's `measured_*` functions (the software HCA's execution is outside them;
/// a deferred doorbell register costs a handful of instructions, as an
/// MMIO store would). A post's doorbell calls into the software HCA, which
/// is not counted ([`SOFTHCA_EXECUTION`]); only the posts ring one inside
/// a measured function, so only theirs toggle it (a toggle in the posts
/// a dequeue bench makes outside would turn collection on). Each figure
/// is the count over the number of calls.
fn rust_mlx5() -> Result<Vec<Figure>, String> {
    let args = ["bench", "-p", "udat-softhca", "--bench", "mlx5_icount", "--no-run", "--message-format=short"];
    output("cargo", &args)?;
    let bin = find_bench_binary("mlx5_icount")?;
    const K: u64 = 3200;
    let mut figures = Vec::new();
    for (key, op, what) in [
        (
            "rust.mlx5.post.write_64_inline",
            "write_inline",
            "Rust API, mlx5: `ep_post_rdma_write`, 64 B inline (BlueFlame)",
        ),
        ("rust.mlx5.post.write_4k", "write", "Rust API, mlx5: `ep_post_rdma_write`, 4 KiB gathered (BlueFlame)"),
        ("rust.mlx5.post.send_64_inline", "send", "Rust API, mlx5: `ep_post_send`, 64 B inline (BlueFlame)"),
        (
            "rust.mlx5.post.write_64_inline.fast",
            "write_inline_fast",
            "Rust fast path, mlx5: `Poster::post` of a kept `rdma_write`, 64 B inline (BlueFlame)",
        ),
        (
            "rust.mlx5.post.write_4k.fast",
            "write_fast",
            "Rust fast path, mlx5: `Poster::post` of a kept `rdma_write`, 4 KiB gathered",
        ),
        (
            "rust.mlx5.post.send_64_inline.fast",
            "send_fast",
            "Rust fast path, mlx5: `Poster::post` of a kept `send`, 64 B inline",
        ),
        ("rust.mlx5.dequeue.one", "dequeue_one", "Rust API, mlx5: `evd_dequeue`, the only CQE waiting"),
        ("rust.mlx5.dequeue.batch16", "dequeue_batch16", "Rust API, mlx5: `evd_dequeue`, per event of 16 CQEs waiting"),
    ] {
        let out_file = format!("target/callgrind.mlx5.{op}");
        let toggles: &[&str] =
            if op.starts_with("dequeue") { &["*measured_*"] } else { &["*measured_*", SOFTHCA_EXECUTION] };
        let total = counted(&bin, &[op, &K.to_string()], toggles, &out_file)?;
        figures.push(Figure::new(key, what, Some(total as f64 / K as f64)));
    }
    Ok(figures)
}

// ---- the C ABI over the mlx5 data path ----

/// One operation of the C bench: its name there, and the DAT call counted.
struct CapiOp {
    key: &'static str,
    op: &'static str,
    call: &'static str,
    what: &'static str,
    /// Whether the IA is opened thread-safe (`-t`): posts and dequeues
    /// then run with the provider shared (README, "Threads").
    thread_safe: bool,
}

const CAPI_OPS: [CapiOp; 14] = [
    CapiOp {
        key: "capi.mlx5.post.write_4k",
        op: "write_4k",
        call: "dat_ep_post_rdma_write",
        what: "C ABI, mlx5: `dat_ep_post_rdma_write`, 4 KiB, 1 segment, signalled",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.post.write_64_inline",
        op: "write_64_inline",
        call: "dat_ep_post_rdma_write",
        what: "C ABI, mlx5: `dat_ep_post_rdma_write`, 64 B inline, signalled",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.post.send_64_inline",
        op: "send_64_inline",
        call: "dat_ep_post_send",
        what: "C ABI, mlx5: `dat_ep_post_send`, 64 B inline, receive posted",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.post.read_4k",
        op: "read_4k",
        call: "dat_ep_post_rdma_read",
        what: "C ABI, mlx5: `dat_ep_post_rdma_read`, 4 KiB, 1 segment, signalled",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.post.send_4k",
        op: "send_4k",
        call: "dat_ep_post_send",
        what: "C ABI, mlx5: `dat_ep_post_send`, 4 KiB, 1 segment (not inline), receive posted",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.post.recv",
        op: "recv",
        call: "dat_ep_post_recv",
        what: "C ABI, mlx5: `dat_ep_post_recv`, 4 KiB, 1 segment",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.dequeue.one",
        op: "dequeue_one",
        call: "dat_evd_dequeue",
        what: "C ABI, mlx5: `dat_evd_dequeue`, the only CQE waiting",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.dequeue.batch16",
        op: "dequeue_batch16",
        call: "dat_evd_dequeue",
        what: "C ABI, mlx5: `dat_evd_dequeue`, per event of 16 CQEs waiting",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.dequeue.empty",
        op: "dequeue_empty",
        call: "dat_evd_dequeue",
        what:
            "C ABI, mlx5: `dat_evd_dequeue` of an empty DTO EVD (`DAT_QUEUE_EMPTY`), the coarse clock's read included",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.lmr.create_4k",
        op: "lmr_create",
        call: "dat_lmr_create",
        what: "C ABI, mlx5: `dat_lmr_create` of 4 KiB, all privileges, each freed before the next, less the software HCA's registration",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.lmr.free_4k",
        op: "lmr_free",
        call: "dat_lmr_free",
        what: "C ABI, mlx5: `dat_lmr_free` of a 4 KiB LMR, less the software HCA's release",
        thread_safe: false,
    },
    CapiOp {
        key: "capi.mlx5.post.write_4k.threadsafe",
        op: "write_4k",
        call: "dat_ep_post_rdma_write",
        what: "C ABI, mlx5, thread-safe IA: `dat_ep_post_rdma_write`, 4 KiB, the provider shared",
        thread_safe: true,
    },
    CapiOp {
        key: "capi.mlx5.post.recv.threadsafe",
        op: "recv",
        call: "dat_ep_post_recv",
        what: "C ABI, mlx5, thread-safe IA: `dat_ep_post_recv`, 4 KiB, the provider shared",
        thread_safe: true,
    },
    CapiOp {
        key: "capi.mlx5.dequeue.one.threadsafe",
        op: "dequeue_one",
        call: "dat_evd_dequeue",
        what: "C ABI, mlx5, thread-safe IA: `dat_evd_dequeue`, the only CQE waiting, the provider shared",
        thread_safe: true,
    },
];

/// The C ABI figures. Each is (count at 2K − count at K) / K from two runs
/// of the C bench that collect only inside the counted DAT call (for a
/// post, less the software HCA's doorbell registers), so what the setup collects
/// (its polls of connection events call `dat_evd_dequeue`) cancels.
fn capi_mlx5(eps: u32) -> Result<Vec<Figure>, String> {
    let bin = build_capi_bench(Build::Release)?;
    let mut figures = Vec::new();
    for op in &CAPI_OPS {
        let (at_k, at_2k) = capi_pair(&bin, op)?;
        let value = per_op(at_k.total, at_2k.total, CAPI_K);
        figures.push(Figure::new(op.key, op.what, Some(value)));
        if op.op == "write_4k" && !op.thread_safe {
            let split = build_capi_bench(Build::DatLayerApart)?;
            let (at_k, at_2k) = capi_pair(&split, op)?;
            figures.push(capi_null(&at_k, &at_2k, CAPI_K)?);
            figures.push(softhca_hooks(op, value)?);
        }
    }
    figures.push(capi_eps(&bin, eps)?);
    Ok(figures)
}

/// Operations in the shorter of the two runs of a C ABI figure.
const CAPI_K: u64 = 3200;

/// The operations the software HCA's own code runs in without executing
/// anything: a dequeue of an empty EVD reads the device's clock, to know
/// whether a look at connection events is due, and takes the look (the
/// software HCA is its own connection manager) when it is.
const DEVICE_CLOCKED: [&str; 1] = ["dequeue_empty"];

/// The profiles of the runs at K and 2K of `op`, in which the software HCA's
/// execution must not grow with K (but for [`DEVICE_CLOCKED`] operations).
fn capi_pair(bin: &str, op: &CapiOp) -> Result<(Profile, Profile), String> {
    let flags: &[&str] = if op.thread_safe { &["-t"] } else { &[] };
    let mut runs = [CAPI_K, 2 * CAPI_K].into_iter().map(|k| match capi_run(bin, op.op, op.call, k, flags, &[])? {
        Outcome::Counted(p) => Ok(p),
        Outcome::OutOfObjects(why) => Err(format!("{}: {why}", op.key)),
    });
    let (at_k, at_2k) = (runs.next().expect("two runs")?, runs.next().expect("two runs")?);
    if at_2k.softhca_own() != at_k.softhca_own() && !DEVICE_CLOCKED.contains(&op.op) {
        return Err(format!("{}: the software HCA's execution is counted in `{}`", op.key, op.call));
    }
    Ok((at_k, at_2k))
}

fn per_op(at_k: u64, at_2k: u64, k: u64) -> f64 {
    (at_2k as f64 - at_k as f64) / k as f64
}

/// The DAT layer alone through the C ABI, from the 4 KiB write runs of
/// the build that keeps the mlx5 transport's `post_send` a function of
/// its own ([`Build::DatLayerApart`]; the release build inlines it into
/// each post): what `dat_ep_post_rdma_write` collected less the inclusive
/// cost of `post_send` inside it (callgrind_annotate --inclusive=yes:
/// everything from the core's call into the backend on, WQE, ring and
/// doorbell), per post, as the difference of the two runs. No test-double
/// transport is needed, so none is shipped.
fn capi_null(at_k: &Profile, at_2k: &Profile, k: u64) -> Result<Figure, String> {
    let transport = |p: &Profile| MLX5_POSTS.iter().map(|f| p.inclusive_of(f)).sum::<u64>();
    if transport(at_k) == 0 {
        return Err(format!("capi.null.post.write_4k: none of {MLX5_POSTS:?} in the profile (inlined?)"));
    }
    let dat_layer = |p: &Profile| p.total - transport(p);
    Ok(Figure::new(
        "capi.null.post.write_4k",
        "C ABI, DAT layer alone: the 4 KiB write post less the transport's post",
        Some(per_op(dat_layer(at_k), dat_layer(at_2k), k)),
    ))
}

/// Where the software HCA's register is written: an instruction whose
/// innermost source in this workspace is here belongs to its hooks.
const SOFTHCA_SOURCE: &str = "mlx5/softhca/src/lib.rs";

/// The software HCA's register hooks in the 4 KiB write post: what the
/// software HCA's `Register` methods run that a ConnectX's `Uar` does not, the
/// `deferred` flag's load and test and the calls into `hca_*` (collection
/// stops inside those). The methods are inlined into the post, so no
/// function's cost shows them; instead, the post runs at K and 2K in the
/// build with line tables ([`Build::LineTables`]) under callgrind with
/// `--dump-instr=yes`, each instruction collected is mapped by
/// `addr2line -i` to its chain of inlined source locations, and those
/// whose innermost location in this workspace (the standard library's
/// atomics and `Arc` lie outside it) is in [`SOFTHCA_SOURCE`] are summed.
/// The mirror `Uar`'s stores resolve to `mlx5/src/doorbell.rs` and stay
/// out. What the hooks cost beyond their own instructions (registers kept
/// across the calls, say) is not attributable this way and is not in it.
fn softhca_hooks(op: &CapiOp, release: f64) -> Result<Figure, String> {
    let bin = build_capi_bench(Build::LineTables)?;
    let (at_k, at_2k) = (instruction_costs(&bin, op, CAPI_K)?, instruction_costs(&bin, op, 2 * CAPI_K)?);
    let total = per_op(at_k.values().sum(), at_2k.values().sum(), CAPI_K);
    // The two totals differ only by the C dispatcher's frame pointer.
    eprintln!(
        "xtask: {}: {total:.1} instructions per post in the build with line tables, {release:.1} in the release build",
        op.key
    );
    let hca = in_softhca(&bin, at_2k.keys().copied())?;
    let hooks = |costs: &BTreeMap<u64, u64>| costs.iter().filter(|(a, _)| hca.contains(a)).map(|(_, n)| n).sum();
    let value = per_op(hooks(&at_k), hooks(&at_2k), CAPI_K);
    if value <= 0.0 {
        return Err(format!("{}: no instruction of the post maps to {SOFTHCA_SOURCE} (no line tables?)", op.key));
    }
    Ok(Figure::new(
        format!("{}.softhca_hooks", op.key),
        "C ABI, mlx5: the software HCA's register hooks (`deferred` checks, calls into `hca_*`) in the 4 KiB write post",
        Some(value),
    ))
}

/// Instructions collected at each address in a run of `op` K times.
fn instruction_costs(bin: &str, op: &CapiOp, k: u64) -> Result<BTreeMap<u64, u64>, String> {
    let out_file = format!("target/callgrind.capi.{}.lines.{k}", op.op);
    let options = ["--dump-instr=yes", "--dump-line=no", "--compress-pos=no"];
    match callgrind(bin, &[op.op, &k.to_string()], &capi_toggles(op.call), &options, &out_file)? {
        Outcome::Counted(_) => {}
        Outcome::OutOfObjects(why) => return Err(format!("{}: {why}", op.key)),
    }
    let text = std::fs::read_to_string(&out_file).map_err(|e| format!("{out_file}: {e}"))?;
    Ok(self_costs(&text))
}

/// Self cost per instruction address of a callgrind out file written with
/// `--dump-instr=yes --dump-line=no --compress-pos=no`: each cost line is
/// `0xADDRESS COST`, and the line after a `calls=` line is the call's
/// inclusive cost, which belongs to the callee and is left out.
fn self_costs(text: &str) -> BTreeMap<u64, u64> {
    let mut costs = BTreeMap::new();
    let mut after_call = false;
    for line in text.lines() {
        if line.starts_with("calls=") {
            after_call = true;
            continue;
        }
        let Some((address, cost)) = line.strip_prefix("0x").and_then(|l| l.split_once(' ')) else { continue };
        if std::mem::take(&mut after_call) {
            continue;
        }
        if let (Ok(address), Ok(cost)) = (u64::from_str_radix(address, 16), cost.trim().parse::<u64>()) {
            *costs.entry(address).or_default() += cost;
        }
    }
    costs
}

/// The addresses among `addresses` whose innermost source location in
/// this workspace is in [`SOFTHCA_SOURCE`], by `addr2line -i`, which prints
/// each address and then its locations, innermost first.
fn in_softhca(bin: &str, addresses: impl Iterator<Item = u64>) -> Result<BTreeSet<u64>, String> {
    let root = std::fs::canonicalize(".").map_err(|e| format!(".: {e}"))?;
    let root = format!("{}/", root.to_string_lossy());
    let mut args = vec!["-a".to_string(), "-i".to_string(), "-e".to_string(), bin.to_string()];
    args.extend(addresses.map(|a| format!("{a:#x}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = output("addr2line", &args)?;
    let mut hca = BTreeSet::new();
    let mut current: Option<u64> = None;
    for line in text.lines() {
        if let Some(address) = line.strip_prefix("0x").and_then(|a| u64::from_str_radix(a, 16).ok()) {
            current = Some(address);
        } else if let Some(address) = current.filter(|_| line.starts_with(&root)) {
            // The first location in the workspace decides the address.
            if line.contains(SOFTHCA_SOURCE) {
                hca.insert(address);
            }
            current = None;
        }
    }
    Ok(hca)
}

/// The 4 KiB write post with `eps` connected Endpoints and as many LMRs
/// live, each post on the next Endpoint; null when the provider cannot
/// hold that many objects. One run, count over posts: with a post's
/// toggles nothing else is collected, which the software HCA's absence from the
/// profile confirms (its setup alone grows with the square of `eps`, as
/// the software HCA visits every QP at each doorbell and connection event).
fn capi_eps(bin: &str, eps: u32) -> Result<Figure, String> {
    let key = format!("capi.mlx5.post.write_4k.eps_{eps}");
    let what = "C ABI, mlx5: `dat_ep_post_rdma_write`, 4 KiB, round robin over N connected Endpoints and N LMRs";
    // At least a few thousand posts, and whole rounds of the Endpoints.
    let k = u64::from(eps) * (4096 / u64::from(eps)).max(1);
    let value = match capi_run(bin, "write_4k_eps", "dat_ep_post_rdma_write", k, &[], &[&eps.to_string()])? {
        Outcome::Counted(p) if p.softhca_own() == 0 => Some(p.total as f64 / k as f64),
        Outcome::Counted(_) => return Err(format!("{key}: the software HCA's execution is counted")),
        Outcome::OutOfObjects(why) => {
            eprintln!("xtask: !!! {key} NOT MEASURED, recorded as null: the C ABI could not hold {eps} Endpoints and LMRs ({why})");
            None
        }
    };
    Ok(Figure::new(key, what, value))
}

/// What a run of the C bench collects in: `call`, and for a request post,
/// not in the software HCA's execution inside it. Only a request post rings the
/// doorbell the software HCA executes in; a toggle is a toggle, so for any other
/// call the software HCA's would turn collection on in the uncounted posts that
/// ring it (`recv`'s sends). A registration or its release leaves out the
/// software HCA's ([`SOFTHCA_REGISTRATION`]).
fn capi_toggles(call: &str) -> Vec<&str> {
    let mut toggles = vec![call];
    if call.starts_with("dat_ep_post_") && call != "dat_ep_post_recv" {
        toggles.push(SOFTHCA_EXECUTION);
    }
    toggles.extend(SOFTHCA_REGISTRATION.iter().filter(|(c, _)| *c == call).map(|(_, hca)| *hca));
    toggles
}

/// A run of the C bench doing `op` K times, counting `call`, and its
/// profile.
fn capi_run(
    bin: &str,
    op: &str,
    call: &str,
    k: u64,
    flags: &[&str],
    extra: &[&str],
) -> Result<Outcome<Profile>, String> {
    let k = k.to_string();
    let out_file = format!("target/callgrind.capi.{op}{}.{k}", flags.concat());
    let mut args = flags.to_vec();
    args.extend([op, &k]);
    args.extend(extra);
    Ok(match callgrind(bin, &args, &capi_toggles(call), &[], &out_file)? {
        Outcome::Counted(total) => {
            Outcome::Counted(Profile { total, inclusive: annotate(&out_file, true)?, own: annotate(&out_file, false)? })
        }
        Outcome::OutOfObjects(why) => Outcome::OutOfObjects(why),
    })
}

/// Which `libudat.a` the C bench links.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Build {
    /// The release build.
    Release,
    /// The release build with the mlx5 transport's request post kept a
    /// function of its own (feature `measure-dat-layer`), in its own target
    /// directory: the DAT layer's figure is the post less it.
    DatLayerApart,
    /// The release build with line tables, in its own target directory,
    /// and the bench linked at fixed addresses: each instruction callgrind
    /// reports maps to its inlined source ([`softhca_hooks`]).
    LineTables,
}

/// Build a release `libudat.a`, its `udat.pc`, and the C bench against
/// them; the bench's path.
fn build_capi_bench(build: Build) -> Result<String, String> {
    let (features, dir, exe) = match build {
        Build::Release => ("softhca", "target", "target/release/icount-capi"),
        Build::DatLayerApart => ("measure-dat-layer", "target/dat-layer", "target/dat-layer/release/icount-capi"),
        Build::LineTables => ("softhca", "target/icount-lines", "target/icount-lines/release/icount-capi"),
    };
    let cargo = ["build", "--release", "-p", "udat-static", "--features", features, "--target-dir", dir];
    if build == Build::LineTables {
        build_with_line_tables(&cargo)?;
    } else {
        run("cargo", &cargo)?;
    }
    let flags = capi::pkg_config(&format!("{dir}/release"))?;
    let mut cc = vec!["-O2", "-Wall", "-Wextra", "-Werror", "benches/c/icount.c", "-o", exe];
    if build == Build::LineTables {
        // Callgrind reports run-time addresses; addr2line reads the file's.
        cc.push("-no-pie");
    }
    cc.extend(flags.split_whitespace());
    run("cc", &cc)?;
    Ok(exe.to_string())
}

/// `cargo ARGS` with line tables in the release profile. They add debug
/// sections and leave the Rust code as it is; the `cc` crate, though,
/// compiles the C dispatcher with frame pointers when debug info is on,
/// which moves the post's total by a few instructions.
fn build_with_line_tables(args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: CARGO_PROFILE_RELEASE_DEBUG=line-tables-only cargo {}", args.join(" "));
    let status = Command::new("cargo")
        .args(args)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "line-tables-only")
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err(format!("`cargo {}` with line tables failed ({status})", args.join(" ")));
    }
    Ok(())
}

fn find_bench_binary(name: &str) -> Result<String, String> {
    let dir = std::fs::read_dir("target/release/deps").map_err(|e| format!("target/release/deps: {e}"))?;
    let mut found: Vec<(std::time::SystemTime, String)> = dir
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&format!("{name}-")) && !n.contains('.')
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path().to_string_lossy().into_owned())))
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p).ok_or_else(|| format!("no {name} bench binary in target/release/deps"))
}
