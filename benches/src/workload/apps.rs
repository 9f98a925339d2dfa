//! The four applications under `/apps/` as workloads, each with a correctness oracle.
//!
//! - blog: users post articles (in one of four categories) and read their newest-first pages,
//!   of all their articles or of one category (`category_id=`, served from the category index
//!   rows); a page walk must never repeat an article, never go back in time, never skip an
//!   article that existed (was acknowledged) before the walk began, and a category walk must
//!   list only articles of its category. At the end every user's full list, and each of their
//!   category lists, must equal the articles acknowledged for them.
//! - actions: users record actions and read pages with `offset`; at the end every user's full
//!   list must equal the actions acknowledged.
//! - counter: zipfian hot URLs of one run-unique domain get hits (at the current time, or
//!   spread over the last `--counter-hours` hours); reads ask for a URL's total, its hourly
//!   range or its daily range, and a range must count at least the hits acknowledged before
//!   the read. At the end the server's per-URL and domain totals, and every URL's hourly and
//!   daily buckets, must equal the hits acknowledged (per bucket, as each hit's answer named
//!   its hour and day).
//! - graph: a CAS storm of PATCH / DELETE / re-create on the same relationship(s); at the end
//!   the adjacency lists of both nodes must show exactly the relationship row (or nothing).
//!
//! # Invariants
//! 1. Every run writes under ids derived from its nonce, so data left by earlier runs in the
//!    same tables cannot satisfy or break this run's checks.
//! 2. A write whose outcome is unknown (timeout, broken connection) is counted in `unknown`
//!    and widens the accepted range by one; it is never assumed to have happened or not. A
//!    write whose connection could not be made (a server down) sent nothing and is not counted.
//! 3. With several servers, the final state is read from each of them in full and checked
//!    against the same acknowledged operations; a failure names the server (`[host:port]`).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rand::Rng;
use serde_json::{json, Value};

use super::{expect_status, judge, server_tags, Op, Params, RunFailures, Verification, Worker};
use crate::client::{Conn, Resp};
use crate::error::{LoadError, Result};
use crate::stats::{Outcome, Recorder};

/// Blog: articles are posted in categories `1..=CATEGORIES`.
const CATEGORIES: u64 = 4;

fn parse(what: &str, r: &Resp) -> Result<Value> {
    serde_json::from_slice(&r.body).map_err(|e| LoadError::Decode {
        what: what.to_string(),
        detail: e.to_string(),
    })
}

/// Which application a [`ListApp`] drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    Blog,
    Actions,
}

impl ListKind {
    fn base(self, user: u64) -> String {
        match self {
            ListKind::Blog => format!("/apps/blog/users/{user}/articles"),
            ListKind::Actions => format!("/apps/actions/users/{user}"),
        }
    }
    fn list_field(self) -> &'static str {
        match self {
            ListKind::Blog => "articles",
            ListKind::Actions => "actions",
        }
    }
    fn id_field(self) -> &'static str {
        match self {
            ListKind::Blog => "article_id",
            ListKind::Actions => "action_id",
        }
    }
    fn time_field(self) -> &'static str {
        match self {
            ListKind::Blog => "post_at",
            ListKind::Actions => "stamp",
        }
    }
}

/// An item of a newest-first list: id and time.
type Item = (u64, i64);

/// A page walk.
struct Walk {
    items: Vec<Item>,
    complete: bool,
}

/// A per-user newest-first list application (blog or actions).
pub struct ListApp {
    kind: ListKind,
    users: u64,
    base_user: u64,
    created: Mutex<HashMap<u64, Vec<Item>>>,
    /// Blog: the acknowledged articles of each (user, category).
    by_category: Mutex<HashMap<(u64, u64), Vec<Item>>>,
    unknown: AtomicU64,
    failures: RunFailures,
}

/// The blog workload.
pub type Blog = ListApp;
/// The action-log workload.
pub type Actions = ListApp;

impl ListApp {
    fn with_kind(kind: ListKind, p: &Params) -> ListApp {
        ListApp {
            kind,
            users: p.users.max(1),
            // Large, run-unique user ids (invariant 1).
            base_user: (p.nonce % 1_000_000_000) * 100_000 + 1,
            created: Mutex::new(HashMap::new()),
            by_category: Mutex::new(HashMap::new()),
            unknown: AtomicU64::new(0),
            failures: RunFailures::default(),
        }
    }

