//! [`RegionActor`]: the sole owner of one region's [`RegionStore`].
//!
//! One actor per region, started with `Actor::start_in_arbiter` on one of the arbiters (threads)
//! of the pool. The actor *is* the lock for its data: every read and write of the region runs in
//! its handlers, one at a time, so a row's writes are linearizable without any other locking.
//!
//! This file holds the actor's state, its start and its lifecycle (open, fail, close, stats,
//! schema changes); each kind of request has a file: `requests.rs` (reads, writes and their
//! group commit), `maintenance.rs` (flushes and compactions), `split.rs` and
//! `checkpoint.rs` (copies for backups).
//!
//! # One inbox
//! Everything reaches the region through its actix mailbox, in one order: client requests
//! (`Get`, `MultiGet`, `ScanRegion`, `Write`, sent by `RegionHandle::call` in `routing.rs`
//! through the region's in-flight gate) and control messages (flush, split, stats, close...,
//! `RegionHandle::call_unbounded`). A control message therefore finds every request sent
//! before it already handled, and the requests sent after it wait until it is done.
//!
//! # Group commit
//! A write does not touch the store: it queues the ops with their responder and, if no commit
//! is scheduled yet, schedules one with `ctx.notify(Commit)`. `notify` spawns the `Commit` as
//! one of the actor's items, and actix's context reads the mailbox until it is empty before it
//! polls the items (and reads it again before the items spawned meanwhile), so the commit runs
//! after every message already waiting has been handled: all the writes among them go to the
//! store in one `write_batch` (one fsync in `sync` durability), then every responder is
//! answered. Under load, the writes that arrive while a commit is fsyncing form the next
//! batch.
//!
//! With a sync thread (`KuraConfig::sync_thread`, `sync` durability) the fsync does not block
//! the arbiter: the batch is applied and written to the log, then fsynced on one of the
//! server's log-sync threads (`background::SyncPool`) while the arbiter goes on serving the
//! region (and the other regions on its thread). The batch stays *in flight* until the fsync
//! returns; only then are its writers answered and the next batch (everything that queued
//! meanwhile) committed. A read that touches a row of the in-flight batch is held back until
//! then, so no read ever sees a write that is not durable. Anything that changes what the
//! region owns or holds first *settles*: it fsyncs the in-flight batch on the arbiter, answers
//! it, and commits the queue synchronously.
//!
//! # Invariants
//! 1. Writes are answered only after they are durable to the durability mode (`write_batch`
//!    returned, or the in-flight batch's fsync succeeded).
//! 2. Waiting writes (every write sent before the control message: one mailbox orders both)
//!    are committed before anything that changes what the region owns or holds (split, close,
//!    flush, alter), so no acknowledged write can miss an export and no request received
//!    before a close is refused.
//! 3. A request routed by a bucket the region does not own is answered `NotOwner`, never served.
//! 4. Once the store reports a poisoned, corrupt or I/O failure the region fails closed: every
//!    later request is answered `RegionUnavailable` until the server restarts.
//! 5. At most one batch is in flight; reads of its rows wait for it, reads of other rows do not.
//! 6. Opening (recovering) the store, a split's flush and export, a flush on command, a
//!    checkpoint, the freeze that starts a background flush and the install of a background
//!    flush's or compaction's segment (a manifest write) run on a thread of their own
//!    with the store moved there, while the actor is paused (`ctx.wait`): it handles no message
//!    until the store is back, so the work sees exactly the acknowledged writes, and the arbiter
//!    (with thread per core, an HTTP worker) serves its other regions and connections meanwhile.
//!    While the pause lasts actix polls none of the actor's spawned futures either, with one
//!    exception: when a *message handler* starts the pause, actix 0.13's `ContextFut::poll`
//!    still polls the first of those futures in the same turn (it takes in the new wait only
//!    after that poll). A background flush or compaction whose result is ready at that moment
//!    runs its completion with the store away: the result waits in `deferred` and is installed
//!    right after the job's own continuation, once the store is back
//!    (`tests/paused_region.rs`).

