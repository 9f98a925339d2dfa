//! A reader of the cells in an HBase HFile (version 2 or 3), as far as `shared/HBASE_FORMATS.md`
//! §8 describes it: uncompressed, unencoded, unencrypted data blocks. Kura never writes HFiles;
//! this reads the HFiles a real HBase wrote (the fixtures of `shared/fixtures/hbase-2x/`) so
//! tests can compare Kura's hashes with HBase's over the very same cells.
//!
//! What is read: the fixed trailer at the end of the file (`TRABLK"$`, a delimited
//! `FileTrailerProto`, the version in the last 4 bytes), the file info block it points at
//! (`FILEINF2`, `PBUF` + a delimited `FileInfoProto`: whether cells carry tags and an mvcc
//! number, and the data block encoding), then every block from the first to the last data block
//! offset: `DATABLK*` blocks are parsed cell by cell, other blocks between them (leaf index,
//! bloom chunks) are skipped by their header's size.
//!
//! # Invariants
//! 1. Anything this reader does not support (compression, data block encoding, encryption,
//!    HFile versions other than 2 and 3, blocks without checksums) is an
//!    [`Error::Unsupported`](HFileError::Unsupported) naming it, never a wrong cell.
//! 2. Every cell of every data block is returned in file order, and the count must equal the
//!    trailer's `entry_count`: a file that parses into another number of cells is corrupt.
//! 3. No input panics: every length is checked against the bytes that are there.
//! 4. The file is read into memory whole (HFiles this is meant for are test fixtures).

use crate::vint;
use std::path::Path;

/// A data block's header with checksums (HFile v2 minor ≥ 1, all of v3), bytes.
pub const BLOCK_HEADER: usize = 33;
/// `Compression.Algorithm.NONE`'s ordinal in the trailer.
const COMPRESSION_NONE: u64 = 2;
/// `CellType` byte of a Put.
pub const TYPE_PUT: u8 = 4;

/// What went wrong reading an HFile.
#[derive(Debug, thiserror::Error)]
pub enum HFileError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
    /// The bytes do not follow the format.
    #[error("{file}: corrupt HFile at byte {offset}: {what}")]
    Corrupt {
        file: String,
        offset: u64,
        what: String,
    },
    /// A feature this reader does not implement.
    #[error("{file}: unsupported HFile: {what}")]
    Unsupported { file: String, what: String },
}

/// One cell as stored (HBase `KeyValue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HCell {
    pub row: Vec<u8>,
    pub family: Vec<u8>,
    pub qualifier: Vec<u8>,
    pub timestamp: i64,
    /// KeyValue type: 4 Put, 8 Delete, 10 DeleteFamilyVersion, 12 DeleteColumn, 14 DeleteFamily.
    pub kind: u8,
    pub value: Vec<u8>,
    /// The cell's tags, raw (empty when the file has none).
    pub tags: Vec<u8>,
    /// The mvcc (sequence) number, 0 when the file stores none.
    pub mvcc: i64,
}

/// What the trailer and the file info say about a file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HFileInfo {
    pub major_version: u32,
    pub minor_version: u32,
    pub entry_count: u64,
    pub first_data_block_offset: u64,
    pub last_data_block_offset: u64,
    pub file_info_offset: u64,
    pub comparator: String,
    /// Cells carry `int16 tagsLen | tags` (the file info has `hfile.MAX_TAGS_LEN`).
    pub includes_tags: bool,
    /// Cells end with an mvcc VLong (`KEY_VALUE_VERSION` = 1).
    pub includes_mvcc: bool,
}

/// An HFile read into memory.
pub struct HFile {
    name: String,
    bytes: Vec<u8>,
    info: HFileInfo,
}

