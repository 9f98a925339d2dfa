//! `/{t}/schema` (create, replace, alter, describe, drop), `/{t}/exists` and `/{t}/regions`
//! (`R/SchemaResource.java`, `M/TableSchemaModel.java`, `M/ColumnSchemaModel.java`).
//!
//! Table attributes Kura interprets: `KURA_SALT_PREFIX` (hash only the first N bytes of a row
//! key, so rows sharing that prefix live in one region; fixed at creation) and `KURA_REGIONS`
//! (regions the table starts with). Family attributes: `VERSIONS` (default 1) and `TTL`
//! (seconds, default FOREVER = 2147483647). Every other attribute is kept and echoed back.
//!
//! # Invariants
//! 1. `PUT` creates or replaces (families not listed are dropped): 201 with `Location`.
//! 2. `POST` creates (201) or adds/modifies the listed families, leaving others untouched (200).
//! 3. The URL names the table; a `name` in the body is ignored.

use super::media::{b64_encode, body_repr, negotiate, read_body, xml_escape, Repr, XmlShape};
use super::meta::respond;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use actix_web::http::{header, Method};
use actix_web::{web, HttpRequest, HttpResponse};
use kura_backend::FamilyDescriptor;
use kura_backend::{AlterMode, Error as BackendError, SaltConfig, TableDescriptor};
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Table attribute: salt prefix length in bytes.
pub const ATTR_SALT_PREFIX: &str = "KURA_SALT_PREFIX";
/// Table attribute: regions the table is created with.
pub const ATTR_REGIONS: &str = "KURA_REGIONS";
/// HBase's FOREVER TTL.
const TTL_FOREVER: u64 = 2_147_483_647;

/// Family attributes HBase reports, with their defaults (overridden by what the user set).
const FAMILY_DEFAULTS: &[(&str, &str)] = &[
    ("BLOOMFILTER", "ROW"),
    ("BLOCKCACHE", "true"),
    ("BLOCKSIZE", "65536"),
    ("COMPRESSION", "NONE"),
    ("DATA_BLOCK_ENCODING", "NONE"),
    ("IN_MEMORY", "false"),
    ("KEEP_DELETED_CELLS", "FALSE"),
    ("MIN_VERSIONS", "0"),
    ("REPLICATION_SCOPE", "0"),
];

/// A parsed TableSchema body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaIn {
    pub attrs: BTreeMap<String, String>,
    pub families: Vec<(String, BTreeMap<String, String>)>,
}

/// An attribute value: a string, or a number or boolean (HBase calls `toString` on them).
fn value_text(key: &str, v: &Value) -> ApiResult<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(_) | Value::Bool(_) => Ok(v.to_string()),
        _ => Err(ApiError::bad(format!(
            "schema attribute {key} must be a string, a number or a boolean"
        ))),
    }
}

fn parse_json(body: &[u8]) -> ApiResult<SchemaIn> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad(format!("the body is not valid JSON: {e}")))?;
    let Value::Object(obj) = v else {
        return Err(ApiError::bad("a TableSchema must be a JSON object"));
    };
    let mut out = SchemaIn::default();
    for (k, v) in obj {
        match k.as_str() {
            "name" => {}
            "ColumnSchema" => {
                let list = match v {
                    Value::Array(a) => a,
                    Value::Null => Vec::new(),
                    other => vec![other],
                };
                for c in list {
                    let Value::Object(c) = c else {
                        return Err(ApiError::bad("each ColumnSchema must be an object"));
                    };
                    let mut name = None;
                    let mut attrs = BTreeMap::new();
                    for (ck, cv) in c {
                        if ck == "name" {
                            name = Some(value_text("name", &cv)?);
                        } else {
                            let text = value_text(&ck, &cv)?;
                            attrs.insert(ck, text);
                        }
                    }
                    let name =
                        name.ok_or_else(|| ApiError::bad("a ColumnSchema needs a \"name\""))?;
                    out.families.push((name, attrs));
                }
            }
            _ => {
                let text = value_text(&k, &v)?;
                out.attrs.insert(k, text);
            }
        }
    }
    Ok(out)
}

fn xml_attrs(e: &BytesStart<'_>) -> ApiResult<BTreeMap<String, String>> {
    let mut m = BTreeMap::new();
    for a in e.attributes() {
        let a = a.map_err(|e| ApiError::bad(format!("the body is not valid XML: {e}")))?;
        let k = String::from_utf8_lossy(a.key.as_ref()).into_owned();
        if k == "xmlns" || k.starts_with("xmlns:") || k.starts_with("xsi:") {
            continue; // namespace declarations are markup, not attributes
        }
        let v = a
            .unescape_value()
            .map_err(|e| ApiError::bad(format!("the body is not valid XML: {e}")))?;
        m.insert(k, v.into_owned());
    }
    Ok(m)
}

