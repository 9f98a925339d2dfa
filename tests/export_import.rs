//! `kura export` and `kura import`, run as the real binary against a real `kura` server's REST
//! API.
//!
//! What a user relies on:
//! 1. A table exported with every version and imported into another table scans identically:
//!    binary row keys, an empty qualifier, several versions, counters, a 1 MiB value, thousands
//!    of rows, and the effect of deletes.
//! 2. An export or an import killed midway (kill -9, or stopped), run again, ends exactly as an
//!    uninterrupted run: the same files, byte for byte, and the same table.
//! 3. Importing the same files twice leaves counters at their exported value.
//! 4. Files written the way HBase writes them (RECORD and BLOCK compression, a row split over
//!    records, empty Results, delete markers, `_`/`.` files, the 0.94 format) are imported.
//! 5. Bad files and bad arguments stop with a message that says what is wrong.

mod server_harness;

use base64::Engine;
use kura_formats::result::{encode_result, CellKind, ExportCell};
use kura_formats::seqfile::{Compression, Writer};
use kura_formats::writable::{ibw, IMMUTABLE_BYTES_WRITABLE, NULL_WRITABLE, RESULT};
use server_harness::{b64, output_text as text, run_kura, wait_until, Http, Server};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn kura(args: &[&str]) -> Output {
    run_kura(args, &[])
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{}", text(&o));
    o
}

fn json() -> [(&'static str, &'static str); 2] {
    [
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ]
}

fn create(http: &mut Http, table: &str, families: &str) {
    let body = format!(r#"{{"name":"{table}","ColumnSchema":[{families}]}}"#);
    let r = http
        .request("PUT", &format!("/{table}/schema"), &json(), body.as_bytes())
        .expect("create");
    assert_eq!(r.status, 201, "{}", r.text());
}

/// A cell to put: `(row, "fam:qual", ts, value)`.
type PutCell<'a> = (&'a [u8], &'a [u8], i64, &'a [u8]);

