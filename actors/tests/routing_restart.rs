//! The layout survives restarts: same buckets, same regions, same data; tables are created and
//! dropped durably.

mod common;
use common::*;
use kura_actors::*;

#[actix_rt::test]
async fn routing_is_stable_across_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 256, 4)).await.expect("create");
    // Fixed vectors: xxh3_64(key) % 256 (see salt.rs).
    assert_eq!(kura.bucket_of("t", b"row-1"), Some(SaltBucket::new(123)));
    assert_eq!(kura.bucket_of("t", b"row-2"), Some(SaltBucket::new(113)));
    for i in 0..200 {
        kura.mutate("t", put(&key(i), format!("v{i}").as_bytes()))
            .await
            .expect("put");
    }
    let before: Vec<(u64, u32, u32)> = kura
        .regions("t")
        .await
        .expect("regions")
        .iter()
        .map(|r| (r.id, r.bucket_start, r.bucket_end))
        .collect();
    assert_eq!(before.len(), 4);
    assert_eq!(
        before.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>(),
        vec![(0, 64), (64, 128), (128, 192), (192, 256)]
    );
    let buckets: Vec<Option<SaltBucket>> = (0..200).map(|i| kura.bucket_of("t", &key(i))).collect();
    kura.shutdown().await.expect("shutdown");
    assert!(matches!(
        kura.get("t", &key(0), &ReadSpec::default()).await,
        Err(ActorError::ShuttingDown)
    ));

    let kura = Kura::start(config(dir.path())).await.expect("restart");
    let after: Vec<(u64, u32, u32)> = kura
        .regions("t")
        .await
        .expect("regions")
        .iter()
        .map(|r| (r.id, r.bucket_start, r.bucket_end))
        .collect();
    assert_eq!(after, before);
    assert_eq!(kura.bucket_of("t", b"row-1"), Some(SaltBucket::new(123)));
    for (i, bucket) in buckets.iter().enumerate() {
        assert_eq!(kura.bucket_of("t", &key(i)), *bucket);
        let row = kura
            .get("t", &key(i), &ReadSpec::default())
            .await
            .expect("get")
            .expect("row");
        assert_eq!(value(&row), format!("v{i}").as_bytes());
    }
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn tables_are_created_and_dropped_durably() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("keep", 16, 2))
        .await
        .expect("create keep");
    kura.create_table(table("gone", 16, 2))
        .await
        .expect("create gone");
    assert!(matches!(
        kura.create_table(table("keep", 16, 2)).await,
        Err(ActorError::TableExists(_))
    ));
    assert!(matches!(
        kura.create_table(table("../etc", 16, 2)).await,
        Err(ActorError::InvalidArgument(_))
    ));
    assert!(matches!(
        kura.create_table(TableDescriptor::new("nofam", vec![]))
            .await,
        Err(ActorError::InvalidArgument(_))
    ));
    kura.mutate("gone", put(b"a", b"1")).await.expect("put");
    kura.mutate("keep", put(b"b", b"2")).await.expect("put");
    let names: Vec<String> = kura.list_tables().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["gone".to_string(), "keep".to_string()]);

    kura.drop_table("gone").await.expect("drop");
    assert!(matches!(
        kura.get("gone", b"a", &ReadSpec::default()).await,
        Err(ActorError::TableNotFound(_))
    ));
    assert!(matches!(
        kura.drop_table("gone").await,
        Err(ActorError::TableNotFound(_))
    ));
    assert!(kura.table("gone").is_none());
    kura.shutdown().await.expect("shutdown");

    let kura = Kura::start(config(dir.path())).await.expect("restart");
    assert!(kura.table("gone").is_none());
    assert!(kura.table("keep").is_some());
    assert_eq!(
        kura.get("keep", b"b", &ReadSpec::default())
            .await
            .expect("get")
            .map(|r| value(&r).to_vec()),
        Some(b"2".to_vec())
    );
    // Re-creating a dropped table starts empty.
    kura.create_table(table("gone", 16, 2))
        .await
        .expect("re-create");
    assert_eq!(
        kura.get("gone", b"a", &ReadSpec::default())
            .await
            .expect("get"),
        None
    );
    // Only the live regions have directories (asking for their stats waits for them to open).
    assert_eq!(kura.regions("gone").await.expect("regions").len(), 2);
    assert_eq!(kura.regions("keep").await.expect("regions").len(), 2);
    let dirs = std::fs::read_dir(dir.path().join("regions"))
        .expect("regions dir")
        .count();
    assert_eq!(dirs, 4);
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn orphan_region_directories_are_removed_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 16, 2)).await.expect("create");
    kura.shutdown().await.expect("shutdown");
    let regions = dir.path().join("regions");
    // Past the catalog's next id: a crash during a create, before its commit (empty).
    let created = regions.join("999");
    std::fs::create_dir_all(&created).expect("orphan");
    // Below it, and no longer named: a crash between a drop's commit and its deletion.
    let dropped = regions.join("0");
    std::fs::create_dir_all(&dropped).expect("orphan");
    std::fs::write(dropped.join("junk"), b"x").expect("junk");
    let kura = Kura::start(config(dir.path())).await.expect("restart");
    assert!(!created.exists() && !dropped.exists());
    assert_eq!(kura.regions("t").await.expect("regions").len(), 2);
    kura.shutdown().await.expect("shutdown");
}

