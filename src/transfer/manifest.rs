//! `kura-export.json`: what an export holds, written beside the parts before `_SUCCESS`.
//! HBase and Bigtable ignore it (Hadoop input formats read `part-*`); `kura import` creates a
//! missing table from its schema and checks the parts against its checksums.
//!
//! # Invariants
//! 1. `parts` lists every part file in name order with its rows, cells, bytes and SHA-256 (of
//!    the whole file); `rows`/`cells` are their sums.
//! 2. `schema` is the table's schema as the REST API renders it (`GET /{t}/schema`, JSON), so
//!    the same parser reads it back.
//! 3. `create` holds commands a user can paste: the HBase shell's `create` and `cbt`'s
//!    `createtable`/`createfamily`/`setgcpolicy`, with each family's VERSIONS and TTL.

use kura_backend::TableDescriptor;
use serde::{Deserialize, Serialize};

/// File name of the manifest in an export directory.
pub const FILE: &str = "kura-export.json";

/// What this file describes (a constant string readers can check).
pub const FORMAT: &str =
    "HBase Export: SequenceFile<ImmutableBytesWritable, Result>, HBase 0.96+ Result protobuf";

/// The whole manifest.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// Table exported.
    pub table: String,
    /// The REST endpoint it was read from.
    pub source: String,
    /// The table's schema, as `GET /{t}/schema` answers in JSON.
    pub schema: serde_json::Value,
    /// What was selected.
    pub options: Selection,
    /// Rows in all parts.
    pub rows: u64,
    /// Cells in all parts.
    pub cells: u64,
    /// The checksum algorithm of `parts[].sha256`.
    pub checksum: String,
    /// The part files, in name order.
    pub parts: Vec<Part>,
    /// Commands that create the same table elsewhere.
    pub create: CreateCommands,
}

/// The export's selection, as given (row keys in HBase's `toStringBinary` form).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Selection {
    /// Most versions per column.
    pub versions: u32,
    /// Oldest timestamp (inclusive), ms.
    pub start_time: Option<i64>,
    /// Timestamp bound (exclusive), ms.
    pub end_time: Option<i64>,
    /// First row (inclusive).
    pub start_row: Option<String>,
    /// Row to stop before (exclusive).
    pub stop_row: Option<String>,
    /// Row prefix.
    pub prefix: Option<String>,
    /// Regular expression rows must match (HBase Export's `^regex`).
    #[serde(default)]
    pub row_regex: Option<String>,
    /// Families; empty = all.
    pub families: Vec<String>,
    /// Rows after which a part is closed.
    pub rows_per_part: u64,
    /// Bytes after which a part is closed.
    pub part_bytes: u64,
}

/// One part file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Part {
    /// File name (`part-m-NNNNN`).
    pub file: String,
    /// Records (= rows) in it.
    pub rows: u64,
    /// Cells in it.
    pub cells: u64,
    /// File length.
    pub bytes: u64,
    /// SHA-256 of the file, lower-case hex.
    pub sha256: String,
    /// Its last row key, lower-case hex (where the next part starts after).
    pub last_row_hex: String,
}

/// Ready-to-run commands.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CreateCommands {
    /// HBase shell.
    pub hbase_shell: String,
    /// `cbt` (Cloud Bigtable CLI), one command per line.
    pub cbt: Vec<String>,
}

/// A family name or table name quoted for the HBase shell (JRuby single quotes).
fn ruby_quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A word quoted for a POSIX shell when it needs it.
fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:=/".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The HBase shell and cbt commands that create `desc`'s table with the same families,
/// VERSIONS and TTL.
pub fn create_commands(desc: &TableDescriptor) -> CreateCommands {
    let table = &desc.name;
    let mut shell = format!("create {}", ruby_quote(table));
    let mut cbt = vec![format!("cbt createtable {}", sh_quote(table))];
    for f in &desc.families {
        let name = String::from_utf8_lossy(&f.name).into_owned();
        shell.push_str(&format!(
            ", {{NAME => {}, VERSIONS => {}",
            ruby_quote(&name),
            f.max_versions
        ));
        if let Some(ttl) = f.ttl_secs {
            shell.push_str(&format!(", TTL => {ttl}"));
        }
        shell.push('}');
        cbt.push(format!(
            "cbt createfamily {} {}",
            sh_quote(table),
            sh_quote(&name)
        ));
        // HBase drops a cell that is too old OR beyond VERSIONS: Bigtable's union ("or").
        let policy = match f.ttl_secs {
            Some(ttl) => format!("maxversions={} or maxage={ttl}s", f.max_versions),
            None => format!("maxversions={}", f.max_versions),
        };
        cbt.push(format!(
            "cbt setgcpolicy {} {} {policy}",
            sh_quote(table),
            sh_quote(&name)
        ));
    }
    CreateCommands {
        hbase_shell: shell,
        cbt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kura_backend::FamilyDescriptor;

    #[test]
    fn create_commands_carry_versions_and_ttl() {
        let desc = TableDescriptor::new(
            "t",
            vec![
                FamilyDescriptor::new(b"cf".to_vec()).with_max_versions(3),
                FamilyDescriptor::new(b"g".to_vec()).with_ttl_secs(Some(86400)),
            ],
        );
        let c = create_commands(&desc);
        assert_eq!(
            c.hbase_shell,
            "create 't', {NAME => 'cf', VERSIONS => 3}, {NAME => 'g', VERSIONS => 1, TTL => 86400}"
        );
        assert_eq!(
            c.cbt,
            vec![
                "cbt createtable t",
                "cbt createfamily t cf",
                "cbt setgcpolicy t cf maxversions=3",
                "cbt createfamily t g",
                "cbt setgcpolicy t g maxversions=1 or maxage=86400s",
            ]
        );
    }
}
