//! Checkpoints from any bytes, restored into a model and optimizer (see `drive/checkpoint.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::checkpoint::load(bytes);
});
