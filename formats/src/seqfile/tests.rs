//! Unit tests of the SequenceFile writer and reader against `shared/HBASE_FORMATS.md` §2 and §9
//! and the HashTable files a real HBase 2.x wrote (`shared/fixtures/hbase-2x/hashtable/`).

use super::*;
use crate::writable::{
    ibw, long_writable, IMMUTABLE_BYTES_WRITABLE, LONG_WRITABLE, NULL, NULL_WRITABLE, RESULT,
};
use std::path::PathBuf;

/// The HashTable output of a real HBase 2.x (a copy of `shared/fixtures/hbase-2x/hashtable/`).
fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hbase-2x/hashtable")
}

fn read_all(bytes: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut r = Reader::new(bytes, "test")?;
    let mut out = Vec::new();
    while let Some(kv) = r.next()? {
        out.push(kv);
    }
    Ok(out)
}

fn write_all(
    key_class: &str,
    value_class: &str,
    compression: Compression,
    sync: [u8; 16],
    records: &[(Vec<u8>, Vec<u8>)],
) -> (Vec<u8>, Vec<u64>) {
    let mut w = Writer::new(
        Vec::new(),
        "test",
        key_class,
        value_class,
        compression,
        sync,
    )
    .expect("header");
    let offsets = records
        .iter()
        .map(|(k, v)| w.append(k, v).expect("append"))
        .collect();
    (w.finish().expect("finish"), offsets)
}

/// Every fixture file: (relative path, key class, value class, compression).
fn fixture_files() -> Vec<(PathBuf, &'static str, &'static str, Compression)> {
    let dir = fixtures();
    let mut out = vec![(
        dir.join("partitions"),
        IMMUTABLE_BYTES_WRITABLE,
        NULL_WRITABLE,
        Compression::Record,
    )];
    for i in 0..10 {
        let part = dir.join(format!("hashes/part-r-{i:05}"));
        out.push((
            part.join("data"),
            IMMUTABLE_BYTES_WRITABLE,
            IMMUTABLE_BYTES_WRITABLE,
            Compression::None,
        ));
        out.push((
            part.join("index"),
            IMMUTABLE_BYTES_WRITABLE,
            LONG_WRITABLE,
            Compression::Block,
        ));
    }
    out
}

#[test]
fn every_fixture_file_reads_with_its_classes_and_layout() {
    for (path, key_class, value_class, compression) in fixture_files() {
        let mut r = Reader::open(&path).expect("open");
        r.expect_classes(key_class, value_class).expect("classes");
        assert_eq!(r.compression(), compression, "{}", path.display());
        let mut n = 0;
        while let Some((k, _)) = r.next().expect("record") {
            crate::writable::ibw_bytes(&k).expect("an IBW key");
            n += 1;
        }
        assert!(n > 0, "{} has records", path.display());
    }
}

#[test]
fn rewriting_every_fixture_file_gives_its_exact_bytes() {
    for (path, key_class, value_class, compression) in fixture_files() {
        let original = std::fs::read(&path).expect("read fixture");
        let r = Reader::new(&original[..], "fixture").expect("header");
        let sync = r.sync_bytes();
        let records = read_all(&original).expect("records");
        let (bytes, _) = write_all(key_class, value_class, compression, sync, &records);
        assert_eq!(bytes, original, "{}", path.display());
    }
}

#[test]
fn the_partitions_fixture_holds_keys_one_to_nine_with_empty_values() {
    let records =
        read_all(&std::fs::read(fixtures().join("partitions")).expect("read")).expect("records");
    let keys: Vec<Vec<u8>> = records.iter().map(|(k, _)| k.clone()).collect();
    let expected: Vec<Vec<u8>> = (1..=9).map(|i| ibw(i.to_string().as_bytes())).collect();
    assert_eq!(keys, expected);
    assert!(records.iter().all(|(_, v)| v.is_empty()));
}

