//! The four applications of the founding documents, served under `/apps/` (APPS_API.md):
//! a blog, a user action log, an access counter and a graph database.
//!
//! Each application is a key schema plus routes. It keeps its data in an ordinary table (also
//! readable through the HBase REST API) and reaches it only through the [`kura_backend::Store`] handle, like
//! any other client. Each module's `//!` documents its row keys byte by byte.
//!
//! # Layout
//! - [`blog`]: table `blog`, articles with a main list and a per-category list.
//! - [`actions`]: table `useractions`, a user's actions newest first, offset or cursor paging.
//! - [`counter`]: table `access` (families `h`, `d`, `t`), hourly/daily/total hit counts.
//! - [`graph`]: table `graph`, nodes, relationships and adjacency index rows kept consistent
//!   by check-and-mutate loops on the update timestamp.
//! - [`keys`]: salt hash, reversed time, length-prefixed strings, partial-scan stop keys.
//! - [`cursor`]: opaque paging cursors. [`scan`]: bounded merged scans.
//! - [`request`]: body/query/path parsing into [`error::AppError`]s.
//! - [`clock`]: one server's monotonic ms ("now" for the formulas below).
//! - [`sequence`]: per-owner ids with creation times, by check-and-mutate on a sequence row.
//! - [`idempotency`]: `Idempotency-Key` on every write: the first answer stored with the
//!   request's first row change (family `i` of every table, TTL 10 minutes).
//! - [`write`](mod@write): every store write of the applications, and the crash test hook.
//! - [`repair`]: `POST /admin/repair` (`kura repair`), which finishes or removes what a crash
//!   left between an entity's rows.
//!
//! # Crashes between writes
//! A request that writes several rows (an entity and its index rows) can be cut by a crash
//! between two of them. docs/APPS.md, "Crashes between writes, and `kura repair`", has one
//! table per application: each operation's writes in order, what a crash after each leaves,
//! what readers see, what the repair does and the outcome. The rules behind the tables:
//! 1. The entity row (an article, a relationship; the node, for a cascade delete) is written
//!    and acknowledged before any of its index rows (list rows, adjacency rows) is sent; the
//!    index rows follow as one batch with no order among them ([`write::rows`]).
//! 2. Readers trust the entity row only: a list shows an entry only while its entity row (that
//!    incarnation) is live, and shows the entity row's values; a relationship is shown only
//!    while both end nodes are live and older than it.
//! 3. [`repair`] writes missing or outdated index rows from the entity row, removes index rows
//!    whose entity is gone and relationships whose end node is gone: afterwards each operation
//!    has fully happened, or (a create cut before its entity row) not at all.
//!
//! # Invariants
//! 1. Every application table is created with `SaltConfig { buckets: 256, prefix_len: Some(4) }`
//!    and every application row key starts with the 4-byte hash of the entity that owns it, so
//!    one user's articles or actions, and one node's rows and adjacency lists, share one salt
//!    bucket (one region), and every list request scans inside one region.
//! 2. The tables are created at start-up by [`ensure_tables`] (the server's `main` calls it) and,
//!    idempotently, by the first request that finds its table missing (tests that build the
//!    `App` without `main`).
//! 3. Every error leaves as the contract's JSON body (see [`error`]); unknown paths under
//!    `/apps/` are a JSON 404, wrong methods a JSON 405.
//! 4. Nothing the applications promise rests on state inside one process: any number of
//!    servers may serve one store (Bigtable). Ids and creation times come from sequence rows,
//!    entity changes from check-and-mutate loops whose timestamps are computed from the row,
//!    counts from atomic increments; every row a request creates has a key no concurrent
//!    request on another server can produce. A server keeps only its clock
//!    ([`crate::state::AppState`]), which supplies "now". The one process-wide lock,
//!    [`ensure_table`]'s, only spares duplicate `create_table` calls; across servers the
//!    store's `TableExists` answer is what counts.

