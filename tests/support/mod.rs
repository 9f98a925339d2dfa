//! The one in-process harness of the HTTP suites (REST API, applications, operations): the
//! server's own App ([`kura::server::app`]: its middlewares and routes) over a real store,
//! driven without a socket. The store is the embedded one in a temp dir, or Bigtable's
//! emulator with `KURA_TEST_BACKEND=bigtable` ([`backend`]). Suites that need a real process
//! (kill -9, sockets, signals) use `server_harness` instead.
//!
//! Three ways in, one App underneath:
//! - [`Client`] (`client().await`): typed requests and fully read [`Resp`]onses;
//! - `app!(store)` / `server!(store, skew_ms)` and `call!(&app, get(uri))`: the service itself
//!   and `(status, JSON)` answers, for the applications' contract;
//! - [`service`] over a state the test keeps (`ops_app!(state, state)`), to act on the server's
//!   own metrics and shutting-down flag.

#![allow(dead_code)]

pub mod backend;

use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::header::HeaderMap;
use actix_web::http::Method;
use actix_web::test::{self, TestRequest};
use actix_web::web;
use base64::Engine;
use futures::future::LocalBoxFuture;
use kura::guard::{AuthToken, Guard};
use kura::state::{AppState, Limits, StateSource};
use kura_actors::storage::model::{FamilyDescriptor, Mutation, RowMutation};
use kura_actors::storage::Durability;
use kura_actors::{Kura, KuraConfig, SaltConfig, TableDescriptor};
use kura_backend::Store;
use serde_json::Value;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The server's App over `state` (the server's middlewares: metrics, guards on a loopback-only
/// server without a token, compression), as an initialized test service.
pub async fn service(
    state: &web::Data<AppState>,
) -> impl Service<
    actix_http::Request,
    Response = ServiceResponse<impl MessageBody>,
    Error = actix_web::Error,
> {
    let max_body = state.limits.max_body;
    test::init_service(kura::server::app(
        StateSource::ready_data(state.clone()),
        Guard::new(AuthToken(None), true),
        max_body,
        kura::compress::Compress::default(),
    ))
    .await
}

/// The state every handler receives, over `store` (an embedded `Kura` or any `Store`).
pub fn state<S: Clone + Into<Store>>(store: &S) -> web::Data<AppState> {
    web::Data::new(AppState::new(store.clone().into(), Limits::default()))
}

/// The server's App over a store (an initialized test service).
#[macro_export]
macro_rules! app {
    ($kura:expr) => {
        $crate::support::service(&$crate::support::state(&$kura)).await
    };
}

/// The same, for the operations suites: `ops_app!(kura)`, or `ops_app!(state, state)` over a
/// state the test keeps.
#[macro_export]
macro_rules! ops_app {
    ($kura:expr) => {
        $crate::support::service(&$crate::support::state(&$kura)).await
    };
    ($state:expr, state) => {
        $crate::support::service(&$state).await
    };
}

/// One of several servers over one store: the server's App with a state of its own (its own
/// scanners, heatmap and applications' clock) whose clock reads the wall clock `$skew_ms` ms
/// ahead (behind if negative). Two of these over one store share nothing but the store, as two
/// processes behind a load balancer would.
#[macro_export]
macro_rules! server {
    ($kura:expr, $skew_ms:expr) => {{
        let mut state = kura::state::AppState::new($kura.clone(), kura::state::Limits::default());
        state.clock = std::sync::Arc::new(kura::apps::clock::Clock::skewed($skew_ms));
        $crate::support::service(&actix_web::web::Data::new(state)).await
    }};
}

/// Sends a `TestRequest` to an app: `(status, JSON body or Null)`.
#[macro_export]
macro_rules! call {
    ($app:expr, $req:expr) => {
        $crate::support::read(actix_web::test::call_service($app, $req.to_request()).await).await
    };
}

/// An embedded store for tests: 2 arbiters, no fsync (speed), 2 regions per table, no splits.
pub async fn start_kura() -> (Kura, tempfile::TempDir) {
    start_kura_with(|_| {}).await
}

