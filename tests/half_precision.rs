//! The `f16` dtype: rounding from wider types and matrix products against PyTorch
//! (`tests/fixtures/half.txt`, written by `make_half_fixtures.py`), the GPU's packed `f16`
//! (casts, copies, transfers, products on the tiled kernels or on cooperative matrices)
//! against the CPU, and the errors of the ops `f16` does not enter.
//!
//! The GPU tests run on lavapipe in CI (which has no cooperative matrices: products there
//! take the tiled kernels); on an adapter with them, `RUMUS_GPU_NO_COOP=1` runs the tiled
//! path instead.

mod common;

use common::fixture_file::assert_same_bits;
use common::gpu::{gpu, tensor};
use rumus::{DType, DynTensor, f16, no_grad};

const FIXTURES: &str = include_str!("fixtures/half.txt");

fn fixture(name: &str) -> std::collections::BTreeMap<String, common::fixture_file::FixtureTensor> {
    common::fixture_file::case(FIXTURES, name)
}

fn halves(t: &DynTensor) -> Vec<f16> {
    assert_eq!(t.dtype(), DType::F16);
    t.to_vec::<f16>().unwrap()
}

/// One unit in the last place of an f16 near `x` (the subnormal spacing below 2^-14).
fn half_ulp(x: f64) -> f64 {
    if x.abs() < 2f64.powi(-14) {
        2f64.powi(-24)
    } else {
        2f64.powi(x.abs().log2().floor() as i32 - 10)
    }
}

/// How far an f16 product computed in f32 may lie from another such product of the same
/// operands: each was rounded to f16 once (an ulp between them at most) after an f32 sum of
/// K terms in its own order, which errs by at most about K 2^-24 sum |a_i b_i| (doubled for
/// matrix units that may not round every partial sum to nearest).
fn product_tolerances(a: &DynTensor, b: &DynTensor) -> Vec<f64> {
    let wide = |t: &DynTensor| {
        t.to(&rumus::Device::Cpu)
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .abs()
            .unwrap()
    };
    let k = *a.dims().last().unwrap() as f64;
    let magnitude = wide(a).matmul(&wide(b)).unwrap().to_f64_vec();
    magnitude
        .iter()
        .map(|s| 2.0 * k * 2f64.powi(-24) * s)
        .collect()
}

fn assert_products_agree(what: &str, actual: &[f16], expected: &[f64], tolerances: &[f64]) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths differ");
    for (i, ((a, e), t)) in actual.iter().zip(expected).zip(tolerances).enumerate() {
        let a = a.to_f64();
        assert!(
            (a - e).abs() <= half_ulp(*e) + t,
            "{what}[{i}]: got {a}, expected {e} (tolerance {})",
            half_ulp(*e) + t
        );
    }
}

#[test]
fn rounding_to_f16_matches_pytorch() {
    let case = fixture("to_half");
    let expected = halves(&case["half"].to_tensor());
    common::fixture_file::assert_rounds_as_expected(&case["input"].to_tensor(), &expected);
}

#[test]
fn f16_matrix_products_match_pytorch() {
    for name in ["matmul_2d", "matmul_broadcast"] {
        let case = fixture(name);
        let (a, b) = (case["a"].to_tensor(), case["b"].to_tensor());
        let out = a.matmul(&b).unwrap();
        assert_eq!(out.dims(), case["out"].dims.as_slice(), "{name}: shape");
        let tolerances = product_tolerances(&a, &b);
        assert_products_agree(name, &halves(&out), &case["out"].values, &tolerances);
    }
}

#[test]
fn f16_views_copy_and_convert_on_the_host() {
    let x = DynTensor::from_vec(
        (0..12).map(|i| f16::from_f32(i as f32 * 0.5)).collect(),
        &[3, 4],
    )
    .unwrap();
    let t = x.transpose(0, 1).unwrap().contiguous().unwrap();
    assert_eq!(
        t.to_vec::<f16>().unwrap()[..3],
        [f16::from_f32(0.0), f16::from_f32(2.0), f16::from_f32(4.0)]
    );
    let ints = x.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(ints, (0..12).map(|i| i / 2).collect::<Vec<i64>>());
    let full = DynTensor::full(&[3], 65519.0, DType::F16).unwrap();
    assert_eq!(
        full.to_vec::<f16>().unwrap(),
        vec![f16::from_f32(65504.0); 3]
    );
}

