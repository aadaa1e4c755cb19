//! Model weights (safetensors) read from disk and loaded into a small model (see `drive/weights.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::weights::run(bytes);
});