/// The same store as [`start_kura`] with `configure` applied to its configuration last
/// (`|c| c.durability = Durability::Sync` for a suite that counts fsyncs).
pub async fn start_kura_with(configure: impl FnOnce(&mut KuraConfig)) -> (Kura, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = KuraConfig::new(dir.path());
    config.arbiters = 2;
    config.default_regions = 2;
    config.durability = Durability::None;
    config.split_threshold = None;
    configure(&mut config);
    let kura = Kura::start(config).await.expect("start kura");
    (kura, dir)
}

/// A running store (of the backend this run is for) and what keeps it alive.
pub struct RunningStore {
    pub kura: kura_backend::Store,
    pub held: backend::TestStore,
}

/// Starts a fresh store.
pub async fn store() -> RunningStore {
    let held = backend::TestStore::start(|_| {}).await;
    RunningStore {
        kura: held.store.clone(),
        held,
    }
}

/// A response, fully read.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    }
    pub fn content_type(&self) -> Option<String> {
        self.header("content-type")
    }
}

type CallFn = Box<dyn Fn(TestRequest) -> LocalBoxFuture<'static, Resp>>;

/// An in-process client of the App over a real store.
pub struct Client {
    call: CallFn,
    pub kura: Store,
    /// The server state the client's App runs with (its scanners among them).
    pub state: web::Data<AppState>,
    held: Option<backend::TestStore>,
}

/// A client over a fresh store with default limits.
pub async fn client() -> Client {
    client_with(Limits::default()).await
}

/// A client over a fresh store (of the backend this run is for) with `limits`.
pub async fn client_with(limits: Limits) -> Client {
    let held = backend::TestStore::start(|c| c.default_regions = 2).await;
    let mut c = client_over_store(held.store.clone(), limits).await;
    c.held = Some(held);
    c
}

/// A client over an existing embedded store.
pub async fn client_over(kura: &Kura, limits: Limits) -> Client {
    client_over_store(kura.clone().into(), limits).await
}

/// A client over any store.
pub async fn client_over_store(store: Store, limits: Limits) -> Client {
    let state = web::Data::new(AppState::new(store.clone(), limits));
    let app = Rc::new(service(&state).await);
    let call: CallFn = Box::new(move |req: TestRequest| {
        let app = app.clone();
        Box::pin(async move {
            let resp = test::call_service(&*app, req.to_request()).await;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = test::read_body(resp).await.to_vec();
            Resp {
                status,
                headers,
                body,
            }
        })
    });
    Client {
        call,
        kura: store,
        state,
        held: None,
    }
}

impl Client {
    /// True when this client's store is Bigtable (the documented differences apply).
    pub fn on_bigtable(&self) -> bool {
        self.held.as_ref().is_some_and(|h| h.on_bigtable())
    }

    /// Any request.
    pub async fn req(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: impl Into<Vec<u8>>,
    ) -> Resp {
        let mut r = TestRequest::default().method(method).uri(uri);
        for (k, v) in headers {
            r = r.insert_header((*k, *v));
        }
        let body = body.into();
        if !body.is_empty() {
            r = r.set_payload(body);
        }
        (self.call)(r).await
    }

    pub async fn get(&self, uri: &str, accept: &str) -> Resp {
        if accept.is_empty() {
            self.req(Method::GET, uri, &[], "").await
        } else {
            self.req(Method::GET, uri, &[("Accept", accept)], "").await
        }
    }

    pub async fn get_json(&self, uri: &str) -> Resp {
        self.get(uri, "application/json").await
    }

    /// `body` as JSON with `method` (`Content-Type: application/json`).
    pub async fn send_json(&self, method: Method, uri: &str, body: &serde_json::Value) -> Resp {
        self.req(
            method,
            uri,
            &[("Content-Type", "application/json")],
            body.to_string(),
        )
        .await
    }

    pub async fn put_json(&self, uri: &str, body: &serde_json::Value) -> Resp {
        self.send_json(Method::PUT, uri, body).await
    }

    pub async fn post_json(&self, uri: &str, body: &serde_json::Value) -> Resp {
        self.send_json(Method::POST, uri, body).await
    }

    pub async fn put_xml(&self, uri: &str, body: &str) -> Resp {
        self.req(Method::PUT, uri, &[("Content-Type", "text/xml")], body)
            .await
    }

    pub async fn delete(&self, uri: &str) -> Resp {
        self.req(Method::DELETE, uri, &[], "").await
    }

