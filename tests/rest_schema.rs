//! Table list, versions, status, namespaces, schemas, exists and regions over the HBase REST API.

mod support;

use actix_web::http::Method;
use support::*;

#[actix_web::test]
async fn table_list_in_text_json_and_xml() {
    let c = client().await;
    c.create_table("beta", &["cf"], 1).await;
    c.create_table("alpha", &["cf"], 1).await;
    let r = c.get("/", "").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type().as_deref(), Some("text/plain"));
    assert!(
        r.text().contains("alpha\n") && r.text().contains("beta\n"),
        "{}",
        r.text()
    );
    let names: Vec<String> = c.get_json("/").await.json()["table"]
        .as_array()
        .expect("table array")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect();
    assert!(names.contains(&"alpha".to_string()) && names.contains(&"beta".to_string()));
    let r = c.get("/", "text/xml").await;
    assert_eq!(r.content_type().as_deref(), Some("text/xml"));
    assert!(
        r.text().contains(r#"<table name="alpha"/>"#),
        "{}",
        r.text()
    );
}

#[actix_web::test]
async fn versions_and_cluster_status() {
    let c = client().await;
    let r = c.get_json("/version").await;
    assert_eq!(r.json()["REST"], "0.0.3");
    assert!(c
        .get("/version/rest", "")
        .await
        .text()
        .starts_with("rest 0.0.3"));
    let r = c.get_json("/version/cluster").await;
    assert!(r.json()["Version"]
        .as_str()
        .is_some_and(|v| v.starts_with('2')));
    let r = c.get("/version/cluster", "text/xml").await;
    assert!(
        r.text().contains("<ClusterVersion Version="),
        "{}",
        r.text()
    );
    c.create_table("t", &["cf"], 1).await;
    let r = c.get_json("/status/cluster").await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert!(v["regions"].as_u64().is_some_and(|n| n >= 1), "{v}");
    assert_eq!(v["LiveNodes"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["DeadNodes"], serde_json::json!([]));
    // HBase's TestStatusResource expects a start code and the meta region (our catalog).
    assert!(
        v["LiveNodes"][0]["startCode"]
            .as_i64()
            .is_some_and(|s| s > 0),
        "{v}"
    );
    let regions = v["LiveNodes"][0]["Region"].as_array().expect("regions");
    assert!(
        regions.iter().any(|r| r["name"] == b64("hbase:meta,,1")),
        "{v}"
    );
    assert_eq!(c.get_json("/version/nope").await.status, 404);
}

#[actix_web::test]
async fn namespaces_list_default_and_hbase() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    assert_eq!(
        c.get_json("/namespaces").await.json(),
        serde_json::json!({"Namespace":["default","hbase"]})
    );
    assert_eq!(c.get_json("/namespaces/default").await.status, 200);
    assert_eq!(c.get_json("/namespaces/nope").await.status, 404);
    let r = c.get_json("/namespaces/default/tables").await;
    assert_eq!(r.json()["table"][0]["name"], "t");
    assert_eq!(
        c.get_json("/namespaces/hbase/tables").await.json()["table"],
        serde_json::json!([])
    );
    assert_eq!(
        c.req(Method::POST, "/namespaces/default", &[], "")
            .await
            .status,
        403
    );
    assert_eq!(c.delete("/namespaces/other").await.status, 404);
    for path in [
        "/namespaces",
        "/namespaces/default",
        "/namespaces/default/tables",
    ] {
        assert_eq!(
            c.req(Method::HEAD, path, &[], "").await.status,
            200,
            "HEAD {path}"
        );
    }
}

