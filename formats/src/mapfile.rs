//! Hadoop MapFiles keyed by `ImmutableBytesWritable` (`shared/HBASE_FORMATS.md` §5): the
//! `hashes/part-r-NNNNN/` directories of HBase's `HashTable`.
//!
//! A MapFile is a directory with two SequenceFiles: `data` (the records, keys increasing) and
//! `index` (`(key, LongWritable offset)` pairs, BLOCK-compressed with `DefaultCodec`).
//!
//! # Invariants
//! 1. Keys are row keys compared as HBase compares them (unsigned bytes, a proper prefix first)
//!    and never decrease; the writer refuses a smaller key, as Hadoop's `MapFile.Writer` does.
//! 2. The index holds the first record, then a record whenever at least [`INDEX_INTERVAL`]
//!    records were appended since the last indexed one and the data offset moved; an entry's
//!    offset is the `data` length just before that record was appended (the record itself, or
//!    the sync escape written in front of it). This is Hadoop's `MapFile.Writer.append`.
//! 3. `data` is NONE-compressed, as `MapFileOutputFormat` writes it without output compression
//!    (HashTable's case); the reader accepts any compression the SequenceFile reader does.
//! 4. The reader uses the index only as a table of contents: when `index` is missing or
//!    unreadable it rebuilds one by scanning `data`, and records are read from `data` alone.
//! 5. `data` and `index` are complete on disk (flushed and fsynced) once
//!    [`MapFileWriter::finish`] returns.

use crate::error::Error;
use crate::seqfile::{Compression, Reader, Writer};
use crate::writable::{ibw_bytes, long_writable, long_writable_value, try_ibw};
use crate::writable::{IMMUTABLE_BYTES_WRITABLE, LONG_WRITABLE};
use crate::Result;
use std::path::{Path, PathBuf};

/// `io.map.index.interval`: records between index entries.
pub const INDEX_INTERVAL: u64 = 128;
/// The data file's name inside a MapFile directory.
pub const DATA: &str = "data";
/// The index file's name inside a MapFile directory.
pub const INDEX: &str = "index";

/// Writes one MapFile with `ImmutableBytesWritable` keys.
pub struct MapFileWriter {
    dir: PathBuf,
    data: Writer,
    index: Writer,
    /// Records appended.
    size: u64,
    /// Record count at the last index entry (`None` before the first).
    last_index_count: Option<u64>,
    /// Data offset of the last index entry.
    last_index_pos: Option<u64>,
    last_key: Option<Vec<u8>>,
}

impl MapFileWriter {
    /// Creates `dir` (and its parents) with a `data` file of `value_class` values, NONE
    /// compressed, and its `index`; random sync bytes.
    pub fn create(dir: impl AsRef<Path>, value_class: &str) -> Result<MapFileWriter> {
        MapFileWriter::create_with_sync(dir, value_class, rand::random(), rand::random())
    }

    /// As [`MapFileWriter::create`] with the given sync bytes for `data` and `index` (tests that
    /// compare bytes with Hadoop's files use the files' own).
    pub fn create_with_sync(
        dir: impl AsRef<Path>,
        value_class: &str,
        data_sync: [u8; 16],
        index_sync: [u8; 16],
    ) -> Result<MapFileWriter> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir.display().to_string(), e))?;
        let data = Writer::create_with_sync(
            dir.join(DATA),
            IMMUTABLE_BYTES_WRITABLE,
            value_class,
            Compression::None,
            data_sync,
        )?;
        let index = Writer::create_with_sync(
            dir.join(INDEX),
            IMMUTABLE_BYTES_WRITABLE,
            LONG_WRITABLE,
            Compression::Block,
            index_sync,
        )?;
        Ok(MapFileWriter {
            dir,
            data,
            index,
            size: 0,
            last_index_count: None,
            last_index_pos: None,
            last_key: None,
        })
    }

    /// Appends the record `key` (the row key bytes, written as an `ImmutableBytesWritable`)
    /// → `value` (the value's serialized bytes). Keys must not decrease.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if let Some(last) = &self.last_key {
            if key < last.as_slice() {
                return Err(Error::Invalid(format!(
                    "{}: key out of order: {} after {}",
                    self.dir.display(),
                    crate::hashtable::printable(key),
                    crate::hashtable::printable(last)
                )));
            }
        }
        let serialized = try_ibw(key).ok_or_else(|| {
            Error::Invalid(format!("{}: a key of 2 GiB or more", self.dir.display()))
        })?;
        let pos = self.data.position();
        let due = self
            .last_index_count
            .is_none_or(|n| self.size >= n + INDEX_INTERVAL);
        if due && self.last_index_pos.is_none_or(|p| pos > p) {
            self.index.append(&serialized, &long_writable(pos as i64))?;
            self.last_index_pos = Some(pos);
            self.last_index_count = Some(self.size);
        }
        self.data.append(&serialized, value)?;
        self.size += 1;
        match &mut self.last_key {
            Some(k) => {
                k.clear();
                k.extend_from_slice(key);
            }
            None => self.last_key = Some(key.to_vec()),
        }
        Ok(())
    }

    /// Records appended so far.
    pub fn len(&self) -> u64 {
        self.size
    }

    /// True before the first append.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Writes the index's last block, flushes and fsyncs both files.
    pub fn finish(self) -> Result<()> {
        self.data.finish()?;
        self.index.finish()?;
        Ok(())
    }
}

