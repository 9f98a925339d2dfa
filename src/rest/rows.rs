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
use super::media::{body_repr, negotiate, read_body, KeyEncoding, Query, Repr};
use super::params::{
    check_key, check_qualifier, check_value, filter_param, split_column, versions_param,
    PreparedFilter,
};
use super::rowspec::RowSpec;
use super::{check, check_families, scanners, spec_family, table_or_404};
use crate::error::{ApiError, ApiResult};
use crate::state::{AppState, Limits};
use actix_web::{web, HttpRequest, HttpResponse};
use futures::StreamExt;
use kura_backend::ScanRequest;
use kura_backend::{ColumnSelection, ColumnSpec, Mutation, ReadSpec, Row, RowMutation, ScanSpec};
use std::ops::Bound;

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
        .content_type(repr.header_value())
        .body(cellset::render(repr, &[row])))
}

fn binary_cell(row: Row) -> ApiResult<HttpResponse> {
    let cell = row.cells.into_iter().next().ok_or(ApiError::NotFound)?;
    let mut resp = HttpResponse::Ok()
        .content_type(Repr::Binary.header_value())
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

/// Rows of a multiget read alike that go to the backend in one `multi_get` (one message per
/// region involved, one request to Bigtable); up to [`MULTIGET_BATCHES_IN_FLIGHT`] batches at once.
const MULTIGET_BATCH_ROWS: usize = 64;
const MULTIGET_BATCHES_IN_FLIGHT: usize = 4;

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
    if filter.is_none() && reads.windows(2).all(|w| w[0] == w[1]) {
        // Every row read alike and nothing to filter (the common multiget): the rows go to the
        // backend in batches, one message per region a batch touches, not one read per row.
        let kura = &state.kura;
        let read = &reads[0];
        let batches = specs.chunks(MULTIGET_BATCH_ROWS).map(|batch| {
            let keys = batch.iter().map(|s| s.row.clone()).collect();
            kura.multi_get(table, keys, read)
        });
        let found: Vec<_> = futures::stream::iter(batches)
            .buffered(MULTIGET_BATCHES_IN_FLIGHT)
            .collect()
            .await;
        let mut rows = Vec::new();
        for batch in found {
            rows.extend(batch?.into_iter().flatten());
        }
        return multiget_answer(repr, rows);
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
    multiget_answer(repr, rows)
}

/// A multiget's answer: the rows found, in request order, or 404 if none.
fn multiget_answer(repr: Repr, rows: Vec<Row>) -> ApiResult<HttpResponse> {
    if rows.is_empty() {
        return Err(ApiError::NotFound);
    }
    Ok(HttpResponse::Ok()
        .content_type(repr.header_value())
        .body(cellset::render(repr, &rows)))
}
