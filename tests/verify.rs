//! `kura verify`, run as the real binary against a real `kura` server's REST API, with the
//! files a real HBase 2.x wrote (`tests/fixtures/hbase-2x/`).
//!
//! What a user relies on:
//! 1. A Kura table holding the same cells as the HBase table the fixture's `HashTable` ran on
//!    verifies equal `--against` HBase's hashes; one changed cell is reported as exactly the
//!    batch that holds it (exit 3).
//! 2. `kura verify --out` on a table split like the source writes HashTable's files: the same
//!    records as HBase's, byte for byte (only the random sync bytes differ), and a manifest
//!    saying what was scanned.
//! 3. `--out` followed by `--against` round-trips over binary keys, an empty qualifier and
//!    several versions, and finds a deleted row.
//! 4. A server behind a token needs `--token-file`; bad arguments exit 2 saying what to fix.

mod server_harness;

use kura_formats::hashtable::{HashDir, Manifest};
use kura_formats::hfile::HFile;
use kura_formats::seqfile::Reader;
use server_harness::{b64, create_table, output_text as text, run_kura, Http, Server};
use std::path::{Path, PathBuf};
use std::process::Output;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hbase-2x")
}

fn kura_verify(args: &[&str], env: &[(&str, &str)]) -> Output {
    let args: Vec<&str> = std::iter::once("verify")
        .chain(args.iter().copied())
        .collect();
    run_kura(&args, env)
}

/// One cell to put: row, column (`family:qualifier`), timestamp, value.
type Put = (Vec<u8>, Vec<u8>, i64, Vec<u8>);

/// Writes cells through `PUT /{t}/fakerow` (a CellSet, every cell with its timestamp).
fn put_cells(http: &mut Http, table: &str, cells: &[Put], headers: &[(&str, &str)]) {
    let rows: Vec<String> = cells
        .iter()
        .map(|(row, col, ts, v)| {
            format!(
                "{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"{}\",\"timestamp\":{ts},\"$\":\"{}\"}}]}}",
                b64(row),
                b64(col),
                b64(v)
            )
        })
        .collect();
    let body = format!("{{\"Row\":[{}]}}", rows.join(","));
    let mut h = vec![("Content-Type", "application/json")];
    h.extend_from_slice(headers);
    let r = http
        .request("PUT", &format!("/{table}/fakerow"), &h, body.as_bytes())
        .expect("put");
    assert!(r.status == 200 || r.status == 201, "put: {}", r.text());
}

/// The 100 cells of the fixture's HFiles, timestamps included.
fn fixture_cells() -> Vec<Put> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(fixtures().join("hfiles")).expect("hfiles") {
        let f = HFile::open(&entry.expect("entry").path()).expect("an HFile");
        for c in f.cells().expect("cells") {
            let mut col = c.family.clone();
            col.push(b':');
            col.extend_from_slice(&c.qualifier);
            out.push((c.row, col, c.timestamp, c.value));
        }
    }
    assert_eq!(out.len(), 100);
    out
}

/// A server with the fixture's table `test` (family `cf`) loaded from its HFiles.
fn server_with_fixture_table(data: &Path) -> Server {
    let server = Server::start(data, &[]);
    let mut http = server.client();
    create_table(&mut http, "test", &["cf"]);
    put_cells(&mut http, "test", &fixture_cells(), &[]);
    server
}

fn url(server: &Server) -> String {
    format!("http://{}", server.addr)
}

fn fixture_hashdir() -> String {
    fixtures().join("hashtable").display().to_string()
}

#[test]
fn the_fixture_table_in_kura_verifies_equal_against_hbases_hashtable_output() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = server_with_fixture_table(data.path());
    let out = kura_verify(
        &[
            "--url",
            &url(&server),
            "--table",
            "test",
            "--against",
            &fixture_hashdir(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("101 ranges equal (100 rows, 100 cells)"),
        "{stdout}"
    );
}

#[test]
fn one_changed_cell_is_reported_as_exactly_its_batch() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = server_with_fixture_table(data.path());
    let mut http = server.client();
    // A newer version of row 57's cell: the latest version (what HashTable hashed) differs.
    put_cells(
        &mut http,
        "test",
        &[(
            b"57".to_vec(),
            b"cf:a".to_vec(),
            1_609_291_300_000,
            b"changed".to_vec(),
        )],
        &[],
    );
    // The table name comes from the manifest when --table is not given.
    let out = kura_verify(
        &["--url", &url(&server), "--against", &fixture_hashdir()],
        &[],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("differs:"))
        .collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert!(
        lines[0].starts_with("differs: rows [57, 58): source md5 "),
        "{stdout}"
    );
    assert!(stdout.contains("DIFFERENT: 1 of 101 ranges"), "{stdout}");
}

