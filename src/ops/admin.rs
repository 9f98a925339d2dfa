//! `/admin/`: JSON operations on tables and regions (see `docs/ADMIN.md`).
//!
//! # Invariants
//! 1. Every answer is JSON; every error is `{"error":{"code","message"}}` with 404 for an unknown
//!    table or region, 400 for bad input, 503 when the store cannot serve now, 500 for a bug.
//! 2. A region is checked to belong to the table before it is split, so a split never touches
//!    another table's region whatever id the caller sends.
//! 3. Handlers hold no data: every figure comes from [`kura_backend::Store`] at request time.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse, ResponseError};
use kura_backend::RegionStats;
use kura_backend::{Error as BackendError, RegionInfo, TableDescriptor};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::heatmap;
use super::metrics::AdminOp;
use crate::state::AppState;

/// An admin request that failed, rendered as `{"error":{"code","message"}}`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct AdminError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl AdminError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        AdminError {
            status,
            code,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    fn table_not_found(table: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "table_not_found",
            format!("table not found: {table}"),
        )
    }
}

impl From<BackendError> for AdminError {
    fn from(e: BackendError) -> Self {
        let message = e.to_string();
        // Exhaustive: a new backend error does not compile until it is mapped here.
        let (status, code) = match e {
            BackendError::TableNotFound(_) => (StatusCode::NOT_FOUND, "table_not_found"),
            BackendError::NoSuchFamily { .. } => (StatusCode::NOT_FOUND, "family_not_found"),
            BackendError::TableExists(_) => (StatusCode::CONFLICT, "table_exists"),
            BackendError::InvalidArgument(_) => (StatusCode::BAD_REQUEST, "invalid_argument"),
            BackendError::NotACounter(_) => (StatusCode::BAD_REQUEST, "not_a_counter"),
            BackendError::CounterOverflow(_) => (StatusCode::BAD_REQUEST, "counter_overflow"),
            BackendError::Overloaded { .. } => (StatusCode::SERVICE_UNAVAILABLE, "overloaded"),
            BackendError::RegionUnavailable { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "region_unavailable")
            }
            BackendError::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, "shutting_down"),
            BackendError::DataDirInUse(_) => (StatusCode::SERVICE_UNAVAILABLE, "data_dir_in_use"),
            BackendError::Unsupported(_) => (StatusCode::BAD_REQUEST, "unsupported"),
            BackendError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            BackendError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        AdminError::new(status, code, message)
    }
}

impl ResponseError for AdminError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status)
            .json(json!({"error": {"code": self.code, "message": self.message}}))
    }
}

type Result<T> = std::result::Result<T, AdminError>;

/// A family as the console shows it.
#[derive(Debug, Serialize)]
pub struct FamilyView {
    pub name: String,
    pub max_versions: u32,
    pub ttl_secs: Option<u64>,
    pub attributes: std::collections::BTreeMap<String, String>,
}

/// A table as the console shows it.
#[derive(Debug, Serialize)]
pub struct TableView {
    pub name: String,
    pub families: Vec<FamilyView>,
    pub buckets: u32,
    pub salt_prefix_len: Option<u32>,
    pub initial_regions: Option<u32>,
    pub attributes: std::collections::BTreeMap<String, String>,
    pub regions: usize,
}

/// Figures of one region: its place and every store figure ([`RegionStats`], flattened), plus
/// the totals and the mean the console shows.
#[derive(Debug, Serialize)]
pub struct RegionView {
    pub id: u64,
    pub bucket_start: u32,
    pub bucket_end: u32,
    pub arbiter: usize,
    /// Memtable plus segment cells (all versions and delete markers).
    pub cells: u64,
    /// Memtable plus segment bytes.
    pub bytes: u64,
    /// Mean group-commit batch size since the region opened.
    pub group_commit_avg: f64,
    #[serde(flatten)]
    pub stats: RegionStats,
}

