//! Filters see every version before the version cap (`v=`, `maxversions=`, `maxVersions`), as in
//! HBase, where a filter judges every version in the time range and `maxVersions` then counts the
//! versions it kept. Stateless scans, multiget and stateful scanners on a real store.

mod support;

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use support::*;

/// Table `t` (family `cf`, VERSIONS=4). `r1` holds `cf:a` = old@1, new@2, old@3 and
/// `cf:b` = new@5; `r2` holds `cf:a` = new@1 only.
async fn fixture(c: &Client) {
    c.create_table("t", &["cf"], 4).await;
    c.put_cell("t", "r1", "cf:a", Some(1), "old").await;
    c.put_cell("t", "r1", "cf:a", Some(2), "new").await;
    c.put_cell("t", "r1", "cf:a", Some(3), "old").await;
    c.put_cell("t", "r1", "cf:b", Some(5), "new").await;
    c.put_cell("t", "r2", "cf:a", Some(1), "new").await;
}

fn enc(filter: &str) -> String {
    utf8_percent_encode(filter, NON_ALPHANUMERIC).to_string()
}

type Found = Vec<(String, String, i64, String)>;

fn cell(row: &str, col: &str, ts: i64, v: &str) -> (String, String, i64, String) {
    (row.into(), col.into(), ts, v.into())
}

async fn scan(c: &Client, query: &str) -> Found {
    let r = c.get_json(&format!("/t/*?{query}")).await;
    assert_eq!(r.status, 200, "{query}: {}", r.text());
    cells_of(&r.json())
}

#[actix_web::test]
async fn stateless_scan_value_filter_finds_an_older_version_under_the_default_one_version() {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    c.put_cell("t", "r1", "cf:a", Some(1), "old").await;
    c.put_cell("t", "r1", "cf:a", Some(2), "new").await;
    let found = scan(
        &c,
        &format!("filter={}", enc("ValueFilter(=,'binary:old')")),
    )
    .await;
    assert_eq!(found, vec![cell("r1", "cf:a", 1, "old")]);
    // Without a filter the default single version is still the newest.
    assert_eq!(scan(&c, "").await, vec![cell("r1", "cf:a", 2, "new")]);
}

#[actix_web::test]
async fn stateless_scan_caps_versions_after_the_filter_chose_them() {
    let c = client().await;
    fixture(&c).await;
    let f = enc("ValueFilter(=,'binary:old')");
    // v=1 (default): the newest of the versions the filter kept.
    assert_eq!(
        scan(&c, &format!("filter={f}")).await,
        vec![cell("r1", "cf:a", 3, "old")]
    );
    // Two versions: both `old` ones, skipping the `new` between them.
    assert_eq!(
        scan(&c, &format!("filter={f}&maxversions=2")).await,
        vec![cell("r1", "cf:a", 3, "old"), cell("r1", "cf:a", 1, "old")]
    );
    // A time range still bounds what the filter sees.
    assert_eq!(
        scan(&c, &format!("filter={f}&endtime=3")).await,
        vec![cell("r1", "cf:a", 1, "old")]
    );
}

#[actix_web::test]
async fn stateless_scan_timestamps_filter_reaches_versions_below_the_newest() {
    let c = client().await;
    fixture(&c).await;
    let found = scan(&c, &format!("filter={}", enc("TimestampsFilter(2)"))).await;
    assert_eq!(found, vec![cell("r1", "cf:a", 2, "new")]);
}

#[actix_web::test]
async fn stateless_scan_key_only_filter_keeps_the_one_version_default() {
    let c = client().await;
    fixture(&c).await;
    let found = scan(&c, &format!("filter={}", enc("PrefixFilter('r')"))).await;
    assert_eq!(
        found,
        vec![
            cell("r1", "cf:a", 3, "old"),
            cell("r1", "cf:b", 5, "new"),
            cell("r2", "cf:a", 1, "new"),
        ]
    );
}

#[actix_web::test]
async fn multiget_value_filter_finds_an_older_version_and_caps_after_filtering() {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    c.put_cell("t", "r1", "cf:a", Some(1), "old").await;
    c.put_cell("t", "r1", "cf:a", Some(2), "new").await;
    c.put_cell("t", "r2", "cf:a", Some(1), "new").await;
    let f = enc("ValueFilter(=,'binary:old')");
    let r = c
        .get_json(&format!("/t/multiget?row=r1&row=r2&filter={f}"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // r2 has no `old` version at all, so it is left out.
    assert_eq!(cells_of(&r.json()), vec![cell("r1", "cf:a", 1, "old")]);

    let c = client().await;
    fixture(&c).await;
    let r = c
        .get_json(&format!("/t/multiget?row=r1&row=r2&filter={f}&v=1"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(cells_of(&r.json()), vec![cell("r1", "cf:a", 3, "old")]);
    let r = c
        .get_json(&format!("/t/multiget?row=r1&filter={f}&v=3"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        cells_of(&r.json()),
        vec![cell("r1", "cf:a", 3, "old"), cell("r1", "cf:a", 1, "old")]
    );
}

/// Opens a scanner on `t`, reads it to the end and deletes it.
async fn scanner(c: &Client, body: serde_json::Value) -> Found {
    let r = c.put_json("/t/scanner", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let loc = r.header("location").expect("Location");
    let path = format!("/{}", loc.splitn(4, '/').nth(3).expect("path in Location"));
    let mut found = Vec::new();
    loop {
        let r = c.get_json(&path).await;
        match r.status {
            200 => found.extend(cells_of(&r.json())),
            204 => break,
            s => panic!("scanner read: status {s}: {}", r.text()),
        }
    }
    assert_eq!(c.delete(&path).await.status, 200);
    found
}

fn value_filter_json(value: &str) -> String {
    serde_json::json!({
        "type": "ValueFilter",
        "op": "EQUAL",
        "comparator": {"type": "BinaryComparator", "value": b64(value)},
    })
    .to_string()
}

#[actix_web::test]
async fn scanner_value_filter_with_max_versions_one_finds_an_older_version() {
    let c = client().await;
    c.create_table("t", &["cf"], 3).await;
    c.put_cell("t", "r1", "cf:a", Some(1), "old").await;
    c.put_cell("t", "r1", "cf:a", Some(2), "new").await;
    let body = serde_json::json!({"maxVersions": 1, "filter": value_filter_json("old")});
    assert_eq!(scanner(&c, body).await, vec![cell("r1", "cf:a", 1, "old")]);
}

#[actix_web::test]
async fn scanner_caps_versions_after_the_filter_chose_them() {
    let c = client().await;
    fixture(&c).await;
    let one = serde_json::json!({"maxVersions": 1, "filter": value_filter_json("old")});
    assert_eq!(scanner(&c, one).await, vec![cell("r1", "cf:a", 3, "old")]);
    // The scanner's default is every retained version.
    let all = serde_json::json!({"filter": value_filter_json("old")});
    assert_eq!(
        scanner(&c, all).await,
        vec![cell("r1", "cf:a", 3, "old"), cell("r1", "cf:a", 1, "old")]
    );
}
