//! Stateful scanners (`/{t}/scanner`, `R/ScannerResource.java`, `R/ScannerInstanceResource.java`)
//! and stateless scans (`/{t}/*`, `/{t}/{prefix}*`, `R/TableScanResource.java`).
//!
//! A scanner is a position in a merged scan of the table: each `GET` pulls pages from
//! [`kura_backend::Backend::scan`] and answers up to `batch` **cells** (a row can be split across
//! two answers), then 204 once exhausted.
//!
//! Scanners live in the server's registry ([`AppState::scanners`]), shared by its HTTP workers.
//! A scanner lives on the server that created it: behind a load balancer over several servers
//! (the Bigtable backend), its `GET`s must reach that server (sticky sessions), or the client
//! uses stateless scans (`/{t}/*`), which any server answers.
//!
//! # Invariants
//! 1. At most `Limits::max_scanners` are open per store; creating one more is a 429.
//! 2. A scanner unused for `Limits::scanner_idle_secs` is closed (checked on every scanner
//!    request), and then answers 404 like any unknown scanner.
//! 3. A scanner holds no lock on the store between requests: it is a resume key and a
//!    buffer of at most one page of rows.
//! 4. Stateless scans stream page by page and never hold more than one page in memory.

use super::cellset::{self};
use super::filters::{self};
use super::media::{
    b64_decode, b64_encode, body_repr, negotiate, read_body, url_decode, Query, Repr, XmlShape,
};
use super::params::{filter_param, versions_param, PreparedFilter};
use super::rowspec::parse_column;
use super::{check_families, spec_family, table_or_404};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use actix_web::http::{header, Method};
use actix_web::{web, HttpRequest, HttpResponse};
use dashmap::DashMap;
use kura_backend::{ColumnSelection, ReadSpec, Row, ScanLimits, ScanSpec, TimeRange};
use kura_backend::{ScanRequest, Store};
use quick_xml::events::Event;
use quick_xml::Reader;
use serde_json::Value;
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most cell bytes one scanner `GET` gathers in memory at a time. An answer that needs more
/// (an unlimited `batch`, HBase's default, which starbase relies on to read a whole table in one
/// `GET`) is streamed in pieces of about this size, each ending at a row boundary.
const MAX_RESPONSE_BYTES: usize = 32 << 20;

/// A scanner definition (`M/ScannerModel.java`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannerModel {
    pub start_row: Vec<u8>,
    pub end_row: Vec<u8>,
    pub columns: Vec<Vec<u8>>,
    pub batch: usize,
    pub start_time: i64,
    pub end_time: i64,
    pub max_versions: u32,
    pub limit: Option<usize>,
    pub include_start_row: bool,
    pub include_stop_row: bool,
    pub reversed: bool,
    pub filter: Option<String>,
}

impl Default for ScannerModel {
    fn default() -> Self {
        ScannerModel {
            start_row: Vec::new(),
            end_row: Vec::new(),
            columns: Vec::new(),
            batch: i32::MAX as usize,
            start_time: 0,
            end_time: i64::MAX,
            max_versions: i32::MAX as u32,
            limit: None,
            include_start_row: true,
            include_stop_row: false,
            reversed: false,
            filter: None,
        }
    }
}

fn num_i64(v: &Value, what: &str) -> ApiResult<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| ApiError::bad(format!("{what} is not an integer"))),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| ApiError::bad(format!("{what} is not an integer"))),
        _ => Err(ApiError::bad(format!("{what} must be a number"))),
    }
}

fn boolean(v: &Value, what: &str) -> ApiResult<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(ApiError::bad(format!("{what} must be true or false"))),
    }
}