#[test]
fn f16_state_round_trips_through_safetensors() {
    let dir = common::scratch::Scratch::new("half_safetensors");
    let path = dir.join("weights.safetensors");
    let w = tensor(&[5, 3], 7).to_dtype(DType::F16).unwrap();
    rumus::io::write_state(&vec![("w".to_string(), w.clone())], &path).unwrap();
    let read = rumus::io::read_state(&path).unwrap();
    assert_eq!(read[0].0, "w");
    assert_same_bits("safetensors", &halves(&read[0].1), &halves(&w));
}

#[test]
fn ops_f16_does_not_enter_are_errors_that_say_what_to_do() {
    let x = tensor(&[2, 3], 1).to_dtype(DType::F16).unwrap();
    let message = x.exp().unwrap_err().to_string();
    assert!(message.contains("to_dtype(DType::F32)"), "{message}");
    let message = x.clone().requires_grad_().unwrap_err().to_string();
    assert!(message.contains("f16"), "{message}");
    // A cast of a tracked tensor would cut its graph: an error, unless gradients are off.
    let w = tensor(&[2, 3], 2).requires_grad_().unwrap();
    let message = w.to_dtype(DType::F16).unwrap_err().to_string();
    assert!(message.contains("requires grad"), "{message}");
    let _off = no_grad();
    assert_eq!(w.to_dtype(DType::F16).unwrap().dtype(), DType::F16);
}

/// f32 values covering what rounding to f16 meets: the fixture's edges and spread.
fn rounding_inputs() -> DynTensor {
    fixture("to_half")["input"].to_tensor()
}

