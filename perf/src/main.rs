//! udat-perf: RDMA latency and bandwidth through udat, in the manner of
//! perftest, and beside it (`--compare`). See `udat-perf --help`.

mod args;
mod c_api;
mod dat;
mod link;
mod output;
mod perftest;
mod rounds;
mod run;
mod rust_api;
mod stats;
mod ticks;

use std::sync::mpsc;

use args::{Api, Options, Role};
use c_api::CSide;
use dat::{Dat, Libdat2, Libudat};
use link::Peer;
use rounds::Rounds;
use run::{Measured, Server};
// libudat.a's consumer functions, which `c_api` calls.
use libudat as _;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let o = match args::parse(&argv) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&o) {
        eprintln!("udat-perf: {e}");
        std::process::exit(1);
    }
}

/// Pin this thread to `cpu`, or say that it is not pinned.
fn pin(cpu: Option<usize>, who: &str) {
    let Some(cpu) = cpu else {
        eprintln!("udat-perf: the {who} is not pinned to a CPU; figures move with the scheduler (--cpu N pins it)");
        return;
    };
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET and
    // sched_setaffinity read and write only it.
    let ok = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    };
    if !ok {
        eprintln!("udat-perf: could not pin the {who} to CPU {cpu}: {}", std::io::Error::last_os_error());
    }
}

/// A thread with room on its stack for a side's provider.
fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new().stack_size(64 << 20).spawn(f).expect("a thread")
}

/// Depth of each endpoint's queues.
fn depth(o: &Options) -> u32 {
    o.tx_depth.max(16)
}

fn hello(o: &Options) -> link::Hello {
    link::Hello {
        test: o.test.code(),
        all: o.all,
        size: o.sizes()[0],
        iters: o.iters,
        warmup: o.warmup,
        duration_ms: o.duration.map_or(0, |d| d.as_millis() as u32),
        eps: o.eps,
        buf: 0,
        rkey: 0,
    }
}

/// The client's options as the server takes them from its request.
fn from_hello(base: &Options, h: &link::Hello) -> Result<Options, String> {
    let test = args::Test::from_code(h.test).ok_or("the client asked for a test this server does not know")?;
    Ok(Options {
        test,
        all: h.all,
        size: Some(h.size),
        iters: h.iters,
        warmup: h.warmup,
        duration: (h.duration_ms != 0).then(|| std::time::Duration::from_millis(u64::from(h.duration_ms))),
        eps: h.eps,
        ..base.clone()
    })
}

/// Serve one client on `port` over `side`: accept its endpoints, answer
/// until it hangs up. `ready` is told once the side listens.
fn serve<P: Peer>(mut side: P, base: &Options, port: u64, ready: Option<mpsc::Sender<()>>) -> Result<(), String> {
    side.listen(port)?;
    if let Some(r) = ready {
        let _ = r.send(());
    }
    let d = depth(base);
    let first = side.accept(&|h| args::Test::from_code(h.test).map_or(0, |t| Server::receives(t, d)))?;
    let o = from_hello(base, &first)?;
    for _ in 1..o.eps {
        side.accept(&|_| Server::receives(o.test, d))?;
    }
    let mut server = Server::new(&o);
    if server.passive() {
        // Off the CPUs the device's work needs (a soft-RoCE device's is the
        // kernel's), as perftest's server for these tests is: it blocks.
        while !side.peer_gone() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    } else {
        while !server.step(&mut side)? {}
    }
    side.close();
    Ok(())
}

/// The client's run on `side` against the server at `address`.
fn measure<P: Peer>(mut side: P, o: &Options, address: P::Addr, port: u64) -> Result<Vec<Measured>, String> {
    let recvs = u32::from(o.test.is_ping_pong());
    for _ in 0..o.eps {
        side.connect(address, port, hello(o), recvs)?;
    }
    side.connected()?;
    let rows = run::client(o, &mut side, &mut || Ok(()))?;
    side.close();
    Ok(rows)
}

/// What runs on a side once it is open, whichever API's side it is.
trait OnSide<A> {
    type Out;
    fn run<P: Peer<Addr = A>>(self, side: P) -> Result<Self::Out, String>;
}

/// How an API opens the device `o.device` names, in the thread that uses
/// the side, and runs `then` on it. The Rust API's side lives only inside
/// that call: its objects are branded with its IA.
trait Open: Clone + Send + 'static {
    type Addr: Copy + Send + 'static;
    fn addr_of(ip: [u8; 4]) -> Self::Addr;
    /// `server`: the side of a loopback server.
    fn open<W: OnSide<Self::Addr>>(&self, o: &Options, server: bool, then: W) -> Result<W::Out, String>;
}

/// The Rust API over verbs.
#[derive(Clone, Copy)]
struct RustApi;

impl Open for RustApi {
    type Addr = udat::IaAddress;

