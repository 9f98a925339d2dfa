//! A region whose store fails (an fsync error poisons it) fails closed; the others keep serving.

mod common;
use common::*;
use kura_actors::storage::{Fault, FaultOp, SimFs};
use kura_actors::*;
use std::sync::Arc;

#[actix_rt::test]
async fn a_poisoned_region_fails_closed_while_the_others_serve() {
    poisoned_region_fails_closed(false).await;
}

#[actix_rt::test]
async fn a_region_poisoned_on_its_sync_thread_fails_closed_while_the_others_serve() {
    poisoned_region_fails_closed(true).await;
}

async fn poisoned_region_fails_closed(sync_thread: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = SimFs::new();
    let mut cfg = config(dir.path());
    cfg.durability = storage::Durability::Sync;
    cfg.sync_thread = sync_thread;
    cfg.file_system = Some(Arc::new(sim.clone()));
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("t", 16, 4)).await.expect("create");
    let regions = kura.regions("t").await.expect("regions");
    // One key per region.
    let keys: Vec<Vec<u8>> = regions
        .iter()
        .map(|r| {
            (0..)
                .map(key)
                .find(|k| {
                    let b = kura.bucket_of("t", k).expect("bucket");
                    b >= r.bucket_start && b < r.bucket_end
                })
                .expect("a key for every region")
        })
        .collect();
    for k in &keys {
        kura.mutate("t", put(k, b"ok"))
            .await
            .expect("healthy write");
    }

    // The next fsync fails: the region that performs it is poisoned.
    sim.inject(Fault {
        op: FaultOp::Sync,
        nth: 1,
        persistent: false,
    });
    let err = kura
        .mutate("t", put(&keys[1], b"lost"))
        .await
        .expect_err("fsync failed");
    assert!(
        matches!(err, ActorError::RegionUnavailable { region, .. } if region == regions[1].id),
        "{err:?}"
    );
    // It fails closed: reads too, not just writes.
    let read = kura.get("t", &keys[1], &ReadSpec::default()).await;
    assert!(
        matches!(read, Err(ActorError::RegionUnavailable { .. })),
        "{read:?}"
    );
    let scan = kura
        .scan(
            "t",
            ScanRequest {
                spec: ScanSpec::all(),
                limit: None,
                page: ScanLimits::default(),
            },
        )
        .await;
    assert!(
        matches!(scan, Err(ActorError::RegionUnavailable { .. })),
        "a scan needing it fails"
    );

    // The other regions keep serving reads and writes.
    for (i, k) in keys.iter().enumerate().filter(|(i, _)| *i != 1) {
        kura.mutate("t", put(k, b"still"))
            .await
            .unwrap_or_else(|e| panic!("region {i}: {e}"));
        let row = kura
            .get("t", k, &ReadSpec::default())
            .await
            .expect("get")
            .expect("row");
        assert_eq!(value(&row), b"still");
    }
    let infos = kura.regions("t").await.expect("regions");
    let poisoned: Vec<bool> = infos.iter().map(|r| r.stats.poisoned).collect();
    assert_eq!(poisoned, vec![false, true, false, false]);
    kura.shutdown()
        .await
        .expect("shutdown closes the healthy regions");
}

/// A flush that cannot create its segment file (a full disk, no descriptor left) poisons the
/// store, but every acknowledged write is still in the region's logs: the region fails closed,
/// then reopens from disk on its own and serves them all again, without a restart.
#[actix_rt::test]
async fn a_region_failed_by_a_flush_reopens_from_disk_with_every_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = SimFs::new();
    let mut cfg = config(dir.path());
    cfg.durability = storage::Durability::Sync;
    cfg.file_system = Some(Arc::new(sim.clone()));
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("t", 16, 1)).await.expect("create");
    for i in 0..20 {
        kura.mutate("t", put(&key(i), b"v")).await.expect("put");
    }
    sim.inject(Fault {
        op: FaultOp::Create,
        nth: 1,
        persistent: false,
    });
    kura.flush("t")
        .await
        .expect_err("the segment file cannot be created");
    let read = kura.get("t", &key(0), &ReadSpec::default()).await;
    assert!(
        matches!(read, Err(ActorError::RegionUnavailable { .. })),
        "fails closed first: {read:?}"
    );
    let start = std::time::Instant::now();
    loop {
        match kura.get("t", &key(0), &ReadSpec::default()).await {
            Ok(_) => break,
            Err(e) => assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "did not reopen: {e:?}"
            ),
        }
        actix_rt::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for i in 0..20 {
        let row = kura
            .get("t", &key(i), &ReadSpec::default())
            .await
            .expect("get")
            .expect("an acknowledged row");
        assert_eq!(value(&row), b"v");
    }
    kura.mutate("t", put(&key(20), b"w"))
        .await
        .expect("writes again");
    kura.flush("t").await.expect("flushes again");
    let infos = kura.regions("t").await.expect("regions");
    assert!(!infos[0].stats.poisoned);
    kura.shutdown().await.expect("shutdown");
}

/// A failed log fsync is another matter: the batch it covered was answered as failed, yet its
/// bytes may be in the log, so a reopen could apply writes their callers were told did not
/// happen (RELIABILITY.md rule 5). Such a region stays closed.
#[actix_rt::test]
async fn a_region_whose_log_fsync_failed_stays_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = SimFs::new();
    let mut cfg = config(dir.path());
    cfg.durability = storage::Durability::Sync;
    cfg.file_system = Some(Arc::new(sim.clone()));
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("t", 16, 1)).await.expect("create");
    kura.mutate("t", put(&key(0), b"v")).await.expect("put");
    sim.inject(Fault {
        op: FaultOp::Sync,
        nth: 1,
        persistent: false,
    });
    kura.mutate("t", put(&key(1), b"lost"))
        .await
        .expect_err("the fsync failed");
    actix_rt::time::sleep(std::time::Duration::from_millis(2500)).await;
    let read = kura.get("t", &key(1), &ReadSpec::default()).await;
    assert!(
        matches!(read, Err(ActorError::RegionUnavailable { .. })),
        "still closed: {read:?}"
    );
    kura.shutdown().await.expect("shutdown");
}
