//! What udat-perf prints: a table per run, a histogram on request, the
//! side-by-side table with perftest, and the same figures as JSON or CSV.

use std::fmt::Write as _;

use crate::args::{Options, Test};
use crate::perftest::Row;
use crate::rounds::{Perftest, Rounds};
use crate::run::Measured;
use crate::stats::{histogram, Summary};

fn us(ns: f64) -> f64 {
    ns / 1e3
}

/// `v` right-aligned in `width` columns to `places` decimals, or `n/a`
/// when it is not a finite number: an `inf` or `NaN` is never printed as
/// a figure.
fn fig(v: f64, width: usize, places: usize) -> String {
    if v.is_finite() {
        format!("{v:>width$.places$}")
    } else {
        format!("{:>width$}", "n/a")
    }
}

/// `part / whole` when both were measured (finite, and `whole` above 0).
fn ratio(part: f64, whole: f64) -> Option<f64> {
    (part.is_finite() && whole.is_finite() && whole > 0.0).then(|| part / whole)
}

/// Why cells of a table read `n/a`, each reason said once.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    /// Note `v`, reported by `who` as `what` at `size` bytes, if it is no
    /// figure (or a `zero` one, for a ratio's denominator).
    fn check(&mut self, who: &str, what: &str, size: u32, v: f64, zero: bool) {
        if !v.is_finite() || (zero && v <= 0.0) {
            self.add(format!("{who} reported {v} as {what} at {size} bytes"));
        }
    }

    fn add(&mut self, why: String) {
        if !self.0.contains(&why) {
            self.0.push(why);
        }
    }

    fn text(&self) -> String {
        self.0.iter().map(|why| format!("n/a: {why}\n")).collect()
    }
}

/// The results table of `who` (an API's label).
pub fn table(o: &Options, who: &str, rows: &[Measured]) -> String {
    let mut t = String::new();
    let mut notes = Notes::default();
    if o.test.is_latency() {
        let _ = writeln!(
            t,
            "{:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "bytes",
            "iters",
            "min[µs]",
            "p50[µs]",
            "avg[µs]",
            "p99[µs]",
            "p99.9[µs]",
            "max[µs]",
            "post[ns]",
            "poll[ns]"
        );
        for m in rows {
            let Some(l) = m.latency else { continue };
            let figures =
                [("min", l.min), ("p50", l.p50), ("avg", l.avg), ("p99", l.p99), ("p99.9", l.p999), ("max", l.max)];
            let mut cells = figures
                .map(|(what, v)| {
                    notes.check(who, what, m.size, v, false);
                    fig(us(v), 9, 2)
                })
                .to_vec();
            cells.extend([("post time", m.post_ns), ("poll time", m.poll_ns)].map(|(what, v)| {
                notes.check(who, what, m.size, v, false);
                fig(v, 9, 0)
            }));
            let _ = writeln!(t, "{:>8} {:>10} {}", m.size, m.iterations, cells.join(" "));
        }
    } else {
        let _ = writeln!(
            t,
            "{:>8} {:>10} {:>10} {:>10} {:>9} {:>9}",
            "bytes", "iters", "MB/s", "Mops/s", "post[ns]", "poll[ns]"
        );
        for m in rows {
            for (what, v) in [("MB/s", m.mb_s), ("Mops/s", m.mops), ("post time", m.post_ns), ("poll time", m.poll_ns)]
            {
                notes.check(who, what, m.size, v, false);
            }
            let _ = writeln!(
                t,
                "{:>8} {:>10} {} {} {} {}",
                m.size,
                m.iterations,
                fig(m.mb_s, 10, 2),
                fig(m.mops, 10, 4),
                fig(m.post_ns, 9, 0),
                fig(m.poll_ns, 9, 0)
            );
        }
    }
    t + &notes.text()
}

/// A histogram per size.
pub fn histograms(rows: &[Measured]) -> String {
    let mut t = String::new();
    for m in rows.iter().filter(|m| !m.samples.is_empty()) {
        let _ = writeln!(t, "{} bytes:", m.size);
        for line in histogram(&m.samples, 40) {
            let _ = writeln!(t, "  {line}");
        }
    }
    t
}

/// udat beside perftest, as printed, and how many ratios it holds.
pub struct Comparison {
    pub text: String,
    pub ratios: usize,
}