#[test]
fn the_hashtable_data_header_is_126_bytes_and_the_first_record_matches_the_spec() {
    let path = fixtures().join("hashes/part-r-00001/data");
    let original = std::fs::read(&path).expect("read");
    let sync = [
        0x5e, 0x44, 0xbe, 0xc0, 0x7b, 0x3f, 0x1f, 0x66, 0x13, 0x5f, 0x8a, 0x4b, 0x07, 0x57, 0x33,
        0xb8,
    ];
    let md5 = [
        0x89, 0xf1, 0xaf, 0xb9, 0x35, 0x04, 0x45, 0x27, 0x9b, 0xee, 0x73, 0x3c, 0x46, 0xcb, 0xd4,
        0x46,
    ];
    let mut w = Writer::new(
        Vec::new(),
        "test",
        IMMUTABLE_BYTES_WRITABLE,
        IMMUTABLE_BYTES_WRITABLE,
        Compression::None,
        sync,
    )
    .expect("header");
    assert_eq!(w.header_len(), 126);
    assert_eq!(w.append(&ibw(b"1"), &ibw(&md5)).expect("append"), 126);
    let bytes = w.finish().expect("finish");
    let mut expected = original[..126].to_vec();
    expected.extend_from_slice(&[0, 0, 0, 0x19, 0, 0, 0, 5, 0, 0, 0, 1, 0x31, 0, 0, 0, 0x10]);
    expected.extend_from_slice(&md5);
    assert_eq!(bytes, expected);
    assert_eq!(&original[..expected.len()], &expected[..]);
}

#[test]
fn an_export_header_is_114_bytes() {
    let w = Writer::new(
        Vec::new(),
        "t",
        IMMUTABLE_BYTES_WRITABLE,
        RESULT,
        Compression::None,
        [7; 16],
    )
    .expect("header");
    assert_eq!(w.header_len(), 114);
    let bytes = w.finish().expect("finish");
    assert_eq!(bytes.len(), 114);
    assert_eq!(&bytes[..4], b"SEQ\x06");
    assert_eq!(bytes[4], 49);
    assert_eq!(bytes[54], 37);
    assert_eq!(&bytes[55..92], RESULT.as_bytes());
    assert_eq!(&bytes[92..98], &[0, 0, 0, 0, 0, 0]);
    assert_eq!(&bytes[98..], &[7; 16]);
}

#[test]
fn the_index_block_matches_the_spec_bytes() {
    let sync = [
        0x94, 0xec, 0xf0, 0xfc, 0x76, 0x23, 0x74, 0xce, 0xf6, 0x55, 0xa4, 0xef, 0x72, 0xf8, 0x1e,
        0x17,
    ];
    let (bytes, _) = write_all(
        IMMUTABLE_BYTES_WRITABLE,
        LONG_WRITABLE,
        Compression::Block,
        sync,
        &[(ibw(b"1"), long_writable(126).to_vec())],
    );
    assert_eq!(bytes.len(), 153 + 20 + 1 + 10 + 14 + 10 + 13);
    let mut block = vec![0xff, 0xff, 0xff, 0xff];
    block.extend_from_slice(&sync);
    block.push(0x01);
    block.extend_from_slice(&[0x09, 0x78, 0x9c, 0x63, 0x05, 0x00, 0x00, 0x06, 0x00, 0x06]);
    block.extend_from_slice(&[
        0x0d, 0x78, 0x9c, 0x63, 0x60, 0x60, 0x60, 0x34, 0x04, 0x00, 0x00, 0x38, 0x00, 0x33,
    ]);
    block.extend_from_slice(&[0x09, 0x78, 0x9c, 0xe3, 0x00, 0x00, 0x00, 0x09, 0x00, 0x09]);
    block.extend_from_slice(&[
        0x0c, 0x78, 0x9c, 0x63, 0x60, 0x00, 0x83, 0x3a, 0x00, 0x00, 0x86, 0x00, 0x7f,
    ]);
    assert_eq!(&bytes[153..], &block[..]);
}

#[test]
fn a_record_compressed_null_value_is_the_eight_spec_bytes() {
    let (bytes, _) = write_all(
        IMMUTABLE_BYTES_WRITABLE,
        NULL_WRITABLE,
        Compression::Record,
        [1; 16],
        &[(ibw(b"1"), NULL.to_vec())],
    );
    assert_eq!(
        &bytes[153..],
        &[0, 0, 0, 0x0d, 0, 0, 0, 5, 0, 0, 0, 1, 0x31, 0x78, 0x9c, 0x03, 0, 0, 0, 0, 1]
    );
}

/// Offsets of every `ff ff ff ff` + sync in `bytes` after the header.
fn escapes(bytes: &[u8], header_len: usize, sync: [u8; 16]) -> Vec<usize> {
    let mut pattern = vec![0xff; 4];
    pattern.extend_from_slice(&sync);
    (header_len..bytes.len().saturating_sub(19))
        .filter(|&i| bytes[i..i + 20] == pattern[..])
        .collect()
}

