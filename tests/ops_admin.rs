//! `/admin/`: table and region listings, flush, compact, split, the key heatmap, and JSON
//! errors, over a real store.

#[macro_use]
mod support;

use actix_web::test::{call_service, read_body, TestRequest};
use kura_actors::storage::model::ReadSpec;
use serde_json::Value;

/// Sends a request and returns (status, JSON body).
macro_rules! call {
    ($app:expr, $method:ident, $uri:expr) => {{
        let res = call_service(&$app, TestRequest::$method().uri(&$uri).to_request()).await;
        let status = res.status().as_u16();
        let ct = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        assert!(
            ct.starts_with("application/json"),
            "{} answers JSON, not {ct:?}",
            $uri
        );
        let body = read_body(res).await;
        let json: Value = serde_json::from_slice(&body).expect("JSON body");
        (status, json)
    }};
}

fn region_ids(v: &Value) -> Vec<u64> {
    v["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .map(|r| r["id"].as_u64().expect("id"))
        .collect()
}

fn sum(v: &Value, field: &str) -> u64 {
    v["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .map(|r| r[field].as_u64().unwrap_or(0))
        .sum()
}

#[actix_web::test]
async fn tables_are_listed_with_families_salting_and_region_count() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "alpha", 32, 4).await;
    support::create_table(&kura, "beta", 8, 1).await;
    let app = ops_app!(kura);
    let (status, v) = call!(app, get, "/admin/tables");
    assert_eq!(status, 200);
    let tables = v["tables"].as_array().expect("tables");
    let names: Vec<&str> = tables
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert_eq!(tables[0]["buckets"], 32);
    assert_eq!(tables[0]["regions"], 4);
    assert_eq!(tables[0]["families"][0]["name"], "cf");
    assert_eq!(tables[0]["families"][0]["max_versions"], 3);
    assert_eq!(tables[1]["regions"], 1);

    let (status, one) = call!(app, get, "/admin/tables/alpha");
    assert_eq!(status, 200);
    assert_eq!(one["name"], "alpha");
    assert_eq!(one["region_list"].as_array().expect("region list").len(), 4);
}

#[actix_web::test]
async fn regions_cover_every_bucket_once_in_order() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "t", 64, 4).await;
    let app = ops_app!(kura);
    let (status, v) = call!(app, get, "/admin/tables/t/regions");
    assert_eq!(status, 200);
    assert_eq!(v["buckets"], 64);
    let regions = v["regions"].as_array().expect("regions");
    assert_eq!(regions.len(), 4);
    let mut next = 0;
    for r in regions {
        assert_eq!(r["bucket_start"], next);
        next = r["bucket_end"].as_u64().expect("end");
        for field in [
            "cells",
            "bytes",
            "log_bytes",
            "reads",
            "writes",
            "flushes",
            "compactions",
            "memtable_bytes",
            "segments",
            "fsyncs",
            "synced_writes",
            "fsync_micros",
            "recovery_micros",
        ] {
            assert!(r[field].is_u64(), "region has {field}");
        }
        assert!(
            r["group_commit_avg"].is_f64(),
            "region has group_commit_avg"
        );
        assert_eq!(r["poisoned"], false);
    }
    assert_eq!(next, 64);
}

#[actix_web::test]
async fn flush_moves_the_memtable_into_segments_and_keeps_the_data() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "f", 16, 1).await;
    for i in 0..30 {
        support::put(&kura, "f", &format!("k{i:02}"), "value").await;
    }
    let app = ops_app!(kura);
    let (_, before) = call!(app, get, "/admin/tables/f/regions");
    assert!(sum(&before, "memtable_cells") >= 30);
    let (status, v) = call!(app, post, "/admin/tables/f/flush");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["flushed"], true);
    assert_eq!(sum(&v, "memtable_cells"), 0, "{v}");
    assert!(sum(&v, "segments") >= 1);
    assert!(sum(&v, "flushes") >= 1);
    assert!(sum(&v, "segment_cells") >= 30);
    let row = kura
        .get("f", b"k07", &ReadSpec::default())
        .await
        .expect("get");
    assert_eq!(
        row.expect("row survives the flush").cells[0].value,
        b"value"
    );
}

