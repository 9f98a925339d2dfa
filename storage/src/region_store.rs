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
//! 5. Memory is bounded by the memtable budget, twice that during a background flush (enforced
//!    after each batch and during replay):
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

/// Segments merged at once by the size-tiered compaction after a flush.
const TIER_WIDTH: usize = 4;
/// Above this many segments the tiered compaction merges regardless of sizes.
const MAX_SEGMENTS: usize = 12;

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

fn segment_records(segments: &[Arc<Segment>]) -> Vec<SegmentRecord> {
    segments
        .iter()
        .map(|s| SegmentRecord {
            id: s.id,
            entries: s.info.entries,
            max_seq: s.info.max_seq,
            file_bytes: s.info.file_bytes,
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

/// Insert the effects of one logged record into the memtable.
fn apply_record(memtable: &mut Memtable, rec: LogRecord) -> Result<()> {
    for (i, c) in rec.cells.into_iter().enumerate() {
        let kind = Kind::from_u8(c.kind)
            .ok_or_else(|| Error::Codec(format!("unknown entry kind {}", c.kind)))?;
        if (kind == Kind::DeleteFamily) != c.qualifier.is_none() {
            return Err(Error::Codec(
                "qualifier presence does not match the entry kind".into(),
            ));
        }
        let key = MemKey::new(&rec.row, &c.family, c.qualifier.as_deref(), c.ts, kind);
        memtable.insert(key, rec.seq + i as u64, c.value);
    }
    Ok(())
}

/// What replaying one chunk of a log gathered (see [`log::replay`]): built on a decoding
/// thread, applied to the recovering store in log order.
#[derive(Default)]
struct Replayed {
    entries: ReplayedChunk,
    /// One past the highest seq seen.
    next_seq: u64,
    clock: i64,
    /// Idempotency keys with their rows, in log order.
    idem: Vec<(Vec<u8>, log::LogIdem)>,
}

/// Fold one record of log `log` (whose bytes are `map`) into a chunk's [`Replayed`].
fn fold_replayed(log: u16, map: &[u8], c: &mut Replayed, rec: log::LogRecordRef<'_>) -> Result<()> {
    c.next_seq = c.next_seq.max(rec.seq + rec.cells.len() as u64);
    c.clock = c.clock.max(rec.clock);
    c.entries.add(log, map, &rec)?;
    if let Some(i) = rec.idem {
        c.idem.push((rec.row.to_vec(), i));
    }
    Ok(())
}

/// Write a segment file `id` in `dir` from the entries `fill` adds; `None` if it added none.
fn write_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    id: u64,
    expected_rows: u64,
    pace: Option<Pace>,
    fill: &mut dyn FnMut(&mut SegmentWriter) -> Result<()>,
) -> Result<Option<Segment>> {
    let path = seg_path(dir, id);
    let tmp = path.with_extension("seg.tmp");
    let mut w = SegmentWriter::create(fs, &tmp, expected_rows)?;
    if let Some(p) = pace {
        w.set_pace(p);
    }
    let filled = fill(&mut w);
    if filled.is_err() || w.entries() == 0 {
        drop(w);
        let _ = fs.remove(&tmp);
        return filled.map(|_| None);
    }
    let info: SegmentInfo = w.finish()?;
    if fs.exists(&path) {
        // Only a task that outlived its store gets here (ids are never handed out twice by
        // one store): never replace a file another store may own.
        let _ = fs.remove(&tmp);
        return Err(Error::InvalidArgument(format!(
            "segment {} already exists: a background task of a closed store",
            path.display()
        )));
    }
    fs.rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
    let seg = Segment::open(fs, &path, id)?;
    debug_assert_eq!(seg.info.entries, info.entries);
    Ok(Some(seg))
}

/// Copy the entries of a flush (a memtable, or both memtables merged) to `w`, leaving out what
/// no read can see, now or later:
/// - an older write of the same key, a put masked by a marker of the flush itself, an expired
///   put, an entry of a dropped family (all of which a major compaction drops as well);
/// - a put beyond the newest `max_versions` of its column ([`Verdict::Excess`]), unless a
///   version marker from outside the flush could unmask a newer put of that column: one in an
///   older segment (`older`, looked up once per such column), or one written while a
///   background flush runs (then [`RegionStore::install_flush`] redoes the flush with both
///   memtables). Family and column markers need no such care: one that masks a newer put
///   masks every older one too.
///
/// Delete markers are always kept. Returns how many puts were left out for being beyond the
/// versions kept. Without this, a counter's every increment would reach the segments (HBase's
/// flush drops them the same way).
fn write_flushed<'a>(
    next: &mut dyn FnMut() -> Result<Option<Entry<'a>>>,
    older: &[Arc<Segment>],
    rules: &Rules,
    now_ms: i64,
    w: &mut SegmentWriter,
) -> Result<u64> {
    let mut pruned = 0u64;
    let mut prev: Option<Entry<'a>> = None;
    let mut ret = Retention::new(rules, now_ms);
    // The last column checked for older version markers, and the answer.
    let mut checked: Option<(Entry<'a>, bool)> = None;
    while let Some(e) = next()? {
        if prev.is_some_and(|p| p.same_key(&e)) {
            continue; // the same key in both memtables: the later write came first
        }
        if prev.is_none_or(|p| p.row != e.row) {
            ret = Retention::new(rules, now_ms);
        }
        prev = Some(e);
        match ret.offer(&e) {
            Verdict::Keep | Verdict::Marker => w.add(&e)?,
            Verdict::Drop => {}
            Verdict::Excess => {
                let protected = match checked {
                    Some((c, p)) if same_column(Some(&c), &e) => p,
                    _ => {
                        let q = e.qualifier.unwrap_or_default();
                        let mut p = false;
                        for s in older {
                            if s.has_version_marker(e.row, e.family, q)? {
                                p = true;
                                break;
                            }
                        }
                        checked = Some((e, p));
                        p
                    }
                };
                if protected {
                    w.add(&e)?;
                } else {
                    pruned += 1;
                }
            }
        }
    }
    Ok(pruned)
}

/// Consume the entries of `row` from `it`, pushing the visible cells `read` selects.
fn collect_row<'a>(
    it: &mut MergeIter<'a>,
    row: &[u8],
    read: &ReadSpec,
    rules: &Rules,
    now_ms: i64,
    out: &mut Vec<Cell>,
) -> Result<()> {
    let mut ret = Retention::new(rules, now_ms);
    let mut last_col: Option<(&'a [u8], &'a [u8])> = None;
    let mut count = 0u32;
    let max_versions = read.max_versions.max(1);
    loop {
        let e = match it.peek() {
            Some(e) if e.row == row => *e,
            _ => break,
        };
        it.next()?;
        if !read.columns.touches_family(e.family) {
            // Nothing of this family is returned: jump past each column rather than walk its
            // versions (a counter row's other families can hold thousands).
            if e.qualifier.is_some() && same_column(it.peek(), &e) {
                it.skip_column(e.row, e.family, e.qualifier)?;
            }
            continue;
        }
        let verdict = ret.offer(&e);
        let q = e.qualifier.unwrap_or(&[]);
        if verdict == Verdict::Keep
            && read.columns.selects(e.family, q)
            && read.time_range.contains(e.ts)
        {
            if last_col != Some((e.family, q)) {
                last_col = Some((e.family, q));
                count = 0;
            }
            count += 1;
            if count <= max_versions {
                out.push(Cell {
                    family: e.family.to_vec(),
                    qualifier: q.to_vec(),
                    timestamp: e.ts,
                    value: e.value.to_vec(),
                });
            }
        }
        // Many versions of one column (counters, say) must not cost a read: once nothing more
        // of this column can be returned, jump past it.
        if e.qualifier.is_some() {
            let done = ret.column_exhausted()
                || !read.columns.selects(e.family, q)
                || (last_col == Some((e.family, q)) && count >= max_versions)
                || e.ts < read.time_range.min;
            if done && same_column(it.peek(), &e) {
                it.skip_column(e.row, e.family, e.qualifier)?;
            }
        }
    }
    Ok(())
}

/// Whether `next` is another version (or marker) of `e`'s column.
fn same_column(next: Option<&Entry<'_>>, e: &Entry<'_>) -> bool {
    next.is_some_and(|n| n.row == e.row && n.family == e.family && n.qualifier == e.qualifier)
}

/// Consume the entries of `row` from `it`.
fn skip_row(it: &mut MergeIter<'_>, row: &[u8]) -> Result<()> {
    while let Some(e) = it.peek().filter(|e| e.row == row).copied() {
        it.next()?;
        if e.qualifier.is_some() && same_column(it.peek(), &e) {
            it.skip_column(e.row, e.family, e.qualifier)?;
        }
    }
    Ok(())
}

/// Copy every raw entry (markers and all versions) of the rows `keep_row` accepts, dropping
/// only overwritten duplicates and entries of dropped families.
fn copy_raw(
    it: &mut MergeIter<'_>,
    rules: &Rules,
    keep_row: &dyn Fn(&[u8]) -> bool,
    w: &mut SegmentWriter,
) -> Result<()> {
    let mut prev: Option<Entry<'_>> = None;
    let mut row_kept = false;
    while let Some(e) = it.next()? {
        if prev.is_none_or(|p| p.row != e.row) {
            row_kept = keep_row(e.row);
        }
        let dup = prev.is_some_and(|p| p.same_key(&e));
        prev = Some(e);
        if !row_kept || dup {
            continue;
        }
        match rules.get(e.family) {
            Some(rule) if e.seq >= rule.floor => w.add(&e)?,
            _ => {}
        }
    }
    Ok(())
}

fn row_bytes(row: &Row) -> usize {
    row.key.len()
        + row
            .cells
            .iter()
            .map(|c| c.family.len() + c.qualifier.len() + c.value.len() + 16)
            .sum::<usize>()
}

/// Segment ids held by an outstanding compaction; released when dropped (installed or not), so
/// a failed or abandoned task never pins its inputs.
#[derive(Debug)]
struct Reservation {
    set: Arc<parking_lot::Mutex<BTreeSet<u64>>>,
    ids: Vec<u64>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut set = self.set.lock();
        for id in &self.ids {
            set.remove(id);
        }
    }
}