/// Puts cells in one CellSet request.
fn put(http: &mut Http, table: &str, cells: &[PutCell]) {
    let rows: Vec<String> = cells
        .iter()
        .map(|(row, col, ts, v)| {
            format!(
                r#"{{"key":"{}","Cell":[{{"column":"{}","timestamp":{ts},"$":"{}"}}]}}"#,
                b64(row),
                b64(col),
                b64(v)
            )
        })
        .collect();
    let body = format!(r#"{{"Row":[{}]}}"#, rows.join(","));
    let r = http
        .request(
            "PUT",
            &format!("/{table}/fakerow"),
            &json(),
            body.as_bytes(),
        )
        .expect("put");
    assert_eq!(r.status, 200, "{}", r.text());
}

fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

/// Every cell of `table`, every version: (row, column) → [(ts, value)] newest first.
type Cells = BTreeMap<(Vec<u8>, Vec<u8>), Vec<(i64, Vec<u8>)>>;

/// Uses a connection of its own: the test's may have idled past the server's keep-alive
/// timeout while a command ran.
fn scan_all(server: &Server, table: &str) -> Cells {
    let http = &mut server.client();
    let r = http
        .request(
            "PUT",
            &format!("/{table}/scanner"),
            &json(),
            br#"{"batch":1000,"maxVersions":100}"#,
        )
        .expect("scanner");
    assert_eq!(r.status, 201, "{}", r.text());
    let location = r.header("Location").expect("Location").to_string();
    let path = location
        .find(&format!("/{table}/scanner"))
        .map(|i| location[i..].to_string())
        .expect("scanner path");
    let mut out = Cells::new();
    loop {
        let r = http
            .request("GET", &path, &[("Accept", "application/json")], b"")
            .expect("next");
        if r.status == 204 {
            break;
        }
        assert_eq!(r.status, 200, "{}", r.text());
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
        for row in v["Row"].as_array().expect("rows") {
            let key = unb64(row["key"].as_str().expect("key"));
            for c in row["Cell"].as_array().expect("cells") {
                out.entry((key.clone(), unb64(c["column"].as_str().expect("column"))))
                    .or_default()
                    .push((
                        c["timestamp"].as_i64().expect("ts"),
                        unb64(c["$"].as_str().expect("value")),
                    ));
            }
        }
    }
    let _ = http.request("DELETE", &path, &[], b"");
    out
}

/// The round-trip table: binary keys, an empty qualifier, three versions, a counter, a 1 MiB
/// value, `small` small rows, and deletes.
fn fill(http: &mut Http, table: &str, small: usize) {
    create(
        http,
        table,
        r#"{"name":"cf","VERSIONS":"3"},{"name":"g","VERSIONS":"1"}"#,
    );
    put(
        http,
        table,
        &[
            (b"\x00", b"cf:a", 10, b"zero"),
            (b"\xff", b"cf:a", 11, b"\xff\x00"),
            (b"\x00\xff\x00", b"cf:", 12, b"empty qualifier"),
            (b"versions", b"cf:v", 100, b"one"),
            (b"versions", b"cf:v", 200, b"two"),
            (b"versions", b"cf:v", 300, b"three"),
            (b"versions", b"g:only", 300, b"g"),
        ],
    );
    let big: Vec<u8> = (0..1 << 20).map(|i| (i * 7 % 251) as u8).collect();
    put(http, table, &[(b"big", b"g:blob", 5, &big)]);
    for _ in 0..3 {
        let body = format!(
            r#"{{"Row":[{{"key":"{}","Cell":[{{"column":"{}","$":"{}"}}]}}]}}"#,
            b64(b"counter"),
            b64(b"cf:n"),
            b64(b"5")
        );
        let r = http
            .request(
                "PUT",
                &format!("/{table}/counter?check=increment"),
                &json(),
                body.as_bytes(),
            )
            .expect("increment");
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..small)
        .map(|i| {
            (
                format!("row{i:05}").into_bytes(),
                format!("value {i}").into_bytes(),
            )
        })
        .collect();
    for chunk in rows.chunks(1000) {
        let cells: Vec<PutCell> = chunk
            .iter()
            .map(|(k, v)| (&k[..], &b"g:x"[..], 1000, &v[..]))
            .collect();
        put(http, table, &cells);
    }
    // Deletes: a whole row, one column of another, the newest version of a third column.
    put(
        http,
        table,
        &[(b"row00001", b"cf:gone", 50, b"soon deleted")],
    );
    for path in [
        format!("/{table}/row00007"),
        format!("/{table}/row00001/cf:gone"),
    ] {
        let r = http.request("DELETE", &path, &[], b"").expect("delete");
        assert_eq!(r.status, 200, "{}", r.text());
    }
}

fn counter_value(cells: &Cells) -> i64 {
    let v = &cells[&(b"counter".to_vec(), b"cf:n".to_vec())];
    i64::from_be_bytes(v[0].1.clone().try_into().expect("8 bytes"))
}

#[test]
fn a_table_exported_with_every_version_imports_into_an_identical_table() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let mut http = server.client();
    fill(&mut http, "src", 5000);
    let url = format!("http://{}", server.addr);
    let out = work.path().join("export");
    let o = ok(kura(&[
        "export",
        "--url",
        &url,
        "--table",
        "src",
        "--out",
        out.to_str().expect("utf-8"),
        "--versions",
        "3",
        "--rows-per-part",
        "2000",
    ]));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("exported 5005 rows"),
        "{}",
        text(&o)
    );
    let names: Vec<String> = std::fs::read_dir(&out)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    for n in [
        "part-m-00000",
        "part-m-00001",
        "part-m-00002",
        "_SUCCESS",
        "kura-export.json",
    ] {
        assert!(names.contains(&n.to_string()), "{n} in {names:?}");
    }
    assert_eq!(names.len(), 5, "{names:?}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("kura-export.json")).expect("read"))
            .expect("json");
    assert_eq!(manifest["rows"], 5005);
    assert!(manifest["create"]["hbase_shell"]
        .as_str()
        .expect("shell")
        .contains("{NAME => 'cf', VERSIONS => 3}"));

    let cp = work.path().join("import.cp");
    let o = ok(kura(&[
        "import",
        "--url",
        &url,
        "--table",
        "dst",
        "--from",
        out.to_str().expect("utf-8"),
        "--checkpoint",
        cp.to_str().expect("utf-8"),
    ]));
    assert!(String::from_utf8_lossy(&o.stderr).contains("created table dst"));
    let src = scan_all(&server, "src");
    let dst = scan_all(&server, "dst");
    assert_eq!(src.len(), dst.len());
    assert!(
        src == dst,
        "the imported table differs from the exported one"
    );
    assert_eq!(src[&(b"versions".to_vec(), b"cf:v".to_vec())].len(), 3);
    assert!(src.contains_key(&(b"\x00\xff\x00".to_vec(), b"cf:".to_vec())));
    assert!(!src.keys().any(|(r, _)| r == b"row00007"));
    assert!(!src.contains_key(&(b"row00001".to_vec(), b"cf:gone".to_vec())));
    assert_eq!(counter_value(&dst), 15);
    assert!(!cp.exists(), "the checkpoint is removed once done");
    let schema = server
        .client()
        .request("GET", "/dst/schema", &[("Accept", "application/json")], b"")
        .expect("schema");
    assert!(
        schema.text().contains(r#""VERSIONS":"3""#),
        "{}",
        schema.text()
    );
}

/// The files of an export directory, name → bytes.
fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().into_string().expect("utf-8"),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect()
}

