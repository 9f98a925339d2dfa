//! A background flush or compaction whose completion runs while the region's store is away on a
//! job of its own (a flush on command, a split's export, a checkpoint: the actor paused with
//! `ctx.wait`) waits for the store and is installed after the job, neither failed nor lost
//! (`deferred`, invariant 6 of `actors/src/region/mod.rs`). Actix 0.13 polls the first of an
//! actor's spawned futures in the same turn as the message handler that started the pause, so
//! the tests line that up: the job held on its thread by a gated file system, the region's
//! arbiter paused while the job finishes, a flush queued, the arbiter resumed.
//!
//! The same gate holds a compaction while the region passes its split threshold, for the
//! split the region asks for once the compaction is installed.

mod common;
use common::*;
use kura_actors::storage::fs::WritableFile;
use kura_actors::storage::{FileSystem, SimFs};
use kura_actors::*;
use parking_lot::{Condvar, Mutex};
use std::cell::RefCell;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Holds the first file creation of a background thread of a given name while closed, and
/// tells the test when that thread got there and when it has ended (its result is then on its
/// way to the region).
#[derive(Default)]
struct Gate {
    closed: Mutex<bool>,
    opened: Condvar,
    armed: Mutex<Option<Armed>>,
}

/// What the gate waits for and whom it tells.
struct Armed {
    thread: &'static str,
    arrived: oneshot::Sender<()>,
    ended: oneshot::Sender<()>,
}

impl Gate {
    /// Hold the next file creation on a thread named `thread`.
    fn arm(&self, thread: &'static str) -> (oneshot::Receiver<()>, oneshot::Receiver<()>) {
        let (arrived, arrived_rx) = oneshot::channel();
        let (ended, ended_rx) = oneshot::channel();
        *self.closed.lock() = true;
        *self.armed.lock() = Some(Armed {
            thread,
            arrived,
            ended,
        });
        (arrived_rx, ended_rx)
    }

    fn open(&self) {
        *self.closed.lock() = false;
        self.opened.notify_all();
    }

    /// Before every file creation: on the armed thread, report, wait while closed, and report
    /// the thread's end.
    fn pass(&self) {
        let name = std::thread::current().name().map(str::to_string);
        let armed = {
            let mut armed = self.armed.lock();
            match armed.as_ref() {
                Some(a) if name.as_deref() == Some(a.thread) => armed.take(),
                _ => None,
            }
        };
        let Some(armed) = armed else {
            return;
        };
        ON_EXIT.with(|e| *e.borrow_mut() = Some(OnExit(Some(armed.ended))));
        let _ = armed.arrived.send(());
        let mut closed = self.closed.lock();
        while *closed {
            self.opened.wait(&mut closed);
        }
    }
}

/// Sends when its thread ends: thread-locals are dropped after the thread's closure returned,
/// so after a background job has sent its result.
struct OnExit(Option<oneshot::Sender<()>>);

impl Drop for OnExit {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

thread_local! {
    static ON_EXIT: RefCell<Option<OnExit>> = const { RefCell::new(None) };
}

/// A `SimFs` whose file creations pass the gate first.
type GatedFs = HookedFs<Gate>;

impl FsHook for Gate {
    fn create(&self, fs: &SimFs, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.pass();
        fs.create(path)
    }
}

/// A server on one arbiter (the tests pause it) whose one region of table `t` lives on a gated
/// `SimFs`.
async fn start(dir: &tempfile::TempDir) -> (Kura, Arc<GatedFs>) {
    start_splitting_at(dir, None).await
}

/// [`start`], the region asking for a split once it holds more than `split_threshold` bytes.
async fn start_splitting_at(
    dir: &tempfile::TempDir,
    split_threshold: Option<u64>,
) -> (Kura, Arc<GatedFs>) {
    let fs = Arc::new(GatedFs::new(Gate::default()));
    let mut cfg = config(dir.path());
    cfg.arbiters = 1;
    cfg.memtable_budget = 64 << 10;
    cfg.split_threshold = split_threshold;
    cfg.file_system = Some(fs.clone());
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("t", 8, 1)).await.expect("create");
    (kura, fs)
}

/// With a background job held at the gate (`arrived`, `ended` from [`Gate::arm`]): pause the
/// region's thread, let the job finish (its result then waits for the thread), send a flush and
/// resume the thread. The flush's handler sends the store away, and actix polls the job's
/// completion in the same turn. Returns the flush's answer.
async fn flush_as_the_job_completes(
    kura: &Kura,
    gate: &Gate,
    (arrived, ended): (oneshot::Receiver<()>, oneshot::Receiver<()>),
) -> Result<()> {
    within("the job's start", arrived).await.expect("arrived");
    let (entered_tx, entered) = oneshot::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    kura.arbiters()[0].spawn_fn(move || {
        let _ = entered_tx.send(());
        let _ = released.recv();
    });
    within("the arbiter's pause", entered)
        .await
        .expect("paused");
    gate.open();
    within("the job thread's end", ended).await.expect("ended");
    let mut flush = Box::pin(kura.flush("t"));
    // Routed and in the region's mailbox.
    assert!(futures::poll!(flush.as_mut()).is_pending());
    release.send(()).expect("release");
    within("the flush's answer", flush).await
}