#[test]
fn sync_escapes_follow_hadoops_rule_from_offset_zero_and_none_at_close() {
    let sync = [0xab; 16];
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..5000u32)
        .map(|i| {
            (
                ibw(format!("row{i:06}").as_bytes()),
                ibw(&[(i % 251) as u8; 40]),
            )
        })
        .collect();
    for compression in [Compression::None, Compression::Record] {
        let (bytes, offsets) = write_all(
            IMMUTABLE_BYTES_WRITABLE,
            IMMUTABLE_BYTES_WRITABLE,
            compression,
            sync,
            &records,
        );
        let found = escapes(
            &bytes,
            126 + if compression == Compression::Record {
                43
            } else {
                0
            },
            sync,
        );
        // Replay the rule: before a record, escape if offset >= last + 102 400 (last from 0).
        let mut expected = Vec::new();
        let mut last = 0u64;
        for &at in &offsets {
            if at >= last + SYNC_INTERVAL {
                expected.push(at as usize);
                last = at + 20;
            }
        }
        assert_eq!(found, expected, "{compression:?}");
        if compression == Compression::None {
            // 62-byte records: 310 126 bytes, so escapes near 102 400, 204 800 and 307 200.
            assert_eq!(found.len(), 3);
            assert!(found[0] >= 102_400 && found[0] < 102_400 + 60);
        }
        assert!(
            *found.last().expect("escapes") + 20 < bytes.len(),
            "none at close"
        );
        assert_eq!(read_all(&bytes).expect("read back"), records);
    }
}

#[test]
fn block_files_split_at_the_block_size_with_an_escape_before_each_block() {
    let sync = [0x42; 16];
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..3000u32)
        .map(|i| (ibw(&i.to_be_bytes()), vec![(i % 7) as u8; 1000]))
        .collect();
    let (bytes, offsets) = write_all(
        IMMUTABLE_BYTES_WRITABLE,
        IMMUTABLE_BYTES_WRITABLE,
        Compression::Block,
        sync,
        &records,
    );
    // 1008 bytes per record: a block closes after 993 records (>= 1 000 000), so 4 blocks.
    assert_eq!(escapes(&bytes, 169, sync).len(), 4);
    assert_eq!(
        escapes(&bytes, 169, sync)[0],
        169,
        "an escape right after the header"
    );
    assert_eq!(offsets[0], 169);
    assert_eq!(read_all(&bytes).expect("read back"), records);
}

#[test]
fn an_empty_file_is_just_the_header_and_reads_as_no_records() {
    for compression in [Compression::None, Compression::Record, Compression::Block] {
        let (bytes, _) = write_all(IMMUTABLE_BYTES_WRITABLE, RESULT, compression, [0; 16], &[]);
        assert_eq!(read_all(&bytes).expect("read"), vec![]);
    }
}

#[test]
fn every_truncation_is_an_error_naming_an_offset_never_a_panic() {
    for compression in [Compression::None, Compression::Record, Compression::Block] {
        let records: Vec<(Vec<u8>, Vec<u8>)> = (0..4u8).map(|i| (ibw(&[i]), vec![i; 30])).collect();
        let (bytes, offsets) = write_all(
            IMMUTABLE_BYTES_WRITABLE,
            IMMUTABLE_BYTES_WRITABLE,
            compression,
            [9; 16],
            &records,
        );
        let header = offsets[0] as usize;
        for cut in 0..bytes.len() {
            let result = read_all(&bytes[..cut]);
            let boundary = cut == header
                || (compression != Compression::Block
                    && offsets.iter().any(|&o| o as usize == cut));
            match result {
                Ok(got) => assert!(
                    boundary,
                    "{compression:?} cut at {cut} read {} records",
                    got.len()
                ),
                Err(Error::Truncated { offset, .. }) => assert!(offset <= cut as u64),
                Err(Error::NotSequenceFile { .. }) => assert!(cut < 3),
                Err(e) => panic!("{compression:?} cut at {cut}: unexpected {e}"),
            }
        }
    }
}

