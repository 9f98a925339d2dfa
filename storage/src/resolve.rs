//! Resolving a sorted stream of entries into what is visible: the one place HBase's version
//! and delete semantics are decided, shared by get, scan, flush and major compaction.
//!
//! Within one row, entries arrive in key order (see [`crate::key`]): per family its delete
//! markers first, then per qualifier newest timestamp first, markers before puts at an equal
//! timestamp, latest write first among identical keys.
//!
//! # Invariants (the visibility rules)
//! 1. An entry of a family that is not live, or with a seq below the family's floor (the family
//!    was dropped after it was written), is invisible.
//! 2. A put is masked by a family marker or a column marker with timestamp `>=` its own, and by
//!    a version marker with exactly its timestamp, whatever the arrival order.
//! 3. Of identical keys only the latest write (highest seq) counts: a re-put overwrites.
//! 4. A put older than the family TTL is expired.
//! 5. Of the remaining puts of a column, only the newest `max_versions` of the family are
//!    retained. Reads then apply the column selection, the time range and the requested
//!    number of versions on top of the retained ones, so a major compaction (which keeps
//!    exactly the retained puts) never changes what a read returns.

use crate::key::{Entry, Kind};
use crate::model::FamilyDescriptor;
use std::collections::BTreeMap;

/// The retention rule of one live family.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FamilyRule {
    pub max_versions: u32,
    /// Time to live in milliseconds (`None`: forever).
    pub ttl_ms: Option<i64>,
    pub floor: u64,
}

/// The live families with their floors (computed when the families change, not per read).
#[derive(Clone, Debug, Default)]
pub(crate) struct Rules {
    families: Vec<(Vec<u8>, FamilyRule)>,
}

impl Rules {
    pub(crate) fn new(families: &[FamilyDescriptor], floors: &BTreeMap<Vec<u8>, u64>) -> Rules {
        let families = families
            .iter()
            .map(|f| {
                let ttl_ms = f
                    .ttl_secs
                    .map(|secs| i64::try_from(secs).unwrap_or(i64::MAX).saturating_mul(1000));
                let rule = FamilyRule {
                    max_versions: f.max_versions.max(1),
                    ttl_ms,
                    floor: floors.get(&f.name).copied().unwrap_or(0),
                };
                (f.name.clone(), rule)
            })
            .collect();
        Rules { families }
    }

    pub(crate) fn get(&self, family: &[u8]) -> Option<FamilyRule> {
        self.families
            .iter()
            .find(|(n, _)| n.as_slice() == family)
            .map(|(_, r)| *r)
    }
}

/// What [`Retention::offer`] decided about an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Invisible and useless: masked, overwritten, expired, or of a dropped family.
    Drop,
    /// A put beyond the newest `max_versions` of its column: invisible now, but it would come
    /// back if a version marker later masked one of the newer puts (HBase's "deletes can
    /// resurface old versions until a compaction"). A major compaction drops it; a flush drops
    /// it only when that cannot change a read (see `region_store::flush::write_flushed`).
    Excess,
    /// A live delete marker (kept by minor compactions, dropped by major ones).
    Marker,
    /// A retained put.
    Keep,
}

/// Walks the entries of one row and applies the visibility rules.
pub(crate) struct Retention<'a, 'r> {
    rules: &'r Rules,
    now_ms: i64,
    family: Option<&'a [u8]>,
    rule: Option<FamilyRule>,
    ttl_cutoff: i64,
    family_del: Option<i64>,
    qualifier: Option<&'a [u8]>,
    column_del: Option<i64>,
    version_del: Option<i64>,
    last_put: Option<i64>,
    /// Timestamp of the last entry of the current column.
    last_ts: Option<i64>,
    versions: u32,
}

impl<'a, 'r> Retention<'a, 'r> {
    /// Judge entries as of `now_ms` (for TTLs).
    pub(crate) fn new(rules: &'r Rules, now_ms: i64) -> Self {
        Retention {
            rules,
            now_ms,
            family: None,
            rule: None,
            ttl_cutoff: i64::MIN,
            family_del: None,
            qualifier: None,
            column_del: None,
            version_del: None,
            last_put: None,
            last_ts: None,
            versions: 0,
        }
    }