/// Reads one MapFile with `ImmutableBytesWritable` keys, record by record.
pub struct MapFileReader {
    dir: PathBuf,
    data: Reader,
    index: Vec<(Vec<u8>, u64)>,
    index_rebuilt: bool,
    last_key: Option<Vec<u8>>,
}

impl MapFileReader {
    /// Opens `dir/data` (its values must be of `value_class`) and reads `dir/index`, or
    /// rebuilds the index by scanning `data` when `index` is missing or unreadable.
    pub fn open(dir: impl AsRef<Path>, value_class: &str) -> Result<MapFileReader> {
        let dir = dir.as_ref().to_path_buf();
        let data = Reader::open(dir.join(DATA))?;
        data.expect_classes(IMMUTABLE_BYTES_WRITABLE, value_class)?;
        let (index, index_rebuilt) = match read_index(&dir.join(INDEX)) {
            Ok(index) => (index, false),
            Err(_) => (rebuild_index(&dir.join(DATA))?, true),
        };
        Ok(MapFileReader {
            dir,
            data,
            index,
            index_rebuilt,
            last_key: None,
        })
    }

    /// The index: `(key, data offset)` pairs.
    pub fn index(&self) -> &[(Vec<u8>, u64)] {
        &self.index
    }

    /// True when the index was rebuilt from `data` (the `index` file was missing or bad).
    pub fn index_rebuilt(&self) -> bool {
        self.index_rebuilt
    }

    /// The next record: the key's row bytes and the value's serialized bytes; `None` at the
    /// end. A key smaller than the one before is a corrupt file.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some((key, value)) = self.data.next()? else {
            return Ok(None);
        };
        let offset = self.data.record_offset();
        let key = ibw_bytes(&key)
            .map_err(|what| self.corrupt(offset, what))?
            .to_vec();
        if self.last_key.as_ref().is_some_and(|last| key < *last) {
            return Err(self.corrupt(offset, "a key smaller than the one before it".into()));
        }
        self.last_key = Some(key.clone());
        Ok(Some((key, value)))
    }

    fn corrupt(&self, offset: u64, what: String) -> Error {
        Error::Corrupt {
            file: self.dir.join(DATA).display().to_string(),
            offset,
            what,
        }
    }
}

/// Reads an index file: every `(key, offset)` pair.
fn read_index(path: &Path) -> Result<Vec<(Vec<u8>, u64)>> {
    let mut r = Reader::open(path)?;
    r.expect_classes(IMMUTABLE_BYTES_WRITABLE, LONG_WRITABLE)?;
    let mut out = Vec::new();
    while let Some((k, v)) = r.next()? {
        let at = r.record_offset();
        let bad = |what: String| Error::Corrupt {
            file: path.display().to_string(),
            offset: at,
            what,
        };
        let key = ibw_bytes(&k).map_err(bad)?.to_vec();
        let offset = long_writable_value(&v).map_err(bad)?;
        let offset = u64::try_from(offset).map_err(|_| bad(format!("offset {offset}")))?;
        out.push((key, offset));
    }
    Ok(out)
}

