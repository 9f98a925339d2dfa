//! Wire-level helpers: content negotiation, base64, URL decoding, query strings, body reading.
//!
//! # Invariants
//! 1. Response Content-Types are exactly `application/json`, `text/xml`, `text/plain` or
//!    `application/octet-stream` (HBase's tests compare the header for equality).
//! 2. A body is never buffered past `Limits::max_body`: a larger one is a 413 before it is read.
//! 3. URL decoding follows Java's `URLDecoder`: `+` is a space, `%XX` a byte.
//! 4. An XML body is one complete document: a body that ends inside its root element (cut off
//!    in transit), holds a second root, or text outside the root is a 400 before anything in
//!    it is applied ([`XmlShape`]).

use crate::error::{ApiError, ApiResult};
use crate::state::Limits;
use actix_web::http::header;
use actix_web::{web, HttpRequest};
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, Engine};
use futures::{FutureExt, StreamExt};
use std::borrow::Cow;
use std::time::Duration;

/// A representation of a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repr {
    Json,
    Xml,
    Text,
    Binary,
}

impl Repr {
    /// The exact Content-Type of a response in this representation.
    pub fn content_type(self) -> &'static str {
        match self {
            Repr::Json => "application/json",
            Repr::Xml => "text/xml",
            Repr::Text => "text/plain",
            Repr::Binary => "application/octet-stream",
        }
    }

    /// [`Repr::content_type`] as a header value, built without parsing or allocating.
    pub fn header_value(self) -> header::HeaderValue {
        const JSON: header::HeaderValue = header::HeaderValue::from_static("application/json");
        const XML: header::HeaderValue = header::HeaderValue::from_static("text/xml");
        const TEXT: header::HeaderValue = header::HeaderValue::from_static("text/plain");
        const BINARY: header::HeaderValue =
            header::HeaderValue::from_static("application/octet-stream");
        match self {
            Repr::Json => JSON,
            Repr::Xml => XML,
            Repr::Text => TEXT,
            Repr::Binary => BINARY,
        }
    }
}

/// The media type of a Content-Type without its parameters (`text/xml; charset=..` is
/// `text/xml`), as sent; compare it without regard to ASCII case.
fn essence(mime: &str) -> &str {
    mime.split(';').next().unwrap_or("").trim()
}

