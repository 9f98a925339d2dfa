//! Crashes inside the applications' multi-row writes, at every write, and `kura repair`.
//!
//! The real `kura` binary runs with the test hook `KURA_TEST_CRASH_AFTER_APP_WRITES=N`
//! (`src/apps/write.rs`): it kills itself (SIGKILL) right after the `N`-th store write of the
//! application requests it serves. For each multi-row operation (create, update and delete of
//! an article; create, update and delete of a relationship; a node's cascade delete; an
//! action; a hit) the test sets the operation's entities up on a server without the hook,
//! restarts the server with the hook at `N`, sends the operation, restarts it without the hook
//! on the same data directory, and checks:
//! 1. readers never show an entry whose entity is gone, nor one behind its entity (every list
//!    entry is also read by id and must be equal; every relationship listed has both ends);
//! 2. `kura repair` reports what the crash left, row by row, by kind (the counts expected
//!    at that `N`);
//! 3. afterwards the data is as if the operation had fully happened, or (a create cut before
//!    its first row) not at all, as README's "Repairing the applications' rows" says per
//!    operation;
//! 4. a second `kura repair` changes nothing.
//!
//! `N` goes up until the operation answers (it made fewer than `N` writes), so every write of
//! every operation is a crash point.

mod server_harness;

use serde_json::{json, Value};
use server_harness::{output_text, run_kura, wait_until, Http, Server};

const CRASH_ENV: &str = "KURA_TEST_CRASH_AFTER_APP_WRITES";

/// The server under test: started without the hook, on one data directory for the whole test.
struct Rig {
    server: Server,
    _dir: tempfile::TempDir,
}

impl Rig {
    fn new() -> Rig {
        let dir = tempfile::tempdir().expect("temp dir");
        let server = Server::start(dir.path(), &["--durability", "sync"]);
        Rig { server, _dir: dir }
    }

    fn http(&self) -> Http {
        self.server.client()
    }

    /// Restarts the server with the crash hook at `n`, sends `method path body`, and returns
    /// the answer's status, or `None` if the server died before answering. Then restarts it
    /// without the hook.
    fn crash_during(&mut self, n: u64, method: &str, path: &str, body: &str) -> Option<u16> {
        let n = n.to_string();
        self.server.set_env(&[(CRASH_ENV, n.as_str())]);
        self.server.restart();
        let mut http = self.http();
        let headers = [("Content-Type", "application/json")];
        let answer = http
            .request(method, path, &headers, body.as_bytes())
            .ok()
            .map(|r| r.status);
        if answer.is_none() {
            // The hook's SIGKILL: wait for the process to be gone before restarting.
            wait_until(
                &format!("{path}: no answer, so the server exits"),
                std::time::Duration::from_secs(2),
                || self.server.exited(),
            );
        }
        self.server.set_env(&[]);
        self.server.restart();
        answer
    }

    /// Runs `kura repair --app APP` and returns its JSON report.
    fn repair(&self, app: &str) -> Value {
        let url = format!("http://{}", self.server.addr);
        let out = run_kura(&["repair", "--url", &url, "--app", app], &[]);
        assert!(out.status.success(), "kura repair: {}", output_text(&out));
        serde_json::from_slice(&out.stdout).expect("kura repair prints JSON")
    }

    /// Repairs `app`, checks the counts it reports, and that a second run changes nothing.
    fn repair_expecting(&self, app: &str, counts: Value, context: &str) -> Value {
        let report = self.repair(app);
        assert_eq!(
            report["apps"][app]["counts"], counts,
            "{context}: {report:#}"
        );
        let listed = report["apps"][app]["changes"]
            .as_array()
            .expect("changes")
            .len() as u64;
        assert_eq!(report["changed"].as_u64(), Some(listed), "{context}");
        let again = self.repair(app);
        assert_eq!(
            again["changed"],
            json!(0),
            "{context}: second run {again:#}"
        );
        report
    }
}

fn send(http: &mut Http, method: &str, path: &str, body: &str) -> (u16, Value) {
    http.send_json(method, path, body)
}

