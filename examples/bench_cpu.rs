//! CPU workloads timed by `tests/bench/compare.py`, which runs the same workloads in PyTorch
//! in the same run and prints ratios. Prints one `name milliseconds` line per workload
//! (median of repetitions after warm-up). Thread count: `RAYON_NUM_THREADS`.
//!
//! ```text
//! RAYON_NUM_THREADS=1 cargo run --release --example bench_cpu
//! cargo run --release --example bench_cpu -- rss     # peak RSS (MB) of the MLP loop alone
//! cargo run --release --example bench_cpu -- sgemm   # the matrix products only
//! cargo run --release --example bench_cpu -- linear  # ... and the linear layers' forward
//! cargo run --release --example bench_cpu -- ops     # the per-op overhead only
//! cargo run --release --example bench_cpu -- ops_tracked   # ... tracked only (or _untracked)
//! ```

use rumus::nn::{
    CrossEntropyOptions, Module, Reduction, TransformerEncoderBlock, cross_entropy, mse_loss,
};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;

#[path = "common/median.rs"]
mod median;
use median::median_ms;

#[path = "common/mlp.rs"]
mod mlp;
use mlp::Mlp;

/// conv32-pool-conv64-pool-fc128-fc10 on 28x28 images (the MNIST example's network).
#[path = "mnist/model.rs"]
mod mnist_model;
use mnist_model::Cnn;

/// Two pre-norm encoder blocks, d = 128, 4 heads, feed-forward 512, dropout 0.1.
#[model]
struct Encoder {
    block1: TransformerEncoderBlock<128, 4, 512>,
    block2: TransformerEncoderBlock<128, 4, 512>,
}

/// One training step: forward, loss, backward, Adam.
fn train_step(optimizer: &mut Adam, loss: rumus::Result<DynTensor>) {
    let loss = loss.expect("forward and loss");
    optimizer
        .step(&mut loss.backward().expect("backward"))
        .expect("step");
}

fn labels(batch: usize) -> rumus::Result<DynTensor> {
    Ok(DynTensor::from_vec(
        (0..batch as i64).map(|i| i % 10).collect(),
        &[batch],
    )?)
}

fn mlp_step(batch: usize) -> rumus::Result<f64> {
    manual_seed(0);
    let model = Mlp::new()?;
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    let x = Tensor::<(Dyn, D<784>)>::randn_with_dims(&[batch, 784])?;
    let y = labels(batch)?;
    let options = CrossEntropyOptions::default();
    Ok(median_ms(10, 50, || {
        let loss = model
            .forward(&x)
            .and_then(|logits| cross_entropy(logits.as_dyn(), &y, &options));
        train_step(&mut optimizer, loss);
    }))
}

fn cnn_step(batch: usize) -> rumus::Result<f64> {
    manual_seed(0);
    let model = Cnn::new()?;
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    let x = Tensor::<(Dyn, D<1>, D<28>, D<28>)>::randn_with_dims(&[batch, 1, 28, 28])?;
    let y = labels(batch)?;
    let options = CrossEntropyOptions::default();
    Ok(median_ms(3, 20, || {
        let loss = model
            .forward(&x)
            .and_then(|logits| cross_entropy(logits.as_dyn(), &y, &options));
        train_step(&mut optimizer, loss);
    }))
}

/// Forward and backward (input, weight and bias gradients) of one 3x3 convolution,
/// 32 -> 64 channels, padding 1, on a batch of 64 28x28 maps.
fn conv_forward_backward() -> rumus::Result<f64> {
    manual_seed(0);
    let x = DynTensor::randn(&[64, 32, 28, 28], DType::F32)?.requires_grad_()?;
    let w = DynTensor::randn(&[64, 32, 3, 3], DType::F32)?.requires_grad_()?;
    let b = DynTensor::randn(&[64], DType::F32)?.requires_grad_()?;
    Ok(median_ms(3, 20, || {
        let out = x
            .conv2d(&w, Some(&b), (1, 1), (1, 1), (1, 1), 1)
            .expect("conv2d");
        drop(out.sum_all().expect("sum").backward().expect("backward"));
    }))
}