impl From<&RegionInfo> for RegionView {
    fn from(r: &RegionInfo) -> Self {
        let s = &r.stats;
        RegionView {
            id: r.id,
            bucket_start: r.bucket_start,
            bucket_end: r.bucket_end,
            arbiter: r.arbiter,
            cells: s.memtable_cells + s.segment_cells,
            bytes: s.memtable_bytes + s.segment_bytes,
            group_commit_avg: s.group_commit_avg(),
            stats: s.clone(),
        }
    }
}

fn table_view(d: &TableDescriptor, regions: usize) -> TableView {
    TableView {
        name: d.name.clone(),
        families: d
            .families
            .iter()
            .map(|f| {
                let name = String::from_utf8_lossy(&f.name).into_owned();
                FamilyView {
                    attributes: d.family_attributes.get(&name).cloned().unwrap_or_default(),
                    name,
                    max_versions: f.max_versions,
                    ttl_secs: f.ttl_secs,
                }
            })
            .collect(),
        buckets: d.salt.buckets,
        salt_prefix_len: d.salt.prefix_len,
        initial_regions: d.initial_regions,
        attributes: d.attributes.clone(),
        regions,
    }
}

async fn descriptor(state: &AppState, table: &str) -> Result<std::sync::Arc<TableDescriptor>> {
    state
        .kura
        .table(table)
        .await?
        .ok_or_else(|| AdminError::table_not_found(table))
}

async fn regions_of(state: &AppState, table: &str) -> Result<Vec<RegionInfo>> {
    let mut regions = state.kura.regions(table).await?;
    regions.sort_by_key(|r| r.bucket_start);
    Ok(regions)
}

