//! The command line.

use std::time::Duration;

pub const USAGE: &str = "\
udat-perf: RDMA latency and bandwidth through udat, in the manner of perftest

usage:
  udat-perf server [OPTIONS]          wait for a client (its options rule)
  udat-perf client ADDRESS [OPTIONS]  connect to a server and measure
  udat-perf loopback [OPTIONS]        both in this process, on one device

options:
  -t, --test T        write_lat (default), write_bw, read_lat, read_bw,
                      send_lat, send_bw, atomic_lat (fetch-and-add),
                      ud_send_lat, ud_send_bw (datagrams of the IB
                      extension's UD endpoints, up to 1024 bytes; Rust API)
  -d, --device D      a verbs device (default $UDAT_RDMA_DEVICE, else rxe0),
                      or `softhca`: udat's mlx5 data path on the software HCA
                      (loopback only)
      --api A[,A...]  rust (default): udat's Rust API; c: the C ABI of
                      <dat2/udat.h>, through libudat.a linked in;
                      dat2:NAME[:SERVER]: the C ABI through libdat2, IA
                      NAME of dat.conf (DAT_OVERRIDE names the file), any
                      provider (udat's libudat_dapl.so, OFA's libdaplofa);
                      a loopback server opens SERVER (default NAME). In
                      loopback several, measured in turn in each round
  -s, --size N        message bytes (default 2 for latency, 65536 for bandwidth)
  -a, --all           every power of two from 2 to 8 MiB
  -n, --iters N       measured iterations per size (default 1000)
  -D, --duration S    measure each size for S seconds instead (one size)
  -w, --warmup N      iterations before measuring (default 100)
  -c, --signal N      bandwidth: request a completion every N posts (default 32)
  -l, --post-list N   bandwidth: posts in a row before looking for completions
                      (default 1)
      --tx-depth N    bandwidth: requests in flight at most (default 128)
  -q, --eps N         bandwidth: endpoints, posted to in turn (default 1)
  -T, --threads N     bandwidth: threads, each with its own IA (default 1)
  -I, --inline N      passed to perftest's -I; udat inlines by itself (the
                      mlx5 path up to 256 bytes, verbs up to the QP's limit)
      --cpu N         pin the client to CPU N (the server to N+1); unpinned
                      runs say so
  -p, --port P        connection qualifier (default 18600)
      --histogram     print a histogram of the latencies
      --json FILE     write the results as JSON (- for standard output)
      --csv FILE      write the results as CSV (- for standard output)
      --compare       loopback: run perftest's matching program with the
                      same parameters on the same device, and print both
                      with the ratio; fails if perftest gave nothing to
                      compare with
      --rounds N      loopback: measure N times, each udat run followed by
                      perftest's (with --compare), and report each figure's
                      median across the rounds (default 1)
";

/// The tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    WriteLat,
    WriteBw,
    ReadLat,
    ReadBw,
    SendLat,
    SendBw,
    AtomicLat,
    UdSendLat,
    UdSendBw,
}

impl Test {
    pub const ALL: [Test; 9] = [
        Test::WriteLat,
        Test::WriteBw,
        Test::ReadLat,
        Test::ReadBw,
        Test::SendLat,
        Test::SendBw,
        Test::AtomicLat,
        Test::UdSendLat,
        Test::UdSendBw,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Test::WriteLat => "write_lat",
            Test::WriteBw => "write_bw",
            Test::ReadLat => "read_lat",
            Test::ReadBw => "read_bw",
            Test::SendLat => "send_lat",
            Test::SendBw => "send_bw",
            Test::AtomicLat => "atomic_lat",
            Test::UdSendLat => "ud_send_lat",
            Test::UdSendBw => "ud_send_bw",
        }
    }

    pub fn is_latency(self) -> bool {
        matches!(self, Test::WriteLat | Test::ReadLat | Test::SendLat | Test::AtomicLat | Test::UdSendLat)
    }

    /// Whether the test sends datagrams between UD endpoints.
    pub fn is_ud(self) -> bool {
        matches!(self, Test::UdSendLat | Test::UdSendBw)
    }

    /// Whether each message is answered by one back (a ping-pong).
    pub fn is_ping_pong(self) -> bool {
        matches!(self, Test::SendLat | Test::UdSendLat)
    }

    /// perftest's program for the same measurement.
    pub fn perftest(self) -> &'static str {
        match self {
            Test::WriteLat => "ib_write_lat",
            Test::WriteBw => "ib_write_bw",
            Test::ReadLat => "ib_read_lat",
            Test::ReadBw => "ib_read_bw",
            Test::SendLat | Test::UdSendLat => "ib_send_lat",
            Test::SendBw | Test::UdSendBw => "ib_send_bw",
            Test::AtomicLat => "ib_atomic_lat",
        }
    }

    pub fn code(self) -> u8 {
        Test::ALL.iter().position(|&t| t == self).unwrap_or(0) as u8
    }

    pub fn from_code(code: u8) -> Option<Test> {
        Test::ALL.get(usize::from(code)).copied()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Server,
    Client([u8; 4]),
    Loopback,
}

