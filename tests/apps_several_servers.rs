//! The applications served by two Kura servers over one store (BIGTABLE.md §9: any number of
//! stateless servers on one Bigtable instance). Each server has its own state (its own
//! applications' clock, one running ahead of the other), and concurrent requests are spread
//! over both: what APPS_API.md promises must hold as it does with one server, because nothing
//! it rests on may live inside one process.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeSet;
use support::*;

/// How far the second server's clock runs ahead of the first's, in ms.
const SKEW_MS: i64 = 5_000;

fn list(page: &Value, field: &str) -> Vec<Value> {
    page[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field} array in {page}"))
        .clone()
}

fn u(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
}

#[actix_web::test]
async fn blog_creations_for_one_user_on_two_servers_keep_ids_and_post_times_in_one_order() {
    let s = store().await;
    // The second server's clock is ahead: with a per-process clock, an article it creates
    // would sort above later ones created on the first.
    let servers = [server!(s.kura, 0), server!(s.kura, SKEW_MS)];
    let n = 40;
    let results = futures::future::join_all((0..n).map(|i| {
        let app = &servers[i % 2];
        async move {
            call!(
                app,
                post(
                    "/apps/blog/users/7/articles",
                    json!({"title": format!("t{i}"), "content": "c", "category_id": 3})
                )
            )
        }
    }))
    .await;
    let mut created: Vec<(u64, u64)> = results
        .iter()
        .map(|(status, a)| {
            assert_eq!(*status, 201, "{a}");
            (u(a, "article_id"), u(a, "post_at"))
        })
        .collect();
    created.sort();
    let ids: Vec<u64> = created.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        ids,
        (1..=n as u64).collect::<Vec<_>>(),
        "no gap, no duplicate"
    );
    for w in created.windows(2) {
        assert!(
            w[1].1 > w[0].1,
            "a later id got an earlier or equal post_at: {w:?}"
        );
    }
    // Both lists, read through either server: newest first = highest id first, every article
    // once.
    let want: Vec<u64> = ids.iter().rev().copied().collect();
    for app in &servers {
        for uri in [
            "/apps/blog/users/7/articles?limit=1000",
            "/apps/blog/users/7/articles?limit=1000&category_id=3",
        ] {
            let (status, page) = call!(app, get(uri));
            assert_eq!(status, 200, "{page}");
            let got: Vec<u64> = list(&page, "articles")
                .iter()
                .map(|a| u(a, "article_id"))
                .collect();
            assert_eq!(got, want, "{uri}");
        }
    }
    // A creation on the server that is behind, after the one ahead created the newest, still
    // lists first.
    let (_, newest) = call!(
        &servers[0],
        post(
            "/apps/blog/users/7/articles",
            json!({"title": "last", "content": "c"})
        )
    );
    assert_eq!(u(&newest, "article_id"), n as u64 + 1);
    assert!(u(&newest, "post_at") > created.last().expect("articles").1);
    let (_, page) = call!(&servers[1], get("/apps/blog/users/7/articles?limit=1"));
    assert_eq!(list(&page, "articles")[0]["title"], "last");
}

