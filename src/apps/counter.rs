//! The access counter (SEED_REQUIREMENTS.md §1.4): per-URL hit counts by hour, by day and in
//! total, read for one URL or for a whole domain with its subdomains over a time range.
//!
//! # Table `access`, families `h`, `d`, `t`
//! One row per URL (domain + path):
//!
//! `hash4(site) (4) | reversed domain (UTF-8) | 0x09 ('\t') | path (UTF-8)`
//!
//! - `site` is the domain's registrable domain by the Public Suffix List (the `psl` crate, whose
//!   list is compiled in): `blog.example.co.jp` -> `example.co.jp`, `blog.example.jp` ->
//!   `example.jp`. A domain that is itself a public suffix (`co.jp`, `jp`) is its own site.
//!   Every domain below a registrable domain shares its salt prefix, so one site's rows live in
//!   one region, and a domain query scans inside it.
//! - The reversed domain reverses the labels (`blog.example.jp` -> `jp.example.blog`), so a
//!   domain and its subdomains are adjacent in key order.
//! - Domains hold no control characters, so `'\t'` (0x09) sorts below every domain byte and key
//!   order is (reversed domain, path) order.
//!
//! Cells (8-byte BE counters): `h:yyyyMMddHH`, `d:yyyyMMdd`, `t:""`, UTC buckets. Hourly, daily
//! and total reads never mix, hence three families (the document's IO isolation).
//!
//! # The layout before the Public Suffix List (both layouts are read)
//! Rows written before sites followed the PSL took the domain's last two labels as the site:
//! every `*.co.jp` URL under `hash4("co.jp")`. Only the 4-byte prefix differs (the rest of the
//! key is the same), and only for domains whose registrable domain has three or more labels (or
//! sits under a private suffix of the list). Hits are always written to the new row; reads take
//! both: a URL query gets the new and the old row, a domain query scans the new site's range and
//! the old site's range, and counts of the same URL and bucket are added. So existing data keeps
//! reading correctly without a migration, and a URL counted under both layouts reads as one sum.
//!
//! # Queries
//! - One URL: a get of its row(s), restricted to the family and to the bucket range
//!   `[start, end)` (bucket names are fixed-width digits, so byte order is time order).
//! - A domain `D` at or below a registrable domain: a scan of `[hash4(site(D)) | rev(D) | '\t',
//!   hash4(site(D)) | rev(D) | '/')` (and the same under the old site's prefix) whose rows are
//!   kept only if the byte after `rev(D)` is `'\t'` (the domain itself) or `'.'` (a subdomain):
//!   label boundaries, so `example.jp` never matches `badexample.jp` nor `example.jp-x`. A domain
//!   that is a public suffix or one label (`co.jp`, `jp`) spans sites: it scans the table with
//!   the same key filter (every region; documented cost).
//! - Paging: with `limit` (or `after`), an answer holds at most `limit` counts in their order and
//!   `next`, the cursor of the last one (URL-safe base64 of `bucket | rev(D) '\t' path`); the
//!   next page resumes the scans at that URL and skips what is not after it (`null` on the last
//!   page). Without either, every count and no `next`: the contract's answer, unchanged.
//!   `total` is always the whole total of the domain (or URL), whatever the page.
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
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, NaiveDate};
use kura_backend::{
    Cell, ColumnSelection, ColumnSpec, Increment, ReadSpec, Row, RowFilter, ScanSpec,
};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
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

/// The registrable domain of `domain` by the Public Suffix List, if it has one (a public suffix
/// such as `co.jp` has none).
fn registrable(domain: &str) -> Option<&str> {
    psl::domain_str(domain)
}

/// The site whose salt prefix a domain's rows carry: its registrable domain, or the domain
/// itself when it is a public suffix.
fn site_of(domain: &str) -> &str {
    registrable(domain).unwrap_or(domain)
}

/// The site of the layout before the Public Suffix List: the last two labels.
fn legacy_site_of(domain: &str) -> &str {
    match domain.rmatch_indices('.').nth(1) {
        Some((i, _)) => &domain[i + 1..],
        None => domain,
    }
}

