//! The key heatmap: reads and writes per salt bucket over the last minutes, in the spirit of
//! Bigtable's Key Visualizer.
//!
//! One sampler per server ([`AppState::heatmap`]) polls
//! [`kura_backend::Backend::bucket_activity`] for every table every [`INTERVAL`] and keeps the per-bucket deltas of the last [`CAPACITY`] intervals in
//! a ring buffer. It starts lazily, on the first `/admin/` or `/ui/` request, as a task on the
//! arbiter that served that request.
//!
//! # Invariants
//! 1. Memory is bounded: at most [`CAPACITY`] samples per table, each `2 × buckets` `u32`s.
//! 2. A sample holds the activity of exactly one interval; the answer's last column is the
//!    partial interval from the last sample to the request (marked `partial_last`).
//! 3. A table's first observation is a baseline, never a sample: activity from before the
//!    sampler saw the table is not attributed to any interval.
//! 4. Cumulative counters that go backwards (a region reopened) restart the baseline for that
//!    table; no negative or wrapped delta is ever recorded.
//! 5. At most one live sampling task per server: the sampler holds a weak token of the running
//!    task and starts a new one only when that task is gone (its arbiter stopped); the task holds
//!    the sampler weakly and ends once the server's state is gone.
//! 6. On a backend without salt buckets (Bigtable) there is nothing to sample: every table's
//!    `bucket_activity` is `None` and the matrix answers as for an unknown table.

use crate::state::AppState;
use kura_backend::Store;
use parking_lot::Mutex;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Time between samples.
pub const INTERVAL: Duration = Duration::from_secs(5);
/// Samples kept per table (10 minutes at 5 s).
pub const CAPACITY: usize = 120;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

struct Sample {
    /// End of the interval, ms since the epoch.
    at_ms: i64,
    reads: Vec<u32>,
    writes: Vec<u32>,
}

struct TableSeries {
    baseline: Vec<(u64, u64)>,
    baseline_at_ms: i64,
    samples: VecDeque<Sample>,
}

impl TableSeries {
    fn new(current: Vec<(u64, u64)>, at_ms: i64) -> Self {
        TableSeries {
            baseline: current,
            baseline_at_ms: at_ms,
            samples: VecDeque::new(),
        }
    }

    /// Deltas from the baseline to `current`, or `None` if the counters cannot be compared
    /// (bucket count changed, or a counter went backwards).
    fn deltas(&self, current: &[(u64, u64)]) -> Option<(Vec<u32>, Vec<u32>)> {
        if current.len() != self.baseline.len() {
            return None;
        }
        let mut reads = Vec::with_capacity(current.len());
        let mut writes = Vec::with_capacity(current.len());
        for (now, then) in current.iter().zip(&self.baseline) {
            if now.0 < then.0 || now.1 < then.1 {
                return None;
            }
            reads.push(u32::try_from(now.0 - then.0).unwrap_or(u32::MAX));
            writes.push(u32::try_from(now.1 - then.1).unwrap_or(u32::MAX));
        }
        Some((reads, writes))
    }
}

/// The sampled series of one store.
#[derive(Default)]
pub struct Sampler {
    tables: Mutex<HashMap<String, TableSeries>>,
    task: Mutex<Weak<()>>,
}

impl Sampler {
    /// Takes one sample of every table (a baseline for tables seen for the first time) and
    /// forgets tables that no longer exist.
    pub async fn sample(&self, kura: &Store) {
        let at = now_ms();
        // A backend that cannot list its tables now keeps the series it has until next time.
        let Ok(listed) = kura.list_tables().await else {
            return;
        };
        let names: Vec<String> = listed.into_iter().map(|t| t.name).collect();
        let mut tables = self.tables.lock();
        tables.retain(|name, _| names.contains(name));
        for name in names {
            let Some(current) = kura.bucket_activity(&name) else {
                continue;
            };
            match tables.get_mut(&name) {
                None => {
                    tables.insert(name, TableSeries::new(current, at));
                }
                Some(series) => {
                    if let Some((reads, writes)) = series.deltas(&current) {
                        if series.samples.len() == CAPACITY {
                            series.samples.pop_front();
                        }
                        series.samples.push_back(Sample {
                            at_ms: at,
                            reads,
                            writes,
                        });
                    } else {
                        series.samples.clear();
                    }
                    series.baseline = current;
                    series.baseline_at_ms = at;
                }
            }
        }
    }

