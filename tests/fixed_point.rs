//! Fixed-point inference (`rumus::nn::fixed_point`): layers against a reference written
//! from the documented arithmetic (i64 sums with the i32 saturation applied step by step),
//! outputs equal across thread counts, close to the f32 layers, and byte for byte equal to
//! a committed golden file (`tests/fixtures/fixed_point_golden.bin`), so a change of
//! machine, compiler or kernel that moves one bit fails here. Weights and inputs come from
//! an integer generator and are exact in f32, so the golden file does not depend on any
//! float function of the machine that checks it.

use std::path::Path;

use rumus::nn::fixed_point::{ACT_FRAC_BITS, FixedConv2d, FixedLinear, FixedTensor};
use rumus::nn::{Conv2d, Linear};
use rumus::prelude::*;

/// Deterministic integers in `-range..range` (xorshift).
fn integers(n: usize, seed: u64, range: i64) -> Vec<i64> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % (2 * range as u64)) as i64 - range
        })
        .collect()
}

/// f32 values that are multiples of 1/1024 in (-0.5, 0.5): exact in every format involved.
fn exact_weights(dims: &[usize], seed: u64) -> DynTensor {
    let n = dims.iter().product();
    let values = integers(n, seed, 512)
        .iter()
        .map(|&v| v as f32 / 1024.0)
        .collect();
    DynTensor::from_vec(values, dims).unwrap()
}

fn linear<const I: usize, const O: usize>(seed: u64) -> Linear<I, O> {
    let mut layer = Linear::<I, O>::new().unwrap();
    layer.weight = exact_weights(&[O, I], seed);
    layer.bias = Some(exact_weights(&[O], seed + 1));
    layer
}

fn conv<const I: usize, const O: usize, const K: usize>(
    seed: u64,
    padding: usize,
) -> Conv2d<I, O, K> {
    let mut layer = Conv2d::<I, O, K>::with_options(1, padding, 1).unwrap();
    layer.weight = exact_weights(&[O, I, K, K], seed);
    layer.bias = Some(exact_weights(&[O], seed + 1));
    layer
}

/// Q7.8 inputs in (-4, 4).
fn input(dims: &[usize], seed: u64) -> FixedTensor {
    let values = integers(dims.iter().product(), seed, 1024)
        .iter()
        .map(|&v| v as i16)
        .collect();
    FixedTensor::from_raw(values, dims).unwrap()
}

/// The documented arithmetic, written out: weights `round(w 2^f)`, bias `round(b 2^(f+8))`,
/// the i32 sum saturated after every product, then `(acc + 2^(f-1)) >> f` saturated to i16.
fn reference_linear(x: &[i16], weight: &DynTensor, bias: &DynTensor, frac: u32) -> Vec<i16> {
    let (rows, cols) = (weight.dims()[0], weight.numel() / weight.dims()[0]);
    let w: Vec<i64> = weight
        .to_f64_vec()
        .iter()
        .map(|v| (v * f64::from(1u32 << frac)).round() as i64)
        .collect();
    let b: Vec<i64> = bias
        .to_f64_vec()
        .iter()
        .map(|v| (v * f64::from(1u32 << (frac + ACT_FRAC_BITS))).round() as i64)
        .collect();
    let mut out = Vec::new();
    for row in x.chunks(cols) {
        for j in 0..rows {
            let mut acc = b[j];
            for t in 0..cols {
                acc = (acc + i64::from(row[t]) * w[j * cols + t])
                    .clamp(i64::from(i32::MIN), i64::from(i32::MAX));
            }
            let shifted = if frac == 0 {
                acc
            } else {
                (acc + (1 << (frac - 1))) >> frac
            };
            out.push(shifted.clamp(-32768, 32767) as i16);
        }
    }
    out
}

#[test]
fn linear_follows_the_documented_arithmetic() {
    let layer = linear::<40, 7>(1);
    let fixed = FixedLinear::from_linear(&layer).unwrap();
    // Weights below 0.5 in magnitude get 12 bits: 2^13 * 0.5 = 4096.
    assert_eq!(fixed.frac_bits(), 13);
    let x = input(&[3, 40], 2);
    let expected = reference_linear(x.raw(), &layer.weight, layer.bias.as_ref().unwrap(), 13);
    assert_eq!(fixed.forward(&x).unwrap().raw(), expected.as_slice());
    // Saturation: inputs at the top of the range with weights of one sign overflow i32
    // nowhere here, but the i16 result saturates and must still match.
    let big = FixedTensor::from_raw(vec![i16::MAX; 40], &[1, 40]).unwrap();
    let expected = reference_linear(big.raw(), &layer.weight, layer.bias.as_ref().unwrap(), 13);
    assert_eq!(fixed.forward(&big).unwrap().raw(), expected.as_slice());
}

