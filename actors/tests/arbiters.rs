//! The arbiter pool: pinning (`pin_arbiters`) and the default region count (one per arbiter).

mod common;
use common::*;
use kura_actors::*;

/// The CPUs the calling thread may run on.
fn allowed_cpus() -> Vec<usize> {
    core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect()
}

#[actix_rt::test]
async fn pinned_arbiters_each_run_on_one_cpu_of_their_own_and_serve() {
    let cpus = allowed_cpus();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.pin_arbiters = true;
    let kura = Kura::start(c).await.expect("start");
    let mut seen = Vec::new();
    for arbiter in kura.arbiters() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Queued after the pinning, which the arbiter runs first.
        assert!(arbiter.spawn_fn(move || {
            let _ = tx.send(allowed_cpus());
        }));
        seen.push(rx.await.expect("the arbiter answers"));
    }
    assert_eq!(seen.len(), 2);
    for (i, mask) in seen.iter().enumerate() {
        assert_eq!(mask, &vec![cpus[i % cpus.len()]], "arbiter {i}");
    }
    kura.create_table(table("p", 16, 4)).await.expect("create");
    let put = RowMutation {
        row: b"r".to_vec(),
        mutations: vec![Mutation::Put {
            family: b"cf".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: None,
            value: b"v".to_vec(),
        }],
    };
    kura.mutate("p", put).await.expect("put");
    let row = kura
        .get("p", b"r", &ReadSpec::default())
        .await
        .expect("get");
    assert_eq!(row.expect("row").cells[0].value, b"v");
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn arbiters_are_not_pinned_by_default() {
    let cpus = allowed_cpus();
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    let (tx, rx) = tokio::sync::oneshot::channel();
    assert!(kura.arbiters()[0].spawn_fn(move || {
        let _ = tx.send(allowed_cpus());
    }));
    assert_eq!(rx.await.expect("the arbiter answers"), cpus);
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn a_new_table_gets_one_region_per_arbiter_by_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.arbiters = 3;
    c.default_regions = 0;
    let kura = Kura::start(c).await.expect("start");
    assert_eq!(kura.config().default_regions, 3);
    let mut d = table("d", 16, 1);
    d.initial_regions = None;
    kura.create_table(d).await.expect("create");
    let regions = kura.regions("d").await.expect("regions");
    assert_eq!(regions.len(), 3);
    let mut arbiters: Vec<usize> = regions.iter().map(|r| r.arbiter).collect();
    arbiters.sort_unstable();
    assert_eq!(arbiters, vec![0, 1, 2], "one region on each arbiter");
    // A table that asks for its own count keeps it.
    kura.create_table(table("e", 16, 5)).await.expect("create");
    assert_eq!(kura.regions("e").await.expect("regions").len(), 5);
    kura.shutdown().await.expect("shutdown");
}

/// CPU time (user + system, in clock ticks) the calling thread has used.
#[cfg(target_os = "linux")]
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("/proc/thread-self/stat");
    // Fields after the command name (which may hold spaces): state is 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat format")
        .1
        .split_whitespace()
        .collect();
    let tick = |i: usize| fields[i - 3].parse::<u64>().expect("ticks");
    tick(14) + tick(15)
}

/// A region that has served a burst of requests looks at its empty queue for a few more passes
/// of its arbiter, then sleeps: an idle server takes no CPU (a region that kept polling would
/// hold its arbiter's thread at 100%).
#[cfg(target_os = "linux")]
#[actix_rt::test]
async fn arbiters_take_no_cpu_once_their_regions_are_idle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("i", 16, 4)).await.expect("create");
    let burst = (0..200).map(|i| kura.mutate("i", put(&key(i), b"v")));
    for res in futures::future::join_all(burst).await {
        res.expect("put");
    }
    let ticks = |kura: &Kura| {
        let asks = kura.arbiters().iter().map(|arbiter| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            assert!(arbiter.spawn_fn(move || {
                let _ = tx.send(thread_cpu_ticks());
            }));
            rx
        });
        futures::future::join_all(asks)
    };
    let before = ticks(&kura).await;
    // A window by design: the CPU the idle arbiters take over one second.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let after = ticks(&kura).await;
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        let (b, a) = (b.as_ref().expect("answers"), a.as_ref().expect("answers"));
        // 100 ticks a second of CPU; an idle arbiter uses none of them (a few for slack).
        assert!(
            a - b < 20,
            "arbiter {i} used {} ticks in an idle second",
            a - b
        );
    }
    kura.shutdown().await.expect("shutdown");
}
