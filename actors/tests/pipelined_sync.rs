//! With `sync_thread`, in `sync` durability a region fsyncs its log on its sync thread: while the disk works, the
//! region serves reads of other rows, holds back reads of the rows being written (no read sees
//! a write before it is durable), and gathers the writes that arrive into the next batch.

mod common;
use common::*;
use kura_actors::storage::fs::{SyncHandle, WritableFile};
use kura_actors::storage::{FileSystem, SimFs};
use kura_actors::*;
use parking_lot::{Condvar, Mutex};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Holds every fsync made through a sync handle (the sync thread's) while closed.
#[derive(Default)]
struct Gate {
    state: Mutex<(bool, usize)>, // (closed, fsyncs waiting)
    changed: Condvar,
}

impl Gate {
    fn set_closed(&self, closed: bool) {
        self.state.lock().0 = closed;
        self.changed.notify_all();
    }

    fn waiting(&self) -> usize {
        self.state.lock().1
    }

    fn pass(&self) {
        let mut st = self.state.lock();
        st.1 += 1;
        while st.0 {
            self.changed.wait(&mut st);
        }
        st.1 -= 1;
    }
}

struct GatedFile {
    inner: Box<dyn WritableFile>,
    gate: Arc<Gate>,
}

struct GatedSync {
    inner: Box<dyn SyncHandle>,
    gate: Arc<Gate>,
}

impl WritableFile for GatedFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(buf)
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn sync_handle(&self) -> io::Result<Box<dyn SyncHandle>> {
        Ok(Box::new(GatedSync {
            inner: self.inner.sync_handle()?,
            gate: self.gate.clone(),
        }))
    }
}

impl SyncHandle for GatedSync {
    fn sync(&self) -> io::Result<()> {
        self.gate.pass();
        self.inner.sync()
    }
}

/// Makes a `SimFs` whose sync-handle fsyncs wait at the gate: every file opened for writing is
/// a [`GatedFile`].
impl FsHook for Arc<Gate> {
    fn create(&self, fs: &SimFs, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(GatedFile {
            inner: fs.create(path)?,
            gate: self.clone(),
        }))
    }
    fn open_write(&self, fs: &SimFs, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(GatedFile {
            inner: fs.open_write(path)?,
            gate: self.clone(),
        }))
    }
}

/// A server whose regions live on a gated `SimFs` (the catalog in `dir`).
async fn start(gate: &Arc<Gate>, dir: &tempfile::TempDir) -> Kura {
    let mut cfg = config(dir.path());
    cfg.durability = storage::Durability::Sync;
    cfg.sync_thread = true;
    cfg.file_system = Some(Arc::new(HookedFs::new(gate.clone())));
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("t", 8, 1)).await.expect("create");
    kura
}

fn get(kura: &Kura, row: &'static [u8]) -> impl std::future::Future<Output = Option<Vec<u8>>> {
    let kura = kura.clone();
    async move {
        let row = kura.get("t", row, &ReadSpec::default()).await.expect("get");
        row.map(|r| value(&r).to_vec())
    }
}

#[actix_rt::test]
async fn other_rows_are_read_while_a_write_waits_for_its_fsync_and_its_row_waits_with_it() {
    let gate = Arc::new(Gate::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = start(&gate, &dir).await;
    kura.mutate("t", put(b"a", b"1")).await.expect("put a");

    gate.set_closed(true);
    let k = kura.clone();
    let write = actix_rt::spawn(async move { k.mutate("t", put(b"b", b"2")).await });
    wait_until(
        "the write's fsync to start",
        Duration::from_secs(5),
        async || gate.waiting() == 1,
    )
    .await;

    // The region is not blocked by the fsync: a read of another row is answered.
    let a = actix_rt::time::timeout(Duration::from_secs(5), get(&kura, b"a"))
        .await
        .expect("a read of another row is not held back");
    assert_eq!(a.as_deref(), Some(&b"1"[..]));

    // A read of the row being written waits: it must not see a write that is not durable.
    let held = actix_rt::spawn(get(&kura, b"b"));
    // A window by design: nothing must happen in it (the read stays held, the write
    // unacknowledged) while the fsync is held.
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    assert!(!held.is_finished(), "a read of an in-flight row waits");
    assert!(
        !write.is_finished(),
        "the write is not acknowledged before its fsync"
    );

    gate.set_closed(false);
    write.await.expect("join").expect("the write succeeds");
    assert_eq!(held.await.expect("join").as_deref(), Some(&b"2"[..]));
    // The fsync was held over 100 ms: the region counts it as a disk stall.
    let regions = kura.regions("t").await.expect("stats");
    let slow: u64 = regions.iter().map(|r| r.stats.fsyncs_slow).sum();
    assert_eq!(slow, 1, "one slow fsync counted");
}

#[actix_rt::test]
async fn writes_that_arrive_during_an_fsync_are_committed_together_after_it() {
    let gate = Arc::new(Gate::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = start(&gate, &dir).await;
    let before = kura.regions("t").await.expect("stats");
    let fsyncs_before: u64 = before.iter().map(|s| s.stats.fsyncs).sum();

    gate.set_closed(true);
    let k = kura.clone();
    let first = actix_rt::spawn(async move { k.mutate("t", put(b"first", b"x")).await });
    wait_until(
        "the first fsync to start",
        Duration::from_secs(5),
        async || gate.waiting() == 1,
    )
    .await;
    let mut rest = Vec::new();
    for i in 0..20 {
        let k = kura.clone();
        rest.push(actix_rt::spawn(async move {
            k.mutate("t", put(&key(i), b"y")).await
        }));
    }
    // A window by design: no second fsync may start in it while the first is held.
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(gate.waiting(), 1, "one fsync at a time");
    gate.set_closed(false);
    first.await.expect("join").expect("first write");
    for w in rest {
        w.await.expect("join").expect("queued write");
    }
    let after = kura.regions("t").await.expect("stats");
    let fsyncs: u64 = after.iter().map(|s| s.stats.fsyncs).sum::<u64>() - fsyncs_before;
    let writes: u64 = after.iter().map(|s| s.stats.synced_writes).sum();
    assert_eq!(writes, 21, "every write is counted as synced");
    assert!(
        fsyncs <= 3,
        "the 20 queued writes share their fsyncs: {fsyncs}"
    );
}
