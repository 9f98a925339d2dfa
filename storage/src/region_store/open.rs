//! Opening a region store: reading the manifest, replaying the logs past its `log_number`
//! into the memtable (`replayed.rs` holds the replayed part), and the recovery modes' rules for
//! damage (`RecoveryMode`).

use super::*;

/// Insert the effects of one logged record into the memtable.
pub(super) fn apply_record(memtable: &mut Memtable, rec: LogRecord) -> Result<()> {
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
pub(super) struct Replayed {
    entries: ReplayedChunk,
    /// One past the highest seq seen.
    next_seq: u64,
    clock: i64,
    /// Idempotency keys with their rows, in log order.
    idem: Vec<(Vec<u8>, log::LogIdem)>,
}

/// Fold one record of log `log` (whose bytes are `map`) into a chunk's [`Replayed`].
pub(super) fn fold_replayed(
    log: u16,
    map: &[u8],
    c: &mut Replayed,
    rec: log::LogRecordRef<'_>,
) -> Result<()> {
    c.next_seq = c.next_seq.max(rec.seq + rec.cells.len() as u64);
    c.clock = c.clock.max(rec.clock);
    c.entries.add(log, map, &rec)?;
    if let Some(i) = rec.idem {
        c.idem.push((rec.row.to_vec(), i));
    }
    Ok(())
}

/// What a store directory holds, by kind: the second step of opening.
pub(super) struct DirListing {
    /// Log ids, ascending.
    logs: Vec<u64>,
    /// Segment ids found (named by the manifest or not).
    seg_files: Vec<u64>,
    /// The largest id of any file, kept-aside ones included: never handed out again.
    max_id: u64,
}

/// The first step of opening a store without a manifest: refuse it when segments are there.
///
/// A store writes its manifest when first opened, before it takes any write, and a split's
/// export writes it before the catalog names the new region: segments without one mean the
/// manifest was lost. Opening as new would delete them (no manifest names them) and serve
/// their rows as absent. Fail closed, changing nothing, so that restoring the file brings
/// everything back.
pub(super) fn refuse_segments_without_manifest(dir: &Path, names: &[String]) -> Result<()> {
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
    Ok(())
}

/// The second step: sort the directory's files into logs and segments, removing the
/// temporary files of writes the last run did not finish.
pub(super) fn list_store_files(fs: &dyn FileSystem, dir: &Path, names: Vec<String>) -> DirListing {
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
    DirListing {
        logs,
        seg_files,
        max_id,
    }
}

/// The third step: open the segments the manifest names, and the first sequence number no
/// entry of theirs (or of the manifest) has used.
pub(super) fn open_segments(
    fs: &dyn FileSystem,
    dir: &Path,
    m: &Manifest,
) -> Result<(Vec<Arc<Segment>>, u64)> {
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
    let mut segments = Vec::with_capacity(m.segments.len());
    for rec in &m.segments {
        let path = seg_path(dir, rec.id);
        let seg = Segment::open(fs, &path, rec.id)?;
        let after = seg.info().max_seq.checked_add(1);
        next_seq = next_seq
            .max(after.ok_or_else(|| out_of_range(path.clone(), "max_seq", seg.info().max_seq))?);
        segments.push(Arc::new(seg));
    }
    Ok((segments, next_seq))
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
            refuse_segments_without_manifest(dir, &names)?;
        }
        let DirListing {
            logs,
            seg_files,
            max_id,
        } = list_store_files(&*fs, dir, names);
        let (mut segments, mut next_seq) = open_segments(&*fs, dir, &m)?;
        let references: BTreeSet<u64> = m
            .segments
            .iter()
            .filter(|r| r.reference)
            .map(|r| r.id)
            .collect();
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
                            segments: segment_records(&segments, &references),
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
            narrowing_pending: false,
            ownership_gen: 0,
            references,
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
}
