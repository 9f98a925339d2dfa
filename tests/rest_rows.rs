//! Row GET/PUT/POST/DELETE over the HBase REST API (spec §2, §3, §4.1, §7) on a real store.

mod support;

use actix_web::http::Method;
use support::*;

#[actix_web::test]
async fn json_put_then_get_returns_cells_in_hbase_order() {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    let body = cellset(&[(
        "row1",
        &[("cf:b", Some(10), "vb"), ("cf:a", Some(10), "va")],
    )]);
    let r = c.put_json("/t/fakerow", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c.get_json("/t/row1").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type().as_deref(), Some("application/json"));
    assert_eq!(
        cells_of(&r.json()),
        vec![
            ("row1".into(), "cf:a".into(), 10, "va".into()),
            ("row1".into(), "cf:b".into(), 10, "vb".into())
        ]
    );
}

#[actix_web::test]
async fn body_row_key_wins_and_multi_row_bodies_write_every_row() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let body = cellset(&[
        ("r1", &[("cf:a", Some(1), "one")]),
        ("r2", &[("cf:a", Some(1), "two")]),
    ]);
    assert_eq!(c.put_json("/t/$multiput", &body).await.status, 200);
    assert_eq!(c.get_json("/t/$multiput").await.status, 404);
    assert_eq!(cells_of(&c.get_json("/t/r2").await.json())[0].3, "two");
    assert_eq!(cells_of(&c.get_json("/t/r1/cf:a").await.json())[0].3, "one");
}

#[actix_web::test]
async fn missing_key_and_column_fall_back_to_the_url() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let body = serde_json::json!({"Row":[{"Cell":[{"$": b64("x")}, {"$": b64("y")}]}]});
    let r = c.put_json("/t/urlrow/cf:a,cf:b", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let cells = cells_of(&c.get_json("/t/urlrow").await.json());
    assert_eq!(
        cells
            .iter()
            .map(|c| (c.1.as_str(), c.3.as_str()))
            .collect::<Vec<_>>(),
        vec![("cf:a", "x"), ("cf:b", "y")]
    );
    // No column anywhere: a 400 that says so.
    let body = serde_json::json!({"Row":[{"key": b64("r"), "Cell":[{"$": b64("x")}]}]});
    let r = c.put_json("/t/r", &body).await;
    assert_eq!(r.status, 400);
    assert!(r.text().starts_with("Bad request"), "{}", r.text());
}

#[actix_web::test]
async fn xml_put_and_get_round_trip() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let xml = format!(
        r#"<?xml version="1.0"?><CellSet><Row key="{}"><Cell column="{}" timestamp="5">{}</Cell></Row></CellSet>"#,
        b64("rx"),
        b64("cf:q"),
        b64("xml value")
    );
    let r = c.put_xml("/t/whatever", &xml).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c.get("/t/rx", "text/xml").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type().as_deref(), Some("text/xml"));
    let text = r.text();
    assert!(
        text.contains(&format!(
            r#"<Row key="{}"><Cell column="{}" timestamp="5">{}</Cell></Row>"#,
            b64("rx"),
            b64("cf:q"),
            b64("xml value")
        )),
        "{text}"
    );
}

#[actix_web::test]
async fn binary_put_and_get_carry_x_timestamp() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let r = c
        .req(
            Method::PUT,
            "/t/brow/cf:bin",
            &[
                ("Content-Type", "application/octet-stream"),
                ("X-Timestamp", "1234"),
            ],
            vec![0u8, 1, 2, 255],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    for accept in ["", "*/*", "application/octet-stream"] {
        let r = c.get("/t/brow/cf:bin", accept).await;
        assert_eq!(r.status, 200, "accept {accept:?}");
        assert_eq!(
            r.content_type().as_deref(),
            Some("application/octet-stream")
        );
        assert_eq!(r.header("x-timestamp").as_deref(), Some("1234"));
        assert_eq!(r.body, vec![0u8, 1, 2, 255]);
    }
    // Binary needs exactly one column.
    let r = c.get("/t/brow", "").await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("exactly 1 column"), "{}", r.text());
    // X-Row and X-Column override the URL.
    let r = c
        .req(
            Method::POST,
            "/t/ignored/cf:ignored",
            &[
                ("Content-Type", "application/octet-stream"),
                ("X-Row", "xr"),
                ("X-Column", "cf:xc"),
            ],
            "hdr",
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(c.get("/t/xr/cf:xc", "").await.body, b"hdr");
}