use crate::background::{SyncLane, SyncPool};
use crate::catalog::{RegionId, SaltConfig};
use crate::error::ActorError;
use crate::memory::MemtableShare;
use crate::messages::*;
use crate::salt::{bucket_of, BucketRange, SaltBucket};
use actix::prelude::*;
use kura_storage::model::*;
use kura_storage::LogSync;
use kura_storage::{Durability, RecoveryMode, RegionStore, StoreOptions};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod checkpoint;
mod maintenance;
mod requests;
mod split;

/// Answer with the requester's own `sent` buffer in place of `answer`, an equal copy the store
/// made here: `sent` is then freed on the thread that allocated it, when the requester drops the
/// answer, and `answer` here. The other way round, both would be freed on the other thread
/// than their own, each costing the allocator a cross-thread free (~0.1 µs each on a 2-vCPU VM).
fn home(answer: &mut Vec<u8>, sent: Vec<u8>) {
    debug_assert_eq!(*answer, sent);
    *answer = sent;
}

/// Settings every region of a server shares.
#[derive(Clone)]
pub(crate) struct RegionSettings {
    pub durability: Durability,
    pub recovery: RecoveryMode,
    pub memtable_budget: usize,
    pub background_write_rate: u64,
    pub log_prealloc: u64,
    pub idempotency_window: Duration,
    pub split_threshold: Option<u64>,
    pub in_flight_limit: usize,
    pub file_system: Option<Arc<dyn kura_storage::FileSystem>>,
    /// The server's compaction pool, shared by all its regions.
    pub compaction_slots: Arc<crate::background::CompactionSlots>,
    /// The server's memtable budget, shared by all its regions.
    pub memtables: Arc<crate::memory::MemtableBudget>,
    /// Flush a memtable once its oldest write is this old, however little it holds (`None`:
    /// never); see `RegionActor::memtable_too_old`.
    pub memtable_max_age: Option<Duration>,
    /// The server's log-sync threads, with `sync` durability and `KuraConfig::sync_thread`;
    /// `None`: a region fsyncs on its arbiter.
    pub sync_pool: Option<Arc<SyncPool>>,
}

/// Everything needed to start a region actor.
pub(crate) struct RegionSpec {
    pub id: RegionId,
    pub table: String,
    pub salt: SaltConfig,
    pub range: BucketRange,
    pub dir: PathBuf,
    pub families: Vec<FamilyDescriptor>,
    pub settings: RegionSettings,
    pub router: Recipient<AutoSplit>,
    /// The catalog names this region from an earlier run (server start): its directory must
    /// exist. A missing one fails the region closed instead of serving it empty (its rows would
    /// read as absent). False for a region being created (a new table, a split).
    pub existing: bool,
}

/// A row-ownership predicate, as [`StoreOptions::owns_row`] takes it.
pub(crate) type OwnsRow = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// The predicate "this row's bucket is in `range`", or `None` when the range is the whole
/// table (no filtering needed).
pub(crate) fn owns_row_predicate(salt: &SaltConfig, range: BucketRange) -> Option<OwnsRow> {
    if range.is_whole(salt.buckets) {
        return None;
    }
    let salt = salt.clone();
    Some(Arc::new(move |row: &[u8]| {
        range.contains(bucket_of(row, &salt))
    }))
}

/// A write waiting for the next commit: where its result goes.
enum Slot {
    /// Index into the batch handed to `write_batch`.
    Op(usize),
    /// Answered without reaching the store.
    Ready(OpResult),
}

/// A batch written to the log whose fsync runs on the sync thread.
struct InFlight {
    /// Tells this batch's fsync from an older one's (after a settle).
    gen: u64,
    replies: Vec<(Reply<OneOrMore<OpResult>>, Vec<Slot>)>,
    results: Vec<Option<Result<WriteOutcome, ActorError>>>,
    /// The rows the batch wrote: reads of them wait for the fsync.
    rows: HashSet<Vec<u8>>,
}

/// A read request: served at once, or held back until the in-flight batch is durable if it
/// touches one of the batch's rows.
enum Read {
    Get(Get),
    MultiGet(MultiGet),
    Scan(ScanRegion),
}

