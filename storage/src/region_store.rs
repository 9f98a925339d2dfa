//! The region store: one region's log, memtable and segments behind the public operations.
//!
//! (API contract; the implementation fills these bodies.)

use crate::error::Result;
use crate::model::*;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// When an acknowledged write is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// fsync before acknowledging (group commit: one fsync per [`RegionStore::write_batch`]).
    #[default]
    Sync,
    /// Written to the OS before acknowledging; fsync at least every given interval
    /// (driven by [`RegionStore::sync_if_due`]).
    Interval(Duration),
    /// Written to the OS before acknowledging; never fsynced by the write path.
    None,
}

/// What recovery does with a damaged log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Replay up to the first bad frame, truncate the log there, report what was dropped.
    #[default]
    PointInTime,
    /// Refuse to open if damage is found anywhere but a torn last frame.
    Strict,
}

/// How to open a region store.
#[derive(Clone)]
pub struct StoreOptions {
    pub families: Vec<FamilyDescriptor>,
    pub durability: Durability,
    pub recovery: RecoveryMode,
    /// Flush the memtable to a segment once it holds about this many bytes.
    pub memtable_budget: usize,
    /// Rows this store owns; reads skip, and compactions drop, rows for which it is false
    /// (used by region splits). `None` = every row.
    pub owns_row: Option<Arc<dyn Fn(&[u8]) -> bool + Send + Sync>>,
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("families", &self.families)
            .field("durability", &self.durability)
            .field("recovery", &self.recovery)
            .field("memtable_budget", &self.memtable_budget)
            .field("owns_row", &self.owns_row.is_some())
            .finish()
    }
}

impl StoreOptions {
    /// Defaults: `Sync` durability, point-in-time recovery, a 64 MiB memtable.
    pub fn new(families: Vec<FamilyDescriptor>) -> Self {
        StoreOptions {
            families,
            durability: Durability::Sync,
            recovery: RecoveryMode::PointInTime,
            memtable_budget: 64 << 20,
            owns_row: None,
        }
    }
}

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments: usize,
    pub log_records_replayed: u64,
    pub log_bytes_replayed: u64,
    /// Offset at which the log was truncated, if damage was found.
    pub truncated_at: Option<u64>,
    pub bytes_dropped: u64,
    pub duration: Duration,
}

/// Figures for metrics and the console.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionStats {
    pub memtable_bytes: u64,
    pub memtable_cells: u64,
    pub segments: u64,
    pub segment_bytes: u64,
    pub segment_cells: u64,
    pub log_bytes: u64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub compactions: u64,
    pub fsyncs: u64,
    /// Writes acknowledged by those fsyncs (group-commit batch sizes sum).
    pub synced_writes: u64,
    pub poisoned: bool,
}

/// One region's store.
pub struct RegionStore {
    _private: (),
}

impl RegionStore {
    /// Open (creating if absent) the store in `dir`: read the manifest, open the segments,
    /// replay the log tail.
    pub fn open(_dir: &Path, _options: StoreOptions) -> Result<(RegionStore, RecoveryReport)> {
        todo!()
    }
}