/// What `who` (an API's label) measured beside perftest, size by size,
/// with the ratio of the two where both measured the figure; `n/a`
/// elsewhere, with the reason.
pub fn compare(test: Test, who: &str, measured: &[Measured], perftest: &[Row]) -> Comparison {
    let mut t = String::new();
    if test.is_latency() {
        let _ = writeln!(
            t,
            "{:>8} | {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} | {:>7} {:>7}",
            "bytes", "min", "p50", "avg", "pt min", "pt typ", "pt avg", "p50/typ", "avg/avg"
        );
    } else {
        let _ = writeln!(
            t,
            "{:>8} | {:>12} {:>10} | {:>12} {:>10} | {:>7}",
            "bytes", "MB/s", "Mops/s", "pt MB/s", "Mpps", "ratio"
        );
    }
    let program = test.perftest();
    let mut notes = Notes::default();
    let mut ratios = Vec::new();
    for m in measured {
        let row = perftest.iter().find(|r| r.bytes() == m.size);
        if row.is_none() {
            notes.add(format!("{program} reported nothing at {} bytes", m.size));
        }
        let line = if test.is_latency() {
            latency_line(m, row, who, program, &mut notes, &mut ratios)
        } else {
            bandwidth_line(m, row, who, program, &mut notes, &mut ratios)
        };
        t.push_str(&line);
    }
    let measured = ratios.iter().flatten().count();
    Comparison { text: t + &notes.text(), ratios: measured }
}

/// A ratio's cell, kept in `ratios`.
fn ratio_cell(r: Option<f64>, ratios: &mut Vec<Option<f64>>) -> String {
    ratios.push(r);
    fig(r.unwrap_or(f64::NAN), 7, 2)
}

fn latency_line(
    m: &Measured,
    row: Option<&Row>,
    who: &str,
    program: &str,
    notes: &mut Notes,
    ratios: &mut Vec<Option<f64>>,
) -> String {
    let nan = f64::NAN;
    let (min, typical, avg) = match row {
        Some(&Row::Latency { min, typical, avg, .. }) => (min, typical, avg),
        _ => (nan, nan, nan),
    };
    if row.is_some() {
        notes.check(program, "its minimum", m.size, min, false);
        notes.check(program, "its typical latency", m.size, typical, true);
        notes.check(program, "its average", m.size, avg, true);
    }
    let (u_min, u_p50, u_avg) = m.latency.map_or((nan, nan, nan), |l| (us(l.min), us(l.p50), us(l.avg)));
    if m.latency.is_none() {
        notes.add(format!("{who} took no samples at {} bytes", m.size));
    }
    format!(
        "{:>8} | {} {} {} | {} {} {} | {} {}\n",
        m.size,
        fig(u_min, 10, 2),
        fig(u_p50, 10, 2),
        fig(u_avg, 10, 2),
        fig(min, 10, 2),
        fig(typical, 10, 2),
        fig(avg, 10, 2),
        ratio_cell(ratio(u_p50, typical), ratios),
        ratio_cell(ratio(u_avg, avg), ratios)
    )
}

fn bandwidth_line(
    m: &Measured,
    row: Option<&Row>,
    who: &str,
    program: &str,
    notes: &mut Notes,
    ratios: &mut Vec<Option<f64>>,
) -> String {
    let (avg, mpps) = match row {
        Some(&Row::Bandwidth { avg, mpps, .. }) => (avg, mpps),
        _ => (f64::NAN, f64::NAN),
    };
    if row.is_some() {
        notes.check(program, "its bandwidth", m.size, avg, true);
        notes.check(program, "its message rate", m.size, mpps, false);
    }
    notes.check(who, "its bandwidth", m.size, m.mb_s, false);
    format!(
        "{:>8} | {} {} | {} {} | {}\n",
        m.size,
        fig(m.mb_s, 12, 2),
        fig(m.mops, 10, 4),
        fig(avg, 12, 2),
        fig(mpps, 10, 4),
        ratio_cell(ratio(m.mb_s, avg), ratios)
    )
}

