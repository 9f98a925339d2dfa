//! The graph database over HTTP (APPS_API.md "Graph"): nodes, relationships, adjacency lists
//! newest first with cursors, cascade, errors, and the consistency of the adjacency index under
//! concurrent PATCH/DELETE storms and concurrent creates.

mod support;

use serde_json::{json, Value};
use support::*;

fn rels(page: &Value) -> Vec<Value> {
    page["relationships"]
        .as_array()
        .expect("relationships array")
        .clone()
}

macro_rules! node {
    ($app:expr, $id:expr) => {{
        let (status, body) = call!($app, post("/apps/graph/nodes", json!({"id": $id})));
        assert_eq!(status, 201, "{body}");
    }};
}

#[actix_web::test]
async fn nodes_are_created_once_read_patched_and_deleted() {
    let s = store().await;
    let app = app!(s.kura);
    let (status, n) = call!(
        &app,
        post(
            "/apps/graph/nodes",
            json!({"id": "alice", "properties": {"age": "30", "city": "Tokyo"}})
        )
    );
    assert_eq!(status, 201);
    assert_eq!(n["id"], "alice");
    assert_eq!(n["properties"], json!({"age": "30", "city": "Tokyo"}));
    assert_eq!(n["created_at"], n["updated_at"]);
    let (status, body) = call!(&app, post("/apps/graph/nodes", json!({"id": "alice"})));
    assert_eq!(assert_error(status, &body, 409), "conflict");
    let (status, got) = call!(&app, get("/apps/graph/nodes/alice"));
    assert_eq!(status, 200);
    assert_eq!(got, n);

    let (status, p) = call!(
        &app,
        patch(
            "/apps/graph/nodes/alice",
            json!({"put": {"age": "31", "x": "1"}, "delete": ["city", "x"]})
        )
    );
    assert_eq!(status, 200, "{p}");
    assert_eq!(
        p["properties"],
        json!({"age": "31"}),
        "a name in both put and delete ends deleted"
    );
    assert!(p["updated_at"].as_i64() > n["updated_at"].as_i64());
    assert_eq!(p["created_at"], n["created_at"]);
    let (_, got) = call!(&app, get("/apps/graph/nodes/alice"));
    assert_eq!(got, p);

    let (status, _) = call!(&app, delete("/apps/graph/nodes/alice"));
    assert_eq!(status, 204);
    for req in [
        get("/apps/graph/nodes/alice"),
        delete("/apps/graph/nodes/alice"),
        patch("/apps/graph/nodes/alice", json!({})),
    ] {
        let (status, body) = call!(&app, req);
        assert_eq!(assert_error(status, &body, 404), "not_found");
    }
    // Re-created right after its delete, the node is visible (its create time is above the
    // delete marker).
    let (status, again) = call!(&app, post("/apps/graph/nodes", json!({"id": "alice"})));
    assert_eq!(status, 201);
    let (status, got) = call!(&app, get("/apps/graph/nodes/alice"));
    assert_eq!(status, 200);
    assert_eq!(got, again);
    assert_eq!(got["properties"], json!({}));
}

#[actix_web::test]
async fn ids_are_percent_decoded_path_segments() {
    let s = store().await;
    let app = app!(s.kura);
    node!(&app, "a/b %c+d");
    node!(&app, "東京");
    let (status, n) = call!(&app, get("/apps/graph/nodes/a%2Fb%20%25c%2Bd"));
    assert_eq!(status, 200, "{n}");
    assert_eq!(n["id"], "a/b %c+d");
    let (status, r) = call!(
        &app,
        post(
            "/apps/graph/relationships",
            json!({"start": "a/b %c+d", "type": "t/1", "end": "東京"})
        )
    );
    assert_eq!(status, 201, "{r}");
    let (status, r2) = call!(
        &app,
        get("/apps/graph/relationships/a%2Fb%20%25c%2Bd/t%2F1/%E6%9D%B1%E4%BA%AC")
    );
    assert_eq!(status, 200, "{r2}");
    assert_eq!(r2, r);
}

