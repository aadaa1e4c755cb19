//! `cross_entropy` (without label smoothing) is one recorded op: the same loss as
//! `nll_loss(log_softmax(x))` within f32 rounding, the same gradients (finite differences for both
//! are in `tests/gradcheck_losses.rs`), one `[N, C]` tensor less at the backward pass's peak
//! on the CPU and on a GPU, and on a GPU the gradient from one kernel agrees with the CPU's.

mod common;

use common::gpu::{assert_close, gpu, serial, tensor};
use rumus::nn::{CrossEntropyOptions, NllLossOptions, Reduction, cross_entropy, nll_loss};
use rumus::storage::StoragePeak;
use rumus::{Device, DynTensor};

/// Labels `[N, d..]` in `0..classes`, with one ignored (-100) when `ignore` holds.
fn labels(dims: &[usize], classes: usize, ignore: bool) -> DynTensor {
    let n: usize = dims.iter().product();
    let values: Vec<i64> = (0..n)
        .map(|i| {
            if ignore && i == 1 {
                -100
            } else {
                ((i * 7 + 3) % classes) as i64
            }
        })
        .collect();
    DynTensor::from_vec(values, dims).unwrap()
}

fn options(reduction: Reduction, ignore: bool) -> CrossEntropyOptions {
    CrossEntropyOptions {
        reduction,
        ignore_index: ignore.then_some(-100),
        label_smoothing: 0.0,
    }
}

/// Loss and the logits' gradient (the loss weighted per element for `None`).
fn loss_and_grad(
    logits: &DynTensor,
    loss_of: impl Fn(&DynTensor) -> DynTensor,
) -> (DynTensor, DynTensor) {
    let leaf = logits.detach().requires_grad_().unwrap();
    let loss = loss_of(&leaf);
    let weights = DynTensor::arange(1.0, 1.0 + loss.numel() as f64, 1.0, loss.dtype())
        .unwrap()
        .reshape(loss.dims())
        .unwrap()
        .to(&loss.device())
        .unwrap();
    let grads = loss
        .mul(&weights)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    (loss.detach(), grads.grad(&leaf).unwrap().clone())
}

/// Each case: logits dims, reduction, whether a target is ignored.
const CASES: [(&[usize], Reduction, bool); 4] = [
    (&[6, 5], Reduction::Mean, false),
    (&[6, 5], Reduction::Sum, true),
    (&[3, 4, 5], Reduction::None, true),
    (&[7], Reduction::Mean, false),
];

fn targets_for(dims: &[usize], ignore: bool) -> DynTensor {
    if dims.len() == 1 {
        return DynTensor::from_vec(vec![2i64], &[]).unwrap();
    }
    let mut target_dims = dims.to_vec();
    let classes = target_dims.remove(1);
    labels(&target_dims, classes, ignore)
}

#[test]
fn the_loss_and_gradient_are_those_of_log_softmax_and_nll() {
    // (Its allocations would show in the other tests' process-wide memory peaks.)
    let _serial = serial();
    for (dims, reduction, ignore) in CASES {
        let logits = tensor(dims, 1);
        let targets = targets_for(dims, ignore);
        let fused = loss_and_grad(&logits, |x| {
            cross_entropy(x, &targets, &options(reduction, ignore)).unwrap()
        });
        let apart = loss_and_grad(&logits, |x| {
            let nll = NllLossOptions {
                reduction,
                ignore_index: ignore.then_some(-100),
            };
            nll_loss(
                &x.log_softmax(if dims.len() == 1 { 0 } else { 1 }).unwrap(),
                &targets,
                &nll,
            )
            .unwrap()
        });
        let what = format!("{dims:?} {reduction:?} ignore {ignore}");
        // The fused loss is lse(x) - x_t with the log-sum-exp summed in f64; log_softmax
        // rounds its own way: the same value within f32's rounding.
        for (f, a) in fused.0.to_f64_vec().iter().zip(apart.0.to_f64_vec()) {
            assert!(
                (f - a).abs() <= 1e-6 + 1e-6 * a.abs(),
                "{what}: loss {f} vs {a}"
            );
        }
        for (f, a) in fused.1.to_f64_vec().iter().zip(apart.1.to_f64_vec()) {
            assert!((f - a).abs() <= 1e-6 + 1e-5 * a.abs(), "{what}: {f} vs {a}");
        }
    }
}

/// The bytes a loss's forward and backward passes raise the peak by, beyond the logits.
fn peak_bytes(logits: &DynTensor, loss_of: impl Fn(&DynTensor) -> DynTensor) -> usize {
    let leaf = logits.detach().requires_grad_().unwrap();
    let peak = StoragePeak::start();
    let grads = loss_of(&leaf).backward().unwrap();
    drop(grads);
    peak.bytes()
}

