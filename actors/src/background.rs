//! Background work of the regions: flushes, compactions and freeing flushed memtables; and
//! the server's log-sync threads ([`SyncPool`]).
//!
//! Each job runs on a thread of its own (they are rare: one per flush, compaction or split); a
//! flush or a compaction at a lower CPU priority (nice 10), as RocksDB's
//! `LowerThreadPoolCPUPriority` does. On a machine with few cores, a flush or a compaction then
//! takes the CPU that serving requests leaves idle, instead of half of it: without this, a 64
//! MiB flush on 2 cores cut the throughput of the requests running meanwhile by more than half
//! for a second. Compactions also wait for a slot of the server's pool ([`CompactionSlots`]):
//! many low-priority threads together still take a large share of the CPU. The exception is a
//! region whose compactions fell behind ([`run_compaction`]): a load that keeps every core busy
//! would starve them, and its reads would consult ever more segments. Rewrites of a split's
//! reference segments, which no read waits for, run one at a time in a lane of their own under
//! Linux's `SCHED_IDLE` policy (RocksDB's `CpuPriority::kIdle`), at nice 19 where it cannot be
//! set: a waking thread of the normal policy always preempts it (the kernel's rule for
//! `SCHED_IDLE`), where a niced thread yields only as the scheduler's fairness says and keeps
//! a share of a busy core (`benches/background_priority.sh` measures the difference). Merges
//! stay at nice 10: they bound the segments a read consults, and a `SCHED_IDLE` merge would
//! wait out a write load and run right after it instead.
//!
//! # Invariants
//! 1. A job's result (or its panic) always comes back to the awaiting actor; a thread that
//!    cannot be started is an error, never a job silently dropped.
//! 2. Only the job's own thread is reniced or given another scheduling policy, never the
//!    actor's or the HTTP workers'; every job runs on a new thread, so no thread keeps a
//!    lowered priority for work that is not background work.

use crate::error::ActorError;
use kura_storage::LogSync;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

/// How much lower than the server's own a background thread's priority is: nice values from
/// -20 to 19, 0 the default, so a server at the default runs its background jobs at nice 10.
const BACKGROUND_NICE_ABOVE: i32 = 10;

/// The lowest priority (highest nice value) Linux has.
const LOWEST_NICE: i32 = 19;

/// The nice value of background threads of a thread at `nice`: always at or below its
/// priority, also for a server started niced (at nice 15, its jobs run at 19, not 10).
fn background_nice(nice: i32) -> i32 {
    nice.saturating_add(BACKGROUND_NICE_ABOVE).min(LOWEST_NICE)
}

/// [`run_at`] at normal priority: for work that a paused region waits for (a split's export).
pub(crate) fn run_now<T: Send + 'static>(
    what: &'static str,
    job: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, ActorError>> {
    run_at(what, false, job)
}

/// How many compactions of one server's regions may run at once, and at which priority: the
/// server's compaction pool, as RocksDB's `max_background_compactions` and HBase's compaction
/// threads bound theirs. Each region may ask for two at once (`MAX_BACKGROUND_COMPACTIONS`),
/// and a thread at nice 10 still weighs a tenth of a request thread in the kernel's scheduler:
/// sixteen of them at once after a 4 GB load took 30% of a 2-core machine from the GETs.
///
/// A split's reference rewrites ([`CompactionKind::ReferenceRewrite`]) have a lane of their
/// own, one slot at the lowest priority ([`idlest_priority`]): after a large load every region
/// rewrites its references at once, and that work, which reads do not wait for, would
/// otherwise hold the merges' slots and take CPU from the requests.
///
/// # Invariants
/// 1. At most `background` compactions run at low priority, at most `urgent` at normal
///    priority and at most one reference rewrite at the lowest at once; the others wait, and
///    start in the order they asked within their lane.
/// 2. A slot is given back however its job ends (a panic included).
pub(crate) struct CompactionSlots {
    background: usize,
    urgent: usize,
    state: std::sync::Mutex<SlotState>,
    freed: std::sync::Condvar,
}

#[derive(Default)]
struct SlotState {
    background: usize,
    urgent: usize,
    rewrites: usize,
    /// Tickets of the merges waiting for a slot, oldest first.
    waiting: std::collections::VecDeque<u64>,
    /// Tickets of the reference rewrites waiting for theirs, oldest first.
    rewrites_waiting: std::collections::VecDeque<u64>,
    next_ticket: u64,
}

