//! Stateful scanners and stateless scans (spec §1.5, §2, §4.2) on a real store.

mod support;

use actix_web::http::Method;
use kura::state::Limits;
use support::*;

/// Table `t` with rows r0..r{n-1}, each with cells cf:a and cf:b.
async fn fixture(c: &Client, n: usize) {
    c.create_table("t", &["cf"], 3).await;
    let rows: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let cell = |col: &str, v: String| {
                serde_json::json!({"column": b64(col), "timestamp": 1, "$": b64(v)})
            };
            let k = format!("r{i}");
            serde_json::json!({"key": b64(k), "Cell": [cell("cf:a", format!("a{i}")), cell("cf:b", format!("b{i}"))]})
        })
        .collect();
    let body = serde_json::json!({ "Row": rows });
    assert_eq!(c.put_json("/t/fakerow", &body).await.status, 200);
}

/// Creates a scanner and returns its path (from the absolute Location).
async fn open_scanner(c: &Client, body: &serde_json::Value) -> String {
    let r = c.put_json("/t/scanner", body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let loc = r.header("location").expect("Location");
    assert!(loc.starts_with("http://"), "absolute Location: {loc}");
    let path = loc.splitn(4, '/').nth(3).expect("path in Location");
    format!("/{path}")
}

#[actix_web::test]
async fn scanner_batch_counts_cells_and_splits_rows_then_204() {
    let c = client().await;
    fixture(&c, 3).await;
    let url = open_scanner(&c, &serde_json::json!({"batch": 3})).await;
    let first = c.get_json(&url).await;
    assert_eq!(first.status, 200);
    let cells1 = cells_of(&first.json());
    assert_eq!(cells1.len(), 3);
    // r0 whole, then r1 split: its first cell here, its second in the next answer.
    assert_eq!(row_keys(&first.json()), vec!["r0", "r1"]);
    let second = cells_of(&c.get_json(&url).await.json());
    assert_eq!(second.len(), 3);
    assert_eq!((second[0].0.as_str(), second[0].1.as_str()), ("r1", "cf:b"));
    assert_eq!(c.get_json(&url).await.status, 204);
    assert_eq!(c.delete(&url).await.status, 200);
    assert_eq!(c.get_json(&url).await.status, 404);
    assert_eq!(c.delete(&url).await.status, 404);
}

#[actix_web::test]
async fn scanner_defaults_return_everything_in_one_answer() {
    let c = client().await;
    fixture(&c, 5).await;
    // starbase sends "" with Content-Type JSON, and makes one GET.
    let r = c
        .req(
            Method::PUT,
            "/t/scanner/",
            &[("Content-Type", "application/json")],
            "\"\"",
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let loc = r.header("location").expect("Location");
    let path = format!("/{}", loc.splitn(4, '/').nth(3).expect("path"));
    let v = c.get_json(&path).await.json();
    assert_eq!(cells_of(&v).len(), 10);
    assert_eq!(row_keys(&v), vec!["r0", "r1", "r2", "r3", "r4"]);
}

#[actix_web::test]
async fn scanner_range_columns_limit_and_n_c_parameters() {
    let c = client().await;
    fixture(&c, 6).await;
    let body = serde_json::json!({"startRow": b64("r1"), "endRow": b64("r5"), "column": [b64("cf:a")], "limit": 3});
    let url = open_scanner(&c, &body).await;
    let v = c.get_json(&url).await.json();
    assert_eq!(row_keys(&v), vec!["r1", "r2", "r3"]);
    assert!(cells_of(&v).iter().all(|c| c.1 == "cf:a"));
    assert_eq!(c.get_json(&url).await.status, 204);
    // n= caps rows, c= caps cells per answer.
    let url = open_scanner(&c, &serde_json::json!({})).await;
    assert_eq!(
        row_keys(&c.get_json(&format!("{url}?n=2")).await.json()),
        vec!["r0", "r1"]
    );
    assert_eq!(
        cells_of(&c.get_json(&format!("{url}?c=1")).await.json()).len(),
        1
    );
    // Binary: one cell per GET with X-Row / X-Column / X-Timestamp.
    let r = c.get(&url, "application/octet-stream").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-row").as_deref(), Some(b64("r2").as_str()));
    assert_eq!(r.header("x-column").as_deref(), Some(b64("cf:b").as_str()));
    assert_eq!(r.header("x-timestamp").as_deref(), Some("1"));
    assert_eq!(r.body, b"b2");
}

#[actix_web::test]
async fn xml_scanner_with_a_prefix_filter() {
    let c = client().await;
    fixture(&c, 3).await;
    c.put_cell("t", "zz", "cf:a", Some(1), "z").await;
    let filter = format!(r#"{{"type":"PrefixFilter","value":"{}"}}"#, b64("z"));
    let xml =
        format!(r#"<Scanner batch="10" columns="ignored"><filter>{filter}</filter></Scanner>"#);
    let r = c.put_xml("/t/scanner", &xml).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let loc = r.header("location").expect("Location");
    let path = format!("/{}", loc.splitn(4, '/').nth(3).expect("path"));
    let r = c.get(&path, "text/xml").await;
    assert_eq!(r.content_type().as_deref(), Some("text/xml"));
    assert!(
        r.text().contains(&format!(r#"<Row key="{}">"#, b64("zz"))),
        "{}",
        r.text()
    );
    assert!(!r.text().contains(&b64("r0")), "{}", r.text());
}

#[actix_web::test]
async fn scanner_errors_unknown_filter_missing_table_family() {
    let c = client().await;
    fixture(&c, 1).await;
    let r = c
        .put_json(
            "/t/scanner",
            &serde_json::json!({"filter": "{\"type\":\"NoSuchFilter\"}"}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("NoSuchFilter"), "{}", r.text());
    let r = c
        .put_json(
            "/t/scanner",
            &serde_json::json!({"column": [b64("nofam:a")]}),
        )
        .await;
    assert_eq!(r.status, 404);
    // Like HBase, a scanner on a missing table is created, then its GET is a 404.
    let r = c.put_json("/missing/scanner", &serde_json::json!({})).await;
    assert_eq!(r.status, 201);
    let loc = r.header("location").expect("Location");
    let path = format!("/{}", loc.splitn(4, '/').nth(3).expect("path"));
    assert_eq!(c.get_json(&path).await.status, 404);
    assert_eq!(c.get_json("/t/scanner/doesnotexist").await.status, 404);
    let r = c
        .req(
            Method::PUT,
            "/t/scanner",
            &[("Content-Type", "application/json")],
            "{bad",
        )
        .await;
    assert_eq!(r.status, 400);
}

#[actix_web::test]
async fn open_scanners_are_capped_and_idle_ones_evicted() {
    let c = client_with(Limits {
        max_scanners: 2,
        ..Limits::default()
    })
    .await;
    fixture(&c, 1).await;
    let a = open_scanner(&c, &serde_json::json!({})).await;
    let _b = open_scanner(&c, &serde_json::json!({})).await;
    let r = c.put_json("/t/scanner", &serde_json::json!({})).await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(c.delete(&a).await.status, 200);
    let _c2 = open_scanner(&c, &serde_json::json!({})).await;

    // With a zero idle timeout, every scanner is idle by the next request: it is evicted.
    let c = client_with(Limits {
        scanner_idle_secs: 0,
        ..Limits::default()
    })
    .await;
    fixture(&c, 1).await;
    let url = open_scanner(&c, &serde_json::json!({})).await;
    let status = c.get_json(&url).await.status;
    assert_eq!(status, 404, "an idle scanner is evicted");
}

#[actix_web::test]
async fn stateless_scan_with_range_columns_limit_and_reversed() {
    let c = client().await;
    fixture(&c, 5).await;
    let v = c.get_json("/t/*").await.json();
    assert_eq!(row_keys(&v), vec!["r0", "r1", "r2", "r3", "r4"]);
    let v = c
        .get_json("/t/*?startrow=r1&endrow=r4&column=cf:b&limit=2")
        .await
        .json();
    assert_eq!(row_keys(&v), vec!["r1", "r2"]);
    assert!(cells_of(&v).iter().all(|c| c.1 == "cf:b"));
    let v = c
        .get_json("/t/*?startrow=r1&endrow=r3&includeStartRow=false&includeStopRow=true")
        .await
        .json();
    assert_eq!(row_keys(&v), vec!["r2", "r3"]);
    let v = c.get_json("/t/*?reversed=true&limit=2").await.json();
    assert_eq!(row_keys(&v), vec!["r4", "r3"]);
    let v = c
        .get_json("/t/*?column=cf:a&column=cf:b&batchsize=1&limit=1")
        .await
        .json();
    assert_eq!(
        row_keys(&v),
        vec!["r0", "r0"],
        "batchsize splits a row into Row entries"
    );
    // Empty result: 200 with an empty Row list.
    let r = c.get_json("/t/*?startrow=zzz").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), serde_json::json!({"Row": []}));
    let r = c.get("/t/*", "text/xml").await;
    assert_eq!(r.content_type().as_deref(), Some("text/xml"));
    assert!(r.text().ends_with("</CellSet>"));
    assert_eq!(c.get_json("/missing/*").await.status, 404);
}

#[actix_web::test]
async fn stateless_prefix_scan_versions_time_range_and_filter() {
    let c = client().await;
    c.create_table("t", &["cf"], 5).await;
    for k in ["ab1", "ab2", "ac1"] {
        for ts in [10, 20] {
            c.put_cell("t", k, "cf:q", Some(ts), &format!("{k}@{ts}"))
                .await;
        }
    }
    let v = c.get_json("/t/ab*").await.json();
    assert_eq!(row_keys(&v), vec!["ab1", "ab2"]);
    let v = c.get_json("/t/ab1*?includeStartRow=false").await.json();
    assert_eq!(
        row_keys(&v),
        Vec::<String>::new(),
        "the prefix row itself is the start row"
    );
    let v = c.get_json("/t/a*?startrow=ab2").await.json();
    assert_eq!(row_keys(&v), vec!["ab2", "ac1"]);
    assert_eq!(cells_of(&v).len(), 2, "maxversions defaults to 1");
    assert_eq!(
        cells_of(&c.get_json("/t/ab*?maxversions=5").await.json()).len(),
        4
    );
    let v = c
        .get_json("/t/*?maxversions=5&starttime=5&endtime=15")
        .await
        .json();
    assert!(cells_of(&v).iter().all(|c| c.2 == 10));
    let f = "PrefixFilter('ac')";
    let v = c
        .get_json(&format!(
            "/t/*?filter={}",
            f.replace('(', "%28")
                .replace(')', "%29")
                .replace('\'', "%27")
        ))
        .await
        .json();
    assert_eq!(row_keys(&v), vec!["ac1"]);
    let r = c.get_json("/t/*?filter=NoSuchFilter%28%29").await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("NoSuchFilter"), "{}", r.text());
    use base64::Engine;
    let b = base64::engine::general_purpose::URL_SAFE.encode("ValueFilter(=,'binary:ab2@20')");
    let v = c.get_json(&format!("/t/*?filter_b64={b}")).await.json();
    assert_eq!(row_keys(&v), vec!["ab2"]);
    // PageFilter limits the whole scan.
    let v = c.get_json("/t/*?filter=PageFilter%282%29").await.json();
    assert_eq!(row_keys(&v).len(), 2);
}

#[actix_web::test]
async fn multiget_with_a_filter() {
    let c = client().await;
    fixture(&c, 3).await;
    let v = c
        .get_json(
            "/t/multiget?row=r0&row=r1&row=r2&filter=ValueFilter%28%3D%2C%27binary%3Ab1%27%29",
        )
        .await;
    assert_eq!(v.status, 200, "{}", v.text());
    let cells = cells_of(&v.json());
    assert_eq!(cells.len(), 1);
    assert_eq!((cells[0].0.as_str(), cells[0].3.as_str()), ("r1", "b1"));
}

/// A row limit counts the rows returned. When a filter reads a column the request did not ask
/// for, rows that have none of the requested cells are left out after the filter; they must not
/// use up the limit (HBase answers the first matching row).
#[actix_web::test]
async fn a_limit_counts_rows_returned_when_the_filter_reads_other_columns() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    for r in ["r1", "r2", "r3", "r4"] {
        c.put_cell("t", r, "cf:x", Some(1), "1").await;
    }
    for r in ["r3", "r4"] {
        c.put_cell("t", r, "cf:y", Some(1), "y").await;
    }
    let filter = "SingleColumnValueFilter('cf','x',=,'binary:1')";
    // Stateless.
    let url = format!(
        "/t/*?column=cf:y&limit=1&filter={}",
        filter
            .replace('(', "%28")
            .replace(')', "%29")
            .replace('\'', "%27")
            .replace(',', "%2C")
            .replace('=', "%3D")
            .replace(':', "%3A")
    );
    let r = c.get_json(&url).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(row_keys(&r.json()), vec!["r3"]);
    // Stateful.
    let body = serde_json::json!({
        "column": [b64("cf:y")],
        "limit": 1,
        "filter": format!(
            r#"{{"type":"SingleColumnValueFilter","family":"{}","qualifier":"{}","op":"EQUAL","comparator":{{"type":"BinaryComparator","value":"{}"}}}}"#,
            b64("cf"), b64("x"), b64("1")
        ),
    });
    let url = open_scanner(&c, &body).await;
    let r = c.get_json(&url).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(row_keys(&r.json()), vec!["r3"]);
    assert!(cells_of(&r.json()).iter().all(|c| c.1 == "cf:y"));
    assert_eq!(c.get_json(&url).await.status, 204);
}

/// HBase's default batch is unlimited and starbase reads a whole table with one scanner GET:
/// an answer larger than what the server gathers in memory at once is streamed, every row in
/// order and whole, then the next GET is 204.
#[actix_web::test]
async fn an_unlimited_scanner_get_returns_every_row_even_past_32_mib() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let bin = [("Content-Type", "application/octet-stream")];
    let value = vec![b'v'; 8 << 20];
    for i in 0..5 {
        let r = c
            .req(Method::PUT, &format!("/t/r{i}/cf:a"), &bin, value.clone())
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        c.put_cell("t", &format!("r{i}"), "cf:b", None, "small")
            .await;
    }
    let url = open_scanner(&c, &serde_json::json!({})).await;
    let r = c.get_json(&url).await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(row_keys(&v), vec!["r0", "r1", "r2", "r3", "r4"]);
    let cells = cells_of(&v);
    assert_eq!(cells.len(), 10, "both cells of every row");
    assert!(cells
        .iter()
        .filter(|c| c.1 == "cf:a")
        .all(|c| c.3.len() == 8 << 20));
    assert_eq!(c.get_json(&url).await.status, 204);
    // A row limit still holds across the streamed pieces; the next GET goes on from there.
    let url = open_scanner(&c, &serde_json::json!({})).await;
    let v = c.get_json(&format!("{url}?n=4")).await.json();
    assert_eq!(row_keys(&v), vec!["r0", "r1", "r2", "r3"]);
    assert_eq!(cells_of(&v).len(), 8);
    let v = c.get_json(&url).await.json();
    assert_eq!(row_keys(&v), vec!["r4"]);
    // XML, streamed the same way, is one well-formed CellSet of every row.
    let url = open_scanner(&c, &serde_json::json!({})).await;
    let r = c.get(&url, "text/xml").await;
    assert_eq!(r.status, 200);
    let mut reader = quick_xml::Reader::from_reader(r.body.as_slice());
    let (mut rows, mut cells, mut depth) = (0, 0, 0i32);
    let mut buf = Vec::new();
    loop {
        match reader.read_event_into(&mut buf).expect("well-formed XML") {
            quick_xml::events::Event::Start(e) => {
                depth += 1;
                match e.name().as_ref() {
                    b"Row" => rows += 1,
                    b"Cell" => cells += 1,
                    _ => {}
                }
            }
            quick_xml::events::Event::End(_) => depth -= 1,
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    assert_eq!((rows, cells, depth), (5, 10, 0));
}

/// A streamed scanner answer takes the scanner for one piece at a time: while its client is
/// not reading, the scanner can be deleted, and the answer then ends (well-formed) at its next
/// piece instead of going on from a deleted scanner.
#[actix_web::test]
async fn a_streamed_answer_ends_when_its_scanner_is_deleted_meanwhile() {
    use actix_web::body::MessageBody;
    use actix_web::{test, App};
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let bin = [("Content-Type", "application/octet-stream")];
    for i in 0..5 {
        let r = c
            .req(
                Method::PUT,
                &format!("/t/r{i}/cf:a"),
                &bin,
                vec![b'v'; 8 << 20],
            )
            .await;
        assert_eq!(r.status, 200);
    }
    let url = open_scanner(&c, &serde_json::json!({})).await;
    // The streamed GET through a service of our own over the same server state (the scanner
    // lives there), so that its body can be left unread.
    let app = test::init_service(
        App::new()
            .app_data(c.state.clone())
            .configure(kura::configure),
    )
    .await;
    let req = test::TestRequest::get()
        .uri(&url)
        .insert_header(("Accept", "application/json"))
        .to_request();
    let resp = test::call_service(&app, req).await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut got = Vec::new();
    let first = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_next(cx))
        .await
        .expect("a first piece")
        .expect("no error");
    got.extend_from_slice(&first);
    assert_eq!(
        c.delete(&url).await.status,
        200,
        "deleted while the answer waits"
    );
    assert_eq!(c.get_json(&url).await.status, 404);
    while let Some(piece) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_next(cx)).await
    {
        got.extend_from_slice(&piece.expect("no error"));
    }
    let v: serde_json::Value = serde_json::from_slice(&got).expect("a well-formed CellSet");
    assert_eq!(
        row_keys(&v),
        vec!["r0", "r1", "r2", "r3"],
        "nothing after the delete"
    );
}
