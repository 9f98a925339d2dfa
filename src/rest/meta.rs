//! Server-wide resources: the table list (`/`), versions (`/version`, `/version/rest`,
//! `/version/cluster`), `/status/cluster` and `/namespaces`.
//!
//! Kura has one namespace of tables, `default`; `hbase` is listed (HBase clients expect it) and
//! holds no tables. Namespaces cannot be created or dropped.
//!
//! # Invariants
//! 1. With no `Accept` (or `*/*`) these resources answer `text/plain`, as HBase does.
//! 2. Every figure in `/status/cluster` comes from the live regions.

use super::media::{negotiate, xml_escape, Repr};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use actix_web::http::Method;
use actix_web::{HttpRequest, HttpResponse};
use std::fmt::Write as _;

/// The HBase REST protocol version we speak.
pub const REST_VERSION: &str = "0.0.3";
/// The name under which the catalog of tables is listed as a region (HBase's meta region).
const META_REGION_NAME: &str = "hbase:meta,,1";

/// The HBase version we report to clients (`/version/cluster`).
pub const CLUSTER_VERSION: &str = "2.6.0";

const ALL: &[Repr] = &[Repr::Text, Repr::Xml, Repr::Json];

/// A response with the exact Content-Type of `repr`.
pub fn respond(repr: Repr, body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(repr.header_value())
        .body(body)
}

/// A table list in `repr` (`TableListModel`).
pub fn table_list(repr: Repr, names: &[String]) -> HttpResponse {
    let body = match repr {
        Repr::Json => serde_json::json!({
            "table": names.iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>()
        })
        .to_string(),
        Repr::Xml => {
            let mut s = String::from(
                "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?><TableList>",
            );
            for n in names {
                let _ = write!(s, "<table name=\"{}\"/>", xml_escape(n));
            }
            s.push_str("</TableList>");
            s
        }
        _ => names.iter().map(|n| format!("{n}\n")).collect(),
    };
    respond(repr, body)
}

/// `GET /`: every table.
pub async fn root(req: &HttpRequest, state: &AppState) -> ApiResult<HttpResponse> {
    let repr = negotiate(req, ALL, Repr::Text)?;
    let names: Vec<String> = state
        .kura
        .list_tables()
        .await?
        .into_iter()
        .map(|t| t.name)
        .collect();
    Ok(table_list(repr, &names))
}

fn os_string() -> String {
    format!("{} {}", std::env::consts::OS, std::env::consts::ARCH)
}

/// `GET /version`, `/version/rest`, `/version/cluster`.
pub fn version(req: &HttpRequest, rest: &str) -> ApiResult<HttpResponse> {
    let server = format!("kura/{}", env!("CARGO_PKG_VERSION"));
    match rest.trim_end_matches('/') {
        "" | "rest" => {
            let repr = negotiate(req, ALL, Repr::Text)?;
            let jvm = "none (Rust)";
            let body = match repr {
                Repr::Json => serde_json::json!({
                    "REST": REST_VERSION, "JVM": jvm, "OS": os_string(), "Server": server,
                    "Jersey": "none", "Version": CLUSTER_VERSION, "Revision": server,
                })
                .to_string(),
                Repr::Xml => format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
                     <Version REST=\"{REST_VERSION}\" JVM=\"{jvm}\" OS=\"{}\" Server=\"{server}\" \
                     Jersey=\"none\"/>",
                    xml_escape(&os_string())
                ),
                _ => format!(
                    "rest {REST_VERSION} [JVM: {jvm}] [OS: {}] [Server: {server}] [Jersey: none]\n",
                    os_string()
                ),
            };
            Ok(respond(repr, body))
        }
        "cluster" => {
            let repr = negotiate(req, ALL, Repr::Text)?;
            let body = match repr {
                Repr::Json => serde_json::json!({ "Version": CLUSTER_VERSION }).to_string(),
                Repr::Xml => format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
                     <ClusterVersion Version=\"{CLUSTER_VERSION}\"/>"
                ),
                _ => format!("{CLUSTER_VERSION}\n"),
            };
            Ok(respond(repr, body))
        }
        _ => Err(ApiError::NotFound),
    }
}

fn host_of(req: &HttpRequest) -> String {
    req.connection_info().host().to_string()
}

