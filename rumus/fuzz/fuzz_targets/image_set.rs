//! MNIST image and label files, and MNIST folders, gzipped or not (see `drive/images.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::images::run(bytes);
});