/// What a compaction is, for the pool: which lane it waits in and at which priority it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompactionKind {
    /// A size-tiered or asked-for merge; `behind`: its region holds too many segments
    /// (`CompactionTask::is_behind`).
    Merge { behind: bool },
    /// A rewrite of a split's reference segments (`CompactionTask::rewrites_references`).
    ReferenceRewrite,
}

impl CompactionKind {
    /// The kind of `task`.
    pub(crate) fn of(task: &kura_storage::CompactionTask) -> CompactionKind {
        if task.rewrites_references() && !task.is_behind() {
            CompactionKind::ReferenceRewrite
        } else {
            CompactionKind::Merge {
                behind: task.is_behind(),
            }
        }
    }
}

/// Which slot a compaction holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Background,
    Urgent,
    Rewrite,
}

impl CompactionSlots {
    /// A pool of `background` low-priority slots (0 = the default, [`default_background_slots`])
    /// and half the machine's cores (one at least) of normal-priority ones.
    pub(crate) fn new(background: usize) -> CompactionSlots {
        let background = if background == 0 {
            default_background_slots()
        } else {
            background
        };
        CompactionSlots {
            background,
            urgent: urgent_compaction_slots(),
            state: std::sync::Mutex::new(SlotState::default()),
            freed: std::sync::Condvar::new(),
        }
    }

    /// Wait for a slot: the rewrite lane's for a reference rewrite; for a merge, a
    /// normal-priority one if `behind` and one is free, else the next low-priority one in the
    /// order merges asked.
    fn acquire(&self, kind: CompactionKind) -> Slot {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        let behind = match kind {
            CompactionKind::Merge { behind } => behind,
            CompactionKind::ReferenceRewrite => {
                st.rewrites_waiting.push_back(ticket);
                while st.rewrites > 0 || st.rewrites_waiting.front() != Some(&ticket) {
                    st = self.freed.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                st.rewrites += 1;
                st.rewrites_waiting.pop_front();
                self.freed.notify_all();
                return Slot::Rewrite;
            }
        };
        st.waiting.push_back(ticket);
        loop {
            if behind && st.urgent < self.urgent {
                st.urgent += 1;
                st.waiting.retain(|&t| t != ticket);
                // The queue's head may have changed.
                self.freed.notify_all();
                return Slot::Urgent;
            }
            if st.background < self.background && st.waiting.front() == Some(&ticket) {
                st.background += 1;
                st.waiting.pop_front();
                self.freed.notify_all();
                return Slot::Background;
            }
            st = self.freed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn release(&self, slot: Slot) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match slot {
            Slot::Background => st.background -= 1,
            Slot::Urgent => st.urgent -= 1,
            Slot::Rewrite => st.rewrites -= 1,
        }
        self.freed.notify_all();
    }
}

/// Low-priority compactions a server runs at once by default: half the machine's cores, two
/// at least (RocksDB's and HBase's defaults are two).
fn default_background_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| (n.get() / 2).max(2))
}

/// How many compactions may run at normal priority at once: half the machine's cores, one at
/// least.
fn urgent_compaction_slots() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// Run a compaction on a thread of its own once `slots` gives it one. A merge runs at low
/// priority, unless `behind` (its region holds too many segments, `CompactionTask::is_behind`)
/// and a normal-priority slot is free: then at normal priority, so that a load keeping every
/// core busy shares the CPU with it instead of starving it. The normal-priority slots (half
/// the cores) keep compactions of many regions from taking more than half the machine from
/// the requests. A reference rewrite runs at the lowest priority ([`idlest_priority`]), in its
/// own lane.
pub(crate) fn run_compaction<T: Send + 'static>(
    slots: std::sync::Arc<CompactionSlots>,
    kind: CompactionKind,
    job: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, ActorError>> {
    run_at("compaction", false, move || {
        /// Gives the slot back however the job ends.
        struct Held(std::sync::Arc<CompactionSlots>, Slot);
        impl Drop for Held {
            fn drop(&mut self) {
                self.0.release(self.1);
            }
        }
        let slot = slots.acquire(kind);
        let _held = Held(slots, slot);
        match slot {
            Slot::Background => lower_priority(),
            Slot::Rewrite => idlest_priority(),
            Slot::Urgent => {}
        }
        job()
    })
}

