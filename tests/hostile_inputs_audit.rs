//! Hostile client input against the REST API, the applications and the admin API: every request
//! here is a client mistake or an extreme value, and each must get a 4xx (or a correct 2xx) that
//! says what to fix, never a 5xx or a panic.
//!
//! Regression tests for the audit of the HTTP edge (RELIABILITY.md "hostile HTTP"):
//! - a multiget of thousands of rows used to answer 503 (it put every read in flight at once and
//!   filled the region's mailbox);
//! - negative path timestamps and reversed `t1,t2` ranges were silently empty (404) or deleted
//!   nothing (200); negative or reversed scanner time ranges were accepted.

mod rest_support;

use actix_web::http::Method;
use rest_support::{b64, client, Client};

async fn table_with_cell() -> Client {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    c.put_cell("t", "r", "cf:a", Some(5), "v").await;
    c
}

fn assert_400(r: &rest_support::Resp, mentions: &str) {
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains(mentions),
        "the message should mention {mentions:?}: {}",
        r.text()
    );
}

#[actix_web::test]
async fn multiget_of_thousands_of_rows_answers_every_row_instead_of_503() {
    let c = table_with_cell().await;
    // 6,000 single-row reads in one request (well past a region's mailbox capacity of 1,024).
    let mut uri = String::from("/t/multiget?");
    for i in 0..6_000 {
        uri.push_str(&format!("row=k{i}&"));
    }
    uri.push_str("row=r");
    let r = c.get_json(&uri).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let rows = r.json()["Row"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 1, "only the existing row is returned");
    assert_eq!(rows[0]["key"], b64("r"));
}

#[actix_web::test]
async fn negative_path_timestamps_are_400_for_get_put_and_delete() {
    let c = table_with_cell().await;
    for uri in [
        "/t/r/cf:a/-1",
        "/t/r/cf:a/-9223372036854775808",
        "/t/r/cf:a/-9223372036854775808,9223372036854775807",
    ] {
        assert_400(&c.get_json(uri).await, "negative");
        assert_400(&c.delete(uri).await, "negative");
    }
    // The cell is still there: the rejected delete deleted nothing.
    assert_eq!(c.get_json("/t/r/cf:a").await.status, 200);
}

