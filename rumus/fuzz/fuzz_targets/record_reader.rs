//! Record files: opening any bytes and reading every record either errors or returns a
//! payload inside the file; decoding a payload as a sample never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rumus::data::{RecordFile, Sample};

fuzz_target!(|bytes: &[u8]| {
    if let Ok(file) = RecordFile::from_bytes(bytes.to_vec(), "fuzz.rrec") {
        for i in 0..file.len().min(64) {
            if let Ok(payload) = file.get(i) {
                assert!(payload.len() <= bytes.len());
                let _ = Sample::from_bytes(payload);
            }
        }
        assert!(file.get(file.len()).is_err());
    }
    let _ = Sample::from_bytes(bytes);
});