impl Read {
    /// Whether the read would see one of `rows`.
    fn touches(&self, rows: &HashSet<Vec<u8>>) -> bool {
        match self {
            Read::Get(m) => rows.contains(&m.row),
            Read::MultiGet(m) => m.rows.iter().any(|(_, r)| rows.contains(r)),
            Read::Scan(m) => rows.iter().any(|r| m.spec.contains(r)),
        }
    }
}

/// The result of an in-flight batch's fsync, as the sync thread hands it back.
type SyncResult = Result<(LogSync, kura_storage::Result<Duration>), ActorError>;

/// One region: its store, the buckets it owns, and the writes waiting for the next commit.
pub struct RegionActor {
    id: RegionId,
    table: String,
    salt: SaltConfig,
    range: BucketRange,
    dir: PathBuf,
    settings: RegionSettings,
    store: Option<RegionStore>,
    /// Why the region refuses requests (failed store or closed); `None` while healthy.
    failed: Option<String>,
    pending_ops: Vec<KeyedWrite>,
    pending_replies: Vec<(Reply<OneOrMore<OpResult>>, Vec<Slot>)>,
    commit_scheduled: bool,
    router: Recipient<AutoSplit>,
    /// An automatic split was requested and the compaction that follows it has not finished.
    split_requested: bool,
    /// After a failed automatic split: not before this instant may the region ask again.
    split_retry_at: Option<std::time::Instant>,
    /// The region opened narrowed by a split whose moved rows its plain (not reference)
    /// segments may hold (a split made by an older build, which copied rows): a major
    /// compaction drops them before the region may ask for another split.
    split_cleanup_due: bool,
    /// Compactions running on background threads (`MAX_BACKGROUND_COMPACTIONS` started by the
    /// region itself at most, on disjoint segments).
    compactions: u8,
    /// Compactions asked for (`Compact`) while others ran: started once none runs.
    asked_compactions: Vec<Compact>,
    in_flight: Option<InFlight>,
    held_reads: Vec<Read>,
    sync_gen: u64,
    /// This region's lane to the server's log-sync threads, in `sync` durability with
    /// `KuraConfig::sync_thread`; `None`: fsync on the arbiter.
    syncer: Option<SyncLane>,
    /// The store is on another thread for a job (`with_store_off_thread`); one of this actor's
    /// spawned futures may still complete right after (invariant 6).
    store_away: bool,
    /// Background results (flush, compaction) that completed while the store was away,
    /// applied when it is back.
    deferred: Vec<Deferred>,
    /// A split waiting for the background flush it started to be installed, with the number
    /// of flushes started for it so far (`split::FLUSH_ROUNDS` at most).
    split_after_flush: Option<(PrepareSplit, u8)>,
    /// This region's part of the server's memtable budget.
    memtables: MemtableShare,
}

/// A background result waiting for the store to come back.
type Deferred = Box<dyn FnOnce(&mut RegionActor, &mut Context<RegionActor>)>;

