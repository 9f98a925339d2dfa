//! Crash tests: `kill -9` of the real `kura` binary while concurrent clients write over HTTP with
//! `sync` durability, then a restart over the same data directory.
//!
//! What a user relies on (RELIABILITY.md, "the contract", items 1, 3 and 5):
//! 1. Every write that was answered 200 is readable after the crash and restart, byte for byte,
//!    across repeated crash/restart cycles on the same data directory.
//! 2. A row mutation is atomic: a row written with two cells shows both or neither, even when the
//!    server died while the write was in flight.
//! 3. A counter holds every increment answered 200, and nothing that was answered with an error;
//!    only increments whose connection was cut (unknown outcome) may or may not be in it.
//!
//! The kill happens at a random point: when the acknowledged-write count reaches a random target,
//! the writer that reached it kills the server while the other writers are mid-request. The short
//! form (10 trials) runs in CI; `scripts/soak.sh` runs the long form through the `KURA_SOAK_*`
//! environment variables (trials, target ranges, durability mode). Restart times are printed
//! (`cargo test --test crash_kill9 -- --nocapture`), never asserted.

mod server_harness;

use base64::Engine as _;
use rand::{Rng, SeedableRng};
use server_harness::{b64, create_table, Http, Server};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

const JSON: (&str, &str) = ("Content-Type", "application/json");
const ACCEPT_JSON: (&str, &str) = ("Accept", "application/json");

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn durability() -> String {
    std::env::var("KURA_SOAK_DURABILITY").unwrap_or_else(|_| "sync".to_string())
}

fn seed() -> u64 {
    let s = env_or("KURA_SOAK_SEED", rand::random::<u64>());
    println!("crash test seed {s} (set KURA_SOAK_SEED={s} to replay the kill points)");
    s
}

/// The outcome of one write request, as the client saw it.
enum Outcome {
    /// 200: the server promised durability.
    Acked,
    /// Any other status: the server said it did not apply the write.
    Refused(u16),
    /// No answer (connection cut, typically by the kill): applied or not, never partly.
    Unknown,
}

fn send(
    http: &mut Option<Http>,
    server_addr: std::net::SocketAddr,
    path: &str,
    body: &[u8],
) -> Outcome {
    if http.is_none() {
        match Http::connect(server_addr) {
            Ok(c) => *http = Some(c),
            Err(_) => return Outcome::Unknown,
        }
    }
    let conn = http.as_mut().expect("connected above");
    match conn.request("PUT", path, &[JSON], body) {
        Ok(r) if r.status == 200 => Outcome::Acked,
        Ok(r) => Outcome::Refused(r.status),
        Err(_) => {
            *http = None;
            Outcome::Unknown
        }
    }
}

/// A CellSet putting `value` into both `cf:a` and `cf:b` of `row`.
fn two_cell_body(row: &str, value: &str) -> Vec<u8> {
    format!(
        "{{\"Row\":[{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"{}\",\"$\":\"{}\"}},\
         {{\"column\":\"{}\",\"$\":\"{}\"}}]}}]}}",
        b64(row.as_bytes()),
        b64(b"cf:a"),
        b64(value.as_bytes()),
        b64(b"cf:b"),
        b64(value.as_bytes()),
    )
    .into_bytes()
}

/// The cells of a JSON CellSet answer: column -> value, for the first row.
fn parse_row(body: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("bad JSON: {e}"))?;
    let dec = |s: &serde_json::Value| -> Result<Vec<u8>, String> {
        let s = s.as_str().ok_or("expected a base64 string")?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| e.to_string())
    };
    let row = v["Row"].get(0).ok_or("no Row in the answer")?;
    let mut out = BTreeMap::new();
    for cell in row["Cell"].as_array().ok_or("no Cell array")? {
        let col = String::from_utf8_lossy(&dec(&cell["column"])?).into_owned();
        // With one version requested, the first cell of a column is its newest version.
        out.entry(col).or_insert(dec(&cell["$"])?);
    }
    Ok(out)
}

