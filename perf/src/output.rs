//! What udat-perf prints: a table per run, a histogram on request, the
//! side-by-side table with perftest, and the same figures as JSON or CSV.

use std::fmt::Write as _;

use crate::args::{Options, Test};
use crate::perftest::Row;
use crate::run::Measured;
use crate::stats::histogram;

fn us(ns: f64) -> f64 {
    ns / 1e3
}

/// The results table.
pub fn table(o: &Options, rows: &[Measured]) -> String {
    let mut t = String::new();
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
            if let Some(l) = m.latency {
                let _ = writeln!(
                    t,
                    "{:>8} {:>10} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.0} {:>9.0}",
                    m.size,
                    m.iterations,
                    us(l.min),
                    us(l.p50),
                    us(l.avg),
                    us(l.p99),
                    us(l.p999),
                    us(l.max),
                    m.post_ns,
                    m.poll_ns
                );
            }
        }
    } else {
        let _ = writeln!(
            t,
            "{:>8} {:>10} {:>10} {:>10} {:>9} {:>9}",
            "bytes", "iters", "MB/s", "Mops/s", "post[ns]", "poll[ns]"
        );
        for m in rows {
            let _ = writeln!(
                t,
                "{:>8} {:>10} {:>10.2} {:>10.4} {:>9.0} {:>9.0}",
                m.size, m.iterations, m.mb_s, m.mops, m.post_ns, m.poll_ns
            );
        }
    }
    t
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

/// udat beside perftest, size by size, with the ratio udat / perftest.
pub fn compare(test: Test, udat: &[Measured], perftest: &[Row]) -> String {
    let mut t = String::new();
    if test.is_latency() {
        let _ = writeln!(
            t,
            "{:>8} | {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} | {:>7} {:>7}",
            "bytes", "udat min", "udat p50", "udat avg", "pt min", "pt typ", "pt avg", "p50/typ", "avg/avg"
        );
    } else {
        let _ = writeln!(
            t,
            "{:>8} | {:>12} {:>10} | {:>12} {:>10} | {:>7}",
            "bytes", "udat MB/s", "Mops/s", "pt MB/s", "Mpps", "ratio"
        );
    }
    for m in udat {
        let Some(row) = perftest.iter().find(|r| r.bytes() == m.size) else { continue };
        match (*row, m.latency) {
            (Row::Latency { min, typical, avg, .. }, Some(l)) => {
                let _ = writeln!(
                    t,
                    "{:>8} | {:>10.2} {:>10.2} {:>10.2} | {:>10.2} {:>10.2} {:>10.2} | {:>7.2} {:>7.2}",
                    m.size,
                    us(l.min),
                    us(l.p50),
                    us(l.avg),
                    min,
                    typical,
                    avg,
                    us(l.p50) / typical,
                    us(l.avg) / avg
                );
            }
            (Row::Bandwidth { avg, mpps, .. }, _) => {
                let _ = writeln!(
                    t,
                    "{:>8} | {:>12.2} {:>10.4} | {:>12.2} {:>10.4} | {:>7.2}",
                    m.size,
                    m.mb_s,
                    m.mops,
                    avg,
                    mpps,
                    m.mb_s / avg
                );
            }
            _ => {}
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
        "{{\"tool\": \"udat-perf\", \"test\": \"{}\", \"device\": \"{}\", \"api\": \"{api}\", \"transport\": \"{transport}\", \"udat\": [{}]",
        o.test.name(),
        o.device.replace(['"', '\\'], ""),
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

/// The run as CSV: a row per size and tool.
pub fn csv(udat: &[Measured], perftest: Option<&[Row]>) -> String {
    let mut s =
        String::from("tool,bytes,iterations,min_us,p50_us,avg_us,p99_us,p999_us,max_us,mb_s,mops,post_ns,poll_ns\n");
    for m in udat {
        let l = m.latency;
        let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{:.4}", us(v)));
        let _ = writeln!(
            s,
            "udat,{},{},{},{},{},{},{},{},{:.4},{:.6},{:.1},{:.1}",
            m.size,
            m.iterations,
            f(l.map(|l| l.min)),
            f(l.map(|l| l.p50)),
            f(l.map(|l| l.avg)),
            f(l.map(|l| l.p99)),
            f(l.map(|l| l.p999)),
            f(l.map(|l| l.max)),
            m.mb_s,
            m.mops,
            m.post_ns,
            m.poll_ns
        );
    }
    for r in perftest.unwrap_or_default() {
        let _ = match *r {
            Row::Latency { bytes, iterations, min, max, typical, avg, p99, p999 } => {
                writeln!(s, "perftest,{bytes},{iterations},{min},{typical},{avg},{p99},{p999},{max},,,,")
            }
            Row::Bandwidth { bytes, iterations, avg, mpps, .. } => {
                writeln!(s, "perftest,{bytes},{iterations},,,,,,,{avg},{mpps},,")
            }
        };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

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
        let c = csv(&[lat(2, 2000.0)], Some(&perftest));
        assert_eq!(c.lines().count(), 3);
        assert!(c.lines().all(|l| l.split(',').count() == 13), "{c}");
        let t = compare(Test::WriteLat, &[lat(2, 3000.0)], &perftest);
        assert!(t.lines().nth(1).unwrap().trim_end().ends_with("1.50    1.00"), "{t}");
    }
}
