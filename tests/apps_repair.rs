//! `kura repair` and `POST /admin/repair` against the real `kura` binary: the bearer token
//! guards it as every admin endpoint, bad input is a clear 400 (exit 2 for the command), a dry
//! run reports what a crash left and changes nothing, and a repair running alongside writes
//! never removes a live entry (the crash cases themselves: `tests/crash_apps_repair.rs`).

mod server_harness;

use serde_json::{json, Value};
use server_harness::{output_text, run_kura, Http, Server};
use std::sync::atomic::{AtomicBool, Ordering};

fn send(http: &mut Http, method: &str, path: &str, body: &str) -> (u16, Value) {
    http.send_json(method, path, body)
}

fn repair(url: &str, extra: &[&str], env: &[(&str, &str)]) -> (std::process::Output, Value) {
    let mut args = vec!["repair", "--url", url];
    args.extend_from_slice(extra);
    let out = run_kura(&args, env);
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, report)
}

#[test]
fn repair_needs_the_servers_token_like_every_admin_endpoint() {
    let dir = tempfile::tempdir().expect("temp dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret\n").expect("token file");
    let data = dir.path().join("data");
    let token_arg = token_file.to_string_lossy().into_owned();
    let server = Server::start(&data, &["--token-file", &token_arg]);
    let mut http = server.client();
    let r = http
        .request("POST", "/admin/repair?app=blog", &[], b"")
        .expect("answered");
    assert_eq!(r.status, 401, "{}", r.text());
    let url = format!("http://{}", server.addr);
    let (out, _) = repair(&url, &["--app", "blog"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("401")
            || String::from_utf8_lossy(&out.stderr).contains("token"),
        "{}",
        output_text(&out)
    );
    let (out, report) = repair(&url, &["--app", "all"], &[("KURA_TOKEN", "s3cret")]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(report["changed"], json!(0), "{report:#}");
    for app in ["blog", "actions", "counter", "graph"] {
        assert!(report["apps"][app].is_object(), "{app} missing: {report:#}");
    }
}

#[test]
fn repair_refuses_bad_input_with_a_clear_400_and_exit_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path(), &[]);
    let mut http = server.client();
    for (query, says) in [
        ("", "app"),
        ("app=wiki", "app must be one of"),
        ("app=blog&limit=0", "limit"),
        ("app=blog&limit=10001", "limit"),
        ("app=blog&dry_run=maybe", "dry_run"),
        ("app=graph&after=***", "cursor"),
    ] {
        let (status, body) = send(&mut http, "POST", &format!("/admin/repair?{query}"), "");
        assert_eq!(status, 400, "{query}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{query}: {body}");
    }
    let (status, _) = send(&mut http, "GET", "/admin/repair?app=blog", "");
    assert_eq!(status, 405);
    let url = format!("http://{}", server.addr);
    for args in [&["--app", "wiki"][..], &["--page-rows", "0"][..]] {
        let (out, _) = repair(&url, args, &[]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            output_text(&out)
        );
    }
    let (out, _) = repair("ftp://nowhere", &[], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
}

#[test]
fn a_dry_run_reports_what_a_crash_left_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(dir.path(), &["--durability", "sync"]);
    let mut http = server.client();
    let article = r#"{"title":"t","content":"c","category_id":3}"#;
    let (s, _) = send(&mut http, "POST", "/apps/blog/users/9/articles", article);
    assert_eq!(s, 201);
    // The delete's first write (the article row) and no more: both list rows dangle.
    server.set_env(&[("KURA_TEST_CRASH_AFTER_APP_WRITES", "1")]);
    server.restart();
    let cut = server
        .client()
        .request("DELETE", "/apps/blog/users/9/articles/1", &[], b"");
    assert!(cut.is_err(), "the hook kills the server before it answers");
    server.set_env(&[]);
    server.restart();
    let url = format!("http://{}", server.addr);
    for _ in 0..2 {
        let (out, report) = repair(&url, &["--app", "blog", "--dry-run"], &[]);
        assert!(out.status.success(), "{}", output_text(&out));
        assert_eq!(report["dry_run"], json!(true));
        assert_eq!(
            report["apps"]["blog"]["counts"],
            json!({"dangling_list_rows_removed": 2}),
            "{report:#}"
        );
        let changes = report["apps"]["blog"]["changes"].as_array().expect("list");
        assert_eq!(changes.len(), 2);
        for c in changes {
            assert_eq!(c["detail"], json!({"user_id": 9, "article_id": 1}), "{c}");
        }
    }
    let (_, report) = repair(&url, &["--app", "blog"], &[]);
    assert_eq!(report["changed"], json!(2), "{report:#}");
    let (_, report) = repair(&url, &["--app", "blog"], &[]);
    assert_eq!(report["changed"], json!(0), "{report:#}");
}

