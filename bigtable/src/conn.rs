//! Connections to Bigtable: the Data API client (bigtable_rs's channel and auth), the Admin API
//! client (our own tonic channel), the routing metadata every call carries, and the mapping of
//! gRPC statuses onto [`kura_backend::Error`].
//!
//! # Invariants
//! 1. Every data call goes through the raw generated client with `x-goog-request-params`
//!    (`table_name`, `app_profile_id`) and the request's own `app_profile_id`; every admin call
//!    carries `name=` or `parent=`.
//! 2. Reads carry `bigtable-features: CAE=` (reverse scans allowed); no call uses a whole-stream
//!    timeout, unary calls carry a deadline of [`UNARY_DEADLINE`].
//! 3. Decoding accepts messages up to 256 MiB (a Bigtable row may be that large).
//! 4. `UNAVAILABLE` and `DEADLINE_EXCEEDED` (and transport failures) map to
//!    [`Error::Unavailable`]; nothing else does.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bigtable_rs::bigtable::{BigTable, BigTableConnection};
use googleapis_tonic_google_bigtable_admin_v2::google::bigtable::admin::v2 as admin;
use kura_backend::Error;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use admin::bigtable_table_admin_client::BigtableTableAdminClient;

type BoxErr = Box<dyn StdError + Send + Sync>;

/// Deadline of every unary call (streams have none: a long scan is not an error).
pub const UNARY_DEADLINE: Duration = Duration::from_secs(60);
/// The largest message a call may receive.
pub const MAX_MESSAGE: usize = 256 << 20;
const ADMIN_SCOPE: &str = "https://www.googleapis.com/auth/bigtable.admin.table";
/// websafe base64 of `FeatureFlags{reverse_scans: true}`.
const FEATURES: &str = "CAE=";

/// A tonic channel that adds an OAuth bearer token (none on the emulator). tonic's interceptors
/// are synchronous and cannot await the token provider, hence a tower service.
#[derive(Clone)]
pub struct AuthChannel {
    inner: Channel,
    provider: Option<Arc<dyn gcp_auth::TokenProvider>>,
    scope: &'static str,
}

impl tower::Service<http::Request<tonic::body::Body>> for AuthChannel {
    type Response = http::Response<tonic::body::Body>;
    type Error = BoxErr;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut req: http::Request<tonic::body::Body>) -> Self::Future {
        // Use the channel that was polled ready; leave a clone behind.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let provider = self.provider.clone();
        let scope = self.scope;
        Box::pin(async move {
            if let Some(p) = provider {
                let tok = p.token(&[scope]).await?;
                let v = http::HeaderValue::from_str(&format!("Bearer {}", tok.as_str()))?;
                req.headers_mut().insert(http::header::AUTHORIZATION, v);
            }
            Ok(inner.call(req).await?)
        })
    }
}

pub type AdminClient = BigtableTableAdminClient<AuthChannel>;

/// Both clients and the names requests need.
#[derive(Clone)]
pub struct Conn {
    data: BigTable,
    admin: AdminClient,
    /// `projects/P/instances/I`.
    pub instance: String,
    pub app_profile: String,
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Unavailable(format!("{what}: {e}"))
}

impl Conn {
    /// Connect to the emulator at `host` (plaintext, no auth).
    pub async fn emulator(
        host: &str,
        project: &str,
        instance: &str,
        app_profile: String,
    ) -> kura_backend::Result<Conn> {
        let ch = Endpoint::from_shared(format!("http://{host}"))
            .map_err(|e| Error::InvalidArgument(format!("emulator address {host:?}: {e}")))?
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .map_err(|e| unavailable(&format!("Bigtable emulator at {host}"), e))?;
        let admin = BigtableTableAdminClient::new(AuthChannel {
            inner: ch,
            provider: None,
            scope: ADMIN_SCOPE,
        })
        .max_decoding_message_size(MAX_MESSAGE);
        let mut conn =
            BigTableConnection::new_with_emulator(host, project, instance, false, 1, None)
                .map_err(|e| unavailable(&format!("Bigtable emulator at {host}"), e))?;
        conn.configure_inner_client(|c| c.max_decoding_message_size(MAX_MESSAGE));
        Ok(Conn {
            data: conn.client(),
            admin,
            instance: format!("projects/{project}/instances/{instance}"),
            app_profile,
        })
    }

