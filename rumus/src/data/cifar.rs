//! CIFAR-10's binary version (`cifar-10-binary.tar.gz` from
//! <https://www.cs.toronto.edu/~kriz/cifar.html>): files of 3073-byte records, one label byte
//! (0 to 9) then 3072 pixel bytes, the 1024 red values of a 32x32 image row by row, then the
//! green, then the blue. That is already channel-first, so an [`ImageSet`] of `[N, 3, 32, 32]`
//! is the records' pixels in file order, each divided by 255.
//!
//! As with the IDX reader, the file length is checked before anything is read (a length that
//! is not a whole number of records is an error giving it) and the images are read into
//! memory reserved fallibly once, for the records the lengths promise.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::idx::ImageSet;
use super::{file_format_error as format_error, file_io_error as io_error};
use crate::error::{Error, Result};

/// Side of a CIFAR image, in pixels.
const SIDE: usize = 32;
/// Pixel bytes of one record: 3 channels of 32x32.
const PIXELS: usize = 3 * SIDE * SIDE;
/// Bytes of one record: the label, then the pixels.
const RECORD: usize = 1 + PIXELS;
/// Number of classes; a label byte past `CLASSES - 1` is an error.
const CLASSES: u8 = 10;
/// The training files of the standard folder, in order, then the test file.
const TRAIN_FILES: [&str; 5] = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
];
const TEST_FILE: &str = "test_batch.bin";
const META_FILE: &str = "batches.meta.txt";
/// The folder the archive extracts to.
const FOLDER: &str = "cifar-10-batches-bin";
/// Longest class-name file read: ten names fit many times over, and a stray large file is
/// rejected without being read whole.
const MAX_META_BYTES: u64 = 4096;

const WHERE_TO_GET_IT: &str = "download the CIFAR-10 binary version (cifar-10-binary.tar.gz) \
     from https://www.cs.toronto.edu/~kriz/cifar.html and extract it";

/// The standard CIFAR-10 folder: 50,000 training images (the five `data_batch_*.bin` files
/// in order), 10,000 test images, and the class names.
#[derive(Debug, Clone)]
pub struct Cifar10 {
    /// The five training batches, `[50000, 3, 32, 32]` for the real data set.
    pub train: ImageSet,
    /// `test_batch.bin`, `[10000, 3, 32, 32]` for the real data set.
    pub test: ImageSet,
    /// Class names by label (`airplane`, `automobile`, ...), from `batches.meta.txt`.
    pub classes: Vec<String>,
}

/// The number of records in `path`, from its length.
fn record_count(path: &Path) -> Result<usize> {
    let length = std::fs::metadata(path)
        .map_err(|e| Error::Io {
            path: path.display().to_string(),
            message: format!("{e}; {WHERE_TO_GET_IT}"),
        })?
        .len();
    if length == 0 || length % RECORD as u64 != 0 {
        let hint = if length % (RECORD as u64 + 1) == 0 && length > 0 {
            " (its length fits CIFAR-100's 3074-byte records, which have two label bytes; \
             this reader is for CIFAR-10)"
        } else {
            ""
        };
        return Err(format_error(
            path,
            format!(
                "is {length} bytes, not a whole, non-zero number of CIFAR-10 records of \
                 {RECORD} bytes (1 label byte + {PIXELS} pixel bytes){hint}; the file is \
                 truncated or not a CIFAR-10 batch"
            ),
        ));
    }
    usize::try_from(length / RECORD as u64)
        .map_err(|_| format_error(path, format!("{length} bytes is too large to address")))
}

/// Appends the `count` records of `path` to `images` and `labels`.
fn read_records(
    path: &Path,
    count: usize,
    images: &mut Vec<f32>,
    labels: &mut Vec<i64>,
) -> Result<()> {
    let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let mut reader = BufReader::new(file);
    let mut record = [0u8; RECORD];
    for r in 0..count {
        reader.read_exact(&mut record).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                format_error(
                    path,
                    format!("ended at record {r} of the {count} its length promised (it shrank while read)"),
                )
            } else {
                io_error(path, e)
            }
        })?;
        let label = record[0];
        if label >= CLASSES {
            return Err(format_error(
                path,
                format!(
                    "record {r} (byte offset {}) has label {label}; CIFAR-10 labels are 0 to {}: \
                     the file is corrupt or not a CIFAR-10 batch",
                    r * RECORD,
                    CLASSES - 1
                ),
            ));
        }
        labels.push(i64::from(label));
        images.extend(record[1..].iter().map(|&p| f32::from(p) / 255.0));
    }
    let mut extra = [0u8; 1];
    if reader.read(&mut extra).map_err(|e| io_error(path, e))? > 0 {
        return Err(format_error(
            path,
            format!("holds more than the {count} records its length gave (it grew while read)"),
        ));
    }
    Ok(())
}