/// The salt prefixes a domain's rows may carry: the site's, then the old layout's if it differs.
fn prefixes(domain: &str) -> Vec<[u8; 4]> {
    let new = hash4(site_of(domain).as_bytes());
    let old = hash4(legacy_site_of(domain).as_bytes());
    if old == new {
        vec![new]
    } else {
        vec![new, old]
    }
}

/// `rev(domain) '\t' path`: a URL's key after its salt prefix.
fn url_key(domain: &str, path: &str) -> Vec<u8> {
    let rev = reverse_domain(domain);
    let mut k = Vec::with_capacity(rev.len() + 1 + path.len());
    k.extend_from_slice(rev.as_bytes());
    k.push(b'\t');
    k.extend_from_slice(path.as_bytes());
    k
}

fn salted(prefix: [u8; 4], url: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + url.len());
    k.extend_from_slice(&prefix);
    k.extend_from_slice(url);
    k
}

/// The row a hit on `domain` + `path` is written to.
fn row_key(domain: &str, path: &str) -> Vec<u8> {
    salted(hash4(site_of(domain).as_bytes()), &url_key(domain, path))
}

/// `(domain, path)` from a row key.
#[cfg(test)]
fn decode_key(key: &[u8]) -> Option<(String, String)> {
    decode_url(key.get(4..)?)
}

/// `(domain, path)` from a URL key (`rev '\t' path`).
fn decode_url(body: &[u8]) -> Option<(String, String)> {
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

/// One count of an answer: the URL key (`rev '\t' path`), the bucket (`""` for the total) and
/// the count. Answers list entries in `(url, bucket)` order.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    url: Vec<u8>,
    bucket: Vec<u8>,
    count: i64,
}

/// A page request: at most `limit` entries strictly after `after` (`(url, bucket)`).
struct Page {
    limit: usize,
    after: Option<(Vec<u8>, Vec<u8>)>,
}

/// The entries of one query, with whether more may follow the last (a page was cut short).
struct Answer {
    entries: Vec<Entry>,
    more: bool,
}

/// Adds the cells of `rows` (already restricted to one family and bucket range) into `into`,
/// keyed by URL then bucket: the same URL read under both layouts sums into one count.
fn merge_rows(
    into: &mut BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, i64>>,
    rows: Vec<Row>,
) -> AppResult<()> {
    for row in rows {
        let url = row.key.get(4..).unwrap_or_default().to_vec();
        let buckets = into.entry(url).or_default();
        for cell in &row.cells {
            let n = counter_value(cell)?;
            let c = buckets.entry(cell.qualifier.clone()).or_insert(0);
            *c = c.saturating_add(n);
        }
    }
    Ok(())
}

