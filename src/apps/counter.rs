//! The access counter (SEED_REQUIREMENTS.md §1.4): per-URL hit counts by hour, by day and in
//! total, read for one URL or for a whole domain with its subdomains over a time range.
//!
//! # Table `access`, families `h`, `d`, `t`
//! One row per URL (domain + path):
//!
//! `hash4(site) (4) | reversed domain (UTF-8) | 0x09 ('\t') | path (UTF-8)`
//!
//! - `site` is the domain's last two labels (`blog.example.jp` -> `example.jp`), or the whole
//!   domain if it has fewer. Every domain below a site shares its salt prefix, so one site's
//!   rows live in one region, and a domain query of two or more labels scans inside it.
//! - The reversed domain reverses the labels (`blog.example.jp` -> `jp.example.blog`), so a
//!   domain and its subdomains are adjacent in key order.
//! - Domains hold no control characters, so `'\t'` (0x09) sorts below every domain byte and key
//!   order is (reversed domain, path) order.
//!
//! Cells (8-byte BE counters): `h:yyyyMMddHH`, `d:yyyyMMdd`, `t:""`, UTC buckets. Hourly, daily
//! and total reads never mix, hence three families (the document's IO isolation).
//!
//! # Queries
//! - One URL: a get of its row, restricted to the family and to the bucket range `[start, end)`
//!   (bucket names are fixed-width digits, so byte order is time order).
//! - A domain `D` (two or more labels): a scan of `[hash4(site(D)) | rev(D) | '\t',
//!   hash4(site(D)) | rev(D) | '/')` whose rows are kept only if the byte after `rev(D)` is `'\t'`
//!   (the domain itself) or `'.'` (a subdomain): label boundaries, so `example.jp` never matches
//!   `badexample.jp` nor `example.jp-x`. A one-label domain (`jp`) spans sites: it scans the
//!   table with the same key filter (every region; documented cost).
//!
//! # Invariants
//! 1. A hit is one atomic `Increment` of `h`, `d` and `t` on one row; the answer is the counts
//!    after that increment. Nothing is counted in a server: totals are exact however the hits
//!    are spread over servers. A hit without `at` falls in the bucket of the serving server's
//!    clock (servers whose clocks disagree may file hits of one instant in adjacent buckets).
//! 2. `counts` is ordered by reversed domain, then path, then time; buckets without hits are absent.
//! 3. `end <= start`, a malformed bucket, or more than 10,000 buckets is a 400, never a full read.

use super::clock;
use super::error::{AppError, AppResult};
use super::keys::{hash4, reverse_domain};
use super::request;
use super::scan::scan_rows;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, NaiveDate};
use kura_backend::{
    Cell, ColumnSelection, ColumnSpec, Increment, ReadSpec, Row, RowFilter, ScanSpec,
};
use serde::Deserialize;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

/// The counter's table.
pub const TABLE: &str = "access";
/// Hourly counts, qualifier `yyyyMMddHH`.
pub const HOURLY: &str = "h";
/// Daily counts, qualifier `yyyyMMdd`.
pub const DAILY: &str = "d";
/// Total count, qualifier `""`.
pub const TOTAL: &str = "t";

/// Most buckets one hourly or daily query may span.
pub const MAX_BUCKETS: i64 = 10_000;
/// Longest accepted domain and path, bytes (the row key stays far below the store's limit).
const MAX_DOMAIN: usize = 253;
const MAX_PATH: usize = 2048;
/// Latest accepted hit time: 9999-12-30T23:59:59.999Z. Bucket names have 4-digit years, and a
/// query's `end` is exclusive: the last day's and hour's buckets must have a successor that can
/// be named, or their counts could never be read.
const MAX_AT: i64 = clock::LATEST_MS - 86_400_000;

