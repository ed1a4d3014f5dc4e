//! The C ABI as a C user meets it: the two artifacts, the pkg-config
//! files, and a C program built against `<dat2/udat.h>` and run, linked
//! with the shared rdma-core and fully static.

use std::fs;
use std::path::Path;

use crate::{output, run};

/// What libudat_dapl.so may export: libdat2 resolves these two, and any
/// other `dat_*` symbol would shadow libdat2's own.
const PLUGIN_EXPORTS: [&str; 2] = ["dat_provider_fini", "dat_provider_init"];

/// Build both artifacts, write `target/debug/udat.pc`, and check them;
/// returns the number of checks, each of which failing is an error.
pub fn check() -> Result<u64, String> {
    let release = release_without_softhca()?;
    // The checks below run on the software HCA, which only a build with
    // the `softhca` feature has; with the ConnectX control path too, so the
    // C program links it (libmlx5) the way its users would.
    let features = "udat-capi/softhca,udat-capi/connectx";
    run("cargo", &["build", "-p", "udat-dapl", "-p", "udat-static", "--features", features])?;
    let dir = fs::canonicalize("target/debug").map_err(|e| format!("target/debug: {e}"))?;

    let symbols = output("nm", &["-D", "--defined-only", "target/debug/libudat_dapl.so"])?;
    let mut exported: Vec<&str> = symbols.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    exported.sort_unstable();
    if exported != PLUGIN_EXPORTS {
        return Err(format!("libudat_dapl.so exports {exported:?}, not only {PLUGIN_EXPORTS:?}"));
    }
    eprintln!("xtask: libudat_dapl.so exports only {PLUGIN_EXPORTS:?}");

    let flags = pkg_config("target/debug")?;
    let exe = dir.join("loopback");
    let exe = exe.to_string_lossy();
    let mut cc = vec!["-Wall", "-Wextra", "-Werror", "examples/c/loopback.c", "-o", &exe];
    cc.extend(flags.split_whitespace());
    run("cc", &cc)?;
    let needed = output("readelf", &["-d", &exe])?;
    if needed.contains("libdat") {
        return Err(format!("{exe} needs libdat2:\n{needed}"));
    }
    eprintln!("xtask: examples/c/loopback.c links libudat.a through pkg-config and needs no libdat2");

    if !Path::new(&*exe).exists() {
        return Err(format!("{exe} was not built"));
    }
    run(&exe, &["udat-softhca-mlx5_soft0"])?;
    let quick = quick_starts(&dir, &flags)?;
    let cancelled = cancel(&dir, &flags)?;
    Ok(release + 3 + quick + static_loopback(&dir)? + event_loop(&dir, &flags)? + bad_input(&dir, &flags)? + cancelled)
}

/// README's two quick starts, run as README gives them: the C one through
/// pkg-config against libudat.a on the software HCA, the Rust one with
/// `cargo run --example`, whose heart README quotes: every line of its
/// Rust block but the `// ...` elisions stands in the example, in order.
/// Three checks.
fn quick_starts(dir: &Path, flags: &str) -> Result<u64, String> {
    let exe = dir.join("quickstart");
    let exe = exe.to_string_lossy();
    let mut cc = vec!["-Wall", "-Wextra", "-Werror", "examples/c/quickstart.c", "-o", &exe];
    cc.extend(flags.split_whitespace());
    run("cc", &cc)?;
    run(&exe, &[])?;
    run("cargo", &["run", "-p", "udat-softhca", "--example", "quickstart"])?;
    let readme = fs::read_to_string("README.md").map_err(|e| format!("README.md: {e}"))?;
    let example = fs::read_to_string(RUST_QUICK_START).map_err(|e| format!("{RUST_QUICK_START}: {e}"))?;
    let block = readme.split("```rust\n").nth(1).and_then(|b| b.split("```").next()).unwrap_or_default();
    let quoted: Vec<&str> =
        block.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("// ...")).collect();
    let mut source = example.lines().map(str::trim);
    if quoted.is_empty() {
        return Err("README quotes no Rust quick start".to_string());
    }
    if let Some(line) = quoted.iter().find(|q| !source.any(|l| l == **q)) {
        return Err(format!(
            "README's Rust quick start quotes a line {RUST_QUICK_START} does not have, in that order: {line}"
        ));
    }
    eprintln!("xtask: README's quick starts build and run, and its Rust one is {RUST_QUICK_START}");
    Ok(3)
}

/// The Rust quick start README quotes.
const RUST_QUICK_START: &str = "mlx5/softhca/examples/quickstart.rs";

/// The release artifacts, built as README says, hold no software HCA: no
/// symbol of `udat-softhca` (nor of the mlx5 data path it drives,
/// which has no ConnectX control path yet) in either. One check.
fn release_without_softhca() -> Result<u64, String> {
    run("cargo", &["build", "--release", "-p", "udat-dapl", "-p", "udat-static"])?;
    for artifact in ["target/release/libudat_dapl.so", "target/release/libudat.a"] {
        let symbols = output("nm", &["--defined-only", artifact])?;
        let found: Vec<&str> = symbols.lines().filter(|l| l.contains("udat_mlx5")).take(3).collect();
        if !found.is_empty() {
            return Err(format!("{artifact} holds the software HCA: {found:?}"));
        }
    }
    eprintln!("xtask: the release libudat_dapl.so and libudat.a hold no software HCA");
    Ok(1)
}

/// Where [`event_loop`] puts `examples/c/event_loop.c`, for `cargo xtask
/// test` to run on soft-RoCE.
pub const EVENT_LOOP: &str = "target/debug/event_loop";

