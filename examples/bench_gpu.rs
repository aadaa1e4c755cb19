//! GPU workloads timed next to PyTorch-CUDA by `tests/bench/compare_gpu.py`. Prints one
//! `name value unit` line per workload: matrix products in GFLOP/s, training steps in
//! milliseconds (the mean over a run of steps, with one wait at the end, as a training loop
//! runs).
//!
//! ```text
//! cargo run --release --example bench_gpu
//! ```

use std::time::Instant;

use rumus::nn::{CrossEntropyOptions, Linear, Module, cross_entropy};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::{DType, Device, DynTensor, no_grad};

/// Seconds per call of `f` over `reps` calls after `warmup`, waiting for the GPU at the end.
fn seconds_per_call(device: &Device, warmup: usize, reps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    device.synchronize().expect("GPU wait");
    let start = Instant::now();
    for _ in 0..reps {
        f();
    }
    device.synchronize().expect("GPU wait");
    start.elapsed().as_secs_f64() / reps as f64
}

fn sgemm(device: &Device, n: usize) -> f64 {
    let a = DynTensor::randn(&[n, n], DType::F32)
        .unwrap()
        .to(device)
        .unwrap();
    let b = DynTensor::randn(&[n, n], DType::F32)
        .unwrap()
        .to(device)
        .unwrap();
    let reps = if n >= 8192 { 5 } else { 20 };
    let s = seconds_per_call(device, 2, reps, || {
        a.matmul(&b).unwrap();
    });
    2.0 * (n as f64).powi(3) / s / 1e9
}

fn mlp_step(device: &Device, batch: usize) -> f64 {
    let (l1, l2, l3) = {
        let _on = device.set_default();
        (
            Linear::<784, 1024>::new().unwrap(),
            Linear::<1024, 1024>::new().unwrap(),
            Linear::<1024, 10>::new().unwrap(),
        )
    };
    let mut params = l1.parameters();
    params.extend(l2.parameters());
    params.extend(l3.parameters());
    let mut adam = Adam::new(params, AdamConfig::default()).unwrap();
    let x = DynTensor::randn(&[batch, 784], DType::F32)
        .unwrap()
        .to(device)
        .unwrap();
    let labels =
        DynTensor::from_vec((0..batch as i64).map(|i| i % 10).collect(), &[batch]).unwrap();
    let s = seconds_per_call(device, 3, 30, || {
        let h = l1.forward_dyn(&x).unwrap().relu().unwrap();
        let h = l2.forward_dyn(&h).unwrap().relu().unwrap();
        let logits = l3.forward_dyn(&h).unwrap();
        let loss = cross_entropy(&logits, &labels, &CrossEntropyOptions::default()).unwrap();
        let mut grads = loss.backward().unwrap();
        let _no_grad = no_grad();
        adam.step(&mut grads).unwrap();
    });
    s * 1e3
}

fn main() -> rumus::Result<()> {
    let device = Device::gpu()?;
    if let Device::Gpu(gpu) = &device {
        eprintln!("adapter: {} ({})", gpu.name(), gpu.backend());
    }
    let sizes: &[usize] = if std::env::args().any(|a| a == "small") {
        &[256]
    } else {
        &[2048, 4096, 8192]
    };
    for &n in sizes {
        println!("sgemm_{n} {:.1} GFLOP/s", sgemm(&device, n));
    }
    println!("mlp_step_b256 {:.3} ms", mlp_step(&device, 256));
    Ok(())
}