/// Lower-cases and checks a domain: non-empty labels, no control, space or URL delimiters.
fn normalize_domain(raw: &str) -> AppResult<String> {
    let d = raw.strip_suffix('.').unwrap_or(raw).to_lowercase();
    let bad = |why: &str| AppError::bad(format!("invalid domain {raw:?}: {why}"));
    if d.is_empty() {
        return Err(bad("it is empty"));
    }
    if d.len() > MAX_DOMAIN {
        return Err(bad("longer than 253 bytes"));
    }
    if d.chars()
        .any(|c| c.is_control() || c.is_whitespace() || "/\\?#@".contains(c))
    {
        return Err(bad(
            "it holds a space, a control character or one of / \\ ? # @",
        ));
    }
    if d.split('.').any(str::is_empty) {
        return Err(bad("it has an empty label"));
    }
    Ok(d)
}

fn check_path(path: &str) -> AppResult<()> {
    if path.len() > MAX_PATH {
        return Err(AppError::bad(format!(
            "path is longer than {MAX_PATH} bytes"
        )));
    }
    Ok(())
}

/// `(domain, path)` of a URL: host lower-cased without port or user info, path without query or
/// fragment, `/` when empty.
fn parse_url(url: &str) -> AppResult<(String, String)> {
    let rest = match url.find("://") {
        Some(i)
            if url[..i]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            &url[i + 3..]
        }
        _ => url,
    };
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(auth_end);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host_port.starts_with('[') {
        let end = host_port.find(']').ok_or_else(|| {
            AppError::bad(format!(
                "url {url:?} has an unclosed '[' in its host: write an IPv6 host as [addr]"
            ))
        })?;
        &host_port[..=end]
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    if host.is_empty() {
        return Err(AppError::bad(format!("url {url:?} has no host")));
    }
    let domain = normalize_domain(host)?;
    let path_end = tail.find(['?', '#']).unwrap_or(tail.len());
    let path = if path_end == 0 {
        "/".to_string()
    } else {
        tail[..path_end].to_string()
    };
    check_path(&path)?;
    Ok((domain, path))
}

fn site_of(domain: &str) -> &str {
    match domain.rmatch_indices('.').nth(1) {
        Some((i, _)) => &domain[i + 1..],
        None => domain,
    }
}

fn row_key(domain: &str, path: &str) -> Vec<u8> {
    let rev = reverse_domain(domain);
    let mut k = Vec::with_capacity(4 + rev.len() + 1 + path.len());
    k.extend_from_slice(&hash4(site_of(domain).as_bytes()));
    k.extend_from_slice(rev.as_bytes());
    k.push(b'\t');
    k.extend_from_slice(path.as_bytes());
    k
}

/// `(domain, path)` from a row key.
fn decode_key(key: &[u8]) -> Option<(String, String)> {
    let body = key.get(4..)?;
    let tab = body.iter().position(|&b| b == b'\t')?;
    let rev = std::str::from_utf8(&body[..tab]).ok()?;
    let path = std::str::from_utf8(&body[tab + 1..]).ok()?;
    Some((reverse_domain(rev), path.to_string()))
}

fn hour_name(at: i64) -> AppResult<(String, String)> {
    let t = DateTime::from_timestamp_millis(at)
        .ok_or_else(|| AppError::bad(format!("at {at} is out of range")))?;
    Ok((
        t.format("%Y%m%d%H").to_string(),
        t.format("%Y%m%d").to_string(),
    ))
}

/// Bucket granularity of a range query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Granularity {
    Hour,
    Day,
}

impl Granularity {
    fn family(self) -> &'static str {
        match self {
            Granularity::Hour => HOURLY,
            Granularity::Day => DAILY,
        }
    }

    fn format(self) -> &'static str {
        match self {
            Granularity::Hour => "yyyyMMddHH",
            Granularity::Day => "yyyyMMdd",
        }
    }

    /// The bucket's index (hours or days since the epoch), if `s` is a valid bucket name.
    fn parse(self, s: &str) -> Option<i64> {
        let width = match self {
            Granularity::Hour => 10,
            Granularity::Day => 8,
        };
        if s.len() != width || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let y: i32 = s[0..4].parse().ok()?;
        let m: u32 = s[4..6].parse().ok()?;
        let d: u32 = s[6..8].parse().ok()?;
        let date = NaiveDate::from_ymd_opt(y, m, d)?;
        let days = date
            .signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1)?)
            .num_days();
        match self {
            Granularity::Day => Some(days),
            Granularity::Hour => {
                let h: i64 = s[8..10].parse().ok()?;
                (h < 24).then_some(days * 24 + h)
            }
        }
    }
}

