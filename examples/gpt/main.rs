//! Trains a GPT-2-style causal decoder on the bytes of a short bundled story and prints the
//! loss, the tokens trained on per second and (on a GPU) the memory peak.
//!
//! ```text
//! cargo run --release --example gpt                     # a tiny decoder on the CPU
//! cargo run --release --example gpt -- --size gpt2-small --device gpu --autocast
//! ```
//!
//! Options: `--size tiny|gpt2-small|gpt2-small-8k` (2 blocks of width 64 and 64-byte
//! contexts, or GPT-2 small: 12 blocks of width 768, 12 heads, 1,024-token contexts, the
//! vocabulary padded to 50,304, or cut to 8,192 so that it runs on lavapipe), `--device cpu|gpu|cuda`, `--autocast` (f16 products with dynamic loss scaling,
//! `rumus::amp`), `--steps N` (default 200), `--batch N` (default 16; GPT-2's runs use 8).
//! AdamW (lr 3e-4 for GPT-2 small, 3e-3 for the tiny one; weight decay 0.1).
//!
//! The story is 2.6 kB, so GPT-2 small memorises it: the run measures speed, not language.

mod model;

use model::{Gpt, Gpt2Small, Gpt2Small8k, TinyGpt, sample_batch};
use rumus::amp::GradScaler;
use rumus::nn::Module;
use rumus::optim::{Adam, AdamConfig};
use rumus::prelude::*;
use rumus::rng::Generator;

const TEXT: &str = include_str!("../data/lighthouse.txt");

/// Which decoder `--size` names.
#[derive(Clone, Copy)]
enum Size {
    Tiny,
    Gpt2Small,
    Gpt2Small8k,
}

/// The command line.
struct Options {
    size: Size,
    device: Device,
    autocast: bool,
    steps: usize,
    batch: usize,
}

fn options() -> rumus::Result<Options> {
    let mut options = Options {
        size: Size::Tiny,
        device: Device::Cpu,
        autocast: false,
        steps: 200,
        batch: 16,
    };
    let invalid = |message: String| rumus::Error::InvalidArgument { op: "gpt", message };
    let number = |value: Option<String>, flag: &str| {
        value
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| invalid(format!("{flag} takes a positive number")))
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--autocast" => options.autocast = true,
            "--size" => match args.next().as_deref() {
                Some("tiny") => options.size = Size::Tiny,
                Some("gpt2-small") => options.size = Size::Gpt2Small,
                Some("gpt2-small-8k") => options.size = Size::Gpt2Small8k,
                other => {
                    return Err(invalid(format!(
                        "--size takes tiny, gpt2-small or gpt2-small-8k, got {other:?}"
                    )));
                }
            },
            "--device" => match args.next() {
                Some(name) => options.device = Device::named(&name)?,
                None => return Err(invalid("--device takes cpu, gpu, cuda or cuda:N".into())),
            },
            "--steps" => options.steps = number(args.next(), "--steps")?,
            "--batch" => options.batch = number(args.next(), "--batch")?,
            other => {
                return Err(invalid(format!(
                    "unknown argument {other:?}; use --size tiny|gpt2-small|gpt2-small-8k, --device cpu|gpu|cuda, \
                     --autocast, --steps N, --batch N"
                )));
            }
        }
    }
    if options.batch == 0 {
        return Err(invalid("--batch takes a positive number".into()));
    }
    Ok(options)
}

fn main() -> rumus::Result<()> {
    let options = options()?;
    manual_seed(7);
    let device = &options.device;
    match options.size {
        Size::Tiny => train(built_on(device, || TinyGpt::new(2))?, &options, 3e-3),
        Size::Gpt2Small => train(built_on(device, || Gpt2Small::new(12))?, &options, 3e-4),
        Size::Gpt2Small8k => train(built_on(device, || Gpt2Small8k::new(12))?, &options, 3e-4),
    }
}

/// What `build` makes, its tensors created on `device`.
fn built_on<T>(device: &Device, build: impl FnOnce() -> rumus::Result<T>) -> rumus::Result<T> {
    let _on = device.set_default();
    build()
}

/// Trains `model` (already on the options' device) and prints its progress.
fn train<const V: usize, const C: usize, const WIDTH: usize, const H: usize, const FF: usize>(
    model: Gpt<V, C, WIDTH, H, FF>,
    options: &Options,
    lr: f64,
) -> rumus::Result<()> {
    println!(
        "{} with {} parameters on {}",
        model.describe(),
        model
            .parameters()
            .iter()
            .map(DynTensor::numel)
            .sum::<usize>(),
        options.device
    );
    let data: Vec<i64> = TEXT.bytes().map(i64::from).collect();
    let mut optimizer = Adam::new(
        model.parameters(),
        AdamConfig {
            lr,
            weight_decay: 0.1,
            ..AdamConfig::adamw()
        },
    )?;
    let mut scaler = GradScaler::new();
    let mut rng = Generator::new(8);
    let report_every = options.steps.div_ceil(10).max(1);
    let tokens_per_step = options.batch * C;
    let mut recent = Vec::new();
    let mut window = (std::time::Instant::now(), 0);
    for step in 1..=options.steps {
        let (inputs, targets) = sample_batch(&data, (options.batch, C), &mut rng, &options.device)?;
        let scaler = options.autocast.then_some(&mut scaler);
        recent.push(model.train_step(&mut optimizer, scaler, (&inputs, &targets))?);
        if step % report_every == 0 || step == options.steps {
            // Reading the losses waits for the steps: the window covers whole steps.
            let losses = recent.iter().map(|l: &DynTensor| l.item::<f32>());
            let mean = losses.sum::<rumus::Result<f32>>()? / recent.len() as f32;
            let seconds = window.0.elapsed().as_secs_f64();
            let tokens = ((step - window.1) * tokens_per_step) as f64;
            println!(
                "step {step:>5}  loss {mean:.3}  {:.0} tokens/s{}",
                tokens / seconds,
                memory_peak(&options.device)
            );
            recent.clear();
            // The first window includes building pipelines; later ones are steady.
            window = (std::time::Instant::now(), step);
        }
    }
    Ok(())
}

/// `, peak N MiB` of the GPU's buffers, or nothing on the CPU.
fn memory_peak(device: &Device) -> String {
    match device {
        Device::Gpu(gpu) => format!("  peak {} MiB in use", gpu.memory().in_use_peak >> 20),
        _ => String::new(),
    }
}
