//! The server turns transparent huge pages off for itself (Linux) once its regions have opened:
//! the first touch of a 2 MiB huge page zeroes it in one page fault that stalls every request
//! its thread was serving (benches/README.md, the huge-page figures). `--transparent-huge-pages` leaves
//! the system's choice.
#![cfg(target_os = "linux")]
mod server_harness;
use server_harness::*;

/// `THP_enabled` of `/proc/PID/status`: 0 once the process called `PR_SET_THP_DISABLE`.
fn thp_enabled(server: &Server) -> String {
    let pid = server.pid().expect("the server runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(|v| v.trim().to_string())
        .expect("THP_enabled in /proc/PID/status (Linux 5.0 and later)")
}

#[test]
fn the_server_runs_without_transparent_huge_pages_by_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    // Turned off once every region has opened (recovery keeps them): shortly after start.
    poll_until(std::time::Duration::from_secs(20), || {
        thp_enabled(&server) == "0"
    });
    assert_eq!(thp_enabled(&server), "0");
}

#[test]
fn transparent_huge_pages_flag_leaves_them_to_the_system() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--transparent-huge-pages"]);
    assert_eq!(thp_enabled(&server), "1");
}