/// Run `job` on a new thread named `kura-{what}`, at a lower CPU priority if `low_priority`;
/// resolves to its result.
pub(crate) fn run_at<T: Send + 'static>(
    what: &'static str,
    low_priority: bool,
    job: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, ActorError>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name(format!("kura-{what}"))
        .spawn(move || {
            if low_priority {
                lower_priority();
            }
            let _ = tx.send(std::panic::catch_unwind(AssertUnwindSafe(job)));
        });
    async move {
        spawned.map_err(|e| ActorError::Internal(format!("cannot start a {what} thread: {e}")))?;
        match rx.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) => Err(ActorError::Internal(format!("{what} task panicked"))),
            Err(_) => Err(ActorError::Internal(format!("{what} thread ended early"))),
        }
    }
}

/// The server's log-sync threads: they run the fsyncs of the regions' `sync`-durability
/// batches ([`kura_storage::RegionStore::write_batch_deferred`]) at normal priority (a
/// write's latency is the fsync's), so that the regions' arbiters serve other requests while
/// the disk works. The first regions get a thread each ([`SyncPool::lane`]) up to the pool's
/// bound (one per core by default, [`sync_threads`]); past it, regions share the threads in
/// turn, as HBase's WAL syncers are a fixed number, so the threads do not grow with the
/// regions a large table splits into. A thread ends once the pool and every lane to it are
/// dropped.
pub(crate) struct SyncPool {
    /// The queues of the threads started so far, in the order they started; at most `max`.
    lanes: parking_lot::Mutex<Vec<std::sync::mpsc::Sender<SyncJob>>>,
    max: usize,
    /// Lanes handed out (the next shared lane is this modulo the threads).
    handed: std::sync::atomic::AtomicUsize,
    /// This pool's number, in its threads' names (`kura-sync-{pool}.{i}`).
    pool: u32,
}

/// One region's way to the pool's threads: its fsyncs run one after the other on one thread.
pub(crate) struct SyncLane {
    tx: std::sync::mpsc::Sender<SyncJob>,
}

type SyncDone = (LogSync, kura_storage::Result<Duration>);
type SyncJob = (LogSync, tokio::sync::oneshot::Sender<SyncDone>);

