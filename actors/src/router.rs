//! [`RouterActor`]: the one place where the layout (tables, regions, arbiters) changes.
//!
//! Requests never pass through the router: the [`crate::Kura`] handle routes them on the
//! caller's own thread, with a read of the shared routing table (`routing.rs`); no actor is
//! asked. The router applies the rare layout changes (create, alter and drop table, split,
//! checkpoint, shutdown), makes each durable by rewriting the catalog (the commit point, written
//! on a blocking thread so the router's arbiter never waits on a disk), then publishes a new
//! snapshot of the table's routes.
//!
//! # The actor is the serialization
//! Each change is one message, handled with an `AtomicResponse`: actix runs its future with
//! `ctx.wait`, so the router handles no other message until the change has finished, awaits
//! (region replies, the catalog write) included. The `Layout` moves into the change's future
//! and comes back to the actor when it ends, before the next message is read: no lock guards
//! it, and a change runs alone, in mailbox order. A checkpoint is one such change, so no create,
//! alter, drop or split runs while the regions copy themselves, and the copied catalog names
//! exactly the regions copied.
//!
//! # Split, step by step
//! 1. The region commits its waiting writes, flushes, gives every segment file a second name
//!    (a hard link) in a fresh store `<data_dir>/regions/<new id>/` whose manifest names them as
//!    reference segments (no row is copied: the pause does not grow with the region), and
//!    narrows what it serves to `[start, at)` for reads only (requests for the moved buckets are
//!    now answered `NotOwner`; the handle retries them until step 3). Its compactions still keep
//!    the moved rows.
//! 2. The catalog is rewritten with both regions: the commit point. If that fails, the region
//!    serves its whole range again and the new directory is removed, unless the catalog on
//!    disk names the new region after all (a directory fsync that failed after the rename):
//!    then the split stands, but the old region keeps the moved rows until its next open (a
//!    crash may still undo the rename). Otherwise `CommitSplit` makes the narrowing final,
//!    and both regions rewrite their reference segments, each keeping only its own buckets'
//!    rows, in background minor compactions that pick them first. Before the commit no
//!    compaction may drop them: an aborted split would lose them (tests/layout_failures.rs).
//! 3. The new region actor starts on the least loaded arbiter and a new snapshot is published.
//!
//! A crash before step 2 leaves the old catalog (the old region still holds every row; the new
//! directory is an orphan, moved to `orphaned-regions/` at the next start). A crash after it
//! reopens both regions with predicates rebuilt from the catalog's bucket ranges.
//!
//! # Invariants
//! 1. Layout changes (checkpoints included) are applied one at a time, in the order they reach
//!    the router's mailbox; the next starts only once the last has finished.
//! 2. The catalog on disk changes before any published snapshot reflects the change.
//! 3. Region directories are named by region id only, never by user input.

use crate::catalog::*;
use crate::error::{ActorError, Result};
use crate::messages::{self, AutoSplit, Reject};
use crate::region::{RegionActor, RegionSettings, RegionSpec};
use crate::routing::{BucketActivity, RegionHandle, RegionRoute, RoutingTable, TableRoute};
use crate::salt::{BucketRange, SaltBucket};
use crate::AlterMode;
use actix::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Create a table.
#[derive(Message)]
#[rtype(result = "Result<()>")]
pub(crate) struct CreateTable {
    pub desc: TableDescriptor,
}

/// Change a table's families and attributes.
#[derive(Message)]
#[rtype(result = "Result<TableDescriptor>")]
pub(crate) struct AlterTable {
    pub desc: TableDescriptor,
    pub mode: AlterMode,
}

/// Drop a table and delete its data.
#[derive(Message)]
#[rtype(result = "Result<()>")]
pub(crate) struct DropTable {
    pub name: String,
}

/// Split a region at a bucket (default: the middle of its range).
#[derive(Message)]
#[rtype(result = "Result<(RegionId, RegionId)>")]
pub(crate) struct SplitRegion {
    pub table: String,
    pub region: RegionId,
    pub at: Option<SaltBucket>,
}

/// Write a consistent copy of every table into a new directory (see [`Layout::checkpoint`]).
#[derive(Message)]
#[rtype(result = "Result<kura_backend::CheckpointInfo>")]
pub(crate) struct Checkpoint {
    pub dest: PathBuf,
}

