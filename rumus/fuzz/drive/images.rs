//! `image_set`: an MNIST image file and label file, written to a scratch folder and read
//! with `read_image_set`, or as the four files of an MNIST folder with `read_mnist_dir`
//! (under one of its naming schemes). Either part can be gzipped here first, so the fuzzer
//! explores the IDX layout inside valid gzip streams too; parts that are gzip already
//! (bombs included) go to the reader as they are. A set that loads has `N * H * W` pixels and
//! every item reads.
//!
//! Input: a flags byte (see the constants), the label part's length (u16 little-endian,
//! cut to what follows), the label part, then the image part.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use rumus::data::{Dataset, ImageSet, read_image_set, read_mnist_dir};

use super::framing;
use super::scratch::Scratch;

pub const GZIP_IMAGES: u8 = 1;
pub const GZIP_LABELS: u8 = 2;
/// Read an MNIST folder holding the parts as both the training and the test set.
pub const MNIST_DIR: u8 = 4;
/// Bits 3-4 pick the folder's file names (`read_mnist_dir`'s three schemes).
const NAMES: [[&str; 4]; 3] = [
    [
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ],
    [
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ],
    [
        "train-images.idx3-ubyte",
        "train-labels.idx1-ubyte",
        "t10k-images.idx3-ubyte",
        "t10k-labels.idx1-ubyte",
    ],
];

/// The input for `labels` and `images` under `flags` (for seeds).
pub fn frame(flags: u8, labels: &[u8], images: &[u8]) -> Vec<u8> {
    let len = u16::try_from(labels.len()).expect("a seed label part under 64 KiB");
    let mut out = vec![flags];
    out.extend(len.to_le_bytes());
    out.extend(labels);
    out.extend(images);
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

pub fn run(bytes: &[u8]) -> rumus::Result<()> {
    let (&flags, rest) = bytes
        .split_first()
        .ok_or_else(|| framing("no flags byte"))?;
    let (len, rest) = rest
        .split_first_chunk::<2>()
        .ok_or_else(|| framing("no label part length"))?;
    let len = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    let (labels, images) = rest.split_at(len);
    let part = |flag: u8, bytes: &[u8]| {
        if flags & flag != 0 {
            gzip(bytes)
        } else {
            bytes.to_vec()
        }
    };
    let (labels, images) = (part(GZIP_LABELS, labels), part(GZIP_IMAGES, images));
    let scratch = Scratch::new()?;
    if flags & MNIST_DIR != 0 {
        let names = NAMES[usize::from(flags >> 3 & 3) % NAMES.len()];
        for (name, bytes) in names.iter().zip([&images, &labels, &images, &labels]) {
            scratch.write(name, bytes)?;
        }
        let (train, test) = read_mnist_dir(scratch.dir())?;
        check(&train);
        check(&test);
    } else {
        let images = scratch.write("images.idx", &images)?;
        let labels = scratch.write("labels.idx", &labels)?;
        check(&read_image_set(images, labels)?);
    }
    Ok(())
}

fn check(set: &ImageSet) {
    assert_eq!(set.channels, 1);
    assert_eq!(set.images.len(), set.len() * set.height * set.width);
    assert!(set.labels.iter().all(|l| (0..256).contains(l)));
    for i in 0..set.len().min(4) {
        let sample = set
            .get(i)
            .unwrap_or_else(|e| panic!("item {i} of a loaded set: {e}"));
        assert_eq!(sample.input.dims, [1, set.height, set.width]);
    }
    assert!(set.get(set.len()).is_err());
}
