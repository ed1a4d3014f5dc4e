//! The C ABI as a C user meets it: the two artifacts, the pkg-config file,
//! and a C program built against `<dat2/udat.h>` and run.

use std::fs;
use std::path::Path;

use crate::{output, run};

/// What libudat_dapl.so may export: libdat2 resolves these two, and any
/// other `dat_*` symbol would shadow libdat2's own.
const PLUGIN_EXPORTS: [&str; 2] = ["dat_provider_fini", "dat_provider_init"];

/// Build both artifacts, write `target/debug/udat.pc`, and check them;
/// returns the number of checks, each of which failing is an error.
pub fn check() -> Result<u64, String> {
    run("cargo", &["build", "-p", "udat-dapl", "-p", "udat-static"])?;
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
    run(&exe, &["udat-model-mlx5_model0"])?;
    Ok(3 + bad_input(&dir, &flags)?)
}

/// `capi/static/tests/bad_input.c` against libudat.a: garbage, stale
/// and wrong-kind handles, a case per forked child. Returns the cases run.
fn bad_input(dir: &Path, flags: &str) -> Result<u64, String> {
    let exe = dir.join("bad_input");
    let exe = exe.to_string_lossy();
    let mut cc = vec!["-Wall", "-Wextra", "-Werror", "-O2", "capi/static/tests/bad_input.c", "-o", &exe];
    cc.extend(flags.split_whitespace());
    run("cc", &cc)?;
    eprintln!("xtask: {exe} udat-model-mlx5_model0");
    let run =
        std::process::Command::new(&*exe).arg("udat-model-mlx5_model0").output().map_err(|e| format!("{exe}: {e}"))?;
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

/// Write `udat.pc` for the `libudat.a` in `libdir` (a profile's directory
/// under target/) there; the compiler and linker flags it gives for a
/// static link.
pub fn pkg_config(libdir: &str) -> Result<String, String> {
    let dir = fs::canonicalize(libdir).map_err(|e| format!("{libdir}: {e}"))?;
    let pc = fs::read_to_string("capi/static/udat.pc.in").map_err(|e| format!("udat.pc.in: {e}"))?;
    let pc = pc.replace("@LIBDIR@", &dir.to_string_lossy()).replace("@VERSION@", env!("CARGO_PKG_VERSION"));
    fs::write(dir.join("udat.pc"), pc).map_err(|e| format!("udat.pc: {e}"))?;
    let flags = std::process::Command::new("pkg-config")
        .args(["--cflags", "--libs", "--static", "udat"])
        .env("PKG_CONFIG_PATH", &dir)
        .output()
        .map_err(|e| format!("pkg-config: {e}"))?;
    if !flags.status.success() {
        return Err(format!("pkg-config udat: {}", String::from_utf8_lossy(&flags.stderr)));
    }
    Ok(String::from_utf8_lossy(&flags.stdout).into_owned())
}
