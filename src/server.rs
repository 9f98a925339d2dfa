//! The pieces `main` assembles into a server, public so that tests use exactly the same ones:
//! bearer-token authentication, panic catching, and the `HttpServer` builder.
//!
//! # Invariants
//! 1. When a token is configured, every request but `GET /healthz` and the console's static
//!    files (`GET /ui`, `GET /ui/...`, which hold no data; the console then asks for the token)
//!    must carry `Authorization: Bearer <token>`; the comparison takes the same time whatever
//!    the guess.
//! 2. A handler that panics still answers: 500 with a plain-text body, never a dropped connection.
//! 3. The request head must arrive within the header timeout (slowloris).
//! 4. A request head (request line and headers) over [`MAX_REQUEST_HEAD`] bytes is answered 431
//!    before anything else looks at it, and its connection is closed (its body is not read).

use crate::config::Config;
use crate::error::ApiError;
use crate::state::StateSource;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::Extensions;
use actix_web::dev::{Server, ServiceRequest, ServiceResponse};
use actix_web::http::ConnectionType;
use actix_web::middleware::{from_fn, Next};
use actix_web::{web, App, Error, HttpServer, ResponseError};
use futures::FutureExt;
use std::cell::OnceCell;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;

/// Longest time spent reading the body of a refused request; past it the connection is closed
/// instead (a client that stalls, or trickles its body in, holds nothing longer).
const UNAUTHORIZED_DRAIN_SECS: u64 = 2;
/// Most body bytes read (and dropped) from a refused request to keep its connection usable.
const UNAUTHORIZED_DRAIN_LIMIT: usize = 64 << 10;

/// Largest request head (request line and headers, counted as sent on the wire) answered:
/// 64 KiB, the request header size HBase's REST server gives Jetty (`RESTServer.java`,
/// `DEFAULT_HTTP_MAX_HEADER_SIZE`). actix-http itself only refuses heads over 128 KiB.
pub const MAX_REQUEST_HEAD: usize = 64 << 10;

/// The size of a request's head as sent: `METHOD URI HTTP/x.y\r\n` and `Name: value\r\n` each.
fn head_size(req: &ServiceRequest) -> usize {
    let line = req.method().as_str().len() + req.uri().to_string().len() + 12;
    req.headers().iter().fold(line, |n, (name, value)| {
        n + name.as_str().len() + value.len() + 4
    })
}

