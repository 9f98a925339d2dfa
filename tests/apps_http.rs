//! The applications over real HTTP, served by a multi-worker `HttpServer` (as `main` runs it) and
//! driven by 32 OS threads at once, so handlers truly run in parallel on several threads:
//! create/patch/delete storms on one relationship, concurrent creates, concurrent hits.

mod support;

use actix_web::dev::ServerHandle;
use actix_web::{web, App, HttpServer};
use kura::state::{AppState, Limits};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use support::store;

/// One HTTP/1.1 request on a fresh connection: `(status, JSON body or Null)`.
fn http(addr: SocketAddr, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: kura\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("receive");
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|_| panic!("{status}: not JSON: {body:?}"))
    };
    (status, json)
}

/// Serves the routes on a loopback port with 4 workers, as `main` does; stop it with the handle.
fn serve(kura: &kura_backend::Store) -> (SocketAddr, ServerHandle) {
    let data = web::Data::new(AppState::new(kura.clone(), Limits::default()));
    let server =
        HttpServer::new(move || App::new().app_data(data.clone()).configure(kura::configure))
            .workers(4)
            .bind(("127.0.0.1", 0))
            .expect("bind");
    let addr = server.addrs()[0];
    let server = server.run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    (addr, handle)
}

/// Runs `f(i)` on `n` threads released together; results in `i` order.
fn parallel<T: Send + 'static>(n: usize, f: impl Fn(usize) -> T + Send + Sync + 'static) -> Vec<T> {
    let f = Arc::new(f);
    let barrier = Arc::new(Barrier::new(n));
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let (f, barrier) = (Arc::clone(&f), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                f(i)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("request thread"))
        .collect()
}

fn rels(v: &Value) -> Vec<Value> {
    v["relationships"].as_array().cloned().unwrap_or_default()
}

#[actix_web::test]
async fn parallel_storms_over_http_keep_the_graph_and_counter_exact() {
    let s = store().await;
    let (addr, handle) = serve(&s.kura);

    let failures = actix_web::rt::task::spawn_blocking(move || {
        let mut failures = Vec::new();
        for id in ["m", "n"] {
            assert_eq!(http(addr, "POST", "/apps/graph/nodes", Some(json!({"id": id}))).0, 201);
        }
        let mut alive = 0i64;
        for round in 0..30 {
            let results = parallel(32, move |i| match i % 4 {
                0 => http(addr, "POST", "/apps/graph/relationships",
                          Some(json!({"start": "m", "type": "t", "end": "n", "properties": {"c": i.to_string()}}))).0,
                1 => http(addr, "DELETE", "/apps/graph/relationships/m/t/n", None).0,
                _ => http(addr, "PATCH", "/apps/graph/relationships/m/t/n",
                          Some(json!({"put": {"v": format!("{round}-{i}")}}))).0,
            });
            let (status, row) = http(addr, "GET", "/apps/graph/relationships/m/t/n", None);
            let alive_now = i64::from(status == 200);
            let net = results.iter().filter(|s| **s == 201).count() as i64
                - results.iter().filter(|s| **s == 204).count() as i64;
            if net != alive_now - alive {
                failures.push(format!("round {round}: 201s - 204s = {net}, alive {alive} -> {alive_now}"));
            }
            alive = alive_now;
            let want = if status == 200 { vec![row] } else { Vec::new() };
            let out = rels(&http(addr, "GET", "/apps/graph/nodes/m/relationships?type=t", None).1);
            let inc = rels(&http(addr, "GET", "/apps/graph/nodes/n/relationships?type=t&direction=incoming", None).1);
            if out != want || inc != want {
                failures.push(format!("round {round}: row {want:?}, outgoing {out:?}, incoming {inc:?}"));
            }
        }
        for round in 0..5 {
            let created = parallel(32, move |_| {
                http(addr, "POST", "/apps/graph/nodes", Some(json!({"id": format!("c{round}")}))).0
            });
            if created.iter().filter(|s| **s == 201).count() != 1 {
                failures.push(format!("node create round {round}: {created:?}"));
            }
        }
        let hits = parallel(32, move |_| {
            (0..10)
                .map(|_| http(addr, "POST", "/apps/counter/hits", Some(json!({"url": "http://x.example.jp/h"}))).0)
                .filter(|s| *s == 200)
                .count()
        });
        let total = http(addr, "GET", "/apps/counter/total?domain=example.jp", None).1;
        if hits.iter().sum::<usize>() != 320 || total["total"] != 320 {
            failures.push(format!("hits {hits:?}, total {total}"));
        }
        failures
    })
    .await
    .expect("client threads");
    handle.stop(true).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Articles posted at once by many threads for one user: `article_id` increases in list order
/// (`post_at` descending lists the largest id first), not only across separate requests.
#[actix_web::test]
async fn concurrent_posts_of_one_user_list_with_ids_in_posting_order() {
    let s = store().await;
    let (addr, handle) = serve(&s.kura);
    let listed = actix_web::rt::task::spawn_blocking(move || {
        let posted = parallel(16, move |i| {
            (0..25)
                .map(|k| {
                    let body = json!({"title": format!("{i}-{k}"), "content": "c"});
                    http(addr, "POST", "/apps/blog/users/9/articles", Some(body)).0
                })
                .filter(|s| *s == 201)
                .count()
        });
        assert_eq!(posted.iter().sum::<usize>(), 400);
        http(addr, "GET", "/apps/blog/users/9/articles?limit=1000", None).1
    })
    .await
    .expect("client threads");
    handle.stop(true).await;
    let articles = listed["articles"].as_array().expect("articles");
    assert_eq!(articles.len(), 400);
    let ids: Vec<u64> = articles
        .iter()
        .map(|a| a["article_id"].as_u64().expect("id"))
        .collect();
    let inversions = ids.windows(2).filter(|w| w[0] < w[1]).count();
    assert_eq!(inversions, 0, "newest first: {ids:?}");
}