/// GFLOP/s of the direct convolution's three kernels alone (no autograd, no copies of the
/// operands): the benchmark convolution, `[64, 32, 28, 28]` with a `[64, 32, 3, 3]` weight.
fn conv_kernel_rates() -> rumus::Result<()> {
    use rumus::backend::cpu::direct_conv::{self as kernel, Conv2dShape};
    use rumus::backend::cpu::simd::Isa;
    let Some(isa) = Isa::detect() else {
        println!("no AVX2 or AVX-512: the direct kernels do not run on this CPU");
        return Ok(());
    };
    let shape = Conv2dShape {
        batch: 64,
        in_channels: 32,
        input: [28, 28],
        out_channels: 64,
        kernel: [3, 3],
        padding: [1, 1],
    };
    manual_seed(0);
    let values = |dims: &[usize]| DynTensor::randn(dims, DType::F32)?.to_vec::<f32>();
    let (x, w, dy) = (
        values(&[64, 32, 28, 28])?,
        values(&[64, 32, 3, 3])?,
        values(&[64, 64, 28, 28])?,
    );
    let flops = 2.0 * 64.0 * 64.0 * 288.0 * 784.0;
    let rate = |ms: f64| flops / (ms * 1e-3) / 1e9;
    let forward = median_ms(2, 15, || drop(kernel::forward(isa, &shape, &x, &w, None)));
    let input = median_ms(2, 15, || drop(kernel::input_grad(isa, &shape, &dy, &w)));
    let weight = median_ms(2, 15, || drop(kernel::weight_grad_of(isa, &shape, &x, &dy)));
    println!("isa {isa:?}");
    println!("direct_conv_forward_gflops {:.1}", rate(forward));
    println!("direct_conv_input_grad_gflops {:.1}", rate(input));
    println!("direct_conv_weight_grad_gflops {:.1}", rate(weight));
    Ok(())
}

fn transformer_step() -> rumus::Result<f64> {
    manual_seed(0);
    let model = Encoder::new()?;
    model.train();
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    let x = DynTensor::randn(&[16, 64, 128], DType::F32)?;
    let target = DynTensor::randn(&[16, 64, 128], DType::F32)?;
    Ok(median_ms(3, 20, || {
        let loss = model
            .block1
            .forward_dyn(&x, None, false)
            .and_then(|h| model.block2.forward_dyn(&h, None, false))
            .and_then(|out| mse_loss(&out, &target, Reduction::Mean));
        train_step(&mut optimizer, loss);
    }))
}

/// Peak resident memory of this process in MB (`VmHWM` in /proc/self/status).
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// 200 MLP steps at batch 64 and nothing else, so the peak RSS is the training loop's.
fn mlp_loop_rss() -> rumus::Result<()> {
    manual_seed(0);
    let model = Mlp::new()?;
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    let x = Tensor::<(Dyn, D<784>)>::randn_with_dims(&[64, 784])?;
    let y = labels(64)?;
    for _ in 0..200 {
        let loss = model
            .forward(&x)
            .and_then(|logits| cross_entropy(logits.as_dyn(), &y, &CrossEntropyOptions::default()));
        train_step(&mut optimizer, loss);
    }
    println!(
        "mlp_loop_peak_rss_mb {:.1}",
        peak_rss_mb().unwrap_or(f64::NAN)
    );
    Ok(())
}

