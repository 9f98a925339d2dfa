//! Idempotency keys: the outcome of a keyed write, remembered for a bounded window so that a
//! retried request is answered with the first answer instead of being applied twice (HBase's
//! nonces, HBASE-3787).
//!
//! A key is scoped by the row of the write (a region owns its rows, and a store is one region of
//! one table): the map is keyed by `(row, key)`. The key and the outcome travel in the same log
//! record as the write's effects (FORMAT.md §4.2), so a crash can never keep one without the
//! other; recovery rebuilds this map from the log, and a flush re-logs the live keys into the
//! new log before the manifest points at it.
//!
//! # Invariants
//! 1. At most [`IdempotencyOptions::max_keys`] keys, of about
//!    [`IdempotencyOptions::max_bytes`] bytes in all (rows, keys and outcomes: an append's
//!    outcome holds its new values), are held; the oldest go first.
//! 2. A key older than [`IdempotencyOptions::window`] (by the options' clock) is never answered
//!    from: it is treated as absent and dropped.
//! 3. Entries are kept in the order they were recorded, which is the order they are re-logged.

use crate::log::{LogIdem, LogOutcome};
use crate::model::{Cell, WriteOutcome};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// Longest idempotency key the store accepts, in bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 1024;

/// A wall clock in ms since the epoch (injectable for tests).
pub type MsClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// How long and how many idempotency keys a store remembers.
#[derive(Clone)]
pub struct IdempotencyOptions {
    /// A retry later than this after the first application is applied again. Default 10 min.
    pub window: Duration,
    /// Keys remembered per store (region); beyond it the oldest are forgotten. Default 100,000.
    pub max_keys: usize,
    /// Bytes of rows, keys and outcomes remembered per store; beyond it the oldest keys are
    /// forgotten. Default 64 MiB.
    pub max_bytes: usize,
    /// The clock the window is measured with; `None` = the system clock.
    pub clock: Option<MsClock>,
}

impl Default for IdempotencyOptions {
    fn default() -> Self {
        IdempotencyOptions {
            window: Duration::from_secs(600),
            max_keys: 100_000,
            max_bytes: 64 << 20,
            clock: None,
        }
    }
}

impl std::fmt::Debug for IdempotencyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotencyOptions")
            .field("window", &self.window)
            .field("max_keys", &self.max_keys)
            .field("max_bytes", &self.max_bytes)
            .field("clock", &self.clock.is_some())
            .finish()
    }
}

fn system_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

type ScopedKey = (Vec<u8>, Vec<u8>);

#[derive(Debug)]
struct Entry {
    id: u64,
    at_ms: i64,
    outcome: WriteOutcome,
    /// What the entry accounts for against `max_bytes`.
    bytes: usize,
}

/// Approximate heap bytes of an entry (two copies of the scoped key: map and order).
fn entry_bytes(row: &[u8], key: &[u8], outcome: &WriteOutcome) -> usize {
    let cells = match outcome {
        WriteOutcome::Cells(cells) => cells
            .iter()
            .map(|c| c.family.len() + c.qualifier.len() + c.value.len() + 80)
            .sum(),
        _ => 0,
    };
    2 * (row.len() + key.len()) + cells + 128
}

/// The remembered keys of one store.
#[derive(Debug, Default)]
pub(crate) struct IdempotencyCache {
    opts: IdempotencyOptions,
    map: HashMap<ScopedKey, Entry>,
    /// `(id, key)` in recording order; an id no longer in `map` is stale and skipped.
    order: VecDeque<(u64, ScopedKey)>,
    next_id: u64,
    /// Sum of the entries' `bytes`.
    bytes: usize,
}

impl IdempotencyCache {
    pub(crate) fn new(opts: IdempotencyOptions) -> Self {
        IdempotencyCache {
            opts,
            ..IdempotencyCache::default()
        }
    }

    pub(crate) fn set_options(&mut self, opts: IdempotencyOptions) {
        self.opts = opts;
        self.prune();
    }

