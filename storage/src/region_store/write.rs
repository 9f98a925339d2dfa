//! Writes: each operation turned into its effects (timestamps, new values), checked against
//! idempotency keys, logged and applied to the memtable, one log write and one fsync per batch
//! (group commit); [`LogSync`] for an fsync run on another thread.

use super::*;

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

    /// Start the log's writeback without waiting (best effort: [`LogSync::run`] still makes
    /// it durable and reports any error), for a thread about to fsync several logs in turn.
    pub fn start_writeback(&self) {
        let _ = self.handle.start_writeback();
    }
}

impl RegionStore {
    pub(super) fn resolve_ts(&mut self, ts: Option<Timestamp>) -> Timestamp {
        match ts {
            Some(t) if t != LATEST_TIMESTAMP => t,
            _ => self.clock.now(),
        }
    }

    pub(super) fn resolve_delete_ts(&mut self, ts: Option<Timestamp>) -> Timestamp {
        match ts {
            Some(t) if t != LATEST_TIMESTAMP => t,
            _ => self.clock.now_for_delete(),
        }
    }

    /// The effects of `mutations` on `row`, appended to `out`.
    pub(super) fn mutation_effects(
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
    pub(super) fn read_modify_write<A>(
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
    pub(super) fn commit(
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

    /// [`Self::commit`] for an increment or append (`results`: the new cells), then HBase's
    /// upsert on each column of a family keeping one version: the memtable keeps the new put
    /// and the one before it, not every increment (memtable invariant 3).
    fn commit_delta(
        &mut self,
        row: Vec<u8>,
        cells: Vec<LogCell>,
        key: Option<Vec<u8>>,
        results: Vec<Cell>,
    ) -> Result<WriteOutcome> {
        let one_version =
            |rules: &Rules, c: &Cell| rules.get(&c.family).is_some_and(|r| r.max_versions == 1);
        if !results.iter().any(|c| one_version(&self.rules, c)) {
            return self.commit(row, cells, key, WriteOutcome::Cells(results));
        }
        let upsert_row = row.clone();
        let outcome = self.commit(row, cells, key, WriteOutcome::Cells(results))?;
        if let WriteOutcome::Cells(written) = &outcome {
            for c in written.iter().filter(|c| one_version(&self.rules, c)) {
                self.memtable
                    .upsert(&upsert_row, &c.family, &c.qualifier, c.timestamp);
            }
        }
        Ok(outcome)
    }

    /// Apply one operation; with a key already remembered for its row, answer the remembered
    /// outcome instead.
    pub(super) fn apply_keyed(&mut self, write: KeyedWrite) -> Result<WriteOutcome> {
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

    pub(super) fn apply_op(&mut self, op: WriteOp, key: Option<Vec<u8>>) -> Result<WriteOutcome> {
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
                self.commit_delta(inc.row, cells, key, results)
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
                self.commit_delta(app.row, cells, key, results)
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

    pub(super) fn write_batch_inner<W: Into<KeyedWrite>>(
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
    pub(super) fn finish_batch(&mut self, applied: u64, defer: bool) -> Result<Option<LogSync>> {
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

    pub(super) fn sync_log(&mut self) -> Result<()> {
        self.log.write_pending()?;
        let started = Instant::now();
        self.log.sync()?;
        self.count_fsync(started.elapsed());
        self.stats.synced_writes += std::mem::take(&mut self.unsynced_writes);
        Ok(())
    }

    pub(super) fn count_fsync(&mut self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.stats.fsync_micros = self.stats.fsync_micros.saturating_add(micros);
        self.stats.fsync_max_micros = self.stats.fsync_max_micros.max(micros);
        self.stats.fsyncs += 1;
        self.stats.fsyncs_slow += u64::from(took > SLOW_FSYNC);
        self.last_sync = Instant::now();
    }

    pub(super) fn single(&mut self, op: WriteOp) -> Result<WriteOutcome> {
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
}
