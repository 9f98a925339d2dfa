//! Rows: `GET`/`PUT`/`POST`/`DELETE /{t}/{rowspec}` and `GET /{t}/multiget`
//! (`R/RowResource.java`, `R/MultiRowResource.java`).
//!
//! # Invariants
//! 1. A body's row key wins over the URL's (clients PUT to placeholder URLs); a cell without a
//!    column takes the i-th URL column. A multi-row body is applied row by row, each atomically.
//! 2. A GET that finds no visible cell is a 404, whatever the reason.
//! 3. With no `Accept` (or `*/*`) a row GET answers the raw value of its one column
//!    (`application/octet-stream` with `X-Timestamp`), and a 400 unless exactly one column is named.
//! 4. Every key, qualifier and value is checked against [`crate::state::Limits`] before it
//!    reaches the store: at the limit works, one past is a 4xx.

use super::cellset::{self, parse_cellset, RowIn};
use super::filters::{self, Filter};
use super::media::{body_repr, negotiate, read_body, KeyEncoding, Query, Repr};
use super::rowspec::{parse_column, RowSpec};
use super::{check, check_families, scanners, spec_family, table_or_404};
use crate::error::{ApiError, ApiResult};
use crate::state::{AppState, Limits};
use actix_web::{web, HttpRequest, HttpResponse};
use futures::StreamExt;
use kura_backend::ScanRequest;
use kura_backend::{
    ColumnSelection, ColumnSpec, Mutation, ReadSpec, Row, RowFilter, RowMutation, ScanSpec,
};
use std::ops::Bound;
use std::sync::Arc;

/// 400 unless the row key is within the limit and not empty.
pub fn check_key(limits: &Limits, key: &[u8]) -> ApiResult<()> {
    if key.is_empty() {
        return Err(ApiError::bad("the row key is empty"));
    }
    if key.len() > limits.max_row_key {
        return Err(ApiError::bad(format!(
            "the row key is {} bytes; the limit is {}",
            key.len(),
            limits.max_row_key
        )));
    }
    Ok(())
}

/// 400 unless the qualifier is within the limit.
pub fn check_qualifier(limits: &Limits, qualifier: &[u8]) -> ApiResult<()> {
    if qualifier.len() > limits.max_qualifier {
        return Err(ApiError::bad(format!(
            "the column qualifier is {} bytes; the limit is {}",
            qualifier.len(),
            limits.max_qualifier
        )));
    }
    Ok(())
}

/// 413 unless the value is within the limit.
pub fn check_value(limits: &Limits, value: &[u8]) -> ApiResult<()> {
    if value.len() > limits.max_value {
        return Err(ApiError::PayloadTooLarge(format!(
            "a cell value is {} bytes; the limit is {}",
            value.len(),
            limits.max_value
        )));
    }
    Ok(())
}

/// Splits a `family:qualifier` column that must name a qualifier (possibly empty).
pub fn split_column(col: &[u8]) -> ApiResult<(Vec<u8>, Vec<u8>)> {
    match parse_column(col) {
        ColumnSpec::Column(f, q) if !f.is_empty() => Ok((f, q)),
        _ => Err(ApiError::bad(format!(
            "column {:?} must be family:qualifier",
            String::from_utf8_lossy(col)
        ))),
    }
}

/// `v=N`: versions to read (default `default`); must be at least 1.
pub fn versions_param(query: &Query, name: &str, default: u32) -> ApiResult<u32> {
    match query.number::<i64>(name)? {
        None => Ok(default),
        Some(n) if n >= 1 => Ok(n.min(u32::MAX as i64) as u32),
        Some(n) => Err(ApiError::bad(format!(
            "{name}={n}: versions must be at least 1"
        ))),
    }
}

/// A filter prepared for a read: the columns it needs are added to the read, and the cells the
/// caller did not ask for are stripped afterwards.
#[derive(Debug, Default)]
pub struct PreparedFilter {
    pub filter: Option<Arc<dyn RowFilter>>,
    /// A `PageFilter`'s row limit, enforced over the whole scan by the caller.
    pub page_limit: Option<usize>,
    /// An `InclusiveStopFilter`'s last row, enforced as a scan bound by the caller.
    pub stop_row: Option<Vec<u8>>,
    strip_to: Option<ColumnSelection>,
}