fn export_args<'a>(url: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "export",
        "--url",
        url,
        "--table",
        "src",
        "--out",
        out,
        "--versions",
        "3",
        "--rows-per-part",
        "300",
        "--batch-rows",
        "50",
        "--sync-seed",
        "fixed-for-the-test",
    ]
}

/// Spawns `kura args`, waits until `ready()` holds, kills it with SIGKILL; returns whether it
/// was still running when killed.
fn kill_when(args: &[&str], ready: impl Fn() -> bool) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kura"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kura");
    let mut exited = false;
    wait_until("kura exits or is ready", Duration::from_secs(120), || {
        exited = matches!(child.try_wait(), Ok(Some(_)));
        exited || ready()
    });
    let _ = child.kill();
    let _ = child.wait();
    !exited
}

#[test]
fn an_export_killed_or_stopped_midway_resumes_to_the_same_files_byte_for_byte() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let mut http = server.client();
    fill(&mut http, "src", 3000);
    let url = format!("http://{}", server.addr);
    let whole = work.path().join("whole");
    ok(kura(&export_args(&url, whole.to_str().expect("utf-8"))));
    let expected = files_of(&whole);
    assert!(expected.len() > 10, "several parts: {:?}", expected.keys());

    // Stopped in the middle of a part (row 1000 of parts of 300 rows).
    let stopped = work.path().join("stopped");
    let args = export_args(&url, stopped.to_str().expect("utf-8"));
    let o = kura(&[&args[..], &["--stop-after-rows", "1000"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stopped.join(".kura-export.resume").exists());
    assert!(!stopped.join("_SUCCESS").exists());
    ok(kura(&args));
    assert!(
        files_of(&stopped) == expected,
        "the stopped-and-resumed export differs"
    );

    // Killed with SIGKILL once some parts are complete.
    let killed = work.path().join("killed");
    let args = export_args(&url, killed.to_str().expect("utf-8"));
    let part2 = killed.join("part-m-00002");
    assert!(kill_when(&args, || part2.exists()), "killed while running");
    let resume_of_killed =
        std::fs::read_to_string(killed.join(".kura-export.resume")).expect("a resume file");
    ok(kura(&args));
    assert!(
        files_of(&killed) == expected,
        "the killed-and-resumed export differs"
    );

    // Killed after _SUCCESS, before the resume file was removed: run again, it is finished.
    let args = export_args(&url, killed.to_str().expect("utf-8"));
    std::fs::write(
        killed.join(".kura-export.resume"),
        resume_of_killed.as_bytes(),
    )
    .expect("write");
    let o = ok(kura(&args));
    assert!(String::from_utf8_lossy(&o.stdout).contains("already holds this export"));
    assert!(files_of(&killed) == expected);

    // A damaged completed part is detected on resume and written again.
    let damaged = work.path().join("damaged");
    let args = export_args(&url, damaged.to_str().expect("utf-8"));
    let o = kura(&[&args[..], &["--stop-after-rows", "1000"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let mut bytes = std::fs::read(damaged.join("part-m-00001")).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(damaged.join("part-m-00001"), bytes).expect("write");
    let o = ok(kura(&args));
    assert!(String::from_utf8_lossy(&o.stderr).contains("part-m-00001"));
    assert!(
        files_of(&damaged) == expected,
        "the repaired export differs"
    );
}

#[test]
fn an_import_killed_or_stopped_midway_resumes_to_the_same_table() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let mut http = server.client();
    fill(&mut http, "src", 3000);
    let url = format!("http://{}", server.addr);
    let out = work.path().join("export");
    let out_s = out.to_str().expect("utf-8");
    ok(kura(&[
        "export",
        "--url",
        &url,
        "--table",
        "src",
        "--out",
        out_s,
        "--versions",
        "3",
        "--rows-per-part",
        "700",
    ]));
    let src = scan_all(&server, "src");

    let cp = work.path().join("stopped.cp");
    let args = [
        "import",
        "--url",
        &url,
        "--table",
        "stopped",
        "--from",
        out_s,
        "--checkpoint",
        cp.to_str().expect("utf-8"),
        "--batch-cells",
        "200",
    ];
    let o = kura(&[&args[..], &["--stop-after-batches", "4"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(cp.exists());
    let partial = scan_all(&server, "stopped");
    assert!(!partial.is_empty() && partial.len() < src.len());
    let o = ok(kura(&args));
    assert!(String::from_utf8_lossy(&o.stderr).contains("resuming at part-m-00000"));
    assert!(scan_all(&server, "stopped") == src);

    let cp = work.path().join("killed.cp");
    let args = [
        "import",
        "--url",
        &url,
        "--table",
        "killed",
        "--from",
        out_s,
        "--checkpoint",
        cp.to_str().expect("utf-8"),
        "--batch-cells",
        "100",
    ];
    let cp_probe = cp.clone();
    let running = kill_when(&args, || {
        std::fs::read_to_string(&cp_probe).is_ok_and(|t| t.contains("part-m-00001"))
    });
    assert!(running, "killed while running");
    ok(kura(&args));
    let killed = scan_all(&server, "killed");
    assert!(killed == src, "the killed-and-resumed import differs");
    assert_eq!(counter_value(&killed), 15);
}

#[test]
fn importing_the_same_files_twice_never_doubles_a_counter() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let mut http = server.client();
    fill(&mut http, "src", 10);
    let url = format!("http://{}", server.addr);
    let out = work.path().join("export");
    let out_s = out.to_str().expect("utf-8");
    ok(kura(&[
        "export", "--url", &url, "--table", "src", "--out", out_s,
    ]));
    for _ in 0..2 {
        ok(kura(&[
            "import",
            "--url",
            &url,
            "--table",
            "again",
            "--from",
            out_s,
            "--checkpoint",
            work.path().join("cp").to_str().expect("utf-8"),
        ]));
        assert_eq!(counter_value(&scan_all(&server, "again")), 15);
    }
    // And the counter goes on from its exported value.
    let body = format!(
        r#"{{"Row":[{{"key":"{}","Cell":[{{"column":"{}","$":"{}"}}]}}]}}"#,
        b64(b"counter"),
        b64(b"cf:n"),
        b64(b"1")
    );
    let r = http
        .request(
            "PUT",
            "/again/counter?check=increment",
            &json(),
            body.as_bytes(),
        )
        .expect("increment");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(counter_value(&scan_all(&server, "again")), 16);
}

fn cell(row: &[u8], fq: (&[u8], &[u8]), ts: i64, kind: CellKind, v: &[u8]) -> ExportCell {
    ExportCell {
        row: row.to_vec(),
        family: fq.0.to_vec(),
        qualifier: fq.1.to_vec(),
        timestamp: ts,
        kind,
        value: v.to_vec(),
    }
}

fn write_part(path: &Path, compression: Compression, records: &[(&[u8], Vec<ExportCell>)]) {
    let mut w =
        Writer::create(path, IMMUTABLE_BYTES_WRITABLE, RESULT, compression).expect("create");
    for (key, cells) in records {
        w.append(&ibw(key), &encode_result(cells).expect("encode"))
            .expect("append");
    }
    w.finish().expect("finish");
}

#[test]
fn files_written_as_hbase_writes_them_are_imported_with_their_deletes() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let url = format!("http://{}", server.addr);
    let dir = work.path().join("hbase");
    std::fs::create_dir(&dir).expect("mkdir");
    let cf = |q: &'static [u8]| (&b"cf"[..], q);
    // part-m-00000, RECORD compressed: row "a" split over two records, an empty Result.
    write_part(
        &dir.join("part-m-00000"),
        Compression::Record,
        &[
            (
                b"a",
                vec![cell(b"a", cf(b"x"), 30, CellKind::Put, b"a-x-30")],
            ),
            (
                b"a",
                vec![
                    cell(b"a", cf(b"y"), 20, CellKind::Put, b"a-y-20"),
                    cell(b"a", cf(b"y"), 10, CellKind::Put, b"a-y-10"),
                ],
            ),
            (b"b", vec![]),
        ],
    );
    // part-m-00001, BLOCK compressed, with delete markers over data written before them.
    write_part(
        &dir.join("part-m-00001"),
        Compression::Block,
        &[
            (
                b"c",
                vec![
                    cell(b"c", cf(b"q"), 9, CellKind::DeleteColumn, b""),
                    cell(b"c", cf(b"q"), 8, CellKind::Put, b"masked"),
                    cell(b"c", cf(b"q"), 12, CellKind::Put, b"kept"),
                ],
            ),
            (
                b"d",
                vec![
                    cell(b"d", cf(b""), 7, CellKind::DeleteFamily, b""),
                    cell(b"d", cf(b"r"), 5, CellKind::Put, b"masked"),
                ],
            ),
            (
                b"e",
                vec![
                    cell(b"e", cf(b"v"), 2, CellKind::Put, b"two"),
                    cell(b"e", cf(b"v"), 1, CellKind::Put, b"one"),
                    cell(b"e", cf(b"v"), 2, CellKind::DeleteVersion, b""),
                ],
            ),
        ],
    );
    std::fs::write(dir.join("_SUCCESS"), b"").expect("write");
    std::fs::write(dir.join(".part-m-00000.crc"), b"not a sequence file").expect("write");
    std::fs::write(dir.join("_logs"), b"not a sequence file").expect("write");

    let dir_s = dir.to_str().expect("utf-8");
    let cp = work.path().join("cp");
    let base = [
        "import",
        "--url",
        &url,
        "--table",
        "h",
        "--from",
        dir_s,
        "--checkpoint",
        cp.to_str().expect("utf-8"),
    ];
    let o = kura(&base);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--create-families"),
        "{}",
        text(&o)
    );
    let o = ok(kura(
        &[
            &base[..],
            &["--create-families", "cf", "--create-versions", "5"],
        ]
        .concat(),
    ));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("3 delete markers"),
        "{}",
        text(&o)
    );
    let got = scan_all(&server, "h");
    let col = |r: &[u8], c: &[u8]| got.get(&(r.to_vec(), c.to_vec())).cloned();
    assert_eq!(
        col(b"a", b"cf:y"),
        Some(vec![(20, b"a-y-20".to_vec()), (10, b"a-y-10".to_vec())])
    );
    assert_eq!(col(b"a", b"cf:x"), Some(vec![(30, b"a-x-30".to_vec())]));
    assert_eq!(col(b"c", b"cf:q"), Some(vec![(12, b"kept".to_vec())]));
    assert_eq!(col(b"d", b"cf:r"), None);
    assert_eq!(col(b"e", b"cf:v"), Some(vec![(1, b"one".to_vec())]));
    assert!(!got.keys().any(|(r, _)| r == b"b"));
}

#[test]
fn hbase_094_values_are_read_with_the_flag() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let url = format!("http://{}", server.addr);
    let dir = work.path().join("old");
    std::fs::create_dir(&dir).expect("mkdir");
    let kv = |row: &[u8], q: &[u8], ts: i64, v: &[u8]| {
        let mut key = (row.len() as u16).to_be_bytes().to_vec();
        key.extend_from_slice(row);
        key.push(2);
        key.extend_from_slice(b"cf");
        key.extend_from_slice(q);
        key.extend_from_slice(&ts.to_be_bytes());
        key.push(4);
        let mut out = (key.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&(v.len() as i32).to_be_bytes());
        out.extend_from_slice(&key);
        out.extend_from_slice(v);
        out
    };
    let mut body = Vec::new();
    for k in [kv(b"r", b"a", 3, b"v3"), kv(b"r", b"b", 4, b"v4")] {
        body.extend_from_slice(&(k.len() as i32).to_be_bytes());
        body.extend_from_slice(&k);
    }
    let mut value = (body.len() as i32).to_be_bytes().to_vec();
    value.extend_from_slice(&body);
    let mut w = Writer::create(
        dir.join("part-m-00000"),
        IMMUTABLE_BYTES_WRITABLE,
        RESULT,
        Compression::None,
    )
    .expect("create");
    w.append(&ibw(b"r"), &value).expect("append");
    w.finish().expect("finish");
    let dir_s = dir.to_str().expect("utf-8");
    let cp = work.path().join("cp");
    let base = [
        "import",
        "--url",
        &url,
        "--table",
        "old",
        "--from",
        dir_s,
        "--checkpoint",
        cp.to_str().expect("utf-8"),
        "--create-families",
        "cf",
    ];
    let o = kura(&base);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--hbase-0.94"),
        "{}",
        text(&o)
    );
    std::fs::remove_file(&cp).ok();
    ok(kura(&[&base[..], &["--hbase-0.94"]].concat()));
    let got = scan_all(&server, "old");
    assert_eq!(
        got[&(b"r".to_vec(), b"cf:a".to_vec())],
        vec![(3, b"v3".to_vec())]
    );
    assert_eq!(
        got[&(b"r".to_vec(), b"cf:b".to_vec())],
        vec![(4, b"v4".to_vec())]
    );
}

