//! Dataset building blocks against independent truths: `random_split` against PyTorch's
//! documented size rule and set arithmetic, the CIFAR-10 reader against records written here
//! by the format's specification, and the image folder against PNG and JPEG files written with
//! the `image` crate.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::scratch::Scratch;
use rumus::data::{
    ColorMode, DataLoader, Dataset, ImageFolder, InMemory, ResizeFilter, SplitSizes, Subset,
    random_split, read_cifar10_batch, read_cifar10_dir, split_lengths,
};

// ---------------------------------------------------------------------------------------------
// random_split

/// Every item of a dataset of `0..n`, read through the subsets' `get`.
fn items(subset: &Subset<InMemory<usize>>) -> Vec<usize> {
    (0..subset.len()).map(|i| subset.get(i).unwrap()).collect()
}

#[test]
fn fractions_follow_pytorchs_remainder_rule() {
    // PyTorch: each split gets floor(len * fraction); what is left goes one item each to
    // splits 0, 1, ... in turn. 10 * 0.33 = 3.3 -> 3, 3.3 -> 3, 3.4 -> 3: one item left, to
    // split 0.
    let fractions = |f: &[f64]| SplitSizes::Fractions(f.to_vec());
    assert_eq!(
        split_lengths(10, &fractions(&[0.33, 0.33, 0.34])).unwrap(),
        [4, 3, 3]
    );
    // 11 quarters: floors 2, 2, 2, 2 leave 3, to splits 0, 1 and 2.
    assert_eq!(
        split_lengths(11, &fractions(&[0.25; 4])).unwrap(),
        [3, 3, 3, 2]
    );
    // 7 * 0.5 = 3.5 -> 3 twice; one left, to split 0.
    assert_eq!(split_lengths(7, &fractions(&[0.5, 0.5])).unwrap(), [4, 3]);
    // 5 * 0.1 = 0.5 -> 0, 5 * 0.9 = 4.5 -> 4; one left, to split 0.
    assert_eq!(split_lengths(5, &fractions(&[0.1, 0.9])).unwrap(), [1, 4]);
    assert_eq!(split_lengths(0, &fractions(&[0.5, 0.5])).unwrap(), [0, 0]);
    // A sum within Python's `math.isclose` of 1 counts as 1 (0.1 * 10 adds up to
    // 0.9999999999999999 in floating point): floors 1 each of 10.
    assert_eq!(split_lengths(10, &fractions(&[0.1; 10])).unwrap(), [1; 10]);
}

#[test]
fn bad_sizes_are_errors_that_say_what_to_do() {
    let err = |sizes: SplitSizes| split_lengths(10, &sizes).unwrap_err().to_string();
    let counts = err(SplitSizes::Counts(vec![3, 3, 3]));
    assert!(
        counts.contains("add up to 9") && counts.contains("holds 10"),
        "{counts}"
    );
    assert!(err(SplitSizes::Counts(vec![])).contains("at least one"));
    assert!(err(SplitSizes::Fractions(vec![])).contains("at least one"));
    let nan = err(SplitSizes::Fractions(vec![f64::NAN, 1.0]));
    assert!(nan.contains("fraction 0 is NaN"), "{nan}");
    let negative = err(SplitSizes::Fractions(vec![1.5, -0.5]));
    assert!(negative.contains("fraction 0 is 1.5"), "{negative}");
    let short = err(SplitSizes::Fractions(vec![0.5, 0.4]));
    assert!(
        short.contains("add up to 0.9") && short.contains("not 1"),
        "{short}"
    );
    let over = err(SplitSizes::Fractions(vec![0.6, 0.6]));
    assert!(over.contains("not 1"), "{over}");
    // Counts that overflow when added are an error too, not a wrapped sum.
    assert!(split_lengths(10, &SplitSizes::Counts(vec![usize::MAX, 11])).is_err());
    assert!(random_split(InMemory::new(vec![0u8; 4]), [1, 2], 0).is_err());
}

