//! Idempotency keys on Google's Bigtable emulator: applied at most once, every reply the
//! first outcome, stale attempts taken over.

mod common;

use std::sync::Arc;

use bigtable_rs::bigtable::BigTableConnection;
use bigtable_rs::google::bigtable::v2;
use common::{table, Emulator};
use kura_backend::{
    Append, Backend, CheckAndMutate, Error, Increment, Mutation, ReadSpec, RowMutation,
};

fn inc(n: i64) -> Increment {
    Increment {
        row: b"r".to_vec(),
        columns: vec![(b"cf".to_vec(), b"n".to_vec(), n)],
    }
}

fn counter(cells: &[kura_backend::Cell]) -> i64 {
    i64::from_be_bytes(cells[0].value.as_slice().try_into().unwrap())
}

async fn stored(b: &kura_bigtable::BigtableBackend, q: &str) -> Option<Vec<u8>> {
    let read = ReadSpec {
        columns: kura_backend::ColumnSelection(vec![kura_backend::ColumnSpec::Column(
            b"cf".to_vec(),
            q.into(),
        )]),
        ..ReadSpec::default()
    };
    b.get("t", b"r", &read, None)
        .await
        .unwrap()
        .map(|r| r.cells[0].value.clone())
}

#[tokio::test]
async fn a_retried_keyed_increment_is_applied_once_and_answers_the_first_values() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("cf", 1, None)]))
        .await
        .unwrap();
    let first = b
        .increment("t", inc(5), Some(b"k1".to_vec()))
        .await
        .unwrap();
    assert_eq!(counter(&first), 5);
    let again = b
        .increment("t", inc(5), Some(b"k1".to_vec()))
        .await
        .unwrap();
    assert_eq!(again, first);
    // Another key, and no key, apply.
    assert_eq!(
        counter(
            &b.increment("t", inc(5), Some(b"k2".to_vec()))
                .await
                .unwrap()
        ),
        10
    );
    assert_eq!(counter(&b.increment("t", inc(1), None).await.unwrap()), 11);
    // The record is not data.
    let row = b
        .get("t", b"r", &ReadSpec::default(), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.cells.len(), 1);
    // Keyed increments check what the store checks, exactly.
    b.mutate_rows(
        "t",
        vec![RowMutation {
            row: b"r".to_vec(),
            mutations: vec![Mutation::Put {
                family: b"cf".to_vec(),
                qualifier: b"max".to_vec(),
                timestamp: None,
                value: i64::MAX.to_be_bytes().to_vec(),
            }],
        }],
    )
    .await
    .unwrap();
    let over = Increment {
        row: b"r".to_vec(),
        columns: vec![(b"cf".to_vec(), b"max".to_vec(), 1)],
    };
    let err = b
        .increment("t", over, Some(b"k3".to_vec()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::CounterOverflow(_)), "{err:?}");
    assert_eq!(
        stored(&b, "max").await,
        Some(i64::MAX.to_be_bytes().to_vec())
    );
}

