//! HBase `HashTable`'s output directory (`shared/HBASE_FORMATS.md` §6.1): the files `kura verify
//! --out` writes and `kura verify --against` (and HBase's `SyncTable`, Google's sync-table)
//! reads.
//!
//! ```text
//! <hashdir>/manifest               java.util.Properties text, written last (via manifest.tmp)
//! <hashdir>/partitions             SequenceFile<ImmutableBytesWritable, NullWritable>, RECORD
//! <hashdir>/hashes/part-r-NNNNN/   MapFile<ImmutableBytesWritable batch start, IBW md5>
//! <hashdir>/hashes/_SUCCESS        empty
//! ```
//!
//! # What this module owns
//! - [`properties`]: `java.util.Properties` text, read (any order, every escape, continuation
//!   lines) and written (`Properties.store` escaping, ISO 8859-1 with `\uXXXX`).
//! - [`Manifest`]: the scan parameters a hash directory was computed with.
//! - [`num_hash_files`] and [`partition_keys`]: HashTable's choice of hash files.
//! - [`HashDirWriter`] and [`HashDir`]: writing and reading a directory.
//!
//! # Invariants
//! 1. A directory is complete only when `manifest` exists: the writer writes everything else
//!    first, fsyncs it, then renames `manifest.tmp` to `manifest`. A reader refuses a
//!    directory without one.
//! 2. Batch `(k, md5)` goes to hash file `i` with `p[i-1] <= k < p[i]` (partition keys `p`,
//!    open ends); every one of the N files exists, empty or not, and holds its batches in key
//!    order.
//! 3. The reader hands out every batch of every file in key order, file 0 first, and checks
//!    that each file's keys belong to it.

use crate::error::Error;
use crate::mapfile::{MapFileReader, MapFileWriter};
use crate::seqfile::{Compression, Reader, Writer};
use crate::writable::{ibw, ibw_bytes, IMMUTABLE_BYTES_WRITABLE, NULL, NULL_WRITABLE};
use crate::Result;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// HashTable's default `targetBatchSize`, bytes.
pub const DEFAULT_BATCH_SIZE: u64 = 8000;
/// The manifest's name.
pub const MANIFEST: &str = "manifest";
/// The partitions file's name.
pub const PARTITIONS: &str = "partitions";
/// The directory of hash MapFiles.
pub const HASHES: &str = "hashes";
/// MD5 of nothing: the hash of an empty batch.
pub const EMPTY_MD5: [u8; 16] = [
    0xd4, 0x1d, 0x8c, 0xd9, 0x8f, 0x00, 0xb2, 0x04, 0xe9, 0x80, 0x09, 0x98, 0xec, 0xf8, 0x42, 0x7e,
];

/// `key` for messages: printable ASCII as is, other bytes as `\xNN` (HBase's
/// `Bytes.toStringBinary`, which `--start-row` and friends accept back).
pub fn printable(key: &[u8]) -> String {
    let mut s = String::with_capacity(key.len());
    for &b in key {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02X}"));
        }
    }
    s
}