/// Keeps the cells of one family inside `[start, end)` and, for domain queries, only the rows of
/// the domain and its subdomains (label boundary). Runs inside the region.
#[derive(Debug)]
struct CounterFilter {
    family: &'static str,
    range: Option<(Vec<u8>, Vec<u8>)>,
    /// Reversed domain the row key must start with (after the salt prefix), followed by `\t`
    /// or `.`.
    domain: Option<Vec<u8>>,
}

impl RowFilter for CounterFilter {
    fn accept_key(&self, row: &[u8]) -> bool {
        match &self.domain {
            None => true,
            Some(d) => {
                row.len() > 4 + d.len()
                    && row[4..].starts_with(d)
                    && matches!(row[4 + d.len()], b'\t' | b'.')
            }
        }
    }

    fn accept_row(&self, _row: &[u8], cells: &mut Vec<Cell>) -> bool {
        cells.retain(|c| {
            c.family == self.family.as_bytes()
                && self
                    .range
                    .as_ref()
                    .is_none_or(|(s, e)| c.qualifier >= *s && c.qualifier < *e)
        });
        !cells.is_empty()
    }
}

/// The rows a query covers: the one URL row if `path` is given, else every URL of the domain
/// and its subdomains, ordered by (reversed domain, path).
async fn query_rows(
    state: &AppState,
    domain: &str,
    path: Option<&str>,
    family: &'static str,
    range: Option<(Vec<u8>, Vec<u8>)>,
) -> AppResult<Vec<Row>> {
    let kura = &state.kura;
    super::ensure_table(kura, TABLE).await?;
    let read = ReadSpec {
        columns: ColumnSelection(vec![ColumnSpec::Family(family.into())]),
        ..ReadSpec::default()
    };
    if let Some(path) = path {
        let filter = Arc::new(CounterFilter {
            family,
            range,
            domain: None,
        });
        let row = kura
            .get_filtered(TABLE, &row_key(domain, path), &read, Some(filter))
            .await?;
        return Ok(row.into_iter().collect());
    }
    let rev = reverse_domain(domain);
    let filter = Arc::new(CounterFilter {
        family,
        range,
        domain: Some(rev.clone().into_bytes()),
    });
    let spec = if domain.contains('.') {
        let h = hash4(site_of(domain).as_bytes());
        let mut low = h.to_vec();
        low.extend_from_slice(rev.as_bytes());
        let mut high = low.clone();
        low.push(b'\t');
        high.push(b'.' + 1);
        ScanSpec {
            low: Bound::Included(low),
            high: Bound::Excluded(high),
            read,
            filter: Some(filter),
            reversed: false,
        }
    } else {
        ScanSpec {
            read,
            filter: Some(filter),
            ..ScanSpec::all()
        }
    };
    let mut rows = scan_rows(kura, TABLE, spec, 0, usize::MAX).await?;
    // A one-label domain scanned the whole table, ordered by salt first: restore the order.
    rows.sort_by(|a, b| a.key[4..].cmp(&b.key[4..]));
    Ok(rows)
}

fn counter_value(cell: &Cell) -> AppResult<i64> {
    <[u8; 8]>::try_from(cell.value.as_slice())
        .map(i64::from_be_bytes)
        .map_err(|_| AppError::Internal("access counter cell is not an 8-byte counter".into()))
}

fn row_names(row: &Row) -> AppResult<(String, String)> {
    decode_key(&row.key)
        .ok_or_else(|| AppError::Internal("access row key of the wrong shape".into()))
}

