//! Kura over Cloud Bigtable: [`BigtableBackend`] implements [`kura_backend::Backend`] on one
//! Bigtable instance, which any number of stateless Kura servers may share. The mapping is
//! specified in BIGTABLE.md; this crate follows it.
//!
//! # What each module owns
//! - [`chunks`]: the ReadRows chunk merger (rows and values split across messages, resets).
//! - `conn`: the Data and Admin API clients, routing metadata, status → [`Error`] mapping.
//! - `filters`: filter F (VERSIONS/TTL/columns/time range/versions), predicates, timestamps.
//! - `meta`: `kura_meta` (descriptors), table ids, GC rules, the schema cache.
//! - `read`: get, multi-get, scan. `write`: mutations, increment, append, check-and-mutate.
//! - [`emulator`]: starting Google's emulator for tests (this crate's and the server's).
//! - `idem`: idempotency keys (BIGTABLE.md §6.2), records in the row's `_kura` family.
//!
//! # Clients
//! The Data API goes through `bigtable_rs` (its connection, channel pool, emulator switch and
//! Application Default Credentials via `gcp_auth`), the Admin API through Google's generated
//! `googleapis-tonic-google-bigtable-admin-v2` client over our own tonic channel: both sit on one
//! tonic/prost 0.14 stack and share the generated types, and no protobuf is written by hand.
//! Google publishes no Rust data-plane crate, and its admin crate speaks HTTP/JSON only, which
//! the emulator does not. ReadRows responses are decoded by [`chunks`], not by `bigtable_rs`,
//! whose decoder loses a row split across two response messages (which the service may send).
//!
//! # Invariants
//! 1. `kura_meta` is the source of truth for descriptors; Bigtable's GC rules only reclaim
//!    space, and every read enforces VERSIONS and TTL itself.
//! 2. The reserved family `_kura` exists in every table and is never shown.
//! 3. Timestamps are HBase ms on the interface and `ms * 1000` µs in Bigtable.
//! 4. A request carrying an idempotency key is applied at most once per row and key within
//!    the `_kura` retention (24 h), committing with its record in one CheckAndMutateRow;
//!    after [`Backend::shutdown`] every call answers [`Error::ShuttingDown`].
//!
//! # Differences from HBase (and the embedded store)
//! - Deletes leave no marker: a put with an older timestamp after a delete is visible.
//! - Deletes without a timestamp also delete cells dated in the future.
//! - A family or row delete bounded by a timestamp misses a column written between its read
//!   and its write (no markers to mask it).
//! - Increments without an idempotency key (Bigtable's ReadModifyWriteRow) wrap past the
//!   64-bit range instead of failing, and start from the latest *stored* value, even one past
//!   its TTL; their `max_value` check for appends is a read just before, not atomic. Keyed
//!   ones compute in Kura and are exact.
//! - Regions are Bigtable's tablets: flush, compact and split are refused.

pub mod chunks;
mod conn;
pub mod emulator;
mod filters;
mod idem;
mod meta;
mod read;
mod write;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bigtable_rs::google::bigtable::v2::SampleRowKeysRequest;
use kura_backend::{
    AlterMode, Append, Backend, BackendKind, Cell, CheckAndMutate, Error, Increment, ReadSpec,
    RegionInfo, RegionStats, Result, Row, RowFilter, RowMutation, ScanPage, ScanRequest,
    TableDescriptor,
};

use conn::{map_status, Conn};
use meta::Schemas;

/// Which instance to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BigtableConfig {
    pub project: String,
    pub instance: String,
    /// The app profile every request names (`None`: the instance's default profile). Use one
    /// with single-cluster routing: check-and-mutate and read-modify-write need it.
    pub app_profile: Option<String>,
}

/// The Bigtable backend. Cheap to share behind an `Arc`; every method may run concurrently.
pub struct BigtableBackend {
    conn: Conn,
    schemas: Schemas,
    closed: AtomicBool,
}

/// Connect: to the emulator at `BIGTABLE_EMULATOR_HOST` when that is set (plaintext, no auth),
/// else to Cloud Bigtable over TLS with Application Default Credentials.
pub async fn connect(config: BigtableConfig) -> Result<BigtableBackend> {
    match std::env::var("BIGTABLE_EMULATOR_HOST") {
        Ok(host) if !host.is_empty() => connect_to_emulator(config, &host).await,
        _ => {
            let conn = Conn::cloud(
                &config.project,
                &config.instance,
                config.app_profile.unwrap_or_default(),
            )
            .await?;
            Ok(BigtableBackend::new(conn))
        }
    }
}

/// Connect to the emulator at `host` (`127.0.0.1:8086`) whatever the environment says (tests
/// that run several emulators in one process).
pub async fn connect_to_emulator(config: BigtableConfig, host: &str) -> Result<BigtableBackend> {
    let conn = Conn::emulator(
        host,
        &config.project,
        &config.instance,
        config.app_profile.unwrap_or_default(),
    )
    .await?;
    Ok(BigtableBackend::new(conn))
}

impl BigtableBackend {
    fn new(conn: Conn) -> BigtableBackend {
        BigtableBackend {
            schemas: Schemas::new(conn.clone()),
            conn,
            closed: AtomicBool::new(false),
        }
    }

    fn open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::ShuttingDown)
        } else {
            Ok(())
        }
    }

    /// `Unsupported` for an operation Bigtable does itself, once the table is known to exist.
    async fn tablets_are_bigtables(&self, table: &str, what: &str) -> Result<()> {
        self.open()?;
        self.schemas.get(table).await?;
        Err(Error::Unsupported(format!(
            "Bigtable manages its own tablets; {what} is not available on the bigtable backend"
        )))
    }
}

