//! The region store: one region's log, memtable and segments behind the public operations.
//!
//! # Write path
//! `write_batch` turns each operation into its *effects* (concrete timestamps, resulting values),
//! appends them as one log frame per operation to a pending buffer and inserts them into the
//! memtable; at the end of the batch the buffer is written with one `write` and, in `Sync`
//! mode, made durable with one fsync (group commit). Only then are the results returned. A failed
//! write or fsync poisons the store: every operation of the batch fails and every later call is
//! refused until the store is reopened (and recovered from what is on disk).
//!
//! # Read path
//! A k-way merge of the memtable (and the frozen one, during a background flush) and the
//! segments, positioned at the first row wanted, feeds
//! the visibility rules (`resolve::Retention`) one row at a time; nothing beyond one row is materialized.
//! Reversed scans find each previous row by asking every source for its greatest row below the
//! current one, then read that row forward.
//!
//! # Where each path lives
//! This file holds the store's state ([`RegionStore`]), its options and what every path
//! shares; each path has a file of its own: `open.rs` (opening and recovery), `read.rs` (gets
//! and scans), `write.rs` (write batches, group commit, read-modify-writes), `flush.rs`,
//! `compaction.rs`, `split.rs` (a split by reference segments) and `checkpoint.rs` (a copy for
//! backups).
//!
//! # Files (see `storage/FORMAT.md`)
//! `MANIFEST`, `NNNNNNNNNNNNNNNN.seg` segments, `NNNNNNNNNNNNNNNN.log` logs, all in the store's
//! directory. File ids come from one counter kept in the manifest.
//!
//! # Invariants
//! 1. Every entry's seq is unique and larger than every seq written before it, across restarts.
//! 2. Server timestamps never go backwards, across restarts too: the clock is logged with every
//!    record and stored in the manifest. After a delete marker with a server timestamp `t`, the
//!    next server timestamp is at least `t + 1`, so "delete then put" within one millisecond
//!    leaves the put visible.
//! 3. Flush order: segment written, fsynced, renamed, dir fsynced; new log created and
//!    fsynced; manifest replaced; only then the old log is deleted. A background flush does the
//!    same in two halves: *freeze* (log synced, new log created, memtable frozen) before writes
//!    go on, *install* (manifest replaced, old logs deleted) after its segment is durable. The
//!    manifest's `log_number` (`log_floor`) only ever names a log whose records, and every later
//!    log's, are not all in segments: every log from it up is replayed.
//! 4. A poisoned store answers `Error::Poisoned` to everything.
//! 5. Memory is bounded by the memtable budget, about three times that during a background
//!    flush (the frozen memtable, about one budget, beside a fresh one an inline flush holds
//!    under twice the budget; enforced after each batch and during replay):
//!    segments are mapped, and per segment only its block index, row filter and the restart
//!    points of blocks in use live on the heap.
//! 6. After each flush a size-tiered minor compaction keeps the number of segments (and so the
//!    cost of a read) bounded; segments held by an outstanding [`CompactionTask`] are left alone.
//! 7. Increment and append write their new cell at `max(now, old_ts + 1)` when the current
//!    version is not older than `now` (HBase's rule), so the new value is never hidden behind
//!    an existing version.
//! 8. A keyed write ([`KeyedWrite`], `write_batch_keyed`) logs its idempotency key and its
//!    outcome in the same record as its effects; the map of live keys (`crate::idempotency`) is
//!    rebuilt by replay and re-logged into the new log by every flush before the manifest
//!    retires the old one, so a key is remembered exactly when its write survived.

use crate::error::{Error, Result};
use crate::fs::{FileSystem, StdFs};
use crate::idempotency::{self, IdempotencyCache, IdempotencyOptions, MAX_IDEMPOTENCY_KEY};
use crate::key::{row_successor, Entry, Kind, MemKey};
use crate::log::{self, LogCell, LogIdem, LogRecord, LogWriter};
use crate::manifest::{self, FamilyRecord, Manifest, SegmentRecord};
use crate::memtable::Memtable;
use crate::merge::{EntrySource, MergeIter};
use crate::model::*;
use crate::replayed::{ReplayedBuilder, ReplayedChunk};
use crate::resolve::{Retention, Rules, Verdict};
use crate::segment::{Pace, Segment, SegmentInfo, SegmentWriter};
use kura_backend::RegionStats;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod checkpoint;
mod compaction;
mod flush;
mod open;
mod read;
mod split;
mod write;

