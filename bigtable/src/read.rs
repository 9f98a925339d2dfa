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

/// An open `ReadRows` stream, row by row. Dropping it cancels the call.
pub struct RowStream {
    table: String,
    stream: Streaming<ReadRowsResponse>,
    merger: ChunkMerger,
    ready: VecDeque<RawRow>,
    ended: bool,
}

impl RowStream {
    /// Start a read of `table` (the HBase name, for errors).
    pub async fn open(conn: &Conn, table: &str, req: ReadRowsRequest) -> Result<RowStream> {
        let reversed = req.reversed;
        let table_name = req.table_name.clone();
        let stream = conn
            .data()
            .get_client()
            .read_rows(conn.data_request(&table_name, req, false))
            .await
            .map_err(|s| map_status(table, &s))?
            .into_inner();
        Ok(RowStream {
            table: table.to_string(),
            stream,
            merger: ChunkMerger::new(reversed),
            ready: VecDeque::new(),
            ended: false,
        })
    }

    /// The next committed row, `None` at the end of the stream.
    pub async fn next(&mut self) -> Result<Option<RawRow>> {
        loop {
            if let Some(r) = self.ready.pop_front() {
                return Ok(Some(r));
            }
            if self.ended {
                return Ok(None);
            }
            match self
                .stream
                .message()
                .await
                .map_err(|s| map_status(&self.table, &s))?
            {
                Some(msg) => {
                    for chunk in msg.chunks {
                        if let Some(row) = self.merger.push(chunk).map_err(Error::Internal)? {
                            self.ready.push_back(row);
                        }
                    }
                }
                None => {
                    self.merger.finish().map_err(Error::Internal)?;
                    self.ended = true;
                }
            }
        }
    }
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
