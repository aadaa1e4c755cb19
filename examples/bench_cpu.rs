//! CPU workloads timed by `tests/bench/compare.py`, which runs the same workloads in PyTorch
//! in the same session and prints ratios. Prints one `name milliseconds` line per workload
//! (median of repetitions after warm-up). Thread count: `RAYON_NUM_THREADS`.
//!
//! ```text
//! RAYON_NUM_THREADS=1 cargo run --release --example bench_cpu
//! ```

use std::time::Instant;

use rumus::nn::{CrossEntropyOptions, cross_entropy};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;

/// Median wall time of `f` in milliseconds over `reps` runs after `warmup` runs.
fn median_ms(warmup: usize, reps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[reps / 2]
}

#[model(sequential, activation = relu)]
struct Mlp {
    fc1: Linear<784, 256>,
    fc2: Linear<256, 128>,
    fc3: Linear<128, 10>,
}

fn mlp_step(batch: usize) -> rumus::Result<f64> {
    manual_seed(0);
    let model = Mlp::new()?;
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    let x = Tensor::<(Dyn, D<784>)>::randn_with_dims(&[batch, 784])?;
    let labels = DynTensor::from_vec((0..batch as i64).map(|i| i % 10).collect(), &[batch])?;
    Ok(median_ms(10, 50, || {
        let logits = model.forward(&x).expect("forward");
        let loss =
            cross_entropy(logits.as_dyn(), &labels, &CrossEntropyOptions::default()).expect("loss");
        optimizer
            .step(&mut loss.backward().expect("backward"))
            .expect("step");
    }))
}

fn main() -> rumus::Result<()> {
    for n in [256usize, 512, 1024] {
        let a = DynTensor::randn(&[n, n], DType::F32)?;
        let b = DynTensor::randn(&[n, n], DType::F32)?;
        let reps = if n >= 1024 { 10 } else { 30 };
        println!(
            "sgemm_{n} {:.4}",
            median_ms(3, reps, || drop(a.matmul(&b).expect("matmul")))
        );
    }
    for batch in [64, 256] {
        println!("mlp_step_b{batch} {:.4}", mlp_step(batch)?);
    }
    let x = DynTensor::randn(&[16], DType::F32)?;
    let ones = DynTensor::ones(&[16], DType::F32)?;
    let chain = |x: &DynTensor| {
        let mut h = x.clone();
        for _ in 0..1000 {
            h = h.add(&ones).expect("add");
        }
        h
    };
    println!(
        "ops1000_untracked {:.4}",
        median_ms(5, 30, || drop(chain(&x)))
    );
    let tracked = x.clone().requires_grad_()?;
    println!(
        "ops1000_tracked {:.4}",
        median_ms(5, 30, || drop(chain(&tracked)))
    );
    Ok(())
}
