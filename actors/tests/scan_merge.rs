//! Merged scans over many regions: global order, exact limits, resumption, both directions.

mod common;
use common::*;
use kura_actors::*;
use std::ops::Bound;

async fn loaded(dir: &std::path::Path, rows: usize) -> Kura {
    let kura = Kura::start(config(dir)).await.expect("start");
    kura.create_table(table("t", 64, 8)).await.expect("create");
    let batch: Vec<RowMutation> = (0..rows).map(|i| put(&key(i), &key(i))).collect();
    kura.mutate_rows("t", batch).await.expect("load");
    kura
}

#[actix_rt::test]
async fn forward_pages_come_in_global_order_with_exact_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = loaded(dir.path(), 1000).await;
    let regions = kura.regions("t").await.expect("regions");
    assert_eq!(regions.len(), 8);
    assert!(
        regions
            .iter()
            .all(|r| r.stats.writes > 0 || r.stats.memtable_cells > 0),
        "salting spreads sequential keys over every region"
    );
    for page in [1, 7, 100, 999, 1000, 5000] {
        let keys = scan_all(&kura, "t", ScanSpec::all(), page).await;
        let want: Vec<Vec<u8>> = (0..1000).map(key).collect();
        assert_eq!(keys, want, "page size {page}");
    }
    // A bounded range, exact limit.
    let spec = ScanSpec::forward(&key(100), &key(200));
    let req = ScanRequest {
        spec: spec.clone(),
        limit: Some(30),
        page: ScanLimits::default(),
    };
    let got = kura.scan("t", req).await.expect("scan");
    assert_eq!(
        got.rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>(),
        (100..130).map(key).collect::<Vec<_>>()
    );
    assert!(!got.complete);
    let keys = scan_all(&kura, "t", spec, 33).await;
    assert_eq!(keys, (100..200).map(key).collect::<Vec<_>>());
    // The page's own row bound is exact too.
    let req = ScanRequest {
        spec: ScanSpec::all(),
        limit: None,
        page: ScanLimits {
            max_rows: 17,
            max_bytes: 1 << 20,
        },
    };
    let got = kura.scan("t", req).await.expect("scan");
    assert_eq!(got.rows.len(), 17);
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn reversed_pages_come_in_descending_order_and_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = loaded(dir.path(), 500).await;
    let spec = ScanSpec {
        reversed: true,
        ..ScanSpec::all()
    };
    for page in [1, 13, 500, 501] {
        let keys = scan_all(&kura, "t", spec.clone(), page).await;
        let want: Vec<Vec<u8>> = (0..500).rev().map(key).collect();
        assert_eq!(keys, want, "page size {page}");
    }
    let spec = ScanSpec {
        low: Bound::Included(key(10)),
        high: Bound::Excluded(key(60)),
        reversed: true,
        ..ScanSpec::all()
    };
    let keys = scan_all(&kura, "t", spec, 9).await;
    assert_eq!(keys, (10..60).rev().map(key).collect::<Vec<_>>());
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn the_last_page_reports_complete_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = loaded(dir.path(), 40).await;
    let req = ScanRequest {
        spec: ScanSpec::all(),
        limit: Some(40),
        page: ScanLimits::default(),
    };
    let got = kura.scan("t", req).await.expect("scan");
    assert_eq!(got.rows.len(), 40);
    assert!(got.complete, "no row remains after the 40th");
    let req = ScanRequest {
        spec: ScanSpec::all(),
        limit: Some(39),
        page: ScanLimits::default(),
    };
    assert!(!kura.scan("t", req).await.expect("scan").complete);
    let empty = ScanSpec::forward(b"z", b"");
    let req = ScanRequest {
        spec: empty,
        limit: Some(10),
        page: ScanLimits::default(),
    };
    let got = kura.scan("t", req).await.expect("scan");
    assert!(got.rows.is_empty() && got.complete);
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_prefix_salted_table_keeps_a_prefix_in_one_region() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    let mut desc = table("blog", 64, 8);
    desc.salt.prefix_len = Some(6);
    kura.create_table(desc).await.expect("create");
    let mut batch = Vec::new();
    for user in 0..20 {
        for article in 0..25 {
            let k = format!("u{user:05}/{article:04}");
            batch.push(put(k.as_bytes(), k.as_bytes()));
        }
    }
    kura.mutate_rows("blog", batch).await.expect("load");
    let b = kura.bucket_of("blog", b"u00007/0000");
    assert!((0..25).all(|a| kura.bucket_of("blog", format!("u00007/{a:04}").as_bytes()) == b));
    let keys = scan_all(&kura, "blog", ScanSpec::forward(b"u00007", b"u00008"), 10).await;
    let want: Vec<Vec<u8>> = (0..25)
        .map(|a| format!("u00007/{a:04}").into_bytes())
        .collect();
    assert_eq!(keys, want);
    let newest_first = ScanSpec {
        reversed: true,
        ..ScanSpec::forward(b"u00007/", b"u00007/\xff")
    };
    let keys = scan_all(&kura, "blog", newest_first, 4).await;
    assert_eq!(keys, want.into_iter().rev().collect::<Vec<_>>());
    // The whole table is still globally ordered.
    let all = scan_all(&kura, "blog", ScanSpec::all(), 64).await;
    assert_eq!(all.len(), 500);
    assert!(all.windows(2).all(|w| w[0] < w[1]));
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn multi_get_answers_in_request_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = loaded(dir.path(), 100).await;
    let rows = vec![key(50), b"missing".to_vec(), key(3), key(99), key(3)];
    let got = kura
        .multi_get("t", rows.clone(), &ReadSpec::default())
        .await
        .expect("multi_get");
    assert_eq!(got.len(), 5);
    for (want, got) in rows.iter().zip(&got) {
        if want.as_slice() == b"missing" {
            assert!(got.is_none());
        } else {
            assert_eq!(got.as_ref().map(|r| r.key.clone()), Some(want.clone()));
        }
    }
    let activity = kura.bucket_activity("t").expect("activity");
    assert_eq!(activity.len(), 64);
    assert_eq!(
        activity.iter().map(|a| a.1).sum::<u64>(),
        100,
        "one write counted per row"
    );
    assert!(activity.iter().map(|a| a.0).sum::<u64>() >= 5);
    kura.shutdown().await.expect("shutdown");
}

/// The reads the regions of table `t` have served.
async fn region_reads(kura: &Kura) -> u64 {
    let regions = kura.regions("t").await.expect("regions");
    regions.iter().map(|r| r.stats.reads).sum()
}

#[actix_rt::test]
async fn a_scan_that_fills_its_limit_asks_no_region_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = loaded(dir.path(), 1000).await;
    for limit in [1, 10] {
        let before = region_reads(&kura).await;
        let req = ScanRequest {
            spec: ScanSpec::all(),
            limit: Some(limit),
            page: ScanLimits::default(),
        };
        let got = kura.scan("t", req).await.expect("scan");
        let keys: Vec<Vec<u8>> = got.rows.iter().map(|r| r.key.clone()).collect();
        let mut all: Vec<Vec<u8>> = (0..1000).map(key).collect();
        all.sort();
        assert_eq!(keys, all[..limit], "the first {limit} rows");
        assert_eq!(region_reads(&kura).await - before, 8, "one read per region");
    }
    kura.shutdown().await.expect("shutdown");
}
