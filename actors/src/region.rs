//! [`RegionActor`]: the sole owner of one region's [`RegionStore`].
//!
//! One actor per region, started with `Actor::start_in_arbiter` on one of the arbiters (threads)
//! of the pool. The actor *is* the lock for its data: every read and write of the region runs in
//! its handlers, one at a time, so a row's writes are linearizable without any other locking.
//!
//! # Group commit
//! Client requests (get, multi-get, scan, write) arrive on the region's request queue
//! (`RegionHandle::call`, `routing.rs`), control messages (flush, split, stats, close...)
//! through the actix mailbox. A write does not touch the store: it queues the ops with their
//! responder and, if no commit is scheduled yet, schedules one with `ctx.notify(Commit)`. actix
//! polls an actor's items in the order they were spawned, and the request queue (spawned first)
//! is read until it is empty, so the commit runs after every request already waiting has been
//! queued: all of them go to the store in one `write_batch` (one fsync in `sync` durability),
//! then every responder is answered. Under load, the writes that arrive while a commit is
//! fsyncing form the next batch.
//!
//! With a sync thread (`KuraConfig::sync_thread`, `sync` durability) the fsync does not block
//! the arbiter: the batch is applied and written to the log, then fsynced on the region's sync
//! thread (`background::Syncer`) while the arbiter goes on serving the region (and the
//! other regions on its thread). The batch stays *in flight* until the fsync returns; only then
//! are its writers answered and the next batch (everything that queued meanwhile) committed. A
//! read that touches a row of the in-flight batch is held back until then, so no read ever sees
//! a write that is not durable. Anything that changes what the region owns or holds first
//! *settles*: it fsyncs the in-flight batch on the arbiter, answers it, and commits the queue
//! synchronously.
//!
//! # Invariants
//! 1. Writes are answered only after they are durable to the durability mode (`write_batch`
//!    returned, or the in-flight batch's fsync succeeded).
//! 2. Waiting writes, those still in the request queue included, are committed before anything
//!    that changes what the region owns or holds (split, close, flush, alter), so no
//!    acknowledged write can miss an export and no request received before a close is refused.
//! 3. A request routed by a bucket the region does not own is answered `NotOwner`, never served.
//! 4. Once the store reports a poisoned, corrupt or I/O failure the region fails closed: every
//!    later request is answered `RegionUnavailable` until the server restarts.
//! 5. At most one batch is in flight; reads of its rows wait for it, reads of other rows do not.
//! 6. Opening (recovering) the store, a split's flush and export, a flush on command and the
//!    freeze that starts a background flush run on a thread of their own with the store moved
//!    there, while the actor is paused (`ctx.wait`): it handles no message until the store is
//!    back, so the work sees exactly the acknowledged writes, and the arbiter (with thread per
//!    core, an HTTP worker) serves its other regions and connections meanwhile. A background
//!    flush or compaction that finishes meanwhile (actix still polls the actor's spawned
//!    futures) waits in `deferred` and is installed once the store is back.

use crate::background::Syncer;
use crate::catalog::SaltConfig;
use crate::error::ActorError;
use crate::messages::*;
use crate::routing::RequestSender;
use crate::salt::bucket_of;
use actix::prelude::*;
use kura_storage::model::*;
use kura_storage::LogSync;
use kura_storage::{Durability, RecoveryMode, RegionStore, StoreOptions};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Answer with the requester's own `sent` buffer in place of `answer`, an equal copy the store
/// made here: `sent` is then freed on the thread that allocated it, when the requester drops the
/// answer, and `answer` here. The other way round, both would be freed on the other thread
/// than their own, each costing the allocator a cross-thread free (~0.1 µs each on a 2-vCPU VM).
fn home(answer: &mut Vec<u8>, sent: Vec<u8>) {
    debug_assert_eq!(*answer, sent);
    *answer = sent;
}

/// How long a region waits before asking again for a split that failed.
const SPLIT_RETRY: Duration = Duration::from_secs(30);

