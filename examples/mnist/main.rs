//! A convolutional network on MNIST or Fashion-MNIST, read from IDX files.
//!
//! ```text
//! cargo run --release --example mnist -- --data /usr/share/datasets/fashion-mnist
//! cargo run --release --example mnist -- --data DIR --epochs 3 --limit 10000 --batch 128
//! cargo run --release --example mnist -- --data DIR --device gpu
//! cargo build --release --example mnist --features distributed
//! mpirun -np 2 target/release/examples/mnist --data DIR --distributed
//! ```
//!
//! (OpenMPI's `mpirun` refuses to run as root unless given `--allow-run-as-root`, or
//! `OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1` in the environment.)
//!
//! `DIR` holds the four IDX files (gzipped or not; Debian's `dataset-fashion-mnist` installs
//! Fashion-MNIST under /usr/share/datasets/fashion-mnist). Prints a line per epoch (its
//! `eval_*` numbers measured on the test set) and `test_accuracy=`, the last epoch's
//! `eval_accuracy`, at the end; writes the curves to `mnist_curve.png`. Adam with a cosine
//! learning-rate schedule over 4 epochs by default.
//!
//! With `--distributed` (a build with the `distributed` feature, started by `mpirun`), the
//! global batch stays `--batch` (64 by default) and each of the N processes trains on its
//! own `batch / N` images of it (an error when N does not divide the batch); gradients are
//! averaged across processes, so N processes take the same steps with the same learning
//! rate as one process does, and reach the same model up to rounding. Rank 0 prints and
//! writes the curves. The training metrics are rank 0's slice; the test accuracy is the
//! whole test set.

use rumus::data::{Batch, DataLoader, read_mnist_dir};
use rumus::optim::{Adam, AdamConfig, CosineAnnealingLr, LrScheduler};
use rumus::prelude::*;
use rumus::train::{Accuracy, Run, StepOutput, Trainer, classification};

mod model;
mod ranks;

use model::Cnn;
use ranks::Ranks;

struct Options {
    data: String,
    epochs: usize,
    limit: Option<usize>,
    /// Images per optimizer step, over all processes together.
    batch: usize,
    device: Device,
    distributed: bool,
}

fn options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        data: String::new(),
        epochs: 4,
        limit: None,
        batch: 64,
        device: Device::Cpu,
        distributed: false,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--data" => options.data = value()?,
            "--distributed" => options.distributed = true,
            "--epochs" => {
                options.epochs = value()?.parse().map_err(|e| format!("--epochs: {e}"))?
            }
            "--limit" => {
                options.limit = Some(value()?.parse().map_err(|e| format!("--limit: {e}"))?)
            }
            "--batch" => options.batch = value()?.parse().map_err(|e| format!("--batch: {e}"))?,
            "--device" => options.device = Device::named(&value()?).map_err(|e| e.to_string())?,
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: mnist --data DIR [--epochs N] [--limit N] [--batch N] [--device cpu|gpu|cuda] [--distributed]"
                ));
            }
        }
    }
    if options.data.is_empty() {
        return Err(
            "usage: mnist --data DIR [--epochs N] [--limit N] [--batch N] [--device cpu|gpu|cuda] [--distributed]"
                .into(),
        );
    }
    Ok(options)
}

/// The shape of a batch of 28x28 grey images.
type Images = (Dyn, D<1>, D<28>, D<28>);

/// The model's loss and its report of a batch; the images enter typed code as `[N, 1, 28, 28]`
/// and move to the model's device (the loader fills host memory).
fn measure(model: &Cnn, batch: &Batch, device: &Device) -> rumus::Result<(DynTensor, StepOutput)> {
    let images = batch.input::<Images>()?.to(device)?;
    classification(model.forward(&images)?.as_dyn(), &batch.target)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = options()?;
    let ranks = Ranks::new(options.distributed)?;
    let rank_batch = ranks.share_of_batch(options.batch)?;
    let (mut train, test) = read_mnist_dir(&options.data)?;
    if let Some(limit) = options.limit {
        train.labels.truncate(limit);
    }
    if ranks.is_main() {
        println!(
            "{} training and {} test images from {}, {} process(es), batches of {} ({} per process)",
            train.len(),
            test.len(),
            options.data,
            ranks.world_size(),
            options.batch,
            rank_batch
        );
    }
    manual_seed(1);
    let mut model = Cnn::new()?;
    model.to_device(options.device.clone())?;
    let ranks = ranks.wrap(&model)?;
    if ranks.is_main() {
        println!("{model}\non {}", options.device);
    }
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    // The learning rate follows a cosine from 1e-3 to 1e-5 over the run, stepped per epoch.
    let schedule = CosineAnnealingLr {
        t_max: options.epochs as u64,
        eta_min: 1e-5,
    };
    let mut scheduler = LrScheduler::new(&mut optimizer, schedule);
    // Batches of `--batch` [1, 28, 28] images, shuffled per epoch, loaded by two worker
    // threads. With several processes, each loads its own slice of every batch.
    let mut loader = ranks.shard(DataLoader::new(train, rank_batch)?.shuffle(2).workers(2))?;
    let mut test_loader = DataLoader::new(test, 1000)?;
    let trainer = if ranks.is_main() {
        Trainer::new(options.epochs).curve("mnist_curve.png")
    } else {
        Trainer::new(options.epochs).quiet()
    };
    let mut trainer = trainer.metric(Accuracy::new());
    // The trainer steps the scheduler after each epoch.
    let history = trainer.fit(
        Run::new(&model, &mut optimizer).scheduler(&mut scheduler),
        |_| Ok(loader.epoch()),
        |batch: Batch, optimizer| {
            let (loss, output) = measure(&model, &batch, &options.device)?;
            optimizer.step(&mut ranks.backward(&loss)?)?;
            Ok(output)
        },
        || {
            let (model, device) = (&model, &options.device);
            Ok(test_loader
                .epoch()
                .map(move |batch| Ok(measure(model, &batch?, device)?.1)))
        },
        |_| Ok(()),
    )?;
    if ranks.is_main() {
        println!(
            "test_accuracy={:.4}",
            history.last().map_or(0.0, |s| s.eval.accuracy())
        );
    }
    Ok(())
}
