//! The `HttpServer` that `main` runs, public so that tests build exactly the same one: the
//! middlewares around the App ([`crate::guard::Guard`], the metrics, compression, the state
//! provider), the connection limits, and the file-descriptor limit behind them.
//!
//! # Invariants
//! 1. Outermost to innermost: metrics (so that refusals and panics are counted), the guards,
//!    compression, the state provider; every handler finds `web::Data<AppState>`.
//! 2. The request head must arrive within the header timeout (slowloris).
//! 3. A request that arrives while the store opens waits for the state; it is never refused
//!    for it.

use crate::compress::Compress;
use crate::config::Config;
use crate::guard::{AuthToken, Guard};
use crate::state::StateSource;
use actix_web::body::MessageBody;
use actix_web::dev::{
    Extensions, Server, Service, ServiceFactory, ServiceRequest, ServiceResponse, Transform,
};
use actix_web::{web, App, Error, HttpServer};
use futures::future::{ready, Either, LocalBoxFuture, Ready};
use std::cell::OnceCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The process's open-file limit (soft), raised first to its hard limit: every region holds a
/// log and its segments open, every connection a socket, and the usual soft limit (1024) is
/// low for both. Connections are then held to a share of it ([`Config::connection_limit`]):
/// a flood of connections that took every descriptor made the next flush fail and poison
/// its region.
pub fn fd_limit() -> u64 {
    #[cfg(unix)]
    {
        use rustix::process::{getrlimit, setrlimit, Resource};
        let mut limit = getrlimit(Resource::Nofile);
        if let (Some(soft), hard) = (limit.current, limit.maximum) {
            let want = hard.unwrap_or(u64::MAX).min(1 << 20);
            if soft < want {
                limit.current = Some(want);
                if let Err(e) = setrlimit(Resource::Nofile, limit) {
                    tracing::warn!("could not raise the open-file limit from {soft}: {e}");
                }
            }
        }
        getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
    }
    #[cfg(not(unix))]
    {
        u64::MAX
    }
}

/// Middleware, innermost: registers the server's state as app data on every request (the
/// request waits for it while the store opens). One per worker: the worker's first request
/// after the state is set builds the data container, every later one shares it.
struct ProvideState {
    source: Arc<StateSource>,
}

impl<S, B> Transform<S, ServiceRequest> for ProvideState
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    B: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = Error;
    type Transform = ProvideStateService<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(ProvideStateService {
            service: Rc::new(service),
            source: Arc::clone(&self.source),
            container: Rc::new(OnceCell::new()),
        }))
    }
}

/// The service [`ProvideState`] builds.
struct ProvideStateService<S> {
    service: Rc<S>,
    source: Arc<StateSource>,
    container: Rc<OnceCell<Rc<Extensions>>>,
}

impl<S, B> Service<ServiceRequest> for ProvideStateService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    B: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = Error;
    type Future = Either<S::Future, LocalBoxFuture<'static, Result<ServiceResponse<B>, Error>>>;

    actix_web::dev::forward_ready!(service);

    fn call(&self, mut req: ServiceRequest) -> Self::Future {
        if let Some(data) = self.container.get() {
            req.add_data_container(Rc::clone(data));
            return Either::Left(self.service.call(req));
        }
        let (service, source, container) = (
            Rc::clone(&self.service),
            Arc::clone(&self.source),
            Rc::clone(&self.container),
        );
        Either::Right(Box::pin(async move {
            let state = source.wait().await;
            let data = container.get_or_init(|| {
                let mut data = Extensions::new();
                data.insert(state);
                Rc::new(data)
            });
            req.add_data_container(Rc::clone(data));
            service.call(req).await
        }))
    }
}

/// The App every worker of the server runs, over the state `source` publishes: the routes of
/// [`crate::configure`] inside the middlewares of the module doc. Tests build theirs with it
/// too, so that they go through exactly the server's stack.
pub fn app(
    source: Arc<StateSource>,
    guard: Guard,
    max_body: usize,
    compress: Compress,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = Error,
        InitError = (),
    >,
> {
    let metrics = Arc::clone(&source.ops().metrics);
    App::new()
        .app_data(web::PayloadConfig::new(max_body))
        .app_data(web::JsonConfig::default().limit(max_body))
        // Innermost: every handler finds `web::Data<AppState>`.
        .wrap(ProvideState { source })
        .wrap(compress)
        .wrap(guard)
        // Outermost, so that refusals and panics are counted too.
        .wrap(crate::ops::metrics::MetricsMiddleware::new(metrics))
        .configure(crate::configure)
}

/// Builds the server exactly as `main` runs it, bound; it starts its workers when first polled.
/// Handlers find the [`AppState`](crate::state::AppState) through `state` (requests wait until
/// it is set). With `register_arbiters`, each worker records its arbiter in `state` as it
/// starts, for `Kura::start_on` (thread per core). Signals are left to the caller, which must call
/// `Kura::shutdown` before the workers stop (thread per core) or after the server stops.
pub fn build_server(
    config: &Config,
    state: Arc<StateSource>,
    register_arbiters: bool,
    token: Option<String>,
) -> std::io::Result<Server> {
    let addrs = config
        .validate()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let max_body = config.max_body;
    let compress = Compress::new(config.compress_min_bytes);
    let guard = Guard::new(AuthToken(token), !config.allow_remote);
    let mut server = HttpServer::new(move || {
        if register_arbiters {
            state.register_current_arbiter();
        }
        app(Arc::clone(&state), guard.clone(), max_body, compress)
    })
    .client_request_timeout(Duration::from_secs(config.header_timeout_secs.max(1)))
    // actix leaves Nagle on by default: a response written as head + body then waits for the
    // client's delayed ACK (~40 ms on Linux) whenever it spans more than one segment.
    .tcp_nodelay(true)
    .shutdown_timeout(10)
    .disable_signals();
    let workers = config.worker_threads();
    let connections = config.connection_limit(fd_limit());
    server = server
        .workers(workers)
        .max_connections(connections.div_ceil(workers).max(1));
    Ok(server.bind(&addrs[..])?.run())
}
