//! The minimum Rust version: the workspace's `rust-version`, which the
//! libraries (the Rust API, the core, the transports and the C ABI)
//! promise to build on. The tests, benches and examples need more
//! (proptest's own minimum, 1.88), so only the libraries are checked.
//!
//! `cargo xtask setup` installs that toolchain; `cargo xtask test` checks
//! the libraries with it, with their optional features on (tokio's
//! minimum is the workspace's today).

use crate::run;

/// The workspace manifest, wherever `cargo xtask` runs from.
const MANIFEST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");

/// What the minimum Rust version is promised for: every library package.
const LIBRARIES: [&str; 8] =
    ["udat", "udat-core", "udat-mlx5", "udat-verbs", "udat-connectx", "udat-capi", "udat-dapl", "udat-static"];

/// Their optional features that a user may turn on, and that the release
/// artifacts leave off: `udat::aio` and the ConnectX control path. (The
/// software HCA's `softhca` is for tests.)
const FEATURES: &str = "udat/tokio,udat-capi/connectx";

/// The workspace's `rust-version` (`1.85`), as rustup names a toolchain.
pub fn rust_version() -> Result<String, String> {
    let manifest = std::fs::read_to_string(MANIFEST).map_err(|e| format!("{MANIFEST}: {e}"))?;
    workspace_rust_version(&manifest).ok_or_else(|| format!("{MANIFEST} has no rust-version in [workspace.package]"))
}

/// The `rust-version` of a manifest's `[workspace.package]` table.
fn workspace_rust_version(manifest: &str) -> Option<String> {
    let table = manifest.split("\n[workspace.package]").nth(1)?;
    // The table ends where the next one starts.
    let table = table.split("\n[").next()?;
    table.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        let value = value.split('#').next()?.trim().strip_prefix('"')?.strip_suffix('"')?;
        (key.trim() == "rust-version").then(|| value.to_string())
    })
}

/// `cargo +VERSION check` of the libraries, with their optional features.
pub fn check() -> Result<(), String> {
    let version = rust_version()?;
    let toolchain = format!("+{version}");
    let mut args = vec![toolchain.as_str(), "check", "--features", FEATURES];
    for package in LIBRARIES {
        args.extend(["-p", package]);
    }
    run("cargo", &args)?;
    eprintln!("xtask: the libraries build on Rust {version}, the workspace's rust-version");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rust_version_is_read_from_the_workspace_package_table() {
        let manifest = "[workspace]\nmembers = [\"core\"]\n\n[workspace.package]\nversion = \"0.1.0\"\n\
                        rust-version = \"1.85\" # the libraries\n\n[package]\nrust-version.workspace = true\n";
        assert_eq!(workspace_rust_version(manifest).as_deref(), Some("1.85"));
    }

    #[test]
    fn a_rust_version_outside_the_workspace_package_table_does_not_count() {
        let manifest = "[workspace.package]\nversion = \"0.1.0\"\n\n[package]\nrust-version = \"1.70\"\n";
        assert_eq!(workspace_rust_version(manifest), None);
    }

    #[test]
    fn this_workspace_states_its_rust_version() {
        let version = rust_version().unwrap();
        assert!(version.split('.').all(|n| n.parse::<u32>().is_ok()), "{version}");
    }
}
