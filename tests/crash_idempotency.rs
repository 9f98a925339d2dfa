//! `Idempotency-Key` across `kill -9` of the real `kura` binary (`sync` durability): a client
//! that did not get an answer retries with the same key after the restart, and every increment
//! then counts exactly once — whether or not the server had applied it before dying.
//!
//! Writers send keyed increments (one key per request) to one counter; when the acknowledged
//! count reaches a random target, the writer that reached it kills the server while the others
//! are mid-request. After the restart every request is retried with its key: the counter must
//! equal the number of distinct requests, and a retry of an acknowledged request must answer the
//! same new value as the first time.

mod server_harness;

use server_harness::{b64, create_table, Http, Server};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

const HEADERS: [(&str, &str); 2] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json"),
];

fn body() -> String {
    format!(
        "{{\"Row\":[{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"{}\",\"$\":\"{}\"}}]}}]}}",
        b64(b"counter"),
        b64(b"cf:n"),
        b64(b"1")
    )
}

/// One keyed increment with `rr=true`: `Some(body)` if answered 200, `None` if no answer.
fn increment(http: &mut Http, key: &str) -> Option<Vec<u8>> {
    let mut headers = HEADERS.to_vec();
    headers.push(("Idempotency-Key", key));
    match http.request(
        "POST",
        "/t/counter?check=increment&rr=true",
        &headers,
        body().as_bytes(),
    ) {
        Ok(r) => {
            assert_eq!(r.status, 200, "increment {key}: {}", r.text());
            Some(r.body)
        }
        Err(_) => None,
    }
}

fn counter(http: &mut Http) -> i64 {
    let r = http
        .request("GET", "/t/counter/cf:n", &[], b"")
        .expect("read the counter");
    assert_eq!(r.status, 200, "{}", r.text());
    i64::from_be_bytes(r.body.as_slice().try_into().expect("8-byte counter"))
}

#[test]
fn retried_increments_count_exactly_once_across_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Mutex::new(Server::start(dir.path(), &["--durability", "sync"]));
    let addr = server.lock().expect("server lock").addr;
    create_table(
        &mut server.lock().expect("server lock").client(),
        "t",
        &["cf"],
    );
    let target = 20 + rand::random::<u64>() % 60;
    let acked = AtomicU64::new(0);
    let killed = AtomicBool::new(false);
    // key -> first answer (None: no answer, outcome unknown).
    let sent: Mutex<BTreeMap<String, Option<Vec<u8>>>> = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for w in 0..4 {
            let (server, acked, killed, sent) = (&server, &acked, &killed, &sent);
            s.spawn(move || {
                let Ok(mut http) = Http::connect(addr) else {
                    return;
                };
                for i in 0.. {
                    if killed.load(Ordering::SeqCst) {
                        return;
                    }
                    let key = format!("w{w}-{i}");
                    let answer = increment(&mut http, &key);
                    let got = answer.is_some();
                    sent.lock().expect("sent lock").insert(key, answer);
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
    assert!(sent.len() as u64 >= target);
    let unknown = sent.values().filter(|a| a.is_none()).count();
    println!(
        "{} requests, {unknown} without an answer at the kill",
        sent.len()
    );
    for (key, first) in &sent {
        let again = increment(&mut http, key).expect("answered after the restart");
        if let Some(first) = first {
            assert_eq!(
                &again, first,
                "retry of acknowledged {key} answers its first value"
            );
        }
    }
    assert_eq!(
        counter(&mut http),
        sent.len() as i64,
        "every request counted exactly once"
    );
    // And once more after a second crash: the keys were recovered, not just remembered.
    server.lock().expect("server lock").restart();
    let mut http = server.lock().expect("server lock").client();
    for key in sent.keys().take(5) {
        increment(&mut http, key).expect("answered");
    }
    assert_eq!(counter(&mut http), sent.len() as i64);
}
