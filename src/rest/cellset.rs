//! The CellSet representation (`M/CellSetModel.java`, `M/RowModel.java`, `M/CellModel.java`)
//! in JSON and XML, both ways.
//!
//! JSON: `{"Row":[{"key":b64,"Cell":[{"column":b64,"timestamp":n,"$":b64}]}]}`;
//! XML: `<CellSet><Row key=".."><Cell column=".." timestamp="..">b64</Cell></Row></CellSet>`.
//!
//! # Invariants
//! 1. Keys, columns and values are standard base64 on the wire; timestamps are numbers.
//! 2. On output every cell carries its timestamp; cells keep the store's order.
//! 3. On input `key`, `column` and `timestamp` may be missing (the caller supplies fallbacks);
//!    anything malformed is a 400 naming what is wrong.
//! 4. Input is read as strictly as HBase's own REST server reads it (`M/CellSetModel.java`,
//!    `M/RowModel.java`, `M/CellModel.java` bound by Jackson's `JacksonJaxbJsonProvider` and by
//!    JAXB): `Row` and `Cell` are JSON lists (`List<RowModel>`, `List<CellModel>`; Jackson
//!    refuses a single object where a list is declared), a JSON cell carries its value `$`
//!    (CellModel's schema: `value` has `minOccurs="1"`; `""` is the empty value), and an XML
//!    body's root element is `<CellSet>` (`@XmlRootElement(name = "CellSet")`). A missing value
//!    is kept as `None` so that the one use that needs none (the cells a `check=delete`
//!    deletes) can take it; every other use goes through [`CellIn::value`].

use super::cellset_json::{self, List, Obj, Slot};
use super::media::{b64_decode, b64_encode_into, Repr, XmlShape};
use crate::error::{ApiError, ApiResult};
use kura_backend::{Cell, Row, Timestamp};
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

/// One cell of a request body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellIn {
    pub column: Option<Vec<u8>>,
    pub timestamp: Option<Timestamp>,
    /// `None` when a JSON cell has no `$` (invariant 4).
    pub value: Option<Vec<u8>>,
}

impl CellIn {
    /// The cell's value; a cell sent without one is a 400 (HBase's `CellModel` requires it).
    pub fn value(&mut self) -> ApiResult<Vec<u8>> {
        self.value.take().ok_or_else(|| {
            ApiError::bad(
                "a Cell has no value \"$\": send the value as base64 (\"\" for an empty value)",
            )
        })
    }
}

/// One row of a request body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowIn {
    pub key: Option<Vec<u8>>,
    pub cells: Vec<CellIn>,
}

/// Parses a CellSet body in `repr` (JSON or XML).
pub fn parse_cellset(repr: Repr, body: &[u8]) -> ApiResult<Vec<RowIn>> {
    match repr {
        Repr::Json => parse_json(body),
        Repr::Xml => parse_xml(body),
        Repr::Text | Repr::Binary => Err(ApiError::UnsupportedMediaType(
            "a CellSet must be JSON or XML".into(),
        )),
    }
}

/// The elements of a JSON list field (`Row`, `Cell`): missing or `null` is empty; anything but
/// a list is a 400, as Jackson refuses a single object for a `List<..>` field.
fn list_of<T>(v: List<T>, name: &str, example: &str) -> ApiResult<Vec<T>> {
    match v {
        List::Empty => Ok(Vec::new()),
        List::Items(a) => Ok(a),
        List::Object => Err(ApiError::bad(format!(
            "\"{name}\" must be a list, not an object: write \"{name}\":[{example}]"
        ))),
        List::Other => Err(ApiError::bad(format!(
            "\"{name}\" must be a list: write \"{name}\":[{example}]"
        ))),
    }
}

fn json_b64(v: &Slot<'_>, what: &str) -> ApiResult<Option<Vec<u8>>> {
    match v {
        Slot::Absent | Slot::Null => Ok(None),
        Slot::Str(s) => b64_decode(s, what).map(Some),
        Slot::Num(_) | Slot::Other => Err(ApiError::bad(format!("{what} must be a base64 string"))),
    }
}

fn json_ts(v: &Slot<'_>) -> ApiResult<Option<Timestamp>> {
    match v {
        Slot::Absent | Slot::Null => Ok(None),
        Slot::Num(n) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| ApiError::bad(format!("timestamp {n} is not a 64-bit integer"))),
        Slot::Str(s) => parse_ts_text(s).map(Some),
        Slot::Other => Err(ApiError::bad("timestamp must be a number")),
    }
}