fn ok(http: &mut Http, method: &str, path: &str, body: &str, status: u16) -> Value {
    let (s, v) = send(http, method, path, body);
    assert_eq!(s, status, "{method} {path}: {v}");
    v
}

/// Every item of a paged list.
fn list_all(http: &mut Http, path: &str, field: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let page = ok(
            http,
            "GET",
            &format!("{path}{sep}limit=2&after={after}"),
            "",
            200,
        );
        all.extend(page[field].as_array().expect("a list").iter().cloned());
        match page["next"].as_str() {
            Some(n) => after = n.to_string(),
            None => return all,
        }
    }
}

// ---- blog ---------------------------------------------------------------------------------

const CATEGORY: u64 = 5;

/// The user's articles as both lists show them, after checking that every listed article is
/// what a read by id answers (readers never show a dangling or outdated entry).
fn blog_lists(http: &mut Http, user: u64) -> (Vec<Value>, Vec<Value>) {
    let base = format!("/apps/blog/users/{user}/articles");
    let main = list_all(http, &base, "articles");
    let cat = list_all(http, &format!("{base}?category_id={CATEGORY}"), "articles");
    for a in main.iter().chain(&cat) {
        let id = a["article_id"].as_u64().expect("id");
        let (s, by_id) = send(http, "GET", &format!("{base}/{id}"), "");
        assert_eq!(
            s, 200,
            "user {user}: a list shows article {id}, which is gone"
        );
        assert_eq!(
            a, &by_id,
            "user {user}: a list shows an outdated article {id}"
        );
    }
    (main, cat)
}

/// The article `id` of `user` exists and both lists show it (`Some(article)`), or it does not
/// exist and no list shows it (`None`); anything in between fails.
fn blog_state(http: &mut Http, user: u64, id: u64) -> Option<Value> {
    let (main, cat) = blog_lists(http, user);
    let (s, a) = send(
        http,
        "GET",
        &format!("/apps/blog/users/{user}/articles/{id}"),
        "",
    );
    let in_main = main.iter().any(|x| x["article_id"] == json!(id));
    let in_cat = cat.iter().any(|x| x["article_id"] == json!(id));
    match s {
        200 => {
            assert!(in_main && in_cat, "article {user}/{id} missing from a list");
            Some(a)
        }
        404 => {
            assert!(!in_main && !in_cat, "article {user}/{id} gone but listed");
            None
        }
        other => panic!("GET article: {other}"),
    }
}

fn counts(pairs: &[(&str, u64)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (k.to_string(), json!(n)))
            .collect(),
    )
}