#[actix_web::test]
async fn actions_posted_at_one_instant_through_two_servers_are_all_kept() {
    let s = store().await;
    // Same clock on both: server-stamped actions of both land in the same milliseconds.
    let servers = [server!(s.kura, 0), server!(s.kura, 0)];
    let n = 40;
    // Half with one client stamp (one key prefix for all of them), half stamped by the servers.
    let results = futures::future::join_all((0..n).map(|i| {
        let app = &servers[i % 2];
        async move {
            let body = if i % 4 < 2 {
                json!({"name": format!("a{i}"), "stamp": 1_000})
            } else {
                json!({"name": format!("a{i}")})
            };
            call!(app, post("/apps/actions/users/9", body))
        }
    }))
    .await;
    let mut by_id: Vec<(u64, u64, String)> = results
        .iter()
        .map(|(status, a)| {
            assert_eq!(*status, 201, "{a}");
            (
                u(a, "action_id"),
                u(a, "stamp"),
                a["name"].as_str().expect("name").to_string(),
            )
        })
        .collect();
    by_id.sort();
    let ids: Vec<u64> = by_id.iter().map(|a| a.0).collect();
    assert_eq!(ids, (1..=n as u64).collect::<Vec<_>>(), "unique ids");
    // Server stamps strictly increase with ids, whichever server took them.
    let server_stamped: Vec<u64> = by_id.iter().filter(|a| a.1 != 1_000).map(|a| a.1).collect();
    assert_eq!(server_stamped.len(), n / 2);
    assert!(
        server_stamped.windows(2).all(|w| w[1] > w[0]),
        "{server_stamped:?}"
    );
    // Nothing was overwritten: every action is listed once, stamp descending, then id.
    let (status, page) = call!(&servers[1], get("/apps/actions/users/9?limit=1000"));
    assert_eq!(status, 200, "{page}");
    let listed: Vec<(u64, u64, String)> = list(&page, "actions")
        .iter()
        .map(|a| {
            (
                u(a, "action_id"),
                u(a, "stamp"),
                a["name"].as_str().expect("name").to_string(),
            )
        })
        .collect();
    let mut want = by_id.clone();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    assert_eq!(listed, want);
}

#[actix_web::test]
async fn counter_hits_spread_over_two_servers_total_exactly() {
    let s = store().await;
    let servers = [server!(s.kura, 0), server!(s.kura, SKEW_MS)];
    let n = 60;
    let at = 1_700_000_000_000i64; // 2023-11-14T22:13:20Z
    let results = futures::future::join_all((0..n).map(|i| {
        let app = &servers[i % 2];
        async move {
            call!(
                app,
                post(
                    "/apps/counter/hits",
                    json!({"domain": "example.jp", "path": "/a", "amount": i + 1, "at": at})
                )
            )
        }
    }))
    .await;
    let sum: i64 = (1..=n as i64).sum();
    let mut totals: Vec<i64> = results
        .iter()
        .map(|(status, b)| {
            assert_eq!(*status, 200, "{b}");
            assert_eq!(b["hourly"], b["total"], "{b}");
            assert_eq!(b["daily"], b["total"], "{b}");
            b["total"].as_i64().expect("total")
        })
        .collect();
    totals.sort();
    let distinct: BTreeSet<i64> = totals.iter().copied().collect();
    assert_eq!(distinct.len(), n, "each hit saw its own count: {totals:?}");
    assert_eq!(totals.last(), Some(&sum));
    for app in &servers {
        let (status, body) = call!(app, get("/apps/counter/total?domain=example.jp&path=/a"));
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["total"], sum, "{body}");
        let (_, body) = call!(
            app,
            get("/apps/counter/hourly?domain=example.jp&start=2023111422&end=2023111423")
        );
        assert_eq!(body["counts"][0]["count"], sum, "{body}");
    }
    // Hits without a time, from both servers: none is lost, whatever bucket each clock chose.
    futures::future::join_all((0..20).map(|i| {
        let app = &servers[i % 2];
        async move {
            let (status, b) = call!(
                app,
                post(
                    "/apps/counter/hits",
                    json!({"url": "http://b.example.jp/x"})
                )
            );
            assert_eq!(status, 200, "{b}");
        }
    }))
    .await;
    let (_, body) = call!(&servers[0], get("/apps/counter/total?domain=b.example.jp"));
    assert_eq!(body["total"], 20, "{body}");
}

