//! `kura copy`, run as the real binary over real stores: an embedded data directory, Google's
//! Bigtable emulator and a `kura` server's REST API.
//!
//! What a user relies on:
//! 1. A table copied with `--verify` arrives with every version of every cell, and the verify
//!    says so; from an embedded directory to Bigtable and from a REST endpoint to a directory.
//! 2. A copy stopped or killed midway, run again, continues after its checkpoint and ends with
//!    both sides equal.
//! 3. A difference between the sides is reported (where, and exit code 3).
//! 4. Bad arguments exit 2 with a message saying what to fix.

mod server_harness;

use kura_backend::{FamilyDescriptor, Mutation, ReadSpec, RowMutation, TableDescriptor};
use server_harness::{b64, output_text as text, run_kura, wait_until, Server};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn kura_copy(args: &[&str], env: &[(&str, &str)]) -> Output {
    let args: Vec<&str> = std::iter::once("copy")
        .chain(args.iter().copied())
        .collect();
    run_kura(&args, env)
}

fn embedded(dir: &Path) -> String {
    format!("embedded:{}", dir.display())
}

/// Runs `f` on the embedded store of `dir` (created if absent), then shuts it down, which
/// releases the directory's lock for the copy.
fn with_store<T>(dir: &Path, f: impl AsyncFnOnce(&kura_backend::Store) -> T) -> T {
    actix_rt::System::new().block_on(async {
        let config = kura_backends::embedded::Config::new(dir.to_path_buf());
        let store = kura_backends::start_embedded(config).await.expect("open");
        let out = f(&store).await;
        store.shutdown().await.expect("shutdown");
        out
    })
}

/// `rows` rows `row00000`…, three versions of `cf:a` and one of `cf:b` each, in table `t`
/// with VERSIONS 3.
fn fill(dir: &Path, rows: usize) {
    with_store(dir, async |store| {
        store
            .create_table(TableDescriptor::new(
                "t",
                vec![
                    FamilyDescriptor::new(b"cf".to_vec()).with_max_versions(3),
                    FamilyDescriptor::new(b"g".to_vec()),
                ],
            ))
            .await
            .expect("create");
        let mut ms = Vec::new();
        for i in 0..rows {
            let mut mutations = Vec::new();
            for ts in [100, 200, 300] {
                mutations.push(Mutation::Put {
                    family: b"cf".to_vec(),
                    qualifier: b"a".to_vec(),
                    timestamp: Some(ts + i as i64),
                    value: format!("v{i}@{ts}").into_bytes(),
                });
            }
            mutations.push(Mutation::Put {
                family: b"g".to_vec(),
                qualifier: vec![0, 0xff],
                timestamp: Some(7),
                value: vec![i as u8; 40],
            });
            ms.push(RowMutation {
                row: format!("row{i:05}").into_bytes(),
                mutations,
            });
            if ms.len() == 500 {
                store
                    .mutate_rows("t", std::mem::take(&mut ms))
                    .await
                    .expect("put");
            }
        }
        store.mutate_rows("t", ms).await.expect("put");
    });
}

#[test]
fn an_embedded_table_copied_to_bigtable_verifies_equal_with_every_version() {
    let emulator = kura_bigtable::emulator::Emulator::start();
    let src = tempfile::tempdir().expect("tempdir");
    fill(src.path(), 300);
    let work = tempfile::tempdir().expect("tempdir");
    let checkpoint = work.path().join("cp");
    let out = kura_copy(
        &[
            "--from",
            &embedded(src.path()),
            "--to",
            "bigtable:p/copy",
            "--table",
            "t",
            "--verify",
            "--batch-rows",
            "64",
            "--checkpoint",
            checkpoint.to_str().expect("utf-8"),
        ],
        &[("BIGTABLE_EMULATOR_HOST", &emulator.host)],
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("copied 300 rows, 1200 cells"),
        "{}",
        text(&out)
    );
    assert!(stdout.contains("verified t:"), "{}", text(&out));
    assert!(!checkpoint.exists(), "the checkpoint is removed once done");

    // Read back from Bigtable directly: all three versions, with their timestamps.
    actix_rt::System::new().block_on(async {
        use kura_backend::Backend as _;
        let bt = emulator.backend_on("copy").await;
        let desc = bt.table("t").await.expect("describe").expect("created");
        assert_eq!(desc.families[0].max_versions, 3, "the schema came along");
        let read = ReadSpec {
            max_versions: 10,
            ..ReadSpec::default()
        };
        let row = bt
            .get("t", b"row00042", &read, None)
            .await
            .expect("get")
            .expect("row copied");
        let stamps: Vec<i64> = row.cells.iter().map(|c| c.timestamp).collect();
        assert_eq!(stamps, vec![342, 242, 142, 7], "{row:?}");
        assert_eq!(row.cells[0].value, b"v42@300");
    });
}

