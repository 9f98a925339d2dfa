//! Background work of the regions: flushes, compactions and freeing flushed memtables; and
//! each region's log-sync thread ([`Syncer`]).
//!
//! Each job runs on a thread of its own (they are rare: one per flush, compaction or split); a
//! flush or a compaction at a lower CPU priority (nice 10), as RocksDB's `LowerThreadPoolCPUPriority` does. On a machine
//! with few cores, a flush or a compaction then takes the CPU that serving requests leaves
//! idle, instead of half of it: without this, a 64 MiB flush on 2 cores cut the throughput of
//! the requests running meanwhile by more than half for a second. The exception is a region
//! whose compactions fell behind ([`run_compaction`]): a load that keeps every core busy would
//! starve them, and its reads would consult ever more segments.
//!
//! # Invariants
//! 1. A job's result (or its panic) always comes back to the awaiting actor; a thread that
//!    cannot be started is an error, never a job silently dropped.
//! 2. Only the job's own thread is reniced, never the actor's or the HTTP workers'.

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

/// Run `job` on a new low-priority thread named `kura-{what}`; resolves to its result.
pub(crate) fn run<T: Send + 'static>(
    what: &'static str,
    job: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, ActorError>> {
    run_at(what, true, job)
}

/// [`run`] at normal priority: for work that a paused region waits for (a split's export).
pub(crate) fn run_now<T: Send + 'static>(
    what: &'static str,
    job: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, ActorError>> {
    run_at(what, false, job)
}

/// Compactions running at normal priority now, in the whole process (see [`run_compaction`]).
static URGENT_COMPACTIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many compactions may run at normal priority at once: half the machine's cores, one at
/// least.
fn urgent_compaction_slots() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// Run a compaction: at low priority, as [`run`], unless `behind` (its region holds too many
/// segments, `CompactionTask::is_behind`) and fewer than [`urgent_compaction_slots`] run at
/// normal priority already: then at normal priority, so that a load keeping every core busy
/// shares the CPU with it instead of starving it. The cap keeps compactions of many regions
/// from taking more than half the machine from the requests.
pub(crate) fn run_compaction<T: Send + 'static>(
    behind: bool,
    job: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, ActorError>> {
    use std::sync::atomic::Ordering;
    let slots = urgent_compaction_slots();
    let urgent = behind
        && URGENT_COMPACTIONS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < slots).then_some(n + 1)
            })
            .is_ok();
    run_at("compaction", !urgent, move || {
        /// Gives the slot back however the job ends.
        struct Slot;
        impl Drop for Slot {
            fn drop(&mut self) {
                URGENT_COMPACTIONS.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // Not `then_some`: its argument is built (and dropped, giving back a slot never
        // taken) even when `urgent` is false.
        let _slot = if urgent { Some(Slot) } else { None };
        job()
    })
}

fn run_at<T: Send + 'static>(
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

/// A region's log-sync thread: runs the fsyncs of its `sync`-durability batches
/// ([`kura_storage::RegionStore::write_batch_deferred`]) one after the other, at normal
/// priority (a write's latency is the fsync's), so that the region's arbiter serves other
/// requests while the disk works. The thread ends when the `Syncer` is dropped.
pub(crate) struct Syncer {
    tx: std::sync::mpsc::Sender<SyncJob>,
}

type SyncDone = (LogSync, kura_storage::Result<Duration>);
type SyncJob = (LogSync, tokio::sync::oneshot::Sender<SyncDone>);

impl Syncer {
    /// Start the thread `kura-sync-{region}`.
    pub(crate) fn start(region: crate::RegionId) -> std::io::Result<Syncer> {
        let (tx, rx) = std::sync::mpsc::channel::<SyncJob>();
        std::thread::Builder::new()
            .name(format!("kura-sync-{region}"))
            .spawn(move || {
                while let Ok((sync, done)) = rx.recv() {
                    let took = sync.run();
                    let _ = done.send((sync, took));
                }
            })?;
        Ok(Syncer { tx })
    }

    /// Run `sync` on the thread; resolves to it and its outcome. If the thread is gone, the
    /// fsync runs right here instead.
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
    // On Linux the nice value is per thread, and `who = 0` names the calling thread.
    #[cfg(target_os = "linux")]
    {
        // A thread starts at its creator's nice value.
        let nice = rustix::process::getpriority_process(None).unwrap_or(0);
        if let Err(e) = rustix::process::setpriority_process(None, background_nice(nice)) {
            tracing::debug!(error = %e, "could not lower a background thread's priority");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn a_job_returns_its_result_and_a_panic_is_an_error() {
        assert_eq!(run("test", || 6 * 7).await.unwrap(), 42);
        let err = run("test", || -> u32 { panic!("boom") }).await.unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
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
        let inside = run("test", || {
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
    /// `urgent_compaction_slots`; one more, or one that is not behind, runs lower. (The only test that
    /// starts compactions in this binary: the process-wide count is this test's alone.)
    #[cfg(target_os = "linux")]
    #[actix_rt::test]
    async fn behind_compactions_run_at_the_callers_priority_up_to_half_the_cores() {
        let before = rustix::process::getpriority_process(None).unwrap();
        let slots = urgent_compaction_slots();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = std::sync::Arc::new(parking_lot::Mutex::new(release_rx));
        let (nice_tx, mut nice_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut jobs = Vec::new();
        for _ in 0..slots + 1 {
            let (release_rx, nice_tx) = (release_rx.clone(), nice_tx.clone());
            jobs.push(run_compaction(true, move || {
                let _ = nice_tx.send(rustix::process::getpriority_process(None).unwrap());
                // Held until every job has reported: all of them run at once.
                let _ = release_rx.lock().recv();
            }));
            // Each job takes its slot before the next is asked for.
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
        let relaxed = run_compaction(false, || {
            rustix::process::getpriority_process(None).unwrap()
        })
        .await
        .unwrap();
        assert_eq!(relaxed, background_nice(before), "not behind: lower");
        let again = run_compaction(true, || rustix::process::getpriority_process(None).unwrap())
            .await
            .unwrap();
        assert_eq!(again, before, "the slots came back");
    }
}