    pub(crate) fn now(&self) -> i64 {
        self.opts.clock.as_ref().map_or_else(system_ms, |c| c())
    }

    fn expired(&self, at_ms: i64, now: i64) -> bool {
        let window = i64::try_from(self.opts.window.as_millis()).unwrap_or(i64::MAX);
        now.saturating_sub(at_ms) >= window
    }

    /// Drop expired keys and keys beyond the count bound (oldest first).
    pub(crate) fn prune(&mut self) {
        let now = self.now();
        while let Some((id, key)) = self.order.front() {
            let drop = match self.map.get(key) {
                Some(e) if e.id == *id => {
                    self.map.len() > self.opts.max_keys
                        || self.bytes > self.opts.max_bytes
                        || self.expired(e.at_ms, now)
                }
                _ => true, // stale
            };
            if !drop {
                break;
            }
            let Some((id, key)) = self.order.pop_front() else {
                break;
            };
            if self.map.get(&key).is_some_and(|e| e.id == id) {
                self.remove(&key);
            }
        }
    }

    /// The outcome remembered for `key` on `row`, if it is within the window.
    pub(crate) fn get(&mut self, row: &[u8], key: &[u8]) -> Option<WriteOutcome> {
        let now = self.now();
        let scoped = (row.to_vec(), key.to_vec());
        let e = self.map.get(&scoped)?;
        if self.expired(e.at_ms, now) {
            self.remove(&scoped);
            return None;
        }
        Some(e.outcome.clone())
    }

    /// Remember an outcome (a new write, or one replayed from the log).
    pub(crate) fn insert(&mut self, row: &[u8], key: &[u8], at_ms: i64, outcome: WriteOutcome) {
        if self.opts.max_keys == 0 {
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        let bytes = entry_bytes(row, key, &outcome);
        let scoped = (row.to_vec(), key.to_vec());
        self.order.push_back((id, scoped.clone()));
        self.bytes += bytes;
        let entry = Entry {
            id,
            at_ms,
            outcome,
            bytes,
        };
        if let Some(old) = self.map.insert(scoped, entry) {
            self.bytes -= old.bytes;
        }
        self.prune();
    }

    fn remove(&mut self, key: &ScopedKey) {
        if let Some(e) = self.map.remove(key) {
            self.bytes -= e.bytes;
        }
    }

    /// The live keys as log records' idempotency fields with their rows, oldest first.
    pub(crate) fn live(&mut self) -> Vec<(Vec<u8>, LogIdem)> {
        self.prune();
        let mut out = Vec::with_capacity(self.map.len());
        for (id, key) in &self.order {
            if let Some(e) = self.map.get(key).filter(|e| e.id == *id) {
                out.push((
                    key.0.clone(),
                    LogIdem {
                        key: key.1.clone(),
                        at_ms: e.at_ms,
                        outcome: to_log(&e.outcome),
                    },
                ));
            }
        }
        out
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

pub(crate) fn to_log(o: &WriteOutcome) -> LogOutcome {
    match o {
        WriteOutcome::Mutated => LogOutcome::Mutated,
        WriteOutcome::Checked(b) => LogOutcome::Checked(*b),
        WriteOutcome::Cells(cells) => LogOutcome::Cells(
            cells
                .iter()
                .map(|c| {
                    (
                        c.family.clone(),
                        c.qualifier.clone(),
                        c.timestamp,
                        c.value.clone(),
                    )
                })
                .collect(),
        ),
    }
}

pub(crate) fn from_log(o: &LogOutcome) -> WriteOutcome {
    match o {
        LogOutcome::Mutated => WriteOutcome::Mutated,
        LogOutcome::Checked(b) => WriteOutcome::Checked(*b),
        LogOutcome::Cells(cells) => WriteOutcome::Cells(
            cells
                .iter()
                .map(|(f, q, ts, v)| Cell {
                    family: f.clone(),
                    qualifier: q.clone(),
                    timestamp: *ts,
                    value: v.clone(),
                })
                .collect(),
        ),
    }
}