/// Reads the batch files `paths` into one image set, in order.
fn read_batches(paths: &[PathBuf]) -> Result<ImageSet> {
    let op = "read_cifar10";
    let counts = paths
        .iter()
        .map(|p| record_count(p))
        .collect::<Result<Vec<usize>>>()?;
    let total = counts.iter().sum::<usize>();
    let what = || match paths {
        [one] => one.display().to_string(),
        _ => format!("{} CIFAR-10 batch files", paths.len()),
    };
    let pixels = total
        .checked_mul(PIXELS)
        .ok_or_else(|| Error::OutOfMemory {
            op: op.into(),
            message: format!("{}: {total} images do not fit an address space", what()),
        })?;
    let mut images =
        crate::alloc::try_with_capacity(op, &format!("{}: {total} images as f32", what()), pixels)?;
    let mut labels =
        crate::alloc::try_with_capacity(op, &format!("{}: {total} labels", what()), total)?;
    for (path, &count) in paths.iter().zip(&counts) {
        read_records(path, count, &mut images, &mut labels)?;
    }
    Ok(ImageSet {
        images,
        labels,
        channels: 3,
        height: SIDE,
        width: SIDE,
    })
}

/// Reads one CIFAR-10 batch file (`data_batch_1.bin`, `test_batch.bin`, ...): images
/// `[N, 3, 32, 32]` in [0, 1] and labels 0 to 9.
pub fn read_cifar10_batch(path: impl AsRef<Path>) -> Result<ImageSet> {
    read_batches(&[path.as_ref().to_path_buf()])
}

/// Reads the class names, one a line.
fn read_class_names(path: &Path) -> Result<Vec<String>> {
    let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let mut bytes = Vec::new();
    file.take(MAX_META_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    if bytes.len() as u64 > MAX_META_BYTES {
        return Err(format_error(
            path,
            format!("is over {MAX_META_BYTES} bytes, too long for {CLASSES} class names"),
        ));
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| format_error(path, format!("is not UTF-8 text ({e})")))?;
    let names: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    if names.len() != usize::from(CLASSES) {
        return Err(format_error(
            path,
            format!(
                "names {} classes ({names:?}); CIFAR-10's names {CLASSES}, one a line",
                names.len()
            ),
        ));
    }
    Ok(names)
}

/// Reads the standard CIFAR-10 folder: `dir` is `cifar-10-batches-bin` itself or the folder
/// the archive was extracted in. All six batch files and `batches.meta.txt` must be there; the
/// error for a missing one lists every file missing and where to get the data set.
pub fn read_cifar10_dir(dir: impl AsRef<Path>) -> Result<Cifar10> {
    let dir = dir.as_ref();
    let nested = dir.join(FOLDER);
    let dir = if nested.is_dir() { &nested } else { dir };
    if !dir.is_dir() {
        return Err(Error::Io {
            path: dir.display().to_string(),
            message: format!("no such folder; {WHERE_TO_GET_IT} (to {FOLDER}/)"),
        });
    }
    let files: Vec<PathBuf> = TRAIN_FILES
        .iter()
        .chain([&TEST_FILE, &META_FILE])
        .map(|name| dir.join(name))
        .collect();
    let missing: Vec<String> = files
        .iter()
        .filter(|p| !p.is_file())
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    if !missing.is_empty() {
        return Err(Error::Io {
            path: dir.display().to_string(),
            message: format!(
                "not a CIFAR-10 binary folder: missing {}; {WHERE_TO_GET_IT} (to {FOLDER}/)",
                missing.join(", ")
            ),
        });
    }
    let classes = read_class_names(&files[6])?;
    let train = read_batches(&files[..5])?;
    let test = read_batches(&files[5..6])?;
    Ok(Cifar10 {
        train,
        test,
        classes,
    })
}
