//! Hostile HTTP against the real `kura` binary (RELIABILITY.md, "hostile HTTP" and "limits").
//!
//! What a user relies on:
//! 1. A client mistake, however malformed (lying or oversized Content-Length, broken JSON/XML, bad
//!    base64, deep nesting, invalid UTF-8, huge headers, traversal in table names, too many
//!    scanners), gets a 4xx answer: never a 5xx, never a crash.
//! 2. After each such request the server still answers `GET /healthz` with 200.
//! 3. Every limit works exactly at its value and refuses one past it with a 4xx.
//! 4. Nothing a request names escapes the data directory.
//! 5. A connection that sends its headers too slowly (slowloris) is dropped, and does not stop
//!    other clients from being served.
//!
//! Requests are written byte for byte on raw sockets, so nothing normalises them on the way. The
//! table-driven tests collect every wrong answer before failing, so one run lists all of them.

mod server_harness;

use server_harness::{b64, create_table, Http, Server};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// What came back on a raw connection.
#[derive(Debug)]
struct RawReply {
    /// The status of the first response, if one arrived.
    status: Option<u16>,
    /// The first bytes of the answer, for failure messages.
    head: String,
}

/// Writes `request` (in a helper thread, so a server that answers early and stops reading cannot
/// block us), optionally half-closes, and reads the first response: head plus Content-Length
/// body, or until the server closes, or `timeout`.
fn exchange(addr: SocketAddr, request: Vec<u8>, half_close: bool, timeout: Duration) -> RawReply {
    let stream = match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        Ok(s) => s,
        Err(e) => {
            return RawReply {
                status: None,
                head: format!("connect failed: {e}"),
            }
        }
    };
    let mut writer = stream.try_clone().expect("clone the socket");
    let sender = std::thread::spawn(move || {
        let _ = writer.write_all(&request);
        if half_close {
            let _ = writer.shutdown(Shutdown::Write);
        }
    });
    let mut reader = stream;
    let deadline = Instant::now() + timeout;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(total) = complete_response_len(&buf) {
            buf.truncate(total);
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let _ = reader.set_read_timeout(Some(left.min(Duration::from_millis(500))));
        match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = reader.shutdown(Shutdown::Both);
    let _ = sender.join();
    let text = String::from_utf8_lossy(&buf[..buf.len().min(300)]).into_owned();
    let status = text
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .and_then(|s| s.parse().ok());
    RawReply { status, head: text }
}

/// The length of the first whole response in `buf` (head + Content-Length body), if complete.
fn complete_response_len(buf: &[u8]) -> Option<usize> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    (buf.len() >= end + len).then_some(end + len)
}

