//! A small HBase REST client over hyper's HTTP/1.1 connection, plain or TLS (rustls), one
//! keep-alive connection per side: schemas, CellSet `PUT`s keeping every timestamp, and
//! stateful scanners (`docs/spec/HBASE_REST.md` §2, §4).
//!
//! # Invariants
//! 1. Requests that are idempotent (schemas, `PUT`s of cells with explicit timestamps, opening
//!    and deleting scanners) are retried, a few times with backoff, when they failed on a
//!    dropped connection or a 503.
//! 2. A scanner `GET` is never retried: the server may have moved the scanner on before the
//!    answer was lost, and a retry would skip those rows. A failed one answers
//!    [`Next::Gone`], and the scan opens a new scanner where it stood.
//! 3. An answer body is read up to `MAX_ANSWER` bytes, never more.
//! 4. With a bearer token ([`HttpClient::with_token`], read by [`client_token`] from
//!    `--token-file` or `KURA_TOKEN`, as the server reads its own), every request carries
//!    `Authorization: Bearer <token>`; a 401 or 403 is an error that says how to pass one, and
//!    is never retried.

use super::side::unexpected;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper::{header, Method, Request, StatusCode, Uri};
use kura_backend::{Cell, Row, TableDescriptor};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// Largest answer body read (a scanner answer of a few thousand cells is far below it).
const MAX_ANSWER: usize = 1 << 30;

/// Attempts per request on a dropped connection or a 503.
const ATTEMPTS: u32 = 6;

/// What a scanner `GET` answered.
pub enum Next {
    /// Rows (the last one may go on in the next answer).
    Rows(Vec<Row>),
    /// 204: nothing more.
    Exhausted,
    /// 404, 503 or no answer: the server no longer has this scanner (idle timeout, restart),
    /// or it may have moved on without this client seeing the rows.
    Gone,
}

/// One answer.
pub struct Reply {
    pub status: StatusCode,
    pub location: Option<String>,
    pub body: Bytes,
}

/// An HBase REST endpoint.
pub struct HttpClient {
    /// TLS (rustls, the system's and Mozilla's root certificates).
    https: bool,
    host: String,
    port: u16,
    authority: String,
    /// Path prefix of the endpoint (empty, or `/something` without a trailing `/`).
    prefix: String,
    conn: tokio::sync::Mutex<Option<SendRequest<Full<Bytes>>>>,
    /// The `Authorization` header value (`Bearer …`), if a token was given.
    authorization: Option<header::HeaderValue>,
}

/// The bearer token a client subcommand sends: the first line of `file` (`--token-file`), else
/// the `KURA_TOKEN` environment variable, else none: the rules the server reads its token by.
pub fn client_token(file: Option<&std::path::Path>) -> Result<Option<String>, String> {
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("token file {}: {e}", path.display()))?;
        let token = text.lines().next().unwrap_or("").trim().to_string();
        if token.is_empty() {
            return Err(format!("token file {}: the file is empty", path.display()));
        }
        return Ok(Some(token));
    }
    match std::env::var("KURA_TOKEN") {
        Ok(t) if t.trim().is_empty() => {
            Err("KURA_TOKEN is set but empty: set a token, or unset it to send none".into())
        }
        Ok(t) => Ok(Some(t.trim().to_string())),
        Err(_) => Ok(None),
    }
}

impl HttpClient {
    /// A client for `http://host[:port][/prefix]` (nothing is connected yet).
    pub fn new(url: &str) -> Result<HttpClient, String> {
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(format!("{url}: use http://HOST:PORT or https://HOST:PORT")),
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("{url}: no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if uri.query().is_some() {
            return Err(format!("{url}: a side URL takes no query string"));
        }
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Ok(HttpClient {
            https,
            authority: uri.authority().map(|a| a.to_string()).unwrap_or_default(),
            host,
            port,
            prefix: uri.path().trim_end_matches('/').to_string(),
            conn: tokio::sync::Mutex::new(None),
            authorization: None,
        })
    }

