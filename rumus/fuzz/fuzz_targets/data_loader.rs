//! A multi-threaded data loader over fuzzed records (see `drive/loader.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::loader::run(bytes);
});
