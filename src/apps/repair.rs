//! `POST /admin/repair`: finds and fixes what a crash between two writes of an application
//! request left behind (the tables of "Crashes between writes" in [`super`]), and says what it
//! changed. `kura repair` (`src/repair/`) is its command-line client.
//!
//! # Request and answer
//! `POST /admin/repair?app=blog|actions|counter|graph&dry_run=true|false&after=CURSOR&limit=N`
//! examines at most `limit` rows (default 1000, at most 10,000) of the application's table in
//! key order, starting after `after` (the `next` of the previous page; empty or absent: the
//! table's start), and answers
//!
//! ```json
//! {"app": "graph", "dry_run": false, "scanned": 812,
//!  "counts": {"dangling_index_rows_removed": 2, "missing_index_rows_written": 1},
//!  "changes": [{"kind": "dangling_index_rows_removed", "row": "\\x12...", "detail": {...}}],
//!  "next": "CURSOR" | null}
//! ```
//!
//! `changes` lists every row changed (or, with `dry_run`, that would be), `row` in HBase's
//! printable form (`\xNN` for a byte outside printable ASCII). A page is bounded, so a whole
//! table is walked by a client that passes `next` back until it is `null`.
//!
//! # Why an admin endpoint, not a client of the public API
//! The repair must decode the applications' row keys, tell a dangling index row from one whose
//! entity is live, and fix rows with the same check-and-mutate loops and timestamps the
//! applications use (a relationship is removed by the graph's own delete, D8). Here it calls
//! that code; over the public REST API a client would re-implement every key layout and could
//! only approximate the loops. The endpoint sits behind the same bearer token as the other
//! `/admin/` endpoints (the server's middleware guards every path but `/healthz` and the
//! console's static files), and works on either backend.
//!
//! # Safe while the server takes writes
//! Nothing is deleted on the strength of a read that could be outdated by a write in flight:
//! 1. An index row (blog list row, graph adjacency row) is written only after its entity's
//!    row was acknowledged, and its key names that entity's incarnation (an article id is
//!    never reused; an adjacency key holds the relationship's create time, and every later
//!    incarnation of the relationship is created later). So the repair reads the index row,
//!    then the entity: if that incarnation is gone at that later read, it is gone for good
//!    and the index row is dead, whatever is in flight. No grace period is needed.
//! 2. Rows are (re)written only from the entity's row, at its own update time, with the same
//!    cells the application writes: a concurrent update writes at a later time and wins; a
//!    concurrent delete's marker masks them (and the graph re-checks after writing, as its
//!    own writes do, for Bigtable, whose deletes do not mask later writes).
//! 3. A relationship whose end node is gone (or was re-created after it) is removed with the
//!    graph's own delete, a check-and-mutate on the relationship's row.
//!
//! # Invariants
//! 4. Idempotent: a second run over the same data changes nothing and reports zero counts.
//! 5. `dry_run` writes nothing and reports what a run would change.
//! 6. Memory is bounded by one page of `limit` rows.

use super::error::{AppError, AppResult};
use super::scan::scan_rows;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use kura_backend::{Row, ScanSpec, Store};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

/// Rows one page examines unless asked otherwise.
pub const DEFAULT_LIMIT: usize = 1000;
/// Most rows one page examines.
pub const MAX_LIMIT: usize = 10_000;

/// The applications a repair knows, in the order `--app all` runs them.
pub const APPS: &[&str] = &["blog", "actions", "counter", "graph"];

/// One row a repair changed (or would change).
#[derive(Debug, Serialize)]
pub struct Change {
    /// What was wrong and what was done (a key of [`Report::counts`]).
    pub kind: &'static str,
    /// The row, in HBase's printable form.
    pub row: String,
    /// What the row stands for (ids, names), for the operator.
    pub detail: serde_json::Value,
}

/// What one page of a repair did.
#[derive(Debug, Serialize)]
pub struct Report {
    pub app: String,
    pub dry_run: bool,
    /// Rows examined.
    pub scanned: u64,
    /// Changes per kind.
    pub counts: BTreeMap<&'static str, u64>,
    pub changes: Vec<Change>,
    /// Where the next page starts, `None` when the table is done.
    pub next: Option<String>,
    /// Why an application has nothing to repair, when it has not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

impl Report {
    fn new(app: &str, dry_run: bool) -> Report {
        Report {
            app: app.to_string(),
            dry_run,
            scanned: 0,
            counts: BTreeMap::new(),
            changes: Vec::new(),
            next: None,
            note: None,
        }
    }