/// An API udat-perf measures through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Api {
    /// udat's Rust API.
    Rust,
    /// The C ABI, through libudat.a.
    C,
    /// The C ABI through libdat2: the provider of `dat.conf` line `ia`,
    /// and the line a loopback server opens.
    Dat2 { ia: String, server: String },
}

impl Api {
    /// As `--api` and the JSON name it.
    pub fn name(&self) -> String {
        match self {
            Api::Rust => "rust".into(),
            Api::C => "C".into(),
            Api::Dat2 { ia, .. } => format!("dat2:{ia}"),
        }
    }

    /// As a table's column names it.
    pub fn label(&self) -> String {
        match self {
            Api::Rust => "Rust API".into(),
            Api::C => "libudat.a".into(),
            Api::Dat2 { ia, .. } => format!("{ia} via libdat2"),
        }
    }

    fn parse(v: &str) -> Result<Api, String> {
        match v {
            "rust" => Ok(Api::Rust),
            "c" => Ok(Api::C),
            _ => {
                let names =
                    v.strip_prefix("dat2:").ok_or_else(|| format!("--api takes rust, c or dat2:NAME, not {v}"))?;
                let (ia, server) = names.split_once(':').unwrap_or((names, names));
                if ia.is_empty() || server.is_empty() {
                    return Err(format!("--api {v}: dat2 needs the IA name of a dat.conf line"));
                }
                Ok(Api::Dat2 { ia: ia.into(), server: server.into() })
            }
        }
    }
}

/// Largest message: 8 MiB, as `-a` goes.
pub const MAX_SIZE: u32 = 8 << 20;

/// Largest datagram of the UD tests: the 1024-byte MTU of soft-RoCE on a
/// 1500-byte Ethernet link (a UD message is one packet).
pub const MAX_UD_SIZE: u32 = 1024;

#[derive(Clone, Debug)]
pub struct Options {
    pub role: Role,
    pub test: Test,
    pub device: String,
    /// What is measured, in this order in each round.
    pub apis: Vec<Api>,
    pub size: Option<u32>,
    pub all: bool,
    pub iters: u32,
    pub duration: Option<Duration>,
    pub warmup: u32,
    pub signal: u32,
    pub post_list: u32,
    pub tx_depth: u32,
    pub eps: u32,
    pub threads: u32,
    pub inline: Option<u32>,
    pub cpu: Option<usize>,
    pub port: u64,
    pub histogram: bool,
    pub json: Option<String>,
    pub csv: Option<String>,
    pub compare: bool,
    pub rounds: u32,
}

impl Options {
    /// The sizes to measure, in order.
    pub fn sizes(&self) -> Vec<u32> {
        if self.test == Test::AtomicLat {
            vec![8]
        } else if self.all {
            let top = if self.test.is_ud() { MAX_UD_SIZE } else { MAX_SIZE };
            (1..=23).map(|k| 1u32 << k).filter(|&s| s <= top).collect()
        } else if self.test.is_ud() {
            vec![self.size.unwrap_or(if self.test.is_latency() { 2 } else { MAX_UD_SIZE })]
        } else {
            vec![self.size.unwrap_or(if self.test.is_latency() { 2 } else { 65536 })]
        }
    }
}