#[actix_web::test]
async fn reversed_path_time_range_is_400_naming_the_range() {
    let c = table_with_cell().await;
    assert_400(&c.get_json("/t/r/cf:a/5,3").await, "5,3 is reversed");
    assert_400(&c.delete("/t/r/cf:a/5,3").await, "5,3 is reversed");
    assert_eq!(c.get_json("/t/r/cf:a").await.status, 200);
    // An empty but well-ordered range and the extreme valid values still work.
    assert_eq!(c.get_json("/t/r/cf:a/5,5").await.status, 404);
    let r = c.get_json("/t/r/cf:a/0,9223372036854775807").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c.get_json("/t/r/cf:a/9223372036854775807").await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[actix_web::test]
async fn negative_or_reversed_scan_time_ranges_are_400() {
    let c = table_with_cell().await;
    assert_400(&c.get_json("/t/*?starttime=-1").await, "negative");
    assert_400(
        &c.get_json("/t/*?starttime=10&endtime=3").await,
        "starttime=10 is after",
    );
    for body in [
        r#"{"startTime":-9223372036854775808}"#,
        r#"{"startTime":9223372036854775807,"endTime":-9223372036854775808}"#,
        r#"{"startTime":10,"endTime":3}"#,
    ] {
        let r = c
            .post_json("/t/scanner", &serde_json::from_str(body).expect("json"))
            .await;
        assert_eq!(r.status, 400, "{body}: {}", r.text());
    }
    // The full valid range still scans.
    let r = c
        .get_json("/t/*?starttime=0&endtime=9223372036854775807")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Extreme values and malformed input across the whole HTTP surface: no 5xx, no panic.
#[actix_web::test]
async fn hostile_inputs_never_get_a_5xx() {
    let c = table_with_cell().await;
    let long_id = "x".repeat(1025);
    let gets = [
        "/t/r/cf:a/9223372036854775807".to_string(),
        "/t/r/cf:a/99999999999999999999".to_string(),
        "/t/r/cf:a?v=0".into(),
        "/t/r/cf:a?v=-1".into(),
        "/t/r/cf:a?v=99999999999".into(),
        "/t/r?e=b64".into(),
        "/t/@@@?e=b64".into(),
        "/t/r/cf:a/,".into(),
        "/t/*?limit=-1".into(),
        "/t/*?maxversions=-1".into(),
        "/t/r*?reversed=true&limit=99999999999999".into(),
        "/t/multiget?row=%ZZ".into(),
        "/t/multiget?row=@@&e=b64".into(),
        "/t/r/cf:a/%FF%FE".into(),
        "/t/scanner/99999999999999999999999".into(),
        "/apps/blog/users/1/articles?limit=0".into(),
        "/apps/blog/users/1/articles?limit=99999999999999999999".into(),
        "/apps/blog/users/1/articles?after=%00%FF%FE".into(),
        "/apps/blog/users/18446744073709551616/articles".into(),
        "/apps/actions/users/1?offset=18446744073709551615&limit=1000".into(),
        "/apps/actions/users/1?offset=-1".into(),
        "/apps/actions/users/1?after=AAAA".into(),
        "/apps/counter/hourly?domain=a.jp&start=9999123123&end=9999123124".into(),
        "/apps/counter/hourly?domain=a.jp&start=0000010100&end=0000010200".into(),
        "/apps/counter/daily?domain=a.jp&start=99991230&end=99991231".into(),
        "/apps/counter/total?domain=..".into(),
        format!("/apps/graph/nodes/{long_id}"),
        format!("/apps/graph/nodes/{long_id}/relationships?type=k&direction=outgoing"),
        "/apps/graph/nodes/a/relationships?type=k&direction=outgoing&after=%01%02".into(),
        "/admin/tables/%FF".into(),
    ];
    for uri in &gets {
        let r = c.get_json(uri).await;
        assert!(
            (200..500).contains(&r.status),
            "GET {uri}: {} {}",
            r.status,
            r.text()
        );
    }
    let big = "[".repeat(100_000);
    let writes: Vec<(Method, &str, String)> = vec![
        (
            Method::PUT,
            "/t/scanner",
            r#"{"batch":-5,"caching":-1,"limit":-1}"#.into(),
        ),
        (
            Method::PUT,
            "/t/scanner",
            format!(r#"{{"filter":"{big}"}}"#),
        ),
        (Method::PUT, "/t/r/cf:a", big.clone()),
        (
            Method::POST,
            "/apps/counter/hits",
            r#"{"domain":"a.jp","path":"/","at":-1}"#.into(),
        ),
        (
            Method::POST,
            "/apps/counter/hits",
            r#"{"domain":"a.jp","path":"/","at":9223372036854775807}"#.into(),
        ),
        (
            Method::POST,
            "/apps/actions/users/1",
            r#"{"name":"x","stamp":-1}"#.into(),
        ),
        (
            Method::POST,
            "/apps/graph/nodes",
            format!(r#"{{"id":"{long_id}"}}"#),
        ),
        (
            Method::POST,
            "/apps/graph/nodes",
            format!(r#"{{"id":"a","properties":{big}"#),
        ),
        (
            Method::POST,
            "/admin/tables/t/regions/18446744073709551615/split",
            String::new(),
        ),
        (
            Method::POST,
            "/admin/tables/t/regions/-1/split",
            String::new(),
        ),
    ];
    for (m, uri, body) in &writes {
        let r = c
            .req(
                m.clone(),
                uri,
                &[
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json"),
                ],
                body.clone(),
            )
            .await;
        assert!(
            (200..500).contains(&r.status),
            "{m} {uri}: {} {}",
            r.status,
            r.text()
        );
    }
}

#[actix_web::test]
async fn counter_overflow_is_a_4xx_and_the_total_is_unchanged() {
    let c = client().await;
    let hit = serde_json::json!({"domain": "a.jp", "path": "/", "amount": i64::MAX});
    let r = c.post_json("/apps/counter/hits", &hit).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c.post_json("/apps/counter/hits", &hit).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("overflow"), "{}", r.text());
    let r = c.get_json("/apps/counter/total?domain=a.jp").await;
    assert_eq!(r.json()["total"], i64::MAX, "{}", r.text());
}