impl PreparedFilter {
    /// Wraps `filter`, widening `read.columns` with the filter's extra columns if needed.
    /// `reversed` tells direction-aware filters which way the scan walks.
    ///
    /// A filter that judges cells sees every retained version, as in HBase: `read.max_versions`
    /// is raised to the families' maximum and the requested count is applied after the filter
    /// ([`filters::VersionCapped`]), so `ValueFilter` with `v=1` finds an older matching version.
    pub fn new(filter: Option<Filter>, read: &mut ReadSpec, reversed: bool) -> Self {
        let Some(mut filter) = filter else {
            return PreparedFilter::default();
        };
        filter.set_reversed(reversed);
        let page_limit = filter.page_limit();
        let stop_row = filter.stop_row();
        let mut strip_to = None;
        if !read.columns.0.is_empty() {
            let original = read.columns.clone();
            for (f, q) in filter.extra_columns() {
                if !original.selects(&f, &q) {
                    read.columns.0.push(ColumnSpec::Column(f, q));
                    strip_to = Some(original.clone());
                }
            }
        }
        let requested = read.max_versions;
        let filter: Arc<dyn RowFilter> = if filter.needs_all_versions() && requested < u32::MAX {
            // The store caps this by each family's VERSIONS.
            read.max_versions = u32::MAX;
            Arc::new(filters::VersionCapped::new(filter, requested))
        } else {
            Arc::new(filter)
        };
        PreparedFilter {
            filter: Some(filter),
            page_limit,
            stop_row,
            strip_to,
        }
    }

    /// Narrows a scan to end at the filter's inclusive stop row, if it has one.
    pub fn bound_scan(&self, spec: &mut ScanSpec) {
        let Some(stop) = &self.stop_row else { return };
        if spec.reversed {
            let below = match &spec.low {
                Bound::Unbounded => true,
                Bound::Included(k) | Bound::Excluded(k) => k < stop,
            };
            if below {
                spec.low = Bound::Included(stop.clone());
            }
        } else {
            let above = match &spec.high {
                Bound::Unbounded => true,
                Bound::Included(k) | Bound::Excluded(k) => k > stop,
            };
            if above {
                spec.high = Bound::Included(stop.clone());
            }
        }
    }

    /// Whether [`finish`](Self::finish) may drop rows the store returned (the filter needed
    /// columns the request did not ask for): a row limit must then count finished rows, not
    /// the store's.
    pub fn strips(&self) -> bool {
        self.strip_to.is_some()
    }

    /// Drops the cells only the filter needed; `None` if the row is left empty.
    pub fn finish(&self, mut row: Row) -> Option<Row> {
        if let Some(sel) = &self.strip_to {
            row.cells.retain(|c| sel.selects(&c.family, &c.qualifier));
        }
        (!row.cells.is_empty()).then_some(row)
    }
}

/// Parses `filter=` (Thrift filter language) or `filter_b64=` (URL-safe base64 of it).
pub fn filter_param(query: &Query) -> ApiResult<Option<Filter>> {
    let bytes = match (query.first("filter_b64"), query.first("filter")) {
        (Some(b), _) if !b.is_empty() => {
            KeyEncoding::Base64Url.decode(b.as_bytes().to_vec(), "filter_b64")?
        }
        (_, Some(f)) if !f.is_empty() => f.as_bytes().to_vec(),
        _ => return Ok(None),
    };
    filters::parse_filter_language_bytes(&bytes)
        .map(Some)
        .map_err(|e| ApiError::bad(format!("invalid filter: {e}")))
}