/// An index built by scanning `data` with the writer's rule (offsets of the records).
fn rebuild_index(data: &Path) -> Result<Vec<(Vec<u8>, u64)>> {
    let mut r = Reader::open(data)?;
    let mut out = Vec::new();
    let mut n = 0u64;
    while let Some((k, _)) = r.next()? {
        if n.is_multiple_of(INDEX_INTERVAL) {
            let at = r.record_offset();
            let key = ibw_bytes(&k).map_err(|what| Error::Corrupt {
                file: data.display().to_string(),
                offset: at,
                what,
            })?;
            out.push((key.to_vec(), at));
        }
        n += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writable::ibw;

    fn fixture(part: usize) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
            "../tests/fixtures/hbase-2x/hashtable/hashes/part-r-{part:05}"
        ))
    }

    fn sync_of(path: &Path) -> [u8; 16] {
        Reader::open(path).expect("open").sync_bytes()
    }

    #[test]
    fn rewriting_the_fixture_mapfiles_gives_hbases_exact_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        for part in 0..10 {
            let src = fixture(part);
            let mut r = MapFileReader::open(&src, IMMUTABLE_BYTES_WRITABLE).expect("open");
            assert!(!r.index_rebuilt());
            let out = dir.path().join(format!("p{part}"));
            let mut w = MapFileWriter::create_with_sync(
                &out,
                IMMUTABLE_BYTES_WRITABLE,
                sync_of(&src.join(DATA)),
                sync_of(&src.join(INDEX)),
            )
            .expect("create");
            while let Some((k, v)) = r.next().expect("read") {
                w.append(&k, &v).expect("append");
            }
            w.finish().expect("finish");
            for f in [DATA, INDEX] {
                assert_eq!(
                    std::fs::read(out.join(f)).expect("ours"),
                    std::fs::read(src.join(f)).expect("hbase's"),
                    "part-r-{part:05}/{f}"
                );
            }
        }
    }

    #[test]
    fn the_index_has_an_entry_every_128_records_at_the_record_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = MapFileWriter::create(dir.path(), IMMUTABLE_BYTES_WRITABLE).expect("create");
        let mut offsets = Vec::new();
        for i in 0..300u32 {
            offsets.push(w.data.position());
            w.append(format!("row{i:05}").as_bytes(), &ibw(&[7; 16]))
                .expect("append");
        }
        w.finish().expect("finish");
        let r = MapFileReader::open(dir.path(), IMMUTABLE_BYTES_WRITABLE).expect("open");
        let got: Vec<(String, u64)> = r
            .index()
            .iter()
            .map(|(k, o)| (String::from_utf8_lossy(k).into_owned(), *o))
            .collect();
        assert_eq!(
            got,
            vec![
                ("row00000".to_string(), offsets[0]),
                ("row00128".to_string(), offsets[128]),
                ("row00256".to_string(), offsets[256]),
            ]
        );
        // The first record starts right after the 126-byte header.
        assert_eq!(offsets[0], 126);
    }

    #[test]
    fn an_index_entry_points_at_the_sync_escape_before_its_record() {
        // Records larger than SYNC_INTERVAL (102 400 bytes): every record after the first has
        // an escape in front of it, record 128 (the second index entry) included.
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = MapFileWriter::create(dir.path(), IMMUTABLE_BYTES_WRITABLE).expect("create");
        let big = ibw(&vec![1; 103_000]);
        for i in 0..129u32 {
            w.append(format!("r{i:05}").as_bytes(), &big)
                .expect("append");
        }
        w.finish().expect("finish");
        let data = std::fs::read(dir.path().join(DATA)).expect("data");
        let r = MapFileReader::open(dir.path(), IMMUTABLE_BYTES_WRITABLE).expect("open");
        let offsets: Vec<u64> = r.index().iter().map(|(_, o)| *o).collect();
        assert_eq!(offsets.len(), 2);
        assert_eq!(offsets[0], 126, "the first record has no escape in front");
        let at = offsets[1] as usize;
        assert_eq!(
            data[at..at + 4],
            [0xff; 4],
            "entry 128 points at its escape"
        );
        assert_eq!(
            data[at + 4..at + 20],
            Reader::open(dir.path().join(DATA)).expect("r").sync_bytes()
        );
    }

    #[test]
    fn a_missing_index_is_rebuilt_from_data_and_the_records_still_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = MapFileWriter::create(dir.path(), IMMUTABLE_BYTES_WRITABLE).expect("create");
        for i in 0..200u32 {
            w.append(format!("k{i:04}").as_bytes(), &ibw(b"v"))
                .expect("append");
        }
        w.finish().expect("finish");
        std::fs::remove_file(dir.path().join(INDEX)).expect("rm index");
        let mut r = MapFileReader::open(dir.path(), IMMUTABLE_BYTES_WRITABLE).expect("open");
        assert!(r.index_rebuilt());
        assert_eq!(r.index().len(), 2);
        assert_eq!(r.index()[0], (b"k0000".to_vec(), 126));
        let mut n = 0;
        while r.next().expect("read").is_some() {
            n += 1;
        }
        assert_eq!(n, 200);
    }

    #[test]
    fn a_key_out_of_order_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = MapFileWriter::create(dir.path(), IMMUTABLE_BYTES_WRITABLE).expect("create");
        w.append(b"b", &ibw(b"")).expect("append");
        w.append(b"b", &ibw(b"")).expect("an equal key is allowed");
        let e = w.append(b"a", &ibw(b"")).expect_err("smaller key");
        assert!(e.to_string().contains("out of order"), "{e}");
    }
}