/// Parses HBase's `Bytes.toBytesBinary` form: `\xNN` is a byte, anything else is itself.
pub fn from_printable(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() && b[i + 1] == b'x' {
            if let Some(v) = std::str::from_utf8(&b[i + 2..i + 4])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Lower-case hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses hex (either case).
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

pub mod properties {
    //! `java.util.Properties` text (`load(Reader)`/`store(OutputStream)`), as HashTable writes
    //! its manifest.
    //!
    //! # Invariants
    //! 1. [`parse`] accepts what `Properties.load` accepts: `#`/`!` comments, `=`, `:` or
    //!    whitespace separators, `\` escapes (`\t \n \r \f \uXXXX`, any other escaped char is
    //!    itself) and lines continued by an odd number of trailing backslashes.
    //! 2. [`store`] escapes as `Properties.store(OutputStream)` does: `\`, `=`, `:`, `#`, `!`,
    //!    tab, newline, return, form feed, a leading space (every space in a key), and every
    //!    char outside `0x20..=0x7e` as `\uXXXX`; [`parse`] of its output gives the pairs back.

    /// The `(key, value)` pairs of `text`, in file order (a repeated key keeps both).
    pub fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
        let mut out = Vec::new();
        let mut lines = text.split(['\n', '\r']).peekable();
        while let Some(first) = lines.next() {
            let trimmed = first.trim_start_matches([' ', '\t', '\x0c']);
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
                continue;
            }
            // Join continuation lines (an odd number of trailing backslashes).
            let mut logical = String::new();
            let mut line = trimmed.to_string();
            loop {
                let trailing = line.chars().rev().take_while(|&c| c == '\\').count();
                if trailing % 2 == 1 {
                    line.pop();
                    logical.push_str(&line);
                    // `\r\n` leaves an empty piece between the two: skip it.
                    let next = loop {
                        match lines.next() {
                            Some("") if text.contains("\r\n") => continue,
                            other => break other,
                        }
                    };
                    match next {
                        Some(n) => line = n.trim_start_matches([' ', '\t', '\x0c']).to_string(),
                        None => break,
                    }
                } else {
                    logical.push_str(&line);
                    break;
                }
            }
            out.push(split_pair(&logical)?);
        }
        Ok(out)
    }

    /// Splits one logical line into its unescaped key and value.
    fn split_pair(line: &str) -> Result<(String, String), String> {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        let mut key_end = chars.len();
        while i < chars.len() {
            match chars[i] {
                '\\' => i += 2,
                '=' | ':' | ' ' | '\t' | '\x0c' => {
                    key_end = i;
                    break;
                }
                _ => i += 1,
            }
        }
        let key_end = key_end.min(chars.len());
        let mut v = key_end;
        while v < chars.len() && matches!(chars[v], ' ' | '\t' | '\x0c') {
            v += 1;
        }
        if v < chars.len() && matches!(chars[v], '=' | ':') {
            v += 1;
            while v < chars.len() && matches!(chars[v], ' ' | '\t' | '\x0c') {
                v += 1;
            }
        }
        let key: String = chars[..key_end].iter().collect();
        let value: String = chars[v.min(chars.len())..].iter().collect();
        Ok((unescape(&key)?, unescape(&value)?))
    }

    fn unescape(s: &str) -> Result<String, String> {
        let mut out = String::with_capacity(s.len());
        let mut it = s.chars();
        while let Some(c) = it.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match it.next() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('f') => out.push('\x0c'),
                Some('u') => {
                    let hex: String = it.by_ref().take(4).collect();
                    let code = u32::from_str_radix(&hex, 16)
                        .ok()
                        .filter(|_| hex.len() == 4)
                        .ok_or_else(|| format!("malformed \\uXXXX escape \\u{hex}"))?;
                    // Java strings are UTF-16: join a surrogate pair.
                    if (0xd800..0xdc00).contains(&code) {
                        let rest: String = it.clone().take(6).collect();
                        if let Some(low) = rest
                            .strip_prefix("\\u")
                            .and_then(|h| u32::from_str_radix(h, 16).ok())
                            .filter(|l| (0xdc00..0xe000).contains(l))
                        {
                            for _ in 0..6 {
                                it.next();
                            }
                            let c = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
                            out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                            continue;
                        }
                    }
                    out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                }
                Some(other) => out.push(other),
                None => {}
            }
        }
        Ok(out)
    }

    fn escape(s: &str, is_key: bool, out: &mut String) {
        for (i, c) in s.chars().enumerate() {
            match c {
                ' ' if i == 0 || is_key => out.push_str("\\ "),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\x0c' => out.push_str("\\f"),
                '=' | ':' | '#' | '!' | '\\' => {
                    out.push('\\');
                    out.push(c);
                }
                c if (' '..='~').contains(&c) => out.push(c),
                c => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{u:04X}"));
                    }
                }
            }
        }
    }

    /// The text `Properties.store` writes: `#` + `date_comment`, then `key=value` lines.
    pub fn store(pairs: &[(String, String)], date_comment: &str) -> String {
        let mut out = format!("#{date_comment}\n");
        for (k, v) in pairs {
            escape(k, true, &mut out);
            out.push('=');
            escape(v, false, &mut out);
            out.push('\n');
        }
        out
    }
}

