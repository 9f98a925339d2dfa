//! Reads: `ReadRows` streams decoded by [`crate::chunks`], and get, multi-get and scan on top.
//!
//! # Invariants
//! 1. Every user-facing read sends filter F ([`crate::filters::visibility`]), so VERSIONS and
//!    TTL hold whether or not Bigtable has garbage-collected, and `_kura` never comes back; a
//!    row with no visible user cell is absent.
//! 2. Cells come back in HBase order (family, qualifier, timestamp descending), without
//!    duplicates, timestamps in ms.
//! 3. A `RowFilter` runs in Kura: `accept_key` before the row's cells are used, then
//!    `accept_row`; a row it empties is dropped.
//! 4. A scan page returns at most `min(limit, page.max_rows)` rows and stops once `max_bytes`
//!    is reached (after at least one row); `complete` is true only when the stream ended
//!    before another matching row was seen, so it is exact.
//! 5. A stream that fails with a transient error is reopened (at most [`READ_RETRIES`] times)
//!    for the rows past the last committed one only, so no row is returned twice.

use std::collections::{HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use bigtable_rs::google::bigtable::v2;
use kura_backend::{
    Cell, ColumnSpec, Error, ReadSpec, Result, Row, RowFilter, ScanPage, ScanRequest,
};
use tonic::Streaming;
use v2::row_range::{EndKey, StartKey};
use v2::{ReadRowsRequest, ReadRowsResponse, RowRange, RowSet};

use crate::chunks::{ChunkMerger, RawRow};
use crate::conn::{map_status, Conn};
use crate::filters::{ts_millis, visibility};
use crate::meta::TableInfo;
use crate::BigtableBackend;

/// Transient failures (`Unavailable`) a read resumes past before giving up.
const READ_RETRIES: u32 = 3;

/// An open `ReadRows` stream, row by row. Dropping it cancels the call. A transient failure
/// reopens the stream after the last committed row (reads are idempotent), with the row
/// limit reduced by the rows already received.
pub struct RowStream {
    conn: Conn,
    table: String,
    req: ReadRowsRequest,
    stream: Option<Streaming<ReadRowsResponse>>,
    merger: ChunkMerger,
    ready: VecDeque<RawRow>,
    last_key: Option<Vec<u8>>,
    committed: i64,
    retries: u32,
    ended: bool,
}

impl RowStream {
    /// Start a read of `table` (the HBase name, for errors).
    pub async fn open(conn: &Conn, table: &str, req: ReadRowsRequest) -> Result<RowStream> {
        let mut s = RowStream {
            conn: conn.clone(),
            table: table.to_string(),
            merger: ChunkMerger::new(req.reversed),
            req,
            stream: None,
            ready: VecDeque::new(),
            last_key: None,
            committed: 0,
            retries: 0,
            ended: false,
        };
        s.connect().await?;
        Ok(s)
    }

    /// Wait before a retry, or give up with `e`.
    async fn retry_or(&mut self, e: Error) -> Result<()> {
        if !matches!(e, Error::Unavailable(_)) || self.retries >= READ_RETRIES {
            return Err(e);
        }
        self.retries += 1;
        tokio::time::sleep(std::time::Duration::from_millis(50 << self.retries)).await;
        Ok(())
    }

    /// (Re)open the call for the rows not received yet.
    async fn connect(&mut self) -> Result<()> {
        loop {
            let mut req = self.req.clone();
            if let Some(last) = &self.last_key {
                match resume_rows(&req.rows, last, req.reversed) {
                    Some(rows) => req.rows = rows,
                    None => {
                        self.ended = true;
                        return Ok(());
                    }
                }
            }
            if req.rows_limit > 0 {
                req.rows_limit -= self.committed;
                if req.rows_limit <= 0 {
                    self.ended = true;
                    return Ok(());
                }
            }
            let table_name = req.table_name.clone();
            let reversed = req.reversed;
            let opened = self
                .conn
                .data()
                .get_client()
                .read_rows(self.conn.data_request(&table_name, req, false))
                .await;
            match opened {
                Ok(resp) => {
                    self.stream = Some(resp.into_inner());
                    self.merger = ChunkMerger::resume(reversed, self.last_key.clone());
                    return Ok(());
                }
                Err(s) => {
                    let e = map_status(&self.table, &s);
                    self.retry_or(e).await?;
                }
            }
        }
    }

    /// The next committed row, `None` at the end of the stream.
    pub async fn next(&mut self) -> Result<Option<RawRow>> {
        loop {
            if let Some(r) = self.ready.pop_front() {
                return Ok(Some(r));
            }
            let (false, Some(stream)) = (self.ended, self.stream.as_mut()) else {
                return Ok(None);
            };
            match stream.message().await {
                Ok(Some(msg)) => {
                    for chunk in msg.chunks {
                        if let Some(row) = self.merger.push(chunk).map_err(Error::Internal)? {
                            self.last_key = Some(row.key.clone());
                            self.committed += 1;
                            self.ready.push_back(row);
                        }
                    }
                }
                Ok(None) => {
                    self.merger.finish().map_err(Error::Internal)?;
                    self.ended = true;
                }
                Err(s) => {
                    let e = map_status(&self.table, &s);
                    self.retry_or(e).await?;
                    self.connect().await?;
                }
            }
        }
    }
}

/// The part of a row set strictly past `last` in the read's direction (`None`: nothing left).
fn resume_rows(rows: &Option<RowSet>, last: &[u8], reversed: bool) -> Option<Option<RowSet>> {
    let whole_table = rows
        .as_ref()
        .is_none_or(|r| r.row_keys.is_empty() && r.row_ranges.is_empty());
    let set = match rows {
        Some(set) if !whole_table => set.clone(),
        _ => RowSet {
            row_keys: vec![],
            row_ranges: vec![RowRange::default()],
        },
    };
    let past = |k: &[u8]| if reversed { k < last } else { k > last };
    let row_keys: Vec<Vec<u8>> = set.row_keys.into_iter().filter(|k| past(k)).collect();
    let row_ranges: Vec<RowRange> = set
        .row_ranges
        .into_iter()
        .filter_map(|r| trim_range(r, last, reversed))
        .collect();
    if row_keys.is_empty() && row_ranges.is_empty() {
        return None;
    }
    Some(Some(RowSet {
        row_keys,
        row_ranges,
    }))
}

/// A range cut to the keys strictly past `last` (`None` if none are left).
fn trim_range(mut r: RowRange, last: &[u8], reversed: bool) -> Option<RowRange> {
    let open = last.to_vec();
    if reversed {
        // Keys below `last` remain: the start must be below it, the end becomes at most it.
        if let Some(StartKey::StartKeyClosed(s) | StartKey::StartKeyOpen(s)) = &r.start_key {
            if s.as_slice() >= last {
                return None;
            }
        }
        let keep_end = match &r.end_key {
            Some(EndKey::EndKeyClosed(e)) => e.as_slice() < last,
            Some(EndKey::EndKeyOpen(e)) => e.as_slice() <= last,
            None => false,
        };
        if !keep_end {
            r.end_key = Some(EndKey::EndKeyOpen(open));
        }
    } else {
        // Keys above `last` remain: the end must be above it, the start becomes at least it.
        if let Some(EndKey::EndKeyClosed(e) | EndKey::EndKeyOpen(e)) = &r.end_key {
            if e.as_slice() <= last {
                return None;
            }
        }
        let keep_start = match &r.start_key {
            Some(StartKey::StartKeyClosed(s)) => s.as_slice() > last,
            Some(StartKey::StartKeyOpen(s)) => s.as_slice() >= last,
            None => false,
        };
        if !keep_start {
            r.start_key = Some(StartKey::StartKeyOpen(open));
        }
    }
    Some(r)
}

/// Read every row a request selects.
pub async fn read_rows(conn: &Conn, table: &str, req: ReadRowsRequest) -> Result<Vec<RawRow>> {
    let mut s = RowStream::open(conn, table, req).await?;
    let mut out = Vec::new();
    while let Some(r) = s.next().await? {
        out.push(r);
    }
    Ok(out)
}

/// A Bigtable row as Kura cells, in HBase order, without duplicates.
pub fn to_cells(raw: RawRow) -> (Vec<u8>, Vec<Cell>) {
    let mut cells: Vec<Cell> = raw
        .cells
        .into_iter()
        .map(|c| Cell {
            family: c.family.into_bytes(),
            qualifier: c.qualifier,
            timestamp: ts_millis(c.timestamp_micros),
            value: c.value,
        })
        .collect();
    cells.sort_by(|a, b| {
        (&a.family, &a.qualifier)
            .cmp(&(&b.family, &b.qualifier))
            .then(b.timestamp.cmp(&a.timestamp))
    });
    cells.dedup_by(|a, b| {
        a.family == b.family && a.qualifier == b.qualifier && a.timestamp == b.timestamp
    });
    (raw.key, cells)
}

/// Apply a Kura-side filter to a row's cells (`None` = dropped).
fn filtered(key: Vec<u8>, mut cells: Vec<Cell>, filter: Option<&dyn RowFilter>) -> Option<Row> {
    if let Some(f) = filter {
        if !f.accept_row(&key, &mut cells) {
            return None;
        }
    }
    if cells.is_empty() {
        None
    } else {
        Some(Row { key, cells })
    }
}

/// The row set of a scan's bounds; `None` when no row can lie inside them.
fn row_set(low: &Bound<Vec<u8>>, high: &Bound<Vec<u8>>) -> Option<Option<RowSet>> {
    let start = match low {
        Bound::Unbounded => None,
        Bound::Included(k) | Bound::Excluded(k) if k.is_empty() => None,
        Bound::Included(k) => Some(StartKey::StartKeyClosed(k.clone())),
        Bound::Excluded(k) => Some(StartKey::StartKeyOpen(k.clone())),
    };
    let end = match high {
        Bound::Unbounded => None,
        // Row keys are never empty: nothing lies below an empty key.
        Bound::Included(k) | Bound::Excluded(k) if k.is_empty() => return None,
        Bound::Included(k) => Some(EndKey::EndKeyClosed(k.clone())),
        Bound::Excluded(k) => Some(EndKey::EndKeyOpen(k.clone())),
    };
    if let (Some(s), Some(e)) = (&start, &end) {
        let (sk, s_open) = match s {
            StartKey::StartKeyClosed(k) => (k, false),
            StartKey::StartKeyOpen(k) => (k, true),
        };
        let (ek, e_open) = match e {
            EndKey::EndKeyClosed(k) => (k, false),
            EndKey::EndKeyOpen(k) => (k, true),
        };
        if sk > ek || (sk == ek && (s_open || e_open)) {
            return None;
        }
    }
    if start.is_none() && end.is_none() {
        return Some(None);
    }
    Some(Some(RowSet {
        row_keys: vec![],
        row_ranges: vec![RowRange {
            start_key: start,
            end_key: end,
        }],
    }))
}

fn row_bytes(r: &Row) -> usize {
    r.key.len()
        + r.cells
            .iter()
            .map(|c| c.family.len() + c.qualifier.len() + c.value.len() + 8)
            .sum::<usize>()
}

fn read_families(read: &ReadSpec) -> Vec<&[u8]> {
    read.columns
        .0
        .iter()
        .map(|c| match c {
            ColumnSpec::Family(f) | ColumnSpec::Column(f, _) => f.as_slice(),
        })
        .collect()
}

impl BigtableBackend {
    fn request(&self, info: &TableInfo, rows: Option<RowSet>) -> ReadRowsRequest {
        ReadRowsRequest {
            table_name: info.full_name.clone(),
            app_profile_id: self.conn.app_profile.clone(),
            rows,
            ..Default::default()
        }
    }

    /// Run a read; a table Bigtable does not know is forgotten from the cache.
    async fn read_all(&self, table: &str, req: ReadRowsRequest) -> Result<Vec<RawRow>> {
        let r = read_rows(&self.conn, table, req).await;
        if let Err(Error::TableNotFound(_)) = &r {
            self.schemas.forget(table);
        }
        r
    }

    pub(crate) async fn do_get(
        &self,
        table: &str,
        row: &[u8],
        read: &ReadSpec,
        filter: Option<Arc<dyn RowFilter>>,
    ) -> Result<Option<Row>> {
        if row.is_empty() {
            return Err(Error::InvalidArgument("empty row key".into()));
        }
        let info = self
            .schemas
            .with_families(table, &read_families(read))
            .await?;
        if let Some(f) = &filter {
            if !f.accept_key(row) {
                return Ok(None);
            }
        }
        let Some(f) = visibility(&info.desc.families, read) else {
            return Ok(None);
        };
        let mut req = self.request(
            &info,
            Some(RowSet {
                row_keys: vec![row.to_vec()],
                row_ranges: vec![],
            }),
        );
        req.filter = Some(f);
        req.rows_limit = 1;
        let rows = self.read_all(table, req).await?;
        Ok(rows.into_iter().next().and_then(|raw| {
            let (key, cells) = to_cells(raw);
            filtered(key, cells, filter.as_deref())
        }))
    }

    pub(crate) async fn do_multi_get(
        &self,
        table: &str,
        rows: Vec<Vec<u8>>,
        read: &ReadSpec,
    ) -> Result<Vec<Option<Row>>> {
        if rows.iter().any(|r| r.is_empty()) {
            return Err(Error::InvalidArgument("empty row key".into()));
        }
        let info = self
            .schemas
            .with_families(table, &read_families(read))
            .await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let Some(f) = visibility(&info.desc.families, read) else {
            return Ok(vec![None; rows.len()]);
        };
        let mut keys = rows.clone();
        keys.sort();
        keys.dedup();
        let mut req = self.request(
            &info,
            Some(RowSet {
                row_keys: keys,
                row_ranges: vec![],
            }),
        );
        req.filter = Some(f);
        let mut found: HashMap<Vec<u8>, Row> = HashMap::new();
        for raw in self.read_all(table, req).await? {
            let (key, cells) = to_cells(raw);
            if let Some(r) = filtered(key, cells, None) {
                found.insert(r.key.clone(), r);
            }
        }
        Ok(rows.iter().map(|k| found.get(k).cloned()).collect())
    }

    pub(crate) async fn do_scan(&self, table: &str, req: ScanRequest) -> Result<ScanPage> {
        let spec = &req.spec;
        let info = self
            .schemas
            .with_families(table, &read_families(&spec.read))
            .await?;
        let want = req.limit.unwrap_or(usize::MAX).min(req.page.max_rows);
        let done = ScanPage {
            rows: Vec::new(),
            complete: true,
        };
        let Some(rows) = row_set(&spec.low, &spec.high) else {
            return Ok(done);
        };
        let Some(f) = visibility(&info.desc.families, &spec.read) else {
            return Ok(done);
        };
        let mut breq = self.request(&info, rows);
        breq.filter = Some(f);
        breq.reversed = spec.reversed;
        if spec.filter.is_none() {
            // One row more than the page, to know whether the range goes on.
            breq.rows_limit = i64::try_from(want.saturating_add(1)).unwrap_or(i64::MAX);
        }
        let mut stream = match RowStream::open(&self.conn, table, breq).await {
            Ok(s) => s,
            Err(e) => {
                if let Error::TableNotFound(_) = e {
                    self.schemas.forget(table);
                }
                return Err(e);
            }
        };
        let filter = spec.filter.as_deref();
        let mut out = Vec::new();
        let mut bytes = 0usize;
        let complete = loop {
            let Some(raw) = stream.next().await? else {
                break true;
            };
            if let Some(f) = filter {
                if !f.accept_key(&raw.key) {
                    continue;
                }
            }
            let (key, cells) = to_cells(raw);
            let Some(row) = filtered(key, cells, filter) else {
                continue;
            };
            if out.len() >= want || (bytes >= req.page.max_bytes && !out.is_empty()) {
                break false;
            }
            bytes += row_bytes(&row);
            out.push(row);
        };
        Ok(ScanPage {
            rows: out,
            complete,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: Option<StartKey>, end: Option<EndKey>) -> RowRange {
        RowRange {
            start_key: start,
            end_key: end,
        }
    }

    #[test]
    fn a_resumed_read_asks_only_for_rows_past_the_last_one() {
        let k = |s: &str| s.as_bytes().to_vec();
        // The whole table, both ways.
        let fwd = resume_rows(&None, b"m", false).unwrap().unwrap();
        assert_eq!(
            fwd.row_ranges,
            vec![range(Some(StartKey::StartKeyOpen(k("m"))), None)]
        );
        let rev = resume_rows(&None, b"m", true).unwrap().unwrap();
        assert_eq!(
            rev.row_ranges,
            vec![range(None, Some(EndKey::EndKeyOpen(k("m"))))]
        );
        // Keys and ranges are cut; what lies behind is dropped.
        let set = Some(RowSet {
            row_keys: vec![k("a"), k("m"), k("z")],
            row_ranges: vec![
                range(
                    Some(StartKey::StartKeyClosed(k("a"))),
                    Some(EndKey::EndKeyOpen(k("m"))),
                ),
                range(
                    Some(StartKey::StartKeyClosed(k("c"))),
                    Some(EndKey::EndKeyClosed(k("x"))),
                ),
            ],
        });
        let fwd = resume_rows(&set, b"m", false).unwrap().unwrap();
        assert_eq!(fwd.row_keys, vec![k("z")]);
        assert_eq!(
            fwd.row_ranges,
            vec![range(
                Some(StartKey::StartKeyOpen(k("m"))),
                Some(EndKey::EndKeyClosed(k("x")))
            )]
        );
        let rev = resume_rows(&set, b"m", true).unwrap().unwrap();
        assert_eq!(rev.row_keys, vec![k("a")]);
        assert_eq!(
            rev.row_ranges,
            vec![
                range(
                    Some(StartKey::StartKeyClosed(k("a"))),
                    Some(EndKey::EndKeyOpen(k("m")))
                ),
                range(
                    Some(StartKey::StartKeyClosed(k("c"))),
                    Some(EndKey::EndKeyOpen(k("m")))
                ),
            ]
        );
        // Nothing left: the read is over (an empty row set would mean the whole table).
        let keys = Some(RowSet {
            row_keys: vec![k("a")],
            row_ranges: vec![],
        });
        assert_eq!(resume_rows(&keys, b"a", false), None);
    }

    #[test]
    fn empty_ranges_are_answered_without_a_read() {
        let k = |s: &str| s.as_bytes().to_vec();
        assert!(row_set(&Bound::Included(k("b")), &Bound::Excluded(k("a"))).is_none());
        assert!(row_set(&Bound::Included(k("a")), &Bound::Excluded(k("a"))).is_none());
        assert!(row_set(&Bound::Excluded(k("a")), &Bound::Included(k("a"))).is_none());
        assert!(row_set(&Bound::Included(k("a")), &Bound::Included(k("a"))).is_some());
        assert_eq!(row_set(&Bound::Unbounded, &Bound::Unbounded), Some(None));
        assert!(row_set(&Bound::Unbounded, &Bound::Excluded(Vec::new())).is_none());
    }
}
