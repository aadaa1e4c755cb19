//! The `bf16` dtype: rounding from wider types and matrix products against PyTorch
//! (`tests/fixtures/half.txt`, written by `make_half_fixtures.py`), checkpoints, and on CUDA
//! (casts, copies, products on cuBLASLt) against the CPU. wgpu has no bfloat16 (WGSL has
//! none): moving a `bf16` tensor there is an error that says so.

mod common;

use common::fixture_file::assert_same_bits;
use common::gpu::{gpu, tensor};
use rumus::{DType, DynTensor, bf16};

const FIXTURES: &str = include_str!("fixtures/half.txt");

fn fixture(name: &str) -> std::collections::BTreeMap<String, common::fixture_file::FixtureTensor> {
    common::fixture_file::case(FIXTURES, name)
}

fn values(t: &DynTensor) -> Vec<bf16> {
    assert_eq!(t.dtype(), DType::BF16);
    t.to_vec::<bf16>().unwrap()
}

/// One unit in the last place of a bf16 near `x` (8 significant bits).
fn bf16_ulp(x: f64) -> f64 {
    if x == 0.0 {
        2f64.powi(-133)
    } else {
        2f64.powi(x.abs().log2().floor() as i32 - 7)
    }
}

/// How far a bf16 product accumulated in f32 may lie from another such product: one bf16
/// rounding each (an ulp between them) after f32 sums in their own orders (about
/// K 2^-24 sum |a_i b_i|, doubled for kernels that do not round every partial sum).
fn assert_products_agree(what: &str, (a, b): (&DynTensor, &DynTensor), got: &[bf16], want: &[f64]) {
    let wide = |t: &DynTensor| t.to_dtype(DType::F64).unwrap().abs().unwrap();
    let k = *a.dims().last().unwrap() as f64;
    let magnitude = wide(a).matmul(&wide(b)).unwrap().to_f64_vec();
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, ((g, w), m)) in got.iter().zip(want).zip(&magnitude).enumerate() {
        let tolerance = bf16_ulp(*w) + 2.0 * k * 2f64.powi(-24) * m;
        let g = g.to_f64();
        assert!(
            (g - w).abs() <= tolerance,
            "{what}[{i}]: got {g}, expected {w}"
        );
    }
}

#[test]
fn rounding_to_bf16_matches_pytorch() {
    let case = fixture("to_bfloat16");
    let expected = values(&case["bf16"].to_tensor());
    common::fixture_file::assert_rounds_as_expected(&case["input"].to_tensor(), &expected);
}

#[test]
fn bf16_matrix_products_match_pytorch() {
    let case = fixture("matmul_bf16");
    let (a, b) = (case["a"].to_tensor(), case["b"].to_tensor());
    let out = a.matmul(&b).unwrap();
    assert_eq!(out.dims(), case["out"].dims.as_slice());
    assert_products_agree("bf16 matmul", (&a, &b), &values(&out), &case["out"].values);
}

#[test]
fn bf16_keeps_f32_range_and_round_trips_through_safetensors() {
    // Past f16's largest finite value (65504) bf16 stays finite, and it converts to and
    // from integers and masks like the other floats.
    let big = DynTensor::full(&[3], 1e30, DType::BF16).unwrap();
    assert!(
        big.to_f64_vec()
            .iter()
            .all(|v| v.is_finite() && *v > 9.9e29)
    );
    let ints = DynTensor::from_vec(vec![-3i64, 0, 7], &[3]).unwrap();
    let as_bf16 = ints.to_dtype(DType::BF16).unwrap();
    assert_eq!(as_bf16.to_f64_vec(), [-3.0, 0.0, 7.0]);
    assert_eq!(
        as_bf16
            .to_dtype(DType::Bool)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [true, false, true]
    );
    let dir = common::scratch::Scratch::new("bf16_safetensors");
    let path = dir.join("weights.safetensors");
    let w = tensor(&[5, 3], 7).to_dtype(DType::BF16).unwrap();
    rumus::io::write_state(&vec![("w".to_string(), w.clone())], &path).unwrap();
    let read = rumus::io::read_state(&path).unwrap();
    assert_eq!(read[0].0, "w");
    assert_same_bits("safetensors", &values(&read[0].1), &values(&w));
}