impl ScannerModel {
    fn set(&mut self, key: &str, v: &Value) -> ApiResult<()> {
        let text = |v: &Value| match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(ApiError::bad(format!("{key} must be a string"))),
        };
        match key {
            "startRow" => self.start_row = b64_decode(&text(v)?, "startRow")?,
            "endRow" => self.end_row = b64_decode(&text(v)?, "endRow")?,
            "column" => {
                let list = match v {
                    Value::Array(a) => a.clone(),
                    Value::Null => Vec::new(),
                    other => vec![other.clone()],
                };
                for c in list {
                    self.columns.push(b64_decode(&text(&c)?, "column")?);
                }
            }
            "batch" => self.batch = num_i64(v, key)?.clamp(1, i32::MAX as i64) as usize,
            "startTime" => self.start_time = num_i64(v, key)?,
            "endTime" => self.end_time = num_i64(v, key)?,
            "maxVersions" => self.max_versions = num_i64(v, key)?.clamp(1, u32::MAX as i64) as u32,
            "limit" => {
                let n = num_i64(v, key)?;
                self.limit = (n > 0).then_some(n as usize);
            }
            "includeStartRow" => self.include_start_row = boolean(v, key)?,
            "includeStopRow" => self.include_stop_row = boolean(v, key)?,
            "reversed" => self.reversed = boolean(v, key)?,
            "filter" => {
                let f = match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    // Some clients send the FilterModel as an object: accept it.
                    other => other.to_string(),
                };
                self.filter = (!f.trim().is_empty()).then_some(f);
            }
            // caching, cacheBlocks, labels, the `hbase` client's `columns`: not ours to act on.
            _ => {}
        }
        Ok(())
    }

    /// Parses a scanner body; an empty body or `""` is the default scanner.
    pub fn parse(repr: Repr, body: &[u8]) -> ApiResult<ScannerModel> {
        let trimmed = body.trim_ascii();
        let mut model = ScannerModel::default();
        if trimmed.is_empty() || trimmed == b"\"\"" {
            return Ok(model);
        }
        match repr {
            Repr::Xml => {
                let mut reader = Reader::from_reader(trimmed);
                reader.config_mut().trim_text(true);
                let mut buf = Vec::new();
                let mut child: Option<String> = None;
                let bad = |e: &dyn std::fmt::Display| {
                    ApiError::bad(format!("the body is not valid XML: {e}"))
                };
                let mut seen = false;
                let mut shape = XmlShape::default();
                loop {
                    let ev = reader.read_event_into(&mut buf).map_err(|e| bad(&e))?;
                    shape.see(&ev)?;
                    match ev {
                        Event::Start(e) | Event::Empty(e) => {
                            let name =
                                String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
                            if name == "Scanner" {
                                seen = true;
                                for a in e.attributes() {
                                    let a = a.map_err(|e| bad(&e))?;
                                    let k = String::from_utf8_lossy(a.key.as_ref()).into_owned();
                                    let v = a.unescape_value().map_err(|e| bad(&e))?.into_owned();
                                    model.set(&k, &Value::String(v))?;
                                }
                            } else {
                                child = Some(name);
                            }
                        }
                        Event::Text(t) => {
                            let v = t.unescape().map_err(|e| bad(&e))?.into_owned();
                            match child.as_deref() {
                                Some("column") => model.columns.push(b64_decode(&v, "column")?),
                                Some(k @ "filter") => model.set(k, &Value::String(v))?,
                                _ => {}
                            }
                        }
                        Event::CData(t) if child.as_deref() == Some("filter") => {
                            let v = String::from_utf8_lossy(&t).into_owned();
                            model.set("filter", &Value::String(v))?;
                        }
                        Event::End(_) => child = None,
                        Event::Eof => break,
                        _ => {}
                    }
                    buf.clear();
                }
                if !seen {
                    return Err(ApiError::bad(
                        "an XML scanner must be <Scanner ..>..</Scanner>",
                    ));
                }
            }
            _ => {
                let v: Value = serde_json::from_slice(trimmed)
                    .map_err(|e| ApiError::bad(format!("the body is not valid JSON: {e}")))?;
                match v {
                    Value::Object(obj) => {
                        for (k, v) in obj.iter() {
                            model.set(k, v)?;
                        }
                    }
                    Value::String(s) if s.is_empty() => {}
                    _ => return Err(ApiError::bad("a scanner must be a JSON object")),
                }
            }
        }
        Ok(model)
    }
}

fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xFF {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// Builds the key bounds of a scan from HBase's start/stop rows.
fn bounds(
    start: &[u8],
    stop: &[u8],
    include_start: bool,
    include_stop: bool,
    reversed: bool,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let b = |k: &[u8], incl: bool| {
        if k.is_empty() {
            Bound::Unbounded
        } else if incl {
            Bound::Included(k.to_vec())
        } else {
            Bound::Excluded(k.to_vec())
        }
    };
    if reversed {
        // A reversed scan starts at the high end: startRow is the upper bound.
        (b(stop, include_stop), b(start, include_start))
    } else {
        (b(start, include_start), b(stop, include_stop))
    }
}

/// Narrows `spec` to rows starting with `prefix`.
fn restrict_to_prefix(spec: &mut ScanSpec, prefix: &[u8]) {
    if prefix.is_empty() {
        return;
    }
    let below_prefix = match &spec.low {
        Bound::Unbounded => true,
        Bound::Included(k) | Bound::Excluded(k) => k.as_slice() < prefix,
    };
    if below_prefix {
        spec.low = Bound::Included(prefix.to_vec());
    }
    if let Some(end) = successor(prefix) {
        let above_end = match &spec.high {
            Bound::Unbounded => true,
            Bound::Included(k) | Bound::Excluded(k) => k.as_slice() >= end.as_slice(),
        };
        if above_end {
            spec.high = Bound::Excluded(end);
        }
    }
}

struct Scanner {
    table: String,
    kura: Store,
    spec: ScanSpec,
    remaining: Option<usize>,
    batch: usize,
    filter: PreparedFilter,
    buffered: VecDeque<Row>,
    exhausted: bool,
    last_used: Instant,
}

impl Scanner {
    async fn fill(&mut self) -> ApiResult<()> {
        while self.buffered.is_empty() && !self.exhausted {
            if self.remaining == Some(0) {
                self.exhausted = true;
                break;
            }
            let req = ScanRequest {
                spec: self.spec.clone(),
                // The limit counts the rows returned: the store's count only when no row it
                // returns can be dropped by `finish`.
                limit: self.remaining.filter(|_| !self.filter.strips()),
                // Still no more rows per page than the limit asks (the loop goes on if the
                // filter drops some).
                page: ScanLimits {
                    max_rows: self.remaining.map_or(256, |r| r.clamp(1, 256)),
                    ..ScanLimits::default()
                },
            };
            let page = self.kura.scan(&self.table, req).await?;
            if let Some(last) = page.rows.last() {
                self.spec = self.spec.resume_after(&last.key);
            }
            self.exhausted = page.complete || page.rows.is_empty();
            let mut rows: Vec<Row> = page
                .rows
                .into_iter()
                .filter_map(|r| self.filter.finish(r))
                .collect();
            if let Some(r) = self.remaining.as_mut() {
                rows.truncate(*r);
                *r -= rows.len();
            }
            self.buffered.extend(rows);
        }
        Ok(())
    }

    /// Up to `max_cells` cells in at most `max_rows` rows, and about [`MAX_RESPONSE_BYTES`]
    /// of cells; empty once exhausted. `capped`: stopped for the bytes, not for the limits.
    async fn next_cells(
        &mut self,
        max_cells: usize,
        max_rows: Option<usize>,
    ) -> ApiResult<Vec<Row>> {
        Ok(self.next_cells_capped(max_cells, max_rows).await?.0)
    }

    async fn next_cells_capped(
        &mut self,
        max_cells: usize,
        max_rows: Option<usize>,
    ) -> ApiResult<(Vec<Row>, bool)> {
        let mut out: Vec<Row> = Vec::new();
        let mut cells = 0usize;
        let mut bytes = 0usize;
        while cells < max_cells && bytes < MAX_RESPONSE_BYTES {
            self.fill().await?;
            let Some(front) = self.buffered.front_mut() else {
                break;
            };
            let continuing = out.last().is_some_and(|r| r.key == front.key);
            if !continuing && max_rows.is_some_and(|m| out.len() >= m) {
                break;
            }
            let take = (max_cells - cells).min(front.cells.len());
            let taken: Vec<_> = front.cells.drain(..take).collect();
            bytes += taken
                .iter()
                .map(|c| c.value.len() + c.qualifier.len() + 16)
                .sum::<usize>();
            cells += taken.len();
            if continuing {
                if let Some(last) = out.last_mut() {
                    last.cells.extend(taken);
                }
            } else {
                out.push(Row {
                    key: front.key.clone(),
                    cells: taken,
                });
            }
            if front.cells.is_empty() {
                self.buffered.pop_front();
            }
        }
        let capped = bytes >= MAX_RESPONSE_BYTES && cells < max_cells;
        Ok((out, capped))
    }
}

type Shared = Arc<tokio::sync::Mutex<Scanner>>;

/// The scanners open on one server, shared by its workers ([`AppState::scanners`]).
#[derive(Default)]
pub struct Registry {
    scanners: DashMap<String, Shared>,
}

fn registry(state: &AppState) -> Arc<Registry> {
    state.scanners.clone()
}

/// Scanners open on this server, for `kura_scanners_open` in `/metrics` (the counting function
/// [`AppState::new`] gives the server's `ops::ServerOps`). Idle ones are swept first, as any
/// scanner request would.
pub fn open_count(state: &AppState) -> usize {
    let reg = registry(state);
    reg.sweep(Duration::from_secs(state.limits.scanner_idle_secs));
    reg.scanners.len()
}

impl Registry {
    /// Whether scanner `id` is still `scanner` (not deleted, swept or replaced).
    fn holds(&self, id: &str, scanner: &Shared) -> bool {
        self.scanners
            .get(id)
            .is_some_and(|s| Arc::ptr_eq(&*s, scanner))
    }

    /// Closes every scanner idle for longer than `idle`.
    fn sweep(&self, idle: Duration) {
        self.scanners.retain(|_, s| match s.try_lock() {
            Ok(g) => g.last_used.elapsed() <= idle,
            Err(_) => true, // in use right now
        });
    }
}

fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("{millis}{:016x}", h.finish())
}

