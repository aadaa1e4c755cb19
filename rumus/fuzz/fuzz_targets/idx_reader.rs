//! IDX files, plain or gzipped, and the image set made of them (see `drive/idx.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::idx::run(bytes);
});
