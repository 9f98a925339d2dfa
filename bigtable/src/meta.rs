//! Table schemas: the `kura_meta` table (the source of truth for descriptors), the HBase name →
//! Bigtable table id mapping, GC rules from VERSIONS/TTL, and the per-process schema cache.
//!
//! # Layout of `kura_meta`
//! Families `m` (VERSIONS 1) and `c` (counters, VERSIONS 1). A table's row is
//! `table:<HBase name>`, with `m:descriptor` = the [`TableDescriptor`] as JSON and `m:id` = the
//! Bigtable table id.
//!
//! # Invariants
//! 1. A create first claims the table's row (insert-if-absent of `m:creating`), then creates
//!    the Bigtable table, then publishes `m:descriptor` (and clears the claim). Readers see
//!    only `m:descriptor`, so no server uses a table before Bigtable has it: a concurrent
//!    create on another server waits for the claim's outcome and answers `TableExists` once
//!    the table is there. A claim left by a crashed creator is taken over after
//!    [`CLAIM_PATIENCE`]. A failed create deletes its row again; a drop deletes the row after
//!    the table, so a table Kura knows of is never left without a row.
//! 2. Cached descriptors are at most [`CACHE_TTL`] old; a miss, or a family the cached
//!    descriptor lacks, is re-read from `kura_meta` before answering "no such table/family".
//! 3. The table id is the HBase name when that is a legal Bigtable id of at most 50 chars and
//!    not `kura_meta`; otherwise the name cut to 41 chars + `_` + 8 hex of its FNV-1a hash.
//! 4. Every table also has the reserved family `_kura`, never listed in its descriptor.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bigtable_rs::google::bigtable::v2;
use googleapis_tonic_google_bigtable_admin_v2::google::bigtable::admin::v2 as admin;
use kura_backend::schema::validate_descriptor;
use kura_backend::{AlterMode, Error, FamilyDescriptor, Result, TableDescriptor};
use parking_lot::Mutex;
use tokio::sync::OnceCell;

use crate::conn::{map_status, Conn};
use crate::filters::{chain, column, rf};
use crate::read::read_rows;
use admin::gc_rule::{Rule as GcR, Union as GcUnion};
use admin::modify_column_families_request::{modification::Mod, Modification};
use admin::{ColumnFamily, GcRule};
use v2::mutation::{DeleteFromRow, Mutation as M, SetCell};
use v2::row_filter::Filter;
use v2::row_range::{EndKey, StartKey};
use v2::{CheckAndMutateRowRequest, Mutation, RowRange, RowSet};

/// The metadata table's id.
pub const META_TABLE: &str = "kura_meta";
/// The reserved family of every Kura table.
pub const RESERVED_FAMILY: &str = "_kura";
/// How long `_kura` cells are kept (idempotency retention).
pub const RESERVED_RETENTION_SECS: i64 = 24 * 3600;
/// How long a create waits for another server's claim on the same table before it takes the
/// claim over (its creator is taken to have crashed).
pub const CLAIM_PATIENCE: Duration = Duration::from_secs(30);
/// How long a cached descriptor is trusted.
pub const CACHE_TTL: Duration = Duration::from_secs(1);
const ROW_PREFIX: &[u8] = b"table:";

/// A table as this backend knows it.
#[derive(Clone, Debug)]
pub struct TableInfo {
    pub desc: Arc<TableDescriptor>,
    /// Full Bigtable name `projects/P/instances/I/tables/ID`.
    pub full_name: String,
}

impl TableInfo {
    /// The user family of that name.
    pub fn family(&self, name: &[u8]) -> Option<&FamilyDescriptor> {
        self.desc.families.iter().find(|f| f.name == name)
    }
}

/// The Bigtable table id of an HBase table name.
pub fn table_id(name: &str) -> String {
    let legal = !name.is_empty()
        && name.len() <= 50
        && name != META_TABLE
        && name.bytes().enumerate().all(|(i, c)| {
            c.is_ascii_alphanumeric() || c == b'_' || (i > 0 && matches!(c, b'-' | b'.'))
        });
    if legal {
        return name.to_string();
    }
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    let mut head: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(41)
        .collect();
    if !head.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
        head.insert(0, '_');
        head.truncate(41);
    }
    format!("{head}_{h:08x}")
}