    /// Sends `Authorization: Bearer <token>` with every request (none when `token` is `None`).
    pub fn with_token(mut self, token: Option<&str>) -> Result<HttpClient, String> {
        self.authorization = match token {
            Some(t) => Some(
                header::HeaderValue::from_str(&format!("Bearer {t}"))
                    .map_err(|_| "the token holds characters an HTTP header cannot carry")?,
            ),
            None => None,
        };
        Ok(self)
    }

    /// The endpoint as `host:port`, for messages.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, String> {
        let stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.authority))?;
        let _ = stream.set_nodelay(true);
        let no_http = |e: hyper::Error| format!("cannot talk HTTP to {}: {e}", self.authority);
        if !self.https {
            let (sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .map_err(no_http)?;
            actix_rt::spawn(async move {
                let _ = conn.await;
            });
            return Ok(sender);
        }
        let name = ServerName::try_from(self.host.clone())
            .map_err(|e| format!("{}: not a TLS server name: {e}", self.host))?;
        let tls = tokio_rustls::TlsConnector::from(tls_config()?)
            .connect(name, stream)
            .await
            .map_err(|e| format!("TLS with {} failed: {e}", self.authority))?;
        let (sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(no_http)?;
        actix_rt::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Sends one request (retrying as invariant 1 says); `path` is below the prefix.
    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<Reply, String> {
        let mut last = String::new();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(100 << attempt.min(5))).await;
            }
            match self
                .send_once(&method, path, content_type, body.clone())
                .await
            {
                Ok(r) if r.status == StatusCode::SERVICE_UNAVAILABLE => {
                    last = unexpected(&format!("{method} {path}"), &r);
                }
                Ok(r) if is_refused(r.status) => return Err(self.refused(&r)),
                Ok(r) => return Ok(r),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn send_once(
        &self,
        method: &Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<Reply, String> {
        let mut guard = self.conn.lock().await;
        let mut sender = match guard.take() {
            Some(s) if !s.is_closed() => s,
            _ => self.connect().await?,
        };
        let mut req = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.prefix))
            .header(header::HOST, &self.authority)
            .header(header::ACCEPT, "application/json");
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        if let Some(auth) = &self.authorization {
            req = req.header(header::AUTHORIZATION, auth.clone());
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| format!("{method} {path}: {e}"))?;
        let failed =
            |e: &dyn std::fmt::Display| format!("{method} {path} on {}: {e}", self.authority);
        sender.ready().await.map_err(|e| failed(&e))?;
        let resp = sender.send_request(req).await.map_err(|e| failed(&e))?;
        let status = resp.status();
        let location = resp
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| failed(&e))?
            .to_bytes();
        *guard = Some(sender);
        Ok(Reply {
            status,
            location,
            body,
        })
    }

    /// `GET /{t}/schema`, `None` on 404.
    pub async fn schema(&self, table: &str) -> Result<Option<TableDescriptor>, String> {
        let r = self
            .send(Method::GET, &format!("/{table}/schema"), None, Bytes::new())
            .await?;
        match r.status {
            StatusCode::OK => parse_schema(table, &r.body).map(Some),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(unexpected(&format!("reading the schema of {table}"), &r)),
        }
    }

    /// `PUT /{t}/schema` with `desc`'s families and attributes.
    pub async fn create(&self, desc: &TableDescriptor) -> Result<(), String> {
        let body = crate::rest::schema::render(crate::rest::media::Repr::Json, desc);
        let r = self
            .send(
                Method::PUT,
                &format!("/{}/schema", desc.name),
                Some("application/json"),
                Bytes::from(body),
            )
            .await?;
        succeeded(&r, || format!("creating table {}", desc.name))
    }

    /// `PUT /{t}/fakerow` with a CellSet of `rows`, every cell with its timestamp.
    pub async fn put_rows(&self, table: &str, rows: &[Row]) -> Result<(), String> {
        let body = crate::rest::cellset::render(crate::rest::media::Repr::Json, rows);
        let r = self
            .send(
                Method::PUT,
                &format!("/{table}/fakerow"),
                Some("application/json"),
                Bytes::from(body),
            )
            .await?;
        succeeded(&r, || format!("writing rows to {table}"))
    }

    /// Creates a scanner over every version from `start` (inclusive); returns its path.
    pub async fn open_scanner(
        &self,
        table: &str,
        start: Option<&[u8]>,
        batch_cells: usize,
    ) -> Result<String, String> {
        self.open_scanner_with(table, start, batch_cells, &serde_json::Map::new())
            .await
    }

    /// As [`HttpClient::open_scanner`], with `extra` Scanner model fields (`endRow`, `column`,
    /// `startTime`, `endTime`, or a `maxVersions` replacing every version).
    pub async fn open_scanner_with(
        &self,
        table: &str,
        start: Option<&[u8]>,
        batch_cells: usize,
        extra: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, String> {
        let mut model = serde_json::json!({
            "batch": batch_cells,
            "maxVersions": i32::MAX,
        });
        if let Some(s) = start {
            model["startRow"] = crate::rest::media::b64_encode(s).into();
        }
        for (k, v) in extra {
            model[k] = v.clone();
        }
        let r = self
            .send(
                Method::PUT,
                &format!("/{table}/scanner"),
                Some("application/json"),
                Bytes::from(model.to_string()),
            )
            .await?;
        if r.status != StatusCode::CREATED {
            return Err(unexpected(&format!("opening a scanner on {table}"), &r));
        }
        let location = r
            .location
            .ok_or_else(|| format!("the scanner on {table} came back without a Location"))?;
        // Absolute (`http://host:port/t/scanner/id`) in HBase and Kura; keep the path only.
        let path = match location.parse::<Uri>() {
            Ok(u) if u.scheme().is_some() => u.path().to_string(),
            _ => location,
        };
        Ok(path
            .strip_prefix(&self.prefix)
            .map(str::to_string)
            .unwrap_or(path))
    }

    /// The scanner's next answer.
    pub async fn scanner_next(&self, path: &str) -> Result<Next, String> {
        let r = match self.send_once(&Method::GET, path, None, Bytes::new()).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("reading scanner {path}: {e}; opening a new one");
                return Ok(Next::Gone);
            }
        };
        match r.status {
            s if is_refused(s) => Err(self.refused(&r)),
            StatusCode::NO_CONTENT => Ok(Next::Exhausted),
            StatusCode::OK => parse_rows(&r.body).map(Next::Rows),
            StatusCode::NOT_FOUND | StatusCode::SERVICE_UNAVAILABLE => Ok(Next::Gone),
            _ => Err(unexpected(&format!("reading scanner {path}"), &r)),
        }
    }

    /// `GET path` as JSON: the parsed body, `None` on 404.
    pub async fn get_json(&self, path: &str) -> Result<Option<serde_json::Value>, String> {
        let r = self.send(Method::GET, path, None, Bytes::new()).await?;
        match r.status {
            StatusCode::OK => serde_json::from_slice(&r.body)
                .map(Some)
                .map_err(|e| format!("GET {path}: the answer is not JSON: {e}")),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(unexpected(&format!("GET {path}"), &r)),
        }
    }

    /// `POST path` with no body, answered 200 with JSON: the parsed body (the admin
    /// endpoints' calls, such as `kura repair`'s).
    pub async fn post_json(&self, path: &str) -> Result<serde_json::Value, String> {
        let r = self.send(Method::POST, path, None, Bytes::new()).await?;
        match r.status {
            StatusCode::OK => serde_json::from_slice(&r.body)
                .map_err(|e| format!("POST {path}: the answer is not JSON: {e}")),
            _ => Err(unexpected(&format!("POST {path}"), &r)),
        }
    }

    /// Writes one delete marker at `timestamp`: a family marker (`qualifier` `None`: every
    /// column of `family` at or before it) or a column marker (every version of `family:qualifier`
    /// at or before it), as `DELETE /{t}/{row}/{column}/{ts}` with base64 keys (`e=b64`).
    pub async fn delete_marker(
        &self,
        table: &str,
        row: &[u8],
        family: &[u8],
        qualifier: Option<&[u8]>,
        timestamp: i64,
    ) -> Result<(), String> {
        let column = column_bytes(family, qualifier);
        let path = format!(
            "/{table}/{}/{}/{timestamp}?e=b64",
            b64_url(row),
            b64_url(&column)
        );
        let r = self.send(Method::DELETE, &path, None, Bytes::new()).await?;
        succeeded(&r, || format!("deleting in {table}"))
    }

    /// Deletes exactly the version of `family:qualifier` at `timestamp` (HBase's
    /// `Delete.addColumn`). The REST API reaches it only through `check=delete` with an extra
    /// cell, so the column's latest value is read first and given as the check (which then
    /// passes); a write in between makes the check fail (304) and the pair is retried.
    pub async fn delete_version(
        &self,
        table: &str,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
        timestamp: i64,
    ) -> Result<(), String> {
        use crate::rest::media::b64_encode;
        let column = column_bytes(family, Some(qualifier));
        let row64 = b64_url(row);
        for _ in 0..ATTEMPTS {
            let path = format!("/{table}/{row64}/{}?e=b64", b64_url(&column));
            let r = self.send(Method::GET, &path, None, Bytes::new()).await?;
            let current = match r.status {
                StatusCode::OK => parse_rows(&r.body)?
                    .into_iter()
                    .flat_map(|r| r.cells)
                    .next()
                    .map(|c| c.value)
                    .unwrap_or_default(),
                StatusCode::NOT_FOUND => Vec::new(),
                _ => return Err(unexpected(&format!("reading a column of {table}"), &r)),
            };
            let body = serde_json::json!({"Row": [{
                "key": b64_encode(row),
                "Cell": [
                    {"column": b64_encode(&column), "timestamp": timestamp, "$": ""},
                    {"column": b64_encode(&column), "$": b64_encode(&current)},
                ],
            }]});
            let r = self
                .send(
                    Method::PUT,
                    &format!("/{table}/{row64}?check=delete&e=b64"),
                    Some("application/json"),
                    Bytes::from(body.to_string()),
                )
                .await?;
            match r.status {
                StatusCode::OK => return Ok(()),
                StatusCode::NOT_MODIFIED => continue,
                _ => return Err(unexpected(&format!("deleting a version in {table}"), &r)),
            }
        }
        Err(format!(
            "deleting one version in {table}: the column kept changing under {ATTEMPTS} attempts"
        ))
    }

    /// The error for a 401/403: what the server said and how to pass a token.
    fn refused(&self, r: &Reply) -> String {
        let how = if self.authorization.is_some() {
            "the token sent was refused: check --token-file or KURA_TOKEN"
        } else {
            "it needs a bearer token: pass --token-file FILE or set KURA_TOKEN"
        };
        format!("{} answered HTTP {}: {how}", self.authority, r.status)
    }

    /// Deletes a scanner (best effort: an unknown one is already gone).
    pub async fn delete_scanner(&self, path: &str) {
        let _ = self.send(Method::DELETE, path, None, Bytes::new()).await;
    }
}

