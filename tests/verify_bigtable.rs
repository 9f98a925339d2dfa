//! `kura verify` against a Kura server on the Bigtable backend (Google's emulator): its regions
//! are Bigtable's tablets, reported with real row-key ranges by `GET /{table}/regions`, which
//! `--out` takes as HashTable's region starts.
//!
//! What a user relies on: the fixture table loaded into a Bigtable-backed Kura verifies equal
//! against HBase's own hashes, and `--out` then `--against` round-trips.

mod server_harness;

use kura_bigtable::emulator::Emulator;
use kura_formats::hashtable::HashDir;
use kura_formats::hfile::HFile;
use server_harness::{b64, create_table, Server};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hbase-2x")
}

fn kura_verify(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kura"))
        .arg("verify")
        .args(args)
        .env_remove("KURA_TOKEN")
        .output()
        .expect("run kura verify")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_bigtable_backed_table_verifies_against_hbases_hashes_and_round_trips() {
    let emulator = Emulator::start();
    // The server inherits this process's environment: this file holds one test only.
    std::env::set_var("BIGTABLE_EMULATOR_HOST", &emulator.host);
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(
        data.path(),
        &[
            "--backend",
            "bigtable",
            "--bigtable-project",
            "p",
            "--bigtable-instance",
            "verify",
        ],
    );
    let mut http = server.client();
    create_table(&mut http, "test", &["cf"]);
    let mut rows = Vec::new();
    for entry in std::fs::read_dir(fixtures().join("hfiles")).expect("hfiles") {
        let f = HFile::open(&entry.expect("entry").path()).expect("an HFile");
        for c in f.cells().expect("cells") {
            rows.push(format!(
                "{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"{}\",\"timestamp\":{},\"$\":\"{}\"}}]}}",
                b64(&c.row),
                b64(b"cf:a"),
                c.timestamp,
                b64(&c.value)
            ));
        }
    }
    let body = format!("{{\"Row\":[{}]}}", rows.join(","));
    let r = http
        .request(
            "PUT",
            "/test/fakerow",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .expect("put");
    assert!(r.status == 200 || r.status == 201, "{}", r.text());
    let url = format!("http://{}", server.addr);
    let fixture = fixtures().join("hashtable");
    let out = kura_verify(&[
        "--url",
        &url,
        "--table",
        "test",
        "--against",
        fixture.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("101 ranges equal"));

    let dir = work.path().join("h");
    let dir_s = dir.to_str().expect("utf-8");
    let out = kura_verify(&["--url", &url, "--table", "test", "--out", dir_s]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let h = HashDir::open(&dir).expect("open");
    let mut b = h.batches();
    let first = b.next().expect("read").expect("a batch");
    assert_eq!(first.0, b"", "the first tablet starts at the empty key");
    let again = kura_verify(&["--url", &url, "--table", "test", "--against", dir_s]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
}