/// Segments after which a region starts a minor compaction by itself.
const COMPACT_AT_SEGMENTS: u64 = 6;

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
    pub sync_thread: bool,
    pub file_system: Option<Arc<dyn kura_storage::FileSystem>>,
}

/// Everything needed to start a region actor.
pub(crate) struct RegionSpec {
    pub id: u64,
    pub table: String,
    pub salt: SaltConfig,
    pub range: (u32, u32),
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

/// The predicate "this row's bucket is in `[start, end)`", or `None` when the range is the whole
/// table (no filtering needed).
pub(crate) fn owns_row_predicate(salt: &SaltConfig, (start, end): (u32, u32)) -> Option<OwnsRow> {
    if start == 0 && end >= salt.buckets {
        return None;
    }
    let salt = salt.clone();
    Some(Arc::new(move |row: &[u8]| {
        let b = bucket_of(row, &salt);
        b >= start && b < end
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
    id: u64,
    table: String,
    salt: SaltConfig,
    range: (u32, u32),
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
    /// A split narrowed the region and no major compaction has yet dropped the moved rows.
    split_cleanup_due: bool,
    compacting: bool,
    in_flight: Option<InFlight>,
    held_reads: Vec<Read>,
    sync_gen: u64,
    /// Started with the region in `sync` durability; `None`: fsync on the arbiter.
    syncer: Option<Syncer>,
    /// The store is on another thread for a job (`with_store_off_thread`); actix may still
    /// poll this actor's other futures meanwhile.
    store_away: bool,
    /// Background results (flush, compaction) that arrived while the store was away, applied
    /// when it is back.
    deferred: Vec<Deferred>,
    /// Client requests (`RegionHandle::call`, `routing.rs`), read by [`RequestQueue`] and
    /// drained by [`RegionActor::settle`].
    requests: tokio::sync::mpsc::UnboundedReceiver<ClientRequest>,
}

/// A background result waiting for the store to come back.
type Deferred = Box<dyn FnOnce(&mut RegionActor, &mut Context<RegionActor>)>;

impl RegionActor {
    /// Start the region on `arbiter`; the store is opened (recovered) on that thread. Returns
    /// its mailbox (control messages) and its request queue (client requests).
    pub(crate) fn launch(
        spec: RegionSpec,
        arbiter: &actix::ArbiterHandle,
    ) -> (Addr<RegionActor>, RequestSender) {
        let (requests, queue) = tokio::sync::mpsc::unbounded_channel();
        let addr = RegionActor::start_in_arbiter(arbiter, move |ctx| {
            // Client requests: bounded by the handle's in-flight gate at `in_flight_limit`.
            // The actix mailbox carries the router's and operators' control messages, sent with
            // `do_send`, which no mailbox bound holds back.
            ctx.spawn(RequestQueue { idle: 0 });
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
                compacting: false,
                in_flight: None,
                held_reads: Vec::new(),
                sync_gen: 0,
                syncer: None,
                store_away: false,
                deferred: Vec::new(),
                requests: queue,
            };
            if act.settings.durability == Durability::Sync && act.settings.sync_thread {
                act.syncer = Syncer::start(act.id)
                    .inspect_err(|e| {
                        tracing::warn!(region = act.id, error = %e, "no log-sync thread: fsyncs run on the arbiter");
                    })
                    .ok();
            }
            act.open(spec.families, spec.existing, ctx);
            act
        });
        (addr, requests)
    }

    fn options(&self, families: Vec<FamilyDescriptor>, range: (u32, u32)) -> StoreOptions {
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
                if act.split_cleanup_due && act.store.is_some() && !act.compacting {
                    act.start_compaction(true, None, ctx);
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
                        region = self.id,
                        ?report,
                        "region log was damaged at the tail"
                    );
                }
                // A region narrowed by a split before the last restart may still hold the
                // moved rows in its segments: drop them before its size can ask for a split.
                let narrowed = self.range.0 > 0 || self.range.1 < self.salt.buckets;
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
        tracing::error!(region = self.id, table = %self.table, %reason, "region fails closed");
        if self.failed.is_none() {
            self.failed = Some(reason);
        }
    }

    fn unavailable(&self) -> ActorError {
        ActorError::RegionUnavailable {
            region: self.id,
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

    fn owns(&self, bucket: u32) -> bool {
        bucket >= self.range.0 && bucket < self.range.1
    }

    /// Before anything that changes what the region owns or holds: make the in-flight batch
    /// durable here and now and answer it, take in the requests already waiting in the request
    /// queue (they were sent before the control message being handled, or with it), then
    /// commit every queued write synchronously.
    fn settle(&mut self, ctx: &mut Context<Self>) {
        if let Some(f) = self.in_flight.take() {
            let outcome = match self.store.as_mut() {
                Some(store) => store.sync(),
                None => Err(kura_storage::Error::Poisoned("store is not open".into())),
            };
            let outcome = outcome.map_err(|e| self.store_err(e));
            self.land(f, outcome);
        }
        self.drain_requests(ctx);
        self.commit(false, ctx);
    }

    /// Hand every queued write to the store in one batch; answer them all once it is durable:
    /// now, or (`pipelined`, with a sync thread, in `sync` durability) when the sync thread
    /// has fsynced it. Nothing happens while a batch is in flight: its end commits the queue.
    fn commit(&mut self, pipelined: bool, ctx: &mut Context<Self>) {
        self.commit_scheduled = false;
        if self.pending_replies.is_empty() || self.in_flight.is_some() {
            return;
        }
        let ops = std::mem::take(&mut self.pending_ops);
        let replies = std::mem::take(&mut self.pending_replies);
        let deferred = pipelined && self.syncer.is_some();
        let rows: HashSet<Vec<u8>> = if deferred {
            ops.iter().map(|op| op.row().to_vec()).collect()
        } else {
            HashSet::new()
        };
        let n = ops.len();
        let (results, sync) = match self.store() {
            Ok(_) if n == 0 => (Vec::new(), None),
            Ok(store) => {
                let (raw, sync) = if deferred {
                    store.write_batch_deferred(ops)
                } else {
                    (store.write_batch(ops), None)
                };
                // Mapping may fail the region closed (poisoned by a failed fsync).
                let results = raw
                    .into_iter()
                    .map(|r| Some(r.map_err(|e| self.store_err(e))))
                    .collect();
                (results, sync)
            }
            Err(e) => (vec![Some(Err(e)); n], None),
        };
        // Before answering: a caller that saw its write acknowledged can rely on the router
        // having been told about the size.
        self.maybe_request_split();
        match (sync, &self.syncer) {
            (Some(sync), Some(syncer)) => {
                self.sync_gen += 1;
                let gen = self.sync_gen;
                let job = syncer.sync(sync);
                self.in_flight = Some(InFlight {
                    gen,
                    replies,
                    results,
                    rows,
                });
                ctx.spawn(
                    job.into_actor(self)
                        .map(move |res, act, ctx| act.synced(gen, res, ctx)),
                );
            }
            _ => self.answer(replies, results),
        }
        self.maybe_compact(ctx);
        // From `settle` (not pipelined) the caller goes on using the store: freeze inline.
        self.maybe_flush(ctx, pipelined);
    }

    /// The sync thread fsynced batch `gen` (or failed to).
    fn synced(&mut self, gen: u64, res: SyncResult, ctx: &mut Context<Self>) {
        let outcome = match res {
            Ok((sync, took)) => match self.store.as_mut() {
                // Recorded even for a batch a settle answered already: a failed fsync
                // poisons the store whichever batch it was for.
                Some(store) => store.finish_sync(sync, took).map_err(|e| self.store_err(e)),
                None => Err(self.unavailable()),
            },
            Err(e) => {
                self.fail(e.to_string());
                Err(e)
            }
        };
        let Some(f) = self.in_flight.take_if(|f| f.gen == gen) else {
            return;
        };
        self.land(f, outcome);
        self.commit(true, ctx);
    }

    /// Answer an in-flight batch once its fsync ended, then serve the reads it held back.
    fn land(&mut self, f: InFlight, outcome: Result<(), ActorError>) {
        let results = match outcome {
            Ok(()) => f.results,
            Err(e) => f.results.iter().map(|_| Some(Err(e.clone()))).collect(),
        };
        self.answer(f.replies, results);
        for read in std::mem::take(&mut self.held_reads) {
            self.read(read);
        }
    }

    /// Serve `read`, or hold it back if it touches a row of the in-flight batch (invariant 5).
    fn read(&mut self, read: Read) {
        let held = self
            .in_flight
            .as_ref()
            .is_some_and(|f| read.touches(&f.rows));
        match read {
            read if held => self.held_reads.push(read),
            Read::Get(msg) => self.get(msg),
            Read::MultiGet(msg) => self.multi_get(msg),
            Read::Scan(msg) => self.scan(msg),
        }
    }

    fn answer(
        &mut self,
        replies: Vec<(Reply<OneOrMore<OpResult>>, Vec<Slot>)>,
        mut results: Vec<Option<Result<WriteOutcome, ActorError>>>,
    ) {
        for (reply, slots) in replies {
            let answer = slots
                .into_iter()
                .map(|slot| match slot {
                    Slot::Ready(r) => r,
                    Slot::Op(i) => {
                        OpResult::Done(results.get_mut(i).and_then(Option::take).unwrap_or_else(
                            || Err(ActorError::Internal("write result missing".into())),
                        ))
                    }
                })
                .collect();
            let _ = reply.send(Ok(answer));
        }
    }

    /// Once the memtable is full, freeze it and write it to a segment on a blocking thread;
    /// writes go on into a fresh memtable and log meanwhile, reads see both. One flush at a
    /// time: if the new memtable fills up before this one is installed, the store flushes
    /// inline at twice the budget (backpressure instead of unbounded memory).
    ///
    /// `off_thread`: the freeze itself (sync the log, create the next one: a file and a
    /// directory fsync, milliseconds) also runs off the arbiter, the region paused meanwhile
    /// (invariant 6). Only where nothing after this call uses the store synchronously: not
    /// inside `settle`, whose callers go on with the store.
    fn maybe_flush(&mut self, ctx: &mut Context<Self>, off_thread: bool) {
        let Ok(store) = self.store() else {
            return;
        };
        if !store.wants_flush() {
            return;
        }
        if off_thread {
            self.with_store_off_thread(
                "freeze",
                ctx,
                |store| store.flush_task(),
                |act, res, ctx| {
                    // An error was mapped (failing the region closed if fatal) on the way.
                    if let Ok(Some(task)) = res {
                        act.run_flush(task, ctx);
                    }
                },
            );
            return;
        }
        match store.flush_task() {
            Ok(Some(task)) => self.run_flush(task, ctx),
            Ok(None) => {}
            Err(e) => {
                let _ = self.store_err(e);
            }
        }
    }

    /// Write a frozen memtable to a segment on a background thread, then install it.
    fn run_flush(&mut self, task: kura_storage::FlushTask, ctx: &mut Context<Self>) {
        let job = crate::background::run("flush", move || task.run());
        ctx.spawn(
            job.into_actor(self)
                .map(|res, act, ctx| act.flush_done(res, ctx)),
        );
    }

    /// A background flush finished: install its segment (once the store is back, if a job
    /// has it on another thread now).
    fn flush_done(
        &mut self,
        res: Result<kura_storage::FlushOutput, ActorError>,
        ctx: &mut Context<Self>,
    ) {
        if self.store_away {
            self.deferred
                .push(Box::new(move |act, ctx| act.flush_done(res, ctx)));
            return;
        }
        match res {
            Ok(output) => {
                // The store may have been closed or reopened meanwhile: then the output
                // is stale and the store deletes it.
                if let Some(store) = self.store.as_mut() {
                    match store.install_flush(output) {
                        // Freeing the memtable takes a while: not on the actor's thread.
                        Ok(retired) => crate::background::drop_later(retired),
                        Err(e) => {
                            let _ = self.store_err(e);
                        }
                    }
                }
            }
            Err(e) => self.fail(e.to_string()),
        }
        self.maybe_request_split();
        self.maybe_compact(ctx);
        self.maybe_flush(ctx, true);
    }

    /// Merge segments in the background once flushes have piled up enough of them that reads
    /// would pay for it (the store flushes on its own but never compacts on its own).
    fn maybe_compact(&mut self, ctx: &mut Context<Self>) {
        if self.compacting {
            return;
        }
        let segments = self.store.as_ref().map_or(0, |s| s.stats().segments);
        if segments >= COMPACT_AT_SEGMENTS {
            self.start_compaction(false, None, ctx);
        }
    }

    fn maybe_request_split(&mut self) {
        let Some(threshold) = self.settings.split_threshold else {
            return;
        };
        if self.split_requested || self.compacting || self.range.1 - self.range.0 < 2 {
            return;
        }
        if self
            .split_retry_at
            .is_some_and(|t| std::time::Instant::now() < t)
        {
            return;
        }
        let Some(store) = self.store.as_ref() else {
            return;
        };
        if store.approximate_size() > threshold {
            self.split_requested = true;
            self.router.do_send(AutoSplit {
                table: self.table.clone(),
                region: self.id,
            });
        }
    }

    /// Compact on a blocking thread, then install the result on the actor's thread.
    fn start_compaction(&mut self, major: bool, reply: Option<Reply<()>>, ctx: &mut Context<Self>) {
        let task = match self.store() {
            Ok(store) => store.compaction_task(major),
            Err(e) => {
                if let Some(r) = reply {
                    let _ = r.send(Err(e.into()));
                }
                return;
            }
        };
        // A major compaction task made now filters with the narrowed ownership predicate.
        let cleanup = major && std::mem::take(&mut self.split_cleanup_due);
        let Some(task) = task else {
            // Nothing to compact: the size already reflects only what the region holds.
            if cleanup {
                self.split_requested = false;
            }
            if let Some(r) = reply {
                let _ = r.send(Ok(()));
            }
            return;
        };
        self.compacting = true;
        let job = crate::background::run("compaction", move || task.run());
        ctx.spawn(
            job.into_actor(self)
                .map(move |res, act, ctx| act.compaction_done(res, cleanup, reply, ctx)),
        );
    }

    /// A background compaction finished: install its segment (once the store is back, if a
    /// job has it on another thread now) and answer whoever asked for it.
    fn compaction_done(
        &mut self,
        res: Result<kura_storage::Result<kura_storage::CompactionOutput>, ActorError>,
        cleanup: bool,
        reply: Option<Reply<()>>,
        ctx: &mut Context<Self>,
    ) {
        if self.store_away {
            self.deferred.push(Box::new(move |act, ctx| {
                act.compaction_done(res, cleanup, reply, ctx)
            }));
            return;
        }
        self.compacting = false;
        let out = match res {
            Ok(Ok(output)) => match self.store() {
                Ok(store) => match store.install_compaction(output) {
                    Ok(()) => Ok(()),
                    Err(e) => Err(self.store_err(e)),
                },
                Err(e) => Err(e),
            },
            Ok(Err(e)) => Err(self.store_err(e)),
            Err(e) => Err(e),
        };
        if let Some(r) = reply {
            let _ = r.send(out.map_err(Reject::Failed));
        }
        if self.split_cleanup_due {
            // Another split happened while this compaction ran.
            self.start_compaction(true, None, ctx);
        } else if cleanup {
            // The rows a split moved away are gone, so the size now reflects what the
            // region owns: it may ask for a split again.
            self.split_requested = false;
        }
    }
}

impl Actor for RegionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
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

/// Reads the region's request queue ([`RegionActor::requests`]) as the actor's mailbox is read:
/// every request waiting is handled, one at a time, before the actor's notified items run (so
/// a group commit takes in every write already queued), and none while the actor waits.
/// (actix's `add_stream` would do, except that it yields after 16 items: a group commit would
/// then take at most 16 writes.) `poll_recv` keeps to the task's cooperative budget (128
/// requests a poll, then the actor's other items and the arbiter's other tasks run) and reads a
/// send still being written as empty; `try_recv` would do neither (it parks the thread until
/// that send completes).
///
/// Found empty, the queue is looked at again on the arbiter's next few passes over its tasks
/// ([`RequestQueue::IDLE_POLLS`], `is_empty`, which registers nothing) before the actor goes
/// to sleep on it. A request sent to a region that sleeps wakes its task, and from another
/// thread that wake is the dearest part of a crossing (the task's state, the arbiter's run
/// queue and its parker change cores); a region under load finds its next request on one of
/// those passes, and its senders find no waker to wake. An idle region pays a few looks at an
/// empty queue, then sleeps as before. (Measured in alternating rounds of the actors bench's
/// `point_ops_alternating`: ~5% less time per round on 2 arbiters.)
struct RequestQueue {
    /// Consecutive polls that found the queue empty.
    idle: u32,
}

impl RequestQueue {
    /// Polls of an empty queue before the region sleeps on it.
    const IDLE_POLLS: u32 = 8;
}

impl ActorFuture<RegionActor> for RequestQueue {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        act: &mut RegionActor,
        ctx: &mut Context<RegionActor>,
        task: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        // Paused (`ctx.wait`): actix polls this again once the wait is over.
        while !ctx.waiting() {
            if self.idle < Self::IDLE_POLLS && act.requests.is_empty() {
                // Polled again after the arbiter's other ready tasks, without a wake.
                self.idle += 1;
                task.waker().wake_by_ref();
                return std::task::Poll::Pending;
            }
            match act.requests.poll_recv(task) {
                std::task::Poll::Ready(Some(request)) => {
                    self.idle = 0;
                    act.handle_request(request, ctx);
                }
                // Every handle is gone (the region left the routing table): nothing more will
                // come. The actor stops when it is closed, not here.
                std::task::Poll::Ready(None) => return std::task::Poll::Ready(()),
                // Asleep on the queue (a sender wakes the task), or the budget is spent (tokio
                // has woken the task already), or a send is still being written (its sender
                // wakes the task when done).
                std::task::Poll::Pending => return std::task::Poll::Pending,
            }
        }
        std::task::Poll::Pending
    }
}

impl RegionActor {
    /// Handle every request already waiting in the queue: what a control message finds queued
    /// ahead of it is served before it, as one mailbox would have ordered them.
    fn drain_requests(&mut self, ctx: &mut Context<Self>) {
        while let Ok(request) = self.requests.try_recv() {
            self.handle_request(request, ctx);
        }
    }

    fn handle_request(&mut self, request: ClientRequest, ctx: &mut Context<Self>) {
        match request {
            ClientRequest::Get(msg) => self.read(Read::Get(msg)),
            ClientRequest::MultiGet(msg) => self.read(Read::MultiGet(msg)),
            ClientRequest::Scan(msg) => self.read(Read::Scan(msg)),
            ClientRequest::Write(msg) => self.write(msg, ctx),
        }
    }

    fn get(&mut self, msg: Get) {
        if !self.owns(msg.bucket) {
            let _ = msg.reply.send(Err(Reject::NotOwner));
            return;
        }
        let res = match self.store() {
            Ok(store) => store.get_filtered(&msg.row, &msg.read, msg.filter.as_deref()),
            Err(e) => {
                let _ = msg.reply.send(Err(e.into()));
                return;
            }
        };
        let mut res = res.map_err(|e| self.store_err(e).into());
        if let Ok(Some(row)) = &mut res {
            // The caller's own copy of the key goes back to its thread (see `home`).
            home(&mut row.key, msg.row);
        }
        let _ = msg.reply.send(res);
    }

    fn multi_get(&mut self, msg: MultiGet) {
        if msg.rows.iter().any(|(b, _)| !self.owns(*b)) {
            let _ = msg.reply.send(Err(Reject::NotOwner));
            return;
        }
        let mut out = Vec::with_capacity(msg.rows.len());
        for (_, row) in &msg.rows {
            let res = match self.store() {
                Ok(store) => store.get(row, &msg.read),
                Err(e) => {
                    let _ = msg.reply.send(Err(e.into()));
                    return;
                }
            };
            match res {
                Ok(r) => out.push(r),
                Err(e) => {
                    let e = self.store_err(e);
                    let _ = msg.reply.send(Err(e.into()));
                    return;
                }
            }
        }
        for (found, (_, key)) in out.iter_mut().zip(msg.rows) {
            if let Some(row) = found {
                home(&mut row.key, key);
            }
        }
        let _ = msg.reply.send(Ok(out));
    }

    fn scan(&mut self, msg: ScanRegion) {
        if msg.expect != self.range {
            let _ = msg.reply.send(Err(Reject::NotOwner));
            return;
        }
        let res = match self.store() {
            Ok(store) => store.scan(&msg.spec, msg.limits),
            Err(e) => {
                let _ = msg.reply.send(Err(e.into()));
                return;
            }
        };
        let res = res.map_err(|e| self.store_err(e).into());
        let _ = msg.reply.send(res);
    }

    /// Queue a client's writes for the next group commit.
    fn write(&mut self, msg: Write, ctx: &mut Context<Self>) {
        if self.failed.is_some() || self.store.is_none() {
            let _ = msg.reply.send(Err(self.unavailable().into()));
            return;
        }
        let mut slots = Vec::with_capacity(msg.ops.len());
        for (bucket, op) in msg.ops {
            if self.owns(bucket) {
                slots.push(Slot::Op(self.pending_ops.len()));
                self.pending_ops.push(op);
            } else {
                slots.push(Slot::Ready(OpResult::NotOwner(op)));
            }
        }
        self.pending_replies.push((msg.reply, slots));
        if !self.commit_scheduled {
            self.commit_scheduled = true;
            ctx.notify(Commit);
        }
    }
}

impl Handler<AutoSplitFailed> for RegionActor {
    type Result = ();

    fn handle(&mut self, _: AutoSplitFailed, _: &mut Context<Self>) {
        self.split_requested = false;
        self.split_retry_at = Some(std::time::Instant::now() + SPLIT_RETRY);
    }
}

impl Handler<Commit> for RegionActor {
    type Result = ();

    fn handle(&mut self, _: Commit, ctx: &mut Context<Self>) {
        self.commit(true, ctx);
    }
}

impl Handler<Flush> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Flush, ctx: &mut Context<Self>) {
        self.settle(ctx);
        if let Err(e) = self.store() {
            let _ = msg.reply.send(Err(e.into()));
            return;
        }
        // Up to a whole memtable written out: not on the arbiter's thread.
        let reply = msg.reply;
        self.with_store_off_thread(
            "flush",
            ctx,
            |store| store.flush(),
            move |act, res, ctx| {
                let _ = reply.send(res.map_err(Reject::from));
                act.maybe_compact(ctx);
            },
        );
    }
}

impl Handler<Compact> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Compact, ctx: &mut Context<Self>) {
        if self.compacting {
            // One compaction at a time; the running one covers this request's segments.
            if let Some(r) = msg.reply {
                let _ = r.send(Ok(()));
            }
            return;
        }
        self.settle(ctx);
        self.start_compaction(msg.major, msg.reply, ctx);
    }
}