/// Parse the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    let role = match it.next().map(String::as_str) {
        Some("server") => Role::Server,
        Some("client") => {
            let address = it.next().ok_or("client needs the server's IPv4 address")?;
            let ip: std::net::Ipv4Addr = address.parse().map_err(|_| format!("bad address {address}"))?;
            Role::Client(ip.octets())
        }
        Some("loopback") => Role::Loopback,
        Some("-h" | "--help") | None => return Err(USAGE.into()),
        Some(other) => return Err(format!("unknown role {other}\n\n{USAGE}")),
    };
    let mut o = Options {
        role,
        test: Test::WriteLat,
        device: std::env::var("UDAT_RDMA_DEVICE").unwrap_or_else(|_| "rxe0".into()),
        apis: vec![Api::Rust],
        size: None,
        all: false,
        iters: 1000,
        duration: None,
        warmup: 100,
        signal: 32,
        post_list: 1,
        tx_depth: 128,
        eps: 1,
        threads: 1,
        inline: None,
        cpu: None,
        port: 18600,
        histogram: false,
        json: None,
        csv: None,
        compare: false,
        rounds: 1,
    };
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        let number = |v: &str| v.parse::<u32>().map_err(|_| format!("{arg}: {v} is not a number"));
        match arg.as_str() {
            "-t" | "--test" => {
                let v = value()?;
                o.test = Test::ALL.into_iter().find(|t| t.name() == v).ok_or_else(|| format!("no test {v}"))?;
            }
            "-d" | "--device" => o.device = value()?.clone(),
            "--api" => o.apis = value()?.split(',').map(Api::parse).collect::<Result<_, _>>()?,
            "-s" | "--size" => o.size = Some(number(value()?)?),
            "-a" | "--all" => o.all = true,
            "-n" | "--iters" => o.iters = number(value()?)?,
            "-D" | "--duration" => o.duration = Some(Duration::from_secs(u64::from(number(value()?)?))),
            "-w" | "--warmup" => o.warmup = number(value()?)?,
            "-c" | "--signal" => o.signal = number(value()?)?,
            "-l" | "--post-list" => o.post_list = number(value()?)?,
            "--tx-depth" => o.tx_depth = number(value()?)?,
            "-q" | "--eps" => o.eps = number(value()?)?,
            "-T" | "--threads" => o.threads = number(value()?)?,
            "-I" | "--inline" => o.inline = Some(number(value()?)?),
            "--cpu" => o.cpu = Some(number(value()?)? as usize),
            "-p" | "--port" => o.port = u64::from(number(value()?)?),
            "--histogram" => o.histogram = true,
            "--json" => o.json = Some(value()?.clone()),
            "--csv" => o.csv = Some(value()?.clone()),
            "--compare" => o.compare = true,
            "--rounds" => o.rounds = number(value()?)?,
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown option {other}\n\n{USAGE}")),
        }
    }
    check(&o)?;
    Ok(o)
}

