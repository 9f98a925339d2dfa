//! Splits without copying: the new region's store starts on this store's segment files.
//!
//! [`RegionStore::link_rows`] flushes the memtable (bounded by the memtable budget), then gives
//! every segment a second name in the new store's directory (a hard link; a copy where the file
//! system makes none) and writes a manifest there naming them as *reference segments*: files
//! shared with another region, holding rows the store does not own. Rows are given to regions by
//! a hash of their key (the salt bucket), so every segment holds rows of both halves; a store
//! tells its own by its ownership predicate ([`StoreOptions::owns_row`], rebuilt from the
//! catalog's bucket range at every open), which every read applies. This store's segments become
//! reference segments too, as it is about to give up the other half. No row is copied: the
//! pause is one flush, a link per segment and three manifest writes, whatever the region's size.
//! Opened in the same process, the new store shares what this one read from the files (their
//! maps, indexes, filters and checked blocks: `Segment::open`), so its first reads check nothing
//! again and the files' indexes are held once.
//!
//! Later, compactions on each side rewrite reference segments into ordinary ones holding only
//! owned rows (`compaction.rs`: size-tiered merges take them as any segment; a rewrite of its
//! own comes when no merge is due), paced like any background compaction; the file
//! goes when the second of its names does. Until then sizes count a reference segment by the
//! owned share its index shows ([`Segment::owned_share`]), so a daughter does not look twice as
//! large and ask for a split at once. A store holding reference segments may split again: the
//! links are linked once more and the new store's predicate is narrower still (HBase instead
//! refuses to split a region holding references; a predicate narrows for free here).
//!
//! # Crash safety
//! The parent's manifest flags its segments before the new store's manifest exists; the new
//! store's manifest is written last (after its links, its log and a directory fsync), then its
//! parent directory is fsynced. Before the caller's commit point (the catalog naming the new
//! region) the parent still owns every row and holds every file, so a crash at any step loses
//! nothing: the new directory is an orphan of a split that did not happen (files without a
//! manifest are refused, never opened as an empty store). Flagging a segment that stays wholly
//! owned (a split undone) costs one rewrite, nothing else.

use super::*;