pub use checkpoint::CheckpointReport;
pub use compaction::{CompactionOutput, CompactionTask, RetiredSegments};
pub use flush::{FlushOutput, FlushTask, RetiredMemtable};
pub use write::LogSync;
// Free functions the steps share (each lives with the step it belongs to).
use flush::{write_flushed, write_segment};
use open::apply_record;
use read::{same_column, skip_row};
use split::copy_raw;

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
    /// Refuse to open on log damage other than a torn tail (FORMAT.md §4.3: what a crash leaves
    /// of unsynced writes), which is cut as in point-in-time recovery.
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
    pub owns_row: Option<RowPredicate>,
    /// The owner runs flushes on another thread ([`RegionStore::flush_task`]): writes then
    /// never flush inline unless the memtable reaches twice its budget (the owner fell behind),
    /// and a flush never compacts inline. Off: writes flush (and compact) inline at the budget.
    pub background_flush: bool,
    /// With `background_flush`: pace the segment writes of background flushes and compactions
    /// to this many bytes per second (0: unpaced). A flush stops pacing once the next memtable
    /// is half full.
    pub background_write_rate: u64,
    /// Threads that decode a large log during recovery (0: one per core, at most 4; 1: decode
    /// on the opening thread).
    pub replay_threads: usize,
    /// Keep the active log this many zero bytes ahead of its frames, written that many at a
    /// time (FORMAT.md, "Preallocated tail"), so that a log fsync commits data only, not a new
    /// file size. 0 (the default here; the server uses [`DEFAULT_LOG_PREALLOC`]): no
    /// preallocation, every fsync also commits the file's growth. Ignored in `None`
    /// durability, which never fsyncs the log.
    pub log_prealloc: u64,
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("families", &self.families)
            .field("durability", &self.durability)
            .field("recovery", &self.recovery)
            .field("memtable_budget", &self.memtable_budget)
            .field("owns_row", &self.owns_row.is_some())
            .field("background_flush", &self.background_flush)
            .field("background_write_rate", &self.background_write_rate)
            .field("replay_threads", &self.replay_threads)
            .field("log_prealloc", &self.log_prealloc)
            .finish()
    }
}

/// The [`StoreOptions::log_prealloc`] the server runs with: 1 MiB of zeros, written and
/// fsynced once per MiB of log.
pub const DEFAULT_LOG_PREALLOC: u64 = 1 << 20;

impl StoreOptions {
    /// Defaults: `Sync` durability, point-in-time recovery, a 64 MiB memtable.
    pub fn new(families: Vec<FamilyDescriptor>) -> Self {
        StoreOptions {
            families,
            durability: Durability::Sync,
            recovery: RecoveryMode::PointInTime,
            memtable_budget: 64 << 20,
            owns_row: None,
            background_flush: false,
            background_write_rate: 0,
            replay_threads: 0,
            log_prealloc: 0,
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
    /// Where point-in-time recovery kept what it dropped after damage a crash cannot cause
    /// (anything but a torn tail of the last log): the truncated bytes as
    /// `<log>.dropped-at-<offset>`, the later logs renamed `<log>.dropped`. Never read by the
    /// store; an operator may salvage or delete them.
    pub kept_dropped: Vec<PathBuf>,
    pub duration: Duration,
}

/// An fsync slower than this is counted in [`RegionStats::fsyncs_slow`].
pub const SLOW_FSYNC: Duration = Duration::from_millis(10);

/// How a read-modify-write computes a new value: `(family, qualifier, old value, argument)`.
type Combine<A> = dyn Fn(&[u8], &[u8], Option<&[u8]>, &A) -> Result<Vec<u8>>;

/// A predicate over row keys (see [`StoreOptions::owns_row`]).
pub type RowPredicate = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The per-store clock for server timestamps (invariant 2).
#[derive(Debug, Default)]
struct Clock {
    last: i64,
    floor: i64,
}

impl Clock {
    fn now(&mut self) -> i64 {
        let t = wall_ms().max(self.last).max(self.floor);
        self.last = t;
        t
    }

    fn now_for_delete(&mut self) -> i64 {
        let t = self.now();
        self.floor = t.saturating_add(1);
        t
    }

    fn persisted(&self) -> i64 {
        self.last.max(self.floor)
    }

    fn observe(&mut self, clock: i64) {
        self.last = self.last.max(clock);
    }
}

fn seg_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016}.seg"))
}