fn parse_ts_text(s: &str) -> ApiResult<Timestamp> {
    s.trim()
        .parse()
        .map_err(|_| ApiError::bad(format!("timestamp {s:?} is not a number")))
}

/// A timestamp of `LATEST_TIMESTAMP` (i64::MAX) on input means "server time", as in HBase;
/// a negative one is refused, as HBase refuses it.
fn normalize_ts(ts: Option<Timestamp>) -> ApiResult<Option<Timestamp>> {
    match ts {
        Some(t) if t < 0 => Err(ApiError::bad(format!("timestamp {t} is negative"))),
        other => Ok(other.filter(|&t| t != i64::MAX)),
    }
}

/// Reads a JSON CellSet in one pass ([`cellset_json`]), then applies invariant 4 in document
/// order, so that a malformed body gets the first error a reader of the whole document meets.
fn parse_json(body: &[u8]) -> ApiResult<Vec<RowIn>> {
    let doc = cellset_json::read(body)
        .map_err(|e| ApiError::bad(format!("the body is not valid JSON: {e}")))?;
    let Obj::Obj(doc) = doc else {
        return Err(ApiError::bad(
            "a CellSet must be a JSON object {\"Row\":[...]}",
        ));
    };
    let rows_in = list_of(doc.row, "Row", "{\"key\":..,\"Cell\":[..]}")?;
    let mut rows = Vec::with_capacity(rows_in.len());
    for r in rows_in {
        let Obj::Obj(r) = r else {
            return Err(ApiError::bad(
                "each Row must be an object {\"key\":..,\"Cell\":[..]}",
            ));
        };
        let key = json_b64(&r.key, "row key")?;
        let cells_in = list_of(r.cell, "Cell", "{\"column\":..,\"$\":..}")?;
        let mut cells = Vec::with_capacity(cells_in.len());
        for c in cells_in {
            let Obj::Obj(c) = c else {
                return Err(ApiError::bad(
                    "each Cell must be an object {\"column\":..,\"$\":..}",
                ));
            };
            cells.push(CellIn {
                column: json_b64(&c.column, "column")?,
                timestamp: normalize_ts(json_ts(&c.timestamp)?)?,
                value: json_b64(&c.value, "cell value")?,
            });
        }
        rows.push(RowIn { key, cells });
    }
    Ok(rows)
}

fn xml_err(e: impl std::fmt::Display) -> ApiError {
    ApiError::bad(format!("the body is not valid XML: {e}"))
}

fn attr(e: &BytesStart<'_>, name: &[u8]) -> ApiResult<Option<String>> {
    for a in e.attributes() {
        let a = a.map_err(xml_err)?;
        if a.key.as_ref() == name {
            let v = a.unescape_value().map_err(xml_err)?;
            return Ok(Some(v.into_owned()));
        }
    }
    Ok(None)
}