#[test]
fn a_bigtable_table_is_copied_to_a_rest_endpoint_and_verifies_from_either_end() {
    let emulator = kura_bigtable::emulator::Emulator::start();
    actix_rt::System::new().block_on(async {
        use kura_backend::Backend as _;
        let bt = emulator.backend_on("src").await;
        bt.create_table(TableDescriptor::new(
            "t",
            vec![FamilyDescriptor::new(b"cf".to_vec()).with_max_versions(2)],
        ))
        .await
        .expect("create");
        let ms = (0..120u32)
            .map(|i| RowMutation {
                row: i.to_be_bytes().to_vec(),
                mutations: [1000, 2000]
                    .into_iter()
                    .map(|ts| Mutation::Put {
                        family: b"cf".to_vec(),
                        qualifier: b"n".to_vec(),
                        timestamp: Some(ts + i64::from(i)),
                        value: format!("{i}@{ts}").into_bytes(),
                    })
                    .collect(),
            })
            .collect();
        bt.mutate_rows("t", ms).await.expect("put");
    });
    let data = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let work = tempfile::tempdir().expect("tempdir");
    let rest = format!("http://{}", server.addr);
    let env = [("BIGTABLE_EMULATOR_HOST", emulator.host.as_str())];
    let cp = work.path().join("cp");
    let cp = cp.to_str().expect("utf-8");
    let out = kura_copy(
        &[
            "--from",
            "bigtable:p/src",
            "--to",
            &rest,
            "--table",
            "t",
            "--verify",
            "--batch-rows",
            "25",
            "--checkpoint",
            cp,
        ],
        &env,
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("copied 120 rows, 240 cells"),
        "{}",
        text(&out)
    );
    // Checked from the other end: the REST side as the source of the comparison.
    let back = kura_copy(
        &[
            "--from",
            &rest,
            "--to",
            "bigtable:p/src",
            "--table",
            "t",
            "--verify-only",
        ],
        &env,
    );
    assert!(back.status.success(), "{}", text(&back));
    assert!(
        String::from_utf8_lossy(&back.stdout).contains("(120 rows, 240 cells)"),
        "{}",
        text(&back)
    );
}

