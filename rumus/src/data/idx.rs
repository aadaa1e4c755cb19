//! The IDX format of MNIST and Fashion-MNIST (plain or gzipped). Every size in the header is
//! checked against the file length, so a truncated or corrupt file is an error naming the
//! file, never a panic or garbage.
//!
//! A file costs the memory and time its header claims, which a gzipped file can make far more
//! than its size (4 MB claiming 4 GB). An [`IdxReader`] with [`IdxReader::max_bytes`] refuses
//! such a header before reading a byte of its values: what a service reading uploaded files
//! should use. The free functions read without a limit.

use std::io::Read;
use std::path::Path;

use super::dataset::{Dataset, index_error};
use super::sample::{Features, Sample};
use crate::error::{Error, Result, ShapeError};

/// An unsigned-byte IDX array: dims and row-major values.
#[derive(Debug, Clone)]
pub struct IdxArray {
    /// Size of each axis, as the header gives them.
    pub dims: Vec<usize>,
    /// The values in row-major order, `dims.iter().product()` of them.
    pub data: Vec<u8>,
}

fn format_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Format {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Reads from `source` until `buf` is full or the source ends; returns the bytes read.
fn read_up_to(source: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match source.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Reads IDX files, refusing those whose header claims more than a limit. The default has no
/// limit (as [`read_idx`] and the other free functions):
///
/// ```no_run
/// use rumus::data::IdxReader;
///
/// # fn main() -> rumus::Result<()> {
/// // An uploaded file may claim at most 64 MiB of values (MNIST's training images are 47 MB).
/// let reader = IdxReader::new().max_bytes(64 << 20);
/// let images = reader.read("upload/train-images-idx3-ubyte.gz")?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdxReader {
    max_bytes: usize,
}

impl Default for IdxReader {
    fn default() -> Self {
        IdxReader {
            max_bytes: usize::MAX,
        }
    }
}

impl IdxReader {
    /// A reader without a limit.
    pub fn new() -> Self {
        IdxReader::default()
    }

    /// Refuses any file whose header claims more than `bytes` values (one byte each), with
    /// an error naming the claim and the limit, before reading or reserving memory for them:
    /// a file costs at most about `bytes` of memory, and of decompression time, to read or
    /// to refuse. [`IdxReader::read_image_set`] then holds up to 4 `bytes` of `f32` pixels.
    pub fn max_bytes(self, bytes: usize) -> Self {
        IdxReader { max_bytes: bytes }
    }

    /// Reads an IDX file, decompressing it on the fly when it is gzipped.
    pub fn read(&self, path: impl AsRef<Path>) -> Result<IdxArray> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        self.decode_stream(std::io::BufReader::new(file), path)
    }

    /// Parses the bytes of an IDX file, gzipped or not; `path` names it in errors.
    pub fn decode(&self, raw: &[u8], path: &Path) -> Result<IdxArray> {
        self.decode_stream(raw, path)
    }

    /// Reads an IDX array from `source`, through a gzip decoder when it starts with gzip's
    /// magic.
    fn decode_stream(&self, mut source: impl std::io::BufRead, path: &Path) -> Result<IdxArray> {
        let head = source.fill_buf().map_err(|e| Error::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        if head.starts_with(&[0x1f, 0x8b]) {
            let mut unzipped = flate2::bufread::GzDecoder::new(source);
            read_stream(&mut unzipped, path, true, self.max_bytes)
        } else {
            read_stream(&mut source, path, false, self.max_bytes)
        }
    }
}

/// Reads one IDX array from a stream of its (decompressed) bytes. The header is read and
/// checked first, against `max_bytes` too; then exactly the bytes its dims need are read into
/// memory reserved fallibly, and one byte more proves the stream ends there. A gzip bomb (4
/// MB expanding to gigabytes) therefore costs what its header claims and no more, and a
/// header asking for more memory than the machine has is an `Err`.
fn read_stream(
    source: &mut impl Read,
    path: &Path,
    gzipped: bool,
    max_bytes: usize,
) -> Result<IdxArray> {
    let read_error = |e: std::io::Error| {
        if gzipped {
            format_error(path, format!("corrupt gzip data: {e}"))
        } else {
            Error::Io {
                path: path.display().to_string(),
                message: e.to_string(),
            }
        }
    };
    let mut magic = [0u8; 4];
    let got = read_up_to(source, &mut magic).map_err(read_error)?;
    if got < 4 || magic[0] != 0 || magic[1] != 0 {
        return Err(format_error(path, "not an IDX file (bad magic number)"));
    }
    if magic[2] != 0x08 {
        return Err(format_error(
            path,
            format!(
                "element type 0x{:02x} is not supported (only unsigned bytes, 0x08)",
                magic[2]
            ),
        ));
    }
    let rank = magic[3] as usize;
    let mut sizes = vec![0u8; 4 * rank];
    let got = read_up_to(source, &mut sizes).map_err(read_error)?;
    if got < sizes.len() {
        return Err(format_error(
            path,
            format!(
                "truncated header: {rank} dims need {} bytes, the file has {}",
                4 + 4 * rank,
                4 + got
            ),
        ));
    }
    let dims: Vec<usize> = sizes
        .chunks_exact(4)
        .map(|d| u32::from_be_bytes(d.try_into().expect("4 bytes")) as usize)
        .collect();
    let count = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format_error(path, format!("dims {dims:?} overflow")))?;
    if count > max_bytes {
        return Err(format_error(
            path,
            format!(
                "the header claims dims {dims:?}, {count} bytes of values, more than this reader's limit of {max_bytes} bytes; if the file is trusted, raise the limit with IdxReader::max_bytes"
            ),
        ));
    }
    let mut data: Vec<u8> = crate::alloc::try_with_capacity(
        "read_idx",
        &format!("{}: the values of dims {dims:?}", path.display()),
        count,
    )?;
    // `take` bounds the read at what the dims need, into memory reserved exactly for it;
    // one more byte read afterwards proves the stream ends there (reading it into the vector
    // would grow, and double, the reservation).
    source
        .take(count as u64)
        .read_to_end(&mut data)
        .map_err(read_error)?;
    let extra = read_up_to(source, &mut [0u8; 1]).map_err(read_error)?;
    if data.len() != count || extra > 0 {
        let available = if extra > 0 {
            "more".to_string()
        } else {
            data.len().to_string()
        };
        return Err(format_error(
            path,
            format!("dims {dims:?} need {count} values but the file holds {available}"),
        ));
    }
    Ok(IdxArray { dims, data })
}

