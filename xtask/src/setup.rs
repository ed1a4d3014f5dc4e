//! `cargo xtask setup`: install what the build and the tests need on a
//! Debian 12 machine, each piece only when it is missing. The check costs
//! a few queries (dpkg-query, rustup's lists, `apt-cache depends`), so
//! every command that needs something of it runs it first: a fresh
//! machine needs nothing but Rust and this command.
//!
//! It prints one line naming what it installs, and nothing when all is
//! there. What it cannot install (not root, no apt-get, no rustup) stops
//! it with the missing pieces and the command that installs them.

use std::path::Path;
use std::process::{Command, Stdio};

/// Debian packages: the DAT 2.0 headers (bindgen checks udat's values
/// against them), libclang for bindgen, valgrind for instruction counts,
/// nm; rdma-core (verbs and rdma_cm headers, the rxe provider, the `rdma`
/// tool); what `cargo xtask softroce` builds and boots its guest with; the
/// OpenFabrics DAPL test programs and OFA's own providers (dapl2-utils,
/// libdapl2), pkg-config for the C example, strace, which watches the
/// fully static example load no shared object, and perftest, which
/// udat-perf runs beside itself; what `cargo xtask mpi` builds MVAPICH2
/// and its tests with (libibumad-dev for `infiniband/umad.h`, a C
/// compiler, make, perl, xz).
const PACKAGES: [&str; 22] = [
    "libdapl-dev",
    "libclang-dev",
    "valgrind",
    "binutils",
    "libibverbs-dev",
    "librdmacm-dev",
    "ibverbs-providers",
    "ibverbs-utils",
    "iproute2",
    "qemu-system-x86",
    "busybox-static",
    "cpio",
    "kmod",
    "dapl2-utils",
    "pkg-config",
    "strace",
    "perftest",
    "libibumad-dev",
    "gcc",
    "make",
    "perl",
    "xz-utils",
];

/// The soft-RoCE guest's kernel is the package this one depends on, so
/// the package index must list it.
const GUEST_KERNEL: &str = "linux-image-amd64";

/// The bare-metal target udat-core and udat-mlx5 build for.
const BARE_METAL: &str = "x86_64-unknown-none";

/// Set, for the commands an xtask runs, once the set-up has been checked:
/// `cargo xtask test` runs `cargo xtask softroce` several times.
const CHECKED: &str = "UDAT_XTASK_SETUP";

/// What a command needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The Debian packages: the build, the C ABI, callgrind, soft-RoCE
    /// and perftest.
    Packages,
    /// Those, and what only `cargo xtask test` uses: clippy, rustfmt, the
    /// bare-metal target, a nightly toolchain with Miri, cargo-fuzz, and
    /// the toolchain of the minimum Rust version (see [`crate::msrv`]).
    All,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Scope::Packages => "packages",
            Scope::All => "all",
        }
    }

    /// Whether a set-up checked for `by` (an xtask above this one) covers
    /// this scope.
    fn covered_by(self, by: &str) -> bool {
        by == Scope::All.name() || by == self.name()
    }
}

/// What is there, as the queries found it.
#[derive(Debug, Default)]
struct Found {
    /// Installed, among [`PACKAGES`].
    packages: Vec<String>,
    /// Whether the package index lists [`GUEST_KERNEL`].
    index_has_kernel: bool,
    /// Installed, of the default toolchain (`rustup component list
    /// --installed`: `clippy-x86_64-unknown-linux-gnu`, `rust-src`).
    components: Vec<String>,
    targets: Vec<String>,
    /// `rustup toolchain list`: `nightly-x86_64-unknown-linux-gnu`, ….
    toolchains: Vec<String>,
    nightly_components: Vec<String>,
    cargo_fuzz: bool,
}

/// A command that installs one missing piece, and how the line that
/// announces the set-up names that piece.
#[derive(Debug, PartialEq, Eq)]
struct Step {
    what: String,
    program: &'static str,
    args: Vec<String>,
}

