//! Autocast: products of `f32` tensors run in `f16` (or `bf16`, `autocast_with`) inside the
//! scope, forward and backward, exactly as the explicit casts would compute them; everything
//! else stays `f32`; and the digits MLP trained under autocast with loss scaling learns as
//! well as in `f32`.

#[path = "../examples/digits/training.rs"]
#[allow(dead_code)]
mod training;

mod common;

use common::gpu::{gpu, kernels_run, tensor};
use rumus::amp::{GradScaler, GradScalerConfig, autocast, autocast_with};
use rumus::data::{Batch, Collate, DataLoader, Sample};
use rumus::nn::Module;
use rumus::optim::{Adam, AdamConfig, Sgd, SgdConfig};
use rumus::prelude::*;
use rumus::train::{Accuracy, Metric, classification};

/// `t` rounded to `dtype` (f16 or bf16) and back: what autocast feeds the product.
fn rounded(t: &DynTensor, dtype: DType) -> DynTensor {
    t.detach()
        .to_dtype(dtype)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap()
}

/// `t` rounded to f16 and back.
fn half(t: &DynTensor) -> DynTensor {
    rounded(t, DType::F16)
}

/// Autocast's product of f32 tensors in `dtype`, spelled out: the operands rounded to
/// `dtype`, the product accumulated and returned in f32.
fn explicit_product_in(a: &DynTensor, b: &DynTensor, dtype: DType) -> Vec<f64> {
    rounded(a, dtype)
        .matmul(&rounded(b, dtype))
        .unwrap()
        .to_f64_vec()
}

/// The unit roundoff of `dtype`: 2^-11 for f16, 2^-8 for bf16.
fn unit_roundoff(dtype: DType) -> f64 {
    if dtype == DType::BF16 {
        0.5f64.powi(8)
    } else {
        0.5f64.powi(11)
    }
}

#[test]
fn products_under_autocast_are_the_f16_or_bf16_products_and_stay_f32() {
    for dtype in [DType::F16, DType::BF16] {
        let (a, b) = (tensor(&[5, 7], 1), tensor(&[7, 3], 2));
        let bias = tensor(&[3], 3);
        let (plain, under, linear) = {
            let plain = a.matmul(&b).unwrap();
            let _autocast = autocast_with(dtype).unwrap();
            assert_eq!(rumus::amp::autocast_dtype(), Some(dtype));
            let under = a.matmul(&b).unwrap();
            let linear = a.linear(&b.transpose(0, 1).unwrap(), Some(&bias)).unwrap();
            (plain, under, linear)
        };
        assert_eq!(under.dtype(), DType::F32);
        assert_eq!(
            under.to_f64_vec(),
            explicit_product_in(&a, &b, dtype),
            "{dtype}"
        );
        // The bias is added in f32, unrounded.
        let expected_linear = rounded(&a, dtype)
            .linear(&rounded(&b, dtype).transpose(0, 1).unwrap(), Some(&bias))
            .unwrap();
        assert_eq!(linear.to_f64_vec(), expected_linear.to_f64_vec(), "{dtype}");
        // The rounding is the dtype's: far from f32's, within its relative error.
        let (p, u) = (plain.to_f64_vec(), under.to_f64_vec());
        assert_ne!(p, u);
        let scale: f64 = a.to_f64_vec().iter().map(|x| x.abs()).sum::<f64>() * 2.0;
        for (p, u) in p.iter().zip(&u) {
            assert!(
                (p - u).abs() <= scale * 4.0 * unit_roundoff(dtype),
                "{dtype}: {p} vs {u}"
            );
        }
        // Outside the scope, f32 again.
        assert_eq!(a.matmul(&b).unwrap().to_f64_vec(), p);
        assert_eq!(rumus::amp::autocast_dtype(), None);
    }
    // Autocast takes the two 16-bit float types only.
    assert!(autocast_with(DType::F64).is_err());
}

