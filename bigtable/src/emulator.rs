//! Google's Cloud Bigtable emulator (`cbtemulator`), started on a free loopback port for tests,
//! benches and trying Kura out; killed when its [`Emulator`] is dropped.
//!
//! The binary is looked up on `PATH`, in the files of the Debian package
//! `google-cloud-cli-bigtable-emulator`, and at the gcloud SDK's usual place. Without it,
//! [`Emulator::start`] panics with a message saying how to install it: a test that needs the
//! emulator never passes silently without one.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::{connect_to_emulator, BigtableBackend, BigtableConfig};

const SDK_PATH: &str = "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator";

/// Where the emulator binary is (panics with how to install it when it is nowhere).
pub fn find_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("cbtemulator");
            if p.is_file() {
                return p;
            }
        }
    }
    if let Ok(out) = Command::new("dpkg")
        .args(["-L", "google-cloud-cli-bigtable-emulator"])
        .output()
    {
        let listing = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(line) = listing.lines().find(|l| l.ends_with("/cbtemulator")) {
            let p = PathBuf::from(line);
            if p.is_file() {
                return p;
            }
        }
    }
    let p = PathBuf::from(SDK_PATH);
    if p.is_file() {
        return p;
    }
    panic!(
        "the Bigtable emulator (cbtemulator) was not found on PATH, in the package \
         google-cloud-cli-bigtable-emulator, or at {SDK_PATH}; install it \
         (apt-get install google-cloud-cli-bigtable-emulator) to run these tests"
    );
}

/// A running emulator; killed when dropped.
pub struct Emulator {
    child: Child,
    /// `127.0.0.1:PORT`, what `BIGTABLE_EMULATOR_HOST` takes.
    pub host: String,
}

impl Emulator {
    /// Start one on a free loopback port and wait until it says it is running.
    pub fn start() -> Emulator {
        let bin = find_binary();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut child = Command::new(&bin)
            .args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let (tx, rx) = mpsc::channel();
        for out in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if line.contains("running") {
                        let _ = tx.send(());
                    }
                }
            });
        }
        let mut emu = Emulator {
            child,
            host: format!("127.0.0.1:{port}"),
        };
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = emu.child.kill();
            panic!("{} did not say it was running within 30 s", bin.display());
        }
        emu
    }

    /// A backend connected to this emulator, on project `p` and instance `i`.
    pub async fn backend(&self) -> BigtableBackend {
        self.backend_on("i").await
    }

    /// A backend connected to this emulator on instance `instance` of project `p`: the
    /// emulator keeps each instance's tables apart, so tests sharing it need not share tables.
    pub async fn backend_on(&self, instance: &str) -> BigtableBackend {
        connect_to_emulator(
            BigtableConfig {
                project: "p".into(),
                instance: instance.into(),
                app_profile: None,
            },
            &self.host,
        )
        .await
        .expect("connect to the emulator")
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
