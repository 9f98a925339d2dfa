//! The access counter over HTTP (APPS_API.md "Access counter"): one atomic increment per hit,
//! hourly/daily/total for a URL or a domain with its subdomains, label boundaries, ranges, errors,
//! and concurrent hits totalling exactly.

mod apps_support;

use apps_support::*;
use serde_json::{json, Value};

/// 2024-01-02T03:04:05Z in ms.
const T0: i64 = 1_704_164_645_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

fn counts(body: &Value) -> Vec<(String, String, String, i64)> {
    body["counts"]
        .as_array()
        .expect("counts array")
        .iter()
        .map(|c| {
            (
                c["domain"].as_str().unwrap_or("").to_string(),
                c["path"].as_str().unwrap_or("").to_string(),
                c["time"].as_str().unwrap_or("").to_string(),
                c["count"].as_i64().expect("count"),
            )
        })
        .collect()
}

fn row(d: &str, p: &str, t: &str, n: i64) -> (String, String, String, i64) {
    (d.to_string(), p.to_string(), t.to_string(), n)
}

#[actix_web::test]
async fn a_hit_returns_the_counts_after_it_in_utc_buckets() {
    let s = store().await;
    let app = app!(s.kura);
    let (status, h) = call!(
        &app,
        post(
            "/apps/counter/hits",
            json!({"url": "http://Blog.Example.JP:8080/a/b?q=1#x", "at": T0})
        )
    );
    assert_eq!(status, 200, "{h}");
    assert_eq!(
        h,
        json!({"domain": "blog.example.jp", "path": "/a/b", "hour": "2024010203", "day": "20240102",
               "hourly": 1, "daily": 1, "total": 1})
    );
    let (_, h) = call!(
        &app,
        post(
            "/apps/counter/hits",
            json!({"domain": "blog.example.jp", "path": "/a/b", "amount": 5, "at": T0 + HOUR})
        )
    );
    assert_eq!(
        (
            h["hour"].as_str(),
            h["hourly"].as_i64(),
            h["daily"].as_i64(),
            h["total"].as_i64()
        ),
        (Some("2024010204"), Some(5), Some(6), Some(6))
    );
    let (_, h) = call!(
        &app,
        post(
            "/apps/counter/hits",
            json!({"url": "https://example.jp", "at": T0 + DAY})
        )
    );
    assert_eq!(
        (h["path"].as_str(), h["daily"].as_i64(), h["total"].as_i64()),
        (Some("/"), Some(1), Some(1))
    );
}

macro_rules! seed {
    ($app:expr) => {{
        let hits = [
            ("example.jp", "/", T0, 1),
            ("example.jp", "/", T0 + HOUR, 2),
            ("blog.example.jp", "/a", T0, 3),
            ("blog.example.jp", "/a", T0 + DAY, 4),
            ("a.blog.example.jp", "/", T0 + 2 * HOUR, 5),
            ("badexample.jp", "/", T0, 100),
            ("example.jp-x.jp", "/", T0, 100),
            ("example.com", "/", T0, 100),
        ];
        for (d, p, at, n) in hits {
            let (status, _) = call!($app, post("/apps/counter/hits", json!({"domain": d, "path": p, "at": at, "amount": n})));
            assert_eq!(status, 200);
        }
    }};
}

