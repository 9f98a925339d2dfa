//! Thread per core, the HTTP workers start before the store (its regions run on their threads),
//! so the port is open while the store opens. What a user relies on: a request that arrives
//! then is not refused; it waits and is answered once the store is open, and data requests are
//! served by regions that live on the workers' threads.

mod server_harness;

use clap::Parser;
use kura::config::Config;
use kura::server::build_server;
use kura::state::{AppState, StateSource};
use kura_actors::Kura;
use server_harness::{create_table, free_port, wait_until_async, Http, Response};
use std::net::SocketAddr;
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sends one request from a thread of its own (the test's thread runs the router).
fn request(
    addr: SocketAddr,
    method: &'static str,
    path: String,
    body: Vec<u8>,
) -> Receiver<Response> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut http = Http::connect(addr).expect("connect");
        let r = http
            .request(
                method,
                &path,
                &[
                    ("Content-Type", "application/octet-stream"),
                    ("Accept", "application/octet-stream"),
                ],
                &body,
            )
            .expect("an answer");
        let _ = tx.send(r);
    });
    rx
}

/// The answer, polling so that the actix system on this thread keeps running meanwhile; `None`
/// if none came within `within` (a window some checks expect to pass unanswered).
async fn answer(rx: &Receiver<Response>, within: Duration) -> Option<Response> {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Ok(r) = rx.try_recv() {
            return Some(r);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

#[actix_web::test]
async fn a_request_arriving_before_the_store_is_open_waits_and_is_then_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let config = Config::parse_from([
        "kura",
        "--bind",
        &addr.to_string(),
        "--data-dir",
        dir.path().to_str().expect("utf-8 path"),
        "--workers",
        "2",
    ]);
    let source = StateSource::pending();
    let server = build_server(&config, Arc::clone(&source), true, None).expect("bind");
    let handle = server.handle();
    let served = actix_rt::spawn(server);
    wait_until_async("the workers register", Duration::from_secs(30), || {
        source.arbiters().len() >= 2
    })
    .await;

    let early = request(addr, "GET", "/healthz".into(), Vec::new());
    assert!(
        answer(&early, Duration::from_millis(300)).await.is_none(),
        "answered before the store was open"
    );

    let kura = Kura::start_on(config.kura_config(), source.arbiters())
        .await
        .expect("store opens on the workers' arbiters");
    source.set(AppState::new(kura.clone().into(), config.limits()));
    let r = answer(&early, Duration::from_secs(10))
        .await
        .expect("the waiting request is answered once the store is open");
    assert_eq!(r.status, 200);

    // Data goes through regions on the workers' threads.
    let made = {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut http = Http::connect(addr).expect("connect");
            create_table(&mut http, "t", &["cf"]);
            let _ = tx.send(());
        });
        rx
    };
    wait_until_async("the table is created", Duration::from_secs(10), || {
        made.try_recv().is_ok()
    })
    .await;
    let put = request(addr, "PUT", "/t/row1/cf:a".into(), b"hello".to_vec());
    let r = answer(&put, Duration::from_secs(10))
        .await
        .expect("put answered");
    assert_eq!(r.status, 200, "{}", r.text());
    let get = request(addr, "GET", "/t/row1/cf:a".into(), Vec::new());
    let r = answer(&get, Duration::from_secs(10))
        .await
        .expect("get answered");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));

    kura.shutdown().await.expect("regions close");
    handle.stop(true).await;
    served.await.expect("server task").expect("server ran");
}
