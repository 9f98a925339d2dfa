//! The router applies layout changes one at a time, in the order they reach it: concurrent
//! changes of one table cannot interleave, and a checkpoint sees no create, alter, drop or split
//! until it has finished.

mod common;

use common::*;
use kura_actors::*;

#[actix_rt::test]
async fn concurrent_creates_of_one_table_make_one_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    // Every create is sent before any is answered: each must see the ones before it done.
    let creates = (0..8).map(|_| kura.create_table(table("t", 16, 2)));
    let results = futures::future::join_all(creates).await;
    let created = results.iter().filter(|r| r.is_ok()).count();
    let refused = results
        .iter()
        .filter(|r| matches!(r, Err(ActorError::TableExists(_))))
        .count();
    assert_eq!((created, refused), (1, 7), "{results:?}");
    assert_eq!(kura.regions("t").await.expect("regions").len(), 2);
    kura.shutdown().await.expect("shutdown");
    let kura = Kura::start(config(dir.path())).await.expect("restart");
    assert_eq!(kura.regions("t").await.expect("regions").len(), 2);
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_checkpoint_sent_among_splits_copies_every_region_it_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 16, 2)).await.expect("create");
    for i in 0..400 {
        kura.mutate("t", put(&key(i), b"v")).await.expect("put");
    }
    let regions = kura.regions("t").await.expect("regions");
    let dest = dir.path().join("copy");
    // Split both regions around the checkpoint: each split runs wholly before it or after it.
    let (first, copy, second) = futures::join!(
        kura.split_region("t", RegionId::new(regions[0].id), None),
        kura.checkpoint(&dest),
        kura.split_region("t", RegionId::new(regions[1].id), None),
    );
    first.expect("split before");
    second.expect("split after");
    let info = copy.expect("checkpoint");
    assert_eq!(info.regions, 3, "the checkpoint ran between the two splits");
    kura.shutdown().await.expect("shutdown");

    let restored = Kura::start(config(&dest)).await.expect("open the copy");
    assert_eq!(restored.regions("t").await.expect("regions").len(), 3);
    for i in 0..400 {
        let row = restored
            .get("t", &key(i), &ReadSpec::default())
            .await
            .expect("get from the copy");
        assert_eq!(
            row.map(|r| value(&r).to_vec()),
            Some(b"v".to_vec()),
            "row {i}"
        );
    }
    restored.shutdown().await.expect("shutdown");
}
