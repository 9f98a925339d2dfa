//! The applications' tables: created at start-up (or by the first request) with their families
//! and a 4-byte salt prefix, idempotently, and readable through the HBase REST API.

mod support;

use base64::Engine;
use serde_json::json;
use support::*;

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
        ("blog", vec!["d", "i"]),
        ("useractions", vec!["content", "i"]),
        ("access", vec!["h", "d", "t", "i"]),
        ("graph", vec!["g", "i"]),
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

#[actix_web::test]
async fn a_table_created_without_the_records_family_gets_it_and_keeps_its_rows() {
    let s = store().await;
    // `useractions` as it was created before idempotency records: one family.
    s.kura
        .create_table(kura_backend::TableDescriptor {
            families: vec![kura_backend::FamilyDescriptor::new(b"content".to_vec())],
            ..kura::apps::table_descriptor("useractions", &["content"])
        })
        .await
        .expect("old table");
    let app = app!(s.kura);
    let (status, first) = call!(
        &app,
        post("/apps/actions/users/1", serde_json::json!({"name": "a"}))
    );
    assert_eq!(status, 201, "{first}");
    let keyed = post("/apps/actions/users/1", serde_json::json!({"name": "b"}))
        .insert_header(("Idempotency-Key", "k"));
    let (status, second) = call!(&app, keyed);
    assert_eq!(status, 201, "{second}");
    let desc = s
        .kura
        .table("useractions")
        .await
        .expect("schema read")
        .expect("table");
    let names: Vec<_> = desc.families.iter().map(|f| f.name.clone()).collect();
    assert_eq!(names, vec![b"content".to_vec(), b"i".to_vec()]);
    let ttl = desc
        .families
        .iter()
        .find(|f| f.name == b"i")
        .and_then(|f| f.ttl_secs);
    assert_eq!(ttl, Some(kura::apps::idempotency::WINDOW_SECS));
    let (_, list) = call!(&app, get("/apps/actions/users/1"));
    assert_eq!(list["actions"].as_array().map(Vec::len), Some(2), "{list}");
}
