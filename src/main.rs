//! The `kura` server binary: parse the configuration, open the store, serve HTTP, and on
//! SIGINT/SIGTERM stop accepting, drain, then flush and close every region.
//!
//! # Invariants
//! 1. `Kura::shutdown` runs after the HTTP server has stopped, so no acknowledged write races it.
//! 2. A refused configuration (remote bind without `--allow-remote`, unreadable token file) exits
//!    with status 2 before anything is opened.

use actix_web::web;
use clap::Parser;
use kura::config::Config;
use kura::state::AppState;
use kura_actors::Kura;
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc: a region's memtable is millions of small allocations
/// made on its actor's thread and freed, after a flush, on a background one. glibc makes that
/// free take the actor's arena lock a million times (stalling its reads and writes for a
/// quarter of a second); mimalloc hands remote frees back without a lock.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let config = Config::parse();
    if let Err(e) = config.validate() {
        tracing::error!("{e}");
        return std::process::ExitCode::from(2);
    }
    let token = match config.token() {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("{e}");
            return std::process::ExitCode::from(2);
        }
    };
    if config.allow_remote && token.is_none() {
        tracing::warn!(
            bind = %config.bind,
            "remote access is allowed but no token is set (KURA_TOKEN or --token-file): \
             anyone who can reach this address can read and write every table"
        );
    }
    let system = actix_rt::System::new();
    match system.block_on(run(config, token)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(config: Config, token: Option<String>) -> Result<(), String> {
    let started = std::time::Instant::now();
    let kura = Kura::start(config.kura_config()).await.map_err(|e| {
        format!(
            "cannot open the store in {}: {e}",
            config.data_dir.display()
        )
    })?;
    kura::ops::metrics::record_startup(started.elapsed());
    tracing::info!(
        took_ms = started.elapsed().as_millis() as u64,
        "store opened"
    );
    if let Err(e) = kura::apps::ensure_tables(&kura).await {
        tracing::warn!("cannot create the applications' tables yet: {e}");
    }
    let state = web::Data::new(AppState {
        kura: kura.clone(),
        limits: config.limits(),
    });
    let server = kura::server::build_server(&config, state, token)
        .map_err(|e| format!("cannot serve on {}: {e}", config.bind))?;
    tracing::info!(bind = %config.bind, data_dir = %config.data_dir.display(), "kura serving");
    let handle = server.handle();
    actix_rt::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested: draining HTTP connections");
        handle.stop(true).await;
    });
    let served = server.await;
    tracing::info!("HTTP stopped: flushing and closing every region");
    let closed = kura.shutdown().await;
    served.map_err(|e| format!("server error: {e}"))?;
    closed.map_err(|e| format!("shutdown error: {e}"))?;
    tracing::info!("clean shutdown");
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
