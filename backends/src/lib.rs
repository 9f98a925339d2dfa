//! Opens the storage backend an operator chose and hands it over as a [`Store`].
//!
//! This is the only crate that names the implementations: the server's HTTP layer holds a
//! [`Store`] and nothing else, so that the crate graph shows the seam (`kura` → `kura-backend`;
//! `kura-backends` → `kura-actors` → `kura-storage`, and → `kura-bigtable`).

use kura_backend::{Result, Store};
use std::sync::Arc;

/// The embedded backend's settings and types, for the server's command line.
pub mod embedded {
    pub use kura_actors::KuraConfig as Config;
    pub use kura_storage::{Durability, RecoveryMode, DEFAULT_LOG_PREALLOC};
}

/// Start the embedded backend on its own arbiters (one region thread per core by default).
pub async fn start_embedded(config: embedded::Config) -> Result<Store> {
    let kura = kura_actors::Kura::start(config).await?;
    Ok(Store::new(Arc::new(kura)))
}

/// Start the embedded backend with its regions on the given arbiters (the HTTP workers' own
/// threads, for a thread-per-core server).
pub async fn start_embedded_on(
    config: embedded::Config,
    arbiters: Vec<actix::ArbiterHandle>,
) -> Result<Store> {
    let kura = kura_actors::Kura::start_on(config, arbiters).await?;
    Ok(Store::new(Arc::new(kura)))
}

pub use kura_bigtable::BigtableConfig;

/// Connect to a Cloud Bigtable instance: Google's emulator when `BIGTABLE_EMULATOR_HOST` is
/// set, otherwise the real service over TLS with Application Default Credentials.
pub async fn connect_bigtable(config: BigtableConfig) -> Result<Store> {
    let backend = kura_bigtable::connect(config).await?;
    Ok(Store::new(Arc::new(backend)))
}