impl Step {
    fn new(what: impl Into<String>, program: &'static str, args: &[&str]) -> Step {
        Step { what: what.into(), program, args: args.iter().map(|a| a.to_string()).collect() }
    }

    fn command_line(&self) -> String {
        format!("{} {}", self.program, self.args.join(" "))
    }
}

/// What to do: refresh the package index, install packages, run the
/// Rust steps.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    update_index: bool,
    packages: Vec<&'static str>,
    rust: Vec<Step>,
}

impl Plan {
    fn is_empty(&self) -> bool {
        !self.update_index && self.packages.is_empty() && self.rust.is_empty()
    }

    /// The one line that says what the set-up does.
    fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.update_index {
            parts.push("the package index".to_string());
        }
        parts.extend(self.packages.iter().map(|p| p.to_string()));
        parts.extend(self.rust.iter().map(|s| s.what.clone()));
        format!("xtask: setup: installing {}", parts.join(", "))
    }

    fn needs_apt(&self) -> bool {
        self.update_index || !self.packages.is_empty()
    }
}

/// A name in a rustup list: either the bare name (`rust-src`) or the
/// name with the host's triple (`clippy-x86_64-unknown-linux-gnu`). A
/// dated nightly (`nightly-2025-01-01-…`) is not `+nightly`.
fn listed(list: &[String], name: &str) -> bool {
    list.iter().any(|l| {
        l == name
            || l.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|triple| !triple.starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// Decide what to install from what is there; `rust_version` is the
/// minimum Rust version, whose toolchain `Scope::All` needs.
fn plan(scope: Scope, found: &Found, rust_version: &str) -> Plan {
    let packages: Vec<&'static str> =
        PACKAGES.iter().copied().filter(|p| !found.packages.iter().any(|f| f == p)).collect();
    let rust = if scope == Scope::All { rust_steps(found, rust_version) } else { Vec::new() };
    Plan { update_index: !packages.is_empty() || !found.index_has_kernel, packages, rust }
}

/// clippy, rustfmt, the bare-metal target, nightly with Miri, cargo-fuzz,
/// the minimum Rust version: the steps for those missing.
fn rust_steps(found: &Found, rust_version: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for component in ["clippy", "rustfmt"] {
        if !listed(&found.components, component) {
            steps.push(Step::new(component, "rustup", &["component", "add", component]));
        }
    }
    if !listed(&found.targets, BARE_METAL) {
        steps.push(Step::new(format!("the {BARE_METAL} target"), "rustup", &["target", "add", BARE_METAL]));
    }
    if let Some(step) = nightly_step(found) {
        steps.push(step);
        // `cargo miri test` would prepare the sysroot too, in the middle
        // of the test run; do it with the rest of the installing.
        steps.push(Step::new("Miri's sysroot", "cargo", &["+nightly", "miri", "setup"]));
    }
    if !found.cargo_fuzz {
        steps.push(Step::new("cargo-fuzz", "cargo", &["install", "cargo-fuzz", "--locked"]));
    }
    // `cargo +1.85` names the toolchain `1.85`, not the `1.85.1` it holds.
    if !listed(&found.toolchains, rust_version) {
        let args = ["toolchain", "install", rust_version, "--profile", "minimal"];
        steps.push(Step::new(format!("Rust {rust_version}"), "rustup", &args));
    }
    steps
}

/// The nightly toolchain with miri and rust-src, or those it lacks.
fn nightly_step(found: &Found) -> Option<Step> {
    if !listed(&found.toolchains, "nightly") {
        let args = ["toolchain", "install", "nightly", "--profile", "minimal", "--component", "miri,rust-src"];
        return Some(Step::new("nightly with miri and rust-src", "rustup", &args));
    }
    let absent: Vec<&str> =
        ["miri", "rust-src"].into_iter().filter(|c| !listed(&found.nightly_components, c)).collect();
    if absent.is_empty() {
        return None;
    }
    let args = [&["+nightly", "component", "add"][..], &absent].concat();
    Some(Step::new(format!("nightly's {}", absent.join(" and ")), "rustup", &args))
}

/// Make sure what `scope` needs is installed, installing what is not.
pub fn ensure(scope: Scope) -> Result<(), String> {
    if std::env::var(CHECKED).is_ok_and(|by| scope.covered_by(&by)) {
        return Ok(());
    }
    let rust_version = if scope == Scope::All { crate::msrv::rust_version()? } else { String::new() };
    let plan = plan(scope, &Found::query(scope)?, &rust_version);
    if !plan.is_empty() {
        install(&plan)?;
    }
    // Single-threaded here, before any command runs: the commands this
    // xtask starts inherit it.
    std::env::set_var(CHECKED, scope.name());
    Ok(())
}

impl Found {
    fn query(scope: Scope) -> Result<Found, String> {
        let mut found =
            Found { packages: installed_packages()?, index_has_kernel: index_has_kernel(), ..Found::default() };
        if scope == Scope::All {
            let rustup = |args: &[&str]| -> Result<Vec<String>, String> {
                let out = crate::output("rustup", args).map_err(|e| {
                    format!("setup checks and installs the Rust pieces with rustup (https://rustup.rs): {e}")
                })?;
                Ok(out.lines().map(|l| l.split_whitespace().next().unwrap_or_default().to_string()).collect())
            };
            found.components = rustup(&["component", "list", "--installed"])?;
            found.targets = rustup(&["target", "list", "--installed"])?;
            found.toolchains = rustup(&["toolchain", "list"])?;
            if listed(&found.toolchains, "nightly") {
                found.nightly_components = rustup(&["+nightly", "component", "list", "--installed"])?;
            }
            found.cargo_fuzz = on_path("cargo-fuzz");
        }
        Ok(found)
    }
}

/// The installed packages among [`PACKAGES`], in one dpkg-query (which
/// exits 1 when it knows of some of them not at all).
fn installed_packages() -> Result<Vec<String>, String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Package}\t${Status}\n"])
        .args(PACKAGES)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| {
            format!("dpkg-query: {e}: setup installs Debian packages; elsewhere install these: {}", PACKAGES.join(" "))
        })?;
    Ok(installed(&String::from_utf8_lossy(&out.stdout)))
}