#[actix_web::test]
async fn hourly_covers_the_domain_and_subdomains_at_label_boundaries() {
    let s = store().await;
    let app = app!(s.kura);
    seed!(&app);
    let (status, body) = call!(
        &app,
        get("/apps/counter/hourly?domain=example.jp&start=2024010200&end=2024010300")
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        counts(&body),
        vec![
            row("example.jp", "/", "2024010203", 1),
            row("example.jp", "/", "2024010204", 2),
            row("blog.example.jp", "/a", "2024010203", 3),
            row("a.blog.example.jp", "/", "2024010205", 5),
        ]
    );
    // start inclusive, end exclusive.
    let (_, body) = call!(
        &app,
        get("/apps/counter/hourly?domain=example.jp&start=2024010204&end=2024010205")
    );
    assert_eq!(counts(&body), vec![row("example.jp", "/", "2024010204", 2)]);
    // One URL.
    let (_, body) = call!(
        &app,
        get("/apps/counter/hourly?domain=blog.example.jp&path=/a&start=2024010100&end=2024010400")
    );
    assert_eq!(
        counts(&body),
        vec![
            row("blog.example.jp", "/a", "2024010203", 3),
            row("blog.example.jp", "/a", "2024010303", 4)
        ]
    );
    // A subdomain query does not include its parent.
    let (_, body) = call!(
        &app,
        get("/apps/counter/hourly?domain=blog.example.jp&start=2024010200&end=2024010300")
    );
    assert_eq!(
        counts(&body),
        vec![
            row("blog.example.jp", "/a", "2024010203", 3),
            row("a.blog.example.jp", "/", "2024010205", 5)
        ]
    );
    // A one-label domain covers everything below it, still at label boundaries.
    let (_, body) = call!(
        &app,
        get("/apps/counter/hourly?domain=jp&start=2024010203&end=2024010204")
    );
    let domains: Vec<String> = counts(&body).into_iter().map(|c| c.0).collect();
    assert_eq!(
        domains,
        vec![
            "badexample.jp",
            "example.jp",
            "blog.example.jp",
            "example.jp-x.jp"
        ]
    );
}

#[actix_web::test]
async fn daily_and_total_cover_the_same_rows() {
    let s = store().await;
    let app = app!(s.kura);
    seed!(&app);
    let (_, body) = call!(
        &app,
        get("/apps/counter/daily?domain=example.jp&start=20240101&end=20240104")
    );
    assert_eq!(
        counts(&body),
        vec![
            row("example.jp", "/", "20240102", 3),
            row("blog.example.jp", "/a", "20240102", 3),
            row("blog.example.jp", "/a", "20240103", 4),
            row("a.blog.example.jp", "/", "20240102", 5),
        ]
    );
    let (_, body) = call!(&app, get("/apps/counter/total?domain=example.jp"));
    assert_eq!(body["total"], 15);
    assert_eq!(
        body["counts"],
        json!([
            {"domain": "example.jp", "path": "/", "count": 3},
            {"domain": "blog.example.jp", "path": "/a", "count": 7},
            {"domain": "a.blog.example.jp", "path": "/", "count": 5},
        ])
    );
    let (_, body) = call!(
        &app,
        get("/apps/counter/total?domain=blog.example.jp&path=/a")
    );
    assert_eq!(
        body,
        json!({"total": 7, "counts": [{"domain": "blog.example.jp", "path": "/a", "count": 7}]})
    );
    let (_, body) = call!(
        &app,
        get("/apps/counter/total?domain=nothing.example.org&path=/")
    );
    assert_eq!(body, json!({"total": 0, "counts": []}));
    let (_, body) = call!(&app, get("/apps/counter/total?domain=EXAMPLE.jp&path="));
    assert_eq!(
        body["total"], 0,
        "path \"\" is a URL of its own, not the whole domain"
    );
}

#[actix_web::test]
async fn concurrent_hits_on_one_url_total_exactly() {
    let s = store().await;
    let app = app!(s.kura);
    let n = 200;
    let results = futures::future::join_all((0..n).map(|_| {
        let app = &app;
        async move {
            call!(
                app,
                post(
                    "/apps/counter/hits",
                    json!({"url": "http://hot.example.jp/x", "at": T0})
                )
            )
        }
    }))
    .await;
    let mut totals: Vec<i64> = results
        .iter()
        .map(|(st, b)| {
            assert_eq!(*st, 200, "{b}");
            b["total"].as_i64().unwrap_or(0)
        })
        .collect();
    totals.sort_unstable();
    assert_eq!(
        totals,
        (1..=n).collect::<Vec<i64>>(),
        "each hit saw its own count"
    );
    let (_, body) = call!(
        &app,
        get("/apps/counter/total?domain=hot.example.jp&path=/x")
    );
    assert_eq!(body["total"], n);
    let (_, body) = call!(
        &app,
        get("/apps/counter/hourly?domain=hot.example.jp&start=2024010203&end=2024010204")
    );
    assert_eq!(
        counts(&body),
        vec![row("hot.example.jp", "/x", "2024010203", n)]
    );
}