/// The segment files in the directory of the table's region (the first region id).
fn segment_files(fs: &GatedFs, dir: &tempfile::TempDir) -> usize {
    let names = fs.list(&dir.path().join("regions/1")).expect("list");
    names.iter().filter(|n| n.ends_with(".seg")).count()
}

#[actix_rt::test]
async fn a_compaction_that_finishes_as_a_flush_takes_the_store_is_installed_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (kura, fs) = start(&dir).await;
    for part in 0..3 {
        let rows: Vec<RowMutation> = (part * 100..part * 100 + 100)
            .map(|i| put(&key(i), b"v"))
            .collect();
        kura.mutate_rows("t", rows).await.expect("put");
        // Two segments to compact; the last rows stay in the memtable for the flush.
        if part < 2 {
            kura.flush("t").await.expect("flush");
        }
    }
    assert_eq!(segments(&kura, "t").await, 2);

    let held = fs.hook.arm("kura-compaction");
    let compaction = actix_rt::spawn({
        let kura = kura.clone();
        async move { kura.compact("t", true).await }
    });
    flush_as_the_job_completes(&kura, &fs.hook, held)
        .await
        .expect("flush");
    within("the compaction's answer", compaction)
        .await
        .expect("join")
        .expect("compaction");
    // The two compacted segments became one; the flush added one. The replaced files are
    // deleted off the region's thread.
    assert_eq!(segments(&kura, "t").await, 2);
    wait_until(
        "the replaced segment files deleted",
        Duration::from_secs(10),
        async || segment_files(&fs, &dir) == 2,
    )
    .await;
    let all = scan_all(&kura, "t", ScanSpec::all(), 1000).await;
    assert_eq!(all, (0..300).map(key).collect::<Vec<_>>());
    // The region is healthy: it compacts again.
    kura.compact("t", true).await.expect("compact again");
    assert_eq!(segments(&kura, "t").await, 1);
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_background_flush_that_finishes_as_a_flush_on_command_takes_the_store_is_retired() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (kura, fs) = start(&dir).await;
    // Past the memtable budget: the write's commit freezes the memtable and flushes it on a
    // thread of its own, held at the gate.
    let held = fs.hook.arm("kura-flush");
    let value = vec![7u8; 1024];
    let rows: Vec<RowMutation> = (0..100).map(|i| put(&key(i), &value)).collect();
    kura.mutate_rows("t", rows).await.expect("put");
    // The flush on command writes the frozen memtable itself; the background flush's segment,
    // installed after it, is stale and removed.
    flush_as_the_job_completes(&kura, &fs.hook, held)
        .await
        .expect("flush");
    assert_eq!(segments(&kura, "t").await, 1);
    // The stale segment is deleted once its install runs, after the flush on command.
    wait_until(
        "no segment file left behind",
        Duration::from_secs(10),
        async || segment_files(&fs, &dir) == 1,
    )
    .await;
    let all = scan_all(&kura, "t", ScanSpec::all(), 1000).await;
    assert_eq!(all, (0..100).map(key).collect::<Vec<_>>());
    // The region is healthy: it flushes again.
    kura.mutate("t", put(b"after", b"v")).await.expect("put");
    kura.flush("t").await.expect("flush again");
    assert_eq!(segments(&kura, "t").await, 2);
    kura.shutdown().await.expect("shutdown");
}

/// A region that passes the split threshold while a compaction runs splits without waiting
/// for it (under a steady load some compaction nearly always runs): the split links the
/// compaction's inputs like any segment, the compaction's output is installed afterwards as a
/// reference segment, and no row is lost or duplicated on either side.
#[actix_rt::test]
async fn a_region_past_the_split_threshold_splits_while_a_compaction_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (kura, fs) = start_splitting_at(&dir, Some(256 << 10)).await;
    let value = vec![3u8; 1024];
    for part in 0..2 {
        let rows: Vec<RowMutation> = (part * 50..part * 50 + 50)
            .map(|i| put(&key(i), &value))
            .collect();
        kura.mutate_rows("t", rows).await.expect("put");
        kura.flush("t").await.expect("flush");
    }
    let (arrived, _ended) = fs.hook.arm("kura-compaction");
    let compaction = actix_rt::spawn({
        let kura = kura.clone();
        async move { kura.compact("t", false).await }
    });
    within("the compaction's start", arrived)
        .await
        .expect("arrived");
    // Past the threshold while the compaction is held: the region splits all the same.
    for i in 100..500 {
        kura.mutate("t", put(&key(i), &value)).await.expect("put");
    }
    kura.flush("t").await.expect("flush");
    wait_until(
        "the split while the compaction is held",
        Duration::from_secs(30),
        async || kura.regions("t").await.expect("regions").len() >= 2,
    )
    .await;
    let all = scan_all(&kura, "t", ScanSpec::all(), 64).await;
    assert_eq!(all, (0..500).map(key).collect::<Vec<_>>());
    fs.hook.open();
    within("the compaction's answer", compaction)
        .await
        .expect("join")
        .expect("compaction");
    wait_until(
        "the reference segments rewritten",
        Duration::from_secs(30),
        async || {
            let regions = kura.regions("t").await.expect("regions");
            regions.iter().all(|r| !r.stats.compacting)
        },
    )
    .await;
    let all = scan_all(&kura, "t", ScanSpec::all(), 64).await;
    assert_eq!(all, (0..500).map(key).collect::<Vec<_>>());
}