impl HFile {
    /// Reads `path` and its trailer and file info.
    pub fn open(path: &Path) -> Result<HFile, HFileError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| HFileError::Io {
            file: name.clone(),
            source,
        })?;
        HFile::from_bytes(&name, bytes)
    }

    /// Parses an HFile held in memory (`name` is for messages).
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<HFile, HFileError> {
        let mut f = HFile {
            name: name.to_string(),
            bytes,
            info: HFileInfo::default(),
        };
        f.info = f.read_trailer()?;
        f.read_file_info()?;
        Ok(f)
    }

    /// What the trailer and file info say.
    pub fn info(&self) -> &HFileInfo {
        &self.info
    }

    fn corrupt(&self, offset: usize, what: impl Into<String>) -> HFileError {
        HFileError::Corrupt {
            file: self.name.clone(),
            offset: offset as u64,
            what: what.into(),
        }
    }

    fn unsupported(&self, what: impl Into<String>) -> HFileError {
        HFileError::Unsupported {
            file: self.name.clone(),
            what: what.into(),
        }
    }

    fn read_trailer(&self) -> Result<HFileInfo, HFileError> {
        let len = self.bytes.len();
        let version = self
            .bytes
            .get(len.saturating_sub(4)..)
            .filter(|v| v.len() == 4)
            .ok_or_else(|| self.corrupt(0, "shorter than the 4-byte version at its end"))?;
        let version = u32::from_be_bytes([version[0], version[1], version[2], version[3]]);
        let (major, minor) = (version & 0x00ff_ffff, version >> 24);
        let trailer_size = match major {
            2 => 212,
            3 => 4096,
            _ => {
                return Err(self.unsupported(format!(
                    "version {major}.{minor} (this reader knows HFile versions 2 and 3)"
                )))
            }
        };
        let start = len.checked_sub(trailer_size).ok_or_else(|| {
            self.corrupt(0, format!("shorter than its {trailer_size}-byte trailer"))
        })?;
        let t = &self.bytes[start..len - 4];
        if !t.starts_with(b"TRABLK\"$") {
            return Err(self.corrupt(start, "the trailer does not start with TRABLK\"$"));
        }
        let at = start + 8;
        let (msg_len, n) =
            pb_varint(&t[8..]).ok_or_else(|| self.corrupt(at, "bad trailer length"))?;
        let msg = usize::try_from(msg_len)
            .ok()
            .and_then(|l| t.get(8 + n..(8 + n).checked_add(l)?))
            .ok_or_else(|| self.corrupt(at, "the trailer message runs past the trailer"))?;
        let mut info = HFileInfo {
            major_version: major,
            minor_version: minor,
            ..HFileInfo::default()
        };
        let mut compression = COMPRESSION_NONE;
        for field in PbFields::new(msg) {
            let (tag, value) = field.map_err(|e| self.corrupt(at, format!("trailer: {e}")))?;
            match (tag, value) {
                (1, PbValue::Varint(v)) => info.file_info_offset = v,
                (7, PbValue::Varint(v)) => info.entry_count = v,
                (9, PbValue::Varint(v)) => info.first_data_block_offset = v,
                (10, PbValue::Varint(v)) => info.last_data_block_offset = v,
                (11, PbValue::Bytes(b)) => info.comparator = String::from_utf8_lossy(b).into(),
                (12, PbValue::Varint(v)) => compression = v,
                (13, PbValue::Bytes(_)) => {
                    return Err(self.unsupported("the file is encrypted"));
                }
                _ => {}
            }
        }
        if compression != COMPRESSION_NONE {
            return Err(self.unsupported(format!(
                "compressed blocks (compression codec ordinal {compression}; only NONE = 2 is read)"
            )));
        }
        if major == 2 && minor == 0 {
            return Err(self.unsupported("blocks without checksums (version 2.0)"));
        }
        Ok(info)
    }

    /// Reads the file info block: tags, mvcc and block encoding.
    fn read_file_info(&mut self) -> Result<(), HFileError> {
        let off = usize::try_from(self.info.file_info_offset).unwrap_or(usize::MAX);
        let (magic, body) = self.block(off)?;
        if magic != *b"FILEINF2" {
            return Err(self.corrupt(
                off,
                "the trailer's file info offset is not a FILEINF2 block",
            ));
        }
        let body = body
            .strip_prefix(b"PBUF")
            .ok_or_else(|| self.corrupt(off, "the file info does not start with PBUF"))?;
        let (msg_len, n) =
            pb_varint(body).ok_or_else(|| self.corrupt(off, "bad file info length"))?;
        let msg = usize::try_from(msg_len)
            .ok()
            .and_then(|l| body.get(n..n.checked_add(l)?))
            .ok_or_else(|| self.corrupt(off, "the file info runs past its block"))?;
        let (mut tags, mut mvcc, mut encoding) = (false, false, None);
        for field in PbFields::new(msg) {
            let (tag, value) = field.map_err(|e| self.corrupt(off, format!("file info: {e}")))?;
            let (1, PbValue::Bytes(pair)) = (tag, value) else {
                continue;
            };
            let (mut key, mut val): (&[u8], &[u8]) = (&[], &[]);
            for f in PbFields::new(pair) {
                match f.map_err(|e| self.corrupt(off, format!("file info entry: {e}")))? {
                    (1, PbValue::Bytes(b)) => key = b,
                    (2, PbValue::Bytes(b)) => val = b,
                    _ => {}
                }
            }
            match key {
                b"hfile.MAX_TAGS_LEN" => tags = true,
                b"KEY_VALUE_VERSION" => mvcc = val == [0, 0, 0, 1],
                b"DATA_BLOCK_ENCODING" => {
                    encoding = Some(String::from_utf8_lossy(val).into_owned())
                }
                _ => {}
            }
        }
        if let Some(e) = encoding.filter(|e| e != "NONE") {
            return Err(self.unsupported(format!("data block encoding {e}")));
        }
        self.info.includes_tags = tags;
        self.info.includes_mvcc = mvcc;
        Ok(())
    }

    /// The block at `off`: its magic and its bytes without header and checksums.
    fn block(&self, off: usize) -> Result<([u8; 8], &[u8]), HFileError> {
        let h = self
            .bytes
            .get(off..off.saturating_add(BLOCK_HEADER))
            .ok_or_else(|| self.corrupt(off, "a block header runs past the end of the file"))?;
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&h[..8]);
        let int = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]) as usize;
        let (on_disk, uncompressed) = (int(8), int(12));
        if on_disk < uncompressed {
            return Err(self.corrupt(off, "a block is smaller on disk than its data"));
        }
        let start = off + BLOCK_HEADER;
        let body = self
            .bytes
            .get(start..start + uncompressed)
            .ok_or_else(|| self.corrupt(off, "a block runs past the end of the file"))?;
        Ok((magic, body))
    }

    /// Every cell of every data block, in file order.
    pub fn cells(&self) -> Result<Vec<HCell>, HFileError> {
        let mut out = Vec::new();
        if self.info.entry_count == 0 {
            return Ok(out);
        }
        let mut off = usize::try_from(self.info.first_data_block_offset).unwrap_or(usize::MAX);
        let last = usize::try_from(self.info.last_data_block_offset).unwrap_or(usize::MAX);
        while off <= last {
            let (magic, body) = self.block(off)?;
            match &magic {
                b"DATABLK*" => self.parse_cells(off + BLOCK_HEADER, body, &mut out)?,
                b"DATABLKE" => return Err(self.unsupported("an encoded data block (DATABLKE)")),
                _ => {}
            }
            let h = &self.bytes[off..off + BLOCK_HEADER];
            let on_disk = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
            off += BLOCK_HEADER + on_disk;
        }
        if out.len() as u64 != self.info.entry_count {
            return Err(self.corrupt(
                off,
                format!(
                    "the data blocks hold {} cells but the trailer says {}",
                    out.len(),
                    self.info.entry_count
                ),
            ));
        }
        Ok(out)
    }

    fn parse_cells(
        &self,
        base: usize,
        mut b: &[u8],
        out: &mut Vec<HCell>,
    ) -> Result<(), HFileError> {
        let mut pos = base;
        let short = |pos: usize| self.corrupt(pos, "a cell runs past the end of its block");
        while !b.is_empty() {
            let cell_at = pos;
            let take = |b: &mut &[u8], pos: &mut usize, n: usize| -> Result<Vec<u8>, HFileError> {
                let (head, rest) = b.split_at_checked(n).ok_or_else(|| short(cell_at))?;
                *b = rest;
                *pos += n;
                Ok(head.to_vec())
            };
            let key_len = be_u32(&take(&mut b, &mut pos, 4)?) as usize;
            let value_len = be_u32(&take(&mut b, &mut pos, 4)?) as usize;
            let key = take(&mut b, &mut pos, key_len)?;
            let value = take(&mut b, &mut pos, value_len)?;
            let (row, family, qualifier, timestamp, kind) =
                split_key(&key).ok_or_else(|| self.corrupt(cell_at, "a cell key is malformed"))?;
            let tags = if self.info.includes_tags {
                let len = take(&mut b, &mut pos, 2)?;
                let len = u16::from_be_bytes([len[0], len[1]]) as usize;
                take(&mut b, &mut pos, len)?
            } else {
                Vec::new()
            };
            let mvcc = if self.info.includes_mvcc {
                let (v, n) = vint::read_vlong(b).ok_or_else(|| short(cell_at))?;
                b = &b[n..];
                pos += n;
                v
            } else {
                0
            };
            out.push(HCell {
                row,
                family,
                qualifier,
                timestamp,
                kind,
                value,
                tags,
                mvcc,
            });
        }
        Ok(())
    }
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A KeyValue key: `int16 rowLen | row | u8 famLen | family | qualifier | int64 ts | u8 type`.
#[allow(clippy::type_complexity)]
fn split_key(key: &[u8]) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>, i64, u8)> {
    let row_len = u16::from_be_bytes([*key.first()?, *key.get(1)?]) as usize;
    let row = key.get(2..2 + row_len)?;
    let fam_len = *key.get(2 + row_len)? as usize;
    let fam_start = 3 + row_len;
    let family = key.get(fam_start..fam_start + fam_len)?;
    let qual_end = key.len().checked_sub(9)?;
    let qualifier = key.get(fam_start + fam_len..qual_end)?;
    let ts = i64::from_be_bytes(key.get(qual_end..qual_end + 8)?.try_into().ok()?);
    Some((
        row.to_vec(),
        family.to_vec(),
        qualifier.to_vec(),
        ts,
        key[key.len() - 1],
    ))
}

