//! "Newest first" across restarts of the real `kura` binary: the applications' creation times
//! come from a clock that may run ahead of the wall clock (a burst of creations, a wall clock
//! stepped back); after a restart, crash or clean, an item created next must still be the
//! newest (src/apps/clock.rs, the lease in `<data dir>/apps-clock`).

mod server_harness;

use server_harness::{Http, Server};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const JSON: (&str, &str) = ("Content-Type", "application/json");

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// Posts an article for user 7 and returns its `post_at`.
fn post_article(http: &mut Http, title: &str) -> i64 {
    let body = serde_json::json!({"title": title, "content": "c"}).to_string();
    let r = http
        .request(
            "POST",
            "/apps/blog/users/7/articles",
            &[JSON],
            body.as_bytes(),
        )
        .expect("post");
    assert_eq!(r.status, 201, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
    v["post_at"].as_i64().expect("post_at")
}

fn titles_newest_first(http: &mut Http) -> Vec<String> {
    let r = http
        .request("GET", "/apps/blog/users/7/articles", &[], b"")
        .expect("list");
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
    v["articles"]
        .as_array()
        .expect("articles")
        .iter()
        .map(|a| a["title"].as_str().expect("title").to_string())
        .collect()
}

fn stored_lease(server: &Server) -> i64 {
    std::fs::read_to_string(server.data_dir.join("apps-clock"))
        .expect("the lease file")
        .trim()
        .parse()
        .expect("a number")
}

#[test]
fn an_article_created_after_a_restart_is_the_newest_even_when_the_clock_had_run_ahead() {
    let dir = tempfile::tempdir().expect("tempdir");
    // What an earlier run leaves after a burst of creations ran its clock a minute ahead.
    let ahead = wall_ms() + 60_000;
    std::fs::create_dir_all(dir.path()).expect("data dir");
    std::fs::write(dir.path().join("apps-clock"), format!("{ahead}\n")).expect("lease");
    let mut server = Server::start(dir.path(), &[]);
    let first = post_article(&mut server.client(), "before the crash");
    assert!(
        first > ahead,
        "{first} is not above the earlier run's {ahead}"
    );

    // kill -9: the lease on disk still covers every time handed out.
    server.kill();
    assert!(stored_lease(&server) >= first);
    server.restart();
    let second = post_article(&mut server.client(), "after the crash");
    assert!(second > first, "{second} after {first}");

    // A clean shutdown leaves the exact last time, not a lease ahead of it.
    let status = server
        .terminate(Duration::from_secs(60))
        .expect("exits after SIGTERM");
    assert!(status.success(), "{status}");
    let stored = stored_lease(&server);
    assert!(
        (second..second + 1_000).contains(&stored),
        "{stored} after {second}"
    );
    server.restart();
    let third = post_article(&mut server.client(), "after the clean restart");
    assert!(third > second, "{third} after {second}");
    assert_eq!(
        titles_newest_first(&mut server.client()),
        [
            "after the clean restart",
            "after the crash",
            "before the crash"
        ]
    );
}
