//! Starting Kura server binaries for a run (`--spawn-server PATH`, `--servers N`,
//! `--spawn-backend bigtable`).
//!
//! # Invariants
//! 1. The spawned server gets its own free port on 127.0.0.1 and its own temporary data
//!    directory, removed when the handle is dropped.
//! 2. The handle kills exactly the child it started (by its process handle), never by name.
//!    `--kill-after` kills it with SIGKILL and starts it again with the same command line: same
//!    port, same data directory, its log appended to.
//! 3. A [`Fleet`] on the Bigtable backend serves one instance (`p`/`i`) of one emulator from
//!    every server; an emulator the fleet started is killed after its servers.

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
    /// How it was started, to start it again on the same port and data dir.
    launch: Launch,
}

/// A server's command line, environment and log file.
struct Launch {
    binary: PathBuf,
    args: Vec<std::ffi::OsString>,
    env: Vec<(String, String)>,
    log: Option<PathBuf>,
}

impl Launch {
    /// Start the process; `append` keeps the log of an earlier start.
    fn spawn(&self, append: bool) -> Result<Child> {
        let mut cmd = Command::new(&self.binary);
        cmd.args(&self.args).stdin(Stdio::null());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        match &self.log {
            Some(log) => {
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(append)
                    .write(true)
                    .truncate(!append)
                    .open(log)?;
                cmd.stdout(f.try_clone()?).stderr(f);
            }
            None => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        cmd.spawn().map_err(|e| {
            LoadError::Args(format!(
                "cannot start server {}: {e}",
                self.binary.display()
            ))
        })
    }
}

/// A free TCP port on 127.0.0.1 (bound then released).
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

impl SpawnedServer {
    /// The process's id (a restart starts another process).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

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
        SpawnedServer::start_with_env(binary, arbiters, durability, extra, &[], log_dir)
    }

