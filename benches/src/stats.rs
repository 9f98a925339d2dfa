//! Latency and throughput bookkeeping: HdrHistograms per operation kind, errors by status,
//! and a per-second timeline for the chart.
//!
//! # Invariants
//! 1. Latencies are recorded in microseconds, clamped to `1..=MAX_LATENCY_US`, so a stall
//!    longer than the histogram range still lands in the top bucket instead of being dropped.
//! 2. In open-loop mode the latency of an operation is measured from its *intended* start
//!    time, not from when a worker got around to sending it (no coordinated omission).
//! 3. Every operation is counted exactly once in `ops`, in the overall histogram, in its kind's
//!    histogram and in one timeline second; merging recorders adds counts and never loses any.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Upper bound of the histograms: one hour in microseconds.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;

fn new_hist(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, sigfig)
        .expect("static histogram bounds are valid")
}

/// How one operation ended, as seen by the recorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The expected answer arrived.
    Ok,
    /// An unexpected HTTP status.
    Status(u16),
    /// No HTTP answer: a transport error.
    Transport,
    /// No HTTP answer in time.
    Timeout,
    /// A well-formed answer whose content broke an invariant (counted as an error).
    Invalid,
}

impl Outcome {
    /// The key under which an error is counted, or `None` for success.
    pub fn error_key(self) -> Option<String> {
        match self {
            Outcome::Ok => None,
            Outcome::Status(s) => Some(s.to_string()),
            Outcome::Transport => Some("transport".into()),
            Outcome::Timeout => Some("timeout".into()),
            Outcome::Invalid => Some("invalid".into()),
        }
    }
}

/// Retries of check-and-put loops (read, compare-and-set, re-read on a 304): one loop is one
/// operation, each 304 before its end a conflict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CasStats {
    /// Loops that ended with their write applied.
    pub successes: u64,
    /// Retries summed over the successful loops (304s each met before its 200).
    pub retries_of_successes: u64,
    /// Most retries one successful loop needed.
    pub max_retries: u64,
    /// Every 304 met, including those of loops that gave up.
    pub conflicts: u64,
    /// Loops that met their retry bound without a 200.
    pub gave_up: u64,
}

impl CasStats {
    /// One conflict (a 304) met by a loop.
    pub fn conflict(&mut self) {
        self.conflicts += 1;
    }

    /// A loop ended: applied after `retries` conflicts, or gave up.
    pub fn finished(&mut self, retries: u64, applied: bool) {
        if applied {
            self.successes += 1;
            self.retries_of_successes += retries;
            self.max_retries = self.max_retries.max(retries);
        } else {
            self.gave_up += 1;
        }
    }

    fn merge(&mut self, o: &CasStats) {
        self.successes += o.successes;
        self.retries_of_successes += o.retries_of_successes;
        self.max_retries = self.max_retries.max(o.max_retries);
        self.conflicts += o.conflicts;
        self.gave_up += o.gave_up;
    }

    /// `None` when no loop ran.
    pub fn summary(&self) -> Option<CasSummary> {
        if self.successes + self.gave_up == 0 && self.conflicts == 0 {
            return None;
        }
        Some(CasSummary {
            successes: self.successes,
            mean_retries: if self.successes > 0 {
                self.retries_of_successes as f64 / self.successes as f64
            } else {
                0.0
            },
            max_retries: self.max_retries,
            conflicts: self.conflicts,
            gave_up: self.gave_up,
        })
    }
}

/// Check-and-put retries of a phase, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CasSummary {
    /// Successful compare-and-set loops.
    pub successes: u64,
    /// Mean retries (304s) per successful loop.
    pub mean_retries: f64,
    /// Most retries one successful loop needed.
    pub max_retries: u64,
    /// Every 304 met.
    pub conflicts: u64,
    /// Loops that gave up at the retry bound.
    pub gave_up: u64,
}

