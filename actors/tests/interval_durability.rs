//! `interval` durability: writes are acknowledged before an fsync, and every region fsyncs
//! them on its own timer.

mod common;
use common::*;
use kura_actors::*;
use std::time::Duration;

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
    let synced = async || {
        let regions = kura.regions("i").await.expect("regions");
        let synced: u64 = regions.iter().map(|r| r.stats.synced_writes).sum();
        let fsyncs: u64 = regions.iter().map(|r| r.stats.fsyncs).sum();
        (synced, fsyncs)
    };
    wait_until(
        "the region timers fsync every acknowledged write",
        Duration::from_secs(10),
        async || matches!(synced().await, (s, f) if s >= writes as u64 && f >= 1),
    )
    .await;
    assert_eq!(
        synced().await.0,
        writes as u64,
        "every interval write is fsynced by the region timer"
    );
    kura.shutdown().await.expect("shutdown");
}
