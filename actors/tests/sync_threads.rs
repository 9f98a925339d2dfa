//! The server's log-sync threads are as many as `KuraConfig::sync_threads` asks when more
//! regions than that share them, and every synced write of those regions is answered. One test
//! in this file: it counts the process's threads by name.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use kura_actors::*;

/// How many of this process's threads have a name that starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[actix_rt::test]
async fn eight_regions_fsync_their_writes_on_the_sync_threads_asked_for() {
    // A count that is not the default (one per core) and is below the regions.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let asked = if cores == 3 { 5 } else { 3 };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.durability = storage::Durability::Sync;
    cfg.sync_thread = true;
    cfg.sync_threads = asked;
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("t", 64, 8)).await.expect("create");
    assert_eq!(kura.regions("t").await.expect("regions").len(), 8);

    // Enough rows, written at once, that every region has synced writes in flight.
    let writes: Vec<_> = (0..256)
        .map(|i| {
            let kura = kura.clone();
            actix_rt::spawn(async move { kura.mutate("t", put(&key(i), b"v")).await })
        })
        .collect();
    for w in writes {
        w.await.expect("join").expect("a synced write is answered");
    }
    assert_eq!(threads_named("kura-sync-"), asked);

    for i in 0..256 {
        let row = kura
            .get("t", &key(i), &ReadSpec::default())
            .await
            .expect("get");
        assert_eq!(row.as_ref().map(value), Some(&b"v"[..]), "row {i}");
    }
    kura.shutdown().await.expect("shutdown");
}
