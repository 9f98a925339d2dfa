//! The server's guards, as one middleware ([`Guard`]): what every request passes before a
//! handler sees it, in this order:
//!
//! 1. A request head (request line and headers) over [`MAX_REQUEST_HEAD`] bytes is answered 431
//!    and its connection closed (its body is not read).
//! 2. When a token is configured, every request but `GET /healthz` and the console's static
//!    files (`GET /ui`, `GET /ui/...`, which hold no data; the console then asks for the token)
//!    must carry `Authorization: Bearer <token>`; the comparison takes the same time whatever
//!    the guess. A refused request's small body is drained so its connection can go on.
//! 3. On a loopback-only server (the default) a `Host` that is not a loopback name is a 403
//!    (DNS rebinding).
//! 4. A write whose `Origin` is another site is a 403 (cross-site request forgery).
//! 5. A handler that panics still answers: 500, never a dropped connection.
//!
//! One middleware rather than one per check because every layer of actix-web's `from_fn`
//! boxes a future and the next service per request; a request the guards admit here costs
//! the checks themselves and no allocation.
//!
//! # Invariants
//! 1. A refused request never reaches a handler: nothing is read from or written to the store.
//! 2. The guards keep no per-request state beyond the request's URI (for the panic log).

use crate::error::ApiError;
use actix_web::body::{BoxBody, EitherBody, MessageBody};
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::{header, ConnectionType, Method, Uri};
use actix_web::{Error, ResponseError};
use futures::future::{ready, CatchUnwind, FutureExt, LocalBoxFuture, Ready};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
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
    let uri = req.uri();
    let mut uri_len = uri.path_and_query().map_or(1, |p| p.as_str().len());
    if let Some(authority) = uri.authority() {
        uri_len += authority.as_str().len() + uri.scheme_str().map_or(0, |s| s.len() + 3);
    }
    let line = req.method().as_str().len() + uri_len + 12;
    req.headers().iter().fold(line, |n, (name, value)| {
        n + name.as_str().len() + value.len() + 4
    })
}

/// The bearer token clients must present; `AuthToken(None)` means authentication is off.
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
        || (req.method() == Method::GET && (path == "/ui" || path.starts_with("/ui/")))
}

/// The answer to a request the guards refuse (no token, another origin, another host, a head
/// too large): the REST API's plain-text error, or under `/admin/` and `/apps/` the JSON error
/// body their contracts promise for every answer (`{"error": {"code", "message"}}`), with the
/// same status and headers.
fn refusal(path: &str, err: ApiError) -> actix_web::HttpResponse {
    let mut resp = err.error_response();
    let json_paths = ["/admin", "/apps"];
    if json_paths.iter().any(|p| {
        path.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }) {
        let code = match err {
            ApiError::Unauthorized => "unauthorized",
            ApiError::HeaderFieldsTooLarge(_) => "header_too_large",
            _ => "forbidden",
        };
        let body = serde_json::json!({"error": {"code": code, "message": err.to_string()}});
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
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
    let name = name.trim_end_matches('.').as_bytes();
    let suffix = b".localhost";
    name.eq_ignore_ascii_case(b"localhost")
        || (name.len() > suffix.len()
            && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix))
        || std::str::from_utf8(name)
            .ok()
            .and_then(|n| n.parse::<std::net::Ipv4Addr>().ok())
            .is_some_and(|a| a.is_loopback())
}

/// 431 for a head over [`MAX_REQUEST_HEAD`].
fn head_too_large(req: &ServiceRequest) -> Option<ApiError> {
    let size = head_size(req);
    (size > MAX_REQUEST_HEAD).then(|| {
        ApiError::HeaderFieldsTooLarge(format!(
            "the request line and headers take {size} bytes; at most {MAX_REQUEST_HEAD} are \
             accepted (send large values in the body)"
        ))
    })
}

/// 403 for a request whose `Host` is not a loopback name (loopback-only servers). A web page
/// on a name its attacker re-points to 127.0.0.1 (DNS rebinding) is same-origin to the
/// browser, so `Origin` checks and CORS do not stop it from reading and writing the token-less
/// Kura; the `Host` it sends still names the attacker's domain. Requests without `Host`
/// (HTTP/1.0) pass. `--allow-remote` turns the check off: remote clients address the server by
/// names of their own, and the token protects it there.
fn foreign_host(req: &ServiceRequest) -> Option<ApiError> {
    let host = req.headers().get(header::HOST)?;
    let host = host.to_str().unwrap_or("\u{FFFD}");
    (!is_loopback_host(host)).then(|| {
        ApiError::Forbidden(format!(
            "Host {host:?} is not a loopback name: this server listens on its loopback \
             address only and answers requests addressed to localhost or 127.0.0.1 (a guard \
             against DNS rebinding); start it with --allow-remote (and a token) to serve \
             other names"
        ))
    })
}

