//! Compressed bodies both ways, through the real `kura` binary, i.e. the server exactly as
//! `main` builds it (middleware, payload limits and all). Request bodies sent with
//! `Content-Encoding: gzip` (HBase REST's GzipFilter) are inflated before they are parsed; the
//! body limit applies to the inflated bytes. Answers are compressed when the request accepts it
//! and the body is 2 KiB or more (`--compress-min-bytes`, `src/compress.rs`).

mod server_harness;

use flate2::read::{GzDecoder, ZlibDecoder};
use flate2::write::GzEncoder;
use flate2::Compression;
use server_harness::{b64, create_table, Http, Server};
use std::io::Read;
use std::io::Write;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes).expect("gzip into memory");
    enc.finish().expect("gzip into memory")
}

fn get(http: &mut Http, path: &str, accept: &str) -> server_harness::Response {
    http.request("GET", path, &[("Accept", accept)], b"")
        .expect("GET")
}

fn json_of(r: &server_harness::Response) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text()))
}

/// `(column, value)` of every cell of a one-row CellSet JSON answer, values base64-decoded.
fn row_cells(v: &serde_json::Value) -> Vec<(String, Vec<u8>)> {
    use base64::Engine;
    let dec = |s: &serde_json::Value| {
        base64::engine::general_purpose::STANDARD
            .decode(s.as_str().expect("base64 string"))
            .expect("base64")
    };
    let rows = v["Row"].as_array().expect("Row array");
    assert_eq!(rows.len(), 1, "one row: {v}");
    rows[0]["Cell"]
        .as_array()
        .expect("Cell array")
        .iter()
        .map(|c| {
            let col = String::from_utf8(dec(&c["column"])).expect("UTF-8 column");
            (col, dec(&c["$"]))
        })
        .collect()
}

#[test]
fn gzipped_json_xml_and_binary_puts_are_stored_inflated() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path(), &[]);
    let mut http = server.client();
    create_table(&mut http, "gz", &["cf"]);

    // JSON CellSet, two rows, one value larger than a single inflate chunk.
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let body = serde_json::json!({"Row": [
        {"key": b64(b"r1"), "Cell": [
            {"column": b64(b"cf:a"), "$": b64(b"alpha")},
            {"column": b64(b"cf:big"), "$": b64(&big)},
        ]},
        {"key": b64(b"r2"), "Cell": [{"column": b64(b"cf:a"), "$": b64(b"beta")}]},
    ]})
    .to_string();
    let gz = gzip(body.as_bytes());
    assert!(gz.len() < body.len(), "the body really is compressed");
    let r = http
        .request(
            "PUT",
            "/gz/fakerow",
            &[
                ("Content-Type", "application/json"),
                ("Content-Encoding", "gzip"),
            ],
            &gz,
        )
        .expect("PUT");
    assert_eq!(r.status, 200, "gzipped JSON PUT: {}", r.text());
    let r1 = get(&mut http, "/gz/r1", "application/json");
    assert_eq!(r1.status, 200, "{}", r1.text());
    assert_eq!(
        row_cells(&json_of(&r1)),
        vec![
            ("cf:a".to_string(), b"alpha".to_vec()),
            ("cf:big".to_string(), big)
        ]
    );
    let r2 = get(&mut http, "/gz/r2/cf:a", "application/octet-stream");
    assert_eq!((r2.status, r2.body.as_slice()), (200, &b"beta"[..]));

    // XML CellSet.
    let xml = format!(
        "<CellSet><Row key=\"{}\"><Cell column=\"{}\">{}</Cell></Row></CellSet>",
        b64(b"r3"),
        b64(b"cf:x"),
        b64(b"from xml")
    );
    let r = http
        .request(
            "PUT",
            "/gz/r3",
            &[("Content-Type", "text/xml"), ("Content-Encoding", "gzip")],
            &gzip(xml.as_bytes()),
        )
        .expect("PUT");
    assert_eq!(r.status, 200, "gzipped XML PUT: {}", r.text());
    let r3 = get(&mut http, "/gz/r3/cf:x", "application/octet-stream");
    assert_eq!((r3.status, r3.body.as_slice()), (200, &b"from xml"[..]));

    // Raw binary value to a cell URL.
    let raw = b"\x00\x01raw bytes\xff".repeat(100);
    let r = http
        .request(
            "PUT",
            "/gz/r4/cf:bin",
            &[
                ("Content-Type", "application/octet-stream"),
                ("Content-Encoding", "gzip"),
            ],
            &gzip(&raw),
        )
        .expect("PUT");
    assert_eq!(r.status, 200, "gzipped binary PUT: {}", r.text());
    let r4 = get(&mut http, "/gz/r4/cf:bin", "application/octet-stream");
    assert_eq!((r4.status, r4.body), (200, raw));
}