pub mod actions;
pub mod blog;
pub mod clock;
pub mod counter;
pub mod cursor;
pub mod error;
pub mod graph;
pub mod idempotency;
pub mod keys;
pub mod repair;
pub mod request;
pub mod scan;
pub mod sequence;
pub mod write;

use actix_web::web;
use kura_backend::{Error as BackendError, FamilyDescriptor, SaltConfig, Store, TableDescriptor};
use std::collections::BTreeMap;

/// Salt settings of every application table: 256 buckets keyed by the 4-byte hash prefix.
pub const APP_SALT: SaltConfig = SaltConfig {
    buckets: 256,
    prefix_len: Some(4),
};

/// Every application table with its families.
pub const APP_TABLES: &[(&str, &[&str])] = &[
    (blog::TABLE, &[blog::FAMILY]),
    (actions::TABLE, &[actions::FAMILY]),
    (
        counter::TABLE,
        &[counter::HOURLY, counter::DAILY, counter::TOTAL],
    ),
    (graph::TABLE, &[graph::FAMILY]),
];

/// The idempotency records' family ([`idempotency`]), which every application table has.
fn records_family() -> FamilyDescriptor {
    FamilyDescriptor::new(idempotency::FAMILY.as_bytes())
        .with_ttl_secs(Some(idempotency::WINDOW_SECS))
}

/// The descriptor an application table is created with: its families and the records' family.
pub fn table_descriptor(name: &str, families: &[&str]) -> TableDescriptor {
    TableDescriptor {
        name: name.to_string(),
        families: families
            .iter()
            .map(|f| FamilyDescriptor::new(f.as_bytes()))
            .chain(std::iter::once(records_family()))
            .collect(),
        salt: APP_SALT,
        initial_regions: None,
        attributes: BTreeMap::new(),
        family_attributes: BTreeMap::new(),
    }
}

/// Serializes table creation within the process, so a request never proceeds while another
/// request's `create_table` of the same table is still in flight in this process. (A tokio
/// mutex because it is held across an `.await`; it is only taken when a table is missing.)
/// Not needed for correctness: a `create_table` that loses to another server's answers
/// `TableExists`, which counts as created.
static CREATE_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether a table has the idempotency records' family.
fn has_records(desc: &TableDescriptor) -> bool {
    desc.families
        .iter()
        .any(|f| f.name == idempotency::FAMILY.as_bytes())
}

/// Creates the application table `name` if it is missing, and adds the idempotency records'
/// family to a table created before it existed. Idempotent and cheap when both are there.
pub async fn ensure_table(kura: &Store, name: &str) -> Result<(), BackendError> {
    if kura.table(name).await?.is_some_and(|d| has_records(&d)) {
        return Ok(());
    }
    let _guard = CREATE_LOCK.lock().await;
    for (table, families) in APP_TABLES.iter().filter(|(t, _)| *t == name) {
        if let Some(desc) = kura.table(table).await? {
            if !has_records(&desc) {
                let mut desc = (*desc).clone();
                desc.families = vec![records_family()];
                kura.alter_table(desc, kura_backend::AlterMode::Merge)
                    .await?;
            }
            continue;
        }
        match kura.create_table(table_descriptor(table, families)).await {
            Ok(()) | Err(BackendError::TableExists(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Creates every application table that is missing (`blog`, `useractions`, `access`, `graph`).
/// The server's `main` calls this at start-up; handlers also call [`ensure_table`] lazily.
pub async fn ensure_tables(kura: &Store) -> Result<(), BackendError> {
    for (table, _) in APP_TABLES {
        ensure_table(kura, table).await?;
    }
    Ok(())
}

/// Registers every application route under `/apps`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/apps")
            .configure(blog::routes)
            .configure(actions::routes)
            .configure(counter::routes)
            .configure(graph::routes)
            .default_service(web::to(request::not_found)),
    );
}
