//! What every handler receives: the store handle and the server's settings.

use kura_actors::client::Kura;

/// Limits on what a request may carry (RELIABILITY.md "Limits").
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_row_key: usize,
    pub max_qualifier: usize,
    pub max_value: usize,
    pub max_body: usize,
    pub max_scanners: usize,
    pub scanner_idle_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_row_key: 4 << 10,
            max_qualifier: 16 << 10,
            max_value: 10 << 20,
            max_body: 16 << 20,
            max_scanners: 1000,
            scanner_idle_secs: 60,
        }
    }
}

/// Shared application state, registered once as `web::Data<AppState>`.
pub struct AppState {
    pub kura: Kura,
    pub limits: Limits,
}
