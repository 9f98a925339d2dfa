//! Shared set-up for the `rest_*` tests: a real store behind the same `App` the server builds
//! (`App::new().app_data(state).configure(kura::configure)`), driven in-process. The store is
//! the embedded one in a temp dir, or Bigtable's emulator with `KURA_TEST_BACKEND=bigtable`
//! (`backend_support`).

#![allow(dead_code)]

#[path = "../backend_support/mod.rs"]
pub mod backend_support;

use actix_web::http::header::HeaderMap;
use actix_web::http::Method;
use actix_web::test::{self, TestRequest};
use actix_web::{web, App};
use base64::Engine;
use futures::future::LocalBoxFuture;
use kura::state::{AppState, Limits};
use kura_actors::storage::Durability;
use kura_actors::{Kura, KuraConfig};
use kura_backend::Store;
use std::rc::Rc;

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
    held: Option<backend_support::TestStore>,
}

/// A store for tests: 2 arbiters, no fsync (speed), 2 regions per table.
pub async fn start_kura() -> (Kura, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = KuraConfig::new(dir.path());
    config.arbiters = 2;
    config.default_regions = 2;
    config.durability = Durability::None;
    config.split_threshold = None;
    let kura = Kura::start(config).await.expect("start kura");
    (kura, dir)
}

/// A client over a fresh store with default limits.
pub async fn client() -> Client {
    client_with(Limits::default()).await
}

/// A client over a fresh store (of the backend this run is for) with `limits`.
pub async fn client_with(limits: Limits) -> Client {
    let held = backend_support::TestStore::start(|c| c.default_regions = 2).await;
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
    let app = test::init_service(
        App::new()
            .app_data(state.clone())
            .configure(kura::configure),
    )
    .await;
    let app = Rc::new(app);
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

    pub async fn put_json(&self, uri: &str, body: &serde_json::Value) -> Resp {
        self.req(
            Method::PUT,
            uri,
            &[("Content-Type", "application/json")],
            body.to_string(),
        )
        .await
    }

    pub async fn post_json(&self, uri: &str, body: &serde_json::Value) -> Resp {
        self.req(
            Method::POST,
            uri,
            &[("Content-Type", "application/json")],
            body.to_string(),
        )
        .await
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