/// A request with the given head lines and body; `Content-Length` is whatever the caller says.
fn raw_request(method: &str, path: &[u8], headers: &[String], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(path);
    out.extend_from_slice(b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for h in headers {
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// A well-formed request (honest Content-Length).
fn request(method: &str, path: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let headers = vec![
        format!("Content-Type: {content_type}"),
        "Accept: application/json".to_string(),
        format!("Content-Length: {}", body.len()),
    ];
    raw_request(method, path.as_bytes(), &headers, body)
}

fn healthz(addr: SocketAddr) -> Result<(), String> {
    let mut http = Http::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let r = http
        .request("GET", "/healthz", &[], b"")
        .map_err(|e| format!("GET /healthz: {e}"))?;
    if r.status == 200 {
        Ok(())
    } else {
        Err(format!("GET /healthz answered {}", r.status))
    }
}

/// Collects wrong answers so a run reports all of them at once.
struct Cases {
    addr: SocketAddr,
    failures: Vec<String>,
    count: usize,
}

impl Cases {
    fn new(addr: SocketAddr) -> Cases {
        Cases {
            addr,
            failures: Vec::new(),
            count: 0,
        }
    }

    /// The case must be answered with a 4xx (any, or one of `allowed` when given).
    fn expect_4xx(&mut self, name: &str, allowed: &[u16], reply: RawReply) {
        self.count += 1;
        match reply.status {
            Some(s) if (400..500).contains(&s) && (allowed.is_empty() || allowed.contains(&s)) => {}
            Some(s) => self.failures.push(format!(
                "{name}: expected 4xx {allowed:?}, got {s}: {:?}",
                reply.head
            )),
            None => self.failures.push(format!(
                "{name}: expected 4xx {allowed:?}, got no answer: {:?}",
                reply.head
            )),
        }
        self.alive(name);
    }

    /// The case must not get a 5xx; dropping the connection without an answer is acceptable
    /// (used where the request never finishes, so no answer can be owed).
    fn expect_no_5xx(&mut self, name: &str, reply: RawReply) {
        self.count += 1;
        if let Some(s) = reply.status {
            if !(400..500).contains(&s) {
                self.failures.push(format!(
                    "{name}: expected 4xx or a close, got {s}: {:?}",
                    reply.head
                ));
            }
        }
        self.alive(name);
    }

    fn expect_status(&mut self, name: &str, want: u16, reply: RawReply) {
        self.count += 1;
        if reply.status != Some(want) {
            self.failures.push(format!(
                "{name}: expected {want}, got {:?}: {:?}",
                reply.status, reply.head
            ));
        }
        self.alive(name);
    }

    fn alive(&mut self, name: &str) {
        if let Err(e) = healthz(self.addr) {
            self.failures
                .push(format!("after {name}: server not alive: {e}"));
        }
    }

    fn send(&self, req: Vec<u8>) -> RawReply {
        exchange(self.addr, req, false, Duration::from_secs(15))
    }

    fn finish(self, what: &str) {
        assert!(
            self.failures.is_empty(),
            "{what}: {} of {} cases answered wrongly:\n  {}",
            self.failures.len(),
            self.count,
            self.failures.join("\n  ")
        );
    }
}

fn cellset(row: &[u8], column: &[u8], value: &[u8]) -> Vec<u8> {
    format!(
        "{{\"Row\":[{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"{}\",\"$\":\"{}\"}}]}}]}}",
        b64(row),
        b64(column),
        b64(value)
    )
    .into_bytes()
}

fn start() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let server = Server::start(&data, &["--durability", "sync"]);
    create_table(&mut server.client(), "h", &["cf"]);
    (dir, server)
}

#[test]
fn lying_and_oversized_content_length_get_4xx_and_the_server_stays_up() {
    let (_dir, server) = start();
    let mut c = Cases::new(server.addr);
    let body = cellset(b"r1", b"cf:a", b"v");

    let h = |cl: &str| {
        vec![
            "Content-Type: application/json".to_string(),
            format!("Content-Length: {cl}"),
        ]
    };
    c.expect_4xx(
        "Content-Length far above the 16 MiB body limit, no body sent",
        &[413],
        c.send(raw_request("PUT", b"/h/fakerow", &h("1000000000000"), b"")),
    );
    let big = vec![b'a'; 17 * 1024 * 1024];
    c.expect_4xx(
        "an honest 17 MiB body",
        &[413],
        c.send(raw_request(
            "PUT",
            b"/h/fakerow",
            &h(&big.len().to_string()),
            &big,
        )),
    );
    c.expect_4xx(
        "Content-Length shorter than the body (truncated JSON)",
        &[400],
        c.send(raw_request("PUT", b"/h/fakerow", &h("10"), &body)),
    );
    c.expect_no_5xx(
        "Content-Length longer than the body, then half-close",
        exchange(
            server.addr,
            raw_request("PUT", b"/h/fakerow", &h("5000"), &body),
            true,
            Duration::from_secs(15),
        ),
    );
    c.expect_4xx(
        "non-numeric Content-Length",
        &[400],
        c.send(raw_request("PUT", b"/h/fakerow", &h("twelve"), &body)),
    );
    c.expect_4xx(
        "negative Content-Length",
        &[400],
        c.send(raw_request("PUT", b"/h/fakerow", &h("-5"), &body)),
    );
    c.expect_4xx(
        "two different Content-Length headers",
        &[400],
        c.send(raw_request(
            "PUT",
            b"/h/fakerow",
            &[
                format!("Content-Length: {}", body.len()),
                "Content-Length: 3".to_string(),
            ],
            &body,
        )),
    );
    let mut te = h(&body.len().to_string());
    te.push("Transfer-Encoding: chunked".to_string());
    c.expect_4xx(
        "Content-Length together with Transfer-Encoding: chunked (smuggling)",
        &[400],
        c.send(raw_request("PUT", b"/h/fakerow", &te, &body)),
    );
    c.expect_4xx(
        "a chunked body with a bad chunk size",
        &[400],
        c.send(raw_request(
            "PUT",
            b"/h/fakerow",
            &[
                "Content-Type: application/json".to_string(),
                "Transfer-Encoding: chunked".to_string(),
            ],
            b"zz\r\nabc\r\n0\r\n\r\n",
        )),
    );
    c.finish("lying or oversized Content-Length");
}

#[test]
fn malformed_bodies_get_400_and_the_server_stays_up() {
    let (_dir, server) = start();
    let mut c = Cases::new(server.addr);
    let json = "application/json";
    let xml = "text/xml";
    let put = |body: &[u8], ct: &str| request("PUT", "/h/fakerow", ct, body);

    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated JSON CellSet", put(b"{\"Row\":[{\"key\":", json)),
        ("JSON that is not an object", put(b"[1,2,3]", json)),
        ("Row of the wrong type", put(b"{\"Row\":5}", json)),
        ("timestamp that is a string", put(
            format!(
                "{{\"Row\":[{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"{}\",\"timestamp\":\"soon\",\"$\":\"\"}}]}}]}}",
                b64(b"r"), b64(b"cf:a")
            ).as_bytes(), json)),
        ("timestamp beyond i64", put(
            format!(
                "{{\"Row\":[{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"{}\",\"timestamp\":99999999999999999999999,\"$\":\"\"}}]}}]}}",
                b64(b"r"), b64(b"cf:a")
            ).as_bytes(), json)),
        ("bad base64 row key", put(
            format!("{{\"Row\":[{{\"key\":\"!!!*\",\"Cell\":[{{\"column\":\"{}\",\"$\":\"\"}}]}}]}}", b64(b"cf:a")).as_bytes(),
            json)),
        ("bad base64 column", put(
            format!("{{\"Row\":[{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"%%%\",\"$\":\"\"}}]}}]}}", b64(b"r")).as_bytes(),
            json)),
        ("bad base64 value", put(
            format!(
                "{{\"Row\":[{{\"key\":\"{}\",\"Cell\":[{{\"column\":\"{}\",\"$\":\"a===b\"}}]}}]}}",
                b64(b"r"), b64(b"cf:a")
            ).as_bytes(), json)),
        ("column without ':'", put(&cellset(b"r", b"cf", b"v"), json)),
        ("invalid UTF-8 in a JSON body", put(b"{\"Row\":[{\"key\":\"\xff\xfe\"}]}", json)),
        ("malformed XML CellSet", put(b"<CellSet><Row key=\"cg==\"><Cell column=", xml)),
        ("XML with mismatched tags", put(b"<CellSet><Row key=\"cg==\"></Cell></CellSet>", xml)),
        ("XML with a bad base64 attribute", put(
            format!("<CellSet><Row key=\"***\"><Cell column=\"{}\">dg==</Cell></Row></CellSet>", b64(b"cf:a")).as_bytes(),
            xml)),
        ("XML entity expansion (billion laughs)", put(
            b"<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">]><CellSet><Row key=\"&c;\"/></CellSet>",
            xml)),
        ("malformed schema JSON", request("PUT", "/h2/schema", json, b"{\"name\":\"h2\",\"ColumnSchema\":[{\"name\":")),
        // (a number as a family name is accepted as its decimal string, like HBase's JsonAnySetter)
        ("schema whose ColumnSchema is not a list", request("PUT", "/h2/schema", json, b"{\"name\":\"h2\",\"ColumnSchema\":7}")),
        ("schema with a family name that is a list", request("PUT", "/h2/schema", json, b"{\"name\":\"h2\",\"ColumnSchema\":[{\"name\":[\"cf\"]}]}")),
        ("malformed schema XML", request("PUT", "/h2/schema", xml, b"<TableSchema name=\"h2\"><ColumnSchema")),
        ("malformed scanner JSON", request("PUT", "/h/scanner", json, b"{\"batch\":")),
        ("scanner with a non-numeric batch", request("PUT", "/h/scanner", json, b"{\"batch\":\"many\"}")),
        ("malformed scanner XML", request("PUT", "/h/scanner", xml, b"<Scanner batch=")),
        ("scanner filter that is not JSON", request("PUT", "/h/scanner", json, b"{\"filter\":\"{not json\"}")),
        ("scanner filter of an unknown type", request("PUT", "/h/scanner", json,
            b"{\"filter\":\"{\\\"type\\\":\\\"NoSuchFilter\\\"}\"}")),
        ("scanner filter with a bad regex", request("PUT", "/h/scanner", json,
            b"{\"filter\":\"{\\\"type\\\":\\\"RowFilter\\\",\\\"op\\\":\\\"EQUAL\\\",\\\"comparator\\\":{\\\"type\\\":\\\"RegexStringComparator\\\",\\\"value\\\":\\\"([\\\"}}\"}")),
        ("check=put with one cell", request("PUT", "/h/r?check=put", json, &cellset(b"r", b"cf:a", b"v"))),
        ("unknown check mode", request("PUT", "/h/r?check=maybe", json, &cellset(b"r", b"cf:a", b"v"))),
        ("increment by a non-number", request("PUT", "/h/r?check=increment", json, &cellset(b"r", b"cf:n", b"five"))),
        ("stateless scan with a broken filter", request("GET", "/h/*?filter=PrefixFilter(", json, b"")),
        ("stateless scan with an unknown filter", request("GET", "/h/*?filter=NoSuchFilter('a')", json, b"")),
        ("non-numeric v=", request("GET", "/h/r/cf:a?v=lots", json, b"")),
        ("non-numeric path timestamp", request("GET", "/h/r/cf:a/yesterday", json, b"")),
        ("non-numeric limit=", request("GET", "/h/*?limit=ten", json, b"")),
        ("unsupported Content-Type for a put", request("PUT", "/h/fakerow", "text/csv", b"a,b,c")),
    ];
    for (name, req) in cases {
        let reply = c.send(req);
        c.expect_4xx(name, &[], reply);
    }
    let reply = c.send(request(
        "PUT",
        "/h/scanner",
        json,
        b"{\"filter\":\"{\\\"type\\\":\\\"NoSuchFilter\\\"}\"}",
    ));
    c.count += 1;
    if !reply.head.contains("NoSuchFilter") {
        c.failures.push(format!(
            "unknown filter: the 400 should name it: {:?}",
            reply.head
        ));
    }
    c.finish("malformed bodies");
}

