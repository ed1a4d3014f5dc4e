//! `cargo xtask icount-rxe [--json PATH]`: instructions per DAT call on
//! a soft-RoCE device, through udat's libdat2 plug-in and through OFA
//! dapl's cma provider, in one run, counted by callgrind in user space:
//! the posts of one 4 KiB segment (`dat_ep_post_rdma_write` and
//! `dat_ep_post_rdma_read`, signalled; `dat_ep_post_send`, its receive
//! posted; `dat_ep_post_recv`), `dat_evd_dequeue` of one completion and
//! of none, and a registration of 4 KiB and its release
//! (`dat_lmr_create`, `dat_lmr_free`).
//!
//! `benches/c/icount.c`, linked with `-ldat2` (`target/release/icount-dat2`),
//! connects two Endpoints of one IA to each other through a PSP and does
//! an operation K times between them; `benches/c/icount-rxe.sh` runs it
//! through `softroce` (in the QEMU guest when this machine has no RDMA),
//! with a `dat.conf` naming both providers, under
//! `valgrind --tool=callgrind --toggle-collect=CALL` for the DAT call the
//! operation counts, for K and 2K operations per provider. A figure is
//! (count at 2K − count at K) / K, so that what the setup collects
//! cancels. A post's covers libdat2's dispatcher, the provider's post, and
//! librxe's post_send or post_recv (`ibv_post_send` and `ibv_post_recv`
//! are inline) with the libc it calls, or, for udat, whose posts and
//! polls reach rxe's queues in place, the libc udat calls: for a request,
//! the system call that rings the kernel, not the kernel's side of it.
//! Reaping completions is outside the counted post.
//!
//! rxe completes a request after its post returns, so the dequeue runs
//! the bench with `-w`: each counted `dat_evd_dequeue` is made after the
//! completion had time to arrive (it must find it), and the setup waits
//! for connection events with `dat_evd_wait`, so that no empty dequeue,
//! whose number would vary from run to run, is counted.
//!
//! The figures go into their own JSON file rather than `cargo xtask
//! icount`'s: they need an RDMA device (here a guest that takes minutes),
//! and they measure another transport.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::icount::{annotated_cost, to_json, Figure};
use crate::run;

/// Operations in the shorter of a provider's two runs.
const K: u64 = 500;

/// Seconds the guest may take for all the runs (about a minute each).
const GUEST_TIMEOUT: &str = "3600";

/// The C bench built against libdat2.
const BENCH: &str = "target/release/icount-dat2";

/// The script run on the RDMA device.
const SCRIPT: &str = "benches/c/icount-rxe.sh";

/// A provider as `benches/c/icount-rxe.sh`'s `dat.conf` names it.
struct Provider {
    /// Its IA name in `dat.conf`.
    ia: &'static str,
    /// The start of its library's file name.
    library: &'static str,
    what: &'static str,
    /// Whether its posts and polls reach rxe's queues in place rather
    /// than through librxe (udat's, docs/design.md): librxe must then not
    /// run in its calls, so a call that fell back to librxe fails the run.
    in_place: bool,
}

const PROVIDERS: [Provider; 2] = [
    Provider { ia: "ofa", library: "libdaplofa.so", what: "OFA dapl 2.1 cma (libdaplofa) on rxe", in_place: false },
    Provider { ia: "udat", library: "libudat_dapl.so", what: "udat's plug-in (libudat_dapl) on rxe", in_place: true },
];

/// An operation of the C bench, measured with each provider.
struct Op {
    /// Its key after `rxe.PROVIDER.`.
    key: &'static str,
    /// Its name in the bench.
    op: &'static str,
    /// The DAT call counted.
    call: &'static str,
    /// The bench's flag for it, if any.
    flag: &'static str,
    what: &'static str,
    /// A call of the data path, which udat's plug-in makes without librxe
    /// ([`Provider::in_place`]); a registration goes through librxe
    /// (`ibv_reg_mr`) with every provider.
    data_path: bool,
}

