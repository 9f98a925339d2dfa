//! Schema operations against Google's Bigtable emulator.

mod common;

use common::{table, Emulator};
use kura_backend::{
    AlterMode, Backend, BackendKind, Error, FamilyDescriptor, Mutation, ReadSpec, RowMutation,
};

fn put(row: &str, fam: &str, q: &str, v: &str) -> RowMutation {
    RowMutation {
        row: row.into(),
        mutations: vec![Mutation::Put {
            family: fam.into(),
            qualifier: q.into(),
            timestamp: Some(1000),
            value: v.into(),
        }],
    }
}

#[tokio::test]
async fn tables_round_trip_through_create_list_alter_and_drop() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    assert_eq!(b.kind(), BackendKind::Bigtable);
    assert_eq!(b.location(), "projects/p/instances/i");
    assert_eq!(b.default_regions(), 0);
    assert!(b.list_tables().await.unwrap().is_empty());
    assert_eq!(b.table("t1").await.unwrap(), None);

    let mut desc = table("t1", &[("cf", 3, None), ("tl", 1, Some(3600))]);
    desc.attributes.insert("OWNER".into(), "me".into());
    b.create_table(desc.clone()).await.unwrap();
    b.create_table(table("a0", &[("x", 1, None)]))
        .await
        .unwrap();
    assert_eq!(b.table("t1").await.unwrap(), Some(desc.clone().into()));
    let names: Vec<String> = b
        .list_tables()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, vec!["a0", "t1"]);

    // Merge: add a family, change one.
    let merged = b
        .alter_table(
            table("t1", &[("new", 2, None), ("cf", 5, None)]),
            AlterMode::Merge,
        )
        .await
        .unwrap();
    let fams: Vec<(Vec<u8>, u32)> = merged
        .families
        .iter()
        .map(|f| (f.name.clone(), f.max_versions))
        .collect();
    assert_eq!(
        fams,
        vec![
            (b"cf".to_vec(), 5),
            (b"tl".to_vec(), 1),
            (b"new".to_vec(), 2)
        ]
    );
    assert_eq!(
        merged.attributes.get("OWNER").map(String::as_str),
        Some("me")
    );
    assert_eq!(b.table("t1").await.unwrap(), Some(merged.into()));
    b.mutate_rows("t1", vec![put("r", "new", "q", "v")])
        .await
        .unwrap();

    // Replace: families not listed are dropped, with their data.
    let replaced = b
        .alter_table(table("t1", &[("new", 2, None)]), AlterMode::Replace)
        .await
        .unwrap();
    assert_eq!(
        replaced.families,
        vec![FamilyDescriptor::new("new").with_max_versions(2)]
    );
    assert!(replaced.attributes.is_empty());
    let err = b
        .mutate_rows("t1", vec![put("r", "cf", "q", "v")])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoSuchFamily { .. }), "{err:?}");
    assert!(b
        .get("t1", b"r", &ReadSpec::default(), None)
        .await
        .unwrap()
        .is_some());

    b.drop_table("t1").await.unwrap();
    assert_eq!(b.table("t1").await.unwrap(), None);
    assert_eq!(
        b.drop_table("t1").await.unwrap_err(),
        Error::TableNotFound("t1".into())
    );
    let names: Vec<String> = b
        .list_tables()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, vec!["a0"]);
    // The name is free again.
    b.create_table(table("t1", &[("cf", 1, None)]))
        .await
        .unwrap();
}

#[tokio::test]
async fn creating_an_existing_table_answers_table_exists() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("dup", &[("cf", 1, None)]))
        .await
        .unwrap();
    let err = b
        .create_table(table("dup", &[("cf", 1, None)]))
        .await
        .unwrap_err();
    assert_eq!(err, Error::TableExists("dup".into()));
    // A second server sees the same tables.
    let other = emu.backend().await;
    let err = other
        .create_table(table("dup", &[("x", 1, None)]))
        .await
        .unwrap_err();
    assert_eq!(err, Error::TableExists("dup".into()));
    assert!(other.table("dup").await.unwrap().is_some());
}

#[tokio::test]
async fn bad_names_and_families_are_invalid_arguments() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    for desc in [
        table("a/b", &[("cf", 1, None)]),
        table("t", &[]),
        table("t", &[("a+b", 1, None)]),
        table("t", &[("_kura", 1, None)]),
    ] {
        let err = b.create_table(desc.clone()).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)),
            "{desc:?}: {err:?}"
        );
    }
}