/// Close every region (flush + sync) and stop the arbiters.
#[derive(Message)]
#[rtype(result = "Result<()>")]
pub(crate) struct CloseAll;

/// The router's state: the actor's own, moved into a change's future while it runs.
pub(crate) struct Layout {
    data_dir: PathBuf,
    catalog: Catalog,
    routes: Arc<RoutingTable>,
    /// The threads regions run on.
    arbiters: Vec<ArbiterHandle>,
    /// The arbiters the topology started itself (stopped once every region is closed); empty
    /// when the regions run on threads the caller owns (`Kura::start_on`).
    owned: Vec<Arbiter>,
    /// Regions per arbiter, to place new regions on the least loaded one.
    arbiter_load: Vec<usize>,
    settings: RegionSettings,
    default_regions: u32,
    router: Option<Recipient<AutoSplit>>,
    closed: bool,
}

/// Write the catalog on a blocking thread.
async fn commit(data_dir: &Path, catalog: &Catalog) -> Result<()> {
    let dir = data_dir.to_path_buf();
    let catalog = catalog.clone();
    tokio::task::spawn_blocking(move || catalog.save(&dir))
        .await
        .map_err(|e| ActorError::Internal(format!("catalog writer panicked: {e}")))?
}

/// `query` of the catalog on disk (`None`: it cannot be read), on a blocking thread: after a
/// failed save, whether its rename took effect.
async fn on_disk<T: Send + 'static>(
    data_dir: &Path,
    query: impl FnOnce(&Catalog) -> T + Send + 'static,
) -> Option<T> {
    let dir = data_dir.to_path_buf();
    tokio::task::spawn_blocking(move || Catalog::load(&dir).ok().map(|c| query(&c)))
        .await
        .ok()
        .flatten()
}

async fn remove_dirs(dirs: Vec<PathBuf>) {
    let _ = tokio::task::spawn_blocking(move || {
        for d in dirs {
            if let Err(e) = std::fs::remove_dir_all(&d) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(dir = %d.display(), error = %e, "could not remove region directory");
                }
            }
        }
    })
    .await;
}

fn reject(e: Reject, what: &str) -> ActorError {
    match e {
        Reject::Failed(e) => e,
        Reject::NotOwner => {
            ActorError::Internal(format!("{what}: region layout changed underneath"))
        }
    }
}

impl Layout {
    pub(crate) fn new(
        data_dir: PathBuf,
        catalog: Catalog,
        routes: Arc<RoutingTable>,
        (arbiters, owned): (Vec<ArbiterHandle>, Vec<Arbiter>),
        settings: RegionSettings,
        default_regions: u32,
    ) -> Self {
        let n = arbiters.len();
        Layout {
            data_dir,
            catalog,
            routes,
            arbiters,
            owned,
            arbiter_load: vec![0; n],
            settings,
            default_regions: default_regions.max(1),
            router: None,
            closed: false,
        }
    }

    /// Starts a region actor for `meta`; `existing`: the catalog named it before this call (a
    /// restart, a reopen), so its directory must be there (see [`RegionSpec::existing`]).
    fn launch(
        &mut self,
        desc: &TableDescriptor,
        meta: &RegionMeta,
        existing: bool,
    ) -> Result<RegionRoute> {
        let router = self
            .router
            .clone()
            .ok_or_else(|| ActorError::Internal("router address not set".into()))?;
        let arbiter = (0..self.arbiters.len())
            .min_by_key(|&i| self.arbiter_load[i])
            .ok_or_else(|| ActorError::Internal("no arbiters".into()))?;
        self.arbiter_load[arbiter] += 1;
        let spec = RegionSpec {
            id: meta.id,
            table: desc.name.clone(),
            salt: desc.salt.clone(),
            range: meta.buckets,
            dir: region_dir(&self.data_dir, meta.id),
            families: desc.families.clone(),
            settings: self.settings.clone(),
            router,
            existing,
        };
        let addr = RegionActor::launch(spec, &self.arbiters[arbiter]);
        Ok(RegionRoute {
            range: meta.buckets,
            arbiter,
            handle: RegionHandle::new(meta.id, addr, self.settings.in_flight_limit),
        })
    }