#[test]
fn splits_are_disjoint_cover_the_data_and_keep_their_sizes() {
    let data = InMemory::new((0..100).collect::<Vec<usize>>());
    let parts = random_split(data, [0.7, 0.2, 0.1], 7).unwrap();
    let sizes: Vec<usize> = parts.iter().map(Dataset::len).collect();
    assert_eq!(sizes, [70, 20, 10]);
    let mut seen = BTreeSet::new();
    for part in &parts {
        for item in items(part) {
            assert!(seen.insert(item), "item {item} is in two splits");
        }
    }
    assert_eq!(seen, (0..100).collect::<BTreeSet<usize>>());
    // Items are those of the whole dataset at the subset's indices.
    for part in &parts {
        let expected: Vec<usize> = part.indices().to_vec();
        assert_eq!(items(part), expected);
    }
    // A random permutation, not the first 70 in order.
    assert_ne!(items(&parts[0]), (0..70).collect::<Vec<usize>>());
    let past_end = parts[2].get(10).unwrap_err().to_string();
    assert!(past_end.contains("index 10"), "{past_end}");
}

#[test]
fn the_seed_alone_decides_the_split() {
    let split = |seed: u64| {
        let data = InMemory::new((0..50).collect::<Vec<usize>>());
        random_split(data, [40, 10], seed)
            .unwrap()
            .iter()
            .map(items)
            .collect::<Vec<_>>()
    };
    assert_eq!(split(3), split(3));
    assert_ne!(split(3), split(4));
    // Counts given as a vector or slice read the same as an array.
    let data = InMemory::new((0..50).collect::<Vec<usize>>());
    let from_vec = random_split(data, vec![40usize, 10], 3).unwrap();
    assert_eq!(from_vec.iter().map(items).collect::<Vec<_>>(), split(3));
}

