//! Several rounds of one run reduced to one report: each figure is the
//! median of that figure across the rounds (udat's p50 the median of the
//! rounds' p50s, perftest's bandwidth the median of its bandwidths), so a
//! round disturbed by a noisy machine moves neither side. udat's samples
//! are pooled, for the histogram.

use crate::perftest::Row;
use crate::run::Measured;
use crate::stats::Summary;

/// The median of `values` (the mean of the middle two for an even
/// count); NaN for none, which is never printed as a number.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn median_of<T>(runs: &[T], figure: impl Fn(&T) -> f64) -> f64 {
    median(runs.iter().map(figure).collect())
}

/// An API's rounds, size by size (every round measures the same sizes in
/// the same order).
fn medians(rounds: Vec<Vec<Measured>>) -> Vec<Measured> {
    let sizes = rounds.first().map_or(0, Vec::len);
    (0..sizes).map(|i| merge(rounds.iter().filter_map(|r| r.get(i)).collect())).collect()
}

fn merge(runs: Vec<&Measured>) -> Measured {
    let latency = runs.iter().map(|m| m.latency).collect::<Option<Vec<Summary>>>().map(|l| Summary {
        samples: l.iter().map(|s| s.samples).sum(),
        min: median_of(&l, |s| s.min),
        p50: median_of(&l, |s| s.p50),
        avg: median_of(&l, |s| s.avg),
        p99: median_of(&l, |s| s.p99),
        p999: median_of(&l, |s| s.p999),
        max: median_of(&l, |s| s.max),
    });
    let mut samples: Vec<u64> = runs.iter().flat_map(|m| m.samples.iter().copied()).collect();
    samples.sort_unstable();
    Measured {
        size: runs[0].size,
        iterations: median_of(&runs, |m| m.iterations as f64).round() as u64,
        seconds: median_of(&runs, |m| m.seconds),
        samples,
        latency,
        post_ns: median_of(&runs, |m| m.post_ns),
        poll_ns: median_of(&runs, |m| m.poll_ns),
        mb_s: median_of(&runs, |m| m.mb_s),
        mops: median_of(&runs, |m| m.mops),
    }
}

/// An API over the rounds: the medians of the rounds it measured, and
/// why the others failed.
#[derive(Debug)]
pub struct Rounds {
    pub rows: Vec<Measured>,
    /// Rounds whose figures the medians take.
    pub measured: usize,
    /// (round from 1, what went wrong).
    pub failures: Vec<(usize, String)>,
}

impl Rounds {
    pub fn of(runs: Vec<Result<Vec<Measured>, String>>) -> Rounds {
        let (good, failures) = split(runs);
        Rounds { measured: good.len(), rows: medians(good), failures }
    }
}

/// The rounds that measured, and the others' round (from 1) and reason.
fn split<T>(runs: Vec<Result<T, String>>) -> (Vec<T>, Vec<(usize, String)>) {
    let mut good = Vec::new();
    let mut failures = Vec::new();
    for (round, run) in runs.into_iter().enumerate() {
        match run {
            Ok(rows) => good.push(rows),
            Err(why) => failures.push((round + 1, why)),
        }
    }
    (good, failures)
}

/// perftest over the rounds: the median of the rounds that gave rows,
/// and why the others gave none.
#[derive(Debug)]
pub struct Perftest {
    pub rows: Vec<Row>,
    /// Rounds whose rows the medians take.
    pub measured: usize,
    /// (round from 1, what went wrong).
    pub failures: Vec<(usize, String)>,
}

impl Perftest {
    pub fn of(runs: Vec<Result<Vec<Row>, String>>) -> Perftest {
        let (good, failures) = split(runs);
        Perftest { rows: perftest_rows(&good), measured: good.len(), failures }
    }
}

/// A row per size any round reported, in the order first seen.
fn perftest_rows(rounds: &[Vec<Row>]) -> Vec<Row> {
    let mut sizes: Vec<u32> = Vec::new();
    for row in rounds.iter().flatten() {
        if !sizes.contains(&row.bytes()) {
            sizes.push(row.bytes());
        }
    }
    sizes
        .into_iter()
        .filter_map(|bytes| {
            let runs: Vec<Row> = rounds.iter().flatten().filter(|r| r.bytes() == bytes).copied().collect();
            merge_rows(bytes, &runs)
        })
        .collect()
}

