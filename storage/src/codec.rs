//! The only place bincode is configured, and the format version of every file.
//!
//! Configuration: `bincode::config::standard()` = little-endian, **variable-length integer
//! encoding** (varint), with a decode limit of [`MAX_FRAME`] bytes so that a damaged length
//! prefix inside a payload can never make the decoder allocate more than one frame's worth.
//! Records use bincode's own `Encode`/`Decode` derives (byte vectors are then written as one
//! length-prefixed run of bytes, not element by element as serde would).
//!
//! # Invariants
//! 1. Any change to the bytes an encoding produces bumps [`FORMAT_VERSION`] (or, for a change
//!    to the log record only, [`LOG_FORMAT_VERSION`]).
//! 2. [`decode`] consumes the whole input; trailing bytes are an error.

use crate::error::{Error, Result};
use bincode::config::{Configuration, Limit, LittleEndian, Varint};

/// Version of the segment format, written into every segment's header and footer (the log and
/// the manifest carry their own: [`LOG_FORMAT_VERSION`] and the manifest's `MANIFEST_VERSION`).
/// Version 2 brought the blocked row filter (`row_filter::BlockedBloom`); version-1 segments,
/// whose filter is the legacy Bloom filter, are still read.
pub const FORMAT_VERSION: u8 = 2;

/// Version of the log format, written into each log's header. Version 2 added the optional
/// idempotency field at the end of a log record; version 4 the log length known fsynced when
/// the record was written (`durable`, which tells a torn unsynced tail from damage to synced
/// frames). There is no version 3: the header byte has no checksum, and one flipped bit must
/// not turn a known version into another (3 is one bit from 1 and from 2; 4 is two bits from
/// each). Logs of versions 1 and 2 are still read (and never appended to: recovery starts a
/// new log).
pub const LOG_FORMAT_VERSION: u8 = 4;

/// Largest payload a log frame or the manifest may hold (64 MiB): checked before allocating.
pub const MAX_FRAME: usize = 64 << 20;

type Config = Configuration<LittleEndian, Varint, Limit<MAX_FRAME>>;

fn config() -> Config {
    bincode::config::standard().with_limit::<MAX_FRAME>()
}

/// Append the encoding of `value` to `out`.
pub fn encode_into<T: bincode::Encode>(value: &T, out: &mut Vec<u8>) -> Result<()> {
    bincode::encode_into_std_write(value, out, config())
        .map(|_| ())
        .map_err(|e| Error::Codec(e.to_string()))
}

/// Decode a value that must fill `bytes` exactly.
pub fn decode<T: bincode::Decode<()>>(bytes: &[u8]) -> Result<T> {
    let (value, used) =
        bincode::decode_from_slice(bytes, config()).map_err(|e| Error::Codec(e.to_string()))?;
    if used != bytes.len() {
        return Err(Error::Codec(format!(
            "{} trailing bytes after record",
            bytes.len() - used
        )));
    }
    Ok(value)
}

/// Decode a value that must fill `bytes` exactly, borrowing its byte fields from `bytes`.
pub fn decode_borrowed<'a, T: bincode::BorrowDecode<'a, ()>>(bytes: &'a [u8]) -> Result<T> {
    let (value, used) = bincode::borrow_decode_from_slice(bytes, config())
        .map_err(|e| Error::Codec(e.to_string()))?;
    if used != bytes.len() {
        return Err(Error::Codec(format!(
            "{} trailing bytes after record",
            bytes.len() - used
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(bincode::Encode, bincode::Decode, Debug, PartialEq)]
    struct R {
        a: u64,
        b: Vec<u8>,
    }

    #[test]
    fn roundtrip_and_trailing_bytes_rejected() {
        let mut out = Vec::new();
        encode_into(
            &R {
                a: 300,
                b: vec![1, 2, 3],
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(
            decode::<R>(&out).unwrap(),
            R {
                a: 300,
                b: vec![1, 2, 3]
            }
        );
        out.push(0);
        assert!(decode::<R>(&out).is_err());
    }

    #[test]
    fn huge_length_prefix_is_an_error_not_an_allocation() {
        // a = 0, then a varint length of u64::MAX for b.
        let bytes = [0u8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
        assert!(decode::<R>(&bytes).is_err());
    }
}