/// The file's bytes with the header's sync bytes and every escape's copy of them zeroed.
fn without_sync(path: &Path) -> Vec<u8> {
    let r = Reader::open(path).expect("a SequenceFile");
    let (h, sync) = (r.header_len() as usize, r.sync_bytes());
    let mut bytes = std::fs::read(path).expect("read");
    bytes[h - 16..h].fill(0);
    let mut i = h;
    while i + 20 <= bytes.len() {
        if bytes[i..i + 4] == [0xff; 4] && bytes[i + 4..i + 20] == sync {
            bytes[i + 4..i + 20].fill(0);
            i += 20;
        } else {
            i += 1;
        }
    }
    bytes
}

#[test]
fn verify_out_on_a_table_split_like_hbases_writes_hbases_records_byte_for_byte() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = server_with_fixture_table(data.path());
    let out_dir = work.path().join("hashes-of-test");
    let mut args: Vec<String> = [
        "--url",
        &url(&server),
        "--table",
        "test",
        "--out",
        out_dir.to_str().expect("utf-8"),
        "--batch-bytes",
        "10",
        "--num-hash-files",
        "10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 1..=9 {
        args.push("--region-start".into());
        args.push(i.to_string());
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = kura_verify(&argv, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let theirs = fixtures().join("hashtable");
    let mut files = vec!["partitions".to_string()];
    for i in 0..10 {
        files.push(format!("hashes/part-r-{i:05}/data"));
        files.push(format!("hashes/part-r-{i:05}/index"));
    }
    for f in &files {
        assert_eq!(
            without_sync(&out_dir.join(f)),
            without_sync(&theirs.join(f)),
            "{f}"
        );
    }
    assert!(out_dir.join("hashes/_SUCCESS").exists());
    // The manifest says what was scanned: HBase's keys, plus rawScan=false as newer HBase.
    let ours = HashDir::open(&out_dir).expect("ours");
    let hbase = HashDir::open(&theirs).expect("hbase's");
    assert_eq!(
        ours.manifest(),
        &Manifest {
            raw_scan: Some(false),
            ..hbase.manifest().clone()
        }
    );
    // A finished directory is never overwritten.
    let again = kura_verify(&argv, &[]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds"));
}

#[test]
fn out_then_against_round_trips_binary_keys_empty_qualifiers_and_versions() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let mut http = server.client();
    let r = http
        .request(
            "PUT",
            "/bin/schema",
            &[("Content-Type", "application/json")],
            br#"{"name":"bin","ColumnSchema":[{"name":"cf","VERSIONS":"3"},{"name":"g"}]}"#,
        )
        .expect("create");
    assert_eq!(r.status, 201, "{}", r.text());
    let mut cells: Vec<Put> = Vec::new();
    for i in 0..300u32 {
        let mut key = vec![0u8, 0xff];
        key.extend_from_slice(&i.to_be_bytes());
        for ts in [100, 200, 300] {
            cells.push((
                key.clone(),
                b"cf:".to_vec(),
                ts,
                format!("v{i}@{ts}").into_bytes(),
            ));
        }
        cells.push((key, b"g:q".to_vec(), 5, vec![0, 1, 2]));
    }
    put_cells(&mut http, "bin", &cells, &[]);
    let dir = work.path().join("h");
    let dir_s = dir.to_str().expect("utf-8");
    let out = kura_verify(
        &[
            "--url",
            &url(&server),
            "--table",
            "bin",
            "--out",
            dir_s,
            "--versions",
            "3",
            "--batch-bytes",
            "500",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let m = HashDir::open(&dir).expect("open");
    assert_eq!(m.manifest().versions, Some(3));
    assert_eq!(m.manifest().target_batch_size, 500);
    let against = ["--url", &url(&server), "--table", "bin", "--against", dir_s];
    let same = kura_verify(&against, &[]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    // Only the oldest version of one row goes: with --versions 3 that batch differs.
    let row = [0u8, 0xff, 0, 0, 0, 7];
    let path = format!("/bin/{}/cf:/100", percent(&row));
    let r = http.request("DELETE", &path, &[], b"").expect("delete");
    assert_eq!(r.status, 200, "{}", r.text());
    let diff = kura_verify(&against, &[]);
    assert_eq!(diff.status.code(), Some(3), "{}", text(&diff));
    let stdout = String::from_utf8_lossy(&diff.stdout);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("differs:")).count(),
        1,
        "{stdout}"
    );
    assert!(
        stdout.contains("\\x00\\xFF\\x00\\x00\\x00"),
        "printable keys: {stdout}"
    );
    // Against an empty table of the same schema every batch differs; the listing is capped.
    let r = http
        .request(
            "PUT",
            "/empty/schema",
            &[("Content-Type", "application/json")],
            br#"{"name":"empty","ColumnSchema":[{"name":"cf","VERSIONS":"3"},{"name":"g"}]}"#,
        )
        .expect("create");
    assert_eq!(r.status, 201, "{}", r.text());
    let batches = {
        let h = HashDir::open(&dir).expect("open");
        let mut b = h.batches();
        let mut n = 0;
        while b.next().expect("batch").is_some() {
            n += 1;
        }
        n
    };
    let empty = kura_verify(
        &[
            "--url",
            &url(&server),
            "--table",
            "empty",
            "--against",
            dir_s,
            "--max-report",
            "5",
        ],
        &[],
    );
    assert_eq!(empty.status.code(), Some(3), "{}", text(&empty));
    let stdout = String::from_utf8_lossy(&empty.stdout);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("differs:")).count(),
        5,
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("DIFFERENT: {batches} of {batches} ranges")),
        "{stdout}"
    );
    assert!(stdout.contains("the first 5 are listed"), "{stdout}");
}

