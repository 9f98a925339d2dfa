//! Recovery over an arbitrary `MANIFEST` file: never a panic, never a value that was not written.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kura_fuzz::reopen_with("MANIFEST", data);
});
