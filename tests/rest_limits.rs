//! Limits, hostile input, negotiation errors, bearer tokens and panic catching (RELIABILITY.md).

mod support;

use actix_web::http::Method;
use actix_web::{test, web, App, HttpResponse};
use kura::guard::{AuthToken, Guard};
use kura::state::{AppState, Limits};
use support::*;

#[actix_web::test]
async fn row_key_and_qualifier_limits_are_exact() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let key_ok = "k".repeat(4096);
    let key_bad = "k".repeat(4097);
    let r = c
        .put_json("/t/x", &cellset(&[(&key_ok, &[("cf:a", None, "v")])]))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = c
        .put_json("/t/x", &cellset(&[(&key_bad, &[("cf:a", None, "v")])]))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("4096"), "{}", r.text());
    assert_eq!(c.get_json(&format!("/t/{key_ok}")).await.status, 200);
    assert_eq!(c.get_json(&format!("/t/{key_bad}")).await.status, 400);
    let q_ok = format!("cf:{}", "q".repeat(16 << 10));
    let q_bad = format!("cf:{}", "q".repeat((16 << 10) + 1));
    assert_eq!(
        c.put_json("/t/x", &cellset(&[("r", &[(&q_ok, None, "v")])]))
            .await
            .status,
        200
    );
    assert_eq!(
        c.put_json("/t/x", &cellset(&[("r", &[(&q_bad, None, "v")])]))
            .await
            .status,
        400
    );
}

#[actix_web::test]
async fn deletes_keep_to_the_qualifier_limit_too() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let q_ok = "q".repeat(16 << 10);
    let q_bad = "q".repeat((16 << 10) + 1);
    assert_eq!(c.delete(&format!("/t/r/cf:{q_ok}")).await.status, 200);
    let r = c.delete(&format!("/t/r/cf:{q_bad}")).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("qualifier"), "{}", r.text());
    // check=delete: the check column and the columns it deletes.
    let body = |check_col: &str, del_col: Option<&str>| {
        let mut cells: Vec<TestCell<'_>> = Vec::new();
        if let Some(d) = del_col {
            cells.push((d, None, ""));
        }
        cells.push((check_col, None, ""));
        cellset(&[("r", &cells)])
    };
    let bad = format!("cf:{q_bad}");
    let ok = format!("cf:{q_ok}");
    let r = c.put_json("/t/r?check=delete", &body(&bad, None)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = c
        .put_json("/t/r?check=delete", &body(&ok, Some(&bad)))
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = c
        .put_json("/t/r?check=delete", &body(&ok, Some("cf:a")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[actix_web::test]
async fn an_append_cannot_grow_a_value_past_the_limit() {
    let c = client_with(Limits {
        max_value: 8,
        ..Limits::default()
    })
    .await;
    c.create_table("t", &["cf"], 1).await;
    let append = |v: &'static str| cellset(&[("r", &[("cf:a", None, v)])]);
    assert_eq!(
        c.put_json("/t/r?check=append", &append("abcdef"))
            .await
            .status,
        200
    );
    let r = c.put_json("/t/r?check=append", &append("ghi")).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("limit"), "{}", r.text());
    assert_eq!(
        c.get("/t/r/cf:a", "").await.body,
        b"abcdef",
        "nothing appended"
    );
    assert_eq!(
        c.put_json("/t/r?check=append", &append("gh")).await.status,
        200
    );
    assert_eq!(c.get("/t/r/cf:a", "").await.body, b"abcdefgh");
}

#[actix_web::test]
async fn value_and_body_limits_are_exact() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let bin = [("Content-Type", "application/octet-stream")];
    let max = 10 << 20;
    let r = c
        .req(Method::PUT, "/t/big/cf:v", &bin, vec![7u8; max])
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(c.get("/t/big/cf:v", "").await.body.len(), max);
    let r = c
        .req(Method::PUT, "/t/big/cf:v", &bin, vec![7u8; max + 1])
        .await;
    assert_eq!(r.status, 413, "{}", r.text());
    // The body limit is checked before the body is parsed.
    let c = client_with(Limits {
        max_body: 1000,
        ..Limits::default()
    })
    .await;
    c.create_table("t", &["cf"], 1).await;
    let r = c.req(Method::PUT, "/t/r/cf:v", &bin, vec![1u8; 1000]).await;
    assert_eq!(r.status, 200);
    let r = c.req(Method::PUT, "/t/r/cf:v", &bin, vec![1u8; 1001]).await;
    assert_eq!(r.status, 413);
}

#[actix_web::test]
async fn hostile_bodies_are_clear_400s_and_the_server_stays_up() {
    let c = client().await;
    c.create_table("t", &["cf"], 1).await;
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("application/json", b"{\"Row\":".to_vec()),
        ("application/json", b"{\"Row\":[{\"key\":\"!!notb64\",\"Cell\":[]}]}".to_vec()),
        ("application/json", deep.into_bytes()),
        ("application/json", vec![0xff, 0xfe, 0x00]),
        ("text/xml", b"<CellSet><Row key=\"cm93\"><Cell column=\"???\">x</Cell></Row></CellSet>".to_vec()),
        ("text/xml", b"<CellSet><Row".to_vec()),
        ("text/xml", b"<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><CellSet><Row key=\"cm93\"><Cell column=\"Y2Y6YQ==\">&e;</Cell></Row></CellSet>".to_vec()),
    ];
    for (ct, body) in cases {
        let r = c
            .req(Method::PUT, "/t/r", &[("Content-Type", ct)], body.clone())
            .await;
        assert_eq!(
            r.status,
            400,
            "{ct} {:?}: {}",
            String::from_utf8_lossy(&body),
            r.text()
        );
        assert_eq!(r.content_type().as_deref(), Some("text/plain"));
    }
    let r = c
        .req(
            Method::PUT,
            "/t/r",
            &[("Content-Type", "application/x-protobuf")],
            "x",
        )
        .await;
    assert_eq!(r.status, 415);
    let r = c
        .req(Method::PUT, "/t/r", &[("Content-Type", "text/plain")], "x")
        .await;
    assert_eq!(r.status, 415);
    assert_eq!(
        c.get("/t/r/cf:a", "application/x-protobuf").await.status,
        406
    );
    assert_eq!(c.req(Method::PATCH, "/t/r", &[], "").await.status, 405);
    assert_eq!(c.req(Method::POST, "/t/*", &[], "").await.status, 405);
    assert_eq!(c.get_json("/t/r/cf:a?v=abc").await.status, 400);
    assert_eq!(c.get_json("/t/r%zz").await.status, 400);
    assert_eq!(c.get_json("/..%2F..%2Fetc/schema").await.status, 400);
    // Still serving.
    c.put_cell("t", "alive", "cf:a", None, "yes").await;
    assert_eq!(c.get("/t/alive/cf:a", "").await.body, b"yes");
}