#[test]
fn a_crash_at_any_write_of_an_article_leaves_it_whole_or_absent_after_repair() {
    let mut rig = Rig::new();
    let article = format!(r#"{{"title":"t","content":"c","category_id":{CATEGORY}}}"#);
    // Create: sequence row (1), article row (2), main list row (3), category list row (4).
    let mut user = 100;
    for n in 1.. {
        user += 1;
        let path = format!("/apps/blog/users/{user}/articles");
        let answer = rig.crash_during(n, "POST", &path, &article);
        let mut http = rig.http();
        let ctx = format!("create, crash after write {n}");
        let before = blog_lists(&mut http, user);
        let missing = match n {
            1 => 0,
            2 => 2,
            3 => 1,
            _ => 0,
        };
        rig.repair_expecting(
            "blog",
            counts(&[("missing_list_rows_written", missing)]),
            &ctx,
        );
        let after = blog_state(&mut http, user, 1);
        if n == 1 {
            assert_eq!(after, None, "{ctx}: only an id was taken");
            assert!(before.0.is_empty() && before.1.is_empty(), "{ctx}");
        } else {
            assert!(after.is_some(), "{ctx}: the article row was written");
        }
        if answer.is_some() {
            assert_eq!(answer, Some(201), "{ctx}");
            break;
        }
        assert!(n < 10, "create never finished");
    }
    // Update: article row (1), main (2), category (3). Delete: the same three.
    for (op, method) in [("update", "PATCH"), ("delete", "DELETE")] {
        for n in 1.. {
            user += 1;
            let mut http = rig.http();
            let path = format!("/apps/blog/users/{user}/articles");
            ok(&mut http, "POST", &path, &article, 201);
            let body = if method == "PATCH" {
                r#"{"title":"new"}"#
            } else {
                ""
            };
            let answer = rig.crash_during(n, method, &format!("{path}/1"), body);
            let mut http = rig.http();
            let ctx = format!("{op}, crash after write {n}");
            blog_lists(&mut http, user);
            let left = match n {
                1 => 2,
                2 => 1,
                _ => 0,
            };
            let kind = if op == "update" {
                "stale_list_rows_rewritten"
            } else {
                "dangling_list_rows_removed"
            };
            rig.repair_expecting("blog", counts(&[(kind, left)]), &ctx);
            let after = blog_state(&mut http, user, 1);
            if op == "update" {
                let a = after.unwrap_or_else(|| panic!("{ctx}: the article is gone"));
                assert_eq!(a["title"], json!("new"), "{ctx}");
            } else {
                assert_eq!(after, None, "{ctx}: the article is still there");
            }
            if answer.is_some() {
                break;
            }
            assert!(n < 10, "{op} never finished");
        }
    }
}

#[test]
fn a_keyed_article_create_cut_by_a_crash_and_repaired_is_retried_once() {
    let mut rig = Rig::new();
    let article = format!(r#"{{"title":"k","content":"c","category_id":{CATEGORY}}}"#);
    for n in 1.. {
        let user = 500 + n;
        let path = format!("/apps/blog/users/{user}/articles");
        let key = format!("key-{n}");
        rig.server.set_env(&[(CRASH_ENV, n.to_string().as_str())]);
        rig.server.restart();
        let headers = [
            ("Content-Type", "application/json"),
            ("Idempotency-Key", key.as_str()),
        ];
        let first = rig
            .http()
            .request("POST", &path, &headers, article.as_bytes())
            .ok();
        rig.server.set_env(&[]);
        rig.server.restart();
        rig.repair("blog");
        let retry = rig
            .http()
            .request("POST", &path, &headers, article.as_bytes())
            .expect("answered");
        assert_eq!(retry.status, 201, "crash after write {n}: {}", retry.text());
        let body: Value = serde_json::from_slice(&retry.body).expect("JSON");
        assert_eq!(body["article_id"], json!(1), "crash after write {n}");
        if let Some(f) = &first {
            assert_eq!(f.body, retry.body, "the retry answers the first answer");
        }
        let mut http = rig.http();
        let (main, cat) = blog_lists(&mut http, user);
        assert_eq!(
            (main.len(), cat.len()),
            (1, 1),
            "crash after write {n}: once"
        );
        if first.is_some() {
            break;
        }
        assert!(n < 10, "the keyed create never finished");
    }
}

// ---- graph --------------------------------------------------------------------------------

/// Every relationship in node `x`'s lists of type `t`, after checking that each listed one is
/// what a read by id answers and that both its end nodes exist.
fn adjacency(http: &mut Http, x: &str, t: &str) -> Vec<Value> {
    let mut all = Vec::new();
    if send(http, "GET", &format!("/apps/graph/nodes/{x}"), "").0 == 404 {
        return all;
    }
    for dir in ["outgoing", "incoming"] {
        let path = format!("/apps/graph/nodes/{x}/relationships?type={t}&direction={dir}");
        for r in list_all(http, &path, "relationships") {
            let (s, e) = (
                r["start"].as_str().expect("start"),
                r["end"].as_str().expect("end"),
            );
            let (st, by_id) = send(
                http,
                "GET",
                &format!("/apps/graph/relationships/{s}/{t}/{e}"),
                "",
            );
            assert_eq!(st, 200, "{x} lists {s}-{t}->{e}, which is gone");
            assert_eq!(r, by_id, "{x} lists an outdated {s}-{t}->{e}");
            for n in [s, e] {
                let st = send(http, "GET", &format!("/apps/graph/nodes/{n}"), "").0;
                assert_eq!(st, 200, "{x} lists {s}-{t}->{e}, whose node {n} is gone");
            }
            all.push(r);
        }
    }
    all
}

/// `s -t-> e` exists and both adjacency lists show it (`Some`), or it does not and neither
/// does (`None`).
fn relationship_state(http: &mut Http, s: &str, t: &str, e: &str) -> Option<Value> {
    let shown = |http: &mut Http, x: &str| {
        adjacency(http, x, t)
            .into_iter()
            .filter(|r| r["start"] == json!(s) && r["end"] == json!(e))
            .count()
    };
    let (out, inc) = (shown(http, s), shown(http, e));
    let (st, r) = send(
        http,
        "GET",
        &format!("/apps/graph/relationships/{s}/{t}/{e}"),
        "",
    );
    match st {
        200 => {
            assert_eq!((out, inc), (1, 1), "{s}-{t}->{e} missing from a list");
            Some(r)
        }
        404 => {
            assert_eq!((out, inc), (0, 0), "{s}-{t}->{e} gone but listed");
            None
        }
        other => panic!("GET relationship: {other}"),
    }
}

#[test]
fn a_crash_at_any_write_of_a_relationship_leaves_it_whole_or_absent_after_repair() {
    let mut rig = Rig::new();
    let mut i = 0;
    let mut pair = |http: &mut Http| {
        i += 1;
        let (a, b) = (format!("a{i}"), format!("b{i}"));
        for n in [&a, &b] {
            ok(
                http,
                "POST",
                "/apps/graph/nodes",
                &format!(r#"{{"id":"{n}"}}"#),
                201,
            );
        }
        (a, b)
    };
    // Create: relationship row (1), outgoing index row (2), incoming index row (3).
    // Update and delete: the same three.
    for op in ["create", "update", "delete"] {
        for n in 1.. {
            let mut http = rig.http();
            let (a, b) = pair(&mut http);
            let rel =
                format!(r#"{{"start":"{a}","type":"t","end":"{b}","properties":{{"v":"1"}}}}"#);
            let one = format!("/apps/graph/relationships/{a}/t/{b}");
            let answer = match op {
                "create" => rig.crash_during(n, "POST", "/apps/graph/relationships", &rel),
                "update" => {
                    ok(&mut http, "POST", "/apps/graph/relationships", &rel, 201);
                    rig.crash_during(n, "PATCH", &one, r#"{"put":{"v":"2"}}"#)
                }
                _ => {
                    ok(&mut http, "POST", "/apps/graph/relationships", &rel, 201);
                    rig.crash_during(n, "DELETE", &one, "")
                }
            };
            let mut http = rig.http();
            let ctx = format!("{op}, crash after write {n}");
            adjacency(&mut http, &a, "t");
            adjacency(&mut http, &b, "t");
            let left = match n {
                1 => 2,
                2 => 1,
                _ => 0,
            };
            let kind = match op {
                "create" => "missing_index_rows_written",
                "update" => "stale_index_rows_rewritten",
                _ => "dangling_index_rows_removed",
            };
            rig.repair_expecting("graph", counts(&[(kind, left)]), &ctx);
            let after = relationship_state(&mut http, &a, "t", &b);
            match op {
                "create" => assert!(after.is_some(), "{ctx}"),
                "update" => {
                    let r = after.unwrap_or_else(|| panic!("{ctx}: gone"));
                    assert_eq!(r["properties"], json!({"v": "2"}), "{ctx}");
                }
                _ => assert_eq!(after, None, "{ctx}"),
            }
            if answer.is_some() {
                break;
            }
            assert!(n < 10, "{op} never finished");
        }
    }
}

#[test]
fn a_crash_inside_a_cascade_delete_hides_the_node_and_repair_finishes_it() {
    let mut rig = Rig::new();
    for n in 1.. {
        let mut http = rig.http();
        let (h, x, y) = (format!("h{n}"), format!("x{n}"), format!("y{n}"));
        for id in [&h, &x, &y] {
            ok(
                &mut http,
                "POST",
                "/apps/graph/nodes",
                &format!(r#"{{"id":"{id}"}}"#),
                201,
            );
        }
        for (s, e) in [(&h, &x), (&y, &h), (&x, &y)] {
            let rel = format!(r#"{{"start":"{s}","type":"t","end":"{e}"}}"#);
            ok(&mut http, "POST", "/apps/graph/relationships", &rel, 201);
        }
        // The node's row (1), then per relationship its row, its two index rows and the
        // node's own index row again (4 each).
        let answer = rig.crash_during(
            n,
            "DELETE",
            &format!("/apps/graph/nodes/{h}?cascade=true"),
            "",
        );
        let mut http = rig.http();
        let ctx = format!("cascade delete, crash after write {n}");
        // Readers: the node is gone, and so is every relationship of it, at once.
        assert_eq!(
            send(&mut http, "GET", &format!("/apps/graph/nodes/{h}"), "").0,
            404,
            "{ctx}"
        );
        for (s, e) in [(&h, &x), (&y, &h)] {
            let path = format!("/apps/graph/relationships/{s}/t/{e}");
            assert_eq!(send(&mut http, "GET", &path, "").0, 404, "{ctx}: {s}->{e}");
        }
        let shown: Vec<Value> = [&x, &y]
            .into_iter()
            .flat_map(|id| adjacency(&mut http, id, "t"))
            .collect();
        assert_eq!(
            shown.len(),
            2,
            "{ctx}: only x->y, from both ends: {shown:?}"
        );
        let report = rig.repair("graph");
        let again = rig.repair("graph");
        assert_eq!(again["changed"], json!(0), "{ctx}: {again:#}");
        if n == 1 {
            assert_eq!(
                report["apps"]["graph"]["counts"],
                json!({"relationships_removed_end_node_gone": 2}),
                "{ctx}: {report:#}"
            );
        }
        // Afterwards no row of the cascade is left: the other nodes can go without cascade.
        assert!(
            relationship_state(&mut http, &x, "t", &y).is_some(),
            "{ctx}"
        );
        ok(
            &mut http,
            "DELETE",
            &format!("/apps/graph/relationships/{x}/t/{y}"),
            "",
            204,
        );
        for id in [&x, &y] {
            ok(
                &mut http,
                "DELETE",
                &format!("/apps/graph/nodes/{id}"),
                "",
                204,
            );
        }
        // A node created again under the same id has no relationships of the old one.
        ok(
            &mut http,
            "POST",
            "/apps/graph/nodes",
            &format!(r#"{{"id":"{h}"}}"#),
            201,
        );
        assert!(adjacency(&mut http, &h, "t").is_empty(), "{ctx}");
        if answer.is_some() {
            assert_eq!(answer, Some(204), "{ctx}");
            break;
        }
        assert!(n < 20, "the cascade delete never finished");
    }
}

// ---- one-row writes -----------------------------------------------------------------------

#[test]
fn an_action_or_a_hit_cut_by_a_crash_leaves_nothing_to_repair() {
    let mut rig = Rig::new();
    // An action: its id from the sequence row (1), then its row (2).
    for n in 1.. {
        let user = 700 + n;
        let path = format!("/apps/actions/users/{user}");
        let answer = rig.crash_during(n, "POST", &path, r#"{"name":"login"}"#);
        let mut http = rig.http();
        let listed = list_all(&mut http, &path, "actions");
        assert_eq!(
            listed.len(),
            usize::from(n >= 2),
            "action, crash after write {n}"
        );
        let report = rig.repair("actions");
        assert_eq!(report["changed"], json!(0), "{report:#}");
        if answer.is_some() {
            break;
        }
        assert!(n < 10);
    }
    // A hit: one atomic increment of three cells, counted or not.
    let answer = rig.crash_during(
        1,
        "POST",
        "/apps/counter/hits",
        r#"{"url":"http://a.example.jp/x"}"#,
    );
    assert_eq!(answer, None, "the hit's one write is the crash point");
    let mut http = rig.http();
    let total = ok(
        &mut http,
        "GET",
        "/apps/counter/total?domain=a.example.jp",
        "",
        200,
    );
    assert_eq!(total["total"], json!(1), "{total}");
    let report = rig.repair("counter");
    assert_eq!(report["changed"], json!(0), "{report:#}");
}