#[test]
fn deep_nesting_gets_400_without_a_crash() {
    let (_dir, server) = start();
    let mut c = Cases::new(server.addr);
    let depth = 100_000;
    let mut deep_json = b"{\"Row\":".to_vec();
    deep_json.extend(std::iter::repeat_n(b'[', depth));
    deep_json.extend(std::iter::repeat_n(b']', depth));
    deep_json.push(b'}');
    let reply = c.send(request("PUT", "/h/fakerow", "application/json", &deep_json));
    c.expect_4xx("JSON CellSet nested 100,000 deep", &[400], reply);

    let mut deep_xml = b"<CellSet>".to_vec();
    for _ in 0..depth {
        deep_xml.extend_from_slice(b"<Row>");
    }
    for _ in 0..depth {
        deep_xml.extend_from_slice(b"</Row>");
    }
    deep_xml.extend_from_slice(b"</CellSet>");
    let reply = c.send(request("PUT", "/h/fakerow", "text/xml", &deep_xml));
    c.expect_4xx("XML CellSet nested 100,000 deep", &[400], reply);

    // A FilterList nested 20,000 deep inside the scanner's filter string: a recursive filter
    // builder must refuse it rather than overflow its stack.
    let n = 20_000;
    let mut f = String::new();
    for _ in 0..n {
        f.push_str("{\"type\":\"FilterList\",\"op\":\"MUST_PASS_ALL\",\"filters\":[");
    }
    f.push_str("{\"type\":\"KeyOnlyFilter\"}");
    for _ in 0..n {
        f.push_str("]}");
    }
    let body = serde_json::json!({ "filter": f }).to_string();
    let reply = c.send(request(
        "PUT",
        "/h/scanner",
        "application/json",
        body.as_bytes(),
    ));
    c.expect_4xx("scanner FilterList nested 20,000 deep", &[400], reply);

    let parens = "(".repeat(5_000);
    let reply = c.send(request(
        "GET",
        &format!("/h/*?filter={parens}"),
        "application/json",
        b"",
    ));
    c.expect_4xx("filter language with 5,000 open parentheses", &[], reply);
    let mut nested = String::from("PrefixFilter('a')");
    for _ in 0..2_000 {
        nested = format!("({nested})");
    }
    let reply = c.send(request(
        "GET",
        &format!("/h/*?filter={nested}"),
        "application/json",
        b"",
    ));
    c.expect_no_5xx(
        "filter language nested 2,000 deep (valid, may be refused)",
        reply,
    );
    c.finish("deep nesting");
}