/// A convolution is the linear map of each window: checked through the reference linear.
#[test]
fn convolution_is_the_linear_map_of_each_window() {
    let layer = conv::<2, 3, 3>(3, 1);
    let fixed = FixedConv2d::from_conv2d(&layer).unwrap();
    let x = input(&[2, 2, 5, 5], 4);
    let out = fixed.forward(&x).unwrap();
    assert_eq!(out.dims(), &[2, 3, 5, 5]);
    let at = |n: usize, c: usize, y: isize, x_: isize| -> i16 {
        if (0..5).contains(&y) && (0..5).contains(&x_) {
            x.raw()[((n * 2 + c) * 5 + y as usize) * 5 + x_ as usize]
        } else {
            0
        }
    };
    let weight = layer.weight.reshape(&[3, 18]).unwrap();
    for n in 0..2 {
        for oy in 0..5 {
            for ox in 0..5 {
                let window: Vec<i16> = (0..2)
                    .flat_map(|c| (0..3).flat_map(move |i| (0..3).map(move |j| (c, i, j))))
                    .map(|(c, i, j)| at(n, c, oy + i as isize - 1, ox + j as isize - 1))
                    .collect();
                let expected = reference_linear(
                    &window,
                    &weight,
                    layer.bias.as_ref().unwrap(),
                    fixed.frac_bits(),
                );
                for (oc, &e) in expected.iter().enumerate() {
                    assert_eq!(
                        out.raw()[((n * 3 + oc) * 5 + oy as usize) * 5 + ox as usize],
                        e
                    );
                }
            }
        }
    }
}

struct Models {
    fc1: FixedLinear,
    fc2: FixedLinear,
    conv1: FixedConv2d,
    conv2: FixedConv2d,
    head: FixedLinear,
}

impl Models {
    fn new() -> Models {
        Models {
            fc1: FixedLinear::from_linear(&linear::<64, 32>(10)).unwrap(),
            fc2: FixedLinear::from_linear(&linear::<32, 10>(11)).unwrap(),
            conv1: FixedConv2d::from_conv2d(&conv::<1, 4, 3>(12, 1)).unwrap(),
            conv2: FixedConv2d::from_conv2d(&conv::<4, 8, 3>(13, 0)).unwrap(),
            head: FixedLinear::from_linear(&linear::<32, 10>(14)).unwrap(),
        }
    }

    /// The MLP's and the CNN's outputs on fixed inputs, as little-endian bytes.
    fn outputs(&self) -> Vec<u8> {
        let mlp = self
            .fc2
            .forward(&self.fc1.forward(&input(&[16, 64], 20)).unwrap().relu())
            .unwrap();
        let h = self
            .conv1
            .forward(&input(&[16, 1, 8, 8], 21))
            .unwrap()
            .relu()
            .max_pool2d(2)
            .unwrap();
        let h = self.conv2.forward(&h).unwrap().relu().flatten();
        let cnn = self.head.forward(&h).unwrap();
        mlp.raw()
            .iter()
            .chain(cnn.raw())
            .flat_map(|v| v.to_le_bytes())
            .collect()
    }
}

#[test]
fn outputs_match_the_golden_file_on_any_thread_count() {
    let models = Models::new();
    let on = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| models.outputs())
    };
    let (one, two, three) = (on(1), on(2), on(3));
    assert_eq!(one, two);
    assert_eq!(one, three);
    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fixed_point_golden.bin");
    if std::env::var_os("RUMUS_WRITE_GOLDEN").is_some() {
        std::fs::write(&golden, &one).unwrap();
    }
    let expected = std::fs::read(&golden).unwrap();
    assert_eq!(one.len(), 2 * 16 * 10 * 2);
    assert!(
        one == expected,
        "the outputs differ from tests/fixtures/fixed_point_golden.bin"
    );
}

/// Close to the f32 layers it came from (Q7.8 steps are 1/256).
#[test]
fn close_to_the_f32_model() {
    let (fc1, fc2) = (linear::<64, 32>(10), linear::<32, 10>(11));
    let x = input(&[16, 64], 20);
    let fixed = FixedLinear::from_linear(&fc2)
        .unwrap()
        .forward(
            &FixedLinear::from_linear(&fc1)
                .unwrap()
                .forward(&x)
                .unwrap()
                .relu(),
        )
        .unwrap()
        .to_f32()
        .unwrap();
    let exact = fc2
        .forward_dyn(
            &fc1.forward_dyn(&x.to_f32().unwrap())
                .unwrap()
                .relu()
                .unwrap(),
        )
        .unwrap();
    for (a, b) in fixed.to_f64_vec().iter().zip(exact.to_f64_vec()) {
        assert!((a - b).abs() < 0.02, "{a} against {b}");
    }
}

#[test]
fn misuse_is_an_error() {
    let fixed = FixedLinear::from_linear(&linear::<4, 3>(1)).unwrap();
    assert!(fixed.forward(&input(&[2, 5], 1)).is_err());
    assert!(FixedTensor::from_raw(vec![0; 3], &[2, 2]).is_err());
    let conv = FixedConv2d::from_conv2d(&conv::<1, 2, 3>(2, 0)).unwrap();
    assert!(conv.forward(&input(&[1, 1, 2, 2], 3)).is_err());
    assert!(conv.forward(&input(&[1, 2, 5, 5], 3)).is_err());
    assert!(input(&[3, 4], 1).max_pool2d(2).is_err());
    let mut nan = linear::<4, 3>(1);
    nan.weight = DynTensor::full(&[3, 4], f64::NAN, DType::F32).unwrap();
    assert!(FixedLinear::from_linear(&nan).is_err());
}
