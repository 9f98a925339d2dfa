//! The graph database (SEED_REQUIREMENTS.md §1.5): nodes, typed relationships with properties,
//! and adjacency lists newest-created first, kept consistent by check-and-mutate loops on the
//! update timestamp (the documents' lock-free algorithm, with the sample code's delete bug fixed).
//!
//! # Table `graph`, family `g`
//! `H(x) = hash4(UTF-8 bytes of node id x)` (4 B); `str(s) = u32 len (BE) | UTF-8 bytes`.
//!
//! | row | bytes | cells |
//! |---|---|---|
//! | node `n` | `H(n) \| 0x00 \| str(n)` | `g:p` properties, `g:c` created, `g:u` token |
//! | relationship `s -t-> e` | `H(s) \| 0x01 \| str(s) \| str(t) \| str(e)` | `g:p`, `g:c`, `g:u` |
//! | adjacency index | `H(x) \| 0x02 \| str(x) \| dir (1 B) \| str(t) \| u64::MAX - c (8, BE) \| str(y)` | `g:""` = properties |
//!
//! - `dir` is `0x01` INCOMING (x = end node, y = start node) or `0x02` OUTGOING (x = start, y =
//!   end); `c` is the relationship's create time. Every relationship has one index row of each.
//! - `g:c` is the create time (8-byte BE i64 ms). `g:u` is the check-and-mutate token: on a live
//!   row the update time followed by the create time (8 + 8 bytes BE; unique per incarnation of
//!   the row, unlike the update time alone); on a deleted row a tombstone, the delete time (8
//!   bytes), written just above the delete marker. `g:p` and `g:""` hold the properties as
//!   `u32 n | (str(key) | str(value))*` (the sample code's encoding; `{}` is empty bytes).
//! - An index row's cell timestamp is the relationship's update time: a list entry's
//!   `updated_at` is read from it.
//! - A node's row, its outgoing relationship rows and both of its adjacency lists start with
//!   `H(n)`: with the table's salt `prefix_len = 4` they live in one region, and an adjacency
//!   list is the partial scan of `H(x) | 0x02 | str(x) | dir | str(t)`, inside that region.
//!
//! # Invariants (the algorithm of §1.5 D1–D9)
//! 1. Create (D1, D5) reads `g:u` and, if it is absent or a tombstone `d`, does
//!    `check_and_mutate(row, g:u == what it read, put p,c,u @ts)` with `ts > d + 1`: of N
//!    concurrent creates exactly one passes (201), the others re-read a live row and get 409.
//!    The documents check "absent", which also passes right after a concurrent delete whose
//!    marker is at or above `ts`: the create would answer 201 and stay invisible. A
//!    relationship's index rows are written after it, at `ts = c`.
//! 2. Update (D3, D7) loops: read `p, c, u`; `u' = max(tick, u + 1)`;
//!    `check_and_mutate(row, g:u == u, put p,u @u')`; retry on a failed check. So successful
//!    updates are totally ordered and their `u'` strictly increase in that order. Then both index
//!    rows (keys from the stored `c`) are put at cell timestamp `u'`: the highest timestamp wins
//!    whatever order the index writes arrive in, so the index converges on the row's properties.
//! 3. Delete (D4, D8) loops the same way with `d = max(tick, u + 1)` and
//!    `check_and_mutate(row, g:u == u, delete row @d, tombstone @d+1)`, then deletes both index
//!    rows at `d`;
//!    their keys are built from the stored `c` (the sample code built them from `d` and never
//!    deleted anything: D8 bug). Every update that passed its check before has `u' < d`, so its
//!    straggling index put is masked by the delete marker.
//! 4. Nothing here rests on one server: every check is a check-and-mutate on the row, every
//!    timestamp is computed from what the row holds (`u + 1`, tombstone `+ 2`), so the rules
//!    above hold however requests are spread over servers and however their clocks disagree.
//!    The serving server's clock ([`super::clock`]) only supplies "now"; computed timestamps go
//!    through it (observed), so its later ones are above them. Create times strictly increase
//!    over the incarnations of one row (each lands above the tombstone of the last delete);
//!    between relationships of one node they are unique within one server only, and ties
//!    (two servers, one millisecond) list by the other node's id.
//! 5. A create or update re-reads the relationship after writing its index rows and deletes
//!    them again if the incarnation it wrote them for has been deleted meanwhile
//!    (`drop_index_if_dead`): on Bigtable, where deletes do not mask later puts, a straggling
//!    index write would otherwise leave an entry for a deleted relationship.
//! 6. Each multi-row write runs on a detached task ([`super::request::run_detached`]): a client
//!    that disconnects does not stop it between the relationship row and its index rows.
//! 7. A node with relationships is not deleted (409) unless `cascade=true`, which deletes the
//!    node and then each relationship (D8). Relationship create checks both nodes exist (404).
//!    These checks are not atomic with concurrent writes on other rows (no multi-row
//!    transactions): a relationship whose end node is gone can exist for a while (a cascade
//!    in progress or cut by a crash, a create racing a delete). Readers never show it (the
//!    adjacency lists and `GET` check both end nodes) and `kura repair` removes it.

use super::clock::Clock;
use super::cursor;
use super::error::{AppError, AppResult};
use super::idempotency::{self, Record};
use super::keys::{hash4, prefix_end, put_str, rev_time, unrev_time, KeyReader};
use super::request::{self, run_detached};
use super::scan::scan_rows;
use crate::state::AppState;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use kura_backend::{CheckAndMutate, Mutation, ReadSpec, Row, RowMutation, ScanSpec, Store};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Bound;

/// The graph's table.
pub const TABLE: &str = "graph";
/// Its one family.
pub const FAMILY: &str = "g";

const NODE: u8 = 0x00;
const RELATIONSHIP: u8 = 0x01;
const INDEX: u8 = 0x02;
const INCOMING: u8 = 0x01;
const OUTGOING: u8 = 0x02;

const PROPS: &[u8] = b"p";
const CREATED: &[u8] = b"c";
const UPDATED: &[u8] = b"u";

/// Longest node id or relationship type, bytes.
pub const MAX_NAME: usize = 1024;

/// Properties: names to values.
pub type Properties = BTreeMap<String, String>;

/// A node as served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub id: String,
    pub properties: Properties,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A relationship as served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relationship {
    pub start: String,
    #[serde(rename = "type")]
    pub rel_type: String,
    pub end: String,
    pub properties: Properties,
    pub created_at: i64,
    pub updated_at: i64,
}

// ---- keys -------------------------------------------------------------------------------

fn node_key(n: &str) -> Vec<u8> {
    let mut k = hash4(n.as_bytes()).to_vec();
    k.push(NODE);
    put_str(&mut k, n.as_bytes());
    k
}

