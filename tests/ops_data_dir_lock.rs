//! Two `kura` processes on one data directory: the second refuses to start, with a message that
//! says why, and the first keeps serving.
mod server_harness;
use server_harness::*;
use std::process::Command;

#[test]
fn a_second_server_on_a_busy_data_dir_exits_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Server::start(dir.path(), &[]);
    let out = Command::new(env!("CARGO_BIN_EXE_kura"))
        .arg("--bind")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--data-dir")
        .arg(dir.path())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run a second kura");
    assert!(!out.status.success(), "the second server must not start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("in use by another Kura server"),
        "stderr says why: {stderr}"
    );
    let mut http = first.client();
    let r = http.request("GET", "/healthz", &[], b"").expect("healthz");
    assert_eq!(r.status, 200, "the first server still serves");
}
