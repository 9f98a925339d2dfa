//! Hostile client input against the REST API, the applications and the admin API: every request
//! here is a client mistake or an extreme value, and each must get a 4xx (or a correct 2xx) that
//! says what to fix, never a 5xx or a panic.
//!
//! Among them (RELIABILITY.md "hostile HTTP"): a multiget of thousands of rows is answered in
//! full, not refused by a region's in-flight gate; negative path timestamps, reversed `t1,t2`
//! ranges and negative or reversed scanner time ranges are a 400 naming the range, never an
//! empty answer or a delete of nothing.

mod support;

use actix_web::http::Method;
use support::{assert_400, b64, client, Client};

async fn table_with_cell() -> Client {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    c.put_cell("t", "r", "cf:a", Some(5), "v").await;
    c
}

#[actix_web::test]
async fn multiget_of_thousands_of_rows_answers_every_row_instead_of_503() {
    let c = table_with_cell().await;
    // 6,000 single-row reads in one request (well past a region's in-flight bound, `in_flight_limit` 1,024).
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
    assert_eq!(
        r.json()["error"]["code"],
        "counter_overflow",
        "{}",
        r.text()
    );
    let r = c.get_json("/apps/counter/total?domain=a.jp").await;
    assert_eq!(r.json()["total"], i64::MAX, "{}", r.text());
    // Two URLs at the maximum: the domain's total is their exact sum, not a saturated i64
    // (regression).
    let other = serde_json::json!({"domain": "b.a.jp", "path": "/", "amount": i64::MAX});
    assert_eq!(c.post_json("/apps/counter/hits", &other).await.status, 200);
    let r = c.get_json("/apps/counter/total?domain=a.jp").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let exact = 2 * i128::from(i64::MAX);
    assert!(
        r.text().starts_with(&format!(r#"{{"total":{exact},"#)),
        "{}",
        r.text()
    );
    assert_eq!(r.json()["counts"].as_array().map(Vec::len), Some(2));
}

/// Schema extremes, filter strings, XML and binary bodies, application edge cases: no 5xx.
#[actix_web::test]
async fn schema_filter_body_and_app_edge_cases_never_get_a_5xx() {
    let c = client().await;
    let mut bad = vec![];
    let reqs: Vec<(Method, &str, &str, String)> = vec![
        (Method::PUT, "/s1/schema", "application/json", r#"{"name":"s1","KURA_SALT_PREFIX":"4294967295","ColumnSchema":[{"name":"cf","TTL":"9223372036854775807","VERSIONS":"4294967295"}]}"#.into()),
        (Method::PUT, "/s1/r/cf:a", "application/json", r#"{"Row":[{"key":"cg==","Cell":[{"column":"Y2Y6YQ==","$":"dg=="}]}]}"#.into()),
        (Method::GET, "/s1/r/cf:a?v=4294967295", "", String::new()),
        (Method::GET, "/s1/*", "", String::new()),
        (Method::GET, "/s1/*?filter=PageFilter%2899999999999999999999%29", "", String::new()),
        (Method::GET, "/s1/*?filter=PageFilter%28-1%29", "", String::new()),
        (Method::GET, "/s1/*?filter=ColumnPaginationFilter%28-1%2C-1%29", "", String::new()),
        (Method::GET, "/s1/*?filter=ColumnPaginationFilter%282147483647%2C2147483647%29", "", String::new()),
        (Method::GET, "/s1/*?filter=TimestampsFilter%28-1%2C%209223372036854775807%29", "", String::new()),
        (Method::GET, "/s1/*?filter=ValueFilter%28%3D%2C%27regexstring%3A%28a%7B1000%7D%29%7B1000%7D%27%29", "", String::new()),
        (Method::GET, "/s1/*?filter=ValueFilter%28%3D%2C%27regexstring%3A%28%27%29", "", String::new()),
        (Method::GET, "/s1/*?filter=RowFilter%28%3D%2C%27binary%3A%5Cxff%27%29", "", String::new()),
        (Method::GET, "/s1/*?filter=SingleColumnValueFilter%28%27cf%27%2C%27a%27%2C%3D%2C%27binary%3Av%27%2Ctrue%2Ctrue%29", "", String::new()),
        (Method::GET, "/s1/*?filter=%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28%28KeyOnlyFilter%28%29", "", String::new()),
        (Method::GET, "/s1/*?filter=ColumnRangeFilter%28%27b%27%2Ctrue%2C%27a%27%2Ctrue%29", "", String::new()),
        (Method::GET, "/s1/*?filter=MultipleColumnPrefixFilter%28%29", "", String::new()),
        (Method::GET, "/s1/*?filter=InclusiveStopFilter%28%27%27%29", "", String::new()),
        (Method::GET, "/s1/*?filter=FirstKeyOnlyFilter%28%29%20AND", "", String::new()),
        (Method::GET, "/s1/*?filter=SKIP%20SKIP%20SKIP", "", String::new()),
        (Method::GET, "/s1/*?filter=DependentColumnFilter%28%27cf%27%2C%27a%27%2Ctrue%2C%3D%2C%27binary%3Av%27%29", "", String::new()),
        (Method::GET, "/s1/*?filter=FuzzyRowFilter%28%27a%27%2C%27b%27%29", "", String::new()),
        (Method::GET, "/s1/r?filter=PageFilter%2899999999999999999999%29", "", String::new()),
        (Method::GET, "/s1/r?filter=PageFilter%28-1%29", "", String::new()),
        (Method::GET, "/s1/r?filter=ColumnPaginationFilter%28-1%2C-1%29", "", String::new()),
        (Method::GET, "/s1/r?filter=ColumnPaginationFilter%282147483647%2C2147483647%29", "", String::new()),
        (Method::GET, "/s1/r?filter=TimestampsFilter%28-1%2C%209223372036854775807%29", "", String::new()),
        (Method::GET, "/s1/r?filter=ValueFilter%28%3D%2C%27regexstring%3A%28a%7B1000%7D%29%7B1000%7D%27%29", "", String::new()),
        (Method::GET, "/s1/r?filter=ValueFilter%28%3D%2C%27regexstring%3A%28%27%29", "", String::new()),
        (Method::GET, "/s1/r?filter=RowFilter%28%3D%2C%27binary%3A%5Cxff%27%29", "", String::new()),
        (Method::POST, "/apps/actions/users/7", "application/json", r#"{"name":"x","stamp":18446744073709551615}"#.into()),
        (Method::POST, "/apps/actions/users/7", "application/json", r#"{"name":"y","stamp":0}"#.into()),
        (Method::GET, "/apps/actions/users/7?limit=1", "", String::new()),
        (Method::GET, "/apps/actions/users/7?offset=1&limit=1000", "", String::new()),
        (Method::GET, "/apps/actions/users/7?offset=18446744073709551615", "", String::new()),
        (Method::POST, "/apps/actions/users/7", "application/json", String::from_utf8_lossy(b"{\"name\":\"\xff\"}").into_owned()),
        (Method::POST, "/apps/actions/users/7", "", r#"{"name":"x"}"#.into()),
        (Method::POST, "/apps/actions/users/7", "text/plain", r#"{"name":"x"}"#.into()),
        (Method::POST, "/apps/actions/users/7", "application/json", "".into()),
        (Method::POST, "/apps/actions/users/7", "application/json", "null".into()),
        (Method::POST, "/apps/counter/hits", "application/json", r#"{"domain":"a.jp","path":"/","amount":0}"#.into()),
        (Method::POST, "/apps/counter/hits", "application/json", r#"{"domain":"a.jp","path":"/","at":253402300799999}"#.into()),
        (Method::GET, "/apps/counter/hourly?domain=a.jp&start=9998111500&end=9999123123", "", String::new()),
        (Method::GET, "/apps/counter/hourly?domain=a.jp&start=9998113000&end=9999123123", "", String::new()),
        (Method::GET, "/apps/counter/hourly?domain=a.jp&start=9999123100&end=9999123123", "", String::new()),
        (Method::GET, "/apps/counter/daily?domain=a.jp&start=00000101&end=99991231", "", String::new()),
        (Method::GET, "/apps/counter/daily?domain=a.jp&start=99991231&end=00000101", "", String::new()),
        (Method::GET, "/apps/counter/daily?domain=a.jp&start=99991231", "", String::new()),
        (Method::GET, "/apps/counter/total?domain=a.jp&path=%FF", "", String::new()),
        (Method::GET, "/apps/counter/total", "", String::new()),
        (Method::POST, "/apps/graph/nodes", "application/json", r#"{"id":"n1","properties":{"a":"b"}}"#.into()),
        (Method::POST, "/apps/graph/nodes", "application/json", r#"{"id":"n2"}"#.into()),
        (Method::POST, "/apps/graph/relationships", "application/json", r#"{"start":"n1","type":"k","end":"n2"}"#.into()),
        (Method::POST, "/apps/graph/relationships", "application/json", r#"{"start":"n1","type":"k","end":"zz"}"#.into()),
        (Method::POST, "/apps/graph/relationships", "application/json", r#"{"start":"n1","type":"k","end":"n1"}"#.into()),
        (Method::GET, "/apps/graph/nodes/n1/relationships?type=k&direction=outgoing&limit=1", "", String::new()),
        (Method::GET, "/apps/graph/nodes/n2/relationships?type=k&direction=incoming&after=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "", String::new()),
        (Method::GET, "/apps/graph/nodes/n1/relationships?type=k", "", String::new()),
        (Method::GET, "/apps/graph/nodes/n1/relationships?direction=outgoing", "", String::new()),
        (Method::PATCH, "/apps/graph/nodes/n1", "application/json", r#"{"put":{"a":"c"},"delete":["a","zz"]}"#.into()),
        (Method::PATCH, "/apps/graph/relationships/n1/k/n2", "application/json", r#"{"put":{"":""}}"#.into()),
        (Method::PATCH, "/apps/graph/relationships/n1/k/nn", "application/json", r#"{}"#.into()),
        (Method::DELETE, "/apps/graph/nodes/n1?cascade=maybe", "", String::new()),
        (Method::DELETE, "/apps/graph/nodes/n1", "", String::new()),
        (Method::DELETE, "/apps/graph/nodes/n1?cascade=true", "", String::new()),
        (Method::GET, "/apps/graph/relationships/n1/k/n2", "", String::new()),
        (Method::GET, "/apps/graph/relationships/n1//n2", "", String::new()),
        (Method::PATCH, "/apps/blog/users/1/articles/5", "application/json", r#"{"title":"x"}"#.into()),
        (Method::POST, "/apps/blog/users/1/articles", "application/json", r#"{"title":"a","content":"b","category_id":-1}"#.into()),
        (Method::POST, "/apps/blog/users/1/articles", "application/json", r#"{"title":"a"}"#.into()),
        (Method::GET, "/apps/blog/users/1/articles?category_id=4294967296", "", String::new()),
        (Method::GET, "/apps/blog/users/1/articles?after=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "", String::new()),
        (Method::PUT, "/s2/schema", "application/json", r#"{"name":"s2","KURA_REGIONS":"4294967295","ColumnSchema":[{"name":"cf"}]}"#.into()),
        (Method::PUT, "/s3/schema", "application/json", r#"{"name":"s3","KURA_SALT_PREFIX":"0","KURA_REGIONS":"256","ColumnSchema":[{"name":"cf","TTL":"18446744073709551615"}]}"#.into()),
        (Method::PUT, "/s4/schema", "text/xml", "<TableSchema name=\"s4\"><ColumnSchema name=\"cf\" TTL=\"1\"/></TableSchema>".into()),
        (Method::PUT, "/s4/r/cf:a", "text/xml", "<CellSet><Row key=\"cg==\"><Cell column=\"Y2Y6YQ==\" timestamp=\"-1\">dg==</Cell></Row></CellSet>".into()),
        (Method::PUT, "/s4/r/cf:a", "text/xml", "<CellSet><Row key=\"cg==\"><Cell column=\"Y2Y6YQ==\" timestamp=\"99999999999999999999\">dg==</Cell></Row></CellSet>".into()),
        (Method::PUT, "/s4/r/cf:a", "text/xml", "<CellSet><Row key=\"@@\"><Cell column=\"Y2Y6YQ==\">dg==</Cell></Row></CellSet>".into()),
        (Method::PUT, "/s4/r/cf:a", "text/xml", "<CellSet><Row key=\"cg==\"><Cell column=\"Y2Y6YQ==\">d\u{1}==</Cell></Row></CellSet>".into()),
        (Method::PUT, "/s4/r/cf:a", "text/xml", "<CellSet>".repeat(100_000)),
        (Method::PUT, "/s4/r/cf:a", "text/xml", "<!DOCTYPE x [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\">]><CellSet><Row key=\"cg==\"><Cell column=\"Y2Y6YQ==\">&b;</Cell></Row></CellSet>".into()),
        (Method::PUT, "/s4/r/cf:a", "application/octet-stream", "raw".into()),
        (Method::PUT, "/s4/r/cf", "application/octet-stream", "raw".into()),
        (Method::PUT, "/s4/r", "application/octet-stream", "raw".into()),
        (Method::PUT, "/s4/r/cf:a/-5", "application/octet-stream", "raw".into()),
        (Method::PUT, "/s4/r/cf:a/9223372036854775807", "application/octet-stream", "raw".into()),
        (Method::PUT, "/s4/r/cf:a/1,2", "application/octet-stream", "raw".into()),
        (Method::PUT, "/s4/a,b/cf:a", "application/octet-stream", "raw".into()),
        (Method::PUT, "/s4/a*/cf:a", "application/octet-stream", "raw".into()),
        (Method::DELETE, "/s4/a*/cf:a", "", String::new()),
        (Method::DELETE, "/s4/a,b", "", String::new()),
        (Method::PUT, "/s4/r/nofam:a", "application/octet-stream", "raw".into()),
        (Method::PUT, "/s4/r/cf:a?check=delete", "application/json", r#"{"Row":[{"key":"cg==","Cell":[{"column":"Y2Y6YQ==","$":"@@"}]}]}"#.into()),
        (Method::DELETE, "/s4/r/cf:a?check=delete", "application/json", String::new()),
        (Method::POST, "/s4/r/cf:a?check=increment", "application/json", r#"{"Row":[{"key":"cg==","Cell":[{"column":"Y2Y6YQ==","$":"dg=="}]}]}"#.into()),
        (Method::POST, "/s4/r/cf:a?check=append", "application/json", r#"{"Row":[{"key":"cg==","Cell":[]}]}"#.into()),
        (Method::PUT, "/s4/scanner", "text/xml", "<Scanner batch=\"-1\" startTime=\"-5\" endTime=\"-9\" maxVersions=\"0\"/>".into()),
        (Method::PUT, "/s4/scanner", "text/xml", "<Scanner batch=\"99999999999999999999999\"/>".into()),
        (Method::PUT, "/s4/scanner", "application/protobuf", "\u{ff}\u{ff}".into()),
        (Method::PUT, "/s4/schema", "application/protobuf", "\u{ff}".into()),
        (Method::GET, "/s4/schema", "", String::new()),
        (Method::DELETE, "/s4/schema", "", String::new()),
        (Method::DELETE, "/s4/schema", "", String::new()),
        (Method::GET, "/namespaces/default/tables", "", String::new()),
        (Method::POST, "/namespaces/x", "application/json", "{".into()),
    ];
    for (m, uri, ct, body) in &reqs {
        let mut h = vec![("Accept", "application/json")];
        if !ct.is_empty() {
            h.push(("Content-Type", ct));
        }
        let r = c.req(m.clone(), uri, &h, body.clone()).await;
        let shown: String = body.chars().take(90).collect();
        let line = format!("{m} {uri} {shown} -> {} {}", r.status, r.text());
        if r.status >= 500 {
            bad.push(line)
        }
    }
    assert!(bad.is_empty(), "5xx:\n{}", bad.join("\n"));
}

#[actix_web::test]
async fn counter_url_with_an_unclosed_ipv6_bracket_is_400() {
    let c = client().await;
    let r = c
        .post_json(
            "/apps/counter/hits",
            &serde_json::json!({"url": "http://[::1/a"}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("unclosed '['"), "{}", r.text());
    let r = c
        .post_json(
            "/apps/counter/hits",
            &serde_json::json!({"url": "http://[::1]:80/a"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["domain"], "[::1]");
}

/// An empty row segment (`/t//cf:a`) is an empty row key, a 400: it is never dropped so that
/// the column is taken for the row (a DELETE meant for a cell must not delete row `cf:a`).
#[actix_web::test]
async fn an_empty_row_segment_is_400_and_touches_no_other_row() {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    // Row "cf:a" exists (its key looks like a column).
    c.put_cell("t", "cf:a", "cf:b", Some(5), "victim").await;
    for uri in ["/t//cf:a", "/t///5", "/t//cf:a/5"] {
        assert_400(&c.delete(uri).await, "empty row key");
        assert_400(&c.get_json(uri).await, "empty row key");
    }
    assert_400(&c.get_json("/t/multiget?row=/cf:b").await, "empty row key");
    let r = c.get_json("/t/cf:a/cf:b").await;
    assert_eq!(r.status, 200, "row cf:a is intact: {}", r.text());
}

/// An XML body cut off before its root element closes, or with a second root, is a 400 and
/// applies nothing (not a CellSet up to the cut, not a schema's table).
#[actix_web::test]
async fn truncated_or_multi_root_xml_bodies_are_400_and_apply_nothing() {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    let (row, a, b) = (b64("trunc"), b64("cf:a"), b64("cf:b"));
    let cut = format!(
        r#"<CellSet><Row key="{row}"><Cell column="{a}">{}</Cell><Cell column="{b}">{}"#,
        b64("partial"),
        b64("lost")
    );
    assert_400(&c.put_xml("/t/trunc", &cut).await, "cut off");
    assert_eq!(
        c.get_json("/t/trunc").await.status,
        404,
        "nothing was written"
    );

    let whole = format!(
        r#"<CellSet><Row key="{row}"><Cell column="{a}">{}</Cell></Row></CellSet>"#,
        b64("v")
    );
    let twice = format!("{whole}{whole}");
    assert_400(&c.put_xml("/t/trunc", &twice).await, "more than one root");
    assert_eq!(
        c.get_json("/t/trunc").await.status,
        404,
        "nothing was written"
    );

    let schema = r#"<TableSchema name="t3"><ColumnSchema name="cf"/>"#;
    assert_400(&c.put_xml("/t3/schema", schema).await, "cut off");
    assert_eq!(
        c.get_json("/t3/schema").await.status,
        404,
        "no table was created"
    );

    let scanner = r#"<Scanner batch="10"><column>Y2Y6YQ=="#;
    let r = c
        .req(
            Method::PUT,
            "/t/scanner",
            &[("Content-Type", "text/xml")],
            scanner,
        )
        .await;
    assert_400(&r, "cut off");
    // A complete document with a declaration and whitespace around it is still fine.
    let ok = format!("<?xml version=\"1.0\"?>\n{whole}\n");
    assert_eq!(c.put_xml("/t/trunc", &ok).await.status, 200);
}

/// Invalid UTF-8 in an application path or query (`/apps/graph/nodes/%FF`, `?type=%FF`) is a
/// 400 saying what is wrong: actix decodes it lossily, and "\u{FFFD}" must not become a name.
#[actix_web::test]
async fn invalid_utf8_in_app_paths_and_queries_is_400_not_another_name() {
    // The real U+FFFD node, properly encoded, stays reachable.
    bad_app_paths_are_400_and_the_node_they_resemble_is_not(
        "\u{FFFD}",
        "/apps/graph/nodes/%EF%BF%BD",
        &[
            "/apps/graph/nodes/%FF",
            "/apps/graph/nodes/%C3%28",
            "/apps/graph/nodes/%EF%BF%BD/relationships?type=%FF",
            "/apps/counter/total?domain=%FF.jp",
        ],
        "UTF-8",
    )
    .await;
}

/// With a graph node named `id` (reachable at `node_uri`), each of `uris` is a 400 whose
/// message holds `says`, and the node is still there: a malformed path never names it.
async fn bad_app_paths_are_400_and_the_node_they_resemble_is_not(
    id: &str,
    node_uri: &str,
    uris: &[&str],
    says: &str,
) {
    let c = client().await;
    let r = c
        .post_json("/apps/graph/nodes", &serde_json::json!({ "id": id }))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    for uri in uris {
        let r = c.get_json(uri).await;
        assert_eq!(r.status, 400, "{uri}: {}", r.text());
        assert!(r.text().contains(says), "{uri}: {}", r.text());
    }
    assert_eq!(c.get_json(node_uri).await.status, 200);
}

/// A `%` that starts no escape in an id is a 400, not the literal text: `/nodes/%` and
/// `/nodes/%25` must not name the same node.
#[actix_web::test]
async fn a_malformed_percent_escape_in_an_app_path_is_400_not_another_name() {
    bad_app_paths_are_400_and_the_node_they_resemble_is_not(
        "%",
        "/apps/graph/nodes/%25",
        &[
            "/apps/graph/nodes/%",
            "/apps/graph/nodes/%zz",
            "/apps/graph/nodes/a%2",
            "/apps/blog/users/1/articles/%31%",
        ],
        "%25",
    )
    .await;
}

/// A wrong method is a 405 whose `Allow` header lists the methods the path takes (RFC 9110
/// requires it of a 405), on the REST API and the apps.
#[actix_web::test]
async fn rest_and_app_405s_name_the_allowed_methods() {
    let c = table_with_cell().await;
    for (method, uri, allow) in [
        (Method::PATCH, "/t/r/cf:a", "GET, HEAD, PUT, POST, DELETE"),
        (Method::POST, "/t/multiget?row=r", "GET, HEAD"),
        (Method::DELETE, "/version", "GET, HEAD"),
        (Method::GET, "/t/scanner", "PUT, POST"),
        (Method::PUT, "/t/scanner/some-id", "GET, DELETE"),
    ] {
        let r = c.req(method.clone(), uri, &[], "").await;
        assert_eq!(r.status, 405, "{method} {uri}: {}", r.text());
        assert_eq!(r.header("allow").as_deref(), Some(allow), "{method} {uri}");
    }
    for (method, uri, allow) in [
        (
            Method::PUT,
            "/apps/blog/users/1/articles",
            "POST, GET, HEAD",
        ),
        (
            Method::POST,
            "/apps/blog/users/1/articles/1",
            "GET, HEAD, PATCH, DELETE",
        ),
        (Method::DELETE, "/apps/counter/hits", "POST"),
        (
            Method::PUT,
            "/apps/graph/nodes/alice",
            "GET, HEAD, PATCH, DELETE",
        ),
    ] {
        let r = c.req(method.clone(), uri, &[], "").await;
        assert_eq!(r.status, 405, "{method} {uri}: {}", r.text());
        assert_eq!(r.header("allow").as_deref(), Some(allow), "{method} {uri}");
        assert_eq!(r.json()["error"]["code"], "method_not_allowed", "{uri}");
    }
    // HEAD is answered wherever GET is, with GET's status.
    let r = c
        .post_json("/apps/graph/nodes", &serde_json::json!({"id": "alice"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    for (uri, status) in [
        ("/apps/graph/nodes/alice", 200),
        ("/apps/graph/nodes/bob", 404),
        ("/t/r/cf:a", 200),
        ("/t/r/cf:zz", 404),
    ] {
        let r = c
            .req(Method::HEAD, uri, &[("Accept", "application/json")], "")
            .await;
        assert_eq!(r.status, status, "HEAD {uri}");
    }
}
