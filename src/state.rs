//! What every handler receives: the store handle, the server's settings and what one server
//! keeps for itself (open REST scanners, the console's heatmap, the applications' clock, its
//! metrics and shutting-down flag).
//!
//! # Invariants
//! 1. Nothing in an [`AppState`] is shared with another server's: two servers in one process
//!    (tests) share only the store. Nothing the REST API or the applications promise to every
//!    client rests on it either, except the REST scanners, which live on the server that
//!    opened them (README: sticky sessions with several servers).

use kura_backend::Store;

/// Limits on what a request may carry (RELIABILITY.md "Limits").
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_row_key: usize,
    pub max_qualifier: usize,
    pub max_value: usize,
    pub max_body: usize,
    pub max_scanners: usize,
    pub scanner_idle_secs: u64,
    /// Longest pause while a request body arrives before the request is answered 408.
    pub body_idle_secs: u64,
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
            body_idle_secs: 30,
        }
    }
}

/// Shared application state, registered once as `web::Data<AppState>`: everything one server
/// keeps, so that two servers in one process (tests) share nothing by accident.
pub struct AppState {
    pub kura: Store,
    pub limits: Limits,
    /// The REST API's open scanners (a scanner lives on the server that created it).
    pub scanners: std::sync::Arc<crate::rest::scanners::Registry>,
    /// The console's heatmap series of this server's store.
    pub heatmap: std::sync::Arc<crate::ops::heatmap::Sampler>,
    /// The applications' clock of this server (`crate::apps::clock`): "now" for the
    /// applications' timestamps; its lease is opened by `main` on the embedded backend only.
    /// Tests of skewed servers replace it with a `Clock::skewed` one before serving.
    pub clock: std::sync::Arc<crate::apps::clock::Clock>,
    /// This server's metrics and shutting-down flag. A [`StateSource`] gives the state it
    /// publishes its own, which the server's metrics middleware records into from the first
    /// request.
    pub ops: std::sync::Arc<crate::ops::ServerOps>,
    /// When this server's state was built, ms since the epoch: the REST API's `startCode`.
    pub started_ms: i64,
}

impl AppState {
    /// The state of a server over `kura`, with no scanner open, no heatmap sampled yet, a
    /// fresh clock with no lease and nothing counted.
    pub fn new(kura: Store, limits: Limits) -> AppState {
        AppState {
            kura,
            limits,
            scanners: Default::default(),
            heatmap: Default::default(),
            clock: Default::default(),
            ops: new_ops(),
            started_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_millis() as i64),
        }
    }
}

/// A server's fresh [`crate::ops::ServerOps`], counting its REST scanners for `/metrics`.
fn new_ops() -> std::sync::Arc<crate::ops::ServerOps> {
    std::sync::Arc::new(crate::ops::ServerOps::new(
        crate::rest::scanners::open_count,
    ))
}

/// Where handlers find the [`AppState`]: set once the store is open.
///
/// A thread-per-core server must start its HTTP workers before the store, because the store's
/// regions run on the workers' threads (`Kura::start_on`); the listening socket is open by then.
/// A request that arrives before the state is set waits for it (the client sees a slow first
/// answer, never an error), then every request of that worker finds it without waiting.
///
/// # Invariants
/// 1. The state is set at most once; the workers' arbiters are registered at most once per
///    worker thread (an `App` is built per worker and per listening address).
/// 2. The published state's `ops` is the source's [`StateSource::ops`], which exists before the
///    state does: the server counts requests and can begin shutting down while the store opens.
pub struct StateSource {
    state: std::sync::OnceLock<actix_web::web::Data<AppState>>,
    ops: std::sync::Arc<crate::ops::ServerOps>,
    ready: tokio::sync::Notify,
    arbiters: parking_lot::Mutex<Vec<(std::thread::ThreadId, actix::ArbiterHandle)>>,
}

impl StateSource {
    /// A source whose state is set later ([`StateSource::set`]).
    pub fn pending() -> std::sync::Arc<StateSource> {
        StateSource::pending_with(new_ops())
    }

    fn pending_with(ops: std::sync::Arc<crate::ops::ServerOps>) -> std::sync::Arc<StateSource> {
        std::sync::Arc::new(StateSource {
            state: std::sync::OnceLock::new(),
            ops,
            ready: tokio::sync::Notify::new(),
            arbiters: parking_lot::Mutex::new(Vec::new()),
        })
    }

    /// A source whose state is there from the start.
    pub fn ready(state: AppState) -> std::sync::Arc<StateSource> {
        let source = StateSource::pending_with(std::sync::Arc::clone(&state.ops));
        source.set(state);
        source
    }

    /// A source publishing `state` as it is: a test keeps the same handle (and its `ops`) as
    /// the handlers find.
    pub fn ready_data(state: actix_web::web::Data<AppState>) -> std::sync::Arc<StateSource> {
        let source = StateSource::pending_with(std::sync::Arc::clone(&state.ops));
        if source.state.set(state).is_ok() {
            source.ready.notify_waiters();
        }
        source
    }

    /// Publish the state, with the source's [`StateSource::ops`] as its own, and wake every
    /// request waiting for it. A second call is ignored.
    pub fn set(&self, mut state: AppState) {
        state.ops = std::sync::Arc::clone(&self.ops);
        if self.state.set(actix_web::web::Data::new(state)).is_ok() {
            self.ready.notify_waiters();
        }
    }

    /// The server's metrics and shutting-down flag, there before the state is.
    pub fn ops(&self) -> &std::sync::Arc<crate::ops::ServerOps> {
        &self.ops
    }

    /// The state, once set.
    pub fn get(&self) -> Option<&actix_web::web::Data<AppState>> {
        self.state.get()
    }

    /// The state, waiting until it is set.
    pub async fn wait(&self) -> actix_web::web::Data<AppState> {
        loop {
            // Registered before the check, so that a `set` between the two is not missed.
            let notified = self.ready.notified();
            if let Some(state) = self.state.get() {
                return state.clone();
            }
            notified.await;
        }
    }

    /// Record the calling thread's arbiter (an HTTP worker building its `App`), once per thread.
    pub fn register_current_arbiter(&self) {
        let Some(arbiter) = actix::Arbiter::try_current() else {
            return;
        };
        let id = std::thread::current().id();
        let mut all = self.arbiters.lock();
        if !all.iter().any(|(t, _)| *t == id) {
            all.push((id, arbiter));
        }
    }

    /// The arbiters registered so far, in registration order.
    pub fn arbiters(&self) -> Vec<actix::ArbiterHandle> {
        self.arbiters
            .lock()
            .iter()
            .map(|(_, a)| a.clone())
            .collect()
    }
}