#[actix_web::test]
async fn schema_create_get_and_defaults() {
    let c = client().await;
    let r = c
        .put_json(
            "/t/schema",
            &serde_json::json!({"name":"t","ColumnSchema":[{"name":"cf"}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(r
        .header("location")
        .is_some_and(|l| l.starts_with("http") && l.ends_with("/t/schema")));
    let v = c.get_json("/t/schema").await.json();
    assert_eq!(v["name"], "t");
    assert_eq!(v["ColumnSchema"][0]["name"], "cf");
    assert_eq!(v["ColumnSchema"][0]["VERSIONS"], "1");
    assert_eq!(v["ColumnSchema"][0]["TTL"], "2147483647");
    let r = c.get("/t/schema", "").await;
    assert_eq!(r.content_type().as_deref(), Some("text/plain"));
    assert!(r.text().contains("NAME => 'cf'"), "{}", r.text());
    assert_eq!(c.get_json("/t/exists").await.status, 200);
    assert_eq!(c.get_json("/nope/exists").await.status, 404);
    assert_eq!(c.get_json("/nope/schema").await.status, 404);
}

#[actix_web::test]
async fn put_schema_replaces_and_post_merges_families() {
    let c = client().await;
    c.create_table("t", &["a", "b"], 1).await;
    c.put_cell("t", "r", "b:q", None, "v").await;
    // POST on an existing table: 200, listed families added or modified, others kept.
    let r = c
        .post_json(
            "/t/schema",
            &serde_json::json!({"ColumnSchema":[{"name":"c"},{"name":"a","VERSIONS":"4"}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = c.get_json("/t/schema").await.json();
    let fams: Vec<_> = v["ColumnSchema"]
        .as_array()
        .expect("cols")
        .iter()
        .map(|c| c["name"].as_str().expect("name").to_string())
        .collect();
    assert_eq!(fams, vec!["a", "b", "c"]);
    assert_eq!(v["ColumnSchema"][0]["VERSIONS"], "4");
    // PUT replaces: families not listed are dropped (201).
    let r = c
        .put_json(
            "/t/schema",
            &serde_json::json!({"ColumnSchema":[{"name":"a"}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = c.get_json("/t/schema").await.json();
    assert_eq!(v["ColumnSchema"].as_array().map(Vec::len), Some(1));
    assert_eq!(c.get_json("/t/r/b:q").await.status, 404);
    // POST on a missing table creates it: 201.
    let r = c
        .post_json(
            "/u/schema",
            &serde_json::json!({"ColumnSchema":[{"name":"cf"}]}),
        )
        .await;
    assert_eq!(r.status, 201);
}

#[actix_web::test]
async fn post_schema_without_families_changes_table_attributes_only() {
    let c = client().await;
    c.create_table("t", &["a", "b"], 1).await;
    c.put_cell("t", "r", "b:q", None, "v").await;
    // JSON, XML, and an explicitly empty family list: 200, the families and data untouched.
    let r = c
        .post_json(
            "/t/schema",
            &serde_json::json!({"name": "t", "OWNER": "me"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c
        .req(
            Method::POST,
            "/t/schema",
            &[("Content-Type", "text/xml")],
            r#"<TableSchema name="t" COLOR="blue"/>"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c
        .post_json(
            "/t/schema",
            &serde_json::json!({"ColumnSchema": [], "SIZE": "9"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = c.get_json("/t/schema").await.json();
    assert_eq!(
        (&v["OWNER"], &v["COLOR"], &v["SIZE"]),
        (&"me".into(), &"blue".into(), &"9".into())
    );
    let fams: Vec<_> = v["ColumnSchema"]
        .as_array()
        .expect("cols")
        .iter()
        .map(|c| c["name"].as_str().expect("name").to_string())
        .collect();
    assert_eq!(fams, vec!["a", "b"]);
    assert_eq!(c.get_json("/t/r/b:q").await.status, 200);
    // A create or a replace still needs its families.
    let r = c
        .post_json("/u/schema", &serde_json::json!({"OWNER": "me"}))
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("ColumnSchema"), "{}", r.text());
    assert!(c.kura.table("u").await.expect("schema read").is_none());
    let r = c
        .put_json("/t/schema", &serde_json::json!({"OWNER": "me"}))
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(c.get_json("/t/r/b:q").await.status, 200);
}

#[actix_web::test]
async fn schema_attributes_are_kept_and_kura_attributes_honoured() {
    let c = client().await;
    let body = serde_json::json!({
        "name": "t", "OWNER": "me", "KURA_SALT_PREFIX": "4", "KURA_REGIONS": 3,
        "ColumnSchema": [{"name": "cf", "VERSIONS": 2, "TTL": "3600", "COLOR": "blue"}]
    });
    assert_eq!(c.put_json("/t/schema", &body).await.status, 201);
    let v = c.get_json("/t/schema").await.json();
    assert_eq!(v["OWNER"], "me");
    assert_eq!(v["KURA_SALT_PREFIX"], "4");
    assert_eq!(v["KURA_REGIONS"], "3");
    assert_eq!(v["ColumnSchema"][0]["COLOR"], "blue");
    assert_eq!(v["ColumnSchema"][0]["TTL"], "3600");
    let desc = c
        .kura
        .table("t")
        .await
        .expect("schema read")
        .expect("table exists");
    assert_eq!(desc.salt.prefix_len, Some(4));
    assert_eq!(desc.families[0].max_versions, 2);
    // Real regions.
    let r = c.get_json("/t/regions").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["name"], "t");
    // KURA_REGIONS makes 3 regions on the embedded store; on Bigtable the regions are the
    // tablets Bigtable reports (documented difference), at least one.
    let regions = v["Region"].as_array().map(Vec::len).unwrap_or(0);
    if c.on_bigtable() {
        assert!(regions >= 1, "{v}");
    } else {
        assert_eq!(regions, 3, "{v}");
    }
    assert!(v["Region"][0]["location"].as_str().is_some());
    assert_eq!(c.get_json("/nope/regions").await.status, 404);
    // Versions are honoured on reads (recent timestamps: the TTL is an hour), and TTL too.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    for ts in [now - 3, now - 2, now - 1] {
        c.put_cell("t", "r", "cf:a", Some(ts), "v").await;
    }
    c.put_cell("t", "old", "cf:a", Some(now - 7_200_000), "expired")
        .await;
    assert_eq!(c.get_json("/t/old").await.status, 404);
    let r = c.get_json("/t/r/cf:a?v=10").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(cells_of(&r.json()).len(), 2);
}

#[actix_web::test]
async fn xml_schema_in_and_out() {
    let c = client().await;
    let r = c.put_xml("/x/schema", r#"<?xml version="1.0"?><TableSchema name="x"><ColumnSchema name="cf" VERSIONS="3"/></TableSchema>"#).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = c.get("/x/schema", "text/xml").await;
    assert_eq!(r.content_type().as_deref(), Some("text/xml"));
    assert!(
        r.text().contains(r#"<TableSchema name="x""#),
        "{}",
        r.text()
    );
    assert!(r.text().contains(r#"VERSIONS="3""#), "{}", r.text());
}

#[actix_web::test]
async fn delete_schema_drops_the_table() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    c.put_cell("t", "r", "cf:a", None, "v").await;
    assert_eq!(c.delete("/t/schema").await.status, 200);
    assert_eq!(c.get_json("/t/exists").await.status, 404);
    assert_eq!(c.get_json("/t/r").await.status, 404);
    assert_eq!(c.delete("/t/schema").await.status, 404);
}

#[actix_web::test]
async fn bad_schemas_and_reserved_names_are_400() {
    let c = client().await;
    for name in [
        "version",
        "status",
        "namespaces",
        "apps",
        "admin",
        "metrics",
        "healthz",
        "ui",
    ] {
        let r = c
            .put_json(
                &format!("/{name}/schema"),
                &serde_json::json!({"ColumnSchema":[{"name":"cf"}]}),
            )
            .await;
        assert!(
            [400, 403, 404, 405].contains(&r.status),
            "{name}: {}",
            r.status
        );
        assert!(
            c.kura.table(name).await.expect("schema read").is_none(),
            "{name} became a table"
        );
    }
    let r = c
        .put_json(
            "/metrics/schema",
            &serde_json::json!({"ColumnSchema":[{"name":"cf"}]}),
        )
        .await;
    assert_ne!(r.status, 201);
    let r = c
        .put_json(
            "/bad%2Fname/schema",
            &serde_json::json!({"ColumnSchema":[{"name":"cf"}]}),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = c
        .put_json("/t/schema", &serde_json::json!({"ColumnSchema":[]}))
        .await;
    assert_eq!(r.status, 400);
    let r = c
        .put_json(
            "/t/schema",
            &serde_json::json!({"ColumnSchema":[{"name":"cf","VERSIONS":"many"}]}),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = c
        .req(
            Method::PUT,
            "/t/schema",
            &[("Content-Type", "application/json")],
            "{not json",
        )
        .await;
    assert_eq!(r.status, 400);
    let r = c
        .req(
            Method::PUT,
            "/t/schema",
            &[("Content-Type", "application/x-protobuf")],
            "x",
        )
        .await;
    assert_eq!(r.status, 415);
}
