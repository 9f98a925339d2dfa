//! The manifest: which segments are live, which log is active, and the store's settings.
//!
//! File `MANIFEST`: `b"KURAMAN"` + format version (8 bytes), then one frame
//! `[u32 len LE][u32 crc32 LE][bincode Manifest]`. It is replaced atomically: written to
//! `MANIFEST.tmp`, fsynced, renamed over `MANIFEST`, directory fsynced.
//!
//! Version 2 ([`MANIFEST_VERSION`]) records, per segment, whether it is a *reference
//! segment* (a file shared with another region by a split, holding rows this store does not
//! own); version 1 manifests, written before splits shared files, are still read, every
//! segment then being an ordinary one.
//!
//! # Invariants
//! 1. Every segment named is complete and durable before the manifest naming it is written.
//! 2. Logs numbered below `log_number` hold nothing that is not in a named segment.
//! 3. A manifest that fails its checks is an error, never ignored: without it the store does
//!    not know which files hold its data.

use crate::codec::{self, MAX_FRAME};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::model::FamilyDescriptor;
use std::io::Read;
use std::path::Path;

pub(crate) const MANIFEST: &str = "MANIFEST";
const MANIFEST_TMP: &str = "MANIFEST.tmp";
const MAGIC: [u8; 7] = *b"KURAMAN";
/// The manifest format written (FORMAT.md §6); version 1 is still read.
pub(crate) const MANIFEST_VERSION: u8 = 2;

/// A live segment as the manifest records it.
#[derive(Clone, Debug, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub(crate) struct SegmentRecord {
    pub id: u64,
    pub entries: u64,
    pub max_seq: u64,
    pub file_bytes: u64,
    /// A reference segment: the file may hold rows the store does not own (it is shared with
    /// the other side of a split). Reads skip those rows; compaction rewrites it first.
    pub reference: bool,
}

/// A segment as a version 1 manifest records it (no reference flag).
#[derive(bincode::Decode)]
struct SegmentRecordV1 {
    id: u64,
    entries: u64,
    max_seq: u64,
    file_bytes: u64,
}

/// A version 1 manifest: [`Manifest`] with [`SegmentRecordV1`] segments.
#[derive(bincode::Decode)]
struct ManifestV1 {
    next_file: u64,
    log_number: u64,
    segments: Vec<SegmentRecordV1>,
    families: Vec<FamilyRecord>,
    family_floors: Vec<(Vec<u8>, u64)>,
    last_seq: u64,
    clock: i64,
}

impl From<ManifestV1> for Manifest {
    fn from(m: ManifestV1) -> Self {
        Manifest {
            next_file: m.next_file,
            log_number: m.log_number,
            segments: m
                .segments
                .into_iter()
                .map(|s| SegmentRecord {
                    id: s.id,
                    entries: s.entries,
                    max_seq: s.max_seq,
                    file_bytes: s.file_bytes,
                    reference: false,
                })
                .collect(),
            families: m.families,
            family_floors: m.family_floors,
            last_seq: m.last_seq,
            clock: m.clock,
        }
    }
}

/// A column family's settings.
#[derive(Clone, Debug, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub(crate) struct FamilyRecord {
    pub name: Vec<u8>,
    pub max_versions: u32,
    pub ttl_secs: Option<u64>,
}

impl From<&FamilyDescriptor> for FamilyRecord {
    fn from(f: &FamilyDescriptor) -> Self {
        FamilyRecord {
            name: f.name.clone(),
            max_versions: f.max_versions,
            ttl_secs: f.ttl_secs,
        }
    }
}

impl From<&FamilyRecord> for FamilyDescriptor {
    fn from(f: &FamilyRecord) -> Self {
        FamilyDescriptor {
            name: f.name.clone(),
            max_versions: f.max_versions.max(1),
            ttl_secs: f.ttl_secs,
        }
    }
}

/// The manifest's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub(crate) struct Manifest {
    /// Next file id to hand out (segments and logs share the sequence).
    pub next_file: u64,
    /// The oldest log that must be replayed.
    pub log_number: u64,
    pub segments: Vec<SegmentRecord>,
    pub families: Vec<FamilyRecord>,
    /// Per family name: entries with a seq below this are invisible (the family was dropped).
    pub family_floors: Vec<(Vec<u8>, u64)>,
    /// Highest seq handed out when the manifest was written.
    pub last_seq: u64,
    /// Store clock when the manifest was written.
    pub clock: i64,
}

fn header(version: u8) -> [u8; 8] {
    let mut h = [0u8; 8];
    h[..7].copy_from_slice(&MAGIC);
    h[7] = version;
    h
}

/// Read the manifest of `dir`; `Ok(None)` if there is none.
pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Option<Manifest>> {
    let path = dir.join(MANIFEST);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    fs.open_read(&path)
        .and_then(|mut r| r.read_to_end(&mut bytes))
        .map_err(|e| Error::io(&path, e))?;
    let corrupt = |offset: u64, reason: &str| Error::Corruption {
        file: path.clone(),
        offset,
        reason: reason.to_string(),
    };
    let version = match bytes.get(7) {
        Some(&v @ (1 | MANIFEST_VERSION)) if bytes.len() >= 16 && bytes[..8] == header(v) => v,
        _ => return Err(corrupt(0, "bad manifest header")),
    };
    let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    let crc = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    if len > MAX_FRAME || 16 + len != bytes.len() {
        return Err(corrupt(8, "manifest length does not match the file"));
    }
    if crc32fast::hash(&bytes[16..]) != crc {
        return Err(corrupt(16, "manifest checksum mismatch"));
    }
    let m = if version == 1 {
        codec::decode::<ManifestV1>(&bytes[16..]).map(Manifest::from)
    } else {
        codec::decode(&bytes[16..])
    };
    m.map(Some).map_err(|e| corrupt(16, &e.to_string()))
}

/// Durably replace the manifest of `dir`.
pub(crate) fn write(fs: &dyn FileSystem, dir: &Path, m: &Manifest) -> Result<()> {
    let mut payload = Vec::new();
    codec::encode_into(m, &mut payload)?;
    let mut bytes = Vec::with_capacity(16 + payload.len());
    bytes.extend_from_slice(&header(MANIFEST_VERSION));
    bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    bytes.extend_from_slice(&payload);
    let tmp = dir.join(MANIFEST_TMP);
    let path = dir.join(MANIFEST);
    let mut f = fs.create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    f.write_all(&bytes).map_err(|e| Error::io(&tmp, e))?;
    f.sync().map_err(|e| Error::io(&tmp, e))?;
    drop(f);
    fs.rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
    Ok(())
}
