//! Matrices in GGML's 4- and 8-bit blocks (`rumus::nn::block_quantized`): quantization
//! writes the bytes llama.cpp's reference quantizer (`gguf-py`) writes, and products with
//! them stay within the bound that rounding the activations to int8 per block of 32 allows
//! of the exact product of the dequantized weights.

mod common;

use std::path::PathBuf;

use common::fixture_file::case;
use rumus::DynTensor;
use rumus::io::GgufFile;
use rumus::nn::block_quantized::{BlockFormat, BlockQuantized};

const FORMATS: [BlockFormat; 3] = [BlockFormat::Q4_0, BlockFormat::Q4_1, BlockFormat::Q8_0];

fn small_file() -> GgufFile {
    GgufFile::open(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/small.gguf"))
        .unwrap()
}

#[test]
fn quantizing_writes_the_blocks_llama_cpp_writes() {
    let sources = case(include_str!("fixtures/gguf.txt"), "small_sources");
    let file = small_file();
    for (name, format) in [
        ("t.q4_0", BlockFormat::Q4_0),
        ("t.q4_1", BlockFormat::Q4_1),
        ("t.q8_0", BlockFormat::Q8_0),
    ] {
        let source = &sources[name];
        let values: Vec<f32> = source.values.iter().map(|&v| v as f32).collect();
        let weights = DynTensor::from_vec(values, &source.dims).unwrap();
        let ours = BlockQuantized::quantize(format, &weights).unwrap();
        assert_eq!(ours.to_blocks(), file.raw(name).unwrap(), "{name}");
        let theirs = file.quantized(name).unwrap();
        assert_eq!((theirs.format(), theirs.dims()), (format, ours.dims()));
        assert_eq!(
            theirs.dequantize().unwrap().to_f64_vec(),
            file.tensor(name).unwrap().to_f64_vec()
        );
    }
    let refused = file.quantized("t.f32").unwrap_err().to_string();
    assert!(refused.contains("not one of the block types"), "{refused}");
}

/// Checks `q.product(x)` against the f64 product of `x` and the dequantized weights: each
/// activation moves by at most half its block's int8 step (`max|x_block| / 254`) when it is
/// rounded, so output `j` may differ by `sum_t |w[j, t]| step(t) / 2`, plus f32 rounding.
fn check_product(q: &BlockQuantized, x: &DynTensor) {
    let [n, k] = q.dims();
    let w = q.dequantize().unwrap().to_f64_vec();
    let xs = x.to_f64_vec();
    let got = q.product(x).unwrap();
    let m = xs.len() / k;
    assert_eq!(got.dims(), [m, n]);
    let got = got.to_f64_vec();
    let mut worst_share = 0.0f64;
    for i in 0..m {
        let row = &xs[i * k..][..k];
        let steps: Vec<f64> = row
            .chunks(32)
            .map(|b| b.iter().fold(0.0f64, |p, v| p.max(v.abs())) / 127.0)
            .collect();
        for j in 0..n {
            let weights = &w[j * k..][..k];
            let exact: f64 = weights.iter().zip(row).map(|(a, b)| a * b).sum();
            let magnitude: f64 = weights.iter().zip(row).map(|(a, b)| (a * b).abs()).sum();
            let bound: f64 = weights
                .iter()
                .enumerate()
                .map(|(t, a)| a.abs() * steps[t / 32] / 2.0)
                .sum::<f64>()
                + 1e-5 * magnitude;
            let error = (got[i * n + j] - exact).abs();
            assert!(
                error <= bound,
                "{:?} output [{i}, {j}]: {} vs exact {exact} (bound {bound})",
                q.format(),
                got[i * n + j]
            );
            worst_share = worst_share.max(error / bound);
        }
    }
    // The bound is not vacuous: rounding errors partly cancel, but some reach a share of it.
    assert!(
        worst_share > 0.01,
        "largest error {worst_share} of the bound"
    );
}

#[test]
fn products_stay_within_the_activation_rounding_of_the_exact_product() {
    for format in FORMATS {
        for (n, k, m, seed) in [(37, 96, 1, 1), (64, 256, 3, 2), (5, 32, 8, 3)] {
            let w = common::randn(&[n, k], seed).mul_scalar(0.2).unwrap();
            let q = BlockQuantized::quantize(format, &w).unwrap();
            assert_eq!(q.bytes(), n * k / 32 * format.block_bytes());
            check_product(&q, &common::randn(&[m, k], seed + 10));
        }
        // Rows of no weights: products of nothing, zeros.
        let empty = BlockQuantized::from_blocks(format, [3, 0], Vec::new()).unwrap();
        let zeros = empty.product(&DynTensor::zeros(&[2, 0], rumus::DType::F32).unwrap());
        assert_eq!(zeros.unwrap().to_f64_vec(), vec![0.0; 6]);
        // A batch of rows in any leading dims, as `linear` takes them.
        let q = BlockQuantized::quantize(format, &common::randn(&[16, 64], 4)).unwrap();
        let x = common::randn(&[2, 3, 64], 5);
        let batched = q.product(&x).unwrap();
        assert_eq!(batched.dims(), [2, 3, 16]);
        let flat = q.product(&x.reshape(&[6, 64]).unwrap()).unwrap();
        assert_eq!(batched.to_f64_vec(), flat.to_f64_vec());
    }
}

#[test]
fn rows_are_the_dequantized_rows() {
    for format in FORMATS {
        let q = BlockQuantized::quantize(format, &common::randn(&[9, 64], 6)).unwrap();
        let all = q.dequantize().unwrap();
        let picked = q.rows(&[4, 0, 4]).unwrap();
        let ids = DynTensor::from_vec(vec![4i64, 0, 4], &[3]).unwrap();
        assert_eq!(
            picked.to_f64_vec(),
            all.index_select(0, &ids).unwrap().to_f64_vec()
        );
    }
}

#[test]
fn bad_shapes_and_lengths_are_errors_that_say_what_is_wrong() {
    let says = |e: rumus::Error, what: &str| {
        let message = e.to_string();
        assert!(message.contains(what), "{message}");
    };
    says(
        BlockQuantized::from_blocks(BlockFormat::Q4_0, [2, 32], vec![0; 35]).unwrap_err(),
        "takes 36 bytes; 35 were given",
    );
    says(
        BlockQuantized::from_blocks(BlockFormat::Q8_0, [2, 40], vec![0; 68]).unwrap_err(),
        "do not split into blocks of 32",
    );
    says(
        BlockQuantized::from_blocks(BlockFormat::Q8_0, [usize::MAX, 64], vec![]).unwrap_err(),
        "more than memory holds",
    );
    says(
        BlockQuantized::quantize(BlockFormat::Q4_1, &common::randn(&[3, 33], 7)).unwrap_err(),
        "pad them",
    );
    says(
        BlockQuantized::quantize(BlockFormat::Q4_1, &common::randn(&[2, 3, 32], 7)).unwrap_err(),
        "a matrix is [rows, cols]",
    );
    let q = BlockQuantized::quantize(BlockFormat::Q8_0, &common::randn(&[4, 32], 8)).unwrap();
    says(
        q.product(&common::randn(&[2, 64], 9)).unwrap_err(),
        "its last dim must be the weights' 32 columns",
    );
    says(
        q.rows(&[4]).unwrap_err(),
        "row 4 is outside the matrix's 4 rows",
    );
    says(q.rows(&[-1]).unwrap_err(), "row -1 is outside");
}

#[test]
fn a_non_finite_activation_gives_nan_outputs_not_a_wrong_number() {
    let q = BlockQuantized::quantize(BlockFormat::Q4_1, &common::randn(&[3, 64], 10)).unwrap();
    let mut x = vec![0.5f32; 64];
    x[40] = f32::INFINITY;
    let out = q
        .product(&DynTensor::from_vec(x, &[1, 64]).unwrap())
        .unwrap();
    assert!(out.to_f64_vec().iter().all(|v| v.is_nan()));
}
