//! Int8 inference (`rumus::nn::quantized`): each layer against its f32 original and against
//! the quantization it promises, misuse as errors, and the MNIST CNN trained on
//! Fashion-MNIST losing at most half a point of test accuracy when its four layers are
//! quantized (CI installs the data set and requires it).

mod common;

#[path = "../examples/mnist/model.rs"]
mod mnist_model;

use rumus::data::{Batch, DataLoader, read_mnist_dir};
use rumus::nn::quantized::{QuantizedConv2d, QuantizedLinear};
use rumus::nn::{Conv2d, Linear, Module};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::rng::Generator;
use rumus::train::classification;

fn randn(dims: &[usize], seed: u64) -> DynTensor {
    DynTensor::randn_with(dims, 0.0, 1.0, DType::F32, &mut Generator::new(seed)).unwrap()
}

/// The largest absolute difference, and the largest absolute value of `exact`.
fn gap(exact: &DynTensor, approx: &DynTensor) -> (f64, f64) {
    assert_eq!(exact.dims(), approx.dims());
    let (e, a) = (exact.to_f64_vec(), approx.to_f64_vec());
    let worst = e
        .iter()
        .zip(&a)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    (worst, e.iter().map(|x| x.abs()).fold(0.0, f64::max))
}

/// The layer computes exactly what it promises: each output is the int8 dot product of the
/// quantized input row and weight row, times both scales, plus the bias (checked in f64
/// from the definition), and stays within 2% of the f32 layer's largest output.
#[test]
fn linear_is_the_quantized_product() {
    manual_seed(1);
    let layer = Linear::<70, 33>::new().unwrap();
    let int8 = QuantizedLinear::from_linear(&layer).unwrap();
    let x = randn(&[5, 70], 2);
    let out = int8.forward(&x).unwrap();
    let (w, bias, xs) = (
        int8.weight().dequantize().unwrap().to_f64_vec(),
        layer.bias.as_ref().unwrap().to_f64_vec(),
        x.to_f64_vec(),
    );
    for (i, row) in xs.chunks(70).enumerate() {
        let scale = row.iter().fold(0.0f64, |m, v| m.max(v.abs())) / 127.0;
        let q: Vec<f64> = row.iter().map(|v| (v / scale).round()).collect();
        for j in 0..33 {
            let dot: f64 = q
                .iter()
                .zip(&w[j * 70..(j + 1) * 70])
                .map(|(a, b)| a * b)
                .sum();
            let expected = dot * scale + bias[j];
            let got = out.to_f64_vec()[i * 33 + j];
            assert!(
                (got - expected).abs() <= 1e-4 * (1.0 + expected.abs()),
                "[{i}, {j}]: {got} against {expected}"
            );
        }
    }
    let (worst, peak) = gap(&layer.forward_dyn(&x).unwrap(), &out);
    assert!(worst <= 0.02 * peak, "{worst} against {peak}");
    // Extra leading axes are rows too.
    let batched = int8.forward(&x.reshape(&[1, 5, 70]).unwrap()).unwrap();
    assert_eq!(batched.dims(), &[1, 5, 33]);
    assert_eq!(batched.to_f64_vec(), out.to_f64_vec());
    // A byte per weight (outputs padded to blocks of 8, the summed axis to pairs), an f32
    // scale and an f32 bias per output.
    assert_eq!(int8.bytes(), 70 * 40 + 4 * 33 + 4 * 33);
}

#[test]
fn convolution_matches_its_f32_original() {
    manual_seed(3);
    let mut layer = Conv2d::<3, 8, 3>::with_options(2, 1, 1).unwrap();
    let x = randn(&[2, 3, 9, 9], 4);
    for (stride, padding, dilation) in [(2, 1, 1), (1, 0, 2), (1, 2, 1)] {
        (layer.stride, layer.padding, layer.dilation) = (stride, padding, dilation);
        let int8 = QuantizedConv2d::from_conv2d(&layer).unwrap();
        let (exact, approx) = (layer.forward_dyn(&x).unwrap(), int8.forward(&x).unwrap());
        let (worst, peak) = gap(&exact, &approx);
        assert!(
            worst <= 0.02 * peak,
            "{stride}/{padding}/{dilation}: {worst} against {peak}"
        );
    }
    let bias_free = Conv2d::<3, 8, 3>::new().unwrap().without_bias();
    let int8 = QuantizedConv2d::from_conv2d(&bias_free).unwrap();
    let (worst, peak) = gap(
        &bias_free.forward_dyn(&x).unwrap(),
        &int8.forward(&x).unwrap(),
    );
    assert!(worst <= 0.02 * peak);
    assert_eq!(int8.bytes(), 8 * 28 + 4 * 8);
}