/// The comparison with perftest over its rounds, as printed, and an
/// error when it holds no ratio: perftest gave nothing to compare with,
/// and a comparison asked for must not pass silently.
pub fn beside(o: &Options, who: &str, measured: &[Measured], p: &Perftest) -> (String, Result<(), String>) {
    let program = o.test.perftest();
    let mut t = format!("beside {program} on {} (ratio: {who} / perftest", o.device);
    if o.rounds > 1 && p.measured == o.rounds as usize {
        let _ = write!(t, "; medians of {} rounds", o.rounds);
    } else if o.rounds > 1 {
        let _ = write!(t, "; medians of the {} of {} rounds {program} measured", p.measured, o.rounds);
    }
    t.push_str(")\n");
    for (round, why) in &p.failures {
        let _ = writeln!(t, "{program} gave no figures in round {round} of {}: {why}", o.rounds);
    }
    let c = compare(o.test, who, measured, &p.rows);
    if !p.rows.is_empty() {
        t.push_str(&c.text);
    }
    if c.ratios > 0 {
        return (t, Ok(()));
    }
    (t, Err(format!("no ratio to report: {program} gave no figure to compare {who} with (see above)")))
}

/// A figure a side-by-side table compares, per size: its unit, an API's
/// figure and perftest's.
type Figure = (&'static str, fn(&Measured) -> Option<f64>, fn(&Row) -> Option<f64>);

fn figures(test: Test) -> &'static [Figure] {
    if test.is_latency() {
        &[(
            "p50 µs",
            |m| m.latency.map(|l| us(l.p50)),
            |r| match *r {
                Row::Latency { typical, .. } => Some(typical),
                Row::Bandwidth { .. } => None,
            },
        )]
    } else {
        &[
            (
                "MB/s",
                |m| Some(m.mb_s),
                |r| match *r {
                    Row::Bandwidth { avg, .. } => Some(avg),
                    Row::Latency { .. } => None,
                },
            ),
            (
                "Mops/s",
                |m| Some(m.mops),
                |r| match *r {
                    Row::Bandwidth { mpps, .. } => Some(mpps),
                    Row::Latency { .. } => None,
                },
            ),
        ]
    }
}

/// A figure with its ratio to perftest's, or `n/a`.
fn cell(v: Option<f64>, perftest: Option<f64>) -> String {
    match (v.filter(|v| v.is_finite()), perftest.and_then(|p| ratio(v?, p))) {
        (Some(v), Some(r)) => format!("{v:.places$} ({r:.2})", places = places(v)),
        (Some(v), None) => format!("{v:.places$}", places = places(v)),
        (None, _) => "n/a".into(),
    }
}

/// Decimals for three significant figures, and at least two.
fn places(v: f64) -> usize {
    let magnitude = v.abs().log10().floor();
    if magnitude.is_finite() && magnitude < 0.0 {
        2 + (-magnitude) as usize
    } else {
        2
    }
}

/// The APIs' medians, and perftest's when compared, side by side as
/// Markdown: a line per size and figure (latency: p50, and perftest's
/// typical; bandwidth: MB/s and Mops/s), each API's ratio to perftest in
/// brackets.
pub fn side_by_side(o: &Options, apis: &[Rounds], perftest: Option<&Perftest>) -> String {
    let mut t = String::new();
    let rounds = if o.rounds > 1 { format!("medians of {} rounds", o.rounds) } else { "one round".into() };
    let against = perftest.map_or(String::new(), |_| format!("; ratio to {}", o.test.perftest()));
    let _ = writeln!(t, "side by side on {} ({rounds}{against}):", o.device);
    let mut labels: Vec<String> = o.apis.iter().map(|a| a.label()).collect();
    labels.extend(perftest.map(|_| "perftest".to_string()));
    let _ = writeln!(t, "| measure | {} |", labels.join(" | "));
    let _ = writeln!(t, "| --- |{}", " ---: |".repeat(labels.len()));
    let sizes = apis.iter().map(|r| &r.rows).max_by_key(|rows| rows.len()).cloned().unwrap_or_default();
    for size in sizes.iter().map(|m| m.size) {
        let row = perftest.and_then(|p| p.rows.iter().find(|r| r.bytes() == size));
        for (unit, of, pt) in figures(o.test) {
            let p = row.and_then(pt).filter(|v| v.is_finite());
            let mut cells: Vec<String> =
                apis.iter().map(|r| cell(r.rows.iter().find(|m| m.size == size).and_then(of), p)).collect();
            cells.extend(perftest.map(|_| cell(p, None)));
            let _ = writeln!(t, "| {} {size} B, {unit} | {} |", o.test.name(), cells.join(" | "));
        }
    }
    t
}

fn json_number(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.4}")
    } else {
        "null".into()
    }
}