fn main() -> rumus::Result<()> {
    let only = std::env::args().nth(1);
    if only.as_deref() == Some("rss") {
        return mlp_loop_rss();
    }
    if let Some(mode) = only.as_deref().and_then(|m| m.strip_prefix("ops")) {
        return per_op_overhead(mode);
    }
    // `conv`, `mlp` (batch 256), `mlp64`, `cnn`, `transformer`, `pool`: one workload alone (for profiling);
    // `sgemm` the products alone, `linear` the products and the linear layers;
    // `conv_kernels`: the direct convolution kernels' rates.
    match only.as_deref() {
        Some("conv") => {
            println!("conv2d_fwd_bwd {:.4}", conv_forward_backward()?);
            return Ok(());
        }
        Some("mlp") => {
            println!("mlp_step_b256 {:.4}", mlp_step(256)?);
            return Ok(());
        }
        Some("mlp64") => {
            println!("mlp_step_b64 {:.4}", mlp_step(64)?);
            return Ok(());
        }
        Some("cnn") => {
            println!("cnn_step_b64 {:.4}", cnn_step(64)?);
            return Ok(());
        }
        Some("transformer") => {
            println!("transformer_step {:.4}", transformer_step()?);
            return Ok(());
        }
        Some("pool") => {
            let x = DynTensor::randn(&[64, 32, 26, 26], DType::F32)?;
            let pool = || drop(x.max_pool2d((2, 2), (2, 2), (0, 0)).expect("max_pool2d"));
            println!("max_pool2d_64x32x26x26 {:.4}", median_ms(3, 30, pool));
            return Ok(());
        }
        Some("conv_kernels") => return conv_kernel_rates(),
        _ => {}
    }
    for n in [256usize, 512, 1024, 2048] {
        let a = DynTensor::randn(&[n, n], DType::F32)?;
        let b = DynTensor::randn(&[n, n], DType::F32)?;
        let reps = match n {
            2048 => 5,
            1024 => 10,
            _ => 30,
        };
        println!(
            "sgemm_{n} {:.4}",
            median_ms(2, reps, || drop(a.matmul(&b).expect("matmul")))
        );
    }
    if only.as_deref() == Some("sgemm") {
        return Ok(());
    }
    linear_forward()?;
    if only.as_deref() == Some("linear") {
        return Ok(());
    }
    println!("conv2d_fwd_bwd {:.4}", conv_forward_backward()?);
    for batch in [64, 256] {
        println!("mlp_step_b{batch} {:.4}", mlp_step(batch)?);
    }
    println!("cnn_step_b64 {:.4}", cnn_step(64)?);
    println!("transformer_step {:.4}", transformer_step()?);
    per_op_overhead("")
}

/// A linear layer's forward at batch 16 (`x W^T + b` with `W` stored `[out, in]`, as every
/// `Linear` holds it), 512 -> 1000 and 4096 -> 4096, untracked.
fn linear_forward() -> rumus::Result<()> {
    for (input, output) in [(512usize, 1000usize), (4096, 4096)] {
        let x = DynTensor::randn(&[16, input], DType::F32)?;
        let weight = DynTensor::randn(&[output, input], DType::F32)?;
        let bias = DynTensor::randn(&[output], DType::F32)?;
        let reps = if input == 4096 { 10 } else { 50 };
        let forward = || drop(x.linear(&weight, Some(&bias)).expect("linear"));
        println!(
            "linear_b16_{input}x{output} {:.4}",
            median_ms(3, reps, forward)
        );
    }
    Ok(())
}

/// 1,000 chained additions of 16-element tensors, untracked and tracked: milliseconds per
/// chain, so microseconds per op. `mode` `_untracked` or `_tracked` runs one of the two
/// alone (for `perf` or callgrind); anything else runs both.
fn per_op_overhead(mode: &str) -> rumus::Result<()> {
    let x = DynTensor::randn(&[16], DType::F32)?;
    let ones = DynTensor::ones(&[16], DType::F32)?;
    let chain = |x: &DynTensor| {
        let mut h = x.clone();
        for _ in 0..1000 {
            h = h.add(&ones).expect("add");
        }
        h
    };
    if mode != "_tracked" {
        println!(
            "ops1000_untracked {:.4}",
            median_ms(5, 30, || drop(chain(&x)))
        );
    }
    if mode != "_untracked" {
        let tracked = x.clone().requires_grad_()?;
        println!(
            "ops1000_tracked {:.4}",
            median_ms(5, 30, || drop(chain(&tracked)))
        );
    }
    Ok(())
}
