//! Every way a GPU runs an `f16` product, against the same product of the same rounded
//! operands summed in `f64` on the host: A and B each row- or column-major (the layouts a
//! linear layer and its gradients produce), `f16` results (products of `f16` tensors) and
//! `f32` ones (autocast's), tiles cut off at the matrix's edges, a bias read at an offset,
//! K split into ranges whose partial sums are added afterwards, and batches.
//!
//! On GPUs with matrix units these are `matmul_tensor`'s eight builds (one per layout pair and
//! result type) where the adapter offers `VK_NV_cooperative_matrix2`, else (or with
//! `RUMUS_GPU_NO_COOPMAT2`) `matmul_coop`'s; elsewhere (lavapipe) the tiled `f16` kernels. One test per case, so a case that hangs a GPU's kernel names itself.

mod common;

use common::gpu::{gpu, tensor};
use rumus::amp::autocast;
use rumus::prelude::*;

/// One product `[batch.., m, k] @ [batch.., k, n]` and how its operands are laid out.
#[derive(Clone, Copy)]
struct Case {
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    a_row_major: bool,
    b_row_major: bool,
    /// An `f32` result (autocast's product of `f32` tensors) instead of an `f16` one.
    f32_out: bool,
    /// A bias (autocast's linear layer), read this many elements into its buffer.
    bias_at: Option<usize>,
}

impl Case {
    /// Row-major operands, an `f16` result, no bias.
    const fn new(batch: usize, m: usize, k: usize, n: usize) -> Case {
        Case {
            batch,
            m,
            k,
            n,
            a_row_major: true,
            b_row_major: true,
            f32_out: false,
            bias_at: None,
        }
    }

    /// This product with A and B laid out as `layouts` says ("rr", "rc", "cr", "cc": row-
    /// or column-major) and an `f32` result if `f32_out`.
    const fn laid_out(self, layouts: &str, f32_out: bool) -> Case {
        let bytes = layouts.as_bytes();
        Case {
            a_row_major: bytes[0] == b'r',
            b_row_major: bytes[1] == b'r',
            f32_out,
            ..self
        }
    }

    /// With a bias read `offset` elements into its buffer (an `f32` result: autocast's).
    const fn biased(self, offset: usize) -> Case {
        Case {
            bias_at: Some(offset),
            f32_out: true,
            ..self
        }
    }
}

/// The operand `[batch.., rows, cols]` from `seed`, stored row-major, or column-major (as the
/// transpose of a contiguous `[batch.., cols, rows]`), values in [-0.5, 0.5).
fn operand(batch: usize, (rows, cols): (usize, usize), row_major: bool, seed: u64) -> DynTensor {
    let dims = |a: usize, b: usize| {
        if batch > 1 {
            vec![batch, a, b]
        } else {
            vec![a, b]
        }
    };
    let scaled = |t: DynTensor| t.mul_scalar(0.25).unwrap();
    if row_major {
        scaled(tensor(&dims(rows, cols), seed))
    } else {
        scaled(tensor(&dims(cols, rows), seed))
            .transpose(-1, -2)
            .unwrap()
    }
}

/// `t`'s values rounded to `f16`, in logical order.
fn rounded(t: &DynTensor) -> Vec<f64> {
    t.to_dtype(DType::F16).unwrap().to_f64_vec()
}

