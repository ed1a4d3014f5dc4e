//! `cargo xtask install [--prefix DIR]`: the release artifacts, without
//! the software HCA, under a prefix (`/usr/local` unless told):
//!
//! - `lib/libudat.a`;
//! - `lib/libudat_dapl.so.0.1.0`, with the links `libudat_dapl.so.0` (the
//!   name a soname would give) and `libudat_dapl.so`;
//! - `lib/pkgconfig/udat.pc` and `udat-static.pc`, naming that `lib`.
//!
//! Each file is written beside its place and renamed into it, so a
//! program that has the old plug-in loaded keeps its pages. Last it prints
//! the `dat.conf` line that names the plug-in to libdat2.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{capi, output};

const DEFAULT_PREFIX: &str = "/usr/local";

/// The plug-in's file name, and the name of the link to it a soname
/// names: `libudat_dapl.so.0.1.0` and `libudat_dapl.so.0`.
fn plugin_names() -> (String, String) {
    let version = env!("CARGO_PKG_VERSION");
    let major = version.split('.').next().unwrap_or(version);
    (format!("libudat_dapl.so.{version}"), format!("libudat_dapl.so.{major}"))
}

pub fn install(args: &[String]) -> Result<(), String> {
    let prefix = prefix(args)?;
    let built = build()?;
    let libdir = prefix.join("lib");
    let pkgconfig = libdir.join("pkgconfig");
    fs::create_dir_all(&pkgconfig).map_err(|e| format!("{}: {e}", pkgconfig.display()))?;
    let libdir = fs::canonicalize(&libdir).map_err(|e| format!("{}: {e}", libdir.display()))?;

    copy(&built.archive, &libdir.join("libudat.a"), 0o644)?;
    let (file, soname) = plugin_names();
    if let Some(has) = soname_of(&built.plugin)? {
        if has != soname {
            return Err(format!("{} has the soname {has}, not {soname}", built.plugin.display()));
        }
    }
    copy(&built.plugin, &libdir.join(&file), 0o755)?;
    link(&file, &libdir.join(&soname))?;
    link(&soname, &libdir.join("libudat_dapl.so"))?;

    // capi's writer puts the files beside the library they name.
    let libdir_text = libdir.to_string_lossy();
    capi::pkg_config(&libdir_text)?;
    for name in ["udat.pc", "udat-static.pc"] {
        let (from, to) = (libdir.join(name), pkgconfig.join(name));
        fs::rename(&from, &to).map_err(|e| format!("{} to {}: {e}", from.display(), to.display()))?;
    }

    for name in ["libudat.a", &file, &soname, "libudat_dapl.so", "pkgconfig/udat.pc", "pkgconfig/udat-static.pc"] {
        eprintln!("xtask: installed {}", libdir.join(name).display());
    }
    println!("{}", dat_conf_advice(&libdir.join(&soname), &device()));
    Ok(())
}

/// `--prefix DIR`, or `--prefix=DIR`, or the default.
fn prefix(args: &[String]) -> Result<PathBuf, String> {
    let usage = || "usage: cargo xtask install [--prefix DIR]".to_string();
    match args {
        [] => Ok(PathBuf::from(DEFAULT_PREFIX)),
        [flag, dir] if flag == "--prefix" && !dir.is_empty() => Ok(PathBuf::from(dir)),
        [one] => one.strip_prefix("--prefix=").filter(|d| !d.is_empty()).map(PathBuf::from).ok_or_else(usage),
        _ => Err(usage()),
    }
}

/// Where cargo put the two artifacts.
struct Built {
    archive: PathBuf,
    plugin: PathBuf,
}

/// Build the release artifacts as `cargo xtask capi` checks them (no
/// feature: no software HCA), and find them in cargo's report, wherever
/// the target directory is.
fn build() -> Result<Built, String> {
    let args =
        ["build", "--release", "-p", "udat-dapl", "-p", "udat-static", "--message-format=json-render-diagnostics"];
    eprintln!("xtask: cargo {}", args.join(" "));
    let mut child =
        Command::new("cargo").args(args).stdout(Stdio::piped()).spawn().map_err(|e| format!("cargo: {e}"))?;
    let mut files = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains("\"reason\":\"compiler-artifact\"") {
                files.extend(filenames(&line));
            }
        }
    }
    let status = child.wait().map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err(format!("`cargo {}` failed ({status})", args.join(" ")));
    }
    let find = |name: &str| {
        files
            .iter()
            .find(|f| f.file_name().is_some_and(|n| n == name))
            .cloned()
            .ok_or_else(|| format!("cargo built no {name}"))
    };
    Ok(Built { archive: find("libudat.a")?, plugin: find("libudat_dapl.so")? })
}

