//! Data pipelines: datasets with fallible reads, transforms, a multi-threaded loader whose
//! order depends only on its seed, random splits, and readers for IDX (MNIST), CIFAR-10, CSV
//! and record files, and (with the `images` feature) folders of PNG and JPEG images.
//!
//! ```no_run
//! use rumus::data::transform::{normalize, random_crop, random_horizontal_flip};
//! use rumus::data::{DataLoader, Dataset, read_mnist_dir};
//! use rumus::{D, Dyn};
//!
//! # fn main() -> rumus::Result<()> {
//! let (train, _test) = read_mnist_dir("/usr/share/datasets/fashion-mnist")?; // items [1, 28, 28]
//! let augmented = train
//!     .map(normalize(&[0.2860], &[0.3530])?)
//!     .map_random(random_crop(28, 28, 2))
//!     .map_random(random_horizontal_flip(0.5));
//! let mut loader = DataLoader::new(augmented, 64)?
//!     .shuffle(42)
//!     .workers(2)
//!     .drop_last(true);
//! for batch in loader.epoch() {
//!     let batch = batch?; // a bad file is an Err, in order
//!     let x = batch.input::<(Dyn, D<1>, D<28>, D<28>)>()?; // the typed boundary, checked once
//!     assert_eq!(x.dims()[0], 64);
//! }
//! # Ok(())
//! # }
//! ```

pub mod cifar;
pub mod csv;
pub mod dataset;
pub mod graphs;
pub mod idx;
#[cfg(feature = "images")]
pub mod image_folder;
pub mod loader;
pub mod record;
pub mod record_source;
pub mod sample;
pub mod sample_codec;
pub mod shard_order;
pub mod split;
pub mod transform;

pub use cifar::{Cifar10, read_cifar10_batch, read_cifar10_dir};
pub use csv::{CsvOptions, parse_csv, read_csv};
pub use dataset::{Dataset, InMemory, Map, MapRandom};
pub use graphs::{GraphDataset, GraphDatasetBatch, LabelledGraph, NodeDataset};
pub use idx::{
    IdxArray, IdxReader, ImageSet, decode_idx, read_idx, read_image_set, read_mnist_dir,
};
#[cfg(feature = "images")]
pub use image_folder::{ColorMode, ImageFolder, ResizeFilter};
pub use loader::DataLoader;
pub use record::{DecodedRecords, RecordDataset, RecordFile, RecordWriter};
pub use record_source::{FileSource, RecordSource};
pub use sample::{Batch, Collate, Features, Sample, Target};
pub use split::{SplitSizes, Subset, random_split, split_lengths};

/// A file that could not be opened or read, as the readers of this module report it.
pub(crate) fn file_io_error(path: &std::path::Path, e: impl std::fmt::Display) -> crate::Error {
    crate::Error::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// A file whose contents are not what its format says, as the readers of this module report it.
pub(crate) fn file_format_error(path: &std::path::Path, message: String) -> crate::Error {
    crate::Error::Format {
        path: path.display().to_string(),
        message,
    }
}
