//! A flood of connections must not take the file descriptors the store needs: a region that
//! cannot create its next segment file fails its flush and is poisoned until a restart, so one
//! client holding many idle connections would turn into lasting unavailability of data.
#![cfg(unix)]

mod server_harness;

use server_harness::{create_table, free_port, healthy, wait_until, Http};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The open-file limit the server runs under, soft and hard: low, as a service manager's
/// default (1024) is low for a busy server.
const FD_LIMIT: u64 = 256;

#[test]
fn a_connection_flood_leaves_the_store_the_descriptors_its_flushes_need() {
    let dir = tempfile::tempdir().expect("tempdir");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let mut command = Command::new(env!("CARGO_BIN_EXE_kura"));
    command
        .arg("--bind")
        .arg(addr.to_string())
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--workers", "2"])
        .env("RUST_LOG", "error")
        .env_remove("KURA_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs in the child between fork and exec and only calls setrlimit, an
    // async-signal-safe system call; it touches no lock and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            let limit = rustix::process::Rlimit {
                current: Some(FD_LIMIT),
                maximum: Some(FD_LIMIT),
            };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)
                .map_err(std::io::Error::from)
        });
    }
    /// Kills the server however the test ends.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let server = Killed(command.spawn().expect("spawn kura"));
    let mut http = None;
    wait_until("kura answers /healthz", Duration::from_secs(60), || {
        http = healthy(addr);
        http.is_some()
    });
    let mut http = http.expect("a connection");
    create_table(&mut http, "t", &["cf"]);
    let put = |http: &mut Http, row: &str| {
        http.request(
            "PUT",
            &format!("/t/{row}/cf:a"),
            &[("Content-Type", "application/octet-stream")],
            b"v",
        )
        .expect("put")
        .status
    };
    for i in 0..20 {
        assert_eq!(put(&mut http, &format!("r{i}")), 200);
    }

    // More idle connections than the server has descriptors.
    let fds = format!("/proc/{}/fd", server.0.id());
    let open_fds = || std::fs::read_dir(&fds).map_or(0, |d| d.count()) as u64;
    let before = open_fds();
    let flood: Vec<_> = (0..FD_LIMIT + 50)
        .filter_map(|_| std::net::TcpStream::connect(addr).ok())
        .collect();
    // The server takes connections up to its limit (half its descriptors), this test's
    // first one included.
    wait_until(
        "the server takes connections up to its limit",
        Duration::from_secs(30),
        || open_fds() >= before + FD_LIMIT / 2 - 1,
    );
    // On the connection opened before the flood: a flush needs new files.
    let r = http
        .request("POST", "/admin/tables/t/flush", &[], b"")
        .expect("flush");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(put(&mut http, "after"), 200);
    drop(flood);
    let r = http.request("GET", "/t/after/cf:a", &[], b"").expect("get");
    assert_eq!(r.status, 200, "{}", r.text());
}
