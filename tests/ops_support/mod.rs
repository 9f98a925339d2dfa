//! Shared set-up for the `ops_*` tests: a real store in a temp dir behind the same `App` the
//! server builds, wrapped with the metrics middleware as `main.rs` wraps it.

#![allow(dead_code)]

use kura::state::{AppState, Limits};
use kura_actors::storage::model::{FamilyDescriptor, Mutation, RowMutation};
use kura_actors::{Kura, KuraConfig, SaltConfig, TableDescriptor};
use std::collections::BTreeMap;

/// A started store over a fresh temp dir (kept alive by the returned guard).
pub async fn start_kura() -> (Kura, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = KuraConfig::new(dir.path());
    config.arbiters = 2;
    config.default_regions = 2;
    let kura = Kura::start(config).await.expect("start kura");
    (kura, dir)
}

/// The state every handler receives.
pub fn state(kura: &Kura) -> actix_web::web::Data<AppState> {
    actix_web::web::Data::new(AppState::new(kura.clone().into(), Limits::default()))
}

/// Builds the server's App (with the metrics middleware) over `kura` as an in-process service;
/// `ops_app!(state, state)` builds it over a given state (to act on the server's `ops` too).
macro_rules! ops_app {
    ($kura:expr) => {
        ops_app!(ops_support::state(&$kura), state)
    };
    ($state:expr, state) => {{
        let state: actix_web::web::Data<kura::state::AppState> = $state;
        actix_web::test::init_service(
            actix_web::App::new()
                .wrap(kura::ops::metrics::MetricsMiddleware::new(
                    std::sync::Arc::clone(&state.ops.metrics),
                ))
                .app_data(state)
                .configure(kura::configure),
        )
        .await
    }};
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