#[test]
fn bad_files_and_arguments_stop_with_a_clear_error() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(data.path(), &[]);
    let mut http = server.client();
    create(&mut http, "t", r#"{"name":"cf"}"#);
    let url = format!("http://{}", server.addr);
    let import = |dir: &Path| {
        kura(&[
            "import",
            "--url",
            &url,
            "--table",
            "t",
            "--from",
            dir.to_str().expect("utf-8"),
            "--checkpoint",
            work.path().join("cp").to_str().expect("utf-8"),
        ])
    };
    let case = |name: &str| {
        let d = work.path().join(name);
        std::fs::create_dir(&d).expect("mkdir");
        d
    };
    let fails_with = |o: Output, words: &[&str]| {
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        for w in words {
            assert!(err.contains(w), "{w:?} missing: {}", text(&o));
        }
    };

    // A codec other than zlib.
    let d = case("snappy");
    let mut header = b"SEQ\x06".to_vec();
    for s in [
        IMMUTABLE_BYTES_WRITABLE,
        RESULT,
        "org.apache.hadoop.io.compress.SnappyCodec",
    ] {
        if s.contains("Snappy") {
            header.extend_from_slice(&[1, 0]);
        }
        header.push(s.len() as u8);
        header.extend_from_slice(s.as_bytes());
    }
    header.extend_from_slice(&[0; 20]);
    std::fs::write(d.join("part-m-00000"), &header).expect("write");
    fails_with(
        import(&d),
        &["unsupported codec", "SnappyCodec", "part-m-00000"],
    );

    // A truncated file: the error names it and the offset.
    let d = case("truncated");
    let p = d.join("part-m-00000");
    write_part(
        &p,
        Compression::None,
        &[(
            b"r",
            vec![cell(b"r", (b"cf", b"q"), 1, CellKind::Put, b"value")],
        )],
    );
    let bytes = std::fs::read(&p).expect("read");
    std::fs::write(&p, &bytes[..bytes.len() - 3]).expect("write");
    fails_with(import(&d), &["part-m-00000", "truncated at byte 127"]);

    // Wrong classes (a HashTable partitions file).
    let d = case("classes");
    let mut w = Writer::create(
        d.join("part-m-00000"),
        IMMUTABLE_BYTES_WRITABLE,
        NULL_WRITABLE,
        Compression::None,
    )
    .expect("create");
    w.append(&ibw(b"k"), b"").expect("append");
    w.finish().expect("finish");
    fails_with(import(&d), &[NULL_WRITABLE, RESULT]);

    // A DeleteFamilyVersion marker cannot be written through REST.
    let d = case("type10");
    let mut w = Writer::create(
        d.join("part-m-00000"),
        IMMUTABLE_BYTES_WRITABLE,
        RESULT,
        Compression::None,
    )
    .expect("create");
    let msg = kura_formats::result::pb::Result {
        cell: vec![kura_formats::result::pb::Cell {
            row: Some(b"r\x01".to_vec()),
            family: Some(b"cf".to_vec()),
            qualifier: Some(vec![]),
            timestamp: Some(5),
            cell_type: Some(10),
            value: Some(vec![]),
            tags: None,
        }],
        ..Default::default()
    };
    w.append(
        &ibw(b"r\x01"),
        &prost::Message::encode_length_delimited_to_vec(&msg),
    )
    .expect("append");
    w.finish().expect("finish");
    fails_with(import(&d), &["DeleteFamilyVersion", "r\\x01", "record 1"]);

    // No part files at all.
    fails_with(import(&case("empty")), &["no part-* files"]);

    // --raw cannot be served by the REST API: a usage error.
    let o = kura(&[
        "export",
        "--url",
        &url,
        "--table",
        "t",
        "--out",
        work.path().join("raw").to_str().expect("utf-8"),
        "--raw",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no raw scan"));

    // A missing table or family.
    let o = kura(&[
        "export",
        "--url",
        &url,
        "--table",
        "nope",
        "--out",
        work.path().join("nope").to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no table nope"));
    let o = kura(&[
        "export",
        "--url",
        &url,
        "--table",
        "t",
        "--out",
        work.path().join("fam").to_str().expect("utf-8"),
        "--families",
        "zz",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no family \"zz\""));
}

#[test]
fn an_export_selects_by_time_range_prefix_and_family_and_sends_the_token() {
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let token_file = work.path().join("token");
    std::fs::write(&token_file, "export-token-0123456789\n").expect("write");
    let token = token_file.to_str().expect("utf-8");
    let server = Server::start(data.path(), &["--token-file", token]);
    let mut http = server.client();
    let auth = |extra: &[(&'static str, &'static str)]| {
        let mut h = vec![("Authorization", "Bearer export-token-0123456789")];
        h.extend_from_slice(extra);
        h
    };
    let r = http
        .request(
            "PUT",
            "/t/schema",
            &auth(&json()),
            br#"{"name":"t","ColumnSchema":[{"name":"cf","VERSIONS":"5"},{"name":"g"}]}"#,
        )
        .expect("create");
    assert_eq!(r.status, 201, "{}", r.text());
    let mut rows = Vec::new();
    for key in [&b"a\x00"[..], b"a\x00z", b"a\x01", b"b"] {
        for ts in [100, 200, 300] {
            rows.push(format!(
                r#"{{"key":"{}","Cell":[{{"column":"{}","timestamp":{ts},"$":"{}"}},{{"column":"{}","timestamp":{ts},"$":"{}"}}]}}"#,
                b64(key), b64(b"cf:q"), b64(b"v"), b64(b"g:q"), b64(b"w")
            ));
        }
    }
    let body = format!(r#"{{"Row":[{}]}}"#, rows.join(","));
    let r = http
        .request("PUT", "/t/fakerow", &auth(&json()), body.as_bytes())
        .expect("put");
    assert_eq!(r.status, 200, "{}", r.text());
    let url = format!("http://{}", server.addr);
    let out = work.path().join("sel");
    let args = [
        "export",
        "--url",
        &url,
        "--table",
        "t",
        "--out",
        out.to_str().expect("utf-8"),
        "--versions",
        "5",
        "--start-time",
        "150",
        "--end-time",
        "300",
        "--prefix",
        "a\\x00",
        "--families",
        "cf",
    ];
    let o = kura(&args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--token-file"),
        "{}",
        text(&o)
    );
    ok(kura(&[&args[..], &["--token-file", token]].concat()));
    let mut r = kura_formats::seqfile::Reader::open(out.join("part-m-00000")).expect("open");
    let mut got = Vec::new();
    while let Some((k, v)) = r.next().expect("record") {
        let cells = kura_formats::result::decode_result(&v).expect("result");
        got.push((
            kura_formats::writable::ibw_bytes(&k).expect("ibw").to_vec(),
            cells
                .iter()
                .map(|c| (c.family.clone(), c.timestamp))
                .collect::<Vec<_>>(),
        ));
    }
    let only_200 = vec![(b"cf".to_vec(), 200)];
    assert_eq!(
        got,
        vec![
            (b"a\x00".to_vec(), only_200.clone()),
            (b"a\x00z".to_vec(), only_200)
        ]
    );
}
