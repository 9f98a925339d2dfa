//! The catalog of tables: names, families, salting, region layout; and [`RegionId`], the type
//! of a region's identity. Persisted as JSON (`catalog.json`, region ids and buckets as bare
//! numbers); restored on restart.

use crate::salt::BucketRange;
pub use kura_backend::schema::{validate_descriptor, validate_families, validate_table_name};
pub use kura_backend::{SaltConfig, TableDescriptor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A region's identity: the name of its directory, `<data dir>/regions/<id>`, and the number
/// operators see and split by.
///
/// Invariant: ids are allocated by the catalog's `next_region_id`, which only grows, so an id
/// a committed catalog named is never given to another region of the same data directory. (An
/// id allocated by a change that did not commit may be allocated again; its directory is
/// removed first.) The number is raw only at the edges: the catalog file (the bare number,
/// `serde(transparent)`), directory names, logs, errors, the operators' views and the HTTP API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RegionId(u64);

impl RegionId {
    /// The id of the first region of a fresh data directory.
    pub const FIRST: RegionId = RegionId(1);

    /// Region id `n` (a number from an operator, a directory name or a test).
    pub const fn new(n: u64) -> Self {
        RegionId(n)
    }

    /// The id's number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The id allocated after this one.
    fn next(self) -> Self {
        RegionId(self.0 + 1)
    }
}

impl fmt::Display for RegionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

// ---------------------------------------------------------------------------------------------
// Persistence and validation (implementation; the types above are the contract).
// ---------------------------------------------------------------------------------------------

use crate::error::{ActorError, Result};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Version of the catalog file's JSON shape; bumped on any incompatible change.
pub const CATALOG_FORMAT: u32 = 1;

/// File name of the catalog inside the data directory.
pub const CATALOG_FILE: &str = "catalog.json";

/// Directory (inside the data directory) holding one sub-directory per region, named by id.
pub const REGIONS_DIR: &str = "regions";

/// One region of a table: an id (which names its data directory) and the salt buckets it
/// owns. In the file: `{"id": .., "bucket_start": .., "bucket_end": ..}`, the end excluded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "RegionMetaFile", try_from = "RegionMetaFile")]
pub struct RegionMeta {
    pub id: RegionId,
    pub buckets: BucketRange,
}

/// [`RegionMeta`] as the catalog file spells it.
#[derive(Serialize, Deserialize)]
struct RegionMetaFile {
    id: RegionId,
    bucket_start: u32,
    bucket_end: u32,
}

impl From<RegionMeta> for RegionMetaFile {
    fn from(m: RegionMeta) -> Self {
        let (bucket_start, bucket_end) = m.buckets.bounds();
        RegionMetaFile {
            id: m.id,
            bucket_start,
            bucket_end,
        }
    }
}

impl TryFrom<RegionMetaFile> for RegionMeta {
    type Error = String;

    fn try_from(f: RegionMetaFile) -> std::result::Result<Self, String> {
        let buckets = BucketRange::new(f.bucket_start, f.bucket_end).ok_or_else(|| {
            format!(
                "region {} has an empty bucket range [{}, {})",
                f.id, f.bucket_start, f.bucket_end
            )
        })?;
        Ok(RegionMeta { id: f.id, buckets })
    }
}

/// A table and its region layout, as persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableEntry {
    pub descriptor: TableDescriptor,
    /// Sorted by bucket; the ranges are disjoint and cover `[0, buckets)`.
    pub regions: Vec<RegionMeta>,
}

/// The whole catalog: every table and the next free region id.
///
/// # Invariants
/// 1. Region ids are unique across all tables and never reused while the catalog names them.
/// 2. The regions of a table cover its buckets exactly once, in order.
/// 3. The file on disk is replaced atomically (temp file, fsync, rename, fsync dir): after a
///    crash it holds either the old catalog or the new one, never a mix. Writing it is the
///    commit point of every layout change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    pub format: u32,
    pub next_region_id: RegionId,
    pub tables: BTreeMap<String, TableEntry>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            format: CATALOG_FORMAT,
            next_region_id: RegionId::FIRST,
            tables: BTreeMap::new(),
        }
    }
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> ActorError {
    ActorError::Internal(format!("{what} {}: {e}", path.display()))
}

