//! The blog over HTTP (APPS_API.md "Blog"): create, get, the main and category lists in order,
//! keyset paging without skips or repeats, update in place, delete from both lists, errors.

mod support;

use serde_json::{json, Value};
use support::*;

fn ids(page: &Value) -> Vec<u64> {
    page["articles"]
        .as_array()
        .expect("articles array")
        .iter()
        .map(|a| a["article_id"].as_u64().expect("article_id"))
        .collect()
}

/// Walks a list with `after` until `next` is null; returns every article id in order.
macro_rules! walk {
    ($app:expr, $base:expr) => {{
        let mut all: Vec<u64> = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let sep = if $base.contains('?') { '&' } else { '?' };
            let uri = match &after {
                None => $base.to_string(),
                Some(c) => format!("{}{}after={}", $base, sep, c),
            };
            let (status, page) = call!($app, get(&uri));
            assert_eq!(status, 200, "{page}");
            all.extend(ids(&page));
            match page["next"].as_str() {
                Some(c) => after = Some(c.to_string()),
                None => {
                    assert!(page["next"].is_null());
                    break;
                }
            }
        }
        all
    }};
}

#[actix_web::test]
async fn articles_get_increasing_ids_and_list_newest_first() {
    let s = store().await;
    let app = app!(s.kura);
    let mut created = Vec::new();
    for i in 0..5 {
        let (status, a) = call!(
            &app,
            post(
                "/apps/blog/users/42/articles",
                json!({"title": format!("t{i}"), "content": "c", "user_name": "joe",
                       "category_id": 3, "category_name": "news"})
            )
        );
        assert_eq!(status, 201, "{a}");
        assert_eq!(a["user_id"], 42);
        assert_eq!(a["user_name"], "joe");
        assert_eq!(a["category_name"], "news");
        assert_eq!(a["post_at"], a["update_at"]);
        created.push(a);
    }
    let created_ids: Vec<u64> = created
        .iter()
        .map(|a| a["article_id"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(
        created_ids,
        vec![1, 2, 3, 4, 5],
        "ids come from a per-user counter"
    );

    let (status, page) = call!(&app, get("/apps/blog/users/42/articles"));
    assert_eq!(status, 200);
    assert_eq!(ids(&page), vec![5, 4, 3, 2, 1]);
    assert!(page["next"].is_null());
    let posts: Vec<i64> = page["articles"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a["post_at"].as_i64().unwrap_or(0))
        .collect();
    assert!(
        posts.windows(2).all(|w| w[0] >= w[1]),
        "post_at descending: {posts:?}"
    );

    let (status, one) = call!(&app, get("/apps/blog/users/42/articles/3"));
    assert_eq!(status, 200);
    assert_eq!(one, created[2]);

    // Another user's ids start at 1 and their list is separate.
    let (_, other) = call!(
        &app,
        post(
            "/apps/blog/users/7/articles",
            json!({"title": "x", "content": "y"})
        )
    );
    assert_eq!(other["article_id"], 1);
    assert_eq!(other["category_id"], 0);
    let (_, page7) = call!(&app, get("/apps/blog/users/7/articles"));
    assert_eq!(ids(&page7), vec![1]);
}

#[actix_web::test]
async fn paging_walks_every_article_once_in_both_lists() {
    let s = store().await;
    let app = app!(s.kura);
    for i in 0..53u32 {
        let (status, _) = call!(
            &app,
            post(
                "/apps/blog/users/9/articles",
                json!({"title": "t", "content": "c", "category_id": i % 3})
            )
        );
        assert_eq!(status, 201);
    }
    let all = walk!(&app, "/apps/blog/users/9/articles?limit=7");
    assert_eq!(all, (1..=53).rev().collect::<Vec<u64>>());

    let cat1 = walk!(&app, "/apps/blog/users/9/articles?category_id=1&limit=4");
    let expected: Vec<u64> = (1..=53u64).rev().filter(|id| (id - 1) % 3 == 1).collect();
    assert_eq!(cat1, expected);

    let (_, full) = call!(&app, get("/apps/blog/users/9/articles?limit=53"));
    assert_eq!(ids(&full).len(), 53);
    assert!(
        full["next"].is_null(),
        "an exactly full last page has no next"
    );

    let (_, empty) = call!(&app, get("/apps/blog/users/9/articles?category_id=99"));
    assert_eq!(ids(&empty), Vec::<u64>::new());
    assert!(empty["next"].is_null());
}

#[actix_web::test]
async fn update_keeps_the_place_in_both_lists_and_moves_update_at() {
    let s = store().await;
    let app = app!(s.kura);
    for _ in 0..3 {
        call!(
            &app,
            post(
                "/apps/blog/users/1/articles",
                json!({"title": "old", "content": "c", "category_id": 5})
            )
        );
    }
    let (status, a) = call!(
        &app,
        patch("/apps/blog/users/1/articles/2", json!({"title": "new"}))
    );
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["title"], "new");
    assert_eq!(a["content"], "c");
    assert!(a["update_at"].as_i64() > a["post_at"].as_i64());

    for uri in [
        "/apps/blog/users/1/articles",
        "/apps/blog/users/1/articles?category_id=5",
    ] {
        let (_, page) = call!(&app, get(uri));
        assert_eq!(ids(&page), vec![3, 2, 1], "{uri}");
        assert_eq!(page["articles"][1], a, "{uri} shows the updated article");
    }
    let (_, got) = call!(&app, get("/apps/blog/users/1/articles/2"));
    assert_eq!(got, a);
}

#[actix_web::test]
async fn delete_removes_from_both_lists_and_then_is_404() {
    let s = store().await;
    let app = app!(s.kura);
    for _ in 0..3 {
        call!(
            &app,
            post(
                "/apps/blog/users/1/articles",
                json!({"title": "t", "content": "c", "category_id": 2})
            )
        );
    }
    let (status, body) = call!(&app, delete("/apps/blog/users/1/articles/2"));
    assert_eq!(status, 204);
    assert!(body.is_null());
    for uri in [
        "/apps/blog/users/1/articles",
        "/apps/blog/users/1/articles?category_id=2",
    ] {
        let (_, page) = call!(&app, get(uri));
        assert_eq!(ids(&page), vec![3, 1], "{uri}");
    }
    let (status, body) = call!(&app, get("/apps/blog/users/1/articles/2"));
    assert_error(status, &body, 404);
    let (status, body) = call!(&app, delete("/apps/blog/users/1/articles/2"));
    assert_error(status, &body, 404);
    let (status, body) = call!(
        &app,
        patch("/apps/blog/users/1/articles/2", json!({"title": "x"}))
    );
    assert_error(status, &body, 404);
}

#[actix_web::test]
async fn a_list_request_reads_one_salt_bucket() {
    let s = store().await;
    let app = app!(s.kura);
    for _ in 0..20 {
        call!(
            &app,
            post(
                "/apps/blog/users/12345/articles",
                json!({"title": "t", "content": "c"})
            )
        );
    }
    if s.held.on_bigtable() {
        // Documented difference: Bigtable has no salt buckets to count (its tablets split by
        // key range), so there is no per-bucket activity to show.
        assert!(s.kura.bucket_activity("blog").is_none());
        return;
    }
    let before = s.kura.bucket_activity("blog").expect("blog table exists");
    let (_, page) = call!(&app, get("/apps/blog/users/12345/articles?limit=15"));
    assert_eq!(ids(&page).len(), 15);
    let after = s.kura.bucket_activity("blog").expect("blog table exists");
    assert_eq!(
        buckets_read(&before, &after).len(),
        1,
        "one user's list lives in one bucket"
    );
}

#[actix_web::test]
async fn bad_input_is_a_400_with_the_error_body() {
    let s = store().await;
    let app = app!(s.kura);
    call!(
        &app,
        post(
            "/apps/blog/users/1/articles",
            json!({"title": "t", "content": "c"})
        )
    );
    let bad = [
        get("/apps/blog/users/1/articles?limit=0"),
        get("/apps/blog/users/1/articles?limit=1001"),
        get("/apps/blog/users/1/articles?limit=ten"),
        get("/apps/blog/users/1/articles?after=%%%"),
        get("/apps/blog/users/1/articles?after=AAAA"),
        get("/apps/blog/users/1/articles?category_id=-1"),
        get("/apps/blog/users/abc/articles"),
        get("/apps/blog/users/1/articles/xyz"),
        post(
            "/apps/blog/users/1/articles",
            json!({"title": "missing content"}),
        ),
        post(
            "/apps/blog/users/1/articles",
            json!({"title": 5, "content": "c"}),
        ),
        post(
            "/apps/blog/users/1/articles",
            json!({"title": "t", "content": "c", "category_id": "x"}),
        ),
        post("/apps/blog/users/1/articles", json!([1, 2])),
        post_raw("/apps/blog/users/1/articles", "{not json"),
        post_raw("/apps/blog/users/1/articles", ""),
        patch("/apps/blog/users/1/articles/1", json!({"title": false})),
    ];
    for req in bad {
        let (status, body) = call!(&app, req);
        assert_eq!(assert_error(status, &body, 400), "bad_request");
    }
    // A cursor from another user's list is not a position in this one.
    call!(
        &app,
        post(
            "/apps/blog/users/2/articles",
            json!({"title": "t", "content": "c"})
        )
    );
    call!(
        &app,
        post(
            "/apps/blog/users/2/articles",
            json!({"title": "t", "content": "c"})
        )
    );
    let (_, page) = call!(&app, get("/apps/blog/users/2/articles?limit=1"));
    let foreign = page["next"].as_str().expect("a next cursor").to_string();
    let (status, body) = call!(
        &app,
        get(&format!("/apps/blog/users/1/articles?after={foreign}"))
    );
    assert_error(status, &body, 400);

    let (status, body) = call!(&app, get("/apps/blog/nowhere"));
    assert_error(status, &body, 404);
    let (status, body) = call!(&app, test_put("/apps/blog/users/1/articles"));
    assert_error(status, &body, 405);
}

fn test_put(uri: &str) -> actix_web::test::TestRequest {
    actix_web::test::TestRequest::put().uri(uri)
}

#[actix_web::test]
async fn concurrent_updates_and_deletes_leave_both_lists_equal_to_the_article() {
    let s = store().await;
    let app = app!(s.kura);
    for round in 0..12u64 {
        let (status, a) = call!(
            &app,
            post(
                "/apps/blog/users/3/articles",
                json!({"title": "t", "content": "c", "category_id": 4})
            )
        );
        assert_eq!(status, 201);
        let id = a["article_id"].as_u64().expect("article_id");
        let uri = format!("/apps/blog/users/3/articles/{id}");
        let results = futures::future::join_all((0..32).map(|i| {
            let (app, uri) = (&app, uri.clone());
            async move {
                if round % 2 == 1 && i % 13 == 6 {
                    call!(app, delete(&uri)).0
                } else {
                    call!(app, patch(&uri, json!({"title": format!("{round}-{i}")}))).0
                }
            }
        }))
        .await;
        assert!(
            results.iter().all(|st| [200, 204, 404].contains(st)),
            "{results:?}"
        );
        let (status, got) = call!(&app, get(&uri));
        for list in [
            "/apps/blog/users/3/articles?limit=1000",
            "/apps/blog/users/3/articles?category_id=4&limit=1000",
        ] {
            let (_, page) = call!(&app, get(list));
            let entry: Vec<&Value> = page["articles"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|x| x["article_id"] == id)
                .collect();
            if status == 200 {
                assert_eq!(
                    entry,
                    vec![&got],
                    "round {round}: {list} shows the article as stored"
                );
            } else {
                assert_eq!(status, 404);
                assert!(
                    entry.is_empty(),
                    "round {round}: {list} still lists a deleted article"
                );
            }
        }
    }
}

/// A list row left behind by a delete cut off between the article row and its list rows (the
/// article row's delete applied, the list rows' not): readers do not show it.
#[actix_web::test]
async fn a_list_row_whose_article_is_gone_is_not_listed() {
    let s = store().await;
    let app = app!(s.kura);
    let mut ids = Vec::new();
    for title in ["a", "b", "c"] {
        let (status, a) = call!(
            &app,
            post(
                "/apps/blog/users/3/articles",
                json!({"title": title, "content": "c", "category_id": 4})
            )
        );
        assert_eq!(status, 201, "{a}");
        ids.push(a["article_id"].as_u64().expect("id"));
    }
    // Delete only the article row of "b", as the crash would leave it (its list rows stay).
    let mut row = kura::apps::keys::hash4_u64(3).to_vec();
    row.extend_from_slice(&3u64.to_be_bytes());
    row.push(0x02);
    row.extend_from_slice(&ids[1].to_be_bytes());
    s.kura
        .mutate(
            "blog",
            kura_backend::RowMutation {
                row,
                mutations: vec![kura_backend::Mutation::DeleteRow { timestamp: None }],
            },
        )
        .await
        .expect("delete the article row only");
    for uri in [
        "/apps/blog/users/3/articles",
        "/apps/blog/users/3/articles?category_id=4",
    ] {
        let (_, list) = call!(&app, get(uri));
        let titles: Vec<_> = list["articles"]
            .as_array()
            .expect("articles")
            .iter()
            .map(|a| a["title"].clone())
            .collect();
        assert_eq!(titles, vec![json!("c"), json!("a")], "{uri}");
    }
}