#[actix_web::test]
async fn major_compaction_merges_segments() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "c", 16, 1).await;
    let app = ops_app!(kura);
    for round in 0..3 {
        for i in 0..10 {
            support::put(&kura, "c", &format!("k{i}"), &format!("v{round}")).await;
        }
        let (status, _) = call!(app, post, "/admin/tables/c/flush");
        assert_eq!(status, 200);
    }
    let (_, before) = call!(app, get, "/admin/tables/c/regions");
    assert!(sum(&before, "segments") >= 2, "{before}");
    let (status, v) = call!(app, post, "/admin/tables/c/compact?major=true");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["major"], true);
    assert_eq!(sum(&v, "segments"), 1, "{v}");
    assert!(sum(&v, "compactions") >= 1);
    let row = kura
        .get("c", b"k3", &ReadSpec::default())
        .await
        .expect("get")
        .expect("row");
    assert_eq!(
        row.cells[0].value, b"v2",
        "the newest version wins after compaction"
    );

    let (status, minor) = call!(app, post, "/admin/tables/c/compact?major=false");
    assert_eq!(status, 200);
    assert_eq!(minor["major"], false);
}

#[actix_web::test]
async fn split_at_a_bucket_adds_exactly_one_region() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "s", 16, 1).await;
    for i in 0..50 {
        support::put(&kura, "s", &format!("row{i:02}"), "x").await;
    }
    let app = ops_app!(kura);
    let (_, before) = call!(app, get, "/admin/tables/s/regions");
    let ids = region_ids(&before);
    assert_eq!(ids.len(), 1);
    let (status, v) = call!(
        app,
        post,
        format!("/admin/tables/s/regions/{}/split?bucket=5", ids[0])
    );
    assert_eq!(status, 200, "{v}");
    let (_, after) = call!(app, get, "/admin/tables/s/regions");
    let regions = after["regions"].as_array().expect("regions");
    assert_eq!(regions.len(), 2);
    assert_eq!(
        (
            regions[0]["bucket_start"].as_u64(),
            regions[0]["bucket_end"].as_u64()
        ),
        (Some(0), Some(5))
    );
    assert_eq!(
        (
            regions[1]["bucket_start"].as_u64(),
            regions[1]["bucket_end"].as_u64()
        ),
        (Some(5), Some(16))
    );
    // Every row is still readable after the split.
    for i in 0..50 {
        let key = format!("row{i:02}");
        let row = kura
            .get("s", key.as_bytes(), &ReadSpec::default())
            .await
            .expect("get");
        assert!(row.is_some(), "{key} survives the split");
    }
    // Both sides started on the flushed segment as a reference segment; the background
    // rewrites it to each side's own rows, and the regions say when that is done.
    for r in regions {
        let refs = r["reference_segments"]
            .as_u64()
            .expect("reference_segments");
        assert!(refs <= r["segments"].as_u64().expect("segments"), "{r}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, now) = call!(app, get, "/admin/tables/s/regions");
        if sum(&now, "reference_segments") == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "references still not rewritten: {now}"
        );
        actix_web::rt::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Splitting without a bucket lets the store choose; the count grows by one again.
    let upper = regions[1]["id"].as_u64().expect("id");
    let (status, v) = call!(app, post, format!("/admin/tables/s/regions/{upper}/split"));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["regions"].as_array().expect("regions").len(), 3);
}

#[actix_web::test]
async fn split_by_size_cuts_next_to_the_bucket_that_took_the_writes() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "hot", 16, 1).await;
    for i in 0..200 {
        support::put(&kura, "hot", "the-hot-row", &format!("v{i}")).await;
    }
    let hot = kura.bucket_of("hot", b"the-hot-row").expect("bucket").get();
    let app = ops_app!(kura);
    let id = kura.regions("hot").await.expect("regions")[0].id;
    let (status, v) = call!(
        app,
        post,
        format!("/admin/tables/hot/regions/{id}/split?by=size")
    );
    assert_eq!(status, 200, "{v}");
    let at = v["at_bucket"]
        .as_u64()
        .expect("the split point is reported") as u32;
    let expected = if hot == 0 { [1, 1] } else { [hot, hot + 1] };
    assert!(expected.contains(&at), "cut at {at}, hot bucket {hot}");
    assert_eq!(v["regions"].as_array().expect("regions").len(), 2);

    let (status, v) = call!(
        app,
        post,
        format!("/admin/tables/hot/regions/{id}/split?by=weight")
    );
    assert_eq!(status, 400, "{v}");
    let (status, v) = call!(
        app,
        post,
        format!("/admin/tables/hot/regions/{id}/split?by=load&bucket=3")
    );
    assert_eq!(status, 400, "{v}");
}

