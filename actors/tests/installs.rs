//! Installing a background flush's or compaction's segment writes the region's manifest (a
//! file, its fsync, a rename, the directory's fsync), which waits behind the disk's other
//! writes: after a large load, behind gigabytes of compaction output. The install runs on a
//! thread of its own with the region paused, so that the arbiter it shares with other regions
//! (an HTTP worker, with thread per core) serves them meanwhile. The tests hold an install in
//! its manifest write and read another table on the same arbiter.

mod common;
use common::*;
use kura_actors::storage::fs::WritableFile;
use kura_actors::storage::{FileSystem, SimFs};
use kura_actors::*;
use parking_lot::{Condvar, Mutex};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Holds the next creation of a manifest in one directory until opened, on whatever thread
/// makes it, and tells the test when it got there.
#[derive(Default)]
struct ManifestGate {
    armed: Mutex<Option<(PathBuf, oneshot::Sender<()>)>>,
    closed: Mutex<bool>,
    opened: Condvar,
}

impl ManifestGate {
    /// Hold the next manifest written in `dir`.
    fn arm(&self, dir: PathBuf) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        *self.closed.lock() = true;
        *self.armed.lock() = Some((dir, tx));
        rx
    }

    fn open(&self) {
        *self.closed.lock() = false;
        self.opened.notify_all();
    }
}

impl FsHook for ManifestGate {
    fn create(&self, fs: &SimFs, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let held = {
            let mut armed = self.armed.lock();
            let ours = armed.as_ref().is_some_and(|(dir, _)| {
                path.parent() == Some(dir.as_path())
                    && path.file_name().is_some_and(|n| n == "MANIFEST.tmp")
            });
            if ours {
                armed.take()
            } else {
                None
            }
        };
        if let Some((_, arrived)) = held {
            let _ = arrived.send(());
            let mut closed = self.closed.lock();
            while *closed {
                self.opened.wait(&mut closed);
            }
        }
        fs.create(path)
    }
}

/// One arbiter holding table `t` (region 1, on a gated file system, 64 KB memtables) and table
/// `u` (region 2) with one row, `other`.
async fn start(dir: &tempfile::TempDir) -> (Kura, Arc<HookedFs<ManifestGate>>) {
    let fs = Arc::new(HookedFs::new(ManifestGate::default()));
    let mut cfg = config(dir.path());
    cfg.arbiters = 1;
    cfg.memtable_budget = 64 << 10;
    cfg.file_system = Some(fs.clone());
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("t", 8, 1)).await.expect("create t");
    kura.create_table(table("u", 8, 1)).await.expect("create u");
    kura.mutate("u", put(b"other", b"v")).await.expect("put u");
    (kura, fs)
}

/// While region 1's install is held in its manifest write, table `u`, on the same arbiter,
/// answers a read; then the install goes on.
async fn read_the_other_table_while_held(kura: &Kura, gate: &ManifestGate) {
    let row = within(
        "a read of the other table during the install",
        kura.get("u", b"other", &ReadSpec::default()),
    )
    .await
    .expect("get")
    .expect("the row");
    assert_eq!(value(&row), b"v");
    gate.open();
}

#[actix_rt::test]
async fn a_compaction_install_held_in_its_manifest_write_leaves_the_arbiters_other_regions_serving()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let (kura, fs) = start(&dir).await;
    for part in 0..2 {
        let rows: Vec<RowMutation> = (part * 100..part * 100 + 100)
            .map(|i| put(&key(i), b"v"))
            .collect();
        kura.mutate_rows("t", rows).await.expect("put");
        kura.flush("t").await.expect("flush");
    }
    assert_eq!(segments(&kura, "t").await, 2);

    let arrived = fs.hook.arm(dir.path().join("regions/1"));
    let compaction = actix_rt::spawn({
        let kura = kura.clone();
        async move { kura.compact("t", true).await }
    });
    within("the install's manifest write", arrived)
        .await
        .expect("arrived");
    read_the_other_table_while_held(&kura, &fs.hook).await;
    within("the compaction's answer", compaction)
        .await
        .expect("join")
        .expect("compaction");
    assert_eq!(segments(&kura, "t").await, 1);
    let all = scan_all(&kura, "t", ScanSpec::all(), 1000).await;
    assert_eq!(all, (0..200).map(key).collect::<Vec<_>>());
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_background_flush_install_held_in_its_manifest_write_leaves_the_arbiters_other_regions_serving(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (kura, fs) = start(&dir).await;
    let installed = fs.hook.arm(dir.path().join("regions/1"));
    let value = vec![7u8; 1024];
    let rows: Vec<RowMutation> = (0..100).map(|i| put(&key(i), &value)).collect();
    // Past the 64 KB budget: the commit freezes the memtable (a new log, no manifest) and
    // flushes it in the background; its install writes the manifest.
    kura.mutate_rows("t", rows).await.expect("put");
    within("the install's manifest write", installed)
        .await
        .expect("arrived");
    read_the_other_table_while_held(&kura, &fs.hook).await;
    wait_until(
        "the flushed segment installed",
        Duration::from_secs(30),
        async || segments(&kura, "t").await == 1,
    )
    .await;
    let all = scan_all(&kura, "t", ScanSpec::all(), 1000).await;
    assert_eq!(all, (0..100).map(key).collect::<Vec<_>>());
    kura.shutdown().await.expect("shutdown");
}
