//! The character transformer example, shortened: its loss must fall well below the loss of
//! guessing uniformly among the story's characters, and sampling must produce text; the same
//! under f16 autocast with loss scaling.

#[path = "../examples/char_transformer/model.rs"]
mod model;

use model::{CharTransformer, Vocabulary, generate, loss, sample_batch};
use rumus::amp::{GradScaler, autocast};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::rng::Generator;

/// Trains for 60 steps (under autocast with a `GradScaler`, or plainly) and checks that the
/// loss fell and that sampling works.
fn learns_the_story(mixed_precision: bool) {
    // Both tests seed and draw from the process-wide generator: one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    manual_seed(5);
    let vocabulary = Vocabulary::of(model::TEXT).unwrap();
    let distinct = vocabulary.len();
    let data = vocabulary.encode(model::TEXT);
    let model = CharTransformer::new().unwrap();
    let mut optimizer = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 3e-3,
            ..AdamConfig::adam()
        },
    )
    .unwrap();
    let mut scaler = GradScaler::new();
    let mut rng = Generator::new(6);
    let mut losses = Vec::new();
    for _ in 0..60 {
        let (inputs, targets) = sample_batch(&data, 8, 32, &mut rng).unwrap();
        let batch_loss = {
            let _autocast = mixed_precision.then(autocast);
            loss(&model, &inputs, &targets).unwrap()
        };
        losses.push(batch_loss.item::<f32>().unwrap() as f64);
        if mixed_precision {
            let mut grads = scaler.scale(&batch_loss).unwrap().backward().unwrap();
            scaler.step(&mut optimizer, &mut grads).unwrap();
            scaler.update();
        } else {
            optimizer.step(&mut batch_loss.backward().unwrap()).unwrap();
        }
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

#[test]
fn character_model_learns_the_story() {
    learns_the_story(false);
}

#[test]
fn character_model_learns_the_story_under_autocast() {
    learns_the_story(true);
}
