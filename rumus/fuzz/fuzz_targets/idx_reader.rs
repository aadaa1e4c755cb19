//! IDX files, plain or gzipped: any bytes give an array whose dims match its data, or an
//! error; then the MNIST pairing and the dataset view of them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rumus::data::{Dataset, decode_idx};
use std::path::Path;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(array) = decode_idx(bytes, Path::new("fuzz.idx")) {
        let count = array.dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        assert_eq!(count, Some(array.data.len()));
        // Only arrays of a size a real file could hold: zero-pixel images make any `n`
        // valid, and the labels built here would be `n` bytes.
        if let [n @ 0..=65536, height, width] = array.dims[..] {
            let set = rumus::data::ImageSet {
                images: array.data.iter().map(|&p| p as f32).collect(),
                labels: vec![0; n],
                height,
                width,
            };
            for i in 0..set.len().min(4) {
                assert!(set.get(i).is_ok());
            }
            assert!(set.get(n).is_err());
        }
    }
});