fn log_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016}.log"))
}

/// `base`, or `base.1`, `base.2`... the first that does not exist: a file kept aside never
/// replaces an earlier one.
fn aside_name(fs: &dyn FileSystem, base: &str) -> PathBuf {
    let mut to = PathBuf::from(base);
    let mut n = 1;
    while fs.exists(&to) {
        to = PathBuf::from(format!("{base}.{n}"));
        n += 1;
    }
    to
}

fn parse_id(name: &str, ext: &str) -> Option<u64> {
    name.strip_suffix(ext)
        .filter(|s| s.len() == 16)
        .and_then(|s| s.parse().ok())
}

/// The manifest's records of `segments`, those in `references` flagged as reference segments.
fn segment_records(segments: &[Arc<Segment>], references: &BTreeSet<u64>) -> Vec<SegmentRecord> {
    segments
        .iter()
        .map(|s| SegmentRecord {
            id: s.id,
            entries: s.info().entries,
            max_seq: s.info().max_seq,
            file_bytes: s.info().file_bytes,
            reference: references.contains(&s.id),
        })
        .collect()
}

fn lossy_column(family: &[u8], qualifier: &[u8]) -> String {
    format!(
        "{}:{}",
        String::from_utf8_lossy(family),
        String::from_utf8_lossy(qualifier)
    )
}

fn no_such_family(family: &[u8]) -> Error {
    Error::NoSuchFamily {
        family: String::from_utf8_lossy(family).into_owned(),
    }
}

fn check_row(row: &[u8]) -> Result<()> {
    if row.is_empty() {
        return Err(Error::InvalidArgument("empty row key".into()));
    }
    Ok(())
}

/// One region's store.
pub struct RegionStore {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    durability: Durability,
    memtable_budget: usize,
    families: Vec<FamilyDescriptor>,
    floors: BTreeMap<Vec<u8>, u64>,
    /// Derived from `families` and `floors`; rebuilt whenever they change.
    rules: Rules,
    owns_row: Option<RowPredicate>,
    /// The rows compactions keep: `owns_row` once a narrowing is final; wider while a
    /// narrowing may still be undone ([`RegionStore::narrow_reads`]).
    keeps_row: Option<RowPredicate>,
    /// `keeps_row` is wider than `owns_row` ([`RegionStore::narrow_reads`] was called last):
    /// rewriting a reference segment now would not drop the rows it shares.
    narrowing_pending: bool,
    /// Bumped whenever `owns_row`, `keeps_row` or `references` change: a compaction task made
    /// before a bump may have kept rows the store no longer owns.
    ownership_gen: u64,
    /// Live segments that are reference segments (manifest `reference` flag): shared with the
    /// other side of a split, they may hold rows this store does not own.
    references: BTreeSet<u64>,
    background_flush: bool,
    background_write_rate: u64,
    /// [`StoreOptions::log_prealloc`], or 0 in `None` durability (see `open`).
    log_prealloc: u64,
    /// Tells the running background flush to stop pacing (see [`Pace`]).
    flush_hurry: Arc<AtomicBool>,
    /// The memtable writes go to.
    memtable: Memtable,
    /// A full memtable being written to a segment by a [`FlushTask`]; read with `memtable`.
    frozen: Option<Arc<Memtable>>,
    /// A version marker was written since the memtable was frozen: the running flush may have
    /// left out a version that marker unmasks (see `write_flushed`).
    version_marker_during_flush: bool,
    segments: Vec<Arc<Segment>>,
    /// The log writes are appended to.
    log: LogWriter,
    /// The manifest's `log_number`: the oldest log whose records are not all in segments.
    /// Every log from it up to `log` is replayed by recovery.
    log_floor: u64,
    /// Logs no longer appended to but still needed (`log_floor <= id < log.number`): they hold
    /// the frozen memtable's records, or were replayed at open and not flushed since.
    retired_logs: Vec<u64>,
    next_file: AtomicU64,
    next_seq: u64,
    clock: Clock,
    poisoned: Option<String>,
    last_sync: Instant,
    unsynced_writes: u64,
    stats: RegionStats,
    reads: AtomicU64,
    /// Segments held by outstanding compaction tasks (the tiered compaction leaves them alone).
    reserved: Arc<parking_lot::Mutex<BTreeSet<u64>>>,
    /// Outcomes of keyed writes within the idempotency window (rebuilt from the log).
    idem: IdempotencyCache,
}

