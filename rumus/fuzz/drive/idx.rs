//! `idx_reader`: IDX bytes, plain or gzipped, give an array whose dims match its data, or an
//! error; a three-dim array then makes an image set whose items all read.

use std::path::Path;

use rumus::data::{Dataset, ImageSet, decode_idx};

pub fn run(bytes: &[u8]) -> rumus::Result<()> {
    let array = decode_idx(bytes, Path::new("fuzz.idx"))?;
    let count = array.dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    assert_eq!(count, Some(array.data.len()), "dims {:?}", array.dims);
    // Only arrays of a size a real file could hold: zero-pixel images make any `n` valid,
    // and the labels built here would be `n` bytes.
    if let [n @ 0..=65536, height, width] = array.dims[..] {
        let set = ImageSet {
            images: array.data.iter().map(|&p| p as f32).collect(),
            labels: vec![0; n],
            channels: 1,
            height,
            width,
        };
        for i in 0..set.len().min(4) {
            if let Err(e) = set.get(i) {
                panic!("item {i} of {n} images of {height} x {width}: {e}");
            }
        }
        assert!(set.get(n).is_err());
    }
    Ok(())
}
