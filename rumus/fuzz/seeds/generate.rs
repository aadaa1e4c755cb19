//! Writes the seed inputs under `rumus/fuzz/seeds/<target>/`: small valid files of every
//! format, written by rumus's own writers where it has one, and framed for the drivers that
//! take options or several parts (see `drive/`). Run after a format change with
//! `cargo test --test fuzz_regressions -- --ignored write_seeds`.

use std::io::Write;
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;
use rumus::data::{Features, RecordWriter, Sample, Target};
use rumus::io::{Checkpoint, save_safetensors};

use crate::drive::checkpoint::{model_and_optimizer, train_step};
use crate::drive::scratch::Scratch;
use crate::drive::{csv, images, loader, weights};

fn put(root: &Path, target: &str, name: &str, bytes: &[u8]) {
    let dir = root.join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// An IDX file of unsigned bytes.
fn idx(dims: &[u32], values: impl IntoIterator<Item = u8>) -> Vec<u8> {
    let mut out = vec![0, 0, 8, dims.len() as u8];
    dims.iter().for_each(|d| out.extend(d.to_be_bytes()));
    out.extend(values);
    out
}

fn image(fill: f32, dims: &[usize]) -> Features {
    let n = dims.iter().product();
    Features::new((0..n).map(|i| fill + i as f32 / 8.0).collect(), dims).unwrap()
}

/// Samples of one shape, classified or with value targets.
fn samples(count: usize, classified: bool) -> Vec<Sample> {
    (0..count)
        .map(|i| {
            let input = image(i as f32, &[2, 2]);
            if classified {
                Sample::classified(input, i as i64 % 3)
            } else {
                Sample {
                    input,
                    target: Target::Values(image(-(i as f32), &[3])),
                }
            }
        })
        .collect()
}

/// The bytes `write` puts in a file.
fn written(write: impl FnOnce(&Path)) -> Vec<u8> {
    let scratch = Scratch::new().unwrap();
    let path = scratch.path("seed");
    write(&path);
    std::fs::read(&path).unwrap()
}

/// A record file of `payloads`, as `RecordWriter` writes it.
fn record_file(payloads: &[Vec<u8>]) -> Vec<u8> {
    written(|path| {
        let mut writer = RecordWriter::create(path).unwrap();
        for payload in payloads {
            writer.append(payload).unwrap();
        }
        writer.finish().unwrap();
    })
}

fn encoded(samples: &[Sample]) -> Vec<Vec<u8>> {
    samples.iter().map(|s| s.try_to_bytes().unwrap()).collect()
}

pub fn write_all(root: &Path) {
    // IDX files.
    let images_2x3x3 = idx(&[2, 3, 3], 0..18);
    put(root, "idx_reader", "images.idx", &images_2x3x3);
    put(root, "idx_reader", "images.idx.gz", &gzip(&images_2x3x3));
    put(root, "idx_reader", "labels.idx", &idx(&[4], [3, 1, 4, 1]));

    // Image and label files, and MNIST folders.
    let labels = idx(&[3], [1, 2, 9]);
    let pictures = idx(&[3, 2, 2], (0..12).map(|v| v * 20));
    let pair = |flags| images::frame(flags, &labels, &pictures);
    put(root, "image_set", "pair", &pair(0));
    put(
        root,
        "image_set",
        "pair_gzipped_here",
        &pair(images::GZIP_IMAGES | images::GZIP_LABELS),
    );
    let gzipped = images::frame(0, &gzip(&labels), &gzip(&pictures));
    put(root, "image_set", "pair_gzip_files", &gzipped);
    put(root, "image_set", "mnist_dir", &pair(images::MNIST_DIR));
    let gz_names = images::MNIST_DIR | 1 << 3 | images::GZIP_IMAGES | images::GZIP_LABELS;
    put(root, "image_set", "mnist_dir_gz_names", &pair(gz_names));
    put(
        root,
        "image_set",
        "mnist_dir_dot_names",
        &pair(images::MNIST_DIR | 2 << 3),
    );
    // 1000 blank 28 x 28 images in under a kilobyte: mutated dims make gzip bombs.
    let blank = gzip(&idx(
        &[1000, 28, 28],
        std::iter::repeat_n(0, 1000 * 28 * 28),
    ));
    let blank_labels = idx(&[1000], (0..1000).map(|i| (i % 10) as u8));
    put(
        root,
        "image_set",
        "blank_1000_gzip",
        &images::frame(0, &blank_labels, &blank),
    );

    // CSV under several options (see `drive::csv::options`).
    let labels_last = [vec![1 << 3], b"1,2.5,3\n-1,0,7\n0.125,1e3,1\n".to_vec()].concat();
    put(root, "csv_reader", "labels_last.csv", &labels_last);
    let header = b"a;b;c\n1;2;3\n\n4;5;6\n".to_vec();
    let header = [vec![1 | 1 << 1 | csv::THROUGH_A_FILE], header].concat();
    put(
        root,
        "csv_reader",
        "header_semicolons_no_labels.csv",
        &header,
    );
    let tabs = [vec![2 << 1 | 2 << 3], b"0\t0.5\t-2\n2\t1.5\t3\n".to_vec()].concat();
    put(root, "csv_reader", "tabs_label_first.csv", &tabs);
    assert!(csv::options(tabs[0]).label_column == Some(0));

    // Record files of encoded samples.
    let three = record_file(&encoded(&samples(3, true)));
    put(root, "record_reader", "three.rrec", &three);
    put(root, "record_file_open", "three.rrec", &three);
    let values = record_file(&encoded(&samples(2, false)));
    put(root, "record_file_open", "value_targets.rrec", &values);
    put(root, "record_file_open", "empty.rrec", &record_file(&[]));

    // Loader inputs: a configuration byte and records (see `drive::loader::Config`).
    let batches_of_two = loader::frame(1 | 1 << 4, &encoded(&samples(5, true)));
    put(
        root,
        "data_loader",
        "five_in_batches_of_two",
        &batches_of_two,
    );
    let shuffled = loader::frame(2 | 4 | 8 | 1 << 5, &encoded(&samples(7, false)));
    put(root, "data_loader", "seven_shuffled_drop_last", &shuffled);

    // Model weights for `drive::weights::Tiny`.
    rumus::manual_seed(1);
    let tiny = weights::Tiny::new().unwrap();
    put(
        root,
        "weights_loader",
        "tiny.safetensors",
        &written(|p| save_safetensors(&tiny, p).unwrap()),
    );

    // The GGUF file of every encoding rumus decodes, written by llama.cpp's gguf-py
    // (tests/fixtures/make_gguf_fixtures.py).
    let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/small.gguf");
    put(
        root,
        "gguf_reader",
        "small.gguf",
        &std::fs::read(gguf).unwrap(),
    );

    // Checkpoints of the model and optimizer `drive::checkpoint` restores into.
    let (model, mut optimizer) = model_and_optimizer().unwrap();
    let fresh = Checkpoint::capture(&model, &optimizer, None, 0, 0).unwrap();
    put(
        root,
        "checkpoint_structure",
        "fresh.safetensors",
        &fresh.to_bytes().unwrap(),
    );
    train_step(&model, &mut optimizer).unwrap();
    let stepped = Checkpoint::capture(&model, &optimizer, None, 0, 1).unwrap();
    put(
        root,
        "checkpoint_structure",
        "one_step.safetensors",
        &stepped.to_bytes().unwrap(),
    );
    put(
        root,
        "checkpoint_loader",
        "linear.safetensors",
        &stepped.to_bytes().unwrap(),
    );
    train_step(&model, &mut optimizer).unwrap();
    rumus::rng::with_global(|g| g.next_normal()); // leaves a spare normal in the state
    let full = Checkpoint::capture(&model, &optimizer, Some(3), 2, 17)
        .unwrap()
        .with_metadata("run", "seed")
        .with_metadata("best_loss", "0.25");
    put(
        root,
        "checkpoint_structure",
        "scheduler_and_metadata.safetensors",
        &full.to_bytes().unwrap(),
    );
    // Plain weights are no checkpoint, but a good start for one.
    let plain = written(|p| save_safetensors(&model, p).unwrap());
    put(root, "checkpoint_loader", "weights.safetensors", &plain);

    // ONNX models: the PyTorch exports the import tests run (an MLP, a CNN with and without
    // folded batch norms, a transformer encoder taking token ids), as they are.
    let exports = root.join("../../../tests/fixtures/onnx");
    for name in [
        "mlp.onnx",
        "cnn.onnx",
        "cnn_unfolded.onnx",
        "transformer.onnx",
    ] {
        let bytes = std::fs::read(exports.join(name)).unwrap();
        put(root, "onnx_import", name, &bytes);
    }
}
