//! `cargo xtask softroce [--timeout SECS] -- COMMAND...`: run a command
//! where a soft-RoCE (rdma_rxe) device exists.
//!
//! - If this machine already has an RDMA device, the command runs here.
//! - Otherwise, if the kernel can load `rdma_rxe`, an `rxe` device is
//!   created on a veth pair, the command runs, and the pair is removed.
//! - Otherwise a small guest is built once, from Debian packages, under
//!   `target/softroce/`: the kernel `linux-image-amd64` depends on today,
//!   `busybox-static`, and an initramfs with the modules rxe needs. QEMU
//!   boots it (KVM if a probe shows KVM boots, TCG otherwise) with this
//!   machine's `/` shared read-only over 9p under a tmpfs overlay, so the
//!   binaries built here run there unchanged. The guest has no network
//!   device (`-nic none`).
//!
//! In every case the command sees `rxe0` (or the host's device) with
//! address 192.0.2.1 and finds both in `UDAT_RDMA_DEVICE` and
//! `UDAT_RDMA_ADDR`. Its output streams through, and its exit status is
//! this command's. A guest that outlives the timeout is killed and
//! reported as a failure.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The address the rxe device carries (TEST-NET-1, RFC 5737).
const ADDR: &str = "192.0.2.1";
/// Modules the guest loads, before their dependencies are added.
/// `crc32_generic` provides the crc32 shash rxe needs; without it
/// `rdma link add` fails with ENOENT.
const MODULES: &[&str] = &[
    "virtio_pci",
    "9pnet_virtio",
    "9p",
    "overlay",
    "rdma_rxe",
    "rdma_ucm",
    "ib_uverbs",
    "veth",
    "dummy",
    "crc32_generic",
    "virtio_net",
];

pub fn softroce(args: &[String]) -> Result<(), String> {
    let (timeout, command) = parse(args)?;
    let status = if let Some(device) = host_device() {
        eprintln!("softroce: using this machine's RDMA device {device}");
        on_host(&command, &device, None)?
    } else if host_can_make_rxe() {
        eprintln!("softroce: creating rxe on a veth pair on this machine");
        host_rxe(&command)?
    } else {
        let guest = Guest::build()?;
        guest.run(&command, timeout)?
    };
    if status == 0 {
        Ok(())
    } else {
        Err(format!("command exited with status {status}"))
    }
}

/// `[--timeout SECS] -- COMMAND...`, as `softroce` and `fabric` take it.
pub(crate) fn parse(args: &[String]) -> Result<(Duration, Vec<String>), String> {
    let usage = "usage: cargo xtask softroce|fabric [--timeout SECS] -- COMMAND...";
    let mut timeout = Duration::from_secs(1200);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--timeout" => {
                let secs = rest.next().and_then(|s| s.parse().ok()).ok_or(usage)?;
                timeout = Duration::from_secs(secs);
            }
            "--" => {
                let command: Vec<String> = rest.cloned().collect();
                return if command.is_empty() { Err(usage.into()) } else { Ok((timeout, command)) };
            }
            _ => return Err(usage.into()),
        }
    }
    Err(usage.into())
}

/// The first RDMA device this machine has, if any.
fn host_device() -> Option<String> {
    let mut names: Vec<String> = fs::read_dir("/sys/class/infiniband")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names.into_iter().next()
}

fn host_can_make_rxe() -> bool {
    let quiet = |program: &str, args: &[&str]| {
        Command::new(program).args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    };
    quiet("modprobe", &["-q", "rdma_rxe"]) && quiet("rdma", &["link", "show"])
}

fn on_host(command: &[String], device: &str, addr: Option<&str>) -> Result<i32, String> {
    let status = Command::new(&command[0])
        .args(&command[1..])
        .env("UDAT_RDMA_DEVICE", device)
        .env("UDAT_RDMA_ADDR", addr.unwrap_or(ADDR))
        .status()
        .map_err(|e| format!("{}: {e}", command[0]))?;
    Ok(status.code().unwrap_or(128))
}

fn host_rxe(command: &[String]) -> Result<i32, String> {
    let setup = format!(
        "ip link add udat-v0 type veth peer name udat-v1 && ip addr add {ADDR}/24 dev udat-v0 && \
         ip link set udat-v0 up && ip link set udat-v1 up && rdma link add udat_rxe0 type rxe netdev udat-v0"
    );
    sh(&setup)?;
    let result = on_host(command, "udat_rxe0", Some(ADDR));
    let _ = sh("rdma link delete udat_rxe0; ip link delete udat-v0");
    result
}

