//! Compactions: size-tiered minor compactions that keep the number of segments a read
//! consults bounded (`tiered_inputs`), major compactions that drop what is masked or expired,
//! as tasks ([`CompactionTask`]) that run on another thread while their inputs are reserved;
//! several tasks may be outstanding at once, each on segments no other holds.
//!
//! Reference segments (shared with the other side of a split, see `split.rs`) are rewritten a
//! few at a time into an ordinary segment holding only the rows the store owns: first thing in
//! a minor compaction asked for, and in the background once no size-tiered merge is due (a
//! merge bounds the segments a read consults; a rewrite frees shared files). Installing it
//! deletes this store's links, and the file goes once the other side has rewritten its own. An
//! output is itself a reference segment when an input was one and the task's ownership
//! predicate is no longer the store's final one (made before a split narrowed the store, or
//! while a narrowing may still be undone).

use super::*;

/// Segments of one size tier that start a merge of the tier, and reference segments rewritten
/// at once (Cassandra's size-tiered `min_threshold`; HBase's `hbase.hstore.compaction.min` is 3).
pub(super) const TIER_WIDTH: usize = 4;
/// Most segments one tiered merge takes (HBase's `hbase.hstore.compaction.max` is 10).
pub(super) const MAX_MERGE: usize = 10;
/// Above this many segments the tiered compaction merges the smallest regardless of sizes.
pub(super) const MAX_SEGMENTS: usize = 12;
/// A segment joins a tier while it is at most this many times the tier's mean size
/// (Cassandra's `bucket_high`)...
const TIER_SPREAD: f64 = 1.5;
/// ...and segments up to this size are one tier whatever their ratio (Cassandra's
/// `min_sstable_size`): small flushes merge early.
const SMALL_SEGMENT: u64 = 4 << 20;

/// Segment ids held by an outstanding compaction; released when dropped (installed or not), so
/// a failed or abandoned task never pins its inputs.
#[derive(Debug)]
pub(super) struct Reservation {
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
    /// The store held more than `MAX_SEGMENTS` segments when the task was made.
    behind: bool,
    /// The inputs are reference segments picked to be rewritten (`reference_inputs`).
    rewrites_references: bool,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    id: u64,
    inputs: Vec<Arc<Segment>>,
    major: bool,
    drop_markers: bool,
    rules: Rules,
    now_ms: i64,
    owns_row: Option<RowPredicate>,
    /// The store's `ownership_gen` when the task was made, and whether its predicate was final
    /// then (no narrowing pending): see [`RegionStore::install_compaction`].
    ownership_gen: u64,
    ownership_final: bool,
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
    ownership_gen: u64,
    ownership_final: bool,
    _reservation: Reservation,
    /// Entries read from the inputs' footers.
    pub entries_in: u64,
    /// Entries written to the new segment.
    pub entries_out: u64,
}

impl CompactionTask {
    /// How many segments the task merges.
    pub fn input_count(&self) -> usize {
        self.inputs.len()
    }

    /// Whether compactions are behind: the store held more than `MAX_SEGMENTS` segments when
    /// the task was made. Such a task is not paced, and its owner should run it at the
    /// priority of the requests (RocksDB likewise speeds compactions up once they fall
    /// behind): a write load that keeps every core busy would otherwise starve compactions
    /// at a lower priority, and reads would consult ever more segments.
    pub fn is_behind(&self) -> bool {
        self.behind
    }

    /// Whether the task rewrites reference segments left by a split, to drop the rows the other
    /// side owns. No read waits for it (reads skip those rows either way, and the due merges
    /// bound the segments a read consults); it frees the shared files and spares scans the
    /// other side's rows, so its owner may run it when the machine has CPU to spare.
    pub fn rewrites_references(&self) -> bool {
        self.rewrites_references
    }

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
        let entries_in: u64 = self.inputs.iter().map(|s| s.info().entries).sum();
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
        let entries_out = output.as_ref().map_or(0, |s| s.info().entries);
        Ok(CompactionOutput {
            inputs: self.inputs.iter().map(|s| s.id).collect(),
            output,
            ownership_gen: self.ownership_gen,
            ownership_final: self.ownership_final,
            _reservation: self.reservation,
            entries_in,
            entries_out,
        })
    }
}