/// Parses IDX bytes (already decompressed), without a limit (the bytes are in memory already:
/// their header cannot claim more than they hold and still parse).
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    read_stream(&mut &bytes[..], path, false, usize::MAX)
}

/// Reads an IDX file, decompressing it on the fly when it is gzipped, without a limit on
/// what its header may claim ([`IdxReader`] sets one).
pub fn read_idx(path: impl AsRef<Path>) -> Result<IdxArray> {
    IdxReader::new().read(path)
}

/// Parses the bytes of an IDX file, gzipped or not, without a limit on what its header may
/// claim ([`IdxReader`] sets one); `path` names it in errors.
pub fn decode_idx(raw: &[u8], path: &Path) -> Result<IdxArray> {
    IdxReader::new().decode(raw, path)
}

/// A labelled image set: `[N, C, H, W]` images scaled to [0, 1] and labels (MNIST's have one
/// channel, CIFAR's three).
#[derive(Debug, Clone)]
pub struct ImageSet {
    /// Pixels of all images, row-major `[N, C, H, W]`, each byte divided by 255.
    pub images: Vec<f32>,
    /// The class of each image, `N` of them.
    pub labels: Vec<i64>,
    /// Channels per image, `C` (1 for grayscale, 3 for RGB).
    pub channels: usize,
    /// Rows per image, `H`.
    pub height: usize,
    /// Columns per image, `W`.
    pub width: usize,
}

impl ImageSet {
    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the set holds no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

/// Items are `[C, H, W]` images (a channel axis even for grayscale, as convolutions take
/// them) with their class; reshape with [`transform::reshape`](super::transform::reshape) for
/// an MLP.
impl Dataset for ImageSet {
    type Item = Sample;

