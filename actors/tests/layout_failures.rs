//! Layout changes that go wrong part-way. A split whose catalog commit fails must leave every
//! acknowledged row readable (the split is undone, nothing dropped); a region narrowed by a
//! split before a restart drops the moved rows after it and keeps splitting automatically; a
//! drop whose catalog commit fails leaves the table served as before.
mod common;
use common::*;
use kura_actors::*;
use std::time::Duration;

#[actix_rt::test]
async fn a_split_whose_catalog_commit_fails_loses_no_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("a", 16, 1)).await.expect("create");
    let batch: Vec<RowMutation> = (0..400).map(|i| put(&key(i), b"v")).collect();
    kura.mutate_rows("a", batch).await.expect("load");
    // The catalog save cannot create its temporary file: the commit fails.
    let blocker = dir.path().join("catalog.json.tmp");
    std::fs::create_dir(&blocker).expect("mkdir");
    let r = RegionId::new(kura.regions("a").await.expect("regions")[0].id);
    let res = kura.split_region("a", r, None).await;
    assert!(res.is_err(), "the split must fail: {res:?}");
    std::fs::remove_dir(&blocker).expect("rmdir");
    // Any compaction the split set off has finished and is installed.
    wait_until("the compactions end", Duration::from_secs(20), async || {
        !compacting(&kura, "a").await
    })
    .await;
    kura.compact("a", true).await.expect("compact");
    let mut missing = Vec::new();
    for i in 0..400 {
        let got = kura.get("a", &key(i), &ReadSpec::default()).await;
        if got.expect("get").is_none() {
            missing.push(i);
        }
    }
    assert!(
        missing.is_empty(),
        "{} rows lost: {missing:?}",
        missing.len()
    );
    assert_eq!(scan_all(&kura, "a", ScanSpec::all(), 1000).await.len(), 400);
    assert_eq!(kura.regions("a").await.expect("regions").len(), 1);
    // And the table can still split once the disk is healthy.
    kura.split_region("a", r, None).await.expect("split");
    assert_eq!(scan_all(&kura, "a", ScanSpec::all(), 1000).await.len(), 400);
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_region_narrowed_before_a_restart_cleans_up_and_splits_again_automatically() {
    let dir = tempfile::tempdir().expect("tempdir");
    let value = vec![7u8; 512];
    let load = |kura: Kura, chunks: std::ops::Range<usize>| {
        let value = value.clone();
        async move {
            for chunk in chunks {
                let batch: Vec<RowMutation> =
                    (0..20).map(|i| put(&key(chunk * 20 + i), &value)).collect();
                kura.mutate_rows("auto", batch).await.expect("load");
            }
        }
    };
    {
        let kura = Kura::start(config(dir.path())).await.expect("start");
        kura.create_table(table("auto", 64, 1))
            .await
            .expect("create");
        load(kura.clone(), 0..40).await;
        let r = RegionId::new(kura.regions("auto").await.expect("regions")[0].id);
        kura.split_region("auto", r, None).await.expect("split");
        kura.shutdown().await.expect("shutdown");
    }
    let mut cfg = config(dir.path());
    cfg.split_threshold = Some(64 << 10);
    cfg.memtable_budget = 32 << 10;
    let kura = Kura::start(cfg).await.expect("restart");
    load(kura.clone(), 40..80).await;
    wait_until(
        "two regions of ~200 KiB over a 64 KiB threshold split",
        Duration::from_secs(20),
        async || kura.regions("auto").await.expect("regions").len() > 2,
    )
    .await;
    assert_eq!(
        scan_all(&kura, "auto", ScanSpec::all(), 100).await.len(),
        1600
    );
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_drop_whose_catalog_commit_fails_leaves_the_table_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("d", 16, 2)).await.expect("create");
    let batch: Vec<RowMutation> = (0..100).map(|i| put(&key(i), b"v")).collect();
    kura.mutate_rows("d", batch).await.expect("load");
    let blocker = dir.path().join("catalog.json.tmp");
    std::fs::create_dir(&blocker).expect("mkdir");
    assert!(kura.drop_table("d").await.is_err(), "the drop must fail");
    std::fs::remove_dir(&blocker).expect("rmdir");
    assert_eq!(scan_all(&kura, "d", ScanSpec::all(), 1000).await.len(), 100);
    kura.mutate("d", put(b"after", b"v"))
        .await
        .expect("still writable");
    kura.drop_table("d")
        .await
        .expect("the retried drop succeeds");
    kura.create_table(table("d", 16, 2))
        .await
        .expect("re-create");
    assert!(scan_all(&kura, "d", ScanSpec::all(), 1000).await.is_empty());
    kura.shutdown().await.expect("shutdown");
}
