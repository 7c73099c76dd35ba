//! Small statistics: median and spread of repeats, a latency histogram, and
//! the search for the highest rate that keeps loss within a bound.

use serde::{Deserialize, Serialize};

/// Median, minimum and maximum of repeated measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread::default();
        }
        v.sort_by(f64::total_cmp);
        Spread {
            median: median_sorted(&v),
            min: v[0],
            max: v[v.len() - 1],
            n: v.len(),
        }
    }
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The `p`-th percentile (0–100) of sorted values, nearest-rank (the
/// reference the histogram's percentiles are tested against).
#[cfg(test)]
pub fn percentile_sorted(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// Sub-buckets per power of two: values are kept to about 3% precision.
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = 64 * SUB;

/// A log-linear histogram of nanosecond values.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum: 0,
            max: 0,
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros(); // >= SUB_BITS
    let shift = msb - SUB_BITS;
    let sub = ((v >> shift) as usize) & (SUB - 1);
    ((shift as usize + 1) << SUB_BITS) | sub
}

/// The middle of a bucket's range of values.
fn bucket_value(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let shift = (b >> SUB_BITS) as u32 - 1;
    let sub = (b & (SUB - 1)) as u64;
    let low = (SUB as u64 + sub) << shift;
    low + ((1u64 << shift) >> 1)
}

impl Histogram {
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v).min(BUCKETS - 1)] += 1;
        self.count += 1;
        self.sum += v as u128;
        self.max = self.max.max(v);
    }

    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `p`-th percentile (0–100), to the histogram's precision.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let want = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return bucket_value(b).min(self.max);
            }
        }
        self.max
    }
}

/// One probe of a rate search.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    pub rate: f64,
    pub ok: bool,
}

/// Finds the highest rate in about `[lo, hi]` for which `ok(rate)` holds:
/// tries `lo` (halving it up to 3 times while it fails), then `hi`, then
/// bisects for at most `steps` more probes, stopping when the bracket is
/// within 2%. Returns the best passing rate (None if none passed) and every
/// probe made.
pub fn search_rate(
    lo: f64,
    hi: f64,
    steps: usize,
    mut ok: impl FnMut(f64) -> bool,
) -> (Option<f64>, Vec<Probe>) {
    let mut probes = Vec::new();
    let mut run = |rate: f64, probes: &mut Vec<Probe>| {
        let pass = ok(rate);
        probes.push(Probe { rate, ok: pass });
        pass
    };
    let mut good = None;
    let mut bad = None;
    let mut r = lo;
    for _ in 0..4 {
        if run(r, &mut probes) {
            good = Some(r);
            break;
        }
        bad = Some(r);
        r /= 2.0;
    }
    let Some(mut good) = good else {
        return (None, probes);
    };
    let mut bad = match bad {
        Some(b) => b,
        None => {
            if run(hi, &mut probes) {
                return (Some(hi), probes);
            }
            hi
        }
    };
    for _ in 0..steps {
        if (bad - good) / bad < 0.02 {
            break;
        }
        let mid = (good + bad) / 2.0;
        if run(mid, &mut probes) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    (Some(good), probes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_percentiles() {
        let s = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 3.0]).median, 2.5);
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile_sorted(&v, 99.0), 99.0);
        assert_eq!(percentile_sorted(&v, 50.0), 50.0);
        assert_eq!(percentile_sorted(&v, 100.0), 100.0);
    }

    #[test]
    fn histogram_is_within_precision() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        assert_eq!(h.count(), 100_000);
        assert!((h.mean() - 500_005.0).abs() < 1.0);
        for (p, exact) in [(50.0, 500_000.0), (99.0, 990_000.0), (99.9, 999_000.0)] {
            let got = h.percentile(p) as f64;
            assert!(
                (got - exact).abs() / exact < 0.035,
                "p{p}: {got} vs {exact}"
            );
        }
        assert_eq!(h.percentile(100.0), 1_000_000);
        // Bucket mapping is monotonic.
        let mut last = 0;
        for v in 0..100_000u64 {
            let b = bucket_of(v);
            assert!(b >= last);
            last = b;
        }
    }

    #[test]
    fn rate_search_finds_threshold() {
        for threshold in [1000.0, 2500.0, 3700.0, 6000.0] {
            let (best, probes) = search_rate(2000.0, 5000.0, 10, |r| r <= threshold);
            assert!(probes.len() <= 15);
            let best = best.unwrap();
            assert!(best <= threshold);
            if threshold < 5000.0 {
                assert!(best >= threshold * 0.97, "{threshold}: {best}");
            } else {
                assert_eq!(best, 5000.0);
            }
        }
        let (none, probes) = search_rate(2000.0, 5000.0, 10, |_| false);
        assert!(none.is_none());
        assert_eq!(probes.len(), 4);
    }
}