#[tokio::test]
async fn names_too_long_for_bigtable_ids_still_work() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    let long = "L".repeat(100);
    b.create_table(table(&long, &[("cf", 1, None)]))
        .await
        .unwrap();
    b.create_table(table("kura_meta", &[("cf", 1, None)]))
        .await
        .unwrap();
    for name in [long.as_str(), "kura_meta"] {
        b.mutate_rows(name, vec![put("r", "cf", "q", name)])
            .await
            .unwrap();
        let row = b
            .get(name, b"r", &ReadSpec::default(), None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.cells[0].value, name.as_bytes());
    }
    let names: Vec<String> = b
        .list_tables()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, vec![long.clone(), "kura_meta".to_string()]);
    b.drop_table(&long).await.unwrap();
}

#[tokio::test]
async fn unknown_tables_and_families_are_reported() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    let err = b
        .get("nope", b"r", &ReadSpec::default(), None)
        .await
        .unwrap_err();
    assert_eq!(err, Error::TableNotFound("nope".into()));
    let err = b
        .mutate_rows("nope", vec![put("r", "cf", "q", "v")])
        .await
        .unwrap_err();
    assert_eq!(err, Error::TableNotFound("nope".into()));
    b.create_table(table("t", &[("cf", 1, None)]))
        .await
        .unwrap();
    let err = b
        .mutate_rows("t", vec![put("r", "zz", "q", "v")])
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::NoSuchFamily {
            table: "t".into(),
            family: "zz".into()
        }
    );
    let read = ReadSpec {
        columns: kura_backend::ColumnSelection(vec![kura_backend::ColumnSpec::Family(
            "_kura".into(),
        )]),
        ..ReadSpec::default()
    };
    let err = b.get("t", b"r", &read, None).await.unwrap_err();
    assert!(matches!(err, Error::NoSuchFamily { .. }), "{err:?}");
    // A family another server added is found without waiting for the cache.
    let other = emu.backend().await;
    b.get("t", b"r", &ReadSpec::default(), None).await.unwrap();
    other
        .alter_table(table("t", &[("added", 1, None)]), AlterMode::Merge)
        .await
        .unwrap();
    b.mutate_rows("t", vec![put("r", "added", "q", "v")])
        .await
        .unwrap();
}

/// Two servers creating one table at once (two Kura servers starting together both create the
/// applications' tables): one creates it, the other answers `TableExists`, and neither answers
/// before Bigtable has the table, so a write right after either answer lands.
#[tokio::test]
async fn concurrent_creates_of_one_table_answer_once_and_only_when_it_exists() {
    let emu = Emulator::start();
    let (a, b) = (emu.backend().await, emu.backend().await);
    for round in 0..5 {
        let name = format!("race{round}");
        let desc = table(&name, &[("cf", 1, None)]);
        let (ra, rb) = tokio::join!(a.create_table(desc.clone()), b.create_table(desc.clone()));
        let created = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
        assert_eq!(created, 1, "round {round}: {ra:?} {rb:?}");
        for (side, r) in [(&a, &ra), (&b, &rb)] {
            assert!(
                r.is_ok() || matches!(r, Err(Error::TableExists(_))),
                "round {round}: {r:?}"
            );
            side.mutate_rows(&name, vec![put("r", "cf", "q", "v")])
                .await
                .unwrap_or_else(|e| panic!("round {round}: a write after the create: {e}"));
        }
    }
}

/// Runs `cbt -project p -instance i ARGS` against the emulator.
fn cbt(emu: &Emulator, args: &[&str]) {
    let out = std::process::Command::new("cbt")
        .args(["-project", "p", "-instance", "i"])
        .args(args)
        .env("BIGTABLE_EMULATOR_HOST", &emu.host)
        .output()
        .expect("cbt runs (package google-cloud-cli-cbt)");
    assert!(
        out.status.success(),
        "cbt {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Another server's create in progress (its claim on the `kura_meta` row, written here with
/// cbt): the table is not visible, and a create of the same name waits for the claim's outcome
/// instead of racing it; once the claim is gone (that create failed) it creates the table.
#[tokio::test]
async fn a_table_being_created_elsewhere_is_invisible_and_a_second_create_waits_for_it() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("first", &[("cf", 1, None)]))
        .await
        .unwrap();
    cbt(
        &emu,
        &["set", "kura_meta", "table:ghost", "m:creating=ghost"],
    );
    assert_eq!(b.table("ghost").await.unwrap(), None);
    let names: Vec<String> = b
        .list_tables()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, vec!["first".to_string()]);

    let create = tokio::spawn(async move {
        let r = b.create_table(table("ghost", &[("cf", 1, None)])).await;
        (b, r)
    });
    // A window by design: the create must not finish in it while the claim stands.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!create.is_finished(), "the create must wait for the claim");
    cbt(&emu, &["deleterow", "kura_meta", "table:ghost"]);
    let (b, r) = tokio::time::timeout(std::time::Duration::from_secs(10), create)
        .await
        .expect("the create goes on once the claim is gone")
        .unwrap();
    r.unwrap();
    b.mutate_rows("ghost", vec![put("r", "cf", "q", "v")])
        .await
        .unwrap();
}