#[actix_web::test]
async fn relationships_need_both_nodes_and_show_in_both_adjacency_lists() {
    let s = store().await;
    let app = app!(s.kura);
    node!(&app, "a");
    node!(&app, "b");
    let (status, body) = call!(
        &app,
        post(
            "/apps/graph/relationships",
            json!({"start": "a", "type": "knows", "end": "zz"})
        )
    );
    assert_error(status, &body, 404);
    let (status, body) = call!(
        &app,
        post(
            "/apps/graph/relationships",
            json!({"start": "zz", "type": "knows", "end": "a"})
        )
    );
    assert_error(status, &body, 404);

    let (status, r) = call!(
        &app,
        post(
            "/apps/graph/relationships",
            json!({"start": "a", "type": "knows", "end": "b", "properties": {"since": "2012"}})
        )
    );
    assert_eq!(status, 201);
    assert_eq!(
        r,
        json!({"start": "a", "type": "knows", "end": "b", "properties": {"since": "2012"},
                         "created_at": r["created_at"], "updated_at": r["created_at"]})
    );
    let (status, body) = call!(
        &app,
        post(
            "/apps/graph/relationships",
            json!({"start": "a", "type": "knows", "end": "b"})
        )
    );
    assert_error(status, &body, 409);

    let (_, out) = call!(
        &app,
        get("/apps/graph/nodes/a/relationships?type=knows&direction=outgoing")
    );
    let (_, inc) = call!(
        &app,
        get("/apps/graph/nodes/b/relationships?type=knows&direction=incoming")
    );
    assert_eq!(rels(&out), vec![r.clone()]);
    assert_eq!(rels(&inc), vec![r.clone()]);
    let (_, none) = call!(
        &app,
        get("/apps/graph/nodes/a/relationships?type=knows&direction=incoming")
    );
    assert!(rels(&none).is_empty());
    let (_, other_type) = call!(&app, get("/apps/graph/nodes/a/relationships?type=likes"));
    assert!(rels(&other_type).is_empty());

    let (status, p) = call!(
        &app,
        patch(
            "/apps/graph/relationships/a/knows/b",
            json!({"put": {"w": "1"}, "delete": ["since"]})
        )
    );
    assert_eq!(status, 200);
    assert_eq!(p["properties"], json!({"w": "1"}));
    assert_eq!(p["created_at"], r["created_at"]);
    let (_, got) = call!(&app, get("/apps/graph/relationships/a/knows/b"));
    assert_eq!(got, p);
    let (_, out) = call!(&app, get("/apps/graph/nodes/a/relationships?type=knows"));
    let (_, inc) = call!(
        &app,
        get("/apps/graph/nodes/b/relationships?type=knows&direction=incoming")
    );
    assert_eq!(
        rels(&out),
        vec![p.clone()],
        "the index row follows the update in place"
    );
    assert_eq!(rels(&inc), vec![p.clone()]);

    let (status, _) = call!(&app, delete("/apps/graph/relationships/a/knows/b"));
    assert_eq!(status, 204);
    for req in [
        get("/apps/graph/relationships/a/knows/b"),
        delete("/apps/graph/relationships/a/knows/b"),
        patch("/apps/graph/relationships/a/knows/b", json!({"put": {}})),
    ] {
        let (status, body) = call!(&app, req);
        assert_error(status, &body, 404);
    }
    let (_, out) = call!(&app, get("/apps/graph/nodes/a/relationships?type=knows"));
    let (_, inc) = call!(
        &app,
        get("/apps/graph/nodes/b/relationships?type=knows&direction=incoming")
    );
    assert!(
        rels(&out).is_empty() && rels(&inc).is_empty(),
        "both index rows are deleted (D8 fix)"
    );

    // Re-created after the delete, it is visible again with a later create time.
    let (status, again) = call!(
        &app,
        post(
            "/apps/graph/relationships",
            json!({"start": "a", "type": "knows", "end": "b"})
        )
    );
    assert_eq!(status, 201);
    assert!(again["created_at"].as_i64() > r["created_at"].as_i64());
    let (_, out) = call!(&app, get("/apps/graph/nodes/a/relationships?type=knows"));
    assert_eq!(rels(&out), vec![again]);
}

