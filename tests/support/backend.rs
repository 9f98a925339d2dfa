//! Which backend the REST API and application suites run against. One suite serves both:
//! `KURA_TEST_BACKEND=bigtable` runs it over Google's Cloud Bigtable emulator (one emulator per
//! test), anything else over the embedded store in a temp dir (the default, what `cargo test`
//! runs). Where the backends differ by design (README, "Where the backends differ"), a test
//! asserts each backend's documented answer: [`TestStore::on_bigtable`] tells which.

#![allow(dead_code)]

use kura_actors::storage::Durability;
use kura_actors::{Kura, KuraConfig};
use kura_backend::Store;
use kura_bigtable::emulator::Emulator;

/// A running store and what keeps it alive (its data directory, or its emulator).
pub struct TestStore {
    pub store: Store,
    held: Held,
}

enum Held {
    Embedded { kura: Kura, _dir: tempfile::TempDir },
    Bigtable { _emulator: Emulator },
}

/// True when this test run is over Bigtable (`KURA_TEST_BACKEND=bigtable`).
pub fn bigtable_run() -> bool {
    std::env::var("KURA_TEST_BACKEND").is_ok_and(|v| v == "bigtable")
}

impl TestStore {
    /// A fresh store on the backend this run is for; `configure` adjusts the embedded store's
    /// settings (ignored on Bigtable, which has none of them).
    pub async fn start(configure: impl FnOnce(&mut KuraConfig)) -> TestStore {
        if bigtable_run() {
            let emulator = Emulator::start();
            let backend = emulator.backend().await;
            TestStore {
                store: Store::new(std::sync::Arc::new(backend)),
                held: Held::Bigtable {
                    _emulator: emulator,
                },
            }
        } else {
            let dir = tempfile::tempdir().expect("temp dir");
            let mut config = KuraConfig::new(dir.path());
            config.arbiters = 2;
            // These suites check behaviour, not durability: no fsync per write.
            config.durability = Durability::None;
            config.split_threshold = None;
            configure(&mut config);
            let kura = Kura::start(config).await.expect("store starts");
            TestStore {
                store: kura.clone().into(),
                held: Held::Embedded { kura, _dir: dir },
            }
        }
    }

    /// True over Bigtable.
    pub fn on_bigtable(&self) -> bool {
        matches!(self.held, Held::Bigtable { .. })
    }

    /// The embedded store's own handle (`None` over Bigtable), for what only it has.
    pub fn embedded(&self) -> Option<&Kura> {
        match &self.held {
            Held::Embedded { kura, .. } => Some(kura),
            Held::Bigtable { .. } => None,
        }
    }
}