    fn addr_of(ip: [u8; 4]) -> Self::Addr {
        udat_verbs::ipv4(ip, 0)
    }

    fn open<W: OnSide<Self::Addr>>(&self, o: &Options, _server: bool, then: W) -> Result<W::Out, String> {
        rust_api::open(udat_verbs::Verbs::new(), &o.device, o.eps, depth(o), |side| then.run(side))
    }
}

/// The C ABI, through the library `D`: the provider `client` opens, and
/// the one a loopback server opens. The server has a provider of its own,
/// as a server in another process would have, so that the two sides,
/// each in its thread, do not share a provider: one thread to a provider,
/// unless `shared` (several client threads) opens it thread-safe.
#[derive(Clone)]
struct CApi<D> {
    dat: D,
    client: String,
    server: String,
    shared: bool,
}

impl CApi<Libudat> {
    /// libudat.a's provider of the verbs device `o.device`; a loopback
    /// server's names the device's port.
    fn libudat(o: &Options) -> CApi<Libudat> {
        let client = format!("udat-verbs-{}", o.device);
        let server = if o.device.contains(':') { client.clone() } else { format!("{client}:1") };
        CApi { dat: Libudat, client, server, shared: o.threads > 1 }
    }
}

impl CApi<Libdat2> {
    /// libdat2's providers of the `dat.conf` lines `ia` and `server`.
    fn libdat2(ia: &str, server: &str) -> Result<CApi<Libdat2>, String> {
        Ok(CApi { dat: Libdat2::load()?, client: ia.into(), server: server.into(), shared: false })
    }
}

impl<D: Dat> Open for CApi<D> {
    type Addr = <CSide<D> as Peer>::Addr;

    fn addr_of(ip: [u8; 4]) -> Self::Addr {
        CSide::<D>::addr_of(ip)
    }

    fn open<W: OnSide<Self::Addr>>(&self, o: &Options, server: bool, then: W) -> Result<W::Out, String> {
        let name = if server { &self.server } else { &self.client };
        then.run(CSide::open(self.dat, name, self.shared, o.eps, depth(o))?)
    }
}

/// [`serve`] as what runs on a side.
struct Serve<A> {
    o: Options,
    port: u64,
    ready: Option<mpsc::Sender<()>>,
    /// Where a loopback server says its address.
    address: Option<mpsc::Sender<A>>,
}

impl<A: Copy + Send + 'static> OnSide<A> for Serve<A> {
    type Out = ();

    fn run<P: Peer<Addr = A>>(self, side: P) -> Result<(), String> {
        if let Some(tx) = self.address {
            let _ = tx.send(side.address()?);
        }
        serve(side, &self.o, self.port, self.ready)
    }
}

/// [`measure`] as what runs on a side.
struct Measure<A> {
    o: Options,
    address: A,
    port: u64,
}

impl<A: Copy + Send + 'static> OnSide<A> for Measure<A> {
    type Out = Vec<Measured>;

    fn run<P: Peer<Addr = A>>(self, side: P) -> Result<Vec<Measured>, String> {
        measure(side, &self.o, self.address, self.port)
    }
}

/// Add up the threads' figures, size by size: bandwidth and rates sum,
/// overheads average.
fn combine(per_thread: Vec<Vec<Measured>>) -> Vec<Measured> {
    let mut it = per_thread.into_iter();
    let Some(mut total) = it.next() else { return Vec::new() };
    let mut n = 1.0;
    for rows in it {
        n += 1.0;
        for (t, m) in total.iter_mut().zip(rows) {
            t.iterations += m.iterations;
            t.mb_s += m.mb_s;
            t.mops += m.mops;
            t.seconds = t.seconds.max(m.seconds);
            t.post_ns += m.post_ns;
            t.poll_ns += m.poll_ns;
        }
    }
    for t in &mut total {
        t.post_ns /= n;
        t.poll_ns /= n;
    }
    total
}

fn run(o: &Options) -> Result<(), String> {
    // A server or a client measures through one API; loopback through
    // each in turn.
    match &o.apis[0] {
        Api::Rust => roles(o, RustApi),
        Api::C => roles(o, CApi::libudat(o)),
        Api::Dat2 { ia, server } => roles(o, CApi::libdat2(ia, server)?),
    }
}

