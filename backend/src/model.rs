//! The data model: cells, mutations, read and scan specifications.
//!
//! These types are the public vocabulary of the store and of every layer above it (actors, HTTP,
//! applications). They carry no storage detail: how cells are keyed and ordered on disk is private
//! to the engine.
//!
//! # Semantics (HBase's, exactly)
//! 1. A cell is `(row, family, qualifier, timestamp) -> value`. Rows compare as unsigned bytes;
//!    within a row cells are ordered by family, qualifier (bytes), then timestamp **descending**.
//! 2. The highest timestamp wins whatever the arrival order. Re-putting the same
//!    `(row, family, qualifier, timestamp)` overwrites: the last write wins.
//! 3. A delete marker masks every put it covers (see [`Mutation`]) with a timestamp `<=` its own,
//!    including puts that arrive later, until a major compaction removes the marker.
//! 4. Reads return at most `min(requested versions, family max_versions)` newest visible versions
//!    per column; expired cells (older than the family TTL) are invisible.
//! 5. Time ranges are half-open: `[min, max)`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

/// Milliseconds since the Unix epoch, as HBase uses.
pub type Timestamp = i64;

/// HBase's `LATEST_TIMESTAMP`: "no timestamp given, use the server's clock".
pub const LATEST_TIMESTAMP: Timestamp = i64::MAX;

/// Settings of one column family, as the store needs them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FamilyDescriptor {
    /// Family name (printable, no `:`), e.g. `b"cf"`.
    pub name: Vec<u8>,
    /// Most versions a read returns and a major compaction keeps (HBase `VERSIONS`, default 1).
    pub max_versions: u32,
    /// Cells older than this many seconds are expired (HBase `TTL`); `None` = forever.
    pub ttl_secs: Option<u64>,
}

impl FamilyDescriptor {
    /// A family with HBase's defaults: 1 version, no TTL.
    pub fn new(name: impl Into<Vec<u8>>) -> Self {
        FamilyDescriptor {
            name: name.into(),
            max_versions: 1,
            ttl_secs: None,
        }
    }

    /// Builder: set the maximum number of versions.
    pub fn with_max_versions(mut self, versions: u32) -> Self {
        self.max_versions = versions.max(1);
        self
    }

    /// Builder: set the time to live in seconds.
    pub fn with_ttl_secs(mut self, ttl: Option<u64>) -> Self {
        self.ttl_secs = ttl;
        self
    }
}

/// One visible version of one column, as returned by reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub family: Vec<u8>,
    pub qualifier: Vec<u8>,
    pub timestamp: Timestamp,
    pub value: Vec<u8>,
}

/// A row as returned by reads: its key and its visible cells in HBase order
/// (family, qualifier, timestamp descending). Never empty when returned by the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub key: Vec<u8>,
    pub cells: Vec<Cell>,
}

/// One change to one row. `timestamp: None` means "the server's clock" (HBase's
/// `LATEST_TIMESTAMP`); the store assigns it, never going backwards within a region.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mutation {
    /// Write a version of a column.
    Put {
        family: Vec<u8>,
        qualifier: Vec<u8>,
        timestamp: Option<Timestamp>,
        value: Vec<u8>,
    },
    /// Delete exactly one version (`Delete.addColumn`). `timestamp: None` deletes the latest
    /// visible version (the store reads it first); a no-op when the column has none.
    DeleteVersion {
        family: Vec<u8>,
        qualifier: Vec<u8>,
        timestamp: Option<Timestamp>,
    },
    /// Delete every version of a column with timestamp `<=` the given one (`Delete.addColumns`).
    DeleteColumn {
        family: Vec<u8>,
        qualifier: Vec<u8>,
        timestamp: Option<Timestamp>,
    },
    /// Delete every version of every column of a family with timestamp `<=` the given one.
    DeleteFamily {
        family: Vec<u8>,
        timestamp: Option<Timestamp>,
    },
    /// Delete every cell of the row with timestamp `<=` the given one: a family marker for every
    /// family of the store (HBase's `new Delete(row, ts)`).
    DeleteRow { timestamp: Option<Timestamp> },
}

impl Mutation {
    /// The family this mutation touches, `None` for a whole-row delete.
    pub fn family(&self) -> Option<&[u8]> {
        match self {
            Mutation::Put { family, .. }
            | Mutation::DeleteVersion { family, .. }
            | Mutation::DeleteColumn { family, .. }
            | Mutation::DeleteFamily { family, .. } => Some(family),
            Mutation::DeleteRow { .. } => None,
        }
    }
}

/// Mutations of one row, applied atomically.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowMutation {
    pub row: Vec<u8>,
    pub mutations: Vec<Mutation>,
}

/// Atomic increment of several columns (possibly in several families) of one row.
/// Values are 8-byte big-endian signed integers; an absent column counts as 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Increment {
    pub row: Vec<u8>,
    /// `(family, qualifier, amount)`.
    pub columns: Vec<(Vec<u8>, Vec<u8>, i64)>,
}

/// Atomic append onto the current values of several columns of one row (absent = empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Append {
    pub row: Vec<u8>,
    /// `(family, qualifier, suffix)`.
    pub columns: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    /// The longest value an appended cell may reach (`None`: no limit but the log frame's):
    /// past it the whole append fails with [`crate::Error::InvalidArgument`] (the store's own error of that name), changing nothing.
    #[serde(default)]
    pub max_value: Option<usize>,
}

