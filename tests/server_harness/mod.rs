//! Runs the real `kura` binary for tests that need a whole server: a process on a free loopback
//! port with its own temporary data directory, and a minimal blocking HTTP/1.1 client (keep-alive,
//! Content-Length and chunked bodies) so these tests add no client dependency.

#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server process. Killed (SIGKILL) when dropped.
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    extra_args: Vec<String>,
    /// Environment variables set on the server process (see [`Server::set_env`]).
    env: Vec<(String, String)>,
}

/// Whether `cond` comes to hold within `within`, checked every millisecond. For what a server process
/// or a command does in its own time (start up, exit, write a file): the deadline bounds a test
/// that would otherwise hang; it asserts nothing about speed.
pub fn poll_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// [`poll_until`], panicking with `what` if `cond` does not hold within `within`.
pub fn wait_until(what: &str, within: Duration, cond: impl FnMut() -> bool) {
    assert!(poll_until(within, cond), "{what}: not within {within:?}");
}

/// [`wait_until`] for a test that runs an actix system on its own thread: the system goes on
/// running while this waits.
pub async fn wait_until_async(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A connection to `addr` on which `/healthz` answers 200, if the server there is up.
pub fn healthy(addr: SocketAddr) -> Option<Http> {
    let mut c = Http::connect(addr).ok()?;
    let r = c.request("GET", "/healthz", &[], b"").ok()?;
    (r.status == 200).then_some(c)
}

/// A free loopback port (the listener is dropped before the server binds it).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

impl Server {
    /// Starts the server on a free port over `data_dir` with extra command-line arguments, and
    /// waits until `/healthz` answers.
    pub fn start(data_dir: &Path, extra_args: &[&str]) -> Server {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        let mut server = Server {
            child: None,
            addr,
            data_dir: data_dir.to_path_buf(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_kura"))
            .arg("--bind")
            .arg(self.addr.to_string())
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.extra_args)
            .env("RUST_LOG", "warn")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the kura binary");
        self.child = Some(child);
        self.wait_ready(Duration::from_secs(60));
    }

    fn wait_ready(&mut self, timeout: Duration) {
        let addr = self.addr;
        let mut child = self.child.as_mut();
        wait_until("kura answers /healthz", timeout, || {
            if let Some(status) = child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("kura exited during start-up: {status}");
            }
            healthy(addr).is_some()
        });
    }

    /// The environment variables the next start ([`Server::restart`]) sets on the server
    /// process, replacing the ones set before (a test hook such as
    /// `KURA_TEST_CRASH_AFTER_APP_WRITES`; none: `&[]`).
    pub fn set_env(&mut self, env: &[(&str, &str)]) {
        self.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Whether the server process has exited (a crash, or a test hook that killed it).
    pub fn exited(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// SIGKILL, no chance to flush: what a crash leaves on disk.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then wait (at most `timeout`) for the process to exit: a clean shutdown.
    /// Returns the exit status, or `None` if it had not exited by then (it is then killed).
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(sent, "could not send SIGTERM to the server");
        let mut status = None;
        poll_until(timeout, || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        });
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        status
    }

    /// Kills (if running) and starts again on the same port and data directory; returns how
    /// long the restart took until `/healthz` answered.
    pub fn restart(&mut self) -> Duration {
        self.kill();
        let start = Instant::now();
        self.spawn();
        start.elapsed()
    }

    /// A new keep-alive connection to this server.
    pub fn client(&self) -> Http {
        Http::connect(self.addr).expect("connect to kura")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as UTF-8 (lossy), for messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A blocking HTTP/1.1 keep-alive connection.
pub struct Http {
    addr: SocketAddr,
    reader: BufReader<TcpStream>,
    /// The server answered `Connection: close`: the next request opens a new connection.
    closed: bool,
}

impl Http {
    /// Sends a JSON body: the status and the answer's JSON (`Null` if empty or not JSON).
    pub fn send_json(&mut self, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
        let r = self
            .request(
                method,
                path,
                &[("Content-Type", "application/json")],
                body.as_bytes(),
            )
            .expect("answered");
        let v = serde_json::from_slice(&r.body).unwrap_or(serde_json::Value::Null);
        (r.status, v)
    }

    pub fn connect(addr: SocketAddr) -> io::Result<Http> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Http {
            addr,
            reader: BufReader::new(stream),
            closed: false,
        })
    }

    /// Sends one request and reads the whole response. Opens a new connection first when the
    /// previous response said `Connection: close` (as a server does after answering without
    /// reading a request body).
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<Response> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let mut buf = head.into_bytes();
        buf.extend_from_slice(body);
        if self.closed {
            *self = Http::connect(self.addr)?;
        }
        self.reader.get_mut().write_all(&buf)?;
        self.read_response(method == "HEAD")
    }

    fn read_response(&mut self, head_only: bool) -> io::Result<Response> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("status: {line}")))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if !head_only && status != 204 && status != 304 {
            if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
                loop {
                    line.clear();
                    self.reader.read_line(&mut line)?;
                    let size =
                        usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                            .map_err(|_| {
                                io::Error::new(io::ErrorKind::InvalidData, "chunk size")
                            })?;
                    if size == 0 {
                        line.clear();
                        self.reader.read_line(&mut line)?;
                        break;
                    }
                    let start = body.len();
                    body.resize(start + size, 0);
                    self.reader.read_exact(&mut body[start..])?;
                    let mut crlf = [0u8; 2];
                    self.reader.read_exact(&mut crlf)?;
                }
            } else if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
                body.resize(len, 0);
                self.reader.read_exact(&mut body)?;
            }
        }
        self.closed = get("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

/// Standard base64 (RFC 4648 with padding), written out so the harness needs no dependency.
pub fn b64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// Creates table `name` with the given families through the REST schema endpoint.
pub fn create_table(http: &mut Http, name: &str, families: &[&str]) {
    let cols: Vec<String> = families
        .iter()
        .map(|f| format!("{{\"name\":\"{f}\"}}"))
        .collect();
    let body = format!(
        "{{\"name\":\"{name}\",\"ColumnSchema\":[{}]}}",
        cols.join(",")
    );
    let r = http
        .request(
            "PUT",
            &format!("/{name}/schema"),
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .expect("create table");
    assert_eq!(r.status, 201, "creating table {name}: {}", r.text());
}

/// Runs `kura ARGS` (a client subcommand) to its end with `env` set on top of a clean slate:
/// `KURA_TOKEN` and `BIGTABLE_EMULATOR_HOST` from the test's own environment are removed.
pub fn run_kura(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kura"));
    cmd.args(args)
        .env_remove("KURA_TOKEN")
        .env_remove("BIGTABLE_EMULATOR_HOST");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run kura")
}

/// A finished command's exit status and output, for assertion messages.
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