const OPS: [Op; 8] = [
    Op {
        key: "post.write_4k",
        op: "write_4k",
        call: "dat_ep_post_rdma_write",
        flag: "",
        what: "`dat_ep_post_rdma_write`, 4 KiB, 1 segment, signalled",
        data_path: true,
    },
    Op {
        key: "post.read_4k",
        op: "read_4k",
        call: "dat_ep_post_rdma_read",
        flag: "",
        what: "`dat_ep_post_rdma_read`, 4 KiB, 1 segment, signalled",
        data_path: true,
    },
    Op {
        key: "post.send_4k",
        op: "send_4k",
        call: "dat_ep_post_send",
        flag: "",
        what: "`dat_ep_post_send`, 4 KiB, 1 segment, receive posted",
        data_path: true,
    },
    Op {
        key: "post.recv",
        op: "recv",
        call: "dat_ep_post_recv",
        flag: "",
        what: "`dat_ep_post_recv`, 4 KiB, 1 segment",
        data_path: true,
    },
    Op {
        key: "dequeue.one",
        op: "dequeue_one",
        call: "dat_evd_dequeue",
        flag: "-w",
        what: "`dat_evd_dequeue`, the only completion waiting",
        data_path: true,
    },
    Op {
        key: "dequeue.empty",
        op: "dequeue_empty",
        call: "dat_evd_dequeue",
        flag: "-w",
        what: "`dat_evd_dequeue` of an empty DTO EVD (`DAT_QUEUE_EMPTY`)",
        data_path: true,
    },
    Op {
        key: "lmr.create_4k",
        op: "lmr_create",
        call: "dat_lmr_create",
        flag: "",
        what: "`dat_lmr_create` of 4 KiB, all privileges, each LMR freed before the next",
        data_path: false,
    },
    Op {
        key: "lmr.free_4k",
        op: "lmr_free",
        call: "dat_lmr_free",
        flag: "",
        what: "`dat_lmr_free` of a 4 KiB LMR",
        data_path: false,
    },
];

pub fn icount_rxe(args: &[String]) -> Result<(), String> {
    let json = parse_args(args)?;
    let plugin = build()?;
    let runs = parse_guest_output(&guest(&plugin)?)?;
    let calls = PROVIDERS
        .iter()
        .flat_map(|p| OPS.iter().map(move |op| (p, op)))
        .map(|(p, op)| Call::of(p, op, &runs))
        .collect::<Result<Vec<_>, _>>()?;
    print_table(&calls);
    if let Some(path) = json {
        let figures: Vec<Figure> = calls.iter().map(Call::figure).collect();
        std::fs::write(&path, to_json(&figures)).map_err(|e| format!("{path}: {e}"))?;
        eprintln!("xtask: wrote {path}");
    }
    Ok(())
}

/// `--json PATH`.
fn parse_args(args: &[String]) -> Result<Option<String>, String> {
    match args {
        [] => Ok(None),
        [flag, path] if flag == "--json" => Ok(Some(path.clone())),
        _ => Err("usage: cargo xtask icount-rxe [--json PATH]".to_string()),
    }
}

/// Build the release plug-in and the C bench against libdat2; the
/// plug-in's absolute path, for `dat.conf`.
fn build() -> Result<String, String> {
    run("cargo", &["build", "--release", "-p", "udat-dapl"])?;
    run("cc", &["-O2", "-Wall", "-Wextra", "-Werror", "benches/c/icount.c", "-o", BENCH, "-ldat2"])?;
    let plugin = std::fs::canonicalize("target/release/libudat_dapl.so").map_err(|e| format!("the plug-in: {e}"))?;
    Ok(plugin.to_string_lossy().into_owned())
}

