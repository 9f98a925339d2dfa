//! The blog (SEED_REQUIREMENTS.md §1.2): articles per user, a main list and a per-category list,
//! both newest first and keyset-paged.
//!
//! # Table `blog`, family `d`
//! Every row of user `u` starts with `P(u) = hash4(u as 8 BE bytes) (4) | u (8, BE)`.
//!
//! | row | bytes | cells |
//! |---|---|---|
//! | main list | `P(u) (12) \| 0x00 \| u64::MAX - post_at (8, BE) \| article_id (8, BE)` = 29 B | `d:""` = article JSON |
//! | category list | `P(u) (12) \| 0x01 \| category_id (4, BE) \| u64::MAX - post_at (8) \| article_id (8)` = 33 B | `d:""` = article JSON |
//! | article | `P(u) (12) \| 0x02 \| article_id (8, BE)` = 21 B | `d:""` = article JSON (the authoritative copy) |
//! | id sequence | `P(u) (12) \| 0x03` = 13 B | `d:""` = 8-byte BE last article id, at cell timestamp = its `post_at` ([`super::sequence`]) |
//!
//! The article JSON is `{"article_id","user_id","user_name","title","content","category_id",
//! "category_name","post_at","update_at"}` (the contract's article object).
//!
//! The main list is the partial scan `[P(u)|0x00, P(u)|0x01)`, the category list
//! `[P(u)|0x01|c, P(u)|0x01|c+1)`: newest `post_at` first, ties by `article_id` ascending. The
//! article row (by id) serves `GET` and is the check-and-mutate target of updates and deletes;
//! the two list rows are denormalized copies, like the graph's index rows.
//!
//! # Invariants
//! 1. `article_id` and `post_at` are taken together from the user's sequence row by a
//!    check-and-mutate loop ([`super::sequence`]): ids are unique, consecutive and increasing
//!    per user, and a later id always has a later `post_at`, whichever of any number of servers
//!    takes it and however their clocks disagree. So the lists (newest `post_at` first) are in
//!    descending id order, and list keys never collide. (The documents' single global sequence
//!    row was one hot row for all users; this one is per user.)
//! 2. All rows of a user share the 4-byte salt prefix (table salt `prefix_len = 4`): one region
//!    holds them, and a list request scans inside it.
//! 3. Update and delete are check-and-mutate loops on the article row's exact value, with
//!    `update_at' = max(tick, update_at + 1)` and `delete_ts = max(tick, update_at + 1)`. The list
//!    rows keep their keys (built from `post_at`, which never changes), are rewritten with cell
//!    timestamp `update_at'`, and are deleted at `delete_ts`; so a straggling list-row write of
//!    an earlier update is masked by the delete, and concurrent updates converge on the latest.
//! 4. The category of an article never changes (its list key is built from the stored one).
//! 5. Entity first ([`super`], "Crashes between writes"): a create writes the article row, and
//!    waits for it, before its list rows. A list shows an entry only while its article row
//!    exists, and shows the article row's copy, so a crash between the rows never shows a
//!    deleted or outdated article; `kura repair` writes or removes the list rows it left.

use super::cursor;
use super::error::{AppError, AppResult};
use super::idempotency::{self, Record};
use super::keys::{hash4_u64, prefix_end, rev_time};
use super::request::{self, run_detached};
use super::scan::scan_rows;
use super::sequence::{self, Sequence};
use crate::state::AppState;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use kura_backend::{
    CheckAndMutate, ColumnSelection, ColumnSpec, Mutation, ReadSpec, RowMutation, ScanSpec, Store,
};
use serde::{Deserialize, Serialize};
use std::ops::Bound;

/// The blog's table.
pub const TABLE: &str = "blog";
/// Its one family.
pub const FAMILY: &str = "d";

const MAIN: u8 = 0x00;
const CATEGORY: u8 = 0x01;
const ARTICLE: u8 = 0x02;
const SEQUENCE: u8 = 0x03;

/// An article, as stored and as served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Article {
    pub article_id: u64,
    pub user_id: u64,
    pub user_name: String,
    pub title: String,
    pub content: String,
    pub category_id: u32,
    pub category_name: String,
    pub post_at: i64,
    pub update_at: i64,
}