#[test]
fn invalid_utf8_and_huge_headers_get_4xx() {
    let (_dir, server) = start();
    let mut c = Cases::new(server.addr);
    let accept = vec!["Accept: application/json".to_string()];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "raw invalid UTF-8 in a table name",
            raw_request("GET", b"/\xff\xfe/schema", &accept, b""),
        ),
        (
            "percent-encoded invalid UTF-8 table name",
            raw_request("GET", b"/%ff%fe/schema", &accept, b""),
        ),
        ("create a table named with invalid UTF-8", {
            let mut h = accept.clone();
            h.push("Content-Type: application/json".to_string());
            let body = b"{\"name\":\"x\",\"ColumnSchema\":[{\"name\":\"cf\"}]}";
            h.push(format!("Content-Length: {}", body.len()));
            raw_request("PUT", b"/%ff%fe/schema", &h, body)
        }),
        (
            "raw invalid UTF-8 in a row key of a missing row",
            raw_request("GET", b"/h/\xff\xfe", &accept, b""),
        ),
        (
            "bad percent-encoding",
            raw_request("GET", b"/h/%zz%", &accept, b""),
        ),
        (
            "a control character in the path",
            raw_request("GET", b"/h/a\x01b", &accept, b""),
        ),
        (
            "a 100 KiB path",
            raw_request(
                "GET",
                format!("/h/{}", "a".repeat(100 * 1024)).as_bytes(),
                &accept,
                b"",
            ),
        ),
        (
            "one 100 KiB header",
            raw_request(
                "GET",
                b"/h/r",
                &[format!("X-Big: {}", "b".repeat(100 * 1024))],
                b"",
            ),
        ),
        (
            "500 headers",
            raw_request(
                "GET",
                b"/h/r",
                &(0..500).map(|i| format!("X-H{i}: v")).collect::<Vec<_>>(),
                b"",
            ),
        ),
        ("invalid UTF-8 in X-Timestamp of a binary put", {
            let mut req =
                b"PUT /h/r/cf:a HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".to_vec();
            req.extend_from_slice(b"Content-Type: application/octet-stream\r\n");
            req.extend_from_slice(
                b"X-Row: \xff\xfe\r\nX-Timestamp: \xff\xfe\r\nContent-Length: 1\r\n\r\nv",
            );
            req
        }),
        (
            "a header line without a colon",
            raw_request("GET", b"/h/r", &["NoColonHere".to_string()], b""),
        ),
        (
            "an unknown method",
            raw_request("BREW", b"/h/r", &accept, b""),
        ),
        (
            "a garbage request line",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec(),
        ),
    ];
    for (name, req) in cases {
        let reply = c.send(req);
        c.expect_4xx(name, &[], reply);
    }
    c.finish("invalid UTF-8 and huge headers");
}