/// A model's weights already held in the scope's dtype (a language model's f16 matrices on a
/// GPU) meet f32 activations: the product is the same one as with f32 weights rounded to that
/// dtype, in f32; weights of the other 16-bit dtype are not autocast's to mix.
#[test]
fn autocast_multiplies_f32_inputs_by_weights_already_in_its_dtype() {
    for dtype in [DType::F16, DType::BF16] {
        let (x, w) = (tensor(&[5, 7], 4), tensor(&[3, 7], 5));
        let stored = w.to_dtype(dtype).unwrap();
        let _autocast = autocast_with(dtype).unwrap();
        let mixed = x.linear(&stored, None).unwrap();
        assert_eq!(mixed.dtype(), DType::F32);
        assert_eq!(
            mixed.to_f64_vec(),
            x.linear(&w, None).unwrap().to_f64_vec(),
            "{dtype}"
        );
        let other = if dtype == DType::F16 {
            DType::BF16
        } else {
            DType::F16
        };
        assert!(
            x.linear(&w.to_dtype(other).unwrap(), None).is_err(),
            "{dtype}"
        );
    }
}

#[test]
fn gradients_under_autocast_run_the_backward_products_in_f16_or_bf16() {
    for dtype in [DType::F16, DType::BF16] {
        gradients_run_the_backward_products_in(dtype);
    }
}

fn gradients_run_the_backward_products_in(dtype: DType) {
    let explicit_product = |a: &DynTensor, b: &DynTensor| explicit_product_in(a, b, dtype);
    let x = tensor(&[4, 6], 4).requires_grad_().unwrap();
    let w = tensor(&[6, 3], 5).requires_grad_().unwrap();
    let loss = {
        let _autocast = autocast_with(dtype).unwrap();
        x.matmul(&w).unwrap().tanh().unwrap().sum_all().unwrap()
    };
    // The backward pass runs outside the scope: the records remember autocast.
    let grads = loss.backward().unwrap();
    let y = DynTensor::from_vec(
        explicit_product(&x, &w).iter().map(|&v| v as f32).collect(),
        &[4, 3],
    )
    .unwrap();
    let dy = y
        .tanh()
        .unwrap()
        .powf(2.0)
        .unwrap()
        .neg()
        .unwrap()
        .add_scalar(1.0)
        .unwrap();
    let gx = explicit_product(&dy, &w.transpose(0, 1).unwrap());
    let gw = explicit_product(&x.transpose(0, 1).unwrap(), &dy);
    assert_eq!(grads.grad(&x).unwrap().to_f64_vec(), gx);
    assert_eq!(grads.grad(&w).unwrap().to_f64_vec(), gw);
    assert_eq!(grads.grad(&w).unwrap().dtype(), DType::F32);
}

#[test]
fn convolutions_under_autocast_take_the_f16_product() {
    let x = tensor(&[2, 3, 6, 6], 6).requires_grad_().unwrap();
    let w = tensor(&[4, 3, 3, 3], 7).requires_grad_().unwrap();
    let conv = |x: &DynTensor, w: &DynTensor| {
        x.conv2d(w, None, (1, 1), (1, 1), (1, 1), 1)
            .unwrap()
            .tanh()
            .unwrap()
            .sum_all()
            .unwrap()
    };
    let under = {
        let _autocast = autocast();
        conv(&x, &w)
    };
    // The same convolution in f32 of operands already rounded to f16 computes the same sums,
    // perhaps in another order.
    let rounded = conv(&half(&x).requires_grad_().unwrap(), &half(&w));
    let (a, b) = (under.item::<f32>().unwrap(), rounded.item::<f32>().unwrap());
    assert!((a - b).abs() <= 1e-3 * b.abs().max(1.0), "{a} vs {b}");
    let plain = conv(&x, &w).item::<f32>().unwrap();
    assert_ne!(a, plain, "the autocast convolution did not round anything");
    let grads = under.backward().unwrap();
    let plain_grads = conv(&x, &w).backward().unwrap();
    for t in [&x, &w] {
        let (g, p) = (
            grads.grad(t).unwrap().to_f64_vec(),
            plain_grads.grad(t).unwrap().to_f64_vec(),
        );
        let size = p.iter().map(|v| v.abs()).fold(0.0, f64::max);
        for (g, p) in g.iter().zip(&p) {
            assert!((g - p).abs() <= 1e-2 * size, "{g} vs {p}");
        }
    }
}

