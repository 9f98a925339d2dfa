//! The rowspec grammar of HBase REST paths (`R/RowSpec.java`):
//! `{row}[,{endrow}]/{col}[,{col}...]/{ts}[,{ts2}]`, or `{prefix}*/{cols}`.
//!
//! # Invariants
//! 1. The raw (still URL-encoded) path is split on `/` and `,` first, then each piece is
//!    URL-decoded, so `%2C` is a literal comma and `%2F` a literal slash inside a key.
//! 2. A column without `:` is a whole family; `fam:` is only the empty-qualifier column.
//! 3. One timestamp `ts` reads `[0, ts)` (HBase before HBASE-29195) and deletes versions `<= ts`;
//!    `t1,t2` is `[t1, t2)`. A negative timestamp or a reversed `t1,t2` (t2 < t1) is a 400.

use super::media::{url_decode, KeyEncoding};
use crate::error::{ApiError, ApiResult};
use kura_backend::{ColumnSpec, TimeRange, Timestamp};

/// A parsed rowspec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowSpec {
    /// The row, or the start row of a range, or the prefix of a glob.
    pub row: Vec<u8>,
    /// Exclusive end row of a `start,end` range or a `prefix*` glob.
    pub end_row: Option<Vec<u8>>,
    /// True for `prefix*`.
    pub glob: bool,
    /// Columns as written: `fam` or `fam:qual`.
    pub columns: Vec<Vec<u8>>,
    /// Time range start (0 unless `t1,t2`).
    pub start_time: Timestamp,
    /// Time range end (exclusive); `i64::MAX` when no timestamp was given.
    pub end_time: Timestamp,
    /// True if a timestamp segment was present.
    pub timestamped: bool,
}

/// Splits `fam:qual` at the first `:`; no colon = the whole family.
pub fn parse_column(col: &[u8]) -> ColumnSpec {
    match col.iter().position(|&b| b == b':') {
        Some(i) => ColumnSpec::Column(col[..i].to_vec(), col[i + 1..].to_vec()),
        None => ColumnSpec::Family(col.to_vec()),
    }
}

fn decode_piece(raw: &str, enc: KeyEncoding, what: &str) -> ApiResult<Vec<u8>> {
    enc.decode(url_decode(raw)?, what)
}

fn parse_ts(raw: &str) -> ApiResult<Timestamp> {
    let text = String::from_utf8_lossy(&url_decode(raw)?).into_owned();
    let ts = text.trim().parse::<i64>().map_err(|_| {
        ApiError::bad(format!(
            "timestamp {text:?} is not a number of milliseconds"
        ))
    })?;
    if ts < 0 {
        return Err(ApiError::bad(format!(
            "timestamp {ts} is negative: timestamps are milliseconds since the epoch, >= 0"
        )));
    }
    Ok(ts)
}

impl RowSpec {
    /// Parses the part of the raw path after `/{table}/`.
    ///
    /// An empty row segment (`/{table}//cf:a`) is refused, not skipped as HBase's `RowSpec`
    /// skips leading slashes: skipping shifts every segment left, so `DELETE /t//cf:a` would
    /// delete the whole row `cf:a`.
    pub fn parse(raw: &str, enc: KeyEncoding) -> ApiResult<RowSpec> {
        if raw.starts_with('/') {
            return Err(ApiError::bad(
                "invalid path: empty row key (two slashes after the table name); the path is \
                 /{table}/{row}[/{family:qualifier}[/{timestamp}]]",
            ));
        }
        let mut segments = raw.splitn(3, '/');
        let row_seg = segments.next().unwrap_or("");
        let col_seg = segments.next().unwrap_or("");
        let ts_seg = segments.next().unwrap_or("");

        let (row, end_row, glob) = Self::parse_rows(row_seg, enc)?;
        let mut columns = Vec::new();
        if !col_seg.is_empty() {
            let count = col_seg.split(',').count();
            for (i, p) in col_seg.split(',').enumerate() {
                if p.is_empty() {
                    if i + 1 == count {
                        continue; // a trailing comma, as HBase tolerates
                    }
                    return Err(ApiError::bad("invalid path: empty column between commas"));
                }
                columns.push(decode_piece(p, enc, "column")?);
            }
        }
        let ts_seg = ts_seg.split('/').next().unwrap_or("");
        let (mut start_time, mut end_time, mut timestamped) = (0, i64::MAX, false);
        if !ts_seg.is_empty() {
            timestamped = true;
            match ts_seg.split_once(',') {
                None => end_time = parse_ts(ts_seg)?,
                Some((a, b)) => {
                    let t0 = parse_ts(a)?;
                    let t1 = if b.is_empty() { 0 } else { parse_ts(b)? };
                    if t1 != 0 && t1 < t0 {
                        return Err(ApiError::bad(format!(
                            "timestamp range {t0},{t1} is reversed: give start,end with start <= end"
                        )));
                    }
                    if t1 != 0 {
                        start_time = t0;
                        end_time = t1;
                    } else {
                        end_time = t0;
                    }
                }
            }
        }
        Ok(RowSpec {
            row,
            end_row,
            glob,
            columns,
            start_time,
            end_time,
            timestamped,
        })
    }

