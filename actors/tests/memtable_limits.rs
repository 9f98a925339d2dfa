//! What flushes a memtable before it reaches its region's budget.
//!
//! - The server's memtable budget (`KuraConfig::memtable_total`, the server's
//!   `--memtable-total-mb`): past it, the regions that write and hold their share of the
//!   memtables flush, so that the memtables of all regions together stay near the budget
//!   however many regions there are, a region that stopped writing included; without one,
//!   every region fills its own memtable up to its own budget.
//! - Their age (`KuraConfig::memtable_max_age`, `--memtable-max-age-secs`): a memtable whose
//!   oldest write is older than the limit flushes however little it holds, and an empty one
//!   never does.

mod common;
use common::*;
use kura_actors::*;

/// 1,000 bytes into each of `rows` of table `t`, 100 rows a batch.
async fn write_rows(kura: &Kura, rows: impl Iterator<Item = Vec<u8>>) {
    let rows: Vec<Vec<u8>> = rows.collect();
    for chunk in rows.chunks(100) {
        let batch = chunk.iter().map(|k| put(k, &[b'v'; 1000])).collect();
        kura.mutate_rows("t", batch).await.expect("write");
    }
}

/// 16,000 rows (about 16 MiB of memtable), spread over every region.
async fn write_16_mib(kura: &Kura) {
    write_rows(kura, (0..16_000).map(key)).await;
}

/// The bytes the memtables of table `t`'s regions hold, and their segments.
async fn held(kura: &Kura) -> (u64, u64) {
    let regions = kura.regions("t").await.expect("regions");
    regions.iter().fold((0, 0), |(bytes, segments), r| {
        (bytes + r.stats.memtable_bytes, segments + r.stats.segments)
    })
}

/// A server whose regions may hold 64 MiB of memtable each, `regions` regions on two arbiters.
async fn server(dir: &std::path::Path, memtable_total: usize, regions: u32) -> Kura {
    let mut c = config(dir);
    c.memtable_total = memtable_total;
    server_with(c, regions).await
}

/// A server as `c` says, but with 64 MiB memtables, and its table `t` of `regions` regions.
async fn server_with(mut c: KuraConfig, regions: u32) -> Kura {
    c.memtable_budget = 64 << 20;
    let kura = Kura::start(c).await.expect("start");
    kura.create_table(table("t", 16, regions))
        .await
        .expect("create");
    kura
}

/// `n` rows, all in region `region` (its index in the table's regions); their keys.
async fn write_to_region(kura: &Kura, region: usize, n: usize) -> Vec<Vec<u8>> {
    let r = &kura.regions("t").await.expect("regions")[region];
    let buckets = r.bucket_start..r.bucket_end;
    let rows: Vec<Vec<u8>> = (0..)
        .map(key)
        .filter(|k| buckets.contains(&kura.bucket_of("t", k).unwrap().get()))
        .take(n)
        .collect();
    write_rows(kura, rows.iter().cloned()).await;
    rows
}

#[actix_rt::test]
async fn past_the_servers_budget_the_regions_that_write_flush() {
    let dir = tempfile::tempdir().unwrap();
    let kura = server(dir.path(), 4 << 20, 4).await;
    write_16_mib(&kura).await;
    // The flushes run in the background: the memtables come down to about the budget (each
    // region may refill its memtable while its flush runs).
    within("the memtables under twice the budget", async {
        loop {
            let (bytes, segments) = held(&kura).await;
            if bytes <= 8 << 20 && segments > 0 {
                break;
            }
            actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    for i in [0, 7_999, 15_999] {
        let row = kura.get("t", &key(i), &ReadSpec::default()).await.unwrap();
        assert_eq!(value(&row.expect("row")), &[b'v'; 1000]);
    }
    kura.shutdown().await.unwrap();
}

#[actix_rt::test]
async fn without_a_servers_budget_each_region_fills_its_own_memtable() {
    let dir = tempfile::tempdir().unwrap();
    let kura = server(dir.path(), 0, 4).await;
    write_16_mib(&kura).await;
    let (bytes, segments) = held(&kura).await;
    assert!(bytes > 12 << 20, "{bytes} bytes held");
    assert_eq!(segments, 0);
    kura.shutdown().await.unwrap();
}

/// Over the budget because of a region that stopped writing (it holds 3 MiB, more than its
/// share of a 4 MiB budget over two regions) while the one still writing holds less than its
/// share: the idle one flushes by itself.
#[actix_rt::test]
async fn a_region_that_stopped_writing_flushes_its_share_of_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let kura = server(dir.path(), 4 << 20, 2).await;
    write_to_region(&kura, 0, 3_000).await;
    write_to_region(&kura, 1, 1_500).await;
    within("the idle region's flush", async {
        loop {
            let regions = kura.regions("t").await.expect("regions");
            if regions[0].stats.segments > 0 {
                assert_eq!(
                    regions[1].stats.segments, 0,
                    "the writer holds less than its share"
                );
                break;
            }
            actix_rt::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    kura.shutdown().await.unwrap();
}

/// 100 KB into one region of two, with a 300 ms age limit: that region's memtable flushes, not
/// before its oldest write is 300 ms old, and the region nobody wrote to flushes nothing.
#[actix_rt::test]
async fn a_memtable_flushes_once_its_oldest_write_is_past_the_age_limit() {
    let dir = tempfile::tempdir().unwrap();
    let limit = std::time::Duration::from_millis(300);
    let mut c = config(dir.path());
    c.memtable_max_age = Some(limit);
    let kura = server_with(c, 2).await;
    let first_write = std::time::Instant::now();
    let rows = write_to_region(&kura, 0, 100).await;
    within("the old memtable's flush", async {
        loop {
            let regions = kura.regions("t").await.expect("regions");
            if regions[0].stats.segments > 0 && regions[0].stats.memtable_bytes == 0 {
                break;
            }
            actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(first_write.elapsed() >= limit, "flushed before the limit");
    let regions = kura.regions("t").await.expect("regions");
    assert_eq!(regions[1].stats.segments, 0, "an empty memtable flushed");
    for k in [&rows[0], &rows[99]] {
        let row = kura.get("t", k, &ReadSpec::default()).await.unwrap();
        assert_eq!(value(&row.expect("row")), &[b'v'; 1000]);
    }
    kura.shutdown().await.unwrap();
}
