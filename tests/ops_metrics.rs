//! `/healthz` and `/metrics`: liveness, a page a real Prometheus text-format parser accepts,
//! and counters that move with requests and writes.

#[macro_use]
mod support;

use actix_web::test::{call_service, read_body, TestRequest};
use prometheus_parse::{LineInfo, Scrape, Value};

fn parse(body: &str) -> Scrape {
    // The parser skips lines it does not understand, so first check that every line is a
    // comment, a HELP/TYPE line or a well-formed sample.
    for line in body.lines() {
        let info = LineInfo::parse(line);
        assert!(
            !matches!(info, LineInfo::Ignored | LineInfo::Empty),
            "not a valid exposition line: {line:?}"
        );
    }
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("parse /metrics")
}

fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(h) => h.iter().map(|b| b.count).fold(0.0, f64::max),
            Value::Summary(_) => f64::NAN,
        })
}

/// GETs `/metrics` from an in-process app, checks the content type and parses the body.
macro_rules! scrape {
    ($app:expr) => {{
        let res = call_service(&$app, TestRequest::get().uri("/metrics").to_request()).await;
        assert_eq!(res.status(), 200);
        let ct = res
            .headers()
            .get("content-type")
            .expect("content type")
            .to_str()
            .expect("ascii")
            .to_string();
        assert!(
            ct.starts_with("text/plain; version=0.0.4"),
            "content type {ct}"
        );
        let body = read_body(res).await;
        parse(std::str::from_utf8(&body).expect("utf-8 metrics"))
    }};
}

#[actix_web::test]
async fn healthz_answers_ok_as_plain_text() {
    let (kura, _dir) = support::start_kura().await;
    let app = ops_app!(kura);
    let res = call_service(&app, TestRequest::get().uri("/healthz").to_request()).await;
    assert_eq!(res.status(), 200);
    assert!(res
        .headers()
        .get("content-type")
        .expect("content type")
        .to_str()
        .unwrap_or("")
        .starts_with("text/plain"));
    assert_eq!(read_body(res).await.as_ref(), b"ok");
}

#[actix_web::test]
async fn metrics_parse_and_request_counters_move_with_requests() {
    let (kura, _dir) = support::start_kura().await;
    let app = ops_app!(kura);
    let labels = [("endpoint", "healthz"), ("op", "get"), ("status", "2xx")];
    let before = scrape!(app);
    let n0 = value(&before, "kura_http_requests_total", &labels).unwrap_or(0.0);
    for _ in 0..5 {
        let res = call_service(&app, TestRequest::get().uri("/healthz").to_request()).await;
        assert_eq!(res.status(), 200);
    }
    let after = scrape!(app);
    let n1 = value(&after, "kura_http_requests_total", &labels).expect("healthz series");
    // Other tests in this binary may count healthz too: at least our five.
    assert!(n1 >= n0 + 5.0, "healthz count went from {n0} to {n1}");
    let hist = value(
        &after,
        "kura_http_request_duration_seconds",
        &[("endpoint", "healthz"), ("op", "get")],
    )
    .expect("healthz latency histogram");
    assert!(
        hist >= 5.0,
        "histogram +Inf bucket counts every request: {hist}"
    );
    // The /metrics scrape itself is classified as its own endpoint.
    assert!(value(
        &after,
        "kura_http_requests_total",
        &[("endpoint", "metrics")]
    )
    .is_some());
}

#[actix_web::test]
async fn metrics_count_errors_by_status_class() {
    let (kura, _dir) = support::start_kura().await;
    let app = ops_app!(kura);
    let labels = [("endpoint", "admin"), ("op", "flush"), ("status", "4xx")];
    let n0 = value(&scrape!(app), "kura_http_requests_total", &labels).unwrap_or(0.0);
    let res = call_service(
        &app,
        TestRequest::post()
            .uri("/admin/tables/no_such_table/flush")
            .to_request(),
    )
    .await;
    assert_eq!(res.status(), 404);
    let n1 = value(&scrape!(app), "kura_http_requests_total", &labels).expect("4xx series");
    assert!(n1 >= n0 + 1.0);
}

