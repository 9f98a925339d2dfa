//! Two servers in one process share nothing of their operations state: each counts its own
//! requests and admin operations in `/metrics`, and each has its own shutting-down flag.

#[macro_use]
mod support;

use actix_web::test::{call_service, read_body, TestRequest};
use prometheus_parse::{Scrape, Value};

/// The value of the `metric` series carrying `labels`, if that series is on the page.
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .and_then(|s| match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(v),
            _ => None,
        })
}

macro_rules! scrape {
    ($app:expr) => {{
        let res = call_service(&$app, TestRequest::get().uri("/metrics").to_request()).await;
        assert_eq!(res.status(), 200);
        let body = read_body(res).await;
        let text = std::str::from_utf8(&body)
            .expect("utf-8 metrics")
            .to_string();
        Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parse /metrics")
    }};
}

const HEALTHZ_OK: [(&str, &str); 3] = [("endpoint", "healthz"), ("op", "get"), ("status", "2xx")];

#[actix_web::test]
async fn requests_counted_on_one_server_do_not_show_on_another() {
    let (kura, _dir) = support::start_kura().await;
    support::create_table(&kura, "t", 16, 1).await;
    // Both servers serve the same store, as two servers of one process do.
    let one = ops_app!(kura);
    let other = ops_app!(kura);
    for _ in 0..5 {
        let res = call_service(&one, TestRequest::get().uri("/healthz").to_request()).await;
        assert_eq!(res.status(), 200);
    }
    let res = call_service(
        &one,
        TestRequest::post()
            .uri("/admin/tables/t/flush")
            .to_request(),
    )
    .await;
    assert_eq!(res.status(), 200);

    let on_one = scrape!(one);
    assert_eq!(
        value(&on_one, "kura_http_requests_total", &HEALTHZ_OK),
        Some(5.0)
    );
    let flushes = [("op", "flush"), ("result", "ok")];
    assert_eq!(
        value(&on_one, "kura_admin_operations_total", &flushes),
        Some(1.0)
    );

    let on_other = scrape!(other);
    assert_eq!(
        value(&on_other, "kura_http_requests_total", &HEALTHZ_OK),
        None,
        "the other server answered no /healthz"
    );
    assert_eq!(
        value(&on_other, "kura_admin_operations_total", &flushes),
        Some(0.0)
    );
    // Its only request so far is this scrape, counted once the answer is ready.
    let metrics_ok = [("endpoint", "metrics"), ("op", "get"), ("status", "2xx")];
    assert_eq!(
        value(&scrape!(other), "kura_http_requests_total", &metrics_ok),
        Some(1.0)
    );
    // The store is shared: both report its regions.
    assert_eq!(
        value(&on_other, "kura_table_regions", &[("table", "t")]),
        value(&on_one, "kura_table_regions", &[("table", "t")])
    );
}

#[actix_web::test]
async fn one_server_shutting_down_leaves_the_other_ready() {
    let (kura, _dir) = support::start_kura().await;
    let closing = support::state(&kura);
    let ops = std::sync::Arc::clone(&closing.ops);
    let closing = ops_app!(closing, state);
    let staying = ops_app!(kura);
    ops.begin_shutdown();
    let res = call_service(&closing, TestRequest::get().uri("/healthz").to_request()).await;
    assert_eq!(res.status(), 503);
    assert_eq!(read_body(res).await, "shutting down");
    let res = call_service(&staying, TestRequest::get().uri("/healthz").to_request()).await;
    assert_eq!(res.status(), 200);
    assert_eq!(read_body(res).await, "ok");
}

#[actix_web::test]
async fn a_published_state_shares_the_operations_state_of_its_source() {
    let (kura, _dir) = support::start_kura().await;
    let source = kura::state::StateSource::pending();
    let earlier = kura::state::StateSource::pending();
    source.set(kura::state::AppState::new(
        kura.clone().into(),
        kura::state::Limits::default(),
    ));
    let state = source.get().expect("state set");
    assert!(std::sync::Arc::ptr_eq(&state.ops, source.ops()));
    assert!(!std::sync::Arc::ptr_eq(&state.ops, earlier.ops()));
    source.ops().begin_shutdown();
    assert!(state.ops.is_shutting_down());
    assert!(!earlier.ops().is_shutting_down());
}