/// What a scanner reads besides its start row: HBase REST's `ScannerModel` fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanOptions {
    /// Row to stop before (exclusive); `None` = the table's end.
    pub end: Option<Vec<u8>>,
    /// Families (`cf`) or columns (`cf:q`) to read; empty = all.
    pub columns: Vec<Vec<u8>>,
    /// Oldest timestamp read (inclusive).
    pub start_time: Option<i64>,
    /// Timestamp read up to (exclusive).
    pub end_time: Option<i64>,
    /// Most versions per column.
    pub max_versions: u32,
    /// A filter in the REST API's JSON form (`{"type":"RowFilter",…}`).
    pub filter: Option<serde_json::Value>,
}

impl ScanOptions {
    /// The Scanner model fields besides `startRow` and `batch`, for
    /// [`HttpClient::open_scanner_with`].
    pub fn extra(&self) -> serde_json::Map<String, serde_json::Value> {
        use crate::rest::media::b64_encode;
        let mut m = serde_json::Map::new();
        m.insert(
            "maxVersions".into(),
            self.max_versions.clamp(1, i32::MAX as u32).into(),
        );
        if let Some(e) = &self.end {
            m.insert("endRow".into(), b64_encode(e).into());
        }
        if !self.columns.is_empty() {
            m.insert(
                "column".into(),
                self.columns.iter().map(|c| b64_encode(c)).collect(),
            );
        }
        if let Some(t) = self.start_time {
            m.insert("startTime".into(), t.into());
        }
        if let Some(t) = self.end_time {
            m.insert("endTime".into(), t.into());
        }
        if let Some(f) = &self.filter {
            m.insert("filter".into(), f.to_string().into());
        }
        m
    }
}