#[test]
fn non_finite_inputs_give_nan_not_a_wrong_number() {
    manual_seed(5);
    let int8 = QuantizedLinear::from_linear(&Linear::<4, 3>::new().unwrap()).unwrap();
    let x = DynTensor::from_vec(
        vec![1.0f32, f32::NAN, 0.5, 2.0, 1.0, 2.0, 3.0, 4.0],
        &[2, 4],
    )
    .unwrap();
    let out = int8.forward(&x).unwrap().to_vec::<f32>().unwrap();
    assert!(out[..3].iter().all(|v| v.is_nan()), "{out:?}");
    assert!(out[3..].iter().all(|v| v.is_finite()), "{out:?}");
    let zeros = int8
        .forward(&DynTensor::zeros(&[1, 4], DType::F32).unwrap())
        .unwrap();
    assert!(zeros.to_vec::<f32>().unwrap().iter().all(|v| v.is_finite()));
}

#[test]
fn misuse_is_an_error() {
    manual_seed(6);
    let int8 = QuantizedLinear::from_linear(&Linear::<4, 3>::new().unwrap()).unwrap();
    let wrong = int8.forward(&randn(&[2, 5], 1)).unwrap_err();
    assert!(wrong.to_string().contains("last axis must be 4"), "{wrong}");
    let f64_input = DynTensor::zeros(&[2, 4], DType::F64).unwrap();
    assert!(
        int8.forward(&f64_input)
            .unwrap_err()
            .to_string()
            .contains("f32")
    );
    let conv = QuantizedConv2d::from_conv2d(&Conv2d::<2, 4, 3>::new().unwrap()).unwrap();
    let wrong = conv.forward(&randn(&[1, 3, 5, 5], 2)).unwrap_err();
    assert!(wrong.to_string().contains("[N, 2, H, W]"), "{wrong}");
    let grouped = Conv2d::<2, 4, 3>::with_groups(1, 0, 1, 2).unwrap();
    assert!(QuantizedConv2d::from_conv2d(&grouped).is_err());
    assert!(QuantizedLinear::new(&randn(&[3], 1), None).is_err());
}

/// On a GPU (lavapipe in CI) the layer computes what the CPU kernel computes: the same
/// quantization, the same exact sums, the scales applied in the same order.
#[test]
fn gpu_linear_matches_the_cpu_kernel() {
    let _serial = common::gpu::serial();
    let Some(device) = common::gpu::wgpu_only("the int8 kernels") else {
        return;
    };
    for (m, k, n, seed) in [(1, 1024, 64, 1), (5, 70, 33, 2), (300, 9, 7, 3)] {
        let layer =
            QuantizedLinear::new(&randn(&[n, k], seed), Some(&randn(&[n], seed + 1))).unwrap();
        let mut values = randn(&[m, k], seed + 2).to_vec::<f32>().unwrap();
        values[k - 1] = f32::NAN; // row 0 holds a NaN
        let x = DynTensor::from_vec(values, &[m, k]).unwrap();
        let on_gpu = layer.to(&device).unwrap();
        let gpu_out = on_gpu.forward(&x.to(&device).unwrap()).unwrap();
        assert!(gpu_out.device().is_gpu());
        let (cpu, gpu) = (
            layer.forward(&x).unwrap().to_f64_vec(),
            gpu_out.to_f64_vec(),
        );
        for (i, (a, b)) in cpu.iter().zip(&gpu).enumerate() {
            let same = (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-5 * (1.0 + a.abs());
            assert!(same, "{m}x{k}x{n} [{i}]: cpu {a}, gpu {b}");
        }
        assert!(cpu[..n].iter().all(|v| v.is_nan()));
        // The GPU copy still runs CPU inputs on the CPU.
        assert_eq!(on_gpu.forward(&x).unwrap().to_f64_vec().len(), m * n);
    }
    // Rows of 262,200 elements: each output element's kernel loops over 65,550 words, past
    // what lavapipe runs (an error there, not a sum cut short); right elsewhere.
    let wide = QuantizedLinear::new(&randn(&[2, 262_200], 11), None).unwrap();
    let x = randn(&[1, 262_200], 12);
    let on_gpu = wide.to(&device).unwrap().forward(&x.to(&device).unwrap());
    if common::gpu::ends_long_loops(&device) {
        let error = on_gpu.unwrap_err().to_string();
        assert!(error.contains("65551 loop iterations"), "{error}");
    } else {
        let (cpu, gpu) = (
            wide.forward(&x).unwrap().to_f64_vec(),
            on_gpu.unwrap().to_f64_vec(),
        );
        for (a, b) in cpu.iter().zip(&gpu) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "cpu {a}, gpu {b}");
        }
    }
    let layer = QuantizedLinear::new(&randn(&[3, 4], 9), None).unwrap();
    let refused = layer
        .forward(&randn(&[2, 4], 10).to(&device).unwrap())
        .unwrap_err();
    assert!(
        refused.to_string().contains("layer.to(&device)"),
        "{refused}"
    );
}