#[test]
fn the_backward_pass_holds_one_class_matrix_less() {
    let _serial = serial();
    let (n, classes) = (256, 2000);
    let logits = tensor(&[n, classes], 2);
    let targets = labels(&[n], classes, false);
    let matrix = n * classes * 4;
    let fused = peak_bytes(&logits, |x| {
        cross_entropy(x, &targets, &CrossEntropyOptions::default()).unwrap()
    });
    let apart = peak_bytes(&logits, |x| {
        nll_loss(
            &x.log_softmax(1).unwrap(),
            &targets,
            &NllLossOptions::default(),
        )
        .unwrap()
    });
    // Give or take the fused op's per-row vectors (log-sum-exps, weights, top classes).
    let per_row = 64 * n;
    assert!(
        fused + matrix <= apart + per_row,
        "peaks: fused {fused} bytes, log_softmax + nll_loss {apart} bytes ([N, C] is {matrix})"
    );
}

#[test]
fn on_a_gpu_one_kernel_gives_the_cpu_gradient_and_holds_less() {
    let _serial = serial();
    let Some((device, gpu_device)) = common::gpu::gpu_and_handle() else {
        return;
    };
    for (dims, reduction, ignore) in CASES {
        let logits = tensor(dims, 3);
        let targets = targets_for(dims, ignore);
        let loss_of = |targets: &DynTensor| {
            let targets = targets.clone();
            move |x: &DynTensor| cross_entropy(x, &targets, &options(reduction, ignore)).unwrap()
        };
        let cpu = loss_and_grad(&logits, loss_of(&targets));
        let gpu = loss_and_grad(
            &logits.to(&device).unwrap(),
            loss_of(&targets.to(&device).unwrap()),
        );
        let what = format!("{dims:?} {reduction:?} ignore {ignore}");
        assert_close(&format!("{what}: loss"), &cpu.0, &gpu.0);
        assert_close(&format!("{what}: gradient"), &cpu.1, &gpu.1);
    }
    // The device's peak: the logits' gradient and the saved logits, not the log-probabilities
    // and the scattered gradient besides.
    let (n, classes) = (256, 2000);
    let logits = tensor(&[n, classes], 4).to(&device).unwrap();
    let targets = labels(&[n], classes, false).to(&device).unwrap();
    let matrix = (n * classes * 4) as u64;
    let device_peak = |loss_of: &dyn Fn(&DynTensor) -> DynTensor| {
        let leaf = logits.detach().requires_grad_().unwrap();
        device.synchronize().unwrap();
        gpu_device.reset_memory_peak();
        let base = gpu_device.memory().in_use;
        let grads = loss_of(&leaf).backward().unwrap();
        device.synchronize().unwrap();
        drop(grads);
        gpu_device.memory().in_use_peak - base
    };
    let fused =
        device_peak(&|x| cross_entropy(x, &targets, &CrossEntropyOptions::default()).unwrap());
    let apart = device_peak(&|x| {
        nll_loss(
            &x.log_softmax(1).unwrap(),
            &targets,
            &NllLossOptions::default(),
        )
        .unwrap()
    });
    assert!(
        fused + matrix <= apart,
        "device peaks: fused {fused} bytes, log_softmax + nll_loss {apart} bytes ([N, C] is {matrix})"
    );
}

/// Rows with a NaN, an infinite logit or only -inf give PyTorch's losses (from
/// `logsumexp(x) - x[target]`: NaN, inf or NaN), on the host and on a GPU alike.
#[test]
fn non_finite_logits_give_pytorchs_losses_on_every_device() {
    let _serial = serial();
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let rows: [([f32; 3], i64); 5] = [
        ([0.5, nan, 1.0], 0),
        ([inf, 0.0, 1.0], 1),
        ([inf, 0.0, 1.0], 0),
        ([-inf, -inf, -inf], 2),
        ([1.0, 2.0, -inf], 1),
    ];
    // logsumexp - x[target] in f64, with logsumexp's rules: NaN anywhere is NaN, an infinite
    // maximum is the result.
    let expected: Vec<f64> = rows
        .iter()
        .map(|(x, t)| {
            let x: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
            let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lse = if x.iter().any(|v| v.is_nan()) {
                f64::NAN
            } else if max.is_infinite() {
                max
            } else {
                max + x.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
            };
            lse - x[*t as usize]
        })
        .collect();
    let logits: Vec<f32> = rows.iter().flat_map(|(x, _)| *x).collect();
    let logits = DynTensor::from_vec(logits, &[rows.len(), 3]).unwrap();
    let targets = DynTensor::from_vec(rows.iter().map(|r| r.1).collect(), &[rows.len()]).unwrap();
    let per_row = |device: &Device| {
        let options = options(Reduction::None, false);
        cross_entropy(
            &logits.to(device).unwrap(),
            &targets.to(device).unwrap(),
            &options,
        )
        .unwrap()
        .to_f64_vec()
    };
    let mut devices = vec![Device::Cpu];
    devices.extend(gpu());
    for device in &devices {
        for (i, (got, want)) in per_row(device).iter().zip(&expected).enumerate() {
            let same = (got.is_nan() && want.is_nan())
                || got == want
                || (got - want).abs() <= 1e-6 * want.abs().max(1.0);
            assert!(same, "{device:?} row {i}: {got} where PyTorch gives {want}");
        }
    }
}