#[actix_web::test]
async fn a_hit_at_the_latest_accepted_time_can_be_read_back() {
    let s = store().await;
    let app = app!(s.kura);
    // 9999-12-30T23:59:59.999Z: its hour and day have a successor `end` can name.
    let latest = 253_402_214_399_999i64;
    let (status, h) = call!(
        &app,
        post(
            "/apps/counter/hits",
            json!({"domain": "a.jp", "path": "/", "at": latest})
        )
    );
    assert_eq!(status, 200, "{h}");
    assert_eq!(
        (&h["hour"], &h["day"]),
        (&json!("9999123023"), &json!("99991230"))
    );
    let (_, hourly) = call!(
        &app,
        get("/apps/counter/hourly?domain=a.jp&start=9999123023&end=9999123100")
    );
    assert_eq!(
        counts(&hourly),
        vec![("a.jp".into(), "/".into(), "9999123023".into(), 1)]
    );
    let (_, daily) = call!(
        &app,
        get("/apps/counter/daily?domain=a.jp&start=99991230&end=99991231")
    );
    assert_eq!(
        counts(&daily),
        vec![("a.jp".into(), "/".into(), "99991230".into(), 1)]
    );
    // One ms later: a bucket no query could read. Refused, and nothing counted.
    let (status, body) = call!(
        &app,
        post(
            "/apps/counter/hits",
            json!({"domain": "a.jp", "path": "/", "at": latest + 1})
        )
    );
    assert_eq!(assert_error(status, &body, 400), "bad_request");
    let (_, total) = call!(&app, get("/apps/counter/total?domain=a.jp"));
    assert_eq!(total["total"], 1, "{total}");
}

#[actix_web::test]
async fn bad_input_is_a_400_with_the_error_body() {
    let s = store().await;
    let app = app!(s.kura);
    let bad = [
        get("/apps/counter/hourly?domain=example.jp&start=2024010205&end=2024010205"),
        get("/apps/counter/hourly?domain=example.jp&start=2024010206&end=2024010205"),
        get("/apps/counter/hourly?domain=example.jp&start=2024010224&end=2024010300"),
        get("/apps/counter/hourly?domain=example.jp&start=20240102&end=2024010300"),
        get("/apps/counter/hourly?domain=example.jp&start=2024010200"),
        get("/apps/counter/hourly?start=2024010200&end=2024010300"),
        get("/apps/counter/hourly?domain=example.jp&start=2024010100&end=2025060100"),
        get("/apps/counter/daily?domain=example.jp&start=20240230&end=20240301"),
        get("/apps/counter/daily?domain=example.jp&start=20000101&end=20300101"),
        get("/apps/counter/daily?domain=a..b&start=20240101&end=20240102"),
        get("/apps/counter/total"),
        post("/apps/counter/hits", json!({})),
        post("/apps/counter/hits", json!({"domain": "example.jp"})),
        post("/apps/counter/hits", json!({"url": "http:///nohost"})),
        post("/apps/counter/hits", json!({"url": 5})),
        post(
            "/apps/counter/hits",
            json!({"url": "http://a.jp/", "amount": "1"}),
        ),
        post(
            "/apps/counter/hits",
            json!({"url": "http://a.jp/", "at": -1}),
        ),
    ];
    for req in bad {
        let (status, body) = call!(&app, req);
        assert_eq!(assert_error(status, &body, 400), "bad_request");
    }
    // Exactly 10,000 buckets is allowed.
    let (status, _) = call!(
        &app,
        get("/apps/counter/daily?domain=example.jp&start=20000101&end=20270519")
    );
    assert_eq!(status, 200);
}
