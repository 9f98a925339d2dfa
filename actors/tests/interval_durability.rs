//! `interval` durability: writes are acknowledged before an fsync, and every region fsyncs
//! them on its own timer.

mod common;
use common::*;
use kura_actors::*;
use std::time::{Duration, Instant};

#[actix_rt::test]
async fn regions_fsync_interval_writes_on_their_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.durability = storage::Durability::Interval(Duration::from_millis(20));
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("i", 4, 2)).await.expect("create");
    let writes = 50;
    for i in 0..writes {
        kura.mutate("i", put(&key(i), b"v")).await.expect("write");
    }
    // Poll the figures (bounded) until the timers have synced every acknowledged write.
    let deadline = Instant::now() + Duration::from_secs(10);
    let synced = loop {
        let regions = kura.regions("i").await.expect("regions");
        let synced: u64 = regions.iter().map(|r| r.stats.synced_writes).sum();
        let fsyncs: u64 = regions.iter().map(|r| r.stats.fsyncs).sum();
        if (synced >= writes as u64 && fsyncs >= 1) || Instant::now() > deadline {
            break synced;
        }
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        synced, writes as u64,
        "every interval write is fsynced by the region timer"
    );
    kura.shutdown().await.expect("shutdown");
}
