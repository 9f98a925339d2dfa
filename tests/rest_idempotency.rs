//! `Idempotency-Key` on `?check=increment|append|put|delete`: a retried request gets the first
//! answer and is applied once, also after a restart; another key applies again.

mod support;

use actix_web::http::Method;
use kura::state::Limits;
use kura_actors::storage::Durability;
use kura_actors::{Kura, KuraConfig};
use support::*;

async fn keyed(c: &Client, uri: &str, key: &str, body: &serde_json::Value) -> Resp {
    c.req(
        Method::POST,
        uri,
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json"),
            ("Idempotency-Key", key),
        ],
        body.to_string(),
    )
    .await
}

fn amount(n: i64) -> serde_json::Value {
    cellset(&[("r", &[("cf:n", None, &n.to_string())])])
}

async fn counter(c: &Client) -> i64 {
    let body = c.get("/t/r/cf:n", "").await.body;
    i64::from_be_bytes(body.as_slice().try_into().expect("8-byte counter"))
}

#[actix_web::test]
async fn a_retried_increment_answers_the_same_values_and_counts_once() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let uri = "/t/r?check=increment&rr=true";
    let first = keyed(&c, uri, "req-1", &amount(5)).await;
    assert_eq!(first.status, 200, "{}", first.text());
    for _ in 0..3 {
        let again = keyed(&c, uri, "req-1", &amount(5)).await;
        assert_eq!(again.status, first.status);
        assert_eq!(again.body, first.body, "the same new value and timestamp");
    }
    assert_eq!(counter(&c).await, 5);
    // A different key is a different request: applied again.
    let second = keyed(&c, uri, "req-2", &amount(5)).await;
    assert_eq!(second.status, 200);
    assert_eq!(
        second.json()["Row"][0]["Cell"][0]["$"],
        b64(10i64.to_be_bytes())
    );
    assert_eq!(counter(&c).await, 10);
    // Without the header nothing is deduplicated.
    for _ in 0..2 {
        let r = c.post_json("/t/r?check=increment", &amount(1)).await;
        assert_eq!(r.status, 200);
    }
    assert_eq!(counter(&c).await, 12);
}

#[actix_web::test]
async fn a_retried_append_is_applied_once() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let body = cellset(&[("r", &[("cf:log", None, "x")])]);
    let first = keyed(&c, "/t/r?check=append&rr=true", "a", &body).await;
    let again = keyed(&c, "/t/r?check=append&rr=true", "a", &body).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(again.body, first.body);
    assert_eq!(c.get("/t/r/cf:log", "").await.body, b"x");
}

#[actix_web::test]
async fn a_retried_check_and_put_answers_its_first_status() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    c.put_cell("t", "r", "cf:a", None, "old").await;
    let swap =
        |from: &str, to: &str| cellset(&[("r", &[("cf:a", None, to), ("cf:a", None, from)])]);
    // Passed once: a retry is 200 again though the value is no longer "old", and changes nothing.
    assert_eq!(
        keyed(&c, "/t/r?check=put", "p", &swap("old", "new"))
            .await
            .status,
        200
    );
    c.put_cell("t", "r", "cf:a", None, "old").await;
    assert_eq!(
        keyed(&c, "/t/r?check=put", "p", &swap("old", "new"))
            .await
            .status,
        200
    );
    assert_eq!(c.get("/t/r/cf:a", "").await.body, b"old");
    // Failed once (304): a retry is 304 though the check would pass now.
    assert_eq!(
        keyed(&c, "/t/r?check=put", "q", &swap("zzz", "new"))
            .await
            .status,
        304
    );
    c.put_cell("t", "r", "cf:a", None, "zzz").await;
    assert_eq!(
        keyed(&c, "/t/r?check=put", "q", &swap("zzz", "new"))
            .await
            .status,
        304
    );
    assert_eq!(c.get("/t/r/cf:a", "").await.body, b"zzz");
    // check=delete too.
    let del = cellset(&[("r", &[("cf:a", None, "zzz")])]);
    assert_eq!(keyed(&c, "/t/r?check=delete", "d", &del).await.status, 200);
    c.put_cell("t", "r", "cf:a", None, "zzz").await;
    assert_eq!(keyed(&c, "/t/r?check=delete", "d", &del).await.status, 200);
    assert_eq!(c.get("/t/r/cf:a", "").await.body, b"zzz");
}

#[actix_web::test]
async fn an_empty_or_oversized_key_is_a_400_and_applies_nothing() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let long = "k".repeat(257);
    let r = keyed(&c, "/t/r?check=increment", &long, &amount(1)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = keyed(&c, "/t/r?check=increment", "", &amount(1)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(c.get("/t/r/cf:n", "").await.status, 404);
    let r = keyed(&c, "/t/r?check=increment", &"k".repeat(256), &amount(1)).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[actix_web::test]
async fn keys_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        let mut config = KuraConfig::new(dir.path());
        config.arbiters = 1;
        config.default_regions = 2;
        config.durability = Durability::Sync;
        config.split_threshold = None;
        config
    };
    let uri = "/t/r?check=increment&rr=true";
    let first = {
        let kura = Kura::start(config()).await.unwrap();
        let c = client_over(&kura, Limits::default()).await;
        c.create_table("t", &["cf"], 1).await;
        let first = keyed(&c, uri, "before-restart", &amount(7)).await;
        assert_eq!(first.status, 200, "{}", first.text());
        kura.shutdown().await.unwrap();
        first
    };
    let kura = Kura::start(config()).await.unwrap();
    let c = client_over(&kura, Limits::default()).await;
    let again = keyed(&c, uri, "before-restart", &amount(7)).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body, first.body);
    assert_eq!(counter(&c).await, 7);
    kura.shutdown().await.unwrap();
}

#[actix_web::test]
async fn a_retry_after_the_configured_window_is_applied_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = KuraConfig::new(dir.path());
    config.arbiters = 1;
    config.split_threshold = None;
    config.idempotency_window = std::time::Duration::from_secs(1);
    let kura = Kura::start(config).await.unwrap();
    let c = client_over(&kura, Limits::default()).await;
    c.create_table("t", &["cf"], 1).await;
    let uri = "/t/r?check=increment&rr=true";
    assert_eq!(keyed(&c, uri, "k", &amount(3)).await.status, 200);
    assert_eq!(keyed(&c, uri, "k", &amount(3)).await.status, 200);
    assert_eq!(counter(&c).await, 3, "within the window: applied once");
    // Past the window the key is forgotten: the same request is a new one. A sleep by
    // design: the window must expire.
    actix_web::rt::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(keyed(&c, uri, "k", &amount(3)).await.status, 200);
    assert_eq!(counter(&c).await, 6, "after the window: applied again");
    kura.shutdown().await.unwrap();
}