fn sh(script: &str) -> Result<(), String> {
    let status = Command::new("sh").args(["-c", script]).status().map_err(|e| format!("sh: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{script}` failed ({status})"))
    }
}

fn capture(program: &str, args: &[&str], dir: Option<&Path>) -> Result<String, String> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let out = cmd.output().map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        return Err(format!("`{program} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A bootable soft-RoCE guest: kernel, initramfs, and whether KVM works.
#[derive(Clone)]
pub(crate) struct Guest {
    dir: PathBuf,
    kernel: PathBuf,
    initrd: PathBuf,
    kvm: bool,
}

impl Guest {
    /// Build the guest under `target/softroce/`, or reuse the one there.
    pub(crate) fn build() -> Result<Guest, String> {
        let dir = target_dir()?.join("softroce");
        let version = kernel_package()?;
        let release = version.trim_start_matches("linux-image-").to_string();
        let root = dir.join(&version);
        let kernel = root.join(format!("boot/vmlinuz-{release}"));
        // The name carries a digest of what goes in, so a changed module
        // list or /init builds a new one.
        let initrd = dir.join(format!("initrd-{release}-{:016x}.gz", fnv1a(&[MODULES.join(" ").as_str(), INIT])));
        if !initrd.exists() {
            eprintln!("softroce: building the guest from {version} (once; cached in {})", dir.display());
            fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            for package in [version.as_str(), "busybox-static"] {
                fetch_package(&dir, package, &root)?;
            }
            capture("depmod", &["-b", path(&root)?, &release], None)?;
            make_initrd(&root, &release, &initrd)?;
        }
        let mut guest = Guest { dir, kernel, initrd, kvm: false };
        guest.kvm = guest.kvm_boots();
        Ok(guest)
    }

    /// Boot once under KVM with a short deadline; the answer is cached.
    /// On machines where KVM hangs at boot, this costs one short timeout.
    fn kvm_boots(&self) -> bool {
        let probe = self.dir.join("kvm-probe");
        if let Ok(answer) = fs::read_to_string(&probe) {
            return answer.trim() == "yes";
        }
        let works = Path::new("/dev/kvm").exists()
            && Guest { kvm: true, ..self.clone() }
                .boot(&["true".to_string()], Duration::from_secs(30), false)
                .is_ok_and(|status| status == 0);
        eprintln!("softroce: KVM {}", if works { "boots the guest" } else { "does not boot the guest; using TCG" });
        let _ = fs::write(&probe, if works { "yes\n" } else { "no\n" });
        works
    }

    fn run(&self, command: &[String], timeout: Duration) -> Result<i32, String> {
        eprintln!("softroce: booting the guest ({})", if self.kvm { "KVM" } else { "TCG" });
        self.boot(command, timeout, true)
    }

    /// Boot, run `command` in the current directory with rxe set up, and
    /// return its exit status.
    fn boot(&self, command: &[String], timeout: Duration, echo: bool) -> Result<i32, String> {
        let console = if echo { Console::Inherit } else { Console::Quiet };
        let mut guest = self.spawn(&Net::Loopback, command, console)?;
        while !guest.stopped()? {
            if guest.elapsed() > timeout {
                guest.kill();
                return Err(format!("the guest did not finish within {} s and was killed", timeout.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let elapsed = guest.elapsed();
        let status = guest.finish().ok_or("the guest stopped without reporting the command's exit status")?;
        if echo {
            eprintln!("softroce: guest ran {:.1} s; command exited with {status}", elapsed.as_secs_f64());
        }
        Ok(status)
    }

    /// Start a guest that runs `command` in the current directory with
    /// rxe set up on `net`.
    pub(crate) fn spawn(&self, net: &Net, command: &[String], console: Console) -> Result<Running, String> {
        let run = self.dir.join(format!("run-{}-{}", std::process::id(), net.name()));
        let _ = fs::remove_dir_all(&run);
        fs::create_dir_all(&run).map_err(|e| e.to_string())?;
        let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
        let script = stage2(&run, &cwd, command, net);
        fs::write(run.join("stage2"), script).map_err(|e| e.to_string())?;

        let accel = if self.kvm { "kvm" } else { "tcg,thread=multi" };
        let cpu = if self.kvm { "host" } else { "max" };
        let append = format!("console=ttyS0 quiet panic=-1 vmscript={}/stage2", path(&run)?);
        let mut qemu = Command::new("qemu-system-x86_64");
        qemu.args(["-accel", accel, "-cpu", cpu, "-m", "2048", "-smp", "2", "-nographic", "-no-reboot"])
            .args(["-kernel", path(&self.kernel)?, "-initrd", path(&self.initrd)?, "-append", &append])
            .args(["-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"])
            .arg("-virtfs")
            .arg(format!("local,path={},mount_tag=results,security_model=none,multidevs=remap", path(&run)?))
            .stdin(Stdio::null());
        match net {
            Net::Loopback => {
                qemu.args(["-nic", "none"]);
            }
            Net::Link(link) => {
                // A point-to-point Ethernet cable: each end sends its frames
                // to the other's UDP port on this machine's loopback.
                qemu.arg("-netdev")
                    .arg(format!("socket,id=cable,udp=127.0.0.1:{},localaddr=127.0.0.1:{}", link.peer_port, link.port))
                    .arg("-device")
                    .arg(format!("virtio-net-pci,netdev=cable,mac=52:54:00:00:00:{:02x}", link.host))
                    .arg("-monitor")
                    .arg(format!("unix:{},server=on,wait=off", path(&run.join("monitor"))?));
            }
        }
        match console {
            Console::Quiet => {
                qemu.stdout(Stdio::null()).stderr(Stdio::null());
            }
            Console::Inherit => {}
            Console::Prefixed(_) => {
                qemu.stdout(Stdio::piped()).stderr(Stdio::piped());
            }
        }
        let mut child = qemu.spawn().map_err(|e| format!("qemu-system-x86_64: {e}"))?;
        let mut pumps = Vec::new();
        if let Console::Prefixed(prefix) = console {
            if let Some(out) = child.stdout.take() {
                pumps.push(std::thread::spawn(move || prefixed(out, prefix)));
            }
            if let Some(err) = child.stderr.take() {
                pumps.push(std::thread::spawn(move || prefixed(err, prefix)));
            }
        }
        Ok(Running { child, run, start: Instant::now(), pumps })
    }
}

/// Copy a guest's console to ours, each line under `prefix`.
fn prefixed(from: impl std::io::Read, prefix: &str) {
    use std::io::BufRead;
    for line in std::io::BufReader::new(from).lines().map_while(Result::ok) {
        println!("[{prefix}] {}", line.trim_end_matches('\r'));
    }
}

/// Where a guest's console goes.
#[derive(Clone, Copy)]
pub(crate) enum Console {
    Quiet,
    Inherit,
    /// Ours, each line under the prefix.
    Prefixed(&'static str),
}

/// What network the guest's rxe device sits on.
pub(crate) enum Net {
    /// A veth pair inside the guest, with no device to the outside.
    Loopback,
    /// One end of a cable to another guest.
    Link(Link),
}

impl Net {
    fn name(&self) -> &'static str {
        match self {
            Net::Loopback => "loopback",
            Net::Link(link) => link.role,
        }
    }
}

/// A guest's end of the fabric's cable.
pub(crate) struct Link {
    /// What the guest is told it is (`UDAT_FABRIC_ROLE`).
    pub(crate) role: &'static str,
    /// The last byte of the guest's address in 10.0.0.0/24 and of its MAC.
    pub(crate) host: u8,
    /// The peer's.
    pub(crate) peer: u8,
    /// The UDP ports on this machine's loopback the two ends send from.
    pub(crate) port: u16,
    pub(crate) peer_port: u16,
}

/// A booted guest.
pub(crate) struct Running {
    child: std::process::Child,
    /// The directory the guest reports into (its `status`), mounted in the
    /// guest at the same path, with QEMU's monitor socket.
    pub(crate) run: PathBuf,
    start: Instant,
    pumps: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Whether QEMU has exited.
    pub(crate) fn stopped(&mut self) -> Result<bool, String> {
        Ok(self.child.try_wait().map_err(|e| e.to_string())?.is_some())
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Stop the guest as a power cut would.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A command to QEMU's human monitor (`set_link cable off`).
    pub(crate) fn monitor(&self, command: &str) -> Result<(), String> {
        use std::io::{Read, Write};
        let socket = self.run.join("monitor");
        let mut stream =
            std::os::unix::net::UnixStream::connect(&socket).map_err(|e| format!("{}: {e}", socket.display()))?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
        stream.write_all(format!("{command}\n").as_bytes()).map_err(|e| e.to_string())?;
        // Read until the monitor has echoed the command and prompted again.
        let (mut seen, mut buf) = (String::new(), [0u8; 512]);
        while seen.matches("(qemu)").count() < 2 {
            let n = stream.read(&mut buf).map_err(|e| format!("QEMU monitor: {e}"))?;
            if n == 0 {
                break;
            }
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        Ok(())
    }

    /// The command's exit status, if the guest reported one; the guest's
    /// directory is removed.
    pub(crate) fn finish(mut self) -> Option<i32> {
        self.kill();
        for pump in self.pumps.drain(..) {
            let _ = pump.join();
        }
        let status = fs::read_to_string(self.run.join("status")).ok().and_then(|s| s.trim().parse::<i32>().ok());
        let _ = fs::remove_dir_all(&self.run);
        status
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.run);
    }
}

/// The script the guest runs after switching to the overlay root: set up
/// rxe0 on `net`, run the command from `cwd`, leave its status in `run`.
fn stage2(run: &Path, cwd: &Path, command: &[String], net: &Net) -> String {
    let quoted: Vec<String> = command.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let mut env = String::new();
    for var in ["PATH", "HOME", "CARGO_HOME", "RUSTUP_HOME", "RUST_BACKTRACE", "RUST_LOG", "CARGO_TARGET_DIR"] {
        if let Ok(value) = std::env::var(var) {
            env.push_str(&format!("export {var}='{}'\n", value.replace('\'', "'\\''")));
        }
    }
    let network = match net {
        Net::Loopback => format!(
            "export UDAT_RDMA_DEVICE=rxe0 UDAT_RDMA_ADDR={ADDR}\n\
             modprobe crc32_generic && modprobe rdma_rxe && modprobe rdma_ucm && modprobe veth\n\
             ip link set lo up\n\
             ip link add v0 type veth peer name v1\n\
             ip addr add {ADDR}/24 dev v0\n\
             ip link set v0 up && ip link set v1 up\n\
             rdma link add rxe0 type rxe netdev v0 || echo \"softroce: rdma link add failed\" >&2\n"
        ),
        Net::Link(link) => format!(
            "export UDAT_RDMA_DEVICE=rxe0 UDAT_RDMA_ADDR=10.0.0.{host} UDAT_PEER_ADDR=10.0.0.{peer}\n\
             export UDAT_FABRIC_ROLE={role} UDAT_FABRIC_CTL={run}\n\
             modprobe crc32_generic && modprobe rdma_rxe && modprobe rdma_ucm && modprobe virtio_net\n\
             ip link set lo up\n\
             ip addr add 10.0.0.{host}/24 dev eth0\n\
             ip link set eth0 up\n\
             rdma link add rxe0 type rxe netdev eth0 || echo \"fabric: rdma link add failed\" >&2\n",
            host = link.host,
            peer = link.peer,
            role = link.role,
            run = run.display(),
        ),
    };
    format!(
        r#"#!/bin/sh
{env}mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results {run}
{network}ulimit -l unlimited
cd {cwd}
{command}
echo $? > {run}/status
sync
poweroff -f
"#,
        run = run.display(),
        cwd = cwd.display(),
        command = quoted.join(" "),
    )
}

/// The kernel package `linux-image-amd64` depends on.
fn kernel_package() -> Result<String, String> {
    let depends = capture("apt-cache", &["depends", "linux-image-amd64"], None)?;
    depends
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-"))
        .map(str::to_string)
        .ok_or_else(|| "apt-cache knows no kernel for linux-image-amd64 (run apt-get update)".into())
}

fn fetch_package(dir: &Path, package: &str, root: &Path) -> Result<(), String> {
    capture("apt-get", &["download", "-q", package], Some(dir))?;
    let deb = fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            name.starts_with(&format!("{package}_")) && name.ends_with(".deb")
        })
        .ok_or_else(|| format!("apt-get download {package} left no .deb"))?;
    capture("dpkg", &["-x", path(&deb)?, path(root)?], None)?;
    Ok(())
}

/// The initramfs: busybox, the module closure of [`MODULES`], and `/init`.
fn make_initrd(root: &Path, release: &str, initrd: &Path) -> Result<(), String> {
    let modules_dir = root.join("lib/modules").join(release);
    let deps = fs::read_to_string(modules_dir.join("modules.dep")).map_err(|e| e.to_string())?;
    let closure = module_closure(&deps, MODULES)?;

    let stage = initrd.with_extension("d");
    let _ = fs::remove_dir_all(&stage);
    for d in ["bin", "proc", "sys", "dev", "host", "rw", "newroot"] {
        fs::create_dir_all(stage.join(d)).map_err(|e| e.to_string())?;
    }
    fs::copy(root.join("bin/busybox"), stage.join("bin/busybox")).map_err(|e| e.to_string())?;
    let staged_modules = stage.join("lib/modules").join(release);
    for module in &closure {
        let to = staged_modules.join(module);
        fs::create_dir_all(to.parent().unwrap_or(&staged_modules)).map_err(|e| e.to_string())?;
        fs::copy(modules_dir.join(module), &to).map_err(|e| format!("{module}: {e}"))?;
    }
    // Every index depmod wrote: kmod's modprobe reads the binary ones.
    for entry in fs::read_dir(&modules_dir).map_err(|e| e.to_string())?.filter_map(Result::ok) {
        if entry.file_name().to_string_lossy().starts_with("modules.") {
            fs::copy(entry.path(), staged_modules.join(entry.file_name())).map_err(|e| e.to_string())?;
        }
    }
    let init = stage.join("init");
    fs::write(&init, INIT.replace("@RELEASE@", release)).map_err(|e| e.to_string())?;
    capture("chmod", &["755", path(&init)?, path(&stage.join("bin/busybox"))?], None)?;

    let archive = Command::new("sh")
        .args(["-c", &format!("find . | cpio -o -H newc --quiet | gzip -1 > '{}'", initrd.display())])
        .current_dir(&stage)
        .status()
        .map_err(|e| e.to_string())?;
    let _ = fs::remove_dir_all(&stage);
    if archive.success() {
        Ok(())
    } else {
        let _ = fs::remove_file(initrd);
        Err("cpio of the initramfs failed".into())
    }
}

/// The modules `wanted` need, as paths relative to the modules directory,
/// resolved through `modules.dep` (`path: dep dep ...`).
fn module_closure(deps: &str, wanted: &[&str]) -> Result<Vec<String>, String> {
    let entry = |name: &str| {
        deps.lines().find_map(|line| {
            let (module, needs) = line.split_once(':')?;
            let file = module.rsplit('/').next()?;
            let stem = file.split(".ko").next()?;
            (stem.replace('-', "_") == name).then_some((module.to_string(), needs))
        })
    };
    let mut closure: Vec<String> = Vec::new();
    for name in wanted {
        let (module, needs) = entry(name).ok_or_else(|| format!("module {name} is not in modules.dep"))?;
        for m in needs.split_whitespace().map(str::to_string).chain([module]) {
            if !closure.contains(&m) {
                closure.push(m);
            }
        }
    }
    Ok(closure)
}

/// The guest's `/init`: load 9p, mount this machine's root read-only under
/// a tmpfs overlay, bring the modules along, and switch to the script
/// named on the kernel command line.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
script=$(sed -n 's/.*vmscript=\([^ ]*\).*/\1/p' /proc/cmdline)
for m in virtio_pci 9pnet_virtio 9p overlay; do modprobe $m; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 hostroot /host
mount -t tmpfs tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /newroot
mkdir -p /newroot/lib/modules
rm -rf /newroot/lib/modules/@RELEASE@
cp -a /lib/modules/@RELEASE@ /newroot/lib/modules/
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh "$script"
"#;

/// FNV-1a over `parts`: a name for built things that changes with their
/// inputs.
fn fnv1a(parts: &[&str]) -> u64 {
    parts
        .iter()
        .flat_map(|p| p.bytes().chain([0]))
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn target_dir() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().ok_or("xtask has no parent directory")?;
    Ok(root.join("target"))
}

fn path(p: &Path) -> Result<&str, String> {
    p.to_str().ok_or_else(|| format!("{} is not UTF-8", p.display()))
}

#[cfg(test)]
mod tests {
    use super::module_closure;

    const DEPS: &str = "kernel/net/9p/9pnet.ko:\n\
        kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio_ring.ko\n\
        kernel/drivers/virtio/virtio_ring.ko:\n\
        kernel/crypto/crc32_generic.ko:\n";

    #[test]
    fn closure_lists_dependencies_before_the_module() {
        let closure = module_closure(DEPS, &["9pnet_virtio", "crc32_generic"]).unwrap();
        assert_eq!(
            closure,
            [
                "kernel/net/9p/9pnet.ko",
                "kernel/drivers/virtio/virtio_ring.ko",
                "kernel/net/9p/9pnet_virtio.ko",
                "kernel/crypto/crc32_generic.ko"
            ]
        );
    }

    #[test]
    fn closure_refuses_an_unknown_module() {
        assert!(module_closure(DEPS, &["rdma_rxe"]).is_err());
    }
}