/// Picks the response representation from the `Accept` header among `offered`; no header or
/// `*/*` gives `default`. A header naming only types we cannot produce is a 406.
pub fn negotiate(req: &HttpRequest, offered: &[Repr], default: Repr) -> ApiResult<Repr> {
    let Some(accept) = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(default);
    };
    // The ranges by falling q, the earlier first among equals; the first that names something
    // offered wins. Kept as the best so far in one pass: a later range wins only with a
    // strictly higher q.
    let dflt = [default];
    let mut any_range = false;
    let mut best: Option<(f32, Repr)> = None;
    for part in accept.split(',') {
        let mut pieces = part.split(';');
        let mime = pieces.next().unwrap_or("").trim();
        if mime.is_empty() {
            continue;
        }
        let mut q = 1.0f32;
        for p in pieces {
            if let Some(v) = p.trim().strip_prefix("q=") {
                q = v.trim().parse().unwrap_or(0.0);
            }
        }
        if q.is_nan() || q <= 0.0 {
            continue;
        }
        any_range = true;
        if best.is_some_and(|(b, _)| q <= b) {
            continue;
        }
        let is = |m: &str| mime.eq_ignore_ascii_case(m);
        let candidates: &[Repr] = if is("*/*") {
            &dflt
        } else if is("application/json") {
            &[Repr::Json]
        } else if is("text/xml") || is("application/xml") {
            &[Repr::Xml]
        } else if is("text/plain") {
            &[Repr::Text]
        } else if is("application/octet-stream") {
            &[Repr::Binary]
        } else if is("application/*") {
            &[Repr::Json, Repr::Binary, Repr::Xml]
        } else if is("text/*") {
            &[Repr::Text, Repr::Xml]
        } else {
            &[]
        };
        if let Some(r) = candidates.iter().find(|r| offered.contains(r)) {
            best = Some((q, *r));
        }
    }
    if !any_range {
        return Ok(default);
    }
    if let Some((_, r)) = best {
        return Ok(r);
    }
    Err(ApiError::NotAcceptable(format!(
        "cannot produce {accept}; this resource is available as {}",
        offered
            .iter()
            .map(|r| r.content_type())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// The representation of a request body, from its Content-Type. A missing Content-Type is
/// sniffed from the first byte (`{` JSON, `<` XML); protobuf and others are a 415.
pub fn body_repr(req: &HttpRequest, body: &[u8], offered: &[Repr]) -> ApiResult<Repr> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(essence);
    let repr = match ct {
        None | Some("") => match body.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'<') => Some(Repr::Xml),
            _ => Some(Repr::Json),
        },
        Some(ct) => {
            let is = |m: &str| ct.eq_ignore_ascii_case(m);
            if is("application/json") {
                Some(Repr::Json)
            } else if is("text/xml") || is("application/xml") {
                Some(Repr::Xml)
            } else if is("application/octet-stream") {
                Some(Repr::Binary)
            } else {
                None
            }
        }
    };
    match repr {
        Some(r) if offered.contains(&r) => Ok(r),
        _ => Err(ApiError::UnsupportedMediaType(format!(
            "Content-Type {} is not supported here; send one of {}",
            ct.unwrap_or_default().to_ascii_lowercase(),
            offered
                .iter()
                .map(|r| r.content_type())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The next chunk of a request body, or `Err` (the message for the 408) when the client sent
/// nothing for `idle`: a client that announces a body and then stalls must not hold its
/// connection and its handler forever (RELIABILITY.md, hostile HTTP).
pub async fn next_chunk<S: futures::Stream + Unpin>(
    body: &mut S,
    idle: Duration,
) -> Result<Option<S::Item>, String> {
    // A chunk that is already here (most bodies arrive with their head) needs no timer.
    if let Some(ready) = body.next().now_or_never() {
        return Ok(ready);
    }
    actix_web::rt::time::timeout(idle, body.next())
        .await
        .map_err(|_| {
            format!(
                "the request body stopped arriving: nothing for {} s (send the whole body \
                 promptly, or fewer bytes than Content-Length was sent)",
                idle.as_secs()
            )
        })
}

/// Why a body could not be collected ([`collect_body`]).
pub enum BodyError {
    /// More than the limit arrived.
    TooLarge,
    /// Nothing arrived for the idle timeout: the message for the 408.
    Stalled(String),
    /// The transport failed mid-body.
    Read(String),
}

/// Collects a request body of at most `max` bytes, pausing at most `idle` between chunks: the
/// one reading loop of the REST API ([`read_body`]) and the applications (`read_json`). A body
/// that arrives in one chunk (most do) is kept as it came, without a copy.
pub async fn collect_body<S, E>(
    body: &mut S,
    max: usize,
    idle: Duration,
    capacity: usize,
) -> Result<web::Bytes, BodyError>
where
    S: futures::Stream<Item = Result<web::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    // The body while it is one chunk; `buf` once a second one arrives.
    let mut whole: Option<web::Bytes> = None;
    let mut buf = web::BytesMut::new();
    while let Some(chunk) = next_chunk(body, idle).await.map_err(BodyError::Stalled)? {
        let chunk = chunk.map_err(|e| BodyError::Read(e.to_string()))?;
        let have = whole.as_ref().map_or(buf.len(), web::Bytes::len);
        if have + chunk.len() > max {
            return Err(BodyError::TooLarge);
        }
        if let Some(first) = whole.take() {
            buf.reserve(capacity.min(max).max(have + chunk.len()));
            buf.extend_from_slice(&first);
            buf.extend_from_slice(&chunk);
        } else if buf.is_empty() {
            whole = Some(chunk);
        } else {
            buf.extend_from_slice(&chunk);
        }
    }
    Ok(whole.unwrap_or_else(|| buf.freeze()))
}

/// The body length a request declares in `Content-Length`, if it declares a valid one: a body
/// over the limit is refused on it before any of the body is read.
pub fn declared_length(req: &HttpRequest) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// Reads the whole body, refusing (413) one larger than `limits.max_body` and (408) one that
/// stops arriving for `limits.body_idle_secs`.
pub async fn read_body(
    req: &HttpRequest,
    payload: web::Payload,
    limits: &Limits,
) -> ApiResult<web::Bytes> {
    let too_large = || {
        ApiError::PayloadTooLarge(format!(
            "the request body exceeds {} bytes",
            limits.max_body
        ))
    };
    let declared = declared_length(req);
    if declared.is_some_and(|n| n > limits.max_body as u64) {
        return Err(too_large());
    }
    // A coding we cannot undo is refused (RFC 9110 §8.4.1), not read as if it were plain.
    if let Some(coding) = req.headers().get(header::CONTENT_ENCODING) {
        let known = coding.to_str().is_ok_and(|c| {
            c.split(',').all(|c| {
                matches!(
                    c.trim().to_ascii_lowercase().as_str(),
                    "identity" | "gzip" | "deflate" | "br" | "zstd"
                )
            })
        });
        if !known {
            return Err(ApiError::UnsupportedMediaType(format!(
                "Content-Encoding {coding:?} is not supported: send gzip, deflate, br, zstd or \
                 an uncompressed body"
            )));
        }
    }
    // `Content-Encoding: gzip` (HBase's GzipFilter) is inflated here; the limit applies to the
    // inflated bytes, so a compression bomb stops at `max_body`.
    let mut payload = actix_web::dev::Decompress::from_headers(payload.into_inner(), req.headers());
    let idle = Duration::from_secs(limits.body_idle_secs);
    let capacity = declared.unwrap_or(0) as usize;
    match collect_body(&mut payload, limits.max_body, idle, capacity).await {
        Ok(body) => Ok(body),
        Err(BodyError::TooLarge) => Err(too_large()),
        Err(BodyError::Stalled(m)) => Err(ApiError::RequestTimeout(m)),
        Err(BodyError::Read(e)) => Err(ApiError::bad(format!("cannot read the body: {e}"))),
    }
}

const INDIFFERENT: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STD_LENIENT: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, INDIFFERENT);
const URL_LENIENT: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, INDIFFERENT);

/// Standard base64 (bodies), padding optional. Line breaks are skipped between 4-character
/// units, where MIME wrapping (76 columns, Python's `base64.encodebytes`) puts them, as
/// Jackson's `Base64Variant.decode` (HBase's JSON reader) skips white space only between
/// units. A space or tab anywhere inside the value, or a line break inside a unit, is refused:
/// `"cm93 MQ=="` is not the key `row1` a client meant to send but a mangled one.
pub fn b64_decode(s: &str, what: &str) -> ApiResult<Vec<u8>> {
    let t = s.trim();
    let invalid =
        |why: String| ApiError::bad(format!("{what} is not valid base64 ({why}): {t:.40}"));
    // One pass over the bytes: a space or tab anywhere is refused first, whatever line breaks
    // come before it (ASCII bytes never occur inside a multi-byte character).
    let mut breaks = false;
    for (i, &b) in t.as_bytes().iter().enumerate() {
        match b {
            b' ' | b'\t' => {
                return Err(invalid(format!(
                    "it holds a space or tab at byte {i}; send the base64 without white space"
                )))
            }
            b'\n' | b'\r' => breaks = true,
            _ => {}
        }
    }
    let joined: std::borrow::Cow<'_, str> = if breaks {
        let mut joined = String::with_capacity(t.len());
        for (i, c) in t.char_indices() {
            if c == '\n' || c == '\r' {
                if !joined.len().is_multiple_of(4) {
                    return Err(invalid(format!(
                        "a line break at byte {i} splits a 4-character unit"
                    )));
                }
            } else {
                joined.push(c);
            }
        }
        joined.into()
    } else {
        t.into()
    };
    STD_LENIENT
        .decode(joined.as_bytes())
        .map_err(|e| invalid(e.to_string()))
}

/// Standard base64 with padding, as HBase writes it.
pub fn b64_encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// [`b64_encode`], appended to `out` (no intermediate string).
pub fn b64_encode_into(bytes: &[u8], out: &mut String) {
    // Through a small stack buffer: the engine's own `encode_string` zeroes a 1 KB buffer on
    // every call, more work than encoding a short key or value. 192 input bytes (a multiple
    // of 3, so that only the last piece is padded) fill 256 output bytes.
    const PIECE: usize = 192;
    let mut buf = [0u8; PIECE / 3 * 4];
    out.reserve(bytes.len().div_ceil(3) * 4);
    for piece in bytes.chunks(PIECE) {
        let n = base64::engine::general_purpose::STANDARD
            .encode_slice(piece, &mut buf)
            .expect("256 bytes hold the base64 of 192");
        out.push_str(std::str::from_utf8(&buf[..n]).expect("base64 is ASCII"));
    }
}

/// How row keys and columns are written in a URL (`e=` / `Encoding:`; HBASE-28174).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEncoding {
    /// URL-encoded bytes (the default).
    Plain,
    /// URL-safe base64 (`b64`, `base64`, `b64url`, `base64url`).
    Base64Url,
    /// Standard base64 (`b64basic`).
    Base64Basic,
}

