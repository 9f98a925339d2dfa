//! The web console: served from the binary at `/ui/` with the right content types, and every
//! file the page references is served.

#[macro_use]
mod support;

use actix_web::test::{call_service, read_body, TestRequest};

macro_rules! get {
    ($app:expr, $uri:expr) => {{
        let res = call_service(&$app, TestRequest::get().uri($uri).to_request()).await;
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let body = read_body(res).await;
        (status, headers, body)
    }};
}

fn content_type(h: &actix_web::http::header::HeaderMap) -> String {
    h.get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

#[actix_web::test]
async fn ui_without_slash_redirects_to_the_console() {
    let (kura, _dir) = support::start_kura().await;
    let app = ops_app!(kura);
    let (status, headers, _) = get!(app, "/ui");
    assert!(status == 301 || status == 308, "status {status}");
    assert_eq!(
        headers.get("location").and_then(|v| v.to_str().ok()),
        Some("/ui/")
    );
}

#[actix_web::test]
async fn console_assets_are_served_with_their_content_types() {
    let (kura, _dir) = support::start_kura().await;
    let app = ops_app!(kura);
    for (uri, ct, marker) in [
        ("/ui/", "text/html", "<title>Kura console</title>"),
        ("/ui/index.html", "text/html", "<title>Kura console</title>"),
        ("/ui/app.js", "text/javascript", "use strict"),
        ("/ui/style.css", "text/css", ":root"),
        ("/ui/favicon.svg", "image/svg+xml", "<svg"),
    ] {
        let (status, headers, body) = get!(app, uri);
        assert_eq!(status, 200, "{uri}");
        assert!(
            content_type(&headers).starts_with(ct),
            "{uri}: {}",
            content_type(&headers)
        );
        let text = String::from_utf8(body.to_vec()).expect("utf-8 asset");
        assert!(text.contains(marker), "{uri} is the real file");
        // Another site cannot frame it (clickjacking a split or a drop).
        assert_eq!(
            headers.get("x-frame-options").and_then(|v| v.to_str().ok()),
            Some("DENY"),
            "{uri}"
        );
        assert_eq!(
            headers
                .get("content-security-policy")
                .and_then(|v| v.to_str().ok()),
            Some("frame-ancestors 'none'"),
            "{uri}"
        );
    }
}

#[actix_web::test]
async fn every_file_the_page_references_is_served_locally() {
    let (kura, _dir) = support::start_kura().await;
    let app = ops_app!(kura);
    let (_, _, body) = get!(app, "/ui/");
    let html = String::from_utf8(body.to_vec()).expect("utf-8");
    let mut refs = Vec::new();
    for attr in ["src=\"", "href=\""] {
        for part in html.split(attr).skip(1) {
            let url = part.split('"').next().unwrap_or("");
            if url.starts_with("/ui/") {
                refs.push(url.to_string());
            }
            assert!(
                !url.starts_with("http://")
                    && !url.starts_with("https://")
                    && !url.starts_with("//"),
                "the console loads nothing from outside: {url}"
            );
        }
    }
    assert!(
        refs.len() >= 3,
        "links the script, the style sheet and the icon: {refs:?}"
    );
    for url in refs {
        let (status, _, _) = get!(app, url.as_str());
        assert_eq!(status, 200, "{url}");
    }
}

#[actix_web::test]
async fn unknown_console_files_are_404() {
    let (kura, _dir) = support::start_kura().await;
    let app = ops_app!(kura);
    let (status, _, _) = get!(app, "/ui/nope.js");
    assert_eq!(status, 404);
}

#[actix_web::test]
async fn operations_paths_answer_head_and_refuse_other_methods_with_405() {
    use actix_web::http::Method;
    let (kura, _dir) = support::start_kura().await;
    let app = ops_app!(kura);
    for path in ["/healthz", "/metrics", "/ui/"] {
        let head = call_service(
            &app,
            TestRequest::default()
                .method(Method::HEAD)
                .uri(path)
                .to_request(),
        )
        .await;
        assert_eq!(head.status().as_u16(), 200, "HEAD {path}");
        for method in [Method::POST, Method::PUT, Method::DELETE] {
            let res = call_service(
                &app,
                TestRequest::default()
                    .method(method.clone())
                    .uri(path)
                    .to_request(),
            )
            .await;
            assert_eq!(res.status().as_u16(), 405, "{method} {path}");
            assert_eq!(
                res.headers().get("allow").and_then(|v| v.to_str().ok()),
                Some("GET, HEAD"),
                "{method} {path}"
            );
        }
    }
}