/// One size's rows (all of one kind, as one program reports them).
fn merge_rows(bytes: u32, runs: &[Row]) -> Option<Row> {
    let iterations = |r: &Row| match *r {
        Row::Latency { iterations, .. } | Row::Bandwidth { iterations, .. } => iterations as f64,
    };
    let iterations = median_of(runs, iterations).round() as u64;
    let of = |pick: fn(&Row) -> Option<f64>| median(runs.iter().filter_map(pick).collect());
    match runs.first()? {
        Row::Latency { .. } => Some(Row::Latency {
            bytes,
            iterations,
            min: of(|r| latency_of(r).map(|l| l.0)),
            max: of(|r| latency_of(r).map(|l| l.1)),
            typical: of(|r| latency_of(r).map(|l| l.2)),
            avg: of(|r| latency_of(r).map(|l| l.3)),
            p99: of(|r| latency_of(r).map(|l| l.4)),
            p999: of(|r| latency_of(r).map(|l| l.5)),
        }),
        Row::Bandwidth { .. } => Some(Row::Bandwidth {
            bytes,
            iterations,
            peak: of(|r| bandwidth_of(r).map(|b| b.0)),
            avg: of(|r| bandwidth_of(r).map(|b| b.1)),
            mpps: of(|r| bandwidth_of(r).map(|b| b.2)),
        }),
    }
}

/// A latency row's (min, max, typical, avg, p99, p99.9).
fn latency_of(r: &Row) -> Option<(f64, f64, f64, f64, f64, f64)> {
    match *r {
        Row::Latency { min, max, typical, avg, p99, p999, .. } => Some((min, max, typical, avg, p99, p999)),
        Row::Bandwidth { .. } => None,
    }
}

/// A bandwidth row's (peak, avg, Mpps).
fn bandwidth_of(r: &Row) -> Option<(f64, f64, f64)> {
    match *r {
        Row::Bandwidth { peak, avg, mpps, .. } => Some((peak, avg, mpps)),
        Row::Latency { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lat(p50: f64, samples: Vec<u64>) -> Measured {
        let mut s = samples.clone();
        let latency = Summary::of(&mut s).map(|l| Summary { p50, ..l });
        Measured {
            size: 2,
            iterations: samples.len() as u64,
            seconds: 1.0,
            samples,
            latency,
            post_ns: 10.0,
            poll_ns: 20.0,
            mb_s: p50,
            mops: 1.0,
        }
    }

    #[test]
    fn the_median_takes_the_middle_round() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![f64::INFINITY, 1.0, 2.0]), 2.0, "one wild round does not move it");
        assert!(median(Vec::new()).is_nan());
    }

    #[test]
    fn an_api_s_figures_are_the_median_of_the_rounds_it_measured_and_its_samples_pooled() {
        let rounds = vec![vec![lat(900.0, vec![1, 2])], vec![lat(100.0, vec![3, 4])], vec![lat(200.0, vec![5, 6])]];
        let r = Rounds::of(rounds.into_iter().map(Ok).chain([Err("lost".to_string())]).collect());
        assert_eq!((r.measured, &r.failures[..]), (3, &[(4, "lost".to_string())][..]));
        let m = r.rows;
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].latency.unwrap().p50, 200.0);
        assert_eq!(m[0].mb_s, 200.0);
        assert_eq!((m[0].iterations, m[0].samples.len()), (2, 6));
        assert_eq!(m[0].latency.unwrap().samples, 6);
    }

    #[test]
    fn perftest_s_rounds_are_merged_and_its_failures_kept() {
        let row = |typical| Row::Latency {
            bytes: 2,
            iterations: 100,
            min: 1.0,
            max: 9.0,
            typical,
            avg: typical,
            p99: 8.0,
            p999: 9.0,
        };
        let p = Perftest::of(vec![Ok(vec![row(30.0)]), Err("ib_write_lat failed".into()), Ok(vec![row(10.0)])]);
        assert_eq!((p.measured, p.failures.len(), p.failures[0].0), (2, 1, 2));
        assert_eq!(p.rows, [row(20.0)]);
        let bw = |avg| Row::Bandwidth { bytes: 65536, iterations: 10, peak: avg, avg, mpps: 0.1 };
        let p = Perftest::of(vec![Ok(vec![bw(40.0)]), Ok(vec![bw(50.0)]), Ok(vec![bw(45.0)])]);
        assert_eq!(p.rows, [bw(45.0)]);
        assert!(Perftest::of(vec![Err("missing".into())]).rows.is_empty());
    }
}
