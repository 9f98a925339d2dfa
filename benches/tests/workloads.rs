//! kura-load's workloads against a real Kura server (the `kura` binary of this workspace, built
//! on demand): each workload runs for about a second and its correctness check must pass; state
//! altered behind the tool's back must be flagged by the same check; a server killed with
//! SIGKILL mid-run must lose no acknowledged write.
//!
//! The server binary is `target/<profile>/kura` beside this test's own binary, brought up to
//! date first with the cargo that builds this test (`cargo build -p kura`, a no-op when it is;
//! see [`build_kura`] for a `cargo test` that holds the target dir's lock: then a binary built
//! earlier is used, so build the server after changing it). `KURA_BIN` names another one.

use std::io::{BufRead, BufReader};
use std::ops::AsyncFnOnce;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use clap::Parser;
use kura_bench::cli::{main_with, Args};
use kura_bench::client::Conn;
use kura_bench::report::RunResult;
use kura_bench::runner::{self, Mode, PhaseConfig, Spread};
use kura_bench::server::{wait_healthy, SpawnedServer};
use kura_bench::workload::{Params, Workload, WorkloadName};

/// The `kura` server binary, brought up to date once per test process.
fn kura_bin() -> PathBuf {
    static BIN: OnceLock<Mutex<Option<PathBuf>>> = OnceLock::new();
    let mut guard = BIN
        .get_or_init(|| Mutex::new(None))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(b) = guard.as_ref() {
        return b.clone();
    }
    let bin = match std::env::var_os("KURA_BIN") {
        Some(b) => PathBuf::from(b),
        None => {
            // target/<profile>/deps/<this test> → target/<profile>/kura
            let exe = std::env::current_exe().expect("test binary path");
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("test binary under target/<profile>/deps")
                .to_path_buf();
            build_kura(&profile_dir)
        }
    };
    assert!(
        bin.exists(),
        "no kura server binary at {}: build it first (`cargo build -p kura`) or set KURA_BIN",
        bin.display()
    );
    *guard = Some(bin.clone());
    bin
}

/// `cargo build -p kura --bin kura` into the target dir of this test, through the cargo that
/// built it: a no-op when the binary is up to date, so a run never tests a stale server.
///
/// A `cargo test` of a whole package keeps the target dir locked while its tests run, and the
/// build would wait for it forever: it is stopped, and the binary already there is used (in a
/// `cargo test --workspace` the `kura` package's own tests made cargo build it); without one, the
/// server is built in a target dir of its own (`<target>/kura-load-server`).
fn build_kura(profile_dir: &Path) -> PathBuf {
    let target_dir = profile_dir.parent().expect("target dir");
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let bin = profile_dir.join("kura");
    if cargo_build_kura(target_dir, release) {
        return bin;
    }
    if bin.exists() {
        return bin;
    }
    let own = target_dir.join("kura-load-server");
    assert!(
        cargo_build_kura(&own, release),
        "{} is locked too",
        own.display()
    );
    own.join(if release { "release" } else { "debug" })
        .join("kura")
}

/// Run the build into `target_dir`; false if it had to wait for the directory's lock.
fn cargo_build_kura(target_dir: &Path, release: bool) -> bool {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", "kura", "--bin", "kura", "--target-dir"])
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::piped());
    if release {
        cmd.arg("--release");
    }
    // Without the variables cargo set for this test: build scripts that watch one of them
    // (ring's watches CARGO_PKG_NAME) would otherwise rebuild, and their dependants with them,
    // each time this build and a build from a shell take turns.
    for (k, _) in std::env::vars_os() {
        let name = k.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || matches!(
                name.as_ref(),
                "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_TARGET_TMPDIR"
                    | "CARGO_RUSTC_CURRENT_DIR"
                    | "OUT_DIR"
            )
        {
            cmd.env_remove(&k);
        }
    }
    let mut child = cmd.spawn().expect("run cargo build -p kura");
    let stderr = child.stderr.take().expect("piped stderr");
    let mut locked = false;
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        eprintln!("{line}");
        if line.contains("Blocking waiting for file lock") {
            locked = true;
            let _ = child.kill();
            break;
        }
    }
    let status = child.wait().expect("wait for cargo build");
    assert!(locked || status.success(), "cargo build -p kura failed");
    !locked
}

