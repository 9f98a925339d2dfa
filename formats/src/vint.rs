//! Hadoop's variable-length integers (`WritableUtils.writeVLong`/`readVLong`; a VInt is the same
//! encoding of a value that fits in an `i32`), `shared/HBASE_FORMATS.md` §1. Not protobuf's
//! varint.
//!
//! # Invariants
//! 1. `-112..=127` is one byte, the value itself; anything else is a length byte (`-113..=-120`
//!    for non-negative values, `-121..=-128` for negative ones, which are stored one's
//!    complemented) and then 1 to 8 big-endian bytes, as few as the value needs.
//! 2. Decoding accepts exactly what Hadoop's reader accepts, including non-minimal encodings.

/// Appends the VLong encoding of `v` to `out`.
pub fn write_vlong(out: &mut Vec<u8>, v: i64) {
    if (-112..=127).contains(&v) {
        out.push(v as i8 as u8);
        return;
    }
    let (mut base, mut v) = (-112i32, v);
    if v < 0 {
        v = !v;
        base = -120;
    }
    // v >= 0 here; significant bytes of its big-endian form.
    let n = 8 - (v.leading_zeros() / 8) as usize;
    out.push((base - n as i32) as i8 as u8);
    out.extend_from_slice(&v.to_be_bytes()[8 - n..]);
}

/// Appends the VInt encoding of `v` to `out` (the same bytes as [`write_vlong`]).
pub fn write_vint(out: &mut Vec<u8>, v: i32) {
    write_vlong(out, i64::from(v));
}

/// The encoded size of `v` in bytes (1 to 9).
pub fn vlong_size(v: i64) -> usize {
    if (-112..=127).contains(&v) {
        return 1;
    }
    let v = if v < 0 { !v } else { v };
    1 + 8 - (v.leading_zeros() / 8) as usize
}

/// How many bytes follow the first byte `b0` of an encoding (0 to 8).
pub fn extra_bytes(b0: u8) -> usize {
    let b0 = b0 as i8;
    if b0 >= -112 {
        0
    } else if b0 < -120 {
        (-120 - i32::from(b0)) as usize
    } else {
        (-112 - i32::from(b0)) as usize
    }
}

/// Decodes a VLong whose first byte is `b0` and whose following [`extra_bytes`]`(b0)` bytes
/// are `rest`.
pub fn decode_parts(b0: u8, rest: &[u8]) -> i64 {
    let s = b0 as i8;
    if s >= -112 {
        return i64::from(s);
    }
    let mut v: i64 = 0;
    for &b in rest {
        v = (v << 8) | i64::from(b);
    }
    if s < -120 {
        !v
    } else {
        v
    }
}

/// Decodes one VLong from the front of `buf`: the value and the bytes it took, or `None` when
/// `buf` ends before the encoding does.
pub fn read_vlong(buf: &[u8]) -> Option<(i64, usize)> {
    let (&b0, rest) = buf.split_first()?;
    let n = extra_bytes(b0);
    let rest = rest.get(..n)?;
    Some((decode_parts(b0, rest), 1 + n))
}

/// Decodes one VInt from the front of `buf`; `Err` names why it is not one (the buffer ends, or
/// the value does not fit in an `i32`, which Hadoop's `readVInt` refuses too).
pub fn read_vint(buf: &[u8]) -> Result<(i32, usize), &'static str> {
    let (v, n) = read_vlong(buf).ok_or("the buffer ends inside a VInt")?;
    let v = i32::try_from(v).map_err(|_| "a VInt value does not fit in 32 bits")?;
    Ok((v, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(v: i64) -> Vec<u8> {
        let mut out = Vec::new();
        write_vlong(&mut out, v);
        out
    }

    #[test]
    fn the_spec_examples_encode_to_their_bytes() {
        assert_eq!(enc(128), [0x8f, 0x80]);
        assert_eq!(enc(300), [0x8e, 0x01, 0x2c]);
        assert_eq!(enc(-113), [0x87, 0x70]);
        assert_eq!(enc(-1000), [0x86, 0x03, 0xe7]);
        assert_eq!(enc(5), [0x05]);
        assert_eq!(enc(-112), [0x90]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(0), [0x00]);
    }

    #[test]
    fn the_spec_examples_decode_to_their_values() {
        for (bytes, v) in [
            (&[0x8f, 0x80][..], 128),
            (&[0x8e, 0x01, 0x2c][..], 300),
            (&[0x87, 0x70][..], -113),
            (&[0x86, 0x03, 0xe7][..], -1000),
            (&[0x05][..], 5),
        ] {
            assert_eq!(read_vlong(bytes), Some((v, bytes.len())));
        }
    }

    #[test]
    fn extremes_take_nine_bytes_and_round_trip() {
        assert_eq!(enc(i64::MAX)[0], 0x88);
        assert_eq!(enc(i64::MAX).len(), 9);
        assert_eq!(enc(i64::MIN)[0], 0x80);
        assert_eq!(read_vlong(&enc(i64::MIN)), Some((i64::MIN, 9)));
    }

    #[test]
    fn a_cut_encoding_is_none_not_a_panic() {
        assert_eq!(read_vlong(&[]), None);
        assert_eq!(read_vlong(&[0x8e, 0x01]), None);
        assert!(read_vint(&enc(1 << 40)).is_err());
    }

    proptest! {
        #[test]
        fn every_i64_round_trips_with_its_predicted_size(v in any::<i64>()) {
            let bytes = enc(v);
            prop_assert_eq!(bytes.len(), vlong_size(v));
            prop_assert_eq!(read_vlong(&bytes), Some((v, bytes.len())));
        }
    }
}