#[actix_web::test]
async fn unknown_tables_and_regions_are_json_404s() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "t", 16, 1).await;
    let app = ops_app!(kura);
    for (uri, post) in [
        ("/admin/tables/nope", false),
        ("/admin/tables/nope/regions", false),
        ("/admin/tables/nope/heatmap", false),
        ("/admin/tables/nope/flush", true),
        ("/admin/tables/nope/compact", true),
        ("/admin/tables/nope/regions/1/split", true),
    ] {
        let (status, v) = if post {
            call!(app, post, uri)
        } else {
            call!(app, get, uri)
        };
        assert_eq!(status, 404, "{uri}");
        assert_eq!(v["error"]["code"], "table_not_found", "{uri}");
        assert!(v["error"]["message"]
            .as_str()
            .expect("message")
            .contains("nope"));
    }
    let (status, v) = call!(app, post, "/admin/tables/t/regions/987654/split");
    assert_eq!(status, 404);
    assert_eq!(v["error"]["code"], "region_not_found");
    let (status, v) = call!(app, get, "/admin/nothing/here");
    assert_eq!(status, 404);
    assert_eq!(v["error"]["code"], "not_found");
}

#[actix_web::test]
async fn bad_admin_input_is_a_json_400() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "t", 16, 2).await;
    let app = ops_app!(kura);
    let (_, v) = call!(app, get, "/admin/tables/t/regions");
    let first = &v["regions"][0];
    let id = first["id"].as_u64().expect("id");
    let end = first["bucket_end"].as_u64().expect("end");
    for uri in [
        "/admin/tables/t/compact?major=maybe".to_string(),
        "/admin/tables/t/regions/abc/split".to_string(),
        format!("/admin/tables/t/regions/{id}/split?bucket=minus"),
        format!("/admin/tables/t/regions/{id}/split?bucket=0"),
        format!("/admin/tables/t/regions/{id}/split?bucket={end}"),
        // Misspelt parameters: a split cannot be undone, so not one at another bucket.
        format!("/admin/tables/t/regions/{id}/split?buket=3"),
        "/admin/tables/t/compact?majr=true".to_string(),
    ] {
        let (status, v) = call!(app, post, uri);
        assert_eq!(status, 400, "{uri}: {v}");
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    let (_, v) = call!(
        app,
        post,
        format!("/admin/tables/t/regions/{id}/split?buket=3")
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("buket"),
        "the message names it: {v}"
    );
    assert_eq!(
        kura.regions("t").await.expect("regions").len(),
        2,
        "nothing was split"
    );
}

#[actix_web::test]
async fn heatmap_is_a_time_by_bucket_matrix_that_shows_activity() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "h", 16, 2).await;
    let app = ops_app!(kura);
    let (status, v) = call!(app, get, "/admin/tables/h/heatmap");
    assert_eq!(status, 200);
    assert_eq!(v["buckets"], 16);
    assert_eq!(v["interval_ms"], 5000);
    assert_eq!(v["regions"].as_array().expect("regions").len(), 2);

    let rows: Vec<String> = (0..20).map(|i| format!("user{i}")).collect();
    for r in &rows {
        support::put(&kura, "h", r, "x").await;
    }
    let read = kura
        .get("h", b"user3", &ReadSpec::default())
        .await
        .expect("get");
    assert!(read.is_some());

    let (status, v) = call!(app, get, "/admin/tables/h/heatmap");
    assert_eq!(status, 200);
    let times = v["times"].as_array().expect("times").len();
    let reads = v["reads"].as_array().expect("reads");
    let writes = v["writes"].as_array().expect("writes");
    assert!(times >= 1);
    assert_eq!(reads.len(), times);
    assert_eq!(writes.len(), times);
    assert_eq!(v["starts"].as_array().expect("starts").len(), times);
    for col in reads.iter().chain(writes) {
        assert_eq!(
            col.as_array().expect("column").len(),
            16,
            "one cell per bucket"
        );
    }
    let per_bucket = |m: &Vec<Value>, b: usize| -> u64 {
        m.iter().map(|col| col[b].as_u64().expect("count")).sum()
    };
    let total_writes: u64 = (0..16).map(|b| per_bucket(writes, b)).sum();
    assert!(
        total_writes >= 20,
        "every write is in some interval: {total_writes}"
    );
    for r in &rows {
        let b = kura.bucket_of("h", r.as_bytes()).expect("bucket").get() as usize;
        assert!(
            per_bucket(writes, b) >= 1,
            "bucket {b} of {r} shows its write"
        );
    }
    let b3 = kura.bucket_of("h", b"user3").expect("bucket").get() as usize;
    assert!(
        per_bucket(reads, b3) >= 1,
        "the read of user3 shows in its bucket"
    );
    assert!(v["max_writes"].as_u64().expect("max") >= 1);
}

