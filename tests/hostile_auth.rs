//! Security basics against the real `kura` binary (RELIABILITY.md, "Security basics").
//!
//! What a user relies on:
//! 1. With a token configured, every request without `Authorization: Bearer <token>`, or with a
//!    wrong one, is answered 401 (with `WWW-Authenticate: Bearer`) and changes nothing; the right
//!    token is admitted. `/healthz` stays open so load balancers can probe it.
//! 2. The server refuses to listen on a non-loopback address unless told so explicitly, and
//!    refuses to start with an unreadable token file, instead of silently running unprotected.

mod server_harness;

use server_harness::{free_port, poll_until, Server};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "s3cret-token-for-tests-0123456789";

#[test]
fn requests_without_the_right_bearer_token_are_refused_with_401() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write token file");
    let data = dir.path().join("data");
    let token_arg = token_file.to_string_lossy().into_owned();
    let server = Server::start(&data, &["--token-file", &token_arg]);
    let mut http = server.client();
    let good = format!("Bearer {TOKEN}");
    let schema = br#"{"name":"sec","ColumnSchema":[{"name":"cf"}]}"#;
    let json = ("Content-Type", "application/json");

    let r = http.request("GET", "/healthz", &[], b"").expect("healthz");
    assert_eq!(r.status, 200, "/healthz stays open for probes");

    let wrong = [
        None,
        Some("Bearer wrong".to_string()),
        Some(format!("Bearer {}", &TOKEN[..TOKEN.len() - 1])),
        Some(format!("Bearer {TOKEN}x")),
        Some(format!("Basic {TOKEN}")),
        Some(TOKEN.to_string()),
        Some("Bearer ".to_string()),
    ];
    for auth in &wrong {
        let mut headers = vec![json, ("Accept", "application/json")];
        if let Some(a) = auth {
            headers.push(("Authorization", a.as_str()));
        }
        for (method, path, body) in [
            ("GET", "/", &b""[..]),
            ("PUT", "/sec/schema", &schema[..]),
            ("GET", "/metrics", &b""[..]),
            ("POST", "/admin/tables/sec/flush", &b""[..]),
        ] {
            let r = http.request(method, path, &headers, body).expect("request");
            assert_eq!(
                r.status,
                401,
                "{method} {path} with Authorization {auth:?}: {}",
                r.text()
            );
            assert!(
                r.header("WWW-Authenticate")
                    .is_some_and(|v| v.starts_with("Bearer")),
                "401 names the scheme: {:?}",
                r.headers
            );
        }
    }

    // The admin API and the applications answer every refusal in their JSON error shape.
    for (method, path) in [("GET", "/admin/tables"), ("GET", "/apps/actions/users/1")] {
        let r = http.request(method, path, &[], b"").expect("request");
        assert_eq!(r.status, 401);
        assert_eq!(r.header("Content-Type"), Some("application/json"), "{path}");
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("a JSON body");
        assert_eq!(v["error"]["code"], "unauthorized", "{v}");
        assert!(r.header("WWW-Authenticate").is_some());
    }

    let auth = ("Authorization", good.as_str());
    let r = http
        .request(
            "GET",
            "/sec/schema",
            &[auth, ("Accept", "application/json")],
            b"",
        )
        .expect("schema");
    assert_eq!(
        r.status,
        404,
        "the refused PUT created nothing: {}",
        r.text()
    );
    let r = http
        .request("PUT", "/sec/schema", &[auth, json], schema)
        .expect("create");
    assert_eq!(r.status, 201, "the right token is admitted: {}", r.text());
    let r = http
        .request("GET", "/", &[auth, ("Accept", "application/json")], b"")
        .expect("list");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("\"sec\""), "table listed: {}", r.text());
}

/// Runs the binary with `args` and waits up to 20 s for it to exit; `None` if it kept running.
fn exit_status_of(args: &[&str]) -> (Option<std::process::ExitStatus>, String) {
    exit_status_with_env(args, &[])
}

