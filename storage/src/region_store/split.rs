//! Splits: exporting the rows a predicate selects into a new store directory, the half of a
//! region a split moves to its new region.

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
}