fn read_spec(
    desc: &kura_backend::TableDescriptor,
    spec: &RowSpec,
    versions: u32,
) -> ApiResult<ReadSpec> {
    let cols = spec.column_specs();
    check_families(desc, cols.iter().map(spec_family))?;
    Ok(ReadSpec {
        columns: ColumnSelection(cols),
        time_range: spec.time_range(),
        max_versions: versions,
    })
}

/// `GET /{t}/{rowspec}`.
pub async fn get(
    req: &HttpRequest,
    state: &AppState,
    table: &str,
    raw: &str,
) -> ApiResult<HttpResponse> {
    let query = Query::of(req)?;
    let enc = KeyEncoding::from_request(req, &query)?;
    let spec = RowSpec::parse(raw, enc)?;
    let repr = negotiate(req, &[Repr::Xml, Repr::Json, Repr::Binary], Repr::Binary)?;
    if repr == Repr::Binary && spec.columns.len() != 1 {
        return Err(ApiError::bad(
            "Default 'GET' method only works if there is exactly 1 column in the row. Using the \
             'Accept' header with one of these formats lets you see more than one column: XML, JSON",
        ));
    }
    let desc = table_or_404(state, table).await?;
    let versions = versions_param(&query, "v", 1)?;
    let read = read_spec(&desc, &spec, versions)?;
    if spec.row.len() > state.limits.max_row_key {
        check_key(&state.limits, &spec.row)?;
    }
    if let Some(end) = &spec.end_row {
        let mut scan = ScanSpec::all();
        scan.low = if spec.row.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Included(spec.row.clone())
        };
        scan.high = if end.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(end.clone())
        };
        scan.read = read;
        let request = ScanRequest {
            spec: scan,
            limit: None,
            page: Default::default(),
        };
        if repr == Repr::Binary {
            let page = state
                .kura
                .scan(
                    table,
                    ScanRequest {
                        limit: Some(1),
                        ..request
                    },
                )
                .await?;
            let row = page.rows.into_iter().next().ok_or(ApiError::NotFound)?;
            return binary_cell(row);
        }
        return scanners::stream_rows(state, table, request, repr, None, None, true).await;
    }
    check_key(&state.limits, &spec.row)?;
    let row = state
        .kura
        .get(table, &spec.row, &read)
        .await?
        .ok_or(ApiError::NotFound)?;
    if repr == Repr::Binary {
        return binary_cell(row);
    }
    Ok(HttpResponse::Ok()
        .content_type(repr.content_type())
        .body(cellset::render(repr, &[row])))
}

fn binary_cell(row: Row) -> ApiResult<HttpResponse> {
    let cell = row.cells.into_iter().next().ok_or(ApiError::NotFound)?;
    let mut resp = HttpResponse::Ok()
        .content_type(Repr::Binary.content_type())
        .insert_header(("X-Timestamp", cell.timestamp.to_string()))
        .body(cell.value);
    // HBase's Java tests compare header names case-sensitively ("X-Timestamp").
    resp.head_mut().set_camel_case_headers(true);
    Ok(resp)
}

/// Turns one body row into a mutation, with the URL's row and columns as fallbacks.
fn row_mutation(
    limits: &Limits,
    desc: &kura_backend::TableDescriptor,
    spec: &Result<RowSpec, ApiError>,
    row: RowIn,
) -> ApiResult<RowMutation> {
    let key = match row.key {
        Some(k) => k,
        None => match spec {
            Ok(s) => s.write_row()?,
            Err(e) => return Err(ApiError::bad(format!("Row key not specified ({e})"))),
        },
    };
    check_key(limits, &key)?;
    if row.cells.is_empty() {
        return Err(ApiError::bad("a row in the body has no cells"));
    }
    let mut mutations = Vec::with_capacity(row.cells.len());
    let mut url_col = 0;
    for mut c in row.cells {
        let value = c.value()?;
        let column = match c.column {
            Some(col) => col,
            None => {
                let fallback = spec
                    .as_ref()
                    .ok()
                    .and_then(|s| s.columns.get(url_col))
                    .cloned();
                url_col += 1;
                fallback.ok_or_else(|| ApiError::bad("Column found to be null."))?
            }
        };
        let (family, qualifier) = split_column(&column)?;
        check_families(desc, [family.as_slice()])?;
        check_qualifier(limits, &qualifier)?;
        check_value(limits, &value)?;
        mutations.push(Mutation::Put {
            family,
            qualifier,
            timestamp: c.timestamp,
            value,
        });
    }
    Ok(RowMutation {
        row: key,
        mutations,
    })
}

