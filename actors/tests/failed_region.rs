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
                    (r.bucket_start..r.bucket_end).contains(&b.get())
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