impl RegionActor {
    /// Start the region on `arbiter`; the store is opened (recovered) on that thread. Every
    /// message reaches it through the returned address with `do_send`, which actix's mailbox
    /// capacity does not hold back: client requests are bounded by the handle's in-flight gate
    /// at `in_flight_limit`, and the router's and operators' control messages are few.
    pub(crate) fn launch(spec: RegionSpec, arbiter: &actix::ArbiterHandle) -> Addr<RegionActor> {
        RegionActor::start_in_arbiter(arbiter, move |ctx| {
            let memtables = MemtableShare::new(spec.settings.memtables.clone());
            let mut act = RegionActor {
                id: spec.id,
                table: spec.table,
                salt: spec.salt,
                range: spec.range,
                dir: spec.dir,
                settings: spec.settings,
                store: None,
                failed: None,
                pending_ops: Vec::new(),
                pending_replies: Vec::new(),
                commit_scheduled: false,
                router: spec.router,
                split_requested: false,
                split_retry_at: None,
                split_cleanup_due: false,
                compactions: 0,
                asked_compactions: Vec::new(),
                in_flight: None,
                held_reads: Vec::new(),
                sync_gen: 0,
                syncer: None,
                store_away: false,
                deferred: Vec::new(),
                split_after_flush: None,
                memtables,
            };
            act.syncer = act.settings.sync_pool.as_ref().and_then(|p| p.lane());
            act.open(spec.families, spec.existing, ctx);
            act
        })
    }
    fn options(&self, families: Vec<FamilyDescriptor>, range: BucketRange) -> StoreOptions {
        StoreOptions {
            families,
            durability: self.settings.durability,
            recovery: self.settings.recovery,
            memtable_budget: self.settings.memtable_budget,
            owns_row: owns_row_predicate(&self.salt, range),
            // The actor flushes on a blocking thread (`maybe_flush`): writes never wait for it.
            background_flush: true,
            background_write_rate: self.settings.background_write_rate,
            // A large log (a crash after heavy writing) decodes on every core.
            replay_threads: 0,
            log_prealloc: self.settings.log_prealloc,
        }
    }
    /// Open (recover) the store on a thread of its own while the actor is paused: a long log
    /// replay holds back this region's requests only, not its arbiter's other regions and
    /// connections, and the regions of one arbiter recover in parallel.
    fn open(&mut self, families: Vec<FamilyDescriptor>, existing: bool, ctx: &mut Context<Self>) {
        let present = match &self.settings.file_system {
            Some(fs) => fs.exists(&self.dir),
            None => self.dir.is_dir(),
        };
        if existing && !present {
            self.fail(format!(
                "its directory {} is missing (the catalog names it): restore it from a backup, \
                 or drop the table; the region stays closed rather than serve its rows as absent",
                self.dir.display()
            ));
            return;
        }
        let options = self.options(families, self.range);
        let (fs, dir) = (self.settings.file_system.clone(), self.dir.clone());
        let job = crate::background::run_now("open", move || match fs {
            Some(fs) => RegionStore::open_with_fs(fs, &dir, options),
            None => RegionStore::open(&dir, options),
        });
        ctx.wait(
            actix::fut::wrap_future::<_, Self>(job).map(|res, act, ctx| {
                match res {
                    Ok(opened) => act.opened(opened),
                    Err(e) => act.fail(format!("opening the store: {e}")),
                }
                // `started` ran before the store was open: the cleanup `opened` asked for
                // starts here.
                if act.split_cleanup_due && act.store.is_some() && act.compactions == 0 {
                    act.start_compaction(true, None, ctx);
                } else {
                    // Reference segments a split left (this region may be its new half).
                    act.maybe_compact(ctx);
                }
            }),
        );
    }
    fn opened(
        &mut self,
        opened: kura_storage::Result<(RegionStore, kura_storage::RecoveryReport)>,
    ) {
        match opened {
            Ok((mut store, report)) => {
                if report.truncated_at.is_some() {
                    tracing::warn!(
                        region = self.id.get(),
                        ?report,
                        "region log was damaged at the tail"
                    );
                }
                // A region narrowed by a split before the last restart may still hold the
                // moved rows in its segments: drop them before its size can ask for a split.
                let narrowed = !self.range.is_whole(self.salt.buckets);
                let over = self
                    .settings
                    .split_threshold
                    .is_some_and(|t| store.approximate_size() > t);
                if narrowed && over {
                    self.split_requested = true;
                    self.split_cleanup_due = true;
                }
                store.set_idempotency_options(kura_storage::IdempotencyOptions {
                    window: self.settings.idempotency_window,
                    ..Default::default()
                });
                self.store = Some(store);
            }
            Err(e) => self.fail(format!("opening the store: {e}")),
        }
    }
    fn fail(&mut self, reason: String) {
        tracing::error!(region = self.id.get(), table = %self.table, %reason, "region fails closed");
        if self.failed.is_none() {
            self.failed = Some(reason);
        }
    }
    fn unavailable(&self) -> ActorError {
        ActorError::RegionUnavailable {
            region: self.id.get(),
            reason: self
                .failed
                .clone()
                .unwrap_or_else(|| "store is not open".into()),
        }
    }
    /// The store, if the region is healthy.
    fn store(&mut self) -> Result<&mut RegionStore, ActorError> {
        if self.failed.is_some() || self.store.is_none() {
            return Err(self.unavailable());
        }
        self.store
            .as_mut()
            .ok_or_else(|| ActorError::Internal("store vanished".into()))
    }
    /// Map a store error, failing the region closed when it is fatal.
    fn store_err(&mut self, e: kura_storage::Error) -> ActorError {
        let (err, fatal) = crate::error::from_store(e, &self.table, self.id);
        if fatal {
            self.fail(err.to_string());
        }
        err
    }
    fn owns(&self, bucket: SaltBucket) -> bool {
        self.range.contains(bucket)
    }
    /// Run `job` on the store on a thread of its own (normal priority), the store moved there,
    /// while this actor is paused (`ctx.wait`, invariant 6): its requests wait in its mailbox,
    /// as they would behind the same work done inline, while its arbiter (an HTTP worker with
    /// thread per core) serves its other regions and connections. Then `then` runs on the
    /// actor with the store back (a store error already mapped, failing the region closed if
    /// fatal). The caller has checked that the store is usable.
    fn with_store_off_thread<T: Send + 'static>(
        &mut self,
        what: &'static str,
        ctx: &mut Context<Self>,
        job: impl FnOnce(&mut RegionStore) -> kura_storage::Result<T> + Send + 'static,
        then: impl FnOnce(&mut Self, Result<T, ActorError>, &mut Context<Self>) + 'static,
    ) {
        let Some(mut store) = self.store.take() else {
            then(self, Err(self.unavailable()), ctx);
            return;
        };
        self.store_away = true;
        let work = crate::background::run_now(what, move || {
            let res = job(&mut store);
            (store, res)
        });
        ctx.wait(work.into_actor(self).map(move |out, act, ctx| {
            act.store_away = false;
            let res = match out {
                Ok((store, res)) => {
                    act.store = Some(store);
                    res.map_err(|e| act.store_err(e))
                }
                // The store went down with the thread: fail closed (its files are intact; a
                // restart recovers them).
                Err(e) => {
                    act.fail(e.to_string());
                    Err(e)
                }
            };
            then(act, res, ctx);
            // Background results that arrived meanwhile (each defers itself again if `then`
            // sent the store away once more).
            for done in std::mem::take(&mut act.deferred) {
                done(act, ctx);
            }
        }));
    }
}