fn json_row(m: &Measured) -> String {
    let mut fields = vec![
        format!("\"bytes\": {}", m.size),
        format!("\"iterations\": {}", m.iterations),
        format!("\"seconds\": {}", json_number(m.seconds)),
        format!("\"post_ns\": {}", json_number(m.post_ns)),
        format!("\"poll_ns\": {}", json_number(m.poll_ns)),
        format!("\"mb_s\": {}", json_number(m.mb_s)),
        format!("\"mops\": {}", json_number(m.mops)),
    ];
    if let Some(l) = m.latency {
        for (k, v) in [
            ("min_us", l.min),
            ("p50_us", l.p50),
            ("avg_us", l.avg),
            ("p99_us", l.p99),
            ("p999_us", l.p999),
            ("max_us", l.max),
        ] {
            fields.push(format!("\"{k}\": {}", json_number(us(v))));
        }
    }
    format!("{{{}}}", fields.join(", "))
}

fn json_perftest(r: &Row) -> String {
    match *r {
        Row::Latency { bytes, iterations, min, max, typical, avg, p99, p999 } => format!(
            "{{\"bytes\": {bytes}, \"iterations\": {iterations}, \"min_us\": {}, \"typical_us\": {}, \"avg_us\": {}, \"p99_us\": {}, \"p999_us\": {}, \"max_us\": {}}}",
            json_number(min), json_number(typical), json_number(avg), json_number(p99), json_number(p999), json_number(max)
        ),
        Row::Bandwidth { bytes, iterations, peak, avg, mpps } => format!(
            "{{\"bytes\": {bytes}, \"iterations\": {iterations}, \"peak_mb_s\": {}, \"mb_s\": {}, \"mpps\": {}}}",
            json_number(peak), json_number(avg), json_number(mpps)
        ),
    }
}

/// The run as one JSON object.
pub fn json(o: &Options, api: &str, transport: &str, udat: &[Measured], perftest: Option<&[Row]>) -> String {
    let rows: Vec<String> = udat.iter().map(json_row).collect();
    let mut s = format!(
        "{{\"tool\": \"udat-perf\", \"test\": \"{}\", \"device\": \"{}\", \"api\": \"{api}\", \"transport\": \"{transport}\", \"rounds\": {}, \"rows\": [{}]",
        o.test.name(),
        o.device.replace(['"', '\\'], ""),
        o.rounds,
        rows.join(", ")
    );
    if let Some(p) = perftest {
        let rows: Vec<String> = p.iter().map(json_perftest).collect();
        let _ =
            write!(s, ", \"perftest\": {{\"program\": \"{}\", \"rows\": [{}]}}", o.test.perftest(), rows.join(", "));
    }
    s.push_str("}\n");
    s
}

