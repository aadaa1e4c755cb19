//! Does the [`DataLoader`] keep a training loop fed? Times the MLP train step of the CPU
//! benchmark (784-256-128-10, cross-entropy, Adam) on batches collated beforehand, and the
//! same loop drawing its batches from a shuffling loader with worker threads that normalize
//! and collate MNIST-sized items. Prints the median step time of each and their ratio.
//!
//! ```text
//! RAYON_NUM_THREADS=2 cargo run --release --example bench_loader
//! ```

use std::time::Instant;

use rumus::data::transform::normalize;
use rumus::data::{Batch, Collate, DataLoader, Dataset, Features, InMemory, Sample};
use rumus::nn::{CrossEntropyOptions, cross_entropy};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::rng::Generator;

#[model(sequential, activation = relu)]
struct Mlp {
    fc1: Linear<784, 256>,
    fc2: Linear<256, 128>,
    fc3: Linear<128, 10>,
}

/// 6,400 random 784-pixel items with labels, like a slice of MNIST.
fn items() -> rumus::Result<InMemory<Sample>> {
    let mut rng = Generator::new(1);
    let samples = (0..6400)
        .map(|i| {
            let pixels = (0..784).map(|_| rng.next_f64() as f32).collect();
            Ok(Sample::classified(Features::new(pixels, &[784])?, i % 10))
        })
        .collect::<rumus::Result<Vec<_>>>()?;
    Ok(InMemory::new(samples))
}

/// Median of per-step times (ms) over `rounds` passes through `batches`.
fn time_steps(
    rounds: usize,
    mut pass: impl FnMut(&mut dyn FnMut(rumus::Result<Batch>) -> rumus::Result<()>),
) -> rumus::Result<f64> {
    manual_seed(0);
    let model = Mlp::new()?;
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    let mut step = |batch: rumus::Result<Batch>| -> rumus::Result<()> {
        let batch = batch?;
        let logits = model.forward(&batch.input::<(Dyn, D<784>)>()?)?;
        let loss = cross_entropy(
            logits.as_dyn(),
            &batch.target,
            &CrossEntropyOptions::default(),
        )?;
        optimizer.step(&mut loss.backward()?)
    };
    let mut times = Vec::new();
    for round in 0..rounds + 1 {
        let mut steps = 0usize;
        let start = Instant::now();
        pass(&mut |batch| {
            steps += 1;
            step(batch)
        });
        // The first pass is the warm-up.
        if round > 0 {
            times.push(start.elapsed().as_secs_f64() * 1e3 / steps as f64);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn main() -> rumus::Result<()> {
    let data = std::sync::Arc::new(items()?.map(normalize(&[0.5], &[0.25])?));
    println!("batch workers preloaded_ms loader_ms ratio");
    for batch_size in [64usize, 256] {
        let mut preloaded = Vec::new();
        let order = Generator::new(3).permutation(data.len());
        for chunk in order.chunks(batch_size) {
            let items = chunk
                .iter()
                .map(|&i| data.get(i))
                .collect::<rumus::Result<Vec<_>>>()?;
            preloaded.push(Sample::collate(items)?);
        }
        let base = time_steps(5, |step| {
            for batch in &preloaded {
                step(Ok(batch.clone())).expect("step");
            }
        })?;
        for workers in [1usize, 2] {
            let mut loader = DataLoader::new(std::sync::Arc::clone(&data), batch_size)?
                .shuffle(3)
                .workers(workers);
            let fed = time_steps(5, |step| {
                for batch in loader.epoch() {
                    step(batch).expect("step");
                }
            })?;
            println!(
                "{batch_size} {workers} {base:.4} {fed:.4} {:.3}",
                fed / base
            );
        }
    }
    Ok(())
}