fn check(o: &Options) -> Result<(), String> {
    let sizes = o.sizes();
    if sizes.iter().any(|&s| s == 0 || s > MAX_SIZE) {
        return Err(format!("sizes are 1 to {MAX_SIZE} bytes"));
    }
    if o.test == Test::AtomicLat && (o.all || o.size.is_some_and(|s| s != 8)) {
        return Err("atomic_lat moves 8 bytes; give no size".into());
    }
    // A UD client says goodbye with a 1-byte datagram: a datagram
    // service has no hang-up for the server to see.
    if o.test.is_ud() && sizes.iter().any(|s| !(2..=MAX_UD_SIZE).contains(s)) {
        return Err(format!("{} sends 2 to {MAX_UD_SIZE} bytes", o.test.name()));
    }
    if o.test.is_ud() && o.apis.iter().any(|a| *a != Api::Rust) {
        return Err(format!("{} runs through the Rust API: give --api rust", o.test.name()));
    }
    if o.apis.len() > 1 && o.role != Role::Loopback {
        return Err("several APIs are measured in turn in loopback; a server or client takes one".into());
    }
    let dat2 = o.apis.iter().any(|a| matches!(a, Api::Dat2 { .. }));
    if dat2 && o.device == "softhca" {
        return Err("the software HCA lives in this process; libdat2's providers cannot reach it".into());
    }
    // dat.conf lines say `nonthreadsafe`: one thread to a provider.
    if dat2 && o.threads > 1 {
        return Err("a provider of libdat2 serves one thread here: drop --threads or the dat2 API".into());
    }
    if o.duration.is_some() && o.all {
        return Err("--duration measures one size; drop --all".into());
    }
    if [o.iters, o.signal, o.post_list, o.tx_depth, o.eps, o.threads, o.rounds].contains(&0) {
        return Err("counts must be at least 1".into());
    }
    if o.signal > o.tx_depth || o.post_list > o.tx_depth {
        return Err("--signal and --post-list must not exceed --tx-depth".into());
    }
    if o.test.is_latency() && (o.eps > 1 || o.threads > 1) {
        return Err("latency tests run one endpoint in one thread".into());
    }
    if o.device == "softhca" && o.role != Role::Loopback {
        return Err("the software HCA lives in this process: use loopback".into());
    }
    if o.compare && o.role != Role::Loopback {
        return Err("--compare runs both sides here: use loopback".into());
    }
    if o.rounds > 1 && o.role != Role::Loopback {
        return Err("--rounds runs both sides here: use loopback".into());
    }
    if o.compare && o.device == "softhca" {
        return Err("--compare needs a verbs device for perftest".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Options, String> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn roles_tests_and_sizes() {
        let o = p("client 10.0.0.1 -t read_bw -s 4096 -n 50").unwrap();
        assert_eq!((o.role, o.test, o.sizes(), o.iters), (Role::Client([10, 0, 0, 1]), Test::ReadBw, vec![4096], 50));
        assert_eq!(p("server").unwrap().sizes(), vec![2]);
        assert_eq!(p("server -t send_bw").unwrap().sizes(), vec![65536]);
        let all = p("loopback -a").unwrap().sizes();
        assert_eq!((all.len(), all[0], *all.last().unwrap()), (23, 2, MAX_SIZE));
        for t in Test::ALL {
            assert_eq!(Test::from_code(t.code()), Some(t));
        }
        assert_eq!((p("loopback").unwrap().rounds, p("loopback --rounds 3 --compare").unwrap().rounds), (1, 3));
        assert_eq!(p("server -t ud_send_bw").unwrap().sizes(), vec![MAX_UD_SIZE]);
        assert_eq!(
            p("loopback --api rust,c,dat2:udat:udat.1,dat2:ofa").unwrap().apis,
            [
                Api::Rust,
                Api::C,
                Api::Dat2 { ia: "udat".into(), server: "udat.1".into() },
                Api::Dat2 { ia: "ofa".into(), server: "ofa".into() }
            ]
        );
        assert_eq!(p("server -t ud_send_lat -a").unwrap().sizes().last(), Some(&MAX_UD_SIZE));
    }

    #[test]
    fn impossible_combinations_are_refused() {
        for bad in [
            "client",
            "client nowhere",
            "server -s 0",
            "server -s 9000000",
            "server -t atomic_lat -s 64",
            "server -a -D 3",
            "server -t write_lat -q 2",
            "server -c 200",
            "server --compare",
            "client 1.2.3.4 --rounds 3",
            "loopback --rounds 0",
            "client 1.2.3.4 -d softhca",
            "loopback -d softhca --compare",
            "server --api go",
            "server --api dat2:",
            "server --api dat2:ofa:",
            "server --api rust,c",
            "loopback -d softhca --api dat2:udat",
            "loopback -t write_bw -T 2 --api c,dat2:ofa",
            "server -t ud_send_lat -s 1",
            "server -t ud_send_bw -s 4096",
            "loopback -t ud_send_lat --api c",
            "loopback -t ud_send_lat --api rust,dat2:udat",
            "server --bogus",
        ] {
            assert!(p(bad).is_err(), "{bad} was taken");
        }
    }
}
