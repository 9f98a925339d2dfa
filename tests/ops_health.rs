//! `/healthz` as a load balancer reads it: ready means every region has opened (its log
//! replayed), and a server that has begun to shut down says so with 503.

#[macro_use]
mod support;
mod server_harness;

use server_harness::{create_table, Server};

/// The value of an unlabelled metric, or the largest of a labelled one, in a `/metrics` text.
fn metric_max(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(f64::NAN, f64::max)
}

#[test]
fn the_server_answers_only_once_every_region_has_replayed_its_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    // No fsync per write (a slow CI disk): a kill -9 keeps the page cache, so the logs are
    // replayed all the same.
    let mut server = Server::start(dir.path(), &["--durability", "none"]);
    let mut http = server.client();
    create_table(&mut http, "t", &["cf"]);
    let value = "v".repeat(1000);
    for i in 0..12_000 {
        let r = http
            .request(
                "PUT",
                &format!("/t/row{i:05}/cf:a"),
                &[("Content-Type", "application/octet-stream")],
                value.as_bytes(),
            )
            .expect("put");
        assert_eq!(r.status, 200);
    }
    drop(http);
    // kill -9: the next start replays the logs. `restart` returns once `/healthz` answers.
    server.kill();
    server.restart();
    let metrics = server
        .client()
        .request("GET", "/metrics", &[], b"")
        .expect("metrics")
        .text();
    let startup = metrics_value(&metrics, "kura_startup_seconds");
    let replay = metric_max(&metrics, "kura_region_recovery_seconds");
    assert!(replay > 0.0, "{metrics}");
    assert!(
        startup >= replay,
        "ready after {startup} s, but a region took {replay} s to open"
    );
}

fn metrics_value(text: &str, name: &str) -> f64 {
    let v = metric_max(text, name);
    assert!(!v.is_nan(), "no {name} in the metrics");
    v
}

#[actix_web::test]
async fn healthz_answers_503_once_the_server_is_shutting_down() {
    use actix_web::test;
    let (kura, _dir) = support::start_kura().await;
    let state = support::state(&kura);
    let ops = std::sync::Arc::clone(&state.ops);
    let app = ops_app!(state, state);
    let resp =
        test::call_service(&app, test::TestRequest::get().uri("/healthz").to_request()).await;
    assert_eq!(resp.status(), 200);
    ops.begin_shutdown();
    let resp =
        test::call_service(&app, test::TestRequest::get().uri("/healthz").to_request()).await;
    assert_eq!(resp.status(), 503);
    assert_eq!(test::read_body(resp).await, "shutting down");
}