impl Handler<Stats> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Stats, _: &mut Context<Self>) {
        let mut stats = self.store.as_ref().map(|s| s.stats()).unwrap_or_default();
        if self.failed.is_some() {
            stats.poisoned = true;
        }
        let _ = msg.reply.send(Ok((self.range.0, self.range.1, stats)));
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

impl Handler<PrepareSplit> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: PrepareSplit, ctx: &mut Context<Self>) {
        let (start, end) = self.range;
        if msg.at <= start || msg.at >= end {
            let _ = msg.reply.send(Err(Reject::NotOwner));
            return;
        }
        // Invariant 2: every acknowledged write is in the store before the export reads it.
        self.settle(ctx);
        let upper = (msg.at, end);
        let families = match self.store() {
            Ok(store) => store.families().to_vec(),
            Err(e) => {
                let _ = msg.reply.send(Err(e.into()));
                return;
            }
        };
        let options = self.options(families, upper);
        let Some(pred) = owns_row_predicate(&self.salt, upper) else {
            let _ = msg.reply.send(Err(Reject::Failed(ActorError::Internal(
                "split upper half covers the whole table".into(),
            ))));
            return;
        };
        if let Err(e) = self.store() {
            let _ = msg.reply.send(Err(e.into()));
            return;
        }
        // The flush and the export write up to half the region: seconds for a large one.
        let new_dir = msg.new_dir;
        let (reply, at) = (msg.reply, msg.at);
        self.with_store_off_thread(
            "split",
            ctx,
            move |store| {
                store
                    .flush()
                    .and_then(|()| store.export_rows(&*pred, &new_dir, options))
            },
            move |act, res, _| act.split_exported(res, (start, at), reply),
        );
    }
}

