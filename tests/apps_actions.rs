//! The user action log over HTTP (APPS_API.md "User action log"): order by stamp descending with
//! ties by action id, offset/limit paging as the SQL it replaces, cursor paging, errors.

mod support;

use serde_json::{json, Value};
use support::*;

fn ids(page: &Value) -> Vec<u64> {
    page["actions"]
        .as_array()
        .expect("actions array")
        .iter()
        .map(|a| a["action_id"].as_u64().expect("action_id"))
        .collect()
}

/// Posts 30 actions for user 5 with stamps `1000 + (i * 7) % 10` (so many ties), returning
/// `(action_id, stamp)` in the order the SQL `ORDER BY stamp DESC, id` gives.
macro_rules! seed {
    ($app:expr) => {{
        let mut rows = Vec::new();
        for i in 0..30u64 {
            let stamp = 1000 + (i * 7) % 10;
            let (status, a) =
                call!($app, post("/apps/actions/users/5", json!({"name": format!("a{i}"), "stamp": stamp})));
            assert_eq!(status, 201, "{a}");
            assert_eq!(a["user_id"], 5);
            assert_eq!(a["stamp"], stamp);
            assert_eq!(a["name"], format!("a{i}"));
            rows.push((a["action_id"].as_u64().expect("action_id"), stamp));
        }
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        rows
    }};
}

#[actix_web::test]
async fn actions_list_by_stamp_descending_then_action_id() {
    let s = store().await;
    let app = app!(s.kura);
    let expected = seed!(&app);
    let (status, page) = call!(&app, get("/apps/actions/users/5?limit=1000"));
    assert_eq!(status, 200);
    let got: Vec<(u64, u64)> = page["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a["action_id"].as_u64().unwrap_or(0),
                a["stamp"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(got, expected);
    assert!(page["next"].is_null());
    // ids are a per-user sequence.
    let mut all: Vec<u64> = got.iter().map(|r| r.0).collect();
    all.sort_unstable();
    assert_eq!(all, (1..=30).collect::<Vec<u64>>());
}

#[actix_web::test]
async fn offset_paging_matches_limit_offset_sql() {
    let s = store().await;
    let app = app!(s.kura);
    let expected: Vec<u64> = seed!(&app).into_iter().map(|r| r.0).collect();
    for (offset, limit) in [
        (0, 10),
        (20, 10),
        (25, 10),
        (29, 1),
        (30, 5),
        (100, 10),
        (3, 7),
    ] {
        let (status, page) = call!(
            &app,
            get(&format!(
                "/apps/actions/users/5?offset={offset}&limit={limit}"
            ))
        );
        assert_eq!(status, 200);
        let want: Vec<u64> = expected.iter().copied().skip(offset).take(limit).collect();
        assert_eq!(ids(&page), want, "offset {offset} limit {limit}");
    }
    let (_, default) = call!(&app, get("/apps/actions/users/5"));
    assert_eq!(
        ids(&default),
        expected[..10].to_vec(),
        "limit defaults to 10"
    );
}

#[actix_web::test]
async fn cursor_paging_walks_every_action_once() {
    let s = store().await;
    let app = app!(s.kura);
    let expected: Vec<u64> = seed!(&app).into_iter().map(|r| r.0).collect();
    let mut got = Vec::new();
    let mut uri = "/apps/actions/users/5?limit=4".to_string();
    loop {
        let (status, page) = call!(&app, get(&uri));
        assert_eq!(status, 200);
        got.extend(ids(&page));
        match page["next"].as_str() {
            Some(c) => uri = format!("/apps/actions/users/5?limit=4&after={c}"),
            None => break,
        }
    }
    assert_eq!(got, expected);
    // A cursor combined with an offset skips from the cursor.
    let (_, first) = call!(&app, get("/apps/actions/users/5?limit=5"));
    let c = first["next"].as_str().expect("next").to_string();
    let (_, skipped) = call!(
        &app,
        get(&format!("/apps/actions/users/5?limit=3&offset=2&after={c}"))
    );
    assert_eq!(ids(&skipped), expected[7..10].to_vec());
}

#[actix_web::test]
async fn stamp_defaults_to_now_and_other_users_are_separate() {
    let s = store().await;
    let app = app!(s.kura);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let (status, a) = call!(
        &app,
        post("/apps/actions/users/8", json!({"name": "login"}))
    );
    assert_eq!(status, 201);
    assert!(a["stamp"].as_u64().unwrap_or(0) >= before);
    for i in 0..5 {
        call!(
            &app,
            post("/apps/actions/users/8", json!({"name": format!("n{i}")}))
        );
    }
    let (_, page) = call!(&app, get("/apps/actions/users/8"));
    assert_eq!(
        ids(&page),
        vec![6, 5, 4, 3, 2, 1],
        "server stamps are unique: newest first"
    );
    let (_, none) = call!(&app, get("/apps/actions/users/9"));
    assert_eq!(ids(&none), Vec::<u64>::new());
    assert!(none["next"].is_null());
}

#[actix_web::test]
async fn bad_input_is_a_400_with_the_error_body() {
    let s = store().await;
    let app = app!(s.kura);
    let bad = [
        get("/apps/actions/users/5?limit=0"),
        get("/apps/actions/users/5?limit=1001"),
        get("/apps/actions/users/5?offset=-1"),
        get("/apps/actions/users/5?offset=x"),
        get("/apps/actions/users/5?after=bad!"),
        get("/apps/actions/users/-5"),
        post("/apps/actions/users/5", json!({})),
        post("/apps/actions/users/5", json!({"name": 1})),
        post("/apps/actions/users/5", json!({"name": "n", "stamp": -3})),
        // Past 9999-12-31T23:59:59.999Z: not a time a client means.
        post(
            "/apps/actions/users/5",
            json!({"name": "n", "stamp": 253_402_300_800_000u64}),
        ),
        post(
            "/apps/actions/users/5",
            json!({"name": "n", "stamp": u64::MAX}),
        ),
        post(
            "/apps/actions/users/5",
            json!({"name": "n", "stamp": "now"}),
        ),
        post_raw("/apps/actions/users/5", "nope"),
    ];
    for req in bad {
        let (status, body) = call!(&app, req);
        assert_eq!(assert_error(status, &body, 400), "bad_request");
    }
    let (_, list) = call!(&app, get("/apps/actions/users/5"));
    assert_eq!(list["actions"], json!([]), "{list}");
    let (status, a) = call!(
        &app,
        post(
            "/apps/actions/users/5",
            json!({"name": "n", "stamp": 253_402_300_799_999u64})
        )
    );
    assert_eq!(status, 201, "{a}");
}