    /// Connect to Cloud Bigtable: TLS, Application Default Credentials.
    pub async fn cloud(
        project: &str,
        instance: &str,
        app_profile: String,
    ) -> kura_backend::Result<Conn> {
        let provider = gcp_auth::provider()
            .await
            .map_err(|e| Error::Unavailable(format!("Google credentials: {e}")))?;
        let tls = ClientTlsConfig::new()
            .with_webpki_roots()
            .domain_name("bigtableadmin.googleapis.com");
        let ch = Endpoint::from_static("https://bigtableadmin.googleapis.com:443")
            .tls_config(tls)
            .map_err(|e| Error::Internal(format!("TLS configuration: {e}")))?
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_while_idle(true)
            .connect_lazy();
        let admin = BigtableTableAdminClient::new(AuthChannel {
            inner: ch,
            provider: Some(provider.clone()),
            scope: ADMIN_SCOPE,
        })
        .max_decoding_message_size(MAX_MESSAGE);
        let mut conn = BigTableConnection::new_with_token_provider(
            project, instance, false, 1, None, provider,
        )
        .map_err(|e| unavailable("Cloud Bigtable", e))?;
        conn.configure_inner_client(|c| c.max_decoding_message_size(MAX_MESSAGE));
        Ok(Conn {
            data: conn.client(),
            admin,
            instance: format!("projects/{project}/instances/{instance}"),
            app_profile,
        })
    }

    /// The full name of a Bigtable table id.
    pub fn table_name(&self, id: &str) -> String {
        format!("{}/tables/{id}", self.instance)
    }

    /// A data-plane client (cheap clone of the shared channel).
    pub fn data(&self) -> BigTable {
        self.data.clone()
    }

    /// An admin client (cheap clone of the shared channel).
    pub fn admin(&self) -> AdminClient {
        self.admin.clone()
    }

    /// A data request with its routing metadata.
    pub fn data_request<T>(&self, table_name: &str, msg: T, unary: bool) -> tonic::Request<T> {
        let params = format!(
            "table_name={}&app_profile_id={}",
            urlencoding::encode(table_name),
            urlencoding::encode(&self.app_profile)
        );
        let mut r = tonic::Request::new(msg);
        if let Ok(v) = MetadataValue::try_from(params.as_str()) {
            r.metadata_mut().insert("x-goog-request-params", v);
        }
        r.metadata_mut()
            .insert("bigtable-features", MetadataValue::from_static(FEATURES));
        if unary {
            r.set_timeout(UNARY_DEADLINE);
        }
        r
    }

    /// An admin request with its routing metadata (`key` is `name` or `parent`).
    pub fn admin_request<T>(&self, key: &str, resource: &str, msg: T) -> tonic::Request<T> {
        let params = format!("{key}={}", urlencoding::encode(resource));
        let mut r = tonic::Request::new(msg);
        if let Ok(v) = MetadataValue::try_from(params.as_str()) {
            r.metadata_mut().insert("x-goog-request-params", v);
        }
        r.set_timeout(UNARY_DEADLINE);
        r
    }
}

/// Map a gRPC status of a call about `table` (the HBase name).
pub fn map_status(table: &str, s: &tonic::Status) -> Error {
    use tonic::Code;
    let msg = s.message();
    match s.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::ResourceExhausted => {
            Error::Unavailable(format!("Bigtable: {:?}: {msg}", s.code()))
        }
        Code::AlreadyExists if msg.contains("table") => Error::TableExists(table.to_string()),
        _ if names_missing_family(msg) => Error::NoSuchFamily {
            table: table.to_string(),
            family: quoted(msg).unwrap_or_default(),
        },
        Code::NotFound => Error::TableNotFound(table.to_string()),
        Code::InvalidArgument => Error::InvalidArgument(format!("Bigtable: {msg}")),
        code => Error::Internal(format!("Bigtable {code:?}: {msg}")),
    }
}

/// Does a status message say that a column family does not exist? (The emulator says
/// `unknown family "x"` with code UNKNOWN; Cloud Bigtable's wording and code may differ.)
fn names_missing_family(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("family")
        && [
            "unknown",
            "no such",
            "not found",
            "does not exist",
            "doesn't exist",
        ]
        .iter()
        .any(|w| m.contains(w))
}

/// The first double-quoted part of a message (`unknown family "x"` → `x`).
fn quoted(msg: &str) -> Option<String> {
    let start = msg.find('"')? + 1;
    let len = msg[start..].find('"')?;
    Some(msg[start..start + len].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_backend_errors() {
        let t = "t";
        let s = tonic::Status::not_found("table \"x\" not found");
        assert_eq!(map_status(t, &s), Error::TableNotFound("t".into()));
        let s = tonic::Status::already_exists("table \"x\" already exists");
        assert_eq!(map_status(t, &s), Error::TableExists("t".into()));
        let s = tonic::Status::unavailable("down");
        assert!(matches!(map_status(t, &s), Error::Unavailable(_)));
        let s = tonic::Status::deadline_exceeded("slow");
        assert!(matches!(map_status(t, &s), Error::Unavailable(_)));
        let s = tonic::Status::unknown("unknown family \"nofam\"");
        assert_eq!(
            map_status(t, &s),
            Error::NoSuchFamily {
                table: "t".into(),
                family: "nofam".into()
            }
        );
        let s = tonic::Status::not_found("Requested column family not found.");
        assert!(matches!(map_status(t, &s), Error::NoSuchFamily { .. }));
        let s = tonic::Status::unknown("boom");
        assert!(matches!(map_status(t, &s), Error::Internal(m) if m.contains("boom")));
    }
}