/// The script's data lines (`ICOUNT`, `SELF`, `INCLUSIVE`), from a run on
/// the RDMA device; everything else it prints goes to stderr as it comes.
fn guest(plugin: &str) -> Result<Vec<String>, String> {
    let xtask = std::env::current_exe().map_err(|e| format!("xtask: {e}"))?;
    let k = K.to_string();
    let mut args = vec!["softroce", "--timeout", GUEST_TIMEOUT, "--", "sh", SCRIPT, plugin, BENCH, &k];
    let specs: Vec<String> = OPS.iter().map(|op| format!("{}:{}:{}", op.op, op.call, op.flag)).collect();
    args.extend(specs.iter().map(String::as_str));
    eprintln!("xtask: {}", args.join(" "));
    let started = std::time::Instant::now();
    let mut child =
        Command::new(xtask).args(args).stdout(Stdio::piped()).spawn().map_err(|e| format!("softroce: {e}"))?;
    let mut data = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            // A guest's serial console ends lines with CR LF.
            let line = line.trim_end_matches('\r');
            if ["ICOUNT ", "SELF ", "INCLUSIVE "].iter().any(|tag| line.starts_with(tag)) {
                data.push(line.to_string());
            } else {
                eprintln!("{line}");
            }
        }
    }
    let status = child.wait().map_err(|e| format!("softroce: {e}"))?;
    eprintln!("xtask: the guest's runs took {:.0} s", started.elapsed().as_secs_f64());
    if !status.success() {
        return Err(format!("{SCRIPT} failed on the RDMA device ({status}); its output is above"));
    }
    Ok(data)
}

/// One callgrind run of the bench.
#[derive(Default)]
struct Run {
    /// Instructions collected in the counted call, callgrind's summary.
    total: Option<u64>,
    /// Per function (`file:function [object]`): self cost.
    own: Vec<(String, u64)>,
    /// Per function: inclusive cost.
    inclusive: Vec<(String, u64)>,
}

/// A run's provider, operation and K.
type RunKey = (String, String, u64);

/// The runs in the script's data lines, by provider, operation and K.
fn parse_guest_output(lines: &[String]) -> Result<BTreeMap<RunKey, Run>, String> {
    let mut runs: BTreeMap<RunKey, Run> = BTreeMap::new();
    for line in lines {
        let bad = || format!("{SCRIPT}: cannot read `{line}`");
        let mut fields = line.splitn(5, ' ');
        let (tag, provider, op) = (fields.next(), fields.next(), fields.next());
        let k = fields.next().and_then(|k| k.parse().ok());
        let (Some(tag), Some(provider), Some(op), Some(k)) = (tag, provider, op, k) else { return Err(bad()) };
        let rest = fields.next().unwrap_or("");
        let run = runs.entry((provider.to_string(), op.to_string(), k)).or_default();
        match tag {
            "ICOUNT" => run.total = Some(rest.trim().parse().map_err(|_| bad())?),
            "SELF" => run.own.extend(annotated_cost(rest)),
            "INCLUSIVE" => run.inclusive.extend(annotated_cost(rest)),
            _ => return Err(bad()),
        }
    }
    Ok(runs)
}

/// Where a function's instructions belong, by the object it is in.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// libdat2's entry point (`dat_ep_post_rdma_write`, say), which calls
    /// the provider.
    Libdat2,
    /// The provider's library.
    Provider,
    /// rdma-core's rxe user-space driver (its post_send, post_recv and
    /// poll_cq; no symbols).
    Librxe,
    /// libc (librxe's `write` to the kernel, memcpy, locks) and the rest.
    Other,
}

impl Part {
    fn of(function: &str, provider: &Provider) -> Part {
        let object = function.rsplit_once(" [").map_or("", |(_, o)| o.trim_end_matches(']'));
        let file = object.rsplit('/').next().unwrap_or(object);
        if file.starts_with("libdat2.so") {
            Part::Libdat2
        } else if file.starts_with(provider.library) {
            Part::Provider
        } else if file.starts_with("librxe-") {
            Part::Librxe
        } else {
            Part::Other
        }
    }
}

/// A provider's figures for one operation: instructions per call, and
/// how they divide among the objects they run in.
struct Call {
    provider: &'static Provider,
    op: &'static Op,
    /// Everything collected inside the call, per call.
    total: f64,
    /// Self cost per call of the functions in each part.
    libdat2: f64,
    library: f64,
    librxe: f64,
    other: f64,
    /// The functions under the call with the highest inclusive cost per
    /// call, highest first.
    top: Vec<(String, f64)>,
}