#[actix_web::test]
async fn heatmap_keeps_one_column_per_sample_and_attributes_writes_to_their_interval() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "hm", 8, 1).await;
    let state = support::state(&kura);
    let app = actix_web::test::init_service(
        actix_web::App::new()
            .app_data(state.clone())
            .configure(kura::configure),
    )
    .await;
    // The first request starts the sampler and takes the baseline.
    let (status, v) = call!(app, get, "/admin/tables/hm/heatmap");
    assert_eq!(status, 200);
    let columns0 = v["times"].as_array().expect("times").len();
    let sampler = kura::ops::heatmap::sampler(&state).await;

    for i in 0..10 {
        support::put(&kura, "hm", &format!("a{i}"), "x").await;
    }
    sampler.sample(&state.kura).await; // what the 5-second tick does
    for i in 0..3 {
        support::put(&kura, "hm", &format!("b{i}"), "x").await;
    }
    let (_, v) = call!(app, get, "/admin/tables/hm/heatmap");
    let writes = v["writes"].as_array().expect("writes");
    // A background tick may also have fired on a slow machine: then there are more sampled
    // columns, but writes are still never attributed to an interval before they happened.
    assert!(
        writes.len() > columns0,
        "at least one sampled column plus the partial one"
    );
    let col_sum = |c: &Value| -> u64 {
        c.as_array()
            .expect("column")
            .iter()
            .map(|x| x.as_u64().expect("count"))
            .sum()
    };
    let (partial, sampled) = writes.split_last().expect("columns");
    let sampled: u64 = sampled.iter().map(col_sum).sum();
    assert!(
        sampled >= 10,
        "the sampled intervals hold the writes made before the sample"
    );
    assert!(
        col_sum(partial) <= 3,
        "the partial interval holds only later writes"
    );
    assert_eq!(
        sampled + col_sum(partial),
        13,
        "every write is counted once"
    );
    assert_eq!(v["partial_last"], true);
    let times = v["times"].as_array().expect("times");
    let starts = v["starts"].as_array().expect("starts");
    for (t, s) in times.iter().zip(starts) {
        assert!(
            s.as_i64() <= t.as_i64(),
            "each interval starts before it ends"
        );
    }
}

#[actix_web::test]
async fn a_wrong_method_on_an_admin_endpoint_is_a_json_405_naming_the_right_one() {
    let (kura, _dir) = support::start_kura().await;
    let app = ops_app!(kura);
    for (uri, allow) in [
        ("/admin/tables", "GET"),
        ("/admin/tables/t/flush", "POST"),
        ("/admin/tables/t/regions/1/split", "POST"),
    ] {
        let res = call_service(&app, TestRequest::delete().uri(uri).to_request()).await;
        assert_eq!(res.status().as_u16(), 405, "{uri}");
        assert_eq!(
            res.headers().get("allow").and_then(|v| v.to_str().ok()),
            Some(allow),
            "{uri}"
        );
        let body: Value = serde_json::from_slice(&read_body(res).await).expect("JSON");
        assert_eq!(body["error"]["code"], "method_not_allowed", "{uri}");
    }
}