/// Check that every family name is one Bigtable accepts (and not the reserved one).
pub fn check_family_names(families: &[FamilyDescriptor]) -> Result<()> {
    for f in families {
        let ok = f.name.len() <= 64
            && f.name
                .iter()
                .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'));
        if !ok {
            return Err(Error::InvalidArgument(format!(
                "column family name {:?} must be 1..=64 characters of [-_.a-zA-Z0-9] on Bigtable",
                String::from_utf8_lossy(&f.name)
            )));
        }
        if f.name == RESERVED_FAMILY.as_bytes() {
            return Err(Error::InvalidArgument(format!(
                "column family name {RESERVED_FAMILY} is reserved by Kura"
            )));
        }
    }
    Ok(())
}

fn gc(rule: GcR) -> GcRule {
    GcRule { rule: Some(rule) }
}

/// The GC rule of a family: VERSIONS, or VERSIONS ∪ max_age(TTL).
pub fn gc_rule(f: &FamilyDescriptor) -> GcRule {
    let versions = gc(GcR::MaxNumVersions(
        i32::try_from(f.max_versions.max(1)).unwrap_or(i32::MAX),
    ));
    match f.ttl_secs {
        None => versions,
        Some(t) => gc(GcR::Union(GcUnion {
            rules: vec![
                versions,
                gc(GcR::MaxAge(prost_types::Duration {
                    seconds: i64::try_from(t).unwrap_or(i64::MAX),
                    nanos: 0,
                })),
            ],
        })),
    }
}

fn reserved_family() -> ColumnFamily {
    ColumnFamily {
        gc_rule: Some(gc(GcR::Union(GcUnion {
            rules: vec![
                gc(GcR::MaxNumVersions(1)),
                gc(GcR::MaxAge(prost_types::Duration {
                    seconds: RESERVED_RETENTION_SECS,
                    nanos: 0,
                })),
            ],
        }))),
        ..Default::default()
    }
}

fn family_of(f: &FamilyDescriptor) -> ColumnFamily {
    ColumnFamily {
        gc_rule: Some(gc_rule(f)),
        ..Default::default()
    }
}

fn row_key(name: &str) -> Vec<u8> {
    [ROW_PREFIX, name.as_bytes()].concat()
}

fn set_cell(family: &str, q: &[u8], v: Vec<u8>) -> Mutation {
    Mutation {
        mutation: Some(M::SetCell(SetCell {
            family_name: family.into(),
            column_qualifier: q.to_vec(),
            timestamp_micros: 0,
            value: v,
        })),
    }
}

/// A cached lookup: when it was read, and the table (`None`: absent).
type Cached = (Instant, Option<Arc<TableInfo>>);

/// The schema side of the backend.
pub struct Schemas {
    conn: Conn,
    meta_ready: OnceCell<()>,
    cache: Mutex<HashMap<String, Cached>>,
}