#[test]
fn the_digits_mlp_trains_under_autocast_with_loss_scaling() {
    manual_seed(7);
    let (train, test) = training::load_digits().unwrap();
    let test = Sample::collate(test.items().to_vec()).unwrap();
    let model = training::Mlp::new().unwrap();
    let mut optimizer = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 2e-3,
            ..AdamConfig::adam()
        },
    )
    .unwrap();
    let mut scaler = GradScaler::new();
    let mut loader = DataLoader::new(train, 32).unwrap().shuffle(11);
    let logits = |batch: &Batch| {
        let x = batch.input::<(Dyn, D<64>)>().unwrap();
        model.forward(&x).unwrap().erase()
    };
    let mut skipped = 0;
    for epoch in 0..30 {
        for batch in loader.epoch_from(epoch, 0) {
            let batch = batch.unwrap();
            let loss = {
                let _autocast = autocast();
                classification(&logits(&batch), &batch.target).unwrap().0
            };
            let mut grads = scaler.scale(&loss).unwrap().backward().unwrap();
            skipped += usize::from(!scaler.step(&mut optimizer, &mut grads).unwrap());
            scaler.update();
        }
    }
    let accuracy = {
        let (_guard, _autocast) = (rumus::no_grad(), autocast());
        let mut accuracy = Accuracy::new();
        accuracy.update(&logits(&test), &test.target).unwrap();
        accuracy.compute()
    };
    assert!(
        accuracy >= 0.96,
        "test accuracy {accuracy:.4} under autocast"
    );
    assert!(skipped < 10, "{skipped} steps skipped");
    assert!(model.parameters().iter().all(|p| p.dtype() == DType::F32));
}

/// A loss and the other outputs to compare.
type LossAndOutputs = (DynTensor, Vec<DynTensor>);

/// Runs `forward` under autocast on the `leaves` (made leaves needing gradients) on the CPU
/// and on `device`, backward from the loss it returns, and checks that the loss, the other
/// outputs and every leaf's gradient agree and stay f32 on the GPU (`names`: the outputs',
/// then the gradients'). Both sides multiply the same f16 operands in f32, in different
/// orders.
fn autocast_agrees_with_the_cpu(
    device: &Device,
    leaves: &[DynTensor],
    forward: &dyn Fn(&[DynTensor]) -> LossAndOutputs,
    names: &[&str],
) {
    autocast_in_agrees_with_the_cpu(DType::F16, device, leaves, forward, names);
}

/// [`autocast_agrees_with_the_cpu`] under autocast in `dtype`. The two devices round the
/// same operands; a backward product rounds a gradient that differs in its last f32 bits,
/// which can move it by one unit of `dtype` (relative 2^-8 for bf16).
fn autocast_in_agrees_with_the_cpu(
    dtype: DType,
    device: &Device,
    leaves: &[DynTensor],
    forward: &dyn Fn(&[DynTensor]) -> LossAndOutputs,
    names: &[&str],
) {
    let run = |on: &dyn Fn(&DynTensor) -> DynTensor| {
        let t: Vec<DynTensor> = leaves
            .iter()
            .map(|t| on(t).requires_grad_().unwrap())
            .collect();
        let (loss, outputs) = {
            let _autocast = autocast_with(dtype).unwrap();
            forward(&t)
        };
        let grads = loss.backward().unwrap();
        let mut results = vec![loss];
        results.extend(outputs);
        results.extend(t.iter().map(|t| grads.grad(t).unwrap().clone()));
        results
    };
    let cpu = run(&|t| t.clone());
    let on_gpu = run(&|t| t.to(device).unwrap());
    assert_eq!(names.len(), cpu.len());
    for (what, (c, g)) in names.iter().zip(cpu.iter().zip(&on_gpu)) {
        assert!(g.device().is_gpu() && g.dtype() == DType::F32, "{what}");
        assert_eq!(c.dims(), g.dims(), "{what}");
        for (c, g) in c.to_f64_vec().iter().zip(&g.to_f64_vec()) {
            let tolerance = 4.0 * unit_roundoff(dtype);
            assert!(
                (c - g).abs() <= tolerance * c.abs() + tolerance / 2.0,
                "{what} ({dtype}): cpu {c}, gpu {g}"
            );
        }
    }
}

