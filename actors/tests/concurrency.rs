//! Concurrent writers: increments total exactly, one CAS of N wins, writes group-commit.

mod common;
use common::*;
use kura_actors::*;

#[actix_rt::test]
async fn increments_from_64_tasks_total_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("c", 16, 4)).await.expect("create");
    let tasks: Vec<_> = (0..64)
        .map(|t| {
            let kura = kura.clone();
            actix_rt::spawn(async move {
                for _ in 0..30 {
                    let inc = Increment {
                        row: b"hits".to_vec(),
                        columns: vec![
                            (b"cf".to_vec(), b"n".to_vec(), 1),
                            (b"cf".to_vec(), format!("t{}", t % 4).into_bytes(), 2),
                        ],
                    };
                    kura.increment("c", inc).await.expect("increment");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    let row = kura
        .get("c", b"hits", &ReadSpec::default())
        .await
        .expect("get")
        .expect("row");
    let n = |q: &[u8]| {
        let c = row.cells.iter().find(|c| c.qualifier == q).expect("column");
        i64::from_be_bytes(c.value.as_slice().try_into().expect("8 bytes"))
    };
    assert_eq!(n(b"n"), 64 * 30);
    for t in 0..4 {
        assert_eq!(n(format!("t{t}").as_bytes()), 16 * 30 * 2);
    }
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn exactly_one_of_n_identical_check_and_puts_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("cas", 16, 4))
        .await
        .expect("create");
    let tasks: Vec<_> = (0..32)
        .map(|t| {
            let kura = kura.clone();
            actix_rt::spawn(async move {
                let cam = CheckAndMutate {
                    row: b"lock".to_vec(),
                    family: b"cf".to_vec(),
                    qualifier: b"owner".to_vec(),
                    expected: Vec::new(),
                    mutations: vec![Mutation::Put {
                        family: b"cf".to_vec(),
                        qualifier: b"owner".to_vec(),
                        timestamp: None,
                        value: format!("task{t}").into_bytes(),
                    }],
                };
                (t, kura.check_and_mutate("cas", cam).await.expect("cas"))
            })
        })
        .collect();
    let mut winners = Vec::new();
    for t in tasks {
        let (id, applied) = t.await.expect("task");
        if applied {
            winners.push(id);
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let row = kura
        .get("cas", b"lock", &ReadSpec::default())
        .await
        .expect("get")
        .expect("row");
    assert_eq!(value(&row), format!("task{}", winners[0]).as_bytes());
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn concurrent_sync_writes_share_fsyncs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.durability = storage::Durability::Sync;
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("g", 1, 1)).await.expect("create");
    let before = kura.regions("g").await.expect("regions")[0].stats.clone();
    let writes = 256;
    let futs = (0..writes).map(|i| kura.mutate("g", put(&key(i), b"v")));
    for r in futures::future::join_all(futs).await {
        r.expect("write");
    }
    let after = kura.regions("g").await.expect("regions")[0].stats.clone();
    let fsyncs = after.fsyncs - before.fsyncs;
    let synced = after.synced_writes - before.synced_writes;
    assert_eq!(
        synced, writes as u64,
        "every acknowledged write was fsynced"
    );
    assert!(fsyncs >= 1);
    assert!(
        fsyncs * 4 <= synced,
        "{writes} concurrent writes took {fsyncs} fsyncs: the region must batch them"
    );
    // Acknowledged means readable.
    for i in 0..writes {
        assert!(kura
            .get("g", &key(i), &ReadSpec::default())
            .await
            .expect("get")
            .is_some());
    }
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_full_region_answers_overloaded_instead_of_queueing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.in_flight_limit = 4;
    cfg.durability = storage::Durability::Sync;
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("o", 1, 1)).await.expect("create");
    // join_all polls every future before any answer can arrive, so all 64 requests are in
    // flight at once: only the first 4 fit.
    let futs = (0..64).map(|i| kura.mutate("o", put(&key(i), b"v")));
    let results = futures::future::join_all(futs).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let overloaded = results
        .iter()
        .filter(|r| matches!(r, Err(ActorError::Overloaded { .. })))
        .count();
    assert_eq!(ok, 4);
    assert_eq!(overloaded, 60);
    // Once answered, the slots are free again.
    kura.mutate("o", put(b"later", b"v"))
        .await
        .expect("write after the burst");
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn requests_their_callers_abandon_still_count_until_the_region_is_done_with_them() {
    use futures::FutureExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.in_flight_limit = 2;
    let kura = Kura::start(cfg).await.expect("start");
    kura.create_table(table("g", 4, 1)).await.expect("create");
    // Each request is sent, polled once, then dropped (a client that hung up): the region
    // has not run yet, so its messages are all still waiting in the mailbox.
    let (mut queued, mut overloaded) = (0, 0);
    for _ in 0..1_000 {
        match kura.get("g", b"x", &ReadSpec::default()).now_or_never() {
            None => queued += 1,
            Some(Err(ActorError::Overloaded { .. })) => overloaded += 1,
            Some(other) => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!((queued, overloaded), (2, 998), "the in-flight bound holds");
    // Once the region has dealt with the abandoned requests, their slots are free again.
    wait_until(
        "the abandoned requests free their slots",
        std::time::Duration::from_secs(10),
        async || match kura.get("g", b"x", &ReadSpec::default()).await {
            Ok(_) => true,
            Err(ActorError::Overloaded { .. }) => false,
            Err(e) => panic!("unexpected answer {e}"),
        },
    )
    .await;
    kura.shutdown().await.expect("shutdown");
}