#[actix_web::test]
async fn graph_creates_and_deletes_spread_over_two_servers_keep_both_adjacency_lists_consistent() {
    let s = store().await;
    // The server behind computes timestamps below the other's: every rule must come from the
    // rows (u + 1, tombstones), not from either clock.
    let servers = [server!(s.kura, 0), server!(s.kura, SKEW_MS)];
    for id in ["hub", "m", "n"] {
        let (status, body) = call!(&servers[0], post("/apps/graph/nodes", json!({"id": id})));
        assert_eq!(status, 201, "{body}");
    }
    let leaves: Vec<String> = (0..16).map(|i| format!("leaf{i}")).collect();
    for (i, id) in leaves.iter().enumerate() {
        let (status, body) = call!(
            &servers[i % 2],
            post("/apps/graph/nodes", json!({"id": id}))
        );
        assert_eq!(status, 201, "{body}");
    }

    // Concurrent creates of one relationship from both servers: exactly one 201.
    let results = futures::future::join_all((0..16).map(|i| {
        let app = &servers[i % 2];
        async move {
            call!(app, post("/apps/graph/relationships", json!({"start": "m", "type": "once", "end": "n", "properties": {"who": i.to_string()}})))
        }
    }))
    .await;
    assert_eq!(results.iter().filter(|r| r.0 == 201).count(), 1);
    assert!(
        results.iter().all(|r| r.0 == 201 || r.0 == 409),
        "{results:?}"
    );

    // Distinct relationships of one node created from both servers, then half of them deleted
    // concurrently: the lists hold exactly the survivors, each once.
    let results = futures::future::join_all(leaves.iter().enumerate().map(|(i, leaf)| {
        let app = &servers[i % 2];
        async move {
            call!(
                app,
                post(
                    "/apps/graph/relationships",
                    json!({"start": "hub", "type": "t", "end": leaf})
                )
            )
        }
    }))
    .await;
    assert!(results.iter().all(|r| r.0 == 201), "{results:?}");
    let results =
        futures::future::join_all(leaves.iter().enumerate().filter(|(i, _)| i % 2 == 0).map(
            |(i, leaf)| {
                // Deleted through the other server than the one that created it.
                let app = &servers[(i + 1) % 2];
                async move {
                    call!(
                        app,
                        delete(&format!("/apps/graph/relationships/hub/t/{leaf}"))
                    )
                    .0
                }
            },
        ))
        .await;
    assert!(results.iter().all(|st| *st == 204), "{results:?}");
    let survivors: BTreeSet<String> = leaves.iter().skip(1).step_by(2).cloned().collect();
    for app in &servers {
        let (_, out) = call!(
            app,
            get("/apps/graph/nodes/hub/relationships?type=t&limit=1000")
        );
        let ends: Vec<String> = list(&out, "relationships")
            .iter()
            .map(|r| r["end"].as_str().expect("end").to_string())
            .collect();
        assert_eq!(ends.len(), survivors.len(), "each once: {ends:?}");
        assert_eq!(ends.iter().cloned().collect::<BTreeSet<_>>(), survivors);
    }

    // Create, patch and delete storms on one relationship, spread over both servers.
    let mut alive = 0i64;
    for round in 0..15 {
        let results = futures::future::join_all((0..24).map(|i| {
            let app = &servers[(i / 4 + round) % 2];
            async move {
                match i % 4 {
                    0 => call!(app, post("/apps/graph/relationships", json!({"start": "m", "type": "r", "end": "n", "properties": {"c": i.to_string()}}))),
                    1 => call!(app, delete("/apps/graph/relationships/m/r/n")),
                    _ => call!(app, patch("/apps/graph/relationships/m/r/n", json!({"put": {"v": format!("{round}-{i}")}}))),
                }
            }
        }))
        .await;
        assert!(
            results
                .iter()
                .all(|(st, _)| [200, 201, 204, 404, 409].contains(st)),
            "round {round}: {results:?}"
        );
        let (status, row) = call!(&servers[round % 2], get("/apps/graph/relationships/m/r/n"));
        let alive_now = i64::from(status == 200);
        let net = results.iter().filter(|r| r.0 == 201).count() as i64
            - results.iter().filter(|r| r.0 == 204).count() as i64;
        assert_eq!(
            net,
            alive_now - alive,
            "round {round}: creates minus deletes"
        );
        alive = alive_now;
        let want = if status == 200 { vec![row] } else { Vec::new() };
        for app in &servers {
            let (_, out) = call!(app, get("/apps/graph/nodes/m/relationships?type=r"));
            let (_, inc) = call!(
                app,
                get("/apps/graph/nodes/n/relationships?type=r&direction=incoming")
            );
            assert_eq!(
                list(&out, "relationships"),
                want,
                "round {round}: outgoing list"
            );
            assert_eq!(
                list(&inc, "relationships"),
                want,
                "round {round}: incoming list"
            );
        }
    }
}
