//! perftest's matching program, run with the same parameters on the same
//! device, server and client, and its summary line read back.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::args::{Options, Test};

/// One row of perftest's summary, in its units: µs for latency, MB/s
/// (2^20 bytes) and millions of messages per second for bandwidth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Row {
    Latency { bytes: u32, iterations: u64, min: f64, max: f64, typical: f64, avg: f64, p99: f64, p999: f64 },
    Bandwidth { bytes: u32, iterations: u64, peak: f64, avg: f64, mpps: f64 },
}

impl Row {
    pub fn bytes(&self) -> u32 {
        match *self {
            Row::Latency { bytes, .. } | Row::Bandwidth { bytes, .. } => bytes,
        }
    }

    /// Whether the row holds a figure: perftest now and then prints a
    /// summary of zeros (an `ib_send_bw` client of 300 iterations on rxe
    /// reported 0 MB/s and 0 Mpps), which measures nothing.
    fn measured(&self) -> bool {
        match *self {
            Row::Latency { typical, .. } => typical > 0.0,
            Row::Bandwidth { avg, mpps, .. } => avg > 0.0 || mpps > 0.0,
        }
    }
}

/// perftest's arguments for `o` (the client adds the server's address).
pub fn arguments(o: &Options) -> Vec<String> {
    let mut a: Vec<String> = vec!["-d".into(), o.device.clone(), "-F".into()];
    let mut put = |k: &str, v: String| {
        a.push(k.into());
        a.push(v);
    };
    put("-p", (o.port + 1000).to_string());
    match o.duration {
        Some(d) => put("-D", d.as_secs().to_string()),
        None => put("-n", o.iters.max(5).to_string()),
    }
    if !o.all && o.test != Test::AtomicLat {
        put("-s", o.sizes()[0].to_string());
    }
    if let Some(i) = o.inline {
        put("-I", i.to_string());
    }
    if o.test.is_ud() {
        put("-c", "UD".into());
    }
    if !o.test.is_latency() {
        put("-t", o.tx_depth.to_string());
        put("-Q", o.signal.to_string());
        put("-q", o.eps.to_string());
        if o.post_list > 1 {
            put("-l", o.post_list.to_string());
        }
    }
    if o.all {
        a.push("-a".into());
    }
    a
}

/// Whether a TCP socket listens on `port` (`/proc/net/tcp`, state 0A).
fn listening(port: u64) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|path| {
        std::fs::read_to_string(path).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 3 && f[1].ends_with(&want) && f[3] == "0A"
            })
        })
    })
}

/// Parse the summary rows of perftest's output.
pub fn parse(test: Test, out: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in out.lines() {
        let line = line.trim();
        if line.starts_with("#bytes") {
            in_table = true;
            continue;
        }
        if !in_table || line.starts_with('-') || line.is_empty() {
            continue;
        }
        let v: Vec<f64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        let row = if test.is_latency() {
            match v[..] {
                [bytes, iters, min, max, typical, avg, _stdev, p99, p999, ..] => Some(Row::Latency {
                    bytes: bytes as u32,
                    iterations: iters as u64,
                    min,
                    max,
                    typical,
                    avg,
                    p99,
                    p999,
                }),
                _ => None,
            }
        } else {
            match v[..] {
                [bytes, iters, peak, avg, mpps, ..] => {
                    Some(Row::Bandwidth { bytes: bytes as u32, iterations: iters as u64, peak, avg, mpps })
                }
                _ => None,
            }
        };
        rows.extend(row);
    }
    rows
}

/// The last `n` lines of `text` that say something, indented, for an
/// error message.
fn tail(text: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(text);
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].iter().map(|l| format!("\n    {l}")).collect()
}

/// Why `program` did not start.
fn not_started(program: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("{program} is not installed (it is in the Debian package `perftest`)"),
        _ => format!("{program}: {e}"),
    }
}

/// Lines of perftest's output an error shows.
const TAIL: usize = 5;

/// Runs of perftest's program a comparison makes before it takes a
/// summary of zeros as perftest's answer.
const TRIES: u32 = 3;

/// Run perftest's program for `o.test` on `o.device` ([`run_once`]); a
/// run whose summary holds a row of zeros is made again, saying so, up to
/// [`TRIES`] runs in all, and the last one's rows are the answer.
pub fn run(o: &Options, address: &str) -> Result<Vec<Row>, String> {
    let mut tries = 1;
    loop {
        let rows = run_once(o, address)?;
        if rows.iter().all(Row::measured) || tries == TRIES {
            return Ok(rows);
        }
        eprintln!("udat-perf: {} reported a row of zeros; running it again ({tries} of {TRIES})", o.test.perftest());
        tries += 1;
    }
}

