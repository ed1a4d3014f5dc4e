//! The measurements: the client's loops, and the server's answers as a
//! state machine that either runs in a thread of its own or is stepped
//! from the client's spin loop (the software HCA, one thread for both).

use std::time::{Duration, Instant};

use crate::args::{Options, Test};
use crate::link::{peek, poke, Done, Link, OUT};
use crate::rust_api::RECV_COOKIE;
use crate::stats::Summary;
use crate::ticks::{Rate, Tick};

/// One size's figures.
#[derive(Clone, Debug)]
pub struct Measured {
    pub size: u32,
    pub iterations: u64,
    pub seconds: f64,
    /// Latency tests: one sample per iteration, ns (half a round trip for
    /// ping-pongs, the whole operation otherwise).
    pub samples: Vec<u64>,
    pub latency: Option<Summary>,
    /// Mean time inside a post call, and inside a poll call that returned
    /// a completion, ns.
    pub post_ns: f64,
    pub poll_ns: f64,
    /// 2^20 bytes per second, as perftest counts them.
    pub mb_s: f64,
    pub mops: f64,
}

/// Post and poll time, in ticks of [`Tick`].
struct Overhead {
    rate: Rate,
    posts: u64,
    post: u64,
    polls: u64,
    poll: u64,
}

impl Overhead {
    fn new() -> Overhead {
        Overhead { rate: Rate::start(), posts: 0, post: 0, polls: 0, poll: 0 }
    }

    fn post<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let t = Tick::now();
        let r = f();
        self.post += t.elapsed();
        self.posts += 1;
        r
    }

    fn poll(&mut self, link: &mut dyn Link) -> Result<Option<Done>, String> {
        let t = Tick::now();
        let r = link.poll()?;
        if r.is_some() {
            self.poll += t.elapsed();
            self.polls += 1;
        }
        Ok(r)
    }

    /// Mean ns a post and a poll that returned a completion.
    fn means(&self) -> (f64, f64) {
        let ns = self.rate.ns_per_tick();
        let mean = |ticks: u64, n: u64| if n == 0 { 0.0 } else { ticks as f64 * ns / n as f64 };
        (mean(self.post, self.posts), mean(self.poll, self.polls))
    }
}

/// What a UD server's receive of the client's goodbye (a 1-byte datagram
/// after its 40-byte GRH) takes: a datagram service has no hang-up.
pub const GOODBYE_LEN: u32 = udat::backend::GRH_BYTES + 1;

/// The sequence number of iteration `i`, in a message's last byte: never 0.
fn seq(i: u64) -> u8 {
    (i % 255 + 1) as u8
}

fn failed(d: &Done) -> Result<(), String> {
    if d.ok {
        Ok(())
    } else {
        Err(format!("a request failed (endpoint {}, cookie {:#x})", d.ep, d.cookie))
    }
}

/// How long and how often: a count, or a time.
#[derive(Clone, Copy)]
enum Span {
    Count(u64),
    For(Duration),
}

impl Span {
    fn more(&self, i: u64, start: Instant) -> bool {
        match *self {
            Span::Count(n) => i < n,
            Span::For(d) => start.elapsed() < d,
        }
    }
}

/// Run the client's side of `o.test` for every size; `tick` runs between
/// spins (the server's step when both share a thread).
pub fn client(
    o: &Options,
    link: &mut dyn Link,
    tick: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Vec<Measured>, String> {
    let mut out = Vec::new();
    for size in o.sizes() {
        let warm = Span::Count(u64::from(o.warmup));
        let span = o.duration.map_or(Span::Count(u64::from(o.iters)), Span::For);
        // Iterations are numbered on from the warm-up's, so that no
        // sequence number of the measured ones matches a stale one.
        let m = if o.test.is_latency() {
            latency(o.test, link, size, warm, 0, tick)?;
            latency(o.test, link, size, span, u64::from(o.warmup), tick)?
        } else {
            bandwidth(o, link, size, warm, tick)?;
            bandwidth(o, link, size, span, tick)?
        };
        progress(&m);
        out.push(m);
    }
    Ok(out)
}

/// A line now and then on long runs, over itself.
struct Progress {
    size: u32,
    last: Instant,
}

impl Progress {
    fn new(size: u32) -> Progress {
        Progress { size, last: Instant::now() }
    }

    #[inline]
    fn tick(&mut self, i: u64, start: Instant) {
        if i % 1024 == 0 && self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            eprint!("\rudat-perf: {} bytes: {i} iterations, {:.0} s ", self.size, start.elapsed().as_secs_f64());
        }
    }
}

fn progress(m: &Measured) {
    // Over a progress line, if one was shown.
    eprintln!("\rudat-perf: {} bytes: {} iterations in {:.2} s", m.size, m.iterations, m.seconds);
}

