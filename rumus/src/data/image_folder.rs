//! [`ImageFolder`]: labelled images laid out one folder per class, as torchvision's
//! `ImageFolder` reads them (`root/cat/001.png`, `root/dog/xyz.jpg`, ...), decoded from PNG
//! and JPEG with the `image` crate when an item is read (so the loader's workers decode in
//! parallel, and a folder larger than memory can be trained on).
//!
//! Items are `[C, H, W]` f32 images in [0, 1], as torchvision's `ToTensor` makes them, every
//! one of the same size (a batch needs that): either the files already have that size, or
//! they are resized on load with a filter the caller names. Conversions follow Pillow, which
//! torchvision uses, so a model trained there sees the same pixels here: 8 bits a channel,
//! alpha dropped, color to gray by ITU-R 601-2 luma.
//!
//! Files come from outside, so a corrupt one is an error naming it, and decoding is capped
//! ([`ImageFolder::decode_limits`]): a PNG header announcing 100,000 x 100,000 pixels is an
//! error before anything of that size is allocated.

use std::path::{Path, PathBuf};

use image::imageops::FilterType;
use image::{ImageBuffer, ImageError, Pixel};

use super::dataset::{Dataset, index_error};
use super::sample::{Features, Sample};
use super::{file_format_error as format_error, file_io_error as io_error};
use crate::error::{Error, Result};

/// File extensions read as images (compared without regard to case); other files in a class
/// folder are skipped, as torchvision skips them.
const EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

/// Default cap on an image's width and height: 16384 pixels (a 100-megapixel photograph is
/// about 11,600 wide).
pub const DEFAULT_MAX_SIDE: u32 = 16384;
/// Default cap on the memory a decoder may take for one image: 512 MiB (the `image` crate's
/// own default), an RGBA image of 134 megapixels.
pub const DEFAULT_MAX_DECODED_BYTES: u64 = 512 << 20;

/// The channels of the images a folder yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorMode {
    /// One channel. Color files are converted as Pillow's `convert("L")` does:
    /// `L = (19595 R + 38470 G + 7471 B + 32768) >> 16`, i.e. `0.299 R + 0.587 G + 0.114 B`
    /// rounded.
    Gray,
    /// Three channels, red, green, blue. Gray files repeat their value in each; alpha is
    /// dropped (not blended), as Pillow's `convert("RGB")` does.
    Rgb,
}

impl ColorMode {
    /// The number of channels, `C` of the `[C, H, W]` items.
    pub fn channels(self) -> usize {
        match self {
            ColorMode::Gray => 1,
            ColorMode::Rgb => 3,
        }
    }
}

/// How images of another size are brought to the folder's size. The image is stretched to
/// exactly that width and height (its aspect ratio is not kept: crop the files first if that
/// matters). Each filter is the `image` crate's of that kind; when shrinking, its support
/// widens with the scale, so the result is anti-aliased as Pillow's and torchvision's are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeFilter {
    /// The nearest source pixel: no new values, blocky.
    Nearest,
    /// Linear interpolation (a triangle filter); torchvision's default for `Resize`.
    Bilinear,
    /// Cubic interpolation (Catmull-Rom): sharper than bilinear.
    Bicubic,
    /// Lanczos with three lobes: the sharpest, and the slowest.
    Lanczos3,
}

impl ResizeFilter {
    fn filter_type(self) -> FilterType {
        match self {
            ResizeFilter::Nearest => FilterType::Nearest,
            ResizeFilter::Bilinear => FilterType::Triangle,
            ResizeFilter::Bicubic => FilterType::CatmullRom,
            ResizeFilter::Lanczos3 => FilterType::Lanczos3,
        }
    }
}

/// Images in class folders: `root/<class>/<file>.png|jpg|jpeg`. Classes are the folder names
/// in sorted order, labelled 0, 1, 2, ...; a class's files are in sorted order, and the
/// dataset lists class 0's files, then class 1's, and so on. Subfolders of a class folder are
/// not searched.
///
/// ```no_run
/// use rumus::data::{ColorMode, DataLoader, ImageFolder, ResizeFilter};
///
/// # fn main() -> rumus::Result<()> {
/// let pets = ImageFolder::open("data/pets/train", ColorMode::Rgb, 64, 64)?
///     .resize(ResizeFilter::Bilinear);
/// println!("classes: {:?}", pets.classes());
/// let mut loader = DataLoader::new(pets, 32)?.shuffle(0).workers(2);
/// for batch in loader.epoch() {
///     let batch = batch?; // a corrupt file is an Err naming it
///     assert_eq!(&batch.input.dims()[1..], &[3, 64, 64]);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    samples: Vec<(PathBuf, i64)>,
    color: ColorMode,
    height: u32,
    width: u32,
    resize: Option<ResizeFilter>,
    max_side: u32,
    max_decoded_bytes: u64,
}