impl KeyEncoding {
    /// From the `e` query parameter, else the `Encoding` header.
    pub fn from_request(req: &HttpRequest, query: &Query) -> ApiResult<KeyEncoding> {
        const ENCODING: header::HeaderName = header::HeaderName::from_static("encoding");
        let value = match query.first("e") {
            Some(v) => Some(v),
            None => req
                .headers()
                .get(ENCODING)
                .and_then(|v| v.to_str().ok())
                .map(str::trim),
        };
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            return Ok(KeyEncoding::Plain);
        };
        let is = |name: &str| value.eq_ignore_ascii_case(name);
        if is("b64") || is("base64") || is("b64url") || is("base64url") {
            Ok(KeyEncoding::Base64Url)
        } else if is("b64basic") {
            Ok(KeyEncoding::Base64Basic)
        } else {
            Err(ApiError::bad(format!(
                "unknown key encoding {:?}; use b64, base64, b64url, base64url or b64basic",
                value.to_ascii_lowercase()
            )))
        }
    }

    /// Decodes one URL piece that has already been URL-decoded.
    pub fn decode(self, piece: Vec<u8>, what: &str) -> ApiResult<Vec<u8>> {
        let engine = match self {
            KeyEncoding::Plain => return Ok(piece),
            KeyEncoding::Base64Url => &URL_LENIENT,
            KeyEncoding::Base64Basic => &STD_LENIENT,
        };
        engine.decode(&piece).map_err(|e| {
            ApiError::bad(format!(
                "{what} is not valid base64 for the requested encoding ({e})"
            ))
        })
    }
}