#[actix_web::test]
async fn adjacency_pages_newest_first_without_skips_or_repeats() {
    let s = store().await;
    let app = app!(s.kura);
    node!(&app, "hub");
    let mut created = Vec::new();
    for i in 0..37 {
        let id = format!("n{i:02}");
        node!(&app, &id);
        let (status, r) = call!(
            &app,
            post(
                "/apps/graph/relationships",
                json!({"start": "hub", "type": "follows", "end": id, "properties": {"i": i.to_string()}})
            )
        );
        assert_eq!(status, 201);
        created.push(r);
    }
    created.reverse();
    let mut got = Vec::new();
    let mut uri =
        "/apps/graph/nodes/hub/relationships?type=follows&direction=outgoing&limit=5".to_string();
    let mut pages = 0;
    loop {
        let (status, page) = call!(&app, get(&uri));
        assert_eq!(status, 200, "{page}");
        pages += 1;
        got.extend(rels(&page));
        match page["next"].as_str() {
            Some(c) => uri = format!("/apps/graph/nodes/hub/relationships?type=follows&direction=outgoing&limit=5&after={c}"),
            None => break,
        }
    }
    assert_eq!(pages, 8);
    assert_eq!(
        got, created,
        "newest created first, every relationship once"
    );
    let (_, inc) = call!(
        &app,
        get("/apps/graph/nodes/n07/relationships?type=follows&direction=incoming")
    );
    assert_eq!(rels(&inc).len(), 1);
    assert_eq!(rels(&inc)[0]["start"], "hub");

    if s.held.on_bigtable() {
        // Documented difference: no salt buckets on Bigtable (see apps_blog.rs).
        assert!(s.kura.bucket_activity("graph").is_none());
        return;
    }
    let before = s.kura.bucket_activity("graph").expect("graph table exists");
    let (_, page) = call!(
        &app,
        get("/apps/graph/nodes/hub/relationships?type=follows&limit=30")
    );
    assert_eq!(rels(&page).len(), 30);
    let after = s.kura.bucket_activity("graph").expect("graph table exists");
    // The list is one scan of the node's bucket; the page's other end nodes (30 nodes, each in
    // a bucket of its own) are read by key to check they are live: never a table-wide read.
    let read = buckets_read(&before, &after);
    assert!(
        !read.is_empty() && read.len() <= 1 + 30,
        "a node's adjacency list lives in one bucket; read {} buckets",
        read.len()
    );
}

#[actix_web::test]
async fn node_delete_is_refused_while_relationships_exist_unless_cascade() {
    let s = store().await;
    let app = app!(s.kura);
    for id in ["x", "y", "z"] {
        node!(&app, id);
    }
    for (a, b) in [("x", "y"), ("z", "x"), ("x", "x")] {
        let (status, _) = call!(
            &app,
            post(
                "/apps/graph/relationships",
                json!({"start": a, "type": "t", "end": b})
            )
        );
        assert_eq!(status, 201);
    }
    let (status, body) = call!(&app, delete("/apps/graph/nodes/x"));
    assert_eq!(assert_error(status, &body, 409), "conflict");
    let (status, _) = call!(&app, get("/apps/graph/nodes/x"));
    assert_eq!(status, 200);
    let (status, body) = call!(&app, delete("/apps/graph/nodes/x?cascade=maybe"));
    assert_error(status, &body, 400);

    let (status, _) = call!(&app, delete("/apps/graph/nodes/x?cascade=true"));
    assert_eq!(status, 204);
    let (status, _) = call!(&app, get("/apps/graph/nodes/x"));
    assert_eq!(status, 404);
    for (a, b) in [("x", "y"), ("z", "x"), ("x", "x")] {
        let (status, _) = call!(&app, get(&format!("/apps/graph/relationships/{a}/t/{b}")));
        assert_eq!(status, 404, "{a}->{b} deleted by the cascade");
    }
    let (_, inc_y) = call!(
        &app,
        get("/apps/graph/nodes/y/relationships?type=t&direction=incoming")
    );
    let (_, out_z) = call!(
        &app,
        get("/apps/graph/nodes/z/relationships?type=t&direction=outgoing")
    );
    assert!(rels(&inc_y).is_empty() && rels(&out_z).is_empty());
    // y has no relationships left: a plain delete works.
    let (status, _) = call!(&app, delete("/apps/graph/nodes/y"));
    assert_eq!(status, 204);
}

#[actix_web::test]
async fn concurrent_creates_give_exactly_one_201() {
    let s = store().await;
    let app = app!(s.kura);
    node!(&app, "s");
    node!(&app, "e");
    for round in 0..5 {
        let n = 16;
        let results = futures::future::join_all((0..n).map(|i| {
            let app = &app;
            async move {
                call!(app, post("/apps/graph/relationships", json!({"start": "s", "type": format!("r{round}"), "end": "e", "properties": {"who": i.to_string()}})))
            }
        }))
        .await;
        let created: Vec<&Value> = results
            .iter()
            .filter(|(st, _)| *st == 201)
            .map(|(_, b)| b)
            .collect();
        assert_eq!(created.len(), 1, "round {round}");
        assert!(results.iter().all(|(st, _)| *st == 201 || *st == 409));
        let (_, out) = call!(
            &app,
            get(&format!("/apps/graph/nodes/s/relationships?type=r{round}"))
        );
        assert_eq!(
            rels(&out),
            vec![created[0].clone()],
            "the index holds the winner's properties"
        );

        let nodes = futures::future::join_all((0..n).map(|_| {
            let app = &app;
            async move {
                call!(
                    app,
                    post("/apps/graph/nodes", json!({"id": format!("node{round}")}))
                )
                .0
            }
        }))
        .await;
        assert_eq!(nodes.iter().filter(|st| **st == 201).count(), 1);
    }
}

