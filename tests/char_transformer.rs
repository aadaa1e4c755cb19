//! The character transformer example, shortened: its loss must fall well below the loss of
//! guessing uniformly among the story's characters, and sampling must produce text.

#[path = "../examples/char_transformer/model.rs"]
mod model;

use model::{CharTransformer, Vocabulary, generate, loss, sample_batch};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::rng::Generator;

#[test]
fn character_model_learns_the_story() {
    manual_seed(5);
    let vocabulary = Vocabulary::of(model::TEXT).unwrap();
    let distinct = vocabulary.len();
    let data = vocabulary.encode(model::TEXT);
    let mut model = CharTransformer::new().unwrap();
    let mut optimizer = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 3e-3,
            ..AdamConfig::adam()
        },
    )
    .unwrap();
    let mut rng = Generator::new(6);
    let mut losses = Vec::new();
    for _ in 0..60 {
        let (inputs, targets) = sample_batch(&data, 8, 32, &mut rng).unwrap();
        let batch_loss = loss(&model, &inputs, &targets).unwrap();
        losses.push(batch_loss.item::<f32>().unwrap() as f64);
        optimizer.step(&mut batch_loss.backward().unwrap()).unwrap();
    }
    let uniform = (distinct as f64).ln();
    let last: f64 = losses[50..].iter().sum::<f64>() / 10.0;
    assert!(
        last < uniform - 1.0,
        "loss {last:.3} after 60 steps; uniform guessing gives {uniform:.3}"
    );
    model.eval();
    let sample = generate(&model, &vocabulary, "The ", 40, 0.8, &mut rng).unwrap();
    assert_eq!(sample.chars().count(), 44);
}
