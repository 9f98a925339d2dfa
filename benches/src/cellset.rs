//! Just enough of the HBase REST CellSet JSON to write rows and count what comes back.
//!
//! Bodies are built by hand (no intermediate tree) because the load generator must not be
//! the bottleneck; responses are parsed with borrowed strings for the same reason.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::Deserialize;

use crate::error::{LoadError, Result};

/// One cell to write: column (`family:qualifier`) and value.
#[derive(Debug, Clone, Copy)]
pub struct CellRef<'a> {
    /// `family:qualifier`.
    pub column: &'a [u8],
    /// Raw value bytes.
    pub value: &'a [u8],
}

/// Append the JSON of one row (`{"key":..,"Cell":[..]}`) to `out`.
pub fn push_row(out: &mut String, key: &[u8], cells: &[CellRef<'_>]) {
    out.push_str("{\"key\":\"");
    B64.encode_string(key, out);
    out.push_str("\",\"Cell\":[");
    for (i, c) in cells.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"column\":\"");
        B64.encode_string(c.column, out);
        out.push_str("\",\"$\":\"");
        B64.encode_string(c.value, out);
        out.push_str("\"}");
    }
    out.push_str("]}");
}

/// A CellSet body holding one row.
pub fn one_row(key: &[u8], cells: &[CellRef<'_>]) -> String {
    let mut s =
        String::with_capacity(64 + cells.iter().map(|c| c.value.len() * 2 + 32).sum::<usize>());
    s.push_str("{\"Row\":[");
    push_row(&mut s, key, cells);
    s.push_str("]}");
    s
}

/// A CellSet body holding many rows.
pub fn many_rows<'a>(rows: impl IntoIterator<Item = (Vec<u8>, Vec<CellRef<'a>>)>) -> String {
    let mut s = String::from("{\"Row\":[");
    for (i, (key, cells)) in rows.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        push_row(&mut s, &key, &cells);
    }
    s.push_str("]}");
    s
}

#[derive(Deserialize)]
struct KeysOnly<'a> {
    #[serde(rename = "Row", default, borrow)]
    rows: Vec<KeyOnly<'a>>,
}

#[derive(Deserialize)]
struct KeyOnly<'a> {
    #[serde(borrow)]
    key: &'a str,
}

/// The row keys (base64, as sent) of a CellSet response, in response order.
pub fn row_keys(body: &[u8]) -> Result<Vec<&str>> {
    let parsed: KeysOnly<'_> = serde_json::from_slice(body).map_err(|e| LoadError::Decode {
        what: "CellSet".into(),
        detail: e.to_string(),
    })?;
    Ok(parsed.rows.into_iter().map(|r| r.key).collect())
}

#[derive(Deserialize)]
struct FullSet {
    #[serde(rename = "Row", default)]
    rows: Vec<FullRow>,
}

#[derive(Deserialize)]
struct FullRow {
    key: String,
    #[serde(rename = "Cell", default)]
    cells: Vec<FullCell>,
}

#[derive(Deserialize)]
struct FullCell {
    column: String,
    #[serde(rename = "$", default)]
    value: String,
}

/// A decoded row of a CellSet answer: key and `(column, value)` cells in answer order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowCells {
    /// Raw row key.
    pub key: Vec<u8>,
    /// Raw `family:qualifier` and value of each cell.
    pub cells: Vec<(Vec<u8>, Vec<u8>)>,
}

impl RowCells {
    /// The value of the first cell of `column`, if the row has one.
    pub fn value(&self, column: &[u8]) -> Option<&[u8]> {
        self.cells
            .iter()
            .find(|(c, _)| c.as_slice() == column)
            .map(|(_, v)| v.as_slice())
    }
}

/// Every row of a CellSet answer with its cells, decoded (for correctness checks, not the hot
/// path of a scan workload).
pub fn rows_with_cells(body: &[u8]) -> Result<Vec<RowCells>> {
    let parsed: FullSet = serde_json::from_slice(body).map_err(|e| LoadError::Decode {
        what: "CellSet".into(),
        detail: e.to_string(),
    })?;
    let dec = |what: &str, s: &str| {
        B64.decode(s).map_err(|e| LoadError::Decode {
            what: what.into(),
            detail: e.to_string(),
        })
    };
    parsed
        .rows
        .into_iter()
        .map(|r| {
            Ok(RowCells {
                key: dec("row key", &r.key)?,
                cells: r
                    .cells
                    .into_iter()
                    .map(|c| Ok((dec("column", &c.column)?, dec("cell value", &c.value)?)))
                    .collect::<Result<Vec<_>>>()?,
            })
        })
        .collect()
}

/// Decode a base64 row key.
pub fn decode_key(b64: &str) -> Result<Vec<u8>> {
    B64.decode(b64).map_err(|e| LoadError::Decode {
        what: "row key".into(),
        detail: e.to_string(),
    })
}

/// Base64 of `bytes`.
pub fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_rows_parse_back_with_their_keys() {
        let body = many_rows(vec![
            (
                b"r1".to_vec(),
                vec![CellRef {
                    column: b"f:a",
                    value: b"v1",
                }],
            ),
            (
                b"r2".to_vec(),
                vec![
                    CellRef {
                        column: b"f:a",
                        value: b"",
                    },
                    CellRef {
                        column: b"f:b",
                        value: b"x",
                    },
                ],
            ),
        ]);
        let v: serde_json::Value = serde_json::from_str(&body).expect("valid json");
        assert_eq!(v["Row"][1]["Cell"][1]["column"], b64(b"f:b"));
        assert_eq!(v["Row"][0]["Cell"][0]["$"], b64(b"v1"));
        let keys = row_keys(body.as_bytes()).expect("parse");
        let decoded: Vec<Vec<u8>> = keys.iter().map(|k| decode_key(k).expect("b64")).collect();
        assert_eq!(decoded, vec![b"r1".to_vec(), b"r2".to_vec()]);
    }

    #[test]
    fn an_empty_scan_has_no_rows() {
        assert!(row_keys(br#"{"Row":[]}"#).expect("parse").is_empty());
        assert!(row_keys(b"{}").expect("parse").is_empty());
        assert!(row_keys(b"not json").is_err());
    }

    #[test]
    fn rows_with_cells_decode_keys_columns_and_values() {
        let body = one_row(
            b"k",
            &[
                CellRef {
                    column: b"f:a",
                    value: b"1",
                },
                CellRef {
                    column: b"f:b",
                    value: b"two",
                },
            ],
        );
        let rows = rows_with_cells(body.as_bytes()).expect("parse");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].key, b"k");
        assert_eq!(rows[0].value(b"f:b"), Some(&b"two"[..]));
        assert_eq!(rows[0].value(b"f:c"), None);
        assert!(rows_with_cells(br#"{"Row":[{"key":"!!","Cell":[]}]}"#).is_err());
    }
}