/// The entries a query covers: the one URL if `path` is given, else every URL of the domain
/// and its subdomains, in `(url, bucket)` order; with `page`, only those after its cursor, at
/// most `limit` of them.
async fn query(
    state: &AppState,
    domain: &str,
    path: Option<&str>,
    family: &'static str,
    range: Option<(Vec<u8>, Vec<u8>)>,
    page: Option<&Page>,
) -> AppResult<Answer> {
    let kura = &state.kura;
    super::ensure_table(kura, TABLE).await?;
    let read = ReadSpec {
        columns: ColumnSelection(vec![ColumnSpec::Family(family.into())]),
        ..ReadSpec::default()
    };
    let rev = reverse_domain(domain);
    let mut merged = BTreeMap::new();
    // The URL key up to which every scan's rows were read (a scan cut at its row limit).
    let mut complete_to: Option<Vec<u8>> = None;
    if let Some(path) = path {
        let filter = Arc::new(CounterFilter {
            family,
            range,
            domain: None,
        });
        let url = url_key(domain, path);
        for prefix in prefixes(domain) {
            let row = kura
                .get_filtered(TABLE, &salted(prefix, &url), &read, Some(filter.clone()))
                .await?;
            merge_rows(&mut merged, row.into_iter().collect())?;
        }
    } else {
        let filter = Arc::new(CounterFilter {
            family,
            range,
            domain: Some(rev.clone().into_bytes()),
        });
        let start = page
            .and_then(|p| p.after.as_ref())
            .map(|(url, _)| url.clone());
        if registrable(domain).is_some() {
            // Rows after the cursor's row: its own row may add nothing past the cursor, and
            // every other row adds at least one entry (empty rows are filtered out).
            let want = page.map_or(usize::MAX, |p| p.limit.saturating_add(2));
            for prefix in prefixes(domain) {
                let mut low = prefix.to_vec();
                match &start {
                    Some(url) => low.extend_from_slice(url),
                    None => {
                        low.extend_from_slice(rev.as_bytes());
                        low.push(b'\t');
                    }
                }
                let mut high = prefix.to_vec();
                high.extend_from_slice(rev.as_bytes());
                high.push(b'.' + 1);
                let spec = ScanSpec {
                    low: Bound::Included(low),
                    high: Bound::Excluded(high),
                    read: read.clone(),
                    filter: Some(filter.clone()),
                    reversed: false,
                };
                let rows = scan_rows(kura, TABLE, spec, 0, want).await?;
                if rows.len() >= want {
                    if let Some(last) = rows.last().and_then(|r| r.key.get(4..)) {
                        if complete_to.as_deref().is_none_or(|c| last < c) {
                            complete_to = Some(last.to_vec());
                        }
                    }
                }
                merge_rows(&mut merged, rows)?;
            }
        } else {
            // A public suffix or a single label spans sites: the whole table, filtered.
            let spec = ScanSpec {
                read,
                filter: Some(filter),
                ..ScanSpec::all()
            };
            merge_rows(
                &mut merged,
                scan_rows(kura, TABLE, spec, 0, usize::MAX).await?,
            )?;
        }
    }
    let after = page.and_then(|p| p.after.as_ref());
    let limit = page.map_or(usize::MAX, |p| p.limit);
    let mut entries = Vec::new();
    let mut more = false;
    'urls: for (url, buckets) in merged {
        if complete_to.as_ref().is_some_and(|c| url > *c) {
            more = true;
            break;
        }
        for (bucket, count) in buckets {
            if after.is_some_and(|(au, ab)| (&url, &bucket) <= (au, ab)) {
                continue;
            }
            if entries.len() == limit {
                more = true;
                break 'urls;
            }
            entries.push(Entry {
                url: url.clone(),
                bucket,
                count,
            });
        }
    }
    Ok(Answer { entries, more })
}

/// The page a query asks for: `limit` and `after` (either one pages; neither is every count).
/// A cursor must lie inside the domain (and be the URL, with `path`) and carry a bucket of the
/// query's width.
fn page_of(
    q: &HashMap<String, String>,
    domain: &str,
    path: Option<&str>,
    bucket_width: usize,
) -> AppResult<Option<Page>> {
    let after = q.get("after").filter(|a| !a.is_empty());
    if !q.contains_key("limit") && after.is_none() {
        return Ok(None);
    }
    let limit = request::limit(q)?;
    let after = match after {
        None => None,
        Some(a) => {
            let bad =
                || AppError::bad("malformed cursor: pass back the 'next' value of a previous page");
            let raw = URL_SAFE_NO_PAD.decode(a.as_bytes()).map_err(|_| bad())?;
            if raw.len() <= bucket_width || !raw[..bucket_width].iter().all(u8::is_ascii_digit) {
                return Err(bad());
            }
            let (bucket, url) = raw.split_at(bucket_width);
            let rev = reverse_domain(domain);
            let inside = match path {
                Some(p) => url == url_key(domain, p).as_slice(),
                None => {
                    url.len() > rev.len()
                        && url.starts_with(rev.as_bytes())
                        && matches!(url[rev.len()], b'\t' | b'.')
                }
            };
            if !inside {
                return Err(bad());
            }
            Some((url.to_vec(), bucket.to_vec()))
        }
    };
    Ok(Some(Page { limit, after }))
}

/// The cursor of the last entry of a page, if more may follow.
fn next_cursor(answer: &Answer) -> Option<String> {
    let last = answer.entries.last().filter(|_| answer.more)?;
    let mut raw = last.bucket.clone();
    raw.extend_from_slice(&last.url);
    Some(URL_SAFE_NO_PAD.encode(raw))
}

fn counter_value(cell: &Cell) -> AppResult<i64> {
    <[u8; 8]>::try_from(cell.value.as_slice())
        .map(i64::from_be_bytes)
        .map_err(|_| AppError::Internal("access counter cell is not an 8-byte counter".into()))
}

