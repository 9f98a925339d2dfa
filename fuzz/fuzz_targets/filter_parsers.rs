//! Both filter syntaxes (the scanner's FilterModel JSON and the Thrift filter language) on
//! arbitrary strings; a parsed filter is also evaluated on a small row.
#![no_main]

use kura::rest::filters::{parse_filter_json, parse_filter_language};
use kura_storage::model::{Cell, RowFilter};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    for parsed in [parse_filter_json(s), parse_filter_language(s)] {
        if let Ok(filter) = parsed {
            let mut cells = vec![Cell {
                family: b"f".to_vec(),
                qualifier: b"q".to_vec(),
                timestamp: 1,
                value: b"v".to_vec(),
            }];
            let _ = filter.accept_key(b"row");
            let _ = filter.accept_row(b"row", &mut cells);
        }
    }
});