impl RegionStore {
    fn write_manifest(&self, segments: &[Arc<Segment>], log_number: u64) -> Result<()> {
        let m = Manifest {
            next_file: self.next_file.load(Ordering::SeqCst),
            log_number,
            segments: segment_records(segments, &self.references),
            families: self.families.iter().map(FamilyRecord::from).collect(),
            family_floors: self.floors.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            last_seq: self.next_seq.saturating_sub(1),
            clock: self.clock.persisted(),
        };
        manifest::write(&*self.fs, &self.dir, &m)
    }

    fn alloc_file(&self) -> u64 {
        self.next_file.fetch_add(1, Ordering::SeqCst)
    }

    fn poison(&mut self, e: &Error) {
        if self.poisoned.is_none() {
            tracing::error!(dir = %self.dir.display(), error = %e, "region store poisoned");
            self.poisoned = Some(e.to_string());
            // What was not answered yet will be answered with this failure: it must not come
            // back at the next recovery (RELIABILITY.md: a failure reply means not applied).
            self.log.discard_unkept();
        }
    }

    fn check_usable(&self) -> Result<()> {
        match &self.poisoned {
            Some(p) => Err(Error::Poisoned(p.clone())),
            None => Ok(()),
        }
    }

    /// The column families of the store.
    pub fn families(&self) -> &[FamilyDescriptor] {
        &self.families
    }

    /// Replace the column families (persisted in the manifest). Cells of a family dropped here
    /// become invisible, and stay so if a family of the same name is added again later.
    pub fn set_families(&mut self, families: Vec<FamilyDescriptor>) -> Result<()> {
        self.check_usable()?;
        validate_families(&families)?;
        let mut floors = self.floors.clone();
        for old in &self.families {
            if !families.iter().any(|f| f.name == old.name) {
                floors.insert(old.name.clone(), self.next_seq);
            }
        }
        let (old_families, old_floors) = (
            std::mem::replace(&mut self.families, families),
            std::mem::replace(&mut self.floors, floors),
        );
        if let Err(e) = self.write_manifest(&self.segments, self.log_floor) {
            self.families = old_families;
            self.floors = old_floors;
            self.poison(&e);
            return Err(e);
        }
        self.rules = Rules::new(&self.families, &self.floors);
        Ok(())
    }

    /// Restrict the rows this store serves and keeps (see [`StoreOptions::owns_row`]): from
    /// here on reads skip, and compactions made from here on drop, the rows `pred` rejects.
    pub fn set_owns_row(&mut self, pred: Option<RowPredicate>) {
        self.keeps_row = pred.clone();
        self.owns_row = pred;
        self.narrowing_pending = false;
        self.ownership_gen += 1;
    }

    /// Restrict the rows reads see to `pred`, while compactions keep every row of the last
    /// [`RegionStore::set_owns_row`]: a narrowing that may still be undone (a split before
    /// its commit) must not let a compaction delete the rows it hides. Make it final with
    /// `set_owns_row(pred)`, or undo it with `set_owns_row(wider)`.
    pub fn narrow_reads(&mut self, pred: Option<RowPredicate>) {
        self.owns_row = pred;
        self.narrowing_pending = true;
        self.ownership_gen += 1;
    }