    fn publish(&self, desc: impl Into<Arc<TableDescriptor>>, regions: Vec<RegionRoute>) {
        let desc = desc.into();
        let activity = match self.routes.get(&desc.name) {
            Some(old) => Arc::clone(&old.activity),
            None => (0..desc.salt.buckets)
                .map(|_| BucketActivity::default())
                .collect(),
        };
        let name = desc.name.clone();
        self.routes.tables.insert(
            name,
            Arc::new(TableRoute {
                desc,
                regions,
                activity,
            }),
        );
    }

    /// Start every region of the catalog (at server start).
    pub(crate) fn start_all(&mut self, router: Recipient<AutoSplit>) -> Result<()> {
        self.router = Some(router);
        let tables: Vec<TableEntry> = self.catalog.tables.values().cloned().collect();
        for entry in tables {
            let mut routes = Vec::with_capacity(entry.regions.len());
            for meta in &entry.regions {
                routes.push(self.launch(&entry.descriptor, meta, true)?);
            }
            self.publish(entry.descriptor, routes);
        }
        Ok(())
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            Err(ActorError::ShuttingDown)
        } else {
            Ok(())
        }
    }

    async fn create_table(&mut self, desc: TableDescriptor) -> Result<()> {
        self.check_open()?;
        validate_descriptor(&desc)?;
        if self.catalog.tables.contains_key(&desc.name) {
            return Err(ActorError::TableExists(desc.name));
        }
        let mut next = self.catalog.clone();
        let count = desc.initial_regions.unwrap_or(self.default_regions);
        let layout = BucketRange::even(desc.salt.buckets, count);
        // The count the table really started with is recorded, so that it does not change
        // with a later `--default-regions` or `--workers` (splits are counted from it).
        let mut desc = desc;
        desc.initial_regions = Some(layout.len() as u32);
        let regions: Vec<RegionMeta> = layout
            .into_iter()
            .map(|buckets| RegionMeta {
                id: next.allocate_region_id(),
                buckets,
            })
            .collect();
        // A directory left by an earlier run under a now-reused id would resurrect rows.
        remove_dirs(
            regions
                .iter()
                .map(|r| region_dir(&self.data_dir, r.id))
                .collect(),
        )
        .await;
        // The regions' (empty) directories exist, durably, before the catalog names them: a
        // region the catalog names without its directory fails closed at the next start (its
        // rows would read as absent), and a crash before the commit leaves empty orphans, which
        // the next start removes.
        let fs: Arc<dyn kura_storage::FileSystem> = self
            .settings
            .file_system
            .clone()
            .unwrap_or_else(|| Arc::new(kura_storage::StdFs));
        for r in &regions {
            let dir = region_dir(&self.data_dir, r.id);
            fs.create_dir_all(&dir)
                .map_err(|e| ActorError::Internal(format!("creating {}: {e}", dir.display())))?;
        }
        let parent = self.data_dir.join(REGIONS_DIR);
        fs.sync_dir(&parent)
            .map_err(|e| ActorError::Internal(format!("syncing {}: {e}", parent.display())))?;
        next.tables.insert(
            desc.name.clone(),
            TableEntry {
                descriptor: desc.clone(),
                regions: regions.clone(),
            },
        );
        commit(&self.data_dir, &next).await?;
        self.catalog = next;
        let mut routes = Vec::with_capacity(regions.len());
        for meta in &regions {
            routes.push(self.launch(&desc, meta, false)?);
        }
        self.publish(desc, routes);
        Ok(())
    }

    async fn alter_table(
        &mut self,
        desc: TableDescriptor,
        mode: AlterMode,
    ) -> Result<TableDescriptor> {
        self.check_open()?;
        let entry = self
            .catalog
            .tables
            .get(&desc.name)
            .ok_or_else(|| ActorError::TableNotFound(desc.name.clone()))?;
        let new_desc = entry.descriptor.altered(desc, mode)?;

        let mut next = self.catalog.clone();
        if let Some(e) = next.tables.get_mut(&new_desc.name) {
            e.descriptor = new_desc.clone();
        }
        commit(&self.data_dir, &next).await?;
        self.catalog = next;
        let route = self
            .routes
            .get(&new_desc.name)
            .ok_or_else(|| ActorError::Internal("table missing from the routing table".into()))?;
        let calls = route.regions.iter().map(|r| {
            let families = new_desc.families.clone();
            let handle = r.handle.clone();
            async move {
                handle
                    .call_unbounded(|reply| messages::SetFamilies { families, reply })
                    .await
            }
        });
        let results = futures::future::join_all(calls).await;
        self.publish(new_desc.clone(), route.regions.clone());
        for r in results {
            r.map_err(|e| reject(e, "alter table"))?;
        }
        Ok(new_desc)
    }

    async fn drop_table(&mut self, name: &str) -> Result<()> {
        self.check_open()?;
        if !self.catalog.tables.contains_key(name) {
            return Err(ActorError::TableNotFound(name.to_string()));
        }
        // Unpublish first: new requests see TableNotFound while the regions close.
        let route = self.routes.tables.remove(name).map(|(_, r)| r);
        if let Some(route) = &route {
            let closes = route.regions.iter().map(|r| {
                let h = r.handle.clone();
                async move { h.call_unbounded(|reply| messages::Close { reply }).await }
            });
            for (r, res) in route
                .regions
                .iter()
                .zip(futures::future::join_all(closes).await)
            {
                self.arbiter_load[r.arbiter] = self.arbiter_load[r.arbiter].saturating_sub(1);
                if let Err(e) = res {
                    tracing::warn!(region = r.id().get(), error = ?e, "closing a dropped region failed");
                }
            }
        }
        let mut next = self.catalog.clone();
        let entry = next.tables.remove(name);
        if let Err(e) = commit(&self.data_dir, &next).await {
            // A save can fail after its rename took effect (the directory fsync): the catalog
            // on disk no longer has the table, and a restart would remove its directories as
            // a dropped table's. The drop stands then, as a split does, but is not reported
            // done (a crash may yet undo the rename, and the table come back whole): its
            // directories are left for the next start to deal with.
            let gone = {
                let name = name.to_string();
                on_disk(&self.data_dir, move |c| !c.tables.contains_key(&name)).await
            };
            if gone == Some(true) {
                tracing::warn!(table = name, error = %e,
                    "the catalog save reported an error after it took effect: drop kept");
                self.catalog = next;
                return Err(e);
            }
            // The table still exists on disk: reopen its regions and serve it again, rather
            // than leave it unreachable yet impossible to re-create.
            if let (Some(route), Some(entry)) = (route, self.catalog.tables.get(name).cloned()) {
                let mut regions = Vec::new();
                for meta in &entry.regions {
                    match self.launch(&entry.descriptor, meta, true) {
                        Ok(r) => regions.push(r),
                        Err(e2) => {
                            tracing::error!(table = name, error = %e2, "could not reopen a region of a table whose drop failed");
                            return Err(e);
                        }
                    }
                }
                self.publish(Arc::clone(&route.desc), regions);
            }
            return Err(e);
        }
        self.catalog = next;
        if let Some(entry) = entry {
            remove_dirs(
                entry
                    .regions
                    .iter()
                    .map(|r| region_dir(&self.data_dir, r.id))
                    .collect(),
            )
            .await;
        }
        Ok(())
    }

    async fn split(
        &mut self,
        table: &str,
        region: RegionId,
        at: Option<SaltBucket>,
    ) -> Result<(RegionId, RegionId)> {
        self.check_open()?;
        let entry = self
            .catalog
            .tables
            .get(table)
            .ok_or_else(|| ActorError::TableNotFound(table.to_string()))?;
        let idx = entry
            .regions
            .iter()
            .position(|r| r.id == region)
            .ok_or_else(|| {
                ActorError::InvalidArgument(format!("table {table} has no region {region}"))
            })?;
        let meta = entry.regions[idx].clone();
        if meta.buckets.bucket_count() < 2 {
            return Err(ActorError::InvalidArgument(format!(
                "region {region} owns a single salt bucket and cannot be split"
            )));
        }
        let at = at.unwrap_or_else(|| meta.buckets.middle());
        let Some((lower, upper)) = meta.buckets.split_at(at) else {
            return Err(ActorError::InvalidArgument(format!(
                "split bucket {at} is not strictly inside region {region}'s buckets {}",
                meta.buckets
            )));
        };
        let desc = entry.descriptor.clone();
        let route = self
            .routes
            .get(table)
            .ok_or_else(|| ActorError::Internal("table missing from the routing table".into()))?;
        let old = route
            .regions
            .iter()
            .find(|r| r.id() == region)
            .cloned()
            .ok_or_else(|| ActorError::Internal("region missing from the routing table".into()))?;

        let mut next = self.catalog.clone();
        let new_id = next.allocate_region_id();
        let new_dir = region_dir(&self.data_dir, new_id);
        remove_dirs(vec![new_dir.clone()]).await;

        // Step 1: export and narrow.
        old.handle
            .call_unbounded(|reply| messages::PrepareSplit {
                at,
                new_dir: new_dir.clone(),
                reply,
            })
            .await
            .map_err(|e| reject(e, "split"))?;

        // Step 2: the commit point.
        let new_meta = RegionMeta {
            id: new_id,
            buckets: upper,
        };
        if let Some(e) = next.tables.get_mut(table) {
            e.regions[idx].buckets = lower;
            e.regions.insert(idx + 1, new_meta.clone());
        }
        // Whether the old region may drop the moved rows now (see `CommitSplit` below).
        let mut durable = true;
        if let Err(e) = commit(&self.data_dir, &next).await {
            // A save can fail after its rename took effect (the directory fsync): then the
            // catalog on disk gives the buckets to the new region, which must keep its rows.
            // A crash may yet undo that rename: the old region keeps the moved rows until its
            // next open, which drops them only if the catalog it then reads has the split.
            let named = {
                let table = table.to_string();
                on_disk(&self.data_dir, move |c| {
                    c.tables
                        .get(&table)
                        .is_some_and(|e| e.regions.iter().any(|r| r.id == new_id))
                })
                .await
            };
            match named {
                Some(true) => {
                    durable = false;
                    tracing::warn!(table, region = region.get(), error = %e,
                        "the catalog save reported an error after it took effect: split kept");
                }
                on_disk => {
                    let range = meta.buckets;
                    let _ = old
                        .handle
                        .call_unbounded(|reply| messages::AbortSplit { range, reply })
                        .await;
                    // Unreadable catalog: it may name the new region; keep its rows (an
                    // orphan directory, removed by the next split that takes this id).
                    if on_disk == Some(false) {
                        remove_dirs(vec![new_dir]).await;
                    }
                    return Err(e);
                }
            }
        }
        self.catalog = next;
        // The narrowing is final: the old region may now drop the moved rows. If it cannot
        // hear this (failed, closed), or the commit may not be durable, it drops them after
        // its next open.
        if !durable {
            tracing::warn!(
                table,
                region = region.get(),
                "split kept; the old region drops the moved rows after its next open"
            );
        } else if let Err(e) = old
            .handle
            .call_unbounded(|reply| messages::CommitSplit { reply })
            .await
        {
            tracing::warn!(table, region = region.get(), error = ?e, "split committed; the old region's cleanup waits for its next open");
        }

        // Step 3: start the new region and publish.
        let new_route = self.launch(&desc, &new_meta, false)?;
        let mut regions = route.regions.clone();
        if let Some(pos) = regions.iter().position(|r| r.id() == region) {
            regions[pos].range = lower;
            regions.insert(pos + 1, new_route);
        }
        self.publish(Arc::clone(&route.desc), regions);
        tracing::info!(
            table,
            region = region.get(),
            new_region = new_id.get(),
            at = at.get(),
            "region split"
        );
        Ok((region, new_id))
    }

    /// Checkpoint every region into `dest/regions/<id>/` and write the catalog to
    /// `dest/catalog.json`: `dest` is then a data directory the store opens. The router
    /// handles no other change meanwhile (an atomic change, see the module doc), so no create,
    /// alter, drop or split runs and the catalog names exactly the regions copied. Each region copies itself between two of its write
    /// batches (all of them at once, each at its own moment); writes go on around it. On
    /// failure `dest` is removed.
    async fn checkpoint(&mut self, dest: &Path) -> Result<kura_backend::CheckpointInfo> {
        self.check_open()?;
        if dest.exists() {
            return Err(ActorError::InvalidArgument(format!(
                "checkpoint directory {} already exists",
                dest.display()
            )));
        }
        let regions_dir = dest.join(REGIONS_DIR);
        std::fs::create_dir_all(&regions_dir).map_err(|e| {
            ActorError::Internal(format!("creating {}: {e}", regions_dir.display()))
        })?;
        let mut handles = Vec::new();
        for name in self.catalog.tables.keys() {
            let route = self.routes.get(name).ok_or_else(|| {
                ActorError::Internal(format!("table {name} missing from the routing table"))
            })?;
            handles.extend(route.regions.iter().map(|r| r.handle.clone()));
        }
        let calls = handles.iter().map(|h| {
            let region = region_dir(dest, h.id);
            async move {
                h.call_unbounded(|reply| messages::Checkpoint {
                    dest: region,
                    reply,
                })
                .await
            }
        });
        let mut info = kura_backend::CheckpointInfo {
            tables: self.catalog.tables.keys().cloned().collect(),
            regions: handles.len(),
            ..Default::default()
        };
        let mut failed = None;
        for res in futures::future::join_all(calls).await {
            match res {
                Ok(r) => {
                    info.bytes += r.bytes;
                    info.linked_segments += r.linked;
                    info.copied_segments += r.copied;
                }
                Err(e) => {
                    failed.get_or_insert(reject(e, "checkpoint"));
                }
            }
        }
        let saved = match failed {
            Some(e) => Err(e),
            None => commit(dest, &self.catalog).await,
        };
        if let Err(e) = saved {
            remove_dirs(vec![dest.to_path_buf()]).await;
            return Err(e);
        }
        Ok(info)
    }

    async fn close_all(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        // The routes stay published: a request routed from here on meets `Kura`'s closing
        // flag or a closed mailbox and answers `ShuttingDown`, not "no such table".
        let routes: Vec<Arc<TableRoute>> = self
            .routes
            .tables
            .iter()
            .map(|e| Arc::clone(e.value()))
            .collect();
        let mut first_err = None;
        for route in routes {
            let closes = route.regions.iter().map(|r| {
                let h = r.handle.clone();
                async move { h.call_unbounded(|reply| messages::Close { reply }).await }
            });
            for res in futures::future::join_all(closes).await {
                if let Err(e) = res {
                    first_err.get_or_insert(reject(e, "close"));
                }
            }
        }
        for a in &self.owned {
            a.stop();
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// The router actor: a serializer of layout changes around its `Layout`.
pub struct RouterActor {
    /// `None` only while a change runs (see [`RouterActor::change`]), when the actor reads no
    /// message.
    layout: Option<Layout>,
}

impl RouterActor {
    /// Start the router on the current arbiter and every region of the catalog.
    pub(crate) fn start_with(mut layout: Layout) -> Result<Addr<RouterActor>> {
        let mut started = Ok(());
        let addr = RouterActor::create(|ctx| {
            started = layout.start_all(ctx.address().recipient());
            RouterActor {
                layout: Some(layout),
            }
        });
        started.map(|()| addr)
    }

    /// Run one layout change: `change` gets the layout and gives it back with its result. The
    /// change runs as an `AtomicResponse` (`ctx.wait`): no other message is handled until it
    /// has finished and the layout is back in the actor. `away` answers if the layout is not
    /// there, which only a change that never gave it back would cause.
    fn change<R: 'static, F>(
        &mut self,
        change: impl FnOnce(Layout) -> F,
        away: impl FnOnce() -> R,
    ) -> AtomicResponse<Self, R>
    where
        F: std::future::Future<Output = (Layout, R)> + 'static,
    {
        let Some(layout) = self.layout.take() else {
            return AtomicResponse::new(Box::pin(actix::fut::ready(away())));
        };
        AtomicResponse::new(Box::pin(change(layout).into_actor(self).map(
            |(layout, res), act, _| {
                act.layout = Some(layout);
                res
            },
        )))
    }
}

impl Actor for RouterActor {
    type Context = Context<Self>;
}

fn layout_away<T>() -> Result<T> {
    Err(ActorError::Internal(
        "the router's layout is held by an unfinished change".into(),
    ))
}

macro_rules! layout_handler {
    ($msg:ty, $out:ty, |$l:ident, $m:ident| $body:expr) => {
        impl Handler<$msg> for RouterActor {
            type Result = AtomicResponse<Self, Result<$out>>;

            fn handle(&mut self, $m: $msg, _: &mut Context<Self>) -> Self::Result {
                self.change(
                    move |mut $l| async move {
                        let res = $body.await;
                        ($l, res)
                    },
                    layout_away,
                )
            }
        }
    };
}

layout_handler!(CreateTable, (), |l, m| l.create_table(m.desc));
layout_handler!(AlterTable, TableDescriptor, |l, m| l
    .alter_table(m.desc, m.mode));
layout_handler!(DropTable, (), |l, m| l.drop_table(&m.name));
layout_handler!(SplitRegion, (RegionId, RegionId), |l, m| l
    .split(&m.table, m.region, m.at));
layout_handler!(CloseAll, (), |l, _m| l.close_all());
layout_handler!(Checkpoint, kura_backend::CheckpointInfo, |l, m| l
    .checkpoint(&m.dest));

impl Handler<AutoSplit> for RouterActor {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, msg: AutoSplit, _: &mut Context<Self>) -> Self::Result {
        self.change(
            move |mut l| async move {
                if let Err(e) = l.split(&msg.table, msg.region, None).await {
                    tracing::warn!(table = %msg.table, region = msg.region.get(), error = %e,
                        "automatic split failed; the region will ask again later");
                    let region = l.routes.get(&msg.table).and_then(|t| {
                        t.regions
                            .iter()
                            .find(|r| r.id() == msg.region)
                            .map(|r| r.handle.addr.clone())
                    });
                    if let Some(addr) = region {
                        addr.do_send(messages::AutoSplitFailed);
                    }
                }
                (l, ())
            },
            || tracing::error!("automatic split skipped: the router's layout is away"),
        )
    }
}

