//! Region splits: on command and automatically, under concurrent writes, across restarts.

mod common;
use common::*;
use kura_actors::*;
use std::collections::BTreeSet;
use std::time::Duration;

#[actix_rt::test]
async fn a_split_under_concurrent_writes_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("s", 16, 1)).await.expect("create");
    for i in 0..300 {
        kura.mutate("s", put(&key(i), b"before"))
            .await
            .expect("put");
    }
    // 8 writers, each acknowledging its own keys, while the table splits three times.
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let kura = kura.clone();
            actix_rt::spawn(async move {
                let mut acked = Vec::new();
                for n in 0..150 {
                    let k = format!("w{w}-{n:04}").into_bytes();
                    kura.mutate("s", put(&k, b"during"))
                        .await
                        .expect("write during split");
                    acked.push(k);
                    if n % 10 == 0 {
                        let inc = Increment {
                            row: b"counter".to_vec(),
                            columns: vec![(b"cf".to_vec(), b"n".to_vec(), 1)],
                        };
                        kura.increment("s", inc)
                            .await
                            .expect("increment during split");
                    }
                }
                acked
            })
        })
        .collect();
    let first = RegionId::new(kura.regions("s").await.expect("regions")[0].id);
    let (old, new) = kura.split_region("s", first, None).await.expect("split 1");
    assert_eq!(old, first);
    kura.split_region("s", new, None).await.expect("split 2");
    kura.split_region("s", first, Some(SaltBucket::new(3)))
        .await
        .expect("split 3");
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.expect("writer"));
    }
    let regions = kura.regions("s").await.expect("regions");
    assert_eq!(regions.len(), 4);
    let ranges: Vec<(u32, u32)> = regions
        .iter()
        .map(|r| (r.bucket_start, r.bucket_end))
        .collect();
    assert_eq!(ranges, vec![(0, 3), (3, 8), (8, 12), (12, 16)]);

    let check = |kura: Kura, acked: Vec<Vec<u8>>| async move {
        for k in &acked {
            let row = kura
                .get("s", k, &ReadSpec::default())
                .await
                .expect("get")
                .expect("acked row");
            assert_eq!(value(&row), b"during");
        }
        for i in 0..300 {
            assert!(kura
                .get("s", &key(i), &ReadSpec::default())
                .await
                .expect("get")
                .is_some());
        }
        let counter = kura
            .get("s", b"counter", &ReadSpec::default())
            .await
            .expect("get")
            .expect("row");
        assert_eq!(value(&counter), (8 * 15i64).to_be_bytes().as_slice());
        let all = scan_all(&kura, "s", ScanSpec::all(), 97).await;
        let unique: BTreeSet<&Vec<u8>> = all.iter().collect();
        assert_eq!(unique.len(), all.len(), "no row read twice");
        assert_eq!(all.len(), 300 + acked.len() + 1, "no row missed");
    };
    check(kura.clone(), acked.clone()).await;
    kura.shutdown().await.expect("shutdown");

    // The split layout and every row survive a restart.
    let kura = Kura::start(config(dir.path())).await.expect("restart");
    let again: Vec<(u32, u32)> = kura
        .regions("s")
        .await
        .expect("regions")
        .iter()
        .map(|r| (r.bucket_start, r.bucket_end))
        .collect();
    assert_eq!(again, ranges);
    check(kura.clone(), acked).await;
    kura.shutdown().await.expect("shutdown");
}