#[test]
fn gzipped_body_inflating_past_max_body_is_413_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path(), &["--max-body", "65536"]);
    let mut http = server.client();
    create_table(&mut http, "gz", &["cf"]);
    // About 1.3 MB of JSON once inflated, a few KB on the wire.
    let body = serde_json::json!({"Row": [{"key": b64(b"bomb"), "Cell": [
        {"column": b64(b"cf:a"), "$": b64(&vec![0u8; 1 << 20])},
    ]}]})
    .to_string();
    let gz = gzip(body.as_bytes());
    assert!(gz.len() < 65536, "the compressed body is under the limit");
    let r = http
        .request(
            "PUT",
            "/gz/bomb",
            &[
                ("Content-Type", "application/json"),
                ("Content-Encoding", "gzip"),
            ],
            &gz,
        )
        .expect("PUT");
    assert_eq!(r.status, 413, "{}", r.text());
    let mut http = server.client();
    assert_eq!(get(&mut http, "/gz/bomb", "application/json").status, 404);
}

/// PUT a plain (uncompressed) JSON row labelled with `encoding` to a fresh server; the status,
/// after checking that nothing was written.
fn put_plain_labelled(encoding: &str) -> u16 {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path(), &[]);
    let mut http = server.client();
    create_table(&mut http, "gz", &["cf"]);
    let body = serde_json::json!({"Row": [{"key": b64(b"plain"), "Cell": [
        {"column": b64(b"cf:a"), "$": b64(b"v")},
    ]}]})
    .to_string();
    let r = http
        .request(
            "PUT",
            "/gz/plain",
            &[
                ("Content-Type", "application/json"),
                ("Content-Encoding", encoding),
            ],
            body.as_bytes(),
        )
        .expect("PUT");
    let mut http = server.client();
    assert_eq!(
        get(&mut http, "/gz/plain", "application/json").status,
        404,
        "{encoding}: nothing written ({})",
        r.text()
    );
    r.status
}

#[test]
fn body_labelled_gzip_that_is_not_gzip_is_400_and_writes_nothing() {
    assert_eq!(put_plain_labelled("gzip"), 400);
}

#[test]
fn body_in_an_unknown_content_encoding_is_415_and_writes_nothing() {
    assert_eq!(put_plain_labelled("bogus"), 415);
}

fn get_accepting(http: &mut Http, path: &str, encodings: &str) -> server_harness::Response {
    http.request(
        "GET",
        path,
        &[
            ("Accept", "application/json"),
            ("Accept-Encoding", encodings),
        ],
        b"",
    )
    .expect("GET")
}

/// A fresh server started with `args`, its table `gz` holding `value` in `cf:a` of each row.
fn serving(args: &[&str], rows: &[&str], value: &[u8]) -> (tempfile::TempDir, Server, Http) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path(), args);
    let mut http = server.client();
    create_table(&mut http, "gz", &["cf"]);
    for row in rows {
        let r = http
            .request(
                "PUT",
                &format!("/gz/{row}/cf:a"),
                &[("Content-Type", "application/octet-stream")],
                value,
            )
            .expect("PUT");
        assert_eq!(r.status, 200, "{}", r.text());
    }
    (dir, server, http)
}

/// Asked with each of `encodings`, `path` answers 200 with the body sent without any coding.
fn assert_answered_as_it_is(http: &mut Http, path: &str, encodings: &[&str]) {
    let plain = get(http, path, "application/json");
    assert_eq!(plain.status, 200, "{path}: {}", plain.text());
    for asked in encodings {
        let r = get_accepting(http, path, asked);
        assert_eq!(r.status, 200, "{path} {asked}: {}", r.text());
        assert_eq!(r.header("content-encoding"), None, "{path} {asked}");
        assert_eq!(r.header("vary"), None, "{path} {asked}: does not vary");
        assert_eq!(r.body, plain.body, "{path} {asked}");
    }
}