/// Java `URLDecoder.decode`: `+` becomes a space, `%XX` a byte; a malformed escape is a 400.
pub fn url_decode(s: &str) -> ApiResult<Vec<u8>> {
    let b = s.as_bytes();
    if !b.iter().any(|&c| c == b'%' || c == b'+') {
        return Ok(b.to_vec());
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => out.push(v),
                    None => {
                        return Err(ApiError::bad(format!("malformed %-escape in {s:.60}")));
                    }
                }
                i += 3;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// [`url_decode`] as text, invalid UTF-8 replaced (U+FFFD); borrowed when `s` has nothing to
/// decode.
pub fn url_decode_str(s: &str) -> ApiResult<Cow<'_, str>> {
    if !s.bytes().any(|c| c == b'%' || c == b'+') {
        return Ok(Cow::Borrowed(s));
    }
    Ok(Cow::Owned(lossy_string(url_decode(s)?)))
}

/// The bytes as a string, invalid UTF-8 replaced (U+FFFD), without a copy when they are valid.
fn lossy_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A parsed query string: decoded `(name, value)` pairs in order, repeats kept. A name or value
/// without an escape borrows the request's query string.
#[derive(Clone, Debug, Default)]
pub struct Query<'a>(pub Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl<'a> Query<'a> {
    /// Parses `a=1&b=2&a=3`. Undecodable escapes are a 400.
    pub fn parse(q: &'a str) -> ApiResult<Query<'a>> {
        let mut pairs = Vec::new();
        for part in q.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            pairs.push((url_decode_str(k)?, url_decode_str(v)?));
        }
        Ok(Query(pairs))
    }

    /// From the request's raw query string.
    pub fn of(req: &'a HttpRequest) -> ApiResult<Query<'a>> {
        Query::parse(req.query_string())
    }

    /// The first value of `name`.
    pub fn first(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| &**v)
    }

    /// Every value of `name`, in order.
    pub fn all<'b>(&'b self, name: &'b str) -> impl Iterator<Item = &'b str> + 'b {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| &**v)
    }

    /// True if `name` is present.
    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(k, _)| k == name)
    }

    /// A numeric parameter; a present but malformed value is a 400.
    pub fn number<T: std::str::FromStr>(&self, name: &str) -> ApiResult<Option<T>> {
        match self.first(name) {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                ApiError::bad(format!("parameter {name}={v:?} is not a valid number"))
            }),
        }
    }

    /// A boolean parameter (`true`/`false`, case-insensitive); malformed is a 400.
    pub fn boolean(&self, name: &str) -> ApiResult<Option<bool>> {
        match self.first(name) {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("true") || v.is_empty() => Ok(Some(true)),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(v) => Err(ApiError::bad(format!(
                "parameter {name}={v:?} must be true or false"
            ))),
        }
    }
}

