//! The `gpt` example's decoder, small: it learns the story's bytes (its loss falls well below
//! uniform guessing among the bytes the story uses), and on a GPU under f16 autocast its
//! first steps follow the same steps on the CPU.

#[path = "../examples/gpt/model.rs"]
#[allow(dead_code)] // GPT-2 small's alias
mod model;

mod common;

use model::{TinyGpt, sample_batch};
use rumus::amp::GradScaler;
use rumus::nn::Module;
use rumus::optim::{Adam, AdamConfig};
use rumus::prelude::*;
use rumus::rng::Generator;

const TEXT: &str = include_str!("../examples/data/lighthouse.txt");

/// The losses of `steps` AdamW steps of a freshly seeded tiny decoder on `device` (under
/// autocast with a scaler when `mixed`).
fn losses(device: &Device, steps: usize, batch: usize, mixed: bool) -> Vec<f64> {
    // Every run seeds and draws from the process-wide generator: one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    manual_seed(11);
    let model = {
        let _on = device.set_default();
        TinyGpt::new(2).unwrap()
    };
    let config = AdamConfig {
        lr: 3e-3,
        weight_decay: 0.1,
        ..AdamConfig::adamw()
    };
    let mut optimizer = Adam::new(model.parameters(), config).unwrap();
    let mut scaler = GradScaler::new();
    let mut rng = Generator::new(12);
    let data: Vec<i64> = TEXT.bytes().map(i64::from).collect();
    (0..steps)
        .map(|_| {
            let (inputs, targets) = sample_batch(&data, (batch, 64), &mut rng, device).unwrap();
            let scaler = mixed.then_some(&mut scaler);
            let loss = model.train_step(&mut optimizer, scaler, (&inputs, &targets));
            f64::from(loss.unwrap().item::<f32>().unwrap())
        })
        .collect()
}

#[test]
fn the_decoder_learns_the_story() {
    let mut distinct: Vec<u8> = TEXT.bytes().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let uniform = (distinct.len() as f64).ln();
    let losses = losses(&Device::Cpu, 120, 16, false);
    let last = losses[110..].iter().sum::<f64>() / 10.0;
    assert!(
        last < uniform - 1.0,
        "loss {last:.3} after 120 steps; uniform guessing among {} bytes gives {uniform:.3}",
        distinct.len()
    );
}

#[test]
fn the_decoder_trains_on_a_gpu_under_autocast_as_on_the_cpu() {
    let _serial = common::gpu::serial();
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    let (cpu, gpu) = (
        losses(&Device::Cpu, 3, 2, true),
        losses(&device, 3, 2, true),
    );
    for (step, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
        assert!(
            (c - g).abs() <= 1e-2 * c.abs(),
            "step {step}: cpu loss {c}, gpu loss {g}"
        );
    }
}
