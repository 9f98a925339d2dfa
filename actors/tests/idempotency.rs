//! Idempotency keys through the `Kura` handle: a keyed retry answers the first outcome and
//! applies nothing, also after the rows moved to another region by a split and after a restart.

mod common;
use common::*;
use kura_actors::*;

fn inc(row: &[u8]) -> Increment {
    Increment {
        row: row.to_vec(),
        columns: vec![(b"cf".to_vec(), b"n".to_vec(), 1)],
    }
}

async fn counter(kura: &Kura, row: &[u8]) -> i64 {
    let r = kura
        .get("t", row, &ReadSpec::default())
        .await
        .expect("get")
        .expect("row");
    i64::from_be_bytes(value(&r).try_into().expect("8 bytes"))
}

#[actix_rt::test]
async fn keyed_retries_apply_once_across_splits_and_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 16, 1)).await.expect("create");
    let rows: Vec<Vec<u8>> = (0..40).map(key).collect();
    let mut first = Vec::new();
    for r in &rows {
        let k = Some(b"req".to_vec());
        first.push(kura.increment_keyed("t", inc(r), k).await.expect("inc"));
    }
    let region = RegionId::new(kura.regions("t").await.expect("regions")[0].id);
    let (_, new) = kura.split_region("t", region, None).await.expect("split");
    kura.split_region("t", new, None).await.expect("split 2");
    let retry_all = |kura: Kura| {
        let (rows, first) = (rows.clone(), first.clone());
        async move {
            for (r, f) in rows.iter().zip(&first) {
                let k = Some(b"req".to_vec());
                let again = kura.increment_keyed("t", inc(r), k).await.expect("retry");
                assert_eq!(&again, f, "retry answers the first value");
                assert_eq!(counter(&kura, r).await, 1, "applied once");
            }
        }
    };
    retry_all(kura.clone()).await;
    kura.shutdown().await.expect("shutdown");
    let kura = Kura::start(config(dir.path())).await.expect("restart");
    retry_all(kura.clone()).await;
    // Another key on the same row is another request.
    let other = kura
        .increment_keyed("t", inc(&rows[0]), Some(b"req-2".to_vec()))
        .await
        .expect("inc");
    assert_eq!(other[0].value, 2i64.to_be_bytes());
    kura.shutdown().await.expect("shutdown");
}

#[actix_rt::test]
async fn keyed_append_and_check_and_mutate_answer_their_first_outcome() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kura = Kura::start(config(dir.path())).await.expect("start");
    kura.create_table(table("t", 16, 2)).await.expect("create");
    let app = || Append {
        row: b"r".to_vec(),
        columns: vec![(b"cf".to_vec(), b"log".to_vec(), b"x".to_vec())],
        max_value: None,
    };
    let a = kura.append_keyed("t", app(), Some(b"a".to_vec())).await;
    let b = kura.append_keyed("t", app(), Some(b"a".to_vec())).await;
    assert_eq!(a.expect("append"), b.expect("retry"));
    let cam = || CheckAndMutate {
        row: b"r".to_vec(),
        family: b"cf".to_vec(),
        qualifier: b"log".to_vec(),
        expected: b"x".to_vec(),
        mutations: vec![Mutation::Put {
            family: b"cf".to_vec(),
            qualifier: b"log".to_vec(),
            timestamp: None,
            value: b"y".to_vec(),
        }],
    };
    let k = || Some(b"c".to_vec());
    assert!(kura
        .check_and_mutate_keyed("t", cam(), k())
        .await
        .expect("cam"));
    // The value is "y" now, so the check would fail; the retry still answers "applied".
    assert!(kura
        .check_and_mutate_keyed("t", cam(), k())
        .await
        .expect("retry"));
    assert!(!kura.check_and_mutate("t", cam()).await.expect("unkeyed"));
    kura.shutdown().await.expect("shutdown");
}