    /// Records one change of `kind` to `row`.
    pub fn change(&mut self, kind: &'static str, row: &[u8], detail: serde_json::Value) {
        *self.counts.entry(kind).or_insert(0) += 1;
        self.changes.push(Change {
            kind,
            row: kura_formats::hashtable::printable(row),
            detail,
        });
    }
}

/// What one page asks for.
pub struct Page {
    pub app: String,
    pub dry_run: bool,
    /// The last row examined by the previous page.
    pub after: Option<Vec<u8>>,
    pub limit: usize,
}

impl Page {
    /// The page a query string asks for (`app`, `dry_run`, `after`, `limit`).
    pub fn from_query(q: &HashMap<String, String>) -> AppResult<Page> {
        let app = q.get("app").ok_or_else(|| {
            AppError::bad("missing query parameter `app` (blog, actions, counter or graph)")
        })?;
        if !APPS.contains(&app.as_str()) {
            return Err(AppError::bad(format!(
                "app must be one of blog, actions, counter, graph; got {app:?}"
            )));
        }
        let dry_run = match q.get("dry_run").map(String::as_str) {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(AppError::bad(format!(
                    "dry_run must be true or false, got {other:?}"
                )))
            }
        };
        let after = match q.get("after").filter(|a| !a.is_empty()) {
            None => None,
            Some(a) => Some(URL_SAFE_NO_PAD.decode(a).map_err(|_| {
                AppError::bad("malformed cursor: pass back the `next` of the previous page")
            })?),
        };
        let limit = match q.get("limit") {
            None => DEFAULT_LIMIT,
            Some(l) => l
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    AppError::bad(format!("limit must be 1..={MAX_LIMIT}, got {l:?}"))
                })?,
        };
        Ok(Page {
            app: app.clone(),
            dry_run,
            after,
            limit,
        })
    }
}

/// Rows of `table` after `after`, at most `limit`, and the cursor of the next page.
pub async fn rows_after(
    kura: &Store,
    table: &str,
    after: Option<&[u8]>,
    limit: usize,
) -> AppResult<(Vec<Row>, Option<String>)> {
    let low = match after {
        Some(a) => Bound::Excluded(a.to_vec()),
        None => Bound::Unbounded,
    };
    let spec = ScanSpec {
        low,
        high: Bound::Unbounded,
        ..ScanSpec::all()
    };
    let rows = scan_rows(kura, table, spec, 0, limit).await?;
    let next = (rows.len() == limit)
        .then(|| rows.last().map(|r| URL_SAFE_NO_PAD.encode(&r.key)))
        .flatten();
    Ok((rows, next))
}

/// `POST /admin/repair`: one page (see the module docs). It runs on a detached task, so a
/// client that goes away does not cut a fix between two of its writes.
pub async fn handle(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    let page = Page::from_query(&super::request::query(&req)?)?;
    let kura = state.kura.clone();
    let clock = state.clock.clone();
    let report =
        super::request::run_detached(async move { run(&kura, &clock, &page).await }).await?;
    Ok(HttpResponse::Ok().json(report))
}

/// Runs one page of the repair of `page.app`.
pub async fn run(kura: &Store, clock: &super::clock::Clock, page: &Page) -> AppResult<Report> {
    let mut report = Report::new(&page.app, page.dry_run);
    match page.app.as_str() {
        "blog" => {
            super::ensure_table(kura, super::blog::TABLE).await?;
            super::blog::repair(kura, page, &mut report).await?;
        }
        "graph" => {
            super::ensure_table(kura, super::graph::TABLE).await?;
            super::graph::repair(kura, clock, page, &mut report).await?;
        }
        "actions" => {
            report.note = Some(
                "an action is one row, written after its id is taken: a crash leaves at most \
                 an unused id, nothing to repair",
            );
        }
        _ => {
            report.note = Some(
                "a hit is one atomic row increment: a crash leaves it counted or not, nothing \
                 to repair",
            );
        }
    }
    Ok(report)
}

/// The newest cell timestamp of a row (the delete that removes every version seen).
pub fn newest(row: &Row) -> i64 {
    row.cells.iter().map(|c| c.timestamp).max().unwrap_or(0)
}