fn user_prefix(user: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(33);
    k.extend_from_slice(&hash4_u64(user));
    k.extend_from_slice(&user.to_be_bytes());
    k
}

fn main_prefix(user: u64) -> Vec<u8> {
    let mut k = user_prefix(user);
    k.push(MAIN);
    k
}

fn category_prefix(user: u64, category: u32) -> Vec<u8> {
    let mut k = user_prefix(user);
    k.push(CATEGORY);
    k.extend_from_slice(&category.to_be_bytes());
    k
}

/// `post_at` is never negative (it comes from the clock), so the cast keeps order.
fn post_suffix(a: &Article) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[..8].copy_from_slice(&rev_time(a.post_at.max(0) as u64));
    s[8..].copy_from_slice(&a.article_id.to_be_bytes());
    s
}

fn main_key(a: &Article) -> Vec<u8> {
    let mut k = main_prefix(a.user_id);
    k.extend_from_slice(&post_suffix(a));
    k
}

fn category_key(a: &Article) -> Vec<u8> {
    let mut k = category_prefix(a.user_id, a.category_id);
    k.extend_from_slice(&post_suffix(a));
    k
}

fn article_key(user: u64, article: u64) -> Vec<u8> {
    let mut k = user_prefix(user);
    k.push(ARTICLE);
    k.extend_from_slice(&article.to_be_bytes());
    k
}

fn sequence_key(user: u64) -> Vec<u8> {
    let mut k = user_prefix(user);
    k.push(SEQUENCE);
    k
}

fn put(value: &[u8], ts: i64) -> Mutation {
    Mutation::Put {
        family: FAMILY.into(),
        qualifier: Vec::new(),
        timestamp: Some(ts),
        value: value.to_vec(),
    }
}

fn decode_article(value: &[u8]) -> AppResult<Article> {
    serde_json::from_slice(value)
        .map_err(|e| AppError::Internal(format!("blog row holds no article: {e}")))
}

/// The article row's stored bytes and decoded article, if it exists.
async fn load(kura: &Store, user: u64, article: u64) -> AppResult<Option<(Vec<u8>, Article)>> {
    Ok(load_keyed(kura, user, article, None).await?.0)
}

/// The article row's value and article, and the record of `key` in that row, in one read (the
/// read a check-and-mutate is computed from: see [`super::idempotency`]).
async fn load_keyed(
    kura: &Store,
    user: u64,
    article: u64,
    key: Option<&[u8]>,
) -> AppResult<(Option<(Vec<u8>, Article)>, Option<Record>)> {
    let Some(row) = kura
        .get(TABLE, &article_key(user, article), &ReadSpec::default())
        .await?
    else {
        return Ok((None, None));
    };
    let record = match key {
        Some(k) => idempotency::find(&row, k)?,
        None => None,
    };
    Ok((article_of(&row)?, record))
}

fn article_of(row: &kura_backend::Row) -> AppResult<Option<(Vec<u8>, Article)>> {
    let Some(cell) = row
        .cells
        .iter()
        .find(|c| c.family == FAMILY.as_bytes() && c.qualifier.is_empty())
    else {
        return Ok(None);
    };
    let a = decode_article(&cell.value)?;
    Ok(Some((cell.value.clone(), a)))
}

/// The puts of an article's two list rows, holding `value` (its JSON) at its `update_at`.
fn list_puts(a: &Article, value: &[u8]) -> Vec<RowMutation> {
    [main_key(a), category_key(a)]
        .into_iter()
        .map(|row| RowMutation {
            row,
            mutations: vec![put(value, a.update_at)],
        })
        .collect()
}

/// The deletes of an article's two list rows at `ts`.
fn list_deletes(a: &Article, ts: i64) -> Vec<RowMutation> {
    [main_key(a), category_key(a)]
        .into_iter()
        .map(|row| RowMutation {
            row,
            mutations: vec![Mutation::DeleteRow {
                timestamp: Some(ts),
            }],
        })
        .collect()
}

fn missing(user: u64, article: u64) -> AppError {
    AppError::NotFound(format!("user {user} has no article {article}"))
}