/// The sum of `tanh` of each output: a loss that reaches every element.
fn tanh_sum(outputs: &[&DynTensor]) -> DynTensor {
    outputs
        .iter()
        .map(|y| y.tanh().unwrap().sum_all().unwrap())
        .reduce(|a, b| a.add(&b).unwrap())
        .unwrap()
}

#[test]
fn gpu_products_under_autocast_match_the_cpu() {
    let _serial = common::gpu::serial();
    let Some(device) = gpu() else { return };
    // [x, w]: a product whose sizes are not multiples of 8; two linear layers whose sizes
    // are (on GPUs with matrix units, their product with the bias in its epilogue), the
    // second with a long K (split along K, the bias added with the partial sums).
    let leaves = [
        tensor(&[9, 20], 8),
        tensor(&[20, 5], 9),
        tensor(&[24, 32], 12),
        tensor(&[40, 32], 13),
        tensor(&[40], 14),
        tensor(&[16, 1024], 15).mul_scalar(0.05).unwrap(),
        tensor(&[8, 1024], 16),
        tensor(&[8], 17),
    ];
    let forward = |t: &[DynTensor]| {
        let layers = vec![
            t[2].linear(&t[3], Some(&t[4])).unwrap(),
            t[5].linear(&t[6], Some(&t[7])).unwrap(),
        ];
        let odd = t[0].matmul(&t[1]).unwrap();
        (tanh_sum(&[&odd, &layers[0], &layers[1]]), layers)
    };
    let names = [
        "loss",
        "linear",
        "long linear",
        "grad x",
        "grad w",
        "grad y",
        "grad v",
        "grad bias",
        "grad long x",
        "grad long w",
        "grad long bias",
    ];
    autocast_agrees_with_the_cpu(&device, &leaves, &forward, &names);
    if device.is_cuda() {
        autocast_in_agrees_with_the_cpu(DType::BF16, &device, &leaves, &forward, &names);
    } else {
        // WGSL has no bfloat16: the product says so.
        let _autocast = autocast_with(DType::BF16).unwrap();
        let x = leaves[0].to(&device).unwrap();
        let error = x.matmul(&leaves[1].to(&device).unwrap()).unwrap_err();
        assert!(error.to_string().contains("bf16"), "{error}");
    }
}

/// Autocast's products run on the fastest matrix kernel the device has: `matmul_tensor`
/// where it was opened with `VK_NV_cooperative_matrix2`, `matmul_coop` on other cooperative
/// matrices. The tests around this one check the numbers of whichever ran; this checks which
/// one did (where the adapter has matrix units and can time kernels; elsewhere it says it
/// skipped, or fails under `RUMUS_REQUIRE_COOPMAT` and `RUMUS_REQUIRE_GPU_TIMING`).
#[test]
fn gpu_products_under_autocast_take_the_fastest_matrix_kernel() {
    let _serial = common::gpu::serial();
    let Some((device, gpu)) = common::gpu::gpu_and_handle() else {
        return;
    };
    if !common::gpu::has_coop_matmul(&gpu, "the matrix kernel autocast picks") {
        return;
    }
    let x = tensor(&[128, 64], 30).to(&device).unwrap();
    let w = tensor(&[32, 64], 31).to(&device).unwrap();
    let Some(kernels) = kernels_run(&device, || {
        let _autocast = autocast();
        x.linear(&w, None).unwrap();
    }) else {
        return;
    };
    let expected = if gpu.has_tensor_matmul() {
        "matmul_tensor"
    } else {
        "matmul_coop"
    };
    // (products on the matrix units are profiled under their shapes: "matmul_coop 128x32x64 ...")
    let ran = kernels
        .iter()
        .any(|kernel| kernel.split(' ').next() == Some(expected));
    assert!(ran, "{expected} not among {kernels:?}");
}