/// Copy every raw entry (markers and all versions) of the rows `keep_row` accepts, dropping
/// only overwritten duplicates and entries of dropped families.
pub(super) fn copy_raw(
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

impl RegionStore {
    /// For a region split: flush, then make `dest_dir` a new store holding the rows `pred`
    /// accepts without copying them (see the module doc): every segment of this store gets a
    /// second name there (hard link, or a durable copy) and becomes a reference segment on
    /// both sides; the idempotency keys of rows `pred` accepts go to the new store's log; its
    /// manifest, written last, names the segments as references. [`RegionStore::open`] with
    /// an ownership predicate equivalent to `pred` then opens it. The families are
    /// `options.families`, or this store's if that is empty.
    ///
    /// The store does not change what it serves: the caller narrows it
    /// ([`RegionStore::narrow_reads`], then [`RegionStore::set_owns_row`] at its commit
    /// point). A failure after the flush leaves `dest_dir` for the caller to remove; a failed
    /// manifest write here poisons the store, as any manifest write does.
    pub fn link_rows(
        &mut self,
        pred: &dyn Fn(&[u8]) -> bool,
        dest_dir: &Path,
        options: StoreOptions,
    ) -> Result<()> {
        self.flush()?;
        // This side gives up rows of its segments too: flag them before the new store names them.
        let all: BTreeSet<u64> = self.segments.iter().map(|s| s.id).collect();
        if !all.is_subset(&self.references) {
            let old = std::mem::replace(&mut self.references, all);
            if let Err(e) = self.write_manifest(&self.segments, self.log_floor) {
                self.references = old;
                self.poison(&e);
                return Err(e);
            }
            self.ownership_gen += 1;
        }
        let fs = &*self.fs;
        fs.create_dir_all(dest_dir)
            .map_err(|e| Error::io(dest_dir, e))?;
        if manifest::read(fs, dest_dir)?.is_some() {
            return Err(Error::InvalidArgument(format!(
                "split directory {} already holds a store",
                dest_dir.display()
            )));
        }
        let mut records = Vec::with_capacity(self.segments.len());
        for seg in &self.segments {
            let to = seg_path(dest_dir, seg.id);
            fs.link_or_copy(seg.path(), &to)
                .map_err(|e| Error::io(&to, e))?;
            records.push(SegmentRecord {
                id: seg.id,
                entries: seg.info().entries,
                max_seq: seg.info().max_seq,
                file_bytes: seg.info().file_bytes,
                reference: true,
            });
        }
        // The links' directory entries are durable before a manifest names them (and before
        // the log is created; the manifest write fsyncs the directory again for both).
        fs.sync_dir(dest_dir).map_err(|e| Error::io(dest_dir, e))?;
        let families = if options.families.is_empty() {
            self.families.clone()
        } else {
            options.families.clone()
        };
        // An id from this store's sequence: above every linked segment's. Written even when
        // empty: the manifest names it as the first live log, and an open refuses a manifest
        // whose first live log is missing (a lost log).
        let log_id = self.alloc_file();
        {
            let mut w = LogWriter::create(fs, &log_path(dest_dir, log_id), log_id, 0)?;
            for (row, i) in self.idem.live().into_iter().filter(|(row, _)| pred(row)) {
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
            next_file: self.next_file.load(Ordering::SeqCst),
            log_number: log_id,
            segments: records,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Fault, FaultOp, SimFs};
    use crate::region_store::flush::tests::put_op;

    /// A split child exported by an older build (rows copied into segment 1, a manifest naming
    /// log 2 with `next_file = 3`, and no log at all: it had no idempotency keys to carry) whose
    /// first open was cut short after it created its own log (here: the manifest's rename
    /// fails) opens on the next try, with every exported row: its missing log 2 held nothing.
    #[test]
    fn an_old_export_whose_first_open_was_cut_short_still_opens() {
        let fs = SimFs::new();
        let sim: Arc<dyn FileSystem> = Arc::new(fs.clone());
        let families = vec![FamilyDescriptor::new("cf")];
        // The server's flush configuration (`RegionActor::options`).
        let options = || StoreOptions {
            background_flush: true,
            ..StoreOptions::new(families.clone())
        };
        let (mut s, _) =
            RegionStore::open_with_fs(sim.clone(), Path::new("/parent"), options()).unwrap();
        for r in s.write_batch(vec![put_op(b"x", b"moved")]) {
            r.unwrap();
        }
        s.flush().unwrap();
        let child = Path::new("/child");
        let seg = s.segments[0].clone();
        fs.create_dir_all(child).unwrap();
        fs.link_or_copy(seg.path(), &seg_path(child, 1)).unwrap();
        fs.sync_dir(child).unwrap();
        let old_export = Manifest {
            next_file: 3,
            log_number: 2,
            segments: vec![SegmentRecord {
                id: 1,
                entries: seg.info().entries,
                max_seq: seg.info().max_seq,
                file_bytes: seg.info().file_bytes,
                reference: false,
            }],
            families: families.iter().map(FamilyRecord::from).collect(),
            family_floors: Vec::new(),
            last_seq: s.next_seq - 1,
            clock: s.clock.persisted(),
        };
        manifest::write(&fs, child, &old_export).unwrap();
        let open_child = || RegionStore::open_with_fs(sim.clone(), child, options());
        fs.inject(Fault {
            op: FaultOp::Rename,
            nth: 0,
            persistent: true,
        });
        assert!(open_child().is_err(), "the first open is cut short");
        fs.clear_faults();
        let (store, _) = open_child().expect("the next open succeeds");
        let row = store
            .get(b"x", &ReadSpec::default())
            .unwrap()
            .expect("row x");
        assert_eq!(row.cells.len(), 1);
    }

    /// The new store of a split, opened in the same process, starts on what its parent read
    /// from the linked files: the blocks the flush checked are checked for it too, so its
    /// first reads check nothing again.
    #[test]
    fn the_new_store_of_a_split_finds_its_parents_blocks_checked() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn FileSystem> = Arc::new(crate::fs::StdFs);
        let options = || StoreOptions::new(vec![FamilyDescriptor::new("cf")]);
        let (mut parent, _) =
            RegionStore::open_with_fs(fs.clone(), &dir.path().join("parent"), options()).unwrap();
        let ops = (0..2000u32)
            .map(|i| put_op(format!("row{i:05}").as_bytes(), &[b'v'; 100]))
            .collect();
        for r in parent.write_batch(ops) {
            r.unwrap();
        }
        let child_dir = dir.path().join("child");
        parent
            .link_rows(&|row| row.ends_with(b"1"), &child_dir, options())
            .unwrap();
        let (child, _) = RegionStore::open_with_fs(fs, &child_dir, options()).unwrap();
        assert_eq!(parent.segments.len(), 1);
        assert_eq!(child.segments.len(), 1);
        let (checked, blocks) = child.segments[0].checked_blocks();
        assert!(blocks > 2, "{blocks} blocks");
        assert_eq!(checked, blocks);
        assert!(child.segments[0].shares_file_with(&parent.segments[0]));
    }
}