/// Run kura-load with `args` against a spawned server, without the baseline and the
/// ceiling; its exit code and result.json.
fn kura_load(args: &[&str]) -> (i32, RunResult) {
    let mut argv = vec!["--no-baseline"];
    argv.extend_from_slice(args);
    kura_load_with(&argv)
}

/// Run kura-load with `args` against a spawned server; its exit code and result.json.
fn kura_load_with(args: &[&str]) -> (i32, RunResult) {
    let out = tempfile::tempdir().expect("out dir");
    let bin = kura_bin();
    let mut argv: Vec<String> = vec![
        "kura-load".into(),
        "--spawn-server".into(),
        bin.display().to_string(),
        "-q".into(),
        "-c".into(),
        "4".into(),
        "--out".into(),
        out.path().display().to_string(),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    let parsed = Args::try_parse_from(argv).expect("kura-load arguments");
    let code = main_with(parsed);
    let text = std::fs::read_to_string(out.path().join("result.json")).expect("result.json");
    let result: RunResult = serde_json::from_str(&text).expect("result.json parses");
    (code, result)
}

fn run_phase(r: &RunResult) -> &runner::PhaseResult {
    r.phases
        .iter()
        .find(|p| p.name == "run")
        .expect("a run phase")
}

#[test]
fn each_new_scan_answers_exactly_its_rows() {
    for w in ["prefix-scan", "reverse-scan", "filtered-scan"] {
        let (code, r) = kura_load(&["-w", w, "-d", "1s", "--rows", "1000"]);
        let run = run_phase(&r);
        assert_eq!(code, 0, "{w}: {:?}", r.verification);
        assert!(run.summary.ops > 0, "{w} ran no operation");
        assert_eq!(
            run.summary.errors, 0,
            "{w}: {:?}",
            run.summary.errors_by_status
        );
        assert!(run.summary.rows > 0, "{w} returned no rows");
    }
}

#[test]
fn each_read_modify_write_workload_passes_its_check() {
    for w in ["append", "check-and-delete", "check-and-mutate"] {
        let (code, r) = kura_load(&["-w", w, "-d", "1s", "--rows", "200", "--cas-rows", "4"]);
        assert_eq!(code, 0, "{w}: {:?}", r.verification);
        assert!(
            r.verification.checked && r.passed,
            "{w}: {:?}",
            r.verification
        );
        assert_eq!(run_phase(&r).summary.errors, 0, "{w}");
        if w == "check-and-mutate" {
            let cas = run_phase(&r).summary.cas.clone().expect("retries reported");
            assert!(cas.successes > 0);
            assert_eq!(cas.gave_up, 0);
            assert!(cas.max_retries as f64 >= cas.mean_retries);
        }
    }
}

#[test]
fn rounds_alternate_the_ceiling_healthz_and_the_run_whose_writes_are_verified() {
    let ceiling = env!("CARGO_BIN_EXE_kura-ceiling");
    let (code, r) = kura_load_with(&[
        "-w",
        "append",
        "-d",
        "1s",
        "--rows",
        "200",
        "--cas-rows",
        "4",
        "--rounds",
        "2",
        "--slice",
        "500ms",
        "--ceiling-bin",
        ceiling,
    ]);
    assert_eq!(code, 0, "{:?}", r.verification);
    let rounds = r.rounds.as_ref().expect("the rounds were measured");
    assert_eq!(rounds.rounds.len(), 2);
    for round in &rounds.rounds {
        assert!(
            round.ceiling > 0.0 && round.healthz > 0.0 && round.run > 0.0,
            "{round:?}"
        );
    }
    // The rounds' appends went through the run's workload: the check finds each acknowledged
    // one, the rounds' with the run's.
    assert!(r.verification.checked && r.passed, "{:?}", r.verification);
    // "N rows appended to: M acknowledged appends ...": M counts the rounds' appends too.
    let acked = r
        .verification
        .notes
        .iter()
        .find_map(|n| {
            let words: Vec<&str> = n.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "acknowledged")?;
            words.get(at.checked_sub(1)?)?.parse::<u64>().ok()
        })
        .expect("the check counts the acknowledged appends");
    let in_run = run_phase(&r).summary.ops;
    assert!(
        acked > in_run,
        "{acked} appends acknowledged, no more than the run's {in_run}: the rounds' are missing"
    );
}

