//! The access counter over HTTP (APPS_API.md "Access counter"): one atomic increment per hit,
//! hourly/daily/total for a URL or a domain with its subdomains, label boundaries, ranges, errors,
//! and concurrent hits totalling exactly.

mod support;

use serde_json::{json, Value};
use support::*;

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

/// A hit's raw row keys in the `access` table, as `(salt prefix, rest as text)`.
async fn access_keys(kura: &kura_backend::Store) -> Vec<([u8; 4], String)> {
    let got = kura
        .scan(
            "access",
            kura_backend::ScanRequest {
                spec: kura_backend::ScanSpec::all(),
                limit: None,
                page: kura_backend::ScanLimits::default(),
            },
        )
        .await
        .expect("scan access");
    got.rows
        .iter()
        .map(|r| {
            let mut p = [0u8; 4];
            p.copy_from_slice(&r.key[..4]);
            (p, String::from_utf8_lossy(&r.key[4..]).into_owned())
        })
        .collect()
}

#[actix_web::test]
async fn co_jp_sites_are_split_by_the_public_suffix_list() {
    let s = store().await;
    let app = app!(s.kura);
    for (url, n) in [
        ("http://blog.example.co.jp/a", 1),
        ("http://example.co.jp/", 2),
        ("http://other.co.jp/", 4),
        ("http://www.example.ne.jp/", 8),
    ] {
        let (status, body) = call!(
            &app,
            post(
                "/apps/counter/hits",
                json!({"url": url, "at": T0, "amount": n})
            )
        );
        assert_eq!(status, 200, "{body}");
    }
    // Each registrable domain is a site of its own: its own salt prefix.
    use kura::apps::keys::hash4;
    let keys = access_keys(&s.kura).await;
    let prefix_of = |rest: &str| keys.iter().find(|(_, r)| r == rest).map(|(p, _)| *p);
    assert_eq!(
        prefix_of("jp.co.example.blog\t/a"),
        Some(hash4(b"example.co.jp"))
    );
    assert_eq!(prefix_of("jp.co.example\t/"), Some(hash4(b"example.co.jp")));
    assert_eq!(prefix_of("jp.co.other\t/"), Some(hash4(b"other.co.jp")));
    assert_eq!(
        prefix_of("jp.ne.example.www\t/"),
        Some(hash4(b"example.ne.jp"))
    );
    // A site's query covers the site only; the suffix's covers every site under it.
    let (_, body) = call!(&app, get("/apps/counter/total?domain=example.co.jp"));
    assert_eq!(body["total"], 3, "{body}");
    let (_, body) = call!(&app, get("/apps/counter/total?domain=co.jp"));
    assert_eq!(body["total"], 7, "{body}");
    let (_, body) = call!(&app, get("/apps/counter/total?domain=jp"));
    assert_eq!(body["total"], 15, "{body}");
}

#[actix_web::test]
async fn rows_of_the_two_label_layout_still_read_and_add_up() {
    let s = store().await;
    let app = app!(s.kura);
    // Ensure the table, then write two URLs the way the counter wrote them before the Public
    // Suffix List: salted by the last two labels (`co.jp`).
    let (status, _) = call!(&app, get("/apps/counter/total?domain=example.co.jp"));
    assert_eq!(status, 200);
    use kura::apps::keys::hash4;
    for (rest, n) in [("jp.co.example.blog\t/a", 5), ("jp.co.example\t/", 7)] {
        let mut row = hash4(b"co.jp").to_vec();
        row.extend_from_slice(rest.as_bytes());
        s.kura
            .increment(
                "access",
                kura_backend::Increment {
                    row,
                    columns: vec![
                        (b"h".to_vec(), b"2024010203".to_vec(), n),
                        (b"d".to_vec(), b"20240102".to_vec(), n),
                        (b"t".to_vec(), Vec::new(), n),
                    ],
                },
            )
            .await
            .expect("old-layout row");
    }
    // The old rows read as they are.
    let (_, body) = call!(&app, get("/apps/counter/total?domain=example.co.jp"));
    assert_eq!(body["total"], 12, "{body}");
    // A new hit on one of those URLs lands in the new layout; reads add both rows.
    let (status, body) = call!(
        &app,
        post(
            "/apps/counter/hits",
            json!({"url": "http://blog.example.co.jp/a", "at": T0, "amount": 1})
        )
    );
    assert_eq!(status, 200, "{body}");
    let (_, body) = call!(
        &app,
        get("/apps/counter/total?domain=blog.example.co.jp&path=/a")
    );
    assert_eq!(
        body,
        json!({"total": 6, "counts": [{"domain": "blog.example.co.jp", "path": "/a", "count": 6}]})
    );
    let (_, body) = call!(
        &app,
        get("/apps/counter/hourly?domain=example.co.jp&start=2024010200&end=2024010300")
    );
    assert_eq!(
        counts(&body),
        vec![
            row("example.co.jp", "/", "2024010203", 7),
            row("blog.example.co.jp", "/a", "2024010203", 6),
        ]
    );
    let (_, body) = call!(&app, get("/apps/counter/total?domain=co.jp"));
    assert_eq!(body["total"], 13, "{body}");
}

