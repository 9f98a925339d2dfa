//! `Idempotency-Key` on the applications' writes (`src/apps/idempotency.rs`): a retry with the
//! same key gets the first answer (status and body) and applies nothing again; a write of
//! several rows is deduplicated as a whole. Across kill -9: `tests/crash_apps_idempotency.rs`.

mod support;

use actix_web::test::TestRequest;
use serde_json::{json, Value};
use support::*;

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

#[actix_web::test]
async fn retried_graph_writes_apply_once_and_answer_the_first_answer() {
    let s = store().await;
    let app = app!(s.kura);
    for id in ["a", "b"] {
        let first = call!(
            &app,
            keyed(post("/apps/graph/nodes", json!({"id": id})), id)
        );
        assert_eq!(first.0, 201, "{}", first.1);
        let again = call!(
            &app,
            keyed(post("/apps/graph/nodes", json!({"id": id})), id)
        );
        assert_eq!(again, first, "a retried node create is 201 again, not 409");
    }
    let unkeyed = call!(&app, post("/apps/graph/nodes", json!({"id": "a"})));
    assert_eq!(unkeyed.0, 409);
    let rel = json!({"start": "a", "type": "knows", "end": "b", "properties": {"w": "1"}});
    let first = call!(
        &app,
        keyed(post("/apps/graph/relationships", rel.clone()), "r")
    );
    assert_eq!(first.0, 201, "{}", first.1);
    let again = call!(&app, keyed(post("/apps/graph/relationships", rel), "r"));
    assert_eq!(again, first);
    let uri = "/apps/graph/relationships/a/knows/b";
    let patched = call!(&app, keyed(patch(uri, json!({"put": {"w": "2"}})), "p"));
    assert_eq!(patched.0, 200, "{}", patched.1);
    let again = call!(&app, keyed(patch(uri, json!({"put": {"w": "3"}})), "p"));
    assert_eq!(again, patched, "the first answer, not a second update");
    let (_, out) = call!(
        &app,
        get("/apps/graph/nodes/a/relationships?type=knows&direction=outgoing")
    );
    assert_eq!(out["relationships"], json!([patched.1.clone()]));
    let node_patch = call!(
        &app,
        keyed(
            patch("/apps/graph/nodes/b", json!({"put": {"x": "y"}})),
            "np"
        )
    );
    let again = call!(
        &app,
        keyed(
            patch("/apps/graph/nodes/b", json!({"put": {"x": "z"}})),
            "np"
        )
    );
    assert_eq!(again, node_patch);
    let gone = call!(&app, keyed(delete(uri), "dr"));
    assert_eq!(gone.0, 204);
    let again = call!(&app, keyed(delete(uri), "dr"));
    assert_eq!(again.0, 204, "{}", again.1);
    assert_eq!(call!(&app, delete(uri)).0, 404);
    let gone = call!(
        &app,
        keyed(delete("/apps/graph/nodes/a?cascade=true"), "dn")
    );
    assert_eq!(gone.0, 204);
    let again = call!(
        &app,
        keyed(delete("/apps/graph/nodes/a?cascade=true"), "dn")
    );
    assert_eq!(again.0, 204);
    assert_eq!(call!(&app, get("/apps/graph/nodes/a")).0, 404);
    let (_, inc) = call!(
        &app,
        get("/apps/graph/nodes/b/relationships?type=knows&direction=incoming")
    );
    assert_eq!(inc["relationships"], json!([]));
}

/// The state a crash leaves between a keyed create's first row and the rest: the user's
/// sequence row holds id 1 and the record (not done), and no article row or list row exists.
/// The retry completes the create from the record: the same answer, the article in both
/// lists, and the sequence continues at 2.
#[actix_web::test]
async fn a_retry_after_a_crash_between_rows_completes_the_create_once() {
    let s = store().await;
    let app = app!(s.kura);
    let (status, _) = call!(&app, get("/apps/blog/users/5/articles"));
    assert_eq!(status, 200, "the table exists");
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64;
    let article = json!({"article_id": 1, "user_id": 5, "user_name": "", "title": "t",
        "content": "c", "category_id": 2, "category_name": "", "post_at": ts, "update_at": ts});
    // The sequence row as `src/apps/blog.rs` lays it out: P(u) | 0x03, `d:""` = last id.
    let mut row = kura::apps::keys::hash4_u64(5).to_vec();
    row.extend_from_slice(&5u64.to_be_bytes());
    row.push(0x03);
    let record = json!({"status": 201, "body": article.to_string(), "done": false});
    s.kura
        .mutate(
            "blog",
            kura_backend::RowMutation {
                row,
                mutations: vec![
                    kura_backend::Mutation::Put {
                        family: b"d".to_vec(),
                        qualifier: Vec::new(),
                        timestamp: Some(ts),
                        value: 1u64.to_be_bytes().to_vec(),
                    },
                    kura_backend::Mutation::Put {
                        family: b"i".to_vec(),
                        qualifier: b"crash".to_vec(),
                        timestamp: Some(ts + 1),
                        value: record.to_string().into_bytes(),
                    },
                ],
            },
        )
        .await
        .expect("the first row of the create");
    assert_eq!(call!(&app, get("/apps/blog/users/5/articles/1")).0, 404);
    let body = json!({"title": "t", "content": "c", "category_id": 2});
    for _ in 0..2 {
        let (status, got) = call!(
            &app,
            keyed(post("/apps/blog/users/5/articles", body.clone()), "crash")
        );
        assert_eq!((status, &got), (201, &article));
    }
    assert_eq!(call!(&app, get("/apps/blog/users/5/articles/1")).1, article);
    for uri in [
        "/apps/blog/users/5/articles",
        "/apps/blog/users/5/articles?category_id=2",
    ] {
        let (_, list) = call!(&app, get(uri));
        assert_eq!(list["articles"], json!([article.clone()]), "{uri}");
    }
    let (_, next) = call!(&app, post("/apps/blog/users/5/articles", body));
    assert_eq!(next["article_id"], 2);
}
