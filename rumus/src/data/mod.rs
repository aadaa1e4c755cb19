//! Data sets on disk.

pub mod idx;

pub use idx::{IdxArray, ImageSet, read_idx, read_image_set, read_mnist_dir};
