//! Kura's backend interface: the one seam between the HTTP layer (the HBase REST API, the
//! applications, the operations endpoints) and the place the data lives.
//!
//! # What this crate owns
//! - [`model`]: cells, rows, mutations, read and scan specifications, with HBase's semantics.
//! - [`schema`]: table descriptors, salting, regions and their figures.
//! - [`error`]: the one error type every backend answers with.
//! - [`Backend`]: the async trait a storage backend implements, and [`Store`], the cloneable
//!   handle the HTTP layer holds.
//!
//! Two backends implement it: the embedded store (`kura-actors` over `kura-storage`, the
//! default) and Cloud Bigtable (`kura-bigtable`). `kura-backends` opens the one an operator
//! chose; nothing above this crate names either.
//!
//! # Invariants every backend keeps
//! 1. Reads answer what HBase answers: at most `min(requested, family VERSIONS)` newest versions
//!    per column, nothing older than the family's TTL, HBase's cell order.
//! 2. A row's mutations apply atomically; increment, append and check-and-mutate are
//!    linearizable per row.
//! 3. A write carrying an idempotency key is applied at most once within the backend's window;
//!    a backend that cannot keep keys answers [`Error::Unsupported`] instead of applying twice.
//! 4. Scans return rows in key order (descending when reversed), pages resume with
//!    [`ScanSpec::resume_after`], and a limit is exact.
//!
//! Where a backend cannot hold an HBase rule (Bigtable's deletes do not mask later puts with
//! older timestamps), the README's backend table says so.

pub mod error;
pub mod model;
pub mod schema;

pub use error::{Error, Result};
pub use model::*;
pub use schema::{AlterMode, RegionInfo, RegionStats, SaltConfig, ScanRequest, TableDescriptor};

use std::sync::Arc;

/// Which implementation a [`Store`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// Regions of this process over their data directory (`kura-actors`, `kura-storage`).
    Embedded,
    /// One Cloud Bigtable instance shared by any number of stateless Kura servers.
    Bigtable,
}

impl BackendKind {
    /// The name operators use (`--backend embedded|bigtable`).
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Embedded => "embedded",
            BackendKind::Bigtable => "bigtable",
        }
    }
}

/// The directory inside an embedded data directory where online backups stage their
/// checkpoints (`<data dir>/backups/<id>/`). Nothing the store opens lives there; the embedded
/// backend removes it whole when it starts (a staging copy left by a killed backup).
pub const BACKUPS_DIR: &str = "backups";

/// A file `kura restore` keeps in a data directory until every file of the backup is in
/// place: the embedded backend refuses to open a directory holding it.
pub const RESTORE_MARKER: &str = "kura-restore.partial.json";

/// What [`Backend::checkpoint`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The tables the checkpoint holds, sorted.
    pub tables: Vec<String>,
    /// Regions checkpointed (one directory each).
    pub regions: usize,
    /// Bytes of every file written or linked.
    pub bytes: u64,
    /// Segments shared with the live store by a hard link.
    pub linked_segments: usize,
    /// Segments copied (the file system made no link).
    pub copied_segments: usize,
}