#[test]
fn a_subset_checks_its_indices_and_shares_the_dataset() {
    let data = std::sync::Arc::new(InMemory::new(vec![10u32, 20, 30]));
    let subset = Subset::new(data.clone(), vec![2, 0]).unwrap();
    assert_eq!((subset.get(0).unwrap(), subset.get(1).unwrap()), (30, 10));
    assert!(std::sync::Arc::ptr_eq(subset.dataset(), &data));
    let err = Subset::new(data, vec![0, 3])
        .err()
        .expect("index 3 of 3 items")
        .to_string();
    assert!(err.contains("index 3") && err.contains("size 3"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// CIFAR-10

/// The pixel byte of record `r` at channel `c`, row `y`, column `x` in the files written here.
fn pixel(r: usize, c: usize, y: usize, x: usize) -> u8 {
    ((r * 31 + c * 85 + y * 7 + x * 3) % 256) as u8
}

/// CIFAR-10 records as the format describes them: a label byte, then 1024 red bytes row by
/// row, 1024 green, 1024 blue. Record `r` (counted from `first`) has pixels `pixel(r, ..)`.
fn cifar_records(labels: &[u8], first: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (i, &label) in labels.iter().enumerate() {
        bytes.push(label);
        for c in 0..3 {
            for y in 0..32 {
                for x in 0..32 {
                    bytes.push(pixel(first + i, c, y, x));
                }
            }
        }
    }
    bytes
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_cifar_batch_reads_as_channel_first_images() {
    let scratch = Scratch::new("datasets-cifar-batch");
    let path = scratch.join("data_batch_1.bin");
    write(&path, &cifar_records(&[3, 0, 9], 0));
    let set = read_cifar10_batch(&path).unwrap();
    assert_eq!(
        (set.len(), set.channels, set.height, set.width),
        (3, 3, 32, 32)
    );
    assert_eq!(set.labels, [3, 0, 9]);
    let sample = set.get(2).unwrap();
    assert_eq!(sample.input.dims, [3, 32, 32]);
    assert_eq!(sample.target, rumus::data::Target::Class(9));
    for (c, y, x) in [(0, 0, 0), (0, 0, 31), (1, 5, 7), (2, 31, 0), (2, 31, 31)] {
        let value = sample.input.values[c * 1024 + y * 32 + x];
        assert_eq!(
            value,
            f32::from(pixel(2, c, y, x)) / 255.0,
            "({c}, {y}, {x})"
        );
    }
    // All of it: the images are the pixel bytes in file order, divided by 255.
    let expected: Vec<f32> = (0..3)
        .flat_map(|r| {
            (0..3).flat_map(move |c| {
                (0..32).flat_map(move |y| (0..32).map(move |x| f32::from(pixel(r, c, y, x))))
            })
        })
        .map(|p| p / 255.0)
        .collect();
    assert_eq!(set.images, expected);
    assert!(set.images.iter().all(|v| (0.0..=1.0).contains(v)));
}

#[test]
fn damaged_cifar_batches_are_errors_naming_the_problem() {
    let scratch = Scratch::new("datasets-cifar-damaged");
    let truncated = scratch.join("truncated.bin");
    let mut bytes = cifar_records(&[1, 2], 0);
    bytes.truncate(3073 + 1000);
    write(&truncated, &bytes);
    let err = read_cifar10_batch(&truncated).unwrap_err().to_string();
    assert!(
        err.contains("truncated.bin") && err.contains("4073 bytes") && err.contains("3073"),
        "{err}"
    );

    let bad_label = scratch.join("bad_label.bin");
    write(&bad_label, &cifar_records(&[4, 10], 0));
    let err = read_cifar10_batch(&bad_label).unwrap_err().to_string();
    assert!(
        err.contains("bad_label.bin") && err.contains("record 1") && err.contains("label 10"),
        "{err}"
    );

    let empty = scratch.join("empty.bin");
    write(&empty, &[]);
    let err = read_cifar10_batch(&empty).unwrap_err().to_string();
    assert!(err.contains("0 bytes"), "{err}");

    // Two CIFAR-100 records (2 label bytes + 3072 pixels each) are 6148 bytes, which is not a
    // multiple of 3073; the error says which format the length does fit.
    let cifar100 = scratch.join("train.bin");
    write(&cifar100, &vec![0u8; 2 * 3074]);
    let err = read_cifar10_batch(&cifar100).unwrap_err().to_string();
    assert!(err.contains("CIFAR-100"), "{err}");

    let missing = read_cifar10_batch(scratch.join("nothing.bin"))
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("nothing.bin")
            && missing.contains("https://www.cs.toronto.edu/~kriz/cifar.html"),
        "{missing}"
    );
}

const CLASS_NAMES: &str =
    "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n";

/// A standard folder under `root/cifar-10-batches-bin`: training file `k` holds two records
/// labelled `k - 1` and `k + 4`, the test file one record labelled 7.
fn write_cifar_folder(root: &Path) -> std::path::PathBuf {
    let dir = root.join("cifar-10-batches-bin");
    std::fs::create_dir_all(&dir).unwrap();
    for k in 1..=5u8 {
        let first = 2 * usize::from(k - 1);
        write(
            &dir.join(format!("data_batch_{k}.bin")),
            &cifar_records(&[k - 1, k + 4], first),
        );
    }
    write(&dir.join("test_batch.bin"), &cifar_records(&[7], 100));
    write(&dir.join("batches.meta.txt"), CLASS_NAMES.as_bytes());
    dir
}

#[test]
fn the_cifar_folder_reads_train_test_and_class_names() {
    let scratch = Scratch::new("datasets-cifar-dir");
    let dir = write_cifar_folder(scratch.dir());
    // The folder itself or the one it was extracted in.
    for path in [dir.as_path(), scratch.dir()] {
        let cifar = read_cifar10_dir(path).unwrap();
        assert_eq!(cifar.train.labels, [0, 5, 1, 6, 2, 7, 3, 8, 4, 9]);
        assert_eq!(cifar.test.labels, [7]);
        assert_eq!(cifar.classes[0], "airplane");
        assert_eq!(cifar.classes[9], "truck");
        assert_eq!(cifar.classes.len(), 10);
        // Training image 7 is the second record of data_batch_4.bin, written as record 7.
        let image = cifar.train.get(7).unwrap().input;
        assert_eq!(
            image.values[1024 + 33],
            f32::from(pixel(7, 1, 1, 1)) / 255.0
        );
        let test = cifar.test.get(0).unwrap().input;
        assert_eq!(test.values[2047], f32::from(pixel(100, 1, 31, 31)) / 255.0);
    }

    std::fs::remove_file(dir.join("data_batch_3.bin")).unwrap();
    std::fs::remove_file(dir.join("test_batch.bin")).unwrap();
    let err = read_cifar10_dir(&dir).unwrap_err().to_string();
    assert!(
        err.contains("data_batch_3.bin, test_batch.bin")
            && !err.contains("data_batch_2.bin")
            && err.contains("CIFAR-10 binary version")
            && err.contains("https://www.cs.toronto.edu/~kriz/cifar.html"),
        "{err}"
    );
    let err = read_cifar10_dir(scratch.join("elsewhere"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("elsewhere") && err.contains("no such folder"),
        "{err}"
    );
}

#[test]
fn a_cifar_folder_with_wrong_class_names_is_an_error() {
    let scratch = Scratch::new("datasets-cifar-meta");
    let dir = write_cifar_folder(scratch.dir());
    write(&dir.join("batches.meta.txt"), b"cat\ndog\n");
    let err = read_cifar10_dir(&dir).unwrap_err().to_string();
    assert!(
        err.contains("batches.meta.txt") && err.contains("2 classes"),
        "{err}"
    );
}

#[test]
fn a_split_of_cifar_loads_in_batches() {
    let scratch = Scratch::new("datasets-cifar-split");
    let path = scratch.join("data_batch_1.bin");
    write(&path, &cifar_records(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0));
    let set = read_cifar10_batch(&path).unwrap();
    let [train, val]: [_; 2] = random_split(set, [0.8, 0.2], 1)
        .unwrap()
        .try_into()
        .ok()
        .unwrap();
    let val_labels: Vec<i64> = val.indices().iter().map(|&i| i as i64).collect();
    let mut loader = DataLoader::new(val, 2).unwrap();
    let batch = loader.epoch().next().unwrap().unwrap();
    assert_eq!(batch.input.dims(), &[2, 3, 32, 32]);
    // Labels were written equal to the record index.
    assert_eq!(batch.target.to_vec::<i64>().unwrap(), val_labels);
    assert_eq!(train.len(), 8);
}

// ---------------------------------------------------------------------------------------------
// ImageFolder

/// `(R, G, B)` of pixel `(x, y)` in the RGB test images.
fn rgb_at(x: u32, y: u32) -> [u8; 3] {
    [
        (x * 40 + y) as u8,
        (y * 50 + 3) as u8,
        (255 - x * 10 - y * 7) as u8,
    ]
}

fn save_rgb(path: &Path, width: u32, height: u32) {
    image::RgbImage::from_fn(width, height, |x, y| image::Rgb(rgb_at(x, y)))
        .save(path)
        .unwrap();
}

/// A folder of two classes written out of order: `dog` (an RGB PNG, a gray PNG, a flat-color
/// JPEG and a text file) and `cat` (one RGB PNG with an upper-case extension).
fn write_pets(root: &Path) {
    for class in ["dog", "cat"] {
        std::fs::create_dir_all(root.join(class)).unwrap();
    }
    save_rgb(&root.join("dog/b_rgb.png"), 4, 3);
    image::GrayImage::from_fn(4, 3, |x, y| image::Luma([(x * 60 + y * 5) as u8]))
        .save(root.join("dog/a_gray.png"))
        .unwrap();
    image::RgbImage::from_pixel(4, 3, image::Rgb([200, 100, 50]))
        .save(root.join("dog/c_flat.jpg"))
        .unwrap();
    std::fs::write(root.join("dog/notes.txt"), "not an image").unwrap();
    save_rgb(&root.join("cat/only.PNG"), 4, 3);
}

#[test]
fn an_image_folder_labels_classes_in_sorted_order() {
    let scratch = Scratch::new("datasets-folder-labels");
    write_pets(scratch.dir());
    let folder = ImageFolder::open(scratch.dir(), ColorMode::Rgb, 3, 4).unwrap();
    assert_eq!(folder.classes(), ["cat", "dog"]);
    let files: Vec<(String, i64)> = folder
        .samples()
        .iter()
        .map(|(p, l)| (p.file_name().unwrap().to_string_lossy().into(), *l))
        .collect();
    assert_eq!(
        files,
        [
            ("only.PNG".to_string(), 0),
            ("a_gray.png".into(), 1),
            ("b_rgb.png".into(), 1),
            ("c_flat.jpg".into(), 1),
        ]
    );
    assert_eq!(folder.len(), 4);
    assert_eq!(folder.item_dims(), [3, 3, 4]);
    let labels: Vec<rumus::data::Target> = (0..4).map(|i| folder.get(i).unwrap().target).collect();
    assert_eq!(
        labels,
        [0, 1, 1, 1].map(rumus::data::Target::Class).to_vec()
    );
    assert!(folder.get(4).is_err());
}

#[test]
fn png_pixels_are_exact_and_jpeg_pixels_close() {
    let scratch = Scratch::new("datasets-folder-pixels");
    write_pets(scratch.dir());
    let rgb = ImageFolder::open(scratch.dir(), ColorMode::Rgb, 3, 4).unwrap();
    // Item 2 is dog/b_rgb.png: channel planes of the written bytes, divided by 255.
    let image = rgb.get(2).unwrap().input;
    assert_eq!(image.dims, [3, 3, 4]);
    for c in 0..3 {
        for y in 0..3 {
            for x in 0..4 {
                let expected = f32::from(rgb_at(x, y)[c]) / 255.0;
                let at = c * 12 + y as usize * 4 + x as usize;
                assert_eq!(image.values[at], expected, "channel {c} at ({x}, {y})");
            }
        }
    }
    // A gray file read as RGB repeats its value in every channel.
    let gray_as_rgb = rgb.get(1).unwrap().input;
    for (y, x) in [(0, 0), (2, 3), (1, 2)] {
        let v = f32::from((x * 60 + y * 5) as u8) / 255.0;
        for c in 0..3 {
            assert_eq!(gray_as_rgb.values[c * 12 + y * 4 + x], v);
        }
    }
    // JPEG is lossy: a flat color comes back within a few levels.
    let jpeg = rgb.get(3).unwrap().input;
    for (c, level) in [200.0f32, 100.0, 50.0].iter().enumerate() {
        for v in &jpeg.values[c * 12..(c + 1) * 12] {
            assert!(
                (v * 255.0 - level).abs() <= 4.0,
                "channel {c}: {}",
                v * 255.0
            );
        }
    }

    let gray = ImageFolder::open(scratch.dir(), ColorMode::Gray, 3, 4).unwrap();
    let image = gray.get(1).unwrap().input;
    assert_eq!(image.dims, [1, 3, 4]);
    // Pixel (3, 2) of dog/a_gray.png was written as 3 * 60 + 2 * 5.
    assert_eq!(image.values[2 * 4 + 3], f32::from(3u8 * 60 + 2 * 5) / 255.0);
    // Color to gray as Pillow's convert("L"): L = 0.299 R + 0.587 G + 0.114 B, rounded.
    let luma = gray.get(2).unwrap().input;
    for y in 0..3 {
        for x in 0..4 {
            let [r, g, b] = rgb_at(x, y).map(f64::from);
            let expected = (0.299 * r + 0.587 * g + 0.114 * b).round();
            let got = f64::from(luma.values[y as usize * 4 + x as usize]) * 255.0;
            assert!(
                (got - expected).abs() < 1e-3,
                "({x}, {y}): {got} vs {expected}"
            );
        }
    }
}

#[test]
fn pure_colors_turn_gray_as_pillow_turns_them() {
    let scratch = Scratch::new("datasets-folder-primaries");
    std::fs::create_dir_all(scratch.join("c")).unwrap();
    let colors = [[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255]];
    image::RgbImage::from_fn(4, 1, |x, _| image::Rgb(colors[x as usize]))
        .save(scratch.join("c/primaries.png"))
        .unwrap();
    let folder = ImageFolder::open(scratch.dir(), ColorMode::Gray, 1, 4).unwrap();
    let values = folder.get(0).unwrap().input.values;
    // Pillow: Image.new("RGB", ...) of pure red, green, blue, white -> convert("L") gives
    // 76, 150, 29, 255.
    assert_eq!(values, [76.0, 150.0, 29.0, 255.0].map(|v: f32| v / 255.0));
}

#[test]
fn images_of_another_size_are_resized_or_an_error_naming_them() {
    let scratch = Scratch::new("datasets-folder-resize");
    std::fs::create_dir_all(scratch.join("c")).unwrap();
    // Left half black, right half white, 8x8.
    image::GrayImage::from_fn(8, 8, |x, _| image::Luma([if x < 4 { 0 } else { 255 }]))
        .save(scratch.join("c/halves.png"))
        .unwrap();
    image::RgbImage::from_pixel(6, 6, image::Rgb([10, 120, 240]))
        .save(scratch.join("c/solid.png"))
        .unwrap();

    let strict = ImageFolder::open(scratch.dir(), ColorMode::Gray, 4, 4).unwrap();
    let err = strict.get(0).unwrap_err().to_string();
    assert!(
        err.contains("halves.png")
            && err.contains("8 pixels wide and 8 high")
            && err.contains(".resize("),
        "{err}"
    );

    let gray = strict.resize(ResizeFilter::Bilinear);
    let halves = gray.get(0).unwrap().input.values;
    // Shrinking by 2: the outer columns average pixels of one half only; the inner two mix
    // both halves symmetrically.
    for row in halves.chunks(4) {
        assert_eq!((row[0], row[3]), (0.0, 1.0), "{row:?}");
        assert!(
            0.0 < row[1] && row[1] < 0.5 && row[2] > 0.5 && row[2] < 1.0,
            "{row:?}"
        );
        assert!((row[1] + row[2] - 1.0).abs() <= 1.0 / 255.0, "{row:?}");
    }
    // Any filter keeps a solid color.
    for filter in [
        ResizeFilter::Nearest,
        ResizeFilter::Bilinear,
        ResizeFilter::Bicubic,
        ResizeFilter::Lanczos3,
    ] {
        let rgb = ImageFolder::open(scratch.dir(), ColorMode::Rgb, 4, 4)
            .unwrap()
            .resize(filter);
        let solid = rgb.get(1).unwrap().input;
        assert_eq!(solid.dims, [3, 4, 4]);
        for (c, level) in [10.0f32, 120.0, 240.0].iter().enumerate() {
            assert!(
                solid.values[c * 16..(c + 1) * 16]
                    .iter()
                    .all(|v| *v == level / 255.0),
                "{filter:?} channel {c}: {:?}",
                &solid.values[c * 16..(c + 1) * 16]
            );
        }
    }
    // An upscale too.
    let big = ImageFolder::open(scratch.dir(), ColorMode::Gray, 16, 16)
        .unwrap()
        .resize(ResizeFilter::Bilinear);
    assert_eq!(big.get(1).unwrap().input.dims, [1, 16, 16]);
}

#[test]
fn bad_folders_and_files_are_errors_naming_them() {
    let scratch = Scratch::new("datasets-folder-errors");
    let err = ImageFolder::open(scratch.join("absent"), ColorMode::Rgb, 3, 4)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("absent") && err.contains("no such folder"),
        "{err}"
    );
    let err = ImageFolder::open(scratch.dir(), ColorMode::Rgb, 3, 4)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no class folders"), "{err}");

    write_pets(scratch.dir());
    std::fs::create_dir_all(scratch.join("empty")).unwrap();
    std::fs::write(scratch.join("empty/readme.md"), "no images here").unwrap();
    let err = ImageFolder::open(scratch.dir(), ColorMode::Rgb, 3, 4)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("empty") && err.contains("holds no image files"),
        "{err}"
    );
    std::fs::remove_dir_all(scratch.join("empty")).unwrap();
    assert!(ImageFolder::open(scratch.dir(), ColorMode::Rgb, 0, 4).is_err());

    // A file that is not an image, and a PNG cut short.
    std::fs::write(scratch.join("cat/garbage.png"), b"this is no PNG").unwrap();
    let png = std::fs::read(scratch.join("dog/b_rgb.png")).unwrap();
    std::fs::write(scratch.join("cat/truncated.png"), &png[..png.len() / 2]).unwrap();
    let folder = ImageFolder::open(scratch.dir(), ColorMode::Rgb, 3, 4).unwrap();
    let names: Vec<_> = folder.samples().iter().map(|(p, _)| p.clone()).collect();
    for name in ["garbage.png", "truncated.png"] {
        let index = names.iter().position(|p| p.ends_with(name)).unwrap();
        let err = folder.get(index).unwrap_err().to_string();
        assert!(
            err.contains(name) && err.contains("cannot be decoded"),
            "{err}"
        );
    }
    // The sound files still load, and the loader reports a bad one as an error.
    assert!(
        folder
            .get(names.iter().position(|p| p.ends_with("only.PNG")).unwrap())
            .is_ok()
    );
    let mut loader = DataLoader::new(folder, 2).unwrap();
    let results: Vec<_> = loader.epoch().collect();
    assert!(results.iter().any(|b| b.is_err()));
}

#[test]
fn a_png_header_claiming_a_huge_image_is_refused() {
    let scratch = Scratch::new("datasets-folder-bomb");
    std::fs::create_dir_all(scratch.join("c")).unwrap();
    std::fs::write(
        scratch.join("c/bomb.png"),
        common::png::header_claiming(100_000, 100_000),
    )
    .unwrap();
    let folder = ImageFolder::open(scratch.dir(), ColorMode::Rgb, 32, 32).unwrap();
    let err = folder.get(0).unwrap_err().to_string();
    assert!(
        err.contains("bomb.png")
            && err.contains("exceeds the decode limits")
            && err.contains("decode_limits"),
        "{err}"
    );
    // With the side limit lifted, the memory limit still refuses 40 GB of pixels.
    let folder = folder.decode_limits(1 << 20, 64 << 20);
    let err = folder.get(0).unwrap_err().to_string();
    assert!(err.contains("exceeds the decode limits"), "{err}");
}
