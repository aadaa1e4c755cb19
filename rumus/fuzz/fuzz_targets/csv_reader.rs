//! Numeric CSV under every kind of options (see `drive/csv.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::csv::run(bytes);
});