/// A storage backend. Every method is safe to call concurrently; `table` names are HBase table
/// names, rows and cells are bytes.
#[async_trait::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Which implementation this is.
    fn kind(&self) -> BackendKind;

    /// Where the data lives, for people and for per-store registries: the data directory, or
    /// `projects/P/instances/I`.
    fn location(&self) -> String;

    /// Regions a new table gets when its descriptor does not say (0 where regions are the
    /// backend's business).
    fn default_regions(&self) -> u32;

    /// Every table, sorted by name.
    async fn list_tables(&self) -> Result<Vec<TableDescriptor>>;

    /// One table's descriptor (`Ok(None)` if there is no such table), shared with the
    /// backend's own copy: every request looks its table up, and a reference count is all it
    /// costs.
    async fn table(&self, name: &str) -> Result<Option<Arc<TableDescriptor>>>;

    /// Create a table (`TableExists` if present, `InvalidArgument` for a bad name or schema).
    async fn create_table(&self, desc: TableDescriptor) -> Result<()>;

    /// Change a table's families and attributes; returns the resulting descriptor.
    async fn alter_table(&self, desc: TableDescriptor, mode: AlterMode) -> Result<TableDescriptor>;

    /// Drop a table and delete its data.
    async fn drop_table(&self, name: &str) -> Result<()>;

    /// Read one row through an optional filter (`Ok(None)` if absent or filtered out).
    async fn get(
        &self,
        table: &str,
        row: &[u8],
        read: &ReadSpec,
        filter: Option<Arc<dyn RowFilter>>,
    ) -> Result<Option<Row>>;

    /// Read several rows; answers in request order.
    async fn multi_get(
        &self,
        table: &str,
        rows: Vec<Vec<u8>>,
        read: &ReadSpec,
    ) -> Result<Vec<Option<Row>>>;

    /// One page of a scan in key order (descending when reversed), with an exact limit.
    async fn scan(&self, table: &str, req: ScanRequest) -> Result<ScanPage>;

    /// Apply mutations to several rows (atomic per row, not across rows).
    async fn mutate_rows(&self, table: &str, ms: Vec<RowMutation>) -> Result<()>;

    /// Increment counters of one row atomically; returns the new values (8-byte big-endian).
    /// With a key, a retry within the backend's window answers the first new values.
    async fn increment(
        &self,
        table: &str,
        inc: Increment,
        key: Option<Vec<u8>>,
    ) -> Result<Vec<Cell>>;

    /// Append onto columns of one row atomically; returns the new values.
    async fn append(&self, table: &str, app: Append, key: Option<Vec<u8>>) -> Result<Vec<Cell>>;

    /// Check one column and mutate the row if it matches; `Ok(false)` if the check failed.
    /// With a key, a retry answers the first outcome without checking again.
    async fn check_and_mutate(
        &self,
        table: &str,
        cam: CheckAndMutate,
        key: Option<Vec<u8>>,
    ) -> Result<bool>;

    /// Flush every region of a table.
    async fn flush(&self, table: &str) -> Result<()>;

    /// Compact every region of a table (waits for the compactions).
    async fn compact(&self, table: &str, major: bool) -> Result<()>;

    /// Split a region (at a salt bucket, default its middle); returns `(old id, new id)`.
    async fn split_region(
        &self,
        table: &str,
        region: u64,
        at_bucket: Option<u32>,
    ) -> Result<(u64, u64)>;

    /// The regions of a table with their figures, in order.
    async fn regions(&self, table: &str) -> Result<Vec<RegionInfo>>;

    /// Cumulative `(reads, writes)` per salt bucket of a table; `None` for an unknown table or
    /// a backend without salt buckets.
    fn bucket_activity(&self, table: &str) -> Option<Vec<(u64, u64)>>;

    /// Write a consistent copy of every table into `dest` (a directory that must not exist
    /// yet), laid out as a data directory the backend opens: each row as of one moment (the
    /// moment may differ between regions), holding at least every write acknowledged before
    /// the call. Writes go on meanwhile. `Unsupported` where the backend keeps no data of its
    /// own (Bigtable: its own backups, or `kura export`).
    async fn checkpoint(&self, dest: &std::path::Path) -> Result<CheckpointInfo>;

    /// Finish what is under way and release the store; later requests answer `ShuttingDown`.
    /// Idempotent.
    async fn shutdown(&self) -> Result<()>;
}

/// The handle the HTTP layer holds: a cheap clone of one shared backend, with the short forms
/// callers use most (no filter, no idempotency key).
#[derive(Clone)]
pub struct Store(Arc<dyn Backend>);

impl Store {
    /// Wrap a backend.
    pub fn new(backend: Arc<dyn Backend>) -> Store {
        Store(backend)
    }

    /// The backend itself.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.0
    }

    /// Read one row (`Ok(None)` if absent).
    pub async fn get(&self, table: &str, row: &[u8], read: &ReadSpec) -> Result<Option<Row>> {
        self.0.get(table, row, read, None).await
    }

    /// Read one row through a filter.
    pub async fn get_filtered(
        &self,
        table: &str,
        row: &[u8],
        read: &ReadSpec,
        filter: Option<Arc<dyn RowFilter>>,
    ) -> Result<Option<Row>> {
        self.0.get(table, row, read, filter).await
    }

    /// Apply mutations to one row atomically.
    pub async fn mutate(&self, table: &str, m: RowMutation) -> Result<()> {
        self.0.mutate_rows(table, vec![m]).await
    }

    /// Increment without an idempotency key.
    pub async fn increment(&self, table: &str, inc: Increment) -> Result<Vec<Cell>> {
        self.0.increment(table, inc, None).await
    }

    /// Increment with an optional idempotency key.
    pub async fn increment_keyed(
        &self,
        table: &str,
        inc: Increment,
        key: Option<Vec<u8>>,
    ) -> Result<Vec<Cell>> {
        self.0.increment(table, inc, key).await
    }

    /// Append without an idempotency key.
    pub async fn append(&self, table: &str, app: Append) -> Result<Vec<Cell>> {
        self.0.append(table, app, None).await
    }

    /// Append with an optional idempotency key.
    pub async fn append_keyed(
        &self,
        table: &str,
        app: Append,
        key: Option<Vec<u8>>,
    ) -> Result<Vec<Cell>> {
        self.0.append(table, app, key).await
    }

    /// Check-and-mutate without an idempotency key.
    pub async fn check_and_mutate(&self, table: &str, cam: CheckAndMutate) -> Result<bool> {
        self.0.check_and_mutate(table, cam, None).await
    }

    /// Check-and-mutate with an optional idempotency key.
    pub async fn check_and_mutate_keyed(
        &self,
        table: &str,
        cam: CheckAndMutate,
        key: Option<Vec<u8>>,
    ) -> Result<bool> {
        self.0.check_and_mutate(table, cam, key).await
    }
}

impl std::ops::Deref for Store {
    type Target = dyn Backend;

    fn deref(&self) -> &dyn Backend {
        &*self.0
    }
}