#[test]
fn table_names_cannot_escape_the_data_dir() {
    let (dir, server) = start();
    let data = dir.path().join("data");
    let mut c = Cases::new(server.addr);
    let schema = |name: &str| {
        format!("{{\"name\":\"{name}\",\"ColumnSchema\":[{{\"name\":\"cf\"}}]}}").into_bytes()
    };
    let too_long = format!("/{}/schema", "n".repeat(129));
    let bad: Vec<(&str, &str)> = vec![
        ("raw ..", "/../schema"),
        ("raw ../../escape", "/../../escape/schema"),
        ("encoded ..", "/%2e%2e/schema"),
        ("encoded ../escape", "/..%2fescape/schema"),
        ("encoded /tmp/escape", "/%2ftmp%2fescape/schema"),
        ("backslash", "/..%5cescape/schema"),
        ("leading dot", "/.hidden/schema"),
        ("leading dash", "/-dash/schema"),
        ("NUL byte", "/nul%00byte/schema"),
        ("space", "/a%20b/schema"),
        ("colon", "/a:b/schema"),
        ("129 characters", &too_long),
        ("reserved: healthz", "/healthz/schema"),
        ("reserved: metrics", "/metrics/schema"),
        ("reserved: ui", "/ui/schema"),
        ("reserved: apps", "/apps/schema"),
        ("reserved: admin", "/admin/schema"),
    ];
    for (name, path) in &bad {
        let body = schema("x");
        let headers = vec![
            "Content-Type: application/json".to_string(),
            format!("Content-Length: {}", body.len()),
        ];
        let reply = c.send(raw_request("PUT", path.as_bytes(), &headers, &body));
        c.expect_4xx(
            &format!("create table with a bad name ({name})"),
            &[],
            reply,
        );
    }
    // The body's name must not be trusted either when it disagrees with the path.
    let reply = c.send(request(
        "PUT",
        "/okname/schema",
        "application/json",
        &schema("../escape"),
    ));
    c.count += 1;
    if reply.status == Some(201) || reply.status == Some(200) {
        let mut http = server.client();
        if let Ok(r) = http.request("GET", "/", &[("Accept", "application/json")], b"") {
            if r.text().contains("escape") {
                c.failures
                    .push("a body name of ../escape was used as a table name".to_string());
            }
        }
    } else if !matches!(reply.status, Some(s) if (400..500).contains(&s)) {
        c.failures
            .push(format!("schema body name ../escape: {:?}", reply.head));
    }
    c.alive("schema body name ../escape");

    // Exactly at the limit works.
    let at_limit = "n".repeat(128);
    let reply = c.send(request(
        "PUT",
        &format!("/{at_limit}/schema"),
        "application/json",
        &schema(&at_limit),
    ));
    c.expect_status("a 128-character table name (at the limit)", 201, reply);
    let reply = c.send(request(
        "PUT",
        "/Ok_name.v-1/schema",
        "application/json",
        &schema("Ok_name.v-1"),
    ));
    c.expect_status("a name with every allowed character class", 201, reply);

    // Nothing appeared next to the data dir, and no file inside it is named after a user string.
    let siblings: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read tempdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    c.count += 1;
    if siblings != ["data"] {
        c.failures.push(format!(
            "entries appeared next to the data dir: {siblings:?}"
        ));
    }
    let mut stack = vec![data.clone()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).expect("read data dir") {
            let e = e.expect("entry");
            let name = e.file_name().to_string_lossy().into_owned();
            if name.contains("escape") || name.contains("hidden") {
                c.failures.push(format!(
                    "a user string became a file name: {}",
                    e.path().display()
                ));
            }
            if e.file_type().expect("file type").is_dir() {
                stack.push(e.path());
            }
        }
    }
    c.finish("table names");
}