    /// [`SpawnedServer::start`] with extra environment variables.
    pub fn start_with_env(
        binary: &Path,
        arbiters: Option<usize>,
        durability: Option<&str>,
        extra: &[String],
        env: &[(&str, &str)],
        log_dir: Option<&Path>,
    ) -> Result<SpawnedServer> {
        let port = free_port()?;
        let addr = format!("127.0.0.1:{port}");
        let data = tempfile::Builder::new()
            .prefix("kura-load-data-")
            .tempdir()?;
        let mut args: Vec<std::ffi::OsString> = vec![
            "--bind".into(),
            addr.clone().into(),
            "--data-dir".into(),
            data.path().as_os_str().to_owned(),
        ];
        if let Some(a) = arbiters {
            // Thread per core (the server's default), the regions run on the HTTP workers: the
            // worker count is the region thread count. With `--thread-per-core false` in
            // `extra`, this gives as many HTTP workers as region arbiters.
            args.extend(["--workers".into(), a.to_string().into()]);
            args.extend(["--arbiters".into(), a.to_string().into()]);
        }
        if let Some(d) = durability {
            args.extend(["--durability".into(), d.into()]);
        }
        args.extend(extra.iter().map(Into::into));
        let log = match log_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                Some(dir.join(format!("server-{port}.log")))
            }
            None => None,
        };
        let launch = Launch {
            binary: binary.to_path_buf(),
            args,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            log,
        };
        Ok(SpawnedServer {
            child: launch.spawn(false)?,
            addr,
            _data: data,
            launch,
        })
    }

    /// Kill the server with SIGKILL (no shutdown of any kind) and reap it.
    pub fn kill9(&mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// Start the server again with the same command: same port, same data dir, its log
    /// appended to.
    pub fn restart(&mut self) -> Result<()> {
        if !self.exited() {
            return Err(LoadError::Args(format!(
                "server {} is still running; kill it before restarting",
                self.addr
            )));
        }
        self.child = self.launch.spawn(true)?;
        Ok(())
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

/// A running `kura-ceiling` (the trivial actix-web server): killed when dropped.
pub struct CeilingServer {
    child: Child,
    /// `127.0.0.1:port`.
    pub addr: String,
}

impl CeilingServer {
    /// The process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The `kura-ceiling` binary beside this executable (cargo builds both into one folder).
    pub fn default_binary() -> Option<PathBuf> {
        let exe = std::env::current_exe().ok()?;
        // `cargo bench --bench load` runs from target/*/deps: the binaries are one level up.
        let dir = exe.parent()?;
        [dir.join("kura-ceiling"), dir.parent()?.join("kura-ceiling")]
            .into_iter()
            .find(|p| p.is_file())
    }

    /// Start `binary --bind 127.0.0.1:<free>` with `workers` workers (0 = one per core) and
    /// wait until it answers.
    pub async fn start(binary: &Path, workers: usize) -> Result<CeilingServer> {
        let port = free_port()?;
        let addr = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(binary);
        cmd.arg("--bind").arg(&addr);
        if workers > 0 {
            cmd.arg("--workers").arg(workers.to_string());
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn().map_err(|e| {
            LoadError::Args(format!(
                "cannot start the ceiling server {}: {e}",
                binary.display()
            ))
        })?;
        let server = CeilingServer { child, addr };
        wait_healthy(&server.addr, Duration::from_secs(10)).await?;
        Ok(server)
    }
}

impl Drop for CeilingServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where spawned servers keep their data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SpawnBackend {
    /// Each server its own temporary data dir (one server only: two would not share data).
    Embedded,
    /// Every server on instance `p`/`i` of one Bigtable emulator (`--emulator-host`, or one
    /// started for the run).
    Bigtable,
}

/// The servers a run started (and the emulator they share, when the run started one).
pub struct Fleet {
    /// Dropped (killed) before the emulator: fields drop in declaration order.
    pub servers: Vec<SpawnedServer>,
    emulator: Option<kura_bigtable::emulator::Emulator>,
    /// The emulator the servers use (`host:port`), on the Bigtable backend.
    pub emulator_host: Option<String>,
}

/// How to start a [`Fleet`].
pub struct FleetSpec<'a> {
    pub binary: &'a Path,
    pub servers: usize,
    pub backend: SpawnBackend,
    /// An emulator already running (`host:port`); `None`: start one for this fleet.
    pub emulator_host: Option<&'a str>,
    pub arbiters: Option<usize>,
    pub durability: Option<&'a str>,
    pub extra: &'a [String],
    pub log_dir: Option<&'a Path>,
}

impl Fleet {
    /// Start the servers one after the other, each answering `/healthz` before the next starts.
    pub async fn start(spec: &FleetSpec<'_>) -> Result<Fleet> {
        if spec.servers == 0 {
            return Err(LoadError::Args("--servers must be at least 1".into()));
        }
        if spec.servers > 1 && spec.backend == SpawnBackend::Embedded {
            return Err(LoadError::Args(
                "--servers > 1 needs --spawn-backend bigtable: embedded servers do not share data"
                    .into(),
            ));
        }
        let mut fleet = Fleet {
            servers: Vec::new(),
            emulator: None,
            emulator_host: None,
        };
        let mut extra = spec.extra.to_vec();
        if spec.backend == SpawnBackend::Bigtable {
            let host = match spec.emulator_host {
                Some(h) => h.to_string(),
                None => {
                    // Emulator::start panics with how to install the emulator when it is missing.
                    let emu = std::panic::catch_unwind(kura_bigtable::emulator::Emulator::start)
                        .map_err(|_| {
                            LoadError::Args("could not start the Bigtable emulator".into())
                        })?;
                    let host = emu.host.clone();
                    fleet.emulator = Some(emu);
                    host
                }
            };
            extra.splice(
                0..0,
                [
                    "--backend",
                    "bigtable",
                    "--bigtable-project",
                    "p",
                    "--bigtable-instance",
                    "i",
                ]
                .map(String::from),
            );
            fleet.emulator_host = Some(host);
        }
        for _ in 0..spec.servers {
            let env: Vec<(&str, &str)> = fleet
                .emulator_host
                .as_deref()
                .map(|h| ("BIGTABLE_EMULATOR_HOST", h))
                .into_iter()
                .collect();
            let mut s = SpawnedServer::start_with_env(
                spec.binary,
                spec.arbiters,
                spec.durability,
                &extra,
                &env,
                spec.log_dir,
            )?;
            wait_healthy(&s.addr, Duration::from_secs(60)).await?;
            if s.exited() {
                return Err(LoadError::Args(format!("spawned server {} exited", s.addr)));
            }
            fleet.servers.push(s);
        }
        Ok(fleet)
    }

    /// The servers' addresses, in start order.
    pub fn addrs(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.addr.clone()).collect()
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