/// `GET /status/cluster`: one live node (this server) with its real regions.
pub async fn status(req: &HttpRequest, state: &AppState, rest: &str) -> ApiResult<HttpResponse> {
    if rest.trim_end_matches('/') != "cluster" {
        return Err(ApiError::NotFound);
    }
    let repr = negotiate(req, ALL, Repr::Text)?;
    let node = host_of(req);
    let mut regions = Vec::new();
    for t in state.kura.list_tables().await? {
        // A table dropped between the two calls simply has no regions.
        if let Ok(rs) = state.kura.regions(&t.name).await {
            regions.extend(rs);
        }
    }
    let requests: u64 = regions.iter().map(|r| r.stats.reads + r.stats.writes).sum();
    let start_code = state.started_ms;
    // The catalog of tables is Kura's `hbase:meta`: HBase clients expect to find it listed.
    let meta_name = META_REGION_NAME.to_string();
    let region_name =
        |r: &kura_backend::RegionInfo| format!("{},{},{}", r.table, r.bucket_start, r.id);
    let region_count = regions.len() + 1;
    let body = match repr {
        Repr::Json => serde_json::json!({
            "regions": region_count,
            "requests": requests,
            "averageLoad": region_count as f64,
            "LiveNodes": [{
                "name": node,
                "startCode": start_code,
                "requests": requests,
                "heapSizeMB": 0,
                "maxHeapSizeMB": 0,
                "Region": std::iter::once(serde_json::json!({
                    "name": super::media::b64_encode(meta_name.as_bytes()),
                    "stores": 1,
                })).chain(regions.iter().map(|r| serde_json::json!({
                    "name": super::media::b64_encode(region_name(r).as_bytes()),
                    "stores": 1,
                    "storefiles": r.stats.segments,
                    "storefileSizeMB": r.stats.segment_bytes >> 20,
                    "memstoreSizeMB": r.stats.memtable_bytes >> 20,
                    "readRequestsCount": r.stats.reads,
                    "writeRequestsCount": r.stats.writes,
                }))).collect::<Vec<_>>(),
            }],
            "DeadNodes": [],
        })
        .to_string(),
        Repr::Xml => {
            let mut s = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
                 <ClusterStatus regions=\"{}\" requests=\"{requests}\" averageLoad=\"{}\">\
                 <LiveNodes><Node name=\"{}\" startCode=\"{start_code}\" \
                 requests=\"{requests}\" heapSizeMB=\"0\" maxHeapSizeMB=\"0\">\
                 <Region name=\"{}\" stores=\"1\"/>",
                region_count,
                region_count,
                xml_escape(&node),
                super::media::b64_encode(meta_name.as_bytes()),
            );
            for r in &regions {
                let _ = write!(
                    s,
                    "<Region name=\"{}\" stores=\"1\" storefiles=\"{}\" readRequestsCount=\"{}\" \
                     writeRequestsCount=\"{}\"/>",
                    super::media::b64_encode(region_name(r).as_bytes()),
                    r.stats.segments,
                    r.stats.reads,
                    r.stats.writes
                );
            }
            s.push_str("</Node></LiveNodes><DeadNodes/></ClusterStatus>");
            s
        }
        _ => {
            let mut s = format!(
                "1 live servers, 0 dead servers, {region_count}.0000 average load\n\n\
                 1 live servers\n    {node} {start_code}\n        requests={requests}, \
                 regions={region_count}\n        {meta_name}\n"
            );
            for r in &regions {
                let _ = writeln!(s, "        {}", region_name(r));
            }
            s
        }
    };
    Ok(respond(repr, body))
}

const NAMESPACES: &[&str] = &["default", "hbase"];

/// `/namespaces`, `/namespaces/{ns}`, `/namespaces/{ns}/tables`.
pub async fn namespaces(
    req: &HttpRequest,
    state: &AppState,
    rest: &str,
) -> ApiResult<HttpResponse> {
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    let method = req.method();
    match parts.as_slice() {
        [] => {
            if method != Method::GET && method != Method::HEAD {
                return Err(ApiError::MethodNotAllowed("GET, HEAD"));
            }
            let repr = negotiate(req, ALL, Repr::Text)?;
            let body = match repr {
                Repr::Json => serde_json::json!({ "Namespace": NAMESPACES }).to_string(),
                Repr::Xml => {
                    let mut s = String::from(
                        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?><Namespaces>",
                    );
                    for n in NAMESPACES {
                        let _ = write!(s, "<Namespace>{n}</Namespace>");
                    }
                    s.push_str("</Namespaces>");
                    s
                }
                _ => NAMESPACES.iter().map(|n| format!("{n}\n")).collect(),
            };
            Ok(respond(repr, body))
        }
        [ns] => {
            let exists = NAMESPACES.contains(ns);
            match *method {
                Method::GET | Method::HEAD if exists => {
                    let repr = negotiate(req, ALL, Repr::Text)?;
                    let body = match repr {
                        Repr::Json => "{\"properties\":{}}".to_string(),
                        Repr::Xml => {
                            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
                                      <NamespaceProperties/>"
                                .to_string()
                        }
                        _ => String::new(),
                    };
                    Ok(respond(repr, body))
                }
                Method::GET | Method::HEAD => Err(ApiError::NotFound),
                Method::POST if exists => Err(ApiError::Forbidden(format!(
                    "namespace {ns} already exists"
                ))),
                Method::DELETE if !exists => Err(ApiError::NotFound),
                Method::POST | Method::PUT | Method::DELETE => Err(ApiError::Forbidden(
                    "Kura has only the default namespace; namespaces cannot be created, \
                     altered or dropped"
                        .into(),
                )),
                _ => Err(ApiError::MethodNotAllowed("GET, HEAD, POST, PUT, DELETE")),
            }
        }
        [ns, "tables"] => {
            if method != Method::GET && method != Method::HEAD {
                return Err(ApiError::MethodNotAllowed("GET, HEAD"));
            }
            if !NAMESPACES.contains(ns) {
                return Err(ApiError::NotFound);
            }
            let repr = negotiate(req, ALL, Repr::Text)?;
            let names: Vec<String> = if *ns == "default" {
                state
                    .kura
                    .list_tables()
                    .await?
                    .into_iter()
                    .map(|t| t.name)
                    .collect()
            } else {
                Vec::new()
            };
            Ok(table_list(repr, &names))
        }
        _ => Err(ApiError::NotFound),
    }
}