/// A memtable above the split's inline-flush size is flushed in the background first, while
/// writes go on; the split then takes the store with what came in meanwhile, and every
/// acknowledged write is found on the side that owns it.
#[actix_rt::test]
async fn a_split_of_a_region_with_a_large_memtable_flushes_first_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.memtable_budget = 64 << 20;
    let kura = Kura::start(c).await.expect("start");
    kura.create_table(table("m", 16, 1)).await.expect("create");
    let value = vec![5u8; 16 << 10];
    for i in 0..400 {
        kura.mutate("m", put(&key(i), &value)).await.expect("put");
    }
    let regions = kura.regions("m").await.expect("regions");
    assert!(
        regions[0].stats.memtable_bytes > 4 << 20,
        "the memtable is past the split's inline-flush size"
    );
    let writer = actix_rt::spawn({
        let kura = kura.clone();
        async move {
            for i in 400..600 {
                kura.mutate("m", put(&key(i), b"during"))
                    .await
                    .expect("write during split");
            }
        }
    });
    let first = RegionId::new(regions[0].id);
    kura.split_region("m", first, None).await.expect("split");
    writer.await.expect("writer");
    assert_eq!(kura.regions("m").await.expect("regions").len(), 2);
    let all = scan_all(&kura, "m", ScanSpec::all(), 64).await;
    assert_eq!(all, (0..600).map(key).collect::<Vec<_>>());
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_scan_spanning_a_split_sees_every_row_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("s", 32, 2)).await.expect("create");
    let rows = 400;
    let batch: Vec<RowMutation> = (0..rows).map(|i| put(&key(i), b"v")).collect();
    kura.mutate_rows("s", batch).await.expect("load");
    for reversed in [false, true] {
        let mut spec = ScanSpec {
            reversed,
            ..ScanSpec::all()
        };
        let mut seen = Vec::new();
        let mut pages = 0;
        loop {
            let req = ScanRequest {
                spec: spec.clone(),
                limit: Some(25),
                page: ScanLimits::default(),
            };
            let page = kura.scan("s", req).await.expect("scan");
            pages += 1;
            if let Some(last) = page.rows.last() {
                spec = spec.resume_after(&last.key);
            }
            seen.extend(page.rows.into_iter().map(|r| r.key));
            if page.complete {
                break;
            }
            // Split some region between pages: the next page is routed by the new layout.
            if pages % 3 == 0 {
                let regions = kura.regions("s").await.expect("regions");
                if let Some(r) = regions.iter().find(|r| r.bucket_end - r.bucket_start >= 2) {
                    kura.split_region("s", RegionId::new(r.id), None)
                        .await
                        .expect("split");
                }
            }
        }
        let mut want: Vec<Vec<u8>> = (0..rows).map(key).collect();
        if reversed {
            want.reverse();
        }
        assert_eq!(seen, want, "reversed: {reversed}");
    }
    assert!(kura.regions("s").await.expect("regions").len() > 2);
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_scan_running_during_splits_sees_every_row_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("s", 64, 1)).await.expect("create");
    let rows = 2000;
    let batch: Vec<RowMutation> = (0..rows).map(|i| put(&key(i), b"v")).collect();
    kura.mutate_rows("s", batch).await.expect("load");
    // One long scan with small region pages races six splits.
    let scanner = {
        let kura = kura.clone();
        actix_rt::spawn(async move {
            let req = ScanRequest {
                spec: ScanSpec::all(),
                limit: None,
                page: ScanLimits {
                    max_rows: rows,
                    max_bytes: 600,
                },
            };
            let mut spec = req.spec.clone();
            let mut seen = Vec::new();
            loop {
                let page = kura
                    .scan(
                        "s",
                        ScanRequest {
                            spec: spec.clone(),
                            ..req.clone()
                        },
                    )
                    .await
                    .expect("scan");
                if let Some(last) = page.rows.last() {
                    spec = spec.resume_after(&last.key);
                }
                seen.extend(page.rows.into_iter().map(|r| r.key));
                if page.complete {
                    return seen;
                }
            }
        })
    };
    for _ in 0..6 {
        let regions = kura.regions("s").await.expect("regions");
        let widest = regions
            .iter()
            .max_by_key(|r| r.bucket_end - r.bucket_start)
            .expect("region");
        kura.split_region("s", RegionId::new(widest.id), None)
            .await
            .expect("split");
    }
    let seen = scanner.await.expect("scanner");
    assert_eq!(seen, (0..rows).map(key).collect::<Vec<_>>());
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn splits_refuse_bad_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("s", 4, 4)).await.expect("create");
    let r = RegionId::new(kura.regions("s").await.expect("regions")[0].id);
    assert!(matches!(
        kura.split_region("s", r, None).await,
        Err(ActorError::InvalidArgument(_))
    ));
    assert!(matches!(
        kura.split_region("s", RegionId::new(999), None).await,
        Err(ActorError::InvalidArgument(_))
    ));
    assert!(matches!(
        kura.split_region("nope", r, None).await,
        Err(ActorError::TableNotFound(_))
    ));
    kura.create_table(table("w", 8, 1)).await.expect("create");
    let r = RegionId::new(kura.regions("w").await.expect("regions")[0].id);
    assert!(matches!(
        kura.split_region("w", r, Some(SaltBucket::new(0))).await,
        Err(ActorError::InvalidArgument(_))
    ));
    assert!(matches!(
        kura.split_region("w", r, Some(SaltBucket::new(8))).await,
        Err(ActorError::InvalidArgument(_))
    ));
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_region_past_the_threshold_splits_by_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.split_threshold = Some(64 << 10);
    cfg.memtable_budget = 32 << 10;
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("auto", 64, 1))
        .await
        .expect("create");
    let value = vec![7u8; 512];
    for chunk in 0..40 {
        let batch: Vec<RowMutation> = (0..20).map(|i| put(&key(chunk * 20 + i), &value)).collect();
        kura.mutate_rows("auto", batch).await.expect("load");
    }
    // The split runs in the background.
    wait_until(
        "a region holding ~400 KiB over a 64 KiB threshold splits",
        Duration::from_secs(20),
        async || kura.regions("auto").await.expect("regions").len() > 1,
    )
    .await;
    let all = scan_all(&kura, "auto", ScanSpec::all(), 128).await;
    assert_eq!(all, (0..800).map(key).collect::<Vec<_>>());
    kura.shutdown().await.expect("shutdown");
}

