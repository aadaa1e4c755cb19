//! Checkpoints whose checksum is recomputed, so mutations reach the parsing behind it (see `drive/checkpoint.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::checkpoint::structured(bytes);
});