/// The directory, next to `regions/`, where region directories the catalog may be too old to
/// name are moved instead of deleted (see `remove_orphans`).
pub const ORPHANED_DIR: &str = "orphaned-regions";

/// Deal with region directories the catalog does not name. Only directories named by a number
/// are touched.
///
/// - An id below the catalog's `next_region_id` was named by a committed catalog and is no
///   longer: a dropped table's (a crash between the drop's commit and its deletion): removed.
/// - An id at or past it was never named by this catalog: a crash during a create or a split
///   before its commit, or a catalog older than the directory (restored from a backup taken
///   before a split, whose parent has since dropped the moved rows). Empty: removed. Otherwise
///   moved to `<data dir>/orphaned-regions/`, with a warning: deleting it could destroy the only
///   copy of acknowledged rows.
pub(crate) fn remove_orphans(data_dir: &Path, catalog: &Catalog) -> Result<()> {
    let regions = data_dir.join(REGIONS_DIR);
    let entries = match std::fs::read_dir(&regions) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(ActorError::Internal(format!(
                "listing {}: {e}",
                regions.display()
            )));
        }
    };
    let live: std::collections::BTreeSet<RegionId> = catalog.region_ids().collect();
    let failed = |what: &str, path: &Path, e: std::io::Error| {
        ActorError::Internal(format!("{what} {}: {e}", path.display()))
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        // The edge: a directory named by a number is a region's.
        let Some(id) = name.to_str().and_then(|s| s.parse::<u64>().ok()) else {
            continue;
        };
        let id = RegionId::new(id);
        if live.contains(&id) {
            continue;
        }
        let path = entry.path();
        let empty = std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_none());
        if id < catalog.next_region_id || empty {
            tracing::warn!(region = id.get(), path = %path.display(), "removing a region directory the catalog does not name (left by a crash during a drop, or an empty one from a create)");
            std::fs::remove_dir_all(&path).map_err(|e| failed("removing", &path, e))?;
            continue;
        }
        let parking = data_dir.join(ORPHANED_DIR);
        std::fs::create_dir_all(&parking).map_err(|e| failed("creating", &parking, e))?;
        sync_dir(data_dir)?;
        let mut to = parking.join(id.to_string());
        let mut n = 1;
        while to.exists() {
            to = parking.join(format!("{id}.{n}"));
            n += 1;
        }
        tracing::warn!(region = id.get(), from = %path.display(), to = %to.display(), "moving aside a region directory the catalog does not name: a crash during a create or split, or a catalog older than the directory (restore the latest catalog, then move it back); delete it once you know it is not needed");
        std::fs::rename(&path, &to).map_err(|e| failed("moving", &path, e))?;
        sync_dir(&parking)?;
        sync_dir(&regions)?;
    }
    Ok(())
}
