//! `cargo xtask soak [--minutes N]`: `tests/soak/soak.c` for N minutes
//! (2 by default) on each transport: linked with `libudat.a` on the
//! software HCA, then with libdat2 through udat's plug-in on rxe (through
//! `softroce`). The program checks that every completion arrives once and
//! in order, and that its threads' rates, the resident set and the open
//! descriptors stay flat; it prints a line per window.

use crate::{capi, run};

/// The software HCA's IA, in `libudat.a`.
const SOFTHCA_IA: &str = "udat-softhca-mlx5_soft0";
const SOAK: &str = "target/release/soak";
const SOAK_DAT2: &str = "target/release/soak-dat2";
const PLUGIN: &str = "target/release/libudat_dapl.so";

/// Run the soak `minutes` long on each transport (CI: one minute each).
pub fn soak(args: &[String]) -> Result<(), String> {
    let minutes = match args {
        [] => 2.0,
        [flag, n] if flag == "--minutes" => n.parse::<f64>().map_err(|e| format!("--minutes {n}: {e}"))?,
        _ => return Err("usage: cargo xtask soak [--minutes N]".into()),
    };
    on_both(minutes)
}

/// The soak `minutes` long on the software HCA, then on rxe.
pub fn on_both(minutes: f64) -> Result<(), String> {
    let seconds = (minutes * 60.0).round().max(20.0);
    // Ten-second windows, and at least six of them.
    let window = (seconds / 6.0).min(10.0).floor();
    let (seconds, window) = (format!("{seconds}"), format!("{window}"));

    run("cargo", &["build", "--release", "-p", "udat-static", "-p", "udat-dapl", "--features", "udat-capi/softhca"])?;
    let flags = capi::pkg_config("target/release")?;
    let mut cc = vec!["-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "tests/soak/soak.c", "-o", SOAK];
    cc.extend(flags.split_whitespace());
    run("cc", &cc)?;
    run("cc", &["-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "tests/soak/soak.c", "-o", SOAK_DAT2, "-ldat2"])?;

    eprintln!("xtask: the soak on the software HCA, through libudat.a");
    run(SOAK, &[SOFTHCA_IA, &seconds, &window])?;
    eprintln!("xtask: the soak on rxe, through udat's plug-in");
    // The guest's boot and the threads' last cycles on top of the run.
    let timeout = format!("{}", (minutes * 60.0) as u64 + 600);
    let script = "tests/soak/soak-rxe.sh";
    run(
        "cargo",
        &["xtask", "softroce", "--timeout", &timeout, "--", "sh", script, PLUGIN, SOAK_DAT2, &seconds, &window],
    )
}