/// The `filenames` of a `compiler-artifact` message.
fn filenames(message: &str) -> Vec<PathBuf> {
    let Some(list) = message.split("\"filenames\":[").nth(1).and_then(|l| l.split(']').next()) else {
        return Vec::new();
    };
    list.split(',').filter_map(|f| f.trim().strip_prefix('"')?.strip_suffix('"').map(PathBuf::from)).collect()
}

/// The `DT_SONAME` of a shared object, if it has one.
fn soname_of(library: &Path) -> Result<Option<String>, String> {
    let dynamic = output("readelf", &["-d", &library.to_string_lossy()])?;
    Ok(dynamic
        .lines()
        .find(|l| l.contains("(SONAME)"))
        .and_then(|l| l.split('[').nth(1)?.split(']').next().map(str::to_string)))
}

/// Copy `from` to `to` with `mode`, through a file beside `to` renamed
/// over it: a process that maps the old `to` keeps it.
fn copy(from: &Path, to: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let temporary = beside(to);
    fs::copy(from, &temporary).map_err(|e| format!("{} to {}: {e}", from.display(), temporary.display()))?;
    fs::set_permissions(&temporary, fs::Permissions::from_mode(mode))
        .map_err(|e| format!("{}: {e}", temporary.display()))?;
    fs::rename(&temporary, to).map_err(|e| format!("{}: {e}", to.display()))
}

/// Make `at` a symbolic link to `target` (a name in the same directory),
/// replacing what is there.
fn link(target: &str, at: &Path) -> Result<(), String> {
    let temporary = beside(at);
    let _ = fs::remove_file(&temporary);
    std::os::unix::fs::symlink(target, &temporary).map_err(|e| format!("{}: {e}", temporary.display()))?;
    fs::rename(&temporary, at).map_err(|e| format!("{}: {e}", at.display()))
}

/// A scratch name in `path`'s directory.
fn beside(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".xtask-install");
    path.with_file_name(name)
}

/// The first RDMA device of this machine, or `rxe0` (soft-RoCE's usual
/// name) when it has none.
fn device() -> String {
    let mut devices: Vec<String> = fs::read_dir("/sys/class/infiniband")
        .map(|dir| dir.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    devices.sort();
    devices.into_iter().next().unwrap_or_else(|| "rxe0".to_string())
}

/// What to add to `dat.conf`, as README gives it: the IA `udat`, the
/// plug-in by its full path, the verbs transport on `device`.
fn dat_conf_advice(plugin: &Path, device: &str) -> String {
    format!(
        "Add this line to /etc/dat.conf (or to a file DAT_OVERRIDE names) to open IA \"udat\" through libdat2 \
         (`verbs DEVICE`: any HCA; `threadsafe` for threads posting in parallel):\n\
         udat u2.0 nonthreadsafe default {} dapl.2.0 \"verbs {device}\" \"\"",
        plugin.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_prefix_defaults_to_usr_local() {
        assert_eq!(prefix(&[]).unwrap(), Path::new("/usr/local"));
        assert_eq!(prefix(&strings(&["--prefix", "/tmp/p"])).unwrap(), Path::new("/tmp/p"));
        assert_eq!(prefix(&strings(&["--prefix=/opt/udat"])).unwrap(), Path::new("/opt/udat"));
        for wrong in [&["--prefix"][..], &["--prefix", ""], &["/tmp/p"], &["--prefix", "/a", "/b"]] {
            assert!(prefix(&strings(wrong)).is_err(), "{wrong:?}");
        }
    }

    #[test]
    fn the_plugin_is_installed_under_its_version_and_its_major() {
        let (file, soname) = plugin_names();
        assert_eq!(file, format!("libudat_dapl.so.{}", env!("CARGO_PKG_VERSION")));
        assert!(file.starts_with(&soname) && soname.starts_with("libudat_dapl.so."), "{soname}");
    }

    #[test]
    fn the_artifacts_are_read_from_cargo_s_report() {
        let message = r#"{"reason":"compiler-artifact","target":{"name":"udat_dapl"},"filenames":["/t/release/libudat_dapl.so"],"executable":null}"#;
        assert_eq!(filenames(message), [Path::new("/t/release/libudat_dapl.so")]);
        let two = r#"{"reason":"compiler-artifact","filenames":["/t/release/libudat.a", "/t/release/libudat.rlib"]}"#;
        assert_eq!(filenames(two).len(), 2);
        assert!(filenames(r#"{"reason":"build-finished","success":true}"#).is_empty());
    }

    #[test]
    fn the_dat_conf_line_names_the_plugin_by_its_path() {
        let advice = dat_conf_advice(Path::new("/usr/local/lib/libudat_dapl.so.0"), "mlx5_0");
        let line = advice.lines().last().unwrap();
        assert_eq!(
            line,
            r#"udat u2.0 nonthreadsafe default /usr/local/lib/libudat_dapl.so.0 dapl.2.0 "verbs mlx5_0" """#
        );
    }
}