    /// The matrix for one table (time × bucket), with the partial current interval last.
    /// `None` if the table does not exist.
    pub async fn matrix(&self, kura: &Store, table: &str) -> Option<HeatmapMatrix> {
        let desc = kura.table(table).await.ok()??;
        let current = kura.bucket_activity(table)?;
        let at = now_ms();
        let mut tables = self.tables.lock();
        let series = tables
            .entry(table.to_string())
            .or_insert_with(|| TableSeries::new(current.clone(), at));
        let mut m = HeatmapMatrix {
            table: table.to_string(),
            buckets: desc.salt.buckets,
            interval_ms: INTERVAL.as_millis() as u64,
            capacity: CAPACITY,
            times: Vec::with_capacity(series.samples.len() + 1),
            starts: Vec::with_capacity(series.samples.len() + 1),
            reads: Vec::with_capacity(series.samples.len() + 1),
            writes: Vec::with_capacity(series.samples.len() + 1),
            partial_last: true,
            max_reads: 0,
            max_writes: 0,
        };
        let mut start = series.samples.front().map_or(series.baseline_at_ms, |s| {
            s.at_ms - INTERVAL.as_millis() as i64
        });
        for s in &series.samples {
            m.starts.push(start);
            m.times.push(s.at_ms);
            m.reads.push(s.reads.clone());
            m.writes.push(s.writes.clone());
            start = s.at_ms;
        }
        let (reads, writes) = series
            .deltas(&current)
            .unwrap_or_else(|| (vec![0; current.len()], vec![0; current.len()]));
        m.starts.push(series.baseline_at_ms);
        m.times.push(at);
        m.reads.push(reads);
        m.writes.push(writes);
        m.max_reads = m.reads.iter().flatten().copied().max().unwrap_or(0);
        m.max_writes = m.writes.iter().flatten().copied().max().unwrap_or(0);
        Some(m)
    }
}

/// What `GET /admin/tables/{t}/heatmap` answers.
#[derive(Debug, Serialize)]
pub struct HeatmapMatrix {
    pub table: String,
    /// Salt buckets: the length of every inner vector.
    pub buckets: u32,
    pub interval_ms: u64,
    /// Most columns ever returned (plus the partial one).
    pub capacity: usize,
    /// End of each column's interval, ms since the epoch; oldest first.
    pub times: Vec<i64>,
    /// Start of each column's interval.
    pub starts: Vec<i64>,
    /// `reads[time][bucket]`: read operations in that interval.
    pub reads: Vec<Vec<u32>>,
    /// `writes[time][bucket]`: write operations in that interval.
    pub writes: Vec<Vec<u32>>,
    /// The last column covers the interval still in progress.
    pub partial_last: bool,
    pub max_reads: u32,
    pub max_writes: u32,
}

/// The sampler of this server's store ([`AppState::heatmap`]), started if it is not running.
/// Must be called on an actix runtime (any handler is). The first baseline is taken before
/// this returns.
pub async fn sampler(state: &AppState) -> Arc<Sampler> {
    let sampler = state.heatmap.clone();
    let kura = &state.kura;
    let token = {
        let mut task = sampler.task.lock();
        if task.upgrade().is_some() {
            None
        } else {
            let token = Arc::new(());
            *task = Arc::downgrade(&token);
            Some(token)
        }
    };
    if let Some(token) = token {
        sampler.sample(kura).await;
        // The task holds the sampler weakly: it stops once the server's state is gone.
        let weak = Arc::downgrade(&sampler);
        let kura = kura.clone();
        actix_rt::spawn(async move {
            let _token = token;
            let mut tick =
                actix_rt::time::interval_at(actix_rt::time::Instant::now() + INTERVAL, INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(s) = weak.upgrade() else {
                    return;
                };
                s.sample(&kura).await;
            }
        });
    }
    sampler
}