/// Products with whole 128x128 output tiles, which a GPU with matrix units stores straight
/// from its accumulators (started from the bias): a linear layer whose last column of tiles
/// is partial (both ways of writing in one product), with its bias at an offset of 4 and of
/// 2 elements (aligned for the direct load, and not); a batched product; and a layer over
/// 2,048 rows, whose weight gradient (4 tiles, K = 2,048) is split along K.
#[test]
fn gpu_products_of_whole_tiles_under_autocast_match_the_cpu() {
    let _serial = common::gpu::serial();
    let Some(device) = gpu() else { return };
    let leaves = [
        tensor(&[256, 384], 20).mul_scalar(0.1).unwrap(),
        tensor(&[320, 384], 21).mul_scalar(0.1).unwrap(),
        tensor(&[330], 22),
        tensor(&[2, 128, 256], 23).mul_scalar(0.1).unwrap(),
        tensor(&[2, 256, 128], 24).mul_scalar(0.1).unwrap(),
        tensor(&[2048, 256], 25).mul_scalar(0.1).unwrap(),
        tensor(&[256, 256], 26).mul_scalar(0.1).unwrap(),
        tensor(&[256], 27),
    ];
    let forward = |t: &[DynTensor]| {
        let outputs = vec![
            t[0].linear(&t[1], Some(&t[2].narrow(0, 4, 320).unwrap()))
                .unwrap(),
            t[0].linear(&t[1], Some(&t[2].narrow(0, 2, 320).unwrap()))
                .unwrap(),
            t[3].matmul(&t[4]).unwrap(),
            t[5].linear(&t[6], Some(&t[7])).unwrap(),
        ];
        let loss = tanh_sum(&outputs.iter().collect::<Vec<_>>());
        (loss, outputs)
    };
    let names = [
        "loss",
        "linear, bias at 4",
        "linear, bias at 2",
        "batched",
        "tall linear",
        "grad x",
        "grad w",
        "grad bias",
        "grad a",
        "grad b",
        "grad tall x",
        "grad tall w",
        "grad tall bias",
    ];
    autocast_agrees_with_the_cpu(&device, &leaves, &forward, &names);
}

#[test]
fn gpu_loss_scaling_skips_an_overflow_and_steps_like_the_cpu() {
    let _serial = common::gpu::serial();
    let Some(device) = gpu() else { return };
    // Returns the parameter after a run of scaled steps whose first overflows.
    let train = |device: &Device| {
        let w = tensor(&[24, 8], 10)
            .to(device)
            .unwrap()
            .requires_grad_()
            .unwrap();
        // Small inputs, so the only overflows are the scale's own: under autocast the scaled
        // gradient enters an f16 product, and f16 ends at 65504. Sizes are multiples of 8, so
        // GPUs with matrix units round the gradient inside their product kernel.
        let x = tensor(&[16, 24], 11)
            .mul_scalar(0.01)
            .unwrap()
            .to(device)
            .unwrap();
        let config = SgdConfig {
            lr: 0.05,
            ..Default::default()
        };
        let mut sgd = Sgd::new(vec![w.clone()], config).unwrap();
        let mut scaler = GradScaler::with_config(GradScalerConfig {
            // 2^17 overflows f16 whatever the values; 2^14 is far from it.
            init_scale: 2f64.powi(17),
            backoff_factor: 0.125,
            ..Default::default()
        })
        .unwrap();
        let mut stepped = Vec::new();
        for _ in 0..4 {
            let loss = {
                let _autocast = autocast();
                x.matmul(&w).unwrap().tanh().unwrap().sum_all().unwrap()
            };
            let mut grads = scaler.scale(&loss).unwrap().backward().unwrap();
            stepped.push(scaler.step(&mut sgd, &mut grads).unwrap());
            scaler.update();
        }
        (w, stepped, scaler.scale_factor())
    };
    let (cpu_w, cpu_stepped, cpu_scale) = train(&Device::Cpu);
    let (gpu_w, gpu_stepped, gpu_scale) = train(&device);
    assert_eq!(cpu_stepped, [false, true, true, true], "2^17 overflows f16");
    assert_eq!(cpu_scale, 2f64.powi(14));
    assert_eq!(gpu_stepped, cpu_stepped);
    assert_eq!(gpu_scale, cpu_scale);
    assert!(gpu_w.device().is_gpu());
    for (c, g) in cpu_w.to_f64_vec().iter().zip(&gpu_w.to_f64_vec()) {
        assert!((c - g).abs() <= 1e-3 * c.abs() + 1e-4, "cpu {c}, gpu {g}");
    }
}

