//! `kura backup` and `kura restore`, run as the real binary against a real server.
//!
//! What a user relies on:
//! 1. A backup of a running server, restored into a fresh data directory, serves every row and
//!    version it had, also of a table dropped since; `restore --verify` finds a flipped byte
//!    and names the file, and a damaged or incomplete backup is never restored.
//! 2. A backup taken while writes go on holds every write acknowledged before it began.
//! 3. kill -9 of the server in the middle of a backup leaves the server's data and earlier
//!    backups intact; a backup command killed or stopped midway, run again, completes with
//!    the same content as an uninterrupted backup.

mod server_harness;

use base64::Engine;
use server_harness::{b64, output_text as text, run_kura, wait_until, Http, Server};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

type Dump = BTreeMap<Vec<u8>, Vec<(Vec<u8>, i64, Vec<u8>)>>;

fn kura(args: &[&str]) -> Output {
    kura_env(args, &[])
}

fn kura_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    run_kura(args, env)
}

fn url(s: &Server) -> String {
    format!("http://{}", s.addr)
}

fn backup(s: &Server, out: &Path, extra: &[&str]) -> Output {
    let u = url(s);
    let mut args = vec![
        "backup",
        "--url",
        &u,
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    kura(&args)
}

fn restore(from: &Path, data_dir: Option<&Path>, verify: bool) -> Output {
    let mut args = vec![
        "restore".to_string(),
        "--from".into(),
        from.display().to_string(),
    ];
    if let Some(d) = data_dir {
        args.push("--data-dir".into());
        args.push(d.display().to_string());
    }
    if verify {
        args.push("--verify".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    kura(&args)
}

fn ok(http: &mut Http, method: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let r = http
        .request(
            method,
            path,
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json"),
            ],
            body,
        )
        .expect("request");
    assert!(
        (200..300).contains(&r.status),
        "{method} {path}: {} {}",
        r.status,
        r.text()
    );
    r.body
}

fn create_table(http: &mut Http, table: &str) {
    let schema = format!(r#"{{"name":"{table}","ColumnSchema":[{{"name":"cf","VERSIONS":"3"}}]}}"#);
    ok(http, "PUT", &format!("/{table}/schema"), schema.as_bytes());
}

/// Puts `cf:q` of `row` at `ts` (explicit timestamp).
fn put(http: &mut Http, table: &str, row: &str, ts: i64, value: &str) {
    let body = format!(
        r#"{{"Row":[{{"key":"{}","Cell":[{{"column":"{}","timestamp":{ts},"$":"{}"}}]}}]}}"#,
        b64(row.as_bytes()),
        b64(b"cf:q"),
        b64(value.as_bytes())
    );
    ok(http, "PUT", &format!("/{table}/fakerow"), body.as_bytes());
}

/// Every cell of every version of `table`, through a scanner.
fn dump(http: &mut Http, table: &str) -> Dump {
    let r = http
        .request(
            "PUT",
            &format!("/{table}/scanner"),
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json"),
            ],
            br#"{"batch":1000,"maxVersions":10}"#,
        )
        .expect("open scanner");
    assert_eq!(r.status, 201, "{}", r.text());
    let location = r.header("Location").expect("Location").to_string();
    let path = location
        .find("://")
        .and_then(|i| {
            location[i + 3..]
                .find('/')
                .map(|j| location[i + 3 + j..].to_string())
        })
        .unwrap_or(location);
    let d = |s: &serde_json::Value| {
        base64::engine::general_purpose::STANDARD
            .decode(s.as_str().expect("base64 string"))
            .expect("base64")
    };
    let mut out = Dump::new();
    loop {
        let r = http
            .request("GET", &path, &[("Accept", "application/json")], b"")
            .expect("scanner next");
        if r.status == 204 {
            break;
        }
        assert_eq!(r.status, 200, "{}", r.text());
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("CellSet");
        for row in v["Row"].as_array().expect("rows") {
            let key = d(&row["key"]);
            for c in row["Cell"].as_array().expect("cells") {
                out.entry(key.clone()).or_default().push((
                    d(&c["column"]),
                    c["timestamp"].as_i64().expect("timestamp"),
                    d(&c["$"]),
                ));
            }
        }
    }
    let _ = http.request("DELETE", &path, &[], b"");
    out
}

/// A table `t` of `rows` rows with three versions each, part of them flushed to segments and
/// part in the memtable, and one row deleted.
fn fill(http: &mut Http, rows: usize) {
    create_table(http, "t");
    for i in 0..rows {
        for ts in 1..=3 {
            put(http, "t", &format!("row{i:04}"), ts, &format!("v{i}-{ts}"));
        }
        if i == rows / 2 {
            ok(http, "POST", "/admin/tables/t/flush", b"");
        }
    }
    ok(http, "DELETE", "/t/row0001", b"");
}

#[test]
fn a_restored_backup_brings_back_a_dropped_table_with_every_version() {
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&work.path().join("live"), &[]);
    let mut http = server.client();
    fill(&mut http, 120);
    let before = dump(&mut http, "t");
    assert_eq!(before.len(), 119);
    assert!(before.values().all(|cells| cells.len() == 3));

    let out = work.path().join("b1");
    let o = backup(&server, &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.join("kura-backup.json").exists());
    assert!(
        std::fs::read_dir(server.data_dir.join("backups")).map_or(true, |mut d| d.next().is_none()),
        "the server's staging copy is removed once the backup is done"
    );
    ok(&mut http, "DELETE", "/t/schema", b"");
    drop(server);

    let o = restore(&out, None, true);
    assert!(o.status.success(), "{}", text(&o));
    let restored = work.path().join("restored");
    let o = restore(&out, Some(&restored), false);
    assert!(o.status.success(), "{}", text(&o));
    // A data directory that is not empty is refused, and left as it is.
    let o = restore(&out, Some(&restored), false);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not empty"),
        "{}",
        text(&o)
    );

    let server = Server::start(&restored, &[]);
    let mut http = server.client();
    assert_eq!(dump(&mut http, "t"), before);
    // And it takes writes as any server does.
    put(&mut http, "t", "after", 1, "x");
    assert_eq!(dump(&mut http, "t").len(), 120);
}

