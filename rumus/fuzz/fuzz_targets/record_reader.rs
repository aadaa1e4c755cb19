//! Record files read from memory, and samples decoded from any bytes (see `drive/records.rs`).
#![no_main]

#[path = "../drive/mod.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = drive::records::from_bytes(bytes);
});