/// The parameters of one HashTable run (the manifest's keys, §6.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The table hashed.
    pub table: String,
    /// Bytes of cells per batch.
    pub target_batch_size: u64,
    /// N, the number of hash files.
    pub num_hash_files: u32,
    /// Families scanned (`None` = all).
    pub families: Option<Vec<Vec<u8>>>,
    /// First row scanned (empty = the table's start).
    pub start_row: Vec<u8>,
    /// Row the scan stops before (empty = the table's end).
    pub stop_row: Vec<u8>,
    /// Scanner batch (cells per `Result`), when set.
    pub scan_batch: Option<u32>,
    /// Versions per column (`None` = the scan default, 1).
    pub versions: Option<u32>,
    /// Time range `[start, end)` in ms (`None` = open).
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    /// Delete markers and deleted cells included (`None` = not written, as older HBase).
    pub raw_scan: Option<bool>,
}

impl Manifest {
    /// A manifest for a whole-table scan with HashTable's defaults.
    pub fn new(table: &str, target_batch_size: u64, num_hash_files: u32) -> Manifest {
        Manifest {
            table: table.to_string(),
            target_batch_size,
            num_hash_files,
            families: None,
            start_row: Vec::new(),
            stop_row: Vec::new(),
            scan_batch: None,
            versions: None,
            start_time: None,
            end_time: None,
            raw_scan: None,
        }
    }

    /// Versions the scan returns per column.
    pub fn max_versions(&self) -> u32 {
        self.versions.unwrap_or(1)
    }

    /// The `(key, value)` pairs, in the order HashTable's `writePropertiesFile` sets them.
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let mut p = vec![
            ("table".to_string(), self.table.clone()),
            (
                "targetBatchSize".to_string(),
                self.target_batch_size.to_string(),
            ),
            ("numHashFiles".to_string(), self.num_hash_files.to_string()),
        ];
        if !self.start_row.is_empty() {
            p.push(("startRowHex".into(), to_hex(&self.start_row)));
        }
        if !self.stop_row.is_empty() {
            p.push(("stopRowHex".into(), to_hex(&self.stop_row)));
        }
        if let Some(f) = &self.families {
            let names: Vec<String> = f
                .iter()
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .collect();
            p.push(("columnFamilies".into(), names.join(",")));
        }
        if let Some(b) = self.scan_batch {
            p.push(("scanBatch".into(), b.to_string()));
        }
        if let Some(v) = self.versions {
            p.push(("versions".into(), v.to_string()));
        }
        if let Some(t) = self.start_time {
            p.push(("startTimestamp".into(), t.to_string()));
        }
        if let Some(t) = self.end_time {
            p.push(("endTimestamp".into(), t.to_string()));
        }
        if let Some(r) = self.raw_scan {
            p.push(("rawScan".into(), r.to_string()));
        }
        p
    }

    /// The manifest text, with `date_comment` as its first line's comment.
    pub fn to_text(&self, date_comment: &str) -> String {
        properties::store(&self.to_pairs(), date_comment)
    }

    /// Parses manifest text (`file` names it in errors). Unknown keys are ignored; a missing
    /// required key or a malformed number is an error naming it.
    pub fn parse(text: &str, file: &str) -> Result<Manifest> {
        let bad = |what: String| Error::Corrupt {
            file: file.to_string(),
            offset: 0,
            what,
        };
        let pairs = properties::parse(text).map_err(bad)?;
        let get = |k: &str| {
            pairs
                .iter()
                .rev()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.trim().to_string())
        };
        let required = |k: &str| get(k).ok_or_else(|| bad(format!("no {k} in the manifest")));
        fn num<T: std::str::FromStr>(
            k: &str,
            v: Option<String>,
            bad: &dyn Fn(String) -> Error,
        ) -> Result<Option<T>> {
            v.map(|s| {
                s.parse::<T>()
                    .map_err(|_| bad(format!("{k}={s} is not a valid number")))
            })
            .transpose()
        }
        let hex = |k: &str| -> Result<Vec<u8>> {
            match get(k) {
                None => Ok(Vec::new()),
                Some(h) => from_hex(&h).ok_or_else(|| bad(format!("{k}={h} is not hex"))),
            }
        };
        let table = required("table")?;
        let target_batch_size =
            num::<u64>("targetBatchSize", Some(required("targetBatchSize")?), &bad)?
                .unwrap_or(DEFAULT_BATCH_SIZE);
        let num_hash_files =
            num::<u32>("numHashFiles", Some(required("numHashFiles")?), &bad)?.unwrap_or(1);
        if num_hash_files == 0 {
            return Err(bad(
                "numHashFiles=0: a hash directory has at least one file".into(),
            ));
        }
        let raw_scan = match get("rawScan").as_deref() {
            None => None,
            Some(v) if v.eq_ignore_ascii_case("true") => Some(true),
            // Java's Boolean.parseBoolean: anything but "true" is false.
            Some(_) => Some(false),
        };
        let versions = num::<i64>("versions", get("versions"), &bad)?;
        Ok(Manifest {
            table,
            target_batch_size,
            num_hash_files,
            families: get("columnFamilies")
                .filter(|s| !s.is_empty())
                .map(|s| s.split(',').map(|f| f.as_bytes().to_vec()).collect()),
            start_row: hex("startRowHex")?,
            stop_row: hex("stopRowHex")?,
            scan_batch: num::<u32>("scanBatch", get("scanBatch"), &bad)?,
            // HashTable writes versions only when set (≥ 0); a negative one is the default.
            versions: versions
                .filter(|v| *v >= 0)
                .map(|v| u32::try_from(v).unwrap_or(u32::MAX)),
            start_time: num::<i64>("startTimestamp", get("startTimestamp"), &bad)?,
            end_time: num::<i64>("endTimestamp", get("endTimestamp"), &bad)?,
            raw_scan,
        })
    }
}