#[test]
fn a_flipped_byte_fails_verify_and_restore_naming_the_file() {
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&work.path().join("live"), &[]);
    let mut http = server.client();
    fill(&mut http, 40);
    let out = work.path().join("b1");
    let o = backup(&server, &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let listing: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("kura-backup.json")).expect("listing"))
            .expect("JSON");
    let seg = listing["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path").to_string())
        .find(|p| p.ends_with(".seg"))
        .expect("a segment");
    let path = out.join(&seg);
    let mut bytes = std::fs::read(&path).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&path, bytes).expect("write");

    let o = restore(&out, None, true);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&seg),
        "{}",
        text(&o)
    );
    let target = work.path().join("restored");
    let o = restore(&out, Some(&target), false);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&seg),
        "{}",
        text(&o)
    );
    assert!(!target.exists(), "nothing is written from a damaged backup");

    // An incomplete backup (no kura-backup.json) is refused too.
    std::fs::remove_file(out.join("kura-backup.json")).expect("remove");
    let o = restore(&out, None, true);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("kura-backup.json is missing"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_backup_taken_during_writes_holds_every_write_acknowledged_before_it_began() {
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&work.path().join("live"), &[]);
    let mut http = server.client();
    create_table(&mut http, "w");
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let (acked, stop, addr) = (acked.clone(), stop.clone(), server.addr);
            std::thread::spawn(move || {
                let mut http = Http::connect(addr).expect("connect");
                let mut mine = Vec::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let row = format!("w{w}-{n:06}");
                    put(&mut http, "w", &row, 1, "x");
                    mine.push((acked.fetch_add(1, Ordering::SeqCst), row));
                    n += 1;
                }
                mine
            })
        })
        .collect();
    wait_until("300 writes acknowledged", Duration::from_secs(60), || {
        acked.load(Ordering::SeqCst) >= 300
    });
    // Every write counted here was acknowledged before the backup began.
    let before = acked.load(Ordering::SeqCst);
    let out = work.path().join("b");
    let o = backup(&server, &out, &[]);
    let after = acked.load(Ordering::SeqCst);
    stop.store(true, Ordering::Relaxed);
    let acknowledged: Vec<(u64, String)> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer"))
        .collect();
    assert!(o.status.success(), "{}", text(&o));
    assert!(after > before, "writes went on during the backup");
    drop(server);

    let restored = work.path().join("restored");
    let o = restore(&out, Some(&restored), false);
    assert!(o.status.success(), "{}", text(&o));
    let server = Server::start(&restored, &[]);
    let rows = dump(&mut server.client(), "w");
    let missing: Vec<&String> = acknowledged
        .iter()
        .filter(|(i, row)| *i < before && !rows.contains_key(row.as_bytes()))
        .map(|(_, row)| row)
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged before the backup, missing: {missing:?}"
    );
    assert!(rows.len() as u64 >= before);
}

/// Content of table `t` of a backup, restored and served.
fn restored_content(work: &Path, backup_dir: &Path, name: &str) -> Dump {
    let dir = work.join(name);
    let o = restore(backup_dir, Some(&dir), true);
    assert!(o.status.success(), "{}", text(&o));
    let server = Server::start(&dir, &[]);
    dump(&mut server.client(), "t")
}