/// A value that deflates to a small fraction of itself.
const COMPRESSIBLE: &[u8] = b"a value that compresses well; ";

#[test]
fn answers_under_the_minimum_go_out_uncompressed_even_to_clients_accepting_gzip() {
    // A PerformanceEvaluation row: one cell of 1,000 bytes, about 1.4 KB of JSON.
    let value = b"0123456789".repeat(100);
    let (_dir, _server, mut http) = serving(&[], &["small"], &value);
    let plain = get(&mut http, "/gz/small", "application/json");
    assert!(
        (1024..2048).contains(&plain.body.len()),
        "{}",
        plain.body.len()
    );
    // What Python's `requests` sends on every request (hbase-rest-py, starbase), and more.
    let asked = ["gzip, deflate", "gzip, deflate, br, zstd"];
    assert_answered_as_it_is(&mut http, "/gz/small", &asked);
    assert_answered_as_it_is(&mut http, "/healthz", &asked);
    let r = get_accepting(&mut http, "/gz/small", "gzip");
    assert_eq!(row_cells(&json_of(&r)), vec![("cf:a".to_string(), value)]);
}

#[test]
fn large_answers_come_compressed_in_the_encoding_the_client_prefers() {
    let value = COMPRESSIBLE.repeat(200);
    let (_dir, _server, mut http) = serving(&[], &["r1", "r2", "r3"], &value);
    let inflate = |r: &server_harness::Response| {
        let mut out = Vec::new();
        match r.header("content-encoding") {
            Some("gzip") => GzDecoder::new(&r.body[..]).read_to_end(&mut out),
            Some("deflate") => ZlibDecoder::new(&r.body[..]).read_to_end(&mut out),
            other => panic!("expected gzip or deflate, got {other:?}"),
        }
        .expect("inflates");
        out
    };

    // A row and a scan (a streamed body of unknown length), each against the same uncompressed.
    for path in ["/gz/r1", "/gz/*"] {
        let plain = get(&mut http, path, "application/json");
        assert_eq!(plain.status, 200, "{path}: {}", plain.text());
        assert!(
            plain.body.len() >= 2048,
            "{path}: {} bytes",
            plain.body.len()
        );
        assert_eq!(plain.header("content-encoding"), None);
        for (asked, sent) in [
            ("gzip, deflate", "gzip"),
            ("deflate", "deflate"),
            ("deflate;q=1.0, gzip;q=0.5", "deflate"),
        ] {
            let r = get_accepting(&mut http, path, asked);
            assert_eq!(r.status, 200, "{path} {asked}: {}", r.text());
            assert_eq!(r.header("content-encoding"), Some(sent), "{path} {asked}");
            assert_eq!(r.header("vary"), Some("accept-encoding"), "{path} {asked}");
            assert!(
                r.body.len() < plain.body.len() / 4,
                "{path} {asked}: compressed"
            );
            assert_eq!(inflate(&r), plain.body, "{path} {asked}: the same answer");
        }
    }
    for coding in ["br", "zstd"] {
        let r = get_accepting(&mut http, "/gz/r1", coding);
        assert_eq!(
            (r.status, r.header("content-encoding")),
            (200, Some(coding))
        );
    }
}

#[test]
fn a_client_accepting_no_encoding_the_server_has_gets_the_answer_as_it_is() {
    let (_dir, _server, mut http) = serving(&[], &["r1"], &COMPRESSIBLE.repeat(200));
    // RFC 9110, 12.5.3: none acceptable, identity refused or not, gets no content coding.
    assert_answered_as_it_is(
        &mut http,
        "/gz/r1",
        &[
            "compress",
            "identity;q=0",
            "compress, *;q=0",
            "no such header value;;",
        ],
    );
}

#[test]
fn with_compression_off_every_answer_goes_out_as_it_is() {
    let args = ["--compress-min-bytes", "0"];
    let (_dir, _server, mut http) = serving(&args, &["r1"], &COMPRESSIBLE.repeat(200));
    assert_answered_as_it_is(&mut http, "/gz/r1", &["gzip, deflate", "br", "zstd"]);
    assert_answered_as_it_is(&mut http, "/gz/*", &["gzip, deflate", "br", "zstd"]);
}