fn parse_xml(body: &[u8]) -> ApiResult<Vec<RowIn>> {
    let mut reader = Reader::from_reader(body);
    reader.config_mut().trim_text(true);
    let mut buf = Vec::new();
    let mut rows: Vec<RowIn> = Vec::new();
    let mut cell: Option<CellIn> = None;
    let mut text = String::new();
    let mut seen_root = false;
    let mut first_element = true;
    let mut shape = XmlShape::default();
    loop {
        let ev = reader.read_event_into(&mut buf).map_err(xml_err)?;
        shape.see(&ev)?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(ev, Event::Empty(_));
                if std::mem::take(&mut first_element) && e.local_name().as_ref() != b"CellSet" {
                    return Err(ApiError::bad(format!(
                        "an XML body must have <CellSet> as its root element, not <{}>: write \
                         <CellSet><Row key=..><Cell column=..>..</Cell></Row></CellSet>",
                        String::from_utf8_lossy(e.name().as_ref())
                    )));
                }
                match e.local_name().as_ref() {
                    b"CellSet" => seen_root = true,
                    b"Row" => {
                        let key = match attr(e, b"key")? {
                            Some(k) => Some(b64_decode(&k, "row key")?),
                            None => None,
                        };
                        rows.push(RowIn {
                            key,
                            cells: Vec::new(),
                        });
                    }
                    b"Cell" => {
                        let column = match attr(e, b"column")? {
                            Some(c) => Some(b64_decode(&c, "column")?),
                            None => None,
                        };
                        let timestamp = match attr(e, b"timestamp")? {
                            Some(t) => normalize_ts(Some(parse_ts_text(&t)?))?,
                            None => None,
                        };
                        let c = CellIn {
                            column,
                            timestamp,
                            value: Some(Vec::new()),
                        };
                        let row = rows
                            .last_mut()
                            .ok_or_else(|| ApiError::bad("a <Cell> must be inside a <Row>"))?;
                        if empty {
                            row.cells.push(c);
                        } else {
                            text.clear();
                            cell = Some(c);
                        }
                    }
                    _ => {}
                }
            }
            Event::Text(t) if cell.is_some() => {
                text.push_str(&t.unescape().map_err(xml_err)?);
            }
            Event::CData(t) if cell.is_some() => {
                text.push_str(&String::from_utf8_lossy(&t));
            }
            Event::End(e) if e.local_name().as_ref() == b"Cell" => {
                if let Some(mut c) = cell.take() {
                    c.value = Some(b64_decode(&text, "cell value")?);
                    if let Some(row) = rows.last_mut() {
                        row.cells.push(c);
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !seen_root {
        return Err(ApiError::bad(
            "an XML CellSet must be <CellSet><Row ..>..</Row></CellSet>",
        ));
    }
    Ok(rows)
}

/// The `family:qualifier` bytes of a cell.
pub fn column_bytes(c: &Cell) -> Vec<u8> {
    let mut col = Vec::with_capacity(c.family.len() + 1 + c.qualifier.len());
    column_into(c, &mut col);
    col
}

/// Replaces the contents of `col` with the `family:qualifier` bytes of a cell.
fn column_into(c: &Cell, col: &mut Vec<u8>) {
    col.clear();
    col.extend_from_slice(&c.family);
    col.push(b':');
    col.extend_from_slice(&c.qualifier);
}

/// Appends the base64 of a cell's `family:qualifier`, built on the stack when it is short
/// (a family and qualifier of a few bytes), else in `scratch`.
fn push_b64_column(out: &mut String, scratch: &mut Vec<u8>, c: &Cell) {
    let len = c.family.len() + 1 + c.qualifier.len();
    let mut small = [0u8; 64];
    if len <= small.len() {
        let f = c.family.len();
        small[..f].copy_from_slice(&c.family);
        small[f] = b':';
        small[f + 1..len].copy_from_slice(&c.qualifier);
        b64_encode_into(&small[..len], out);
    } else {
        column_into(c, scratch);
        b64_encode_into(scratch, out);
    }
}

/// Appends one JSON row object (`{"key":..,"Cell":[..]}`).
pub fn json_row(out: &mut String, key: &[u8], cells: &[Cell]) {
    let mut scratch = Vec::new();
    let mut ts = itoa::Buffer::new();
    out.push_str("{\"key\":\"");
    b64_encode_into(key, out);
    out.push_str("\",\"Cell\":[");
    for (i, c) in cells.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"column\":\"");
        push_b64_column(out, &mut scratch, c);
        out.push_str("\",\"timestamp\":");
        out.push_str(ts.format(c.timestamp));
        out.push_str(",\"$\":\"");
        b64_encode_into(&c.value, out);
        out.push_str("\"}");
    }
    out.push_str("]}");
}

/// Appends one XML `<Row>` element.
pub fn xml_row(out: &mut String, key: &[u8], cells: &[Cell]) {
    let mut scratch = Vec::new();
    let mut ts = itoa::Buffer::new();
    out.push_str("<Row key=\"");
    b64_encode_into(key, out);
    out.push_str("\">");
    for c in cells {
        out.push_str("<Cell column=\"");
        push_b64_column(out, &mut scratch, c);
        out.push_str("\" timestamp=\"");
        out.push_str(ts.format(c.timestamp));
        out.push_str("\">");
        b64_encode_into(&c.value, out);
        out.push_str("</Cell>");
    }
    out.push_str("</Row>");
}

/// About the length of `rows` rendered (base64 of keys, columns and values, plus the markup
/// of each cell), so that the document is written into one allocation instead of growing by
/// doubling (a one-cell GET of a 1,000-byte value grew through eight).
fn rendered_len(rows: &[Row]) -> usize {
    let b64 = |n: usize| n.div_ceil(3) * 4;
    const DOC: usize = 96;
    const ROW: usize = 32;
    const CELL: usize = 64;
    rows.iter().fold(DOC, |sum, r| {
        let cells = r.cells.iter().fold(0usize, |sum, c| {
            sum.saturating_add(
                b64(c.family.len() + 1 + c.qualifier.len()) + b64(c.value.len()) + CELL,
            )
        });
        sum.saturating_add(b64(r.key.len()) + ROW)
            .saturating_add(cells)
    })
}

/// The opening of a CellSet document.
pub fn open(repr: Repr) -> &'static str {
    match repr {
        Repr::Xml => "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?><CellSet>",
        _ => "{\"Row\":[",
    }
}