impl Catalog {
    /// Load `<data_dir>/catalog.json`, or an empty catalog if the file does not exist.
    pub fn load(data_dir: &Path) -> Result<Catalog> {
        let path = data_dir.join(CATALOG_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A fresh data dir, unless regions are there: then the catalog was lost, and
                // starting empty would delete them all as orphans. Empty region directories do
                // not count: the first table's are created before the first catalog names them,
                // and a crash in between leaves them so (they are removed as orphans).
                let regions = data_dir.join(REGIONS_DIR);
                let found = fs::read_dir(&regions).map_or(0, |entries| {
                    entries
                        .flatten()
                        .filter(|e| {
                            e.file_name()
                                .to_str()
                                .is_some_and(|n| n.parse::<u64>().is_ok())
                                && fs::read_dir(e.path()).map_or(true, |mut d| d.next().is_some())
                        })
                        .count()
                });
                if found > 0 {
                    return Err(ActorError::Internal(format!(
                        "{} is missing but {} holds {found} region directories: restore the \
                         latest copy of the catalog (nothing was changed; an older copy makes \
                         the regions created since then orphans, moved to orphaned-regions/ at \
                         start), or move {} \
                         away to start an empty store",
                        path.display(),
                        regions.display(),
                        regions.display()
                    )));
                }
                return Ok(Catalog::default());
            }
            Err(e) => return Err(io_err("reading", &path, e)),
        };
        let catalog: Catalog = serde_json::from_slice(&bytes).map_err(|e| {
            ActorError::Internal(format!("catalog {} is damaged: {e}", path.display()))
        })?;
        if catalog.format != CATALOG_FORMAT {
            return Err(ActorError::Internal(format!(
                "catalog {} has format {}, this build reads {CATALOG_FORMAT}",
                path.display(),
                catalog.format
            )));
        }
        catalog.check()?;
        Ok(catalog)
    }

    /// Write the catalog atomically to `<data_dir>/catalog.json`.
    pub fn save(&self, data_dir: &Path) -> Result<()> {
        let path = data_dir.join(CATALOG_FILE);
        let tmp = data_dir.join(format!("{CATALOG_FILE}.tmp"));
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| ActorError::Internal(format!("encoding the catalog: {e}")))?;
        {
            let mut f = fs::File::create(&tmp).map_err(|e| io_err("creating", &tmp, e))?;
            f.write_all(&bytes)
                .map_err(|e| io_err("writing", &tmp, e))?;
            f.sync_all().map_err(|e| io_err("syncing", &tmp, e))?;
        }
        fs::rename(&tmp, &path).map_err(|e| io_err("renaming onto", &path, e))?;
        sync_dir(data_dir)
    }

    /// Check the invariants of a loaded catalog (a hand-edited or damaged file is refused).
    pub fn check(&self) -> Result<()> {
        let mut ids = std::collections::BTreeSet::new();
        for (name, entry) in &self.tables {
            let bad = |why: &str| ActorError::Internal(format!("catalog table {name}: {why}"));
            if &entry.descriptor.name != name {
                return Err(bad("entry name differs from its key"));
            }
            let mut next = 0u32;
            for r in &entry.regions {
                let (start, end) = r.buckets.bounds();
                if start != next {
                    return Err(bad("region bucket ranges do not tile the buckets"));
                }
                if r.id >= self.next_region_id || !ids.insert(r.id) {
                    return Err(bad("region id reused or beyond next_region_id"));
                }
                next = end;
            }
            if next != entry.descriptor.salt.buckets {
                return Err(bad("region bucket ranges do not cover every bucket"));
            }
        }
        Ok(())
    }

    /// Every region id the catalog names.
    pub fn region_ids(&self) -> impl Iterator<Item = RegionId> + '_ {
        self.tables
            .values()
            .flat_map(|t| t.regions.iter().map(|r| r.id))
    }

    /// Allocate a fresh region id.
    pub fn allocate_region_id(&mut self) -> RegionId {
        let id = self.next_region_id;
        self.next_region_id = id.next();
        id
    }
}