/// Reads a row; `Ok(None)` when the server answers 404 (no cells).
fn read_row(
    http: &mut Http,
    table: &str,
    row: &str,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, String> {
    let r = http
        .request("GET", &format!("/{table}/{row}"), &[ACCEPT_JSON], b"")
        .map_err(|e| format!("GET /{table}/{row}: {e}"))?;
    match r.status {
        200 => parse_row(&r.body).map(Some),
        404 => Ok(None),
        s => Err(format!("GET /{table}/{row}: status {s}: {}", r.text())),
    }
}

fn value_for(trial: usize, writer: usize, seq: u64) -> String {
    // ~100 bytes so that frames are not trivially small.
    format!("t{trial}-w{writer}-s{seq}-{}", "x".repeat(80))
}

fn row_for(trial: usize, writer: usize, seq: u64) -> String {
    format!("r{trial:03}-{writer:02}-{seq:06}")
}

/// Past this many acknowledged writes from earlier trials, a restart re-checks a random sample
/// of them of this size (the last restart re-checks everything).
const FULL_RECHECK_LIMIT: usize = 20_000;

/// Per trial and writer: the acknowledged sequence numbers and the ones in flight at the kill.
#[derive(Default)]
struct WriterLog {
    acked: Vec<u64>,
    unknown: Vec<u64>,
    refused: Vec<(u64, u16)>,
}

#[test]
fn acknowledged_writes_survive_kill_9_and_restart() {
    run_write_trials(false);
}

#[test]
fn acknowledged_writes_survive_kill_9_during_flush_compaction_and_split() {
    run_write_trials(true);
}

/// Flush, minor and major compaction, and region splits in a loop through `/admin/`, until the
/// kill (or until `stop`). Returns the statuses it saw ("op status" -> count) for the report.
fn admin_loop(addr: std::net::SocketAddr, table: &str, stop: &AtomicBool) -> BTreeMap<String, u64> {
    let mut seen = BTreeMap::new();
    let Ok(mut http) = Http::connect(addr) else {
        return seen;
    };
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        i += 1;
        let (label, path) = match i % 4 {
            0 => ("flush", format!("/admin/tables/{table}/flush")),
            1 => (
                "compact",
                format!("/admin/tables/{table}/compact?major=false"),
            ),
            2 => (
                "major-compact",
                format!("/admin/tables/{table}/compact?major=true"),
            ),
            _ => match largest_region(&mut http, table) {
                Some(id) => ("split", format!("/admin/tables/{table}/regions/{id}/split")),
                None => continue,
            },
        };
        match http.request("POST", &path, &[], b"") {
            Ok(r) => *seen.entry(format!("{label} {}", r.status)).or_insert(0) += 1,
            Err(_) => break, // the kill
        }
    }
    seen
}

/// The id of the splittable region of `table` holding the most cells, from
/// `/admin/tables/{t}/regions`.
fn largest_region(http: &mut Http, table: &str) -> Option<u64> {
    let r = http
        .request("GET", &format!("/admin/tables/{table}/regions"), &[], b"")
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
    v["regions"]
        .as_array()?
        .iter()
        .filter(|g| g["bucket_end"].as_u64() > g["bucket_start"].as_u64().map(|b| b + 1))
        .max_by_key(|g| g["cells"].as_u64().unwrap_or(0))
        .and_then(|g| g["id"].as_u64())
}