#[tokio::test]
async fn concurrent_attempts_with_one_key_apply_once() {
    let emu = Emulator::start();
    let servers: Vec<Arc<kura_bigtable::BigtableBackend>> =
        vec![Arc::new(emu.backend().await), Arc::new(emu.backend().await)];
    servers[0]
        .create_table(table("t", &[("cf", 1, None)]))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let b = servers[i % 2].clone();
            tokio::spawn(async move { b.increment("t", inc(3), Some(b"same".to_vec())).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap().unwrap());
    }
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    assert_eq!(counter(&answers[0]), 3);
    assert_eq!(
        stored(&servers[0], "n").await,
        Some(3i64.to_be_bytes().to_vec())
    );
    // Concurrent keyed increments under different keys all apply (conflicts retry).
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let b = servers[i % 2].clone();
            let key = format!("k{i}").into_bytes();
            tokio::spawn(async move { b.increment("t", inc(1), Some(key)).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(
        stored(&servers[0], "n").await,
        Some(9i64.to_be_bytes().to_vec())
    );
}

#[tokio::test]
async fn a_keyed_check_and_mutate_answers_its_first_outcome() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("cf", 1, None)]))
        .await
        .unwrap();
    let cam = |expected: &[u8], v: &[u8]| CheckAndMutate {
        row: b"r".to_vec(),
        family: b"cf".to_vec(),
        qualifier: b"q".to_vec(),
        expected: expected.to_vec(),
        mutations: vec![Mutation::Put {
            family: b"cf".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: None,
            value: v.to_vec(),
        }],
    };
    let key = || Some(b"c1".to_vec());
    assert!(b
        .check_and_mutate("t", cam(b"", b"one"), key())
        .await
        .unwrap());
    // The retry does not check again (the column is no longer empty), nor apply.
    assert!(b
        .check_and_mutate("t", cam(b"", b"again"), key())
        .await
        .unwrap());
    assert_eq!(stored(&b, "q").await, Some(b"one".to_vec()));
    // A failed check is remembered too, even once the check would pass.
    assert!(!b
        .check_and_mutate("t", cam(b"two", b"x"), Some(b"c2".to_vec()))
        .await
        .unwrap());
    assert!(b
        .check_and_mutate("t", cam(b"one", b"two"), None)
        .await
        .unwrap());
    assert!(!b
        .check_and_mutate("t", cam(b"two", b"x"), Some(b"c2".to_vec()))
        .await
        .unwrap());
    assert_eq!(stored(&b, "q").await, Some(b"two".to_vec()));
    // The positive form applies with a fresh key.
    assert!(b
        .check_and_mutate("t", cam(b"two", b"three"), Some(b"c3".to_vec()))
        .await
        .unwrap());
    assert_eq!(stored(&b, "q").await, Some(b"three".to_vec()));
    // A key reused for another kind of request.
    let err = b.increment("t", inc(1), key()).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
}

#[tokio::test]
async fn a_keyed_append_is_applied_once() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("cf", 1, None)]))
        .await
        .unwrap();
    let app = Append {
        row: b"r".to_vec(),
        columns: vec![(b"cf".to_vec(), b"s".to_vec(), b"ab".to_vec())],
        max_value: Some(6),
    };
    let first = b
        .append("t", app.clone(), Some(b"a1".to_vec()))
        .await
        .unwrap();
    assert_eq!(first[0].value, b"ab");
    assert_eq!(
        b.append("t", app.clone(), Some(b"a1".to_vec()))
            .await
            .unwrap(),
        first
    );
    assert_eq!(
        b.append("t", app.clone(), Some(b"a2".to_vec()))
            .await
            .unwrap()[0]
            .value,
        b"abab"
    );
    assert_eq!(
        b.append("t", app.clone(), Some(b"a3".to_vec()))
            .await
            .unwrap()[0]
            .value,
        b"ababab"
    );
    let err = b.append("t", app, Some(b"a4".to_vec())).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert_eq!(stored(&b, "s").await, Some(b"ababab".to_vec()));
}

#[tokio::test]
async fn a_stale_pending_attempt_is_taken_over() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("cf", 1, None)]))
        .await
        .unwrap();
    // An attempt that claimed the key a minute ago and died.
    let old_us = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 60_000)
        * 1000;
    let conn = BigTableConnection::new_with_emulator(&emu.host, "p", "i", false, 1, None).unwrap();
    conn.client()
        .mutate_row(v2::MutateRowRequest {
            table_name: "projects/p/instances/i/tables/t".into(),
            row_key: b"r".to_vec(),
            mutations: vec![v2::Mutation {
                mutation: Some(v2::mutation::Mutation::SetCell(v2::mutation::SetCell {
                    family_name: "_kura".into(),
                    column_qualifier: b"idem/dead".to_vec(),
                    timestamp_micros: old_us,
                    value: b"Pdead-attempt".to_vec(),
                })),
            }],
            ..Default::default()
        })
        .await
        .unwrap();
    let got = b
        .increment("t", inc(4), Some(b"dead".to_vec()))
        .await
        .unwrap();
    assert_eq!(counter(&got), 4);
    assert_eq!(
        b.increment("t", inc(4), Some(b"dead".to_vec()))
            .await
            .unwrap(),
        got
    );
}