#[test]
fn an_escape_with_other_sync_bytes_is_corrupt() {
    let sync = [3; 16];
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..3000u32)
        .map(|i| (ibw(&i.to_be_bytes()), vec![1; 60]))
        .collect();
    let (mut bytes, _) = write_all(
        IMMUTABLE_BYTES_WRITABLE,
        IMMUTABLE_BYTES_WRITABLE,
        Compression::None,
        sync,
        &records,
    );
    let at = escapes(&bytes, 126, sync)[0];
    bytes[at + 10] ^= 1;
    match read_all(&bytes) {
        Err(Error::Corrupt { offset, what, .. }) => {
            assert_eq!(offset, at as u64);
            assert!(what.contains("sync"), "{what}");
        }
        other => panic!("expected a corrupt-sync error, got {other:?}"),
    }
}

#[test]
fn a_garbled_compressed_value_or_length_is_corrupt() {
    let (bytes, offsets) = write_all(
        IMMUTABLE_BYTES_WRITABLE,
        NULL_WRITABLE,
        Compression::Record,
        [5; 16],
        &[(ibw(b"a"), vec![]), (ibw(b"b"), vec![])],
    );
    let mut bad = bytes.clone();
    bad[offsets[0] as usize + 13] = 0x00; // the zlib header of the first value
    assert!(matches!(read_all(&bad), Err(Error::Corrupt { .. })));
    let mut bad = bytes.clone();
    bad[offsets[1] as usize] = 0x7f; // a record length of ~2 GiB
    assert!(matches!(
        read_all(&bad),
        Err(Error::Corrupt { .. }) | Err(Error::Truncated { .. })
    ));
    let mut bad = bytes;
    bad[offsets[0] as usize + 7] = 0x40; // key longer than the record
    assert!(matches!(read_all(&bad), Err(Error::Corrupt { .. })));
}

#[test]
fn another_codec_is_a_clear_unsupported_codec_error() {
    let mut header = MAGIC.to_vec();
    write_text(&mut header, IMMUTABLE_BYTES_WRITABLE).expect("text");
    write_text(&mut header, RESULT).expect("text");
    header.extend_from_slice(&[1, 0]);
    write_text(&mut header, "org.apache.hadoop.io.compress.SnappyCodec").expect("text");
    header.extend_from_slice(&[0; 4 + 16]);
    let err = Reader::new(&header[..], "part-m-00000")
        .err()
        .expect("an error");
    let text = err.to_string();
    assert!(matches!(err, Error::UnsupportedCodec { .. }));
    assert!(
        text.contains("SnappyCodec") && text.contains("part-m-00000"),
        "{text}"
    );
}

#[test]
fn other_files_and_versions_are_refused_clearly() {
    assert!(matches!(
        Reader::new(&b"PAR1...."[..], "x"),
        Err(Error::NotSequenceFile { .. })
    ));
    assert!(matches!(
        Reader::new(&b"SEQ\x05rest"[..], "x"),
        Err(Error::UnsupportedVersion { version: 5, .. })
    ));
}

#[test]
fn wrong_classes_name_both_pairs() {
    let (bytes, _) = write_all(
        IMMUTABLE_BYTES_WRITABLE,
        NULL_WRITABLE,
        Compression::None,
        [0; 16],
        &[],
    );
    let r = Reader::new(&bytes[..], "part-m-00000").expect("header");
    let err = r
        .expect_classes(IMMUTABLE_BYTES_WRITABLE, RESULT)
        .expect_err("mismatch");
    let text = err.to_string();
    assert!(
        text.contains(NULL_WRITABLE) && text.contains(RESULT),
        "{text}"
    );
}

#[test]
fn a_file_on_disk_round_trips_and_is_fsynced_by_finish() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("part-m-00000");
    let mut w =
        Writer::create(&path, IMMUTABLE_BYTES_WRITABLE, RESULT, Compression::None).expect("create");
    w.append(&ibw(b"\x00"), b"\x00").expect("append");
    w.append(&ibw(b"\xff"), b"\x00").expect("append");
    let written = w.position();
    w.finish().expect("finish");
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), written);
    let mut r = Reader::open(&path).expect("open");
    assert_eq!(r.key_class(), IMMUTABLE_BYTES_WRITABLE);
    assert_eq!(r.value_class(), RESULT);
    assert_eq!(r.next().expect("1"), Some((ibw(b"\x00"), vec![0])));
    assert_eq!(r.next().expect("2"), Some((ibw(b"\xff"), vec![0])));
    assert_eq!(r.next().expect("end"), None);
}