fn parse_xml(body: &[u8]) -> ApiResult<SchemaIn> {
    let mut reader = Reader::from_reader(body);
    let mut buf = Vec::new();
    let mut out = SchemaIn::default();
    let mut seen = false;
    let mut shape = XmlShape::default();
    loop {
        let ev = reader
            .read_event_into(&mut buf)
            .map_err(|e| ApiError::bad(format!("the body is not valid XML: {e}")))?;
        shape.see(&ev)?;
        match ev {
            Event::Start(e) | Event::Empty(e) => match e.local_name().as_ref() {
                b"TableSchema" => {
                    seen = true;
                    let mut attrs = xml_attrs(&e)?;
                    attrs.remove("name");
                    out.attrs = attrs;
                }
                b"ColumnSchema" => {
                    let mut attrs = xml_attrs(&e)?;
                    let name = attrs
                        .remove("name")
                        .ok_or_else(|| ApiError::bad("a ColumnSchema needs a name attribute"))?;
                    out.families.push((name, attrs));
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !seen {
        return Err(ApiError::bad(
            "an XML schema must be <TableSchema name=..>..</TableSchema>",
        ));
    }
    Ok(out)
}

fn parse_u32(v: &str, what: &str) -> ApiResult<u32> {
    v.trim()
        .parse()
        .map_err(|_| ApiError::bad(format!("{what}={v:?} is not a whole number")))
}

/// Attribute names are written back as XML attribute names (`GET /t/schema` in XML): letters,
/// digits, `_`, `-`, `.` and `:` (XML namespaces), starting with a letter or `_` (HBase's own
/// are all such).
fn check_attr_name(name: &str) -> ApiResult<()> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
        && name.len() <= 255;
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad(format!(
            "invalid schema attribute name {name:?}: use letters, digits, '_', '-', '.' and ':', \
             starting with a letter or '_'"
        )))
    }
}

/// Builds a descriptor from a schema body (salt and regions from the attributes). The family
/// list may be empty (a POST that changes table attributes only); `handle` refuses that for a
/// create or a replace.
pub fn descriptor_from(table: &str, schema: SchemaIn) -> ApiResult<TableDescriptor> {
    for name in schema
        .attrs
        .keys()
        .chain(schema.families.iter().flat_map(|(_, a)| a.keys()))
        .filter(|k| k.as_str() != "name")
    {
        check_attr_name(name)?;
    }
    let mut attrs = schema.attrs;
    attrs.remove("IS_META");
    let mut salt = SaltConfig::default();
    if let Some(p) = attrs.remove(ATTR_SALT_PREFIX) {
        let n = parse_u32(&p, ATTR_SALT_PREFIX)?;
        salt.prefix_len = (n > 0).then_some(n);
    }
    let initial_regions = match attrs.remove(ATTR_REGIONS) {
        Some(r) => {
            let n = parse_u32(&r, ATTR_REGIONS)?;
            if n == 0 || n > salt.buckets {
                return Err(ApiError::bad(format!(
                    "{ATTR_REGIONS} must be between 1 and {}",
                    salt.buckets
                )));
            }
            Some(n)
        }
        None => None,
    };
    let mut families = Vec::new();
    let mut family_attributes = BTreeMap::new();
    for (name, mut fattrs) in schema.families {
        if name.is_empty()
            || name.contains(':')
            || name.len() > 255
            || !name.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(ApiError::bad(format!(
                "invalid column family name {name:?}: use printable characters without ':'"
            )));
        }
        if families
            .iter()
            .any(|f: &FamilyDescriptor| f.name == name.as_bytes())
        {
            return Err(ApiError::bad(format!(
                "column family {name} is listed twice"
            )));
        }
        let mut fd = FamilyDescriptor::new(name.as_bytes().to_vec());
        if let Some(v) = fattrs.remove("VERSIONS") {
            let n = parse_u32(&v, "VERSIONS")?;
            if n == 0 {
                return Err(ApiError::bad("VERSIONS must be at least 1"));
            }
            fd = fd.with_max_versions(n);
        }
        if let Some(t) = fattrs.remove("TTL") {
            let ttl = if t.trim().eq_ignore_ascii_case("FOREVER") {
                None
            } else {
                let secs: i64 = t
                    .trim()
                    .parse()
                    .map_err(|_| ApiError::bad(format!("TTL={t:?} is not a number of seconds")))?;
                if secs <= 0 {
                    return Err(ApiError::bad("TTL must be a positive number of seconds"));
                }
                (secs as u64 != TTL_FOREVER).then_some(secs as u64)
            };
            fd = fd.with_ttl_secs(ttl);
        }
        if !fattrs.is_empty() {
            family_attributes.insert(name.clone(), fattrs);
        }
        families.push(fd);
    }
    Ok(TableDescriptor {
        name: table.to_string(),
        families,
        salt,
        initial_regions,
        attributes: attrs,
        family_attributes,
    })
}