/// Server or client over verbs, each side opened by `api` in the thread
/// that uses it; loopback runs every API of `o` in rounds.
fn roles<O: Open>(o: &Options, api: O) -> Result<(), String> {
    match o.role {
        Role::Server => {
            pin(o.cpu.map(|c| c + 1), "server");
            let threads: Vec<_> = (0..u64::from(o.threads))
                .map(|t| {
                    let (o, api) = (o.clone(), api.clone());
                    let port = o.port + t;
                    spawn(move || api.open(&o.clone(), false, Serve { o, port, ready: None, address: None }))
                })
                .collect();
            for t in threads {
                t.join().map_err(|_| "a server thread panicked")??;
            }
            eprintln!("udat-perf: served");
            Ok(())
        }
        Role::Client(ip) => {
            pin(o.cpu, "client");
            let rows = threads(o, api, O::addr_of(ip))?;
            let measured = [Rounds::of(vec![Ok(rows)])];
            let verdict = report(o, &o.apis[0], &measured[0], None);
            write_files(o, &measured, None)?;
            verdict
        }
        Role::Loopback => in_rounds(o),
    }
}

/// One loopback run through `api`.
fn loopback_once(o: &Options, api: &Api) -> Result<Vec<Measured>, String> {
    if o.device == "softhca" {
        return softhca(o, api);
    }
    match api {
        Api::Rust => loopback(o, RustApi),
        Api::C => loopback(o, CApi::libudat(o)),
        Api::Dat2 { ia, server } => loopback(o, CApi::libdat2(ia, server)?),
    }
}

/// Run each API `o.rounds` times in loopback, the APIs in turn in each
/// round and perftest last when comparing (so that all meet the same
/// moods of a noisy machine), and report each figure's median across the
/// rounds. An API that fails in a round is named, and the rounds it
/// measured still report; any failure fails the run, once all have run.
fn in_rounds(o: &Options) -> Result<(), String> {
    let softhca = o.device == "softhca";
    pin(o.cpu, if softhca { "client and server" } else { "client" });
    let at = std::env::var("UDAT_RDMA_ADDR").unwrap_or_else(|_| "127.0.0.1".into());
    let mut runs: Vec<Vec<Result<Vec<Measured>, String>>> = o.apis.iter().map(|_| Vec::new()).collect();
    let mut perftest = Vec::new();
    for round in 1..=o.rounds {
        if o.rounds > 1 {
            eprintln!("udat-perf: round {round} of {}", o.rounds);
        }
        for (api, runs) in o.apis.iter().zip(&mut runs) {
            if o.apis.len() > 1 {
                eprintln!("udat-perf: {} ({})", o.test.name(), api.label());
            }
            let run = loopback_once(o, api);
            if let Err(e) = &run {
                eprintln!("udat-perf: {}: {e}", api.label());
            }
            runs.push(run);
        }
        if o.compare {
            let run = perftest::run(o, &at);
            if let Err(e) = &run {
                eprintln!("udat-perf: {e}");
            }
            perftest.push(run);
        }
    }
    let compared = o.compare.then(|| rounds::Perftest::of(perftest));
    let measured: Vec<Rounds> = runs.into_iter().map(Rounds::of).collect();
    let mut verdict = Ok(());
    for (api, rounds) in o.apis.iter().zip(&measured) {
        let r = report(o, api, rounds, compared.as_ref());
        verdict = verdict.and(r);
    }
    if o.apis.len() > 1 {
        print!("{}", output::side_by_side(o, &measured, compared.as_ref()));
    }
    write_files(o, &measured, compared.as_ref())?;
    verdict
}

/// One loopback run over verbs: the servers in threads of their own, the
/// client's threads against them.
fn loopback<O: Open>(o: &Options, api: O) -> Result<Vec<Measured>, String> {
    let mut ready = Vec::new();
    let mut servers = Vec::new();
    let mut address = None;
    for t in 0..u64::from(o.threads) {
        let (tx, rx) = mpsc::channel();
        let (atx, arx) = mpsc::channel();
        let (o2, api) = (o.clone(), api.clone());
        servers.push(spawn(move || {
            pin(o2.cpu.map(|c| c + 1), "server");
            let port = o2.port + t;
            api.open(&o2.clone(), true, Serve { o: o2, port, ready: Some(tx), address: Some(atx) })
        }));
        address = Some(arx.recv().map_err(|_| "the server did not open its device")?);
        ready.push(rx);
    }
    for r in ready {
        r.recv().map_err(|_| "the server did not listen")?;
    }
    let address = address.ok_or("no server")?;
    let rows = threads(o, api, address);
    for s in servers {
        s.join().map_err(|_| "a server thread panicked")??;
    }
    rows
}

/// The client's threads, each with its own IA, on ports from `o.port`.
fn threads<O: Open>(o: &Options, api: O, address: O::Addr) -> Result<Vec<Measured>, String> {
    let handles: Vec<_> = (0..u64::from(o.threads))
        .map(|t| {
            let (o, api) = (o.clone(), api.clone());
            let port = o.port + t;
            spawn(move || api.open(&o.clone(), false, Measure { o, address, port }))
        })
        .collect();
    let mut all = Vec::new();
    for h in handles {
        all.push(h.join().map_err(|_| "a client thread panicked")??);
    }
    Ok(combine(all))
}