fn rel_key(s: &str, t: &str, e: &str) -> Vec<u8> {
    let mut k = hash4(s.as_bytes()).to_vec();
    k.push(RELATIONSHIP);
    put_str(&mut k, s.as_bytes());
    put_str(&mut k, t.as_bytes());
    put_str(&mut k, e.as_bytes());
    k
}

/// `H(x) | 0x02 | str(x)`: every adjacency row of node `x`.
fn node_index_prefix(x: &str) -> Vec<u8> {
    let mut k = hash4(x.as_bytes()).to_vec();
    k.push(INDEX);
    put_str(&mut k, x.as_bytes());
    k
}

/// `H(x) | 0x02 | str(x) | dir | str(t)`: one adjacency list.
fn list_prefix(x: &str, dir: u8, t: &str) -> Vec<u8> {
    let mut k = node_index_prefix(x);
    k.push(dir);
    put_str(&mut k, t.as_bytes());
    k
}

fn index_key(x: &str, dir: u8, t: &str, created: i64, y: &str) -> Vec<u8> {
    let mut k = list_prefix(x, dir, t);
    k.extend_from_slice(&rev_time(created.max(0) as u64));
    put_str(&mut k, y.as_bytes());
    k
}

/// Both index keys of relationship `s -t-> e` created at `c`: OUTGOING under `s`, INCOMING
/// under `e`.
fn index_keys(s: &str, t: &str, e: &str, c: i64) -> [Vec<u8>; 2] {
    [
        index_key(s, OUTGOING, t, c, e),
        index_key(e, INCOMING, t, c, s),
    ]
}

/// An adjacency row's key split up.
struct IndexEntry {
    dir: u8,
    rel_type: String,
    created: i64,
    other: String,
}

/// Parses an index key of node `x` (the caller checked the `H(x)|0x02|str(x)` prefix length).
fn decode_index(key: &[u8], prefix_len: usize) -> Option<IndexEntry> {
    let mut r = KeyReader::new(key, prefix_len);
    let dir = r.u8()?;
    let rel_type = r.str()?.to_string();
    let rev = r.u64()?;
    let other = r.str()?.to_string();
    let created = i64::try_from(unrev_time(rev.to_be_bytes())).ok()?;
    (r.at_end() && (dir == INCOMING || dir == OUTGOING)).then_some(IndexEntry {
        dir,
        rel_type,
        created,
        other,
    })
}

// ---- values -----------------------------------------------------------------------------

fn encode_props(p: &Properties) -> Vec<u8> {
    if p.is_empty() {
        return Vec::new();
    }
    let mut v = Vec::new();
    let n = u32::try_from(p.len()).expect("property count is bounded by the body size");
    v.extend_from_slice(&n.to_be_bytes());
    for (k, val) in p {
        put_str(&mut v, k.as_bytes());
        put_str(&mut v, val.as_bytes());
    }
    v
}

fn decode_props(v: &[u8]) -> AppResult<Properties> {
    let bad = || AppError::Internal("graph properties cell is malformed".into());
    let mut out = Properties::new();
    if v.is_empty() {
        return Ok(out);
    }
    let mut r = KeyReader::new(v, 0);
    let n = r.u32().ok_or_else(bad)?;
    for _ in 0..n {
        let k = r.str().ok_or_else(bad)?;
        let val = r.str().ok_or_else(bad)?;
        out.insert(k.to_string(), val.to_string());
    }
    if !r.at_end() {
        return Err(bad());
    }
    Ok(out)
}

fn put(q: &[u8], value: Vec<u8>, ts: i64) -> Mutation {
    Mutation::Put {
        family: FAMILY.into(),
        qualifier: q.to_vec(),
        timestamp: Some(ts),
        value,
    }
}

/// The `g:u` value: update time then create time (8 B BE each). It is the check-and-mutate
/// token: `u` orders the versions of one incarnation of a row, `c` (strictly increasing over
/// the incarnations of one row, whichever server creates them: see [`create_row`]) tells
/// incarnations apart, so a check never passes against a row that was deleted and re-created
/// since it was read, even if the new `u` equals the old one.
fn token(updated: i64, created: i64) -> Vec<u8> {
    let mut v = updated.to_be_bytes().to_vec();
    v.extend_from_slice(&created.to_be_bytes());
    v
}

/// The mutations of an entity delete at `ts`: a row delete marker at `ts` (masking every version
/// at or below it, including straggling index-row writes of earlier updates), and a tombstone
/// `g:u` = `ts` (8 bytes) at `ts + 1`, above the marker.
///
/// Why the tombstone: a create must put its cells above the marker, or they stay masked and
/// invisible. Markers cannot be read, so the tombstone records the marker's time; a create reads
/// it, writes at a later time, and checks `g:u` still holds it.
fn delete_with_tombstone(clock: &Clock, ts: i64) -> Vec<Mutation> {
    clock.observe(ts.saturating_add(1));
    vec![
        Mutation::DeleteRow {
            timestamp: Some(ts),
        },
        put(UPDATED, ts.to_be_bytes().to_vec(), ts.saturating_add(1)),
    ]
}

/// What [`create_row`] did.
enum Created {
    /// Created at this time; with an idempotency key, the record stored with it.
    New(i64, Option<Record>),
    /// The row is live (a conflict).
    Exists,
    /// The idempotency key's record: this request created the row before.
    Recorded(Record),
}

/// Builds the record of a create from its create time.
type CreateAnswer<'a> = &'a dyn Fn(i64) -> AppResult<Record>;

