//! The rowspec parser (`/{table}/{row}[,{end}]/{cols}/{ts}`) on arbitrary paths, in every key
//! encoding: an error or a rowspec, never a panic.
#![no_main]

use kura::rest::media::KeyEncoding;
use kura::rest::rowspec::RowSpec;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for enc in [KeyEncoding::Plain, KeyEncoding::Base64Url, KeyEncoding::Base64Basic] {
            if let Ok(spec) = RowSpec::parse(s, enc) {
                let _ = spec.time_range();
                let _ = spec.column_specs();
            }
        }
    }
});