#[test]
fn a_copy_stopped_after_some_batches_resumes_after_its_checkpoint_and_verifies() {
    let src = tempfile::tempdir().expect("tempdir");
    let dst = tempfile::tempdir().expect("tempdir");
    fill(src.path(), 100);
    let checkpoint = dst.path().join("t.checkpoint");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--from",
            &embedded(src.path()),
            "--to",
            &embedded(&dst.path().join("data")),
            "--table",
            "t",
            "--batch-rows",
            "10",
            "--checkpoint",
            checkpoint.to_str().expect("utf-8"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        kura_copy(&a.iter().map(String::as_str).collect::<Vec<_>>(), &[])
    };

    let stopped = run(&["--stop-after-batches", "3"]);
    assert_eq!(stopped.status.code(), Some(1), "{}", text(&stopped));
    let saved = std::fs::read_to_string(&checkpoint).expect("a checkpoint is left");
    assert!(saved.contains("rows=30\n"), "{saved}");
    assert!(
        saved.contains(&format!("last_row_hex={}\n", hex(b"row00029"))),
        "{saved}"
    );

    // The checkpoint belongs to this copy: another destination does not resume from it.
    let other = dst.path().join("other");
    let elsewhere = kura_copy(
        &[
            "--from",
            &embedded(src.path()),
            "--to",
            &embedded(&other),
            "--table",
            "t",
            "--checkpoint",
            checkpoint.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert_eq!(elsewhere.status.code(), Some(1), "{}", text(&elsewhere));
    assert!(
        String::from_utf8_lossy(&elsewhere.stderr).contains("is of another copy"),
        "{}",
        text(&elsewhere)
    );
    assert!(
        !other.exists(),
        "refused before anything was opened or created"
    );

    let resumed = run(&["--verify"]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        stderr.contains("resuming after row \"row00029\""),
        "{}",
        text(&resumed)
    );
    assert!(
        stdout.contains("copied 100 rows, 400 cells"),
        "{}",
        text(&resumed)
    );
    assert!(
        stdout.contains("(70 rows, 280 cells in this run)"),
        "{}",
        text(&resumed)
    );
    assert!(stdout.contains("verified t:"), "{}", text(&resumed));
}

#[test]
fn a_copy_killed_midway_resumes_and_ends_with_both_sides_equal() {
    let src = tempfile::tempdir().expect("tempdir");
    let dst = tempfile::tempdir().expect("tempdir");
    fill(src.path(), 3000);
    let checkpoint = dst.path().join("t.checkpoint");
    let to = embedded(&dst.path().join("data"));
    let from = embedded(src.path());
    let cp = checkpoint.to_str().expect("utf-8");
    let args = [
        "copy",
        "--from",
        &from,
        "--to",
        &to,
        "--table",
        "t",
        "--batch-rows",
        "5",
        "--checkpoint",
        cp,
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_kura"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn kura copy");
    // Killed once it has checkpointed a few batches, well before the end.
    let saved_rows = || {
        let text = std::fs::read_to_string(&checkpoint).unwrap_or_default();
        let rows = text.lines().find_map(|l| l.strip_prefix("rows="));
        rows.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0)
    };
    wait_until("a checkpoint of 50 rows", Duration::from_secs(60), || {
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the copy ended before it could be killed"
        );
        saved_rows() >= 50
    });
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    assert!(!status.success(), "killed, not finished: {status:?}");
    let saved = std::fs::read_to_string(&checkpoint).expect("the checkpoint survives the kill");
    assert!(!saved.contains("rows=3000\n"), "killed midway: {saved}");

    let resumed = kura_copy(&[&args[1..], &["--verify"]].concat(), &[]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        stdout.contains("copied 3000 rows, 12000 cells"),
        "{}",
        text(&resumed)
    );
    assert!(stdout.contains("verified t:"), "{}", text(&resumed));
}

#[test]
fn a_changed_cell_on_one_side_is_reported_by_verify_with_exit_code_3() {
    let src = tempfile::tempdir().expect("tempdir");
    let dst = tempfile::tempdir().expect("tempdir");
    fill(src.path(), 200);
    let to = embedded(dst.path());
    let from = embedded(src.path());
    let copied = kura_copy(&["--from", &from, "--to", &to, "--table", "t"], &[]);
    assert!(copied.status.success(), "{}", text(&copied));
    let same = kura_copy(
        &[
            "--from",
            &from,
            "--to",
            &to,
            "--table",
            "t",
            "--verify-only",
        ],
        &[],
    );
    assert!(same.status.success(), "{}", text(&same));

    // One version of one cell of row00150 gets another value on the destination.
    with_store(dst.path(), async |store| {
        store
            .mutate(
                "t",
                RowMutation {
                    row: b"row00150".to_vec(),
                    mutations: vec![Mutation::Put {
                        family: b"cf".to_vec(),
                        qualifier: b"a".to_vec(),
                        timestamp: Some(250),
                        value: b"changed".to_vec(),
                    }],
                },
            )
            .await
            .expect("put");
    });
    let differs = kura_copy(
        &[
            "--from",
            &from,
            "--to",
            &to,
            "--table",
            "t",
            "--verify-only",
        ],
        &[],
    );
    assert_eq!(differs.status.code(), Some(3), "{}", text(&differs));
    let stdout = String::from_utf8_lossy(&differs.stdout);
    assert!(stdout.contains("DIFFERENT"), "{}", text(&differs));
    // The reported range holds the changed row: [start, end) with start <= row00150 < end.
    let line = stdout.lines().next().expect("a report");
    let range = line
        .split_once("rows [")
        .and_then(|(_, r)| r.split_once(')'))
        .map(|(r, _)| r.to_string())
        .expect("a range");
    let (start, end) = range.split_once(", ").expect("start, end");
    let unquote = |s: &str| s.trim_matches('"').to_string();
    assert!(unquote(start).as_str() <= "row00150", "{line}");
    assert!(
        end == "end of table" || unquote(end).as_str() > "row00150",
        "{line}"
    );
}