/// On a GPU a gradient's unscale and its check are one kernel: a NaN in one parameter's
/// gradient skips only the step of the optimizer holding it, and gradients whose elements
/// are finite (3e38) but whose sum overflows f32 take their step, as on the CPU.
#[test]
fn gpu_loss_scaling_skips_only_the_optimizer_with_a_nan_and_steps_on_huge_finite_gradients() {
    let _serial = common::gpu::serial();
    let Some(device) = gpu() else { return };
    let on = |values: Vec<f32>| {
        DynTensor::from_vec(values, &[2])
            .unwrap()
            .to(&device)
            .unwrap()
    };
    let c = on(vec![3e38, 3e38]);
    let w0 = on(vec![1.0, -1.0]).requires_grad_().unwrap();
    let w1 = on(vec![1e-30, -1e-30]).requires_grad_().unwrap();
    // d/dw0 sqrt(0 w0 - 1) is NaN; d/dw1 sum(w1 c) is c.
    let nan = common::nan_term(&w0);
    let loss = w1.mul(&c).unwrap().sum_all().unwrap().add(&nan).unwrap();
    let config = SgdConfig {
        lr: 1e-3,
        ..Default::default()
    };
    let mut sgd0 = Sgd::new(vec![w0.clone()], config).unwrap();
    let mut sgd1 = Sgd::new(vec![w1.clone()], config).unwrap();
    let mut scaler = GradScaler::with_config(GradScalerConfig {
        init_scale: 1.0,
        ..Default::default()
    })
    .unwrap();
    let mut grads = scaler.scale(&loss).unwrap().backward().unwrap();
    assert!(
        !scaler.step(&mut sgd0, &mut grads).unwrap(),
        "a NaN gradient stepped"
    );
    assert!(
        scaler.step(&mut sgd1, &mut grads).unwrap(),
        "finite gradients were skipped"
    );
    assert_eq!(w0.to_f64_vec(), [1.0, -1.0]);
    let stepped: Vec<f64> = [1e-30f32, -1e-30]
        .iter()
        .map(|&w| f64::from(w - 1e-3f32 * 3e38f32))
        .collect();
    assert_eq!(w1.to_f64_vec(), stepped);
}

#[test]
fn a_recorded_backward_pass_through_autocast_products_gives_second_derivatives() {
    // d/dw of sum((d loss / dx)^2): the first gradient must itself be differentiable.
    let x = tensor(&[4, 6], 12).requires_grad_().unwrap();
    let w = tensor(&[6, 3], 13).requires_grad_().unwrap();
    let penalty = |autocast_on: bool| {
        let _autocast = autocast_on.then(autocast);
        let loss = x.matmul(&w).unwrap().tanh().unwrap().sum_all().unwrap();
        let gx = rumus::grad(&[&loss], &[&x], true).unwrap().remove(0);
        let penalty = gx.powf(2.0).unwrap().sum_all().unwrap();
        rumus::grad(&[&penalty], &[&w], false)
            .unwrap()
            .remove(0)
            .to_f64_vec()
    };
    let (half, full) = (penalty(true), penalty(false));
    let size = full.iter().map(|v| v.abs()).fold(0.0, f64::max);
    for (h, f) in half.iter().zip(&full) {
        assert!((h - f).abs() <= 2e-2 * size, "{h} vs {f}");
    }
}