#[actix_web::test]
async fn region_figures_appear_per_region_and_move_with_writes() {
    let (kura, _dir) =
        support::start_kura_with(|c| c.durability = kura_actors::storage::Durability::Sync).await;
    support::create_table(&kura, "m", 16, 2).await;
    let app = ops_app!(kura);

    let before = scrape!(app);
    assert_eq!(
        value(&before, "kura_table_regions", &[("table", "m")]),
        Some(2.0)
    );
    let regions: Vec<_> = before
        .samples
        .iter()
        .filter(|s| s.metric == "kura_region_writes_total" && s.labels.get("table") == Some("m"))
        .collect();
    assert_eq!(regions.len(), 2, "one writes series per region");

    for i in 0..40 {
        support::put(&kura, "m", &format!("row{i:03}"), "v").await;
    }
    let after = scrape!(app);
    let total = |s: &Scrape, metric: &str| -> f64 {
        s.samples
            .iter()
            .filter(|x| x.metric == metric && x.labels.get("table") == Some("m"))
            .map(|x| match x.value {
                Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
                _ => 0.0,
            })
            .sum()
    };
    assert!(total(&after, "kura_region_writes_total") >= 40.0);
    assert!(total(&after, "kura_region_cells") >= 40.0);
    assert!(total(&after, "kura_region_log_bytes") > 0.0);
    assert!(total(&after, "kura_region_fsyncs_total") >= 1.0);
    assert!(total(&after, "kura_region_synced_writes_total") >= 40.0);
    for metric in [
        "kura_region_bytes",
        "kura_region_memtable_bytes",
        "kura_region_segments",
        "kura_region_reference_segments",
        "kura_region_reads_total",
        "kura_region_flushes_total",
        "kura_region_compactions_total",
        "kura_region_group_commit_batch_avg",
        "kura_table_splits_total",
        "kura_scanners_open",
    ] {
        assert!(
            after.samples.iter().any(|s| s.metric == metric),
            "{metric} is exposed"
        );
    }
}

#[actix_web::test]
async fn splits_are_counted_per_table() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "s", 16, 1).await;
    let app = ops_app!(kura);
    assert_eq!(
        value(&scrape!(app), "kura_table_splits_total", &[("table", "s")]),
        Some(0.0)
    );
    let region = kura.regions("s").await.expect("regions")[0].id;
    let res = call_service(
        &app,
        TestRequest::post()
            .uri(&format!("/admin/tables/s/regions/{region}/split"))
            .to_request(),
    )
    .await;
    assert_eq!(res.status(), 200);
    let after = scrape!(app);
    assert_eq!(
        value(&after, "kura_table_splits_total", &[("table", "s")]),
        Some(1.0)
    );
    assert_eq!(
        value(&after, "kura_table_regions", &[("table", "s")]),
        Some(2.0)
    );
}

#[actix_web::test]
async fn scanner_gauge_counts_open_rest_scanners() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "sc", 16, 1).await;
    let app = ops_app!(kura);
    assert_eq!(value(&scrape!(app), "kura_scanners_open", &[]), Some(0.0));
    let res = call_service(
        &app,
        TestRequest::put()
            .uri("/sc/scanner")
            .insert_header(("Content-Type", "application/json"))
            .set_payload(r#"{"batch": 10}"#)
            .to_request(),
    )
    .await;
    assert_eq!(res.status(), 201);
    let location = res
        .headers()
        .get("location")
        .expect("location")
        .to_str()
        .expect("ascii");
    let path = format!(
        "/{}",
        location
            .splitn(4, '/')
            .nth(3)
            .expect("path of the location")
    );
    assert_eq!(value(&scrape!(app), "kura_scanners_open", &[]), Some(1.0));
    let res = call_service(&app, TestRequest::delete().uri(&path).to_request()).await;
    assert_eq!(res.status(), 200);
    assert_eq!(value(&scrape!(app), "kura_scanners_open", &[]), Some(0.0));
}

#[actix_web::test]
async fn rest_requests_are_counted_by_endpoint_kind_and_operation() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "r", 16, 1).await;
    let app = ops_app!(kura);
    let before = scrape!(app);
    let count = |s: &Scrape, endpoint: &str, op: &str| {
        value(
            s,
            "kura_http_requests_total",
            &[("endpoint", endpoint), ("op", op), ("status", "2xx")],
        )
        .unwrap_or(0.0)
    };
    // row1, cf:a = v1, in the HBase REST JSON CellSet form.
    let body = r#"{"Row":[{"key":"cm93MQ==","Cell":[{"column":"Y2Y6YQ==","$":"djE="}]}]}"#;
    let res = call_service(
        &app,
        TestRequest::put()
            .uri("/r/row1")
            .insert_header(("Content-Type", "application/json"))
            .set_payload(body)
            .to_request(),
    )
    .await;
    assert_eq!(res.status(), 200);
    for uri in ["/r/row1", "/r/*?limit=10"] {
        let req = TestRequest::get()
            .uri(uri)
            .insert_header(("Accept", "application/json"));
        let res = call_service(&app, req.to_request()).await;
        assert_eq!(res.status(), 200, "{uri}");
        let _ = read_body(res).await;
    }
    let after = scrape!(app);
    for (endpoint, op) in [("row", "put"), ("row", "get"), ("scan", "scan")] {
        assert!(
            count(&after, endpoint, op) >= count(&before, endpoint, op) + 1.0,
            "{endpoint}/{op} moved"
        );
    }
    // Label values come from the fixed sets, never from raw paths.
    for s in after
        .samples
        .iter()
        .filter(|s| s.metric.starts_with("kura_http_"))
    {
        if let Some(e) = s.labels.get("endpoint") {
            assert!(
                kura::ops::metrics::ENDPOINTS.contains(&e),
                "endpoint label {e}"
            );
        }
        if let Some(o) = s.labels.get("op") {
            assert!(kura::ops::metrics::OPS.contains(&o), "op label {o}");
        }
    }
}