/// The closing of a CellSet document.
pub fn close(repr: Repr) -> &'static str {
    match repr {
        Repr::Xml => "</CellSet>",
        _ => "]}",
    }
}

/// Appends one row in `repr`; `first` says whether it is the first row (JSON separators).
pub fn push_row(out: &mut String, repr: Repr, first: bool, key: &[u8], cells: &[Cell]) {
    match repr {
        Repr::Xml => xml_row(out, key, cells),
        _ => {
            if !first {
                out.push(',');
            }
            json_row(out, key, cells)
        }
    }
}

/// A whole CellSet document of `rows` in JSON or XML.
pub fn render(repr: Repr, rows: &[Row]) -> String {
    let mut out = String::with_capacity(rendered_len(rows));
    out.push_str(open(repr));
    for (i, r) in rows.iter().enumerate() {
        push_row(&mut out, repr, i == 0, &r.key, &r.cells);
    }
    out.push_str(close(repr));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(q: &str, ts: i64, v: &str) -> Cell {
        Cell {
            family: b"cf".to_vec(),
            qualifier: q.into(),
            timestamp: ts,
            value: v.into(),
        }
    }

    #[test]
    fn the_length_estimate_covers_the_rendered_document() {
        let rows: Vec<Row> = (0..3)
            .map(|i| Row {
                key: format!("row{i}").into_bytes(),
                cells: vec![
                    cell("a", i64::MAX, &"v".repeat(1000)),
                    cell("qualifier", -1, ""),
                ],
            })
            .collect();
        for repr in [Repr::Json, Repr::Xml] {
            assert!(render(repr, &rows).len() <= rendered_len(&rows), "{repr:?}");
        }
    }

    #[test]
    fn a_long_column_is_rendered_as_the_base64_of_family_colon_qualifier() {
        for q in [62usize, 63, 64, 65, 300] {
            let qualifier = "q".repeat(q);
            let rows = vec![Row {
                key: b"r".to_vec(),
                cells: vec![cell(&qualifier, 1, "v")],
            }];
            let want = super::super::media::b64_encode(format!("cf:{qualifier}").as_bytes());
            assert!(
                render(Repr::Json, &rows).contains(&format!("\"column\":\"{want}\"")),
                "qualifier of {q} bytes"
            );
        }
    }

    #[test]
    fn json_output_matches_hbase_shape() {
        let rows = vec![Row {
            key: b"row1".to_vec(),
            cells: vec![cell("a", 1700000000000, "value1")],
        }];
        assert_eq!(
            render(Repr::Json, &rows),
            r#"{"Row":[{"key":"cm93MQ==","Cell":[{"column":"Y2Y6YQ==","timestamp":1700000000000,"$":"dmFsdWUx"}]}]}"#
        );
        assert!(render(Repr::Xml, &rows).contains(
            r#"<Row key="cm93MQ=="><Cell column="Y2Y6YQ==" timestamp="1700000000000">dmFsdWUx</Cell></Row>"#
        ));
    }

    #[test]
    fn json_input_with_optional_fields() {
        let body = br#"{"Row":[{"key":"cm93MQ==","Cell":[{"column":"Y2Y6YQ==","$":"dmFsdWUx"},{"timestamp":"5","$":""}]}]}"#;
        let rows = parse_cellset(Repr::Json, body).expect("valid");
        assert_eq!(rows[0].key.as_deref(), Some(&b"row1"[..]));
        assert_eq!(rows[0].cells[0].column.as_deref(), Some(&b"cf:a"[..]));
        assert_eq!(rows[0].cells[0].timestamp, None);
        assert_eq!(rows[0].cells[1].timestamp, Some(5));
        assert_eq!(rows[0].cells[1].column, None);
    }

    #[test]
    fn xml_input_round_trips() {
        let body = br#"<?xml version="1.0"?><CellSet><Row key="cm93MQ=="><Cell column="Y2Y6YQ==" timestamp="7">dmFsdWUx</Cell><Cell column="Y2Y6Yg=="/></Row></CellSet>"#;
        let rows = parse_cellset(Repr::Xml, body).expect("valid");
        assert_eq!(rows[0].cells.len(), 2);
        assert_eq!(rows[0].cells[0].value.as_deref(), Some(&b"value1"[..]));
        assert_eq!(rows[0].cells[0].timestamp, Some(7));
        assert_eq!(rows[0].cells[1].value.as_deref(), Some(&b""[..]));
    }

    #[test]
    fn negative_timestamps_are_refused_and_latest_means_now() {
        let neg =
            br#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","timestamp":-1,"$":""}]}]}"#;
        assert!(parse_cellset(Repr::Json, neg).is_err());
        let latest = format!(
            r#"{{"Row":[{{"key":"cm93","Cell":[{{"column":"Y2Y6YQ==","timestamp":{},"$":""}}]}}]}}"#,
            i64::MAX
        );
        let rows = parse_cellset(Repr::Json, latest.as_bytes()).expect("valid");
        assert_eq!(rows[0].cells[0].timestamp, None);
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        for body in [
            &b"{"[..],
            b"[1]",
            br#"{"Row":[{"key":"!!"}]}"#,
            br#"{"Row":{"key":"cm93"}}"#,
            br#"{"Row":[{"key":"cm93","Cell":{"column":"Y2Y6YQ==","$":""}}]}"#,
            br#"{"Row":[{"key":"cm93","Cell":"x"}]}"#,
            b"<CellSet><Row key=\"a\"",
            b"<Cell/>",
            b"<Row key=\"cm93\"><Cell column=\"Y2Y6YQ==\">dg==</Cell></Row>",
        ] {
            let repr = if body.starts_with(b"<") {
                Repr::Xml
            } else {
                Repr::Json
            };
            assert!(
                matches!(parse_cellset(repr, body), Err(ApiError::BadRequest(_))),
                "{body:?}"
            );
        }
    }

    /// The reading that [`parse_json`] replaced: a whole `serde_json::Value`, then checked.
    /// Kept as the oracle that the one-pass reader answers every body exactly as it did.
    fn parse_json_by_value(body: &[u8]) -> ApiResult<Vec<RowIn>> {
        use serde_json::Value;
        fn list_of<'a>(v: Option<&'a Value>, name: &str, example: &str) -> ApiResult<&'a [Value]> {
            match v {
                None | Some(Value::Null) => Ok(&[]),
                Some(Value::Array(a)) => Ok(a),
                Some(Value::Object(_)) => Err(ApiError::bad(format!(
                    "\"{name}\" must be a list, not an object: write \"{name}\":[{example}]"
                ))),
                Some(_) => Err(ApiError::bad(format!(
                    "\"{name}\" must be a list: write \"{name}\":[{example}]"
                ))),
            }
        }
        fn json_b64(v: Option<&Value>, what: &str) -> ApiResult<Option<Vec<u8>>> {
            match v {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => b64_decode(s, what).map(Some),
                Some(_) => Err(ApiError::bad(format!("{what} must be a base64 string"))),
            }
        }
        fn json_ts(v: Option<&Value>) -> ApiResult<Option<Timestamp>> {
            match v {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Number(n)) => n
                    .as_i64()
                    .map(Some)
                    .ok_or_else(|| ApiError::bad(format!("timestamp {n} is not a 64-bit integer"))),
                Some(Value::String(s)) => parse_ts_text(s).map(Some),
                Some(_) => Err(ApiError::bad("timestamp must be a number")),
            }
        }
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad(format!("the body is not valid JSON: {e}")))?;
        let Value::Object(obj) = &v else {
            return Err(ApiError::bad(
                "a CellSet must be a JSON object {\"Row\":[...]}",
            ));
        };
        let mut rows = Vec::new();
        for r in list_of(obj.get("Row"), "Row", "{\"key\":..,\"Cell\":[..]}")? {
            let Value::Object(r) = r else {
                return Err(ApiError::bad(
                    "each Row must be an object {\"key\":..,\"Cell\":[..]}",
                ));
            };
            let key = json_b64(r.get("key"), "row key")?;
            let mut cells = Vec::new();
            for c in list_of(r.get("Cell"), "Cell", "{\"column\":..,\"$\":..}")? {
                let Value::Object(c) = c else {
                    return Err(ApiError::bad(
                        "each Cell must be an object {\"column\":..,\"$\":..}",
                    ));
                };
                cells.push(CellIn {
                    column: json_b64(c.get("column"), "column")?,
                    timestamp: normalize_ts(json_ts(c.get("timestamp"))?)?,
                    value: json_b64(c.get("$"), "cell value")?,
                });
            }
            rows.push(RowIn { key, cells });
        }
        Ok(rows)
    }

    /// The same answer from both readers: the same rows, or a 400 with the same message.
    fn assert_read_as_before(body: &[u8]) {
        let show = |r: ApiResult<Vec<RowIn>>| match r {
            Ok(rows) => format!("ok {rows:?}"),
            Err(e) => format!("{} {e}", actix_web::ResponseError::status_code(&e)),
        };
        assert_eq!(
            show(parse_json(body)),
            show(parse_json_by_value(body)),
            "body {:?}",
            String::from_utf8_lossy(body)
        );
    }

    #[test]
    fn a_json_body_gets_the_answer_a_whole_document_reading_gives_it() {
        let bodies: Vec<Vec<u8>> = [
            r#"{"Row":[{"key":"cm93MQ==","Cell":[{"column":"Y2Y6YQ==","timestamp":5,"$":"dg=="}]}]}"#,
            r#"{"Row":[{"key":"cm93MQ==","Cell":[{"column":"Y2Y6YQ==","$":"dg=="},{"$":""}]},{"Cell":[{"column":"Y2Y6Yg=="}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","timestamp":"12","$":"dg=="}]}],"extra":[1,{"a":[null,true]}]}"#,
            r#"{"Row":[{"key":"cm93","key":"cm94","Cell":[{"column":"Y2Y6YQ==","$":"dg==","$":"dw=="}]}],"Row":[]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","$":"dg=="}]}]}"#,
            r#"{"Row":null}"#,
            r#"{}"#,
            r#"{"Row":[{"key":null,"Cell":null}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":null,"timestamp":null,"$":null}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","timestamp":9223372036854775807,"$":""}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","timestamp":9223372036854775808,"$":""}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","timestamp":-1,"$":""}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","timestamp":1.5,"$":""}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","timestamp":1e3,"$":""}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","timestamp":true,"$":""}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","timestamp":" 7 ","$":""}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","timestamp":"x","$":""}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":5,"$":""}]}]}"#,
            r#"{"Row":[{"key":["cm93"],"Cell":[]}]}"#,
            r#"{"Row":[{"key":{"a":1},"Cell":[]}]}"#,
            r#"{"Row":[{"key":"cm 93","Cell":[]}]}"#,
            r#"{"Row":[{"key":"cm93
MQ==","Cell":[]}]}"#,
            r#"{"Row":[{"key":"cm9
3MQ==","Cell":[]}]}"#,
            r#"{"Row":[{"key":"!!","Cell":[{"column":5}]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","$":"dg=="}, 7]}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":{"column":"Y2Y6YQ==","$":""}}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":"x"}]}"#,
            r#"{"Row":[{"key":"cm93","Cell":7}]}"#,
            r#"{"Row":{"key":"cm93"}}"#,
            r#"{"Row":"x"}"#,
            r#"{"Row":[1,{"key":"!!"}]}"#,
            r#"{"Row":[[]]}"#,
            r#"[1]"#,
            r#""x""#,
            r#"null"#,
            r#"{"Row":[]} x"#,
            r#"{"Row":[],}"#,
            r#"{"Row":[{"key":"cm93","Cell":[{"column":"Y2Y6YQ==","$":"dg=="}]}]"#,
            "{\"Row\":[{\"key\":\"\u{00a0}cm93\u{2028}\",\"Cell\":[]}]}",
        ]
        .iter()
        .map(|b| b.as_bytes().to_vec())
        .collect();
        let mut all = bodies.clone();
        // Deep nesting in a field nobody reads: the parser's nesting limit still applies.
        all.push(format!("{{\"x\":{}1{}}}", "[".repeat(200), "]".repeat(200)).into_bytes());
        all.push(format!("{{\"x\":{}1{}}}", "[".repeat(100), "]".repeat(100)).into_bytes());
        // Invalid UTF-8 inside a string of a field nobody reads.
        all.push(b"{\"x\":\"\xff\",\"Row\":[]}".to_vec());
        // Every prefix of every body (a body cut off in transit) and every body with one byte
        // changed to each of the JSON punctuation characters.
        for b in &bodies {
            for n in 0..b.len() {
                all.push(b[..n].to_vec());
                for c in [b'"', b'{', b'[', b',', b':', b'}', b']', b'1', b'n', b'\\'] {
                    let mut m = b.clone();
                    m[n] = c;
                    all.push(m);
                }
            }
        }
        for body in &all {
            assert_read_as_before(body);
        }
    }
}