/// Registers the counter's routes (relative to `/apps`).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/counter/hits")
            .route(web::post().to(hit))
            .default_service(request::allow_only("POST")),
    )
    .service(
        web::resource("/counter/hourly")
            .route(request::get_or_head().to(hourly))
            .default_service(request::allow_only("GET, HEAD")),
    )
    .service(
        web::resource("/counter/daily")
            .route(request::get_or_head().to(daily))
            .default_service(request::allow_only("GET, HEAD")),
    )
    .service(
        web::resource("/counter/total")
            .route(request::get_or_head().to(total))
            .default_service(request::allow_only("GET, HEAD")),
    );
}

#[derive(Deserialize)]
struct Hit {
    url: Option<String>,
    domain: Option<String>,
    path: Option<String>,
    amount: Option<i64>,
    at: Option<i64>,
}

async fn hit(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> AppResult<HttpResponse> {
    let hit: Hit = request::read_json(&req, body, &state.limits).await?;
    let (domain, path) = match (hit.url, hit.domain, hit.path) {
        (Some(url), None, None) => parse_url(&url)?,
        (None, Some(domain), Some(path)) => {
            check_path(&path)?;
            (normalize_domain(&domain)?, path)
        }
        (None, Some(_), None) => return Err(AppError::bad("missing field `path` (with `domain`)")),
        (None, None, _) => return Err(AppError::bad("give either `url` or `domain` and `path`")),
        (Some(_), _, _) => {
            return Err(AppError::bad(
                "give either `url` or `domain` and `path`, not both",
            ))
        }
    };
    let at = hit.at.unwrap_or_else(|| state.clock.wall());
    if !(0..=MAX_AT).contains(&at) {
        return Err(AppError::bad(format!(
            "at must be in 0..={MAX_AT} ms, got {at}"
        )));
    }
    let amount = hit.amount.unwrap_or(1);
    let (hour, day) = hour_name(at)?;
    let inc = Increment {
        row: row_key(&domain, &path),
        columns: vec![
            (HOURLY.into(), hour.clone().into_bytes(), amount),
            (DAILY.into(), day.clone().into_bytes(), amount),
            (TOTAL.into(), Vec::new(), amount),
        ],
    };
    let kura = state.kura.clone();
    super::ensure_table(&kura, TABLE).await?;
    let cells = request::run_detached(async move { Ok(kura.increment(TABLE, inc).await?) }).await?;
    let [h, d, t] = cells.as_slice() else {
        return Err(AppError::Internal(format!(
            "increment returned {} cells, not 3",
            cells.len()
        )));
    };
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "domain": domain, "path": path, "hour": hour, "day": day,
        "hourly": counter_value(h)?, "daily": counter_value(d)?, "total": counter_value(t)?,
    })))
}

/// `domain` (required, normalized) and `path` (optional) of a query.
fn target(q: &HashMap<String, String>) -> AppResult<(String, Option<String>)> {
    let domain = q
        .get("domain")
        .ok_or_else(|| AppError::bad("missing query parameter `domain`"))?;
    let domain = normalize_domain(domain)?;
    let path = q.get("path").cloned();
    if let Some(p) = &path {
        check_path(p)?;
    }
    Ok((domain, path))
}

async fn range_query(
    state: web::Data<AppState>,
    req: HttpRequest,
    g: Granularity,
) -> AppResult<HttpResponse> {
    let q = request::query(&req)?;
    let (domain, path) = target(&q)?;
    let bound = |name: &str| -> AppResult<(String, i64)> {
        let s = q
            .get(name)
            .ok_or_else(|| AppError::bad(format!("missing query parameter `{name}`")))?;
        let idx = g.parse(s).ok_or_else(|| {
            AppError::bad(format!(
                "{name} must be a UTC time formatted {}, got {s:?}",
                g.format()
            ))
        })?;
        Ok((s.clone(), idx))
    };
    let (start, s) = bound("start")?;
    let (end, e) = bound("end")?;
    if e <= s {
        return Err(AppError::bad(format!(
            "end {end} must be after start {start}"
        )));
    }
    if e - s > MAX_BUCKETS {
        return Err(AppError::bad(format!(
            "a range covers at most {MAX_BUCKETS} buckets, got {}",
            e - s
        )));
    }
    let range = Some((start.into_bytes(), end.into_bytes()));
    let rows = query_rows(&state, &domain, path.as_deref(), g.family(), range).await?;
    let mut counts = Vec::new();
    for row in &rows {
        let (d, p) = row_names(row)?;
        for cell in &row.cells {
            counts.push(serde_json::json!({
                "domain": d, "path": p,
                "time": String::from_utf8_lossy(&cell.qualifier), "count": counter_value(cell)?,
            }));
        }
    }
    Ok(HttpResponse::Ok().json(serde_json::json!({ "counts": counts })))
}

