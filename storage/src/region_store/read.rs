//! Reads: the k-way merge of the memtables and segments for one row or a range
//! (`sources_*`), the visibility rules applied one row at a time, gets and paged scans, forward
//! and reversed.

use super::*;

/// Consume the entries of `row` from `it`, pushing the visible cells `read` selects.
pub(super) fn collect_row<'a>(
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
pub(super) fn same_column(next: Option<&Entry<'_>>, e: &Entry<'_>) -> bool {
    next.is_some_and(|n| n.row == e.row && n.family == e.family && n.qualifier == e.qualifier)
}

/// Consume the entries of `row` from `it`.
pub(super) fn skip_row(it: &mut MergeIter<'_>, row: &[u8]) -> Result<()> {
    while let Some(e) = it.peek().filter(|e| e.row == row).copied() {
        it.next()?;
        if e.qualifier.is_some() && same_column(it.peek(), &e) {
            it.skip_column(e.row, e.family, e.qualifier)?;
        }
    }
    Ok(())
}

pub(super) fn row_bytes(row: &Row) -> usize {
    row.key.len()
        + row
            .cells
            .iter()
            .map(|c| c.family.len() + c.qualifier.len() + c.value.len() + 16)
            .sum::<usize>()
}

impl RegionStore {
    pub(super) fn sources_from(&self, row: Option<&[u8]>) -> Result<MergeIter<'_>> {
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
    ///
    /// The row is hashed once and every segment's filter tested before any segment is
    /// searched: the filter tests do not branch on their loads, so their cache misses (one per
    /// segment) overlap instead of adding up.
    pub(super) fn sources_for_row(&self, row: &[u8]) -> Result<MergeIter<'_>> {
        let mut sources: Vec<Box<dyn EntrySource<'_> + '_>> = Vec::new();
        for mem in self.memtables() {
            sources.push(Box::new(mem.iter_from(row)));
        }
        let h = crate::row_filter::row_hash(row);
        for chunk in self.segments.chunks(64) {
            let mut hits = 0u64;
            for (i, s) in chunk.iter().enumerate() {
                hits |= u64::from(s.may_contain_hash(h)) << i;
            }
            for (i, s) in chunk.iter().enumerate() {
                if hits >> i & 1 == 1 {
                    sources.push(Box::new(s.iter_from(Some(row))?));
                }
            }
        }
        MergeIter::new(sources)
    }

    /// One step of a reversed scan: the greatest row below `upper` in any source (`None` bound:
    /// the greatest row), with a merge positioned at it over only the sources that hold it.
    pub(super) fn prev_row(
        &self,
        upper: Option<&[u8]>,
    ) -> Result<Option<(Vec<u8>, MergeIter<'_>)>> {
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
    pub(super) fn visible_row(
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
    pub(super) fn latest(
        &self,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
    ) -> Result<Option<Cell>> {
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
}
