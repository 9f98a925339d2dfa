//! HBase's `Result` as Export files hold it (`shared/HBASE_FORMATS.md` §4): a protobuf varint
//! length, then a `hbase.pb.Result` message of `Cell`s; and the 0.94 KeyValue list (§4.1), read
//! only. The message types are generated at build time from `proto/hbase.proto` by prost.
//!
//! # Invariants
//! 1. [`encode_result`] writes exactly HBase's bytes: per cell fields 1–6 in order, each present
//!    even when empty, never field 7 (tags); then `stale = false` and `partial = false`. A
//!    Result with no cells is the empty message: the single byte `00`.
//! 2. A timestamp is the varint of the `i64`'s bit pattern (`uint64` field).
//! 3. [`CellKind::DeleteFamilyVersion`] (KeyValue type 10) has no `CellType` in HBase's proto:
//!    encoding it is an error, as HBase's raw Export fails on it. Decoding accepts it (other
//!    writers use 10) and refuses any other unknown type with an error naming the row.
//! 4. Decoding follows protobuf's rules: fields in any order, repeated, unknown ones skipped
//!    (tags included); only the bytes after the delimited message are refused.

use prost::Message;

/// The generated `hbase.pb` messages (`proto/hbase.proto`).
#[allow(missing_docs, clippy::all)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/hbase.pb.rs"));
}

/// What a cell is: a value, or one of HBase's delete markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CellKind {
    /// A value (type 4).
    Put,
    /// Deletes the one version at the marker's timestamp (`Delete.addColumn`, type 8).
    DeleteVersion,
    /// Deletes the versions of a column at or before the timestamp (`addColumns`, type 12).
    DeleteColumn,
    /// Deletes every column of a family at or before the timestamp (type 14).
    DeleteFamily,
    /// Deletes the versions of every column of a family at exactly the timestamp (type 10).
    DeleteFamilyVersion,
}

impl CellKind {
    /// HBase's KeyValue type code (also the `CellType` number, except for 10).
    pub fn code(self) -> u8 {
        match self {
            CellKind::Put => 4,
            CellKind::DeleteVersion => 8,
            CellKind::DeleteFamilyVersion => 10,
            CellKind::DeleteColumn => 12,
            CellKind::DeleteFamily => 14,
        }
    }

    /// The kind of a KeyValue type code, `None` for codes Export files do not hold.
    pub fn from_code(code: i64) -> Option<CellKind> {
        Some(match code {
            4 => CellKind::Put,
            8 => CellKind::DeleteVersion,
            10 => CellKind::DeleteFamilyVersion,
            12 => CellKind::DeleteColumn,
            14 => CellKind::DeleteFamily,
            _ => return None,
        })
    }

    /// True for the delete markers.
    pub fn is_delete(self) -> bool {
        self != CellKind::Put
    }
}

/// One cell of a Result, with its row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportCell {
    /// Row key (equal to the record's key in Export files).
    pub row: Vec<u8>,
    /// Column family.
    pub family: Vec<u8>,
    /// Column qualifier (may be empty).
    pub qualifier: Vec<u8>,
    /// Timestamp in milliseconds.
    pub timestamp: i64,
    /// Value or delete marker.
    pub kind: CellKind,
    /// The value (empty for delete markers).
    pub value: Vec<u8>,
}

/// Why a value is not a Result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ResultError(pub String);

/// Serializes `cells` as HBase's `ResultSerialization` does: varint length + `Result`.
pub fn encode_result(cells: &[ExportCell]) -> Result<Vec<u8>, ResultError> {
    if cells.is_empty() {
        return Ok(vec![0]);
    }
    let mut msg = pb::Result {
        cell: Vec::with_capacity(cells.len()),
        associated_cell_count: None,
        exists: None,
        stale: Some(false),
        partial: Some(false),
    };
    for c in cells {
        if c.kind == CellKind::DeleteFamilyVersion {
            return Err(ResultError(format!(
                "row {}: a DeleteFamilyVersion marker (type 10) has no CellType in HBase's \
                 Result protobuf, so no Export file can hold it (HBase's own raw Export fails \
                 on it too)",
                printable(&c.row)
            )));
        }
        msg.cell.push(pb::Cell {
            row: Some(c.row.clone()),
            family: Some(c.family.clone()),
            qualifier: Some(c.qualifier.clone()),
            timestamp: Some(c.timestamp as u64),
            cell_type: Some(i32::from(c.kind.code())),
            value: Some(c.value.clone()),
            tags: None,
        });
    }
    Ok(msg.encode_length_delimited_to_vec())
}