#[actix_web::test]
async fn bearer_token_is_required_when_configured() {
    let (kura, _dir) = start_kura().await;
    let state = web::Data::new(AppState::new(kura.into(), Limits::default()));
    let app = test::init_service(
        App::new()
            .app_data(state)
            .wrap(Guard::new(AuthToken(Some("s3cret".into())), false))
            .configure(kura::configure),
    )
    .await;
    let get = |auth: Option<&str>, uri: &str| {
        let mut r = test::TestRequest::get().uri(uri);
        if let Some(a) = auth {
            r = r.insert_header(("Authorization", a.to_string()));
        }
        r.to_request()
    };
    let r = test::call_service(&app, get(None, "/version")).await;
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.headers().get("www-authenticate").map(|v| v.as_bytes()),
        Some(&b"Bearer"[..])
    );
    let r = test::call_service(&app, get(Some("Bearer wrong"), "/version")).await;
    assert_eq!(r.status(), 401);
    let r = test::call_service(&app, get(Some("Bearer s3cret"), "/version")).await;
    assert_eq!(r.status(), 200);
    let r = test::call_service(&app, get(None, "/healthz")).await;
    assert_ne!(r.status(), 401, "/healthz is exempt");
}

#[actix_web::test]
async fn a_panicking_handler_answers_500() {
    let app = test::init_service(
        App::new()
            .wrap(Guard::default())
            .route(
                "/boom",
                web::get().to(|| async { panic!("handler bug") as HttpResponse }),
            )
            .route(
                "/fine",
                web::get().to(|| async { HttpResponse::Ok().body("ok") }),
            ),
    )
    .await;
    let err = test::try_call_service(&app, test::TestRequest::get().uri("/boom").to_request())
        .await
        .expect_err("the panic becomes an error response");
    assert_eq!(err.as_response_error().status_code(), 500);
    let resp = err.error_response();
    assert_eq!(resp.status(), 500);
    let ok = test::call_service(&app, test::TestRequest::get().uri("/fine").to_request()).await;
    assert_eq!(ok.status(), 200, "the worker keeps serving after a panic");
}