    /// The blog workload.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(p: &Params) -> ListApp {
        ListApp::with_kind(ListKind::Blog, p)
    }

    /// The action-log workload.
    pub fn new_actions(p: &Params) -> ListApp {
        ListApp::with_kind(ListKind::Actions, p)
    }

    fn item_of(&self, v: &Value) -> Option<Item> {
        Some((
            v.get(self.kind.id_field())?.as_u64()?,
            v.get(self.kind.time_field())?.as_i64()?,
        ))
    }

    async fn walk(
        &self,
        conn: &mut Conn,
        user: u64,
        limit: u32,
        max_pages: u64,
        offset: Option<u32>,
        category: Option<u64>,
    ) -> std::result::Result<Walk, (Outcome, String)> {
        let base = self.kind.base(user);
        let mut items = Vec::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut path = format!("{base}?limit={limit}");
            if let Some(o) = offset {
                let _ = write!(path, "&offset={o}");
            }
            if let Some(c) = category {
                let _ = write!(path, "&category_id={c}");
            }
            if let Some(a) = &after {
                let enc =
                    percent_encoding::utf8_percent_encode(a, percent_encoding::NON_ALPHANUMERIC);
                let _ = write!(path, "&after={enc}");
            }
            let r = conn.get(&path).await;
            let outcome = judge(&r, &[200]);
            let resp = match r {
                Ok(resp) if outcome == Outcome::Ok => resp,
                Ok(resp) => return Err((outcome, format!("GET {path}: {}", resp.body_snippet()))),
                Err(e) => return Err((outcome, format!("GET {path}: {e}"))),
            };
            let v = parse("list page", &resp).map_err(|e| (Outcome::Invalid, e.to_string()))?;
            let list = v
                .get(self.kind.list_field())
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    (
                        Outcome::Invalid,
                        format!("GET {path}: no `{}` array", self.kind.list_field()),
                    )
                })?;
            for it in list {
                let item = self.item_of(it).ok_or_else(|| {
                    (
                        Outcome::Invalid,
                        format!("GET {path}: item without id/time"),
                    )
                })?;
                if let Some(c) = category {
                    let got = it.get("category_id").and_then(Value::as_u64);
                    if got != Some(c) {
                        return Err((
                            Outcome::Invalid,
                            format!(
                                "GET {path}: article {} of category {got:?} in the list of category {c}",
                                item.0
                            ),
                        ));
                    }
                }
                items.push(item);
            }
            pages += 1;
            match v.get("next").and_then(Value::as_str) {
                Some(next) => after = Some(next.to_string()),
                None => {
                    return Ok(Walk {
                        items,
                        complete: true,
                    })
                }
            }
            if pages >= max_pages {
                return Ok(Walk {
                    items,
                    complete: false,
                });
            }
        }
    }

    /// Check a walk against the items known to exist before it began.
    fn check_walk(&self, user: u64, walk: &Walk, known: &[Item]) -> Vec<String> {
        let mut errs = Vec::new();
        let mut seen = HashSet::new();
        for (i, (id, t)) in walk.items.iter().enumerate() {
            if !seen.insert(*id) {
                errs.push(format!("user {user}: item {id} repeated in one walk"));
            }
            if i > 0 && walk.items[i - 1].1 < *t {
                errs.push(format!(
                    "user {user}: item {id} at {t} after an older item (order)"
                ));
            }
        }
        let oldest = walk.items.last().map(|x| x.1).unwrap_or(i64::MAX);
        let times: std::collections::HashMap<_, _> = walk.items.iter().copied().collect();
        for (id, t) in known {
            let must_see = walk.complete || *t > oldest;
            if must_see && !seen.contains(id) {
                errs.push(format!(
                    "user {user}: item {id} (time {t}) skipped by the page walk"
                ));
            }
            // Ids are per-user sequences: another user's item (or a stale copy) with the same
            // id shows up with another time.
            if let Some(got) = times.get(id).filter(|got| *got != t) {
                errs.push(format!(
                    "user {user}: item {id} listed with time {got}, written with time {t}"
                ));
            }
        }
        errs
    }

    /// One operation: 40% write, 60% page walk (1..=3 pages).
    pub async fn op(&self, w: &mut Worker, conn: &mut Conn, _rec: &mut Recorder) -> Op {
        let user = self.base_user + w.rng.gen_range(0..self.users);
        w.seq += 1;
        if w.rng.gen_bool(0.4) {
            let category = match self.kind {
                ListKind::Blog => Some(w.rng.gen_range(1..=CATEGORIES)),
                ListKind::Actions => None,
            };
            let body = match self.kind {
                ListKind::Blog => json!({
                    "title": format!("post {} of worker {}", w.seq, w.idx),
                    "content": String::from_utf8_lossy(w.value(200)).into_owned(),
                    "category_id": category,
                    "category_name": "bench",
                    "user_name": format!("u{user}"),
                }),
                ListKind::Actions => json!({ "name": format!("act{}", w.seq % 16) }),
            };
            let r = conn
                .post_json(&self.kind.base(user), body.to_string())
                .await;
            let outcome = judge(&r, &[201]);
            match (&r, outcome) {
                (Ok(resp), Outcome::Ok) => {
                    match parse("created item", resp)
                        .ok()
                        .and_then(|v| self.item_of(&v))
                    {
                        Some(item) => {
                            let mut c = self.created.lock().unwrap_or_else(|p| p.into_inner());
                            c.entry(user).or_default().push(item);
                            drop(c);
                            if let Some(cat) = category {
                                let mut c =
                                    self.by_category.lock().unwrap_or_else(|p| p.into_inner());
                                c.entry((user, cat)).or_default().push(item);
                            }
                        }
                        None => {
                            self.failures
                                .note(format!("user {user}: created item without id/time"));
                            return Op {
                                kind: "post",
                                outcome: Outcome::Invalid,
                                rows: 0,
                            };
                        }
                    }
                }
                (Err(e), _) if e.may_have_arrived() => {
                    self.unknown.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
            Op {
                kind: "post",
                outcome,
                rows: 0,
            }
        } else {
            // Blog: a third of the walks read one category's list.
            let category = match self.kind {
                ListKind::Blog if w.rng.gen_bool(1.0 / 3.0) => {
                    Some(w.rng.gen_range(1..=CATEGORIES))
                }
                _ => None,
            };
            let known: Vec<Item> = match category {
                None => {
                    let c = self.created.lock().unwrap_or_else(|p| p.into_inner());
                    c.get(&user).cloned().unwrap_or_default()
                }
                Some(cat) => {
                    let c = self.by_category.lock().unwrap_or_else(|p| p.into_inner());
                    c.get(&(user, cat)).cloned().unwrap_or_default()
                }
            };
            let pages = w.rng.gen_range(1..=3);
            let offset = match self.kind {
                ListKind::Actions if w.rng.gen_bool(0.3) => Some(w.rng.gen_range(0..20)),
                _ => None,
            };
            let kind = if category.is_some() {
                "category_walk"
            } else {
                "page_walk"
            };
            match self.walk(conn, user, 10, pages, offset, category).await {
                Ok(walk) => {
                    let errs = if offset.is_some() {
                        // An offset walk skips on purpose; only order and repeats apply.
                        self.check_walk(user, &walk, &[])
                    } else {
                        self.check_walk(user, &walk, &known)
                    };
                    let rows = walk.items.len() as u64;
                    let outcome = if errs.is_empty() {
                        Outcome::Ok
                    } else {
                        Outcome::Invalid
                    };
                    for e in errs {
                        self.failures.note(e);
                    }
                    Op {
                        kind,
                        outcome,
                        rows,
                    }
                }
                Err((outcome, msg)) => {
                    if outcome == Outcome::Invalid {
                        self.failures.note(msg);
                    }
                    Op {
                        kind,
                        outcome,
                        rows: 0,
                    }
                }
            }
        }
    }

    /// Walk every user's whole list on every server and compare it with what was acknowledged.
    pub async fn verify(&self, conns: &mut [Conn]) -> Result<Verification> {
        let mut v = Verification {
            checked: true,
            ..Verification::default()
        };
        let created = self
            .created
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let unknown = self.unknown.load(Ordering::Relaxed);
        let tags = server_tags(conns);
        for (conn, tag) in conns.iter_mut().zip(&tags) {
            let mut extras_total = 0u64;
            let mut items_total = 0usize;
            for (user, items) in &created {
                let (extras, listed) = self.final_walk(conn, tag, *user, None, items, &mut v).await;
                extras_total += extras;
                items_total += listed;
            }
            if extras_total > unknown {
                v.failures.push(format!(
                    "{tag}{extras_total} listed items were never acknowledged (only {unknown} writes had an unknown outcome)"
                ));
            }
            let acked: usize = created.values().map(Vec::len).sum();
            if self.kind == ListKind::Blog {
                self.verify_categories(conn, tag, unknown, &mut v).await;
            }
            v.notes.push(format!(
                "{tag}{} users, {acked} acknowledged writes, {items_total} items listed by the final walks (page size 7), {unknown} unknown outcomes",
                created.len()
            ));
        }
        self.failures
            .report("page walks during the run failed their checks", &mut v);
        Ok(v)
    }
}

impl ListApp {
    /// Walk `user`'s list (of `category`, for the blog's category lists) in full and compare it
    /// with the `acked` items; what is wrong goes to `v`. Returns how many listed items were
    /// never acknowledged, and how many were listed.
    async fn final_walk(
        &self,
        conn: &mut Conn,
        tag: &str,
        user: u64,
        category: Option<u64>,
        acked: &[Item],
        v: &mut Verification,
    ) -> (u64, usize) {
        let (of, prefix) = match category {
            Some(cat) => (format!(", category {cat}"), format!("category {cat}: ")),
            None => (String::new(), String::new()),
        };
        let walk = match self.walk(conn, user, 7, 1_000_000, None, category).await {
            Ok(w) => w,
            Err((_, msg)) => {
                v.failures
                    .push(format!("{tag}final walk of user {user}{of}: {msg}"));
                return (0, 0);
            }
        };
        v.failures.extend(
            self.check_walk(user, &walk, acked)
                .into_iter()
                .map(|f| format!("{tag}{prefix}{f}")),
        );
        let mine: HashSet<u64> = acked.iter().map(|x| x.0).collect();
        let extras = walk.items.iter().filter(|x| !mine.contains(&x.0)).count() as u64;
        (extras, walk.items.len())
    }

    /// Blog: walk each (user, category) list that got an acknowledged article in full and
    /// compare it with the articles acknowledged in that category.
    async fn verify_categories(
        &self,
        conn: &mut Conn,
        tag: &str,
        unknown: u64,
        v: &mut Verification,
    ) {
        let by_cat = self
            .by_category
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (mut extras, mut listed) = (0u64, 0usize);
        for ((user, cat), items) in &by_cat {
            let (e, l) = self
                .final_walk(conn, tag, *user, Some(*cat), items, v)
                .await;
            extras += e;
            listed += l;
        }
        if extras > unknown {
            v.failures.push(format!(
                "{tag}{extras} articles listed in category lists were never acknowledged in that category (only {unknown} writes had an unknown outcome)"
            ));
        }
        v.notes.push(format!(
            "{tag}{} (user, category) lists walked in full: {listed} articles listed, each of its category, every acknowledged one present",
            by_cat.len()
        ));
    }
}

/// `[host:port] ` per connection when there are several servers, else nothing.
/// The access-counter workload.
pub struct Counter {
    /// One run-unique domain per site; URL `k` is `/p{k}` on `domains[k % sites]`.
    domains: Vec<String>,
    urls: u64,
    acked: Vec<AtomicU64>,
    unknown: AtomicU64,
    /// Hits are spread over this many hours before now (0: every hit at the current time).
    hours: u64,
    /// Acknowledged hits per (URL, `yyyyMMddHH`) and per (URL, `yyyyMMdd`), from the answers.
    buckets: Mutex<HashMap<(u64, String), u64>>,
    /// The earliest time a hit of this run can carry, ms.
    earliest_ms: i64,
}

/// `yyyyMMddHH` (with `hour`) or `yyyyMMdd` of a Unix time in ms, UTC.
pub fn utc_bucket(ms: i64, hour: bool) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let h = secs.rem_euclid(86_400) / 3600;
    // Days to civil date (proleptic Gregorian), after Howard Hinnant's `civil_from_days`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    if hour {
        format!("{y:04}{m:02}{d:02}{h:02}")
    } else {
        format!("{y:04}{m:02}{d:02}")
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Counter {
    /// A counter workload over `--urls` paths spread over `--sites` run-unique sites.
    pub fn new(p: &Params) -> Counter {
        let urls = p.urls.max(1);
        let sites = p.sites.clamp(1, urls);
        Counter {
            domains: (0..sites)
                .map(|j| match sites {
                    1 => format!("r{}.kura-bench.test", p.nonce),
                    _ => format!("r{}-s{j}.test", p.nonce),
                })
                .collect(),
            urls,
            acked: (0..urls).map(|_| AtomicU64::new(0)).collect(),
            unknown: AtomicU64::new(0),
            hours: p.counter_hours,
            buckets: Mutex::new(HashMap::new()),
            earliest_ms: now_ms() - p.counter_hours as i64 * 3_600_000,
        }
    }

    /// `start` and `end` of a range covering every hit of this run, hourly or daily: from
    /// the hour (day) before the earliest to two hours (days) after now.
    fn range(&self, hour: bool) -> (String, String) {
        let unit: i64 = if hour { 3_600_000 } else { 86_400_000 };
        (
            utc_bucket(self.earliest_ms - unit, hour),
            utc_bucket(now_ms() + 2 * unit, hour),
        )
    }

    /// GET a URL's (or with `path` `None`, the site's) hourly or daily counts over the run's
    /// range: `(path, time) -> count`.
    async fn range_counts(
        &self,
        conn: &mut Conn,
        domain: &str,
        path: Option<&str>,
        hour: bool,
    ) -> std::result::Result<HashMap<(String, String), u64>, (Outcome, String)> {
        let (start, end) = self.range(hour);
        let mut url = format!(
            "/apps/counter/{}?domain={domain}&start={start}&end={end}",
            if hour { "hourly" } else { "daily" }
        );
        if let Some(p) = path {
            let _ = write!(url, "&path={p}");
        }
        let r = conn.get(&url).await;
        let outcome = judge(&r, &[200]);
        let resp = match r {
            Ok(resp) if outcome == Outcome::Ok => resp,
            Ok(resp) => return Err((outcome, format!("GET {url}: {}", resp.body_snippet()))),
            Err(e) => return Err((outcome, format!("GET {url}: {e}"))),
        };
        let v = parse("counter range", &resp).map_err(|e| (Outcome::Invalid, e.to_string()))?;
        let mut out = HashMap::new();
        let width = if hour { 10 } else { 8 };
        for c in v
            .get("counts")
            .and_then(Value::as_array)
            .ok_or_else(|| (Outcome::Invalid, format!("GET {url}: no `counts` array")))?
        {
            let (Some(p), Some(t), Some(n)) = (
                c.get("path").and_then(Value::as_str),
                c.get("time").and_then(Value::as_str),
                c.get("count").and_then(Value::as_u64),
            ) else {
                return Err((
                    Outcome::Invalid,
                    format!("GET {url}: a count without path/time/count"),
                ));
            };
            if t.len() != width
                || t < start.as_str()
                || t >= end.as_str()
                || path.is_some_and(|q| q != p)
            {
                return Err((
                    Outcome::Invalid,
                    format!("GET {url}: a count of {p} at {t}, outside what was asked"),
                ));
            }
            *out.entry((p.to_string(), t.to_string())).or_insert(0) += n;
        }
        Ok(out)
    }

    /// Distinct URLs.
    pub fn urls(&self) -> u64 {
        self.urls
    }

    fn domain(&self, k: u64) -> &str {
        &self.domains[(k % self.domains.len() as u64) as usize]
    }

    /// One operation: 90% hit on a zipfian URL; 10% reads of that URL: its total, its hourly
    /// range or its daily range (a third each).
    pub async fn op(&self, w: &mut Worker, conn: &mut Conn, _rec: &mut Recorder) -> Op {
        let k = w.chooser.next(&mut w.rng, self.urls);
        let domain = self.domain(k);
        if w.rng.gen_bool(0.9) {
            let body = if self.hours > 0 {
                let at = now_ms() - w.rng.gen_range(0..self.hours as i64 * 3_600_000);
                format!("{{\"domain\":\"{domain}\",\"path\":\"/p{k}\",\"at\":{at}}}")
            } else {
                format!("{{\"domain\":\"{domain}\",\"path\":\"/p{k}\"}}")
            };
            let r = conn.post_json("/apps/counter/hits", body).await;
            let mut outcome = judge(&r, &[200]);
            match (&r, outcome) {
                (Ok(resp), Outcome::Ok) => {
                    self.acked[k as usize].fetch_add(1, Ordering::Relaxed);
                    let v = parse("hit", resp).ok();
                    let field = |f: &str| {
                        v.as_ref()
                            .and_then(|v| v.get(f))
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    };
                    match (field("hour"), field("day")) {
                        (Some(h), Some(d)) => {
                            let mut b = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
                            *b.entry((k, h)).or_insert(0) += 1;
                            *b.entry((k, d)).or_insert(0) += 1;
                        }
                        _ => outcome = Outcome::Invalid,
                    }
                }
                (Err(e), _) if e.may_have_arrived() => {
                    self.unknown.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
            Op {
                kind: "hit",
                outcome,
                rows: 0,
            }
        } else {
            let read = w.rng.gen_range(0..3);
            if read == 0 {
                let r = conn
                    .get(&format!("/apps/counter/total?domain={domain}&path=/p{k}"))
                    .await;
                return Op::judged("total", &r, &[200]);
            }
            let hour = read == 1;
            let kind = if hour { "hourly" } else { "daily" };
            // Every hit acknowledged before the read must be in the range.
            let before = self.acked[k as usize].load(Ordering::Relaxed);
            let path = format!("/p{k}");
            match self.range_counts(conn, domain, Some(&path), hour).await {
                Ok(counts) => {
                    let sum: u64 = counts.values().sum();
                    Op {
                        kind,
                        outcome: if sum >= before {
                            Outcome::Ok
                        } else {
                            Outcome::Invalid
                        },
                        rows: counts.len() as u64,
                    }
                }
                Err((outcome, _)) => Op {
                    kind,
                    outcome,
                    rows: 0,
                },
            }
        }
    }

    /// Compare every server's totals with the hits acknowledged.
    pub async fn verify(&self, conns: &mut [Conn]) -> Result<Verification> {
        let mut v = Verification {
            checked: true,
            ..Verification::default()
        };
        let tags = server_tags(conns);
        for (conn, tag) in conns.iter_mut().zip(&tags) {
            self.verify_on(conn, tag, &mut v).await?;
        }
        Ok(v)
    }

    async fn verify_on(&self, conn: &mut Conn, tag: &str, v: &mut Verification) -> Result<()> {
        let unknown = self.unknown.load(Ordering::Relaxed);
        // Each site's totals, keyed by (site, path).
        let mut server: HashMap<(usize, String), u64> = HashMap::new();
        let mut total = 0u64;
        for (j, domain) in self.domains.iter().enumerate() {
            let r = expect_status(
                "counter total",
                conn.get(&format!("/apps/counter/total?domain={domain}"))
                    .await,
                &[200],
            )?;
            let body = parse("counter total", &r)?;
            for c in body
                .get("counts")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
            {
                let path = c
                    .get("path")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let count = c.get("count").and_then(Value::as_u64).unwrap_or(0);
                *server.entry((j, path)).or_insert(0) += count;
            }
            total += body.get("total").and_then(Value::as_u64).unwrap_or(0);
        }
        let sites = self.domains.len();
        let mut sent = 0u64;
        for (k, a) in self.acked.iter().enumerate() {
            let a = a.load(Ordering::Relaxed);
            sent += a;
            let got = server.remove(&(k % sites, format!("/p{k}"))).unwrap_or(0);
            if got < a || got > a + unknown {
                v.failures.push(format!(
                    "{tag}{}/p{k}: server counts {got}, {a} hits acknowledged ({unknown} unknown)",
                    self.domain(k as u64)
                ));
            }
        }
        for ((j, path), n) in server {
            v.failures.push(format!(
                "{tag}{}{path}: {n} hits counted for a path never hit",
                self.domains[j]
            ));
        }
        if total < sent || total > sent + unknown {
            v.failures.push(format!(
                "{tag}domain totals {total} != {sent} hits acknowledged ({unknown} unknown)"
            ));
        }
        v.notes.push(format!(
            "{tag}{} site(s) ({}...): {sent} hits acknowledged over {} URLs, server total {total}, {unknown} unknown",
            sites, self.domains[0], self.urls
        ));
        self.verify_ranges(conn, tag, v).await;
        Ok(())
    }

    /// Every hit URL's hourly and daily counts over the run's range must equal the hits
    /// acknowledged in each bucket (within the unknown outcomes).
    async fn verify_ranges(&self, conn: &mut Conn, tag: &str, v: &mut Verification) {
        let unknown = self.unknown.load(Ordering::Relaxed);
        let buckets = self
            .buckets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut by_url: HashMap<u64, Vec<(&String, u64)>> = HashMap::new();
        for ((k, t), n) in &buckets {
            by_url.entry(*k).or_default().push((t, *n));
        }
        let (mut hours, mut days) = (0usize, 0usize);
        for k in 0..self.urls {
            let expected = by_url.remove(&k).unwrap_or_default();
            if expected.is_empty() && self.acked[k as usize].load(Ordering::Relaxed) == 0 {
                continue;
            }
            let path = format!("/p{k}");
            let domain = self.domain(k);
            for hour in [true, false] {
                let got = match self.range_counts(conn, domain, Some(&path), hour).await {
                    Ok(g) => g,
                    Err((_, msg)) => {
                        v.failures.push(format!("{tag}{msg}"));
                        continue;
                    }
                };
                let width = if hour { 10 } else { 8 };
                let want: HashMap<&str, u64> = expected
                    .iter()
                    .filter(|(t, _)| t.len() == width)
                    .map(|(t, n)| (t.as_str(), *n))
                    .collect();
                if hour {
                    hours += want.len();
                } else {
                    days += want.len();
                }
                for f in check_buckets(&got, &path, &want, unknown) {
                    v.failures.push(format!(
                        "{tag}{domain}{path} {}: {f}",
                        if hour { "hourly" } else { "daily" }
                    ));
                }
            }
        }
        v.notes.push(format!(
            "{tag}hourly and daily ranges: {hours} hour buckets and {days} day buckets, each equal to the hits acknowledged in it"
        ));
    }
}

/// What is wrong with one URL's range answer `got` (`(path, time) -> count`) given the hits
/// acknowledged per bucket and the hits whose outcome is unknown.
pub fn check_buckets(
    got: &HashMap<(String, String), u64>,
    path: &str,
    want: &HashMap<&str, u64>,
    unknown: u64,
) -> Vec<String> {
    let mut errs = Vec::new();
    let mut extra = 0u64;
    for ((p, t), n) in got {
        if p != path {
            errs.push(format!("{n} hits of {p} in the answer"));
            continue;
        }
        let a = want.get(t.as_str()).copied().unwrap_or(0);
        if *n < a {
            errs.push(format!(
                "bucket {t} counts {n}, {a} hits acknowledged in it"
            ));
        }
        extra += n.saturating_sub(a);
    }
    for (t, a) in want {
        if !got.contains_key(&(path.to_string(), t.to_string())) {
            errs.push(format!("bucket {t} missing, {a} hits acknowledged in it"));
        }
    }
    if extra > unknown {
        errs.push(format!(
            "{extra} hits counted beyond those acknowledged (only {unknown} unknown outcomes)"
        ));
    }
    errs
}

/// The graph CAS-storm workload.
pub struct Graph {
    a: String,
    ends: Vec<String>,
    typ: &'static str,
}

impl Graph {
    /// A storm on `--edges` relationships `a -KNOWS-> b_i` between run-unique nodes.
    pub fn new(p: &Params) -> Graph {
        let a = format!("bench{}-a", p.nonce);
        let ends = (0..p.edges.max(1))
            .map(|i| format!("bench{}-b{i}", p.nonce))
            .collect();
        Graph {
            a,
            ends,
            typ: "KNOWS",
        }
    }

    fn rel_path(&self, end: &str) -> String {
        format!("/apps/graph/relationships/{}/{}/{}", self.a, self.typ, end)
    }

    /// Create the nodes and the relationships.
    pub async fn prepare(&self, conn: &mut Conn) -> Result<()> {
        for id in std::iter::once(&self.a).chain(&self.ends) {
            let body = json!({ "id": id, "properties": { "role": "bench" } }).to_string();
            expect_status(
                "create graph node",
                conn.post_json("/apps/graph/nodes", body).await,
                &[201],
            )?;
        }
        for end in &self.ends {
            let body = json!({ "start": self.a, "type": self.typ, "end": end,
                               "properties": { "seed": "1" } })
            .to_string();
            expect_status(
                "create relationship",
                conn.post_json("/apps/graph/relationships", body).await,
                &[201],
            )?;
        }
        Ok(())
    }

    /// One storm operation: 55% PATCH, 15% DELETE, 30% re-create (so the relationship is
    /// more often alive at the end and the check compares properties, not just absence).
    pub async fn op(&self, w: &mut Worker, conn: &mut Conn, rec: &mut Recorder) -> Op {
        let end = &self.ends[w.rng.gen_range(0..self.ends.len())];
        w.seq += 1;
        let dice: f64 = w.rng.gen();
        if dice < 0.55 {
            let mut body = json!({ "put": { format!("w{}", w.idx): format!("{}", w.seq),
                                            "last": format!("{}-{}", w.idx, w.seq) } });
            if w.rng.gen_bool(0.3) {
                body["delete"] = json!([format!("w{}", w.rng.gen_range(0..8))]);
            }
            let r = conn.patch_json(&self.rel_path(end), body.to_string()).await;
            match &r {
                Ok(x) if x.status == 200 => rec.count("patch_200", 1),
                Ok(x) if x.status == 404 => rec.count("patch_404", 1),
                _ => {}
            }
            Op::judged("patch", &r, &[200, 404])
        } else if dice < 0.70 {
            let r = conn.delete(&self.rel_path(end)).await;
            match &r {
                Ok(x) if x.status == 204 => rec.count("delete_204", 1),
                Ok(x) if x.status == 404 => rec.count("delete_404", 1),
                _ => {}
            }
            Op::judged("delete", &r, &[204, 404])
        } else {
            let body = json!({ "start": self.a, "type": self.typ, "end": end,
                               "properties": { "created_by": format!("w{}-{}", w.idx, w.seq) } })
            .to_string();
            let r = conn.post_json("/apps/graph/relationships", body).await;
            match &r {
                Ok(x) if x.status == 201 => rec.count("create_201", 1),
                Ok(x) if x.status == 409 => rec.count("create_409", 1),
                _ => {}
            }
            Op::judged("create", &r, &[201, 409])
        }
    }

    async fn adjacency(&self, conn: &mut Conn, node: &str, direction: &str) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..10_000 {
            let mut path = format!(
                "/apps/graph/nodes/{node}/relationships?type={}&direction={direction}&limit=1000",
                self.typ
            );
            if let Some(a) = &after {
                let enc =
                    percent_encoding::utf8_percent_encode(a, percent_encoding::NON_ALPHANUMERIC);
                let _ = write!(path, "&after={enc}");
            }
            let r = expect_status("adjacency list", conn.get(&path).await, &[200])?;
            let v = parse("adjacency list", &r)?;
            out.extend(
                v.get("relationships")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
            match v.get("next").and_then(Value::as_str) {
                Some(n) => after = Some(n.to_string()),
                None => break,
            }
        }
        Ok(out)
    }

    /// Each node's adjacency must show exactly the relationship row's properties, once the
    /// server has settled: a PATCH or DELETE whose client timed out may still be running on the
    /// server (it updates the relationship row, then the index rows), so a mismatch is read
    /// again, up to 10 times 300 ms apart, before it counts. A correct server settles within
    /// milliseconds; a wrong one stays wrong.
    /// With several servers, each one's view is checked (and settles) on its own.
    pub async fn verify(&self, conns: &mut [Conn]) -> Result<Verification> {
        let mut all = Verification {
            checked: true,
            ..Verification::default()
        };
        let tags = server_tags(conns);
        for (conn, tag) in conns.iter_mut().zip(&tags) {
            let mut v = self.verify_once(conn).await?;
            for _ in 0..10 {
                if v.failures.is_empty() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                v = self.verify_once(conn).await?;
            }
            all.failures
                .extend(v.failures.into_iter().map(|f| format!("{tag}{f}")));
            all.notes
                .extend(v.notes.into_iter().map(|n| format!("{tag}{n}")));
        }
        Ok(all)
    }

    async fn verify_once(&self, conn: &mut Conn) -> Result<Verification> {
        let mut v = Verification {
            checked: true,
            ..Verification::default()
        };
        let outgoing = self.adjacency(conn, &self.a, "outgoing").await?;
        let mut live = 0;
        for end in &self.ends {
            let r = conn.get(&self.rel_path(end)).await?;
            let row_props = match r.status {
                200 => Some(
                    parse("relationship", &r)?
                        .get("properties")
                        .cloned()
                        .unwrap_or(Value::Null),
                ),
                404 => None,
                s => {
                    v.failures
                        .push(format!("GET relationship to {end}: HTTP {s}"));
                    continue;
                }
            };
            live += usize::from(row_props.is_some());
            let incoming = self.adjacency(conn, end, "incoming").await?;
            let from_a: Vec<&Value> = outgoing
                .iter()
                .filter(|e| e.get("end").and_then(Value::as_str) == Some(end.as_str()))
                .collect();
            let to_b: Vec<&Value> = incoming
                .iter()
                .filter(|e| e.get("start").and_then(Value::as_str) == Some(self.a.as_str()))
                .collect();
            for (side, entries) in [("outgoing of start", &from_a), ("incoming of end", &to_b)] {
                match &row_props {
                    None if !entries.is_empty() => v.failures.push(format!(
                        "{end}: relationship deleted but {side} lists {} entries",
                        entries.len()
                    )),
                    Some(p) if entries.len() != 1 => v.failures.push(format!(
                        "{end}: relationship exists ({p}) but {side} lists {} entries",
                        entries.len()
                    )),
                    Some(p) => {
                        let shown = entries[0].get("properties").cloned().unwrap_or(Value::Null);
                        if &shown != p {
                            v.failures.push(format!(
                                "{end}: {side} shows {shown} but the relationship row has {p}"
                            ));
                        }
                    }
                    None => {}
                }
            }
        }
        v.notes.push(format!(
            "{} relationships stormed, {live} alive at the end; adjacency compared on both nodes",
            self.ends.len()
        ));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_utc_civil_times() {
        assert_eq!(utc_bucket(0, true), "1970010100");
        // 2024-02-29 23:59:59.999 UTC and the next millisecond.
        assert_eq!(utc_bucket(1_709_251_199_999, true), "2024022923");
        assert_eq!(utc_bucket(1_709_251_200_000, false), "20240301");
        assert_eq!(utc_bucket(1_798_761_600_000, false), "20270101");
    }

    #[test]
    fn a_lost_or_invented_hit_in_a_bucket_is_flagged() {
        let got: HashMap<(String, String), u64> = [
            (("/p1".to_string(), "2026112710".to_string()), 3),
            (("/p1".to_string(), "2026112711".to_string()), 1),
        ]
        .into_iter()
        .collect();
        let want: HashMap<&str, u64> = [("2026112710", 3), ("2026112711", 1)].into_iter().collect();
        assert!(check_buckets(&got, "/p1", &want, 0).is_empty());
        let lost: HashMap<&str, u64> = [("2026112710", 4), ("2026112711", 1)].into_iter().collect();
        assert_eq!(check_buckets(&got, "/p1", &lost, 0).len(), 1);
        let fewer: HashMap<&str, u64> =
            [("2026112710", 2), ("2026112711", 1)].into_iter().collect();
        assert_eq!(check_buckets(&got, "/p1", &fewer, 0).len(), 1);
        assert!(check_buckets(&got, "/p1", &fewer, 1).is_empty());
        let missing: HashMap<&str, u64> = [("2026112712", 1)].into_iter().collect();
        assert!(!check_buckets(&got, "/p1", &missing, 9).is_empty());
        assert!(!check_buckets(&got, "/p2", &want, 9).is_empty());
    }
}