/// A protobuf base-128 varint from the front of `b`: value and length.
fn pb_varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

enum PbValue<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The fields of one protobuf message: `(field number, value)`.
struct PbFields<'a> {
    rest: &'a [u8],
}

impl<'a> PbFields<'a> {
    fn new(msg: &'a [u8]) -> Self {
        PbFields { rest: msg }
    }
}

impl<'a> Iterator for PbFields<'a> {
    type Item = Result<(u64, PbValue<'a>), &'static str>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let step = || -> Result<(u64, PbValue<'a>, &'a [u8]), &'static str> {
            let (key, n) = pb_varint(self.rest).ok_or("bad field key")?;
            let rest = &self.rest[n..];
            match key & 7 {
                0 => {
                    let (v, n) = pb_varint(rest).ok_or("bad varint")?;
                    Ok((key >> 3, PbValue::Varint(v), &rest[n..]))
                }
                1 => Ok((
                    key >> 3,
                    PbValue::Fixed,
                    rest.get(8..).ok_or("short fixed64")?,
                )),
                5 => Ok((
                    key >> 3,
                    PbValue::Fixed,
                    rest.get(4..).ok_or("short fixed32")?,
                )),
                2 => {
                    let (len, n) = pb_varint(rest).ok_or("bad length")?;
                    let len = usize::try_from(len).map_err(|_| "bad length")?;
                    let end = n.checked_add(len).ok_or("bad length")?;
                    let body = rest.get(n..end).ok_or("a field runs past its message")?;
                    Ok((key >> 3, PbValue::Bytes(body), &rest[end..]))
                }
                _ => Err("unknown wire type"),
            }
        };
        match step() {
            Ok((tag, v, rest)) => {
                self.rest = rest;
                Some(Ok((tag, v)))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The nine HFiles of `tests/fixtures/hbase-2x/hfiles/`.
    fn fixture_hfiles() -> Vec<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hbase-2x/hfiles");
        let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("tests/fixtures/hbase-2x/hfiles")
            .map(|e| e.expect("dir entry").path())
            .collect();
        out.sort();
        assert_eq!(out.len(), 9, "{}", dir.display());
        out
    }

    #[test]
    fn the_fixture_hfiles_hold_the_hundred_put_cells_hbase_wrote() {
        let mut cells = Vec::new();
        for path in fixture_hfiles() {
            let f = HFile::open(&path).expect("readable");
            assert_eq!(f.info().major_version, 3);
            assert!(f.info().includes_mvcc && !f.info().includes_tags);
            cells.extend(f.cells().expect("cells"));
        }
        assert_eq!(cells.len(), 100);
        cells.sort_by(|a, b| a.row.cmp(&b.row));
        for c in &cells {
            let n = std::str::from_utf8(&c.row).expect("ascii row");
            assert_eq!(c.family, b"cf");
            assert_eq!(c.qualifier, b"a");
            assert_eq!(c.kind, TYPE_PUT);
            assert_eq!(c.value, format!("value{n}").as_bytes());
            assert!((1_609_291_270_000..1_609_291_290_000).contains(&c.timestamp));
        }
        // HBASE_FORMATS.md §9 (d): row 1's cell.
        let one = cells.iter().find(|c| c.row == b"1").expect("row 1");
        assert_eq!((one.timestamp, one.mvcc), (1_609_291_279_317, 4));
    }

    #[test]
    fn no_truncation_or_flipped_byte_of_an_hfile_panics() {
        let bytes = std::fs::read(&fixture_hfiles()[0]).expect("read");
        let read = |b: Vec<u8>| {
            if let Ok(f) = HFile::from_bytes("x", b) {
                let _ = f.cells();
            }
        };
        for cut in (0..bytes.len()).step_by(7) {
            read(bytes[..cut].to_vec());
        }
        for at in 0..bytes.len() {
            for v in [0x00, 0x7f, 0xff] {
                let mut b = bytes.clone();
                b[at] = v;
                read(b);
            }
        }
    }

    #[test]
    fn a_compressed_or_truncated_hfile_is_refused_by_name() {
        let path = &fixture_hfiles()[0];
        let bytes = std::fs::read(path).expect("read");
        let cut = bytes[..bytes.len() - 10].to_vec();
        assert!(HFile::from_bytes("cut", cut).is_err());
        // Compression codec ordinal 2 (NONE) -> 1 (GZ) in the trailer's field 12.
        let mut gz = bytes.clone();
        let t = gz.len() - 4096;
        let msg = &gz[t..t + 100];
        let i = msg
            .windows(2)
            .position(|w| w == [0x60, 0x02])
            .expect("field 12");
        gz[t + i + 1] = 1;
        match HFile::from_bytes("gz", gz) {
            Err(HFileError::Unsupported { what, .. }) => {
                assert!(what.contains("compress"), "{what}")
            }
            Err(e) => panic!("wrong error {e}"),
            Ok(_) => panic!("a gzip HFile was read"),
        }
        // A data block's magic turned into an encoded one.
        let mut enc = bytes;
        enc[7] = b'E';
        let f = HFile::from_bytes("enc", enc).expect("trailer intact");
        assert!(matches!(f.cells(), Err(HFileError::Unsupported { .. })));
    }
}
