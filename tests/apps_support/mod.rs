//! Shared harness of the application tests: the same `App` the server runs
//! (`App::new().app_data(state).configure(kura::configure)`) over a real store: the embedded one
//! in a temp dir, or Bigtable's emulator with `KURA_TEST_BACKEND=bigtable` (`backend_support`).

#![allow(dead_code)]

#[path = "../backend_support/mod.rs"]
pub mod backend_support;

use actix_web::body::MessageBody;
use actix_web::dev::ServiceResponse;
use actix_web::test;
use serde_json::Value;

/// A running store (of the backend this run is for) and what keeps it alive.
pub struct Store {
    pub kura: kura_backend::Store,
    pub held: backend_support::TestStore,
}

/// Starts a fresh store.
pub async fn store() -> Store {
    let held = backend_support::TestStore::start(|_| {}).await;
    Store {
        kura: held.store.clone(),
        held,
    }
}

/// The server's `App` over a `Kura` (an initialized test service).
#[macro_export]
macro_rules! app {
    ($kura:expr) => {
        actix_web::test::init_service(
            actix_web::App::new()
                .app_data(actix_web::web::Data::new(kura::state::AppState::new(
                    $kura.clone(),
                    kura::state::Limits::default(),
                )))
                .configure(kura::configure),
        )
        .await
    };
}

/// One of several servers over one store: the server's `App` with a state of its own (its own
/// scanners, heatmap and applications' clock) whose clock reads the wall clock `$skew_ms` ms
/// ahead (behind if negative). Two of these over one store share nothing but the store, as two
/// processes behind a load balancer would.
#[macro_export]
macro_rules! server {
    ($kura:expr, $skew_ms:expr) => {{
        let mut state = kura::state::AppState::new($kura.clone(), kura::state::Limits::default());
        state.clock = std::sync::Arc::new(kura::apps::clock::Clock::skewed($skew_ms));
        actix_web::test::init_service(
            actix_web::App::new()
                .app_data(actix_web::web::Data::new(state))
                .configure(kura::configure),
        )
        .await
    }};
}

/// Sends a `TestRequest` to an app: `(status, JSON body or Null)`.
#[macro_export]
macro_rules! call {
    ($app:expr, $req:expr) => {
        $crate::apps_support::read(actix_web::test::call_service($app, $req.to_request()).await)
            .await
    };
}

/// Status and JSON body (Null when empty) of a response.
pub async fn read<B: MessageBody>(resp: ServiceResponse<B>) -> (u16, Value) {
    let status = resp.status().as_u16();
    let bytes = test::read_body(resp).await;
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            panic!(
                "status {status}: body is not JSON: {:?}",
                String::from_utf8_lossy(&bytes)
            )
        })
    };
    (status, body)
}

pub fn get(uri: &str) -> test::TestRequest {
    test::TestRequest::get().uri(uri)
}

pub fn post(uri: &str, body: Value) -> test::TestRequest {
    test::TestRequest::post().uri(uri).set_json(body)
}

pub fn patch(uri: &str, body: Value) -> test::TestRequest {
    test::TestRequest::patch().uri(uri).set_json(body)
}

pub fn delete(uri: &str) -> test::TestRequest {
    test::TestRequest::delete().uri(uri)
}

/// A raw body with a JSON content type (for malformed-body tests).
pub fn post_raw(uri: &str, body: &'static str) -> test::TestRequest {
    test::TestRequest::post()
        .uri(uri)
        .insert_header(("content-type", "application/json"))
        .set_payload(body)
}

/// Asserts the contract's error shape and status, returning the code.
pub fn assert_error(status: u16, body: &Value, expected: u16) -> String {
    assert_eq!(status, expected, "body: {body}");
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error.code in {body}"));
    assert!(
        body["error"]["message"].is_string(),
        "no error.message in {body}"
    );
    code.to_string()
}

/// Index of the only salt bucket whose read count moved between two activity snapshots.
pub fn buckets_read(before: &[(u64, u64)], after: &[(u64, u64)]) -> Vec<usize> {
    before
        .iter()
        .zip(after)
        .enumerate()
        .filter(|(_, (b, a))| a.0 != b.0)
        .map(|(i, _)| i)
        .collect()
}