/// A catalog restored from a backup older than a table leaves that table's region directories
/// unnamed: they are moved to `orphaned-regions/`, not deleted, so that the latest catalog and
/// the directories put back bring every row back.
#[actix_rt::test]
async fn regions_an_older_catalog_does_not_name_are_moved_aside_not_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 16, 2)).await.expect("create");
    kura.shutdown().await.expect("shutdown");
    let catalog = dir.path().join("catalog.json");
    let old = std::fs::read(&catalog).expect("catalog");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("u", 16, 2)).await.expect("create");
    kura.mutate("u", put(&key(1), b"kept")).await.expect("put");
    kura.shutdown().await.expect("shutdown");
    let latest = std::fs::read(&catalog).expect("catalog");

    std::fs::write(&catalog, &old).expect("restore an older catalog");
    let kura = Kura::start(config(dir.path())).await.expect("starts");
    assert!(
        kura.regions("u").await.is_err(),
        "u is not in the old catalog"
    );
    kura.shutdown().await.expect("shutdown");
    let aside = dir.path().join(kura_actors::router::ORPHANED_DIR);
    let moved: Vec<_> = std::fs::read_dir(&aside)
        .expect("orphaned-regions")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(moved.len(), 2, "{moved:?}");

    // Put back: the latest catalog and the directories.
    std::fs::write(&catalog, &latest).expect("restore the latest catalog");
    for from in moved {
        let to = dir
            .path()
            .join("regions")
            .join(from.file_name().expect("name"));
        std::fs::rename(&from, &to).expect("move back");
    }
    let kura = Kura::start(config(dir.path())).await.expect("restart");
    let row = kura
        .get("u", &key(1), &ReadSpec::default())
        .await
        .expect("get")
        .expect("row");
    assert_eq!(value(&row), b"kept");
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn alter_table_adds_and_replaces_families() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 16, 2)).await.expect("create");
    let put_d = RowMutation {
        row: b"r".to_vec(),
        mutations: vec![Mutation::Put {
            family: b"d".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: None,
            value: b"x".to_vec(),
        }],
    };
    assert!(matches!(
        kura.mutate("t", put_d.clone()).await,
        Err(ActorError::NoSuchFamily { .. })
    ));
    let add = TableDescriptor::new("t", vec![FamilyDescriptor::new("d").with_max_versions(3)]);
    let merged = kura
        .alter_table(add, AlterMode::Merge)
        .await
        .expect("alter");
    assert_eq!(merged.families.len(), 2);
    kura.mutate("t", put_d)
        .await
        .expect("put into the new family");
    kura.shutdown().await.expect("shutdown");
    let kura = Kura::start(config(dir.path())).await.expect("restart");
    let t = kura.table("t").expect("table");
    assert_eq!(
        t.families
            .iter()
            .map(|f| f.name.clone())
            .collect::<Vec<_>>(),
        vec![b"cf".to_vec(), b"d".to_vec()]
    );
    assert!(kura
        .get("t", b"r", &ReadSpec::default())
        .await
        .expect("get")
        .is_some());
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_second_server_on_the_same_data_dir_is_refused_until_the_first_shuts_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Kura::start(config(dir.path())).await.expect("start");
    first
        .create_table(table("t", 256, 2))
        .await
        .expect("create");
    first.mutate("t", put(b"r", b"v")).await.expect("put");
    match Kura::start(config(dir.path())).await {
        Err(ActorError::DataDirInUse(d)) => assert_eq!(d, dir.path().display().to_string()),
        Err(e) => panic!("expected DataDirInUse, got {e}"),
        Ok(_) => panic!("two servers opened one data directory"),
    }
    // The refused start changed nothing: the first server still serves.
    let row = first
        .get("t", b"r", &ReadSpec::default())
        .await
        .expect("get");
    assert!(row.is_some());
    first.shutdown().await.expect("shutdown");
    let second = Kura::start(config(dir.path()))
        .await
        .expect("start after shutdown");
    assert!(second
        .get("t", b"r", &ReadSpec::default())
        .await
        .expect("get")
        .is_some());
    second.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_table_remembers_the_region_count_it_started_with_across_a_changed_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.default_regions = 2;
    {
        let kura = Kura::start(cfg.clone()).await.expect("start");
        kura.create_table(table("t", 16, 1)).await.expect("create");
        let mut desc = table("u", 16, 1);
        desc.initial_regions = None; // the server's default decides
        kura.create_table(desc).await.expect("create");
        assert_eq!(kura.table("u").expect("u").initial_regions, Some(2));
        kura.shutdown().await.expect("shutdown");
    }
    cfg.default_regions = 4;
    let kura = Kura::start(cfg).await.expect("restart");
    let u = kura.table("u").expect("u");
    assert_eq!(u.initial_regions, Some(2), "not today's default");
    assert_eq!(kura.regions("u").await.expect("regions").len(), 2);
    kura.shutdown().await.expect("shutdown");
}