#[test]
fn limits_hold_exactly_at_their_value_and_refuse_one_past_it() {
    let (_dir, server) = start();
    let mut c = Cases::new(server.addr);
    let json = "application/json";
    let row_ok = vec![b'k'; 4096];
    let row_over = vec![b'k'; 4097];
    let reply = c.send(request(
        "PUT",
        "/h/fakerow",
        json,
        &cellset(&row_ok, b"cf:a", b"v"),
    ));
    c.expect_status("a 4 KiB row key", 200, reply);
    let reply = c.send(request(
        "PUT",
        "/h/fakerow",
        json,
        &cellset(&row_over, b"cf:a", b"v"),
    ));
    c.expect_4xx("a 4 KiB + 1 row key", &[], reply);

    let mut col_ok = b"cf:".to_vec();
    col_ok.extend(std::iter::repeat_n(b'q', 16 * 1024));
    let mut col_over = col_ok.clone();
    col_over.push(b'q');
    let reply = c.send(request(
        "PUT",
        "/h/fakerow",
        json,
        &cellset(b"r", &col_ok, b"v"),
    ));
    c.expect_status("a 16 KiB qualifier", 200, reply);
    let reply = c.send(request(
        "PUT",
        "/h/fakerow",
        json,
        &cellset(b"r", &col_over, b"v"),
    ));
    c.expect_4xx("a 16 KiB + 1 qualifier", &[], reply);

    let val_ok = vec![b'v'; 10 * 1024 * 1024];
    let mut val_over = val_ok.clone();
    val_over.push(b'v');
    let reply = c.send(request(
        "PUT",
        "/h/big/cf:v",
        "application/octet-stream",
        &val_ok,
    ));
    c.expect_status("a 10 MiB value (binary put)", 200, reply);
    let reply = c.send(request(
        "PUT",
        "/h/big2/cf:v",
        "application/octet-stream",
        &val_over,
    ));
    c.expect_4xx("a 10 MiB + 1 value (binary put)", &[], reply);
    let reply = c.send(request(
        "PUT",
        "/h/fakerow",
        json,
        &cellset(b"big3", b"cf:v", &val_over),
    ));
    c.expect_4xx("a 10 MiB + 1 value (JSON put)", &[], reply);

    // The big value reads back intact.
    let mut http = server.client();
    let r = http
        .request(
            "GET",
            "/h/big/cf:v",
            &[("Accept", "application/octet-stream")],
            b"",
        )
        .expect("read the 10 MiB value");
    c.count += 1;
    if r.status != 200 || r.body != val_ok {
        c.failures.push(format!(
            "10 MiB value read back: status {} len {}",
            r.status,
            r.body.len()
        ));
    }
    c.finish("limits");
}

