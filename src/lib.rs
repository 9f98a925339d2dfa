//! Kura's HTTP server: the HBase REST-compatible API, the built-in applications and the
//! operations endpoints, all over the [`kura_backend::Store`] handle, whichever backend it runs on.
//!
//! # Layout
//! - [`config`]: command-line and environment configuration (clap).
//! - [`copy`]: `kura copy`, streaming a table between REST endpoints and backends.
//! - [`backup`]: `kura backup` and `kura restore`, online backups of the embedded backend.
//! - [`transfer`]: `kura export` and `kura import`, HBase Export files in and out.
//! - [`repair`]: `kura repair`, fixing what a crash left between the applications' rows
//!   (through `POST /admin/repair`, [`apps::repair`]).
//! - [`state`]: [`state::AppState`], what every handler receives.
//! - [`error`]: [`error::ApiError`], the one error type of the HTTP edge.
//! - [`rest`]: the HBase REST ("Stargate") surface: rowspecs, cell sets, scanners, schemas, filters.
//! - [`apps`]: the four applications under `/apps/`.
//! - [`ops`]: `/healthz`, `/metrics`, `/admin/`, the web console under `/ui/`.
//! - [`server`]: authentication, panic catching and the `HttpServer` builder `main` runs.
//!
//! # Layering rule
//! Handlers hold no data: every read and write goes through [`kura_backend::Store`]: the HTTP layer never names a backend.

pub mod apps;
pub mod backup;
pub mod compress;
pub mod config;
pub mod copy;
pub mod error;
pub mod guard;
pub mod ops;
pub mod repair;
pub mod rest;
pub mod server;
pub mod state;
pub mod transfer;
pub mod verify;

use actix_web::web;

/// First path segments that no table may take.
pub const RESERVED_NAMES: &[&str] = &[
    "version",
    "status",
    "namespaces",
    "apps",
    "admin",
    "metrics",
    "healthz",
    "ui",
];

/// Registers every route. The server and the tests build the same `App` with this:
/// `App::new().app_data(state).configure(kura::configure)`.
///
/// Fixed prefixes (`/healthz`, `/metrics`, `/admin`, `/ui`, `/apps`) are
/// registered as resources; the REST API is the default service that gets every other path.
pub fn configure(cfg: &mut web::ServiceConfig) {
    ops::configure(cfg);
    apps::configure(cfg);
    rest::configure(cfg);
}