#[test]
fn a_backup_stopped_or_killed_midway_resumes_to_the_same_content() {
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&work.path().join("live"), &[]);
    let mut http = server.client();
    fill(&mut http, 200);
    // More regions' worth of files: a second table.
    create_table(&mut http, "u");
    for i in 0..50 {
        put(&mut http, "u", &format!("u{i}"), 1, "y");
    }
    let whole = work.path().join("whole");
    let o = backup(&server, &whole, &[]);
    assert!(o.status.success(), "{}", text(&o));

    // Stopped after 3 files: recognisably incomplete, refused by restore.
    let resumed = work.path().join("resumed");
    let o = backup(&server, &resumed, &["--stop-after-files", "3"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!resumed.join("kura-backup.json").exists());
    let o = restore(&resumed, None, true);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("interrupted"),
        "{}",
        text(&o)
    );
    // Run again: the 3 files are kept, the rest downloaded.
    let o = backup(&server, &resumed, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("3 already there"),
        "{}",
        text(&o)
    );

    // A real kill -9 as soon as the download began, then run again.
    let killed = work.path().join("killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kura"))
        .args(["backup", "--url", &url(&server), "--out"])
        .arg(&killed)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn kura backup");
    wait_until(
        "the backup writes its progress, or ends",
        Duration::from_secs(60),
        || {
            killed.join("kura-backup.partial.json").exists()
                || child.try_wait().expect("wait").is_some()
        },
    );
    let _ = child.kill();
    let _ = child.wait();
    if !killed.join("kura-backup.json").exists() {
        let o = backup(&server, &killed, &[]);
        assert!(o.status.success(), "{}", text(&o));
    }
    drop(server);

    let expected = restored_content(work.path(), &whole, "r-whole");
    assert_eq!(expected.len(), 199);
    assert_eq!(
        restored_content(work.path(), &resumed, "r-resumed"),
        expected
    );
    assert_eq!(restored_content(work.path(), &killed, "r-killed"), expected);
}

#[test]
fn kill_9_of_the_server_mid_backup_leaves_its_data_and_an_earlier_backup_intact() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(&work.path().join("live"), &[]);
    let mut http = server.client();
    fill(&mut http, 100);
    let before = dump(&mut http, "t");
    let earlier = work.path().join("earlier");
    let o = backup(&server, &earlier, &[]);
    assert!(o.status.success(), "{}", text(&o));

    // The server dies with a staging copy taken and half downloaded.
    let half = work.path().join("half");
    let o = backup(&server, &half, &["--stop-after-files", "2"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        std::fs::read_dir(server.data_dir.join("backups")).is_ok_and(|mut d| d.next().is_some()),
        "the staging copy is there when the server dies"
    );
    server.restart(); // kill -9, then start again
    assert!(
        std::fs::read_dir(server.data_dir.join("backups")).map_or(true, |mut d| d.next().is_none()),
        "a leftover staging copy is removed at start"
    );
    let mut http = server.client();
    assert_eq!(dump(&mut http, "t"), before, "the live data is intact");
    let o = restore(&earlier, None, true);
    assert!(
        o.status.success(),
        "the earlier backup verifies: {}",
        text(&o)
    );
    // The interrupted backup completes on a new staging copy.
    let o = backup(&server, &half, &[]);
    assert!(o.status.success(), "{}", text(&o));
    drop(server);
    assert_eq!(restored_content(work.path(), &half, "r-half"), before);
}

#[test]
fn the_backup_endpoints_refuse_paths_outside_the_staging_copy() {
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&work.path().join("live"), &[]);
    let mut http = server.client();
    create_table(&mut http, "t");
    put(&mut http, "t", "r", 1, "v");
    let listing: serde_json::Value =
        serde_json::from_slice(&ok(&mut http, "POST", "/admin/backups", b"")).expect("listing");
    let id = listing["id"].as_str().expect("id").to_string();
    let file = listing["files"][0]["path"]
        .as_str()
        .expect("path")
        .to_string();
    let size = listing["files"][0]["size"].as_u64().expect("size");
    for bad in [
        "..%2F..%2Fcatalog.json",
        "regions/..%2F..%2F..%2FLOCK",
        "%2Fetc%2Fpasswd",
    ] {
        let r = http
            .request("GET", &format!("/admin/backups/{id}/files/{bad}"), &[], b"")
            .expect("request");
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }
    let r = http
        .request(
            "GET",
            "/admin/backups/..%2Fregions/files/catalog.json",
            &[],
            b"",
        )
        .expect("request");
    assert_eq!(r.status, 400, "{}", r.text());
    let r = http
        .request(
            "GET",
            &format!("/admin/backups/{id}/files/no-such-file"),
            &[],
            b"",
        )
        .expect("request");
    assert_eq!(r.status, 404, "{}", r.text());
    // A listed file, whole and from an offset.
    let r = http
        .request(
            "GET",
            &format!("/admin/backups/{id}/files/{file}"),
            &[],
            b"",
        )
        .expect("request");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len() as u64, size);
    let r = http
        .request(
            "GET",
            &format!("/admin/backups/{id}/files/{file}"),
            &[("Range", "bytes=1-")],
            b"",
        )
        .expect("request");
    assert_eq!(r.status, 206, "{}", r.text());
    assert_eq!(r.body.len() as u64, size - 1);
    ok(&mut http, "DELETE", &format!("/admin/backups/{id}"), b"");
    let r = http
        .request("GET", &format!("/admin/backups/{id}"), &[], b"")
        .expect("request");
    assert_eq!(r.status, 404);
}