#[test]
fn scanner_count_is_capped_and_exhaustion_is_a_4xx() {
    let (_dir, server) = start();
    let mut c = Cases::new(server.addr);
    let mut http = server.client();
    let mut locations = Vec::new();
    let mut refused = None;
    for _ in 0..1_100 {
        let r = http
            .request(
                "PUT",
                "/h/scanner",
                &[("Content-Type", "application/json")],
                b"{\"batch\":10}",
            )
            .expect("create scanner");
        if r.status == 201 {
            locations.push(r.header("Location").unwrap_or_default().to_string());
        } else {
            refused = Some((r.status, r.text()));
            break;
        }
    }
    c.count += 1;
    if locations.len() != 1_000 {
        c.failures.push(format!(
            "{} scanners opened before a refusal (limit is 1,000): {refused:?}",
            locations.len()
        ));
    }
    match &refused {
        Some((s, _)) if (400..500).contains(s) => {}
        other => c.failures.push(format!(
            "the 1,001st scanner: expected a 4xx, got {other:?}"
        )),
    }
    c.alive("scanner exhaustion");
    // Closing one makes room for one more.
    if let Some(loc) = locations.pop() {
        let path = loc
            .split_once("//")
            .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_string()));
        let path = path.unwrap_or(loc);
        let r = http
            .request("DELETE", &path, &[], b"")
            .expect("delete scanner");
        c.count += 1;
        if r.status != 200 {
            c.failures.push(format!("DELETE {path}: {}", r.status));
        }
        let r = http
            .request(
                "PUT",
                "/h/scanner",
                &[("Content-Type", "application/json")],
                b"{}",
            )
            .expect("create scanner");
        c.count += 1;
        if r.status != 201 {
            c.failures.push(format!(
                "a scanner after closing one: {} {}",
                r.status,
                r.text()
            ));
        }
    }
    let r = http
        .request("GET", "/h/scanner/no-such-id", &[], b"")
        .expect("unknown scanner");
    c.count += 1;
    if r.status != 404 {
        c.failures.push(format!(
            "GET an unknown scanner: expected 404, got {}",
            r.status
        ));
    }
    c.finish("scanner cap");
}