fn table_attrs(desc: &TableDescriptor) -> Vec<(String, String)> {
    let mut v = vec![("IS_META".to_string(), "false".to_string())];
    v.extend(desc.attributes.iter().map(|(k, a)| (k.clone(), a.clone())));
    if let Some(p) = desc.salt.prefix_len {
        v.push((ATTR_SALT_PREFIX.to_string(), p.to_string()));
    }
    if let Some(r) = desc.initial_regions {
        v.push((ATTR_REGIONS.to_string(), r.to_string()));
    }
    v
}

fn family_attrs(desc: &TableDescriptor, f: &FamilyDescriptor) -> BTreeMap<String, String> {
    let name = String::from_utf8_lossy(&f.name).into_owned();
    let mut m: BTreeMap<String, String> = FAMILY_DEFAULTS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Some(user) = desc.family_attributes.get(&name) {
        m.extend(user.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    m.insert("VERSIONS".into(), f.max_versions.to_string());
    m.insert("TTL".into(), f.ttl_secs.unwrap_or(TTL_FOREVER).to_string());
    m
}

/// The schema of `desc` in `repr`.
pub fn render(repr: Repr, desc: &TableDescriptor) -> String {
    match repr {
        Repr::Json => {
            let mut obj = serde_json::Map::new();
            obj.insert("name".into(), Value::String(desc.name.clone()));
            for (k, v) in table_attrs(desc) {
                obj.insert(k, Value::String(v));
            }
            let cols: Vec<Value> = desc
                .families
                .iter()
                .map(|f| {
                    let mut c = serde_json::Map::new();
                    c.insert(
                        "name".into(),
                        Value::String(String::from_utf8_lossy(&f.name).into()),
                    );
                    for (k, v) in family_attrs(desc, f) {
                        c.insert(k, Value::String(v));
                    }
                    Value::Object(c)
                })
                .collect();
            obj.insert("ColumnSchema".into(), Value::Array(cols));
            Value::Object(obj).to_string()
        }
        Repr::Xml => {
            let mut s = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?><TableSchema name=\"{}\"",
                xml_escape(&desc.name)
            );
            for (k, v) in table_attrs(desc) {
                let _ = write!(s, " {}=\"{}\"", xml_escape(&k), xml_escape(&v));
            }
            s.push('>');
            for f in &desc.families {
                let _ = write!(
                    s,
                    "<ColumnSchema name=\"{}\"",
                    xml_escape(&String::from_utf8_lossy(&f.name))
                );
                for (k, v) in family_attrs(desc, f) {
                    let _ = write!(s, " {}=\"{}\"", xml_escape(&k), xml_escape(&v));
                }
                s.push_str("/>");
            }
            s.push_str("</TableSchema>");
            s
        }
        _ => {
            let mut s = format!("{{ NAME=> '{}'", desc.name);
            for (k, v) in table_attrs(desc) {
                let _ = write!(s, ", {k} => '{v}'");
            }
            s.push_str(", COLUMNS => [ ");
            for (i, f) in desc.families.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                let _ = write!(s, "{{ NAME => '{}'", String::from_utf8_lossy(&f.name));
                for (k, v) in family_attrs(desc, f) {
                    let _ = write!(s, ", {k} => '{v}'");
                }
                s.push_str(" }");
            }
            s.push_str(" ] }\n");
            s
        }
    }
}

fn location(req: &HttpRequest, table: &str) -> String {
    let ci = req.connection_info();
    format!("{}://{}/{table}/schema", ci.scheme(), ci.host())
}