/// HashTable's default number of hash files for `regions` regions in the scan range: one per
/// 100 regions, at least 1, at most `regions`.
pub fn num_hash_files(regions: usize, requested: Option<u32>) -> u32 {
    let regions = u32::try_from(regions.max(1)).unwrap_or(u32::MAX);
    let n = requested.filter(|n| *n > 0).unwrap_or(regions / 100).max(1);
    n.min(regions)
}

/// The N−1 partition keys: key `i` (1 ≤ i < N) = `region_starts[floor(regions·i/N)]`.
/// `region_starts` are the start keys of the regions inside the scan range, in order.
pub fn partition_keys(region_starts: &[Vec<u8>], n: u32) -> Vec<Vec<u8>> {
    let regions = region_starts.len() as u64;
    (1..u64::from(n))
        .filter_map(|i| {
            region_starts
                .get((regions * i / u64::from(n)) as usize)
                .cloned()
        })
        .collect()
}

/// Which hash file a batch keyed `key` belongs to (`p[i-1] <= key < p[i]`).
pub fn file_of(partitions: &[Vec<u8>], key: &[u8]) -> usize {
    partitions.partition_point(|p| p.as_slice() <= key)
}

/// The name of hash file `i`: `part-r-%05d`.
pub fn part_name(i: usize) -> String {
    format!("part-r-{i:05}")
}

/// Writes a hash directory, batch by batch in key order.
pub struct HashDirWriter {
    dir: PathBuf,
    manifest: Manifest,
    partitions: Vec<Vec<u8>>,
    /// The file being written and its index.
    current: Option<(usize, MapFileWriter)>,
    /// Files finished so far.
    done: usize,
    batches: u64,
}