/// Take completions until `want` says one is the awaited one.
fn await_done(
    link: &mut dyn Link,
    cost: &mut Overhead,
    tick: &mut dyn FnMut() -> Result<(), String>,
    mut want: impl FnMut(&Done) -> bool,
) -> Result<(), String> {
    let mut spins = 0u64;
    loop {
        if let Some(d) = cost.poll(link)? {
            failed(&d)?;
            if want(&d) {
                return Ok(());
            }
            continue;
        }
        spins += 1;
        if spins % 1024 == 0 && link.peer_gone() {
            return Err("the peer hung up".into());
        }
        tick()?;
    }
}

fn latency(
    test: Test,
    link: &mut dyn Link,
    size: u32,
    span: Span,
    first: u64,
    tick: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Measured, String> {
    let buf = link.buf();
    let mut cost = Overhead::new();
    let mut samples = Vec::new();
    let start = Instant::now();
    let mut shown = Progress::new(size);
    let mut i = 0;
    while span.more(i, start) {
        shown.tick(i, start);
        // Write completions of earlier iterations, off the clock.
        while let Some(d) = link.poll()? {
            failed(&d)?;
        }
        let (s, k) = (seq(first + i), first + i);
        let t0 = Tick::now();
        match test {
            Test::WriteLat => {
                // SAFETY: OUT + size - 1 and size - 1 are inside the buffer.
                unsafe { poke(buf, OUT + u64::from(size) - 1, s) };
                cost.post(|| link.write(0, OUT, size, 0, k, true))?;
                let mut spins = 0u64;
                // SAFETY: as above.
                while unsafe { peek(buf, u64::from(size) - 1) } != s {
                    spins += 1;
                    if spins % 1024 == 0 && link.peer_gone() {
                        return Err("the peer hung up".into());
                    }
                    tick()?;
                }
            }
            Test::SendLat | Test::UdSendLat => {
                cost.post(|| link.send(0, OUT, size, k, true))?;
                await_done(link, &mut cost, tick, |d| d.cookie & RECV_COOKIE != 0)?;
                link.recv(0, 0, crate::args::MAX_SIZE, RECV_COOKIE | k)?;
            }
            Test::ReadLat => {
                cost.post(|| link.read(0, OUT, size, 0, k, true))?;
                await_done(link, &mut cost, tick, |d| d.cookie == k)?;
            }
            Test::AtomicLat => {
                cost.post(|| link.fetch_add(0, OUT, 0, k))?;
                await_done(link, &mut cost, tick, |d| d.cookie == k)?;
            }
            _ => return Err(format!("{} is not a latency test", test.name())),
        }
        let ticks = t0.elapsed();
        samples.push(if test == Test::WriteLat || test.is_ping_pong() { ticks / 2 } else { ticks });
        i += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    let ns = cost.rate.ns_per_tick();
    for s in &mut samples {
        *s = (*s as f64 * ns) as u64;
    }
    let latency = Summary::of(&mut samples);
    let (post_ns, poll_ns) = cost.means();
    let bytes = f64::from(size) * i as f64;
    Ok(Measured {
        size,
        iterations: i,
        seconds,
        samples,
        latency,
        post_ns,
        poll_ns,
        mb_s: bytes / seconds / 1048576.0,
        mops: i as f64 / seconds / 1e6,
    })
}

fn bandwidth(
    o: &Options,
    link: &mut dyn Link,
    size: u32,
    span: Span,
    tick: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Measured, String> {
    let eps = o.eps as usize;
    let depth = u64::from(o.tx_depth);
    let (mut posted, mut done) = (vec![0u64; eps], vec![0u64; eps]);
    let mut signalled = vec![true; eps];
    let mut cost = Overhead::new();
    let start = Instant::now();
    let (mut total, mut next) = (0u64, 0usize);
    let post = |link: &mut dyn Link, cost: &mut Overhead, e: usize, k: u64, signal: bool| -> Result<(), String> {
        match o.test {
            Test::WriteBw => cost.post(|| link.write(e, OUT, size, 0, k, signal)),
            Test::ReadBw => cost.post(|| link.read(e, 0, size, OUT, k, signal)),
            _ => cost.post(|| link.send(e, OUT, size, k, signal)),
        }
    };
    let mut posting = true;
    let mut spins = 0u64;
    let mut shown = Progress::new(size);
    loop {
        shown.tick(total, start);
        if posting && !span.more(total, start) {
            posting = false;
            // A run that ended on time: each endpoint's last request asks
            // for a completion, posted now if it did not.
            for e in 0..eps {
                if !signalled[e] {
                    post(link, &mut cost, e, posted[e], true)?;
                    posted[e] += 1;
                    total += 1;
                    signalled[e] = true;
                }
            }
        }
        if posting {
            for _ in 0..o.post_list {
                let e = next;
                if posted[e] - done[e] >= depth || !span.more(total, start) {
                    break;
                }
                let k = posted[e];
                // The last request of each endpoint asks for a completion
                // too, which retires the suppressed ones before it.
                let last = matches!(span, Span::Count(n) if n - total <= eps as u64);
                let signal = (k + 1) % u64::from(o.signal) == 0 || last;
                post(link, &mut cost, e, k, signal)?;
                signalled[e] = signal;
                posted[e] += 1;
                total += 1;
                next = (next + 1) % eps;
            }
        }
        while let Some(d) = cost.poll(link)? {
            failed(&d)?;
            if d.cookie & RECV_COOKIE == 0 {
                done[d.ep] = done[d.ep].max(d.cookie + 1);
            }
        }
        if !posting && done == posted {
            break;
        }
        // As seldom as the latency loops look: a look may cost a system
        // call (a connection manager's channel), not to be paid per post.
        spins += 1;
        if spins % 1024 == 0 && link.peer_gone() {
            return Err("the peer hung up".into());
        }
        tick()?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let (post_ns, poll_ns) = cost.means();
    Ok(Measured {
        size,
        iterations: total,
        seconds,
        samples: Vec::new(),
        latency: None,
        post_ns,
        poll_ns,
        mb_s: f64::from(size) * total as f64 / seconds / 1048576.0,
        mops: total as f64 / seconds / 1e6,
    })
}

/// The server's side: answers pings, keeps receives posted, and ends
/// when the client hangs up.
pub struct Server {
    test: Test,
    sizes: Vec<u32>,
    /// Iterations per size, warm-up included; none in duration mode.
    per_size: Option<u64>,
    at: usize,
    i: u64,
    spins: u64,
    pub finished: bool,
}

impl Server {
    pub fn new(o: &Options) -> Server {
        let per_size = o.duration.is_none().then(|| u64::from(o.warmup) + u64::from(o.iters));
        Server { test: o.test, sizes: o.sizes(), per_size, at: 0, i: 0, spins: 0, finished: false }
    }

    /// Receives to post on an endpoint before accepting.
    pub fn receives(test: Test, depth: u32) -> u32 {
        match test {
            Test::SendLat | Test::UdSendLat => 1,
            Test::SendBw | Test::UdSendBw => depth,
            _ => 0,
        }
    }

    /// Whether this side has nothing to do but wait for the hang-up: the
    /// one-sided tests (the client's requests complete without it) other
    /// than the RDMA-write ping-pong.
    pub fn passive(&self) -> bool {
        matches!(self.test, Test::WriteBw | Test::ReadBw | Test::ReadLat | Test::AtomicLat)
    }

    fn size(&self) -> u32 {
        self.sizes.get(self.at).copied().unwrap_or(1)
    }

    /// One ping is answered; the client numbers them from 0 in each size.
    fn advance(&mut self) {
        self.i += 1;
        if self.per_size.is_some_and(|n| self.i == n) {
            self.at += 1;
            self.i = 0;
        }
    }

    /// Do what is due; true once the client has hung up.
    pub fn step(&mut self, link: &mut dyn Link) -> Result<bool, String> {
        if self.finished {
            return Ok(true);
        }
        self.spins += 1;
        let look = self.spins % 1024 == 0;
        match self.test {
            Test::WriteLat => {
                let (size, buf) = (u64::from(self.size()), link.buf());
                let s = seq(self.i);
                // SAFETY: size - 1 and OUT + size - 1 are inside the buffer.
                if unsafe { peek(buf, size - 1) } == s {
                    // SAFETY: as above.
                    unsafe { poke(buf, OUT + size - 1, s) };
                    link.write(0, OUT, self.size(), 0, self.i, true)?;
                    self.advance();
                    while let Some(d) = link.poll()? {
                        failed(&d)?;
                    }
                }
            }
            Test::SendLat | Test::SendBw | Test::UdSendLat | Test::UdSendBw => {
                while let Some(d) = link.poll()? {
                    if !d.ok {
                        // Flushed by the client's hang-up.
                        break;
                    }
                    if d.cookie & RECV_COOKIE != 0 {
                        if self.test.is_ud() && d.len == GOODBYE_LEN {
                            self.finished = true;
                            return Ok(true);
                        }
                        link.recv(d.ep, 0, crate::args::MAX_SIZE, d.cookie)?;
                        if self.test.is_ping_pong() {
                            link.send(d.ep, OUT, self.size(), self.i, true)?;
                            self.advance();
                        }
                    }
                }
            }
            _ => {}
        }
        if look && link.peer_gone() {
            self.finished = true;
        }
        Ok(self.finished)
    }
}