/// fsync a directory so that a rename or a file creation inside it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let d = fs::File::open(dir).map_err(|e| io_err("opening directory", dir, e))?;
    d.sync_all()
        .map_err(|e| io_err("syncing directory", dir, e))
}

/// The data directory of a region: `<data_dir>/regions/<id>` (never derived from user input).
pub fn region_dir(data_dir: &Path, id: RegionId) -> PathBuf {
    data_dir.join(REGIONS_DIR).join(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kura_backend::FamilyDescriptor;

    #[test]
    fn catalog_round_trips_through_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            Catalog::load(dir.path()).expect("empty"),
            Catalog::default()
        );
        let mut c = Catalog::default();
        let desc = TableDescriptor::new("t1", vec![FamilyDescriptor::new("cf")]);
        let regions = BucketRange::even(desc.salt.buckets, 2)
            .into_iter()
            .map(|buckets| RegionMeta {
                id: c.allocate_region_id(),
                buckets,
            })
            .collect();
        c.tables.insert(
            "t1".into(),
            TableEntry {
                descriptor: desc,
                regions,
            },
        );
        c.save(dir.path()).expect("save");
        assert_eq!(Catalog::load(dir.path()).expect("load"), c);
    }

    #[test]
    fn the_catalog_file_spells_ids_and_buckets_as_bare_numbers() {
        let mut c = Catalog {
            next_region_id: RegionId::new(7),
            ..Catalog::default()
        };
        let mut desc = TableDescriptor::new("t", vec![FamilyDescriptor::new("cf")]);
        desc.salt.buckets = 8;
        let regions = vec![
            RegionMeta {
                id: RegionId::new(5),
                buckets: BucketRange::new(0, 3).expect("range"),
            },
            RegionMeta {
                id: RegionId::new(6),
                buckets: BucketRange::new(3, 8).expect("range"),
            },
        ];
        c.tables.insert(
            "t".into(),
            TableEntry {
                descriptor: desc.clone(),
                regions,
            },
        );
        // The same catalog in plain numbers, as the file has always spelled it.
        #[derive(Serialize)]
        struct Plain {
            format: u32,
            next_region_id: u64,
            tables: BTreeMap<String, PlainTable>,
        }
        #[derive(Serialize)]
        struct PlainTable {
            descriptor: TableDescriptor,
            regions: Vec<PlainRegion>,
        }
        #[derive(Serialize)]
        struct PlainRegion {
            id: u64,
            bucket_start: u32,
            bucket_end: u32,
        }
        let plain = Plain {
            format: 1,
            next_region_id: 7,
            tables: BTreeMap::from([(
                "t".to_string(),
                PlainTable {
                    descriptor: desc,
                    regions: vec![
                        PlainRegion {
                            id: 5,
                            bucket_start: 0,
                            bucket_end: 3,
                        },
                        PlainRegion {
                            id: 6,
                            bucket_start: 3,
                            bucket_end: 8,
                        },
                    ],
                },
            )]),
        };
        let bytes = serde_json::to_vec_pretty(&c).expect("encode");
        assert_eq!(
            String::from_utf8(bytes.clone()).expect("utf-8"),
            serde_json::to_string_pretty(&plain).expect("encode"),
            "the catalog's bytes must not change"
        );
        let back: Catalog = serde_json::from_slice(&bytes).expect("decode");
        assert_eq!(back, c);
    }

    #[test]
    fn a_catalog_region_with_no_buckets_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let json = r#"{"format":1,"next_region_id":2,"tables":{"t":{"descriptor":DESC,
            "regions":[{"id":1,"bucket_start":4,"bucket_end":4}]}}}"#;
        let desc = TableDescriptor::new("t", vec![FamilyDescriptor::new("cf")]);
        let json = json.replace("DESC", &serde_json::to_string(&desc).expect("descriptor"));
        fs::write(dir.path().join(CATALOG_FILE), json).expect("write");
        match Catalog::load(dir.path()) {
            Err(ActorError::Internal(m)) => assert!(m.contains("empty bucket range"), "{m}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_damaged_catalog_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(CATALOG_FILE), b"{not json").expect("write");
        assert!(matches!(
            Catalog::load(dir.path()),
            Err(ActorError::Internal(_))
        ));
    }
}
