//! Operating Kura: liveness, metrics, admin operations and the web console.
//!
//! # Layout
//! - `GET /healthz`: readiness, `200 ok` as plain text once every region has opened, `503`
//!   from the start of a shutdown. Touches nothing else: it is the load generator's HTTP
//!   ceiling baseline.
//! - [`metrics`]: `GET /metrics` in the Prometheus text format 0.0.4, and
//!   [`metrics::MetricsMiddleware`], which the server wraps its App with to count and time
//!   every request by endpoint kind and operation.
//! - [`admin`]: JSON operations under `/admin/` (documented in `docs/ADMIN.md`):
//!   - `GET  /admin/tables`: every table with its families, salting and region count;
//!   - `GET  /admin/tables/{t}`: one table, with its regions;
//!   - `GET  /admin/tables/{t}/regions`: region stats (bucket range, cells, bytes, log size,
//!     reads, writes, flushes, compactions, fsyncs, group-commit batch size);
//!   - `POST /admin/tables/{t}/flush`: flush every region's memtable to a segment;
//!   - `POST /admin/tables/{t}/compact?major=true|false`: compact every region (major drops
//!     masked, expired and excess versions);
//!   - `POST /admin/tables/{t}/regions/{id}/split[?bucket=N | ?by=middle|size|load]`: split a
//!     region at bucket `N` (the first bucket of the upper half), in the middle, or where the
//!     writes (size) or reads and writes (load) its buckets received halve;
//!   - `GET  /admin/tables/{t}/heatmap`: reads and writes per salt bucket per 5 s interval over
//!     the last 10 minutes (a time × bucket matrix);
//!   - `POST /admin/backups`, `GET|DELETE /admin/backups/{id}`,
//!     `GET /admin/backups/{id}/files/{path}`: online backups ([`backup`]).
//!
//!   Errors are `{"error":{"code","message"}}`: 404 unknown table or region, 400 bad input,
//!   503 when the store cannot serve now.
//! - [`heatmap`]: the per-bucket activity sampler behind the heatmap.
//! - [`console`]: the web console's static files, embedded in the binary, at `/ui/`
//!   (`/ui` redirects there).
//!
//! # Invariants
//! 1. Routes here are registered before the REST API's catch-all table routes, so the reserved
//!    first segments `healthz`, `metrics`, `admin` and `ui` never reach it.
//! 2. Nothing here holds table data; the only state is counters and the heatmap ring buffer,
//!    both bounded in size whatever the traffic.
//! 3. That state belongs to one server ([`ServerOps`] and the heatmap, in its
//!    [`AppState`](crate::state::AppState)); nothing here lives in a process global.

pub mod admin;
pub mod backup;
pub mod console;
pub mod heatmap;
pub mod metrics;

use actix_web::{web, HttpResponse};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What one server's operations endpoints keep: its shutting-down flag and its metrics.
#[derive(Debug)]
pub struct ServerOps {
    /// Set once the server has begun to shut down: `/healthz` then answers 503, so that a load
    /// balancer stops sending requests the closing regions would refuse.
    shutting_down: AtomicBool,
    /// What `/metrics` reports for this server; the server's [`metrics::MetricsMiddleware`]
    /// records into the same one.
    pub metrics: Arc<metrics::ServerMetrics>,
}

impl ServerOps {
    /// A serving server's state, with `scanner_count` asked for `kura_scanners_open`.
    pub fn new(scanner_count: metrics::ScannerCount) -> ServerOps {
        ServerOps {
            shutting_down: AtomicBool::new(false),
            metrics: Arc::new(metrics::ServerMetrics::new(scanner_count)),
        }
    }

    /// Marks the server as shutting down (see [`healthz`]).
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
    }

    /// Whether [`ServerOps::begin_shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }
}

/// `GET /healthz`: as cheap as a handler can be. 200 `ok` once the server serves (requests
/// that arrive before, this one included, wait until every region has opened), 503
/// `shutting down` from the start of a shutdown.
pub async fn healthz(state: web::Data<crate::state::AppState>) -> HttpResponse {
    if state.ops.is_shutting_down() {
        return HttpResponse::ServiceUnavailable()
            .content_type("text/plain; charset=utf-8")
            .body("shutting down");
    }
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body("ok")
}

/// 405 with `Allow: GET, HEAD`: another method on a read-only operations path (which must not
/// fall through to the REST API's `/{table}` routes).
async fn get_only() -> Result<HttpResponse, crate::error::ApiError> {
    Err(crate::error::ApiError::MethodNotAllowed("GET, HEAD"))
}

/// A read-only operations path: `handler` for GET and HEAD (load balancers probe with either),
/// 405 for the rest.
pub(crate) fn read_only<F, Args>(path: &str, handler: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    web::resource(path)
        .route(crate::apps::request::get_or_head().to(handler))
        .default_service(web::to(get_only))
}

/// Registers this module's routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(read_only("/healthz", healthz))
        .service(read_only("/metrics", metrics::metrics));
    admin::configure(cfg);
    console::configure(cfg);
}
