//! Compactions: size-tiered minor compactions that keep the number of segments a read
//! consults bounded, major compactions that drop what is masked or expired, as tasks
//! ([`CompactionTask`]) that run on another thread while their inputs are reserved.
//!
//! Reference segments (shared with the other side of a split, see `split.rs`) come first: a
//! minor compaction picks them before anything else, a few at a time, and writes an ordinary
//! segment holding only the rows the store owns; installing it deletes this store's links, and
//! the file goes once the other side has rewritten its own. An output is itself a reference
//! segment when an input was one and the task's ownership predicate is no longer the store's
//! final one (made before a split narrowed the store, or while a narrowing may still be undone).

use super::*;

/// Segments merged at once by the size-tiered compaction after a flush.
pub(super) const TIER_WIDTH: usize = 4;
/// Above this many segments the tiered compaction merges regardless of sizes.
pub(super) const MAX_SEGMENTS: usize = 12;

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

    /// Prepare a compaction that can run on another thread ([`CompactionTask::run`]); its
    /// result is installed with [`RegionStore::install_compaction`]. `None` if there is
    /// nothing to do (no segment, or fewer than two for a minor compaction). The task holds its
    /// input segments until its output is installed or dropped: other compactions leave them
    /// alone meanwhile. A major task drops delete markers only if it covers every segment and
    /// the memtable is empty now (flush first). A minor task rewrites reference segments
    /// first, when there are any it can clean ([`RegionStore::wants_reference_compaction`]):
    /// up to `TIER_WIDTH` of them, smallest first, merged into one ordinary segment.
    pub fn compaction_task(&self, major: bool) -> Option<CompactionTask> {
        if !major {
            if let Some(refs) = self.reference_inputs() {
                return Some(self.task_for(refs, false));
            }
        }
        let inputs = self.unreserved();
        if self.poisoned.is_some() || inputs.is_empty() || (!major && inputs.len() < 2) {
            return None;
        }
        Some(self.task_for(inputs, major))
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
        refs.sort_by_key(|s| s.info.file_bytes);
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
            ownership_gen: self.ownership_gen,
            ownership_final: !self.narrowing_pending,
        }
    }

    /// Size-tiered choice of segments to merge: the four smallest when they are of a similar
    /// size, or the eight smallest when there are too many segments.
    pub(super) fn tiered_inputs(&self) -> Option<Vec<Arc<Segment>>> {
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