/// Parses a value written by `ResultSerialization`: the cells, in the order stored.
pub fn decode_result(bytes: &[u8]) -> Result<Vec<ExportCell>, ResultError> {
    let mut buf = bytes;
    let msg = pb::Result::decode_length_delimited(&mut buf)
        .map_err(|e| ResultError(format!("not a length-delimited HBase Result: {e}")))?;
    if !buf.is_empty() {
        return Err(ResultError(format!(
            "{} bytes follow the length-delimited Result",
            buf.len()
        )));
    }
    msg.cell
        .into_iter()
        .map(|c| {
            let row = c.row.unwrap_or_default();
            let code = c.cell_type.unwrap_or(0);
            let kind = CellKind::from_code(i64::from(code)).ok_or_else(|| {
                ResultError(format!(
                    "row {}: a cell of type {code}, which is neither a put nor a delete marker",
                    printable(&row)
                ))
            })?;
            Ok(ExportCell {
                row,
                family: c.family.unwrap_or_default(),
                qualifier: c.qualifier.unwrap_or_default(),
                timestamp: c.timestamp.unwrap_or(0) as i64,
                kind,
                value: c.value.unwrap_or_default(),
            })
        })
        .collect()
}

/// Parses a value in HBase 0.94's format (§4.1): `int32 total`, then KeyValues each preceded by
/// its `int32` length.
pub fn decode_094(bytes: &[u8]) -> Result<Vec<ExportCell>, ResultError> {
    let bad = |what: &str| ResultError(format!("not an HBase 0.94 Result: {what}"));
    let (total, mut rest) = take_i32(bytes).ok_or_else(|| bad("no length"))?;
    if total < 0 || total as usize != rest.len() {
        return Err(bad(&format!(
            "it says {total} bytes and holds {}",
            rest.len()
        )));
    }
    let mut cells = Vec::new();
    while !rest.is_empty() {
        let (kv_len, after) = take_i32(rest).ok_or_else(|| bad("a cut KeyValue length"))?;
        let kv = usize::try_from(kv_len)
            .ok()
            .and_then(|n| after.get(..n))
            .ok_or_else(|| bad(&format!("a KeyValue of {kv_len} bytes runs past the end")))?;
        rest = &after[kv.len()..];
        cells.push(decode_keyvalue(kv).map_err(|e| bad(&e))?);
    }
    Ok(cells)
}

/// One KeyValue: `int32 keyLen | int32 valueLen | key | value`.
fn decode_keyvalue(kv: &[u8]) -> Result<ExportCell, String> {
    let (key_len, rest) = take_i32(kv).ok_or("a cut key length")?;
    let (value_len, rest) = take_i32(rest).ok_or("a cut value length")?;
    let (key_len, value_len) = (
        usize::try_from(key_len).map_err(|_| "a negative key length")?,
        usize::try_from(value_len).map_err(|_| "a negative value length")?,
    );
    if key_len.checked_add(value_len) != Some(rest.len()) {
        return Err(format!(
            "a KeyValue of {} bytes says key {key_len} + value {value_len}",
            rest.len()
        ));
    }
    let (key, value) = rest.split_at(key_len);
    let (row_len, key_rest) = key
        .split_first_chunk::<2>()
        .ok_or("a key without a row length")?;
    let row_len = usize::from(u16::from_be_bytes(*row_len));
    let row = key_rest.get(..row_len).ok_or("a row longer than its key")?;
    let key_rest = &key_rest[row_len..];
    let (&fam_len, key_rest) = key_rest.split_first().ok_or("a key without a family")?;
    let family = key_rest
        .get(..usize::from(fam_len))
        .ok_or("a family longer than its key")?;
    let key_rest = &key_rest[family.len()..];
    let qual_len = key_rest
        .len()
        .checked_sub(9)
        .ok_or("a key without a timestamp and type")?;
    let (qualifier, tail) = key_rest.split_at(qual_len);
    let ts = i64::from_be_bytes(tail[..8].try_into().expect("8 bytes checked above"));
    let kind = CellKind::from_code(i64::from(tail[8])).ok_or_else(|| {
        format!(
            "row {}: a cell of type {}, which is neither a put nor a delete marker",
            printable(row),
            tail[8]
        )
    })?;
    Ok(ExportCell {
        row: row.to_vec(),
        family: family.to_vec(),
        qualifier: qualifier.to_vec(),
        timestamp: ts,
        kind,
        value: value.to_vec(),
    })
}

fn take_i32(b: &[u8]) -> Option<(i32, &[u8])> {
    let (n, rest) = b.split_first_chunk::<4>()?;
    Some((i32::from_be_bytes(*n), rest))
}