    fn check_family(&self, family: &[u8]) -> Result<()> {
        if self.families.iter().any(|f| f.name == family) {
            Ok(())
        } else {
            Err(no_such_family(family))
        }
    }

    fn check_read(&self, read: &ReadSpec) -> Result<()> {
        for c in &read.columns.0 {
            match c {
                ColumnSpec::Family(f) | ColumnSpec::Column(f, _) => self.check_family(f)?,
            }
        }
        Ok(())
    }

    /// The memtable writes go to, then the frozen one being flushed (if any).
    fn memtables(&self) -> impl Iterator<Item = &Memtable> {
        std::iter::once(&self.memtable).chain(self.frozen.as_deref())
    }

    /// Bytes and entries held by both memtables.
    fn memtable_totals(&self) -> (usize, usize) {
        self.memtables()
            .fold((0, 0), |(b, n), m| (b + m.bytes(), n + m.len()))
    }

    fn owns(&self, row: &[u8]) -> bool {
        self.owns_row.as_ref().is_none_or(|p| p(row))
    }

    /// Replace the idempotency window, key bound and clock (the store opens with
    /// [`IdempotencyOptions::default`]: 10 minutes, 100,000 keys). Keys outside the new bounds
    /// are forgotten at once.
    pub fn set_idempotency_options(&mut self, opts: IdempotencyOptions) {
        self.idem.set_options(opts);
    }

    /// Idempotency keys currently remembered.
    pub fn idempotency_keys(&self) -> usize {
        self.idem.len()
    }

    /// Bytes held by the memtable and the segment files, counting of a reference segment
    /// only the share of its bytes in rows this store owns (`Segment::owned_share`).
    pub fn approximate_size(&self) -> u64 {
        self.memtable_totals().0 as u64 + self.owned_segments().0
    }

    /// Estimated bytes and entries of the segments in rows this store owns: ordinary
    /// segments whole, reference segments by their owned share.
    fn owned_segments(&self) -> (u64, u64) {
        self.segments.iter().fold((0, 0), |(bytes, entries), s| {
            let share = match &self.owns_row {
                Some(owns) if self.references.contains(&s.id) => s.owned_share(&**owns),
                _ => 1.0,
            };
            (
                bytes + (s.info().file_bytes as f64 * share) as u64,
                entries + (s.info().entries as f64 * share) as u64,
            )
        })
    }

    /// Live reference segments (shared with the other side of a split; see
    /// [`RegionStore::link_rows`]).
    pub fn reference_segments(&self) -> usize {
        self.references.len()
    }

    /// Figures for metrics.
    pub fn stats(&self) -> RegionStats {
        let (memtable_bytes, memtable_cells) = self.memtable_totals();
        let (segment_bytes, segment_cells) = self.owned_segments();
        RegionStats {
            memtable_bytes: memtable_bytes as u64,
            memtable_cells: memtable_cells as u64,
            flushing: self.frozen.is_some(),
            compacting: !self.reserved.lock().is_empty(),
            segments: self.segments.len() as u64,
            reference_segments: self.references.len() as u64,
            segment_bytes,
            segment_cells,
            log_bytes: self.log.len(),
            reads: self.reads.load(Ordering::Relaxed),
            poisoned: self.poisoned.is_some(),
            ..self.stats.clone()
        }
    }

    /// Sync the log and flush the memtable, so that the next open replays nothing.
    pub fn close(mut self) -> Result<()> {
        self.check_usable()?;
        self.sync_log()?;
        self.flush_inner()
    }
}

fn validate_families(families: &[FamilyDescriptor]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for f in families {
        if f.name.is_empty() || f.name.len() > u16::MAX as usize || f.name.contains(&b':') {
            return Err(Error::InvalidArgument(format!(
                "invalid family name {:?}",
                String::from_utf8_lossy(&f.name)
            )));
        }
        if !seen.insert(f.name.as_slice()) {
            return Err(Error::InvalidArgument(format!(
                "duplicate family {}",
                String::from_utf8_lossy(&f.name)
            )));
        }
    }
    Ok(())
}