/// The product `case` asks for, computed on `device`: its values as read back, the same
/// values as a kernel after it read them (see below), and the host's `f64` sums of the same
/// rounded operands with, per element, the sum of the terms' magnitudes.
fn product_on(device: &Device, case: Case) -> (Vec<f64>, Vec<f64>, Vec<(f64, f64)>) {
    let Case { batch, m, k, n, .. } = case;
    let a = operand(batch, (m, k), case.a_row_major, 1 + m as u64);
    let b = operand(batch, (k, n), case.b_row_major, 2 + n as u64);
    let bias = case
        .bias_at
        .map(|at| tensor(&[at + n], 3).narrow(0, at, n).unwrap());
    let (ha, hb) = (rounded(&a), rounded(&b));
    let hbias = bias.as_ref().map(DynTensor::to_f64_vec);
    let mut expected = Vec::with_capacity(batch * m * n);
    for entry in 0..batch {
        let (ha, hb) = (&ha[entry * m * k..], &hb[entry * k * n..]);
        for i in 0..m {
            for j in 0..n {
                let terms = (0..k).map(|p| ha[i * k + p] * hb[p * n + j]);
                let (sum, magnitude) = terms.fold((0.0, 0.0), |(s, g), t| (s + t, g + t.abs()));
                let bias = hbias.as_ref().map_or(0.0, |bias| bias[j]);
                expected.push((sum + bias, magnitude + bias.abs()));
            }
        }
    }
    let on = |t: &DynTensor| t.to(device).unwrap();
    let (a, b) = (on(&a), on(&b));
    // Buffers the product's result may be taken from, left full of NaN (the pool hands a
    // freed buffer to the next request of its size): an element the kernel fails to write
    // reads NaN, not a fresh buffer's zero.
    let stale = DynTensor::zeros_on(&[batch * m * n], DType::F32, device)
        .unwrap()
        .add_scalar(f64::NAN)
        .unwrap();
    drop(stale.to_dtype(DType::F16).unwrap());
    drop(stale);
    let product = if case.f32_out {
        let _autocast = autocast();
        match &bias {
            // linear(x, w) = x @ w^T: w is B transposed (row-major B gives a transposed w).
            Some(bias) => a
                .linear(&b.transpose(-1, -2).unwrap(), Some(&on(bias)))
                .unwrap(),
            None => a.matmul(&b).unwrap(),
        }
    } else {
        // f16 copies that keep each operand's layout.
        let half = |t: &DynTensor, row_major: bool| {
            if row_major {
                t.to_dtype(DType::F16).unwrap()
            } else {
                let stored = t.transpose(-1, -2).unwrap().to_dtype(DType::F16).unwrap();
                stored.transpose(-1, -2).unwrap()
            }
        };
        half(&a, case.a_row_major)
            .matmul(&half(&b, case.b_row_major))
            .unwrap()
    };
    assert!(product.device().is_gpu());
    let dtype = if case.f32_out { DType::F32 } else { DType::F16 };
    assert_eq!(product.dtype(), dtype);
    let dims: Vec<usize> = [batch, m, n]
        .into_iter()
        .skip(usize::from(batch == 1))
        .collect();
    assert_eq!(product.dims(), dims);
    // A kernel that reads the product in the same submission as the product's own (an
    // exact widening of an f16 result, a multiplication by one of an f32 one), read back
    // first: a store that lands too late for the next kernel on the GPU would still be in
    // place by the time the host reads.
    let read_by_a_kernel = if case.f32_out {
        product.mul_scalar(1.0).unwrap()
    } else {
        product.to_dtype(DType::F32).unwrap()
    };
    let read_by_a_kernel = read_by_a_kernel.to_f64_vec();
    (product.to_f64_vec(), read_by_a_kernel, expected)
}

/// Runs `case` on the GPU (if there is one) and checks every element, as read back and as
/// the next kernel read it: within the `f32` rounding of its sum (relative to the terms'
/// magnitudes), plus the `f16` rounding of the result for `f16` products. The message counts
/// the wrong elements and shows the first.
fn check(case: Case) {
    let Some(device) = gpu() else { return };
    let (read_back, read_by_a_kernel, expected) = product_on(&device, case);
    check_values(case, "read back", &read_back, &expected);
    check_values(case, "read by a kernel", &read_by_a_kernel, &expected);
}

/// Checks the values of `case`'s product (`how` they were read) against `expected`.
fn check_values(case: Case, how: &str, actual: &[f64], expected: &[(f64, f64)]) {
    let wrong: Vec<(usize, f64, f64)> = actual
        .iter()
        .zip(expected)
        .enumerate()
        .filter(|(_, (got, (want, magnitude)))| {
            let f16_rounding = if case.f32_out {
                0.0
            } else {
                want.abs() / 1024.0
            };
            let tolerance = 1e-5 * magnitude + f16_rounding + 1e-6;
            got.is_nan() || (*got - want).abs() > tolerance
        })
        .map(|(at, (&got, &(want, _)))| (at, got, want))
        .collect();
    if let Some(&(at, got, want)) = wrong.first() {
        let (entry, row, col) = (at / (case.m * case.n), at / case.n % case.m, at % case.n);
        panic!(
            "{how}: {} of {} elements wrong; the first, batch {entry} row {row} column {col}: got {got}, expected {want}",
            wrong.len(),
            actual.len()
        );
    }
}