/// Walks every page of `uri` (which has `limit=`): `(all counts, number of pages)`.
macro_rules! walk {
    ($app:expr, $uri:expr) => {{
        let uri: &str = $uri;
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let page_uri = match &after {
                Some(a) => format!("{uri}&after={a}"),
                None => uri.to_string(),
            };
            let (status, body) = call!($app, get(&page_uri));
            assert_eq!(status, 200, "{body}");
            pages += 1;
            all.extend(body["counts"].as_array().expect("counts").iter().cloned());
            match body["next"].as_str() {
                Some(n) => after = Some(n.to_string()),
                None => {
                    assert!(
                        body["next"].is_null(),
                        "next is null on the last page: {body}"
                    );
                    break;
                }
            }
            assert!(pages < 100, "paging does not end");
        }
        (all, pages)
    }};
}

#[actix_web::test]
async fn domain_queries_page_with_limit_and_after() {
    let s = store().await;
    let app = app!(s.kura);
    seed!(&app);
    for (uri, page_uri) in [
        (
            "/apps/counter/hourly?domain=example.jp&start=2024010200&end=2024010400",
            "/apps/counter/hourly?domain=example.jp&start=2024010200&end=2024010400&limit=2",
        ),
        (
            "/apps/counter/daily?domain=jp&start=20240101&end=20240104",
            "/apps/counter/daily?domain=jp&start=20240101&end=20240104&limit=1",
        ),
        (
            "/apps/counter/total?domain=example.jp",
            "/apps/counter/total?domain=example.jp&limit=1",
        ),
    ] {
        let (_, whole) = call!(&app, get(uri));
        assert!(
            whole.get("next").is_none(),
            "no next without limit: {whole}"
        );
        let (paged, pages) = walk!(&app, page_uri);
        assert_eq!(
            Value::Array(paged),
            whole["counts"],
            "pages of {page_uri} make the whole list"
        );
        assert!(pages >= 3, "{page_uri} took {pages} pages");
    }
    // A page of totals still says the whole total.
    let (_, body) = call!(&app, get("/apps/counter/total?domain=example.jp&limit=1"));
    assert_eq!(body["total"], 15, "{body}");
    assert_eq!(body["counts"].as_array().map(Vec::len), Some(1));
    // Bad limits and cursors are 400s; a cursor of another domain is refused.
    for uri in [
        "/apps/counter/total?domain=example.jp&limit=0",
        "/apps/counter/total?domain=example.jp&limit=1001",
        "/apps/counter/total?domain=example.jp&after=!!",
        "/apps/counter/hourly?domain=example.jp&start=2024010200&end=2024010400&after=YWJj",
    ] {
        let (status, body) = call!(&app, get(uri));
        assert_error(status, &body, 400);
    }
    let (_, body) = call!(&app, get("/apps/counter/total?domain=example.com&limit=1"));
    let other = body["next"].as_str().map(str::to_string);
    let (_, body) = call!(
        &app,
        get("/apps/counter/total?domain=badexample.jp&limit=1")
    );
    assert!(
        body["next"].is_null() && other.is_none(),
        "one URL each: {body}"
    );
    let (_, first) = call!(&app, get("/apps/counter/total?domain=example.jp&limit=1"));
    let cursor = first["next"].as_str().expect("a next page");
    let (status, body) = call!(
        &app,
        get(&format!(
            "/apps/counter/total?domain=example.com&after={cursor}"
        ))
    );
    assert_error(status, &body, 400);
}