    /// Creates `table` with the given families (`VERSIONS` = versions).
    pub async fn create_table(&self, table: &str, families: &[&str], versions: u32) {
        let cols: Vec<_> = families
            .iter()
            .map(|f| serde_json::json!({"name": f, "VERSIONS": versions.to_string()}))
            .collect();
        let r = self
            .put_json(
                &format!("/{table}/schema"),
                &serde_json::json!({"name": table, "ColumnSchema": cols}),
            )
            .await;
        assert_eq!(r.status, 201, "create {table}: {}", r.text());
    }

    /// Puts one cell through the JSON API.
    pub async fn put_cell(
        &self,
        table: &str,
        row: &str,
        column: &str,
        ts: Option<i64>,
        value: &str,
    ) {
        let body = cellset(&[(row, &[(column, ts, value)])]);
        let r = self.put_json(&format!("/{table}/fakerow"), &body).await;
        assert_eq!(r.status, 200, "put {row}/{column}: {}", r.text());
    }
}

/// Asserts a 400 whose message mentions `mentions` (says what to fix).
pub fn assert_400(r: &Resp, mentions: &str) {
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains(mentions),
        "the message should mention {mentions:?}: {}",
        r.text()
    );
}

/// Standard base64.
pub fn b64(s: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Decodes standard base64.
pub fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

/// One cell of a test body: `(column, timestamp, value)`.
pub type TestCell<'a> = (&'a str, Option<i64>, &'a str);

/// A CellSet JSON body: rows of `(row, [(column, timestamp, value)])`.
pub fn cellset(rows: &[(&str, &[TestCell<'_>])]) -> serde_json::Value {
    let rows: Vec<_> = rows
        .iter()
        .map(|(key, cells)| {
            let cells: Vec<_> = cells
                .iter()
                .map(|(col, ts, v)| {
                    let mut c = serde_json::json!({"column": b64(col), "$": b64(v)});
                    if let Some(ts) = ts {
                        c["timestamp"] = serde_json::json!(ts);
                    }
                    c
                })
                .collect();
            serde_json::json!({"key": b64(key), "Cell": cells})
        })
        .collect();
    serde_json::json!({ "Row": rows })
}

/// The cells of a CellSet JSON answer as `(row, column, timestamp, value)` strings.
pub fn cells_of(v: &serde_json::Value) -> Vec<(String, String, i64, String)> {
    let mut out = Vec::new();
    for row in v["Row"].as_array().expect("Row array") {
        let key = String::from_utf8_lossy(&unb64(row["key"].as_str().expect("key"))).into_owned();
        for c in row["Cell"].as_array().expect("Cell array") {
            out.push((
                key.clone(),
                String::from_utf8_lossy(&unb64(c["column"].as_str().expect("column"))).into_owned(),
                c["timestamp"].as_i64().expect("timestamp"),
                String::from_utf8_lossy(&unb64(c["$"].as_str().expect("value"))).into_owned(),
            ));
        }
    }
    out
}

/// The row keys of a CellSet JSON answer, one per Row entry.
pub fn row_keys(v: &serde_json::Value) -> Vec<String> {
    v["Row"]
        .as_array()
        .expect("Row array")
        .iter()
        .map(|r| String::from_utf8_lossy(&unb64(r["key"].as_str().expect("key"))).into_owned())
        .collect()
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

/// Creates `name` with family `cf`, `buckets` salt buckets and `regions` initial regions.
pub async fn create_table(kura: &Kura, name: &str, buckets: u32, regions: u32) {
    kura.create_table(TableDescriptor {
        name: name.to_string(),
        families: vec![FamilyDescriptor::new(b"cf".to_vec()).with_max_versions(3)],
        salt: SaltConfig {
            buckets,
            prefix_len: None,
        },
        initial_regions: Some(regions),
        attributes: BTreeMap::new(),
        family_attributes: BTreeMap::new(),
    })
    .await
    .expect("create table");
}

/// Writes `cf:q = value` to `row`.
pub async fn put(kura: &Kura, table: &str, row: &str, value: &str) {
    kura.mutate(
        table,
        RowMutation {
            row: row.as_bytes().to_vec(),
            mutations: vec![Mutation::Put {
                family: b"cf".to_vec(),
                qualifier: b"q".to_vec(),
                timestamp: None,
                value: value.as_bytes().to_vec(),
            }],
        },
    )
    .await
    .expect("put");
}
