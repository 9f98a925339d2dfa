//! A keep-alive HTTP/1.1 client: one TCP connection per worker, hyper 1 underneath.
//!
//! # Invariants
//! 1. A `Conn` owns at most one live connection; requests on it are strictly sequential
//!    (HTTP/1.1 without pipelining), so one worker = one connection = one request in flight.
//! 2. After any transport error or timeout the connection is dropped and the next request
//!    dials a fresh one; the failed request is reported, never retried silently.
//! 3. A `Conn` over several servers ([`Conn::rotating`]) keeps one connection to each and sends
//!    each request to the next server in turn; still one request in flight at a time.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::error::{LoadError, Result};

/// A response: status and the whole body.
#[derive(Debug, Clone)]
pub struct Resp {
    /// HTTP status code.
    pub status: u16,
    /// The complete response body.
    pub body: Bytes,
}

impl Resp {
    /// The body as (lossy) UTF-8, truncated for error messages.
    pub fn body_snippet(&self) -> String {
        let s = String::from_utf8_lossy(&self.body);
        s.chars().take(300).collect()
    }
}

/// One keep-alive connection to one server.
struct Target {
    addr: String,
    host: HeaderValue,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Target {
    fn new(addr: &str) -> Result<Target> {
        let host = HeaderValue::from_str(addr)
            .map_err(|e| LoadError::Args(format!("bad address {addr}: {e}")))?;
        Ok(Target {
            addr: addr.to_string(),
            host,
            sender: None,
        })
    }
}

/// A worker's keep-alive connection: to one server, or one to each of several servers with
/// requests sent round-robin over them (invariant 3).
pub struct Conn {
    targets: Vec<Target>,
    /// Index of the target the next request goes to.
    next: usize,
    timeout: Duration,
    /// How many times this connection was (re)dialled.
    pub dials: u64,
}

impl Conn {
    /// A connection to `addr` (`host:port`); dialled lazily on the first request.
    pub fn new(addr: &str, timeout: Duration) -> Result<Conn> {
        Conn::rotating(&[addr.to_string()], 0, timeout)
    }

    /// Connections to every server of `addrs`, each request going to the next one in turn,
    /// starting at `addrs[first % addrs.len()]` (so workers start on different servers).
    pub fn rotating(addrs: &[String], first: usize, timeout: Duration) -> Result<Conn> {
        if addrs.is_empty() {
            return Err(LoadError::Args("no server address".into()));
        }
        let targets = addrs
            .iter()
            .map(|a| Target::new(a))
            .collect::<Result<Vec<_>>>()?;
        Ok(Conn {
            next: first % targets.len(),
            targets,
            timeout,
            dials: 0,
        })
    }

    /// The address the next request goes to.
    pub fn addr(&self) -> &str {
        &self.targets[self.next].addr
    }

    async fn dial(&mut self, i: usize) -> Result<()> {
        let addr = self.targets[i].addr.clone();
        let stream = TcpStream::connect(&addr)
            .await
            .map_err(|source| LoadError::Connect {
                addr: addr.clone(),
                source,
            })?;
        stream
            .set_nodelay(true)
            .map_err(|source| LoadError::Connect { addr, source })?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| LoadError::Http(e.to_string()))?;
        tokio::spawn(async move {
            // The connection task ends when the sender is dropped or the peer closes.
            let _ = conn.await;
        });
        self.targets[i].sender = Some(sender);
        self.dials += 1;
        Ok(())
    }

    /// Send one request and read the whole response.
    pub async fn request(
        &mut self,
        method: Method,
        path: &str,
        body: Option<(&'static str, Bytes)>,
    ) -> Result<Resp> {
        let timeout = self.timeout;
        let i = self.next;
        self.next = (i + 1) % self.targets.len();
        match tokio::time::timeout(timeout, self.request_inner(i, method, path, body)).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                self.targets[i].sender = None;
                Err(e)
            }
            Err(_) => {
                self.targets[i].sender = None;
                Err(LoadError::Timeout(timeout))
            }
        }
    }

    async fn request_inner(
        &mut self,
        i: usize,
        method: Method,
        path: &str,
        body: Option<(&'static str, Bytes)>,
    ) -> Result<Resp> {
        let ready = match self.targets[i].sender.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !ready {
            self.dial(i).await?;
        }
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, self.targets[i].host.clone())
            .header(ACCEPT, "application/json");
        let payload = match body {
            Some((ctype, bytes)) => {
                builder = builder.header(CONTENT_TYPE, ctype);
                bytes
            }
            None => Bytes::new(),
        };
        let req = builder
            .body(Full::new(payload))
            .map_err(|e| LoadError::Http(format!("building request for {path}: {e}")))?;
        let sender = self.targets[i]
            .sender
            .as_mut()
            .ok_or_else(|| LoadError::Http("connection not established".into()))?;
        sender
            .ready()
            .await
            .map_err(|e| LoadError::Http(e.to_string()))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| LoadError::Http(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| LoadError::Http(e.to_string()))?
            .to_bytes();
        Ok(Resp { status, body })
    }

    /// `GET path`.
    pub async fn get(&mut self, path: &str) -> Result<Resp> {
        self.request(Method::GET, path, None).await
    }

    /// `DELETE path`.
    pub async fn delete(&mut self, path: &str) -> Result<Resp> {
        self.request(Method::DELETE, path, None).await
    }

    /// `PUT path` with a JSON body.
    pub async fn put_json(&mut self, path: &str, body: impl Into<Bytes>) -> Result<Resp> {
        self.request(Method::PUT, path, Some(("application/json", body.into())))
            .await
    }

    /// `POST path` with a JSON body.
    pub async fn post_json(&mut self, path: &str, body: impl Into<Bytes>) -> Result<Resp> {
        self.request(Method::POST, path, Some(("application/json", body.into())))
            .await
    }

    /// `PATCH path` with a JSON body.
    pub async fn patch_json(&mut self, path: &str, body: impl Into<Bytes>) -> Result<Resp> {
        self.request(Method::PATCH, path, Some(("application/json", body.into())))
            .await
    }
}