impl Actor for RegionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // A region that stopped writing still flushes for the server's memtable budget if it
        // holds its share of it (the writers alone may all hold less, memory.rs), and once its
        // memtable is too old: it looks without a write of its own.
        if let Some(period) = self.idle_check_period() {
            ctx.run_interval(period, |act, ctx| {
                if act.memtables.over() || act.memtable_too_old() {
                    act.maybe_flush(ctx, true);
                }
            });
        }
        if let Durability::Interval(every) = self.settings.durability {
            let period = (every / 2).max(Duration::from_millis(1));
            ctx.run_interval(period, |act, _| {
                if let Ok(store) = act.store() {
                    if let Err(e) = store.sync_if_due() {
                        let _ = act.store_err(e);
                    }
                }
            });
        }
    }
}

impl Handler<Stats> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Stats, _: &mut Context<Self>) {
        let mut stats = self.store.as_ref().map(|s| s.stats()).unwrap_or_default();
        if self.failed.is_some() {
            stats.poisoned = true;
        }
        let _ = msg.reply.send(Ok((self.range, stats)));
    }
}

impl Handler<SetFamilies> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: SetFamilies, ctx: &mut Context<Self>) {
        self.settle(ctx);
        let res = match self.store() {
            Ok(store) => store.set_families(msg.families),
            Err(e) => {
                let _ = msg.reply.send(Err(e.into()));
                return;
            }
        };
        let res = res.map_err(|e| self.store_err(e).into());
        let _ = msg.reply.send(res);
    }
}

impl Handler<Close> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Close, ctx: &mut Context<Self>) {
        self.settle(ctx);
        let res = match self.store.take() {
            // A failed store has nothing trustworthy to flush: drop it, recovery runs at the
            // next start.
            Some(_) if self.failed.is_some() => Ok(()),
            Some(store) => store
                .close()
                .map_err(|e| crate::error::from_store(e, &self.table, self.id).0),
            None => Ok(()),
        };
        if self.failed.is_none() {
            self.failed = Some("region is closed".into());
        }
        let _ = msg.reply.send(res.map_err(Reject::Failed));
        ctx.stop();
    }
}