/// `examples/c/event_loop.c`, an epoll loop over a CNO descriptor, built
/// against libudat.a and run on the software HCA. One check.
fn event_loop(dir: &Path, flags: &str) -> Result<u64, String> {
    let exe = dir.join("event_loop");
    let exe = exe.to_string_lossy();
    let mut cc = vec!["-Wall", "-Wextra", "-Werror", "examples/c/event_loop.c", "-o", &exe];
    cc.extend(flags.split_whitespace());
    run("cc", &cc)?;
    run(&exe, &["udat-softhca-mlx5_soft0"])?;
    Ok(1)
}

/// Where [`static_loopback`] puts the fully static example, for
/// `cargo xtask test` to run on soft-RoCE.
pub const STATIC_LOOPBACK: &str = "target/debug/loopback-static";

/// `examples/c/loopback.c` linked with `-static` through `udat-static.pc`:
/// libudat.a, Debian's static rdma-core with every verbs provider built
/// in (rdma-core registers a provider from its archive member's
/// constructor once the link pulls the member in), and the static C
/// library. Checks that it has no dynamic section at all, so it needs no
/// shared library, and runs it on the software HCA. Returns the checks.
fn static_loopback(dir: &Path) -> Result<u64, String> {
    let flags = pkg_config_of("udat-static", dir)?;
    let exe = dir.join("loopback-static");
    let exe = exe.to_string_lossy();
    let mut cc = vec!["-static", "-Wall", "-Wextra", "-Werror", "examples/c/loopback.c", "-o", &exe];
    cc.extend(flags.split_whitespace());
    run("cc", &cc)?;
    let dynamic = output("readelf", &["-d", &exe])?;
    if !dynamic.contains("There is no dynamic section") {
        return Err(format!("{exe} is not fully static:\n{dynamic}"));
    }
    eprintln!("xtask: {exe} is fully static: libudat.a and rdma-core's providers, no shared library");
    run(&exe, &["udat-softhca-mlx5_soft0"])?;
    Ok(2)
}

/// `capi/static/tests/bad_input.c` against libudat.a: garbage, stale
/// and wrong-kind handles, a case per forked child. Returns the cases run.
fn bad_input(dir: &Path, flags: &str) -> Result<u64, String> {
    let exe = dir.join("bad_input");
    let exe = exe.to_string_lossy();
    let mut cc = vec!["-Wall", "-Wextra", "-Werror", "-O2", "capi/static/tests/bad_input.c", "-o", &exe];
    cc.extend(flags.split_whitespace());
    run("cc", &cc)?;
    eprintln!("xtask: {exe} udat-softhca-mlx5_soft0");
    let run =
        std::process::Command::new(&*exe).arg("udat-softhca-mlx5_soft0").output().map_err(|e| format!("{exe}: {e}"))?;
    let out = String::from_utf8_lossy(&run.stdout);
    eprint!("{out}{}", String::from_utf8_lossy(&run.stderr));
    let summary = out.lines().last().unwrap_or_default();
    let cases = summary
        .strip_prefix("bad_input: ")
        .and_then(|s| s.strip_suffix(" cases, 0 failed"))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("bad_input: {summary}"))?;
    Ok(cases)
}

/// `capi/static/tests/cancel.c` against libudat.a on the software HCA:
/// threads cancelled in `dat_evd_wait`. Its checks.
fn cancel(dir: &Path, flags: &str) -> Result<u64, String> {
    let exe = dir.join("cancel");
    let exe = exe.to_string_lossy();
    let mut cc = vec!["-Wall", "-Wextra", "-Werror", "-O2", "capi/static/tests/cancel.c", "-o", &exe];
    cc.extend(flags.split_whitespace());
    run("cc", &cc)?;
    let run =
        std::process::Command::new(&*exe).arg("udat-softhca-mlx5_soft0").output().map_err(|e| format!("{exe}: {e}"))?;
    let out = String::from_utf8_lossy(&run.stdout);
    eprint!("{out}{}", String::from_utf8_lossy(&run.stderr));
    let summary = out.lines().last().unwrap_or_default();
    summary
        .strip_prefix("cancel: ")
        .and_then(|s| s.strip_suffix(" checks, 0 failed"))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("cancel: {summary}"))
}

/// Write `udat.pc` and `udat-static.pc` for the `libudat.a` in `libdir`
/// (a profile's directory under target/) there; the compiler and linker
/// flags `udat.pc` gives for a static link of libudat.a.
pub fn pkg_config(libdir: &str) -> Result<String, String> {
    let dir = fs::canonicalize(libdir).map_err(|e| format!("{libdir}: {e}"))?;
    for name in ["udat", "udat-static"] {
        let template = format!("capi/static/{name}.pc.in");
        let pc = fs::read_to_string(&template).map_err(|e| format!("{template}: {e}"))?;
        let pc = pc.replace("@LIBDIR@", &dir.to_string_lossy()).replace("@VERSION@", env!("CARGO_PKG_VERSION"));
        fs::write(dir.join(format!("{name}.pc")), pc).map_err(|e| format!("{name}.pc: {e}"))?;
    }
    pkg_config_of("udat", &dir)
}

/// The compiler and linker flags of the package `name` whose `.pc` is in
/// `dir`, for a static link.
fn pkg_config_of(name: &str, dir: &Path) -> Result<String, String> {
    let flags = std::process::Command::new("pkg-config")
        .args(["--cflags", "--libs", "--static", name])
        .env("PKG_CONFIG_PATH", dir)
        .output()
        .map_err(|e| format!("pkg-config: {e}"))?;
    if !flags.status.success() {
        return Err(format!("pkg-config {name}: {}", String::from_utf8_lossy(&flags.stderr)));
    }
    Ok(String::from_utf8_lossy(&flags.stdout).into_owned())
}
