//! Record files opened from disk (memory-mapped), checksums recomputed (see `drive/records.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::records::open(bytes);
});