#[actix_web::test]
async fn versions_and_time_ranges_follow_the_rowspec() {
    let c = client().await;
    c.create_table("t", &["cf"], 5).await;
    for ts in [100, 200, 300] {
        c.put_cell("t", "r", "cf:a", Some(ts), &format!("v{ts}"))
            .await;
    }
    let ts_of = |v: &serde_json::Value| cells_of(v).iter().map(|c| c.2).collect::<Vec<_>>();
    assert_eq!(ts_of(&c.get_json("/t/r/cf:a").await.json()), vec![300]);
    assert_eq!(
        ts_of(&c.get_json("/t/r/cf:a?v=5").await.json()),
        vec![300, 200, 100]
    );
    // One timestamp reads [0, ts): the newest version strictly older than ts (spec §1.6).
    assert_eq!(ts_of(&c.get_json("/t/r/cf:a/300").await.json()), vec![200]);
    assert_eq!(ts_of(&c.get_json("/t/r/cf:a/301").await.json()), vec![300]);
    assert_eq!(c.get_json("/t/r/cf:a/100").await.status, 404);
    // A range is [t1, t2).
    assert_eq!(
        ts_of(&c.get_json("/t/r/cf:a/100,300?v=5").await.json()),
        vec![200, 100]
    );
    // starbase's form: trailing slash after the range.
    assert_eq!(
        ts_of(&c.get_json("/t/r/cf/200,301/?v=3").await.json()),
        vec![300, 200]
    );
    let r = c.get_json("/t/r/cf:a/notanumber").await;
    assert_eq!(r.status, 400);
    let r = c.get_json("/t/r/cf:a?v=0").await;
    assert_eq!(r.status, 400);
}

#[actix_web::test]
async fn family_and_empty_qualifier_columns_are_distinct() {
    let c = client().await;
    c.create_table("t", &["cf", "g"], 1).await;
    c.put_cell("t", "r", "cf:", Some(1), "empty-q").await;
    c.put_cell("t", "r", "cf:x", Some(1), "x").await;
    c.put_cell("t", "r", "g:y", Some(1), "y").await;
    let cols = |v: serde_json::Value| cells_of(&v).into_iter().map(|c| c.1).collect::<Vec<_>>();
    assert_eq!(cols(c.get_json("/t/r/cf:").await.json()), vec!["cf:"]);
    assert_eq!(
        cols(c.get_json("/t/r/cf").await.json()),
        vec!["cf:", "cf:x"]
    );
    assert_eq!(
        cols(c.get_json("/t/r/cf:x,g").await.json()),
        vec!["cf:x", "g:y"]
    );
    assert_eq!(
        cols(c.get_json("/t/r").await.json()),
        vec!["cf:", "cf:x", "g:y"]
    );
}

#[actix_web::test]
async fn a_write_that_takes_its_row_from_a_range_or_prefix_path_is_400() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let bin = |path: &'static str| {
        c.req(
            Method::PUT,
            path,
            &[("Content-Type", "application/octet-stream")],
            "v",
        )
    };
    let no_key = serde_json::json!({"Row":[{"Cell":[{"column": b64("cf:a"), "$": b64("v")}]}]});
    // HBase would write the start row ("user", "star"): rows the client never named.
    for r in [
        bin("/t/user,1/cf:a").await,
        bin("/t/star*/cf:a").await,
        bin("/t/star%2A/cf:a").await,
        c.put_json("/t/user,1", &no_key).await,
        c.post_json("/t/star*/cf:a", &no_key).await,
        c.put_json(
            "/t/user,1?check=put",
            &serde_json::json!({"Row":[{"Cell":[
            {"column": b64("cf:a"), "$": b64("v")}, {"column": b64("cf:a"), "$": b64("old")}]}]}),
        )
        .await,
    ] {
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(r.text().contains("%2C"), "{}", r.text());
    }
    assert_eq!(
        c.get_json("/t/*").await.json()["Row"],
        serde_json::json!([])
    );
    // An encoded comma is part of the key; a key in the body wins over the path.
    assert_eq!(bin("/t/user%2C1/cf:a").await.status, 200);
    let keyed = serde_json::json!({"Row":[{"key": b64("k"), "Cell":[{"column": b64("cf:a"), "$": b64("v")}]}]});
    assert_eq!(c.put_json("/t/a,b", &keyed).await.status, 200);
    let rows: Vec<String> = c.get_json("/t/*").await.json()["Row"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| String::from_utf8(unb64(r["key"].as_str().expect("key"))).expect("utf-8"))
        .collect();
    assert_eq!(rows, vec!["k", "user,1"]);
}