#[actix_web::test]
async fn patch_and_delete_storms_leave_both_adjacency_lists_equal_to_the_relationship() {
    let s = store().await;
    let app = app!(s.kura);
    node!(&app, "p");
    node!(&app, "q");
    let rounds = 25;
    for round in 0..rounds {
        let (status, body) = call!(
            &app,
            post(
                "/apps/graph/relationships",
                json!({"start": "p", "type": "t", "end": "q", "properties": {"round": round.to_string()}})
            )
        );
        assert_eq!(status, 201, "round {round}: {body}");
        // 32 concurrent requests: mostly PATCHes, and a few DELETEs in some rounds.
        let results = futures::future::join_all((0..32).map(|i| {
            let app = &app;
            async move {
                if round % 2 == 1 && i % 11 == 5 {
                    call!(app, delete("/apps/graph/relationships/p/t/q")).0
                } else {
                    let body = json!({"put": {"v": format!("{round}-{i}"), format!("k{}", i % 4): i.to_string()}, "delete": [format!("k{}", (i + 1) % 4)]});
                    call!(app, patch("/apps/graph/relationships/p/t/q", body)).0
                }
            }
        }))
        .await;
        assert!(
            results.iter().all(|st| [200, 204, 404].contains(st)),
            "round {round}: {results:?}"
        );
        let (status, row) = call!(&app, get("/apps/graph/relationships/p/t/q"));
        let (_, out) = call!(
            &app,
            get("/apps/graph/nodes/p/relationships?type=t&direction=outgoing")
        );
        let (_, inc) = call!(
            &app,
            get("/apps/graph/nodes/q/relationships?type=t&direction=incoming")
        );
        if status == 200 {
            assert_eq!(
                rels(&out),
                vec![row.clone()],
                "round {round}: outgoing list"
            );
            assert_eq!(
                rels(&inc),
                vec![row.clone()],
                "round {round}: incoming list"
            );
            let (status, _) = call!(&app, delete("/apps/graph/relationships/p/t/q"));
            assert_eq!(status, 204);
        } else {
            assert_eq!(status, 404);
            assert!(
                results.contains(&204),
                "round {round}: gone only if a DELETE ran"
            );
            assert!(
                rels(&out).is_empty(),
                "round {round}: outgoing list after delete: {out}"
            );
            assert!(
                rels(&inc).is_empty(),
                "round {round}: incoming list after delete: {inc}"
            );
        }
    }
}

#[actix_web::test]
async fn bad_input_is_a_400_with_the_error_body() {
    let s = store().await;
    let app = app!(s.kura);
    node!(&app, "a");
    let bad = [
        get("/apps/graph/nodes/a/relationships?type=t&direction=sideways"),
        get("/apps/graph/nodes/a/relationships"),
        get("/apps/graph/nodes/a/relationships?type="),
        get("/apps/graph/nodes/a/relationships?type=t&limit=0"),
        get("/apps/graph/nodes/a/relationships?type=t&limit=1001"),
        get("/apps/graph/nodes/a/relationships?type=t&after=****"),
        get("/apps/graph/nodes/a/relationships?type=t&after=AAAAAAAAAAAAAAAA"),
        post("/apps/graph/nodes", json!({})),
        post("/apps/graph/nodes", json!({"id": ""})),
        post("/apps/graph/nodes", json!({"id": "x".repeat(1025)})),
        post("/apps/graph/nodes", json!({"id": 3})),
        post(
            "/apps/graph/nodes",
            json!({"id": "n", "properties": {"k": 1}}),
        ),
        post("/apps/graph/nodes", json!({"id": "n", "properties": ["k"]})),
        post(
            "/apps/graph/relationships",
            json!({"start": "a", "end": "a"}),
        ),
        post(
            "/apps/graph/relationships",
            json!({"start": "a", "type": "", "end": "a"}),
        ),
        patch("/apps/graph/nodes/a", json!({"put": {"k": null}})),
        patch("/apps/graph/nodes/a", json!({"delete": "k"})),
        post_raw("/apps/graph/nodes", "{\"id\": "),
    ];
    for req in bad {
        let (status, body) = call!(&app, req);
        assert_eq!(assert_error(status, &body, 400), "bad_request");
    }
    let (status, body) = call!(&app, get("/apps/graph/nodes/ghost/relationships?type=t"));
    assert_error(status, &body, 404);
}

