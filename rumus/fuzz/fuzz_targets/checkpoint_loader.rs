//! Checkpoints and model files (safetensors): any bytes load or give an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rumus::io::Checkpoint;

fuzz_target!(|bytes: &[u8]| {
    let _ = Checkpoint::from_bytes(bytes, "fuzz.safetensors");
});