    fn parse_rows(seg: &str, enc: KeyEncoding) -> ApiResult<(Vec<u8>, Option<Vec<u8>>, bool)> {
        let (start_raw, end_raw) = match seg.split_once(',') {
            Some((a, b)) => (a, Some(b)),
            None => (seg, None),
        };
        // Plain keys are decoded once, here; the others after the glob test.
        let plain = match enc {
            KeyEncoding::Plain => Some(url_decode(start_raw)?),
            _ => None,
        };
        let glob = match &plain {
            Some(p) => p.last() == Some(&b'*'),
            None => start_raw.ends_with('*'),
        };
        if glob {
            if end_raw.is_some() {
                return Err(ApiError::bad(
                    "invalid path: start row specified with wildcard",
                ));
            }
            let prefix = match plain {
                Some(mut p) => {
                    p.pop();
                    p
                }
                None => decode_piece(&start_raw[..start_raw.len() - 1], enc, "row key")?,
            };
            // HBase's glob end row: the prefix followed by one 0xFF byte.
            let mut end = prefix.clone();
            end.push(0xFF);
            return Ok((prefix, Some(end), true));
        }
        let row = match plain {
            Some(p) => p,
            None => decode_piece(start_raw, enc, "row key")?,
        };
        if row.is_empty() && end_raw.is_none() {
            return Err(ApiError::bad("the row key in the path is empty"));
        }
        let end = match end_raw {
            Some(e) => Some(decode_piece(e, enc, "end row key")?),
            None => None,
        };
        Ok((row, end, false))
    }

    /// True for a `start,end` range or a `prefix*` glob (a scan, not a get).
    pub fn is_multi_row(&self) -> bool {
        self.end_row.is_some()
    }

    /// The path's row, for a write that takes its row from the URL. A range or a glob is a
    /// 400: HBase would write its start row, a row the client never named (`user,1` is the
    /// range from `user` to `1`, and `star*` the prefix `star`).
    pub fn write_row(&self) -> ApiResult<Vec<u8>> {
        if self.is_multi_row() {
            return Err(ApiError::bad(
                "a write names one row, and the row in the path is a range (start,end) or a \
                 prefix (prefix*): percent-encode a ',' in the key as %2C, or give the key in \
                 the body (a key ending in '*' can only be given there)",
            ));
        }
        Ok(self.row.clone())
    }

    /// HBase's `hasTimestamp`: exactly one timestamp was given.
    pub fn has_timestamp(&self) -> bool {
        self.start_time == 0 && self.end_time != i64::MAX
    }

    /// The time range a read uses.
    pub fn time_range(&self) -> TimeRange {
        if self.timestamped {
            TimeRange {
                min: self.start_time,
                max: self.end_time,
            }
        } else {
            TimeRange::ALL
        }
    }

    /// The columns as specs.
    pub fn column_specs(&self) -> Vec<ColumnSpec> {
        self.columns.iter().map(|c| parse_column(c)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RowSpec {
        RowSpec::parse(s, KeyEncoding::Plain).expect("valid rowspec")
    }

    #[test]
    fn row_columns_and_single_timestamp() {
        let r = p("row1/cf:a,cf/1234");
        assert_eq!(r.row, b"row1");
        assert_eq!(r.columns, vec![b"cf:a".to_vec(), b"cf".to_vec()]);
        assert_eq!(r.time_range(), TimeRange { min: 0, max: 1234 });
        assert!(r.has_timestamp());
        assert_eq!(r.column_specs()[1], ColumnSpec::Family(b"cf".to_vec()));
    }

    #[test]
    fn timestamp_range_and_trailing_slash() {
        let r = p("r/cf/1234,1235/");
        assert_eq!(
            r.time_range(),
            TimeRange {
                min: 1234,
                max: 1235
            }
        );
        assert!(!r.has_timestamp());
        let r = p("r//5");
        assert!(r.columns.is_empty());
        assert_eq!(r.end_time, 5);
    }

    #[test]
    fn pieces_are_decoded_after_splitting() {
        let r = p("http%3A%2F%2Fexample.com%2Ffoo/a%2Cb:c+d");
        assert_eq!(r.row, b"http://example.com/foo");
        assert_eq!(r.columns, vec![b"a,b:c d".to_vec()]);
    }

    #[test]
    fn empty_qualifier_is_a_column_not_a_family() {
        assert_eq!(
            parse_column(b"cf:"),
            ColumnSpec::Column(b"cf".to_vec(), vec![])
        );
        assert_eq!(parse_column(b"cf"), ColumnSpec::Family(b"cf".to_vec()));
    }

    #[test]
    fn glob_and_range() {
        let r = p("ab*/cf");
        assert!(r.glob);
        assert_eq!(r.row, b"ab");
        assert_eq!(r.end_row.as_deref(), Some(&b"ab\xff"[..]));
        let r = p("a,c/cf");
        assert_eq!(
            (r.row.as_slice(), r.end_row.as_deref()),
            (&b"a"[..], Some(&b"c"[..]))
        );
        assert!(RowSpec::parse("a*,b/cf", KeyEncoding::Plain).is_err());
    }

    #[test]
    fn base64_keys_and_columns() {
        let r = RowSpec::parse("cm93MQ/Y2Y6YQ", KeyEncoding::Base64Url).expect("valid");
        assert_eq!(r.row, b"row1");
        assert_eq!(r.columns, vec![b"cf:a".to_vec()]);
    }

    #[test]
    fn bad_timestamps_and_empty_rows_are_rejected() {
        assert!(RowSpec::parse("r/cf/abc", KeyEncoding::Plain).is_err());
        assert!(RowSpec::parse("", KeyEncoding::Plain).is_err());
        // `/t//cf:a`: an empty row segment is an error, never row `cf:a`.
        assert!(RowSpec::parse("/cf:a", KeyEncoding::Plain).is_err());
        assert!(RowSpec::parse("//5", KeyEncoding::Plain).is_err());
        assert!(RowSpec::parse("r/a,,b", KeyEncoding::Plain).is_err());
    }
}