/// Every article of `user` in both lists, checking each is live.
fn articles(http: &mut Http, user: u64, category: Option<u32>) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut after = String::new();
    loop {
        let cat = category
            .map(|c| format!("&category_id={c}"))
            .unwrap_or_default();
        let path = format!("/apps/blog/users/{user}/articles?limit=50{cat}&after={after}");
        let (s, page) = send(http, "GET", &path, "");
        assert_eq!(s, 200, "{page}");
        for a in page["articles"].as_array().expect("list") {
            ids.push(a["article_id"].as_u64().expect("id"));
        }
        match page["next"].as_str() {
            Some(n) => after = n.to_string(),
            None => return ids,
        }
    }
}

#[test]
fn repair_running_alongside_writes_never_removes_a_live_entry() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path(), &[]);
    let addr = server.addr;
    let url = format!("http://{addr}");
    let mut http = server.client();
    for n in ["p", "q", "r", "s"] {
        let (st, _) = send(
            &mut http,
            "POST",
            "/apps/graph/nodes",
            &format!(r#"{{"id":"{n}"}}"#),
        );
        assert_eq!(st, 201);
    }
    let done = AtomicBool::new(false);
    let repairs = std::thread::scope(|scope| {
        let repairer = scope.spawn(|| {
            let mut runs = 0;
            while !done.load(Ordering::SeqCst) || runs == 0 {
                let (out, _) = repair(&url, &["--app", "all", "--page-rows", "7"], &[]);
                assert!(out.status.success(), "{}", output_text(&out));
                runs += 1;
            }
            runs
        });
        let writers: Vec<_> = (0..3u64)
            .map(|w| {
                scope.spawn(move || {
                    let mut http = Http::connect(addr).expect("connect");
                    let user = 40 + w;
                    for i in 0..40u64 {
                        let body =
                            format!(r#"{{"title":"{i}","content":"c","category_id":{}}}"#, i % 2);
                        let (s, a) = send(
                            &mut http,
                            "POST",
                            &format!("/apps/blog/users/{user}/articles"),
                            &body,
                        );
                        assert_eq!(s, 201, "{a}");
                        let id = a["article_id"].as_u64().expect("id");
                        let one = format!("/apps/blog/users/{user}/articles/{id}");
                        match i % 3 {
                            0 => assert_eq!(send(&mut http, "DELETE", &one, "").0, 204),
                            1 => assert_eq!(
                                send(&mut http, "PATCH", &one, r#"{"title":"x"}"#).0,
                                200
                            ),
                            _ => {}
                        }
                        let (a, b) = (
                            ["p", "q", "r", "s"][(i % 4) as usize],
                            ["p", "q", "r", "s"][((i + w + 1) % 4) as usize],
                        );
                        let t = format!("w{w}");
                        let rel = format!(r#"{{"start":"{a}","type":"{t}","end":"{b}"}}"#);
                        let one = format!("/apps/graph/relationships/{a}/{t}/{b}");
                        match send(&mut http, "POST", "/apps/graph/relationships", &rel).0 {
                            201 => {
                                if i % 2 == 0 {
                                    assert_eq!(
                                        send(&mut http, "PATCH", &one, r#"{"put":{"k":"v"}}"#).0,
                                        200
                                    );
                                }
                            }
                            409 => assert_eq!(send(&mut http, "DELETE", &one, "").0, 204),
                            other => panic!("relationship create: {other}"),
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().expect("writer");
        }
        done.store(true, Ordering::SeqCst);
        repairer.join().expect("repairer")
    });
    assert!(repairs >= 1);
    // Every write was answered: nothing is half-written, so a repair now finds nothing, and
    // every live entity is in all its lists (a concurrent repair removed no live entry).
    let (out, report) = repair(&url, &["--app", "all"], &[]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(report["changed"], json!(0), "{report:#}");
    for w in 0..3u64 {
        let user = 40 + w;
        let all = articles(&mut http, user, None);
        // Articles 1..=40; every third (i = 0, 3, ...: ids 1, 4, ...) deleted.
        let expect: Vec<u64> = (1..=40u64).rev().filter(|id| (id - 1) % 3 != 0).collect();
        assert_eq!(all, expect, "user {user}'s main list");
        let mut by_cat: Vec<u64> = articles(&mut http, user, Some(0))
            .into_iter()
            .chain(articles(&mut http, user, Some(1)))
            .collect();
        by_cat.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(by_cat, expect, "user {user}'s category lists");
        let t = format!("w{w}");
        for n in ["p", "q", "r", "s"] {
            for dir in ["outgoing", "incoming"] {
                let path = format!(
                    "/apps/graph/nodes/{n}/relationships?type={t}&direction={dir}&limit=100"
                );
                let (s, page) = send(&mut http, "GET", &path, "");
                assert_eq!(s, 200);
                for r in page["relationships"].as_array().expect("list") {
                    let one = format!(
                        "/apps/graph/relationships/{}/{t}/{}",
                        r["start"].as_str().unwrap_or(""),
                        r["end"].as_str().unwrap_or("")
                    );
                    let (s, by_id) = send(&mut http, "GET", &one, "");
                    assert_eq!((s, &by_id), (200, r), "{n} {dir}");
                }
            }
        }
        // Each live relationship of this writer is in both lists.
        for a in ["p", "q", "r", "s"] {
            for b in ["p", "q", "r", "s"] {
                let one = format!("/apps/graph/relationships/{a}/{t}/{b}");
                if send(&mut http, "GET", &one, "").0 != 200 {
                    continue;
                }
                for (x, dir, other) in [(a, "outgoing", b), (b, "incoming", a)] {
                    let path = format!(
                        "/apps/graph/nodes/{x}/relationships?type={t}&direction={dir}&limit=100"
                    );
                    let (_, page) = send(&mut http, "GET", &path, "");
                    let listed = page["relationships"]
                        .as_array()
                        .expect("list")
                        .iter()
                        .any(|r| {
                            let end = if dir == "outgoing" {
                                &r["end"]
                            } else {
                                &r["start"]
                            };
                            end == &json!(other)
                        });
                    assert!(listed, "{a}-{t}->{b} missing from {x}'s {dir} list");
                }
            }
        }
    }
}

#[test]
fn a_relationship_left_from_a_deleted_node_stays_hidden_and_gives_way_to_a_new_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(dir.path(), &["--durability", "sync"]);
    let mut http = server.client();
    for n in ["a", "b"] {
        let (s, _) = send(
            &mut http,
            "POST",
            "/apps/graph/nodes",
            &format!(r#"{{"id":"{n}"}}"#),
        );
        assert_eq!(s, 201);
    }
    let rel = r#"{"start":"a","type":"t","end":"b","properties":{"old":"1"}}"#;
    assert_eq!(
        send(&mut http, "POST", "/apps/graph/relationships", rel).0,
        201
    );
    // The cascade delete of `a` cut after its first write (the node row): `a -t-> b` is left.
    server.set_env(&[("KURA_TEST_CRASH_AFTER_APP_WRITES", "1")]);
    server.restart();
    let cut = server
        .client()
        .request("DELETE", "/apps/graph/nodes/a?cascade=true", &[], b"");
    assert!(cut.is_err(), "the hook kills the server before it answers");
    server.set_env(&[]);
    server.restart();
    let mut http = server.client();
    // `a` comes back under the same id: the old relationship is older than it, so hidden.
    assert_eq!(
        send(&mut http, "POST", "/apps/graph/nodes", r#"{"id":"a"}"#).0,
        201
    );
    assert_eq!(
        send(&mut http, "GET", "/apps/graph/relationships/a/t/b", "").0,
        404
    );
    let list = |http: &mut Http, x: &str, dir: &str| {
        let path = format!("/apps/graph/nodes/{x}/relationships?type=t&direction={dir}");
        let (s, page) = send(http, "GET", &path, "");
        assert_eq!(s, 200, "{page}");
        page["relationships"].as_array().expect("list").clone()
    };
    assert!(list(&mut http, "a", "outgoing").is_empty());
    assert!(list(&mut http, "b", "incoming").is_empty());
    // Creating it again is a new relationship (201, not 409), listed once from each end.
    let (s, created) = send(
        &mut http,
        "POST",
        "/apps/graph/relationships",
        r#"{"start":"a","type":"t","end":"b"}"#,
    );
    assert_eq!(s, 201, "{created}");
    assert_eq!(created["properties"], json!({}));
    assert_eq!(list(&mut http, "a", "outgoing"), vec![created.clone()]);
    assert_eq!(list(&mut http, "b", "incoming"), vec![created]);
    let url = format!("http://{}", server.addr);
    let (out, report) = repair(&url, &["--app", "graph"], &[]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(report["changed"], json!(0), "{report:#}");
}
