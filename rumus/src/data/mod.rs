//! Data pipelines: datasets with fallible reads, transforms, a multi-threaded loader whose
//! order depends only on its seed, and readers for IDX, CSV and record files.

pub mod csv;
pub mod dataset;
pub mod idx;
pub mod loader;
pub mod record;
pub mod sample;
pub mod sample_codec;
pub mod transform;

pub use csv::{CsvOptions, parse_csv, read_csv};
pub use dataset::{Dataset, InMemory, Map, MapRandom};
pub use idx::{IdxArray, ImageSet, decode_idx, read_idx, read_image_set, read_mnist_dir};
pub use loader::DataLoader;
pub use record::{RecordDataset, RecordFile, RecordWriter};
pub use sample::{Batch, Collate, Features, Sample, Target};
