//! The applications' tables: created at start-up (or by the first request) with their families
//! and a 4-byte salt prefix, idempotently, and readable through the HBase REST API.

mod apps_support;

use apps_support::*;
use base64::Engine;
use serde_json::json;

#[actix_web::test]
async fn ensure_tables_creates_every_application_table_once() {
    let s = store().await;
    kura::apps::ensure_tables(&s.kura)
        .await
        .expect("tables created");
    kura::apps::ensure_tables(&s.kura)
        .await
        .expect("a second call is a no-op");
    for (name, families) in [
        ("blog", vec!["d"]),
        ("useractions", vec!["content"]),
        ("access", vec!["h", "d", "t"]),
        ("graph", vec!["g"]),
    ] {
        let desc = s
            .kura
            .table(name)
            .await
            .expect("schema read")
            .unwrap_or_else(|| panic!("table {name} exists"));
        let got: Vec<String> = desc
            .families
            .iter()
            .map(|f| String::from_utf8_lossy(&f.name).into_owned())
            .collect();
        assert_eq!(got, families, "{name}");
        assert_eq!(desc.salt.buckets, 256);
        assert_eq!(
            desc.salt.prefix_len,
            Some(4),
            "{name}: salt on the 4-byte hash prefix"
        );
    }
}

#[actix_web::test]
async fn the_first_request_creates_its_table_and_rest_reads_the_rows() {
    let s = store().await;
    let app = app!(s.kura);
    assert!(s.kura.table("access").await.expect("schema read").is_none());
    let (status, _) = call!(
        &app,
        post(
            "/apps/counter/hits",
            json!({"url": "http://blog.example.jp/a"})
        )
    );
    assert_eq!(status, 200);
    assert!(s.kura.table("access").await.expect("schema read").is_some());

    let req = get("/access/*").insert_header(("accept", "application/json"));
    let (status, body) = call!(&app, req);
    assert_eq!(status, 200, "{body}");
    let key = body["Row"][0]["key"].as_str().expect("one row");
    let key = base64::engine::general_purpose::STANDARD
        .decode(key)
        .expect("base64 key");
    assert_eq!(
        &key[4..],
        b"jp.example.blog\t/a",
        "salt hash, reversed domain, tab, path"
    );
}
