//! An ONNX model file loaded and run on inputs of its declared shapes (see `drive/onnx.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::onnx::run(bytes);
});