/// Sends a request head one header line per second; returns how the server treated it.
fn slowloris(addr: SocketAddr, give_up: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(1)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .map_err(|e| format!("first write: {e}"))?;
    let mut buf = [0u8; 512];
    let mut i = 0;
    while start.elapsed() < give_up {
        // Reading with a one-second timeout both paces the trickle and notices a close.
        match s.read(&mut buf) {
            Ok(0) => return Ok(start.elapsed()),
            Ok(n) => {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                if text.starts_with("HTTP/1.1 200") {
                    return Err(format!("a slowloris request was served: {text:?}"));
                }
                return Ok(start.elapsed()); // 408 or another refusal, then the close
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Ok(start.elapsed()),
        }
        i += 1;
        if s.write_all(format!("X-Slow-{i}: x\r\n").as_bytes())
            .is_err()
        {
            return Ok(start.elapsed());
        }
    }
    Err(format!(
        "still connected after {give_up:?} of trickled headers"
    ))
}

#[test]
fn slowloris_connections_are_dropped_and_others_are_still_served() {
    let (_dir, server) = start();
    let addr = server.addr;
    // Many slow connections at once, the server must keep answering others meanwhile.
    let slow: Vec<_> = (0..64)
        .map(|_| std::thread::spawn(move || slowloris(addr, Duration::from_secs(30))))
        .collect();
    let idle: Vec<_> = (0..16)
        .map(|_| {
            std::thread::spawn(move || -> Result<Duration, String> {
                let start = Instant::now();
                let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
                s.set_read_timeout(Some(Duration::from_secs(30)))
                    .map_err(|e| e.to_string())?;
                let mut buf = [0u8; 64];
                match s.read(&mut buf) {
                    Ok(_) => Ok(start.elapsed()),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        Err("a silent connection was kept for 30 s".to_string())
                    }
                    Err(_) => Ok(start.elapsed()),
                }
            })
        })
        .collect();
    // While they trickle: served normally.
    let mut http = server.client();
    let r = http
        .request("GET", "/healthz", &[], b"")
        .expect("healthz during slowloris");
    assert_eq!(
        r.status, 200,
        "the server must serve others during a slowloris attack"
    );
    let r = http
        .request(
            "PUT",
            "/h/fakerow",
            &[("Content-Type", "application/json")],
            &cellset(b"r", b"cf:a", b"v"),
        )
        .expect("put during slowloris");
    assert_eq!(
        r.status,
        200,
        "a put during a slowloris attack: {}",
        r.text()
    );
    let mut dropped_after = Vec::new();
    for h in slow.into_iter().chain(idle) {
        match h.join().expect("slowloris thread") {
            Ok(d) => dropped_after.push(d),
            Err(e) => panic!("{e}"),
        }
    }
    let max = dropped_after.iter().max().copied().unwrap_or_default();
    println!("slow and silent connections dropped after at most {max:?}");
    healthz(addr).expect("alive after slowloris");
}

/// A client that announces a body and stops sending it (a slow POST) gets a 408 once it has
/// sent nothing for `--body-timeout-secs`, from the REST API and from the applications alike,
/// instead of holding its connection and handler forever; nothing of the partial body is
/// applied and the server goes on serving.
#[test]
fn a_body_that_stops_arriving_is_408_and_applies_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let server = Server::start(&data, &["--body-timeout-secs", "1"]);
    create_table(&mut server.client(), "h", &["cf"]);
    let stalled = |path: &str, partial: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: 500\r\n\r\n{partial}"
        )
        .into_bytes()
    };
    let started = Instant::now();
    let rest = exchange(
        server.addr,
        stalled("/h/stalled", r#"{"Row":[{"key":"c3RhbGxlZA==","#),
        false,
        Duration::from_secs(20),
    );
    assert_eq!(rest.status, Some(408), "REST: {}", rest.head);
    let app = exchange(
        server.addr,
        stalled("/apps/graph/nodes", r#"{"id":"#),
        false,
        Duration::from_secs(20),
    );
    assert_eq!(app.status, Some(408), "apps: {}", app.head);
    assert!(
        app.head.contains("request_timeout"),
        "the app error names the cause: {}",
        app.head
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "answered after the 1 s pause, not after a client-side timeout: {:?}",
        started.elapsed()
    );
    healthz(server.addr).expect("the server still serves");
    let r = server
        .client()
        .request("GET", "/h/stalled", &[("Accept", "application/json")], b"")
        .expect("get");
    assert_eq!(r.status, 404, "nothing was written: {}", r.text());
}