/// The segment files of every region directory under `<data dir>/regions/`.
fn segment_files(dir: &std::path::Path) -> BTreeSet<std::path::PathBuf> {
    let mut out = BTreeSet::new();
    for region in std::fs::read_dir(dir.join("regions")).expect("regions dir") {
        for f in std::fs::read_dir(region.expect("entry").path()).expect("region dir") {
            let p = f.expect("entry").path();
            if p.extension().is_some_and(|e| e == "seg") {
                out.insert(p);
            }
        }
    }
    out
}

#[actix_rt::test]
async fn both_halves_of_a_split_rewrite_the_files_they_share_in_the_background() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("refs", 16, 1))
        .await
        .expect("create");
    for i in 0..300 {
        kura.mutate("refs", put(&key(i), b"v")).await.expect("put");
    }
    kura.flush("refs").await.expect("flush");
    let before = segment_files(dir.path());
    let first = RegionId::new(kura.regions("refs").await.expect("regions")[0].id);
    let (_, new) = kura.split_region("refs", first, None).await.expect("split");
    // The new region started on links to the old one's files: the same names in its directory.
    let linked: BTreeSet<_> = before
        .iter()
        .map(|p| {
            dir.path()
                .join(format!("regions/{new}"))
                .join(p.file_name().unwrap())
        })
        .collect();
    // Both regions rewrite them in the background: every file the split shared leaves both
    // directories, and what is left has one name.
    let shared = |files: &BTreeSet<std::path::PathBuf>| {
        files
            .iter()
            .filter(|p| before.contains(*p) || linked.contains(*p))
            .count()
    };
    wait_until(
        "the shared segments are rewritten",
        Duration::from_secs(20),
        async || shared(&segment_files(dir.path())) == 0,
    )
    .await;
    let files = segment_files(dir.path());
    for p in &files {
        assert_eq!(std::fs::metadata(p).map_or(1, |m| m.nlink()), 1, "{p:?}");
    }
    let all = scan_all(&kura, "refs", ScanSpec::all(), 64).await;
    assert_eq!(all, (0..300).map(key).collect::<Vec<_>>());
    kura.shutdown().await.expect("shutdown");
}