/// `PUT`/`POST /{t}/{rowspec}`: CellSet or binary bodies, and `?check=`.
pub async fn put(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    table: &str,
    raw: &str,
) -> ApiResult<HttpResponse> {
    let query = Query::of(req)?;
    let enc = KeyEncoding::from_request(req, &query)?;
    let spec = RowSpec::parse(raw, enc);
    let body = read_body(req, payload, &state.limits).await?;
    let repr = body_repr(req, &body, &[Repr::Json, Repr::Xml, Repr::Binary])?;
    // HBase's RowResource: an empty `check=` is no check (a plain put).
    if let Some(mode) = query.first("check").filter(|m| !m.is_empty()) {
        let mode = check::CheckMode::parse(mode)?;
        let rr = query.boolean("rr")?.unwrap_or(false);
        let rows = parse_cellset(repr, &body)?;
        return check::handle(req, state, table, &spec, rows, mode, rr).await;
    }
    let desc = table_or_404(state, table).await?;
    if repr == Repr::Binary {
        let spec = spec?;
        let header = |name: &str| req.headers().get(name).map(|v| v.as_bytes().to_vec());
        let row = match header("X-Row") {
            Some(row) => row,
            None => spec.write_row()?,
        };
        let column = header("X-Column")
            .or_else(|| spec.columns.first().cloned())
            .ok_or_else(|| ApiError::bad("Column found to be null."))?;
        let timestamp = match req.headers().get("X-Timestamp") {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .and_then(|s| s.trim().parse::<i64>().ok())
                    .filter(|&t| t >= 0)
                    .ok_or_else(|| {
                        ApiError::bad("X-Timestamp must be a non-negative number of milliseconds")
                    })?,
            )
            .filter(|&t| t != i64::MAX),
        };
        let (family, qualifier) = split_column(&column)?;
        check_key(&state.limits, &row)?;
        check_families(&desc, [family.as_slice()])?;
        check_qualifier(&state.limits, &qualifier)?;
        check_value(&state.limits, &body)?;
        let m = Mutation::Put {
            family,
            qualifier,
            timestamp,
            value: body.to_vec(),
        };
        state
            .kura
            .mutate(
                table,
                RowMutation {
                    row,
                    mutations: vec![m],
                },
            )
            .await?;
        return Ok(HttpResponse::Ok().finish());
    }
    let rows = parse_cellset(repr, &body)?;
    let mut ms = Vec::with_capacity(rows.len());
    for r in rows {
        ms.push(row_mutation(&state.limits, &desc, &spec, r)?);
    }
    match ms.len() {
        0 => {}
        1 => state.kura.mutate(table, ms.remove(0)).await?,
        _ => state.kura.mutate_rows(table, ms).await?,
    }
    Ok(HttpResponse::Ok().finish())
}

