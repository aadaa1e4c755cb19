//! Dataset building blocks against independent truths: `random_split` against PyTorch's
//! documented size rule and set arithmetic, the CIFAR-10 reader against records written here
//! by the format's specification, and the image folder against PNG and JPEG files written with
//! the `image` crate.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::scratch::Scratch;
use rumus::data::{
    DataLoader, Dataset, InMemory, SplitSizes, Subset, random_split, read_cifar10_batch,
    read_cifar10_dir, split_lengths,
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