fn run_write_trials(with_admin_ops: bool) {
    let trials = env_or("KURA_SOAK_TRIALS", 10) as usize;
    let writers = env_or("KURA_SOAK_WRITERS", 8) as usize;
    let min_target = env_or("KURA_SOAK_MIN_ACKS", 50);
    let max_target = env_or("KURA_SOAK_MAX_ACKS", 600);
    let mode = durability();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let what = if with_admin_ops {
        "writes + flush/compact/split"
    } else {
        "writes"
    };

    let dir = tempfile::tempdir().expect("tempdir");
    let server = Mutex::new(Server::start(dir.path(), &["--durability", &mode]));
    let addr = server.lock().expect("server lock").addr;
    create_table(
        &mut server.lock().expect("server lock").client(),
        "crash",
        &["cf"],
    );

    // Every acknowledged (trial, writer, seq) of every trial so far.
    let mut history: Vec<(usize, Vec<WriterLog>)> = Vec::new();
    let mut restarts = Vec::new();

    for trial in 0..trials {
        let target = rng.gen_range(min_target..=max_target);
        let acked_total = AtomicU64::new(0);
        let killed = AtomicBool::new(false);
        let mut admin_seen = BTreeMap::new();
        let stop_admin = AtomicBool::new(false);
        let logs: Vec<WriterLog> = std::thread::scope(|s| {
            let admin = with_admin_ops.then(|| {
                let stop = &stop_admin;
                s.spawn(move || admin_loop(addr, "crash", stop))
            });
            let handles: Vec<_> = (0..writers)
                .map(|w| {
                    let (acked_total, killed, server) = (&acked_total, &killed, &server);
                    s.spawn(move || {
                        let mut log = WriterLog::default();
                        let mut http = None;
                        for seq in 0..1_000_000u64 {
                            let row = row_for(trial, w, seq);
                            let body = two_cell_body(&row, &value_for(trial, w, seq));
                            match send(&mut http, addr, "/crash/fakerow", &body) {
                                Outcome::Acked => {
                                    log.acked.push(seq);
                                    let n = acked_total.fetch_add(1, Ordering::SeqCst) + 1;
                                    if n == target && !killed.swap(true, Ordering::SeqCst) {
                                        server.lock().expect("server lock").kill();
                                    }
                                }
                                Outcome::Refused(status) => {
                                    log.refused.push((seq, status));
                                    if log.refused.len() > 1_000 {
                                        break; // a broken server: the kill assertion reports it
                                    }
                                }
                                Outcome::Unknown => {
                                    log.unknown.push(seq);
                                    break;
                                }
                            }
                            if killed.load(Ordering::SeqCst) && http.is_none() {
                                break;
                            }
                        }
                        log
                    })
                })
                .collect();
            let logs = handles
                .into_iter()
                .map(|h| h.join().expect("writer thread"))
                .collect();
            stop_admin.store(true, Ordering::SeqCst);
            if let Some(a) = admin {
                admin_seen = a.join().expect("admin thread");
            }
            logs
        });
        let acked: usize = logs.iter().map(|l| l.acked.len()).sum();
        let unknown: usize = logs.iter().map(|l| l.unknown.len()).sum();
        let refused: Vec<_> = logs
            .iter()
            .flat_map(|l| l.refused.iter().copied())
            .collect();
        assert!(
            killed.load(Ordering::SeqCst),
            "trial {trial}: the server was never killed: only {acked} writes acknowledged \
             (target {target}); refused: {refused:?}"
        );
        history.push((trial, logs));

        let took = server.lock().expect("server lock").restart();
        restarts.push(took);
        println!(
            "[{what}] trial {trial}: killed after {acked} acknowledged writes ({unknown} in \
             flight, {} refused); restart took {took:?}; admin ops: {admin_seen:?}",
            refused.len()
        );

        // Verify every acknowledged write of this trial and, while they are few (always in CI),
        // of every earlier trial; past FULL_RECHECK_LIMIT (soak sizes) a random sample of the
        // earlier ones, and everything again after the last trial. In-flight rows of this trial
        // must be whole or absent, refused ones absent.
        let mut http = server.lock().expect("server lock").client();
        let mut checked = 0usize;
        let earlier: usize = history[..history.len() - 1]
            .iter()
            .flat_map(|(_, logs)| logs.iter().map(|l| l.acked.len()))
            .sum();
        let full = earlier <= FULL_RECHECK_LIMIT || trial + 1 == trials;
        for (t, logs) in &history {
            let current = *t == trial;
            for (w, log) in logs.iter().enumerate() {
                for &seq in &log.acked {
                    if !current && !full && rng.gen_range(0..earlier) >= FULL_RECHECK_LIMIT {
                        continue;
                    }
                    let row = row_for(*t, w, seq);
                    let want = value_for(*t, w, seq).into_bytes();
                    let got = read_row(&mut http, "crash", &row)
                        .unwrap_or_else(|e| panic!("after trial {trial}: {e}"));
                    let cells = got.unwrap_or_else(|| {
                        panic!("after trial {trial}: acknowledged write {row} (trial {t}) is lost")
                    });
                    assert_eq!(
                        cells.get("cf:a"),
                        Some(&want),
                        "row {row}: cf:a after restart"
                    );
                    assert_eq!(
                        cells.get("cf:b"),
                        Some(&want),
                        "row {row}: cf:b after restart"
                    );
                    checked += 1;
                }
                if !current {
                    continue;
                }
                for &seq in &log.unknown {
                    let row = row_for(*t, w, seq);
                    if let Some(cells) = read_row(&mut http, "crash", &row)
                        .unwrap_or_else(|e| panic!("after trial {trial}: {e}"))
                    {
                        let want = value_for(*t, w, seq).into_bytes();
                        assert!(
                            cells.get("cf:a") == Some(&want) && cells.get("cf:b") == Some(&want),
                            "in-flight row {row} is torn after the crash: {cells:?}"
                        );
                    }
                }
                for &(seq, status) in &log.refused {
                    let row = row_for(*t, w, seq);
                    let got = read_row(&mut http, "crash", &row)
                        .unwrap_or_else(|e| panic!("after trial {trial}: {e}"));
                    assert!(
                        got.is_none(),
                        "row {row} was refused ({status}) but is present"
                    );
                }
            }
        }
        println!("[{what}] trial {trial}: {checked} acknowledged writes verified");
    }
    let max = restarts.iter().max().copied().unwrap_or_default();
    let mean = restarts.iter().sum::<Duration>() / restarts.len().max(1) as u32;
    println!(
        "[{what}] restart to /healthz over {trials} trials ({mode}): mean {mean:?}, max {max:?}"
    );
}

