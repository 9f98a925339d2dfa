//! The server's limits hold for the applications as for the HBase REST API (RELIABILITY.md
//! "Limits"): a value the applications would store as a cell over `--max-value` is a 413 that
//! writes nothing (so what they store stays readable and writable through the REST API), and a
//! declared `Content-Length` over `--max-body` is a 413 before any of the body is read.

mod support;

use actix_web::{test, web, App};
use kura::state::{AppState, Limits};
use serde_json::{json, Value};
use support::{assert_error, delete, get, patch, post, read, store};

/// A cell limit small enough to test without megabytes.
const MAX_VALUE: usize = 1000;

fn limits() -> Limits {
    Limits {
        max_value: MAX_VALUE,
        ..Limits::default()
    }
}

macro_rules! small_app {
    ($kura:expr) => {
        test::init_service(
            App::new()
                .app_data(web::Data::new(AppState::new(
                    $kura.clone().into(),
                    limits(),
                )))
                .configure(kura::configure),
        )
        .await
    };
}

macro_rules! call {
    ($app:expr, $req:expr) => {
        read(test::call_service($app, $req.to_request()).await).await
    };
}

fn text(n: usize) -> String {
    "x".repeat(n)
}

#[actix_web::test]
async fn every_application_refuses_a_value_over_the_cell_limit_with_413_and_writes_nothing() {
    let s = store().await;
    let app = small_app!(s.kura);

    // Actions: the name is the cell; exactly at the limit works.
    let (st, body) = call!(
        &app,
        post(
            "/apps/actions/users/1",
            json!({"name": text(MAX_VALUE + 1)})
        )
    );
    assert_error(st, &body, 413);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("1000 bytes"));
    let (st, _) = call!(&app, get("/apps/actions/users/1"));
    assert_eq!(st, 200);
    let (st, _) = call!(
        &app,
        post("/apps/actions/users/1", json!({"name": text(MAX_VALUE)}))
    );
    assert_eq!(st, 201);
    let (_, list) = call!(&app, get("/apps/actions/users/1"));
    assert_eq!(list["actions"].as_array().map(Vec::len), Some(1), "{list}");

    // Blog: the article (stored as one JSON cell, three times).
    let (st, body) = call!(
        &app,
        post(
            "/apps/blog/users/2/articles",
            json!({"title": "t", "content": text(MAX_VALUE)})
        )
    );
    assert_error(st, &body, 413);
    let (_, list) = call!(&app, get("/apps/blog/users/2/articles"));
    assert_eq!(list["articles"], json!([]));
    let (st, article) = call!(
        &app,
        post(
            "/apps/blog/users/2/articles",
            json!({"title": "t", "content": "short"})
        )
    );
    assert_eq!(st, 201, "{article}");
    let uri = format!("/apps/blog/users/2/articles/{}", article["article_id"]);
    let (st, body) = call!(&app, patch(&uri, json!({"content": text(MAX_VALUE)})));
    assert_error(st, &body, 413);
    let (_, now) = call!(&app, get(&uri));
    assert_eq!(now["content"], "short");

    // Graph: a node's and a relationship's properties, also when a PATCH grows them.
    let props = |n: usize| json!({"p": text(n)});
    let (st, body) = call!(
        &app,
        post(
            "/apps/graph/nodes",
            json!({"id": "big", "properties": props(MAX_VALUE)})
        )
    );
    assert_error(st, &body, 413);
    let (st, _) = call!(&app, get("/apps/graph/nodes/big"));
    assert_eq!(st, 404);
    for id in ["a", "b"] {
        let (st, _) = call!(
            &app,
            post(
                "/apps/graph/nodes",
                json!({"id": id, "properties": props(600)})
            )
        );
        assert_eq!(st, 201);
    }
    let (st, body) = call!(
        &app,
        patch("/apps/graph/nodes/a", json!({"put": {"q": text(600)}}))
    );
    assert_error(st, &body, 413);
    let (_, node) = call!(&app, get("/apps/graph/nodes/a"));
    assert_eq!(node["properties"], props(600));
    let rel = |p: Value| json!({"start": "a", "type": "t", "end": "b", "properties": p});
    let (st, body) = call!(
        &app,
        post("/apps/graph/relationships", rel(props(MAX_VALUE)))
    );
    assert_error(st, &body, 413);
    let (st, _) = call!(&app, post("/apps/graph/relationships", rel(props(600))));
    assert_eq!(st, 201);
    let rel_uri = "/apps/graph/relationships/a/t/b";
    let (st, body) = call!(&app, patch(rel_uri, json!({"put": {"q": text(600)}})));
    assert_error(st, &body, 413);
    let (_, r) = call!(&app, get(rel_uri));
    assert_eq!(r["properties"], props(600));
    let (st, _) = call!(&app, delete(rel_uri));
    assert_eq!(st, 204);
}

#[actix_web::test]
async fn a_declared_body_over_the_limit_is_413_before_it_is_read() {
    let s = store().await;
    let app = small_app!(s.kura);
    for uri in [
        "/apps/graph/nodes",
        "/apps/blog/users/1/articles",
        "/apps/actions/users/1",
        "/apps/counter/hits",
    ] {
        // The body never comes: without the check the request would wait for it.
        let req = test::TestRequest::post()
            .uri(uri)
            .insert_header(("content-type", "application/json"))
            .set_payload("{}")
            .insert_header(("content-length", (16u64 << 20) + 1));
        let (st, body) = read(test::call_service(&app, req.to_request()).await).await;
        assert_error(st, &body, 413);
    }
}
