//! Recovery figures per fault, from the clients' histories: how long the
//! cluster took to serve again after each fault, and to serve at full
//! throughput again.
//!
//! For a fault beginning at `start` and healed (every data node started)
//! at `healed`, with the baseline the clients' successful operations per
//! second in the 5 s before it:
//! - *first ok*: from `start` to the first successful operation invoked
//!   after it;
//! - *longest gap*: the longest time between `start` and `healed` with
//!   no successful operation completing;
//! - *full throughput*: from `start` to the end of the last 100 ms
//!   whose trailing second ran under 90% of the baseline, looking until
//!   5 s after `healed` (or the next fault); 0 when it never did;
//! - *during*: the successful operations per second from `start` to
//!   `healed`, over the baseline (how much a node restart costs).

use crate::nemesis::{Kind, Window};
use std::collections::BTreeMap;

const BUCKET_NS: u64 = 100_000_000;

/// One fault's figures (ms; `during` a ratio).
#[derive(Clone, Debug, PartialEq)]
pub struct Recovery {
    pub kind: Kind,
    pub first_ok_ms: f64,
    pub longest_gap_ms: f64,
    pub full_throughput_ms: f64,
    pub during: f64,
}

/// Min, median and max of a figure over the faults of one kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Spread {
            min: *sorted.first()?,
            median: sorted[sorted.len() / 2],
            max: *sorted.last()?,
        })
    }
}

/// The figures of each window, from the successful operations' (call,
/// completion) times.
pub fn measure(windows: &[Window], ok_ops: &[(u64, u64)]) -> Vec<Recovery> {
    let mut completions: Vec<u64> = ok_ops.iter().map(|&(_, ret)| ret).collect();
    completions.sort_unstable();
    let last = completions.last().copied().unwrap_or(0);
    let mut buckets = vec![0u64; (last / BUCKET_NS + 1) as usize];
    for &ret in &completions {
        buckets[(ret / BUCKET_NS) as usize] += 1;
    }
    let rate = |from: u64, to: u64| {
        let (first, end) = (
            (from / BUCKET_NS) as usize,
            ((to / BUCKET_NS) as usize).min(buckets.len()),
        );
        if end <= first {
            return 0.0;
        }
        buckets[first..end].iter().sum::<u64>() as f64 / ((end - first) as f64 * 0.1)
    };
    let mut figures = Vec::new();
    for (index, window) in windows.iter().enumerate() {
        let Some(healed) = window.healed else {
            continue;
        };
        let baseline = rate(window.start.saturating_sub(5_000_000_000), window.start);
        let first_ok = ok_ops
            .iter()
            .filter(|&&(call, _)| call >= window.start)
            .map(|&(_, ret)| ret)
            .min()
            .map_or(f64::NAN, |ret| (ret - window.start) as f64 / 1e6);
        let mut longest_gap = 0u64;
        let mut previous = window.start;
        let from = completions.partition_point(|&ret| ret < window.start);
        for &ret in completions[from..].iter().take_while(|&&ret| ret <= healed) {
            longest_gap = longest_gap.max(ret - previous);
            previous = ret;
        }
        longest_gap = longest_gap.max(healed.saturating_sub(previous));
        let horizon = windows
            .get(index + 1)
            .map_or(healed + 5_000_000_000, |next| next.start)
            .min(healed + 5_000_000_000)
            .min(last);
        let mut full = 0u64;
        let mut bucket_end = window.start / BUCKET_NS * BUCKET_NS + BUCKET_NS;
        while bucket_end <= horizon {
            if rate(bucket_end.saturating_sub(1_000_000_000), bucket_end) < 0.9 * baseline {
                full = bucket_end - window.start;
            }
            bucket_end += BUCKET_NS;
        }
        let during = if baseline > 0.0 {
            rate(window.start, healed.max(window.start + BUCKET_NS)) / baseline
        } else {
            f64::NAN
        };
        figures.push(Recovery {
            kind: window.fault.kind(),
            first_ok_ms: first_ok,
            longest_gap_ms: longest_gap as f64 / 1e6,
            full_throughput_ms: full as f64 / 1e6,
            during,
        });
    }
    figures
}

/// Per kind: (faults, first ok, longest gap, full throughput, during).
pub type Summary = BTreeMap<Kind, (usize, Spread, Spread, Spread, Spread)>;

pub fn summarize(figures: &[Recovery]) -> Summary {
    let mut by_kind: BTreeMap<Kind, Vec<&Recovery>> = BTreeMap::new();
    for figure in figures {
        by_kind.entry(figure.kind).or_default().push(figure);
    }
    by_kind
        .into_iter()
        .map(|(kind, figures)| {
            let spread = |pick: fn(&Recovery) -> f64| {
                let values: Vec<f64> = figures
                    .iter()
                    .map(|figure| pick(figure))
                    .filter(|value| value.is_finite())
                    .collect();
                Spread::of(&values).unwrap_or(Spread {
                    min: f64::NAN,
                    median: f64::NAN,
                    max: f64::NAN,
                })
            };
            (
                kind,
                (
                    figures.len(),
                    spread(|figure| figure.first_ok_ms),
                    spread(|figure| figure.longest_gap_ms),
                    spread(|figure| figure.full_throughput_ms),
                    spread(|figure| figure.during),
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::Fault;

    #[test]
    fn an_outage_shows_as_a_gap_and_a_late_return_to_full_throughput() {
        // 100 operations a second for 20 s, none from 10 s to 12 s.
        let ms = 1_000_000u64;
        let ops: Vec<(u64, u64)> = (0..2000u64)
            .map(|index| index * 10 * ms)
            .filter(|&at| !(10_000 * ms..12_000 * ms).contains(&at))
            .map(|at| (at, at + ms))
            .collect();
        let window = Window {
            fault: Fault::Kill { node: 2 },
            start: 10_000 * ms,
            end: 10_000 * ms,
            healed: Some(13_000 * ms),
        };
        let figures = measure(&[window], &ops);
        let figure = &figures[0];
        assert!((figure.first_ok_ms - 2_001.0).abs() < 1.0, "{figure:?}");
        assert!((figure.longest_gap_ms - 2_001.0).abs() < 1.0, "{figure:?}");
        // The trailing second is short until 1 s after the outage.
        assert!(
            (figure.full_throughput_ms - 2_900.0).abs() < 150.0,
            "{figure:?}"
        );
        assert!(figure.during < 0.5, "{figure:?}");
    }
}