/// `DELETE /{t}/{row}[/{cols}][/{ts}]`: versions `<= ts` (or all) of the row, families or
/// columns. 200 even if nothing was there.
pub async fn delete(
    req: &HttpRequest,
    state: &AppState,
    table: &str,
    raw: &str,
) -> ApiResult<HttpResponse> {
    let query = Query::of(req)?;
    let enc = KeyEncoding::from_request(req, &query)?;
    let spec = RowSpec::parse(raw, enc)?;
    if spec.is_multi_row() {
        return Err(ApiError::bad(
            "DELETE takes one row, not a range or a prefix*",
        ));
    }
    check_key(&state.limits, &spec.row)?;
    let desc = table_or_404(state, table).await?;
    let ts = spec.has_timestamp().then_some(spec.end_time);
    let cols = spec.column_specs();
    check_families(&desc, cols.iter().map(spec_family))?;
    for c in &cols {
        if let ColumnSpec::Column(_, qualifier) = c {
            check_qualifier(&state.limits, qualifier)?;
        }
    }
    let mutations = if cols.is_empty() {
        vec![Mutation::DeleteRow { timestamp: ts }]
    } else {
        cols.into_iter()
            .map(|c| match c {
                ColumnSpec::Family(family) => Mutation::DeleteFamily {
                    family,
                    timestamp: ts,
                },
                ColumnSpec::Column(family, qualifier) => Mutation::DeleteColumn {
                    family,
                    qualifier,
                    timestamp: ts,
                },
            })
            .collect()
    };
    state
        .kura
        .mutate(
            table,
            RowMutation {
                row: spec.row,
                mutations,
            },
        )
        .await?;
    Ok(HttpResponse::Ok().finish())
}

/// Reads one multiget keeps in flight at once (well under a region's in-flight bound, `in_flight_limit`).
const MULTIGET_IN_FLIGHT: usize = 64;

/// `GET /{t}/multiget[/{cols}]?row=r1&row=r2/cf:q[&v=N][&filter=..]`: the rows found, in
/// request order; 404 if none (or no `row`).
pub async fn multiget(
    req: &HttpRequest,
    state: &AppState,
    table: &str,
    path_cols: &str,
) -> ApiResult<HttpResponse> {
    let query = Query::of(req)?;
    let enc = KeyEncoding::from_request(req, &query)?;
    let repr = negotiate(req, &[Repr::Xml, Repr::Json], Repr::Xml)?;
    let desc = table_or_404(state, table).await?;
    let versions = versions_param(&query, "v", 1)?;
    let mut extra_cols = Vec::new();
    for piece in path_cols
        .trim_matches('/')
        .split(',')
        .filter(|p| !p.is_empty())
    {
        extra_cols.push(enc.decode(super::media::url_decode(piece)?, "column")?);
    }
    let filter = filter_param(&query)?;
    let mut specs = Vec::new();
    for rk in query.all("row") {
        let mut spec = RowSpec::parse(rk, enc)?;
        if spec.is_multi_row() {
            return Err(ApiError::bad("multiget rows must be single rows"));
        }
        check_key(&state.limits, &spec.row)?;
        spec.columns.extend(extra_cols.iter().cloned());
        specs.push(spec);
    }
    if specs.is_empty() {
        return Err(ApiError::NotFound);
    }
    // The filter is stateless per row for the filters a multiget can use; one shared instance.
    let mut reads = Vec::with_capacity(specs.len());
    for s in &specs {
        reads.push(read_spec(&desc, s, versions)?);
    }
    let mut prepared = Vec::with_capacity(specs.len());
    let mut filter = filter;
    for (i, r) in reads.iter_mut().enumerate() {
        // Re-parse for each row so every read gets its own filter state (e.g. PageFilter).
        let f = if i == 0 {
            filter.take()
        } else {
            filter_param(&query)?
        };
        prepared.push(PreparedFilter::new(f, r, false));
    }
    let kura = &state.kura;
    let futures = specs
        .iter()
        .zip(reads.iter())
        .zip(prepared.iter())
        .map(|((s, r), p)| kura.get_filtered(table, &s.row, r, p.filter.clone()));
    // At most MULTIGET_IN_FLIGHT reads at once, in request order: one multiget of thousands of
    // rows must not fill a region's in-flight gate and turn into a 503 (`Overloaded`) for itself.
    let results: Vec<_> = futures::stream::iter(futures)
        .buffered(MULTIGET_IN_FLIGHT)
        .collect()
        .await;
    let mut rows = Vec::new();
    for (res, p) in results.into_iter().zip(prepared.iter()) {
        if let Some(row) = res?.and_then(|r| p.finish(r)) {
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return Err(ApiError::NotFound);
    }
    Ok(HttpResponse::Ok()
        .content_type(repr.content_type())
        .body(cellset::render(repr, &rows)))
}