/// Numbers the pools, to name their threads apart (tests count them).
static POOLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl SyncPool {
    /// A pool of at most `max` threads (one at least), started as regions ask for lanes.
    pub(crate) fn new(max: usize) -> SyncPool {
        SyncPool {
            lanes: parking_lot::Mutex::new(Vec::new()),
            max: max.max(1),
            handed: std::sync::atomic::AtomicUsize::new(0),
            pool: POOLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// A lane for the next region: a thread of its own while the pool is under its bound,
    /// else the threads in turn. `None` if no thread could be started at all (the region then
    /// fsyncs on its arbiter).
    pub(crate) fn lane(&self) -> Option<SyncLane> {
        let handed = self
            .handed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut lanes = self.lanes.lock();
        if lanes.len() < self.max {
            let (tx, rx) = std::sync::mpsc::channel::<SyncJob>();
            let started = std::thread::Builder::new()
                .name(format!("kura-sync-{}.{}", self.pool, lanes.len()))
                .spawn(move || {
                    let mut queued = std::collections::VecDeque::new();
                    while let Ok(job) = rx.recv() {
                        queued.push_back(job);
                        queued.extend(rx.try_iter());
                        // Several regions' logs to fsync: start the writeback of all but the
                        // first (fsynced at once) so the disk writes them together, then
                        // wait on each in turn.
                        queued
                            .iter()
                            .skip(1)
                            .for_each(|(sync, _)| sync.start_writeback());
                        while let Some((sync, done)) = queued.pop_front() {
                            let took = sync.run();
                            let _ = done.send((sync, took));
                        }
                    }
                });
            match started {
                Ok(_) => {
                    lanes.push(tx.clone());
                    return Some(SyncLane { tx });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start a log-sync thread; sharing one");
                }
            }
        }
        let tx = lanes.get(handed % lanes.len().max(1))?.clone();
        Some(SyncLane { tx })
    }
}

impl SyncLane {
    /// Run `sync` on the lane's thread; resolves to it and its outcome. If the thread is gone,
    /// the fsync runs right here instead.
    pub(crate) fn sync(
        &self,
        sync: LogSync,
    ) -> impl Future<Output = Result<SyncDone, ActorError>> + use<> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if let Err(std::sync::mpsc::SendError((sync, tx))) = self.tx.send((sync, tx)) {
            let took = sync.run();
            let _ = tx.send((sync, took));
        }
        async move {
            rx.await
                .map_err(|_| ActorError::Internal("the log-sync thread ended early".into()))
        }
    }
}

/// The most log-sync threads a server starts for `asked` (`KuraConfig::sync_threads`): that
/// many, or one per core for 0. They start as regions ask for lanes.
///
/// One per core, not one per region: a region's commit hands its fsync to its lane's thread,
/// and a thread that still has fsyncs queued takes the next without sleeping, where a thread
/// of its own per region sleeps between its region's fsyncs and is woken for each: on 2 cores
/// with 8 regions, that cost the server 10 µs more of CPU per synced write, 4 µs of it the
/// request threads' system time (benches/README.md, the log-sync threads row). A thread with
/// several logs queued starts the writeback of all but the first (which it fsyncs at once)
/// before it waits on each, so that the disk still writes them at once, as it did from a
/// thread each (a 4 GB load of 100-row batches, each touching
/// every region, lost 3–11% of its rate without it).
pub(crate) fn sync_threads(asked: usize) -> usize {
    match asked {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Free `value` on a low-priority thread (a flushed memtable takes a while to free, the
/// segments a compaction replaced to unmap and delete).
pub(crate) fn drop_later<T: Send + 'static>(value: T) {
    let _ = std::thread::Builder::new()
        .name("kura-free".into())
        .spawn(move || {
            lower_priority();
            drop(value);
        });
}

/// Lower the calling thread's CPU priority; best effort (a failure only costs latency).
fn lower_priority() {
    // A thread starts at its creator's nice value.
    #[cfg(target_os = "linux")]
    set_nice(background_nice(
        rustix::process::getpriority_process(None).unwrap_or(0),
    ));
}

/// Give the calling thread the lowest CPU priority Linux has: nice 19, and the `SCHED_IDLE`
/// policy, under which a waking thread of the normal policy always preempts it (a nice-19
/// thread keeps a share of a busy core). Best effort: where the policy cannot be set (a
/// seccomp filter, another system), nice 19 remains.
fn idlest_priority() {
    set_nice(LOWEST_NICE);
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid `sched_param` for the duration of the call, which only
        // reads it; pid 0 names the calling thread, and SCHED_IDLE takes priority 0.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
        if rc != 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "could not give a background thread the SCHED_IDLE policy; it runs at nice 19"
            );
        }
    }
}