/// 401 or 403: the request lacks a valid token (retrying cannot help).
fn is_refused(status: StatusCode) -> bool {
    status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN
}

/// The TLS client settings, built once: ring, the system's root certificates (which honour
/// `SSL_CERT_FILE` and `SSL_CERT_DIR`) and Mozilla's.
fn tls_config() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
            let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
            Ok(Arc::new(
                ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("TLS settings: {e}"))?
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            ))
        })
        .clone()
}

/// `family` or `family:qualifier`.
fn column_bytes(family: &[u8], qualifier: Option<&[u8]>) -> Vec<u8> {
    let mut c = family.to_vec();
    if let Some(q) = qualifier {
        c.push(b':');
        c.extend_from_slice(q);
    }
    c
}

/// URL-safe base64 without padding, for keys in a path with `e=b64`.
fn b64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A JSON TableSchema as a descriptor, through the server's own schema rules.
pub fn parse_schema(table: &str, body: &[u8]) -> Result<TableDescriptor, String> {
    use serde_json::Value;
    let bad = |why: &str| format!("the schema of {table} is not a TableSchema: {why}");
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
    let Value::Object(obj) = v else {
        return Err(bad("not an object"));
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut schema = crate::rest::schema::SchemaIn::default();
    for (k, v) in obj {
        match k.as_str() {
            "name" | "IS_META" | "IS_ROOT" => {}
            "ColumnSchema" => {
                let list = match v {
                    Value::Array(a) => a,
                    other => vec![other],
                };
                for c in list {
                    let Value::Object(c) = c else {
                        return Err(bad("a ColumnSchema is not an object"));
                    };
                    let mut name = None;
                    let mut attrs = std::collections::BTreeMap::new();
                    for (ck, cv) in c {
                        if ck == "name" {
                            name = Some(text(&cv));
                        } else {
                            attrs.insert(ck, text(&cv));
                        }
                    }
                    schema
                        .families
                        .push((name.ok_or_else(|| bad("a family has no name"))?, attrs));
                }
            }
            _ => {
                schema.attrs.insert(k, text(&v));
            }
        }
    }
    crate::rest::schema::descriptor_from(table, schema).map_err(|e| bad(&e.to_string()))
}

/// A JSON CellSet as rows (columns split at their first `:`).
fn parse_rows(body: &[u8]) -> Result<Vec<Row>, String> {
    let rows = crate::rest::cellset::parse_cellset(crate::rest::media::Repr::Json, body)
        .map_err(|e| format!("a scanner answer is not a CellSet: {e}"))?;
    rows.into_iter()
        .map(|r| {
            let key = r.key.ok_or("a scanner answer has a row without a key")?;
            let cells = r
                .cells
                .into_iter()
                .map(|c| {
                    let column = c
                        .column
                        .ok_or("a scanner answer has a cell without a column")?;
                    let colon = column
                        .iter()
                        .position(|&b| b == b':')
                        .ok_or("a scanner answer has a column without ':'")?;
                    Ok(Cell {
                        family: column[..colon].to_vec(),
                        qualifier: column[colon + 1..].to_vec(),
                        timestamp: c
                            .timestamp
                            .ok_or("a scanner answer has a cell without a timestamp")?,
                        value: c
                            .value
                            .ok_or("a scanner answer has a cell without a value")?,
                    })
                })
                .collect::<Result<Vec<Cell>, &str>>()?;
            Ok(Row { key, cells })
        })
        .collect::<Result<Vec<Row>, &str>>()
        .map_err(str::to_string)
}

/// The admin requests `kura backup` makes (src/backup/), over the same connection.
impl HttpClient {
    /// One request to an admin endpoint; retried (dropped connection, 503) only if `retry`,
    /// which the caller sets for requests that may be repeated.
    pub(crate) async fn admin(
        &self,
        method: Method,
        path: &str,
        retry: bool,
    ) -> Result<Reply, String> {
        let r = if retry {
            self.send(method, path, None, Bytes::new()).await?
        } else {
            self.send_once(&method, path, None, Bytes::new()).await?
        };
        if is_refused(r.status) {
            return Err(self.refused(&r));
        }
        Ok(r)
    }

    /// `GET path` (from byte `from` on, with `Range: bytes=from-` if `from > 0`), handing the
    /// body to `sink` frame by frame as it arrives: memory holds one frame, whatever the size.
    /// Answers the status; a non-2xx answer is an error naming it.
    pub(crate) async fn download(
        &self,
        path: &str,
        from: u64,
        sink: &mut (dyn FnMut(&[u8]) -> Result<(), String> + Send),
    ) -> Result<StatusCode, String> {
        let mut guard = self.conn.lock().await;
        let mut sender = match guard.take() {
            Some(s) if !s.is_closed() => s,
            _ => self.connect().await?,
        };
        let mut req = Request::builder()
            .method(Method::GET)
            .uri(format!("{}{path}", self.prefix))
            .header(header::HOST, &self.authority);
        if from > 0 {
            req = req.header(header::RANGE, format!("bytes={from}-"));
        }
        if let Some(auth) = &self.authorization {
            req = req.header(header::AUTHORIZATION, auth.clone());
        }
        let req = req
            .body(Full::new(Bytes::new()))
            .map_err(|e| format!("GET {path}: {e}"))?;
        let failed = |e: &dyn std::fmt::Display| format!("GET {path} on {}: {e}", self.authority);
        sender.ready().await.map_err(|e| failed(&e))?;
        let resp = sender.send_request(req).await.map_err(|e| failed(&e))?;
        let status = resp.status();
        let mut body = resp.into_body();
        if !status.is_success() {
            let body = Limited::new(body, 1 << 20)
                .collect()
                .await
                .map_err(|e| failed(&e))?
                .to_bytes();
            *guard = Some(sender);
            let r = Reply {
                status,
                location: None,
                body,
            };
            if is_refused(status) {
                return Err(self.refused(&r));
            }
            return Err(unexpected(&format!("GET {path}"), &r));
        }
        if from > 0 && status != StatusCode::PARTIAL_CONTENT {
            // The whole file again: appending it would corrupt the part already there.
            return Err(format!(
                "GET {path}: asked for bytes {from}- and got HTTP {status}, not 206"
            ));
        }
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| failed(&e))?;
            if let Some(data) = frame.data_ref() {
                sink(data)?;
            }
        }
        *guard = Some(sender);
        Ok(status)
    }
}

/// `Ok` for a 2xx answer, else the error naming what was being done (built only then).
fn succeeded(r: &Reply, what: impl FnOnce() -> String) -> Result<(), String> {
    if r.status.is_success() {
        Ok(())
    } else {
        Err(unexpected(&what(), r))
    }
}