/// Registers the blog's routes (relative to `/apps`).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/blog/users/{user_id}/articles")
            .route(web::post().to(create))
            .route(request::get_or_head().to(list))
            .default_service(request::allow_only("POST, GET, HEAD")),
    )
    .service(
        web::resource("/blog/users/{user_id}/articles/{article_id}")
            .route(request::get_or_head().to(get))
            .route(web::patch().to(update))
            .route(web::delete().to(delete))
            .default_service(request::allow_only("GET, HEAD, PATCH, DELETE")),
    );
}

#[derive(Deserialize)]
struct NewArticle {
    title: String,
    content: String,
    category_id: Option<u32>,
    category_name: Option<String>,
    user_name: Option<String>,
}

async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> AppResult<HttpResponse> {
    let user = request::path_u64(&req, "user_id")?;
    let new: NewArticle = request::read_json(&req, body, &state.limits).await?;
    let key = idempotency::key(&req)?;
    let kura = state.kura.clone();
    let limits = state.limits.clone();
    let clock = state.clock.clone();
    super::ensure_table(&kura, TABLE).await?;
    let answer = run_detached(async move {
        // The id and the post time together from the user's sequence row: a later id never
        // gets an earlier time, whichever server takes it, so ids increase in list order too.
        let seq = Sequence {
            table: TABLE,
            row: sequence_key(user),
            family: FAMILY,
            qualifier: b"",
        };
        let build = |id: u64, ts: i64| Article {
            article_id: id,
            user_id: user,
            user_name: new.user_name.clone().unwrap_or_default(),
            title: new.title.clone(),
            content: new.content.clone(),
            category_id: new.category_id.unwrap_or(0),
            category_name: new.category_name.clone().unwrap_or_default(),
            post_at: ts,
            update_at: ts,
        };
        let record = |id: u64, ts: i64| {
            let article = build(id, ts);
            let value =
                serde_json::to_vec(&article).map_err(|e| AppError::Internal(e.to_string()))?;
            // Refused before anything is written (no id is taken).
            request::check_value(&limits, "the article", &value)?;
            Record::new(StatusCode::CREATED, &article)
        };
        let keyed = key.as_deref().map(|k| (k, &record as sequence::Answer<'_>));
        let (article, record) = match sequence::next_recorded(&kura, &clock, &seq, keyed).await? {
            sequence::Taken::New { id, time, record } => (build(id, time), record),
            sequence::Taken::Recorded(r) if r.done => return Ok(r.response()),
            sequence::Taken::Recorded(r) => (r.body_as::<Article>()?, Some(r)),
        };
        let ts = article.post_at;
        let value = serde_json::to_vec(&article).map_err(|e| AppError::Internal(e.to_string()))?;
        // Refused before anything is written (the article id is skipped, not reused).
        request::check_value(&limits, "the article", &value)?;
        // The article row first, acknowledged before the list rows are sent: a list row never
        // points at an article that was never stored (see "Crashes between writes" above).
        // All three rows come from the answer alone, at its time: written again by a retry that
        // finds the record not done (or by `kura repair`), they are the same cells.
        let m = RowMutation {
            row: article_key(user, article.article_id),
            mutations: vec![put(&value, ts)],
        };
        super::write::mutate(&kura, TABLE, m).await?;
        super::write::rows(&kura, TABLE, list_puts(&article, &value)).await?;
        if let (Some(k), Some(r)) = (key.as_deref(), record) {
            let response = r.response();
            idempotency::finish(&kura, TABLE, seq.row.clone(), k, r, ts.saturating_add(2)).await?;
            return Ok(response);
        }
        Ok(HttpResponse::Created().json(article))
    })
    .await?;
    Ok(answer)
}

async fn get(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    let user = request::path_u64(&req, "user_id")?;
    let id = request::path_u64(&req, "article_id")?;
    super::ensure_table(&state.kura, TABLE).await?;
    match load(&state.kura, user, id).await? {
        Some((_, a)) => Ok(HttpResponse::Ok().json(a)),
        None => Err(missing(user, id)),
    }
}

#[derive(Deserialize)]
struct ArticlePatch {
    title: Option<String>,
    content: Option<String>,
}

async fn update(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> AppResult<HttpResponse> {
    let user = request::path_u64(&req, "user_id")?;
    let id = request::path_u64(&req, "article_id")?;
    let patch: ArticlePatch = request::read_json(&req, body, &state.limits).await?;
    let key = idempotency::key(&req)?;
    let kura = state.kura.clone();
    let limits = state.limits.clone();
    let clock = state.clock.clone();
    super::ensure_table(&kura, TABLE).await?;
    let answer = run_detached(async move {
        let (new, record) = loop {
            let (found, record) = load_keyed(&kura, user, id, key.as_deref()).await?;
            if let Some(r) = record {
                if r.done {
                    return Ok(r.response());
                }
                break (r.body_as::<Article>()?, Some(r));
            }
            let Some((old_value, old)) = found else {
                return Err(missing(user, id));
            };
            let ts = clock.tick().max(old.update_at.saturating_add(1));
            clock.observe(ts);
            let mut new = old.clone();
            if let Some(t) = &patch.title {
                new.title = t.clone();
            }
            if let Some(c) = &patch.content {
                new.content = c.clone();
            }
            new.update_at = ts;
            let value = serde_json::to_vec(&new).map_err(|e| AppError::Internal(e.to_string()))?;
            request::check_value(&limits, "the article", &value)?;
            let mut mutations = vec![put(&value, ts)];
            let mut record = None;
            if let Some(k) = key.as_deref() {
                let r = Record::new(StatusCode::OK, &new)?;
                mutations.push(r.put(k, ts.saturating_add(1))?);
                record = Some(r);
            }
            let cam = CheckAndMutate {
                row: article_key(user, id),
                family: FAMILY.into(),
                qualifier: Vec::new(),
                expected: old_value,
                mutations,
            };
            if super::write::check_and_mutate(&kura, TABLE, cam).await? {
                break (new, record);
            }
        };
        // The list rows from the answer alone, at its `update_at`.
        let ts = new.update_at;
        let value = serde_json::to_vec(&new).map_err(|e| AppError::Internal(e.to_string()))?;
        super::write::rows(&kura, TABLE, list_puts(&new, &value)).await?;
        if let (Some(k), Some(r)) = (key.as_deref(), record) {
            let response = r.response();
            let row = article_key(user, id);
            idempotency::finish(&kura, TABLE, row, k, r, ts.saturating_add(2)).await?;
            return Ok(response);
        }
        Ok(HttpResponse::Ok().json(new))
    })
    .await?;
    Ok(answer)
}

async fn delete(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    let user = request::path_u64(&req, "user_id")?;
    let id = request::path_u64(&req, "article_id")?;
    let key = idempotency::key(&req)?;
    let kura = state.kura.clone();
    let clock = state.clock.clone();
    super::ensure_table(&kura, TABLE).await?;
    run_detached(async move {
        // The answer (204) holds nothing to rebuild the list rows from, so the record holds
        // the deleted article and its delete time: `{"article", "deleted_at"}`.
        let (old, ts, record) = loop {
            let (found, record) = load_keyed(&kura, user, id, key.as_deref()).await?;
            if let Some(r) = record {
                if r.done {
                    return Ok(r.response());
                }
                let d: Deleted = serde_json::from_value(r.field("deleted").unwrap_or_default())
                    .map_err(|e| {
                        AppError::Internal(format!("an idempotency record is damaged: {e}"))
                    })?;
                break (d.article, d.deleted_at, Some(r));
            }
            let Some((old_value, old)) = found else {
                return Err(missing(user, id));
            };
            let ts = clock.tick().max(old.update_at.saturating_add(1));
            clock.observe(ts);
            let mut mutations = vec![Mutation::DeleteFamily {
                family: FAMILY.into(),
                timestamp: Some(ts),
            }];
            let mut record = None;
            if let Some(k) = key.as_deref() {
                let r = Record {
                    status: StatusCode::NO_CONTENT.as_u16(),
                    body: serde_json::json!({
                        "deleted": {"article": &old, "deleted_at": ts}
                    })
                    .to_string(),
                    done: false,
                };
                mutations.push(r.put(k, ts.saturating_add(1))?);
                record = Some(r);
            }
            let cam = CheckAndMutate {
                row: article_key(user, id),
                family: FAMILY.into(),
                qualifier: Vec::new(),
                expected: old_value,
                mutations,
            };
            if super::write::check_and_mutate(&kura, TABLE, cam).await? {
                break (old, ts, record);
            }
        };
        super::write::rows(&kura, TABLE, list_deletes(&old, ts)).await?;
        if let (Some(k), Some(r)) = (key.as_deref(), record) {
            let row = article_key(user, id);
            idempotency::finish(&kura, TABLE, row, k, r, ts.saturating_add(2)).await?;
        }
        Ok(HttpResponse::NoContent().finish())
    })
    .await
}

/// What a DELETE's record keeps to finish the delete after a crash.
#[derive(Deserialize)]
struct Deleted {
    article: Article,
    deleted_at: i64,
}

async fn list(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    let user = request::path_u64(&req, "user_id")?;
    let q = request::query(&req)?;
    let limit = request::limit(&q)?;
    let prefix = match q.get("category_id") {
        None => main_prefix(user),
        Some(s) => {
            let c = s.parse::<u32>().map_err(|_| {
                AppError::bad(format!(
                    "category_id must be an unsigned 32-bit integer, got {s:?}"
                ))
            })?;
            category_prefix(user, c)
        }
    };
    let low = match q.get("after").filter(|c| !c.is_empty()) {
        None => Bound::Included(prefix.clone()),
        Some(after) => {
            let key = cursor::decode(after, &prefix)?;
            if key.len() != prefix.len() + 16 {
                return Err(AppError::bad(
                    "malformed cursor: it is not a position in this list",
                ));
            }
            Bound::Excluded(key)
        }
    };
    let high = prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let spec = ScanSpec {
        low,
        high,
        ..ScanSpec::all()
    };
    super::ensure_table(&state.kura, TABLE).await?;
    let rows = scan_rows(&state.kura, TABLE, spec, 0, limit + 1).await?;
    let next = (rows.len() > limit).then(|| cursor::encode(&rows[limit - 1].key));
    let mut listed = Vec::with_capacity(limit);
    for row in rows.iter().take(limit) {
        if let Some(cell) = row
            .cells
            .iter()
            .find(|c| c.family == FAMILY.as_bytes() && c.qualifier.is_empty())
        {
            listed.push(decode_article(&cell.value)?);
        }
    }
    // A list row whose article row is gone (a delete cut off between the two by a crash, or
    // one in progress) is not shown: one read of the page's article rows, in the user's region.
    let read = ReadSpec {
        columns: ColumnSelection(vec![ColumnSpec::Column(FAMILY.into(), Vec::new())]),
        ..ReadSpec::default()
    };
    let keys = listed
        .iter()
        .map(|a| article_key(user, a.article_id))
        .collect();
    // The article row is the authoritative copy: it is what is shown (a list row can be behind
    // it when a crash cut an update between the article row and the list rows).
    let present = state.kura.multi_get(TABLE, keys, &read).await?;
    let mut articles = Vec::with_capacity(present.len());
    for row in present.iter().flatten() {
        if let Some((_, a)) = article_of(row)? {
            articles.push(a);
        }
    }
    Ok(HttpResponse::Ok().json(serde_json::json!({ "articles": articles, "next": next })))
}

/// One page of `kura repair --app blog` ([`super::repair`]): for each list row, removes it if
/// its article row is gone; for each article row, writes its list rows if they are missing or
/// older than the article (a create or an update cut by a crash after the article row).
pub(crate) async fn repair(
    kura: &Store,
    page: &super::repair::Page,
    report: &mut super::repair::Report,
) -> AppResult<()> {
    let (rows, next) =
        super::repair::rows_after(kura, TABLE, page.after.as_deref(), page.limit).await?;
    report.next = next;
    for row in &rows {
        report.scanned += 1;
        match row.key.get(12) {
            Some(&MAIN) | Some(&CATEGORY) => {
                repair_list_row(kura, page.dry_run, row, report).await?
            }
            Some(&ARTICLE) => repair_article(kura, page.dry_run, row, report).await?,
            _ => {}
        }
    }
    Ok(())
}

/// A list row whose article row is gone is removed. Read after the list row, an absent
/// article row is gone for good: list rows are written only after their article row was
/// acknowledged, and article ids are never reused.
async fn repair_list_row(
    kura: &Store,
    dry_run: bool,
    row: &kura_backend::Row,
    report: &mut super::repair::Report,
) -> AppResult<()> {
    let Some(cell) = row
        .cells
        .iter()
        .find(|c| c.family == FAMILY.as_bytes() && c.qualifier.is_empty())
    else {
        return Ok(());
    };
    let Ok(listed) = decode_article(&cell.value) else {
        return Ok(());
    };
    if load(kura, listed.user_id, listed.article_id)
        .await?
        .is_some()
    {
        return Ok(());
    }
    let detail = serde_json::json!({"user_id": listed.user_id, "article_id": listed.article_id});
    report.change("dangling_list_rows_removed", &row.key, detail);
    if !dry_run {
        // Every version seen and any straggling update of the deleted article (its times are
        // below the delete's, which is below now on this server's clock).
        let ts = super::repair::newest(row).max(chrono::Utc::now().timestamp_millis());
        let m = RowMutation {
            row: row.key.clone(),
            mutations: vec![Mutation::DeleteRow {
                timestamp: Some(ts),
            }],
        };
        super::write::mutate(kura, TABLE, m).await?;
    }
    Ok(())
}

/// An article's list rows that are missing or older than the article row are written from it,
/// at its `update_at` (the cells its create or update would have written).
async fn repair_article(
    kura: &Store,
    dry_run: bool,
    row: &kura_backend::Row,
    report: &mut super::repair::Report,
) -> AppResult<()> {
    let Some((value, a)) = article_of(row)? else {
        return Ok(());
    };
    let read = ReadSpec {
        columns: ColumnSelection(vec![ColumnSpec::Column(FAMILY.into(), Vec::new())]),
        ..ReadSpec::default()
    };
    let keys = vec![main_key(&a), category_key(&a)];
    let listed = kura.multi_get(TABLE, keys.clone(), &read).await?;
    let mut fix = Vec::new();
    for (key, found) in keys.into_iter().zip(listed) {
        let ts = found
            .as_ref()
            .and_then(|r| r.cells.iter().map(|c| c.timestamp).max());
        let kind = match ts {
            None => "missing_list_rows_written",
            Some(ts) if ts < a.update_at => "stale_list_rows_rewritten",
            Some(_) => continue,
        };
        let detail = serde_json::json!({"user_id": a.user_id, "article_id": a.article_id});
        report.change(kind, &key, detail);
        fix.push(RowMutation {
            row: key,
            mutations: vec![put(&value, a.update_at)],
        });
    }
    if dry_run || fix.is_empty() {
        return Ok(());
    }
    super::write::rows(kura, TABLE, fix).await?;
    // A delete that passed meanwhile masks these puts with its marker on the embedded store;
    // Bigtable has no markers: delete them again if the article is gone now.
    if load(kura, a.user_id, a.article_id).await?.is_none() {
        let ts = a.update_at.max(chrono::Utc::now().timestamp_millis());
        super::write::rows(kura, TABLE, list_deletes(&a, ts)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn article(user: u64, id: u64, post_at: i64, category: u32) -> Article {
        Article {
            article_id: id,
            user_id: user,
            user_name: String::new(),
            title: String::new(),
            content: String::new(),
            category_id: category,
            category_name: String::new(),
            post_at,
            update_at: post_at,
        }
    }

    #[test]
    fn key_layouts_have_the_documented_sizes() {
        let a = article(7, 1, 1000, 3);
        assert_eq!(main_key(&a).len(), 29);
        assert_eq!(category_key(&a).len(), 33);
        assert_eq!(article_key(7, 1).len(), 21);
        assert_eq!(sequence_key(7).len(), 13);
    }

    #[test]
    fn newer_articles_sort_first_and_stay_inside_the_user_prefix() {
        let old = article(7, 1, 1000, 3);
        let new = article(7, 2, 2000, 3);
        assert!(main_key(&new) < main_key(&old));
        assert!(category_key(&new) < category_key(&old));
        let p = main_prefix(7);
        let end = prefix_end(&p).expect("prefix ends with a type byte");
        assert!(main_key(&old).as_slice() < end.as_slice());
        assert_eq!(&main_key(&old)[..4], &article_key(7, 1)[..4]);
        assert_eq!(&category_key(&old)[..4], &sequence_key(7)[..4]);
    }
}
