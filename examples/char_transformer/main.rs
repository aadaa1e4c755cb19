//! A GPT-style character model trained on a short bundled story, then sampled.
//!
//! ```text
//! cargo run --release --example char_transformer
//! ```
//!
//! Trains for 600 steps of 16 windows of 64 characters (Adam, lr 3e-3) and prints the loss
//! every 100 steps, then a 300-character sample.

mod model;

use model::{CharTransformer, Vocabulary, generate, loss, sample_batch};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::rng::Generator;

fn main() -> rumus::Result<()> {
    manual_seed(5);
    let vocabulary = Vocabulary::of(model::TEXT)?;
    let data = vocabulary.encode(model::TEXT);
    let mut model = CharTransformer::new()?;
    println!("{model}");
    let mut optimizer = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 3e-3,
            ..AdamConfig::adam()
        },
    )?;
    let mut rng = Generator::new(6);
    let start = std::time::Instant::now();
    let mut recent = Vec::new();
    for step in 1..=600 {
        let (inputs, targets) = sample_batch(&data, 16, model::BLOCK, &mut rng)?;
        let batch_loss = loss(&model, &inputs, &targets)?;
        recent.push(batch_loss.item::<f32>()?);
        optimizer.step(&mut batch_loss.backward()?)?;
        if step % 100 == 0 {
            let mean = recent.iter().sum::<f32>() / recent.len() as f32;
            println!(
                "step {step:>4}  loss={mean:.3}  ({:.1} s)",
                start.elapsed().as_secs_f64()
            );
            recent.clear();
        }
    }
    model.eval();
    println!(
        "\n{}",
        generate(&model, &vocabulary, "The keeper ", 300, 0.8, &mut rng)?
    );
    Ok(())
}
