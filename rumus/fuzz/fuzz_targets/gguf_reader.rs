//! A GGUF model file opened from bytes and every tensor decoded (see `drive/gguf.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::gguf::run(bytes);
});