fn percent(key: &[u8]) -> String {
    key.iter().map(|b| format!("%{b:02X}")).collect()
}

#[test]
fn a_server_behind_a_token_needs_the_token_file() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let token_file = work.path().join("token");
    std::fs::write(&token_file, "verify-token-0123456789\n").expect("write");
    let token_arg = token_file.to_str().expect("utf-8");
    let server = Server::start(data.path(), &["--token-file", token_arg]);
    let mut http = server.client();
    let auth = [("Authorization", "Bearer verify-token-0123456789")];
    let r = http
        .request(
            "PUT",
            "/test/schema",
            &[("Content-Type", "application/json"), auth[0]],
            br#"{"name":"test","ColumnSchema":[{"name":"cf"}]}"#,
        )
        .expect("create");
    assert_eq!(r.status, 201, "{}", r.text());
    put_cells(&mut http, "test", &fixture_cells(), &auth);
    let args = [
        "--url",
        &url(&server),
        "--table",
        "test",
        "--against",
        &fixture_hashdir(),
    ];
    let refused = kura_verify(&args, &[]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--token-file"),
        "{}",
        text(&refused)
    );
    let mut with = args.to_vec();
    with.extend(["--token-file", token_arg]);
    let ok = kura_verify(&with, &[]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    let env = kura_verify(&args, &[("KURA_TOKEN", "verify-token-0123456789")]);
    assert_eq!(env.status.code(), Some(0), "{}", text(&env));
}

#[test]
fn bad_arguments_exit_2_saying_what_to_fix() {
    let work = tempfile::tempdir().expect("tempdir");
    let missing = work.path().join("nothing-here");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--url", "http://127.0.0.1:1", "--out", "x"], "--table"),
        (
            vec!["--url", "localhost:8080", "--table", "t", "--out", "x"],
            "http",
        ),
        (
            vec![
                "--url",
                "http://127.0.0.1:1",
                "--against",
                missing.to_str().expect("utf-8"),
            ],
            "manifest",
        ),
        (
            vec![
                "--url",
                "http://127.0.0.1:1",
                "--table",
                "t",
                "--out",
                "x",
                "--against",
                "y",
            ],
            "cannot be used with",
        ),
        (
            vec![
                "--url",
                "http://127.0.0.1:1",
                "--table",
                "t",
                "--out",
                "x",
                "--start-time",
                "5",
                "--end-time",
                "5",
            ],
            "--start-time",
        ),
        (vec!["--url", "http://127.0.0.1:1", "--table", "t"], "--out"),
    ];
    for (args, says) in cases {
        let out = kura_verify(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?} should mention {says}: {}",
            text(&out)
        );
    }
}