/// Middleware: 431 Request Header Fields Too Large for a head over [`MAX_REQUEST_HEAD`].
pub async fn refuse_large_head(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let size = head_size(&req);
    if size > MAX_REQUEST_HEAD {
        let (http_req, _) = req.into_parts();
        let err = ApiError::HeaderFieldsTooLarge(format!(
            "the request line and headers take {size} bytes; at most {MAX_REQUEST_HEAD} are \
             accepted (send large values in the body)"
        ));
        let mut resp = refusal(http_req.path(), err);
        resp.head_mut().set_connection_type(ConnectionType::Close);
        return Ok(ServiceResponse::new(http_req, resp));
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// The bearer token clients must present, registered as `web::Data<AuthToken>`.
/// Absent data or `AuthToken(None)` means authentication is off.
#[derive(Clone, Debug, Default)]
pub struct AuthToken(pub Option<String>);

impl AuthToken {
    /// True if the `Authorization` header value carries this token (constant-time compare).
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(expected) = &self.0 else { return true };
        let Some(value) = authorization else {
            return false;
        };
        // The scheme is case-insensitive (RFC 9110 §11.1): `bearer` and `BEARER` as well.
        let scheme = b"bearer ";
        if value.len() < scheme.len() || !value[..scheme.len()].eq_ignore_ascii_case(scheme) {
            return false;
        }
        let presented = &value[scheme.len()..];
        // `ct_eq` on slices of unequal length returns false without comparing contents; the
        // length of the token is not a secret worth hiding.
        bool::from(presented.trim_ascii().ct_eq(expected.as_bytes()))
    }
}

/// Requests admitted without a token: liveness and the console's static files.
fn is_public(req: &ServiceRequest) -> bool {
    let path = req.path();
    path == "/healthz"
        || (req.method() == actix_web::http::Method::GET
            && (path == "/ui" || path.starts_with("/ui/")))
}

/// Middleware: 401 with `WWW-Authenticate: Bearer` unless the request carries the token.
pub async fn require_bearer(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let admitted = match req.app_data::<web::Data<AuthToken>>() {
        None => true,
        Some(token) => {
            is_public(&req)
                || token.admits(
                    req.headers()
                        .get(actix_web::http::header::AUTHORIZATION)
                        .map(|v| v.as_bytes()),
                )
        }
    };
    if !admitted {
        // Drain a small body so the connection can carry the client's next request; a large
        // one is not read for an unauthenticated client: the connection is closed instead.
        let (http_req, mut payload) = req.into_parts();
        let mut drained = 0usize;
        let mut whole = true;
        // An unauthenticated client that stalls mid-body is not waited for, nor one that
        // trickles it in: the whole drain has one deadline.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(UNAUTHORIZED_DRAIN_SECS);
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                whole = false;
                break;
            }
            match crate::rest::media::next_chunk(&mut payload, left).await {
                Ok(None) => break,
                Ok(Some(Ok(bytes))) if drained + bytes.len() <= UNAUTHORIZED_DRAIN_LIMIT => {
                    drained += bytes.len();
                }
                _ => {
                    whole = false;
                    break;
                }
            }
        }
        let mut resp = refusal(http_req.path(), ApiError::Unauthorized);
        if !whole {
            resp.head_mut().set_connection_type(ConnectionType::Close);
        }
        return Ok(ServiceResponse::new(http_req, resp));
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// The process's open-file limit (soft), raised first to its hard limit: every region holds a
/// log and its segments open, every connection a socket, and the usual soft limit (1024) is
/// low for both. Connections are then held to a share of it ([`Config::connection_limit`]):
/// a flood of connections that took every descriptor made the next flush fail and poison
/// its region.
pub fn fd_limit() -> u64 {
    #[cfg(unix)]
    {
        use rustix::process::{getrlimit, setrlimit, Resource};
        let mut limit = getrlimit(Resource::Nofile);
        if let (Some(soft), hard) = (limit.current, limit.maximum) {
            let want = hard.unwrap_or(u64::MAX).min(1 << 20);
            if soft < want {
                limit.current = Some(want);
                if let Err(e) = setrlimit(Resource::Nofile, limit) {
                    tracing::warn!("could not raise the open-file limit from {soft}: {e}");
                }
            }
        }
        getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
    }
    #[cfg(not(unix))]
    {
        u64::MAX
    }
}

/// The answer to a request the server's guards refuse (no token, another origin, another
/// host): the REST API's plain-text error, or under `/admin/` and `/apps/` the JSON error body
/// their contracts promise for every answer (`{"error": {"code", "message"}}`), with the same
/// status and headers.
fn refusal(path: &str, err: ApiError) -> actix_web::HttpResponse {
    let mut resp = err.error_response();
    let json_paths = ["/admin", "/apps"];
    if json_paths
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
    {
        let code = match err {
            ApiError::Unauthorized => "unauthorized",
            ApiError::HeaderFieldsTooLarge(_) => "header_too_large",
            _ => "forbidden",
        };
        let body = serde_json::json!({"error": {"code": code, "message": err.to_string()}});
        resp.headers_mut().insert(
            actix_web::http::header::CONTENT_TYPE,
            actix_web::http::header::HeaderValue::from_static("application/json"),
        );
        resp = resp.set_body(BoxBody::new(body.to_string()));
    }
    resp
}

/// Whether an unsafe request (`POST`, `PUT`, `DELETE`, ...) comes from a web page of another
/// origin: its `Origin` header names a host and port other than the `Host` it was sent to.
/// Requests without `Origin` (every HTTP client library, curl, the HBase clients) pass, as do
/// `GET`/`HEAD`/`OPTIONS` (no side effects).
fn is_cross_origin_write(req: &ServiceRequest) -> bool {
    use actix_web::http::{header, Method};
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return false;
    }
    let Some(origin) = req.headers().get(header::ORIGIN) else {
        return false;
    };
    let host = req.headers().get(header::HOST).map(|h| h.as_bytes());
    // `Origin` is `scheme://host[:port]` (or `null`); compare its authority with `Host`.
    let authority = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest.as_bytes());
    match (authority, host) {
        (Some(a), Some(h)) => !a.eq_ignore_ascii_case(h),
        _ => true,
    }
}