/// Every method under `/{t}/scanner[/{id}]`.
pub async fn handle(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    table: &str,
    after: &str,
) -> ApiResult<HttpResponse> {
    let id = after.trim_matches('/');
    let reg = registry(state);
    reg.sweep(Duration::from_secs(state.limits.scanner_idle_secs));
    match (req.method(), id.is_empty()) {
        (&Method::PUT | &Method::POST, true) => create(req, payload, state, table, &reg).await,
        (&Method::GET, false) => next(req, state, table, id, &reg).await,
        (&Method::DELETE, false) => {
            let removed = reg.scanners.remove_if(id, |_, s| match s.try_lock() {
                Ok(g) => g.table == table,
                Err(_) => true,
            });
            removed
                .map(|_| HttpResponse::Ok().finish())
                .ok_or(ApiError::NotFound)
        }
        (_, true) => Err(ApiError::MethodNotAllowed("PUT, POST")),
        (_, false) => Err(ApiError::MethodNotAllowed("GET, DELETE")),
    }
}

async fn create(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    table: &str,
    reg: &Registry,
) -> ApiResult<HttpResponse> {
    let body = read_body(req, payload, &state.limits).await?;
    let repr = if body.trim_ascii().is_empty() {
        Repr::Json
    } else {
        body_repr(req, &body, &[Repr::Json, Repr::Xml])?
    };
    let model = ScannerModel::parse(repr, &body)?;
    let filter = match &model.filter {
        Some(f) => Some(
            filters::parse_filter_json(f)
                .map_err(|e| ApiError::bad(format!("invalid filter: {e}")))?,
        ),
        None => None,
    };
    let columns: Vec<_> = model.columns.iter().map(|c| parse_column(c)).collect();
    // Like HBase, a scanner on a missing table is created and answers 404 when read.
    if let Some(desc) = state.kura.table(table).await? {
        check_families(&desc, columns.iter().map(spec_family))?;
    }
    check_time_range(model.start_time, model.end_time, "startTime", "endTime")?;
    let mut read = ReadSpec {
        columns: ColumnSelection(columns),
        time_range: TimeRange {
            min: model.start_time,
            max: model.end_time,
        },
        max_versions: model.max_versions,
    };
    let prepared = PreparedFilter::new(filter, &mut read, model.reversed);
    let (low, high) = bounds(
        &model.start_row,
        &model.end_row,
        model.include_start_row,
        model.include_stop_row,
        model.reversed,
    );
    let mut spec = ScanSpec {
        low,
        high,
        reversed: model.reversed,
        read,
        filter: prepared.filter.clone(),
    };
    prepared.bound_scan(&mut spec);
    let remaining = match (model.limit, prepared.page_limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if reg.scanners.len() >= state.limits.max_scanners {
        return Err(ApiError::TooManyRequests(format!(
            "{} scanners are open; delete finished scanners (DELETE the scanner URL)",
            state.limits.max_scanners
        )));
    }
    let id = new_id();
    let scanner = Scanner {
        table: table.to_string(),
        kura: state.kura.clone(),
        spec,
        remaining,
        batch: model.batch.max(1),
        filter: prepared,
        buffered: VecDeque::new(),
        exhausted: false,
        last_used: Instant::now(),
    };
    reg.scanners
        .insert(id.clone(), Arc::new(tokio::sync::Mutex::new(scanner)));
    let ci = req.connection_info();
    let location = format!("{}://{}/{table}/scanner/{id}", ci.scheme(), ci.host());
    Ok(HttpResponse::Created()
        .insert_header((header::LOCATION, location))
        .finish())
}

async fn next(
    req: &HttpRequest,
    state: &AppState,
    table: &str,
    id: &str,
    reg: &Arc<Registry>,
) -> ApiResult<HttpResponse> {
    let shared = reg
        .scanners
        .get(id)
        .map(|s| s.clone())
        .ok_or(ApiError::NotFound)?;
    let mut s = shared.clone().lock_owned().await;
    // Deleted or swept while this GET waited for it.
    if s.table != table || !reg.holds(id, &shared) {
        return Err(ApiError::NotFound);
    }
    s.last_used = Instant::now();
    let repr = negotiate(req, &[Repr::Xml, Repr::Json, Repr::Binary], Repr::Binary)?;
    table_or_404(state, table).await?;
    let query = Query::of(req)?;
    let max_cells = match query.number::<i64>("c")? {
        Some(c) if c > 0 => c as usize,
        _ => s.batch,
    };
    let max_rows = query
        .number::<i64>("n")?
        .filter(|&n| n > 0)
        .map(|n| n as usize);
    if repr == Repr::Binary {
        let rows = s.next_cells(1, Some(1)).await?;
        let Some(row) = rows.into_iter().next() else {
            return Ok(HttpResponse::NoContent().finish());
        };
        let cell = row.cells.into_iter().next().ok_or(ApiError::NotFound)?;
        let mut resp = HttpResponse::Ok()
            .content_type(Repr::Binary.header_value())
            .insert_header(("X-Row", b64_encode(&row.key)))
            .insert_header(("X-Column", b64_encode(&cellset::column_bytes(&cell))))
            .insert_header(("X-Timestamp", cell.timestamp.to_string()))
            .body(cell.value);
        resp.head_mut().set_camel_case_headers(true);
        return Ok(resp);
    }
    let (rows, capped) = s.next_cells_capped(max_cells, max_rows).await?;
    s.last_used = Instant::now();
    if rows.is_empty() {
        return Ok(HttpResponse::NoContent().finish());
    }
    if !capped {
        return Ok(HttpResponse::Ok()
            .content_type(repr.header_value())
            .body(cellset::render(repr, &rows)));
    }
    // More than one piece: stream the rest, taking the scanner for each piece only, so that a
    // client that stops reading does not hold it: it can then be swept or deleted, which ends
    // the stream at its next piece.
    drop(s);
    let (reg, id) = (reg.clone(), id.to_string());
    let mut out = String::from(cellset::open(repr));
    let mut first = true;
    push_rows(&mut out, repr, &mut first, &rows, None);
    let left = Left {
        cells: max_cells - rows.iter().map(|r| r.cells.len()).sum::<usize>(),
        rows: max_rows.map(|m| m - rows.len()),
    };
    let stream = futures::stream::unfold(
        (Some(out), Some((shared, left, first))),
        move |(pending, scanner)| {
            let (reg, id) = (reg.clone(), id.clone());
            async move {
                if let Some(out) = pending {
                    return Some((Ok(web::Bytes::from(out)), (None, scanner)));
                }
                let (shared, left, mut first) = scanner?;
                let mut s = shared.clone().lock_owned().await;
                let mut out = String::new();
                let (rows, capped) =
                    if left.cells == 0 || left.rows == Some(0) || !reg.holds(&id, &shared) {
                        (Vec::new(), false)
                    } else {
                        match s.next_cells_capped(left.cells, left.rows).await {
                            Ok(r) => r,
                            Err(e) => {
                                tracing::warn!(error = %e, "scanner failed mid-answer");
                                let err = actix_web::error::ErrorServiceUnavailable(e.to_string());
                                return Some((Err(err), (None, None)));
                            }
                        }
                    };
                s.last_used = Instant::now();
                drop(s);
                push_rows(&mut out, repr, &mut first, &rows, None);
                if !capped || rows.is_empty() {
                    out.push_str(cellset::close(repr));
                    return Some((Ok(web::Bytes::from(out)), (None, None)));
                }
                let left = Left {
                    cells: left.cells - rows.iter().map(|r| r.cells.len()).sum::<usize>(),
                    rows: left.rows.map(|m| m - rows.len()),
                };
                Some((
                    Ok(web::Bytes::from(out)),
                    (None, Some((shared, left, first))),
                ))
            }
        },
    );
    Ok(HttpResponse::Ok()
        .content_type(repr.header_value())
        .streaming(stream))
}

/// What a streamed scanner answer may still return.
#[derive(Clone, Copy)]
struct Left {
    cells: usize,
    rows: Option<usize>,
}

fn push_rows(out: &mut String, repr: Repr, first: &mut bool, rows: &[Row], batch: Option<usize>) {
    for r in rows {
        match batch {
            Some(b) if b > 0 && r.cells.len() > b => {
                for chunk in r.cells.chunks(b) {
                    cellset::push_row(out, repr, *first, &r.key, chunk);
                    *first = false;
                }
            }
            _ => {
                cellset::push_row(out, repr, *first, &r.key, &r.cells);
                *first = false;
            }
        }
    }
}

struct StreamState {
    kura: Store,
    table: String,
    req: ScanRequest,
    filter: Option<PreparedFilter>,
    pending: Option<Vec<Row>>,
    complete: bool,
    first_row: bool,
    closed: bool,
    repr: Repr,
    batch: Option<usize>,
}

impl StreamState {
    /// Fetches one page, advancing the resume key and the remaining limit.
    async fn page(&mut self) -> Result<Vec<Row>, kura_backend::Error> {
        let mut req = self.req.clone();
        if self.filter.as_ref().is_some_and(PreparedFilter::strips) {
            // `finish` may drop rows: the limit counts the rows it keeps (below), and bounds
            // each page read (the next page follows if the filter dropped some).
            if let Some(l) = req.limit.take() {
                req.page.max_rows = req.page.max_rows.min(l.max(1));
            }
        }
        let page = self.kura.scan(&self.table, req).await?;
        if let Some(last) = page.rows.last() {
            self.req.spec = self.req.spec.resume_after(&last.key);
        }
        self.complete |= page.complete || page.rows.is_empty();
        let mut rows = match &self.filter {
            Some(f) => page.rows.into_iter().filter_map(|r| f.finish(r)).collect(),
            None => page.rows,
        };
        if let Some(l) = self.req.limit.as_mut() {
            rows.truncate(*l);
            *l -= rows.len();
            if *l == 0 {
                self.complete = true;
            }
        }
        Ok(rows)
    }
}

/// Answers a scan as a streamed CellSet: the first page is read before answering (so a missing
/// table is a 404), then one page per chunk. `empty_is_404` for row-range GETs.
pub async fn stream_rows(
    state: &AppState,
    table: &str,
    req: ScanRequest,
    repr: Repr,
    batch: Option<usize>,
    filter: Option<PreparedFilter>,
    empty_is_404: bool,
) -> ApiResult<HttpResponse> {
    let mut st = StreamState {
        kura: state.kura.clone(),
        table: table.to_string(),
        complete: req.limit == Some(0),
        req,
        filter,
        pending: None,
        first_row: true,
        closed: false,
        repr,
        batch,
    };
    let mut first = Vec::new();
    while first.is_empty() && !st.complete {
        first = st.page().await?;
    }
    if first.is_empty() && empty_is_404 {
        return Err(ApiError::NotFound);
    }
    st.pending = Some(first);
    let stream = futures::stream::unfold(st, |mut st| async move {
        if st.closed {
            return None;
        }
        let mut out = String::new();
        if let Some(rows) = st.pending.take() {
            out.push_str(cellset::open(st.repr));
            push_rows(&mut out, st.repr, &mut st.first_row, &rows, st.batch);
        } else if !st.complete {
            match st.page().await {
                Ok(rows) => push_rows(&mut out, st.repr, &mut st.first_row, &rows, st.batch),
                Err(e) => {
                    tracing::warn!(table = %st.table, error = %e, "scan failed mid-stream");
                    st.closed = true;
                    let err = actix_web::error::ErrorServiceUnavailable(e.to_string());
                    return Some((Err(err), st));
                }
            }
        }
        if st.complete {
            out.push_str(cellset::close(st.repr));
            st.closed = true;
        }
        Some((Ok::<_, actix_web::Error>(web::Bytes::from(out)), st))
    });
    Ok(HttpResponse::Ok()
        .content_type(repr.header_value())
        .streaming(stream))
}

/// `GET /{t}/*` and `GET /{t}/{prefix}*`: a one-shot scan driven by query parameters.
pub async fn stateless(
    req: &HttpRequest,
    state: &AppState,
    table: &str,
    prefix_raw: &str,
) -> ApiResult<HttpResponse> {
    let query = Query::of(req)?;
    let repr = negotiate(req, &[Repr::Xml, Repr::Json], Repr::Xml)?;
    let desc = table_or_404(state, table).await?;
    let prefix = url_decode(prefix_raw)?;
    let start = query.first("startrow").unwrap_or("").as_bytes().to_vec();
    let stop = query.first("endrow").unwrap_or("").as_bytes().to_vec();
    let include_start = query.boolean("includeStartRow")?.unwrap_or(true);
    let include_stop = query.boolean("includeStopRow")?.unwrap_or(false);
    let reversed = query.boolean("reversed")?.unwrap_or(false);
    let limit = query
        .number::<i64>("limit")?
        .filter(|&n| n > 0)
        .map(|n| n as usize);
    let batch = query
        .number::<i64>("batchsize")?
        .filter(|&n| n > 0)
        .map(|n| n as usize);
    let max_versions = versions_param(&query, "maxversions", 1)?;
    let start_time = query.number::<i64>("starttime")?.unwrap_or(0);
    let end_time = query.number::<i64>("endtime")?.unwrap_or(i64::MAX);
    let mut columns = Vec::new();
    for c in query.all("column") {
        let c = c.trim();
        if !c.is_empty() {
            columns.push(parse_column(c.as_bytes()));
        }
    }
    check_families(&desc, columns.iter().map(spec_family))?;
    check_time_range(start_time, end_time, "starttime", "endtime")?;
    let mut read = ReadSpec {
        columns: ColumnSelection(columns),
        time_range: TimeRange {
            min: start_time,
            max: end_time,
        },
        max_versions,
    };
    let prepared = PreparedFilter::new(filter_param(&query)?, &mut read, reversed);
    // HBase starts a forward `prefix*` scan at the prefix itself, honouring includeStartRow.
    let start = if start.is_empty() && !reversed {
        prefix.clone()
    } else {
        start
    };
    let (low, high) = bounds(&start, &stop, include_start, include_stop, reversed);
    let mut spec = ScanSpec {
        low,
        high,
        reversed,
        read,
        filter: prepared.filter.clone(),
    };
    restrict_to_prefix(&mut spec, &prefix);
    prepared.bound_scan(&mut spec);
    let limit = match (limit, prepared.page_limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let request = ScanRequest {
        spec,
        limit,
        page: ScanLimits::default(),
    };
    stream_rows(state, table, request, repr, batch, Some(prepared), false).await
}

/// 400 unless `0 <= start <= end` (HBase's `TimeRange` rejects negative and reversed ranges).
fn check_time_range(start: i64, end: i64, start_name: &str, end_name: &str) -> ApiResult<()> {
    if start < 0 || end < 0 {
        return Err(ApiError::bad(format!(
            "{start_name}={start}, {end_name}={end}: timestamps must not be negative"
        )));
    }
    if end < start {
        return Err(ApiError::bad(format!(
            "{start_name}={start} is after {end_name}={end}: give {start_name} <= {end_name}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanner_defaults_are_unlimited() {
        let m = ScannerModel::parse(Repr::Json, b"\"\"").expect("empty scanner");
        assert_eq!(m.batch, i32::MAX as usize);
        assert_eq!(m.max_versions, i32::MAX as u32);
        assert_eq!((m.start_time, m.end_time), (0, i64::MAX));
    }

    #[test]
    fn json_and_xml_scanners_parse_alike() {
        let j = ScannerModel::parse(
            Repr::Json,
            br#"{"startRow":"YWFh","endRow":"enp6","column":["Y2Y6YQ==","Y2Y="],"batch":100,
                "maxVersions":1,"limit":10,"includeStopRow":true,"caching":5,
                "filter":"{\"type\":\"PrefixFilter\",\"value\":\"cm93\"}"}"#,
        )
        .expect("valid");
        assert_eq!(j.start_row, b"aaa");
        assert_eq!(j.columns, vec![b"cf:a".to_vec(), b"cf".to_vec()]);
        assert_eq!(
            (j.batch, j.limit, j.include_stop_row),
            (100, Some(10), true)
        );
        assert!(j
            .filter
            .as_deref()
            .is_some_and(|f| f.contains("PrefixFilter")));
        let x = ScannerModel::parse(
            Repr::Xml,
            br#"<Scanner batch="10" maxVersions="1" startRow="YQ==" columns="x"><column>Y2Y6YQ==</column><filter>{"type":"KeyOnlyFilter"}</filter></Scanner>"#,
        )
        .expect("valid");
        assert_eq!((x.batch, x.start_row.as_slice()), (10, &b"a"[..]));
        assert_eq!(x.columns, vec![b"cf:a".to_vec()]);
        assert_eq!(x.filter.as_deref(), Some(r#"{"type":"KeyOnlyFilter"}"#));
    }

    #[test]
    fn prefix_restriction_intersects_bounds() {
        let mut s = ScanSpec::all();
        restrict_to_prefix(&mut s, b"ab");
        assert_eq!(s.low, Bound::Included(b"ab".to_vec()));
        assert_eq!(s.high, Bound::Excluded(b"ac".to_vec()));
        let mut s = ScanSpec::forward(b"abc", b"abd");
        restrict_to_prefix(&mut s, b"ab");
        assert_eq!(
            (s.low, s.high),
            (
                Bound::Included(b"abc".to_vec()),
                Bound::Excluded(b"abd".to_vec())
            )
        );
        assert_eq!(successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(successor(b"\xff"), None);
    }

    #[test]
    fn reversed_bounds_swap_start_and_stop() {
        let (low, high) = bounds(b"z", b"a", true, false, true);
        assert_eq!(
            (low, high),
            (
                Bound::Excluded(b"a".to_vec()),
                Bound::Included(b"z".to_vec())
            )
        );
    }
}
