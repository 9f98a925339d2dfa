//! Scanner request bodies (JSON and XML, with their embedded filter strings) on arbitrary bytes.
#![no_main]

use kura::rest::media::Repr;
use kura::rest::scanners::ScannerModel;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ScannerModel::parse(Repr::Json, data);
    let _ = ScannerModel::parse(Repr::Xml, data);
});