/// Every thread keeps its own copy of a table's routes; a drop and a re-create under the same
/// name must reach every thread's next request, here and on the arbiters, without a restart.
#[actix_rt::test]
async fn a_table_dropped_and_created_again_is_served_by_its_new_regions_on_every_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 16, 2)).await.expect("create");
    // Rows on every region, read from this thread and from each arbiter (caching the routes).
    let rows: Vec<Vec<u8>> = (0..32).map(key).collect();
    for row in &rows {
        kura.mutate("t", put(row, b"old")).await.expect("put");
    }
    let read_everywhere = |kura: Kura, rows: Vec<Vec<u8>>| async move {
        let mut seen = Vec::new();
        for arbiter in kura.arbiters() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (k, r) = (kura.clone(), rows.clone());
            arbiter.spawn(async move {
                let mut found = Vec::new();
                for row in &r {
                    let got = k.get("t", row, &ReadSpec::default()).await;
                    found.push(got.map(|r| r.map(|r| value(&r).to_vec())));
                }
                let _ = tx.send(found);
            });
            seen.push(rx.await.expect("arbiter answers"));
        }
        let mut here = Vec::new();
        for row in &rows {
            let got = kura.get("t", row, &ReadSpec::default()).await;
            here.push(got.map(|r| r.map(|r| value(&r).to_vec())));
        }
        seen.push(here);
        seen
    };
    for found in read_everywhere(kura.clone(), rows.clone()).await {
        for v in found {
            assert_eq!(v.expect("get"), Some(b"old".to_vec()));
        }
    }

    kura.drop_table("t").await.expect("drop");
    for found in read_everywhere(kura.clone(), rows.clone()).await {
        for v in found {
            assert!(matches!(v, Err(ActorError::TableNotFound(_))), "{v:?}");
        }
    }
    kura.create_table(table("t", 16, 4))
        .await
        .expect("re-create");
    for found in read_everywhere(kura.clone(), rows.clone()).await {
        for v in found {
            assert_eq!(v.expect("get"), None);
        }
    }
    kura.mutate("t", put(&rows[0], b"new")).await.expect("put");
    assert_eq!(kura.regions("t").await.expect("regions").len(), 4);
    for found in read_everywhere(kura.clone(), rows[..1].to_vec()).await {
        assert_eq!(found[0].as_ref().expect("get"), &Some(b"new".to_vec()));
    }
    kura.shutdown().await.expect("shutdown");
}

/// Requests a region had already received when the shutdown reached it are served, not refused:
/// its close queues behind them in the region's one mailbox and commits them first. Here the
/// writes are sent on the region's own thread, which is then held until the close has reached
/// the region's mailbox, so a close handled ahead of them would drop them.
#[actix_rt::test]
async fn writes_queued_before_a_shutdown_are_served_and_durable() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 16, 1)).await.expect("create");
    let region = &kura.regions("t").await.expect("regions")[0];
    let (tx, rx) = tokio::sync::oneshot::channel();
    let k = kura.clone();
    kura.arbiters()[region.arbiter].spawn(async move {
        let mut writes: futures::stream::FuturesUnordered<_> = (0..20)
            .map(|i| {
                let k = k.clone();
                async move { k.mutate("t", put(&key(i), b"queued")).await }
            })
            .collect();
        // One poll each: every write is in the region's mailbox.
        assert!(futures::poll!(writes.next()).is_pending());
        let mut shutdown = Box::pin(k.shutdown());
        assert!(futures::poll!(&mut shutdown).is_pending());
        // Hold the region's thread while the router sends the close. Nothing marks the
        // close's arrival in the mailbox, so this is a window long enough for it: a close
        // that came later would make the test check less, never fail wrongly.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let results: Vec<_> = writes.collect().await;
        let _ = tx.send(results);
        // The shutdown ends by stopping the arbiters, this one included.
        let _ = shutdown.await;
    });
    for res in rx.await.expect("the writer answers") {
        res.expect("a write queued before the shutdown is served");
    }
    // Waits for the shutdown under way to end.
    kura.shutdown().await.expect("shutdown");
    let kura = Kura::start(config(dir.path())).await.expect("restart");
    for i in 0..20 {
        let row = kura
            .get("t", &key(i), &ReadSpec::default())
            .await
            .expect("get");
        assert_eq!(row.map(|r| value(&r).to_vec()), Some(b"queued".to_vec()));
    }
    kura.shutdown().await.expect("shutdown");
}