#[async_trait::async_trait]
impl Backend for BigtableBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Bigtable
    }

    fn location(&self) -> String {
        self.conn.instance.clone()
    }

    fn default_regions(&self) -> u32 {
        0
    }

    async fn list_tables(&self) -> Result<Vec<TableDescriptor>> {
        self.open()?;
        self.schemas.list().await
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<TableDescriptor>>> {
        self.open()?;
        Ok(self
            .schemas
            .lookup(name)
            .await?
            .map(|i| Arc::clone(&i.desc)))
    }

    async fn create_table(&self, desc: TableDescriptor) -> Result<()> {
        self.open()?;
        self.schemas.create(desc).await
    }

    async fn alter_table(&self, desc: TableDescriptor, mode: AlterMode) -> Result<TableDescriptor> {
        self.open()?;
        self.schemas.alter(desc, mode).await
    }

    async fn drop_table(&self, name: &str) -> Result<()> {
        self.open()?;
        self.schemas.drop_table(name).await
    }

    async fn get(
        &self,
        table: &str,
        row: &[u8],
        read: &ReadSpec,
        filter: Option<Arc<dyn RowFilter>>,
    ) -> Result<Option<Row>> {
        self.open()?;
        self.do_get(table, row, read, filter).await
    }

    async fn multi_get(
        &self,
        table: &str,
        rows: Vec<Vec<u8>>,
        read: &ReadSpec,
    ) -> Result<Vec<Option<Row>>> {
        self.open()?;
        self.do_multi_get(table, rows, read).await
    }

    async fn scan(&self, table: &str, req: ScanRequest) -> Result<ScanPage> {
        self.open()?;
        self.do_scan(table, req).await
    }

    async fn mutate_rows(&self, table: &str, ms: Vec<RowMutation>) -> Result<()> {
        self.open()?;
        self.do_mutate_rows(table, ms).await
    }

    async fn increment(
        &self,
        table: &str,
        inc: Increment,
        key: Option<Vec<u8>>,
    ) -> Result<Vec<Cell>> {
        self.open()?;
        match key {
            Some(k) => self.keyed_increment(table, inc, &k).await,
            None => self.do_increment(table, inc).await,
        }
    }

    async fn append(&self, table: &str, app: Append, key: Option<Vec<u8>>) -> Result<Vec<Cell>> {
        self.open()?;
        match key {
            Some(k) => self.keyed_append(table, app, &k).await,
            None => self.do_append(table, app).await,
        }
    }

    async fn check_and_mutate(
        &self,
        table: &str,
        cam: CheckAndMutate,
        key: Option<Vec<u8>>,
    ) -> Result<bool> {
        self.open()?;
        match key {
            Some(k) => self.keyed_check_and_mutate(table, cam, &k).await,
            None => self.do_check_and_mutate(table, cam).await,
        }
    }

    async fn flush(&self, table: &str) -> Result<()> {
        self.tablets_are_bigtables(table, "flush").await
    }

    async fn compact(&self, table: &str, _major: bool) -> Result<()> {
        self.tablets_are_bigtables(table, "compaction").await
    }

    async fn split_region(
        &self,
        table: &str,
        _region: u64,
        _at_bucket: Option<u32>,
    ) -> Result<(u64, u64)> {
        self.tablets_are_bigtables(table, "splitting a region")
            .await
            .map(|()| (0, 0))
    }

    async fn regions(&self, table: &str) -> Result<Vec<RegionInfo>> {
        self.open()?;
        let info = self.schemas.get(table).await?;
        let req = SampleRowKeysRequest {
            table_name: info.full_name.clone(),
            app_profile_id: self.conn.app_profile.clone(),
            ..Default::default()
        };
        let mut stream = self
            .conn
            .data()
            .get_client()
            .sample_row_keys(self.conn.data_request(&info.full_name, req, false))
            .await
            .map_err(|s| map_status(table, &s))?
            .into_inner();
        // Each sample's key ends one region (the last sample, an empty key, ends the table);
        // the next region starts there.
        let mut ends: Vec<Vec<u8>> = Vec::new();
        while let Some(sample) = stream.message().await.map_err(|s| map_status(table, &s))? {
            ends.push(sample.row_key);
        }
        if ends.last().is_none_or(|k| !k.is_empty()) {
            ends.push(Vec::new());
        }
        let mut start = Vec::new();
        Ok(ends
            .into_iter()
            .enumerate()
            .map(|(id, end)| {
                let range = (std::mem::replace(&mut start, end.clone()), end);
                RegionInfo {
                    id: id as u64,
                    table: table.to_string(),
                    bucket_start: 0,
                    bucket_end: 0,
                    arbiter: 0,
                    key_range: Some(range),
                    stats: RegionStats::default(),
                }
            })
            .collect())
    }

    fn bucket_activity(&self, _table: &str) -> Option<Vec<(u64, u64)>> {
        None
    }

    async fn checkpoint(&self, _dest: &std::path::Path) -> Result<kura_backend::CheckpointInfo> {
        Err(Error::Unsupported(
            "online backups (kura backup) are the embedded backend's: on the bigtable backend \
             use Bigtable's own backups (gcloud bigtable backups create) or kura export"
                .into(),
        ))
    }

    async fn shutdown(&self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }
}

impl From<BigtableBackend> for kura_backend::Store {
    fn from(b: BigtableBackend) -> Self {
        kura_backend::Store::new(Arc::new(b))
    }
}