impl Schemas {
    pub fn new(conn: Conn) -> Schemas {
        Schemas {
            conn,
            meta_ready: OnceCell::new(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn meta_name(&self) -> String {
        self.conn.table_name(META_TABLE)
    }

    /// Create `kura_meta` if it does not exist (once per process).
    async fn ensure_meta(&self) -> Result<()> {
        self.meta_ready
            .get_or_try_init(|| async {
                let mut families = HashMap::new();
                let one = ColumnFamily {
                    gc_rule: Some(gc(GcR::MaxNumVersions(1))),
                    ..Default::default()
                };
                families.insert("m".to_string(), one.clone());
                families.insert("c".to_string(), one);
                let parent = self.conn.instance.clone();
                let req = admin::CreateTableRequest {
                    parent: parent.clone(),
                    table_id: META_TABLE.into(),
                    table: Some(admin::Table {
                        column_families: families,
                        ..Default::default()
                    }),
                    initial_splits: vec![],
                };
                match self
                    .conn
                    .admin()
                    .create_table(self.conn.admin_request("parent", &parent, req))
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(s) if s.code() == tonic::Code::AlreadyExists => Ok(()),
                    Err(s) => Err(map_status(META_TABLE, &s)),
                }
            })
            .await
            .map(|_| ())
    }

    /// Read descriptor rows from `kura_meta` (`None` = every table).
    async fn read_meta(&self, name: Option<&str>) -> Result<Vec<Arc<TableInfo>>> {
        let rows = match name {
            Some(n) => RowSet {
                row_keys: vec![row_key(n)],
                row_ranges: vec![],
            },
            None => {
                let mut end = ROW_PREFIX.to_vec();
                if let Some(last) = end.last_mut() {
                    *last += 1;
                }
                RowSet {
                    row_keys: vec![],
                    row_ranges: vec![RowRange {
                        start_key: Some(StartKey::StartKeyClosed(ROW_PREFIX.to_vec())),
                        end_key: Some(EndKey::EndKeyOpen(end)),
                    }],
                }
            }
        };
        let req = v2::ReadRowsRequest {
            table_name: self.meta_name(),
            app_profile_id: self.conn.app_profile.clone(),
            rows: Some(rows),
            filter: Some(chain(vec![
                column("m", b"descriptor"),
                rf(Filter::CellsPerColumnLimitFilter(1)),
            ])),
            ..Default::default()
        };
        let rows = match read_rows(&self.conn, META_TABLE, req).await {
            Ok(rows) => rows,
            // No kura_meta yet: no tables.
            Err(Error::TableNotFound(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let Some(cell) = row.cells.into_iter().next() else {
                continue;
            };
            let desc: TableDescriptor = serde_json::from_slice(&cell.value).map_err(|e| {
                Error::Internal(format!(
                    "kura_meta row {:?} holds no descriptor: {e}",
                    String::from_utf8_lossy(&row.key)
                ))
            })?;
            let full_name = self.conn.table_name(&table_id(&desc.name));
            out.push(Arc::new(TableInfo {
                desc: Arc::new(desc),
                full_name,
            }));
        }
        Ok(out)
    }

    fn remember(&self, name: &str, info: Option<Arc<TableInfo>>) {
        self.cache
            .lock()
            .insert(name.to_string(), (Instant::now(), info));
    }

    /// Forget a table's cached descriptor (after Bigtable said it does not exist).
    pub fn forget(&self, name: &str) {
        self.cache.lock().remove(name);
    }

    /// The table's descriptor, from `kura_meta` (not the cache).
    pub async fn fresh(&self, name: &str) -> Result<Option<Arc<TableInfo>>> {
        let info = self.read_meta(Some(name)).await?.into_iter().next();
        self.remember(name, info.clone());
        Ok(info)
    }

    /// The table's descriptor through the cache; a cached "absent" is re-checked.
    pub async fn lookup(&self, name: &str) -> Result<Option<Arc<TableInfo>>> {
        if let Some((at, Some(info))) = self.cache.lock().get(name) {
            if at.elapsed() < CACHE_TTL {
                return Ok(Some(info.clone()));
            }
        }
        self.fresh(name).await
    }

    /// The table's descriptor, or `TableNotFound`.
    pub async fn get(&self, name: &str) -> Result<Arc<TableInfo>> {
        self.lookup(name)
            .await?
            .ok_or_else(|| Error::TableNotFound(name.to_string()))
    }

    /// The table's descriptor, checked to have every family in `families`; an unknown family
    /// is re-checked against `kura_meta` before answering `NoSuchFamily`.
    pub async fn with_families(&self, name: &str, families: &[&[u8]]) -> Result<Arc<TableInfo>> {
        let info = self.get(name).await?;
        let missing = |info: &TableInfo| {
            families
                .iter()
                .find(|f| info.family(f).is_none())
                .map(|f| f.to_vec())
        };
        if missing(&info).is_none() {
            return Ok(info);
        }
        let info = self
            .fresh(name)
            .await?
            .ok_or_else(|| Error::TableNotFound(name.to_string()))?;
        match missing(&info) {
            None => Ok(info),
            Some(f) => Err(Error::NoSuchFamily {
                table: name.to_string(),
                family: String::from_utf8_lossy(&f).into_owned(),
            }),
        }
    }

    /// Every table, sorted by name.
    pub async fn list(&self) -> Result<Vec<TableDescriptor>> {
        let all = self.read_meta(None).await?;
        let mut out: Vec<TableDescriptor> = all.iter().map(|i| (*i.desc).clone()).collect();
        for info in all {
            self.remember(&info.desc.name.clone(), Some(info));
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Write a descriptor row; with `if_absent`, only if the row has none (`Ok(false)` if it
    /// had).
    /// Claim the table's row for a create: writes `m:creating` unless the row holds anything
    /// (a published descriptor or another create's claim). True if this call claimed it.
    async fn claim(&self, desc: &TableDescriptor) -> Result<bool> {
        let table_name = self.meta_name();
        let req = CheckAndMutateRowRequest {
            table_name: table_name.clone(),
            app_profile_id: self.conn.app_profile.clone(),
            row_key: row_key(&desc.name),
            predicate_filter: Some(crate::filters::family("m")),
            false_mutations: vec![set_cell(
                "m",
                b"creating",
                table_id(&desc.name).into_bytes(),
            )],
            ..Default::default()
        };
        let resp = self
            .conn
            .data()
            .get_client()
            .check_and_mutate_row(self.conn.data_request(&table_name, req, true))
            .await
            .map_err(|s| map_status(META_TABLE, &s))?;
        Ok(!resp.into_inner().predicate_matched)
    }

    /// True while a create's claim on the table's row stands.
    async fn claimed(&self, name: &str) -> Result<bool> {
        let req = v2::ReadRowsRequest {
            table_name: self.meta_name(),
            app_profile_id: self.conn.app_profile.clone(),
            rows: Some(RowSet {
                row_keys: vec![row_key(name)],
                row_ranges: vec![],
            }),
            filter: Some(chain(vec![
                column("m", b"creating"),
                rf(Filter::CellsPerColumnLimitFilter(1)),
            ])),
            ..Default::default()
        };
        Ok(!read_rows(&self.conn, META_TABLE, req).await?.is_empty())
    }

    /// Publish a table's descriptor (and clear a create's claim): from now on every server
    /// sees the table with these families.
    async fn put_meta(&self, desc: &TableDescriptor) -> Result<()> {
        let json = serde_json::to_vec(desc)
            .map_err(|e| Error::Internal(format!("descriptor to JSON: {e}")))?;
        let muts = vec![
            set_cell("m", b"descriptor", json),
            set_cell("m", b"id", table_id(&desc.name).into_bytes()),
            Mutation {
                mutation: Some(M::DeleteFromColumn(v2::mutation::DeleteFromColumn {
                    family_name: "m".into(),
                    column_qualifier: b"creating".to_vec(),
                    time_range: None,
                })),
            },
        ];
        let table_name = self.meta_name();
        let req = v2::MutateRowRequest {
            table_name: table_name.clone(),
            app_profile_id: self.conn.app_profile.clone(),
            row_key: row_key(&desc.name),
            mutations: muts,
            ..Default::default()
        };
        self.conn
            .data()
            .get_client()
            .mutate_row(self.conn.data_request(&table_name, req, true))
            .await
            .map_err(|s| map_status(META_TABLE, &s))?;
        Ok(())
    }

    async fn delete_meta(&self, name: &str) -> Result<()> {
        let table_name = self.meta_name();
        let req = v2::MutateRowRequest {
            table_name: table_name.clone(),
            app_profile_id: self.conn.app_profile.clone(),
            row_key: row_key(name),
            mutations: vec![Mutation {
                mutation: Some(M::DeleteFromRow(DeleteFromRow {})),
            }],
            ..Default::default()
        };
        self.conn
            .data()
            .get_client()
            .mutate_row(self.conn.data_request(&table_name, req, true))
            .await
            .map_err(|s| map_status(META_TABLE, &s))?;
        Ok(())
    }

    /// Create a table: its `kura_meta` row (insert-if-absent), then the Bigtable table.
    pub async fn create(&self, desc: TableDescriptor) -> Result<()> {
        validate_descriptor(&desc)?;
        check_family_names(&desc.families)?;
        self.ensure_meta().await?;
        let mut took_over = false;
        let waiting_since = Instant::now();
        while !self.claim(&desc).await? {
            // Another create holds the row: answer when its outcome is known.
            if self.fresh(&desc.name).await?.is_some() {
                return Err(Error::TableExists(desc.name));
            }
            if !self.claimed(&desc.name).await? {
                continue; // that create failed and removed its claim: try again
            }
            if waiting_since.elapsed() >= CLAIM_PATIENCE {
                took_over = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut families: HashMap<String, ColumnFamily> = desc
            .families
            .iter()
            .map(|f| (String::from_utf8_lossy(&f.name).into_owned(), family_of(f)))
            .collect();
        families.insert(RESERVED_FAMILY.into(), reserved_family());
        let parent = self.conn.instance.clone();
        let req = admin::CreateTableRequest {
            parent: parent.clone(),
            table_id: table_id(&desc.name),
            table: Some(admin::Table {
                column_families: families,
                ..Default::default()
            }),
            initial_splits: vec![],
        };
        let created = self
            .conn
            .admin()
            .create_table(self.conn.admin_request("parent", &parent, req))
            .await;
        match created {
            Ok(_) => {}
            // A crashed creator's table, made before it could publish: finish its create.
            Err(s) if took_over && s.code() == tonic::Code::AlreadyExists => {}
            Err(s) => {
                // Leave no row behind for a table that was not created.
                let _ = self.delete_meta(&desc.name).await;
                self.forget(&desc.name);
                return Err(map_status(&desc.name, &s));
            }
        }
        self.put_meta(&desc).await?;
        let full_name = self.conn.table_name(&table_id(&desc.name));
        let name = desc.name.clone();
        self.remember(
            &name,
            Some(Arc::new(TableInfo {
                desc: Arc::new(desc),
                full_name,
            })),
        );
        Ok(())
    }

    /// Change a table's families and attributes as the embedded store does; returns the new
    /// descriptor.
    pub async fn alter(&self, desc: TableDescriptor, mode: AlterMode) -> Result<TableDescriptor> {
        let old = self
            .fresh(&desc.name)
            .await?
            .ok_or_else(|| Error::TableNotFound(desc.name.clone()))?;
        let new_desc = old.desc.altered(desc, mode)?;
        check_family_names(&new_desc.families)?;

        let before: BTreeMap<&[u8], &FamilyDescriptor> = old
            .desc
            .families
            .iter()
            .map(|f| (f.name.as_slice(), f))
            .collect();
        let mut mods = Vec::new();
        for f in &new_desc.families {
            let id = String::from_utf8_lossy(&f.name).into_owned();
            match before.get(f.name.as_slice()) {
                None => mods.push(Modification {
                    id,
                    r#mod: Some(Mod::Create(family_of(f))),
                    update_mask: None,
                }),
                Some(g) if g.max_versions != f.max_versions || g.ttl_secs != f.ttl_secs => mods
                    .push(Modification {
                        id,
                        r#mod: Some(Mod::Update(family_of(f))),
                        update_mask: None,
                    }),
                Some(_) => {}
            }
        }
        for f in &old.desc.families {
            if !new_desc.families.iter().any(|g| g.name == f.name) {
                mods.push(Modification {
                    id: String::from_utf8_lossy(&f.name).into_owned(),
                    r#mod: Some(Mod::Drop(true)),
                    update_mask: None,
                });
            }
        }
        if !mods.is_empty() {
            let req = admin::ModifyColumnFamiliesRequest {
                name: old.full_name.clone(),
                modifications: mods,
                ignore_warnings: false,
            };
            self.conn
                .admin()
                .modify_column_families(self.conn.admin_request("name", &old.full_name, req))
                .await
                .map_err(|s| map_status(&new_desc.name, &s))?;
        }
        self.put_meta(&new_desc).await?;
        self.remember(
            &new_desc.name,
            Some(Arc::new(TableInfo {
                desc: Arc::new(new_desc.clone()),
                full_name: old.full_name.clone(),
            })),
        );
        Ok(new_desc)
    }

    /// Drop a table: the Bigtable table, then its `kura_meta` row.
    pub async fn drop_table(&self, name: &str) -> Result<()> {
        let info = self
            .fresh(name)
            .await?
            .ok_or_else(|| Error::TableNotFound(name.to_string()))?;
        let req = admin::DeleteTableRequest {
            name: info.full_name.clone(),
        };
        match self
            .conn
            .admin()
            .delete_table(self.conn.admin_request("name", &info.full_name, req))
            .await
        {
            Ok(_) => {}
            // Already gone (a crashed create or drop): only the row is left.
            Err(s) if s.code() == tonic::Code::NotFound => {}
            Err(s) => return Err(map_status(name, &s)),
        }
        self.delete_meta(name).await?;
        self.remember(name, None);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legal_names_are_their_own_table_ids() {
        assert_eq!(table_id("blog"), "blog");
        assert_eq!(table_id("a.b-c_d"), "a.b-c_d");
        assert_eq!(table_id(&"x".repeat(50)), "x".repeat(50));
    }

    #[test]
    fn long_or_reserved_names_map_to_hashed_ids() {
        let long = "y".repeat(60);
        let id = table_id(&long);
        assert_eq!(id.len(), 50);
        assert!(id.starts_with(&"y".repeat(41)));
        assert_ne!(table_id(&format!("{long}1")), table_id(&format!("{long}2")));
        assert_ne!(table_id(META_TABLE), META_TABLE);
    }

    #[test]
    fn family_names_outside_bigtables_charset_are_refused() {
        assert!(check_family_names(&[FamilyDescriptor::new("cf-1.x_y")]).is_ok());
        assert!(check_family_names(&[FamilyDescriptor::new("a+b")]).is_err());
        assert!(check_family_names(&[FamilyDescriptor::new(RESERVED_FAMILY)]).is_err());
    }
}
