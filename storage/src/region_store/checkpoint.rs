//! Checkpoints: a self-contained copy of the store as of one moment (segments linked or
//! copied, the memtable written as a segment, a manifest naming them and an empty log), for
//! online backups.

use super::*;

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

impl RegionStore {
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
            report.bytes += seg.info().file_bytes;
            records.push(SegmentRecord {
                id: seg.id,
                entries: seg.info().entries,
                max_seq: seg.info().max_seq,
                file_bytes: seg.info().file_bytes,
                // A checkpoint of a region holding reference segments holds them too.
                reference: self.references.contains(&seg.id),
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
                report.bytes += seg.info().file_bytes;
                records.push(SegmentRecord {
                    id: seg.id,
                    entries: seg.info().entries,
                    max_seq: seg.info().max_seq,
                    file_bytes: seg.info().file_bytes,
                    reference: false,
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
}