    fn len(&self) -> usize {
        self.labels.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        if index >= self.len() {
            return Err(index_error("ImageSet::get", index, self.len()));
        }
        // The fields are public: a set built by hand whose pixels do not match its dims is
        // an error, not a slice panic.
        let dims = [self.channels, self.height, self.width];
        let pixels = (dims.iter())
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .unwrap_or(usize::MAX);
        let image = (index.checked_mul(pixels))
            .zip((index + 1).checked_mul(pixels))
            .and_then(|(start, end)| self.images.get(start..end))
            .ok_or_else(|| ShapeError::Invalid {
                context: "ImageSet::get".into(),
                message: format!(
                    "{} labels of images {dims:?} need {} pixels, the set holds {}",
                    self.len(),
                    self.len().saturating_mul(pixels),
                    self.images.len()
                ),
            })?;
        Ok(Sample::classified(
            Features::new(image.to_vec(), &dims)?,
            self.labels[index],
        ))
    }
}

/// Loads an MNIST-style pair of image and label files, checking they describe the same
/// number of items; without a limit ([`IdxReader::read_image_set`] sets one).
pub fn read_image_set(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<ImageSet> {
    IdxReader::new().read_image_set(images, labels)
}

/// Finds the four MNIST files in `dir`, under either naming scheme (`train-images-idx3-ubyte`
/// with or without `.gz`, or `train-images.idx3-ubyte`), and loads the train and test sets;
/// without a limit ([`IdxReader::read_mnist_dir`] sets one).
pub fn read_mnist_dir(dir: impl AsRef<Path>) -> Result<(ImageSet, ImageSet)> {
    IdxReader::new().read_mnist_dir(dir)
}

impl IdxReader {
    /// [`read_image_set`] within this reader's limit, which applies to each file.
    pub fn read_image_set(
        &self,
        images: impl AsRef<Path>,
        labels: impl AsRef<Path>,
    ) -> Result<ImageSet> {
        let (images_path, labels_path) = (images.as_ref(), labels.as_ref());
        let images = self.read(images_path)?;
        let [n, height, width] = images.dims[..] else {
            return Err(format_error(
                images_path,
                format!("expected images [N, H, W], found dims {:?}", images.dims),
            ));
        };
        if height == 0 || width == 0 {
            return Err(format_error(
                images_path,
                format!("images of {height} x {width} pixels hold nothing to learn from"),
            ));
        }
        // Read only once the images are known to be sound: a label file is as large as the
        // image count says, and that count is not worth reading for an empty image.
        let labels = self.read(labels_path)?;
        if labels.dims != [n] {
            return Err(format_error(
                labels_path,
                format!(
                    "expected {n} labels to match the images, found dims {:?}",
                    labels.dims
                ),
            ));
        }
        let op = "read_image_set";
        let images_what = format!("{}: {n} images as f32", images_path.display());
        let labels_what = format!("{}: {n} labels as i64", labels_path.display());
        Ok(ImageSet {
            images: crate::alloc::try_map(op, &images_what, &images.data, |&p| p as f32 / 255.0)?,
            labels: crate::alloc::try_map(op, &labels_what, &labels.data, |&l| l as i64)?,
            channels: 1,
            height,
            width,
        })
    }

    /// [`read_mnist_dir`] within this reader's limit, which applies to each file.
    pub fn read_mnist_dir(&self, dir: impl AsRef<Path>) -> Result<(ImageSet, ImageSet)> {
        let dir = dir.as_ref();
        let find = |stem: &str, kind: &str| -> Result<std::path::PathBuf> {
            let candidates = [
                format!("{stem}-{kind}-ubyte"),
                format!("{stem}-{kind}-ubyte.gz"),
                format!("{stem}.{kind}-ubyte"),
            ];
            candidates
                .iter()
                .map(|c| dir.join(c))
                .find(|p| p.exists())
                .ok_or_else(|| Error::Io {
                    path: dir.display().to_string(),
                    message: format!("no {stem}-{kind}-ubyte file (tried {candidates:?})"),
                })
        };
        let train =
            self.read_image_set(find("train-images", "idx3")?, find("train-labels", "idx1")?)?;
        let test =
            self.read_image_set(find("t10k-images", "idx3")?, find("t10k-labels", "idx1")?)?;
        Ok((train, test))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dims: &[u32], values: usize) -> Vec<u8> {
        let mut bytes = vec![0, 0, 8, dims.len() as u8];
        dims.iter().for_each(|d| bytes.extend(d.to_be_bytes()));
        bytes.extend(std::iter::repeat_n(7u8, values));
        bytes
    }

    #[test]
    fn parses_and_rejects_bad_files() {
        let path = Path::new("mem.idx");
        let ok = parse_idx(&file(&[2, 3], 6), path).unwrap();
        assert_eq!((ok.dims.as_slice(), ok.data.len()), (&[2usize, 3][..], 6));
        let err = parse_idx(&file(&[2, 3], 5), path).unwrap_err().to_string();
        assert!(
            err.contains("need 6 values") && err.contains("holds 5"),
            "{err}"
        );
        assert!(parse_idx(&[0, 0, 8], path).is_err());
        assert!(
            parse_idx(&[0, 0, 8, 3, 0, 0], path)
                .unwrap_err()
                .to_string()
                .contains("truncated header")
        );
        assert!(
            parse_idx(&[1, 2, 3, 4], path)
                .unwrap_err()
                .to_string()
                .contains("magic")
        );
        assert!(parse_idx(&file(&[u32::MAX, u32::MAX, u32::MAX], 0), path).is_err());
    }
}