/// A row key for messages, in HBase's `Bytes.toStringBinary` form (`\xNN` outside printable
/// ASCII).
pub fn printable(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

/// Parses HBase's `Bytes.toBytesBinary` form: `\xNN` (two hex digits) is that byte, anything
/// else is its UTF-8 bytes. A `\x` not followed by two hex digits is kept as it is, as HBase
/// does.
pub fn bytes_binary(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 3 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 2]), hex(b[i + 3])) {
                out.push((h * 16 + l) as u8);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(kind: CellKind, q: &[u8], ts: i64, v: &[u8]) -> ExportCell {
        ExportCell {
            row: b"1".to_vec(),
            family: b"cf".to_vec(),
            qualifier: q.to_vec(),
            timestamp: ts,
            kind,
            value: v.to_vec(),
        }
    }

    #[test]
    fn the_spec_example_encodes_to_its_exact_bytes() {
        let bytes =
            encode_result(&[cell(CellKind::Put, b"a", 1609291279317, b"value1")]).expect("ok");
        let expected = [
            0x21, 0x0a, 0x1b, 0x0a, 0x01, 0x31, 0x12, 0x02, 0x63, 0x66, 0x1a, 0x01, 0x61, 0x20,
            0xd5, 0xd7, 0xf0, 0x89, 0xeb, 0x2e, 0x28, 0x04, 0x32, 0x06, 0x76, 0x61, 0x6c, 0x75,
            0x65, 0x31, 0x20, 0x00, 0x28, 0x00,
        ];
        assert_eq!(bytes, expected);
        assert_eq!(
            decode_result(&bytes).expect("decode"),
            vec![cell(CellKind::Put, b"a", 1609291279317, b"value1")]
        );
    }

    #[test]
    fn the_spec_export_record_is_byte_exact_after_a_114_byte_header() {
        use crate::seqfile::{Compression, Writer};
        use crate::writable::{ibw, IMMUTABLE_BYTES_WRITABLE, RESULT};
        let mut w = Writer::new(
            Vec::new(),
            "part-m-00000",
            IMMUTABLE_BYTES_WRITABLE,
            RESULT,
            Compression::None,
            [0; 16],
        )
        .expect("header");
        let value =
            encode_result(&[cell(CellKind::Put, b"a", 1609291279317, b"value1")]).expect("ok");
        assert_eq!(w.append(&ibw(b"1"), &value).expect("append"), 114);
        let bytes = w.finish().expect("finish");
        assert_eq!(
            &bytes[114..127],
            &[0, 0, 0, 0x27, 0, 0, 0, 5, 0, 0, 0, 1, 0x31]
        );
        assert_eq!(&bytes[127..], &value[..]);
    }

    #[test]
    fn empty_fields_are_written_and_an_empty_result_is_one_zero_byte() {
        let bytes = encode_result(&[ExportCell {
            row: b"r".to_vec(),
            family: b"cf".to_vec(),
            qualifier: vec![],
            timestamp: 5,
            kind: CellKind::DeleteFamily,
            value: vec![],
        }])
        .expect("ok");
        // 0a 01 72 | 12 02 63 66 | 1a 00 | 20 05 | 28 0e | 32 00
        assert_eq!(
            &bytes[1..],
            &[
                0x0a, 0x0f, 0x0a, 0x01, 0x72, 0x12, 0x02, 0x63, 0x66, 0x1a, 0x00, 0x20, 0x05, 0x28,
                0x0e, 0x32, 0x00, 0x20, 0x00, 0x28, 0x00
            ]
        );
        assert_eq!(encode_result(&[]).expect("ok"), vec![0]);
        assert_eq!(decode_result(&[0]).expect("empty"), vec![]);
    }

    #[test]
    fn delete_kinds_map_to_hbase_cell_types() {
        for (kind, code) in [
            (CellKind::Put, 4),
            (CellKind::DeleteVersion, 8),
            (CellKind::DeleteColumn, 12),
            (CellKind::DeleteFamily, 14),
        ] {
            let bytes = encode_result(&[cell(kind, b"q", 9, b"")]).expect("ok");
            let msg = pb::Result::decode_length_delimited(&bytes[..]).expect("pb");
            assert_eq!(msg.cell[0].cell_type, Some(code));
            assert_eq!(decode_result(&bytes).expect("decode")[0].kind, kind);
        }
    }

    #[test]
    fn a_delete_family_version_cannot_be_exported_but_is_imported() {
        let err = encode_result(&[cell(CellKind::DeleteFamilyVersion, b"", 9, b"")])
            .expect_err("type 10");
        assert!(err.0.contains("DeleteFamilyVersion"), "{err}");
        let msg = pb::Result {
            cell: vec![pb::Cell {
                row: Some(b"1".to_vec()),
                family: Some(b"cf".to_vec()),
                cell_type: Some(10),
                timestamp: Some(9),
                ..Default::default()
            }],
            ..Default::default()
        };
        let cells = decode_result(&msg.encode_length_delimited_to_vec()).expect("decode");
        assert_eq!(cells[0].kind, CellKind::DeleteFamilyVersion);
    }

    #[test]
    fn an_unknown_cell_type_is_an_error_naming_the_row() {
        let msg = pb::Result {
            cell: vec![pb::Cell {
                row: Some(b"\x00k".to_vec()),
                cell_type: Some(255),
                ..Default::default()
            }],
            ..Default::default()
        };
        let err = decode_result(&msg.encode_length_delimited_to_vec()).expect_err("255");
        assert!(err.0.contains("\\x00k") && err.0.contains("255"), "{err}");
    }

    #[test]
    fn decoding_takes_any_order_tags_and_unknown_fields() {
        // A cell with value first, tags (7), an unknown field 9, row last; Result fields reversed.
        let c = [
            0x32, 0x01, b'v', 0x3a, 0x00, 0x48, 0x01, 0x28, 0x04, 0x20, 0x07, 0x1a, 0x01, b'q',
            0x12, 0x01, b'f', 0x0a, 0x01, b'r',
        ];
        let mut msg = vec![0x28, 0x00, 0x20, 0x00, 0x0a, c.len() as u8];
        msg.extend_from_slice(&c);
        let mut bytes = vec![msg.len() as u8];
        bytes.extend_from_slice(&msg);
        assert_eq!(
            decode_result(&bytes).expect("decode"),
            vec![ExportCell {
                row: b"r".to_vec(),
                family: b"f".to_vec(),
                qualifier: b"q".to_vec(),
                timestamp: 7,
                kind: CellKind::Put,
                value: b"v".to_vec(),
            }]
        );
    }

    #[test]
    fn cut_or_trailing_bytes_are_errors() {
        let bytes = encode_result(&[cell(CellKind::Put, b"a", 1, b"x")]).expect("ok");
        for cut in 0..bytes.len() {
            assert!(decode_result(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_result(&longer).is_err());
    }

    #[test]
    fn a_negative_timestamp_round_trips_as_its_bit_pattern() {
        let bytes = encode_result(&[cell(CellKind::Put, b"a", -2, b"")]).expect("ok");
        assert_eq!(decode_result(&bytes).expect("decode")[0].timestamp, -2);
    }

    fn kv(row: &[u8], fam: &[u8], q: &[u8], ts: i64, ty: u8, v: &[u8]) -> Vec<u8> {
        let mut key = (row.len() as u16).to_be_bytes().to_vec();
        key.extend_from_slice(row);
        key.push(fam.len() as u8);
        key.extend_from_slice(fam);
        key.extend_from_slice(q);
        key.extend_from_slice(&ts.to_be_bytes());
        key.push(ty);
        let mut out = (key.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&(v.len() as i32).to_be_bytes());
        out.extend_from_slice(&key);
        out.extend_from_slice(v);
        out
    }

    #[test]
    fn the_094_format_reads_keyvalues_of_every_kind() {
        let kvs = [
            kv(b"1", b"cf", b"a", 1609291279317, 4, b"value1"),
            kv(b"1", b"cf", b"", 7, 14, b""),
            kv(b"1", b"cf", b"b", 8, 12, b""),
        ];
        let mut body = Vec::new();
        for k in &kvs {
            body.extend_from_slice(&(k.len() as i32).to_be_bytes());
            body.extend_from_slice(k);
        }
        let mut value = (body.len() as i32).to_be_bytes().to_vec();
        value.extend_from_slice(&body);
        let cells = decode_094(&value).expect("decode");
        assert_eq!(
            cells[0],
            cell(CellKind::Put, b"a", 1609291279317, b"value1")
        );
        assert_eq!(cells[1].kind, CellKind::DeleteFamily);
        assert_eq!(cells[1].qualifier, b"");
        assert_eq!(cells[2].kind, CellKind::DeleteColumn);
        assert_eq!(decode_094(&[0, 0, 0, 0]).expect("empty"), vec![]);
        for cut in 0..value.len() {
            assert!(decode_094(&value[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn bytes_binary_reads_hex_escapes_as_hbase_does() {
        assert_eq!(bytes_binary("a\\x00b\\xFF"), b"a\x00b\xff");
        assert_eq!(bytes_binary("\\xZZ"), b"\\xZZ");
        assert_eq!(bytes_binary("\\x0"), b"\\x0");
        assert_eq!(printable(b"a\x00\xff\\"), "a\\x00\\xFF\\x5C");
    }
}
