//! Opaque paging cursors: the URL-safe base64 (no padding) of the last row key a page returned.
//!
//! The next page is the scan resumed strictly after that key, so an item that exists for the
//! whole walk is never skipped nor repeated, whatever is inserted or deleted meanwhile.
//!
//! # Invariants
//! 1. A cursor is accepted only if it decodes and the key lies inside the list being paged (it
//!    starts with the list's key prefix and is longer than it); anything else is a 400.
//! 2. A cursor never lets a scan leave its list's key prefix, so it cannot read other users' rows.

use super::error::{AppError, AppResult};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// The cursor for "after this row key".
pub fn encode(key: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(key)
}

/// Decodes `after` and checks that it lies inside the list with key prefix `prefix`.
pub fn decode(after: &str, prefix: &[u8]) -> AppResult<Vec<u8>> {
    let bad = || AppError::bad("malformed cursor: pass back the 'next' value of a previous page");
    let key = URL_SAFE_NO_PAD
        .decode(after.as_bytes())
        .map_err(|_| bad())?;
    if key.len() <= prefix.len() || !key.starts_with(prefix) {
        return Err(bad());
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_inside_its_prefix() {
        let key = [1u8, 2, 3, 0xFF, 0];
        let c = encode(&key);
        assert_eq!(decode(&c, &[1, 2]).ok(), Some(key.to_vec()));
    }

    #[test]
    fn cursor_outside_the_list_is_rejected() {
        let c = encode(&[9, 9, 9]);
        assert!(decode(&c, &[1, 2]).is_err());
        assert!(decode("!!not base64!!", &[1]).is_err());
        assert!(decode(&encode(&[1, 2]), &[1, 2]).is_err());
    }
}
