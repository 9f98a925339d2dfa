//! `Idempotency-Key` on the applications' writes across `kill -9` of the real `kura` binary
//! (`sync` durability): writers send keyed counter hits, action creates, article creates and
//! relationship creates; one of them kills the server while the others are mid-request. After
//! the restart every request is retried with its key: each acknowledged request answers its
//! first answer again, and every request, answered or not, is applied exactly once (counts,
//! list lengths and ids say so), including those the kill cut between their rows.

mod server_harness;

use server_harness::{Http, Server};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Most requests one writer sends (the kill comes well before).
const MAX_PER_WRITER: usize = 160;

/// The request `i` of writer `w` sends: `(path, body)`, by kind.
fn request(kind: usize, w: usize, i: usize) -> (String, String) {
    match kind {
        0 => (
            "/apps/counter/hits".into(),
            r#"{"url":"http://blog.example.co.jp/a"}"#.into(),
        ),
        1 => (
            "/apps/actions/users/1".into(),
            format!(r#"{{"name":"w{w}-{i}"}}"#),
        ),
        2 => (
            "/apps/blog/users/2/articles".into(),
            format!(r#"{{"title":"w{w}-{i}","content":"c","category_id":1}}"#),
        ),
        _ => (
            "/apps/graph/relationships".into(),
            format!(r#"{{"start":"hub","type":"t","end":"n{w}-{i}"}}"#),
        ),
    }
}

/// Sends one keyed request: `Some((status, body))` if answered, `None` if not.
fn send(http: &mut Http, path: &str, body: &str, key: &str) -> Option<(u16, Vec<u8>)> {
    let headers = [
        ("Content-Type", "application/json"),
        ("Idempotency-Key", key),
    ];
    http.request("POST", path, &headers, body.as_bytes())
        .ok()
        .map(|r| (r.status, r.body))
}

fn get_json(http: &mut Http, path: &str) -> serde_json::Value {
    let r = http.request("GET", path, &[], b"").expect("answered");
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    serde_json::from_slice(&r.body).expect("JSON")
}

/// Every item of a paged application list.
fn list_all(http: &mut Http, path: &str, field: &str) -> Vec<serde_json::Value> {
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let page = get_json(http, &format!("{path}{sep}limit=1000&after={after}"));
        all.extend(page[field].as_array().expect("a list").iter().cloned());
        match page["next"].as_str() {
            Some(n) => after = n.to_string(),
            None => return all,
        }
    }
}

#[test]
fn retried_application_writes_apply_exactly_once_across_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Mutex::new(Server::start(dir.path(), &["--durability", "sync"]));
    let addr = server.lock().expect("server lock").addr;
    {
        let mut http = server.lock().expect("server lock").client();
        let r = http
            .request(
                "POST",
                "/apps/graph/nodes",
                &[("Content-Type", "application/json")],
                br#"{"id":"hub"}"#,
            )
            .expect("hub node");
        assert_eq!(r.status, 201, "{}", r.text());
        for w in 0..4 {
            for i in (0..MAX_PER_WRITER).filter(|i| (w + i) % 4 == 3) {
                let body = format!(r#"{{"id":"n{w}-{i}"}}"#);
                let headers = [("Content-Type", "application/json")];
                let r = http
                    .request("POST", "/apps/graph/nodes", &headers, body.as_bytes())
                    .expect("end node");
                assert_eq!(r.status, 201, "{}", r.text());
            }
        }
    }
    let target = 40 + rand::random::<u64>() % 80;
    let acked = AtomicU64::new(0);
    let killed = AtomicBool::new(false);
    // key -> (kind, writer, index, first answer or None).
    type Sent = BTreeMap<String, (usize, usize, usize, Option<(u16, Vec<u8>)>)>;
    let sent: Mutex<Sent> = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for w in 0..4 {
            let (server, acked, killed, sent) = (&server, &acked, &killed, &sent);
            s.spawn(move || {
                let Ok(mut http) = Http::connect(addr) else {
                    return;
                };
                for i in 0..MAX_PER_WRITER {
                    if killed.load(Ordering::SeqCst) {
                        return;
                    }
                    let kind = (w + i) % 4;
                    let key = format!("w{w}-{i}");
                    let (path, body) = request(kind, w, i);
                    let answer = send(&mut http, &path, &body, &key);
                    let got = answer.is_some();
                    sent.lock()
                        .expect("sent lock")
                        .insert(key, (kind, w, i, answer));
                    if !got {
                        return; // the server is gone
                    }
                    if acked.fetch_add(1, Ordering::SeqCst) + 1 == target {
                        killed.store(true, Ordering::SeqCst);
                        server.lock().expect("server lock").kill();
                    }
                }
            });
        }
    });
    server.lock().expect("server lock").restart();
    let mut http = server.lock().expect("server lock").client();
    let sent = sent.into_inner().expect("sent lock");
    let unknown = sent.values().filter(|v| v.3.is_none()).count();
    println!(
        "{} requests, {unknown} without an answer at the kill",
        sent.len()
    );
    let mut retried = BTreeMap::new();
    for (key, (kind, w, i, first)) in &sent {
        let (path, body) = request(*kind, *w, *i);
        let again = send(&mut http, &path, &body, key).expect("answered after the restart");
        assert!(
            again.0 == 200 || again.0 == 201,
            "retry of {key}: {} {}",
            again.0,
            String::from_utf8_lossy(&again.1)
        );
        if let Some(first) = first {
            assert_eq!(
                &again, first,
                "retry of acknowledged {key} answers its first answer"
            );
        }
        retried.insert(key.clone(), again);
    }
    let of_kind = |k: usize| sent.values().filter(|v| v.0 == k).count();
    let total = get_json(&mut http, "/apps/counter/total?domain=example.co.jp");
    assert_eq!(total["total"], of_kind(0) as i64, "every hit counted once");
    let actions = list_all(&mut http, "/apps/actions/users/1", "actions");
    assert_eq!(actions.len(), of_kind(1), "every action stored once");
    let articles = list_all(&mut http, "/apps/blog/users/2/articles", "articles");
    assert_eq!(articles.len(), of_kind(2), "every article once");
    let by_category = list_all(
        &mut http,
        "/apps/blog/users/2/articles?category_id=1",
        "articles",
    );
    assert_eq!(by_category, articles, "both lists complete");
    let rels = list_all(
        &mut http,
        "/apps/graph/nodes/hub/relationships?type=t&direction=outgoing",
        "relationships",
    );
    assert_eq!(
        rels.len(),
        of_kind(3),
        "every relationship and its index row once"
    );
    // Each retried create answered the item that is stored.
    for (key, (kind, ..)) in &sent {
        let (_, body) = &retried[key];
        let v: serde_json::Value = serde_json::from_slice(body).expect("JSON answer");
        match kind {
            1 => assert!(actions.contains(&v), "{key}: {v}"),
            2 => assert!(articles.contains(&v), "{key}: {v}"),
            3 => assert!(rels.contains(&v), "{key}: {v}"),
            _ => {}
        }
    }
}
