//! Request bodies of the applications: a field the contract does not define (a typo, a field
//! of another endpoint) is a 400 that names it, and changes nothing, instead of being dropped
//! while the request succeeds without what the client meant.

mod apps_support;

use apps_support::*;
use serde_json::json;

#[actix_web::test]
async fn an_unknown_body_field_is_a_400_that_names_it_and_changes_nothing() {
    let s = store().await;
    let app = app!(s.kura);
    let (st, article) = call!(
        &app,
        post(
            "/apps/blog/users/1/articles",
            json!({"title": "t", "content": "c"})
        )
    );
    assert_eq!(st, 201, "{article}");
    for (st, _) in [
        call!(&app, post("/apps/graph/nodes", json!({"id": "a"}))),
        call!(&app, post("/apps/graph/nodes", json!({"id": "b"}))),
        call!(
            &app,
            post(
                "/apps/graph/relationships",
                json!({"start": "a", "type": "t", "end": "b"})
            )
        ),
    ] {
        assert_eq!(st, 201);
    }
    let article_uri = format!("/apps/blog/users/1/articles/{}", article["article_id"]);
    let cases = [
        (
            post(
                "/apps/blog/users/1/articles",
                json!({"title": "t", "content": "c", "categoryId": 3}),
            ),
            "categoryId",
        ),
        (patch(&article_uri, json!({"titel": "typo"})), "titel"),
        (
            patch(&article_uri, json!({"category_id": 5})),
            "category_id",
        ),
        (
            post("/apps/actions/users/1", json!({"name": "n", "time": 5})),
            "time",
        ),
        (
            post(
                "/apps/counter/hits",
                json!({"url": "http://a.jp/", "count": 2}),
            ),
            "count",
        ),
        (
            post("/apps/graph/nodes", json!({"id": "c", "props": {"k": "v"}})),
            "props",
        ),
        (
            post(
                "/apps/graph/relationships",
                json!({"start": "a", "type": "u", "end": "b", "direction": "in"}),
            ),
            "direction",
        ),
        (
            patch("/apps/graph/nodes/a", json!({"set": {"k": "v"}})),
            "set",
        ),
        (
            patch("/apps/graph/relationships/a/t/b", json!({"remove": ["k"]})),
            "remove",
        ),
    ];
    for (req, field) in cases {
        let (st, body) = call!(&app, req);
        assert_eq!(assert_error(st, &body, 400), "bad_request");
        let message = body["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(field), "{message}");
    }
    // Nothing changed.
    let (_, now) = call!(&app, get(&article_uri));
    assert_eq!(
        (&now["title"], &now["update_at"]),
        (&json!("t"), &article["update_at"])
    );
    let (_, list) = call!(&app, get("/apps/blog/users/1/articles"));
    assert_eq!(list["articles"].as_array().map(Vec::len), Some(1));
    let (_, actions) = call!(&app, get("/apps/actions/users/1"));
    assert_eq!(actions["actions"], json!([]));
    let (st, _) = call!(&app, get("/apps/graph/nodes/c"));
    assert_eq!(st, 404);
    let (_, node) = call!(&app, get("/apps/graph/nodes/a"));
    assert_eq!(node["properties"], json!({}));
}