/// One second of the timeline.
#[derive(Debug, Clone)]
pub struct Second {
    /// Operations completed in this second.
    pub ops: u64,
    /// Of which errors.
    pub errors: u64,
    /// Rows returned by scans in this second.
    pub rows: u64,
    /// Latency histogram of this second (2 significant figures).
    pub hist: Histogram<u64>,
}

impl Second {
    fn new() -> Second {
        Second {
            ops: 0,
            errors: 0,
            rows: 0,
            hist: new_hist(2),
        }
    }
}

/// Per-worker (and, after merging, per-phase) bookkeeping.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// All operations.
    pub all: Histogram<u64>,
    /// Per operation kind (`read`, `update`, `scan`, ...).
    pub kinds: BTreeMap<&'static str, Histogram<u64>>,
    /// Error counts keyed by status code or `transport`/`timeout`/`invalid`.
    pub errors: BTreeMap<String, u64>,
    /// Operations recorded.
    pub ops: u64,
    /// Rows returned (scans, multi-gets, paged reads).
    pub rows: u64,
    /// Named counters a workload keeps (CAS misses, 409s on re-create, ...).
    pub counters: BTreeMap<&'static str, u64>,
    /// Retries of the workload's check-and-put loops (empty unless it runs some).
    pub cas: CasStats,
    /// Index = whole seconds since the phase started.
    pub timeline: Vec<Second>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Recorder {
        Recorder {
            all: new_hist(3),
            kinds: BTreeMap::new(),
            errors: BTreeMap::new(),
            ops: 0,
            rows: 0,
            counters: BTreeMap::new(),
            cas: CasStats::default(),
            timeline: Vec::new(),
        }
    }

    /// Record one operation of `kind` that took `latency` and completed `at` after the start.
    pub fn record(
        &mut self,
        kind: &'static str,
        latency: Duration,
        at: Duration,
        outcome: Outcome,
        rows: u64,
    ) {
        let us = (latency.as_micros() as u64).clamp(1, MAX_LATENCY_US);
        self.all.saturating_record(us);
        self.kinds
            .entry(kind)
            .or_insert_with(|| new_hist(3))
            .saturating_record(us);
        self.ops += 1;
        self.rows += rows;
        let sec = at.as_secs() as usize;
        while self.timeline.len() <= sec {
            self.timeline.push(Second::new());
        }
        let s = &mut self.timeline[sec];
        s.ops += 1;
        s.rows += rows;
        s.hist.saturating_record(us);
        if let Some(k) = outcome.error_key() {
            *self.errors.entry(k).or_insert(0) += 1;
            s.errors += 1;
        }
    }

    /// Add `n` to a named workload counter.
    pub fn count(&mut self, name: &'static str, n: u64) {
        *self.counters.entry(name).or_insert(0) += n;
    }

    /// Total errors.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Fold `other` into `self`.
    pub fn merge(&mut self, other: &Recorder) {
        // Both histograms share bounds, so `add` cannot fail.
        let _ = self.all.add(&other.all);
        for (k, h) in &other.kinds {
            let _ = self.kinds.entry(k).or_insert_with(|| new_hist(3)).add(h);
        }
        for (k, n) in &other.errors {
            *self.errors.entry(k.clone()).or_insert(0) += n;
        }
        for (k, n) in &other.counters {
            *self.counters.entry(k).or_insert(0) += n;
        }
        self.cas.merge(&other.cas);
        self.ops += other.ops;
        self.rows += other.rows;
        while self.timeline.len() < other.timeline.len() {
            self.timeline.push(Second::new());
        }
        for (mine, theirs) in self.timeline.iter_mut().zip(&other.timeline) {
            mine.ops += theirs.ops;
            mine.errors += theirs.errors;
            mine.rows += theirs.rows;
            let _ = mine.hist.add(&theirs.hist);
        }
    }

    /// The summary of this recorder over a phase that lasted `elapsed`.
    pub fn summary(&self, elapsed: Duration) -> Summary {
        let secs = elapsed.as_secs_f64().max(1e-9);
        Summary {
            ops: self.ops,
            errors: self.error_count(),
            errors_by_status: self.errors.clone(),
            elapsed_s: elapsed.as_secs_f64(),
            throughput: self.ops as f64 / secs,
            ok_throughput: (self.ops - self.error_count()) as f64 / secs,
            rows: self.rows,
            rows_per_s: self.rows as f64 / secs,
            latency: Latency::of(&self.all),
            kinds: self
                .kinds
                .iter()
                .map(|(k, h)| {
                    (
                        k.to_string(),
                        KindSummary {
                            ops: h.len(),
                            latency: Latency::of(h),
                        },
                    )
                })
                .collect(),
            counters: self
                .counters
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            cas: self.cas.summary(),
            timeline: self
                .timeline
                .iter()
                .enumerate()
                .map(|(i, s)| TimelinePoint {
                    second: i as u64,
                    ops: s.ops,
                    errors: s.errors,
                    rows: s.rows,
                    p50_us: if s.ops > 0 {
                        s.hist.value_at_quantile(0.5)
                    } else {
                        0
                    },
                    p99_us: if s.ops > 0 {
                        s.hist.value_at_quantile(0.99)
                    } else {
                        0
                    },
                    max_us: s.hist.max(),
                })
                .collect(),
        }
    }
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Latency {
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest recorded.
    pub max_us: u64,
    /// Arithmetic mean.
    pub mean_us: f64,
}

