//! The catalog of tables: names, families, salting, region layout. Persisted; restored on restart.

pub use kura_backend::schema::{validate_descriptor, validate_families, validate_table_name};
pub use kura_backend::{SaltConfig, TableDescriptor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// One region of a table: an id (which names its data directory) and the salt buckets
/// `[bucket_start, bucket_end)` it owns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionMeta {
    pub id: u64,
    pub bucket_start: u32,
    pub bucket_end: u32,
}

impl RegionMeta {
    /// True if the region owns `bucket`.
    pub fn owns(&self, bucket: u32) -> bool {
        bucket >= self.bucket_start && bucket < self.bucket_end
    }
}

/// A table and its region layout, as persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableEntry {
    pub descriptor: TableDescriptor,
    /// Sorted by `bucket_start`; the ranges are disjoint and cover `[0, buckets)`.
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
    pub next_region_id: u64,
    pub tables: BTreeMap<String, TableEntry>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            format: CATALOG_FORMAT,
            next_region_id: 1,
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
                if r.bucket_start != next || r.bucket_end <= r.bucket_start {
                    return Err(bad("region bucket ranges do not tile the buckets"));
                }
                if r.id >= self.next_region_id || !ids.insert(r.id) {
                    return Err(bad("region id reused or beyond next_region_id"));
                }
                next = r.bucket_end;
            }
            if next != entry.descriptor.salt.buckets {
                return Err(bad("region bucket ranges do not cover every bucket"));
            }
        }
        Ok(())
    }

    /// Every region id the catalog names.
    pub fn region_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.tables
            .values()
            .flat_map(|t| t.regions.iter().map(|r| r.id))
    }

    /// Allocate a fresh region id.
    pub fn allocate_region_id(&mut self) -> u64 {
        let id = self.next_region_id;
        self.next_region_id += 1;
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
pub fn region_dir(data_dir: &Path, id: u64) -> PathBuf {
    data_dir.join(REGIONS_DIR).join(id.to_string())
}

/// Split `buckets` into `regions` contiguous, nearly equal ranges.
pub fn even_layout(buckets: u32, regions: u32) -> Vec<(u32, u32)> {
    let regions = regions.clamp(1, buckets.max(1));
    (0..regions)
        .map(|i| {
            let start = (u64::from(buckets) * u64::from(i) / u64::from(regions)) as u32;
            let end = (u64::from(buckets) * u64::from(i + 1) / u64::from(regions)) as u32;
            (start, end)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kura_backend::FamilyDescriptor;

    #[test]
    fn even_layout_tiles_the_buckets() {
        assert_eq!(even_layout(8, 4), vec![(0, 2), (2, 4), (4, 6), (6, 8)]);
        assert_eq!(even_layout(3, 8), vec![(0, 1), (1, 2), (2, 3)]);
        let l = even_layout(256, 7);
        assert_eq!(l.first().map(|r| r.0), Some(0));
        assert_eq!(l.last().map(|r| r.1), Some(256));
        assert!(l.windows(2).all(|w| w[0].1 == w[1].0 && w[0].0 < w[0].1));
    }

    #[test]
    fn catalog_round_trips_through_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            Catalog::load(dir.path()).expect("empty"),
            Catalog::default()
        );
        let mut c = Catalog::default();
        let desc = TableDescriptor::new("t1", vec![FamilyDescriptor::new("cf")]);
        let regions = even_layout(desc.salt.buckets, 2)
            .into_iter()
            .map(|(s, e)| RegionMeta {
                id: 0,
                bucket_start: s,
                bucket_end: e,
            })
            .map(|mut r| {
                r.id = c.allocate_region_id();
                r
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
    fn a_damaged_catalog_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(CATALOG_FILE), b"{not json").expect("write");
        assert!(matches!(
            Catalog::load(dir.path()),
            Err(ActorError::Internal(_))
        ));
    }
}
