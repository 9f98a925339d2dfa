//! Tables as users declare them, and regions as operators see them.
//!
//! A [`TableDescriptor`] is what `PUT /{table}/schema` declares and every backend stores: the
//! families with their HBase settings, the salting of row keys, and the attributes the server
//! echoes back without interpreting. [`RegionInfo`] and [`RegionStats`] are what a backend
//! reports of the places the table's data lives in.

use crate::error::{Error, Result};
use crate::model::{FamilyDescriptor, ScanLimits, ScanSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a table's row keys map to salt buckets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaltConfig {
    /// Number of salt buckets (fixed at creation). Regions own contiguous bucket ranges.
    pub buckets: u32,
    /// Hash only the first `prefix_len` bytes of the row key (rows sharing that prefix live in
    /// one region); `None` hashes the whole key.
    pub prefix_len: Option<u32>,
}

impl Default for SaltConfig {
    fn default() -> Self {
        SaltConfig {
            buckets: 256,
            prefix_len: None,
        }
    }
}

/// A table as users declare it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableDescriptor {
    pub name: String,
    pub families: Vec<FamilyDescriptor>,
    pub salt: SaltConfig,
    /// Regions created with the table (buckets split evenly); `None` = the server default.
    pub initial_regions: Option<u32>,
    /// Table attributes the server does not interpret, echoed back in the schema.
    pub attributes: BTreeMap<String, String>,
    /// Per-family attributes the server does not interpret, keyed by family name.
    pub family_attributes: BTreeMap<String, BTreeMap<String, String>>,
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
    /// Row keys `[start, end)` the region holds (empty = open), where regions partition the
    /// table by key range (Bigtable's tablets); `None` where they partition it by salt bucket
    /// (the embedded store: see `bucket_start`, `bucket_end`).
    pub key_range: Option<(Vec<u8>, Vec<u8>)>,
    pub stats: RegionStats,
}

/// Figures for metrics and the console (serialized as they are by the admin API).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RegionStats {
    /// Both memtables: the one writes go to and a frozen one being flushed.
    pub memtable_bytes: u64,
    pub memtable_cells: u64,
    /// A background flush is under way.
    pub flushing: bool,
    /// A compaction is under way, or has finished and waits to be installed.
    pub compacting: bool,
    pub segments: u64,
    /// Of those, segments a split left shared with the other region, not yet rewritten to
    /// the rows this region owns (reference segments; 0 where the backend has none).
    pub reference_segments: u64,
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
    /// Time spent in log fsyncs, total and longest, in microseconds.
    pub fsync_micros: u64,
    pub fsync_max_micros: u64,
    /// Log fsyncs slower than the store's `SLOW_FSYNC` (10 ms): each one held every write
    /// waiting on it (the disk's stalls, which bound a write workload's tail latency).
    pub fsyncs_slow: u64,
    /// What the last open's recovery did: time taken, log records replayed, bytes dropped
    /// from a damaged log tail.
    pub recovery_micros: u64,
    pub recovery_log_records: u64,
    pub recovery_bytes_dropped: u64,
    pub poisoned: bool,
}

impl RegionStats {
    /// Mean group-commit batch size: writes made durable per log fsync (0 before any fsync).
    pub fn group_commit_avg(&self) -> f64 {
        if self.fsyncs == 0 {
            0.0
        } else {
            self.synced_writes as f64 / self.fsyncs as f64
        }
    }
}

/// Check a table name: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
pub fn validate_table_name(name: &str) -> Result<()> {
    let bytes = name.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes[1..]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "table name {name:?} must match [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}"
        )))
    }
}

/// Check column families: at least one, unique, non-empty printable names without `:`.
pub fn validate_families(families: &[FamilyDescriptor]) -> Result<()> {
    if families.is_empty() {
        return Err(Error::InvalidArgument(
            "a table needs at least one column family".into(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for f in families {
        let printable = f.name.iter().all(|&c| c.is_ascii_graphic() && c != b':');
        if f.name.is_empty() || f.name.len() > 255 || !printable {
            return Err(Error::InvalidArgument(format!(
                "column family name {:?} must be 1..=255 printable ASCII bytes without ':'",
                String::from_utf8_lossy(&f.name)
            )));
        }
        if f.max_versions == 0 {
            return Err(Error::InvalidArgument(format!(
                "column family {} must keep at least one version",
                String::from_utf8_lossy(&f.name)
            )));
        }
        if !seen.insert(&f.name) {
            return Err(Error::InvalidArgument(format!(
                "column family {} is listed twice",
                String::from_utf8_lossy(&f.name)
            )));
        }
    }
    Ok(())
}

/// Check a whole descriptor for `create_table`.
pub fn validate_descriptor(desc: &TableDescriptor) -> Result<()> {
    validate_table_name(&desc.name)?;
    validate_families(&desc.families)?;
    if desc.salt.buckets == 0 || desc.salt.buckets > 1 << 16 {
        return Err(Error::InvalidArgument(format!(
            "salt buckets must be between 1 and 65536, got {}",
            desc.salt.buckets
        )));
    }
    if desc.salt.prefix_len == Some(0) {
        return Err(Error::InvalidArgument(
            "salt prefix_len must be at least 1".into(),
        ));
    }
    if desc.initial_regions == Some(0) {
        return Err(Error::InvalidArgument(
            "initial_regions must be at least 1".into(),
        ));
    }
    Ok(())
}

impl TableDescriptor {
    /// This descriptor changed by an alter request `desc` (every backend alters alike):
    /// `Replace` takes `desc`'s families and attributes as they are, `Merge` adds or replaces
    /// the families and attributes `desc` lists and keeps the rest. The families are
    /// validated, and attributes of families no longer there are dropped.
    pub fn altered(&self, desc: TableDescriptor, mode: AlterMode) -> Result<TableDescriptor> {
        let mut new_desc = self.clone();
        match mode {
            AlterMode::Replace => {
                new_desc.families = desc.families;
                new_desc.attributes = desc.attributes;
                new_desc.family_attributes = desc.family_attributes;
            }
            AlterMode::Merge => {
                for f in desc.families {
                    match new_desc.families.iter_mut().find(|g| g.name == f.name) {
                        Some(g) => *g = f,
                        None => new_desc.families.push(f),
                    }
                }
                new_desc.attributes.extend(desc.attributes);
                for (family, attrs) in desc.family_attributes {
                    new_desc
                        .family_attributes
                        .entry(family)
                        .or_default()
                        .extend(attrs);
                }
            }
        }
        validate_families(&new_desc.families)?;
        let names: std::collections::BTreeSet<String> = new_desc
            .families
            .iter()
            .map(|f| String::from_utf8_lossy(&f.name).into_owned())
            .collect();
        new_desc.family_attributes.retain(|f, _| names.contains(f));
        Ok(new_desc)
    }

    /// A table with the given families, default salting and the server's default region count.
    pub fn new(name: impl Into<String>, families: Vec<FamilyDescriptor>) -> Self {
        TableDescriptor {
            name: name.into(),
            families,
            salt: SaltConfig::default(),
            initial_regions: None,
            attributes: BTreeMap::new(),
            family_attributes: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_follow_the_documented_pattern() {
        for ok in ["t", "_x", "a.b-c_d", "9lives", &"a".repeat(128)] {
            assert!(validate_table_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".hidden",
            "-x",
            "a/b",
            "..",
            "a b",
            "é",
            &"a".repeat(129),
        ] {
            assert!(
                matches!(validate_table_name(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }
}