impl HashDirWriter {
    /// Creates `dir` (which must not hold a manifest already; what an interrupted run left
    /// there is replaced), writes `partitions` (N−1 keys, increasing) and opens the first hash
    /// file.
    pub fn create(
        dir: impl AsRef<Path>,
        manifest: Manifest,
        partitions: Vec<Vec<u8>>,
    ) -> Result<HashDirWriter> {
        let dir = dir.as_ref().to_path_buf();
        let name = dir.display().to_string();
        if partitions.len() + 1 != manifest.num_hash_files as usize {
            return Err(Error::Invalid(format!(
                "{name}: {} partition keys for {} hash files",
                partitions.len(),
                manifest.num_hash_files
            )));
        }
        if partitions.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::Invalid(format!(
                "{name}: partition keys must increase strictly"
            )));
        }
        if dir.join(MANIFEST).exists() {
            return Err(Error::Invalid(format!(
                "{name} already holds a hash directory (a manifest); choose another --out or \
                 remove it"
            )));
        }
        // What an interrupted run left (it never got to its manifest) is written again: its
        // files go first, so no hash file of another layout survives. Other files stay.
        let hashes = dir.join(HASHES);
        if hashes.is_dir() {
            std::fs::remove_dir_all(&hashes).map_err(|e| Error::io(&name, e))?;
        }
        for f in [PARTITIONS, "manifest.tmp"] {
            match std::fs::remove_file(dir.join(f)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(&name, e))
                }
                _ => {}
            }
        }
        std::fs::create_dir_all(&hashes).map_err(|e| Error::io(&name, e))?;
        let mut p = Writer::create(
            dir.join(PARTITIONS),
            IMMUTABLE_BYTES_WRITABLE,
            NULL_WRITABLE,
            Compression::Record,
        )?;
        for k in &partitions {
            p.append(&ibw(k), NULL)?;
        }
        p.finish()?;
        Ok(HashDirWriter {
            dir,
            manifest,
            partitions,
            current: None,
            done: 0,
            batches: 0,
        })
    }

    /// Opens hash files up to and including `file` (earlier ones finished, empty if unused).
    fn open_up_to(&mut self, file: usize) -> Result<&mut MapFileWriter> {
        loop {
            match &self.current {
                Some((i, _)) if *i == file => break,
                Some(_) => {
                    let (_, w) = self.current.take().expect("matched Some");
                    w.finish()?;
                    self.done += 1;
                }
                None => {
                    let path = self.dir.join(HASHES).join(part_name(self.done));
                    let w = MapFileWriter::create(&path, IMMUTABLE_BYTES_WRITABLE)?;
                    self.current = Some((self.done, w));
                }
            }
        }
        Ok(&mut self.current.as_mut().expect("opened above").1)
    }

    /// Adds one batch; keys must not decrease.
    pub fn add(&mut self, key: &[u8], md5: &[u8; 16]) -> Result<()> {
        let file = file_of(&self.partitions, key);
        if file < self.done || self.current.as_ref().is_some_and(|(i, _)| *i > file) {
            return Err(Error::Invalid(format!(
                "{}: batch {} arrived after a later one",
                self.dir.display(),
                printable(key)
            )));
        }
        self.open_up_to(file)?.append(key, &ibw(md5))?;
        self.batches += 1;
        Ok(())
    }

    /// Batches added so far.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Finishes every hash file (creating the remaining ones empty), writes `_SUCCESS`, then
    /// the manifest (`manifest.tmp`, fsynced, renamed). `date_comment` is the manifest's first
    /// line (HashTable writes the date).
    pub fn finish(mut self, date_comment: &str) -> Result<PathBuf> {
        let last = self.partitions.len();
        self.open_up_to(last)?;
        if let Some((_, w)) = self.current.take() {
            w.finish()?;
        }
        let hashes = self.dir.join(HASHES);
        write_durably(&hashes.join("_SUCCESS"), b"")?;
        let tmp = self.dir.join("manifest.tmp");
        write_durably(&tmp, self.manifest.to_text(date_comment).as_bytes())?;
        let target = self.dir.join(MANIFEST);
        std::fs::rename(&tmp, &target).map_err(|e| Error::io(&target.display().to_string(), e))?;
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(self.dir)
    }
}

fn write_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.display().to_string();
    let mut f = std::fs::File::create(path).map_err(|e| Error::io(&name, e))?;
    f.write_all(bytes).map_err(|e| Error::io(&name, e))?;
    f.sync_all().map_err(|e| Error::io(&name, e))
}

/// A hash directory opened for reading.
pub struct HashDir {
    dir: PathBuf,
    manifest: Manifest,
    partitions: Vec<Vec<u8>>,
}