/// Functions listed under each table row.
const TOP: usize = 5;

impl Call {
    /// The figures from the provider's runs of `op` at K and 2K, which
    /// must include the provider's own part, and on the data path
    /// librxe's unless the provider reaches rxe's queues in place.
    fn of(provider: &'static Provider, op: &'static Op, runs: &BTreeMap<RunKey, Run>) -> Result<Call, String> {
        let run = |k: u64| {
            runs.get(&(provider.ia.to_string(), op.op.to_string(), k))
                .ok_or_else(|| format!("{SCRIPT}: no run of {} {} with K = {k}", provider.ia, op.op))
        };
        let (at_k, at_2k) = (run(K)?, run(2 * K)?);
        let total = |r: &Run| r.total.ok_or_else(|| format!("{SCRIPT}: no total for {} {}", provider.ia, op.op));
        let part = |p: Part| per_call(own_of(at_k, provider, p), own_of(at_2k, provider, p));
        let call = Call {
            provider,
            op,
            total: per_call(total(at_k)?, total(at_2k)?),
            libdat2: part(Part::Libdat2),
            library: part(Part::Provider),
            librxe: part(Part::Librxe),
            other: part(Part::Other),
            top: top_inclusive(at_k, at_2k, op.call),
        };
        let librxe_wrong = op.data_path && (call.librxe <= 0.0) != provider.in_place;
        if call.libdat2 <= 0.0 || call.library <= 0.0 || librxe_wrong {
            let librxe = if provider.in_place { "not librxe" } else { "librxe" };
            return Err(format!(
                "{}: libdat2 and {}, and {librxe}, must run in `{}` (per call: {:.1}, {:.1}, {:.1})",
                provider.ia, provider.library, op.call, call.libdat2, call.library, call.librxe
            ));
        }
        Ok(call)
    }

    fn key(&self) -> String {
        format!("rxe.{}.{}", self.provider.ia, self.op.key)
    }

    fn figure(&self) -> Figure {
        Figure::new(self.key(), format!("{}: {}", self.provider.what, self.op.what), Some(self.total))
    }
}

/// Self cost of the functions of `part` in a run.
fn own_of(run: &Run, provider: &Provider, part: Part) -> u64 {
    run.own.iter().filter(|(f, _)| Part::of(f, provider) == part).map(|(_, n)| n).sum()
}

/// Instructions per call between a run of K calls and one of 2K.
fn per_call(at_k: u64, at_2k: u64) -> f64 {
    (at_2k as f64 - at_k as f64) / K as f64
}

/// The `TOP` functions with the highest inclusive cost per call among
/// those under `call` (less than the whole call's) and the call itself.
fn top_inclusive(at_k: &Run, at_2k: &Run, call: &str) -> Vec<(String, f64)> {
    let before: BTreeMap<&str, u64> = at_k.inclusive.iter().map(|(f, n)| (f.as_str(), *n)).collect();
    let mut functions: Vec<(String, f64)> = at_2k
        .inclusive
        .iter()
        .map(|(f, n)| (f.clone(), per_call(before.get(f.as_str()).copied().unwrap_or(0), *n)))
        .collect();
    let entry = format!(":{call} [");
    let whole = functions.iter().find(|(f, _)| f.contains(&entry)).map_or(f64::MAX, |(_, n)| *n);
    functions.retain(|(f, n)| *n < whole || f.contains(&entry));
    functions.sort_by(|a, b| b.1.total_cmp(&a.1));
    functions.truncate(TOP);
    functions
}

fn print_table(calls: &[Call]) {
    println!(
        "| key | provider | call | instructions per call | libdat2 | provider's library | librxe | libc and other |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for c in calls {
        println!(
            "| `{}` | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            c.key(),
            c.provider.ia,
            c.op.what,
            c.total,
            c.libdat2,
            c.library,
            c.librxe,
            c.other
        );
    }
    for c in calls {
        println!("\n`{}`: the functions with the most instructions per call, inclusive:\n", c.key());
        for (function, n) in &c.top {
            println!("- {n:.1} `{function}`");
        }
    }
}