/// A convolution on a GPU: every window quantized on its own, within 2% of the f32 layer.
#[test]
fn gpu_convolution_matches_its_f32_original() {
    let _serial = common::gpu::serial();
    let Some(device) = common::gpu::wgpu_only("the int8 kernels") else {
        return;
    };
    manual_seed(13);
    let layer = Conv2d::<3, 8, 3>::with_options(2, 1, 1).unwrap();
    let x = randn(&[2, 3, 9, 9], 14);
    let int8 = QuantizedConv2d::from_conv2d(&layer)
        .unwrap()
        .to(&device)
        .unwrap();
    let out = int8.forward(&x.to(&device).unwrap()).unwrap();
    assert!(out.device().is_gpu());
    let (worst, peak) = gap(
        &layer.forward_dyn(&x).unwrap(),
        &out.to(&Device::Cpu).unwrap(),
    );
    assert!(worst <= 0.02 * peak, "{worst} against {peak}");
    // Without `to`, a GPU input is refused with the fix.
    let cpu_only = QuantizedConv2d::from_conv2d(&layer).unwrap();
    let refused = cpu_only.forward(&x.to(&device).unwrap()).unwrap_err();
    assert!(
        refused.to_string().contains("layer.to(&device)"),
        "{refused}"
    );
}

/// The MNIST CNN with int8 layers.
struct Int8Cnn {
    conv1: QuantizedConv2d,
    conv2: QuantizedConv2d,
    fc1: QuantizedLinear,
    fc2: QuantizedLinear,
}

impl Int8Cnn {
    fn new(model: &mnist_model::Cnn) -> rumus::Result<Self> {
        Ok(Int8Cnn {
            conv1: QuantizedConv2d::from_conv2d(&model.conv1)?,
            conv2: QuantizedConv2d::from_conv2d(&model.conv2)?,
            fc1: QuantizedLinear::from_linear(&model.fc1)?,
            fc2: QuantizedLinear::from_linear(&model.fc2)?,
        })
    }

    fn forward(&self, x: &DynTensor) -> rumus::Result<DynTensor> {
        let pool = |h: DynTensor| h.relu()?.max_pool2d((2, 2), (2, 2), (0, 0));
        let h = pool(self.conv1.forward(x)?)?;
        let h = pool(self.conv2.forward(&h)?)?;
        let h = self.fc1.forward(&h.flatten(1, -1)?)?.relu()?;
        self.fc2.forward(&h)
    }
}

fn correct(logits: &DynTensor, labels: &DynTensor) -> usize {
    let hits = logits.argmax(-1, false).unwrap().eq(labels).unwrap();
    hits.to_vec::<bool>()
        .unwrap()
        .iter()
        .filter(|&&h| h)
        .count()
}

#[test]
fn int8_mnist_cnn_keeps_its_fashion_mnist_accuracy() {
    let (train, test) = match read_mnist_dir("/usr/share/datasets/fashion-mnist") {
        Ok(sets) => sets,
        Err(e) if std::env::var_os("RUMUS_REQUIRE_DATA").is_none() => {
            eprintln!("skipped: {e} (install the Debian package dataset-fashion-mnist)");
            return;
        }
        Err(e) => panic!("Fashion-MNIST is required here: {e}"),
    };
    manual_seed(11);
    let model = mnist_model::Cnn::new().unwrap();
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam()).unwrap();
    let mut loader = DataLoader::new(train, 64).unwrap().shuffle(12);
    // A fifth of an epoch: enough for a CNN that classifies most images, in seconds.
    for batch in loader.epoch().take(190) {
        let batch: Batch = batch.unwrap();
        let logits = model
            .forward(&batch.input::<(Dyn, D<1>, D<28>, D<28>)>().unwrap())
            .unwrap();
        let (loss, _) = classification(logits.as_dyn(), &batch.target).unwrap();
        optimizer.step(&mut loss.backward().unwrap()).unwrap();
    }
    let int8 = Int8Cnn::new(&model).unwrap();
    let _guard = rumus::no_grad();
    let (mut f32_hits, mut int8_hits) = (0, 0);
    let mut test_loader = DataLoader::new(test, 500).unwrap();
    for batch in test_loader.epoch() {
        let batch = batch.unwrap();
        let logits = model
            .forward(&batch.input::<(Dyn, D<1>, D<28>, D<28>)>().unwrap())
            .unwrap();
        f32_hits += correct(logits.as_dyn(), &batch.target);
        int8_hits += correct(&int8.forward(&batch.input).unwrap(), &batch.target);
    }
    let (f32_accuracy, int8_accuracy) = (f32_hits as f64 / 1e4, int8_hits as f64 / 1e4);
    eprintln!("test accuracy: f32 {f32_accuracy:.4}, int8 {int8_accuracy:.4}");
    assert!(
        f32_accuracy >= 0.75,
        "the f32 model did not train: {f32_accuracy}"
    );
    assert!(
        int8_accuracy >= f32_accuracy - 0.005,
        "int8 {int8_accuracy:.4} against f32 {f32_accuracy:.4}"
    );
    let f32_bytes = 4 * model
        .parameters()
        .iter()
        .map(DynTensor::numel)
        .sum::<usize>();
    let int8_bytes = int8.conv1.bytes() + int8.conv2.bytes() + int8.fc1.bytes() + int8.fc2.bytes();
    assert!(
        int8_bytes * 3 < f32_bytes,
        "{int8_bytes} against {f32_bytes}"
    );
}
