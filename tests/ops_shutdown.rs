//! Clean shutdown of the real `kura` binary (SIGTERM) while clients write, in both thread
//! layouts: regions on the HTTP workers' threads (the default, `--thread-per-core true`) and
//! regions on threads of their own (`--thread-per-core false`).
//!
//! What a user relies on: SIGTERM under load exits with status 0; every write answered 200
//! before the exit is there after a restart; a write refused during the shutdown is refused
//! with 503 (retry elsewhere or later), never a 500.

mod server_harness;

use server_harness::{b64, create_table, wait_until, Http, Server};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const JSON: (&str, &str) = ("Content-Type", "application/json");
const WRITERS: usize = 4;

fn cell_body(row: &str, value: &str) -> Vec<u8> {
    format!(
        "{{\"Row\":[{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"{}\",\"$\":\"{}\"}}]}}]}}",
        b64(row.as_bytes()),
        b64(b"cf:a"),
        b64(value.as_bytes()),
    )
    .into_bytes()
}

/// What one writer saw: acknowledged rows and refusal statuses.
#[derive(Default)]
struct Seen {
    acked: Vec<String>,
    refused: Vec<u16>,
}

fn writer(addr: std::net::SocketAddr, w: usize, stop: &AtomicBool, acks: &AtomicU64) -> Seen {
    let mut seen = Seen::default();
    let Ok(mut http) = Http::connect(addr) else {
        return seen;
    };
    for seq in 0u64.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let row = format!("w{w}-{seq:06}");
        let body = cell_body(&row, &format!("value of {row}"));
        match http.request("PUT", &format!("/t/{row}/cf:a"), &[JSON], &body) {
            Ok(r) if r.status == 200 => {
                seen.acked.push(row);
                acks.fetch_add(1, Ordering::SeqCst);
            }
            Ok(r) => seen.refused.push(r.status),
            // The server closed the connection (it is going away): nothing more to learn.
            Err(_) => break,
        }
    }
    seen
}

fn sigterm_under_writes_loses_nothing_acknowledged(args: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), args);
    create_table(&mut server.client(), "t", &["cf"]);
    let (stop, acks) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (addr, stop, acks) = (server.addr, Arc::clone(&stop), Arc::clone(&acks));
            std::thread::spawn(move || writer(addr, w, &stop, &acks))
        })
        .collect();
    wait_until("400 writes acknowledged", Duration::from_secs(60), || {
        acks.load(Ordering::SeqCst) >= 400
    });
    let status = server.terminate(Duration::from_secs(60));
    stop.store(true, Ordering::SeqCst);
    let seen: Vec<Seen> = writers
        .into_iter()
        .map(|h| h.join().expect("writer"))
        .collect();
    let status = status.expect("the server exits within a minute of SIGTERM");
    assert!(status.success(), "clean shutdown exits 0, got {status}");
    for s in &seen {
        assert!(
            s.refused.iter().all(|&st| st == 503),
            "writes refused during shutdown answer 503: {:?}",
            s.refused
        );
    }

    server.restart();
    let mut http = server.client();
    let mut checked = 0;
    for row in seen.iter().flat_map(|s| &s.acked) {
        let r = http
            .request(
                "GET",
                &format!("/t/{row}/cf:a"),
                &[("Accept", "application/octet-stream")],
                b"",
            )
            .expect("read back");
        assert_eq!(
            r.status, 200,
            "acknowledged row {row} is there after restart"
        );
        assert_eq!(r.body, format!("value of {row}").into_bytes());
        checked += 1;
    }
    assert!(checked >= 400, "only {checked} writes were acknowledged");
}

#[test]
fn sigterm_under_writes_with_regions_on_the_workers_threads_loses_nothing_acknowledged() {
    sigterm_under_writes_loses_nothing_acknowledged(&["--thread-per-core", "true"]);
}

#[test]
fn sigterm_under_writes_with_regions_on_their_own_threads_loses_nothing_acknowledged() {
    sigterm_under_writes_loses_nothing_acknowledged(&["--thread-per-core", "false"]);
}
