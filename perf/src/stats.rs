//! Latency samples and what is reported of them: percentiles as perftest
//! takes them (the sample at rank ⌈p·n⌉ of the sorted run), and a text
//! histogram over powers of two.

/// A summary of one run's latencies, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub samples: usize,
    pub min: f64,
    pub p50: f64,
    pub avg: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// The sample at fraction `p` of the sorted `sorted` (nearest rank).
fn rank(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[at] as f64
}

impl Summary {
    /// Summarise `samples` (sorted in place). `None` for no samples.
    pub fn of(samples: &mut [u64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let sum: u128 = samples.iter().map(|&s| u128::from(s)).sum();
        Some(Summary {
            samples: samples.len(),
            min: samples[0] as f64,
            p50: rank(samples, 0.50),
            avg: sum as f64 / samples.len() as f64,
            p99: rank(samples, 0.99),
            p999: rank(samples, 0.999),
            max: samples[samples.len() - 1] as f64,
        })
    }
}

/// Lines of a histogram of sorted `samples` (ns): one per power-of-two
/// bucket from the smallest sample's to the largest's, with its count and
/// a bar scaled to `width` characters.
pub fn histogram(sorted: &[u64], width: usize) -> Vec<String> {
    let Some((&first, &last)) = sorted.first().zip(sorted.last()) else { return Vec::new() };
    let bucket = |ns: u64| 64 - ns.max(1).leading_zeros() as usize - 1;
    let (lo, hi) = (bucket(first), bucket(last));
    let mut counts = vec![0usize; hi - lo + 1];
    for &s in sorted {
        counts[bucket(s) - lo] += 1;
    }
    let most = counts.iter().copied().max().unwrap_or(1).max(1);
    counts
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let from = 1u64 << (lo + i);
            let bar = "#".repeat((n * width).div_ceil(most).min(width));
            format!("{:>10.2} – {:>10.2} µs {:>9} {bar}", from as f64 / 1e3, (from * 2) as f64 / 1e3, n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let mut s: Vec<u64> = (1..=1000).rev().collect();
        let m = Summary::of(&mut s).unwrap();
        assert_eq!((m.min, m.p50, m.p99, m.p999, m.max), (1.0, 500.0, 990.0, 999.0, 1000.0));
        assert_eq!(m.avg, 500.5);
        assert_eq!(m.samples, 1000);
        let mut one = [7];
        let m = Summary::of(&mut one).unwrap();
        assert_eq!((m.min, m.p50, m.p999, m.max), (7.0, 7.0, 7.0, 7.0));
        assert!(Summary::of(&mut []).is_none());
    }

    #[test]
    fn the_histogram_has_a_line_per_power_of_two_and_counts_every_sample() {
        let s = [1000, 1500, 2100, 2200, 9000];
        let h = histogram(&s, 10);
        // 1000 and 1500 in [512, 1024) and [1024, 2048); 2100, 2200 in
        // [2048, 4096); 9000 in [8192, 16384): buckets 9 to 13.
        assert_eq!(h.len(), 5);
        let counts: Vec<usize> = h.iter().map(|l| l.split_whitespace().nth(4).unwrap().parse().unwrap()).collect();
        assert_eq!(counts, [1, 1, 2, 0, 1]);
        assert!(h[2].ends_with("##########"), "the fullest bucket has the full bar: {}", h[2]);
        assert!(histogram(&[], 10).is_empty());
    }
}