impl RegionStore {
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
                self.install_compaction(out).map(drop)
            }
            None => Ok(()),
        }
    }

    /// Prepare a compaction that can run on another thread ([`CompactionTask::run`]), as asked
    /// for (the admin API): minor merges every unreserved segment; the region's own choice is
    /// [`RegionStore::background_compaction_task`]. Its result is installed with
    /// [`RegionStore::install_compaction`]. `None` if there is nothing to do (no segment, or
    /// fewer than two for a minor compaction). The task holds its
    /// input segments until its output is installed or dropped: other compactions leave them
    /// alone meanwhile. A major task drops delete markers only if it covers every segment and
    /// the memtable is empty now (flush first). A minor task rewrites reference segments
    /// first, when there are any it can clean ([`RegionStore::wants_reference_compaction`]):
    /// up to `TIER_WIDTH` of them, smallest first, merged into one ordinary segment.
    pub fn compaction_task(&self, major: bool) -> Option<CompactionTask> {
        if !major {
            if let Some(refs) = self.reference_inputs() {
                return Some(self.reference_task(refs));
            }
        }
        let inputs = self.unreserved();
        if self.poisoned.is_some() || inputs.is_empty() || (!major && inputs.len() < 2) {
            return None;
        }
        Some(self.task_for(inputs, major))
    }

    /// The compaction a region runs by itself after a flush or an install: a size-tiered merge
    /// when one is due (`tiered_inputs`; it may take reference segments, and drops the rows
    /// the store does not own as any compaction does), else a rewrite of reference segments
    /// (as [`RegionStore::compaction_task`]; [`CompactionTask::rewrites_references`]), one at a
    /// time; `None` while neither is due. Merges go first: they keep the segments a read
    /// consults bounded, while a rewrite frees shared files and spares scans the other side's
    /// rows. Several tasks may be outstanding at once: each takes only segments no other holds.
    pub fn background_compaction_task(&self) -> Option<CompactionTask> {
        if self.poisoned.is_some() {
            return None;
        }
        if let Some(inputs) = self.tiered_inputs() {
            return Some(self.task_for(inputs, false));
        }
        if self.rewriting_references() {
            return None;
        }
        self.reference_inputs()
            .map(|refs| self.reference_task(refs))
    }

    /// A rewrite of the reference segments `refs`.
    fn reference_task(&self, refs: Vec<Arc<Segment>>) -> CompactionTask {
        let mut task = self.task_for(refs, false);
        task.rewrites_references = true;
        task
    }

    /// Whether an outstanding compaction holds a reference segment.
    fn rewriting_references(&self) -> bool {
        let reserved = self.reserved.lock();
        self.references.iter().any(|id| reserved.contains(id))
    }

    /// Whether a minor compaction would rewrite reference segments now: some are not held by
    /// another compaction, and the store's ownership is final (no split narrowing pending), so
    /// the rewrite drops the rows they share.
    pub fn wants_reference_compaction(&self) -> bool {
        self.reference_inputs().is_some()
    }

    /// The reference segments a minor compaction rewrites next (see `compaction_task`).
    fn reference_inputs(&self) -> Option<Vec<Arc<Segment>>> {
        if self.poisoned.is_some() || self.narrowing_pending || self.references.is_empty() {
            return None;
        }
        let mut refs: Vec<Arc<Segment>> = self
            .unreserved()
            .into_iter()
            .filter(|s| self.references.contains(&s.id))
            .collect();
        refs.sort_by_key(|s| s.info().file_bytes);
        refs.truncate(TIER_WIDTH);
        (!refs.is_empty()).then_some(refs)
    }

    /// Segments no outstanding compaction holds.
    pub(super) fn unreserved(&self) -> Vec<Arc<Segment>> {
        let reserved = self.reserved.lock();
        self.segments
            .iter()
            .filter(|s| !reserved.contains(&s.id))
            .cloned()
            .collect()
    }

    pub(super) fn task_for(&self, inputs: Vec<Arc<Segment>>, major: bool) -> CompactionTask {
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
        let behind = self.segments.len() > MAX_SEGMENTS;
        CompactionTask {
            // Paced (when pacing is on) unless compactions are behind.
            pace: if behind {
                None
            } else {
                self.pace(Arc::default())
            },
            behind,
            rewrites_references: false,
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
            ownership_gen: self.ownership_gen,
            ownership_final: !self.narrowing_pending,
        }
    }

    /// Size-tiered choice of segments to merge (Cassandra's size-tiered strategy; HBase's
    /// exploring policy picks by a size ratio the same way): the unreserved segments sorted by
    /// size are cut into tiers, a segment joining the tier before it while it is at most
    /// `TIER_SPREAD` times the tier's mean (or under `SMALL_SEGMENT`); the smallest tier with
    /// `TIER_WIDTH` segments is merged, `MAX_MERGE` at most. A merge then rewrites data of
    /// about its own size, so each byte is rewritten once per tier it climbs (about
    /// log4(region / memtable) times) instead of on every compaction, and segments of a tier
    /// never wait for a merge of a larger one. When no tier is full but more than
    /// `MAX_SEGMENTS` are unreserved, the smallest `2 * TIER_WIDTH` are merged regardless.
    pub(super) fn tiered_inputs(&self) -> Option<Vec<Arc<Segment>>> {
        let mut by_size = self.unreserved();
        if by_size.len() < 2 {
            return None;
        }
        by_size.sort_by_key(|s| s.info().file_bytes);
        let mut tiers: Vec<std::ops::Range<usize>> = Vec::new();
        let mut tier_bytes = 0u64;
        for (i, s) in by_size.iter().enumerate() {
            let size = s.info().file_bytes;
            match tiers.last_mut() {
                Some(t)
                    if size <= SMALL_SEGMENT
                        || size as f64 <= tier_bytes as f64 / t.len() as f64 * TIER_SPREAD =>
                {
                    t.end = i + 1;
                    tier_bytes += size;
                }
                _ => {
                    tiers.push(i..i + 1);
                    tier_bytes = size;
                }
            }
        }
        if let Some(t) = tiers.into_iter().find(|t| t.len() >= TIER_WIDTH) {
            let end = t.end.min(t.start + MAX_MERGE);
            return Some(by_size.drain(t.start..end).collect());
        }
        if by_size.len() > MAX_SEGMENTS {
            by_size.truncate(2 * TIER_WIDTH);
            return Some(by_size);
        }
        None
    }

    /// Keep the number of segments (and so the cost of a read) bounded after a flush.
    pub(super) fn compact_tiered(&mut self) {
        while let Some(inputs) = self.tiered_inputs() {
            let task = self.task_for(inputs, false);
            if let Err(e) = task
                .run()
                .and_then(|out| self.install_compaction(out).map(drop))
            {
                tracing::warn!(dir = %self.dir.display(), error = %e, "tiered compaction failed");
                return;
            }
        }
    }

    /// Replace a compaction's input segments by its output (manifest first, then the old files
    /// are deleted; for a reference segment that deletes this store's link only). The output
    /// is a reference segment if an input was one and the task did not filter with the
    /// store's current, final ownership. Fails, leaving the store unchanged, if an input is no
    /// longer live.
    ///
    /// The replaced segments come back as [`RetiredSegments`], for the owner to drop where a
    /// long unmap and file deletion stall nothing.
    pub fn install_compaction(&mut self, out: CompactionOutput) -> Result<RetiredSegments> {
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
        let still_shared = inputs.iter().any(|id| self.references.contains(id))
            && !(out.ownership_final && out.ownership_gen == self.ownership_gen);
        let mut references: BTreeSet<u64> = self.references.difference(&inputs).copied().collect();
        if let (true, Some(seg)) = (still_shared, &out.output) {
            references.insert(seg.id);
        }
        let mut segments: Vec<Arc<Segment>> = self
            .segments
            .iter()
            .filter(|s| !inputs.contains(&s.id))
            .cloned()
            .collect();
        segments.extend(out.output.map(Arc::new));
        let old_references = std::mem::replace(&mut self.references, references);
        if let Err(e) = self.write_manifest(&segments, self.log_floor) {
            self.references = old_references;
            self.poison(&e);
            return Err(e);
        }
        let old = std::mem::replace(&mut self.segments, segments);
        self.stats.compactions += 1;
        Ok(RetiredSegments {
            segments: old.into_iter().filter(|s| inputs.contains(&s.id)).collect(),
            fs: self.fs.clone(),
            dir: self.dir.clone(),
        })
    }
}

/// The segments a compaction replaced, handed back by [`RegionStore::install_compaction`] so
/// that its owner drops them off the latency-critical thread: unmapping a segment whose pages
/// reads touched takes time in proportion to them (hundreds of milliseconds for a gigabyte),
/// and deleting a large file takes tens of milliseconds on a file system that discards freed
/// blocks. On drop the files are deleted (for a reference segment: this store's link only),
/// the directory is synced and, once no reader holds them, the maps are released. The manifest
/// no longer names the files, so a crash first only leaves them for the next open to delete.
#[must_use = "drop it where a long unmap does not stall anything"]
pub struct RetiredSegments {
    segments: Vec<Arc<Segment>>,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
}

impl std::fmt::Debug for RetiredSegments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<u64> = self.segments.iter().map(|s| s.id).collect();
        f.debug_struct("RetiredSegments")
            .field("segments", &ids)
            .finish()
    }
}

impl Drop for RetiredSegments {
    fn drop(&mut self) {
        for s in &self.segments {
            if let Err(e) = self.fs.remove(s.path()) {
                tracing::warn!(file = %s.path().display(), error = %e, "could not delete old segment");
            }
        }
        if let Err(e) = self.fs.sync_dir(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not sync after deleting segments");
        }
    }
}
