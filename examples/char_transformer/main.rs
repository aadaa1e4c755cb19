//! A GPT-style character model trained on a short bundled story, then sampled.
//!
//! ```text
//! cargo run --release --example char_transformer
//! cargo run --release --example char_transformer -- --device gpu --autocast
//! ```
//!
//! Trains for 600 steps (`--steps N`) of 16 windows of 64 characters (Adam, lr 3e-3) and
//! prints the loss every 100 steps and the characters trained on per second, then a
//! 300-character sample. `--device gpu` trains on the GPU; `--autocast` runs the forward
//! pass under f16 autocast with dynamic loss scaling (`rumus::amp`).

mod model;

use model::{CharTransformer, Vocabulary, generate, loss, sample_batch};
use rumus::amp::{GradScaler, autocast};
use rumus::optim::{Adam, AdamConfig};
use rumus::prelude::*;
use rumus::rng::Generator;

/// The command line: `--device cpu|gpu|cuda`, `--autocast`, `--steps N`.
struct Options {
    device: Device,
    autocast: bool,
    steps: usize,
}

fn options() -> rumus::Result<Options> {
    let mut options = Options {
        device: Device::Cpu,
        autocast: false,
        steps: 600,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let invalid = |message: String| rumus::Error::InvalidArgument {
            op: "char_transformer",
            message,
        };
        match arg.as_str() {
            "--autocast" => options.autocast = true,
            "--device" => match args.next() {
                Some(name) => options.device = Device::named(&name)?,
                None => return Err(invalid("--device takes cpu, gpu, cuda or cuda:N".into())),
            },
            "--steps" => {
                options.steps = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| invalid("--steps takes a number of steps".into()))?;
            }
            other => {
                return Err(invalid(format!(
                    "unknown argument {other:?}; use --device cpu|gpu|cuda, --autocast, --steps N"
                )));
            }
        }
    }
    Ok(options)
}

fn main() -> rumus::Result<()> {
    let options = options()?;
    manual_seed(5);
    let vocabulary = Vocabulary::of(model::TEXT)?;
    let data = vocabulary.encode(model::TEXT);
    let mut model = CharTransformer::new()?;
    model.to_device(options.device.clone())?;
    println!("{model}");
    let mut optimizer = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 3e-3,
            ..AdamConfig::adam()
        },
    )?;
    let mut scaler = GradScaler::new();
    let mut rng = Generator::new(6);
    let start = std::time::Instant::now();
    let mut recent = Vec::new();
    for step in 1..=options.steps {
        let (inputs, targets) = sample_batch(&data, 16, model::BLOCK, &mut rng)?;
        let (inputs, targets) = (inputs.to(&options.device)?, targets.to(&options.device)?);
        let batch_loss = {
            let _autocast = options.autocast.then(autocast);
            loss(&model, &inputs, &targets)?
        };
        // Without autocast the scale stays out of the way: a plain step.
        let mut grads = if options.autocast {
            scaler.scale(&batch_loss)?.backward()?
        } else {
            batch_loss.backward()?
        };
        if options.autocast {
            scaler.step(&mut optimizer, &mut grads)?;
            scaler.update();
        } else {
            rumus::optim::Optimizer::step(&mut optimizer, &mut grads)?;
        }
        recent.push(batch_loss.item::<f32>()?);
        if step % 100 == 0 || step == options.steps {
            let mean = recent.iter().sum::<f32>() / recent.len() as f32;
            let seconds = start.elapsed().as_secs_f64();
            let characters = (step * 16 * model::BLOCK) as f64;
            println!(
                "step {step:>4}  loss={mean:.3}  ({seconds:.1} s, {:.0} characters/s)",
                characters / seconds
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
