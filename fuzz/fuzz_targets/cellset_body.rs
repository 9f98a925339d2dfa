//! CellSet request bodies (JSON and XML) on arbitrary bytes: an error or rows, never a panic.
#![no_main]

use kura::rest::cellset::parse_cellset;
use kura::rest::media::Repr;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = parse_cellset(Repr::Json, data);
    let _ = parse_cellset(Repr::Xml, data);
});