/// `GET /admin/tables`.
pub async fn list_tables(state: web::Data<AppState>) -> Result<HttpResponse> {
    heatmap::sampler(&state).await;
    let mut tables = Vec::new();
    for d in state.kura.list_tables().await? {
        // A table dropped while we list is left out rather than failing the whole answer.
        match state.kura.regions(&d.name).await {
            Ok(r) => tables.push(table_view(&d, r.len())),
            Err(BackendError::TableNotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(HttpResponse::Ok().json(json!({ "tables": tables })))
}

/// `GET /admin/tables/{t}`.
pub async fn get_table(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse> {
    let table = path.into_inner();
    let d = descriptor(&state, &table).await?;
    let regions = regions_of(&state, &table).await?;
    let mut view = serde_json::to_value(table_view(&d, regions.len())).map_err(|e| {
        AdminError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
    })?;
    view["region_list"] = json!(regions.iter().map(RegionView::from).collect::<Vec<_>>());
    Ok(HttpResponse::Ok().json(view))
}

/// `GET /admin/tables/{t}/regions`.
pub async fn regions(state: web::Data<AppState>, path: web::Path<String>) -> Result<HttpResponse> {
    heatmap::sampler(&state).await;
    let table = path.into_inner();
    let d = descriptor(&state, &table).await?;
    let regions = regions_of(&state, &table).await?;
    Ok(HttpResponse::Ok().json(json!({
        "table": table,
        "buckets": d.salt.buckets,
        "regions": regions.iter().map(RegionView::from).collect::<Vec<_>>(),
    })))
}

/// `POST /admin/tables/{t}/flush`.
pub async fn flush(state: web::Data<AppState>, path: web::Path<String>) -> Result<HttpResponse> {
    let table = path.into_inner();
    descriptor(&state, &table).await?;
    let r = state.kura.flush(&table).await;
    state.ops.metrics.count_admin(AdminOp::Flush, r.is_ok());
    r?;
    let regions = regions_of(&state, &table).await?;
    Ok(HttpResponse::Ok().json(json!({
        "table": table,
        "flushed": true,
        "regions": regions.iter().map(RegionView::from).collect::<Vec<_>>(),
    })))
}

/// Query of `POST /admin/tables/{t}/compact`.
#[derive(Debug, Deserialize)]
// A misspelt parameter (`buket=`) is a 400, not a split at another bucket: splits cannot be
// undone.
#[serde(deny_unknown_fields)]
pub struct CompactQuery {
    /// `true` for a major compaction; default `false` (minor).
    pub major: Option<String>,
}

fn parse_bool(name: &str, v: Option<&str>) -> Result<bool> {
    match v {
        None | Some("") => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some("false") | Some("0") => Ok(false),
        Some(other) => Err(AdminError::bad_request(format!(
            "{name} must be true or false, not {other:?}"
        ))),
    }
}

/// `POST /admin/tables/{t}/compact?major=true|false`.
pub async fn compact(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<CompactQuery>,
) -> Result<HttpResponse> {
    let table = path.into_inner();
    let major = parse_bool("major", query.major.as_deref())?;
    descriptor(&state, &table).await?;
    let r = state.kura.compact(&table, major).await;
    let op = if major {
        AdminOp::CompactMajor
    } else {
        AdminOp::CompactMinor
    };
    state.ops.metrics.count_admin(op, r.is_ok());
    r?;
    let regions = regions_of(&state, &table).await?;
    Ok(HttpResponse::Ok().json(json!({
        "table": table,
        "compacted": true,
        "major": major,
        "regions": regions.iter().map(RegionView::from).collect::<Vec<_>>(),
    })))
}

/// Query of `POST /admin/tables/{t}/regions/{id}/split`.
#[derive(Debug, Deserialize)]
// A misspelt parameter (`buket=`) is a 400, not a split at another bucket: splits cannot be
// undone.
#[serde(deny_unknown_fields)]
pub struct SplitQuery {
    /// First bucket of the new upper region.
    pub bucket: Option<String>,
    /// Without `bucket`: `middle` (default, the store's choice), `size` (halve the writes the
    /// region's buckets received: cells written, a proxy for data size) or `load` (halve reads
    /// plus writes).
    pub by: Option<String>,
}

/// How a split point is chosen when no bucket is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitBy {
    Middle,
    Size,
    Load,
}

impl SplitBy {
    fn parse(v: Option<&str>) -> Result<SplitBy> {
        match v {
            None | Some("") | Some("middle") => Ok(SplitBy::Middle),
            Some("size") => Ok(SplitBy::Size),
            Some("load") => Ok(SplitBy::Load),
            Some(other) => Err(AdminError::bad_request(format!(
                "by must be middle, size or load, not {other:?}"
            ))),
        }
    }
}

/// The bucket in `(start, end)` that best halves `weights[start..end]`: the first bucket `b`
/// such that the buckets before it carry at least half the weight. `None` when the range
/// carries no weight (then the middle is as good as any) or is a single bucket.
pub fn balanced_split(weights: &[u64], start: u32, end: u32) -> Option<u32> {
    let lo = usize::try_from(start).ok()?;
    let hi = usize::try_from(end).ok()?.min(weights.len());
    if hi <= lo + 1 {
        return None;
    }
    let range = &weights[lo..hi];
    let total: u128 = range.iter().map(|&w| u128::from(w)).sum();
    if total == 0 {
        return None;
    }
    let mut below: u128 = 0;
    for (i, &w) in range.iter().enumerate() {
        // Splitting before bucket lo+i leaves `below` under it; stop once that reaches half,
        // picking whichever of "before" or "after" this bucket is closer to half.
        let after = below + u128::from(w);
        if after * 2 >= total {
            let before_gap = total.abs_diff(below * 2);
            let after_gap = total.abs_diff(after * 2);
            let cut = if i > 0 && before_gap <= after_gap {
                i
            } else {
                i + 1
            };
            let cut = cut.clamp(1, range.len() - 1);
            return u32::try_from(lo + cut).ok();
        }
        below = after;
    }
    None
}

/// `POST /admin/tables/{t}/regions/{id}/split[?bucket=N | ?by=middle|size|load]`.
pub async fn split(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<SplitQuery>,
) -> Result<HttpResponse> {
    let (table, region) = path.into_inner();
    let region: u64 = region.parse().map_err(|_| {
        AdminError::bad_request(format!("region id must be a number, not {region:?}"))
    })?;
    let bucket = match query.bucket.as_deref() {
        None | Some("") => None,
        Some(b) => Some(b.parse::<u32>().map_err(|_| {
            AdminError::bad_request(format!("bucket must be a non-negative number, not {b:?}"))
        })?),
    };
    let by = SplitBy::parse(query.by.as_deref())?;
    if bucket.is_some() && by != SplitBy::Middle {
        return Err(AdminError::bad_request(
            "give either bucket or by, not both",
        ));
    }
    descriptor(&state, &table).await?;
    let regions = regions_of(&state, &table).await?;
    let Some(info) = regions.iter().find(|r| r.id == region) else {
        return Err(AdminError::new(
            StatusCode::NOT_FOUND,
            "region_not_found",
            format!("table {table} has no region {region}"),
        ));
    };
    if info.bucket_end - info.bucket_start < 2 {
        return Err(AdminError::bad_request(format!(
            "region {region} owns a single bucket ({}) and cannot be split",
            info.bucket_start
        )));
    }
    if let Some(b) = bucket {
        if b <= info.bucket_start || b >= info.bucket_end {
            return Err(AdminError::bad_request(format!(
                "bucket {b} is not inside region {region}'s range: it must be in ({}, {})",
                info.bucket_start, info.bucket_end
            )));
        }
    }
    let bucket = match (bucket, by) {
        (Some(b), _) => Some(b),
        (None, SplitBy::Middle) => None,
        (None, by) => {
            let activity = state.kura.bucket_activity(&table).unwrap_or_default();
            let weights: Vec<u64> = activity
                .iter()
                .map(|&(r, w)| {
                    if by == SplitBy::Load {
                        r.saturating_add(w)
                    } else {
                        w
                    }
                })
                .collect();
            balanced_split(&weights, info.bucket_start, info.bucket_end)
        }
    };
    let r = state.kura.split_region(&table, region, bucket).await;
    state.ops.metrics.count_admin(AdminOp::Split, r.is_ok());
    let (low, high) = r?;
    let regions = regions_of(&state, &table).await?;
    Ok(HttpResponse::Ok().json(json!({
        "table": table,
        "split": region,
        "at_bucket": regions.iter().find(|r| r.id == high).map(|r| r.bucket_start),
        "into": [low, high],
        "regions": regions.iter().map(RegionView::from).collect::<Vec<_>>(),
    })))
}

/// `GET /admin/tables/{t}/heatmap`.
pub async fn heatmap(state: web::Data<AppState>, path: web::Path<String>) -> Result<HttpResponse> {
    let table = path.into_inner();
    descriptor(&state, &table).await?;
    if state.kura.bucket_activity(&table).is_none() {
        // The table exists (above), so this backend keeps no per-bucket activity.
        return Err(BackendError::Unsupported(format!(
            "the key heatmap counts reads and writes per salt bucket, and the {} backend has no \
             salt buckets (Bigtable splits tablets by key range itself)",
            state.kura.kind().name()
        ))
        .into());
    }
    let sampler = heatmap::sampler(&state).await;
    let matrix = sampler
        .matrix(&state.kura, &table)
        .await
        .ok_or_else(|| AdminError::table_not_found(&table))?;
    let regions = regions_of(&state, &table).await?;
    let mut v = serde_json::to_value(matrix).map_err(|e| {
        AdminError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
    })?;
    v["regions"] = json!(regions
        .iter()
        .map(|r| json!({"id": r.id, "bucket_start": r.bucket_start, "bucket_end": r.bucket_end}))
        .collect::<Vec<_>>());
    Ok(HttpResponse::Ok().json(v))
}

/// Any other path under `/admin/`: a JSON 404 that lists what exists.
pub async fn not_found() -> HttpResponse {
    AdminError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such admin endpoint; see docs/ADMIN.md: GET /admin/tables, GET /admin/tables/{t}, \
         GET /admin/tables/{t}/regions, GET /admin/tables/{t}/heatmap, \
         POST /admin/tables/{t}/flush, POST /admin/tables/{t}/compact?major=, \
         POST /admin/tables/{t}/regions/{id}/split?bucket=|by=middle|size|load, \
         POST /admin/backups, GET|DELETE /admin/backups/{id}, \
         GET /admin/backups/{id}/files/{path}, POST /admin/repair?app=",
    )
    .error_response()
}

/// A resource taking only `method`: any other method is a JSON 405 with `Allow`.
fn only(path: &str, method: &'static str, route: actix_web::Route) -> actix_web::Resource {
    web::resource(path)
        .route(route)
        .default_service(web::to(move || async move {
            let mut resp = AdminError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("this admin endpoint takes {method} only"),
            )
            .error_response();
            if let Ok(v) = actix_web::http::header::HeaderValue::from_str(method) {
                resp.headers_mut().insert(actix_web::http::header::ALLOW, v);
            }
            resp
        }))
}

/// Registers the `/admin` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    // Bad query strings (e.g. `?major=` given twice with a non-string) answer the JSON shape too.
    let query_cfg = web::QueryConfig::default()
        .error_handler(|e, _| AdminError::bad_request(e.to_string()).into());
    let path_cfg = web::PathConfig::default()
        .error_handler(|e, _| AdminError::bad_request(e.to_string()).into());
    cfg.service(
        web::scope("/admin")
            .app_data(query_cfg)
            .app_data(path_cfg)
            .service(only("/tables", "GET", web::get().to(list_tables)))
            .service(only("/tables/{table}", "GET", web::get().to(get_table)))
            .service(only(
                "/tables/{table}/regions",
                "GET",
                web::get().to(regions),
            ))
            .service(only(
                "/tables/{table}/heatmap",
                "GET",
                web::get().to(heatmap),
            ))
            .service(only("/tables/{table}/flush", "POST", web::post().to(flush)))
            .service(only(
                "/tables/{table}/compact",
                "POST",
                web::post().to(compact),
            ))
            .service(only(
                "/tables/{table}/regions/{region}/split",
                "POST",
                web::post().to(split),
            ))
            .service(only(
                "/backups",
                "POST",
                web::post().to(super::backup::create),
            ))
            .service(
                web::resource("/backups/{id}")
                    .route(web::get().to(super::backup::get))
                    .route(web::delete().to(super::backup::delete)),
            )
            .service(only(
                "/backups/{id}/files/{path:.*}",
                "GET",
                web::get().to(super::backup::file),
            ))
            // Finds and fixes what a crash left between the applications' rows (`kura repair`).
            .service(only(
                "/repair",
                "POST",
                web::post().to(crate::apps::repair::handle),
            ))
            .default_service(web::to(not_found)),
    );
}