impl HashDir {
    /// Reads `dir/manifest` and `dir/partitions`; checks the partition count.
    pub fn open(dir: impl AsRef<Path>) -> Result<HashDir> {
        let dir = dir.as_ref().to_path_buf();
        let mpath = dir.join(MANIFEST);
        let mname = mpath.display().to_string();
        let bytes = std::fs::read(&mpath).map_err(|e| Error::io(&mname, e))?;
        // Properties.store(OutputStream) writes ISO 8859-1: every byte is one char.
        let text: String = match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => e.into_bytes().iter().map(|&b| b as char).collect(),
        };
        let manifest = Manifest::parse(&text, &mname)?;
        let mut r = Reader::open(dir.join(PARTITIONS))?;
        r.expect_classes(IMMUTABLE_BYTES_WRITABLE, NULL_WRITABLE)?;
        let mut partitions: Vec<Vec<u8>> = Vec::new();
        while let Some((k, _)) = r.next()? {
            let at = r.record_offset();
            let key = ibw_bytes(&k).map_err(|what| Error::Corrupt {
                file: r.name().to_string(),
                offset: at,
                what,
            })?;
            if partitions.last().is_some_and(|p| p.as_slice() >= key) {
                return Err(Error::Corrupt {
                    file: r.name().to_string(),
                    offset: at,
                    what: "partition keys do not increase".into(),
                });
            }
            partitions.push(key.to_vec());
        }
        if partitions.len() + 1 != manifest.num_hash_files as usize {
            return Err(Error::Corrupt {
                file: r.name().to_string(),
                offset: 0,
                what: format!(
                    "{} partition keys, but the manifest says numHashFiles={}",
                    partitions.len(),
                    manifest.num_hash_files
                ),
            });
        }
        Ok(HashDir {
            dir,
            manifest,
            partitions,
        })
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The partition keys.
    pub fn partitions(&self) -> &[Vec<u8>] {
        &self.partitions
    }

    /// Every batch, in key order.
    pub fn batches(&self) -> Batches<'_> {
        Batches {
            dir: self,
            file: 0,
            reader: None,
        }
    }
}

/// The batches of a [`HashDir`], file by file.
pub struct Batches<'a> {
    dir: &'a HashDir,
    file: usize,
    reader: Option<MapFileReader>,
}

