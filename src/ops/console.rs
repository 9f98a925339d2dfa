//! The web console: static files compiled into the binary and served under `/ui/`.
//!
//! # Invariants
//! 1. Nothing is fetched from outside the server: every asset is embedded with `include_str!`
//!    or `include_bytes!`, so `cargo run --release` serves the whole console.
//! 2. Each asset is served with its exact content type and `Cache-Control: no-cache` (a rebuilt
//!    binary is picked up on reload).
//! 3. The console talks only to the server's own HTTP API: `/admin/`, the REST API, `/metrics`.

use actix_web::http::header;
use actix_web::{web, HttpResponse};

/// One embedded file.
pub struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

/// Every file of the console. `""` is the index (`/ui/`).
pub const ASSETS: &[Asset] = &[
    Asset {
        path: "",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("ui/index.html"),
    },
    Asset {
        path: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("ui/index.html"),
    },
    Asset {
        path: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("ui/app.js"),
    },
    Asset {
        path: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("ui/style.css"),
    },
    Asset {
        path: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("ui/favicon.svg"),
    },
];

/// `GET /ui/{file}`.
pub async fn asset(path: web::Path<String>) -> HttpResponse {
    let name = path.into_inner();
    match ASSETS.iter().find(|a| a.path == name) {
        Some(a) => HttpResponse::Ok()
            .content_type(a.content_type)
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .insert_header(("X-Content-Type-Options", "nosniff"))
            // No other site may frame the console: a click in an invisible frame would be the
            // operator's own, same-origin request (clickjacking: a split, a flush, a drop).
            .insert_header(("X-Frame-Options", "DENY"))
            .insert_header((header::CONTENT_SECURITY_POLICY, "frame-ancestors 'none'"))
            .body(a.body),
        None => HttpResponse::NotFound()
            .content_type("text/plain; charset=utf-8")
            .body(format!("no such console file: /ui/{name}\n")),
    }
}

/// `GET /ui`: the console lives at `/ui/` (relative asset links need the slash).
pub async fn redirect() -> HttpResponse {
    HttpResponse::MovedPermanently()
        .insert_header((header::LOCATION, "/ui/"))
        .finish()
}

/// Registers `/ui` and `/ui/{file}` (`/ui/` itself matches with an empty file: the index).
/// `/favicon.ico` is not ours to answer (it would be a table name): the page links
/// `/ui/favicon.svg` explicitly.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(super::read_only("/ui", redirect))
        .service(super::read_only("/ui/{file:.*}", asset));
}