async fn hourly(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    range_query(state, req, Granularity::Hour).await
}

async fn daily(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    range_query(state, req, Granularity::Day).await
}

async fn total(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    let q = request::query(&req)?;
    let (domain, path) = target(&q)?;
    let rows = query_rows(&state, &domain, path.as_deref(), TOTAL, None).await?;
    // Each count is an i64; their sum may not be (two URLs near 2^63): summed exactly in i128
    // and written as the JSON number it is, never saturated.
    let mut sum: i128 = 0;
    let mut counts = Vec::with_capacity(rows.len());
    for row in &rows {
        let (d, p) = row_names(row)?;
        if let Some(cell) = row.cells.iter().find(|c| c.qualifier.is_empty()) {
            let n = counter_value(cell)?;
            sum += i128::from(n);
            counts.push(serde_json::json!({ "domain": d, "path": p, "count": n }));
        }
    }
    let counts = serde_json::to_string(&counts)
        .map_err(|e| AppError::Internal(format!("cannot encode the counts: {e}")))?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(format!(r#"{{"total":{sum},"counts":{counts}}}"#)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_form_takes_lowercase_host_without_port_and_bare_path() {
        assert_eq!(
            parse_url("http://Blog.Example.JP:8080/a/b?q=1#f").ok(),
            Some(("blog.example.jp".into(), "/a/b".into()))
        );
        assert_eq!(
            parse_url("https://user@example.jp").ok(),
            Some(("example.jp".into(), "/".into()))
        );
        assert_eq!(
            parse_url("http://example.jp?x").ok(),
            Some(("example.jp".into(), "/".into()))
        );
        assert!(parse_url("http:///path").is_err());
    }

    #[test]
    fn site_is_the_last_two_labels() {
        assert_eq!(site_of("a.blog.example.jp"), "example.jp");
        assert_eq!(site_of("example.jp"), "example.jp");
        assert_eq!(site_of("localhost"), "localhost");
    }

    #[test]
    fn subdomains_share_the_salt_prefix_and_sort_after_the_domain() {
        let d = row_key("example.jp", "/z");
        let s = row_key("blog.example.jp", "/");
        assert_eq!(d[..4], s[..4]);
        assert!(d < s);
        assert_eq!(decode_key(&s), Some(("blog.example.jp".into(), "/".into())));
    }

    #[test]
    fn label_boundary_filter_rejects_lookalike_domains() {
        let f = CounterFilter {
            family: TOTAL,
            range: None,
            domain: Some(b"jp.example".to_vec()),
        };
        assert!(f.accept_key(&row_key("example.jp", "/")));
        assert!(f.accept_key(&row_key("blog.example.jp", "/")));
        let mut bad = hash4(b"x").to_vec();
        bad.extend_from_slice(b"jp.examplebad\t/");
        assert!(!f.accept_key(&bad));
    }

    #[test]
    fn bucket_names_parse_strictly() {
        assert_eq!(Granularity::Day.parse("19700102"), Some(1));
        assert_eq!(Granularity::Hour.parse("1970010103"), Some(3));
        assert_eq!(Granularity::Hour.parse("1970010124"), None);
        assert_eq!(Granularity::Day.parse("20230230"), None);
        assert_eq!(Granularity::Day.parse("2023-1-01"), None);
    }
}