/// 403 for a write sent by a web page of another origin (cross-site request forgery: a page
/// the user visits posting to the Kura on their loopback address, which has no token by
/// default). The console's own requests are same-origin.
fn cross_origin(req: &ServiceRequest) -> Option<ApiError> {
    is_cross_origin_write(req).then(|| {
        let origin = req
            .headers()
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?");
        ApiError::Forbidden(format!(
            "cross-origin write refused: the request's Origin {origin:?} is not this server; \
             Kura accepts writes from its own pages and from clients that send no Origin"
        ))
    })
}

/// The 401 for a request without the token. A small body is drained so the connection can
/// carry the client's next request; a large one is not read for an unauthenticated client,
/// nor one that stalls or trickles in (the whole drain has one deadline): the connection is
/// closed instead.
async fn unauthorized(req: ServiceRequest) -> ServiceResponse<BoxBody> {
    let (http_req, mut payload) = req.into_parts();
    let mut drained = 0usize;
    let mut whole = true;
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
    ServiceResponse::new(http_req, resp)
}

/// The guards of the module doc as one middleware: `App::new().wrap(Guard::new(token, true))`.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    token: AuthToken,
    loopback_only: bool,
}

impl Guard {
    /// Guards requiring `token` (none if `AuthToken(None)`); with `loopback_only`, also refusing
    /// a `Host` that is not a loopback name.
    pub fn new(token: AuthToken, loopback_only: bool) -> Guard {
        Guard {
            token,
            loopback_only,
        }
    }
}

impl<S, B> Transform<S, ServiceRequest> for Guard
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = Error;
    type Transform = GuardService<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(GuardService {
            service,
            guard: self.clone(),
        }))
    }
}

/// The service [`Guard`] builds.
pub struct GuardService<S> {
    service: S,
    guard: Guard,
}

impl<S, B> Service<ServiceRequest> for GuardService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = Error;
    type Future = GuardFuture<S::Future>;

    actix_web::dev::forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let refuse = |req: ServiceRequest, err: ApiError| {
            let (http_req, _) = req.into_parts();
            let mut resp = refusal(http_req.path(), err);
            resp.head_mut().set_connection_type(ConnectionType::Close);
            GuardFuture::Answered {
                resp: Some(ServiceResponse::new(http_req, resp)),
            }
        };
        if let Some(err) = head_too_large(&req) {
            return refuse(req, err);
        }
        let admitted = is_public(&req)
            || self.guard.token.admits(
                req.headers()
                    .get(header::AUTHORIZATION)
                    .map(|v| v.as_bytes()),
            );
        if !admitted {
            return GuardFuture::Refusing {
                fut: Box::pin(unauthorized(req)),
            };
        }
        let foreign = if self.guard.loopback_only {
            foreign_host(&req)
        } else {
            None
        };
        if let Some(err) = foreign.or_else(|| cross_origin(&req)) {
            return refuse(req, err);
        }
        // A clone of the `Uri` (reference-counted bytes) for the panic log. Not of the
        // `HttpRequest`: actix's router takes the request's path parameters through
        // `Rc::get_mut`, which panics on a shared request.
        let uri = req.uri().clone();
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.service.call(req))) {
            Ok(fut) => GuardFuture::Serving {
                fut: AssertUnwindSafe(fut).catch_unwind(),
                uri,
            },
            Err(_) => GuardFuture::Panicked { uri: Some(uri) },
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of a guarded request: the handler's (with panics caught), or a refusal.
    #[project = GuardProj]
    pub enum GuardFuture<F> {
        /// Admitted: the inner service's future.
        Serving { #[pin] fut: CatchUnwind<AssertUnwindSafe<F>>, uri: Uri },
        /// Refused at once.
        Answered { resp: Option<ServiceResponse<BoxBody>> },
        /// Refused for want of a token, draining the body first.
        Refusing { fut: LocalBoxFuture<'static, ServiceResponse<BoxBody>> },
        /// The inner service panicked before it returned a future.
        Panicked { uri: Option<Uri> },
    }
}

/// The answer to a panic: an `Err`, which actix renders through `ApiError`'s
/// `ResponseError` implementation (a 500 with a plain-text body).
fn panicked(uri: &Uri) -> Error {
    tracing::error!(path = uri.path(), "handler panicked; answering 500");
    ApiError::Internal("the handler panicked".into()).into()
}

impl<F, B> Future for GuardFuture<F>
where
    F: Future<Output = Result<ServiceResponse<B>, Error>>,
    B: MessageBody,
{
    type Output = Result<ServiceResponse<EitherBody<B>>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            GuardProj::Serving { fut, uri } => match fut.poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(res)) => Poll::Ready(res.map(|r| r.map_into_left_body())),
                Poll::Ready(Err(_)) => Poll::Ready(Err(panicked(uri))),
            },
            GuardProj::Answered { resp } => match resp.take() {
                Some(resp) => Poll::Ready(Ok(resp.map_into_right_body())),
                None => Poll::Pending,
            },
            GuardProj::Refusing { fut } => fut
                .as_mut()
                .poll(cx)
                .map(|resp| Ok(resp.map_into_right_body())),
            GuardProj::Panicked { uri } => match uri.take() {
                Some(uri) => Poll::Ready(Err(panicked(&uri))),
                None => Poll::Pending,
            },
        }
    }
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