impl Batches<'_> {
    /// The next `(batch start key, md5)`, `None` after the last file's last batch.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(Vec<u8>, [u8; 16])>> {
        loop {
            if self.reader.is_none() {
                if self.file >= self.dir.manifest.num_hash_files as usize {
                    return Ok(None);
                }
                let path = self.dir.dir.join(HASHES).join(part_name(self.file));
                self.reader = Some(MapFileReader::open(&path, IMMUTABLE_BYTES_WRITABLE)?);
            }
            let r = self.reader.as_mut().expect("opened above");
            match r.next()? {
                Some((key, value)) => {
                    let file = self.dir.dir.join(HASHES).join(part_name(self.file));
                    let bad = |what: String| Error::Corrupt {
                        file: file.join("data").display().to_string(),
                        offset: 0,
                        what,
                    };
                    let md5: [u8; 16] = ibw_bytes(&value)
                        .map_err(bad)?
                        .try_into()
                        .map_err(|_| bad("a hash that is not 16 bytes".into()))?;
                    if file_of(&self.dir.partitions, &key) != self.file {
                        return Err(bad(format!(
                            "batch {} belongs to another hash file",
                            printable(&key)
                        )));
                    }
                    return Ok(Some((key, md5)));
                }
                None => {
                    self.reader = None;
                    self.file += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hbase-2x/hashtable")
    }

    #[test]
    fn properties_escapes_round_trip_through_javas_rules() {
        let pairs = vec![
            (
                "a key:with=specials".to_string(),
                " lead#ing!\\ tab\t".to_string(),
            ),
            ("uni".to_string(), "é日\u{1F600}".to_string()),
            ("empty".to_string(), String::new()),
        ];
        let text = properties::store(&pairs, "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(
            text,
            "#Thu Jan 01 00:00:00 UTC 1970\n\
             a\\ key\\:with\\=specials=\\ lead\\#ing\\!\\\\ tab\\t\n\
             uni=\\u00E9\\u65E5\\uD83D\\uDE00\n\
             empty=\n"
        );
        assert_eq!(properties::parse(&text).expect("parse"), pairs);
    }

    #[test]
    fn properties_accept_any_separator_comments_and_continuation_lines() {
        let text = "! a comment\r\n  # another\r\nk1 = v1\r\nk2:v2\nk3 v3\nk4=first \\\n    second\\\\\nk5\n";
        let got = properties::parse(text).expect("parse");
        assert_eq!(
            got,
            vec![
                ("k1".into(), "v1".into()),
                ("k2".into(), "v2".into()),
                ("k3".into(), "v3".into()),
                ("k4".into(), "first second\\".into()),
                ("k5".into(), "".into()),
            ]
        );
    }

    #[test]
    fn the_fixture_manifest_reads_and_a_full_manifest_round_trips() {
        let text = std::fs::read_to_string(fixture().join(MANIFEST)).expect("manifest");
        let m = Manifest::parse(&text, "manifest").expect("parse");
        assert_eq!(m, Manifest::new("test", 10, 10));
        let full = Manifest {
            families: Some(vec![b"cf".to_vec(), b"g".to_vec()]),
            start_row: vec![0, 0xff, b'a'],
            stop_row: b"zz".to_vec(),
            scan_batch: Some(100),
            versions: Some(3),
            start_time: Some(5),
            end_time: Some(1_700_000_000_000),
            raw_scan: Some(false),
            ..Manifest::new("t:x=1", 8000, 3)
        };
        let text = full.to_text("date");
        assert!(text.contains("startRowHex=00ff61\n"), "{text}");
        assert!(text.contains("table=t\\:x\\=1\n"), "{text}");
        assert_eq!(Manifest::parse(&text, "m").expect("parse"), full);
        // Any order, other separators.
        let shuffled = "#x\nnumHashFiles : 2\ntargetBatchSize 10\ntable=t\n";
        assert_eq!(
            Manifest::parse(shuffled, "m").expect("parse"),
            Manifest::new("t", 10, 2)
        );
        let e = Manifest::parse("table=t\nnumHashFiles=1\n", "m").expect_err("no size");
        assert!(e.to_string().contains("targetBatchSize"), "{e}");
    }

    #[test]
    fn hash_files_follow_hashtables_formula() {
        assert_eq!(num_hash_files(10, None), 1);
        assert_eq!(num_hash_files(250, None), 2);
        assert_eq!(num_hash_files(10, Some(10)), 10);
        assert_eq!(num_hash_files(3, Some(10)), 3, "no more files than regions");
        assert_eq!(num_hash_files(0, None), 1);
        let starts: Vec<Vec<u8>> = std::iter::once(Vec::new())
            .chain((1..=9).map(|i: u8| vec![b'0' + i]))
            .collect();
        let keys: Vec<Vec<u8>> = (1..=9).map(|i: u8| vec![b'0' + i]).collect();
        assert_eq!(partition_keys(&starts, 10), keys);
        // 10 regions into 3 files: regions 10·1/3 = 3 and 10·2/3 = 6.
        assert_eq!(
            partition_keys(&starts, 3),
            vec![b"3".to_vec(), b"6".to_vec()]
        );
        assert!(partition_keys(&starts, 1).is_empty());
        assert_eq!(file_of(&keys, b""), 0);
        assert_eq!(file_of(&keys, b"1"), 1);
        assert_eq!(file_of(&keys, b"19"), 1);
        assert_eq!(file_of(&keys, b"99"), 9);
    }

    #[test]
    fn the_fixture_directory_reads_as_101_batches_in_order() {
        let d = HashDir::open(fixture()).expect("open");
        assert_eq!(d.partitions().len(), 9);
        let mut b = d.batches();
        let mut all = Vec::new();
        while let Some(x) = b.next().expect("batch") {
            all.push(x);
        }
        assert_eq!(all.len(), 101);
        assert_eq!(all[0], (Vec::new(), EMPTY_MD5));
        assert_eq!(all[1].0, b"1");
        assert_eq!(to_hex(&all[1].1), "89f1afb9350445279bee733c46cbd446");
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn a_written_directory_reads_back_and_matches_the_fixtures_records() {
        let src = HashDir::open(fixture()).expect("open");
        let out = tempfile::tempdir().expect("tempdir");
        let dir = out.path().join("h");
        let mut w = HashDirWriter::create(&dir, src.manifest().clone(), src.partitions().to_vec())
            .expect("create");
        let mut b = src.batches();
        while let Some((k, md5)) = b.next().expect("batch") {
            w.add(&k, &md5).expect("add");
        }
        assert!(!dir.join(MANIFEST).exists(), "the manifest comes last");
        w.finish("Wed Dec 30 01:23:41 UTC 2020").expect("finish");
        assert!(dir.join("hashes/_SUCCESS").exists());
        assert!(!dir.join("manifest.tmp").exists());
        // Record bytes equal HBase's (everything after the headers, which differ only in their
        // random sync bytes, and the escapes that carry them: none in files this small).
        for i in 0..10 {
            for f in ["data", "index"] {
                let p = format!("hashes/{}/{f}", part_name(i));
                let ours = std::fs::read(dir.join(&p)).expect("ours");
                let theirs = std::fs::read(fixture().join(&p)).expect("theirs");
                let h = Reader::open(fixture().join(&p)).expect("r").header_len() as usize;
                assert_eq!(ours.len(), theirs.len(), "{p}");
                assert_eq!(ours[..h - 16], theirs[..h - 16], "{p} header");
                if f == "data" {
                    assert_eq!(ours[h..], theirs[h..], "{p} records");
                }
            }
        }
        let back = HashDir::open(&dir).expect("reopen");
        assert_eq!(back.manifest(), src.manifest());
        assert_eq!(back.partitions(), src.partitions());
        // A second writer refuses the finished directory.
        assert!(
            HashDirWriter::create(&dir, src.manifest().clone(), src.partitions().to_vec()).is_err()
        );
    }

    #[test]
    fn a_run_interrupted_before_its_manifest_is_replaced_whole() {
        let out = tempfile::tempdir().expect("tempdir");
        let mut w = HashDirWriter::create(
            out.path(),
            Manifest::new("t", 10, 3),
            vec![b"m".to_vec(), b"t".to_vec()],
        )
        .expect("create");
        w.add(b"", &EMPTY_MD5).expect("add");
        drop(w); // killed: no manifest
        std::fs::write(out.path().join("notes.txt"), "mine").expect("a user's file");
        let w = HashDirWriter::create(out.path(), Manifest::new("t", 10, 1), Vec::new())
            .expect("create again");
        w.finish("d").expect("finish");
        assert!(!out.path().join("hashes/part-r-00001").exists());
        assert!(out.path().join("notes.txt").exists());
        let d = HashDir::open(out.path()).expect("open");
        let mut b = d.batches();
        assert!(
            b.next().expect("read").is_none(),
            "no batch of the first run"
        );
    }

    #[test]
    fn hash_files_without_batches_are_written_empty() {
        let out = tempfile::tempdir().expect("tempdir");
        let mut w = HashDirWriter::create(
            out.path(),
            Manifest::new("t", 10, 3),
            vec![b"m".to_vec(), b"t".to_vec()],
        )
        .expect("create");
        w.add(b"", &EMPTY_MD5).expect("add");
        w.add(b"z", &EMPTY_MD5).expect("add");
        w.finish("d").expect("finish");
        let d = HashDir::open(out.path()).expect("open");
        let mut b = d.batches();
        assert_eq!(b.next().expect("1").map(|x| x.0), Some(Vec::new()));
        assert_eq!(b.next().expect("2").map(|x| x.0), Some(b"z".to_vec()));
        assert!(b.next().expect("end").is_none());
        assert!(out.path().join("hashes/part-r-00001/data").exists());
    }

    #[test]
    fn printable_keys_round_trip() {
        let k = vec![0u8, b'a', 0xff, b'\\', b' '];
        assert_eq!(printable(&k), "\\x00a\\xFF\\x5C ");
        assert_eq!(from_printable(&printable(&k)), k);
        assert_eq!(from_printable("row\\x0"), b"row\\x0");
    }
}