/// Checks the shape of a quick-xml event stream as a parser reads it: one root element, closed
/// before the end of the body (invariant 4). quick-xml itself checks that end tags match, but
/// reports a body that simply stops as a normal end of file.
#[derive(Debug, Default)]
pub struct XmlShape {
    depth: usize,
    root_closed: bool,
}

impl XmlShape {
    /// Feed every event, in order, before acting on it.
    pub fn see(&mut self, ev: &quick_xml::events::Event<'_>) -> ApiResult<()> {
        use quick_xml::events::Event;
        let second_root = || ApiError::bad("the XML body holds more than one root element");
        let outside = || ApiError::bad("the XML body has text outside its root element");
        match ev {
            Event::Start(_) => {
                if self.root_closed {
                    return Err(second_root());
                }
                self.depth += 1;
            }
            Event::Empty(_) => {
                if self.root_closed {
                    return Err(second_root());
                }
                if self.depth == 0 {
                    self.root_closed = true;
                }
            }
            Event::End(_) => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.root_closed = true;
                }
            }
            Event::Text(t) if self.depth == 0 && !t.iter().all(u8::is_ascii_whitespace) => {
                return Err(outside());
            }
            Event::CData(_) if self.depth == 0 => return Err(outside()),
            Event::Eof if self.depth > 0 => {
                return Err(ApiError::bad(
                    "the XML body ends before its root element is closed (cut off?)",
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

/// Escapes text for an XML attribute or element.
pub fn xml_escape(s: &str) -> std::borrow::Cow<'_, str> {
    quick_xml::escape::escape(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_decode_follows_java_urldecoder() {
        assert_eq!(url_decode("a+b%2Cc").expect("valid"), b"a b,c");
        assert_eq!(
            url_decode("http%3A%2F%2Fexample.com%2Ffoo").expect("valid"),
            b"http://example.com/foo"
        );
        assert!(url_decode("bad%zz").is_err());
        assert!(url_decode("bad%2").is_err());
    }

    #[test]
    fn query_keeps_repeats_in_order() {
        let q = Query::parse("row=a&row=b%2Fc&v=3&flag").expect("valid");
        assert_eq!(q.all("row").collect::<Vec<_>>(), vec!["a", "b/c"]);
        assert_eq!(q.number::<u32>("v").expect("number"), Some(3));
        assert!(q.has("flag"));
        assert!(q.number::<u32>("row").is_err());
    }

    #[test]
    fn base64_skips_line_breaks_between_units_only() {
        let wrapped = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB\nQUFBQQ==\n";
        assert_eq!(b64_decode(wrapped, "value").expect("valid"), vec![b'A'; 61]);
        assert_eq!(b64_decode("cm93\r\nMQ==", "key").expect("valid"), b"row1");
        assert!(
            b64_decode("cm9\n3MQ==", "key").is_err(),
            "a break inside a unit"
        );
        assert!(b64_decode("cm93MQ=!", "key").is_err(), "not base64");
    }

    #[test]
    fn base64_with_a_space_inside_is_refused() {
        for s in ["cm93 MQ==", "cm 93MQ==", "cm93\tMQ==", "cm93\r\n MQ=="] {
            let err = b64_decode(s, "row key").expect_err(s);
            assert!(err.to_string().contains("space or tab"), "{err}");
        }
        assert_eq!(b64_decode(" cm93MQ== ", "key").expect("trimmed"), b"row1");
    }

    #[test]
    fn base64_accepts_missing_padding() {
        assert_eq!(b64_decode("cm93MQ==", "key").expect("valid"), b"row1");
        assert_eq!(b64_decode("cm93MQ", "key").expect("valid"), b"row1");
        assert!(b64_decode("!!", "key").is_err());
        assert_eq!(b64_encode(b"row1"), "cm93MQ==");
    }

    #[test]
    fn base64_encoding_into_a_string_matches_the_standard_engine_at_every_length() {
        let bytes: Vec<u8> = (0..700u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in 0..bytes.len() {
            let mut out = String::from("x");
            b64_encode_into(&bytes[..n], &mut out);
            assert_eq!(
                out[1..],
                base64::engine::general_purpose::STANDARD.encode(&bytes[..n]),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn a_space_is_named_before_a_line_break_that_splits_a_unit() {
        let err = b64_decode("cm9\n3M Q==", "row key").expect_err("space");
        assert!(err.to_string().contains("space or tab at byte 6"), "{err}");
    }

    async fn collect(chunks: &[&[u8]], max: usize) -> Result<web::Bytes, String> {
        let mut body = futures::stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<_, String>(web::Bytes::copy_from_slice(c)))
                .collect::<Vec<_>>(),
        );
        collect_body(&mut body, max, Duration::from_secs(5), 0)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge => "too large".to_string(),
                BodyError::Stalled(m) | BodyError::Read(m) => m,
            })
    }

    #[actix_web::test]
    async fn a_body_is_collected_whole_however_it_is_cut_into_chunks() {
        let cases: &[&[&[u8]]] = &[
            &[],
            &[b""],
            &[b"abc"],
            &[b"", b"abc"],
            &[b"ab", b"c"],
            &[b"a", b"", b"b", b"c"],
            &[b"", b"", b"abc", b""],
        ];
        for chunks in cases {
            let want: Vec<u8> = chunks.concat();
            assert_eq!(
                collect(chunks, 3).await.as_deref(),
                Ok(&want[..]),
                "{chunks:?}"
            );
        }
        // Chunks that are not there yet when asked for are waited for.
        let mut late = Box::pin(
            futures::stream::iter([&b"ab"[..], b"c"]).then(|c| async move {
                actix_web::rt::task::yield_now().await;
                Ok::<_, String>(web::Bytes::from_static(c))
            }),
        );
        let got = collect_body(&mut late, 3, Duration::from_secs(5), 0).await;
        assert!(matches!(got.as_deref(), Ok(b"abc")));
        for chunks in [&[&b"abcd"[..]][..], &[b"ab", b"cd"], &[b"abc", b"", b"d"]] {
            assert_eq!(
                collect(chunks, 3).await,
                Err("too large".to_string()),
                "{chunks:?}"
            );
        }
    }
}
