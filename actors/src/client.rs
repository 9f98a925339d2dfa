//! [`Kura`]: the cloneable handle through which HTTP handlers and applications reach the data.

use crate::catalog::{Catalog, RegionId, TableDescriptor};
use crate::error::{ActorError, Result};
use crate::messages::{self, OpResult, Reject};
use crate::region::RegionSettings;
use crate::router::{self, Layout, RouterActor};
use crate::routing::{RegionRoute, RoutingTable, TableRoute};
use crate::salt::{bucket_of, SaltBucket};
use crate::scan_merge::MergedScan;
use actix::{Addr, Arbiter, ArbiterHandle};
pub use kura_backend::{AlterMode, RegionInfo, RegionStats, ScanRequest};
use kura_storage::model::*;
use kura_storage::{Durability, RecoveryMode};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to start the topology.
#[derive(Clone)]
pub struct KuraConfig {
    pub data_dir: PathBuf,
    /// Region arbiters (threads); 0 = one per core.
    pub arbiters: usize,
    /// Regions a new table gets unless its descriptor says otherwise; 0 = one per arbiter
    /// (the default). More regions than arbiters buy no parallelism, and in `sync` durability
    /// each region's log is fsynced on its own: on the 2-core dev VM, 2 regions instead of 4
    /// gave 1.2x the `sync` PUT throughput and 1.15x YCSB A's (benches/README.md).
    pub default_regions: u32,
    pub durability: Durability,
    pub recovery: RecoveryMode,
    /// Memtable budget per region, bytes.
    pub memtable_budget: usize,
    /// Memtable budget of all the regions together, bytes (0 = none, the default here; the
    /// server's `--memtable-total-mb` defaults to a quarter of the machine's memory): past it,
    /// a region that holds its share of it flushes (`memory.rs`).
    pub memtable_total: usize,
    /// Flush a region's memtable once its oldest write is this old, however little it holds
    /// (`None`: never; an hour by default, as HBase's `optionalcacheflushinterval`): a region
    /// that stopped writing then frees its memtable and its log, and a crash leaves at most
    /// this much of its writes to replay.
    pub memtable_max_age: Option<Duration>,
    /// Pace background flushes and compactions to this many bytes per second per region, so
    /// that they do not queue the logs' fsyncs behind their writes (0 = unpaced).
    pub background_write_rate: u64,
    /// Compactions the server's regions run at once at low priority (0 = half the cores, two
    /// at least); the others wait their turn. A region whose compactions fell behind may run
    /// one at normal priority beside them (half the cores at most).
    pub background_compactions: usize,
    /// Keep each region's log this many zero bytes ahead of its frames (storage FORMAT.md,
    /// "Preallocated tail"), so that a log fsync has no file growth to commit: on ext4 it
    /// then does not wait for a journal commit. 0 = off.
    pub log_prealloc: u64,
    /// How long a region remembers an idempotency key (see `kura_storage::IdempotencyOptions`).
    pub idempotency_window: Duration,
    /// Split a region automatically once its data exceeds this many bytes; `None` = never.
    pub split_threshold: Option<u64>,
    /// Client requests a region may have in flight (queued or being served); past it a request
    /// answers `Overloaded` at once (the server's `--region-in-flight`).
    pub in_flight_limit: usize,
    /// In `sync` durability, fsync the regions' logs on the server's log-sync threads
    /// (`sync_threads`), so that a region serves reads of other rows during the fsync (reads
    /// of the rows being written wait for it). Off by default: on a machine whose fsync takes a
    /// fraction of a millisecond it costs throughput (more thread wake-ups) for no gain in tail
    /// latency; it pays where an fsync takes milliseconds.
    pub sync_thread: bool,
    /// The most log-sync threads `sync_thread` starts; 0 = one per core. Regions share them in
    /// turn (`background::SyncPool`).
    pub sync_threads: usize,
    /// Pin arbiter `i` to CPU `i` (modulo the CPUs this process may use), one region thread
    /// per core as thread-per-core servers do. Unpinned, the kernel's wake-affine scheduling
    /// tends to pull two arbiters that keep waking each other onto one CPU, where they run no
    /// faster than one arbiter. Best when the machine is dedicated to the server.
    pub pin_arbiters: bool,
    /// The file system region stores live on; `None` = the real one. Tests pass a
    /// [`kura_storage::SimFs`] to inject I/O faults into regions.
    pub file_system: Option<Arc<dyn kura_storage::FileSystem>>,
}