/// Every method on `/{t}/schema`.
pub async fn handle(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    table: &str,
) -> ApiResult<HttpResponse> {
    let kura = &state.kura;
    match *req.method() {
        Method::GET | Method::HEAD => {
            let repr = negotiate(req, &[Repr::Text, Repr::Xml, Repr::Json], Repr::Text)?;
            let desc = kura.table(table).await?.ok_or(ApiError::NotFound)?;
            Ok(respond(repr, render(repr, &desc)))
        }
        Method::DELETE => {
            kura.drop_table(table).await?;
            Ok(HttpResponse::Ok().finish())
        }
        Method::PUT | Method::POST => {
            let body = read_body(req, payload, &state.limits).await?;
            if body.iter().all(|b| b.is_ascii_whitespace()) {
                return Err(ApiError::bad("a TableSchema body is required"));
            }
            let schema = match body_repr(req, &body, &[Repr::Json, Repr::Xml])? {
                Repr::Xml => parse_xml(&body)?,
                _ => parse_json(&body)?,
            };
            let mut desc = descriptor_from(table, schema)?;
            let replace = req.method() == Method::PUT;
            let existing = kura.table(table).await?;
            // A POST to an existing table may list no family: it then changes table
            // attributes only. A create or a replace needs the table's families.
            if desc.families.is_empty() && (replace || existing.is_none()) {
                return Err(ApiError::bad(
                    "a table needs at least one ColumnSchema (column family)",
                ));
            }
            let created = |req: &HttpRequest| {
                HttpResponse::Created()
                    .insert_header((header::LOCATION, location(req, table)))
                    .finish()
            };
            match existing {
                None => match kura.create_table(desc).await {
                    Ok(()) => Ok(created(req)),
                    // Created by someone else between our look-up and our create.
                    Err(BackendError::TableExists(_)) => Err(ApiError::NotModified),
                    Err(e) => Err(e.into()),
                },
                Some(existing) => {
                    if desc.salt.prefix_len.is_some() && desc.salt != existing.salt {
                        return Err(ApiError::bad(format!(
                            "{ATTR_SALT_PREFIX} is fixed when the table is created"
                        )));
                    }
                    desc.salt = existing.salt.clone();
                    if desc.initial_regions.is_none() {
                        desc.initial_regions = existing.initial_regions;
                    }
                    if replace {
                        kura.alter_table(desc, AlterMode::Replace).await?;
                        Ok(created(req))
                    } else {
                        let mut attrs = existing.attributes.clone();
                        attrs.extend(desc.attributes);
                        desc.attributes = attrs;
                        kura.alter_table(desc, AlterMode::Merge).await?;
                        Ok(HttpResponse::Ok().finish())
                    }
                }
            }
        }
        _ => Err(ApiError::MethodNotAllowed("GET, HEAD, PUT, POST, DELETE")),
    }
}

/// `GET /{t}/exists`: 200 or 404, empty body.
pub async fn exists(state: &AppState, table: &str) -> ApiResult<HttpResponse> {
    state.kura.table(table).await?.ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok().finish())
}

fn bucket_key(bucket: u32, total: u32, is_end: bool) -> Vec<u8> {
    if (!is_end && bucket == 0) || (is_end && bucket >= total) {
        Vec::new()
    } else {
        bucket.to_be_bytes().to_vec()
    }
}