#[test]
fn blog_walks_category_lists_and_counter_reads_hour_and_day_ranges() {
    let (code, r) = kura_load(&["-w", "blog", "-d", "1s", "--users", "4"]);
    assert_eq!(code, 0, "{:?}", r.verification);
    assert!(run_phase(&r).summary.kinds.contains_key("category_walk"));
    assert!(
        r.verification
            .notes
            .iter()
            .any(|n| n.contains("(user, category) lists walked in full")),
        "{:?}",
        r.verification.notes
    );
    let (code, r) = kura_load(&[
        "-w",
        "counter",
        "-d",
        "1s",
        "--urls",
        "20",
        "--counter-hours",
        "30",
    ]);
    assert_eq!(code, 0, "{:?}", r.verification);
    let kinds = &run_phase(&r).summary.kinds;
    assert!(
        kinds.contains_key("hourly") && kinds.contains_key("daily"),
        "{kinds:?}"
    );
    assert!(
        r.verification
            .notes
            .iter()
            .any(|n| n.contains("hour buckets")),
        "{:?}",
        r.verification.notes
    );
}

#[test]
fn a_kill_9_mid_run_loses_no_acknowledged_write() {
    let (code, r) = kura_load(&["-w", "durable-write", "-d", "3s", "--kill-after", "1s"]);
    assert_eq!(code, 0, "{:?}", r.verification);
    let crash = r.crash.clone().expect("a crash report");
    assert!(crash.healthy_ms > 0.0);
    assert!(
        crash.recovery_ms.is_some(),
        "no operation succeeded after the restart"
    );
    assert!(
        r.verification.notes.iter().any(|n| n.contains(", 0 lost")),
        "{:?}",
        r.verification.notes
    );
}

#[test]
fn kill_after_without_a_spawned_server_is_refused() {
    let a = Args::try_parse_from([
        "kura-load",
        "--target",
        "127.0.0.1:1",
        "-w",
        "durable-write",
        "-d",
        "2s",
        "--kill-after",
        "1s",
    ])
    .expect("parse");
    assert_eq!(main_with(a), 2);
}

fn params(rows: u64) -> Params {
    Params {
        rows,
        value_size: 16,
        multiget: 2,
        records: 10,
        field_length: 10,
        distribution: None,
        regions: None,
        no_load: false,
        load_batch: 10,
        expected_ops: 100,
        users: 1,
        urls: 1,
        sites: 1,
        edges: 1,
        cas_rows: 1,
        counter_hours: 0,
        nonce: 1,
    }
}