#[actix_web::test]
async fn url_encoded_keys_are_split_before_decoding() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let key = "http://example.com/foo,bar baz";
    c.put_cell("t", key, "cf:a", Some(1), "v").await;
    let r = c
        .get_json("/t/http%3A%2F%2Fexample.com%2Ffoo%2Cbar+baz/cf:a")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(cells_of(&r.json())[0].0, key);
}

#[actix_web::test]
async fn base64_url_encoding_of_keys_and_columns() {
    use base64::Engine;
    let url = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    c.put_cell("t", "k/ey?", "cf:q", Some(1), "v").await;
    let r = c
        .get_json(&format!("/t/{}/{}?e=b64", url("k/ey?"), url("cf:q")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c
        .req(
            Method::GET,
            &format!("/t/{}/{}", url("k/ey?"), url("cf:q")),
            &[("Accept", "application/json"), ("Encoding", "base64")],
            "",
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(c.get_json("/t/abc?e=rot13").await.status, 400);
}

#[actix_web::test]
async fn ranges_and_globs_return_several_rows() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    for k in ["a1", "a2", "a3", "b1"] {
        c.put_cell("t", k, "cf:q", Some(1), k).await;
    }
    let r = c.get_json("/t/a2,b1/cf").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(row_keys(&r.json()), vec!["a2", "a3"]);
    let r = c.get_json("/t/a*/cf:q").await;
    assert_eq!(row_keys(&r.json()), vec!["a1", "a2", "a3"]);
    assert_eq!(c.get_json("/t/c*/cf").await.status, 404);
}

#[actix_web::test]
async fn missing_table_family_row_and_column_are_404() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    c.put_cell("t", "r", "cf:a", None, "v").await;
    assert_eq!(c.get_json("/nope/r").await.status, 404);
    assert_eq!(c.get_json("/t/r/nofam:a").await.status, 404);
    assert_eq!(c.get_json("/t/missing").await.status, 404);
    assert_eq!(c.get_json("/t/r/cf:b").await.status, 404);
    let r = c
        .put_json("/t/r", &cellset(&[("r", &[("doesnot:exist", None, "v")])]))
        .await;
    assert_eq!(r.status, 404);
    let r = c
        .put_json("/nope/r", &cellset(&[("r", &[("cf:a", None, "v")])]))
        .await;
    assert_eq!(r.status, 404);
    let r = c
        .put_json("/t/r", &cellset(&[("r", &[("cfnocolon", None, "v")])]))
        .await;
    assert_eq!(r.status, 400);
    let r = c.get("/t/r", "text/plain").await;
    assert_eq!(r.status, 406);
}

#[actix_web::test]
async fn deletes_mask_older_versions_even_when_put_later() {
    let c = client().await;
    c.create_table("t", &["cf", "g"], 5).await;
    for ts in [10, 20, 30] {
        c.put_cell("t", "r", "cf:a", Some(ts), "v").await;
    }
    c.put_cell("t", "r", "cf:b", Some(10), "b").await;
    c.put_cell("t", "r", "g:c", Some(10), "c").await;
    // Column delete at ts 20 removes versions <= 20 only.
    assert_eq!(c.delete("/t/r/cf:a/20").await.status, 200);
    let r = c.get_json("/t/r/cf:a?v=5").await;
    assert_eq!(
        cells_of(&r.json()).iter().map(|c| c.2).collect::<Vec<_>>(),
        vec![30]
    );
    // A later put with an older timestamp stays masked: HBase's rule. Bigtable keeps no delete
    // markers, so there the late put shows (the documented main difference of the backends).
    c.put_cell("t", "r", "cf:a", Some(15), "late").await;
    let r = c.get_json("/t/r/cf:a?v=5").await;
    let expected = if c.on_bigtable() {
        vec![30, 15]
    } else {
        vec![30]
    };
    assert_eq!(
        cells_of(&r.json()).iter().map(|c| c.2).collect::<Vec<_>>(),
        expected
    );
    // Family delete.
    assert_eq!(c.delete("/t/r/g").await.status, 200);
    assert_eq!(c.get_json("/t/r/g").await.status, 404);
    assert_eq!(c.get_json("/t/r/cf:b").await.status, 200);
    // Whole-row delete at a timestamp: /t/r//TS.
    assert_eq!(c.delete("/t/r//25").await.status, 200);
    assert_eq!(c.get_json("/t/r/cf:b").await.status, 404);
    assert_eq!(c.get_json("/t/r/cf:a").await.status, 200);
    // Whole-row delete now; absent rows delete fine; missing table/family are 404.
    assert_eq!(c.delete("/t/r").await.status, 200);
    assert_eq!(c.get_json("/t/r").await.status, 404);
    assert_eq!(c.delete("/t/never").await.status, 200);
    assert_eq!(c.delete("/nope/r").await.status, 404);
    assert_eq!(c.delete("/t/r/nofam").await.status, 404);
}

#[actix_web::test]
async fn multiget_returns_found_rows_in_request_order() {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    for (k, v) in [("m1", "one"), ("m2", "two"), ("m3", "three")] {
        c.put_cell("t", k, "cf:a", Some(1), v).await;
        c.put_cell("t", k, "cf:b", Some(1), v).await;
    }
    let r = c.get_json("/t/multiget?row=m3&row=missing&row=m1").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(row_keys(&r.json()), vec!["m3", "m1"]);
    // Per-row columns and path columns.
    let r = c.get_json("/t/multiget?row=m2/cf:a").await;
    assert_eq!(cells_of(&r.json()).len(), 1);
    let r = c.get_json("/t/multiget/cf:b?row=m1&row=m2").await;
    assert!(cells_of(&r.json()).iter().all(|c| c.1 == "cf:b"));
    assert_eq!(c.get_json("/t/multiget?row=zz").await.status, 404);
    assert_eq!(c.get_json("/t/multiget").await.status, 404);
    let r = c.get("/t/multiget?row=m1", "text/xml").await;
    assert_eq!(r.content_type().as_deref(), Some("text/xml"));
    assert!(r.text().contains("<CellSet>"));
}

/// A multiget of rows read alike goes to the backend in batches (one message per region, one
/// Bigtable request per batch): more rows than a batch holds, over every region, in a scrambled
/// order with repeats and missing rows, still answer each found row where the request names it,
/// with its own cells; a request mixing per-row columns reads row by row, alike.
#[actix_web::test]
async fn multiget_of_many_rows_answers_each_in_request_order_with_repeats() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    for i in 0..150 {
        c.put_cell("t", &format!("k{i:03}"), "cf:a", Some(1), &format!("v{i}"))
            .await;
    }
    // 200 names over 170 keys (k150..k169 missing): every key named once, 30 named twice.
    let names: Vec<String> = (0..200).map(|j| format!("k{:03}", j * 37 % 170)).collect();
    let query: Vec<String> = names.iter().map(|n| format!("row={n}")).collect();
    let r = c
        .get_json(&format!("/t/multiget?{}", query.join("&")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let expected: Vec<(String, String, i64, String)> = names
        .iter()
        .filter(|n| n[1..].parse::<u32>().expect("number") < 150)
        .map(|n| {
            let value = format!("v{}", n[1..].parse::<u32>().expect("number"));
            (n.clone(), "cf:a".to_string(), 1, value)
        })
        .collect();
    assert!(expected.len() > 150, "keys named twice are answered twice");
    assert_eq!(cells_of(&r.json()), expected);

    let r = c
        .get_json("/t/multiget?row=k007/cf:a&row=k160&row=k003&row=k007")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(row_keys(&r.json()), vec!["k007", "k003", "k007"]);
}

/// Python's `base64.encodebytes` (and any MIME encoder) wraps at 76 columns; HBase's JSON and
/// XML decoders skip the line breaks, so a value written that way must round-trip here too.
#[actix_web::test]
async fn base64_wrapped_at_76_columns_is_decoded_whole() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let value = "v".repeat(100);
    let wrapped: String = b64(&value)
        .as_bytes()
        .chunks(76)
        .map(|l| format!("{}\n", std::str::from_utf8(l).expect("ascii")))
        .collect();
    assert!(wrapped.trim_end().contains('\n'), "the value spans lines");
    let body = serde_json::json!({"Row":[{"key": b64("r"), "Cell":[
        {"column": b64("cf:q"), "timestamp": 5, "$": wrapped}]}]});
    let r = c.put_json("/t/r", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c.get_json("/t/r/cf:q").await;
    assert_eq!(
        cells_of(&r.json()),
        vec![("r".into(), "cf:q".into(), 5, value)]
    );
}
