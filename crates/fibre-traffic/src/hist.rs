//! A latency histogram with a fixed number of buckets, allocated once: exact below
//! [`LINEAR`] nanoseconds, then [`SUB`] buckets per power of two, so any recorded value is
//! known within 1/[`SUB`] (3%) of itself; recording is a few instructions and never
//! allocates. Quantiles answer the upper edge of the bucket they fall in (never below the
//! true value).

/// Values below this are counted exactly.
const LINEAR: u64 = 64;
/// Buckets per power of two above [`LINEAR`].
const SUB: u64 = 32;
/// Powers of two from LINEAR (2^6) to 2^64.
const BUCKETS: usize = (LINEAR + (64 - 6) * SUB) as usize;

pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            max: 0,
        }
    }
}

fn index(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let e = 63 - u64::from(v.leading_zeros()); // 6..=63
    let sub = (v >> (e - 5)) & (SUB - 1);
    (LINEAR + (e - 6) * SUB + sub) as usize
}

/// The largest value of bucket `i`.
fn upper(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR {
        return i;
    }
    let e = (i - LINEAR) / SUB + 6;
    let sub = (i - LINEAR) % SUB;
    let low = (1u64 << e) | (sub << (e - 5));
    low + ((1u64 << (e - 5)) - 1)
}

impl Histogram {
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0..=1), within a bucket's width above; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return upper(i).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range_and_hold_their_values() {
        let mut prev = None;
        for i in 0..BUCKETS {
            let u = upper(i);
            if let Some(p) = prev {
                assert_eq!(index(p + 1), i, "bucket {i} starts after {p}");
            }
            assert_eq!(index(u), i);
            prev = Some(u);
        }
        assert_eq!(prev, Some(u64::MAX));
    }

    #[test]
    fn quantiles_are_close_above_the_truth() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        for (q, truth) in [(0.5, 500_000u64), (0.99, 990_000), (0.999, 999_000)] {
            let got = h.quantile(q);
            assert!(
                got >= truth && got as f64 <= truth as f64 * 1.04,
                "{q}: {got}"
            );
        }
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert_eq!(h.max(), 1_000_000);
        assert_eq!(h.count(), 100_000);
        assert_eq!(Histogram::default().quantile(0.5), 0);
    }
}
