//! `Idempotency-Key` on the applications' writes (`src/apps/idempotency.rs`): a retry with the
//! same key gets the first answer (status and body) and applies nothing again; a write of
//! several rows is deduplicated as a whole. Across kill -9: `tests/crash_apps_idempotency.rs`.

mod apps_support;

use actix_web::test::TestRequest;
use apps_support::*;
use serde_json::{json, Value};

/// 2024-01-02T03:04:05Z in ms.
const T0: i64 = 1_704_164_645_000;
const HOUR: i64 = 3_600_000;

fn keyed(req: TestRequest, key: &str) -> TestRequest {
    req.insert_header(("Idempotency-Key", key))
}

#[actix_web::test]
async fn a_retried_hit_counts_once() {
    let s = store().await;
    let app = app!(s.kura);
    let hit = json!({"url": "http://blog.example.co.jp/a", "at": T0});
    let first = call!(
        &app,
        keyed(post("/apps/counter/hits", hit.clone()), "hit-1")
    );
    assert_eq!(first.0, 200, "{}", first.1);
    assert_eq!(first.1["total"], 1);
    // The retry, even one whose `at` falls in the next hour, answers the first hit again.
    let later = json!({"url": "http://blog.example.co.jp/a", "at": T0 + HOUR});
    for body in [hit.clone(), later] {
        let again = call!(&app, keyed(post("/apps/counter/hits", body), "hit-1"));
        assert_eq!(again, first);
    }
    let (_, total) = call!(&app, get("/apps/counter/total?domain=example.co.jp"));
    assert_eq!(total["total"], 1, "{total}");
    // Another key is another hit.
    let (_, second) = call!(&app, keyed(post("/apps/counter/hits", hit), "hit-2"));
    assert_eq!(second["total"], 2);
}

#[actix_web::test]
async fn a_retried_article_create_returns_the_same_article_once() {
    let s = store().await;
    let app = app!(s.kura);
    let body = json!({"title": "t", "content": "c", "category_id": 3});
    let first = call!(
        &app,
        keyed(post("/apps/blog/users/7/articles", body.clone()), "a-1")
    );
    assert_eq!(first.0, 201, "{}", first.1);
    for _ in 0..3 {
        let again = call!(
            &app,
            keyed(post("/apps/blog/users/7/articles", body.clone()), "a-1")
        );
        assert_eq!(again, first, "the retry answers the first article");
    }
    for uri in [
        "/apps/blog/users/7/articles",
        "/apps/blog/users/7/articles?category_id=3",
    ] {
        let (_, list) = call!(&app, get(uri));
        assert_eq!(list["articles"], json!([first.1.clone()]), "{uri}");
    }
    // The next create (another key) gets the next id.
    let (_, next) = call!(
        &app,
        keyed(post("/apps/blog/users/7/articles", body), "a-2")
    );
    assert_eq!(next["article_id"], 2);
}

#[actix_web::test]
async fn a_retried_action_returns_the_same_action_and_stamp() {
    let s = store().await;
    let app = app!(s.kura);
    let first = call!(
        &app,
        keyed(post("/apps/actions/users/9", json!({"name": "login"})), "x")
    );
    assert_eq!(first.0, 201, "{}", first.1);
    let again = call!(
        &app,
        keyed(post("/apps/actions/users/9", json!({"name": "login"})), "x")
    );
    assert_eq!(again, first, "same id and server stamp");
    let (_, list) = call!(&app, get("/apps/actions/users/9"));
    assert_eq!(list["actions"], json!([first.1]));
}

#[actix_web::test]
async fn a_retried_patch_and_delete_apply_once() {
    let s = store().await;
    let app = app!(s.kura);
    let (_, a) = call!(
        &app,
        post(
            "/apps/blog/users/1/articles",
            json!({"title": "t", "content": "c"})
        )
    );
    let uri = format!("/apps/blog/users/1/articles/{}", a["article_id"]);
    let first = call!(&app, keyed(patch(&uri, json!({"title": "u"})), "p"));
    assert_eq!(first.0, 200, "{}", first.1);
    let again = call!(&app, keyed(patch(&uri, json!({"title": "u"})), "p"));
    assert_eq!(again, first, "the same update_at: not applied twice");
    let (_, now) = call!(&app, get(&uri));
    assert_eq!(now, first.1);
    let deleted = call!(&app, keyed(delete(&uri), "d"));
    assert_eq!(deleted.0, 204);
    let again = call!(&app, keyed(delete(&uri), "d"));
    assert_eq!(again.0, 204, "the retry answers 204 again: {}", again.1);
    let unkeyed = call!(&app, delete(&uri));
    assert_eq!(unkeyed.0, 404, "without the key it is a new request");
    let (_, list) = call!(&app, get("/apps/blog/users/1/articles"));
    assert_eq!(list["articles"], json!([]));
}

#[actix_web::test]
async fn a_key_reused_with_another_body_returns_the_first_answer() {
    // As the REST API's keys: the key names the request; its first answer is the answer.
    let s = store().await;
    let app = app!(s.kura);
    let first = call!(
        &app,
        keyed(post("/apps/actions/users/4", json!({"name": "a"})), "k")
    );
    let other = call!(
        &app,
        keyed(post("/apps/actions/users/4", json!({"name": "b"})), "k")
    );
    assert_eq!(other, first);
    let (_, list) = call!(&app, get("/apps/actions/users/4"));
    assert_eq!(list["actions"].as_array().map(Vec::len), Some(1));
}

#[actix_web::test]
async fn a_malformed_key_is_400_and_writes_nothing() {
    let s = store().await;
    let app = app!(s.kura);
    let long = "k".repeat(257);
    let (status, body) = call!(
        &app,
        keyed(
            post("/apps/counter/hits", json!({"domain": "a.jp", "path": "/"})),
            &long
        )
    );
    assert_eq!(assert_error(status, &body, 400), "bad_request");
    let (_, total) = call!(&app, get("/apps/counter/total?domain=a.jp"));
    assert_eq!(total["total"], 0, "{total}");
    let two = post("/apps/actions/users/1", json!({"name": "n"}))
        .append_header(("Idempotency-Key", "a"))
        .append_header(("Idempotency-Key", "b"));
    let (status, body) = call!(&app, two);
    assert_error(status, &body, 400);
    let (_, list) = call!(&app, get("/apps/actions/users/1"));
    assert_eq!(list["actions"], Value::Array(vec![]));
}
