//! The IDX format of MNIST and Fashion-MNIST (plain or gzipped). Every size in the header is
//! checked against the file length, so a truncated or corrupt file is an error naming the
//! file, never a panic or garbage.

use std::io::Read;
use std::path::Path;

use super::dataset::{Dataset, index_error};
use super::sample::{Features, Sample};
use crate::error::{Error, Result};

/// An unsigned-byte IDX array: dims and row-major values.
#[derive(Debug, Clone)]
pub struct IdxArray {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

fn format_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Format {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Parses IDX bytes (already decompressed).
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    if bytes.len() < 4 || bytes[0] != 0 || bytes[1] != 0 {
        return Err(format_error(path, "not an IDX file (bad magic number)"));
    }
    if bytes[2] != 0x08 {
        return Err(format_error(
            path,
            format!(
                "element type 0x{:02x} is not supported (only unsigned bytes, 0x08)",
                bytes[2]
            ),
        ));
    }
    let rank = bytes[3] as usize;
    let header = 4 + 4 * rank;
    if bytes.len() < header {
        return Err(format_error(
            path,
            format!(
                "truncated header: {rank} dims need {header} bytes, the file has {}",
                bytes.len()
            ),
        ));
    }
    let dims: Vec<usize> = (0..rank)
        .map(|i| {
            u32::from_be_bytes(bytes[4 + 4 * i..8 + 4 * i].try_into().expect("4 bytes")) as usize
        })
        .collect();
    let count = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format_error(path, format!("dims {dims:?} overflow")))?;
    let available = bytes.len() - header;
    if available != count {
        return Err(format_error(
            path,
            format!("dims {dims:?} need {count} values but the file holds {available}"),
        ));
    }
    Ok(IdxArray {
        dims,
        data: bytes[header..].to_vec(),
    })
}

/// Reads an IDX file, decompressing it first when it is gzipped.
pub fn read_idx(path: impl AsRef<Path>) -> Result<IdxArray> {
    let path = path.as_ref();
    let raw = std::fs::read(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    decode_idx(&raw, path)
}

/// Parses the bytes of an IDX file, gzipped or not; `path` names it in errors.
pub fn decode_idx(raw: &[u8], path: &Path) -> Result<IdxArray> {
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw)
            .read_to_end(&mut out)
            .map_err(|e| format_error(path, format!("corrupt gzip data: {e}")))?;
        std::borrow::Cow::Owned(out)
    } else {
        std::borrow::Cow::Borrowed(raw)
    };
    parse_idx(&bytes, path)
}

/// A labelled image set: `[N, H, W]` images scaled to [0, 1] and labels.
#[derive(Debug, Clone)]
pub struct ImageSet {
    pub images: Vec<f32>,
    pub labels: Vec<i64>,
    pub height: usize,
    pub width: usize,
}

impl ImageSet {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

/// Items are `[1, H, W]` images (one channel, as convolutions take them) with their class;
/// reshape with [`transform::reshape`](super::transform::reshape) for an MLP.
impl Dataset for ImageSet {
    type Item = Sample;

    fn len(&self) -> usize {
        self.labels.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        if index >= self.len() {
            return Err(index_error("ImageSet::get", index, self.len()));
        }
        let pixels = self.height * self.width;
        let image = &self.images[index * pixels..(index + 1) * pixels];
        Ok(Sample::classified(
            Features::new(image.to_vec(), &[1, self.height, self.width])?,
            self.labels[index],
        ))
    }
}

/// Loads an MNIST-style pair of image and label files, checking they describe the same
/// number of items.
pub fn read_image_set(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<ImageSet> {
    let (images_path, labels_path) = (images.as_ref(), labels.as_ref());
    let images = read_idx(images_path)?;
    let labels = read_idx(labels_path)?;
    let [n, height, width] = images.dims[..] else {
        return Err(format_error(
            images_path,
            format!("expected images [N, H, W], found dims {:?}", images.dims),
        ));
    };
    if labels.dims != [n] {
        return Err(format_error(
            labels_path,
            format!(
                "expected {n} labels to match the images, found dims {:?}",
                labels.dims
            ),
        ));
    }
    Ok(ImageSet {
        images: images.data.iter().map(|&p| p as f32 / 255.0).collect(),
        labels: labels.data.iter().map(|&l| l as i64).collect(),
        height,
        width,
    })
}

/// Finds the four MNIST files in `dir`, under either naming scheme (`train-images-idx3-ubyte`
/// with or without `.gz`, or `train-images.idx3-ubyte`), and loads the train and test sets.
pub fn read_mnist_dir(dir: impl AsRef<Path>) -> Result<(ImageSet, ImageSet)> {
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
    let train = read_image_set(find("train-images", "idx3")?, find("train-labels", "idx1")?)?;
    let test = read_image_set(find("t10k-images", "idx3")?, find("t10k-labels", "idx1")?)?;
    Ok((train, test))
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