/// Run perftest's program for `o.test` on `o.device`: a server, then a
/// client to `address` once the server waits. A missing program, a run
/// that fails or one that reports nothing is an error that says so, with
/// the last lines perftest printed.
fn run_once(o: &Options, address: &str) -> Result<Vec<Row>, String> {
    let program = o.test.perftest();
    let args = arguments(o);
    eprintln!("udat-perf: {program} {}", args.join(" "));
    let spawned = Command::new(program).args(&args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn();
    let mut server = spawned.map_err(|e| not_started(program, &e))?;
    // The server waits for its client on a TCP port (its banner is
    // buffered, so it says nothing until it exits).
    let port = o.port + 1000;
    let started = Instant::now();
    while !listening(port) {
        let exited = server.try_wait().ok().flatten();
        if exited.is_some() || started.elapsed() > Duration::from_secs(60) {
            let _ = server.kill();
            let said = server.wait_with_output().map(|out| tail(&out.stderr, TAIL)).unwrap_or_default();
            let how = exited.map_or("within 60 s".to_string(), |s| format!("(it exited: {s})"));
            return Err(format!("the {program} server did not listen on port {port} {how}{said}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let client = Command::new(program).args(&args).arg(address).output().map_err(|e| format!("{program}: {e}"))?;
    if !client.status.success() {
        // A server whose client gave up may wait for it still.
        let _ = server.kill();
    }
    let server = server.wait_with_output().map_err(|e| format!("{program}: {e}"))?;
    if !client.status.success() {
        let said = [("client", &client.stderr), ("server", &server.stderr), ("client's output", &client.stdout)]
            .iter()
            .map(|(who, text)| (who, tail(text, TAIL)))
            .filter(|(_, t)| !t.is_empty())
            .map(|(who, t)| format!("\n  {program} {who}:{t}"))
            .collect::<String>();
        return Err(format!("{program} failed ({}){said}", client.status));
    }
    let rows = parse(o.test, &String::from_utf8_lossy(&client.stdout));
    if rows.is_empty() {
        return Err(format!("{program} reported no results; it ended:{}", tail(&client.stdout, TAIL)));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_of_zeros_measures_nothing() {
        let bw = |avg, mpps| Row::Bandwidth { bytes: 4096, iterations: 300, peak: 0.0, avg, mpps };
        assert!(!bw(0.0, 0.0).measured());
        assert!(bw(47.5, 0.0122).measured());
        let lat = |typical| Row::Latency {
            bytes: 2,
            iterations: 300,
            min: 0.0,
            max: 0.0,
            typical,
            avg: 0.0,
            p99: 0.0,
            p999: 0.0,
        };
        assert!(!lat(0.0).measured());
        assert!(lat(11.7).measured());
    }

    #[test]
    fn perftest_summaries_are_read() {
        let lat = "
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      200          11.39          10353.64      20.58    	       1767.88     	2355.36		8015.46 		10353.64
---------------------------------------------------------------------------------------";
        assert_eq!(
            parse(Test::WriteLat, lat),
            [Row::Latency {
                bytes: 64,
                iterations: 200,
                min: 11.39,
                max: 10353.64,
                typical: 20.58,
                avg: 1767.88,
                p99: 8015.46,
                p999: 10353.64
            }]
        );
        let bw = "
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 4096       500              42.09              27.05  		   0.006925
 8192       500              50.00              40.00  		   0.005000
---------------------------------------------------------------------------------------";
        let rows = parse(Test::WriteBw, bw);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], Row::Bandwidth { bytes: 4096, iterations: 500, peak: 42.09, avg: 27.05, mpps: 0.006925 });
        assert!(parse(Test::WriteBw, "nothing here").is_empty());
    }

    #[test]
    fn the_same_parameters_go_to_perftest() {
        let o = crate::args::parse(
            &["loopback", "-t", "write_bw", "-s", "4096", "-n", "77", "-c", "16", "-d", "rxe0"].map(String::from),
        )
        .unwrap();
        let a = arguments(&o).join(" ");
        for want in ["-d rxe0", "-s 4096", "-n 77", "-Q 16", "-t 128", "-q 1"] {
            assert!(a.contains(want), "{want} missing from {a}");
        }
    }

    #[test]
    fn an_error_shows_the_last_lines_perftest_printed() {
        let said = b"line 1\nline 2\n\n Couldn't connect to 192.0.2.1:19600\nUnable to open file descriptor for socket connection\n";
        assert_eq!(
            tail(said, 2),
            "\n     Couldn't connect to 192.0.2.1:19600\n    Unable to open file descriptor for socket connection"
        );
        assert_eq!(tail(b"one\n", 5), "\n    one");
        assert_eq!(tail(b"", 5), "");
    }

    #[test]
    fn a_missing_perftest_is_named() {
        let e = not_started("ib_write_lat", &std::io::ErrorKind::NotFound.into());
        assert_eq!(e, "ib_write_lat is not installed (it is in the Debian package `perftest`)");
    }
}