/// `GET /{t}/regions`: the table's real regions. On the embedded store rows are placed by salt
/// bucket, so a region's start and end keys are its salt bucket bounds as 4-byte big-endian
/// numbers (empty = open); on Bigtable they are the tablets' row key bounds it reports.
pub async fn regions(req: &HttpRequest, state: &AppState, table: &str) -> ApiResult<HttpResponse> {
    let repr = negotiate(req, &[Repr::Text, Repr::Xml, Repr::Json], Repr::Text)?;
    let desc = state.kura.table(table).await?.ok_or(ApiError::NotFound)?;
    let regions = state.kura.regions(table).await?;
    let location = req.connection_info().host().to_string();
    let total = desc.salt.buckets;
    let items: Vec<(u64, Vec<u8>, Vec<u8>, String)> = regions
        .iter()
        .map(|r| {
            let (start, end) = match &r.key_range {
                Some((start, end)) => (start.clone(), end.clone()),
                None => (
                    bucket_key(r.bucket_start, total, false),
                    bucket_key(r.bucket_end, total, true),
                ),
            };
            let name = format!("{table},{},{}.{:032x}.", r.bucket_start, r.id, r.id);
            (r.id, start, end, name)
        })
        .collect();
    let body = match repr {
        Repr::Json => serde_json::json!({
            "name": table,
            "Region": items.iter().map(|(id, s, e, n)| serde_json::json!({
                "id": id, "startKey": b64_encode(s), "endKey": b64_encode(e),
                "location": location, "name": n,
            })).collect::<Vec<_>>(),
        })
        .to_string(),
        Repr::Xml => {
            let mut s = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?><TableInfo name=\"{table}\">"
            );
            for (id, st, e, n) in &items {
                let _ = write!(
                    s,
                    "<Region endKey=\"{}\" id=\"{id}\" location=\"{}\" name=\"{}\" startKey=\"{}\"/>",
                    b64_encode(e),
                    xml_escape(&location),
                    xml_escape(n),
                    b64_encode(st)
                );
            }
            s.push_str("</TableInfo>");
            s
        }
        _ => {
            let mut s = String::new();
            for (id, st, e, n) in &items {
                let _ = write!(
                    s,
                    "{n} [\n  id={id}\n  startKey='{}'\n  endKey='{}'\n  location='{location}'\n]\n",
                    String::from_utf8_lossy(st).escape_default(),
                    String::from_utf8_lossy(e).escape_default()
                );
            }
            s
        }
    };
    Ok(respond(repr, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_minimal_schema_gets_hbase_defaults() {
        let s = parse_json(br#"{"name":"t","ColumnSchema":[{"name":"cf"}]}"#).expect("valid");
        let d = descriptor_from("t", s).expect("valid");
        assert_eq!(d.families[0].max_versions, 1);
        assert_eq!(d.families[0].ttl_secs, None);
        let json = render(Repr::Json, &d);
        assert!(json.contains(r#""VERSIONS":"1""#), "{json}");
        assert!(json.contains(r#""TTL":"2147483647""#), "{json}");
    }

    #[test]
    fn numbers_and_unknown_attributes_are_kept() {
        let body = br#"{"name":"t","OWNER":"me","KURA_SALT_PREFIX":4,"KURA_REGIONS":"8",
            "ColumnSchema":[{"name":"cf","VERSIONS":3,"TTL":"60","COLOR":"blue"}]}"#;
        let d = descriptor_from("t", parse_json(body).expect("valid")).expect("valid");
        assert_eq!(d.salt.prefix_len, Some(4));
        assert_eq!(d.initial_regions, Some(8));
        assert_eq!(d.families[0].max_versions, 3);
        assert_eq!(d.families[0].ttl_secs, Some(60));
        let xml = render(Repr::Xml, &d);
        for needle in [
            r#"OWNER="me""#,
            r#"KURA_SALT_PREFIX="4""#,
            r#"COLOR="blue""#,
            r#"VERSIONS="3""#,
        ] {
            assert!(xml.contains(needle), "{needle} in {xml}");
        }
    }

    #[test]
    fn xml_schema_as_the_hbase_client_sends_it() {
        let s = parse_xml(
            br#"<TableSchema xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" name="t"><ColumnSchema name="cf" VERSIONS="3"/></TableSchema>"#,
        )
        .expect("valid");
        let d = descriptor_from("t", s).expect("valid");
        assert_eq!(d.families[0].max_versions, 3);
        assert!(d.attributes.is_empty(), "{:?}", d.attributes);
    }

    #[test]
    fn bad_schemas_are_rejected() {
        for body in [
            &br#"{"ColumnSchema":[{"name":"a:b"}]}"#[..],
            br#"{"ColumnSchema":[{"name":"a","VERSIONS":"x"}]}"#,
            br#"{"ColumnSchema":[{"name":["a","b"]}]}"#,
            br#"{"ColumnSchema":[{"name":"a","TTL":{}}]}"#,
            br#"[1]"#,
            // Attribute names that could not be written back as XML attribute names.
            br#"{"ColumnSchema":[{"name":"cf","x y":"1"}]}"#,
            br#"{"ColumnSchema":[{"name":"cf","k<>":"1"}]}"#,
            br#"{"a"b":"1","ColumnSchema":[{"name":"cf"}]}"#,
            br#"{"ColumnSchema":[{"name":"cf","1x":"1"}]}"#,
        ] {
            let r = parse_json(body).and_then(|s| descriptor_from("t", s));
            assert!(matches!(r, Err(ApiError::BadRequest(_))), "{body:?}");
        }
        // No family is a valid POST to an existing table (table attributes only); `handle`
        // refuses it for a create or a replace.
        let d = parse_json(br#"{"ColumnSchema":[],"OWNER":"me"}"#)
            .and_then(|s| descriptor_from("t", s))
            .expect("valid");
        assert!(d.families.is_empty());
    }
}