/// Set the calling thread's nice value (a lower priority only: an unprivileged process may
/// not raise it); best effort.
fn set_nice(nice: i32) {
    // On Linux the nice value is per thread, and `who = 0` names the calling thread.
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::setpriority_process(None, nice) {
        tracing::debug!(error = %e, "could not lower a background thread's priority");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const BEHIND: CompactionKind = CompactionKind::Merge { behind: true };
    const NOT_BEHIND: CompactionKind = CompactionKind::Merge { behind: false };

    #[actix_rt::test]
    async fn a_job_returns_its_result_and_a_panic_is_an_error() {
        assert_eq!(run_at("test", true, || 6 * 7).await.unwrap(), 42);
        let err = run_at("test", true, || -> u32 { panic!("boom") })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
    }

    /// How many of this process's threads have a name that starts with `prefix`.
    #[cfg(target_os = "linux")]
    fn threads_named(prefix: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.starts_with(prefix))
            .count()
    }

    /// The fsyncs of 20 regions' batches, all in flight at once, run on the pool's two
    /// threads: the threads do not grow with the regions, and every fsync answers.
    #[cfg(target_os = "linux")]
    #[actix_rt::test]
    async fn a_pool_of_two_sync_threads_fsyncs_the_batches_of_twenty_regions() {
        use kura_storage::model::*;
        let dir = tempfile::tempdir().unwrap();
        let pool = SyncPool::new(2);
        let mut stores = Vec::new();
        let mut jobs = Vec::new();
        for r in 0..20 {
            let opts = kura_storage::StoreOptions::new(vec![FamilyDescriptor::new("f")]);
            let (mut store, _) =
                kura_storage::RegionStore::open(&dir.path().join(r.to_string()), opts).unwrap();
            let put = RowMutation {
                row: b"row".to_vec(),
                mutations: vec![Mutation::Put {
                    family: b"f".to_vec(),
                    qualifier: b"q".to_vec(),
                    timestamp: None,
                    value: vec![r as u8],
                }],
            };
            let (results, sync) = store.write_batch_deferred(vec![WriteOp::Mutate(put)]);
            assert!(results.iter().all(|r| r.is_ok()));
            let lane = pool.lane().expect("a lane");
            jobs.push(lane.sync(sync.expect("a deferred fsync")));
            stores.push(store);
        }
        assert_eq!(threads_named(&format!("kura-sync-{}.", pool.pool)), 2);
        for (store, job) in stores.iter_mut().zip(jobs) {
            let (sync, took) = job.await.unwrap();
            store.finish_sync(sync, took).unwrap();
        }
        drop(pool);
    }

    #[test]
    fn a_niced_server_runs_its_jobs_lower_still_never_higher() {
        assert_eq!(background_nice(0), 10);
        assert_eq!(background_nice(-5), 5);
        assert_eq!(background_nice(15), 19);
        assert_eq!(background_nice(19), 19);
    }

    #[cfg(target_os = "linux")]
    #[actix_rt::test]
    async fn the_job_runs_at_a_lower_priority_and_the_caller_keeps_its_own() {
        let before = rustix::process::getpriority_process(None).unwrap();
        let inside = run_at("test", true, || {
            rustix::process::getpriority_process(None).unwrap()
        })
        .await
        .unwrap();
        assert_eq!(inside, background_nice(before));
        assert!(
            inside >= before,
            "never a higher priority than the caller's"
        );
        assert_eq!(rustix::process::getpriority_process(None).unwrap(), before);
    }

    /// A compaction that is behind runs at the caller's priority, as many at once as
    /// `urgent_compaction_slots`; one more, or one that is not behind, runs lower.
    #[cfg(target_os = "linux")]
    #[actix_rt::test]
    async fn behind_compactions_run_at_the_callers_priority_up_to_half_the_cores() {
        let before = rustix::process::getpriority_process(None).unwrap();
        let slots = urgent_compaction_slots();
        let pool = Arc::new(CompactionSlots::new(1));
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = Arc::new(parking_lot::Mutex::new(release_rx));
        let (nice_tx, mut nice_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut jobs = Vec::new();
        for _ in 0..slots + 1 {
            let (release_rx, nice_tx) = (release_rx.clone(), nice_tx.clone());
            jobs.push(run_compaction(pool.clone(), BEHIND, move || {
                let _ = nice_tx.send(rustix::process::getpriority_process(None).unwrap());
                // Held until every job has reported: all of them run at once.
                let _ = release_rx.lock().recv();
            }));
        }
        let running: Vec<_> = jobs.into_iter().map(actix_rt::spawn).collect();
        let mut seen = Vec::new();
        for _ in 0..slots + 1 {
            seen.push(nice_rx.recv().await.unwrap());
        }
        for _ in 0..slots + 1 {
            release_tx.send(()).unwrap();
        }
        for job in running {
            job.await.unwrap().unwrap();
        }
        seen.sort();
        let mut expected = vec![before; slots];
        expected.push(background_nice(before));
        assert_eq!(seen, expected);
        let relaxed = run_compaction(pool.clone(), NOT_BEHIND, || {
            rustix::process::getpriority_process(None).unwrap()
        })
        .await
        .unwrap();
        assert_eq!(relaxed, background_nice(before), "not behind: lower");
        let again = run_compaction(pool, BEHIND, || {
            rustix::process::getpriority_process(None).unwrap()
        })
        .await
        .unwrap();
        assert_eq!(again, before, "the slots came back");
    }

    /// The calling thread's nice value and scheduling policy.
    #[cfg(target_os = "linux")]
    fn priority() -> (i32, i32) {
        // SAFETY: a query of the calling thread's policy; it takes no pointer.
        let policy = unsafe { libc::sched_getscheduler(0) };
        (rustix::process::getpriority_process(None).unwrap(), policy)
    }

    /// A reference rewrite does not wait for the merges' slots: it runs beside them at the
    /// lowest priority (nice 19 and `SCHED_IDLE`), one at a time (the next waits for the first
    /// to end).
    #[cfg(target_os = "linux")]
    #[actix_rt::test]
    async fn reference_rewrites_run_one_at_a_time_at_the_lowest_priority_beside_merges() {
        let pool = Arc::new(CompactionSlots::new(1));
        let (release_merge, merge_rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
        let merge = {
            let started_tx = started_tx.clone();
            actix_rt::spawn(run_compaction(pool.clone(), NOT_BEHIND, move || {
                let _ = started_tx.send(("merge", priority()));
                merge_rx.recv().unwrap();
            }))
        };
        let before = rustix::process::getpriority_process(None).unwrap();
        assert_eq!(
            started_rx.recv().await,
            Some(("merge", (background_nice(before), libc::SCHED_OTHER))),
            "a merge runs reniced, under the normal policy"
        );
        let (release_first, first_rx) = std::sync::mpsc::channel::<()>();
        let first = {
            let started_tx = started_tx.clone();
            actix_rt::spawn(run_compaction(
                pool.clone(),
                CompactionKind::ReferenceRewrite,
                move || {
                    let _ = started_tx.send(("first rewrite", priority()));
                    first_rx.recv().unwrap();
                },
            ))
        };
        assert_eq!(
            started_rx.recv().await,
            Some(("first rewrite", (LOWEST_NICE, libc::SCHED_IDLE))),
            "runs beside the merge holding the only background slot, under SCHED_IDLE"
        );
        let second = actix_rt::spawn(run_compaction(
            pool.clone(),
            CompactionKind::ReferenceRewrite,
            move || {
                let _ = started_tx.send(("second rewrite", priority()));
            },
        ));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(started_rx.try_recv().is_err(), "one rewrite at a time");
        release_first.send(()).unwrap();
        first.await.unwrap().unwrap();
        assert_eq!(started_rx.recv().await.map(|s| s.0), Some("second rewrite"));
        second.await.unwrap().unwrap();
        release_merge.send(()).unwrap();
        merge.await.unwrap().unwrap();
        let st = pool.state.lock().unwrap();
        assert_eq!(
            (st.background, st.rewrites, st.rewrites_waiting.len()),
            (0, 0, 0)
        );
    }

    /// Past the pool's low-priority slots a compaction waits, and the waiting ones start in
    /// the order they asked; a panicking job gives its slot back.
    #[actix_rt::test]
    async fn compactions_past_the_pool_wait_and_start_in_the_order_they_asked() {
        let pool = Arc::new(CompactionSlots::new(1));
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
        let first = {
            let started_tx = started_tx.clone();
            actix_rt::spawn(run_compaction(pool.clone(), NOT_BEHIND, move || {
                let _ = started_tx.send(0);
                release_rx.recv().unwrap();
                panic!("the first job fails");
            }))
        };
        assert_eq!(started_rx.recv().await, Some(0));
        let mut waiting = Vec::new();
        for i in 1..=3 {
            let started_tx = started_tx.clone();
            waiting.push(actix_rt::spawn(run_compaction(
                pool.clone(),
                NOT_BEHIND,
                move || {
                    let _ = started_tx.send(i);
                },
            )));
            // Each asks before the next: their tickets are in this order.
            while pool.state.lock().unwrap().waiting.len() < i {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            started_rx.try_recv().is_err(),
            "none starts while the slot is held"
        );
        release_tx.send(()).unwrap();
        let err = first.await.unwrap().unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
        let mut order = Vec::new();
        for _ in 1..=3 {
            order.push(started_rx.recv().await.unwrap());
        }
        assert_eq!(order, vec![1, 2, 3]);
        for job in waiting {
            job.await.unwrap().unwrap();
        }
        let st = pool.state.lock().unwrap();
        assert_eq!((st.background, st.urgent, st.waiting.len()), (0, 0, 0));
    }
}