#[test]
fn a_server_behind_a_token_is_backed_up_with_the_token() {
    let work = tempfile::tempdir().expect("tempdir");
    let token_file = work.path().join("token");
    std::fs::write(&token_file, "backup-token-0123456789\n").expect("write token");
    let token_arg = token_file.to_str().expect("utf-8");
    let server = Server::start(&work.path().join("live"), &["--token-file", token_arg]);
    let out = work.path().join("b");
    let o = backup(&server, &out, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--token-file"),
        "{}",
        text(&o)
    );
    let o = backup(&server, &out, &["--token-file", token_arg]);
    assert!(o.status.success(), "{}", text(&o));
    let u = url(&server);
    let env_out = work.path().join("b-env");
    let o = kura_env(
        &[
            "backup",
            "--url",
            &u,
            "--out",
            env_out.to_str().expect("utf-8"),
        ],
        &[("KURA_TOKEN", "backup-token-0123456789")],
    );
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_resumed_backup_continues_a_partial_file_and_refetches_a_damaged_one() {
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&work.path().join("live"), &[]);
    let mut http = server.client();
    fill(&mut http, 60);
    let out = work.path().join("b");
    let o = backup(&server, &out, &["--stop-after-files", "3"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let mut done: Vec<String> = Vec::new();
    for rel in ["apps-clock", "catalog.json"] {
        if out.join(rel).exists() {
            done.push(rel.to_string());
        }
    }
    let regions = out.join("regions");
    for region in std::fs::read_dir(&regions).expect("regions").flatten() {
        for f in std::fs::read_dir(region.path()).expect("region").flatten() {
            done.push(
                f.path()
                    .strip_prefix(&out)
                    .expect("inside")
                    .display()
                    .to_string(),
            );
        }
    }
    done.sort();
    assert_eq!(done.len(), 3, "{done:?}");
    // The first stays, the second is cut to a partial download, the third is damaged.
    let partial = out.join(&done[1]);
    let bytes = std::fs::read(&partial).expect("read");
    let mut part = partial.clone().into_os_string();
    part.push(".part");
    std::fs::write(&part, &bytes[..bytes.len() / 2]).expect("write part");
    std::fs::remove_file(&partial).expect("remove");
    let damaged = out.join(&done[2]);
    let mut bytes = std::fs::read(&damaged).expect("read");
    bytes[0] ^= 1;
    std::fs::write(&damaged, bytes).expect("write");

    let o = backup(&server, &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("1 already there"),
        "{}",
        text(&o)
    );
    let o = restore(&out, None, true);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn an_unfinished_restore_is_refused_by_the_server_and_finished_by_running_it_again() {
    let work = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&work.path().join("live"), &[]);
    let mut http = server.client();
    fill(&mut http, 30);
    let before = dump(&mut http, "t");
    let out = work.path().join("b");
    let o = backup(&server, &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    drop(server);
    let listing: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("kura-backup.json")).expect("listing"))
            .expect("JSON");
    let id = listing["id"].as_str().expect("id");

    // What a restore killed midway leaves: its mark, the catalog not yet written.
    let dir = work.path().join("restored");
    let o = restore(&out, Some(&dir), false);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(
        dir.join("kura-restore.partial.json"),
        format!(r#"{{"url":"{}","id":"{id}"}}"#, out.display()),
    )
    .expect("mark");
    std::fs::remove_file(dir.join("catalog.json")).expect("remove");
    let port = server_harness::free_port().to_string();
    let o = kura(&[
        "--bind",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
        dir.to_str().expect("utf-8"),
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unfinished kura restore"),
        "{}",
        text(&o)
    );
    let o = restore(&out, Some(&dir), false);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!dir.join("kura-restore.partial.json").exists());
    let server = Server::start(&dir, &[]);
    assert_eq!(dump(&mut server.client(), "t"), before);
}