/// `exit_status_of` with environment variables set (`KURA_TOKEN` and `KURA_ALLOW_REMOTE` are
/// otherwise removed).
fn exit_status_with_env(
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<std::process::ExitStatus>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kura"))
        .args(args)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env_remove("KURA_ALLOW_REMOTE")
        .env_remove("KURA_TOKEN")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kura");
    let mut status = None;
    if poll_until(Duration::from_secs(20), || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    }) {
        let out = child.wait_with_output().expect("output");
        return (status, String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let _ = child.kill();
    let _ = child.wait();
    (None, String::new())
}

#[test]
fn a_non_loopback_bind_without_allow_remote_is_refused_at_start() {
    let bind = format!("0.0.0.0:{}", free_port());
    let (status, stderr) = exit_status_of(&["--bind", &bind]);
    let status = status.expect("kura kept running on 0.0.0.0 without --allow-remote");
    assert!(!status.success(), "exit status {status}");
    assert!(
        stderr.contains("allow-remote"),
        "the refusal says what to do: {stderr}"
    );
}

#[test]
fn an_unreadable_token_file_is_refused_at_start() {
    let bind = format!("127.0.0.1:{}", free_port());
    let (status, stderr) =
        exit_status_of(&["--bind", &bind, "--token-file", "/nonexistent/kura-token"]);
    let status = status.expect("kura started without its token file");
    assert!(!status.success(), "exit status {status}; {stderr}");
}

/// An empty `KURA_TOKEN` (a deployment whose secret did not arrive) is refused at start instead
/// of running without authentication, as an empty token file is; so are absurd thread counts,
/// with a message instead of a panic.
#[test]
fn an_empty_token_or_an_absurd_thread_count_is_refused_at_start_with_a_message() {
    let bind = format!("127.0.0.1:{}", free_port());
    let (status, stderr) = exit_status_with_env(&["--bind", &bind], &[("KURA_TOKEN", " ")]);
    let status = status.expect("kura started with an empty token");
    assert!(!status.success(), "exit status {status}");
    assert!(stderr.contains("KURA_TOKEN"), "{stderr}");
    for flag in ["--workers", "--arbiters"] {
        let (status, stderr) = exit_status_of(&["--bind", &bind, flag, "5000"]);
        let status = status.expect("kura kept running");
        assert_eq!(status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains(&flag[2..]) && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
}

/// An unauthenticated client that trickles its body in (a byte now and then, never pausing
/// long enough for an idle timeout) gets its 401 within the drain's one deadline, instead of
/// holding the connection for as long as it keeps trickling.
#[test]
fn a_refused_request_trickling_its_body_is_answered_without_waiting_for_it() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).expect("write token file");
    let data = dir.path().join("data");
    let token_arg = token_file.to_string_lossy().into_owned();
    let server = Server::start(&data, &["--token-file", &token_arg]);
    let mut sock = std::net::TcpStream::connect(server.addr).expect("connect");
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    sock.write_all(b"POST /t/row HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 60\r\n\r\n")
        .expect("head");
    let started = Instant::now();
    let mut answer = Vec::new();
    // Trickling the 60 bytes would take 30 s; the answer must come long before.
    for _ in 0..60 {
        if sock.write_all(b"x").is_err() {
            break;
        }
        let give_up = Instant::now() + Duration::from_millis(500);
        let mut buf = [0u8; 1024];
        while Instant::now() < give_up {
            match sock.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
        if !answer.is_empty() {
            break;
        }
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 401"), "answer: {text:?}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "answered only after {:?}",
        started.elapsed()
    );
}

/// A web page of another origin cannot write through the visitor's browser (cross-site request
/// forgery against the token-less loopback default): a write whose `Origin` is not the server
/// is refused with 403 and applies nothing; the server's own pages, clients that send no
/// `Origin`, and cross-origin reads are served as before.
#[test]
fn writes_from_a_page_of_another_origin_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let mut http = server.client();
    let schema = br#"{"ColumnSchema":[{"name":"cf"}]}"#;
    let json = ("Content-Type", "application/json");
    let evil = ("Origin", "http://evil.example");
    let r = http
        .request("PUT", "/csrf/schema", &[json, evil], schema)
        .expect("put");
    assert_eq!(r.status, 403, "{}", r.text());
    let r = http.request("GET", "/csrf/schema", &[], b"").expect("get");
    assert_eq!(r.status, 404, "nothing was created");
    let null = ("Origin", "null");
    let r = http
        .request("POST", "/admin/tables/csrf/flush", &[null], b"")
        .expect("post");
    assert_eq!(r.status, 403, "{}", r.text());
    let own = format!("http://{}", server.addr);
    let r = http
        .request("PUT", "/csrf/schema", &[json, ("Origin", &own)], schema)
        .expect("put");
    assert_eq!(r.status, 201, "the server's own page: {}", r.text());
    let r = http
        .request("GET", "/csrf/schema", &[evil], b"")
        .expect("get");
    assert_eq!(r.status, 200, "reads are not refused");
    let r = http
        .request("PUT", "/csrf2/schema", &[json], schema)
        .expect("put");
    assert_eq!(r.status, 201, "no Origin: an HTTP client, not a browser");
}

/// One raw HTTP/1.1 request with the given `Host`; the status code.
fn status_with_host(server: &Server, method: &str, path: &str, host: &str, body: &[u8]) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(server.addr).expect("connect");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("send");
    s.write_all(body).expect("send body");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw)
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .expect("a status line")
}

/// DNS rebinding: a page on the attacker's name, re-pointed to 127.0.0.1, is same-origin to the
/// browser (its `Origin` matches its `Host`), so only the `Host` it sends tells it apart. A
/// loopback-only server (the default) answers loopback names only: reads and writes by any
/// other name are refused, and change nothing.
#[test]
fn requests_addressed_to_another_name_than_loopback_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let mut http = server.client();
    let schema = br#"{"ColumnSchema":[{"name":"cf"}]}"#;
    let r = http
        .request(
            "PUT",
            "/t/schema",
            &[("Content-Type", "application/json")],
            schema,
        )
        .expect("create");
    assert_eq!(r.status, 201);
    let port = server.addr.port();
    let rebound = format!("rebind.attacker.example:{port}");
    for (method, path) in [
        ("PUT", "/t/r/cf:a"),
        ("GET", "/t/r/cf:a"),
        ("DELETE", "/t/schema"),
        ("POST", "/admin/tables/t/flush"),
        ("GET", "/admin/tables"),
    ] {
        let status = status_with_host(&server, method, path, &rebound, b"pwned");
        assert_eq!(status, 403, "{method} {path}");
    }
    let r = http.request("GET", "/t/schema", &[], b"").expect("get");
    assert_eq!(r.status, 200, "the table is still there");
    let r = http.request("GET", "/t/r/cf:a", &[], b"").expect("get");
    assert_eq!(r.status, 404, "nothing was written");
    // Loopback names, any port, are this server.
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "localhost".into(),
    ] {
        assert_eq!(
            status_with_host(&server, "PUT", "/t/r/cf:a", &host, b"v"),
            200,
            "{host}"
        );
    }
}