/// One test per case, named for it.
macro_rules! cases {
    ($($name:ident: $case:expr;)*) => {
        $(
            #[test]
            fn $name() {
                check($case);
            }
        )*
    };
}

/// Whole 128x128 tiles.
const WHOLE: Case = Case::new(1, 256, 256, 256);
/// Tiles cut off along M and N, and a K that is not a multiple of the kernels' K step.
const EDGES: Case = Case::new(1, 136, 72, 200);
/// A matrix smaller than one tile.
const SMALL: Case = Case::new(1, 24, 40, 40);
/// A long K against few tiles: split into ranges when the result is `f32`.
const LONG_K: Case = Case::new(1, 16, 1024, 8);
/// A linear layer's weight gradient over many rows (`g^T @ x`, K = 2,048).
const TALL_K: Case = Case::new(1, 256, 2048, 256);
/// A linear layer whose last column of tiles is partial.
const LINEAR: Case = Case::new(1, 256, 384, 320);
/// A K shorter than one of the kernels' K steps (the gradients of a layer of 8 or 16).
const SHORT_K: Case = Case::new(1, 16, 8, 1024);
const BATCHED: Case = Case::new(2, 128, 256, 128);

cases! {
    whole_rr_f16: WHOLE.laid_out("rr", false);
    whole_rc_f16: WHOLE.laid_out("rc", false);
    whole_cr_f16: WHOLE.laid_out("cr", false);
    whole_cc_f16: WHOLE.laid_out("cc", false);
    whole_rr_f32: WHOLE.laid_out("rr", true);
    whole_rc_f32: WHOLE.laid_out("rc", true);
    whole_cr_f32: WHOLE.laid_out("cr", true);
    whole_cc_f32: WHOLE.laid_out("cc", true);
    edges_rr_f16: EDGES.laid_out("rr", false);
    edges_rc_f16: EDGES.laid_out("rc", false);
    edges_cr_f16: EDGES.laid_out("cr", false);
    edges_cc_f16: EDGES.laid_out("cc", false);
    edges_rr_f32: EDGES.laid_out("rr", true);
    edges_rc_f32: EDGES.laid_out("rc", true);
    edges_cr_f32: EDGES.laid_out("cr", true);
    edges_cc_f32: EDGES.laid_out("cc", true);
    small_rr_f16: SMALL.laid_out("rr", false);
    small_rc_f32: SMALL.laid_out("rc", true);
    small_cr_f32: SMALL.laid_out("cr", true);
    small_linear_bias: SMALL.laid_out("rc", true).biased(0);
    long_k_rc_f32: LONG_K.laid_out("rc", true);
    long_k_linear_bias: LONG_K.laid_out("rc", true).biased(0);
    tall_k_cr_f32: TALL_K.laid_out("cr", true);
    tall_k_rr_f32: TALL_K.laid_out("rr", true);
    linear_no_bias: LINEAR.laid_out("rc", true);
    linear_bias_at_0: LINEAR.laid_out("rc", true).biased(0);
    linear_bias_at_2: LINEAR.laid_out("rc", true).biased(2);
    linear_bias_at_4: LINEAR.laid_out("rc", true).biased(4);
    linear_row_major_weight_bias_at_2: LINEAR.laid_out("rr", true).biased(2);
    edges_linear_bias_at_4: EDGES.laid_out("rc", true).biased(4);
    small_linear_k32_bias: Case::new(1, 24, 32, 40).laid_out("rc", true).biased(0);
    short_k_rr_f16: SHORT_K.laid_out("rr", false);
    short_k_rr_f32: SHORT_K.laid_out("rr", true);
    short_k_cr_f32: Case::new(1, 8, 16, 1024).laid_out("cr", true);
    tall_linear_bias: Case::new(1, 2048, 256, 256).laid_out("rc", true).biased(0);
    batched_rr_f16: BATCHED.laid_out("rr", false);
    batched_rr_f32: BATCHED.laid_out("rr", true);
    batched_cc_f32: BATCHED.laid_out("cc", true);
}
