//! Online backups are the embedded backend's: on Bigtable, `POST /admin/backups` answers 400
//! naming what to use instead (Bigtable's own backups, or `kura export`).

mod support;

use actix_web::http::Method;
use kura_bigtable::emulator::Emulator;
use support::*;

#[actix_web::test]
async fn a_backup_on_the_bigtable_backend_is_refused_with_400() {
    let emulator = Emulator::start();
    let backend = emulator.backend_on("i").await;
    let store = kura_backend::Store::new(std::sync::Arc::new(backend));
    let c = client_over_store(store, kura::state::Limits::default()).await;
    let r = c.req(Method::POST, "/admin/backups", &[], "").await;
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    let body: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON error");
    assert_eq!(body["error"]["code"], "unsupported");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Bigtable's own backups") && message.contains("kura export"),
        "{message}"
    );
}