    /// Judge the next entry of the row (entries must come in key order, one row only).
    pub(crate) fn offer(&mut self, e: &Entry<'a>) -> Verdict {
        if self.family != Some(e.family) {
            self.family = Some(e.family);
            self.rule = self.rules.get(e.family);
            self.ttl_cutoff = match self.rule.and_then(|r| r.ttl_ms) {
                Some(ttl) => self.now_ms.saturating_sub(ttl),
                None => i64::MIN,
            };
            self.family_del = None;
            self.qualifier = None;
            self.reset_column();
        }
        let Some(rule) = self.rule else {
            return Verdict::Drop;
        };
        if e.seq < rule.floor {
            return Verdict::Drop;
        }
        if e.kind == Kind::DeleteFamily {
            self.family_del = Some(self.family_del.map_or(e.ts, |d| d.max(e.ts)));
            return Verdict::Marker;
        }
        if self.qualifier != e.qualifier {
            self.qualifier = e.qualifier;
            self.reset_column();
        }
        self.last_ts = Some(e.ts);
        match e.kind {
            Kind::DeleteFamily => Verdict::Marker,
            Kind::DeleteColumn => {
                self.column_del = Some(self.column_del.map_or(e.ts, |d| d.max(e.ts)));
                Verdict::Marker
            }
            Kind::DeleteVersion => {
                self.version_del = Some(e.ts);
                Verdict::Marker
            }
            Kind::Put => {
                if self.last_put == Some(e.ts) {
                    return Verdict::Drop; // an older write of the same key
                }
                self.last_put = Some(e.ts);
                if self.family_del.is_some_and(|d| e.ts <= d)
                    || self.column_del.is_some_and(|d| e.ts <= d)
                    || self.version_del == Some(e.ts)
                    || e.ts < self.ttl_cutoff
                {
                    return Verdict::Drop;
                }
                self.versions += 1;
                if self.versions > rule.max_versions {
                    return Verdict::Excess;
                }
                Verdict::Keep
            }
        }
    }

    /// True if no later entry of the current column can be kept: the rest of the column may
    /// be skipped (entries come newest first, so masks and expiry only grow).
    pub(crate) fn column_exhausted(&self) -> bool {
        let Some(rule) = self.rule else { return true };
        let Some(ts) = self.last_ts else { return false };
        self.column_del.is_some()
            || self.versions >= rule.max_versions
            || self.family_del.is_some_and(|d| ts <= d)
            || ts < self.ttl_cutoff
    }

    fn reset_column(&mut self) {
        self.column_del = None;
        self.last_ts = None;
        self.version_del = None;
        self.last_put = None;
        self.versions = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(max_versions: u32) -> Rules {
        Rules::new(
            &[FamilyDescriptor::new("f").with_max_versions(max_versions)],
            &BTreeMap::new(),
        )
    }

    fn e(q: Option<&'static [u8]>, ts: i64, kind: Kind, seq: u64) -> Entry<'static> {
        Entry {
            row: b"r",
            family: b"f",
            qualifier: q,
            ts,
            kind,
            seq,
            value: b"",
        }
    }

    #[test]
    fn column_marker_masks_equal_and_older_puts_only() {
        let r = rules(5);
        let mut ret = Retention::new(&r, 1_000);
        assert_eq!(ret.offer(&e(Some(b"q"), 9, Kind::Put, 1)), Verdict::Keep);
        assert_eq!(
            ret.offer(&e(Some(b"q"), 5, Kind::DeleteColumn, 2)),
            Verdict::Marker
        );
        assert_eq!(ret.offer(&e(Some(b"q"), 5, Kind::Put, 3)), Verdict::Drop);
        assert_eq!(ret.offer(&e(Some(b"q"), 4, Kind::Put, 4)), Verdict::Drop);
        assert_eq!(ret.offer(&e(Some(b"r"), 4, Kind::Put, 5)), Verdict::Keep);
    }

    #[test]
    fn re_put_counts_once_and_versions_are_capped() {
        let r = rules(1);
        let mut ret = Retention::new(&r, 1_000);
        assert_eq!(ret.offer(&e(Some(b"q"), 9, Kind::Put, 5)), Verdict::Keep);
        assert_eq!(ret.offer(&e(Some(b"q"), 9, Kind::Put, 2)), Verdict::Drop);
        assert_eq!(ret.offer(&e(Some(b"q"), 8, Kind::Put, 1)), Verdict::Excess);
    }
}