#[test]
fn a_table_salted_over_several_kura_regions_is_hashed_as_one_region() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let mut http = server.client();
    let r = http
        .request(
            "PUT",
            "/test/schema",
            &[("Content-Type", "application/json")],
            br#"{"name":"test","KURA_REGIONS":"4","ColumnSchema":[{"name":"cf"}]}"#,
        )
        .expect("create");
    assert_eq!(r.status, 201, "{}", r.text());
    let regions = http
        .request(
            "GET",
            "/test/regions",
            &[("Accept", "application/json")],
            b"",
        )
        .expect("regions");
    assert_eq!(
        regions.text().matches("startKey").count(),
        4,
        "{}",
        regions.text()
    );
    put_cells(&mut http, "test", &fixture_cells(), &[]);
    let dir = work.path().join("h");
    let out = kura_verify(
        &[
            "--url",
            &url(&server),
            "--table",
            "test",
            "--out",
            dir.to_str().expect("utf-8"),
            "--batch-bytes",
            "10",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let h = HashDir::open(&dir).expect("open");
    assert_eq!(h.manifest().num_hash_files, 1);
    let mut b = h.batches();
    let mut keys = Vec::new();
    while let Some((k, _)) = b.next().expect("batch") {
        keys.push(k);
    }
    // One region starting at the empty key: its first batch holds row "1" under key "".
    assert_eq!(keys.len(), 100);
    assert_eq!(keys[0], b"");
    assert_eq!(keys[1], b"10");
    // Against HBase's hashes (other region boundaries) it still verifies equal.
    let same = kura_verify(
        &[
            "--url",
            &url(&server),
            "--table",
            "test",
            "--against",
            &fixture_hashdir(),
        ],
        &[],
    );
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
}

#[test]
fn the_manifest_records_rows_families_and_times_and_against_scans_just_those() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let mut http = server.client();
    let r = http
        .request(
            "PUT",
            "/t/schema",
            &[("Content-Type", "application/json")],
            br#"{"name":"t","ColumnSchema":[{"name":"cf","VERSIONS":"3"},{"name":"g"}]}"#,
        )
        .expect("create");
    assert_eq!(r.status, 201, "{}", r.text());
    let mut cells: Vec<Put> = Vec::new();
    for i in 0..50u32 {
        let key = format!("r{i:03}").into_bytes();
        for ts in [100, 200, 300] {
            cells.push((
                key.clone(),
                b"cf:a".to_vec(),
                ts,
                format!("{i}@{ts}").into_bytes(),
            ));
        }
        cells.push((key, b"g:b".to_vec(), 200, b"other".to_vec()));
    }
    put_cells(&mut http, "t", &cells, &[]);
    let dir = work.path().join("h");
    let dir_s = dir.to_str().expect("utf-8");
    let out = kura_verify(
        &[
            "--url",
            &url(&server),
            "--table",
            "t",
            "--out",
            dir_s,
            "--families",
            "cf",
            "--start-row",
            "r010",
            "--stop-row",
            "r040",
            "--start-time",
            "150",
            "--end-time",
            "250",
            "--versions",
            "3",
            "--batch-bytes",
            "40",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let h = HashDir::open(&dir).expect("open");
    let m = h.manifest();
    assert_eq!(m.families, Some(vec![b"cf".to_vec()]));
    assert_eq!(
        (m.start_row.as_slice(), m.stop_row.as_slice()),
        (&b"r010"[..], &b"r040"[..])
    );
    assert_eq!(
        (m.start_time, m.end_time, m.versions),
        (Some(150), Some(250), Some(3))
    );
    let text_manifest = std::fs::read_to_string(dir.join("manifest")).expect("manifest");
    assert!(
        text_manifest.contains("startRowHex=72303130\n"),
        "{text_manifest}"
    );
    let mut b = h.batches();
    let mut keys = Vec::new();
    while let Some((k, _)) = b.next().expect("batch") {
        keys.push(String::from_utf8(k).expect("ascii"));
    }
    // One cell of 4 + 2 + 1 + 8 + 6 = 21 bytes per row (only cf:a@200 is in range): batches of
    // two rows, the first keyed by --start-row (HashTable's split start).
    assert_eq!(keys.first().map(String::as_str), Some("r010"));
    assert_eq!(keys.len(), 15, "{keys:?}");
    let against = ["--url", &url(&server), "--table", "t", "--against", dir_s];
    // Outside the recorded scan: another family, another time, rows past the stop row.
    put_cells(
        &mut http,
        "t",
        &[
            (b"r020".to_vec(), b"g:b".to_vec(), 200, b"changed".to_vec()),
            (b"r021".to_vec(), b"cf:a".to_vec(), 400, b"later".to_vec()),
            (
                b"r045".to_vec(),
                b"cf:a".to_vec(),
                200,
                b"past the stop row".to_vec(),
            ),
            (
                b"r005".to_vec(),
                b"cf:a".to_vec(),
                200,
                b"before the start row".to_vec(),
            ),
        ],
        &[],
    );
    let same = kura_verify(&against, &[]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    // Inside it.
    put_cells(
        &mut http,
        "t",
        &[(b"r033".to_vec(), b"cf:a".to_vec(), 200, b"x".to_vec())],
        &[],
    );
    let diff = kura_verify(&against, &[]);
    assert_eq!(diff.status.code(), Some(3), "{}", text(&diff));
    let stdout = String::from_utf8_lossy(&diff.stdout);
    assert!(stdout.contains("differs: rows [r032, r034)"), "{stdout}");
}