impl std::fmt::Debug for KuraConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KuraConfig")
            .field("data_dir", &self.data_dir)
            .field("arbiters", &self.arbiters)
            .field("default_regions", &self.default_regions)
            .field("durability", &self.durability)
            .field("recovery", &self.recovery)
            .field("memtable_budget", &self.memtable_budget)
            .field("memtable_total", &self.memtable_total)
            .field("memtable_max_age", &self.memtable_max_age)
            .field("background_write_rate", &self.background_write_rate)
            .field("background_compactions", &self.background_compactions)
            .field("log_prealloc", &self.log_prealloc)
            .field("idempotency_window", &self.idempotency_window)
            .field("split_threshold", &self.split_threshold)
            .field("in_flight_limit", &self.in_flight_limit)
            .field("sync_thread", &self.sync_thread)
            .field("sync_threads", &self.sync_threads)
            .field("pin_arbiters", &self.pin_arbiters)
            .field("file_system", &self.file_system.as_ref().map(|_| "custom"))
            .finish()
    }
}

impl KuraConfig {
    /// Defaults for a data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        KuraConfig {
            data_dir: data_dir.into(),
            arbiters: 0,
            default_regions: 0,
            durability: Durability::Sync,
            recovery: RecoveryMode::PointInTime,
            memtable_budget: 64 << 20,
            memtable_total: 0,
            memtable_max_age: Some(Duration::from_secs(3600)),
            background_write_rate: 32 << 20,
            background_compactions: 0,
            log_prealloc: kura_storage::DEFAULT_LOG_PREALLOC,
            idempotency_window: Duration::from_secs(600),
            split_threshold: Some(1 << 30),
            in_flight_limit: 1024,
            sync_thread: false,
            sync_threads: 0,
            pin_arbiters: false,
            file_system: None,
        }
    }
}

/// The handle. Cheap to clone; every method is safe to call concurrently.
#[derive(Clone)]
pub struct Kura {
    inner: Arc<Inner>,
}

/// Items bound for one region: the region, their positions in the request, `(bucket, item)`.
type Group<'a, T> = (
    &'a RegionRoute,
    Vec<usize>,
    messages::OneOrMore<(SaltBucket, T)>,
);

struct Inner {
    config: KuraConfig,
    routes: Arc<RoutingTable>,
    router: Addr<RouterActor>,
    closing: AtomicBool,
    /// The arbiters the regions run on (their threads), for callers that want to run next to
    /// them (`Kura::arbiters`).
    arbiters: Vec<actix::ArbiterHandle>,
    /// The data directory's `LOCK` file, locked exclusively from `start` until `shutdown` (or
    /// the process's end): two servers on one directory would each replay and append to the
    /// same logs.
    lock: parking_lot::Mutex<Option<std::fs::File>>,
}

/// Lock `dir/LOCK` (created if absent) exclusively, without waiting.
fn lock_data_dir(dir: &std::path::Path) -> Result<std::fs::File> {
    let path = dir.join("LOCK");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| ActorError::Internal(format!("opening {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(ActorError::DataDirInUse(dir.display().to_string()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(ActorError::Internal(format!(
            "locking {}: {e}",
            path.display()
        ))),
    }
}

/// How long a request keeps re-routing after a region disowned its bucket (a split publishes
/// the new layout within milliseconds; this only bounds a bug).
const REROUTE_PATIENCE: Duration = Duration::from_secs(30);

/// Retry state of one request that met a stale route.
struct Reroute {
    since: Option<Instant>,
}

