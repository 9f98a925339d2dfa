//! The Hadoop/HBase `Writable`s found in Export and HashTable files (`shared/HBASE_FORMATS.md`
//! §1) and the exact class-name strings SequenceFile headers carry.
//!
//! # Invariants
//! 1. Class names are byte-exact Java class names: readers of these files (Hadoop, HBase,
//!    Bigtable import) instantiate classes by these strings.
//! 2. Decoders take the whole serialized value and refuse trailing or missing bytes.

/// `org.apache.hadoop.hbase.io.ImmutableBytesWritable`: `int32 len` + bytes.
pub const IMMUTABLE_BYTES_WRITABLE: &str = "org.apache.hadoop.hbase.io.ImmutableBytesWritable";
/// `org.apache.hadoop.io.NullWritable`: no bytes.
pub const NULL_WRITABLE: &str = "org.apache.hadoop.io.NullWritable";
/// `org.apache.hadoop.io.LongWritable`: `int64` big-endian.
pub const LONG_WRITABLE: &str = "org.apache.hadoop.io.LongWritable";
/// `org.apache.hadoop.hbase.client.Result`: written by HBase's `ResultSerialization` (§4).
pub const RESULT: &str = "org.apache.hadoop.hbase.client.Result";
/// `org.apache.hadoop.io.compress.DefaultCodec`: one zlib stream per compressed unit.
pub const DEFAULT_CODEC: &str = "org.apache.hadoop.io.compress.DefaultCodec";
/// `org.apache.hadoop.io.compress.DeflateCodec`: a `DefaultCodec` subclass, the same bytes.
pub const DEFLATE_CODEC: &str = "org.apache.hadoop.io.compress.DeflateCodec";

/// Serializes `bytes` as an `ImmutableBytesWritable`.
///
/// # Panics
/// Never for real keys: a slice longer than `i32::MAX` bytes cannot be written in this format,
/// and [`try_ibw`] reports that case as an error instead.
pub fn ibw(bytes: &[u8]) -> Vec<u8> {
    try_ibw(bytes).expect("an ImmutableBytesWritable of at most 2 GiB")
}

/// Serializes `bytes` as an `ImmutableBytesWritable`, or `None` if it is 2 GiB or longer.
pub fn try_ibw(bytes: &[u8]) -> Option<Vec<u8>> {
    let len = i32::try_from(bytes.len()).ok()?;
    let mut out = Vec::with_capacity(4 + bytes.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
    Some(out)
}

/// The bytes inside a serialized `ImmutableBytesWritable`, or why `raw` is not one.
pub fn ibw_bytes(raw: &[u8]) -> Result<&[u8], String> {
    let (len, rest) = raw.split_first_chunk::<4>().ok_or_else(|| {
        format!(
            "an ImmutableBytesWritable needs 4 length bytes, got {}",
            raw.len()
        )
    })?;
    let len = i32::from_be_bytes(*len);
    if len < 0 || len as usize != rest.len() {
        return Err(format!(
            "an ImmutableBytesWritable says {len} bytes but holds {}",
            rest.len()
        ));
    }
    Ok(rest)
}

/// Serializes `v` as a `LongWritable`.
pub fn long_writable(v: i64) -> [u8; 8] {
    v.to_be_bytes()
}

/// The value of a serialized `LongWritable`, or why `raw` is not one.
pub fn long_writable_value(raw: &[u8]) -> Result<i64, String> {
    let bytes: [u8; 8] = raw
        .try_into()
        .map_err(|_| format!("a LongWritable is 8 bytes, got {}", raw.len()))?;
    Ok(i64::from_be_bytes(bytes))
}

/// A serialized `NullWritable` (no bytes).
pub const NULL: &[u8] = &[];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ibw_is_a_big_endian_length_and_the_bytes() {
        assert_eq!(ibw(b"1"), [0, 0, 0, 1, b'1']);
        assert_eq!(ibw(b""), [0, 0, 0, 0]);
        assert_eq!(ibw_bytes(&[0, 0, 0, 1, b'1']), Ok(&b"1"[..]));
        assert_eq!(ibw_bytes(&[0, 0, 0, 0]), Ok(&b""[..]));
    }

    #[test]
    fn an_ibw_with_a_wrong_length_is_refused() {
        assert!(ibw_bytes(&[0, 0, 0, 2, b'1']).is_err());
        assert!(ibw_bytes(&[0, 0, 0]).is_err());
        assert!(ibw_bytes(&[0xff, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn a_long_writable_is_eight_big_endian_bytes() {
        assert_eq!(long_writable(126), [0, 0, 0, 0, 0, 0, 0, 0x7e]);
        assert_eq!(long_writable_value(&long_writable(-5)), Ok(-5));
        assert!(long_writable_value(&[1, 2]).is_err());
    }
}