/// The run as CSV: a row per API (named in the first field) and size,
/// then perftest's.
pub fn csv(apis: &[(String, &[Measured])], perftest: Option<&[Row]>) -> String {
    let mut s =
        String::from("tool,bytes,iterations,min_us,p50_us,avg_us,p99_us,p999_us,max_us,mb_s,mops,post_ns,poll_ns\n");
    // A figure not measured (absent or not finite) is an empty field.
    let f =
        |v: Option<f64>, places: usize| v.filter(|v| v.is_finite()).map_or(String::new(), |v| format!("{v:.places$}"));
    for (api, m) in apis.iter().flat_map(|(api, rows)| rows.iter().map(move |m| (api, m))) {
        let l = m.latency;
        let lat = |pick: fn(&Summary) -> f64| f(l.as_ref().map(|l| us(pick(l))), 4);
        let _ = writeln!(
            s,
            "{api},{},{},{},{},{},{},{},{},{},{},{},{}",
            m.size,
            m.iterations,
            lat(|l| l.min),
            lat(|l| l.p50),
            lat(|l| l.avg),
            lat(|l| l.p99),
            lat(|l| l.p999),
            lat(|l| l.max),
            f(Some(m.mb_s), 4),
            f(Some(m.mops), 6),
            f(Some(m.post_ns), 1),
            f(Some(m.poll_ns), 1)
        );
    }
    for r in perftest.unwrap_or_default() {
        let g = |v: f64| f(Some(v), 4);
        let _ = match *r {
            Row::Latency { bytes, iterations, min, max, typical, avg, p99, p999 } => writeln!(
                s,
                "perftest,{bytes},{iterations},{},{},{},{},{},{},,,,",
                g(min),
                g(typical),
                g(avg),
                g(p99),
                g(p999),
                g(max)
            ),
            Row::Bandwidth { bytes, iterations, avg, mpps, .. } => {
                writeln!(s, "perftest,{bytes},{iterations},,,,,,,{},{},,", g(avg), f(Some(mpps), 6))
            }
        };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lat(size: u32, p50: f64) -> Measured {
        let mut samples = vec![1000, 2000, 3000];
        let latency = Summary::of(&mut samples);
        let latency = latency.map(|l| Summary { p50, ..l });
        Measured {
            size,
            iterations: 3,
            seconds: 1.0,
            samples,
            latency,
            post_ns: 50.0,
            poll_ns: 60.0,
            mb_s: 1.0,
            mops: 0.5,
        }
    }

    #[test]
    fn json_and_csv_hold_every_size_and_perftest_s_rows() {
        let o = crate::args::parse(&["loopback".to_string()]).unwrap();
        let perftest =
            [Row::Latency { bytes: 2, iterations: 3, min: 1.0, max: 3.0, typical: 2.0, avg: 2.0, p99: 3.0, p999: 3.0 }];
        let j = json(&o, "rust", "verbs", &[lat(2, 2000.0), lat(4, 2500.0)], Some(&perftest));
        assert!(j.starts_with("{\"tool\": \"udat-perf\""));
        assert_eq!(j.matches("\"bytes\"").count(), 3);
        assert!(j.contains("\"p50_us\": 2.0000") && j.contains("\"typical_us\": 2.0000"));
        assert_eq!(j.matches('{').count(), j.matches('}').count());
        let c = csv(&[("rust".into(), &[lat(2, 2000.0)])], Some(&perftest));
        assert_eq!(c.lines().count(), 3);
        assert!(c.lines().all(|l| l.split(',').count() == 13), "{c}");
        let c = compare(Test::WriteLat, "Rust API", &[lat(2, 3000.0)], &perftest);
        assert!(c.text.lines().nth(1).unwrap().trim_end().ends_with("1.50    1.00"), "{}", c.text);
        assert_eq!(c.ratios, 2);
    }

    fn compared(rows: Vec<Row>, failures: Vec<(usize, String)>) -> Perftest {
        Perftest { measured: usize::from(!rows.is_empty()), rows, failures }
    }

    fn loopback(args: &str) -> Options {
        crate::args::parse(&args.split_whitespace().map(String::from).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_perftest_figure_that_is_not_finite_is_not_printed_and_fails_the_comparison() {
        // What ib_write_lat printed on a guest whose clock rate it could
        // not read: every latency `inf`.
        let inf = f64::INFINITY;
        let row =
            Row::Latency { bytes: 2, iterations: 3, min: inf, max: inf, typical: inf, avg: inf, p99: inf, p999: inf };
        let o = loopback("loopback --compare");
        let (text, verdict) = beside(&o, "Rust API", &[lat(2, 2000.0)], &compared(vec![row], Vec::new()));
        assert!(!text.contains("inf |") && !text.contains("0.00"), "{text}");
        assert!(text.lines().nth(2).unwrap().trim_end().ends_with("n/a     n/a"), "{text}");
        assert!(text.contains("n/a: ib_write_lat reported inf as its typical latency at 2 bytes"), "{text}");
        assert!(verdict.unwrap_err().contains("ib_write_lat gave no figure to compare Rust API with"));
        let nan = Row::Bandwidth { bytes: 65536, iterations: 3, peak: 1.0, avg: f64::NAN, mpps: 0.0 };
        let c = compare(Test::WriteBw, "Rust API", &[Measured { size: 65536, ..lat(65536, 1.0) }], &[nan]);
        assert!(!c.text.contains("NaN |") && c.ratios == 0, "{}", c.text);
        assert!(c.text.contains("n/a: ib_write_bw reported NaN as its bandwidth at 65536 bytes"), "{}", c.text);
    }

    #[test]
    fn a_zero_from_perftest_gives_no_ratio() {
        let row = Row::Bandwidth { bytes: 65536, iterations: 3, peak: 0.0, avg: 0.0, mpps: 0.0 };
        let c = compare(Test::WriteBw, "Rust API", &[Measured { size: 65536, ..lat(65536, 1.0) }], &[row]);
        assert_eq!(c.ratios, 0);
        assert!(c.text.lines().nth(1).unwrap().ends_with("n/a"), "{}", c.text);
        assert!(c.text.contains("n/a: ib_write_bw reported 0 as its bandwidth at 65536 bytes"), "{}", c.text);
    }

    #[test]
    fn a_failed_perftest_run_is_reported_with_its_last_lines_and_fails_the_comparison() {
        let why =
            "ib_write_lat failed (exit status: 1)\n  ib_write_lat client:\n     Couldn't connect to 192.0.2.1:19600";
        let o = loopback("loopback --compare");
        let (text, verdict) = beside(&o, "Rust API", &[lat(2, 2000.0)], &compared(Vec::new(), vec![(1, why.into())]));
        assert!(text.contains("ib_write_lat gave no figures in round 1 of 1: ib_write_lat failed (exit status: 1)"));
        assert!(text.contains("Couldn't connect to 192.0.2.1:19600"), "{text}");
        assert!(!text.contains("| "), "no table of nothing: {text}");
        assert!(verdict.is_err());
    }

    #[test]
    fn a_round_without_perftest_leaves_the_others_compared() {
        let row =
            Row::Latency { bytes: 2, iterations: 3, min: 1.0, max: 3.0, typical: 2.0, avg: 2.0, p99: 3.0, p999: 3.0 };
        let o = loopback("loopback --compare --rounds 3 -d rxe0");
        let p = Perftest { rows: vec![row], measured: 2, failures: vec![(2, "ib_write_lat failed".into())] };
        let (text, verdict) = beside(&o, "Rust API", &[lat(2, 2000.0)], &p);
        assert!(
            text.starts_with("beside ib_write_lat on rxe0 (ratio: Rust API / perftest; medians of the 2 of 3 rounds ib_write_lat measured)"),
            "{text}"
        );
        assert!(text.contains("round 2 of 3") && text.contains("1.00"), "{text}");
        assert!(verdict.is_ok());
    }

    #[test]
    fn apis_side_by_side_show_each_figure_with_its_ratio_and_what_failed_as_n_a() {
        let o = loopback("loopback -t write_bw -s 64 --api rust,c,dat2:ofa --rounds 3 --compare");
        let m = |mb_s: f64, mops: f64| Measured { size: 64, mb_s, mops, ..lat(64, 1.0) };
        let apis = [
            Rounds { rows: vec![m(4.0, 0.0625)], measured: 3, failures: Vec::new() },
            Rounds { rows: vec![m(2.0, 0.03125)], measured: 3, failures: Vec::new() },
            Rounds { rows: Vec::new(), measured: 0, failures: vec![(1, "no provider".into())] },
        ];
        let bw = Row::Bandwidth { bytes: 64, iterations: 9, peak: 5.0, avg: 2.0, mpps: 0.03125 };
        let p = Perftest { rows: vec![bw], measured: 3, failures: Vec::new() };
        let t = side_by_side(&o, &apis, Some(&p));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "side by side on rxe0 (medians of 3 rounds; ratio to ib_write_bw):", "{t}");
        assert_eq!(lines[1], "| measure | Rust API | libudat.a | ofa via libdat2 | perftest |", "{t}");
        assert_eq!(lines[2], "| --- | ---: | ---: | ---: | ---: |", "{t}");
        assert_eq!(lines[3], "| write_bw 64 B, MB/s | 4.00 (2.00) | 2.00 (1.00) | n/a | 2.00 |", "{t}");
        assert_eq!(lines[4], "| write_bw 64 B, Mops/s | 0.0625 (2.00) | 0.0312 (1.00) | n/a | 0.0312 |", "{t}");
        assert_eq!(lines.len(), 5, "{t}");
        let alone = side_by_side(&loopback("loopback --api rust,c"), &apis[..2], None);
        assert!(
            alone.starts_with("side by side on rxe0 (one round):\n| measure | Rust API | libudat.a |\n"),
            "{alone}"
        );
        assert!(alone.ends_with("| write_lat 64 B, p50 µs | 0.00100 | 0.00100 |\n"), "{alone}");
    }

    #[test]
    fn udat_s_own_table_prints_no_infinity() {
        let o = loopback("loopback -t write_bw");
        let m = Measured { size: 65536, mb_s: f64::INFINITY, ..lat(65536, 1.0) };
        let t = table(&o, "Rust API", &[m]);
        assert!(t.lines().filter(|l| !l.starts_with("n/a: ")).all(|l| !l.contains("inf")), "{t}");
        assert!(t.contains("n/a: Rust API reported inf as MB/s at 65536 bytes"), "{t}");
        let c = csv(&[("C".into(), &[Measured { mb_s: f64::INFINITY, ..lat(2, 1.0) }])], None);
        assert!(!c.contains("inf") && c.lines().nth(1).unwrap().split(',').nth(9) == Some(""), "{c}");
    }
}