impl Handler<Checkpoint> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Checkpoint, ctx: &mut Context<Self>) {
        // Every acknowledged write (the in-flight batch, the queued ones) is in the store
        // before the copy is taken.
        self.settle(ctx);
        if let Err(e) = self.store() {
            let _ = msg.reply.send(Err(e.into()));
            return;
        }
        let (dest, reply) = (msg.dest, msg.reply);
        let (table, id) = (self.table.clone(), self.id);
        // Up to a whole memtable written out: not on the arbiter's thread. A failed
        // checkpoint (a full disk under the staging directory) changed nothing in the store:
        // it is answered, not taken as the store's failure.
        self.with_store_off_thread(
            "checkpoint",
            ctx,
            move |store| Ok(store.checkpoint(&dest)),
            move |_, res, _| {
                let res =
                    res.and_then(|r| r.map_err(|e| crate::error::from_store(e, &table, id).0));
                let _ = reply.send(res.map_err(Reject::from));
            },
        );
    }
}

impl RegionActor {
    /// Run `job` on the store on a thread of its own (normal priority), the store moved there,
    /// while this actor is paused (`ctx.wait`, invariant 6): its requests wait in its request queue,
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

    /// The upper half `[at, end)` was exported (or not): narrow to `[start, at)` and answer.
    fn split_exported(
        &mut self,
        res: Result<(), ActorError>,
        (start, at): (u32, u32),
        reply: Reply<()>,
    ) {
        if let Err(e) = res {
            let _ = reply.send(Err(e.into()));
            return;
        }
        // From here on requests for the moved buckets are answered NotOwner and retried by the
        // handle until the router publishes the new layout. Reads only: until the catalog
        // commit (`CommitSplit`) the split may still be undone (`AbortSplit`), so no compaction
        // may drop the moved rows yet.
        self.range = (start, at);
        let lower = owns_row_predicate(&self.salt, self.range);
        if let Ok(store) = self.store() {
            store.narrow_reads(lower);
        }
        self.split_requested = true;
        let _ = reply.send(Ok(()));
    }
}

impl Handler<CommitSplit> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: CommitSplit, ctx: &mut Context<Self>) {
        // The catalog now gives the moved buckets to the new region: the narrowing is final,
        // and the moved rows can leave this region's segments (in the background).
        let pred = owns_row_predicate(&self.salt, self.range);
        if let Some(store) = self.store.as_mut() {
            store.set_owns_row(pred);
        }
        self.split_requested = true;
        self.split_cleanup_due = true;
        if !self.compacting && self.store.is_some() {
            self.start_compaction(true, None, ctx);
        }
        let _ = msg.reply.send(Ok(()));
    }
}

impl Handler<AbortSplit> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: AbortSplit, _: &mut Context<Self>) {
        self.range = msg.range;
        let pred = owns_row_predicate(&self.salt, self.range);
        if let Some(store) = self.store.as_mut() {
            store.set_owns_row(pred);
        }
        self.split_requested = false;
        let _ = msg.reply.send(Ok(()));
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