impl Latency {
    /// Percentiles of `h` (all zero when empty).
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            mean_us: h.mean(),
        }
    }
}

/// Summary of one operation kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindSummary {
    /// Operations of this kind.
    pub ops: u64,
    /// Their latency.
    pub latency: Latency,
}

/// One second of the timeline, as serialized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// Seconds since the phase began.
    pub second: u64,
    /// Operations completed in this second.
    pub ops: u64,
    /// Errors in this second.
    pub errors: u64,
    /// Rows returned in this second.
    pub rows: u64,
    /// Median latency in this second.
    pub p50_us: u64,
    /// 99th percentile latency in this second.
    pub p99_us: u64,
    /// Worst latency in this second.
    pub max_us: u64,
}

/// Everything measured in one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Operations recorded (successful or not).
    pub ops: u64,
    /// Failed operations.
    pub errors: u64,
    /// Failed operations by HTTP status or failure kind.
    pub errors_by_status: BTreeMap<String, u64>,
    /// Wall-clock length of the phase.
    pub elapsed_s: f64,
    /// Operations per second.
    pub throughput: f64,
    /// Successful operations per second.
    pub ok_throughput: f64,
    /// Rows returned (scans, multi-gets, list pages).
    pub rows: u64,
    /// Rows returned per second.
    pub rows_per_s: f64,
    /// Latency over all operations.
    pub latency: Latency,
    /// Latency per operation kind.
    pub kinds: BTreeMap<String, KindSummary>,
    /// Workload counters (CAS misses, conflicts, ...).
    pub counters: BTreeMap<String, u64>,
    /// Retries of the workload's check-and-put loops, when it runs any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cas: Option<CasSummary>,
    /// Per-second throughput and latency.
    pub timeline: Vec<TimelinePoint>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn percentiles_come_from_recorded_latencies() {
        let mut r = Recorder::new();
        for i in 1..=1000u64 {
            r.record("read", Duration::from_micros(i), ms(0), Outcome::Ok, 0);
        }
        let s = r.summary(Duration::from_secs(1));
        assert_eq!(s.ops, 1000);
        assert!((499..=501).contains(&s.latency.p50_us), "{:?}", s.latency);
        assert!((989..=991).contains(&s.latency.p99_us), "{:?}", s.latency);
        assert_eq!(s.latency.max_us, 1000);
        assert!((s.throughput - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn errors_are_counted_by_status_and_in_the_timeline() {
        let mut r = Recorder::new();
        r.record("get", ms(1), ms(100), Outcome::Ok, 0);
        r.record("get", ms(1), ms(1100), Outcome::Status(404), 0);
        r.record("get", ms(1), ms(1200), Outcome::Status(404), 0);
        r.record("put", ms(1), ms(2500), Outcome::Timeout, 0);
        let s = r.summary(Duration::from_secs(3));
        assert_eq!(s.errors, 3);
        assert_eq!(s.errors_by_status.get("404"), Some(&2));
        assert_eq!(s.errors_by_status.get("timeout"), Some(&1));
        let per_sec: Vec<(u64, u64)> = s.timeline.iter().map(|p| (p.ops, p.errors)).collect();
        assert_eq!(per_sec, vec![(1, 0), (2, 2), (1, 1)]);
        assert_eq!(s.kinds["get"].ops, 3);
        assert_eq!(s.kinds["put"].ops, 1);
    }

    #[test]
    fn cas_retries_merge_as_sums_and_a_maximum() {
        let mut a = Recorder::new();
        a.cas.conflict();
        a.cas.conflict();
        a.cas.finished(2, true);
        a.cas.finished(0, true);
        let mut b = Recorder::new();
        for _ in 0..5 {
            b.cas.conflict();
        }
        b.cas.finished(5, false);
        b.cas.finished(0, true);
        a.merge(&b);
        let s = a.summary(Duration::from_secs(1)).cas.expect("cas ran");
        assert_eq!(s.successes, 3);
        assert_eq!(s.conflicts, 7);
        assert_eq!(s.max_retries, 2);
        assert_eq!(s.gave_up, 1);
        assert!((s.mean_retries - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(Recorder::new().summary(Duration::from_secs(1)).cas, None);
    }

    #[test]
    fn merging_workers_loses_no_operation() {
        let mut a = Recorder::new();
        let mut b = Recorder::new();
        for i in 0..100 {
            a.record("scan", ms(2), ms(i * 10), Outcome::Ok, 10);
        }
        for i in 0..50 {
            b.record("scan", ms(4), ms(i * 50), Outcome::Transport, 0);
        }
        b.count("cas_miss", 3);
        a.merge(&b);
        assert_eq!(a.ops, 150);
        assert_eq!(a.rows, 1000);
        assert_eq!(a.all.len(), 150);
        assert_eq!(a.kinds["scan"].len(), 150);
        assert_eq!(a.errors["transport"], 50);
        assert_eq!(a.counters["cas_miss"], 3);
        assert_eq!(a.timeline.iter().map(|s| s.ops).sum::<u64>(), 150);
        assert_eq!(a.timeline.len(), 3);
    }

    #[test]
    fn stalls_beyond_the_range_land_in_the_top_bucket() {
        let mut r = Recorder::new();
        r.record("get", Duration::from_secs(7200), ms(0), Outcome::Ok, 0);
        r.record("get", Duration::ZERO, ms(0), Outcome::Ok, 0);
        assert_eq!(r.all.len(), 2);
        assert!(r.all.max() >= MAX_LATENCY_US - MAX_LATENCY_US / 1000);
        assert_eq!(r.all.min(), 1);
    }

    #[test]
    fn summary_round_trips_through_json() {
        let mut r = Recorder::new();
        r.record("read", ms(3), ms(10), Outcome::Ok, 5);
        r.record("update", ms(7), ms(1500), Outcome::Status(503), 0);
        let s = r.summary(Duration::from_secs(2));
        let text = serde_json::to_string(&s).expect("serialize");
        let back: Summary = serde_json::from_str(&text).expect("deserialize");
        assert_eq!(back, s);
        let v: serde_json::Value = serde_json::from_str(&text).expect("value");
        assert_eq!(v["errors_by_status"]["503"], 1);
        assert_eq!(v["kinds"]["read"]["ops"], 1);
        assert!(v["latency"]["p99_us"].as_u64().unwrap_or(0) >= 3000);
    }
}
