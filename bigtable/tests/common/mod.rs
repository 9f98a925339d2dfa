//! Test support: Google's real Bigtable emulator (`cbtemulator`), one per test, on a free port.
//!
//! The binary is looked up on `PATH`, in the files of the Debian package
//! `google-cloud-cli-bigtable-emulator`, and at the gcloud SDK's usual place. Without it the
//! test fails with a message saying how to install it: these tests never pass silently.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use kura_backend::{FamilyDescriptor, TableDescriptor};
use kura_bigtable::{connect_to_emulator, BigtableBackend, BigtableConfig};

const SDK_PATH: &str = "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator";

fn find_binary() -> PathBuf {
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
    pub host: String,
}

impl Emulator {
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

    /// A backend connected to this emulator.
    pub async fn backend(&self) -> BigtableBackend {
        connect_to_emulator(
            BigtableConfig {
                project: "p".into(),
                instance: "i".into(),
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

/// A table with the given `(family, versions, ttl)`.
pub fn table(name: &str, families: &[(&str, u32, Option<u64>)]) -> TableDescriptor {
    TableDescriptor::new(
        name,
        families
            .iter()
            .map(|(f, v, t)| {
                FamilyDescriptor::new(f.as_bytes())
                    .with_max_versions(*v)
                    .with_ttl_secs(*t)
            })
            .collect(),
    )
}