/// One loopback run on the software HCA, through udat's Rust API or
/// libudat.a.
fn softhca(o: &Options, api: &Api) -> Result<Vec<Measured>, String> {
    match api {
        Api::Rust => {
            let hca = udat_softhca::SoftHca::new();
            let d = depth(o);
            rust_api::open(udat_mlx5::Mlx5::<_>::new(hca.clone()), "mlx5_soft0", o.eps, d, |server| {
                rust_api::open(udat_mlx5::Mlx5::<_>::new(hca), "mlx5_soft1", o.eps, d, |client| {
                    softhca_loopback(o, server, client)
                })
            })
        }
        // One provider, hence one software HCA, serves both IAs.
        Api::C => {
            let name = "udat-softhca-mlx5_soft0";
            let open = || CSide::open(Libudat, name, false, o.eps, depth(o));
            softhca_loopback(o, open()?, open()?)
        }
        Api::Dat2 { .. } => Err("libdat2's providers cannot reach the software HCA".into()),
    }
}

/// Both sides on the software HCA, which runs in this thread: the
/// server's step runs between the client's spins.
fn softhca_loopback<S: Peer, C: Peer<Addr = S::Addr>>(
    o: &Options,
    mut server_side: S,
    mut client_side: C,
) -> Result<Vec<Measured>, String> {
    if o.threads > 1 {
        return Err("the software HCA runs in one thread: drop --threads".into());
    }
    let d = depth(o);
    server_side.listen(o.port)?;
    let address = server_side.address()?;
    let recvs = u32::from(o.test.is_ping_pong());
    for _ in 0..o.eps {
        client_side.connect(address, o.port, hello(o), recvs)?;
        server_side.accept(&|_| Server::receives(o.test, d))?;
    }
    client_side.connected()?;
    let mut server = Server::new(o);
    let rows = {
        let mut tick = || server.step(&mut server_side).map(|_| ());
        run::client(o, &mut client_side, &mut tick)?
    };
    client_side.close();
    while !server.step(&mut server_side)? {}
    server_side.close();
    Ok(rows)
}

/// What carries an API's requests: udat's transport, or libdat2 and its
/// provider.
fn transport(o: &Options, api: &Api) -> &'static str {
    match api {
        Api::Dat2 { .. } => "libdat2",
        _ if o.device == "softhca" => "softhca",
        _ => "verbs",
    }
}

/// Print an API's results, and perftest's beside them. Rounds that
/// failed, and a comparison that holds no ratio, are errors.
fn report(o: &Options, api: &Api, r: &Rounds, perftest: Option<&rounds::Perftest>) -> Result<(), String> {
    let through = match api {
        Api::Dat2 { ia, .. } => format!("provider {ia} through libdat2"),
        _ => format!("{} API, {}", api.name(), transport(o, api)),
    };
    let rounds = match (o.rounds, r.measured) {
        (1, _) => String::new(),
        (n, m) if m == n as usize => format!("; medians of {n} rounds"),
        (n, m) => format!("; medians of the {m} of {n} rounds measured"),
    };
    println!("udat-perf {} on {} ({through}{rounds})", o.test.name(), o.device);
    for (round, why) in &r.failures {
        println!("{} failed in round {round} of {}: {why}", api.label(), o.rounds);
    }
    let rows = &r.rows;
    print!("{}", output::table(o, &api.label(), rows));
    if o.histogram {
        print!("{}", output::histograms(rows));
    }
    let compared = perftest.map_or(Ok(()), |p| {
        let (text, verdict) = output::beside(o, &api.label(), rows, p);
        print!("{text}");
        verdict
    });
    match r.failures.first() {
        Some((round, why)) => Err(format!("{} failed in round {round}: {why}", api.label())),
        None => compared,
    }
}

/// Write the JSON (a line per API) and CSV (a row per API and size, then
/// perftest's) where asked; `-` is standard output.
fn write_files(o: &Options, measured: &[Rounds], perftest: Option<&rounds::Perftest>) -> Result<(), String> {
    let perftest = perftest.map(|p| &p.rows[..]);
    let write = |path: &str, text: String| -> Result<(), String> {
        if path == "-" {
            print!("{text}");
            Ok(())
        } else {
            std::fs::write(path, text).map_err(|e| format!("{path}: {e}"))
        }
    };
    let named: Vec<(String, &[Measured])> =
        o.apis.iter().map(Api::name).zip(measured.iter().map(|r| &r.rows[..])).collect();
    if let Some(path) = &o.json {
        let lines = (o.apis.iter().zip(&named))
            .map(|(api, (name, rows))| output::json(o, name, transport(o, api), rows, perftest))
            .collect();
        write(path, lines)?;
    }
    if let Some(path) = &o.csv {
        write(path, output::csv(&named, perftest))?;
    }
    Ok(())
}