/// A lost `catalog.json` next to region directories is a refusal to start that changes nothing,
/// not a fresh empty store that deletes every region as an orphan.
#[actix_rt::test]
async fn a_missing_catalog_next_to_regions_refuses_to_start_and_deletes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 16, 2)).await.expect("create");
    kura.mutate("t", put(&key(1), b"kept")).await.expect("put");
    kura.shutdown().await.expect("shutdown");
    let catalog = dir.path().join("catalog.json");
    let saved = std::fs::read(&catalog).expect("catalog");
    std::fs::remove_file(&catalog).expect("lose the catalog");
    let regions = || {
        std::fs::read_dir(dir.path().join("regions"))
            .expect("regions")
            .count()
    };
    let before = regions();
    let err = Kura::start(config(dir.path()))
        .await
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("catalog.json") && msg.contains("missing"),
        "{msg}"
    );
    assert_eq!(regions(), before, "no region directory was removed");
    // Restored from a backup: everything is there.
    std::fs::write(&catalog, saved).expect("restore");
    let kura = Kura::start(config(dir.path())).await.expect("restart");
    let row = kura
        .get("t", &key(1), &ReadSpec::default())
        .await
        .expect("get")
        .expect("row");
    assert_eq!(value(&row), b"kept");
    kura.shutdown().await.expect("shutdown");
}

/// A crash while the first table was being created (its region directories made, the first
/// catalog not yet written) leaves empty region directories and no catalog: the next start
/// serves (an empty store; the directories are orphans), instead of refusing as if a catalog
/// had been lost.
#[actix_rt::test]
async fn empty_region_directories_without_a_catalog_are_a_crash_during_the_first_create() {
    let dir = tempfile::tempdir().expect("tempdir");
    for id in ["1", "2"] {
        std::fs::create_dir_all(dir.path().join("regions").join(id)).expect("mkdir");
    }
    let kura = Kura::start(config(dir.path()))
        .await
        .expect("starts: nothing was ever acknowledged");
    kura.create_table(table("t", 16, 2)).await.expect("create");
    kura.mutate("t", put(&key(1), b"v")).await.expect("put");
    let row = kura
        .get("t", &key(1), &ReadSpec::default())
        .await
        .expect("get")
        .expect("row");
    assert_eq!(value(&row), b"v");
    kura.shutdown().await.expect("shutdown");
}

/// A region the catalog names whose directory is gone fails closed with an error that says so;
/// it is not served empty (its rows would read as absent), and the other regions serve on.
#[actix_rt::test]
async fn a_region_whose_directory_is_missing_fails_closed_and_the_others_serve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 16, 2)).await.expect("create");
    let regions = kura.regions("t").await.expect("regions");
    let in_region = |kura: &Kura, r: usize| {
        (0..)
            .map(key)
            .find(|k| {
                let b = kura.bucket_of("t", k).expect("bucket");
                (regions[r].bucket_start..regions[r].bucket_end).contains(&b.get())
            })
            .expect("a key")
    };
    let (lost, kept) = (in_region(&kura, 0), in_region(&kura, 1));
    for k in [&lost, &kept] {
        kura.mutate("t", put(k, b"v")).await.expect("put");
    }
    kura.shutdown().await.expect("shutdown");
    let gone = dir.path().join("regions").join(regions[0].id.to_string());
    std::fs::remove_dir_all(&gone).expect("lose a region directory");

    let kura = Kura::start(config(dir.path())).await.expect("restart");
    let err = kura
        .get("t", &lost, &ReadSpec::default())
        .await
        .expect_err("fails closed");
    assert!(
        matches!(&err, ActorError::RegionUnavailable { reason, .. } if reason.contains("missing")),
        "{err:?}"
    );
    assert!(kura.mutate("t", put(&lost, b"new")).await.is_err());
    assert!(!gone.exists(), "the region was not re-created empty");
    let row = kura
        .get("t", &kept, &ReadSpec::default())
        .await
        .expect("get")
        .expect("row");
    assert_eq!(value(&row), b"v");
    kura.shutdown().await.expect("shutdown");
}
