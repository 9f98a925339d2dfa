//! Flushes: freezing the memtable (log synced, next log started), writing it to a segment
//! with what no read can see left out ([`FlushTask`], runnable on another thread), and installing
//! the segment (manifest replaced, old logs deleted).

use super::*;

/// Write a segment file `id` in `dir` from the entries `fill` adds; `None` if it added none.
/// The file is read back and every block checked before it is returned
/// ([`Segment::check_blocks`]); one that does not read back is removed and is the error.
pub(super) fn write_segment(
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
    let seg = Segment::open(fs, &path, id).and_then(|seg| {
        seg.check_blocks()?;
        Ok(seg)
    });
    match seg {
        Ok(seg) => {
            debug_assert_eq!(seg.info().entries, info.entries);
            Ok(Some(seg))
        }
        Err(e) => {
            // No manifest names the file yet: nothing refers to what did not read back.
            let _ = fs.remove(&path);
            Err(e)
        }
    }
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
pub(super) fn write_flushed<'a>(
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
    pub(super) fn new(mem: Arc<Memtable>, fs: &Arc<dyn FileSystem>) -> RetiredMemtable {
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

impl RegionStore {
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

    /// Bytes held by the memtables: the active one, and the frozen one a flush is writing,
    /// if any.
    pub fn memtable_bytes(&self) -> (usize, Option<usize>) {
        (
            self.memtable.bytes(),
            self.frozen.as_ref().map(|m| m.bytes()),
        )
    }

    /// How long the oldest write in the memtable writes go to has been there (a replayed
    /// one: since the open that replayed it); `None` if that memtable is empty. An owner that
    /// flushes once this passes a limit bounds the log a crash leaves to replay, and frees the
    /// memory of a region that stopped writing (HBase's `optionalcacheflushinterval`).
    pub fn memtable_age(&self) -> Option<std::time::Duration> {
        self.memtable.age()
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

    pub(super) fn freeze(&mut self) -> Result<FlushTask> {
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
    pub(super) fn start_log(&mut self) -> Result<LogWriter> {
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

    /// Stop pacing the running background flush, if any: its owner waits for it (a split
    /// goes ahead once its flushes are done). Pacing also stops by itself once the next
    /// memtable is half full.
    pub fn hurry_flush(&self) {
        self.flush_hurry.store(true, Ordering::Relaxed);
    }

    /// How a background segment write is paced, if at all.
    pub(super) fn pace(&self, hurry: Arc<AtomicBool>) -> Option<Pace> {
        (self.background_flush && self.background_write_rate > 0).then_some(Pace {
            bytes_per_sec: self.background_write_rate,
            hurry,
        })
    }

    pub(super) fn remove_retired_logs(&mut self) {
        for id in std::mem::take(&mut self.retired_logs) {
            let path = log_path(&self.dir, id);
            if let Err(e) = self.fs.remove(&path) {
                tracing::warn!(file = %path.display(), error = %e, "could not delete old log");
            }
        }
    }

    pub(super) fn flush_inner(&mut self) -> Result<()> {
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
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::fs::SimFs;

    /// A write of `value` to `row`'s `cf:q` at timestamp 1.
    pub(in crate::region_store) fn put_op(row: &[u8], value: &[u8]) -> WriteOp {
        WriteOp::Mutate(RowMutation {
            row: row.to_vec(),
            mutations: vec![Mutation::Put {
                family: b"cf".to_vec(),
                qualifier: b"q".to_vec(),
                timestamp: Some(1),
                value: value.to_vec(),
            }],
        })
    }

    /// A flush's segment comes back from the flush read back whole: every block checked (its
    /// restart points kept), so the first reads of the fresh segment pay for neither.
    #[test]
    fn a_flushed_segment_is_read_back_before_it_is_installed() {
        let sim: Arc<dyn FileSystem> = Arc::new(SimFs::new());
        let options = StoreOptions::new(vec![FamilyDescriptor::new("cf")]);
        let (mut s, _) = RegionStore::open_with_fs(sim, Path::new("/r"), options).unwrap();
        let ops = (0..2000u32)
            .map(|i| put_op(format!("row{i:05}").as_bytes(), &[b'v'; 100]))
            .collect();
        for r in s.write_batch(ops) {
            r.unwrap();
        }
        s.flush().unwrap();
        assert_eq!(s.segments.len(), 1);
        let (checked, blocks) = s.segments[0].checked_blocks();
        assert!(blocks > 2, "{blocks} blocks");
        assert_eq!(checked, blocks);
    }

    /// The memtable's age counts from its oldest write: later writes do not renew it, a
    /// freeze starts the next memtable without one, and a reopen counts the replayed writes
    /// from the replay.
    #[test]
    fn the_memtable_age_counts_from_its_oldest_write_until_a_freeze() {
        let sim: Arc<dyn FileSystem> = Arc::new(SimFs::new());
        let options = || StoreOptions::new(vec![FamilyDescriptor::new("cf")]);
        let (mut s, _) =
            RegionStore::open_with_fs(sim.clone(), Path::new("/r"), options()).unwrap();
        assert_eq!(s.memtable_age(), None);
        s.write_batch(vec![put_op(b"a", b"1")]).remove(0).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        s.write_batch(vec![put_op(b"b", b"2")]).remove(0).unwrap();
        let age = s.memtable_age().expect("an age");
        assert!(age >= std::time::Duration::from_millis(30), "{age:?}");
        let task = s.flush_task().unwrap().expect("a flush");
        assert_eq!(s.memtable_age(), None, "the next memtable is empty");
        s.write_batch(vec![put_op(b"c", b"3")]).remove(0).unwrap();
        assert!(s.memtable_age().expect("an age") < age);
        drop(task);
        drop(s);
        let (s, _) = RegionStore::open_with_fs(sim, Path::new("/r"), options()).unwrap();
        assert!(s.memtable_age().expect("the replayed writes") < age);
    }

    /// The running flush's pacing stops when the store is told to hurry (a split waits for
    /// the flush), and the next flush starts paced again.
    #[test]
    fn hurrying_unpaces_the_running_flush_only() {
        let sim: Arc<dyn FileSystem> = Arc::new(SimFs::new());
        let options = StoreOptions {
            background_flush: true,
            background_write_rate: 1 << 20,
            ..StoreOptions::new(vec![FamilyDescriptor::new("cf")])
        };
        let (mut s, _) = RegionStore::open_with_fs(sim, Path::new("/r"), options).unwrap();
        let put = |row: &str| put_op(row.as_bytes(), b"v");
        let hurried = |t: &FlushTask| t.pace.as_ref().unwrap().hurry.load(Ordering::Relaxed);
        for r in s.write_batch(vec![put("a")]) {
            r.unwrap();
        }
        let first = s.flush_task().unwrap().unwrap();
        assert!(!hurried(&first));
        s.hurry_flush();
        assert!(hurried(&first));
        drop(s.install_flush(first.run()).unwrap());
        for r in s.write_batch(vec![put("b")]) {
            r.unwrap();
        }
        let second = s.flush_task().unwrap().unwrap();
        assert!(!hurried(&second), "a new flush is paced again");
    }
}