/// Check-and-mutate on one row: compare the latest visible version of one column and, if the
/// check passes, apply the mutations atomically.
///
/// An empty `expected` matches a column that is absent or holds an empty value (HBase's
/// `checkAndPut(..., null, ...)` and the REST gateway's `"$":""`); otherwise the bytes must be
/// equal and an absent column does not match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckAndMutate {
    pub row: Vec<u8>,
    pub family: Vec<u8>,
    pub qualifier: Vec<u8>,
    pub expected: Vec<u8>,
    pub mutations: Vec<Mutation>,
}

/// Which columns a read returns. Empty = every column of every family.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnSelection(pub Vec<ColumnSpec>);

/// A whole family or one column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnSpec {
    Family(Vec<u8>),
    Column(Vec<u8>, Vec<u8>),
}

impl ColumnSelection {
    /// Every column.
    pub fn all() -> Self {
        ColumnSelection(Vec::new())
    }

    /// True if `family:qualifier` is selected.
    pub fn selects(&self, family: &[u8], qualifier: &[u8]) -> bool {
        self.0.is_empty()
            || self.0.iter().any(|c| match c {
                ColumnSpec::Family(f) => f == family,
                ColumnSpec::Column(f, q) => f == family && q == qualifier,
            })
    }

    /// True if any column of `family` may be selected.
    pub fn touches_family(&self, family: &[u8]) -> bool {
        self.0.is_empty()
            || self.0.iter().any(|c| match c {
                ColumnSpec::Family(f) | ColumnSpec::Column(f, _) => f == family,
            })
    }
}

/// Half-open time range `[min, max)` over cell timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    pub min: Timestamp,
    pub max: Timestamp,
}

impl TimeRange {
    /// Every timestamp (`[0, i64::MAX)` plus `i64::MAX` itself is never stored).
    pub const ALL: TimeRange = TimeRange {
        min: i64::MIN,
        max: i64::MAX,
    };

    /// True if `ts` is inside the range.
    pub fn contains(&self, ts: Timestamp) -> bool {
        ts >= self.min && ts < self.max
    }
}

impl Default for TimeRange {
    fn default() -> Self {
        TimeRange::ALL
    }
}

/// What a get or a scan returns of each row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadSpec {
    pub columns: ColumnSelection,
    pub time_range: TimeRange,
    /// Newest versions per column to return (capped by the family's `max_versions`); >= 1.
    pub max_versions: u32,
}

impl Default for ReadSpec {
    fn default() -> Self {
        ReadSpec {
            columns: ColumnSelection::all(),
            time_range: TimeRange::ALL,
            max_versions: 1,
        }
    }
}

/// A hook for the layers above to implement HBase filters inside the scan loop, so that rows
/// they reject are never copied out of the region.
pub trait RowFilter: Send + Sync + fmt::Debug {
    /// Called with each row key before its cells are read; `false` skips the row.
    fn accept_key(&self, _row: &[u8]) -> bool {
        true
    }

    /// Called with the visible cells of a row (after columns, time range and versions are
    /// applied). May drop or rewrite cells (e.g. key-only); returns `false` to drop the row.
    /// A row left with no cells is dropped.
    fn accept_row(&self, row: &[u8], cells: &mut Vec<Cell>) -> bool;
}

/// A range scan. Bounds are in key order (`low <= high`) whatever the direction: a reversed scan
/// walks from `high` down to `low`.
#[derive(Clone, Debug)]
pub struct ScanSpec {
    pub low: Bound<Vec<u8>>,
    pub high: Bound<Vec<u8>>,
    pub reversed: bool,
    pub read: ReadSpec,
    pub filter: Option<Arc<dyn RowFilter>>,
}

impl ScanSpec {
    /// A forward scan of every row.
    pub fn all() -> Self {
        ScanSpec {
            low: Bound::Unbounded,
            high: Bound::Unbounded,
            reversed: false,
            read: ReadSpec::default(),
            filter: None,
        }
    }

    /// HBase's forward scan: `start` inclusive, `stop` exclusive; an empty key means unbounded.
    pub fn forward(start: &[u8], stop: &[u8]) -> Self {
        ScanSpec {
            low: if start.is_empty() {
                Bound::Unbounded
            } else {
                Bound::Included(start.to_vec())
            },
            high: if stop.is_empty() {
                Bound::Unbounded
            } else {
                Bound::Excluded(stop.to_vec())
            },
            ..ScanSpec::all()
        }
    }

    /// True if `row` lies inside the bounds.
    pub fn contains(&self, row: &[u8]) -> bool {
        let above_low = match &self.low {
            Bound::Unbounded => true,
            Bound::Included(k) => row >= k.as_slice(),
            Bound::Excluded(k) => row > k.as_slice(),
        };
        let below_high = match &self.high {
            Bound::Unbounded => true,
            Bound::Included(k) => row <= k.as_slice(),
            Bound::Excluded(k) => row < k.as_slice(),
        };
        above_low && below_high
    }

    /// The spec to fetch the next page after `last_row` was returned: the bound on the side
    /// the scan walks from becomes `Excluded(last_row)`.
    pub fn resume_after(&self, last_row: &[u8]) -> ScanSpec {
        let mut next = self.clone();
        if self.reversed {
            next.high = Bound::Excluded(last_row.to_vec());
        } else {
            next.low = Bound::Excluded(last_row.to_vec());
        }
        next
    }
}

/// How much one scan call may return before it stops and reports `complete: false`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanLimits {
    pub max_rows: usize,
    /// Approximate bytes of keys and values; at least one row is always returned if one exists.
    pub max_bytes: usize,
}

impl Default for ScanLimits {
    fn default() -> Self {
        ScanLimits {
            max_rows: 1000,
            max_bytes: 4 << 20,
        }
    }
}

/// One page of a scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanPage {
    pub rows: Vec<Row>,
    /// True when the range is exhausted: no row after the last one returned matches.
    pub complete: bool,
}