/// Middleware: 403 for a write sent by a web page of another origin (cross-site request
/// forgery: a page the user visits posting to the Kura on their loopback address, which has no
/// token by default). The console's own requests are same-origin.
pub async fn refuse_cross_origin(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    if is_cross_origin_write(&req) {
        let origin = req
            .headers()
            .get(actix_web::http::header::ORIGIN)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?")
            .to_string();
        let resp = refusal(
            req.path(),
            ApiError::Forbidden(format!(
                "cross-origin write refused: the request's Origin {origin:?} is not this server; \
                 Kura accepts writes from its own pages and from clients that send no Origin"
            )),
        );
        let (http_req, _) = req.into_parts();
        let mut resp = resp;
        resp.head_mut().set_connection_type(ConnectionType::Close);
        return Ok(ServiceResponse::new(http_req, resp));
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// Whether a `Host` header value names this machine's loopback interface: `localhost` or a
/// `*.localhost` name (RFC 6761: never resolved through DNS), an IPv4 address in 127.0.0.0/8,
/// or `[::1]`, with any port.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        match rest.split_once(']') {
            Some((v6, _)) => {
                return v6
                    .parse::<std::net::Ipv6Addr>()
                    .is_ok_and(|a| a.is_loopback())
            }
            None => return false,
        }
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback())
}