#[test]
fn gpu_bf16_casts_copies_and_products_match_the_cpu() {
    let Some(device) = gpu() else { return };
    let x = fixture("to_bfloat16")["input"].to_tensor();
    if !device.is_cuda() {
        // WGSL has no bfloat16: the move is refused, naming the dtype.
        let error = x.to_dtype(DType::BF16).unwrap().to(&device).unwrap_err();
        assert!(error.to_string().contains("bf16"), "{error}");
        return;
    }
    let on_gpu = x.to(&device).unwrap().to_dtype(DType::BF16).unwrap();
    assert!(on_gpu.device().is_gpu());
    let expected = values(&x.to_dtype(DType::BF16).unwrap());
    assert_same_bits("gpu f32 -> bf16", &values(&on_gpu), &expected);
    let back = on_gpu
        .to_dtype(DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for (w, h) in back.iter().zip(&expected) {
        assert!(w.to_bits() == u32::from(h.to_bits()) << 16 || w.is_nan());
    }
    // Strided views, filling, and casts to the other dtypes.
    let m = tensor(&[7, 5], 3).to_dtype(DType::BF16).unwrap();
    let mg = m.to(&device).unwrap();
    let copy = |t: &DynTensor| values(&t.transpose(0, 1).unwrap().contiguous().unwrap());
    assert_same_bits("gpu bf16 transpose", &copy(&mg), &copy(&m));
    for dtype in [DType::F16, DType::F64, DType::I64, DType::Bool] {
        let (c, g) = (m.to_dtype(dtype).unwrap(), mg.to_dtype(dtype).unwrap());
        assert_eq!(c.to_f64_vec(), g.to_f64_vec(), "bf16 -> {dtype}");
    }
    let filled = {
        let _on = device.set_default();
        DynTensor::full(&[5], -0.1, DType::BF16).unwrap()
    };
    let host_filled = DynTensor::full(&[5], -0.1, DType::BF16).unwrap();
    assert_same_bits("gpu full", &values(&filled), &values(&host_filled));
    // Products: ragged, x @ W^T, batched.
    let bf = |dims: &[usize], seed: u64| tensor(dims, seed).to_dtype(DType::BF16).unwrap();
    let cases = [
        ("ragged", bf(&[37, 45], 1), bf(&[45, 29], 2)),
        (
            "transposed",
            bf(&[2, 9, 64], 5),
            bf(&[48, 64], 6).transpose(0, 1).unwrap(),
        ),
        (
            "batched",
            bf(&[3, 20, 12], 7).transpose(1, 2).unwrap(),
            bf(&[3, 20, 6], 8),
        ),
    ];
    for (name, a, b) in cases {
        let cpu = a.matmul(&b).unwrap();
        let on_gpu = a
            .to(&device)
            .unwrap()
            .matmul(&b.to(&device).unwrap())
            .unwrap();
        assert!(on_gpu.device().is_gpu(), "{name}: left the GPU");
        assert_products_agree(name, (&a, &b), &values(&on_gpu), &cpu.to_f64_vec());
    }
}

/// Float casts on CUDA give the CPU's bits at every length and start: its kernel converts four
/// elements at a time where a contiguous input starts aligned to four, one at a time for the
/// rest of the length and for views that start between. From f64, values nudged off the
/// f32 grid check that both round once (never to f32 first).
#[test]
fn cuda_float_casts_match_the_cpu_at_every_length_and_start() {
    let Some(device) = gpu() else { return };
    if !device.is_cuda() {
        return;
    }
    for n in [1usize, 3, 4, 5, 8, 11, 1027] {
        let f32s = tensor(&[n], n as u64);
        let f64s = f32s
            .to_dtype(DType::F64)
            .unwrap()
            .add_scalar(2f64.powi(-40))
            .unwrap();
        for x in [f32s, f64s] {
            for start in 0..n.min(3) {
                let view = x.narrow(0, start, n - start).unwrap();
                let on_device = x.to(&device).unwrap().narrow(0, start, n - start).unwrap();
                for dtype in [DType::F16, DType::BF16, DType::F64, DType::F32] {
                    let want = view.to_dtype(dtype).unwrap();
                    let got = on_device.to_dtype(dtype).unwrap();
                    let what = format!("{} -> {dtype}, {n} elements from {start}", x.dtype());
                    assert_eq!(got.to_f64_vec(), want.to_f64_vec(), "{what}");
                    let back = got.to_dtype(DType::F32).unwrap();
                    let want_back = want.to_dtype(DType::F32).unwrap();
                    assert_eq!(back.to_f64_vec(), want_back.to_f64_vec(), "{what} and back");
                }
            }
        }
    }
}