/// The packages dpkg-query's `${Package}\t${Status}` lines say are
/// installed (`install ok installed`, or `hold ok installed`; not
/// `deinstall ok config-files`).
fn installed(lines: &str) -> Vec<String> {
    lines
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(_, status)| status.split_whitespace().last() == Some("installed"))
        .map(|(name, _)| name.to_string())
        .collect()
}

fn index_has_kernel() -> bool {
    Command::new("apt-cache")
        .args(["depends", GUEST_KERNEL])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `program` is in a directory of `PATH` or in cargo's own
/// `bin` (where `cargo install` puts it and `cargo` looks for it).
fn on_path(program: &str) -> bool {
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .map(|home| home.join("bin"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain(cargo_bin).any(|dir| dir.join(program).is_file())
}

fn install(plan: &Plan) -> Result<(), String> {
    if plan.needs_apt() {
        if let Some(why) = cannot_use_apt() {
            return apt_refused(plan, &why);
        }
    }
    eprintln!("{}", plan.summary());
    if plan.update_index {
        quietly("apt-get", &["update", "-qq"])?;
    }
    if !plan.packages.is_empty() {
        let args: Vec<&str> = ["install", "-y", "-qq"].into_iter().chain(plan.packages.iter().copied()).collect();
        quietly("apt-get", &args)?;
    }
    for step in &plan.rust {
        let status = Command::new(step.program)
            .args(&step.args)
            .status()
            .map_err(|e| format!("setup: {}: {e}", step.program))?;
        if !status.success() {
            return Err(format!("setup: `{}` failed ({status})", step.command_line()));
        }
    }
    Ok(())
}

/// Why apt-get cannot run here, if it cannot.
fn cannot_use_apt() -> Option<String> {
    if !on_path("apt-get") {
        return Some("there is no apt-get".into());
    }
    match crate::output("id", &["-u"]) {
        Ok(uid) if uid.trim() == "0" => None,
        Ok(_) => Some("apt-get needs root".into()),
        Err(e) => Some(format!("cannot tell whether this is root: {e}")),
    }
}

/// Stop with what is missing and the command that installs it; a stale
/// package index alone is only reported, since the guest it is for may
/// be built already.
fn apt_refused(plan: &Plan, why: &str) -> Result<(), String> {
    if plan.packages.is_empty() {
        eprintln!(
            "xtask: setup: the package index does not list {GUEST_KERNEL}, the soft-RoCE guest's kernel, and {why}: \
             `apt-get update` as root refreshes it"
        );
        return Ok(());
    }
    Err(format!(
        "setup: missing Debian packages: {0}; {why}. Install them as root:\n  apt-get update && apt-get install -y {0}",
        plan.packages.join(" ")
    ))
}

/// Run apt-get without its progress, and non-interactively.
fn quietly(program: &str, args: &[&str]) -> Result<(), String> {
    let status = Command::new(program)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("setup: {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("setup: `{program} {}` failed ({status})", args.join(" ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The minimum Rust version of these tests' machines.
    const MSRV: &str = "1.85";

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// A machine with everything installed.
    fn complete() -> Found {
        Found {
            packages: strings(&PACKAGES),
            index_has_kernel: true,
            components: strings(&[
                "cargo-x86_64-unknown-linux-gnu",
                "clippy-x86_64-unknown-linux-gnu",
                "rustfmt-x86_64-unknown-linux-gnu",
            ]),
            targets: strings(&["x86_64-unknown-linux-gnu", "x86_64-unknown-none"]),
            toolchains: strings(&[
                "stable-x86_64-unknown-linux-gnu",
                "nightly-x86_64-unknown-linux-gnu",
                "1.85-x86_64-unknown-linux-gnu",
            ]),
            nightly_components: strings(&["miri-x86_64-unknown-linux-gnu", "rust-src"]),
            cargo_fuzz: true,
        }
    }

    #[test]
    fn nothing_is_installed_when_everything_is_there() {
        for scope in [Scope::Packages, Scope::All] {
            assert!(plan(scope, &complete(), MSRV).is_empty(), "{scope:?}");
        }
    }

    #[test]
    fn only_the_missing_packages_are_installed_after_an_index_refresh() {
        let mut found = complete();
        found.packages.retain(|p| p != "perftest" && p != "strace");
        let p = plan(Scope::Packages, &found, MSRV);
        assert_eq!(p, Plan { update_index: true, packages: vec!["strace", "perftest"], rust: Vec::new() });
        assert_eq!(p.summary(), "xtask: setup: installing the package index, strace, perftest");
    }

    #[test]
    fn an_index_without_the_guest_kernel_is_refreshed() {
        let found = Found { index_has_kernel: false, ..complete() };
        assert_eq!(plan(Scope::All, &found, MSRV), Plan { update_index: true, ..Plan::default() });
    }

    #[test]
    fn the_rust_pieces_are_left_to_the_scope_that_needs_them() {
        let found = Found { components: Vec::new(), targets: Vec::new(), cargo_fuzz: false, ..complete() };
        assert!(plan(Scope::Packages, &found, MSRV).is_empty());
        let steps: Vec<String> = plan(Scope::All, &found, MSRV).rust.iter().map(Step::command_line).collect();
        assert_eq!(
            steps,
            [
                "rustup component add clippy",
                "rustup component add rustfmt",
                "rustup target add x86_64-unknown-none",
                "cargo install cargo-fuzz --locked"
            ]
        );
    }

    #[test]
    fn a_missing_nightly_is_installed_with_miri_and_its_sysroot() {
        let found = Found {
            toolchains: strings(&["stable-x86_64-unknown-linux-gnu", "1.85-x86_64-unknown-linux-gnu"]),
            nightly_components: Vec::new(),
            ..complete()
        };
        let steps: Vec<String> = plan(Scope::All, &found, MSRV).rust.iter().map(Step::command_line).collect();
        assert_eq!(
            steps,
            [
                "rustup toolchain install nightly --profile minimal --component miri,rust-src",
                "cargo +nightly miri setup"
            ]
        );
        let found = Found { nightly_components: strings(&["rust-src"]), ..complete() };
        let steps: Vec<String> = plan(Scope::All, &found, MSRV).rust.iter().map(Step::command_line).collect();
        assert_eq!(steps, ["rustup +nightly component add miri", "cargo +nightly miri setup"]);
        let found = Found { nightly_components: Vec::new(), ..complete() };
        let steps: Vec<String> = plan(Scope::All, &found, MSRV).rust.iter().map(Step::command_line).collect();
        assert_eq!(steps[0], "rustup +nightly component add miri rust-src");
        let dated = strings(&[
            "stable-x86_64-unknown-linux-gnu",
            "nightly-2025-01-01-x86_64-unknown-linux-gnu",
            "1.85-x86_64-unknown-linux-gnu",
        ]);
        let found = Found { toolchains: dated, ..complete() };
        assert!(plan(Scope::All, &found, MSRV).rust[0].command_line().starts_with("rustup toolchain install nightly"));
    }

    #[test]
    fn the_minimum_rust_is_installed_by_the_name_cargo_calls_it() {
        let mut found = complete();
        found.toolchains.retain(|t| !t.starts_with("1.85"));
        let p = plan(Scope::All, &found, MSRV);
        let steps: Vec<String> = p.rust.iter().map(Step::command_line).collect();
        assert_eq!(steps, ["rustup toolchain install 1.85 --profile minimal"]);
        assert_eq!(p.summary(), "xtask: setup: installing Rust 1.85");
        // A patch release, or a longer version, is another toolchain.
        found.toolchains.push("1.85.1-x86_64-unknown-linux-gnu".into());
        found.toolchains.push("1.850-x86_64-unknown-linux-gnu".into());
        assert_eq!(plan(Scope::All, &found, MSRV).rust.len(), 1);
        found.toolchains.push("1.85-x86_64-unknown-linux-gnu".into());
        assert!(plan(Scope::All, &found, MSRV).is_empty());
        assert!(plan(Scope::Packages, &Found { toolchains: Vec::new(), ..complete() }, MSRV).is_empty());
    }

    #[test]
    fn only_installed_packages_count() {
        let lines = "perftest\tinstall ok installed\nstrace\tdeinstall ok config-files\nkmod\thold ok installed\n";
        assert_eq!(installed(lines), ["perftest", "kmod"]);
    }

    #[test]
    fn without_root_the_missing_packages_and_the_command_are_named() {
        let plan = Plan { update_index: true, packages: vec!["perftest", "strace"], rust: Vec::new() };
        let e = apt_refused(&plan, "apt-get needs root").unwrap_err();
        assert!(e.contains("missing Debian packages: perftest strace; apt-get needs root"), "{e}");
        assert!(e.contains("apt-get update && apt-get install -y perftest strace"), "{e}");
        let stale = Plan { update_index: true, ..Plan::default() };
        assert!(apt_refused(&stale, "apt-get needs root").is_ok(), "a stale index alone does not stop a command");
    }

    #[test]
    fn a_parent_s_check_covers_what_it_checked() {
        assert!(Scope::Packages.covered_by("all") && Scope::Packages.covered_by("packages"));
        assert!(Scope::All.covered_by("all") && !Scope::All.covered_by("packages"));
    }
}
