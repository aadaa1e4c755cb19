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

/// One model and optimizer, trained by every round so both feeding paths see the same
/// warm caches and allocator state.
struct Training {
    model: Mlp,
    optimizer: Adam,
}

impl Training {
    fn new() -> rumus::Result<Self> {
        manual_seed(0);
        let model = Mlp::new()?;
        let optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
        Ok(Training { model, optimizer })
    }

    fn step(&mut self, batch: &Batch) -> rumus::Result<()> {
        let logits = self.model.forward(&batch.input::<(Dyn, D<784>)>()?)?;
        let loss = cross_entropy(
            logits.as_dyn(),
            &batch.target,
            &CrossEntropyOptions::default(),
        )?;
        self.optimizer.step(&mut loss.backward()?)
    }

    /// Mean step time (ms) over one pass through `batches`.
    fn round(&mut self, batches: impl Iterator<Item = rumus::Result<Batch>>) -> rumus::Result<f64> {
        let start = Instant::now();
        let mut steps = 0usize;
        for batch in batches {
            self.step(&batch?)?;
            steps += 1;
        }
        Ok(start.elapsed().as_secs_f64() * 1e3 / steps as f64)
    }
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

const ROUNDS: usize = 15;

fn main() -> rumus::Result<()> {
    let data = std::sync::Arc::new(items()?.map(normalize(&[0.5], &[0.25])?));
    println!("batch workers preloaded_ms loader_ms ratio");
    for batch_size in [64usize, 256] {
        let order = Generator::new(3).permutation(data.len());
        let preloaded = order
            .chunks(batch_size)
            .map(|chunk| {
                let items = chunk
                    .iter()
                    .map(|&i| data.get(i))
                    .collect::<rumus::Result<Vec<_>>>()?;
                Sample::collate(items)
            })
            .collect::<rumus::Result<Vec<Batch>>>()?;
        for workers in [1usize, 2] {
            let mut loader = DataLoader::new(std::sync::Arc::clone(&data), batch_size)?
                .shuffle(3)
                .workers(workers);
            let mut training = Training::new()?;
            // Warm-up of both paths, then alternating rounds so drift hits both alike.
            training.round(preloaded.iter().cloned().map(Ok))?;
            training.round(loader.epoch())?;
            let (mut base, mut fed) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                base.push(training.round(preloaded.iter().cloned().map(Ok))?);
                fed.push(training.round(loader.epoch())?);
            }
            let (base, fed) = (median(base), median(fed));
            println!(
                "{batch_size} {workers} {base:.4} {fed:.4} {:.3}",
                fed / base
            );
        }
    }
    Ok(())
}