#[actix_web::test]
async fn create_patch_delete_storms_never_leave_an_index_row_without_its_relationship() {
    let s = store().await;
    let app = app!(s.kura);
    node!(&app, "m");
    node!(&app, "n");
    let mut alive = 0i64;
    for round in 0..25 {
        let results = futures::future::join_all((0..32).map(|i| {
            let app = &app;
            async move {
                match i % 4 {
                    0 => call!(app, post("/apps/graph/relationships", json!({"start": "m", "type": "t", "end": "n", "properties": {"c": i.to_string()}}))),
                    1 => call!(app, delete("/apps/graph/relationships/m/t/n")),
                    _ => call!(app, patch("/apps/graph/relationships/m/t/n", json!({"put": {"v": format!("{round}-{i}")}}))),
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
        let (status, row) = call!(&app, get("/apps/graph/relationships/m/t/n"));
        // Every 201 made the relationship exist and every 204 ended one: the counts balance.
        let alive_now = i64::from(status == 200);
        let net = results.iter().filter(|r| r.0 == 201).count() as i64
            - results.iter().filter(|r| r.0 == 204).count() as i64;
        assert_eq!(
            net,
            alive_now - alive,
            "round {round}: creates minus deletes"
        );
        alive = alive_now;
        let (_, out) = call!(&app, get("/apps/graph/nodes/m/relationships?type=t"));
        let (_, inc) = call!(
            &app,
            get("/apps/graph/nodes/n/relationships?type=t&direction=incoming")
        );
        let want = if status == 200 { vec![row] } else { Vec::new() };
        assert_eq!(rels(&out), want, "round {round}: outgoing list");
        assert_eq!(rels(&inc), want, "round {round}: incoming list");
    }
}

/// Index entries a crash can leave behind are not listed: those whose relationship row is gone
/// (the relationship's delete applied, its index deletes not), in both directions.
#[actix_web::test]
async fn index_entries_whose_relationship_is_gone_are_not_listed() {
    let s = store().await;
    let app = app!(s.kura);
    for id in ["a", "b", "c", "d"] {
        let (status, body) = call!(&app, post("/apps/graph/nodes", json!({"id": id})));
        assert_eq!(status, 201, "{body}");
    }
    for end in ["b", "c", "d"] {
        let (status, body) = call!(
            &app,
            post(
                "/apps/graph/relationships",
                json!({"start": "a", "type": "t", "end": end})
            )
        );
        assert_eq!(status, 201, "{body}");
    }
    // The relationship row of a -t-> b alone is deleted, as a cut-off delete leaves it.
    let str_key = |k: &mut Vec<u8>, s: &str| {
        k.extend_from_slice(&(s.len() as u32).to_be_bytes());
        k.extend_from_slice(s.as_bytes());
    };
    let mut rel = kura::apps::keys::hash4(b"a").to_vec();
    rel.push(0x01);
    for part in ["a", "t", "b"] {
        str_key(&mut rel, part);
    }
    // At the row's newest cell, as the application's own deletes are: its cells are written at
    // the applications' clock, which may run a few ms ahead of the store's wall clock, and a
    // delete at the store's "now" would then miss them.
    let newest = s
        .kura
        .get("graph", &rel, &kura_backend::ReadSpec::default())
        .await
        .expect("get")
        .expect("the relationship row")
        .cells
        .iter()
        .map(|c| c.timestamp)
        .max()
        .expect("cells");
    s.kura
        .mutate(
            "graph",
            kura_backend::RowMutation {
                row: rel,
                mutations: vec![kura_backend::Mutation::DeleteRow {
                    timestamp: Some(newest),
                }],
            },
        )
        .await
        .expect("delete one row");
    let (_, out) = call!(
        &app,
        get("/apps/graph/nodes/a/relationships?type=t&direction=outgoing")
    );
    let ends: Vec<_> = out["relationships"]
        .as_array()
        .expect("relationships")
        .iter()
        .map(|r| r["end"].clone())
        .collect();
    assert_eq!(ends, vec![json!("d"), json!("c")], "{out}");
    let (_, inc) = call!(
        &app,
        get("/apps/graph/nodes/b/relationships?type=t&direction=incoming")
    );
    assert_eq!(inc["relationships"], json!([]), "{inc}");
}