/// Start a server, prepare `name` and run `ops` operations of it over 2 connections.
async fn ran(name: WorkloadName, ops: u64) -> (SpawnedServer, Arc<Workload>, Conn) {
    let server = SpawnedServer::start(&kura_bin(), None, None, &[], None).expect("server");
    wait_healthy(&server.addr, Duration::from_secs(60))
        .await
        .expect("healthy");
    let workload = Arc::new(Workload::new(name, &params(50)));
    let mut conn = Conn::new(&server.addr, Duration::from_secs(10)).expect("conn");
    workload.prepare(&mut conn).await.expect("prepare");
    let cfg = PhaseConfig {
        name: "run".into(),
        addrs: vec![server.addr.clone()],
        spread: Spread::Request,
        connections: 2,
        duration: None,
        ops: Some(ops),
        mode: Mode::Closed,
        timeout: Duration::from_secs(10),
        progress: false,
        seed: 7,
        watch: None,
        server_pids: vec![server.pid()],
        first_worker: 0,
    };
    let run = runner::run_phase(&cfg, workload.clone())
        .await
        .expect("run");
    assert_eq!(run.summary.errors, 0, "{:?}", run.summary.errors_by_status);
    if cfg!(target_os = "linux") {
        let cpu = run.cpu.expect("a phase reports its CPU per operation");
        let server_us = cpu
            .server_us
            .expect("the server it started is read by its PID");
        // Its request threads served the phase; their share is within the server's total, but
        // for the two readings' clock ticks (10 ms each at most, spread over the operations).
        let request_us = cpu
            .request_threads_us
            .expect("its request threads are read apart");
        let tick_us = 2.0 * 10_000.0 / run.summary.ops as f64;
        assert!(
            request_us > 0.0 && request_us <= server_us + tick_us,
            "request threads {request_us} µs of the server's {server_us} µs"
        );
        let machine = cpu.machine.expect("the machine is read from /proc/stat");
        // A server and a client ran for the whole phase: the machine cannot have been idle.
        assert!(
            machine.cores >= 1 && machine.busy_cores > 0.0,
            "{machine:?}"
        );
        assert!(
            machine.others_us.is_some(),
            "with the server known, the rest of the machine has a figure"
        );
    }
    (server, workload, conn)
}

/// The failures the workload's check reports once `alter` has changed its table behind its
/// back, after a run of `ops` operations whose check passed.
async fn flagged_after(
    name: WorkloadName,
    ops: u64,
    alter: impl AsyncFnOnce(&mut Conn),
) -> Vec<String> {
    let (_server, workload, mut conn) = ran(name, ops).await;
    let before = workload
        .verify(std::slice::from_mut(&mut conn))
        .await
        .expect("verify");
    assert!(before.passed(), "{:?}", before.failures);
    alter(&mut conn).await;
    let after = workload
        .verify(std::slice::from_mut(&mut conn))
        .await
        .expect("verify");
    after.failures
}

/// Write one cell of row `key` of `table`, as another client would.
async fn put_cell(conn: &mut Conn, table: &str, key: &str, column: &[u8], value: &[u8]) {
    let cell = kura_bench::cellset::CellRef { column, value };
    let body = kura_bench::cellset::one_row(key.as_bytes(), &[cell]);
    let r = conn
        .put_json(&format!("/{table}/{key}"), body)
        .await
        .expect("put");
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_or_altered_acknowledged_write_is_flagged() {
    let failures = flagged_after(WorkloadName::DurableWrite, 40, async |conn: &mut Conn| {
        // Each worker's first write (keys `{worker:04}-{seq:010}`): one altered, one deleted.
        let altered = b"not what was written";
        put_cell(
            conn,
            "kura_load_durable",
            "0000-0000000001",
            b"f:v",
            altered,
        )
        .await;
        let r = conn
            .delete("/kura_load_durable/0001-0000000001")
            .await
            .expect("delete");
        assert_eq!(r.status, 200);
    })
    .await;
    let text = failures.join("\n");
    assert!(text.contains("1 acknowledged writes lost"), "{text}");
    assert!(
        text.contains("1 writes read back with another value"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_check_and_mutate_row_is_flagged() {
    // One row (`--cas-rows 1`): every loop of both connections contends for m000000.
    let failures = flagged_after(WorkloadName::CheckAndMutate, 30, async |conn: &mut Conn| {
        put_cell(conn, "kura_load_cas", "m000000", b"f:a", b"1:someone-else").await;
    })
    .await;
    assert!(
        failures.iter().any(|f| f.contains("applied in part")),
        "{failures:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_taken_behind_the_holders_back_is_flagged() {
    // Whatever the lease's state, an owner no worker ever wrote is wrong.
    let failures = flagged_after(WorkloadName::CheckAndDelete, 60, async |conn: &mut Conn| {
        put_cell(conn, "kura_load_cas", "l000000", b"f:owner", b"intruder").await;
    })
    .await;
    assert!(
        failures.iter().any(|f| f.contains("l000000")),
        "{failures:?}"
    );
}