fn url_names(url: &[u8]) -> AppResult<(String, String)> {
    decode_url(url).ok_or_else(|| AppError::Internal("access row key of the wrong shape".into()))
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
    let key = super::idempotency::key(&req)?;
    let kura = state.kura.clone();
    super::ensure_table(&kura, TABLE).await?;
    // With a key, the store's keyed increment: a retry gets the first hit's counts back
    // (recorded with the increment itself) and counts nothing.
    let cells =
        request::run_detached(
            async move { Ok(super::write::increment(&kura, TABLE, inc, key).await?) },
        )
        .await?;
    let [h, d, t] = cells.as_slice() else {
        return Err(AppError::Internal(format!(
            "increment returned {} cells, not 3",
            cells.len()
        )));
    };
    // The buckets of the answer are the ones counted (a retry's clock may be in the next hour).
    let (hour, day) = if h.qualifier.is_empty() {
        (hour, day)
    } else {
        (
            String::from_utf8_lossy(&h.qualifier).into_owned(),
            String::from_utf8_lossy(&d.qualifier).into_owned(),
        )
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
    let width = match g {
        Granularity::Hour => 10,
        Granularity::Day => 8,
    };
    let page = page_of(&q, &domain, path.as_deref(), width)?;
    let answer = query(
        &state,
        &domain,
        path.as_deref(),
        g.family(),
        range,
        page.as_ref(),
    )
    .await?;
    let mut counts = Vec::with_capacity(answer.entries.len());
    for e in &answer.entries {
        let (d, p) = url_names(&e.url)?;
        counts.push(serde_json::json!({
            "domain": d, "path": p,
            "time": String::from_utf8_lossy(&e.bucket), "count": e.count,
        }));
    }
    let mut body = serde_json::json!({ "counts": counts });
    if page.is_some() {
        body["next"] = serde_json::json!(next_cursor(&answer));
    }
    Ok(HttpResponse::Ok().json(body))
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
    let page = page_of(&q, &domain, path.as_deref(), 0)?;
    let answer = query(&state, &domain, path.as_deref(), TOTAL, None, page.as_ref()).await?;
    // Each count is an i64; their sum may not be (two URLs near 2^63): summed exactly in i128
    // and written as the JSON number it is, never saturated.
    let sum_of = |a: &Answer| -> i128 { a.entries.iter().map(|e| i128::from(e.count)).sum() };
    let whole_page = page.as_ref().is_none_or(|p| p.after.is_none()) && !answer.more;
    let sum = if whole_page {
        sum_of(&answer)
    } else {
        // A page of the counts: the total is still the whole domain's (or URL's).
        sum_of(&query(&state, &domain, path.as_deref(), TOTAL, None, None).await?)
    };
    let mut counts = Vec::with_capacity(answer.entries.len());
    for e in &answer.entries {
        let (d, p) = url_names(&e.url)?;
        counts.push(serde_json::json!({ "domain": d, "path": p, "count": e.count }));
    }
    let counts = serde_json::to_string(&counts)
        .map_err(|e| AppError::Internal(format!("cannot encode the counts: {e}")))?;
    let next = match &page {
        None => String::new(),
        Some(_) => {
            let next = serde_json::to_string(&next_cursor(&answer))
                .map_err(|e| AppError::Internal(format!("cannot encode the cursor: {e}")))?;
            format!(r#","next":{next}"#)
        }
    };
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(format!(r#"{{"total":{sum},"counts":{counts}{next}}}"#)))
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
    fn site_is_the_registrable_domain_by_the_public_suffix_list() {
        assert_eq!(site_of("a.blog.example.jp"), "example.jp");
        assert_eq!(site_of("example.jp"), "example.jp");
        assert_eq!(site_of("blog.example.co.jp"), "example.co.jp");
        assert_eq!(site_of("www.example.ne.jp"), "example.ne.jp");
        assert_eq!(site_of("a.b.example.co.uk"), "example.co.uk");
        assert_eq!(site_of("co.jp"), "co.jp");
        assert_eq!(site_of("jp"), "jp");
        assert_eq!(site_of("localhost"), "localhost");
        assert_eq!(legacy_site_of("blog.example.co.jp"), "co.jp");
        assert_eq!(prefixes("blog.example.jp").len(), 1);
        assert_eq!(prefixes("blog.example.co.jp").len(), 2);
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