#[test]
fn a_table_served_over_rest_is_copied_to_an_embedded_dir_with_rows_split_by_the_scanner() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let mut http = server.client();
    let r = http
        .request(
            "PUT",
            "/t/schema",
            &[("Content-Type", "application/json")],
            br#"{"name":"t","ColumnSchema":[{"name":"cf","VERSIONS":"2"}]}"#,
        )
        .expect("create");
    assert_eq!(r.status, 201, "{}", r.text());
    // A row of 6000 cells (more than one scanner answer holds), a binary row key, and rows
    // with two versions.
    let mut cells = Vec::new();
    for q in 0..6000 {
        cells.push(format!(
            r#"{{"column":"{}","timestamp":5,"$":"{}"}}"#,
            b64(format!("cf:q{q:05}").as_bytes()),
            b64(b"x")
        ));
    }
    let mut rows = vec![format!(
        r#"{{"key":"{}","Cell":[{}]}}"#,
        b64(b"big"),
        cells.join(",")
    )];
    for i in 0..50u8 {
        rows.push(format!(
            r#"{{"key":"{}","Cell":[{{"column":"{}","timestamp":10,"$":"{}"}},{{"column":"{}","timestamp":20,"$":"{}"}}]}}"#,
            b64(&[0, i, 0xff]),
            b64(b"cf:v"),
            b64(b"old"),
            b64(b"cf:v"),
            b64(b"new"),
        ));
    }
    let body = format!(r#"{{"Row":[{}]}}"#, rows.join(","));
    let r = http
        .request(
            "PUT",
            "/t/fakerow",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .expect("put");
    assert_eq!(r.status, 200, "{}", r.text());

    let dst = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let out = kura_copy(
        &[
            "--from",
            &format!("http://{}", server.addr),
            "--to",
            &embedded(dst.path()),
            "--table",
            "t",
            "--verify",
            "--batch-rows",
            "7",
            "--checkpoint",
            work.path().join("cp").to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("copied 51 rows, 6100 cells"),
        "{}",
        text(&out)
    );
    assert!(stdout.contains("verified t:"), "{}", text(&out));

    let big = with_store(dst.path(), async |store| {
        let read = ReadSpec {
            max_versions: 5,
            ..ReadSpec::default()
        };
        let two = store.get("t", &[0, 3, 0xff], &read).await.expect("get");
        let big = store.get("t", b"big", &read).await.expect("get");
        (two, big)
    });
    let (two, big) = big;
    let two = two.expect("binary-keyed row copied");
    assert_eq!(
        two.cells
            .iter()
            .map(|c| (c.timestamp, c.value.clone()))
            .collect::<Vec<_>>(),
        vec![(20, b"new".to_vec()), (10, b"old".to_vec())]
    );
    assert_eq!(
        big.expect("big row copied").cells.len(),
        6000,
        "joined whole"
    );
}

#[test]
fn a_row_larger_than_a_request_body_is_copied_to_a_rest_endpoint_in_pieces() {
    // 600 cells of 30 KB: 18 MB, 24 MB as base64, past the server's 16 MiB body limit.
    let src = tempfile::tempdir().expect("tempdir");
    with_store(src.path(), async |store| {
        store
            .create_table(TableDescriptor::new(
                "t",
                vec![FamilyDescriptor::new(b"cf".to_vec())],
            ))
            .await
            .expect("create");
        let mutations = (0..600)
            .map(|q| Mutation::Put {
                family: b"cf".to_vec(),
                qualifier: format!("q{q:04}").into_bytes(),
                timestamp: Some(9),
                value: vec![(q % 251) as u8; 30_000],
            })
            .collect();
        store
            .mutate(
                "t",
                RowMutation {
                    row: b"huge".to_vec(),
                    mutations,
                },
            )
            .await
            .expect("put");
    });
    let data = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let work = tempfile::tempdir().expect("tempdir");
    let out = kura_copy(
        &[
            "--from",
            &embedded(src.path()),
            "--to",
            &format!("http://{}", server.addr),
            "--table",
            "t",
            "--verify",
            "--checkpoint",
            work.path().join("cp").to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("copied 1 rows, 600 cells"),
        "{}",
        text(&out)
    );
    assert!(stdout.contains("verified t:"), "{}", text(&out));
}

#[test]
fn bad_arguments_exit_2_saying_what_to_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = embedded(dir.path());
    for (args, says) in [
        (
            vec!["--from", "ftp://x", "--to", &d, "--table", "t"],
            "use http(s)://HOST:PORT",
        ),
        (
            vec!["--from", "bigtable:onlyproject", "--to", &d, "--table", "t"],
            "PROJECT/INSTANCE",
        ),
        (vec!["--from", &d, "--to", "http://127.0.0.1:1"], "--table"),
        (
            vec!["--from", &d, "--to", &d, "--table", "t"],
            "the same place",
        ),
        (
            vec![
                "--from",
                "http://127.0.0.1:1",
                "--to",
                &d,
                "--table",
                "no/such",
            ],
            "table name",
        ),
        (
            vec![
                "--from",
                "http://127.0.0.1:1",
                "--to",
                &d,
                "--table",
                "t",
                "--batch-rows",
                "0",
            ],
            "--batch-rows",
        ),
    ] {
        let out = kura_copy(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(says),
            "{args:?} should say {says:?}: {stderr}"
        );
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn a_rest_side_behind_a_token_needs_the_token_file_and_works_with_it() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let token_file = work.path().join("token");
    std::fs::write(&token_file, "copy-token-0123456789\n").expect("write token");
    let token_arg = token_file.to_str().expect("utf-8");
    let server = Server::start(data.path(), &["--token-file", token_arg]);
    let mut http = server.client();
    let auth = [
        ("Authorization", "Bearer copy-token-0123456789"),
        ("Content-Type", "application/json"),
    ];
    let r = http
        .request(
            "PUT",
            "/t/schema",
            &auth,
            br#"{"name":"t","ColumnSchema":[{"name":"cf"}]}"#,
        )
        .expect("create");
    assert_eq!(r.status, 201, "{}", r.text());
    let body = format!(
        r#"{{"Row":[{{"key":"{}","Cell":[{{"column":"{}","timestamp":5,"$":"{}"}}]}}]}}"#,
        b64(b"r1"),
        b64(b"cf:q"),
        b64(b"v")
    );
    let r = http
        .request("PUT", "/t/fakerow", &auth, body.as_bytes())
        .expect("put");
    assert_eq!(r.status, 200, "{}", r.text());
    let rest = format!("http://{}", server.addr);
    let dst = embedded(&work.path().join("dst"));
    let cp = work.path().join("cp");
    let args = [
        "--from",
        &rest,
        "--to",
        &dst,
        "--table",
        "t",
        "--checkpoint",
        cp.to_str().expect("utf-8"),
    ];
    let refused = kura_copy(&args, &[]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--token-file"),
        "{}",
        text(&refused)
    );
    let mut with_token = args.to_vec();
    with_token.extend(["--token-file", token_arg]);
    let out = kura_copy(&with_token, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("copied 1 rows, 1 cells"),
        "{}",
        text(&out)
    );
    let env_token = kura_copy(
        &[&args[..], &["--verify-only"]].concat(),
        &[("KURA_TOKEN", "copy-token-0123456789")],
    );
    assert!(env_token.status.success(), "{}", text(&env_token));
}