/// Middleware (loopback-only servers, the default): 403 for a request whose `Host` is not a
/// loopback name. A web page on a name its attacker re-points to 127.0.0.1 (DNS rebinding)
/// is same-origin to the browser, so `Origin` checks and CORS do not stop it from reading and
/// writing the token-less Kura; the `Host` it sends still names the attacker's domain.
/// Requests without `Host` (HTTP/1.0) pass. `--allow-remote` turns the check off: remote
/// clients address the server by names of their own, and the token protects it there.
pub async fn refuse_foreign_host(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let host = req
        .headers()
        .get(actix_web::http::header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{FFFD}").to_string());
    if let Some(host) = host.filter(|h| !is_loopback_host(h)) {
        let resp = refusal(
            req.path(),
            ApiError::Forbidden(format!(
                "Host {host:?} is not a loopback name: this server listens on its loopback \
                 address only and answers requests addressed to localhost or 127.0.0.1 (a guard \
                 against DNS rebinding); start it with --allow-remote (and a token) to serve \
                 other names"
            )),
        );
        let (http_req, _) = req.into_parts();
        let mut resp = resp;
        resp.head_mut().set_connection_type(ConnectionType::Close);
        return Ok(ServiceResponse::new(http_req, resp));
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// Middleware: turns a panic inside the handler into a 500 answer.
///
/// It must not keep a clone of the `HttpRequest` while the inner service runs: actix's router
/// takes the request's path parameters through `Rc::get_mut`, which panics on a shared request.
/// So a panic is answered with an `Err`, which actix renders through `ApiError`'s
/// `ResponseError` implementation.
pub async fn catch_panic(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let path = req.path().to_string();
    match AssertUnwindSafe(async move { next.call(req).await })
        .catch_unwind()
        .await
    {
        Ok(Ok(resp)) => Ok(resp.map_into_boxed_body()),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            tracing::error!(%path, "handler panicked; answering 500");
            Err(ApiError::Internal("the handler panicked".into()).into())
        }
    }
}

/// One worker's view of the state: the source, and the data container holding the state that
/// the worker's first request builds once the state is set.
struct WorkerState {
    source: Arc<StateSource>,
    container: OnceCell<Rc<Extensions>>,
}

/// Registers the state as app data on the request (waiting for it while the store opens).
async fn provide_state(
    worker: Rc<WorkerState>,
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let data = match worker.container.get() {
        Some(data) => Rc::clone(data),
        None => {
            let mut data = Extensions::new();
            data.insert(worker.source.wait().await);
            Rc::clone(worker.container.get_or_init(|| Rc::new(data)))
        }
    };
    req.add_data_container(data);
    next.call(req).await
}

/// Builds the server exactly as `main` runs it, bound; it starts its workers when first polled.
/// Handlers find the [`AppState`](crate::state::AppState) through `state` (requests wait until
/// it is set). With `register_arbiters`, each worker records its arbiter in `state` as it
/// starts, for `Kura::start_on` (thread per core). Signals are left to the caller, which must call
/// `Kura::shutdown` before the workers stop (thread per core) or after the server stops.
pub fn build_server(
    config: &Config,
    state: Arc<StateSource>,
    register_arbiters: bool,
    token: Option<String>,
) -> std::io::Result<Server> {
    let addrs = config
        .validate()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let token = web::Data::new(AuthToken(token));
    let max_body = config.max_body;
    let loopback_only = !config.allow_remote;
    let metrics = Arc::clone(&state.ops().metrics);
    let mut server = HttpServer::new(move || {
        if register_arbiters {
            state.register_current_arbiter();
        }
        let worker = Rc::new(WorkerState {
            source: Arc::clone(&state),
            container: OnceCell::new(),
        });
        App::new()
            .app_data(token.clone())
            .app_data(web::PayloadConfig::new(max_body))
            .app_data(web::JsonConfig::default().limit(max_body))
            // Innermost: every handler finds `web::Data<AppState>`.
            .wrap(from_fn(move |req, next| {
                provide_state(Rc::clone(&worker), req, next)
            }))
            .wrap(actix_web::middleware::Compress::default())
            .wrap(from_fn(refuse_cross_origin))
            .wrap(actix_web::middleware::Condition::new(
                loopback_only,
                from_fn(refuse_foreign_host),
            ))
            .wrap(from_fn(require_bearer))
            .wrap(from_fn(refuse_large_head))
            .wrap(from_fn(catch_panic))
            // Outermost, so that 401s and panics are counted too.
            .wrap(crate::ops::metrics::MetricsMiddleware::new(Arc::clone(
                &metrics,
            )))
            .configure(crate::configure)
    })
    .client_request_timeout(Duration::from_secs(config.header_timeout_secs.max(1)))
    // actix leaves Nagle on by default: a response written as head + body then waits for the
    // client's delayed ACK (~40 ms on Linux) whenever it spans more than one segment.
    .tcp_nodelay(true)
    .shutdown_timeout(10)
    .disable_signals();
    let workers = config.worker_threads();
    let connections = config.connection_limit(fd_limit());
    server = server
        .workers(workers)
        .max_connections(connections.div_ceil(workers).max(1));
    Ok(server.bind(&addrs[..])?.run())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_the_loopback_names_and_addresses_with_any_port() {
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "localhost.",
            "kura.localhost:1",
            "127.0.0.1",
            "127.1.2.3:8080",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "rebind.attacker.example:8080",
            "localhost.attacker.example",
            "127.0.0.1.attacker.example",
            "10.0.0.1:8080",
            "[::2]:80",
            "[::1",
            "x",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn token_must_match_exactly() {
        let t = AuthToken(Some("abc".into()));
        assert!(t.admits(Some(b"Bearer abc")));
        assert!(!t.admits(Some(b"Bearer abd")));
        assert!(!t.admits(Some(b"Bearer ab")));
        assert!(!t.admits(Some(b"Basic abc")));
        assert!(!t.admits(None));
        assert!(AuthToken(None).admits(None));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive_but_the_token_is_not() {
        let t = AuthToken(Some("abc".into()));
        assert!(t.admits(Some(b"bearer abc")));
        assert!(t.admits(Some(b"BEARER abc")));
        assert!(!t.admits(Some(b"bearer ABC")));
        assert!(!t.admits(Some(b"bearer")));
        assert!(!t.admits(Some(b"bearerabc")));
    }
}