/// The entries of `dir`, sorted by name, with whether each is a folder (links followed).
fn sorted_entries(dir: &Path) -> Result<Vec<(String, PathBuf, bool)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_error(dir, e))? {
        let path = entry.map_err(|e| io_error(dir, e))?.path();
        let name = path.file_name().unwrap_or_default().to_owned();
        let name = name.into_string().map_err(|name| {
            format_error(
                &path,
                format!(
                    "the name {name:?} is not UTF-8, so it cannot name a class or be ordered \
                     as torchvision orders it; rename it"
                ),
            )
        })?;
        // A broken link is neither folder nor image: it is skipped like other stray files.
        let is_dir = path.is_dir();
        entries.push((name, path, is_dir));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

fn is_image(name: &str) -> bool {
    Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

impl ImageFolder {
    /// Lists the classes and files under `root` (nothing is decoded yet). Items will be
    /// `[color.channels(), height, width]`; files of another size are an error when read,
    /// unless [`resize`](Self::resize) names a filter. A missing root, a root without class
    /// folders, and a class folder without PNG or JPEG files are errors naming the folder.
    pub fn open(
        root: impl AsRef<Path>,
        color: ColorMode,
        height: usize,
        width: usize,
    ) -> Result<Self> {
        let root = root.as_ref();
        let side = |value: usize, what: &str| {
            u32::try_from(value)
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| Error::InvalidArgument {
                    op: "ImageFolder::open",
                    message: format!(
                        "the image {what} is {value}; it must be at least 1 and at most {}",
                        u32::MAX
                    ),
                })
        };
        let (height, width) = (side(height, "height")?, side(width, "width")?);
        if !root.is_dir() {
            return Err(io_error(
                root,
                "no such folder; an image folder holds one subfolder of images per class",
            ));
        }
        let mut classes = Vec::new();
        let mut samples = Vec::new();
        for (class_name, class_dir, is_dir) in sorted_entries(root)? {
            if !is_dir {
                continue;
            }
            let label = classes.len() as i64;
            let before = samples.len();
            for (name, path, is_dir) in sorted_entries(&class_dir)? {
                if !is_dir && is_image(&name) {
                    samples.push((path, label));
                }
            }
            if samples.len() == before {
                return Err(format_error(
                    &class_dir,
                    format!(
                        "class folder `{class_name}` holds no image files (extensions {}); add \
                         images or remove the folder",
                        EXTENSIONS.join(", ")
                    ),
                ));
            }
            classes.push(class_name);
        }
        if classes.is_empty() {
            return Err(format_error(
                root,
                "holds no class folders; put each class's images in a folder of its own, \
                 named after the class (root/cat/1.png, root/dog/2.jpg)"
                    .into(),
            ));
        }
        Ok(ImageFolder {
            root: root.to_path_buf(),
            classes,
            samples,
            color,
            height,
            width,
            resize: None,
            max_side: DEFAULT_MAX_SIDE,
            max_decoded_bytes: DEFAULT_MAX_DECODED_BYTES,
        })
    }

    /// Resizes images of another size with `filter` (without this, they are an error).
    pub fn resize(mut self, filter: ResizeFilter) -> Self {
        self.resize = Some(filter);
        self
    }

    /// Caps decoding: images wider or higher than `max_side` pixels, or whose decoder needs
    /// more than `max_decoded_bytes`, are an error read from their header, before the pixels
    /// are allocated. The defaults are [`DEFAULT_MAX_SIDE`] and
    /// [`DEFAULT_MAX_DECODED_BYTES`].
    pub fn decode_limits(mut self, max_side: u32, max_decoded_bytes: u64) -> Self {
        self.max_side = max_side;
        self.max_decoded_bytes = max_decoded_bytes;
        self
    }

    /// The folder the classes are in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Class names by label (folder names, sorted).
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Every image file with its label, in item order (torchvision's `samples`).
    pub fn samples(&self) -> &[(PathBuf, i64)] {
        &self.samples
    }

    /// The dims of every item, `[C, H, W]`.
    pub fn item_dims(&self) -> [usize; 3] {
        [
            self.color.channels(),
            self.height as usize,
            self.width as usize,
        ]
    }

    /// Decodes `path` into `[C, H, W]` values in [0, 1].
    fn load(&self, path: &Path) -> Result<Vec<f32>> {
        // The output first: its size is the caller's, and one too large for memory is an
        // error here rather than an abort in the resize.
        let count = self
            .item_dims()
            .iter()
            .fold(1usize, |a, &d| a.saturating_mul(d));
        let what = format!("{}: an image {:?} as f32", path.display(), self.item_dims());
        let out = crate::alloc::try_with_capacity("ImageFolder::get", &what, count)?;
        let mut reader = image::io::Reader::open(path)
            .and_then(|r| r.with_guessed_format())
            .map_err(|e| io_error(path, e))?;
        let mut limits = image::io::Limits::default();
        limits.max_image_width = Some(self.max_side);
        limits.max_image_height = Some(self.max_side);
        limits.max_alloc = Some(self.max_decoded_bytes);
        reader.limits(limits);
        let decoded = reader.decode().map_err(|e| self.decode_error(path, e))?;
        match self.color {
            ColorMode::Gray if decoded.color().has_color() => {
                let rgb = decoded.into_rgb8();
                let (w, h) = rgb.dimensions();
                let luma = rgb.pixels().map(|p| pillow_luma(p.0)).collect::<Vec<u8>>();
                let gray = ImageBuffer::<image::Luma<u8>, _>::from_raw(w, h, luma)
                    .expect("one luma byte per pixel");
                self.planes(path, gray, out)
            }
            ColorMode::Gray => self.planes(path, decoded.into_luma8(), out),
            ColorMode::Rgb => self.planes(path, decoded.into_rgb8(), out),
        }
    }

    /// Brings `image` to the folder's size and lays it out channel by channel, scaled to
    /// [0, 1], in `out` (reserved for it).
    fn planes<P: Pixel<Subpixel = u8> + 'static>(
        &self,
        path: &Path,
        image: ImageBuffer<P, Vec<u8>>,
        mut out: Vec<f32>,
    ) -> Result<Vec<f32>> {
        let (w, h) = image.dimensions();
        let image = if (w, h) == (self.width, self.height) {
            image
        } else if let Some(filter) = self.resize {
            // The resize goes through an RGBA f32 image of the source width and the new
            // height (16 bytes a pixel).
            let between = [w as usize, self.height as usize, 4];
            crate::alloc::ensure_output("ImageFolder::get (resize)", &between, 4)?;
            image::imageops::resize(&image, self.width, self.height, filter.filter_type())
        } else {
            return Err(format_error(
                path,
                format!(
                    "is {w} pixels wide and {h} high, but this folder's images are to be {} \
                     wide and {} high; resize them on load with \
                     `.resize(ResizeFilter::Bilinear)` (or another filter), or resize the files",
                    self.width, self.height
                ),
            ));
        };
        let channels = usize::from(P::CHANNEL_COUNT);
        let raw = image.as_raw();
        for c in 0..channels {
            out.extend(
                raw[c..]
                    .iter()
                    .step_by(channels)
                    .map(|&v| f32::from(v) / 255.0),
            );
        }
        Ok(out)
    }

    fn decode_error(&self, path: &Path, e: ImageError) -> Error {
        match e {
            // Decoders read through `std::io`, so a file cut short shows up as an I/O error.
            ImageError::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                format_error(
                    path,
                    format!("cannot be decoded: it ends early ({e}); the file is truncated"),
                )
            }
            ImageError::IoError(e) => io_error(path, e),
            ImageError::Limits(e) => format_error(
                path,
                format!(
                    "exceeds the decode limits ({} pixels a side, {} bytes decoded): {e}; if the \
                     file is genuine, raise them with `ImageFolder::decode_limits`",
                    self.max_side, self.max_decoded_bytes
                ),
            ),
            e => format_error(
                path,
                format!("cannot be decoded ({e}); the file is corrupt or not a PNG or JPEG image"),
            ),
        }
    }
}

/// Pillow's RGB-to-L conversion (ITU-R 601-2 luma in 16-bit fixed point, rounded).
fn pillow_luma([r, g, b]: [u8; 3]) -> u8 {
    let sum = 19595 * u32::from(r) + 38470 * u32::from(g) + 7471 * u32::from(b) + 0x8000;
    (sum >> 16) as u8
}

/// Items are `[C, H, W]` images in [0, 1] with their class label; a file that cannot be read,
/// decoded, or brought to the folder's size is an error naming it.
impl Dataset for ImageFolder {
    type Item = Sample;

    fn len(&self) -> usize {
        self.samples.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let (path, label) = self
            .samples
            .get(index)
            .ok_or_else(|| index_error("ImageFolder::get", index, self.samples.len()))?;
        let values = self.load(path)?;
        Ok(Sample::classified(
            Features::new(values, &self.item_dims())?,
            *label,
        ))
    }
}