/// D1/D5: creates the row at `key` unless it exists.
///
/// `check_and_mutate(g:u == what was read)`: absent for a row never written, the tombstone of
/// the last delete otherwise, with a create time above that delete's marker. Of N concurrent
/// creates exactly one passes; the others re-read, find the row live and report a conflict.
/// With an idempotency key, the record is stored by the same check-and-mutate and looked for
/// in the same read (`super::idempotency`).
async fn create_row(
    kura: &Store,
    clock: &Clock,
    key: &[u8],
    props: &[u8],
    after: i64,
    idem: Option<(&[u8], CreateAnswer<'_>)>,
) -> AppResult<Created> {
    loop {
        let (state, record) = load_keyed(kura, key, idem.map(|(k, _)| k)).await?;
        if let Some(r) = record {
            return Ok(Created::Recorded(r));
        }
        let (expected, floor) = match state {
            State::Live(_) => return Ok(Created::Exists),
            State::Absent => (Vec::new(), i64::MIN),
            State::Deleted { at, raw } => (raw, at.saturating_add(2)),
        };
        let ts = clock.tick_unique().max(floor).max(after.saturating_add(1));
        clock.observe(ts);
        let mut mutations = vec![
            put(PROPS, props.to_vec(), ts),
            put(CREATED, ts.to_be_bytes().to_vec(), ts),
            put(UPDATED, token(ts, ts), ts),
        ];
        let mut record = None;
        if let Some((k, answer)) = idem {
            let r = answer(ts)?;
            mutations.push(r.put(k, ts.saturating_add(1))?);
            record = Some(r);
        }
        let cam = CheckAndMutate {
            row: key.to_vec(),
            family: FAMILY.into(),
            qualifier: UPDATED.to_vec(),
            expected,
            mutations,
        };
        if super::write::check_and_mutate(kura, TABLE, cam).await? {
            return Ok(Created::New(ts, record));
        }
    }
}

/// What a node or relationship row holds.
enum State {
    /// Never written (or compacted away).
    Absent,
    /// Deleted at `at`; `raw` is the tombstone's bytes.
    Deleted { at: i64, raw: Vec<u8> },
    /// Alive.
    Live(Stored),
}

/// A node or relationship row as stored.
struct Stored {
    props: Properties,
    created: i64,
    updated: i64,
    /// The exact bytes of `g:u`, the check-and-mutate expectation.
    updated_raw: Vec<u8>,
}

fn parse_state(row: &Row) -> AppResult<State> {
    let cell = |q: &[u8]| {
        row.cells
            .iter()
            .find(|c| c.family == FAMILY.as_bytes() && c.qualifier == q)
    };
    let time = |v: &[u8]| {
        <[u8; 8]>::try_from(v)
            .map(i64::from_be_bytes)
            .map_err(|_| AppError::Internal("graph time cell is not 8 bytes".into()))
    };
    let Some(u) = cell(UPDATED) else {
        return Ok(State::Absent);
    };
    if u.value.len() == 8 {
        return Ok(State::Deleted {
            at: time(&u.value)?,
            raw: u.value.clone(),
        });
    }
    let updated = time(u.value.get(..8).unwrap_or(&u.value))?;
    let created = match cell(CREATED) {
        Some(c) => time(&c.value)?,
        None => updated,
    };
    let props = match cell(PROPS) {
        Some(p) => decode_props(&p.value)?,
        None => Properties::new(),
    };
    Ok(State::Live(Stored {
        props,
        created,
        updated,
        updated_raw: u.value.clone(),
    }))
}

async fn load_state(kura: &Store, key: &[u8]) -> AppResult<State> {
    Ok(load_keyed(kura, key, None).await?.0)
}

/// The row's state and the record of idempotency key `idem` in it, in one read.
async fn load_keyed(
    kura: &Store,
    key: &[u8],
    idem: Option<&[u8]>,
) -> AppResult<(State, Option<Record>)> {
    match kura.get(TABLE, key, &ReadSpec::default()).await? {
        Some(row) => {
            let record = match idem {
                Some(k) => idempotency::find(&row, k)?,
                None => None,
            };
            Ok((parse_state(&row)?, record))
        }
        None => Ok((State::Absent, None)),
    }
}

/// The live row at `key` and the record of `idem` in it.
async fn load_live_keyed(
    kura: &Store,
    key: &[u8],
    idem: Option<&[u8]>,
) -> AppResult<(Option<Stored>, Option<Record>)> {
    let (state, record) = load_keyed(kura, key, idem).await?;
    match state {
        State::Live(s) => Ok((Some(s), record)),
        State::Absent | State::Deleted { .. } => Ok((None, record)),
    }
}

/// The live row at `key`, if any.
async fn load(kura: &Store, key: &[u8]) -> AppResult<Option<Stored>> {
    match load_state(kura, key).await? {
        State::Live(s) => Ok(Some(s)),
        State::Absent | State::Deleted { .. } => Ok(None),
    }
}

// ---- input ------------------------------------------------------------------------------

fn check_name(what: &str, s: &str) -> AppResult<()> {
    if s.is_empty() {
        return Err(AppError::bad(format!("{what} must not be empty")));
    }
    if s.len() > MAX_NAME {
        return Err(AppError::bad(format!(
            "{what} is longer than {MAX_NAME} bytes"
        )));
    }
    Ok(())
}

#[derive(Deserialize)]
struct NewNode {
    id: String,
    properties: Option<Properties>,
}

#[derive(Deserialize)]
struct NewRelationship {
    start: String,
    #[serde(rename = "type")]
    rel_type: String,
    end: String,
    properties: Option<Properties>,
}

#[derive(Deserialize)]
struct PropertyPatch {
    put: Option<Properties>,
    delete: Option<Vec<String>>,
}

impl PropertyPatch {
    /// Old properties plus `put`, minus `delete` (a name in both ends deleted).
    fn apply(&self, old: &Properties) -> Properties {
        let mut p = old.clone();
        if let Some(put) = &self.put {
            p.extend(put.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        for name in self.delete.iter().flatten() {
            p.remove(name);
        }
        p
    }
}

fn rel_path(req: &HttpRequest) -> AppResult<(String, String, String)> {
    let s = request::path_str(req, "start")?;
    let t = request::path_str(req, "type")?;
    let e = request::path_str(req, "end")?;
    check_name("start", &s)?;
    check_name("type", &t)?;
    check_name("end", &e)?;
    Ok((s, t, e))
}

fn node_missing(id: &str) -> AppError {
    AppError::NotFound(format!("no node {id:?}"))
}

fn rel_missing(s: &str, t: &str, e: &str) -> AppError {
    AppError::NotFound(format!("no relationship {s:?} -{t:?}-> {e:?}"))
}

fn node_json(id: String, s: Stored) -> Node {
    Node {
        id,
        properties: s.props,
        created_at: s.created,
        updated_at: s.updated,
    }
}

fn rel_json(start: String, rel_type: String, end: String, s: Stored) -> Relationship {
    Relationship {
        start,
        rel_type,
        end,
        properties: s.props,
        created_at: s.created,
        updated_at: s.updated,
    }
}

// ---- routes -----------------------------------------------------------------------------

/// Registers the graph's routes (relative to `/apps`).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/graph/nodes")
            .route(web::post().to(create_node))
            .default_service(request::allow_only("POST")),
    )
    .service(
        web::resource("/graph/nodes/{id}")
            .route(request::get_or_head().to(get_node))
            .route(web::patch().to(update_node))
            .route(web::delete().to(delete_node))
            .default_service(request::allow_only("GET, HEAD, PATCH, DELETE")),
    )
    .service(
        web::resource("/graph/nodes/{id}/relationships")
            .route(request::get_or_head().to(adjacency))
            .default_service(request::allow_only("GET, HEAD")),
    )
    .service(
        web::resource("/graph/relationships")
            .route(web::post().to(create_relationship))
            .default_service(request::allow_only("POST")),
    )
    .service(
        web::resource("/graph/relationships/{start}/{type}/{end}")
            .route(request::get_or_head().to(get_relationship))
            .route(web::patch().to(update_relationship))
            .route(web::delete().to(delete_relationship_handler))
            .default_service(request::allow_only("GET, HEAD, PATCH, DELETE")),
    );
}

// ---- nodes ------------------------------------------------------------------------------

async fn create_node(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> AppResult<HttpResponse> {
    let new: NewNode = request::read_json(&req, body, &state.limits).await?;
    check_name("id", &new.id)?;
    let idem = idempotency::key(&req)?;
    let kura = state.kura.clone();
    let clock = state.clock.clone();
    super::ensure_table(&kura, TABLE).await?;
    let limits = state.limits.clone();
    run_detached(async move {
        let props = new.properties.unwrap_or_default();
        let value = encode_props(&props);
        request::check_value(&limits, "the node's properties", &value)?;
        let node = |ts: i64| Node {
            id: new.id.clone(),
            properties: props.clone(),
            created_at: ts,
            updated_at: ts,
        };
        // One row: its record is done when written.
        let record = |ts: i64| Ok(Record::new(StatusCode::CREATED, &node(ts))?.finished());
        let keyed = idem.as_deref().map(|k| (k, &record as CreateAnswer<'_>));
        match create_row(&kura, &clock, &node_key(&new.id), &value, i64::MIN, keyed).await? {
            Created::New(ts, _) => Ok(HttpResponse::Created().json(node(ts))),
            Created::Recorded(r) => Ok(r.response()),
            Created::Exists => Err(AppError::Conflict(format!(
                "node {:?} already exists",
                new.id
            ))),
        }
    })
    .await
}

async fn get_node(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    let id = request::path_str(&req, "id")?;
    check_name("id", &id)?;
    super::ensure_table(&state.kura, TABLE).await?;
    match load(&state.kura, &node_key(&id)).await? {
        Some(s) => Ok(HttpResponse::Ok().json(node_json(id, s))),
        None => Err(node_missing(&id)),
    }
}

async fn update_node(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> AppResult<HttpResponse> {
    let id = request::path_str(&req, "id")?;
    check_name("id", &id)?;
    let patch: PropertyPatch = request::read_json(&req, body, &state.limits).await?;
    let idem = idempotency::key(&req)?;
    let kura = state.kura.clone();
    let limits = state.limits.clone();
    let clock = state.clock.clone();
    super::ensure_table(&kura, TABLE).await?;
    run_detached(async move {
        let key = node_key(&id);
        loop {
            let (old, record) = load_live_keyed(&kura, &key, idem.as_deref()).await?;
            if let Some(r) = record {
                return Ok(r.response());
            }
            let Some(old) = old else {
                return Err(node_missing(&id));
            };
            let ts = clock.tick().max(old.updated.saturating_add(1));
            clock.observe(ts);
            let props = patch.apply(&old.props);
            let value = encode_props(&props);
            request::check_value(&limits, "the node's properties", &value)?;
            let node = Node {
                id: id.clone(),
                properties: props,
                created_at: old.created,
                updated_at: ts,
            };
            let mut mutations = vec![
                put(PROPS, value, ts),
                put(UPDATED, token(ts, old.created), ts),
            ];
            if let Some(k) = idem.as_deref() {
                // One row: its record is done when written.
                let r = Record::new(StatusCode::OK, &node)?.finished();
                mutations.push(r.put(k, ts.saturating_add(1))?);
            }
            let cam = CheckAndMutate {
                row: key.clone(),
                family: FAMILY.into(),
                qualifier: UPDATED.to_vec(),
                expected: old.updated_raw,
                mutations,
            };
            if super::write::check_and_mutate(&kura, TABLE, cam).await? {
                return Ok(HttpResponse::Ok().json(node));
            }
        }
    })
    .await
}

/// Index rows of node `x` (every direction and type), at most `max`.
async fn node_index_rows(kura: &Store, x: &str, max: usize) -> AppResult<(usize, Vec<Row>)> {
    let prefix = node_index_prefix(x);
    let high = prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let spec = ScanSpec {
        low: Bound::Included(prefix.clone()),
        high,
        ..ScanSpec::all()
    };
    Ok((prefix.len(), scan_rows(kura, TABLE, spec, 0, max).await?))
}

/// The relationship an index row of `x` stands for: `(start, type, end)`.
fn relationship_of(x: &str, e: &IndexEntry) -> (String, String, String) {
    if e.dir == OUTGOING {
        (x.to_string(), e.rel_type.clone(), e.other.clone())
    } else {
        (e.other.clone(), e.rel_type.clone(), x.to_string())
    }
}

/// True if node `x` has a relationship whose row exists and whose other end node is live (index
/// rows left orphaned by a crash between a relationship delete and its index delete do not
/// count, nor relationships readers hide because their other end is gone).
async fn has_relationships(kura: &Store, x: &str) -> AppResult<bool> {
    let prefix = node_index_prefix(x);
    let high = prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let mut spec = ScanSpec {
        low: Bound::Included(prefix.clone()),
        high,
        ..ScanSpec::all()
    };
    loop {
        let rows = scan_rows(kura, TABLE, spec.clone(), 0, 100).await?;
        for row in &rows {
            if let Some(entry) = decode_index(&row.key, prefix.len()) {
                let (s, t, e) = relationship_of(x, &entry);
                if let Some(st) = load(kura, &rel_key(&s, &t, &e)).await? {
                    let rel = rel_json(s, t, e, st);
                    if ends_hold(kura, &rel).await? {
                        return Ok(true);
                    }
                }
            }
        }
        match rows.last() {
            Some(last) if rows.len() == 100 => spec = spec.resume_after(&last.key),
            _ => return Ok(false),
        }
    }
}

/// Deletes every relationship of node `x` (D8 for each), and any orphaned index row.
async fn delete_all_relationships(kura: &Store, clock: &Clock, x: &str) -> AppResult<()> {
    loop {
        let (plen, rows) = node_index_rows(kura, x, 1000).await?;
        if rows.is_empty() {
            return Ok(());
        }
        for row in &rows {
            if let Some(entry) = decode_index(&row.key, plen) {
                let (s, t, e) = relationship_of(x, &entry);
                delete_relationship(kura, clock, &s, &t, &e).await?;
            }
            // Whatever the relationship row said, this index row is now stale (its relationship
            // is gone, or was re-created at a later `c` under another key): delete the versions
            // seen, so an orphan cannot keep the node alive.
            let seen = row.cells.iter().map(|c| c.timestamp).max().unwrap_or(0);
            let m = RowMutation {
                row: row.key.clone(),
                mutations: vec![Mutation::DeleteRow {
                    timestamp: Some(seen),
                }],
            };
            super::write::mutate(kura, TABLE, m).await?;
        }
    }
}

async fn delete_node(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    let id = request::path_str(&req, "id")?;
    check_name("id", &id)?;
    let q = request::query(&req)?;
    let cascade = match q.get("cascade").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(AppError::bad(format!(
                "cascade must be true or false, got {other:?}"
            )))
        }
    };
    let idem = idempotency::key(&req)?;
    let kura = state.kura.clone();
    let clock = state.clock.clone();
    super::ensure_table(&kura, TABLE).await?;
    run_detached(async move {
        let key = node_key(&id);
        loop {
            let (old, record) = load_live_keyed(&kura, &key, idem.as_deref()).await?;
            if let (Some(k), Some(r)) = (idem.as_deref(), record) {
                if !r.done {
                    // The node's delete was applied; finish its cascade (the record's body
                    // says whether it had one).
                    if r.field("cascade").and_then(|v| v.as_bool()) == Some(true) {
                        delete_all_relationships(&kura, &clock, &id).await?;
                    }
                    let at = r
                        .field("deleted_at")
                        .and_then(|v| v.as_i64())
                        .unwrap_or_else(|| clock.tick())
                        .saturating_add(3);
                    idempotency::finish(&kura, TABLE, key.clone(), k, r.clone(), at).await?;
                }
                return Ok(r.response());
            }
            let Some(old) = old else {
                return Err(node_missing(&id));
            };
            // With `cascade`, the node goes first and its relationships after it: readers hide
            // a relationship whose end node is gone, so a crash in between shows the whole
            // delete, and `kura repair` (or the keyed retry) removes the rest.
            if !cascade && has_relationships(&kura, &id).await? {
                return Err(AppError::Conflict(format!(
                    "node {id:?} still has relationships; delete them or pass cascade=true"
                )));
            }
            let ts = clock.tick().max(old.updated.saturating_add(1));
            clock.observe(ts);
            let mut mutations = delete_with_tombstone(&clock, ts);
            let mut record = None;
            if let Some(k) = idem.as_deref() {
                let r = Record {
                    status: StatusCode::NO_CONTENT.as_u16(),
                    body: serde_json::json!({ "cascade": cascade, "deleted_at": ts }).to_string(),
                    done: !cascade,
                };
                mutations.push(r.put(k, ts.saturating_add(2))?);
                record = Some(r);
            }
            let cam = CheckAndMutate {
                row: key.clone(),
                family: FAMILY.into(),
                qualifier: UPDATED.to_vec(),
                expected: old.updated_raw,
                mutations,
            };
            if super::write::check_and_mutate(&kura, TABLE, cam).await? {
                if cascade {
                    delete_all_relationships(&kura, &clock, &id).await?;
                    if let (Some(k), Some(r)) = (idem.as_deref(), record) {
                        let at = ts.saturating_add(3);
                        idempotency::finish(&kura, TABLE, key.clone(), k, r, at).await?;
                    }
                }
                return Ok(HttpResponse::NoContent().finish());
            }
        }
    })
    .await
}

// ---- relationships ----------------------------------------------------------------------

async fn create_relationship(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> AppResult<HttpResponse> {
    let new: NewRelationship = request::read_json(&req, body, &state.limits).await?;
    check_name("start", &new.start)?;
    check_name("type", &new.rel_type)?;
    check_name("end", &new.end)?;
    let idem = idempotency::key(&req)?;
    let kura = state.kura.clone();
    let limits = state.limits.clone();
    let clock = state.clock.clone();
    super::ensure_table(&kura, TABLE).await?;
    run_detached(async move {
        let key = rel_key(&new.start, &new.rel_type, &new.end);
        // A retry finds its record before anything else (its nodes may be gone since).
        if let Some(k) = idem.as_deref() {
            if let (_, Some(r)) = load_keyed(&kura, &key, Some(k)).await? {
                return finish_relationship_create(&kura, &key, k, r).await;
            }
        }
        // Created after both nodes (whatever the servers' clocks): a relationship is only
        // shown while each end node's incarnation is older than it, so one left over from a
        // node that was deleted and created again stays hidden.
        let mut nodes_created = i64::MIN;
        for n in [&new.start, &new.end] {
            match load(&kura, &node_key(n)).await? {
                Some(st) => nodes_created = nodes_created.max(st.created),
                None => return Err(node_missing(n)),
            }
        }
        let props = new.properties.clone().unwrap_or_default();
        let value = encode_props(&props);
        request::check_value(&limits, "the relationship's properties", &value)?;
        let rel = |ts: i64| Relationship {
            start: new.start.clone(),
            rel_type: new.rel_type.clone(),
            end: new.end.clone(),
            properties: props.clone(),
            created_at: ts,
            updated_at: ts,
        };
        let record = |ts: i64| Record::new(StatusCode::CREATED, &rel(ts));
        let keyed = idem.as_deref().map(|k| (k, &record as CreateAnswer<'_>));
        let mut cleared = false;
        let (ts, record) = loop {
            match create_row(&kura, &clock, &key, &value, nodes_created, keyed).await? {
                Created::New(ts, record) => break (ts, record),
                Created::Recorded(r) => match idem.as_deref() {
                    Some(k) => return finish_relationship_create(&kura, &key, k, r).await,
                    None => return Err(AppError::Internal("a record without a key".into())),
                },
                Created::Exists => {
                    // One left over from a deleted incarnation of an end node is hidden from
                    // readers: it gives way (deleted as `kura repair` would) instead of a 409.
                    if !cleared {
                        if let Some(st) = load(&kura, &key).await? {
                            let old = rel_json(
                                new.start.clone(),
                                new.rel_type.clone(),
                                new.end.clone(),
                                st,
                            );
                            if !ends_hold(&kura, &old).await? {
                                delete_relationship(
                                    &kura,
                                    &clock,
                                    &old.start,
                                    &old.rel_type,
                                    &old.end,
                                )
                                .await?;
                                cleared = true;
                                continue;
                            }
                        }
                    }
                    return Err(AppError::Conflict(format!(
                        "relationship {:?} -{:?}-> {:?} already exists",
                        new.start, new.rel_type, new.end
                    )));
                }
            }
        };
        let rel = rel(ts);
        write_index(&kura, &rel).await?;
        if let (Some(k), Some(r)) = (idem.as_deref(), record) {
            idempotency::finish(&kura, TABLE, key, k, r, ts.saturating_add(2)).await?;
        }
        Ok(HttpResponse::Created().json(rel))
    })
    .await
}

/// Writes the index rows of `rel` as a create or update that answered `rel` wrote them: from
/// the answer alone, at its `updated_at`, so writing them again changes nothing.
async fn write_index(kura: &Store, rel: &Relationship) -> AppResult<()> {
    let (s, t, e) = (&rel.start, &rel.rel_type, &rel.end);
    let value = encode_props(&rel.properties);
    let ts = rel.updated_at;
    let ms = index_keys(s, t, e, rel.created_at)
        .into_iter()
        .map(|row| RowMutation {
            row,
            mutations: vec![put(b"", value.clone(), ts)],
        })
        .collect();
    super::write::rows(kura, TABLE, ms).await?;
    drop_index_if_dead(kura, s, t, e, rel.created_at, ts).await
}

/// A retried relationship create or update that found its record: writes the index rows again
/// if the record is not done, marks it done, and answers the stored answer.
async fn finish_relationship_create(
    kura: &Store,
    key: &[u8],
    idem: &[u8],
    r: Record,
) -> AppResult<HttpResponse> {
    if !r.done {
        let rel: Relationship = r.body_as()?;
        write_index(kura, &rel).await?;
        let at = rel.updated_at.saturating_add(2);
        idempotency::finish(kura, TABLE, key.to_vec(), idem, r.clone(), at).await?;
    }
    Ok(r.response())
}

/// The create time of each node row of `keys` that is live, in one multi-get.
async fn nodes_created(kura: &Store, keys: Vec<Vec<u8>>) -> AppResult<Vec<Option<i64>>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let rows = kura.multi_get(TABLE, keys, &ReadSpec::default()).await?;
    let mut created = Vec::with_capacity(rows.len());
    for row in &rows {
        created.push(match row {
            Some(row) => match parse_state(row)? {
                State::Live(st) => Some(st.created),
                State::Absent | State::Deleted { .. } => None,
            },
            None => None,
        });
    }
    Ok(created)
}

/// Whether an end node (its live incarnation's create time, `None` if it is gone) still holds
/// relationship `r`: it is live and was created before `r` (a relationship is created after
/// both its nodes; one older than the node is left over from a deleted incarnation of it).
fn end_holds(node_created: Option<i64>, r: &Relationship) -> bool {
    node_created.is_some_and(|c| c < r.created_at)
}

/// Whether both end nodes of `r` hold it ([`end_holds`]).
async fn ends_hold(kura: &Store, r: &Relationship) -> AppResult<bool> {
    Ok(
        nodes_created(kura, vec![node_key(&r.start), node_key(&r.end)])
            .await?
            .into_iter()
            .all(|c| end_holds(c, r)),
    )
}

async fn get_relationship(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    let (s, t, e) = rel_path(&req)?;
    super::ensure_table(&state.kura, TABLE).await?;
    // A relationship one of whose end nodes is gone (a cascade delete of the node cut short by
    // a crash, or racing a create) is not shown.
    let Some(st) = load(&state.kura, &rel_key(&s, &t, &e)).await? else {
        return Err(rel_missing(&s, &t, &e));
    };
    let rel = rel_json(s, t, e, st);
    if !ends_hold(&state.kura, &rel).await? {
        return Err(rel_missing(&rel.start, &rel.rel_type, &rel.end));
    }
    Ok(HttpResponse::Ok().json(rel))
}

async fn update_relationship(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> AppResult<HttpResponse> {
    let (s, t, e) = rel_path(&req)?;
    let patch: PropertyPatch = request::read_json(&req, body, &state.limits).await?;
    let idem = idempotency::key(&req)?;
    let kura = state.kura.clone();
    let limits = state.limits.clone();
    let clock = state.clock.clone();
    super::ensure_table(&kura, TABLE).await?;
    run_detached(async move {
        let key = rel_key(&s, &t, &e);
        loop {
            let (old, record) = load_live_keyed(&kura, &key, idem.as_deref()).await?;
            if let (Some(k), Some(r)) = (idem.as_deref(), record) {
                return finish_relationship_create(&kura, &key, k, r).await;
            }
            let Some(old) = old else {
                return Err(rel_missing(&s, &t, &e));
            };
            let ts = clock.tick().max(old.updated.saturating_add(1));
            clock.observe(ts);
            let props = patch.apply(&old.props);
            let value = encode_props(&props);
            request::check_value(&limits, "the relationship's properties", &value)?;
            let rel = Relationship {
                start: s.clone(),
                rel_type: t.clone(),
                end: e.clone(),
                properties: props,
                created_at: old.created,
                updated_at: ts,
            };
            let mut mutations = vec![
                put(PROPS, value.clone(), ts),
                put(UPDATED, token(ts, old.created), ts),
            ];
            let mut record = None;
            if let Some(k) = idem.as_deref() {
                let r = Record::new(StatusCode::OK, &rel)?;
                mutations.push(r.put(k, ts.saturating_add(1))?);
                record = Some(r);
            }
            let cam = CheckAndMutate {
                row: key.clone(),
                family: FAMILY.into(),
                qualifier: UPDATED.to_vec(),
                expected: old.updated_raw,
                mutations,
            };
            if !super::write::check_and_mutate(&kura, TABLE, cam).await? {
                continue;
            }
            write_index(&kura, &rel).await?;
            if let (Some(k), Some(r)) = (idem.as_deref(), record) {
                idempotency::finish(&kura, TABLE, key, k, r, ts.saturating_add(2)).await?;
            }
            return Ok(HttpResponse::Ok().json(rel));
        }
    })
    .await
}

/// After a create or update wrote the index rows of the relationship's incarnation created at
/// `created`, at cell timestamp `ts`: if that incarnation is no longer live, a delete passed
/// its check after ours and may have deleted the index rows before our write reached them.
/// The embedded store's delete marker (at `d > ts`) masks such a straggling write; Bigtable
/// has no markers, so the write would outlive the relationship as an orphan list entry. So
/// delete what we wrote (every version at or below `ts`). Safe: index keys are per
/// incarnation (they hold `created`, and a later incarnation's `created` is above the delete
/// that ended this one), so no live entry is touched.
///
/// Why it suffices: our write either reached the index rows before the delete's index delete
/// (which then removed it) or after it; in that case the delete's check-and-mutate came before
/// our re-read, which therefore sees the incarnation dead.
async fn drop_index_if_dead(
    kura: &Store,
    s: &str,
    t: &str,
    e: &str,
    created: i64,
    ts: i64,
) -> AppResult<()> {
    if let Some(now) = load(kura, &rel_key(s, t, e)).await? {
        if now.created == created {
            return Ok(());
        }
    }
    let ms = index_keys(s, t, e, created)
        .into_iter()
        .map(|row| RowMutation {
            row,
            mutations: vec![Mutation::DeleteRow {
                timestamp: Some(ts),
            }],
        })
        .collect();
    super::write::rows(kura, TABLE, ms).await?;
    Ok(())
}

/// D8: deletes relationship `s -t-> e` and its index rows. `Ok(false)` if it did not exist.
async fn delete_relationship(
    kura: &Store,
    clock: &Clock,
    s: &str,
    t: &str,
    e: &str,
) -> AppResult<bool> {
    Ok(delete_relationship_keyed(kura, clock, s, t, e, None).await? != Deleted::Missing)
}

/// What [`delete_relationship_keyed`] did.
#[derive(Debug, PartialEq, Eq)]
enum Deleted {
    /// Deleted now (or, with a key, by this request before).
    Done,
    /// There was nothing to delete.
    Missing,
}

/// [`delete_relationship`] with an optional idempotency key: the record (`{"created",
/// "deleted_at"}`, what deleting the index rows needs) goes with the row's delete, and a retry
/// that finds it deletes the index rows again from it.
async fn delete_relationship_keyed(
    kura: &Store,
    clock: &Clock,
    s: &str,
    t: &str,
    e: &str,
    idem: Option<&[u8]>,
) -> AppResult<Deleted> {
    let key = rel_key(s, t, e);
    let delete_index = |created: i64, ts: i64| {
        // The D8 fix: the index keys come from the stored create time, not from `ts`.
        index_keys(s, t, e, created)
            .into_iter()
            .map(|row| RowMutation {
                row,
                mutations: vec![Mutation::DeleteRow {
                    timestamp: Some(ts),
                }],
            })
            .collect::<Vec<_>>()
    };
    loop {
        let (old, record) = load_live_keyed(kura, &key, idem).await?;
        if let (Some(k), Some(r)) = (idem, record) {
            if !r.done {
                let field = |name: &str| r.field(name).and_then(|v| v.as_i64());
                let (Some(created), Some(ts)) = (field("created"), field("deleted_at")) else {
                    return Err(AppError::Internal(
                        "an idempotency record is damaged".into(),
                    ));
                };
                super::write::rows(kura, TABLE, delete_index(created, ts)).await?;
                let at = ts.saturating_add(3);
                idempotency::finish(kura, TABLE, key.clone(), k, r, at).await?;
            }
            return Ok(Deleted::Done);
        }
        let Some(old) = old else {
            return Ok(Deleted::Missing);
        };
        let ts = clock.tick().max(old.updated.saturating_add(1));
        clock.observe(ts);
        let mut mutations = delete_with_tombstone(clock, ts);
        let mut record = None;
        if let Some(k) = idem {
            let r = Record {
                status: StatusCode::NO_CONTENT.as_u16(),
                body: serde_json::json!({"created": old.created, "deleted_at": ts}).to_string(),
                done: false,
            };
            mutations.push(r.put(k, ts.saturating_add(2))?);
            record = Some(r);
        }
        let cam = CheckAndMutate {
            row: key.clone(),
            family: FAMILY.into(),
            qualifier: UPDATED.to_vec(),
            expected: old.updated_raw,
            mutations,
        };
        if !super::write::check_and_mutate(kura, TABLE, cam).await? {
            continue;
        }
        super::write::rows(kura, TABLE, delete_index(old.created, ts)).await?;
        if let (Some(k), Some(r)) = (idem, record) {
            idempotency::finish(kura, TABLE, key, k, r, ts.saturating_add(3)).await?;
        }
        return Ok(Deleted::Done);
    }
}

async fn delete_relationship_handler(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> AppResult<HttpResponse> {
    let (s, t, e) = rel_path(&req)?;
    let idem = idempotency::key(&req)?;
    let kura = state.kura.clone();
    let clock = state.clock.clone();
    super::ensure_table(&kura, TABLE).await?;
    run_detached(async move {
        match delete_relationship_keyed(&kura, &clock, &s, &t, &e, idem.as_deref()).await? {
            Deleted::Done => Ok(()),
            Deleted::Missing => Err(rel_missing(&s, &t, &e)),
        }
    })
    .await?;
    Ok(HttpResponse::NoContent().finish())
}

// ---- adjacency --------------------------------------------------------------------------

async fn adjacency(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    let id = request::path_str(&req, "id")?;
    check_name("id", &id)?;
    let q = request::query(&req)?;
    let rel_type = q
        .get("type")
        .ok_or_else(|| AppError::bad("missing query parameter `type`"))?;
    check_name("type", rel_type)?;
    let dir = match q.get("direction").map(String::as_str) {
        None | Some("outgoing") => OUTGOING,
        Some("incoming") => INCOMING,
        Some(other) => {
            return Err(AppError::bad(format!(
                "direction must be outgoing or incoming, got {other:?}"
            )))
        }
    };
    let limit = request::limit(&q)?;
    let prefix = list_prefix(&id, dir, rel_type);
    let node_prefix_len = node_index_prefix(&id).len();
    let low = match q.get("after").filter(|c| !c.is_empty()) {
        None => Bound::Included(prefix.clone()),
        Some(after) => {
            let key = cursor::decode(after, &prefix)?;
            if decode_index(&key, node_prefix_len).is_none() {
                return Err(AppError::bad(
                    "malformed cursor: it is not a position in this list",
                ));
            }
            Bound::Excluded(key)
        }
    };
    let high = prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let kura = &state.kura;
    super::ensure_table(kura, TABLE).await?;
    let Some(this) = load(kura, &node_key(&id)).await? else {
        return Err(node_missing(&id));
    };
    let spec = ScanSpec {
        low,
        high,
        ..ScanSpec::all()
    };
    let rows = scan_rows(kura, TABLE, spec, 0, limit + 1).await?;
    let next = (rows.len() > limit).then(|| cursor::encode(&rows[limit - 1].key));
    let mut out = Vec::with_capacity(limit);
    for row in rows.iter().take(limit) {
        let entry = decode_index(&row.key, node_prefix_len)
            .ok_or_else(|| AppError::Internal("graph index key of the wrong shape".into()))?;
        let Some(cell) = row
            .cells
            .iter()
            .find(|c| c.family == FAMILY.as_bytes() && c.qualifier.is_empty())
        else {
            continue;
        };
        let (s, t, e) = relationship_of(&id, &entry);
        out.push(Relationship {
            start: s,
            rel_type: t,
            end: e,
            properties: decode_props(&cell.value)?,
            created_at: entry.created,
            updated_at: cell.timestamp,
        });
    }
    // An index entry is shown only while its relationship (this incarnation of it) is live: a
    // crash between a relationship's row and its index rows leaves entries readers must not
    // show. One multi-get of the page's relationship rows: for an outgoing list they live in
    // the node's own bucket (the list still reads one region); for an incoming one, in the
    // start nodes' buckets.
    // The relationship row is the authoritative copy: its properties and update time are what
    // is shown (an index row can be behind it when a crash cut an update between the two).
    // And the other end node must be live too (this one was checked above): a node deleted
    // with `cascade=true` is deleted before its relationships, so until they are (or until
    // `kura repair` removes what a crash left), they stay hidden.
    let keys = out
        .iter()
        .map(|r| rel_key(&r.start, &r.rel_type, &r.end))
        .collect();
    let rows = kura.multi_get(TABLE, keys, &ReadSpec::default()).await?;
    let mut shown = Vec::with_capacity(rows.len());
    for (r, row) in out.into_iter().zip(&rows) {
        if let Some(row) = row {
            if let State::Live(st) = parse_state(row)? {
                if st.created == r.created_at {
                    let (s, t, e) = (r.start, r.rel_type, r.end);
                    shown.push(rel_json(s, t, e, st));
                }
            }
        }
    }
    let others = shown
        .iter()
        .map(|r| node_key(if r.start == id { &r.end } else { &r.start }))
        .collect();
    let others = nodes_created(kura, others).await?;
    let out: Vec<Relationship> = shown
        .into_iter()
        .zip(others)
        .filter(|(r, other)| end_holds(Some(this.created), r) && end_holds(*other, r))
        .map(|(r, _)| r)
        .collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({ "relationships": out, "next": next })))
}

/// One page of `kura repair --app graph` ([`super::repair`]):
/// - a live relationship one of whose end nodes is gone (or was created again after it) is
///   removed with D8 (its row and both index rows);
/// - a live relationship whose index rows are missing or older than its row gets them written
///   from its row ([`write_index`], as its create or update would have);
/// - an index row whose relationship (that incarnation) is not live is removed.
pub(crate) async fn repair(
    kura: &Store,
    clock: &Clock,
    page: &super::repair::Page,
    report: &mut super::repair::Report,
) -> AppResult<()> {
    let (rows, next) =
        super::repair::rows_after(kura, TABLE, page.after.as_deref(), page.limit).await?;
    report.next = next;
    for row in &rows {
        report.scanned += 1;
        match row.key.get(4) {
            Some(&RELATIONSHIP) => {
                repair_relationship(kura, clock, page.dry_run, row, report).await?
            }
            Some(&INDEX) => repair_index_row(kura, page.dry_run, row, report).await?,
            _ => {}
        }
    }
    Ok(())
}

async fn repair_relationship(
    kura: &Store,
    clock: &Clock,
    dry_run: bool,
    row: &Row,
    report: &mut super::repair::Report,
) -> AppResult<()> {
    let mut r = KeyReader::new(&row.key, 5);
    let (Some(s), Some(t), Some(e)) = (r.str(), r.str(), r.str()) else {
        return Ok(());
    };
    let State::Live(st) = parse_state(row)? else {
        return Ok(());
    };
    let rel = rel_json(s.to_string(), t.to_string(), e.to_string(), st);
    let detail = serde_json::json!({"start": &rel.start, "type": &rel.rel_type, "end": &rel.end});
    if !ends_hold(kura, &rel).await? {
        report.change("relationships_removed_end_node_gone", &row.key, detail);
        if !dry_run {
            delete_relationship(kura, clock, &rel.start, &rel.rel_type, &rel.end).await?;
        }
        return Ok(());
    }
    let keys = index_keys(&rel.start, &rel.rel_type, &rel.end, rel.created_at);
    let found = kura
        .multi_get(TABLE, keys.to_vec(), &ReadSpec::default())
        .await?;
    let mut fix = false;
    for (key, found) in keys.iter().zip(found) {
        let kind = match found.as_ref().map(super::repair::newest) {
            None => "missing_index_rows_written",
            Some(ts) if ts < rel.updated_at => "stale_index_rows_rewritten",
            Some(_) => continue,
        };
        report.change(kind, key, detail.clone());
        fix = true;
    }
    if fix && !dry_run {
        write_index(kura, &rel).await?;
    }
    Ok(())
}

/// An index row is dead when its relationship's incarnation (the create time in its key) is
/// not live: read after the index row, which is written only after that incarnation's
/// check-and-mutate, a dead incarnation stays dead (later ones are created later).
async fn repair_index_row(
    kura: &Store,
    dry_run: bool,
    row: &Row,
    report: &mut super::repair::Report,
) -> AppResult<()> {
    let Some(x) = KeyReader::new(&row.key, 5).str() else {
        return Ok(());
    };
    let plen = node_index_prefix(x).len();
    let Some(entry) = decode_index(&row.key, plen) else {
        return Ok(());
    };
    let (s, t, e) = relationship_of(x, &entry);
    // The page was read before; a fix earlier in it (a relationship removed) may have deleted
    // this row since: then there is nothing left to do or report.
    let Some(row) = kura.get(TABLE, &row.key, &ReadSpec::default()).await? else {
        return Ok(());
    };
    let row = &row;
    // Below the delete marker's time, every version of the dead incarnation's index rows:
    // its tombstone time if the row was deleted, just under a later incarnation's create time.
    let ts = match load_state(kura, &rel_key(&s, &t, &e)).await? {
        State::Live(st) if st.created == entry.created => return Ok(()),
        State::Live(st) => st.created.saturating_sub(1),
        State::Deleted { at, .. } => at,
        State::Absent => i64::MIN,
    }
    .max(super::repair::newest(row));
    let detail = serde_json::json!({"start": s, "type": t, "end": e, "created_at": entry.created});
    report.change("dangling_index_rows_removed", &row.key, detail);
    if !dry_run {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip_in_the_sample_code_encoding() {
        let mut p = Properties::new();
        assert!(encode_props(&p).is_empty());
        p.insert("since".into(), "2012".into());
        p.insert("名前".into(), "値".into());
        let v = encode_props(&p);
        assert_eq!(&v[..4], &2u32.to_be_bytes());
        assert_eq!(decode_props(&v).ok(), Some(p));
        assert!(decode_props(&[0, 0, 0, 1]).is_err());
    }

    #[test]
    fn adjacency_rows_share_the_node_salt_prefix_and_sort_newest_first() {
        let [out_old, in_old] = index_keys("a", "follows", "b", 1000);
        let [out_new, _] = index_keys("a", "follows", "c", 2000);
        assert_eq!(out_old[..4], node_key("a")[..4]);
        assert_eq!(in_old[..4], node_key("b")[..4]);
        assert_eq!(rel_key("a", "follows", "b")[..4], node_key("a")[..4]);
        assert!(out_new < out_old);
        let p = list_prefix("a", OUTGOING, "follows");
        assert!(out_old.starts_with(&p) && out_new.starts_with(&p));
        let e = decode_index(&in_old, node_index_prefix("b").len()).expect("decodes");
        assert_eq!(
            (e.dir, e.rel_type.as_str(), e.created, e.other.as_str()),
            (INCOMING, "follows", 1000, "a")
        );
    }

    #[test]
    fn a_name_in_both_put_and_delete_ends_deleted() {
        let patch = PropertyPatch {
            put: Some([("x".to_string(), "1".to_string())].into_iter().collect()),
            delete: Some(vec!["x".into()]),
        };
        assert!(patch.apply(&Properties::new()).is_empty());
    }
}