#[test]
fn gpu_casts_to_and_from_f16_match_the_cpu_bit_for_bit() {
    let Some(device) = gpu() else { return };
    let x = rounding_inputs();
    let on_gpu = x.to(&device).unwrap().to_dtype(DType::F16).unwrap();
    assert!(on_gpu.device().is_gpu());
    let expected = halves(&x.to_dtype(DType::F16).unwrap());
    assert_same_bits("gpu f32 -> f16", &halves(&on_gpu), &expected);
    let back = on_gpu
        .to_dtype(DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let host_back = x
        .to_dtype(DType::F16)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap();
    assert_eq!(back, host_back.to_vec::<f32>().unwrap());
    // Strided sources and an odd element count (the last word half empty).
    let m = tensor(&[7, 5], 3);
    let strided = m
        .to(&device)
        .unwrap()
        .transpose(0, 1)
        .unwrap()
        .to_dtype(DType::F16)
        .unwrap();
    let host = m.transpose(0, 1).unwrap().to_dtype(DType::F16).unwrap();
    assert_same_bits("gpu transposed -> f16", &halves(&strided), &halves(&host));
    // f16 views: a transposed copy, a slice starting mid-word, casts to i64 and bool.
    let h = m.to_dtype(DType::F16).unwrap();
    let hg = h.to(&device).unwrap();
    let copy = |t: &DynTensor| halves(&t.transpose(0, 1).unwrap().contiguous().unwrap());
    assert_same_bits("gpu f16 transpose", &copy(&hg), &copy(&h));
    let slice = |t: &DynTensor| halves(&t.reshape(&[35]).unwrap().narrow(0, 3, 17).unwrap());
    assert_same_bits("gpu f16 slice", &slice(&hg), &slice(&h));
    for dtype in [DType::I64, DType::Bool] {
        let (c, g) = (h.to_dtype(dtype).unwrap(), hg.to_dtype(dtype).unwrap());
        assert_eq!(c.to_f64_vec(), g.to_f64_vec(), "f16 -> {dtype}");
    }
    let filled = DynTensor::full(&[5], -0.1, DType::F16)
        .unwrap()
        .to(&device)
        .unwrap();
    let filled_on_gpu = {
        let _on = device.set_default();
        DynTensor::full(&[5], -0.1, DType::F16).unwrap()
    };
    assert!(filled_on_gpu.device().is_gpu());
    assert_same_bits("gpu full", &halves(&filled_on_gpu), &halves(&filled));
}

#[test]
fn gpu_f16_matrix_products_match_the_cpu() {
    let Some(device) = gpu() else { return };
    let half = |dims: &[usize], seed: u64| tensor(dims, seed).to_dtype(DType::F16).unwrap();
    // The tiled kernels take any product; cooperative matrices (where the adapter has them)
    // take M, N and K multiples of 8 and 16-byte aligned rows: the "aligned" cases.
    let cases: Vec<(&str, DynTensor, DynTensor)> = vec![
        // Ragged: no edge is a multiple of any tile.
        ("ragged", half(&[37, 45], 1), half(&[45, 29], 2)),
        // Several tiles each way and a K with a partial slice.
        ("several tiles", half(&[130, 70], 3), half(&[70, 260], 4)),
        // x @ W^T: the right operand transposed (strided), a batch folded into rows.
        (
            "transposed",
            half(&[2, 9, 33], 5),
            half(&[17, 33], 6).transpose(0, 1).unwrap(),
        ),
        // A transposed left operand and a batch of distinct matrices.
        (
            "batched",
            half(&[3, 20, 12], 7).transpose(1, 2).unwrap(),
            half(&[3, 20, 6], 8),
        ),
        ("vector", half(&[31], 9), half(&[31, 4], 10)),
        // Aligned, with edge tiles half outside the output (192 = 1.5 tiles, 320 = 2.5).
        ("aligned", half(&[192, 64], 11), half(&[64, 320], 12)),
        // Aligned x @ W^T (a column-major right operand), a batch folded into rows.
        (
            "aligned transposed",
            half(&[2, 64, 48], 13),
            half(&[128, 48], 14).transpose(0, 1).unwrap(),
        ),
        // Aligned batch of column-major left operands.
        (
            "aligned batched",
            half(&[3, 32, 64], 15).transpose(1, 2).unwrap(),
            half(&[3, 32, 128], 16),
        ),
        // Aligned but partial: M = 72 and N = 200 end in part-filled 128-wide tiles, K = 40
        // in a part-filled stage of 32.
        ("aligned partial", half(&[72, 40], 17), half(&[40, 200], 18)),
        // Both operands column-major, K over many stages.
        (
            "aligned column-major",
            half(&[264, 136], 19).transpose(0, 1).unwrap(),
            half(&[24, 264], 20).transpose(0, 1).unwrap(),
        ),
    ];
    for (name, a, b) in cases {
        let cpu = a.matmul(&b).unwrap();
        let gpu_out = a
            .to(&device)
            .unwrap()
            .matmul(&b.to(&device).unwrap())
            .unwrap();
        assert!(gpu_out.device().is_gpu(), "{name}: left the GPU");
        assert_eq!(gpu_out.dims(), cpu.dims(), "{name}: shape");
        let tolerances = product_tolerances(&a, &b);
        assert_products_agree(name, &halves(&gpu_out), &cpu.to_f64_vec(), &tolerances);
    }
}

#[test]
fn gpu_refuses_f16_in_word_kernels() {
    let Some(device) = common::gpu::wgpu_only("the refusals of the word kernels") else {
        return;
    };
    let h = tensor(&[4, 4], 1)
        .to_dtype(DType::F16)
        .unwrap()
        .to(&device)
        .unwrap();
    for result in [h.exp(), h.add(&h), h.sum_all()] {
        let message = result.unwrap_err().to_string();
        assert!(message.contains("to_dtype(DType::F32)"), "{message}");
    }
    let message = DynTensor::cat(&[&h, &h], 0).unwrap_err().to_string();
    assert!(message.contains("f16"), "{message}");
}