/// A compaction prepared by [`RegionStore::compaction_task`], runnable on another thread.
pub struct CompactionTask {
    pace: Option<Pace>,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    id: u64,
    inputs: Vec<Arc<Segment>>,
    major: bool,
    drop_markers: bool,
    rules: Rules,
    now_ms: i64,
    owns_row: Option<RowPredicate>,
    reservation: Reservation,
}

impl std::fmt::Debug for CompactionTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionTask")
            .field("id", &self.id)
            .field(
                "inputs",
                &self.inputs.iter().map(|s| s.id).collect::<Vec<_>>(),
            )
            .field("major", &self.major)
            .finish()
    }
}

/// The result of [`CompactionTask::run`], to hand to [`RegionStore::install_compaction`].
#[derive(Debug)]
pub struct CompactionOutput {
    inputs: Vec<u64>,
    output: Option<Segment>,
    _reservation: Reservation,
    /// Entries read from the inputs' footers.
    pub entries_in: u64,
    /// Entries written to the new segment.
    pub entries_out: u64,
}

impl CompactionTask {
    /// Merge the input segments into one new segment file (written, fsynced, renamed into
    /// place). Minor: keeps every entry except overwritten duplicates, dropped families and
    /// rows the store does not own. Major: keeps only retained puts (see
    /// `resolve`), dropping masked, expired and excess versions and, when the
    /// memtable was empty at task creation, the delete markers.
    pub fn run(self) -> Result<CompactionOutput> {
        let mut sources: Vec<Box<dyn EntrySource<'_> + '_>> = Vec::new();
        for s in &self.inputs {
            sources.push(Box::new(s.iter_from(None)?));
        }
        let mut it = MergeIter::new(sources)?;
        let owns = self.owns_row.clone();
        let keep_row = move |row: &[u8]| owns.as_ref().is_none_or(|p| p(row));
        let rules = &self.rules;
        let now_ms = self.now_ms;
        let (major, drop_markers) = (self.major, self.drop_markers);
        let entries_in: u64 = self.inputs.iter().map(|s| s.info.entries).sum();
        let output = write_segment(
            &*self.fs,
            &self.dir,
            self.id,
            entries_in,
            self.pace.clone(),
            &mut |w| {
                if !major {
                    return copy_raw(&mut it, rules, &keep_row, w);
                }
                while let Some(first) = it.peek().copied() {
                    let row = first.row;
                    if !keep_row(row) {
                        skip_row(&mut it, row)?;
                        continue;
                    }
                    let mut ret = Retention::new(rules, now_ms);
                    loop {
                        let e = match it.peek() {
                            Some(e) if e.row == row => *e,
                            _ => break,
                        };
                        it.next()?;
                        match ret.offer(&e) {
                            Verdict::Keep => w.add(&e)?,
                            Verdict::Marker if !drop_markers => w.add(&e)?,
                            _ => {}
                        }
                    }
                }
                Ok(())
            },
        )?;
        let entries_out = output.as_ref().map_or(0, |s| s.info.entries);
        Ok(CompactionOutput {
            inputs: self.inputs.iter().map(|s| s.id).collect(),
            output,
            _reservation: self.reservation,
            entries_in,
            entries_out,
        })
    }
}

/// A flush prepared by [`RegionStore::flush_task`]: the frozen memtable, to be written to a
/// segment on another thread ([`FlushTask::run`]) and installed with
/// [`RegionStore::install_flush`].
pub struct FlushTask {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    id: u64,
    mem: Arc<Memtable>,
    pace: Option<Pace>,
    /// The segments when the memtable was frozen: their version markers decide which excess
    /// versions the flush may leave out (see `write_flushed`).
    older: Vec<Arc<Segment>>,
    rules: Rules,
}

impl std::fmt::Debug for FlushTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushTask")
            .field("id", &self.id)
            .field("entries", &self.mem.len())
            .finish()
    }
}

/// A flushed memtable and the logs it made obsolete, handed back by
/// [`RegionStore::install_flush`] so that its owner drops it off the latency-critical thread:
/// freeing the memtable takes time in proportion to its entries (about 0.2 s for a 64 MiB
/// memtable of small cells), and deleting a log of that size 25-50 ms on a file system that
/// discards freed blocks. The logs are deleted on drop; the manifest no longer names them, so
/// a crash first only leaves them for the next open to delete.
#[must_use = "drop it where a long free does not stall anything"]
pub struct RetiredMemtable {
    _mem: Arc<Memtable>,
    fs: Arc<dyn FileSystem>,
    logs: Vec<PathBuf>,
}

impl RetiredMemtable {
    fn new(mem: Arc<Memtable>, fs: &Arc<dyn FileSystem>) -> RetiredMemtable {
        RetiredMemtable {
            _mem: mem,
            fs: fs.clone(),
            logs: Vec::new(),
        }
    }
}

impl std::fmt::Debug for RetiredMemtable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetiredMemtable")
            .field("logs", &self.logs)
            .finish()
    }
}

impl Drop for RetiredMemtable {
    fn drop(&mut self) {
        for path in &self.logs {
            if let Err(e) = self.fs.remove(path) {
                tracing::warn!(file = %path.display(), error = %e, "could not delete old log");
            }
        }
    }
}

/// The result of [`FlushTask::run`].
#[derive(Debug)]
pub struct FlushOutput {
    mem: Arc<Memtable>,
    segment: Result<Option<Segment>>,
    /// Puts left out for being beyond their column's versions.
    pruned: u64,
}

impl FlushTask {
    /// Write the frozen memtable to a new segment file (written, fsynced, renamed into place).
    /// A failure is reported by [`RegionStore::install_flush`], which poisons the store.
    pub fn run(self) -> FlushOutput {
        let mem = &self.mem;
        let mut pruned = 0;
        let segment = write_segment(
            &*self.fs,
            &self.dir,
            self.id,
            mem.len() as u64,
            self.pace.clone(),
            &mut |w| {
                let mut it = mem.iter_all();
                pruned = write_flushed(
                    &mut || it.next_entry(),
                    &self.older,
                    &self.rules,
                    wall_ms(),
                    w,
                )?;
                Ok(())
            },
        );
        FlushOutput {
            mem: self.mem,
            segment,
            pruned,
        }
    }
}

/// An fsync of the log that the store's owner runs on another thread
/// ([`RegionStore::write_batch_deferred`]).
pub struct LogSync {
    handle: Box<dyn crate::fs::SyncHandle>,
    path: PathBuf,
    /// The log file and its length when the batch was written.
    log: u64,
    len: u64,
    /// Writes the fsync makes durable.
    writes: u64,
}

impl std::fmt::Debug for LogSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSync")
            .field("log", &self.log)
            .field("len", &self.len)
            .field("writes", &self.writes)
            .finish()
    }
}

impl LogSync {
    /// fsync the log (blocking); the time it took, or the error naming the file.
    pub fn run(&self) -> Result<Duration> {
        let started = Instant::now();
        self.handle.sync().map_err(|e| Error::io(&self.path, e))?;
        Ok(started.elapsed())
    }
}

/// What [`RegionStore::checkpoint`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Segments given a second name by a hard link.
    pub linked: usize,
    /// Segments copied (the file system made no link).
    pub copied: usize,
    /// Segments written from the memtables (0 or 1).
    pub written: usize,
    /// Bytes of every file of the checkpoint (linked ones included).
    pub bytes: u64,
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

