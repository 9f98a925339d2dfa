//! [`Kura`]: the cloneable handle through which HTTP handlers and applications reach the data.
//!
//! (API contract: signatures fixed; the implementation fills the bodies.)

use crate::catalog::TableDescriptor;
use crate::error::Result;
use kura_storage::model::*;
use kura_storage::{Durability, RecoveryMode, RegionStats};
use std::path::PathBuf;

/// How to start the topology.
#[derive(Clone, Debug)]
pub struct KuraConfig {
    pub data_dir: PathBuf,
    /// Region arbiters (threads); 0 = one per core.
    pub arbiters: usize,
    /// Regions a new table gets unless its descriptor says otherwise.
    pub default_regions: u32,
    pub durability: Durability,
    pub recovery: RecoveryMode,
    /// Memtable budget per region, bytes.
    pub memtable_budget: usize,
    /// Split a region automatically once its data exceeds this many bytes; `None` = never.
    pub split_threshold: Option<u64>,
    /// Region mailbox capacity (requests waiting); a full mailbox answers `Overloaded`.
    pub mailbox_capacity: usize,
}

impl KuraConfig {
    /// Defaults for a data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        KuraConfig {
            data_dir: data_dir.into(),
            arbiters: 0,
            default_regions: 4,
            durability: Durability::Sync,
            recovery: RecoveryMode::PointInTime,
            memtable_budget: 64 << 20,
            split_threshold: Some(1 << 30),
            mailbox_capacity: 1024,
        }
    }
}

/// How `alter_table` treats the families it is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlterMode {
    /// The listed families become the table's families; others are dropped (REST `PUT schema`).
    Replace,
    /// Listed families are added or modified; others are untouched (REST `POST schema`).
    Merge,
}

/// A merged, exact-limit scan request across a table's regions.
#[derive(Clone, Debug)]
pub struct ScanRequest {
    pub spec: ScanSpec,
    /// Rows to return at most (exact, global); `None` = no limit other than `page`.
    pub limit: Option<usize>,
    /// Per-call page bound; the answer's `complete` says whether more rows remain.
    pub page: ScanLimits,
}

/// One region as operators see it.
#[derive(Clone, Debug)]
pub struct RegionInfo {
    pub id: u64,
    pub table: String,
    /// Salt buckets `[start, end)` this region owns.
    pub bucket_start: u32,
    pub bucket_end: u32,
    /// Arbiter (thread) index the region runs on.
    pub arbiter: usize,
    pub stats: RegionStats,
}

/// The handle. Cheap to clone; every method is safe to call concurrently.
#[derive(Clone)]
pub struct Kura {
    _private: (),
}
