//! Interoperability with Google's own Bigtable tool: `cbt` reads back what Kura wrote through
//! the HBase REST API, and Kura reads what `cbt` wrote, over one real emulator. Timestamps
//! cross as HBase milliseconds on Kura's side and Bigtable microseconds on `cbt`'s.

mod support;

use kura_bigtable::emulator::Emulator;
use std::process::Command;
use support::*;

/// Runs `cbt -project p -instance i ARGS` against the emulator; its standard output.
fn cbt(emulator: &Emulator, args: &[&str]) -> String {
    let out = Command::new("cbt")
        .args(["-project", "p", "-instance", "i"])
        .args(args)
        .env("BIGTABLE_EMULATOR_HOST", &emulator.host)
        .output()
        .expect("cbt runs (package google-cloud-cli-cbt)");
    assert!(
        out.status.success(),
        "cbt {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn kura_over(emulator: &Emulator) -> Client {
    let backend = emulator.backend_on("i").await;
    let store = kura_backend::Store::new(std::sync::Arc::new(backend));
    client_over_store(store, kura::state::Limits::default()).await
}

#[actix_web::test]
async fn cbt_reads_the_cells_kura_wrote_with_their_timestamps() {
    let emulator = Emulator::start();
    let c = kura_over(&emulator).await;
    c.create_table("interop", &["cf"], 3).await;
    c.put_cell(
        "interop",
        "r1",
        "cf:a",
        Some(1_700_000_000_123),
        "from-kura",
    )
    .await;
    c.put_cell("interop", "r1", "cf:a", Some(1_700_000_000_456), "newer")
        .await;

    let tables = cbt(&emulator, &["ls"]);
    assert!(tables.lines().any(|l| l.trim() == "interop"), "{tables}");
    let read = cbt(&emulator, &["read", "interop"]);
    assert!(read.lines().any(|l| l.trim() == "r1"), "{read}");
    // Both versions, as microseconds (cbt prints them with 6 decimals of a second).
    assert!(read.contains("cf:a"), "{read}");
    assert!(
        read.contains("\"from-kura\"") && read.contains("\"newer\""),
        "{read}"
    );
    assert!(
        read.contains(".123000") && read.contains(".456000"),
        "{read}"
    );
    // The hidden family holds nothing for plain writes, and is never a user family.
    assert!(!read.contains("_kura:"), "{read}");
}

#[actix_web::test]
async fn kura_reads_the_cells_cbt_wrote_in_milliseconds() {
    let emulator = Emulator::start();
    let c = kura_over(&emulator).await;
    c.create_table("interop", &["cf"], 3).await;
    // cbt's timestamps are microseconds; a Kura table keeps millisecond granularity.
    cbt(
        &emulator,
        &["set", "interop", "r2", "cf:b=from-cbt@1700000000789000"],
    );
    let r = c.get_json("/interop/r2").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let cells = cells_of(&r.json());
    assert_eq!(cells.len(), 1, "{cells:?}");
    let (row, column, ts, value) = &cells[0];
    assert_eq!(row, "r2");
    assert_eq!(column, "cf:b");
    assert_eq!(value, "from-cbt");
    assert_eq!(*ts, 1_700_000_000_789);
}
