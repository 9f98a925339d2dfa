//! Starting a Kura server binary for a run (`--spawn-server PATH`).
//!
//! # Invariants
//! 1. The spawned server gets its own free port on 127.0.0.1 and its own temporary data
//!    directory, removed when the handle is dropped.
//! 2. The handle kills exactly the child it started (by its process handle), never by name.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::Conn;
use crate::error::{LoadError, Result};

/// A running server this tool started.
pub struct SpawnedServer {
    child: Child,
    /// `127.0.0.1:port`.
    pub addr: String,
    _data: tempfile::TempDir,
}

/// A free TCP port on 127.0.0.1 (bound then released).
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

impl SpawnedServer {
    /// Start `binary --bind 127.0.0.1:<free> --data-dir <tmp> [--workers N --arbiters N]
    /// [--durability D]
    /// [extra...]`, logging to `log_dir/server-<port>.log` when given.
    pub fn start(
        binary: &Path,
        arbiters: Option<usize>,
        durability: Option<&str>,
        extra: &[String],
        log_dir: Option<&Path>,
    ) -> Result<SpawnedServer> {
        let port = free_port()?;
        let addr = format!("127.0.0.1:{port}");
        let data = tempfile::Builder::new()
            .prefix("kura-load-data-")
            .tempdir()?;
        let mut cmd = Command::new(binary);
        cmd.arg("--bind")
            .arg(&addr)
            .arg("--data-dir")
            .arg(data.path());
        if let Some(a) = arbiters {
            // Thread per core (the server's default), the regions run on the HTTP workers: the
            // worker count is the region thread count. With `--thread-per-core false` in
            // `extra`, this gives as many HTTP workers as region arbiters.
            cmd.arg("--workers")
                .arg(a.to_string())
                .arg("--arbiters")
                .arg(a.to_string());
        }
        if let Some(d) = durability {
            cmd.arg("--durability").arg(d);
        }
        cmd.args(extra).stdin(Stdio::null());
        match log_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                let log: PathBuf = dir.join(format!("server-{port}.log"));
                let f = std::fs::File::create(log)?;
                cmd.stdout(f.try_clone()?).stderr(f);
            }
            None => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        let child = cmd.spawn().map_err(|e| {
            LoadError::Args(format!("cannot start server {}: {e}", binary.display()))
        })?;
        Ok(SpawnedServer {
            child,
            addr,
            _data: data,
        })
    }

    /// Whether the child already exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for SpawnedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Poll `GET /healthz` until it answers 200 or `wait` passes.
pub async fn wait_healthy(addr: &str, wait: Duration) -> Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        let mut conn = Conn::new(addr, Duration::from_secs(2))?;
        let last = match conn.get("/healthz").await {
            Ok(r) if r.status == 200 => return Ok(()),
            Ok(r) => format!("HTTP {}", r.status),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(LoadError::Setup {
                step: format!("wait for {addr}/healthz"),
                status: 0,
                body: last,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