impl Reroute {
    fn new() -> Self {
        Reroute { since: None }
    }

    /// Wait before re-reading the routing table (the router is about to publish).
    async fn wait(&mut self, table: &str) -> Result<()> {
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() > REROUTE_PATIENCE {
            return Err(ActorError::Internal(format!(
                "table {table}: a region disowned a bucket but no new layout was published"
            )));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        Ok(())
    }
}

/// The server's log-sync threads, if its writes use them (`sync` durability with
/// `sync_thread`).
fn start_sync_pool(config: &KuraConfig) -> Option<Arc<crate::background::SyncPool>> {
    (config.durability == Durability::Sync && config.sync_thread).then(|| {
        Arc::new(crate::background::SyncPool::new(
            crate::background::sync_threads(config.sync_threads),
        ))
    })
}

/// Pin arbiter `i` to the `i`-th CPU this process may run on (wrapping). Best effort: a CPU
/// that cannot be pinned leaves its arbiter unpinned, with a warning.
fn pin(arbiters: &[ArbiterHandle]) {
    let Some(cores) = core_affinity::get_core_ids().filter(|c| !c.is_empty()) else {
        tracing::warn!("pin_arbiters: the CPUs of this process are unknown; arbiters not pinned");
        return;
    };
    for (i, arbiter) in arbiters.iter().enumerate() {
        let core = cores[i % cores.len()];
        arbiter.spawn_fn(move || {
            if !core_affinity::set_for_current(core) {
                tracing::warn!(arbiter = i, core = core.id, "could not pin the arbiter");
            }
        });
    }
}

/// The runtime of an arbiter [`Kura::start`] starts: timers, no I/O driver. Region actors do no
/// socket I/O, and without an I/O driver a wake-up from another thread (a request from an HTTP
/// worker, a reply from another region) costs an atomic store while the arbiter is busy,
/// instead of a write to the driver's eventfd on every wake-up.
fn region_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("cannot build a region arbiter's runtime (out of threads or memory)")
}

fn router_gone(e: actix::MailboxError) -> ActorError {
    match e {
        actix::MailboxError::Closed => ActorError::ShuttingDown,
        actix::MailboxError::Timeout => ActorError::Internal("router did not answer".into()),
    }
}

impl Kura {
    /// Open the catalog, remove orphan region directories, start the arbiters, the router and
    /// every region. Must run inside an actix System.
    pub async fn start(config: KuraConfig) -> Result<Kura> {
        let threads = match config.arbiters {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        };
        let owned: Vec<Arbiter> = (0..threads)
            .map(|_| Arbiter::with_tokio_rt(region_runtime))
            .collect();
        let handles = owned.iter().map(|a| a.handle()).collect();
        Kura::open(config, handles, owned)
    }

    /// [`Kura::start`] with the regions on threads the caller owns (`config.arbiters` is
    /// ignored): a thread-per-core server passes its HTTP workers' arbiters, so that a request
    /// whose region lives on the worker that took it never leaves that thread. The caller keeps
    /// the arbiters running until [`Kura::shutdown`] has returned (a region whose arbiter stops
    /// first is dropped unclosed: what it acknowledged is in its log, but a region in
    /// `interval` durability loses its last fsync). Must run inside an actix System.
    pub async fn start_on(config: KuraConfig, arbiters: Vec<ArbiterHandle>) -> Result<Kura> {
        if arbiters.is_empty() {
            return Err(ActorError::Internal(
                "Kura::start_on needs at least one arbiter".into(),
            ));
        }
        Kura::open(config, arbiters, Vec::new())
    }