impl std::fmt::Debug for RegionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegionStore")
            .field("dir", &self.dir)
            .field("families", &self.families)
            .field("segments", &self.segments.len())
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl RegionStore {
    /// Open (creating if absent) the store in `dir`: read the manifest, open the segments,
    /// replay the log tail.
    pub fn open(dir: &Path, options: StoreOptions) -> Result<(RegionStore, RecoveryReport)> {
        RegionStore::open_with_fs(Arc::new(StdFs), dir, options)
    }

    /// [`RegionStore::open`] over any [`FileSystem`] (tests use [`crate::fs::SimFs`]).
    ///
    /// Recovery steps (FORMAT.md "Recovery"): read the manifest; open and check every segment
    /// it names; replay the logs numbered from the manifest's `log_number` up, stopping at the
    /// first bad frame (truncating the log there, or refusing in `Strict` mode unless it is a
    /// torn tail); delete files no manifest names; adopt the families of `options` (if any).
    pub fn open_with_fs(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        options: StoreOptions,
    ) -> Result<(RegionStore, RecoveryReport)> {
        let started = Instant::now();
        fs.create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let existing = manifest::read(&*fs, dir)?;
        let fresh = existing.is_none();
        let m = existing.unwrap_or(Manifest {
            next_file: 1,
            ..Manifest::default()
        });

        let names = fs.list(dir).map_err(|e| Error::io(dir, e))?;
        if fresh {
            // A store writes its manifest when first opened, before it takes any write, and a
            // split's export writes it before the catalog names the new region: segments
            // without one mean the manifest was lost. Opening as new would delete them (no
            // manifest names them) and serve their rows as absent. Fail closed, changing
            // nothing, so that restoring the file brings everything back.
            let segs = names
                .iter()
                .filter(|n| parse_id(n, ".seg").is_some())
                .count();
            if segs > 0 {
                return Err(Error::Corruption {
                    file: dir.join(manifest::MANIFEST),
                    offset: 0,
                    reason: format!(
                        "missing while the directory holds {segs} segment file(s) it would \
                         name; restore it from a backup (opening without it would drop them)"
                    ),
                });
            }
        }
        let mut logs = Vec::new();
        let mut seg_files = Vec::new();
        let mut max_id = 0;
        for name in names {
            if let Some(stem) = name.strip_suffix(".tmp") {
                // A file being written when the store stopped, or still being written by a
                // background job of a store on this directory that was closed without waiting
                // for it: its id is never handed out again, so that job cannot rename its file
                // onto one of this store's.
                if let Some(id) = parse_id(stem, ".seg").or_else(|| parse_id(stem, ".log")) {
                    max_id = max_id.max(id);
                }
                let _ = fs.remove(&dir.join(&name));
            } else if let Some(id) = parse_id(&name, ".log") {
                logs.push(id);
                max_id = max_id.max(id);
            } else if let Some(id) = parse_id(&name, ".seg") {
                seg_files.push(id);
                max_id = max_id.max(id);
            } else if let Some((stem, _)) = name.split_once(".log.dropped") {
                // Kept aside by an earlier recovery (`kept_dropped`): its id is never handed
                // out again, so no later log is kept aside under the same name. (That recovery
                // listed the log under its own name and persisted a larger next id with its
                // next manifest, so this only guards a manifest that was never rewritten.)
                if let Some(id) = parse_id(&format!("{stem}.log"), ".log") {
                    max_id = max_id.max(id);
                }
            }
        }
        logs.sort_unstable();

        let mut segments = Vec::new();
        // Checksummed values that no writer produces: an error naming the file, not a wrapped
        // sequence number (later writes would then sort below older ones).
        let out_of_range = |file: PathBuf, what: &str, v: u64| Error::Corruption {
            file,
            offset: 0,
            reason: format!("{what} {v} is out of range"),
        };
        let mut next_seq = m
            .last_seq
            .checked_add(1)
            .ok_or_else(|| out_of_range(dir.join(manifest::MANIFEST), "last_seq", m.last_seq))?;
        for rec in &m.segments {
            let path = seg_path(dir, rec.id);
            let seg = Segment::open(&*fs, &path, rec.id)?;
            let after = seg.info.max_seq.checked_add(1);
            next_seq = next_seq
                .max(after.ok_or_else(|| out_of_range(path.clone(), "max_seq", seg.info.max_seq))?);
            segments.push(Arc::new(seg));
        }
        let mut clock = Clock::default();
        clock.observe(m.clock);
        let mut report = RecoveryReport {
            segments: segments.len(),
            ..RecoveryReport::default()
        };
        let strict = options.recovery == RecoveryMode::Strict;
        let mut active: Option<(u64, u64, u64, u8)> = None;
        let mut idem = IdempotencyCache::new(IdempotencyOptions::default());
        let mut stopped = false;
        let mut replayed: Vec<u64> = Vec::new();
        let mut file_ids = m.next_file.max(max_id + 1);
        let replay_threads = match options.replay_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
            n => n,
        };
        // Replayed entries point into the mapped logs, sorted once (see `ReplayedBuilder`).
        let mut memtable = ReplayedBuilder::with_sort_threads(replay_threads);
        // Decoded chunks waiting to be applied stay under half the memtable budget (see
        // `log::replay`): replay keeps within the store's memory bound.
        let max_chunk = (options.memtable_budget / (2 * log::CHUNKS_IN_FLIGHT)).min(8 << 20);
        if !fresh && !logs.contains(&m.log_number) {
            // Every log a manifest names as the first live one was created, synced and its
            // directory entry synced before that manifest was written: it is missing only if it
            // was lost, and replaying from a later log (or none) would serve its writes as
            // absent. Split exports made before they always wrote their log have no log at all,
            // log number 2 and next file 3 (accepted: nothing of theirs was in a log; a first
            // open of one cut short after creating its log 3 leaves that log too).
            let old_export = m.log_number == 2 && m.next_file == 3;
            if !old_export {
                return Err(Error::Corruption {
                    file: log_path(dir, m.log_number),
                    offset: 0,
                    reason: "missing: the manifest names it as the first live log; restore it \
                             (opening without it would serve its writes as absent)"
                        .into(),
                });
            }
        }
        for &n in logs.iter().filter(|n| **n >= m.log_number) {
            log::check_version(&*fs, &log_path(dir, n))?;
        }
        if strict {
            // Strict refuses damage without modifying anything, but replay may spill segments
            // and rewrite the manifest before it reaches the damage: check every log first.
            for &n in logs.iter().filter(|n| **n >= m.log_number) {
                let path = log_path(dir, n);
                let out = log::replay::<()>(
                    &*fs,
                    &path,
                    true,
                    replay_threads,
                    max_chunk,
                    &|_, _| Ok(()),
                    &mut |_| Ok(()),
                )?;
                if let Some(d) = out.damage {
                    if !d.tail || logs.last() != Some(&n) {
                        return Err(Error::Corruption {
                            file: path,
                            offset: d.offset,
                            reason: d.reason,
                        });
                    }
                }
            }
        }
        for &n in logs.iter().filter(|n| **n >= m.log_number) {
            let path = log_path(dir, n);
            if stopped {
                // The later logs were set aside or removed before the damaged one was truncated.
                break;
            }
            // Mapped whole for the replay; afterwards only its valid frames stay mapped (below).
            let map = fs.map(&path).map_err(|e| Error::io(&path, e))?;
            let (bytes, log_index) = (map.bytes(), memtable.add_log(map.clone())?);
            let mut out = log::replay_map(
                bytes,
                strict,
                replay_threads,
                max_chunk,
                &move |c: &mut Replayed, rec| fold_replayed(log_index, bytes, c, rec),
                &mut |c| {
                    next_seq = next_seq.max(c.next_seq);
                    clock.observe(c.clock);
                    memtable.absorb(c.entries)?;
                    for (row, i) in c.idem {
                        idem.insert(&row, &i.key, i.at_ms, idempotency::from_log(&i.outcome));
                    }
                    if memtable.bytes() > options.memtable_budget {
                        // Keep memory bounded while replaying a long log: spill to a segment. The
                        // manifest keeps pointing at this log, so a crash now replays it again
                        // over the segment, which is harmless (identical entries, same seq).
                        let id = file_ids;
                        file_ids += 1;
                        let full = Memtable::replayed(memtable.build());
                        let seg =
                            write_segment(&*fs, dir, id, full.len() as u64, None, &mut |w| {
                                let mut it = full.iter_all();
                                while let Some(e) = it.next_entry()? {
                                    w.add(&e)?;
                                }
                                Ok(())
                            })?;
                        segments.extend(seg.map(Arc::new));
                        let spilled = Manifest {
                            next_file: file_ids,
                            segments: segment_records(&segments),
                            last_seq: next_seq.saturating_sub(1),
                            clock: clock.persisted(),
                            ..m.clone()
                        };
                        manifest::write(&*fs, dir, &spilled)?;
                    }
                    Ok(())
                },
            )?;
            report.log_records_replayed += out.records;
            report.log_bytes_replayed += out.valid_len;
            // The whole-file map goes before the damaged tail (if any) is truncated and before
            // the log is appended to (fs.rs invariant 1); the slots get the valid frames mapped
            // anew below.
            memtable.replace_log(log_index, Arc::new(Vec::new()));
            // A log is fsynced before the next one is created, so only the last log can have
            // been torn by a crash: damage at the end of an earlier one is damage in the
            // middle of the sequence.
            let last = logs.last() == Some(&n);
            // Damage no crash causes (bit rot, a bad sector, a copy gone wrong): what is
            // dropped may hold acknowledged writes, and is kept aside (`kept_dropped`).
            let keep_aside = out
                .damage
                .as_ref()
                .is_some_and(|d| !(strict || d.tail && last));
            if let Some(d) = out.damage.as_ref().filter(|_| keep_aside) {
                // Before the truncation; without the preallocated zeros past the last written
                // byte; never over an earlier copy (damage can recur at the same offset).
                let dropped = &bytes[out.valid_len as usize..];
                let written = dropped.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
                let to = aside_name(&*fs, &format!("{}.dropped-at-{}", path.display(), d.offset));
                let mut f = fs.create(&to).map_err(|e| Error::io(&to, e))?;
                f.write_all(&dropped[..written])
                    .and_then(|()| f.sync())
                    .map_err(|e| Error::io(&to, e))?;
                tracing::warn!(
                    file = %path.display(),
                    kept = %to.display(),
                    "log damaged before its end: the bytes dropped and any later logs are kept aside (*.dropped*)"
                );
                report.kept_dropped.push(to);
            }
            drop(map);
            if let Some(d) = out.damage {
                if strict && (!d.tail || !last) {
                    return Err(Error::Corruption {
                        file: path,
                        offset: d.offset,
                        reason: d.reason,
                    });
                }
                tracing::warn!(
                    file = %path.display(),
                    offset = d.offset,
                    dropped = out.file_len - out.valid_len,
                    reason = %d.reason,
                    "log damaged: truncating at the first bad frame"
                );
                report.truncated_at = Some(d.offset);
                report.bytes_dropped += out.file_len - out.valid_len;
                // Everything after the first bad frame is dropped, later logs included (set
                // aside when the damage was not a crash's torn tail, see `kept_dropped`), and
                // durably so before the truncation: a crash in between must not leave a clean
                // log followed by later ones, which the next open would replay past the hole.
                for &later in logs.iter().filter(|l| **l > n) {
                    let lp = log_path(dir, later);
                    report.bytes_dropped += fs.len(&lp).unwrap_or(0);
                    if keep_aside {
                        let to = aside_name(&*fs, &format!("{}.dropped", lp.display()));
                        fs.rename(&lp, &to).map_err(|e| Error::io(&lp, e))?;
                        report.kept_dropped.push(to);
                    } else {
                        fs.remove(&lp).map_err(|e| Error::io(&lp, e))?;
                    }
                }
                fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
                fs.truncate(&path, out.valid_len)
                    .map_err(|e| Error::io(&path, e))?;
                stopped = true;
                out.file_len = out.valid_len;
            }
            if out.records > 0 {
                let valid = fs
                    .map_prefix(&path, out.valid_len)
                    .map_err(|e| Error::io(&path, e))?;
                memtable.replace_log(log_index, valid);
            }
            active = Some((n, out.valid_len, out.file_len, out.version));
            replayed.push(n);
        }

        let memtable = Memtable::replayed(memtable.build());
        let next_file = AtomicU64::new(file_ids);
        // Preallocation serves fsyncs: in `None` durability the log is never fsynced, and the
        // zeros would only double what it writes.
        let prealloc = match options.durability {
            Durability::None => 0,
            _ => options.log_prealloc,
        };
        let log = match active {
            Some((n, len, file_len, version))
                if len >= log::LOG_HEADER_LEN && version == crate::codec::LOG_FORMAT_VERSION =>
            {
                LogWriter::open(&*fs, &log_path(dir, n), n, len, file_len, prealloc)?
            }
            Some((n, len, _, _)) if len < log::LOG_HEADER_LEN => {
                LogWriter::create(&*fs, &log_path(dir, n), n, prealloc)?
            }
            // A log of an older format is never appended to: a new one follows it (both are
            // replayed, in id order, until the next flush).
            Some(_) | None => {
                let n = next_file.fetch_add(1, Ordering::SeqCst);
                LogWriter::create(&*fs, &log_path(dir, n), n, prealloc)?
            }
        };
        fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;

        let mut floors: BTreeMap<Vec<u8>, u64> = m.family_floors.iter().cloned().collect();
        let stored: Vec<FamilyDescriptor> = m.families.iter().map(FamilyDescriptor::from).collect();
        let families = if options.families.is_empty() {
            stored.clone()
        } else {
            options.families
        };
        validate_families(&families)?;
        for old in &stored {
            if !families.iter().any(|f| f.name == old.name) {
                floors.insert(old.name.clone(), next_seq);
            }
        }
        let log_floor = replayed.first().copied().unwrap_or(log.number);
        let retired_logs: Vec<u64> = replayed.into_iter().filter(|n| *n < log.number).collect();
        let mut store = RegionStore {
            fs,
            dir: dir.to_path_buf(),
            durability: options.durability,
            memtable_budget: options.memtable_budget,
            rules: Rules::new(&families, &floors),
            families,
            floors,
            keeps_row: options.owns_row.clone(),
            owns_row: options.owns_row,
            background_flush: options.background_flush,
            background_write_rate: options.background_write_rate,
            log_prealloc: prealloc,
            flush_hurry: Arc::default(),
            memtable,
            frozen: None,
            version_marker_during_flush: false,
            segments,
            log,
            log_floor,
            retired_logs,
            next_file,
            next_seq,
            clock,
            poisoned: None,
            last_sync: Instant::now(),
            unsynced_writes: 0,
            stats: RegionStats::default(),
            reads: AtomicU64::new(0),
            reserved: Arc::default(),
            idem,
        };
        if fresh || store.families != stored || log_floor != m.log_number {
            store.write_manifest(&store.segments, log_floor)?;
        }
        // Files no manifest names: orphans of an interrupted flush or compaction, old logs.
        let live: BTreeSet<u64> = store.segments.iter().map(|s| s.id).collect();
        for id in seg_files.into_iter().filter(|id| !live.contains(id)) {
            let _ = store.fs.remove(&seg_path(dir, id));
        }
        for id in logs.into_iter().filter(|id| *id < m.log_number) {
            let _ = store.fs.remove(&log_path(dir, id));
        }
        if store.memtable.bytes() > store.memtable_budget {
            store.flush()?;
        }
        report.duration = started.elapsed();
        store.stats.recovery_micros =
            u64::try_from(report.duration.as_micros()).unwrap_or(u64::MAX);
        store.stats.recovery_log_records = report.log_records_replayed;
        store.stats.recovery_bytes_dropped = report.bytes_dropped;
        Ok((store, report))
    }

    fn write_manifest(&self, segments: &[Arc<Segment>], log_number: u64) -> Result<()> {
        let m = Manifest {
            next_file: self.next_file.load(Ordering::SeqCst),
            log_number,
            segments: segment_records(segments),
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
    }

    /// Restrict the rows reads see to `pred`, while compactions keep every row of the last
    /// [`RegionStore::set_owns_row`]: a narrowing that may still be undone (a split before
    /// its commit) must not let a compaction delete the rows it hides. Make it final with
    /// `set_owns_row(pred)`, or undo it with `set_owns_row(wider)`.
    pub fn narrow_reads(&mut self, pred: Option<RowPredicate>) {
        self.owns_row = pred;
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

    fn sources_from(&self, row: Option<&[u8]>) -> Result<MergeIter<'_>> {
        let mut sources: Vec<Box<dyn EntrySource<'_> + '_>> =
            Vec::with_capacity(2 + self.segments.len());
        for mem in self.memtables() {
            sources.push(Box::new(match row {
                Some(r) => mem.iter_from(r),
                None => mem.iter_all(),
            }));
        }
        for s in &self.segments {
            sources.push(Box::new(s.iter_from(row)?));
        }
        MergeIter::new(sources)
    }

    /// Sources positioned at `row`, leaving out the segments whose row filter excludes it.
    fn sources_for_row(&self, row: &[u8]) -> Result<MergeIter<'_>> {
        let mut sources: Vec<Box<dyn EntrySource<'_> + '_>> = Vec::new();
        for mem in self.memtables() {
            sources.push(Box::new(mem.iter_from(row)));
        }
        for s in self.segments.iter().filter(|s| s.may_contain_row(row)) {
            sources.push(Box::new(s.iter_from(Some(row))?));
        }
        MergeIter::new(sources)
    }

    /// One step of a reversed scan: the greatest row below `upper` in any source (`None` bound:
    /// the greatest row), with a merge positioned at it over only the sources that hold it.
    fn prev_row(&self, upper: Option<&[u8]>) -> Result<Option<(Vec<u8>, MergeIter<'_>)>> {
        let mems: Vec<(&Memtable, Option<&[u8]>)> = self
            .memtables()
            .map(|m| (m, m.last_row_before(upper)))
            .collect();
        let mut lasts = Vec::with_capacity(self.segments.len());
        for s in &self.segments {
            lasts.push(s.last_row_before(upper)?);
        }
        let in_mem = mems.iter().filter_map(|(_, last)| *last);
        let Some(best) = lasts.iter().flatten().copied().chain(in_mem).max() else {
            return Ok(None);
        };
        let row = best.to_vec();
        let mut sources: Vec<Box<dyn EntrySource<'_> + '_>> = Vec::new();
        for (mem, last) in &mems {
            if *last == Some(best) {
                sources.push(Box::new(mem.iter_from(&row)));
            }
        }
        for (s, last) in self.segments.iter().zip(&lasts) {
            if *last == Some(best) {
                sources.push(Box::new(s.iter_from(Some(&row))?));
            }
        }
        Ok(Some((row, MergeIter::new(sources)?)))
    }

    /// Read `row` from `it` (positioned at it) as the store's reads see it.
    fn visible_row(
        &self,
        it: &mut MergeIter<'_>,
        row: &[u8],
        read: &ReadSpec,
        now_ms: i64,
        filter: Option<&dyn RowFilter>,
    ) -> Result<Option<Row>> {
        if !self.owns(row) || filter.is_some_and(|f| !f.accept_key(row)) {
            skip_row(it, row)?;
            return Ok(None);
        }
        let mut cells = Vec::new();
        collect_row(it, row, read, &self.rules, now_ms, &mut cells)?;
        if let Some(f) = filter {
            if !f.accept_row(row, &mut cells) {
                return Ok(None);
            }
        }
        Ok((!cells.is_empty()).then(|| Row {
            key: row.to_vec(),
            cells,
        }))
    }

    /// The visible cells of one row, or `None` if it has none.
    pub fn get(&self, row: &[u8], read: &ReadSpec) -> Result<Option<Row>> {
        self.get_filtered(row, read, None)
    }

    /// [`RegionStore::get`] through a filter.
    pub fn get_filtered(
        &self,
        row: &[u8],
        read: &ReadSpec,
        filter: Option<&dyn RowFilter>,
    ) -> Result<Option<Row>> {
        self.check_usable()?;
        check_row(row)?;
        self.check_read(read)?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        let mut it = self.sources_for_row(row)?;
        if it.peek().is_none_or(|e| e.row != row) {
            return Ok(None);
        }
        self.visible_row(&mut it, row, read, wall_ms(), filter)
    }

    /// The latest visible version of one column.
    fn latest(&self, row: &[u8], family: &[u8], qualifier: &[u8]) -> Result<Option<Cell>> {
        let read = ReadSpec {
            columns: ColumnSelection(vec![ColumnSpec::Column(
                family.to_vec(),
                qualifier.to_vec(),
            )]),
            time_range: TimeRange::ALL,
            max_versions: 1,
        };
        Ok(self.get(row, &read)?.and_then(|mut r| r.cells.pop()))
    }

    /// One page of a range scan, forward or reversed. Streams: only the rows of the page (and
    /// one row at a time while looking for them) are held in memory.
    pub fn scan(&self, spec: &ScanSpec, limits: ScanLimits) -> Result<ScanPage> {
        self.check_usable()?;
        self.check_read(&spec.read)?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        let now_ms = wall_ms();
        let filter = spec.filter.as_deref();
        let max_rows = limits.max_rows;
        let mut page = ScanPage::default();
        let mut bytes = 0usize;
        // With `max_rows == 0` the page is full from the start: the scan only finds out whether
        // any row matches (`complete`).
        let mut full = max_rows == 0;
        let mut take = |row: Row, page: &mut ScanPage| -> bool {
            if full {
                return false;
            }
            bytes += row_bytes(&row);
            page.rows.push(row);
            full = page.rows.len() >= max_rows || bytes >= limits.max_bytes;
            true
        };
        if !spec.reversed {
            let start = match &spec.low {
                Bound::Unbounded => None,
                Bound::Included(k) => Some(k.clone()),
                Bound::Excluded(k) => Some(row_successor(k)),
            };
            let mut it = self.sources_from(start.as_deref())?;
            // The sources start at the low bound: only the high one needs checking.
            let below_high = |row: &[u8]| match &spec.high {
                Bound::Unbounded => true,
                Bound::Included(k) => row <= k.as_slice(),
                Bound::Excluded(k) => row < k.as_slice(),
            };
            while let Some(first) = it.peek().copied() {
                let row = first.row;
                if !below_high(row) {
                    break;
                }
                if let Some(r) = self.visible_row(&mut it, row, &spec.read, now_ms, filter)? {
                    if !take(r, &mut page) {
                        return Ok(page);
                    }
                }
            }
        } else {
            let mut upper = match &spec.high {
                Bound::Unbounded => None,
                Bound::Included(k) => Some(row_successor(k)),
                Bound::Excluded(k) => Some(k.clone()),
            };
            while let Some((row, mut it)) = self.prev_row(upper.as_deref())? {
                if !spec.contains(&row) {
                    break;
                }
                if let Some(r) = self.visible_row(&mut it, &row, &spec.read, now_ms, filter)? {
                    if !take(r, &mut page) {
                        return Ok(page);
                    }
                }
                upper = Some(row);
            }
        }
        page.complete = true;
        Ok(page)
    }

    fn resolve_ts(&mut self, ts: Option<Timestamp>) -> Timestamp {
        match ts {
            Some(t) if t != LATEST_TIMESTAMP => t,
            _ => self.clock.now(),
        }
    }

    fn resolve_delete_ts(&mut self, ts: Option<Timestamp>) -> Timestamp {
        match ts {
            Some(t) if t != LATEST_TIMESTAMP => t,
            _ => self.clock.now_for_delete(),
        }
    }

    /// The effects of `mutations` on `row`, appended to `out`.
    fn mutation_effects(
        &mut self,
        row: &[u8],
        mutations: Vec<Mutation>,
        out: &mut Vec<LogCell>,
    ) -> Result<()> {
        for m in &mutations {
            if let Some(f) = m.family() {
                self.check_family(f)?;
            }
        }
        let cell = |family: Vec<u8>, qualifier: Option<Vec<u8>>, ts, kind: Kind, value| LogCell {
            family,
            qualifier,
            ts,
            kind: kind as u8,
            value,
        };
        for m in mutations {
            match m {
                Mutation::Put {
                    family,
                    qualifier,
                    timestamp,
                    value,
                } => {
                    let ts = self.resolve_ts(timestamp);
                    out.push(cell(family, Some(qualifier), ts, Kind::Put, value));
                }
                Mutation::DeleteVersion {
                    family,
                    qualifier,
                    timestamp,
                } => {
                    let ts = match timestamp {
                        Some(t) if t != LATEST_TIMESTAMP => t,
                        _ => match self.latest(row, &family, &qualifier)? {
                            Some(c) => c.timestamp,
                            None => continue,
                        },
                    };
                    out.push(cell(
                        family,
                        Some(qualifier),
                        ts,
                        Kind::DeleteVersion,
                        Vec::new(),
                    ));
                }
                Mutation::DeleteColumn {
                    family,
                    qualifier,
                    timestamp,
                } => {
                    let ts = self.resolve_delete_ts(timestamp);
                    out.push(cell(
                        family,
                        Some(qualifier),
                        ts,
                        Kind::DeleteColumn,
                        Vec::new(),
                    ));
                }
                Mutation::DeleteFamily { family, timestamp } => {
                    let ts = self.resolve_delete_ts(timestamp);
                    out.push(cell(family, None, ts, Kind::DeleteFamily, Vec::new()));
                }
                Mutation::DeleteRow { timestamp } => {
                    let ts = self.resolve_delete_ts(timestamp);
                    for f in &self.families {
                        out.push(cell(
                            f.name.clone(),
                            None,
                            ts,
                            Kind::DeleteFamily,
                            Vec::new(),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Read-modify-write of several columns: `combine(old, arg)` gives the new value.
    fn read_modify_write<A>(
        &mut self,
        row: &[u8],
        columns: &[(Vec<u8>, Vec<u8>, A)],
        combine: &Combine<A>,
        out: &mut Vec<LogCell>,
    ) -> Result<Vec<Cell>> {
        check_row(row)?;
        for (f, _, _) in columns {
            self.check_family(f)?;
        }
        let read = ReadSpec {
            columns: ColumnSelection(
                columns
                    .iter()
                    .map(|(f, q, _)| ColumnSpec::Column(f.clone(), q.clone()))
                    .collect(),
            ),
            time_range: TimeRange::ALL,
            max_versions: 1,
        };
        let current: Vec<Cell> = self.get(row, &read)?.map(|r| r.cells).unwrap_or_default();
        let now = self.clock.now();
        let mut results: Vec<Cell> = Vec::with_capacity(columns.len());
        for (f, q, arg) in columns {
            // A column named twice in one request combines onto its own earlier result.
            let same = |c: &&Cell| &c.family == f && &c.qualifier == q;
            let old = results
                .iter()
                .rev()
                .find(same)
                .or_else(|| current.iter().find(same));
            let (old_value, old_ts) = match old {
                Some(c) => (Some(c.value.as_slice()), Some(c.timestamp)),
                None => (None, None),
            };
            let value = combine(f, q, old_value, arg)?;
            // Never hide the new value behind an existing version with a newer timestamp.
            let ts = match old_ts {
                Some(t) if t >= now => t.saturating_add(1),
                _ => now,
            };
            results.push(Cell {
                family: f.clone(),
                qualifier: q.clone(),
                timestamp: ts,
                value,
            });
        }
        for c in &results {
            out.push(LogCell {
                family: c.family.clone(),
                qualifier: Some(c.qualifier.clone()),
                ts: c.timestamp,
                kind: Kind::Put as u8,
                value: c.value.clone(),
            });
        }
        Ok(results)
    }

    /// Log and apply the effects of one operation on one row.
    ///
    /// With an idempotency key, the key and `outcome` are recorded in the same log record as
    /// the effects (even if there are none), then remembered.
    fn commit(
        &mut self,
        row: Vec<u8>,
        cells: Vec<LogCell>,
        key: Option<Vec<u8>>,
        outcome: WriteOutcome,
    ) -> Result<WriteOutcome> {
        if cells.is_empty() && key.is_none() {
            return Ok(outcome);
        }
        let at_ms = self.idem.now();
        let rec = LogRecord {
            seq: self.next_seq,
            clock: self.clock.persisted(),
            row,
            cells,
            idem: key.map(|key| LogIdem {
                key,
                at_ms,
                outcome: idempotency::to_log(&outcome),
            }),
        };
        self.log.add(&rec)?;
        self.next_seq += rec.cells.len() as u64;
        if self.frozen.is_some()
            && rec
                .cells
                .iter()
                .any(|c| c.kind == Kind::DeleteVersion as u8)
        {
            self.version_marker_during_flush = true;
        }
        if let Some(i) = &rec.idem {
            self.idem.insert(&rec.row, &i.key, at_ms, outcome.clone());
        }
        apply_record(&mut self.memtable, rec)?;
        Ok(outcome)
    }

    /// Apply one operation; with a key already remembered for its row, answer the remembered
    /// outcome instead.
    fn apply_keyed(&mut self, write: KeyedWrite) -> Result<WriteOutcome> {
        let KeyedWrite { op, key } = write;
        if let Some(k) = &key {
            if k.is_empty() || k.len() > MAX_IDEMPOTENCY_KEY {
                return Err(Error::InvalidArgument(format!(
                    "an idempotency key must be 1 to {MAX_IDEMPOTENCY_KEY} bytes"
                )));
            }
            check_row(op.row())?;
            if let Some(outcome) = self.idem.get(op.row(), k) {
                return Ok(outcome);
            }
        }
        self.apply_op(op, key)
    }

    fn apply_op(&mut self, op: WriteOp, key: Option<Vec<u8>>) -> Result<WriteOutcome> {
        let mut cells = Vec::new();
        match op {
            WriteOp::Mutate(m) => {
                check_row(&m.row)?;
                self.mutation_effects(&m.row, m.mutations, &mut cells)?;
                self.commit(m.row, cells, key, WriteOutcome::Mutated)
            }
            WriteOp::Increment(inc) => {
                let combine = |f: &[u8], q: &[u8], old: Option<&[u8]>, amount: &i64| {
                    let column = || lossy_column(f, q);
                    let old = match old {
                        None => 0,
                        Some(v) => {
                            let bytes: [u8; 8] = v.try_into().map_err(|_| Error::NotACounter {
                                column: column(),
                                len: v.len(),
                            })?;
                            i64::from_be_bytes(bytes)
                        }
                    };
                    let new = old
                        .checked_add(*amount)
                        .ok_or_else(|| Error::CounterOverflow { column: column() })?;
                    Ok(new.to_be_bytes().to_vec())
                };
                let results =
                    self.read_modify_write(&inc.row, &inc.columns, &combine, &mut cells)?;
                self.commit(inc.row, cells, key, WriteOutcome::Cells(results))
            }
            WriteOp::Append(app) => {
                let max = app.max_value.unwrap_or(usize::MAX);
                let combine = move |f: &[u8], q: &[u8], old: Option<&[u8]>, suffix: &Vec<u8>| {
                    let old = old.unwrap_or_default();
                    if old.len().saturating_add(suffix.len()) > max {
                        return Err(Error::InvalidArgument(format!(
                            "appending {} bytes to {}:{} ({} bytes) would pass the {max}-byte value limit",
                            suffix.len(),
                            String::from_utf8_lossy(f),
                            String::from_utf8_lossy(q),
                            old.len()
                        )));
                    }
                    let mut v = Vec::with_capacity(old.len() + suffix.len());
                    v.extend_from_slice(old);
                    v.extend_from_slice(suffix);
                    Ok(v)
                };
                let results =
                    self.read_modify_write(&app.row, &app.columns, &combine, &mut cells)?;
                self.commit(app.row, cells, key, WriteOutcome::Cells(results))
            }
            WriteOp::CheckAndMutate(cam) => {
                check_row(&cam.row)?;
                self.check_family(&cam.family)?;
                for m in &cam.mutations {
                    if let Some(f) = m.family() {
                        self.check_family(f)?;
                    }
                }
                let current = self.latest(&cam.row, &cam.family, &cam.qualifier)?;
                let matches = if cam.expected.is_empty() {
                    current.is_none_or(|c| c.value.is_empty())
                } else {
                    current.is_some_and(|c| c.value == cam.expected)
                };
                if !matches {
                    return self.commit(cam.row, cells, key, WriteOutcome::Checked(false));
                }
                self.mutation_effects(&cam.row, cam.mutations, &mut cells)?;
                self.commit(cam.row, cells, key, WriteOutcome::Checked(true))
            }
        }
    }

    /// Apply a batch of writes with one log write and (in `Sync` mode) one fsync, then return
    /// one result per operation, in order. Each operation is atomic for its row; the batch is
    /// not atomic as a whole. If the log write or fsync fails, the store is poisoned and every
    /// operation of the batch fails with `Error::Poisoned` (none is acknowledged).
    ///
    /// Keyed writes ([`KeyedWrite`]) are handled as by [`RegionStore::write_batch_keyed`].
    pub fn write_batch<W: Into<KeyedWrite>>(&mut self, ops: Vec<W>) -> Vec<Result<WriteOutcome>> {
        self.write_batch_inner(ops, false).0
    }

    /// [`RegionStore::write_batch`] with an optional idempotency key per operation. A key is
    /// scoped by the operation's row: if the same key was recorded on that row within the
    /// window (see [`RegionStore::set_idempotency_options`]), the operation is not applied and
    /// its first outcome is returned. The key and the outcome are logged in the same record as
    /// the operation's effects, so they survive a crash exactly when the write does.
    pub fn write_batch_keyed(&mut self, ops: Vec<KeyedWrite>) -> Vec<Result<WriteOutcome>> {
        self.write_batch_inner(ops, false).0
    }

    /// [`RegionStore::write_batch`], except that in `Sync` durability the log is written but
    /// not fsynced: the fsync is handed back as a [`LogSync`] to run on another thread, so that
    /// the owner can serve reads meanwhile. **The results are not durable, and must not be
    /// released, until [`LogSync::run`] succeeded and [`RegionStore::finish_sync`] was told.**
    /// Later batches may be applied before then (their own sync covers this one's bytes too);
    /// a read may see the batch's effects before they are durable, so an owner that must not
    /// show undurable data holds back reads of the rows the batch wrote. In the other modes
    /// (or if there is nothing to fsync) no `LogSync` is returned and the results stand.
    pub fn write_batch_deferred<W: Into<KeyedWrite>>(
        &mut self,
        ops: Vec<W>,
    ) -> (Vec<Result<WriteOutcome>>, Option<LogSync>) {
        self.write_batch_inner(ops, true)
    }

    /// Record how a [`LogSync`] ended. A failed fsync poisons the store (and the batches it
    /// covered must be answered with the error): the error is returned.
    pub fn finish_sync(&mut self, sync: LogSync, outcome: Result<Duration>) -> Result<()> {
        match outcome {
            // Poisoned meanwhile: this batch's frames were discarded, so it failed after all.
            Ok(_) if sync.log == self.log.number && self.poisoned.is_some() => {
                Err(Error::Poisoned(self.poisoned.clone().unwrap_or_default()))
            }
            Ok(took) => {
                self.count_fsync(took);
                self.stats.synced_writes += sync.writes;
                if sync.log == self.log.number {
                    self.log.synced_up_to(sync.len);
                }
                Ok(())
            }
            Err(e) => {
                self.poison(&e);
                Err(e)
            }
        }
    }

    fn write_batch_inner<W: Into<KeyedWrite>>(
        &mut self,
        ops: Vec<W>,
        defer: bool,
    ) -> (Vec<Result<WriteOutcome>>, Option<LogSync>) {
        if let Err(e) = self.check_usable() {
            let msg = e.to_string();
            let results = ops
                .iter()
                .map(|_| Err(Error::Poisoned(msg.clone())))
                .collect();
            return (results, None);
        }
        let mut results: Vec<Result<WriteOutcome>> = ops
            .into_iter()
            .map(|w| self.apply_keyed(w.into()))
            .collect();
        let applied = results.iter().filter(|r| r.is_ok()).count() as u64;
        let sync = match self.finish_batch(applied, defer) {
            Ok(sync) => sync,
            Err(e) => {
                self.poison(&e);
                let msg = e.to_string();
                for r in results.iter_mut() {
                    *r = Err(Error::Poisoned(msg.clone()));
                }
                return (results, None);
            }
        };
        self.stats.writes += applied;
        if self.frozen.is_some() && self.memtable.bytes() > self.memtable_budget / 2 {
            // The next memtable is filling up: the running flush must not dawdle.
            self.flush_hurry.store(true, Ordering::Relaxed);
        }
        let limit = if self.background_flush {
            // The owner flushes in the background; inline only if it has fallen far behind.
            self.memtable_budget.saturating_mul(2)
        } else {
            self.memtable_budget
        };
        if self.memtable.bytes() > limit {
            // The batch is durable in the log already (or will be, through `sync`, whose file
            // a flush does not invalidate): a failed flush poisons the store for later calls
            // but does not take back these acknowledgements.
            let _ = self.flush();
        }
        (results, sync)
    }

    /// Hand the batch to the OS, then fsync it as the durability mode says: now, or (`defer`,
    /// `Sync` mode) through the returned [`LogSync`].
    fn finish_batch(&mut self, applied: u64, defer: bool) -> Result<Option<LogSync>> {
        self.log.write_pending()?;
        self.unsynced_writes += applied;
        let due = match self.durability {
            Durability::Sync => true,
            Durability::Interval(d) => self.last_sync.elapsed() >= d,
            Durability::None => false,
        };
        if !due || !self.log.has_unsynced() {
            if self.durability != Durability::Sync {
                // Answered now, without an fsync.
                self.log.keep_written();
            }
            return Ok(None);
        }
        if defer && self.durability == Durability::Sync {
            return Ok(Some(LogSync {
                handle: self.log.sync_handle()?,
                path: self.log.path().to_path_buf(),
                log: self.log.number,
                len: self.log.len(),
                writes: std::mem::take(&mut self.unsynced_writes),
            }));
        }
        self.sync_log()?;
        Ok(None)
    }

    fn sync_log(&mut self) -> Result<()> {
        self.log.write_pending()?;
        let started = Instant::now();
        self.log.sync()?;
        self.count_fsync(started.elapsed());
        self.stats.synced_writes += std::mem::take(&mut self.unsynced_writes);
        Ok(())
    }

    fn count_fsync(&mut self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.stats.fsync_micros = self.stats.fsync_micros.saturating_add(micros);
        self.stats.fsync_max_micros = self.stats.fsync_max_micros.max(micros);
        self.stats.fsyncs += 1;
        self.stats.fsyncs_slow += u64::from(took > SLOW_FSYNC);
        self.last_sync = Instant::now();
    }

    fn single(&mut self, op: WriteOp) -> Result<WriteOutcome> {
        self.write_batch(vec![op])
            .pop()
            .unwrap_or_else(|| Err(Error::InvalidArgument("empty batch".into())))
    }

    /// Apply the mutations of one row atomically (durable per the durability mode).
    pub fn mutate_row(&mut self, m: RowMutation) -> Result<()> {
        self.single(WriteOp::Mutate(m)).map(|_| ())
    }

    /// Increment counters of one row atomically; returns the new values (8-byte big-endian).
    pub fn increment(&mut self, inc: Increment) -> Result<Vec<Cell>> {
        match self.single(WriteOp::Increment(inc))? {
            WriteOutcome::Cells(c) => Ok(c),
            other => Err(Error::Codec(format!("unexpected outcome {other:?}"))),
        }
    }

    /// Append onto values of one row atomically; returns the new values.
    pub fn append(&mut self, app: Append) -> Result<Vec<Cell>> {
        match self.single(WriteOp::Append(app))? {
            WriteOutcome::Cells(c) => Ok(c),
            other => Err(Error::Codec(format!("unexpected outcome {other:?}"))),
        }
    }

    /// Check one column and, if it matches, apply the mutations atomically.
    pub fn check_and_mutate(&mut self, cam: CheckAndMutate) -> Result<bool> {
        match self.single(WriteOp::CheckAndMutate(cam))? {
            WriteOutcome::Checked(b) => Ok(b),
            other => Err(Error::Codec(format!("unexpected outcome {other:?}"))),
        }
    }

    /// fsync the log now if anything written to it is not yet durable (whatever the mode; a
    /// deferred batch whose [`LogSync`] has not finished is then durable too). A failed fsync
    /// poisons the store.
    pub fn sync(&mut self) -> Result<()> {
        self.check_usable()?;
        if self.log.has_unsynced() {
            if let Err(e) = self.sync_log() {
                self.poison(&e);
                return Err(e);
            }
        }
        Ok(())
    }

    /// In `Interval` mode, fsync the log if there are unsynced writes and the interval has
    /// elapsed since the last fsync. A failed fsync poisons the store.
    pub fn sync_if_due(&mut self) -> Result<()> {
        self.check_usable()?;
        match self.durability {
            Durability::Interval(d) if self.last_sync.elapsed() >= d => self.sync(),
            _ => Ok(()),
        }
    }

    /// Write the memtables to a new segment and rotate the log (FORMAT.md "Flush"), now.
    /// Afterwards, if the segments have piled up, merges some (size-tiered minor compaction),
    /// unless the owner compacts in the background ([`StoreOptions::background_flush`]).
    pub fn flush(&mut self) -> Result<()> {
        self.check_usable()?;
        let r = self.flush_inner();
        match &r {
            Err(e) => self.poison(e),
            Ok(()) if !self.background_flush => self.compact_tiered(),
            Ok(()) => {}
        }
        r
    }

    /// Whether the memtable has reached its budget and no flush is under way: the owner of a
    /// store with [`StoreOptions::background_flush`] should call [`RegionStore::flush_task`].
    pub fn wants_flush(&self) -> bool {
        self.poisoned.is_none()
            && self.frozen.is_none()
            && self.memtable.bytes() > self.memtable_budget
    }

    /// Freeze the memtable for a flush on another thread: sync the log, start a new one, and
    /// hand back a task that writes the frozen memtable to a segment. Reads keep seeing the
    /// frozen memtable until [`RegionStore::install_flush`]. `None` if the memtable is empty
    /// or a flush is already under way. A failure poisons the store.
    pub fn flush_task(&mut self) -> Result<Option<FlushTask>> {
        self.check_usable()?;
        if self.frozen.is_some() || self.memtable.is_empty() {
            return Ok(None);
        }
        let r = self.freeze();
        if let Err(e) = &r {
            self.poison(e);
        }
        r.map(Some)
    }

    fn freeze(&mut self) -> Result<FlushTask> {
        // The frozen records are durable before any later write lands in the next log, so a
        // damaged tail can only ever drop a suffix of the writes.
        self.sync_log()?;
        // The segment's id is below the new log's: a store reopened on this directory
        // allocates past the log, so a task that outlives its store cannot clobber a file of
        // the new one.
        let id = self.alloc_file();
        let new_log = self.start_log()?;
        let old = std::mem::replace(&mut self.log, new_log);
        self.retired_logs.push(old.number);
        let mem = Arc::new(std::mem::take(&mut self.memtable));
        self.frozen = Some(mem.clone());
        self.unsynced_writes = 0;
        self.flush_hurry = Arc::default();
        self.version_marker_during_flush = false;
        Ok(FlushTask {
            fs: self.fs.clone(),
            dir: self.dir.clone(),
            id,
            mem,
            pace: self.pace(self.flush_hurry.clone()),
            older: self.segments.clone(),
            rules: self.rules.clone(),
        })
    }

    /// Install a finished background flush: the manifest names its segment and the log that
    /// followed the freeze, then the older logs are deleted. The output of a flush that a
    /// synchronous flush overtook (the store flushed or reopened meanwhile) is deleted. A
    /// failed flush poisons the store (its records are still in the logs: nothing is lost).
    pub fn install_flush(&mut self, out: FlushOutput) -> Result<RetiredMemtable> {
        let current = self
            .frozen
            .as_ref()
            .is_some_and(|f| Arc::ptr_eq(f, &out.mem));
        let mut retired = RetiredMemtable::new(out.mem, &self.fs);
        let segment = match out.segment {
            Ok(seg) => seg,
            Err(e) if current => {
                self.poison(&e);
                return Err(e);
            }
            Err(_) => return Ok(retired),
        };
        let unmasked = self.version_marker_during_flush && out.pruned > 0;
        if !current || self.poisoned.is_some() || unmasked {
            if let Some(seg) = &segment {
                let _ = self.fs.remove(seg.path());
            }
            if current && unmasked {
                // A version marker written meanwhile may unmask a version the segment left
                // out: flush again, both memtables at once, seeing every marker.
                return self.flush().map(|()| retired);
            }
            return self.check_usable().map(|()| retired);
        }
        let mut segments = self.segments.clone();
        segments.extend(segment.map(Arc::new));
        if let Err(e) = self.write_manifest(&segments, self.log.number) {
            self.poison(&e);
            return Err(e);
        }
        self.log_floor = self.log.number;
        retired.logs = std::mem::take(&mut self.retired_logs)
            .into_iter()
            .map(|id| log_path(&self.dir, id))
            .collect();
        self.segments = segments;
        self.frozen = None;
        self.stats.flushes += 1;
        Ok(retired)
    }

    /// A new log, holding the live idempotency keys (durably, before any manifest can make the
    /// logs that recorded them obsolete), its directory entry synced.
    fn start_log(&mut self) -> Result<LogWriter> {
        let log_id = self.alloc_file();
        let mut new_log = LogWriter::create(
            &*self.fs,
            &log_path(&self.dir, log_id),
            log_id,
            self.log_prealloc,
        )?;
        let live = self.idem.live();
        if !live.is_empty() {
            for (row, i) in live {
                new_log.add(&LogRecord {
                    seq: self.next_seq,
                    clock: self.clock.persisted(),
                    row,
                    cells: Vec::new(),
                    idem: Some(i),
                })?;
            }
            new_log.write_pending()?;
            new_log.sync()?;
        }
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))?;
        Ok(new_log)
    }

    /// How a background segment write is paced, if at all.
    fn pace(&self, hurry: Arc<AtomicBool>) -> Option<Pace> {
        (self.background_flush && self.background_write_rate > 0).then_some(Pace {
            bytes_per_sec: self.background_write_rate,
            hurry,
        })
    }

    fn remove_retired_logs(&mut self) {
        for id in std::mem::take(&mut self.retired_logs) {
            let path = log_path(&self.dir, id);
            if let Err(e) = self.fs.remove(&path) {
                tracing::warn!(file = %path.display(), error = %e, "could not delete old log");
            }
        }
    }

    fn flush_inner(&mut self) -> Result<()> {
        self.log.write_pending()?;
        if self.memtable.is_empty() && self.frozen.is_none() {
            return Ok(());
        }
        let id = self.alloc_file();
        let (_, entries) = self.memtable_totals();
        let mut it = MergeIter::new(
            self.memtables()
                .map(|m| Box::new(m.iter_all()) as Box<dyn EntrySource<'_> + '_>)
                .collect(),
        )?;
        let (older, rules) = (&self.segments, &self.rules);
        let seg = write_segment(&*self.fs, &self.dir, id, entries as u64, None, &mut |w| {
            write_flushed(&mut || it.next(), older, rules, wall_ms(), w).map(|_| ())
        })?;
        drop(it);
        let new_log = self.start_log()?;
        let mut segments = self.segments.clone();
        segments.extend(seg.map(Arc::new));
        self.write_manifest(&segments, new_log.number)?;
        let old_log = std::mem::replace(&mut self.log, new_log);
        self.retired_logs.push(old_log.number);
        drop(old_log);
        self.log_floor = self.log.number;
        self.remove_retired_logs();
        self.segments = segments;
        self.memtable = Memtable::default();
        self.frozen = None;
        self.version_marker_during_flush = false;
        self.unsynced_writes = 0;
        self.stats.flushes += 1;
        Ok(())
    }

    /// Compact synchronously. Minor: merge every segment, keeping every entry. Major: flush
    /// first, then keep only what reads can see (dropping masked cells, expired cells, versions
    /// beyond each family's maximum, and the delete markers).
    pub fn compact(&mut self, major: bool) -> Result<()> {
        self.check_usable()?;
        if major {
            self.flush()?;
        }
        match self.compaction_task(major) {
            Some(mut task) => {
                // The caller waits for this one.
                task.pace = None;
                let out = task.run()?;
                self.install_compaction(out)
            }
            None => Ok(()),
        }
    }

    /// Prepare a compaction that can run on another thread ([`CompactionTask::run`]); its
    /// result is installed with [`RegionStore::install_compaction`]. `None` if there is
    /// nothing to do (no segment, or fewer than two for a minor compaction). The task holds its
    /// input segments until its output is installed or dropped: other compactions leave them
    /// alone meanwhile. A major task drops delete markers only if it covers every segment and
    /// the memtable is empty now (flush first).
    pub fn compaction_task(&self, major: bool) -> Option<CompactionTask> {
        let inputs = self.unreserved();
        if self.poisoned.is_some() || inputs.is_empty() || (!major && inputs.len() < 2) {
            return None;
        }
        Some(self.task_for(inputs, major))
    }

    /// Segments no outstanding compaction holds.
    fn unreserved(&self) -> Vec<Arc<Segment>> {
        let reserved = self.reserved.lock();
        self.segments
            .iter()
            .filter(|s| !reserved.contains(&s.id))
            .cloned()
            .collect()
    }

    fn task_for(&self, inputs: Vec<Arc<Segment>>, major: bool) -> CompactionTask {
        let ids: Vec<u64> = inputs.iter().map(|s| s.id).collect();
        self.reserved.lock().extend(ids.iter().copied());
        let reservation = Reservation {
            set: self.reserved.clone(),
            ids,
        };
        let id = self.alloc_file();
        // The output's id is claimed on disk at once, as an empty `.tmp`: a store opened on
        // this directory while the task is still pending (its own store dropped without a
        // close) then hands out ids above it, so the task can never rename onto one of that
        // store's segments (FORMAT.md §8 step 2). Best effort: the rename below refuses to
        // replace a file anyway.
        let _ = self
            .fs
            .create(&seg_path(&self.dir, id).with_extension("seg.tmp"));
        CompactionTask {
            // Compactions are never urgent: always paced (when pacing is on).
            pace: self.pace(Arc::default()),
            reservation,
            fs: self.fs.clone(),
            dir: self.dir.clone(),
            id,
            drop_markers: major
                && self.memtable.is_empty()
                && self.frozen.is_none()
                && inputs.len() == self.segments.len(),
            inputs,
            major,
            rules: self.rules.clone(),
            now_ms: wall_ms(),
            owns_row: self.keeps_row.clone(),
        }
    }

    /// Size-tiered choice of segments to merge: the four smallest when they are of a similar
    /// size, or the eight smallest when there are too many segments.
    fn tiered_inputs(&self) -> Option<Vec<Arc<Segment>>> {
        let mut by_size = self.unreserved();
        if by_size.len() < TIER_WIDTH {
            return None;
        }
        by_size.sort_by_key(|s| s.info.file_bytes);
        if by_size.len() > MAX_SEGMENTS {
            by_size.truncate(2 * TIER_WIDTH);
            return Some(by_size);
        }
        by_size.truncate(TIER_WIDTH);
        let (small, large) = (
            by_size[0].info.file_bytes,
            by_size[TIER_WIDTH - 1].info.file_bytes,
        );
        (large <= small.saturating_mul(4).max(4 << 20)).then_some(by_size)
    }

    /// Keep the number of segments (and so the cost of a read) bounded after a flush.
    fn compact_tiered(&mut self) {
        while let Some(inputs) = self.tiered_inputs() {
            let task = self.task_for(inputs, false);
            if let Err(e) = task.run().and_then(|out| self.install_compaction(out)) {
                tracing::warn!(dir = %self.dir.display(), error = %e, "tiered compaction failed");
                return;
            }
        }
    }

    /// Replace a compaction's input segments by its output (manifest first, then the old files
    /// are deleted). Fails, leaving the store unchanged, if an input is no longer live.
    pub fn install_compaction(&mut self, out: CompactionOutput) -> Result<()> {
        self.check_usable()?;
        let live: BTreeSet<u64> = self.segments.iter().map(|s| s.id).collect();
        if !out.inputs.iter().all(|id| live.contains(id)) {
            if let Some(seg) = &out.output {
                let _ = self.fs.remove(seg.path());
            }
            return Err(Error::InvalidArgument(
                "compaction inputs are no longer live".into(),
            ));
        }
        let inputs: BTreeSet<u64> = out.inputs.iter().copied().collect();
        let mut segments: Vec<Arc<Segment>> = self
            .segments
            .iter()
            .filter(|s| !inputs.contains(&s.id))
            .cloned()
            .collect();
        segments.extend(out.output.map(Arc::new));
        if let Err(e) = self.write_manifest(&segments, self.log_floor) {
            self.poison(&e);
            return Err(e);
        }
        let old = std::mem::replace(&mut self.segments, segments);
        for s in old.iter().filter(|s| inputs.contains(&s.id)) {
            let _ = self.fs.remove(s.path());
        }
        let _ = self.fs.sync_dir(&self.dir);
        self.stats.compactions += 1;
        Ok(())
    }

    /// For a region split: durably write every raw entry (all versions and delete markers) of
    /// the rows `pred` accepts as a new store in `dest_dir` (one segment and a manifest, both
    /// fsynced), which [`RegionStore::open`] then opens. The families are `options.families`,
    /// or this store's if that is empty.
    pub fn export_rows(
        &mut self,
        pred: &dyn Fn(&[u8]) -> bool,
        dest_dir: &Path,
        options: StoreOptions,
    ) -> Result<()> {
        self.check_usable()?;
        // The idempotency keys of the exported rows go with them, in the new store's log.
        let keys: Vec<(Vec<u8>, LogIdem)> = self
            .idem
            .live()
            .into_iter()
            .filter(|(row, _)| pred(row))
            .collect();
        let fs = &*self.fs;
        fs.create_dir_all(dest_dir)
            .map_err(|e| Error::io(dest_dir, e))?;
        let rules = &self.rules;
        let mut it = self.sources_from(None)?;
        let rows = self.memtable_totals().1 as u64
            + self.segments.iter().map(|s| s.info.entries).sum::<u64>();
        let seg = write_segment(fs, dest_dir, 1, rows, None, &mut |w| {
            copy_raw(&mut it, rules, pred, w)
        })?;
        let families = if options.families.is_empty() {
            self.families.clone()
        } else {
            options.families.clone()
        };
        // Log 2 is written even when empty: the manifest names it as the first live log, and
        // an open refuses a manifest whose first live log is missing (a lost log).
        {
            let mut w = LogWriter::create(fs, &log_path(dest_dir, 2), 2, self.log_prealloc)?;
            for (row, i) in keys {
                w.add(&LogRecord {
                    seq: self.next_seq,
                    clock: self.clock.persisted(),
                    row,
                    cells: Vec::new(),
                    idem: Some(i),
                })?;
            }
            w.write_pending()?;
            w.sync()?;
        }
        let m = Manifest {
            next_file: 3,
            log_number: 2,
            segments: seg
                .iter()
                .map(|s| SegmentRecord {
                    id: s.id,
                    entries: s.info.entries,
                    max_seq: s.info.max_seq,
                    file_bytes: s.info.file_bytes,
                })
                .collect(),
            families: families.iter().map(FamilyRecord::from).collect(),
            family_floors: self.floors.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            last_seq: self.next_seq.saturating_sub(1),
            clock: self.clock.persisted(),
        };
        manifest::write(fs, dest_dir, &m)?;
        if let Some(parent) = dest_dir.parent() {
            fs.sync_dir(parent).map_err(|e| Error::io(parent, e))?;
        }
        Ok(())
    }

    /// Write a consistent, self-contained copy of the store as of now into `dest` (created;
    /// it must not hold a store already): a store opened there reads exactly what this one
    /// reads now, with nothing to replay.
    ///
    /// - Every segment the manifest names gets a second name in `dest` (a hard link where the
    ///   file system allows, else a copy): a later compaction deleting the original leaves the
    ///   copy whole, and the live store is not touched.
    /// - The memtables (the one written to and a frozen one being flushed, if any) are written
    ///   to one new segment in `dest` only, as a flush would write them; the live log, the
    ///   live memtable and a running background flush are left as they are.
    /// - `dest` gets a log holding only the live idempotency keys (so a retried keyed write
    ///   is answered as it would be here) and a manifest naming exactly those files, with the
    ///   store's families, dropped-family floors, last sequence number and clock.
    ///
    /// Writes not yet written to the log (a batch being committed) are not the caller's
    /// business: the caller (the region actor) checkpoints between batches. The store is not
    /// poisoned by a failure here (nothing of it changed); `dest` is then left for the caller to
    /// remove.
    pub fn checkpoint(&mut self, dest: &Path) -> Result<CheckpointReport> {
        self.check_usable()?;
        let fs = &*self.fs;
        fs.create_dir_all(dest).map_err(|e| Error::io(dest, e))?;
        if manifest::read(fs, dest)?.is_some() {
            return Err(Error::InvalidArgument(format!(
                "checkpoint directory {} already holds a store",
                dest.display()
            )));
        }
        let mut report = CheckpointReport::default();
        let mut records = Vec::with_capacity(self.segments.len() + 1);
        for seg in &self.segments {
            let to = seg_path(dest, seg.id);
            let linked = fs
                .link_or_copy(seg.path(), &to)
                .map_err(|e| Error::io(&to, e))?;
            if linked {
                report.linked += 1;
            } else {
                report.copied += 1;
            }
            report.bytes += seg.info.file_bytes;
            records.push(SegmentRecord {
                id: seg.id,
                entries: seg.info.entries,
                max_seq: seg.info.max_seq,
                file_bytes: seg.info.file_bytes,
            });
        }
        // Ids from the live store's sequence: never one of its files, and above every id the
        // copied segments have.
        if !self.memtable.is_empty() || self.frozen.is_some() {
            let id = self.alloc_file();
            let (_, entries) = self.memtable_totals();
            let mut it = MergeIter::new(
                self.memtables()
                    .map(|m| Box::new(m.iter_all()) as Box<dyn EntrySource<'_> + '_>)
                    .collect(),
            )?;
            let (older, rules) = (&self.segments, &self.rules);
            let seg = write_segment(fs, dest, id, entries as u64, None, &mut |w| {
                write_flushed(&mut || it.next(), older, rules, wall_ms(), w).map(|_| ())
            })?;
            if let Some(seg) = seg {
                report.written += 1;
                report.bytes += seg.info.file_bytes;
                records.push(SegmentRecord {
                    id: seg.id,
                    entries: seg.info.entries,
                    max_seq: seg.info.max_seq,
                    file_bytes: seg.info.file_bytes,
                });
            }
        }
        let log_id = self.alloc_file();
        {
            let path = log_path(dest, log_id);
            let mut w = LogWriter::create(fs, &path, log_id, 0)?;
            for (row, i) in self.idem.live() {
                w.add(&LogRecord {
                    seq: self.next_seq,
                    clock: self.clock.persisted(),
                    row,
                    cells: Vec::new(),
                    idem: Some(i),
                })?;
            }
            w.write_pending()?;
            w.sync()?;
            report.bytes += fs.len(&path).map_err(|e| Error::io(&path, e))?;
        }
        let m = Manifest {
            next_file: self.next_file.load(Ordering::SeqCst),
            log_number: log_id,
            segments: records,
            families: self.families.iter().map(FamilyRecord::from).collect(),
            family_floors: self.floors.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            last_seq: self.next_seq.saturating_sub(1),
            clock: self.clock.persisted(),
        };
        manifest::write(fs, dest, &m)?;
        if let Some(parent) = dest.parent() {
            fs.sync_dir(parent).map_err(|e| Error::io(parent, e))?;
        }
        Ok(report)
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

    /// Bytes held by the memtable and the segment files.
    pub fn approximate_size(&self) -> u64 {
        self.memtable_totals().0 as u64
            + self.segments.iter().map(|s| s.info.file_bytes).sum::<u64>()
    }

    /// Figures for metrics.
    pub fn stats(&self) -> RegionStats {
        let (memtable_bytes, memtable_cells) = self.memtable_totals();
        RegionStats {
            memtable_bytes: memtable_bytes as u64,
            memtable_cells: memtable_cells as u64,
            flushing: self.frozen.is_some(),
            segments: self.segments.len() as u64,
            segment_bytes: self.segments.iter().map(|s| s.info.file_bytes).sum(),
            segment_cells: self.segments.iter().map(|s| s.info.entries).sum(),
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