#[test]
fn acknowledged_increments_survive_kill_9_and_no_refused_one_is_applied() {
    let trials = env_or("KURA_SOAK_TRIALS", 10) as usize;
    let writers = env_or("KURA_SOAK_WRITERS", 8) as usize;
    let min_target = env_or("KURA_SOAK_MIN_ACKS", 50);
    let max_target = env_or("KURA_SOAK_MAX_ACKS", 600);
    let mode = durability();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());

    let dir = tempfile::tempdir().expect("tempdir");
    let server = Mutex::new(Server::start(dir.path(), &["--durability", &mode]));
    let addr = server.lock().expect("server lock").addr;
    create_table(
        &mut server.lock().expect("server lock").client(),
        "ctr",
        &["cf"],
    );
    let body = format!(
        "{{\"Row\":[{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"{}\",\"$\":\"{}\"}}]}}]}}",
        b64(b"counter"),
        b64(b"cf:n"),
        b64(b"1")
    )
    .into_bytes();

    let (mut acked_sum, mut unknown_sum, mut refused_sum) = (0u64, 0u64, 0u64);
    let mut last_value = 0i64;
    for trial in 0..trials {
        let target = rng.gen_range(min_target..=max_target);
        let acked_total = AtomicU64::new(0);
        let unknown_total = AtomicU64::new(0);
        let refused_total = AtomicU64::new(0);
        let killed = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..writers {
                let (acked_total, unknown_total, refused_total, killed, server, body) = (
                    &acked_total,
                    &unknown_total,
                    &refused_total,
                    &killed,
                    &server,
                    &body,
                );
                s.spawn(move || {
                    let mut http = None;
                    for _ in 0..1_000_000u64 {
                        match send(&mut http, addr, "/ctr/counter?check=increment", body) {
                            Outcome::Acked => {
                                let n = acked_total.fetch_add(1, Ordering::SeqCst) + 1;
                                if n == target && !killed.swap(true, Ordering::SeqCst) {
                                    server.lock().expect("server lock").kill();
                                }
                            }
                            Outcome::Refused(_) => {
                                if refused_total.fetch_add(1, Ordering::SeqCst) > 10_000 {
                                    break; // a broken server: the kill assertion reports it
                                }
                            }
                            Outcome::Unknown => {
                                unknown_total.fetch_add(1, Ordering::SeqCst);
                                break;
                            }
                        }
                    }
                });
            }
        });
        assert!(
            killed.load(Ordering::SeqCst),
            "trial {trial}: the server was never killed"
        );
        acked_sum += acked_total.load(Ordering::SeqCst);
        unknown_sum += unknown_total.load(Ordering::SeqCst);
        refused_sum += refused_total.load(Ordering::SeqCst);

        let took = server.lock().expect("server lock").restart();
        let mut http = server.lock().expect("server lock").client();
        let r = http
            .request("GET", "/ctr/counter/cf:n", &[ACCEPT_JSON], b"")
            .expect("read the counter");
        assert_eq!(r.status, 200, "counter after trial {trial}: {}", r.text());
        let cells = parse_row(&r.body).expect("counter CellSet");
        let raw = cells.get("cf:n").expect("cf:n present");
        let bytes: [u8; 8] = raw
            .as_slice()
            .try_into()
            .expect("an 8-byte big-endian counter");
        let value = i64::from_be_bytes(bytes);
        println!(
            "trial {trial}: counter {value}; acknowledged {acked_sum}, in flight {unknown_sum}, \
             refused {refused_sum} so far; restart took {took:?}"
        );
        assert!(
            value as u64 >= acked_sum,
            "trial {trial}: counter {value} lost acknowledged increments (acknowledged {acked_sum})"
        );
        assert!(
            value as u64 <= acked_sum + unknown_sum,
            "trial {trial}: counter {value} holds more than acknowledged {acked_sum} + in flight \
             {unknown_sum}: a refused or phantom increment was applied"
        );
        assert!(
            value >= last_value,
            "counter went backwards: {last_value} -> {value}"
        );
        last_value = value;
    }
}