    fn open(
        mut config: KuraConfig,
        handles: Vec<ArbiterHandle>,
        owned: Vec<Arbiter>,
    ) -> Result<Kura> {
        let dir = config.data_dir.clone();
        std::fs::create_dir_all(dir.join(crate::catalog::REGIONS_DIR)).map_err(|e| {
            ActorError::Internal(format!("creating data directory {}: {e}", dir.display()))
        })?;
        // Before anything in the directory is read or changed.
        let lock = lock_data_dir(&dir)?;
        if dir.join(kura_backend::RESTORE_MARKER).exists() {
            return Err(ActorError::Internal(format!(
                "{} holds an unfinished kura restore ({}): run the same kura restore again to                  finish it",
                dir.display(),
                kura_backend::RESTORE_MARKER
            )));
        }
        // Staging copies of online backups are never opened: one still there was left by a
        // backup the server stopped in the middle of.
        let staging = dir.join(kura_backend::BACKUPS_DIR);
        if let Err(e) = std::fs::remove_dir_all(&staging) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %staging.display(), error = %e, "could not remove old backup staging copies");
            }
        }
        let catalog = Catalog::load(&dir)?;
        router::remove_orphans(&dir, &catalog)?;
        if config.default_regions == 0 {
            config.default_regions = u32::try_from(handles.len()).unwrap_or(u32::MAX);
        }
        if config.pin_arbiters {
            pin(&handles);
        }
        let routes = Arc::new(RoutingTable::default());
        let settings = RegionSettings {
            durability: config.durability,
            recovery: config.recovery,
            memtable_budget: config.memtable_budget,
            background_write_rate: config.background_write_rate,
            log_prealloc: config.log_prealloc,
            idempotency_window: config.idempotency_window,
            split_threshold: config.split_threshold,
            in_flight_limit: config.in_flight_limit,
            file_system: config.file_system.clone(),
            compaction_slots: Arc::new(crate::background::CompactionSlots::new(
                config.background_compactions,
            )),
            memtables: crate::memory::MemtableBudget::new(config.memtable_total),
            memtable_max_age: config.memtable_max_age,
            sync_pool: start_sync_pool(&config),
        };
        let layout = Layout::new(
            dir,
            catalog,
            Arc::clone(&routes),
            (handles.clone(), owned),
            settings,
            config.default_regions,
        );
        let router = RouterActor::start_with(layout)?;
        Ok(Kura {
            inner: Arc::new(Inner {
                config,
                routes,
                router,
                closing: AtomicBool::new(false),
                arbiters: handles,
                lock: parking_lot::Mutex::new(Some(lock)),
            }),
        })
    }

    /// Close every region (commit waiting writes, flush, sync) and stop the arbiters
    /// [`Kura::start`] started (not those passed to [`Kura::start_on`]). Later
    /// requests answer `ShuttingDown`. Idempotent.
    pub async fn shutdown(&self) -> Result<()> {
        self.inner.closing.store(true, Ordering::SeqCst);
        let closed = self
            .inner
            .router
            .send(router::CloseAll)
            .await
            .map_err(router_gone)?;
        if closed.is_ok() {
            // Every region is closed: another server may open the directory now.
            self.inner.lock.lock().take();
        }
        closed
    }

    /// The arbiters (threads) the regions run on. Work spawned on them shares the regions'
    /// threads instead of adding one: a thread-per-core caller, or a bench measuring how the
    /// topology scales with its thread count alone.
    pub fn arbiters(&self) -> &[actix::ArbiterHandle] {
        &self.inner.arbiters
    }

    /// The configuration the topology was started with.
    pub fn config(&self) -> &KuraConfig {
        &self.inner.config
    }

    /// Every table, sorted by name.
    pub fn list_tables(&self) -> Vec<TableDescriptor> {
        let mut tables: Vec<TableDescriptor> = self
            .inner
            .routes
            .tables
            .iter()
            .map(|e| (*e.value().desc).clone())
            .collect();
        tables.sort_by(|a, b| a.name.cmp(&b.name));
        tables
    }

    /// One table's descriptor.
    pub fn table(&self, name: &str) -> Option<Arc<TableDescriptor>> {
        self.inner.routes.get(name).map(|r| Arc::clone(&r.desc))
    }

    /// Create a table (`TableExists` if present, `InvalidArgument` for a bad name or schema).
    pub async fn create_table(&self, desc: TableDescriptor) -> Result<()> {
        self.check_open()?;
        self.inner
            .router
            .send(router::CreateTable { desc })
            .await
            .map_err(router_gone)?
    }

    /// Change a table's families and attributes; returns the resulting descriptor.
    pub async fn alter_table(
        &self,
        desc: TableDescriptor,
        mode: AlterMode,
    ) -> Result<TableDescriptor> {
        self.check_open()?;
        self.inner
            .router
            .send(router::AlterTable { desc, mode })
            .await
            .map_err(router_gone)?
    }

    /// Drop a table and delete its data.
    pub async fn drop_table(&self, name: &str) -> Result<()> {
        self.check_open()?;
        let name = name.to_string();
        self.inner
            .router
            .send(router::DropTable { name })
            .await
            .map_err(router_gone)?
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closing.load(Ordering::Relaxed) {
            Err(ActorError::ShuttingDown)
        } else {
            Ok(())
        }
    }

    fn route(&self, table: &str) -> Result<Arc<TableRoute>> {
        self.check_open()?;
        self.inner
            .routes
            .get(table)
            .ok_or_else(|| ActorError::TableNotFound(table.to_string()))
    }

    /// A region that answered "closed" was closed under a request routed just before: by a
    /// table drop (the table is gone now) or by the shutdown. Say that, not "unavailable".
    fn explain_closed(&self, table: &str, e: ActorError) -> ActorError {
        if !matches!(e, ActorError::RegionUnavailable { .. }) {
            return e;
        }
        if self.inner.closing.load(Ordering::Relaxed) {
            ActorError::ShuttingDown
        } else if self.inner.routes.get(table).is_none() {
            ActorError::TableNotFound(table.to_string())
        } else {
            e
        }
    }

    /// The region owning `bucket` (borrowed: cloning an actix `Addr` allocates).
    fn owner(route: &TableRoute, bucket: SaltBucket) -> Result<&RegionRoute> {
        route.region_for(bucket).ok_or_else(|| {
            ActorError::Internal(format!(
                "no region owns bucket {bucket} of {}",
                route.desc.name
            ))
        })
    }

    /// Send a single-row request to the region owning `row`, re-routing after splits.
    async fn point<T, M>(
        &self,
        table: &str,
        row: &[u8],
        write: bool,
        make: impl Fn(SaltBucket, messages::Reply<T>) -> M,
    ) -> Result<T>
    where
        M: actix::Message<Result = ()> + Send + 'static,
        crate::region::RegionActor: actix::Handler<M>,
    {
        let mut reroute = Reroute::new();
        loop {
            let route = self.route(table)?;
            let bucket = bucket_of(row, &route.desc.salt);
            let region = Self::owner(&route, bucket)?;
            if write {
                route.count_write(bucket);
            } else {
                route.count_read(bucket);
            }
            match region.handle.call(|reply| make(bucket, reply)).await {
                Ok(v) => return Ok(v),
                Err(Reject::Failed(e)) => return Err(self.explain_closed(table, e)),
                Err(Reject::NotOwner) => reroute.wait(table).await?,
            }
        }
    }

    /// Read one row (`Ok(None)` if absent).
    pub async fn get(&self, table: &str, row: &[u8], read: &ReadSpec) -> Result<Option<Row>> {
        self.get_filtered(table, row, read, None).await
    }

    /// Read one row through a filter.
    pub async fn get_filtered(
        &self,
        table: &str,
        row: &[u8],
        read: &ReadSpec,
        filter: Option<Arc<dyn RowFilter>>,
    ) -> Result<Option<Row>> {
        self.point(table, row, false, |bucket, reply| messages::Get {
            bucket,
            row: row.to_vec(),
            read: read.clone(),
            filter: filter.clone(),
            reply,
        })
        .await
    }

    /// Read several rows; answers in request order. One message per region involved.
    pub async fn multi_get(
        &self,
        table: &str,
        rows: Vec<Vec<u8>>,
        read: &ReadSpec,
    ) -> Result<Vec<Option<Row>>> {
        let route = self.route(table)?;
        // Group the rows by region, remembering their positions.
        let mut groups: Vec<Group<'_, Vec<u8>>> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let bucket = bucket_of(row, &route.desc.salt);
            route.count_read(bucket);
            let region = Self::owner(&route, bucket)?;
            match groups.iter_mut().find(|g| g.0.id() == region.id()) {
                Some(g) => {
                    g.1.push(i);
                    g.2.push((bucket, row.clone()));
                }
                None => groups.push((region, vec![i], smallvec::smallvec![(bucket, row.clone())])),
            }
        }
        let calls = groups.into_iter().map(|(region, positions, items)| {
            let read = read.clone();
            async move {
                let keys: Vec<Vec<u8>> = items.iter().map(|(_, k)| k.clone()).collect();
                let answer = region
                    .handle
                    .call(|reply| messages::MultiGet {
                        rows: items,
                        read: read.clone(),
                        reply,
                    })
                    .await;
                let found = match answer {
                    Ok(found) => found,
                    Err(Reject::Failed(e)) => return Err(e),
                    // A split moved some of these rows: fetch them one by one, re-routed.
                    Err(Reject::NotOwner) => {
                        let mut found = Vec::with_capacity(keys.len());
                        for k in &keys {
                            found.push(self.get(table, k, &read).await?);
                        }
                        found
                    }
                };
                Ok::<_, ActorError>((positions, found))
            }
        });
        let mut out: Vec<Option<Row>> = vec![None; rows.len()];
        for res in futures::future::join_all(calls).await {
            let (positions, found) = res?;
            for (pos, row) in positions.into_iter().zip(found) {
                out[pos] = row;
            }
        }
        Ok(out)
    }

    /// A merged scan page: global row order, exact limit; resume with
    /// `req.spec = req.spec.resume_after(&last_row.key)`.
    pub async fn scan(&self, table: &str, req: ScanRequest) -> Result<ScanPage> {
        let route = self.route(table)?;
        let reroute = || self.route(table);
        MergedScan {
            table,
            route,
            spec: req.spec,
            limit: req.limit,
            page: req.page,
            reroute: &reroute,
        }
        .run()
        .await
    }

    /// Apply writes, routed by row; each is atomic for its row, not across rows. Returns the
    /// outcomes in request order, or the first error.
    async fn write_ops(&self, table: &str, ops: Vec<KeyedWrite>) -> Result<Vec<WriteOutcome>> {
        let n = ops.len();
        let mut results: Vec<Option<WriteOutcome>> = vec![None; n];
        let mut todo: Vec<(usize, KeyedWrite)> = ops.into_iter().enumerate().collect();
        let mut reroute = Reroute::new();
        while !todo.is_empty() {
            let route = self.route(table)?;
            let mut groups: Vec<Group<'_, KeyedWrite>> = Vec::new();
            for (i, op) in todo.drain(..) {
                let bucket = bucket_of(op.row(), &route.desc.salt);
                route.count_write(bucket);
                let region = Self::owner(&route, bucket)?;
                match groups.iter_mut().find(|g| g.0.id() == region.id()) {
                    Some(g) => {
                        g.1.push(i);
                        g.2.push((bucket, op));
                    }
                    None => groups.push((region, vec![i], smallvec::smallvec![(bucket, op)])),
                }
            }
            let calls = groups
                .into_iter()
                .map(|(region, positions, ops)| async move {
                    let answer = region
                        .handle
                        .call(|reply| messages::Write { ops, reply })
                        .await;
                    (positions, answer)
                });
            let mut first_err = None;
            for (positions, answer) in futures::future::join_all(calls).await {
                match answer {
                    Ok(outcomes) => {
                        for (pos, outcome) in positions.into_iter().zip(outcomes) {
                            match outcome {
                                OpResult::Done(Ok(o)) => results[pos] = Some(o),
                                OpResult::Done(Err(e)) => {
                                    first_err.get_or_insert(e);
                                }
                                OpResult::NotOwner(op) => todo.push((pos, op)),
                            }
                        }
                    }
                    Err(Reject::Failed(e)) => {
                        first_err.get_or_insert(e);
                    }
                    Err(Reject::NotOwner) => {
                        first_err.get_or_insert(ActorError::Internal(
                            "a region refused a whole write batch as not owner".into(),
                        ));
                    }
                }
            }
            if let Some(e) = first_err {
                return Err(self.explain_closed(table, e));
            }
            if !todo.is_empty() {
                todo.sort_by_key(|(i, _)| *i);
                reroute.wait(table).await?;
            }
        }
        results
            .into_iter()
            .map(|r| r.ok_or_else(|| ActorError::Internal("write outcome missing".into())))
            .collect()
    }

    async fn write_one(&self, table: &str, op: KeyedWrite) -> Result<WriteOutcome> {
        let mut out = self.write_ops(table, vec![op]).await?;
        out.pop()
            .ok_or_else(|| ActorError::Internal("write outcome missing".into()))
    }

    /// Apply mutations to one row atomically.
    pub async fn mutate(&self, table: &str, m: RowMutation) -> Result<()> {
        self.write_one(table, WriteOp::Mutate(m).into())
            .await
            .map(|_| ())
    }

    /// Apply mutations to several rows (atomic per row, not across rows).
    pub async fn mutate_rows(&self, table: &str, ms: Vec<RowMutation>) -> Result<()> {
        self.write_ops(
            table,
            ms.into_iter().map(|m| WriteOp::Mutate(m).into()).collect(),
        )
        .await
        .map(|_| ())
    }

    /// Increment counters of one row atomically; returns the new values (8-byte big-endian).
    pub async fn increment(&self, table: &str, inc: Increment) -> Result<Vec<Cell>> {
        self.increment_keyed(table, inc, None).await
    }

    /// [`Kura::increment`] with an optional idempotency key: a retry with the same key on the
    /// same row (within the store's window: 10 minutes, 100,000 keys per region) is not applied
    /// again and answers the first new values.
    pub async fn increment_keyed(
        &self,
        table: &str,
        inc: Increment,
        key: Option<Vec<u8>>,
    ) -> Result<Vec<Cell>> {
        match self
            .write_one(table, WriteOp::Increment(inc).with_key(key))
            .await?
        {
            WriteOutcome::Cells(cells) => Ok(cells),
            other => Err(ActorError::Internal(format!(
                "increment answered {other:?}"
            ))),
        }
    }

    /// Append onto columns of one row atomically; returns the new values.
    pub async fn append(&self, table: &str, app: Append) -> Result<Vec<Cell>> {
        self.append_keyed(table, app, None).await
    }

    /// [`Kura::append`] with an optional idempotency key (see [`Kura::increment_keyed`]).
    pub async fn append_keyed(
        &self,
        table: &str,
        app: Append,
        key: Option<Vec<u8>>,
    ) -> Result<Vec<Cell>> {
        match self
            .write_one(table, WriteOp::Append(app).with_key(key))
            .await?
        {
            WriteOutcome::Cells(cells) => Ok(cells),
            other => Err(ActorError::Internal(format!("append answered {other:?}"))),
        }
    }

    /// Check one column and mutate the row if it matches; `Ok(false)` if the check failed.
    pub async fn check_and_mutate(&self, table: &str, cam: CheckAndMutate) -> Result<bool> {
        self.check_and_mutate_keyed(table, cam, None).await
    }

    /// [`Kura::check_and_mutate`] with an optional idempotency key: a retry with the same key
    /// on the same row answers the first outcome (applied or not) without checking again.
    pub async fn check_and_mutate_keyed(
        &self,
        table: &str,
        cam: CheckAndMutate,
        key: Option<Vec<u8>>,
    ) -> Result<bool> {
        match self
            .write_one(table, WriteOp::CheckAndMutate(cam).with_key(key))
            .await?
        {
            WriteOutcome::Checked(applied) => Ok(applied),
            other => Err(ActorError::Internal(format!(
                "check-and-mutate answered {other:?}"
            ))),
        }
    }

    /// Flush every region of a table.
    pub async fn flush(&self, table: &str) -> Result<()> {
        let route = self.route(table)?;
        let calls = route.regions.iter().map(|r| {
            let h = r.handle.clone();
            async move { h.call_unbounded(|reply| messages::Flush { reply }).await }
        });
        for r in futures::future::join_all(calls).await {
            r.map_err(reject_to_error)?;
        }
        Ok(())
    }

    /// Compact every region of a table (waits for the compactions).
    pub async fn compact(&self, table: &str, major: bool) -> Result<()> {
        let route = self.route(table)?;
        let calls = route.regions.iter().map(|r| {
            let h = r.handle.clone();
            async move {
                h.call_unbounded(|reply| messages::Compact {
                    major,
                    reply: Some(reply),
                })
                .await
            }
        });
        for r in futures::future::join_all(calls).await {
            r.map_err(reject_to_error)?;
        }
        Ok(())
    }

    /// Write a consistent copy of every table into `dest` (which must not exist), laid out
    /// as a data directory: see [`kura_backend::Backend::checkpoint`].
    pub async fn checkpoint(&self, dest: &Path) -> Result<kura_backend::CheckpointInfo> {
        self.check_open()?;
        let msg = router::Checkpoint {
            dest: dest.to_path_buf(),
        };
        self.inner.router.send(msg).await.map_err(router_gone)?
    }

    /// Split a region (at a bucket, which starts the new region; default the middle of its
    /// range); returns `(old id, new id)`.
    pub async fn split_region(
        &self,
        table: &str,
        region: RegionId,
        at_bucket: Option<SaltBucket>,
    ) -> Result<(RegionId, RegionId)> {
        self.check_open()?;
        let msg = router::SplitRegion {
            table: table.to_string(),
            region,
            at: at_bucket,
        };
        self.inner.router.send(msg).await.map_err(router_gone)?
    }

    /// The regions of a table with their figures, in bucket order.
    pub async fn regions(&self, table: &str) -> Result<Vec<RegionInfo>> {
        let route = self.route(table)?;
        let calls = route.regions.iter().map(|r| {
            let h = r.handle.clone();
            async move { h.call_unbounded(|reply| messages::Stats { reply }).await }
        });
        let answers = futures::future::join_all(calls).await;
        let mut out = Vec::with_capacity(answers.len());
        for (r, answer) in route.regions.iter().zip(answers) {
            let stats = match answer {
                Ok((_, stats)) => stats,
                // A stopped actor is a failed region: show it rather than hide the table.
                Err(_) => RegionStats {
                    poisoned: true,
                    ..RegionStats::default()
                },
            };
            // The operators' view: raw numbers.
            let (bucket_start, bucket_end) = r.range.bounds();
            out.push(RegionInfo {
                key_range: None,
                id: r.id().get(),
                table: table.to_string(),
                bucket_start,
                bucket_end,
                arbiter: r.arbiter,
                stats,
            });
        }
        Ok(out)
    }

    /// The salt bucket of a row of a table.
    pub fn bucket_of(&self, table: &str, row: &[u8]) -> Option<SaltBucket> {
        self.inner
            .routes
            .get(table)
            .map(|r| bucket_of(row, &r.desc.salt))
    }

    /// Cumulative `(reads, writes)` per salt bucket of a table.
    pub fn bucket_activity(&self, table: &str) -> Option<Vec<(u64, u64)>> {
        self.inner.routes.get(table).map(|r| {
            r.activity
                .iter()
                .map(|a| {
                    (
                        a.reads.load(Ordering::Relaxed),
                        a.writes.load(Ordering::Relaxed),
                    )
                })
                .collect()
        })
    }
}

fn reject_to_error(e: Reject) -> ActorError {
    match e {
        Reject::Failed(e) => e,
        Reject::NotOwner => ActorError::Internal("unexpected not-owner answer".into()),
    }
}