#[cfg(test)]
mod tests {
    use super::balanced_split;

    #[test]
    fn balanced_split_halves_the_weight_of_the_range() {
        // All weight in bucket 6 of [4, 12): either side of it is as balanced as the other.
        let mut w = vec![0u64; 16];
        w[6] = 100;
        let b = balanced_split(&w, 4, 12).expect("a split point");
        assert!(b == 6 || b == 7, "{b}");
        // Even weight: the middle.
        let w = vec![5u64; 16];
        assert_eq!(balanced_split(&w, 0, 16), Some(8));
        // Skewed: most weight low, so the cut is low.
        let mut w = vec![1u64; 16];
        w[1] = 100;
        assert_eq!(balanced_split(&w, 0, 16), Some(2));
    }

    #[test]
    fn balanced_split_stays_strictly_inside_the_range() {
        let mut w = vec![0u64; 8];
        w[0] = 1000;
        assert_eq!(balanced_split(&w, 0, 8), Some(1));
        let mut w = vec![0u64; 8];
        w[7] = 1000;
        assert_eq!(balanced_split(&w, 0, 8), Some(7));
        assert_eq!(
            balanced_split(&[0; 8], 0, 8),
            None,
            "no weight: let the store choose"
        );
        assert_eq!(
            balanced_split(&[9; 8], 3, 4),
            None,
            "one bucket cannot split"
        );
    }
}
